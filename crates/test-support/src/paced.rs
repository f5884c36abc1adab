//! A [`ModelProvider`] that streams prepared answers at a steady pace, for benchmarks: a
//! responder picks each request's text pieces and the time between them, and the stream
//! sends piece `i` at `start + pace × i` (a late piece does not delay the ones after it).
//!
//! Used by the runtime-service benchmark (`trellis-core`'s `examples/service_bench`) and the
//! server benchmark (`trellis-server`'s `examples/serve_bench`).

use std::collections::VecDeque;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use serde_json::json;
use tokio_util::sync::CancellationToken;
use trellis_llm::tokens::{TokenCount, estimate_request, estimate_text};
use trellis_llm::{
    ChatRequest, ChatStream, Error, FinishReason, ModelProvider, ProviderInfo, ProviderKind,
    StreamEvent, Usage,
};

/// One answer: its text, in pieces (each one text delta), and the time between pieces
/// (zero: all at once).
#[derive(Clone, Debug)]
pub struct Reply {
    /// The text deltas, in order; their concatenation is the answer.
    pub pieces: Vec<String>,
    /// Time between two pieces, from the start of the call.
    pub pace: Duration,
}

/// Picks the reply to a request.
pub type Responder = Arc<dyn Fn(&ChatRequest) -> Reply + Send + Sync>;

/// Called when a paced reply (non-zero pace) sends its `Finish`.
pub type OnFinish = Arc<dyn Fn() + Send + Sync>;

/// The paced provider.
pub struct PacedModel {
    info: ProviderInfo,
    responder: Responder,
    deltas: Arc<AtomicU64>,
    on_finish: Option<OnFinish>,
}

impl PacedModel {
    /// A provider named `model` (profile `local`) answering with `responder`.
    pub fn new(
        model: &str,
        responder: impl Fn(&ChatRequest) -> Reply + Send + Sync + 'static,
    ) -> Self {
        Self {
            info: ProviderInfo {
                profile: "local".into(),
                kind: ProviderKind::Scripted,
                model: model.into(),
                native_structured_output: false,
                context_window: None,
            },
            responder: Arc::new(responder),
            deltas: Arc::default(),
            on_finish: None,
        }
    }

    /// Calls `f` whenever a paced reply ends.
    #[must_use]
    pub fn on_paced_finish(mut self, f: impl Fn() + Send + Sync + 'static) -> Self {
        self.on_finish = Some(Arc::new(f));
        self
    }

    /// The count of text deltas sent so far (all calls), shared with the provider.
    pub fn deltas(&self) -> Arc<AtomicU64> {
        self.deltas.clone()
    }
}

/// Whether `r` asks for retrieval queries (structured output with a `queries` property).
pub fn is_queries(r: &ChatRequest) -> bool {
    r.response_format
        .as_ref()
        .is_some_and(|f| f.schema["properties"].get("queries").is_some())
}

/// An agent's final report (`{"failure":false,"output":…,"files_changed":[],"findings":[]}`)
/// in `n` pieces, its output text padded so that every piece has at least a dozen
/// characters.
pub fn report_pieces(n: usize) -> Vec<String> {
    let n = n.max(1);
    let sentence = "Stock lives in memory (docs/adr/0001); reserve and commit keep it consistent. ";
    let mut output = String::new();
    while output.len() < n * 16 {
        output.push_str(sentence);
    }
    let text = json!({
        "failure": false,
        "output": output.trim_end(),
        "files_changed": [],
        "findings": [],
    })
    .to_string();
    split(&text, n)
}

/// The retrieval queries answer (`{"queries":[…]}`) in `n` pieces (`0`: one piece per word).
pub fn query_pieces(n: usize) -> Vec<String> {
    let text = json!({ "queries": ["Inventory commit stock", "reserve release"] }).to_string();
    if n == 0 {
        return text.split_inclusive(' ').map(str::to_owned).collect();
    }
    split(&text, n)
}

/// `text` (ASCII) cut into `n` pieces of nearly equal length.
fn split(text: &str, n: usize) -> Vec<String> {
    let n = n.clamp(1, text.len().max(1));
    let len = text.len();
    (0..n)
        .map(|i| text[i * len / n..(i + 1) * len / n].to_owned())
        .collect()
}

/// One call's events still to be sent.
struct Call {
    events: VecDeque<StreamEvent>,
    pace: Duration,
    start: Option<Instant>,
    sent: u32,
    cancel: CancellationToken,
    deltas: Arc<AtomicU64>,
    on_finish: Option<OnFinish>,
}

impl ModelProvider for PacedModel {
    fn info(&self) -> &ProviderInfo {
        &self.info
    }

    fn count_tokens(&self, request: &ChatRequest) -> trellis_llm::Result<TokenCount> {
        Ok(estimate_request(request))
    }

    fn stream(&self, request: ChatRequest, cancel: CancellationToken) -> ChatStream {
        let Reply { pieces, pace } = (self.responder)(&request);
        let usage = Usage {
            prompt_tokens: estimate_request(&request).tokens,
            completion_tokens: estimate_text(&pieces.concat()),
            cached_prompt_tokens: 0,
        };
        let mut events: VecDeque<StreamEvent> = pieces
            .into_iter()
            .map(|text| StreamEvent::TextDelta { text })
            .collect();
        events.push_back(StreamEvent::Usage { usage });
        events.push_back(StreamEvent::Finish {
            reason: FinishReason::Stop,
        });
        let call = Call {
            events,
            pace,
            start: None,
            sent: 0,
            cancel,
            deltas: self.deltas.clone(),
            on_finish: if pace.is_zero() {
                None
            } else {
                self.on_finish.clone()
            },
        };
        Box::pin(futures::stream::unfold(call, |mut c| async move {
            let event = c.events.pop_front()?;
            let start = *c.start.get_or_insert_with(Instant::now);
            if let StreamEvent::TextDelta { .. } = &event {
                if !c.pace.is_zero() {
                    // A steady rate from the start of the call: a late delta does not delay
                    // the ones after it.
                    c.sent += 1;
                    let due = start + c.pace * c.sent;
                    let cancelled = tokio::select! {
                        () = tokio::time::sleep_until(due.into()) => false,
                        () = c.cancel.cancelled() => true,
                    };
                    if cancelled {
                        c.events.clear();
                        return Some((Err(Error::Cancelled), c));
                    }
                }
                c.deltas.fetch_add(1, Ordering::Relaxed);
            }
            if let (StreamEvent::Finish { .. }, Some(f)) = (&event, &c.on_finish) {
                f();
            }
            Some((Ok(event), c))
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pieces_concatenate_to_the_answer() {
        for n in [1, 2, 7, 500] {
            let p = report_pieces(n);
            assert_eq!(p.len(), n);
            let v: serde_json::Value = serde_json::from_str(&p.concat()).unwrap();
            assert_eq!(v["failure"], false);
        }
        for n in [0, 1, 2, 3] {
            let v: serde_json::Value = serde_json::from_str(&query_pieces(n).concat()).unwrap();
            assert_eq!(v["queries"][1], "reserve release");
        }
        assert_eq!(query_pieces(2).len(), 2);
    }
}
