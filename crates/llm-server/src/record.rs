//! One record per request, for the person watching the server: what was asked, how it
//! ended, the tokens and the time (queue wait included).

use std::fmt;
use std::time::{Duration, Instant};

use axum::extract::{Request, State};
use axum::middleware::Next;
use axum::response::Response;
use trellis_llm::Usage;

use crate::AppState;

/// How a request ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// Answered; the finish reason of a completion (`stop`, `tool_calls`, `length`), else
    /// empty.
    Done(String),
    /// The client went away (or the server stopped) before the answer was complete; the
    /// generation was cancelled.
    Cancelled,
    /// Refused or failed, with why (an HTTP error, or an error event in a stream).
    Failed(String),
}

/// What a request was and how it went.
#[derive(Clone, Debug, PartialEq)]
pub struct RequestRecord {
    /// `POST`, `GET`…
    pub method: String,
    /// The path.
    pub path: String,
    /// The HTTP status sent (a streamed answer's is 200 even when it ends in an error event).
    pub status: u16,
    /// The model id, for completions.
    pub model: Option<String>,
    /// Whether the answer was streamed.
    pub stream: bool,
    /// Token usage, when the model ran.
    pub usage: Option<Usage>,
    /// Time spent waiting for the model.
    pub queued: Duration,
    /// Time from the request to the end of the answer.
    pub elapsed: Duration,
    /// How it ended.
    pub outcome: Outcome,
}

impl fmt::Display for RequestRecord {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {} {}", self.method, self.path, self.status)?;
        if let Some(model) = &self.model {
            write!(f, " {model}")?;
            if self.stream {
                f.write_str(" stream")?;
            }
        }
        if let Some(u) = &self.usage {
            write!(
                f,
                " · {} prompt + {} generated tokens",
                u.prompt_tokens, u.completion_tokens
            )?;
        }
        write!(f, " · {:.2} s", self.elapsed.as_secs_f64())?;
        if self.queued >= Duration::from_millis(10) {
            write!(f, " (queued {:.2} s)", self.queued.as_secs_f64())?;
        }
        match &self.outcome {
            Outcome::Done(reason) if reason.is_empty() => Ok(()),
            Outcome::Done(reason) => write!(f, " · {reason}"),
            Outcome::Cancelled => f.write_str(" · cancelled: the client went away"),
            Outcome::Failed(why) => write!(f, " · {why}"),
        }
    }
}

/// What the completions handler knows of a request, attached to its response for
/// [`log_requests`]. A streamed answer reports itself when its stream ends (`deferred`).
#[derive(Clone, Debug)]
pub(crate) struct Detail {
    pub(crate) model: String,
    pub(crate) stream: bool,
    pub(crate) usage: Option<Usage>,
    pub(crate) queued: Duration,
    pub(crate) outcome: Option<Outcome>,
    pub(crate) deferred: bool,
}

/// Reports every request that is over when its response is sent: the refused ones, the
/// lists, whole completions.
pub(crate) async fn log_requests(
    State(state): State<AppState>,
    req: Request,
    next: Next,
) -> Response {
    let started = Instant::now();
    let method = req.method().to_string();
    let path = req.uri().path().to_string();
    let mut response = next.run(req).await;
    let detail = response.extensions_mut().remove::<Detail>();
    if detail.as_ref().is_some_and(|d| d.deferred) {
        return response;
    }
    let status = response.status();
    let failed = || Outcome::Failed(status.canonical_reason().unwrap_or("error").to_lowercase());
    let record = match detail {
        Some(d) => RequestRecord {
            method,
            path,
            status: status.as_u16(),
            model: Some(d.model),
            stream: d.stream,
            usage: d.usage,
            queued: d.queued,
            elapsed: started.elapsed(),
            outcome: d.outcome.unwrap_or_else(failed),
        },
        None => RequestRecord {
            method,
            path,
            status: status.as_u16(),
            model: None,
            stream: false,
            usage: None,
            queued: Duration::ZERO,
            elapsed: started.elapsed(),
            outcome: if status.is_success() {
                Outcome::Done(String::new())
            } else {
                failed()
            },
        },
    };
    state.report(&record);
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_record_reads_as_one_line() {
        let r = RequestRecord {
            method: "POST".into(),
            path: "/v1/chat/completions".into(),
            status: 200,
            model: Some("local".into()),
            stream: true,
            usage: Some(Usage {
                prompt_tokens: 812,
                completion_tokens: 64,
                cached_prompt_tokens: 0,
            }),
            queued: Duration::from_millis(1500),
            elapsed: Duration::from_millis(4210),
            outcome: Outcome::Done("stop".into()),
        };
        assert_eq!(
            r.to_string(),
            "POST /v1/chat/completions 200 local stream · 812 prompt + 64 generated tokens · \
             4.21 s (queued 1.50 s) · stop"
        );
    }
}
