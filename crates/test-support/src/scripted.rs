//! A scripted [`ModelProvider`] for tests: it plays back prepared turns in order, records
//! every request it receives, and fails loudly — with the request it could not answer —
//! when the script runs out.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex, MutexGuard};

use serde_json::Value;
use tokio_util::sync::CancellationToken;
use trellis_llm::tokens::{TokenCount, estimate_request};
use trellis_llm::{
    ChatRequest, ChatStream, Error, FinishReason, ModelProvider, ProviderInfo, ProviderKind,
    StreamEvent, Usage,
};

/// One scripted answer.
#[derive(Clone, Debug)]
pub enum Turn {
    /// Answer text, streamed word by word, then usage and `Stop`.
    Text(String),
    /// A JSON answer (for structured output), streamed as text.
    Json(Value),
    /// One tool call, then `ToolCalls`.
    ToolCall {
        /// Tool name.
        name: String,
        /// Arguments.
        arguments: Value,
    },
    /// Exactly these events.
    Events(Vec<StreamEvent>),
    /// An HTTP-style error before any output (`status` 429/5xx are retryable).
    HttpError {
        /// Status code.
        status: u16,
        /// Message.
        message: String,
    },
    /// Some events, then a cut stream.
    Cut(Vec<StreamEvent>),
}

/// Answers a request when the scripted turns are used up (for concurrent tests, where the
/// order of requests is not known in advance).
pub type Responder = Arc<dyn Fn(&ChatRequest) -> Turn + Send + Sync>;

#[derive(Default)]
struct State {
    turns: VecDeque<Turn>,
    requests: Vec<ChatRequest>,
    responder: Option<Responder>,
}

/// The scripted provider. Clones share the script and the recorded requests.
#[derive(Clone)]
pub struct ScriptedProvider {
    info: ProviderInfo,
    state: Arc<Mutex<State>>,
}

impl ScriptedProvider {
    /// A provider that will answer with `turns`, in order.
    pub fn new(turns: impl IntoIterator<Item = Turn>) -> Self {
        Self {
            info: ProviderInfo {
                profile: "scripted".into(),
                kind: ProviderKind::Scripted,
                model: "scripted".into(),
                native_structured_output: false,
                context_window: None,
            },
            state: Arc::new(Mutex::new(State {
                turns: turns.into_iter().collect(),
                requests: Vec::new(),
                responder: None,
            })),
        }
    }

    /// A provider that answers every request with `responder(request)` (after any scripted
    /// turns).
    pub fn responding(responder: impl Fn(&ChatRequest) -> Turn + Send + Sync + 'static) -> Self {
        let p = Self::new([]);
        p.lock().responder = Some(Arc::new(responder));
        p
    }

    /// The same provider, reporting a context window of `tokens` (as a configured profile's
    /// `context` would).
    pub fn with_context_window(mut self, tokens: u32) -> Self {
        self.info.context_window = Some(tokens);
        self
    }

    /// The same provider under profile name `profile` (to tell two providers apart in what
    /// they record, e.g. an agent's model and its summary model).
    pub fn with_profile(mut self, profile: &str) -> Self {
        self.info.profile = profile.into();
        self
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Every request received so far.
    pub fn requests(&self) -> Vec<ChatRequest> {
        self.lock().requests.clone()
    }

    /// Turns not yet played.
    pub fn remaining(&self) -> usize {
        self.lock().turns.len()
    }
}

fn usage(request: &ChatRequest, completion: &str) -> StreamEvent {
    StreamEvent::Usage {
        usage: Usage {
            prompt_tokens: estimate_request(request).tokens,
            completion_tokens: trellis_llm::tokens::estimate_text(completion),
            cached_prompt_tokens: 0,
        },
    }
}

fn text_events(request: &ChatRequest, text: &str) -> Vec<StreamEvent> {
    let mut events: Vec<StreamEvent> = text
        .split_inclusive(' ')
        .map(|w| StreamEvent::TextDelta { text: w.into() })
        .collect();
    events.push(usage(request, text));
    events.push(StreamEvent::Finish {
        reason: FinishReason::Stop,
    });
    events
}

impl ModelProvider for ScriptedProvider {
    fn info(&self) -> &ProviderInfo {
        &self.info
    }

    fn count_tokens(&self, request: &ChatRequest) -> trellis_llm::Result<TokenCount> {
        Ok(estimate_request(request))
    }

    fn stream(&self, request: ChatRequest, cancel: CancellationToken) -> ChatStream {
        let (turn, n) = {
            let mut st = self.lock();
            st.requests.push(request.clone());
            let turn = st
                .turns
                .pop_front()
                .or_else(|| st.responder.as_ref().map(|r| r(&request)));
            (turn, st.requests.len())
        };
        let items: Vec<trellis_llm::Result<StreamEvent>> = match turn {
            None => {
                let last = request
                    .messages
                    .last()
                    .map(|m| m.content.chars().take(200).collect::<String>())
                    .unwrap_or_default();
                vec![Err(Error::Scripted(format!(
                    "script exhausted: request #{n} has no scripted answer (last message: {last:?})"
                )))]
            }
            Some(Turn::Text(t)) => text_events(&request, &t).into_iter().map(Ok).collect(),
            Some(Turn::Json(v)) => text_events(&request, &v.to_string())
                .into_iter()
                .map(Ok)
                .collect(),
            Some(Turn::ToolCall { name, arguments }) => vec![
                Ok(StreamEvent::ToolCallDelta {
                    index: 0,
                    id: Some(format!("call_{n}")),
                    name: Some(name),
                    arguments: arguments.to_string(),
                }),
                Ok(usage(&request, &arguments.to_string())),
                Ok(StreamEvent::Finish {
                    reason: FinishReason::ToolCalls,
                }),
            ],
            Some(Turn::Events(events)) => events.into_iter().map(Ok).collect(),
            Some(Turn::HttpError { status, message }) => vec![Err(Error::Http {
                provider: "scripted".into(),
                status,
                message,
                retry_after: None,
            })],
            Some(Turn::Cut(events)) => events
                .into_iter()
                .map(Ok)
                .chain([Err(Error::StreamCut {
                    provider: "scripted".into(),
                    received: "a scripted cut".into(),
                })])
                .collect(),
        };
        let items = if cancel.is_cancelled() {
            vec![Err(Error::Cancelled)]
        } else {
            items
        };
        Box::pin(futures::stream::iter(items))
    }
}
