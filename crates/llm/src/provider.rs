//! The provider seam: one required streaming method; everything else is derived.

use std::pin::Pin;

use futures::future::BoxFuture;
use futures::{Stream, StreamExt};
use serde::{Deserialize, Serialize};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::tokens::TokenCount;
use crate::types::{ChatRequest, Completion, FinishReason, StreamEvent};
use crate::{ContextWindow, Error, Result, WindowSource};

/// A stream of response events. It ends after [`StreamEvent::Finish`] or after the first
/// error.
pub type ChatStream = Pin<Box<dyn Stream<Item = Result<StreamEvent>> + Send>>;

/// Which wire format / runtime a provider speaks.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ProviderKind {
    /// The in-process llama.cpp model.
    Embedded,
    /// OpenAI-compatible chat completions.
    Openai,
    /// The Anthropic Messages API.
    Anthropic,
    /// Ollama's native chat API.
    Ollama,
    /// The scripted test double.
    Scripted,
}

/// What a provider is, for listings, usage records and budgets.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ProviderInfo {
    /// The profile name (`local`, `fast`, …).
    pub profile: String,
    /// The wire format or runtime.
    pub kind: ProviderKind,
    /// The model identifier sent to the endpoint (or the GGUF file name).
    pub model: String,
    /// Whether the provider enforces a JSON Schema while generating (grammar or native
    /// `response_format`), as opposed to asking for it in the prompt.
    pub native_structured_output: bool,
    /// The context window in tokens, when known (for a remote endpoint: the profile's
    /// `context` until [`ModelProvider::context_window`] has found out the server's).
    pub context_window: Option<u32>,
}

/// A model endpoint. Object-safe: hold it as `Arc<dyn ModelProvider>`.
pub trait ModelProvider: Send + Sync {
    /// Describes the provider.
    fn info(&self) -> &ProviderInfo;

    /// Starts a call. Nothing happens until the stream is polled; dropping the stream or
    /// cancelling `cancel` stops the call (the stream then yields [`Error::Cancelled`]).
    fn stream(&self, request: ChatRequest, cancel: CancellationToken) -> ChatStream;

    /// Does one-time work before the first call (the embedded model fetches and loads its
    /// weights); calls work without it, this only moves the cost. Idempotent.
    fn prepare(&self) -> BoxFuture<'_, Result<()>> {
        Box::pin(async { Ok(()) })
    }

    /// The context window and where it comes from. A remote endpoint asks its server on the
    /// first call (once, with a short timeout; [`crate::window`]) and from then on
    /// [`ProviderInfo::context_window`] holds the answer too; other providers state theirs.
    fn context_window(&self) -> BoxFuture<'_, Option<ContextWindow>> {
        let window = self.info().context_window.map(|tokens| ContextWindow {
            tokens,
            source: WindowSource::Provider,
        });
        Box::pin(async move { window })
    }

    /// Counts the prompt tokens of `request` with the model's tokenizer where available,
    /// otherwise estimates (see [`crate::tokens`]).
    fn count_tokens(&self, request: &ChatRequest) -> Result<TokenCount> {
        Ok(crate::tokens::estimate_request(request))
    }

    /// Runs the call and collects the whole response.
    fn complete(
        &self,
        request: ChatRequest,
        cancel: CancellationToken,
    ) -> BoxFuture<'_, Result<Completion>> {
        let stream = self.stream(request, cancel);
        Box::pin(async move { collect_named(&self.info().profile, stream, |_| {}).await })
    }
}

/// Collects a stream into a [`Completion`]. A stream that ends without
/// [`StreamEvent::Finish`] is an error ([`Error::StreamCut`]).
pub async fn collect(stream: ChatStream) -> Result<Completion> {
    collect_with(stream, |_| {}).await
}

/// Like [`collect`], showing every event to `observe` first (for live progress).
pub async fn collect_with(
    stream: ChatStream,
    observe: impl FnMut(&StreamEvent),
) -> Result<Completion> {
    collect_named("model stream", stream, observe).await
}

/// Like [`collect_with`] for a stream of `provider` (a profile name), which a stream that
/// ends early is reported under.
pub async fn collect_named(
    provider: &str,
    mut stream: ChatStream,
    mut observe: impl FnMut(&StreamEvent),
) -> Result<Completion> {
    let mut completion = Completion::default();
    let mut received = Received::default();
    while let Some(event) = stream.next().await {
        let event = event?;
        received.note(&event);
        observe(&event);
        completion.push(event);
    }
    match completion.finish {
        Some(FinishReason::Cancelled) => Err(Error::Cancelled),
        Some(_) => Ok(completion),
        None => Err(Error::StreamCut {
            provider: provider.to_owned(),
            received: received.to_string(),
        }),
    }
}

/// What a stream delivered, for the error of one that ended before its
/// [`StreamEvent::Finish`].
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Received {
    events: usize,
    text: usize,
    thinking: usize,
    tool_call_deltas: usize,
    usage: bool,
    finished: bool,
}

impl Received {
    /// Counts `event`.
    pub(crate) fn note(&mut self, event: &StreamEvent) {
        // Progress is no output: a stream cut after it is retried like one that sent nothing.
        if matches!(event, StreamEvent::Progress { .. }) {
            return;
        }
        self.events += 1;
        match event {
            StreamEvent::TextDelta { text } => self.text += text.chars().count(),
            StreamEvent::ThinkingDelta { text } => self.thinking += text.chars().count(),
            StreamEvent::ToolCallDelta { .. } => self.tool_call_deltas += 1,
            StreamEvent::Usage { .. } => self.usage = true,
            StreamEvent::Finish { .. } => self.finished = true,
            StreamEvent::ThinkingSignature { .. } | StreamEvent::Progress { .. } => {}
        }
    }

    /// How many events arrived.
    pub(crate) fn events(&self) -> usize {
        self.events
    }

    /// Whether a [`StreamEvent::Finish`] was among the events.
    pub(crate) fn finished(&self) -> bool {
        self.finished
    }
}

impl std::fmt::Display for Received {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.events == 0 {
            return f.write_str("received nothing");
        }
        let mut parts = Vec::new();
        if self.text > 0 {
            parts.push(format!("{} characters of text", self.text));
        }
        if self.thinking > 0 {
            parts.push(format!("{} characters of reasoning", self.thinking));
        }
        if self.tool_call_deltas > 0 {
            parts.push(format!("{} tool-call deltas", self.tool_call_deltas));
        }
        if self.usage {
            parts.push("the usage".to_owned());
        }
        let plural = if self.events == 1 { "" } else { "s" };
        write!(f, "received {} event{plural}", self.events)?;
        if !parts.is_empty() {
            write!(f, " ({})", parts.join(", "))?;
        }
        f.write_str(" and no finish")
    }
}

/// The sending half of a channel-backed [`ChatStream`].
pub(crate) type EventSender = mpsc::Sender<Result<StreamEvent>>;

/// Spawns `producer` on the tokio runtime, feeding a channel stream of `provider` (a profile
/// name); the producer starts on the stream's first poll, so building a stream has no side
/// effects. Dropping the stream makes `send` fail, which producers treat as cancellation.
///
/// The stream keeps the promise of [`ChatStream`] — it ends after a
/// [`StreamEvent::Finish`] or an error — whatever the producer does: its error becomes the
/// last item; a producer that returns without having sent a finish ends the stream with
/// [`Error::StreamCut`] (naming `provider` and what it sent); one whose task was stopped (the
/// runtime shutting down, the task aborted) with [`Error::Cancelled`]; one that panicked
/// with [`Error::Panicked`]. A stream that just stops would leave the caller to guess.
pub(crate) fn spawn_stream<F, Fut>(provider: &str, producer: F) -> ChatStream
where
    F: FnOnce(EventSender) -> Fut + Send + 'static,
    Fut: std::future::Future<Output = Result<()>> + Send + 'static,
{
    let (tx, rx) = mpsc::channel(64);
    let feed = Feed {
        phase: Phase::Start(producer, tx),
        rx,
        provider: provider.to_owned(),
        received: Received::default(),
    };
    Box::pin(futures::stream::unfold(feed, Feed::next))
}

enum Phase<F> {
    Start(F, EventSender),
    Running(tokio::task::JoinHandle<Result<()>>),
    Ended,
}

struct Feed<F> {
    phase: Phase<F>,
    rx: mpsc::Receiver<Result<StreamEvent>>,
    provider: String,
    received: Received,
}

impl<F, Fut> Feed<F>
where
    F: FnOnce(EventSender) -> Fut + Send + 'static,
    Fut: std::future::Future<Output = Result<()>> + Send + 'static,
{
    async fn next(mut self) -> Option<(Result<StreamEvent>, Self)> {
        let task = match std::mem::replace(&mut self.phase, Phase::Ended) {
            Phase::Start(producer, tx) => tokio::spawn(producer(tx)),
            Phase::Running(task) => task,
            Phase::Ended => return None,
        };
        if let Some(item) = self.rx.recv().await {
            match &item {
                Ok(event) => self.received.note(event),
                // A producer's error ends the stream.
                Err(_) => return Some((item, self)),
            }
            self.phase = Phase::Running(task);
            return Some((item, self));
        }
        // Every sender is gone: the producer returned, or its task was stopped.
        let last = match task.await {
            Ok(Ok(())) if self.received.finished() => return None,
            Ok(Ok(())) => Error::StreamCut {
                provider: self.provider.clone(),
                received: self.received.to_string(),
            },
            Ok(Err(e)) => e,
            Err(e) if e.is_panic() => Error::Panicked {
                provider: self.provider.clone(),
                message: panic_message(e.into_panic()),
            },
            Err(_) => Error::Cancelled,
        };
        Some((Err(last), self))
    }
}

/// The text of a panic payload.
fn panic_message(payload: Box<dyn std::any::Any + Send>) -> String {
    if let Some(s) = payload.downcast_ref::<&str>() {
        (*s).to_owned()
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s.clone()
    } else {
        "no message".to_owned()
    }
}
