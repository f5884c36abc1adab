//! The provider seam: one required streaming method; everything else is derived.

use std::pin::Pin;

use futures::future::BoxFuture;
use futures::{Stream, StreamExt};
use serde::{Deserialize, Serialize};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::tokens::TokenCount;
use crate::types::{ChatRequest, Completion, FinishReason, StreamEvent};
use crate::window::{ContextWindow, WindowSource};
use crate::{Error, Result};

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
        Box::pin(collect(stream))
    }
}

/// Collects a stream into a [`Completion`]. A stream that ends without
/// [`StreamEvent::Finish`] is an error ([`Error::StreamCut`]).
pub async fn collect(stream: ChatStream) -> Result<Completion> {
    collect_with(stream, |_| {}).await
}

/// Like [`collect`], showing every event to `observe` first (for live progress).
pub async fn collect_with(
    mut stream: ChatStream,
    mut observe: impl FnMut(&StreamEvent),
) -> Result<Completion> {
    let mut completion = Completion::default();
    while let Some(event) = stream.next().await {
        let event = event?;
        observe(&event);
        completion.push(event);
    }
    match completion.finish {
        Some(FinishReason::Cancelled) => Err(Error::Cancelled),
        Some(_) => Ok(completion),
        None => Err(Error::StreamCut {
            provider: "stream".into(),
        }),
    }
}

/// The sending half of a channel-backed [`ChatStream`].
pub(crate) type EventSender = mpsc::Sender<Result<StreamEvent>>;

/// A channel-backed stream: the producer (a task or a thread) sends events; the stream ends
/// when the producer drops its sender. Dropping the stream makes `send` fail, which
/// producers treat as cancellation.
pub(crate) fn channel_stream(capacity: usize) -> (EventSender, ChatStream) {
    let (tx, rx) = mpsc::channel(capacity);
    let stream = futures::stream::unfold(rx, |mut rx| async move {
        rx.recv().await.map(|item| (item, rx))
    });
    (tx, Box::pin(stream))
}

/// Spawns `producer` on the tokio runtime, feeding a channel stream. The producer's error,
/// if any, becomes the stream's last item.
pub(crate) fn spawn_stream<F, Fut>(producer: F) -> ChatStream
where
    F: FnOnce(EventSender) -> Fut + Send + 'static,
    Fut: std::future::Future<Output = Result<()>> + Send + 'static,
{
    let (tx, stream) = channel_stream(64);
    // Start lazily on first poll so that building a stream has no side effects.
    let start = futures::stream::once(async move {
        let err_tx = tx.clone();
        tokio::spawn(async move {
            if let Err(e) = producer(tx).await {
                let _ = err_tx.send(Err(e)).await;
            }
        });
        futures::stream::empty::<Result<StreamEvent>>()
    })
    .flatten();
    Box::pin(start.chain(stream))
}
