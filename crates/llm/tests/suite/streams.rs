//! Streams that end with neither a finish nor an error: retried like a cut stream while
//! nothing has reached the caller, otherwise an error naming the endpoint and what arrived;
//! a stream whose task was stopped (the runtime going away) is cancelled, one whose task
//! panicked says so.

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use tokio_util::sync::CancellationToken;
use trellis_llm::{
    ChatRequest, ChatStream, Error, Message, ModelProvider, ProviderInfo, ProviderKind,
    RetryPolicy, Retrying, StreamEvent,
};
use trellis_test_support::scripted::{ScriptedProvider, Turn};

fn request() -> ChatRequest {
    ChatRequest::new(vec![Message::user("Where is stock kept?")])
}

fn retrying(inner: Arc<dyn ModelProvider>, max_retries: u32) -> Retrying {
    Retrying::new(
        inner,
        RetryPolicy {
            max_retries,
            base_delay: Duration::from_millis(1),
            max_delay: Duration::from_millis(5),
        },
    )
}

/// Text, then the end of the stream: no finish, no error.
fn unfinished(text: &str) -> Turn {
    Turn::Events(vec![StreamEvent::TextDelta { text: text.into() }])
}

#[tokio::test]
async fn a_stream_ending_without_a_finish_before_any_output_is_retried() {
    let scripted = ScriptedProvider::new([
        Turn::Events(Vec::new()),
        Turn::Events(Vec::new()),
        Turn::Text("Stock is kept in memory.".into()),
    ]);
    let p = retrying(Arc::new(scripted.clone()), 2);
    let out = p
        .complete(request(), CancellationToken::new())
        .await
        .unwrap();
    assert_eq!(out.text, "Stock is kept in memory.");
    assert_eq!(scripted.requests().len(), 3);
}

#[tokio::test]
async fn a_stream_ending_without_a_finish_is_an_error_naming_the_endpoint_and_what_arrived() {
    // Output reached the caller: no retry, whatever the policy.
    let scripted = ScriptedProvider::new([unfinished("Stock is"), Turn::Text("unused".into())])
        .with_profile("fast");
    let p = retrying(Arc::new(scripted.clone()), 3);
    let err = p
        .complete(request(), CancellationToken::new())
        .await
        .unwrap_err();
    assert_eq!(err.code(), "stream_cut", "{err:?}");
    assert_eq!(
        err.to_string(),
        "fast: stream ended before the response was complete (received 1 event (8 characters of text) and no finish)"
    );
    assert!(err.is_retryable());
    assert_eq!(scripted.requests().len(), 1);
    // Retries used up: the last attempt's error.
    let scripted = ScriptedProvider::new([Turn::Events(Vec::new()), Turn::Events(Vec::new())])
        .with_profile("fast");
    let err = retrying(Arc::new(scripted.clone()), 1)
        .complete(request(), CancellationToken::new())
        .await
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "fast: stream ended before the response was complete (received nothing)"
    );
    assert_eq!(scripted.requests().len(), 2);
}

/// A model whose stream never yields anything, or panics when polled.
struct Stuck {
    info: ProviderInfo,
    panics: bool,
}

impl Stuck {
    fn new(panics: bool) -> Self {
        Self {
            info: ProviderInfo {
                profile: "stuck".into(),
                kind: ProviderKind::Scripted,
                model: "stuck".into(),
                native_structured_output: false,
                context_window: None,
            },
            panics,
        }
    }
}

impl ModelProvider for Stuck {
    fn info(&self) -> &ProviderInfo {
        &self.info
    }

    fn stream(&self, _request: ChatRequest, _cancel: CancellationToken) -> ChatStream {
        let panics = self.panics;
        Box::pin(futures::stream::poll_fn(move |_| {
            assert!(!panics, "the model blew up");
            std::task::Poll::Pending
        }))
    }
}

#[test]
fn a_stream_whose_task_stops_with_its_runtime_is_cancelled_not_cut() {
    let p = retrying(Arc::new(Stuck::new(false)), 3);
    let mut stream = p.stream(request(), CancellationToken::new());
    // The call starts on a runtime that then goes away (a process shutting down)...
    let first = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    first.block_on(async {
        let polled = tokio::time::timeout(Duration::from_millis(20), stream.next()).await;
        assert!(polled.is_err(), "the stuck model answered");
    });
    drop(first);
    // ... and whoever still reads the stream learns the call was stopped.
    let second = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let items: Vec<_> = second.block_on(stream.collect());
    assert_eq!(items.len(), 1, "{items:?}");
    assert!(matches!(items[0], Err(Error::Cancelled)), "{items:?}");
}

#[tokio::test]
async fn a_stream_whose_task_panicked_says_so() {
    let p = retrying(Arc::new(Stuck::new(true)), 3);
    let err = p
        .complete(request(), CancellationToken::new())
        .await
        .unwrap_err();
    assert_eq!(err.code(), "panicked", "{err:?}");
    assert_eq!(
        err.to_string(),
        "stuck: the model call's task panicked: the model blew up"
    );
    assert!(!err.is_retryable());
}
