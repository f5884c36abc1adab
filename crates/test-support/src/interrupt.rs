//! A deterministic interruption point for "stop a run anywhere, then resume it" tests.
//!
//! A [`Tripwire`] numbers the points a run passes — before, during and after each model
//! request, before and after each tool call — in the order it passes them. Armed with point
//! `k`, it *trips* there: the call stops at that point, [`Tripwire::tripped`] tells the test
//! where, and the call waits until [`Tripwire::release`]; then it ends the way a call cut
//! short by its process going away looks to whoever still awaits it (a model stream with
//! neither a finish nor an error, a cancelled tool). Unarmed, it only records the points, so
//! a first, uninterrupted run enumerates them.
//!
//! Wrap the model with [`Tripwire::provider`] and the tools with [`Tripwire::tool`]. The
//! numbering is deterministic as long as the run makes its calls one at a time.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use futures::StreamExt;
use serde_json::Value;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;
use trellis_llm::tokens::TokenCount;
use trellis_llm::{ChatRequest, ChatStream, ModelProvider, ProviderInfo, StreamEvent};
use trellis_tools::tool::BoxFuture;
use trellis_tools::{Tool, ToolContext, ToolOutput, ToolSpec};

/// Counts interruption points and trips at one of them (see the module docs).
pub struct Tripwire {
    at: Option<usize>,
    points: Mutex<Vec<String>>,
    model_calls: AtomicUsize,
    tool_calls: AtomicUsize,
    tripped: watch::Sender<Option<String>>,
    released: CancellationToken,
}

impl Tripwire {
    /// A tripwire that trips at point `at` (0-based), or never (`None`).
    pub fn new(at: Option<usize>) -> Arc<Self> {
        Arc::new(Self {
            at,
            points: Mutex::new(Vec::new()),
            model_calls: AtomicUsize::new(0),
            tool_calls: AtomicUsize::new(0),
            tripped: watch::Sender::new(None),
            released: CancellationToken::new(),
        })
    }

    /// The points passed so far, in order.
    pub fn points(&self) -> Vec<String> {
        self.points
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
    }

    /// Waits until the tripwire trips; the point's label.
    pub async fn tripped(&self) -> String {
        let mut rx = self.tripped.subscribe();
        match rx.wait_for(Option::is_some).await {
            Ok(label) => label.clone().unwrap_or_default(),
            // The sender lives as long as `self`.
            Err(_) => String::new(),
        }
    }

    /// Lets the stopped call go on (it ends cut short).
    pub fn release(&self) {
        self.released.cancel();
    }

    /// Passes point `label`; `true` when the tripwire tripped here (after the release: the
    /// caller then ends its call cut short).
    async fn pass(&self, label: String) -> bool {
        let index = {
            let mut points = self
                .points
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            points.push(label.clone());
            points.len() - 1
        };
        if self.at != Some(index) {
            return false;
        }
        self.tripped.send_replace(Some(label));
        self.released.cancelled().await;
        true
    }

    /// `inner` with this tripwire's model points.
    pub fn provider(self: &Arc<Self>, inner: Arc<dyn ModelProvider>) -> Arc<dyn ModelProvider> {
        Arc::new(TrippedModel {
            wire: self.clone(),
            inner,
        })
    }

    /// `inner` with this tripwire's tool points.
    pub fn tool(self: &Arc<Self>, inner: Arc<dyn Tool>) -> Arc<dyn Tool> {
        Arc::new(TrippedTool {
            wire: self.clone(),
            inner,
        })
    }
}

/// A model whose every call passes three points: before the request reaches the inner
/// model, mid-stream (after the first event) and after the response (its finish delivered,
/// before the stream ends).
struct TrippedModel {
    wire: Arc<Tripwire>,
    inner: Arc<dyn ModelProvider>,
}

impl ModelProvider for TrippedModel {
    fn info(&self) -> &ProviderInfo {
        self.inner.info()
    }

    fn count_tokens(&self, request: &ChatRequest) -> trellis_llm::Result<TokenCount> {
        self.inner.count_tokens(request)
    }

    fn stream(&self, request: ChatRequest, cancel: CancellationToken) -> ChatStream {
        let call = CallState {
            wire: self.wire.clone(),
            inner: self.inner.clone(),
            n: self.wire.model_calls.fetch_add(1, Ordering::SeqCst) + 1,
            request: Some((request, cancel)),
            stream: None,
            events: 0,
            finished: false,
            ended: false,
        };
        Box::pin(futures::stream::unfold(call, CallState::next))
    }
}

struct CallState {
    wire: Arc<Tripwire>,
    inner: Arc<dyn ModelProvider>,
    n: usize,
    request: Option<(ChatRequest, CancellationToken)>,
    stream: Option<ChatStream>,
    events: usize,
    finished: bool,
    ended: bool,
}

impl CallState {
    async fn next(mut self) -> Option<(trellis_llm::Result<StreamEvent>, Self)> {
        if self.ended {
            return None;
        }
        let n = self.n;
        if self.finished {
            // The consumer has the whole response; the stream has not ended yet.
            self.ended = true;
            self.wire
                .pass(format!("model call {n}: after the response"))
                .await;
            return None;
        }
        if let Some((request, cancel)) = self.request.take() {
            if self
                .wire
                .pass(format!("model call {n}: before the request"))
                .await
            {
                return None;
            }
            self.stream = Some(self.inner.stream(request, cancel));
        }
        if self.events == 1 && self.wire.pass(format!("model call {n}: mid-stream")).await {
            return None;
        }
        let item = self.stream.as_mut()?.next().await;
        match item {
            Some(Ok(event)) => {
                self.events += 1;
                self.finished = matches!(event, StreamEvent::Finish { .. });
                Some((Ok(event), self))
            }
            Some(Err(e)) => {
                self.ended = true;
                Some((Err(e), self))
            }
            None => None,
        }
    }
}

/// A tool whose every call passes two points: before it runs and after (its effect done,
/// its result not yet returned).
struct TrippedTool {
    wire: Arc<Tripwire>,
    inner: Arc<dyn Tool>,
}

impl Tool for TrippedTool {
    fn spec(&self) -> &ToolSpec {
        self.inner.spec()
    }

    fn read_only(&self) -> bool {
        self.inner.read_only()
    }

    fn call<'a>(
        &'a self,
        ctx: &'a ToolContext,
        args: Value,
    ) -> BoxFuture<'a, trellis_tools::Result<ToolOutput>> {
        Box::pin(async move {
            let n = self.wire.tool_calls.fetch_add(1, Ordering::SeqCst) + 1;
            let name = &self.spec().name;
            if self
                .wire
                .pass(format!("tool call {n} ({name}): before it runs"))
                .await
            {
                return Err(trellis_tools::Error::Cancelled);
            }
            let out = self.inner.call(ctx, args).await;
            if self
                .wire
                .pass(format!("tool call {n} ({name}): after it ran"))
                .await
            {
                return Err(trellis_tools::Error::Cancelled);
            }
            out
        })
    }
}
