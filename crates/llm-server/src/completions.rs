//! `POST /v1/chat/completions`: check the request, wait for the model in the queue, then
//! answer whole or as a stream. A client that hangs up cancels its generation: for a whole
//! answer hyper drops the handler (its drop guard cancels the token), for a stream the
//! producer sees the body's receiver gone.

use std::time::{Duration, Instant};

use axum::body::{Body, Bytes};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Json, Response};
use futures::StreamExt;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;
use trellis_llm::{Completion, Usage};

use crate::convert::{self, Call};
use crate::encode::{self, Encoder, Head};
use crate::queue::Ticket;
use crate::record::{Detail, Outcome, RequestRecord};
use crate::{ApiError, AppState};

const PATH: &str = "/v1/chat/completions";

pub(crate) async fn chat_completions(
    axum::extract::State(state): axum::extract::State<AppState>,
    body: Body,
) -> Response {
    let arrived = Instant::now();
    let (call, prompt_tokens) = match accept(&state, body).await {
        Ok(accepted) => accepted,
        Err((e, model)) => return refused(e, model, false),
    };
    let Some(ticket) = state.0.queue.enter() else {
        let e = ApiError::unavailable(format!(
            "{} requests are already waiting for the model; retry shortly",
            state.0.settings.limits.queue
        ));
        return refused(e, Some(call.model), call.stream);
    };
    let head = Head {
        id: state.next_id(),
        model: call.model.clone(),
        created: crate::unix_now(),
    };
    let job = Job {
        state,
        call,
        prompt_tokens,
        head,
        arrived,
    };
    if job.call.stream {
        streamed(job, ticket)
    } else {
        whole(job, ticket).await
    }
}

/// Reads, parses and checks the request. The error carries the model named, if any.
async fn accept(state: &AppState, body: Body) -> Result<(Call, u64), (ApiError, Option<String>)> {
    let limit = state.0.settings.limits.body_bytes;
    let bytes = axum::body::to_bytes(body, limit)
        .await
        .map_err(|_| (ApiError::too_large(limit), None))?;
    let wire = convert::parse(&bytes).map_err(|e| (e, None))?;
    let served = &state.0.model;
    if !served.answers_to(&wire.model) {
        let e = ApiError::model_not_found(&wire.model, &served.id, Some("model".into()));
        return Err((e, Some(wire.model)));
    }
    let model = wire.model.clone();
    let call = convert::to_call(wire).map_err(|e| (e, Some(model.clone())))?;
    let provider = &served.provider;
    let count = provider.count_tokens(&call.request).ok();
    // Only an exact count (the embedded model's tokenizer) may refuse: an estimate could
    // turn away a request that fits.
    if let (Some(count), Some(window)) = (&count, provider.info().context_window)
        && count.exact
        && count.tokens >= u64::from(window)
    {
        return Err((ApiError::context_length(count.tokens, window), Some(model)));
    }
    Ok((call, count.map_or(0, |c| c.tokens)))
}

fn refused(e: ApiError, model: Option<String>, stream: bool) -> Response {
    let outcome = Outcome::Failed(e.body.error.message.clone());
    let mut res = e.into_response();
    if let Some(model) = model {
        res.extensions_mut().insert(Detail {
            model,
            stream,
            usage: None,
            queued: Duration::ZERO,
            outcome: Some(outcome),
            deferred: false,
        });
    }
    res
}

/// One accepted request.
struct Job {
    state: AppState,
    call: Call,
    /// The prompt's size as counted before the call (the usage when the provider reports
    /// none).
    prompt_tokens: u64,
    head: Head,
    arrived: Instant,
}

impl Job {
    fn record(&self, status: u16, usage: Option<Usage>, queued: Duration, outcome: Outcome) {
        self.state.report(&RequestRecord {
            method: "POST".into(),
            path: PATH.into(),
            status,
            model: Some(self.call.model.clone()),
            stream: self.call.stream,
            usage,
            queued,
            elapsed: self.arrived.elapsed(),
            outcome,
        });
    }

    /// The provider's usage, else the counted prompt and an estimate of the answer.
    fn usage(&self, completion: &Completion) -> Usage {
        if completion.usage != Usage::default() {
            return completion.usage;
        }
        let mut generated = trellis_llm::tokens::estimate_text(&completion.text);
        for c in &completion.tool_calls {
            generated += trellis_llm::tokens::estimate_text(&c.arguments);
        }
        Usage {
            prompt_tokens: self.prompt_tokens,
            completion_tokens: generated,
            cached_prompt_tokens: 0,
        }
    }
}

/// Reports a whole-answer request that was dropped (its client hung up) before it ended.
struct Unfinished<'a> {
    job: &'a Job,
    queued: Duration,
    armed: bool,
}

impl Drop for Unfinished<'_> {
    fn drop(&mut self) {
        if self.armed {
            self.job.record(499, None, self.queued, Outcome::Cancelled);
        }
    }
}

async fn whole(job: Job, ticket: Ticket) -> Response {
    let cancel = job.state.0.shutdown.child_token();
    let _cancel_on_drop = cancel.clone().drop_guard();
    let mut unfinished = Unfinished {
        job: &job,
        queued: Duration::ZERO,
        armed: true,
    };
    let permit = tokio::select! {
        p = ticket.acquire() => p,
        () = cancel.cancelled() => None,
    };
    let Some(_permit) = permit else {
        unfinished.armed = false;
        return refused(
            ApiError::unavailable("the server is stopping"),
            Some(job.call.model.clone()),
            false,
        );
    };
    let queued = job.arrived.elapsed();
    unfinished.queued = queued;
    let provider = &job.state.0.model.provider;
    let mut events = provider.stream(job.call.request.clone(), cancel.clone());
    let mut completion = Completion::default();
    let mut failure = None;
    while let Some(event) = events.next().await {
        match event {
            Ok(event) => completion.push(event),
            Err(e) => {
                failure = Some(e);
                break;
            }
        }
    }
    if failure.is_none() && completion.finish.is_none() {
        failure = Some(trellis_llm::Error::StreamCut {
            provider: job.call.model.clone(),
            received: format!(
                "{} characters of text, {} tool call(s) and no finish",
                completion.text.chars().count(),
                completion.tool_calls.len()
            ),
        });
    }
    unfinished.armed = false;
    let detail = |usage, outcome| Detail {
        model: job.call.model.clone(),
        stream: false,
        usage,
        queued,
        outcome: Some(outcome),
        deferred: false,
    };
    if let Some(e) = failure {
        let api = ApiError::from_model(&e);
        let mut res = api.into_response();
        res.extensions_mut()
            .insert(detail(None, Outcome::Failed(e.to_string())));
        return res;
    }
    let usage = job.usage(&completion);
    let reason = completion
        .finish
        .as_ref()
        .map(|r| trellis_llm::openai_wire::finish_reason_name(r).to_string())
        .unwrap_or_default();
    let mut res = Json(encode::whole(&job.head, completion, usage)).into_response();
    res.extensions_mut()
        .insert(detail(Some(usage), Outcome::Done(reason)));
    res
}

/// Answers 200 with an SSE body at once; a task waits for the model and produces the
/// chunks. Dropping the body (the client hung up) cancels the generation.
fn streamed(job: Job, ticket: Ticket) -> Response {
    let (tx, rx) = mpsc::channel::<Bytes>(32);
    let cancel = job.state.0.shutdown.child_token();
    let guard = cancel.clone().drop_guard();
    let detail = Detail {
        model: job.call.model.clone(),
        stream: true,
        usage: None,
        queued: Duration::ZERO,
        outcome: None,
        deferred: true,
    };
    tokio::spawn(produce(job, ticket, tx, cancel));
    let body = futures::stream::unfold((rx, guard), |(mut rx, guard)| async move {
        let bytes = rx.recv().await?;
        Some((Ok::<_, std::convert::Infallible>(bytes), (rx, guard)))
    });
    let mut res = Response::new(Body::from_stream(body));
    *res.status_mut() = StatusCode::OK;
    let headers = res.headers_mut();
    headers.insert(
        header::CONTENT_TYPE,
        header::HeaderValue::from_static("text/event-stream"),
    );
    headers.insert(
        header::CACHE_CONTROL,
        header::HeaderValue::from_static("no-cache"),
    );
    res.extensions_mut().insert(detail);
    res
}

/// Why a stream ended early.
enum Cut {
    /// The client went away.
    Gone,
    /// An error event was sent.
    Failed(String),
}

async fn produce(job: Job, ticket: Ticket, tx: mpsc::Sender<Bytes>, cancel: CancellationToken) {
    let mut queued = Duration::ZERO;
    let mut completion = Completion::default();
    let result = run(&job, ticket, &tx, &cancel, &mut queued, &mut completion).await;
    let usage = (completion.finish.is_some()).then(|| job.usage(&completion));
    let outcome = match result {
        Ok(reason) => Outcome::Done(reason),
        Err(Cut::Gone) => {
            cancel.cancel();
            Outcome::Cancelled
        }
        Err(Cut::Failed(why)) => Outcome::Failed(why),
    };
    job.record(200, usage, queued, outcome);
}

async fn send(tx: &mpsc::Sender<Bytes>, bytes: Bytes) -> Result<(), Cut> {
    tx.send(bytes).await.map_err(|_| Cut::Gone)
}

async fn fail(tx: &mpsc::Sender<Bytes>, e: &trellis_llm::Error) -> Cut {
    let body = ApiError::from_model(e).body;
    match send(tx, encode::error_event(&body)).await {
        Ok(()) => Cut::Failed(e.to_string()),
        Err(gone) => gone,
    }
}

async fn run(
    job: &Job,
    ticket: Ticket,
    tx: &mpsc::Sender<Bytes>,
    cancel: &CancellationToken,
    queued: &mut Duration,
    completion: &mut Completion,
) -> Result<String, Cut> {
    if ticket.ahead > 0 {
        let n = ticket.ahead;
        send(
            tx,
            encode::comment(&format!("queued behind {n} request(s)")),
        )
        .await?;
    }
    let keepalive = job.state.0.settings.limits.keepalive;
    let acquire = ticket.acquire();
    tokio::pin!(acquire);
    let _permit = loop {
        tokio::select! {
            p = &mut acquire => match p {
                Some(p) => break p,
                None => return Err(fail(tx, &trellis_llm::Error::Cancelled).await),
            },
            () = tx.closed() => return Err(Cut::Gone),
            () = cancel.cancelled() => return Err(fail(tx, &trellis_llm::Error::Cancelled).await),
            () = tokio::time::sleep(keepalive) => {
                send(tx, encode::comment("waiting for the model")).await?;
            }
        }
    };
    *queued = job.arrived.elapsed();
    let mut encoder = Encoder::new(job.head.clone(), job.call.include_usage);
    send(tx, encoder.start()).await?;
    let provider = &job.state.0.model.provider;
    let mut events = provider.stream(job.call.request.clone(), cancel.clone());
    loop {
        let next = tokio::select! {
            next = events.next() => next,
            () = tx.closed() => return Err(Cut::Gone),
        };
        match next {
            Some(Ok(event)) => {
                completion.push(event.clone());
                if let Some(chunk) = encoder.event(event) {
                    send(tx, chunk).await?;
                }
            }
            Some(Err(_)) if tx.is_closed() => return Err(Cut::Gone),
            Some(Err(e)) => return Err(fail(tx, &e).await),
            // Usage may follow the finish: the answer ends with the stream.
            None => break,
        }
    }
    let Some(reason) = encoder.finish.clone() else {
        let cut = trellis_llm::Error::StreamCut {
            provider: job.call.model.clone(),
            received: "the stream ended with no finish".into(),
        };
        return Err(fail(tx, &cut).await);
    };
    for bytes in encoder.end(job.usage(completion)) {
        send(tx, bytes).await?;
    }
    Ok(reason)
}
