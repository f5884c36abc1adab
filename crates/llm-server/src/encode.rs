//! Provider stream events → OpenAI chunks (`data: {…}\n\n`, `data: [DONE]`), and a
//! collected completion → the whole response.
//!
//! Tool-call ids are the server's (`call_<response>_<index>`): the embedded model numbers its
//! calls from zero in every answer, and a conversation whose turns repeat an id confuses the
//! clients that match results to calls by id.

use std::collections::BTreeSet;

use axum::body::Bytes;
use trellis_llm::openai_wire::{
    ChatCompletion, ChatCompletionChunk, Choice, ChunkChoice, Delta, ErrorBody, FunctionCall,
    FunctionDelta, ResponseMessage, ToolCall, ToolCallDelta, WireUsage, finish_reason_name,
};
use trellis_llm::{Completion, StreamEvent, Usage};

/// What every chunk of one response shares.
#[derive(Clone, Debug)]
pub(crate) struct Head {
    pub(crate) id: String,
    pub(crate) model: String,
    pub(crate) created: u64,
}

impl Head {
    fn call_id(&self, index: usize) -> String {
        let suffix = self.id.strip_prefix("chatcmpl-").unwrap_or(&self.id);
        format!("call_{suffix}_{index}")
    }
}

/// One SSE event with a JSON payload.
pub(crate) fn sse<T: serde::Serialize>(payload: &T) -> Bytes {
    // Serialising these plain structs cannot fail; an empty object keeps the stream valid.
    let json = serde_json::to_string(payload).unwrap_or_else(|_| "{}".into());
    Bytes::from(format!("data: {json}\n\n"))
}

/// The end-of-stream marker.
pub(crate) fn done() -> Bytes {
    Bytes::from_static(b"data: [DONE]\n\n")
}

/// An SSE comment (clients ignore it; it keeps the connection visibly alive).
pub(crate) fn comment(text: &str) -> Bytes {
    Bytes::from(format!(": {text}\n\n"))
}

/// An error inside a stream (after the 200 was sent): the OpenAI SDKs raise it.
pub(crate) fn error_event(body: &ErrorBody) -> Bytes {
    sse(body)
}

/// Turns one response's stream events into chunks.
pub(crate) struct Encoder {
    head: Head,
    include_usage: bool,
    calls: BTreeSet<usize>,
    /// The provider's usage, when it reported one.
    pub(crate) usage: Option<Usage>,
    /// The finish reason, once the provider finished.
    pub(crate) finish: Option<String>,
}

impl Encoder {
    pub(crate) fn new(head: Head, include_usage: bool) -> Self {
        Self {
            head,
            include_usage,
            calls: BTreeSet::new(),
            usage: None,
            finish: None,
        }
    }

    fn chunk(&self, delta: Delta, finish_reason: Option<String>) -> Bytes {
        sse(&ChatCompletionChunk {
            id: self.head.id.clone(),
            object: "chat.completion.chunk".into(),
            created: self.head.created,
            model: self.head.model.clone(),
            choices: vec![ChunkChoice {
                index: 0,
                delta,
                finish_reason,
            }],
            usage: None,
        })
    }

    /// The first chunk: the role, as OpenAI sends it.
    pub(crate) fn start(&self) -> Bytes {
        self.chunk(
            Delta {
                role: Some("assistant".into()),
                content: Some(String::new()),
                ..Delta::default()
            },
            None,
        )
    }

    /// The chunk for one event, if it makes one.
    pub(crate) fn event(&mut self, event: StreamEvent) -> Option<Bytes> {
        let delta = match event {
            StreamEvent::TextDelta { text } if !text.is_empty() => Delta {
                content: Some(text),
                ..Delta::default()
            },
            StreamEvent::ThinkingDelta { text } if !text.is_empty() => Delta {
                reasoning_content: Some(text),
                ..Delta::default()
            },
            StreamEvent::ToolCallDelta {
                index,
                name,
                arguments,
                ..
            } => {
                let first = self.calls.insert(index);
                Delta {
                    tool_calls: Some(vec![ToolCallDelta {
                        index: u32::try_from(index).unwrap_or(u32::MAX),
                        id: first.then(|| self.head.call_id(index)),
                        kind: first.then(|| "function".into()),
                        function: FunctionDelta {
                            name: if first {
                                Some(name.unwrap_or_default())
                            } else {
                                None
                            },
                            arguments,
                        },
                    }]),
                    ..Delta::default()
                }
            }
            StreamEvent::Usage { usage } => {
                self.usage = Some(usage);
                return None;
            }
            StreamEvent::Finish { reason } => {
                let name = finish_reason_name(&reason).to_string();
                self.finish = Some(name.clone());
                return Some(self.chunk(Delta::default(), Some(name)));
            }
            StreamEvent::TextDelta { .. }
            | StreamEvent::ThinkingDelta { .. }
            | StreamEvent::ThinkingSignature { .. }
            | StreamEvent::Progress { .. } => return None,
        };
        Some(self.chunk(delta, None))
    }

    /// The usage chunk (when asked for) and `[DONE]`.
    pub(crate) fn end(&self, usage: Usage) -> Vec<Bytes> {
        let mut out = Vec::with_capacity(2);
        if self.include_usage {
            out.push(sse(&ChatCompletionChunk {
                id: self.head.id.clone(),
                object: "chat.completion.chunk".into(),
                created: self.head.created,
                model: self.head.model.clone(),
                choices: Vec::new(),
                usage: Some(WireUsage::from(usage)),
            }));
        }
        out.push(done());
        out
    }
}

/// The whole response for a collected completion.
pub(crate) fn whole(head: &Head, completion: Completion, usage: Usage) -> ChatCompletion {
    let tool_calls: Vec<ToolCall> = completion
        .tool_calls
        .into_iter()
        .enumerate()
        .map(|(i, c)| ToolCall {
            id: head.call_id(i),
            kind: "function".into(),
            function: FunctionCall {
                name: c.name,
                arguments: c.arguments,
            },
        })
        .collect();
    let content = if completion.text.is_empty() && !tool_calls.is_empty() {
        None
    } else {
        Some(completion.text)
    };
    ChatCompletion {
        id: head.id.clone(),
        object: "chat.completion".into(),
        created: head.created,
        model: head.model.clone(),
        choices: vec![Choice {
            index: 0,
            message: ResponseMessage {
                role: "assistant".into(),
                content,
                tool_calls: (!tool_calls.is_empty()).then_some(tool_calls),
                reasoning_content: completion.thinking.map(|t| t.text),
            },
            finish_reason: completion
                .finish
                .as_ref()
                .map(|r| finish_reason_name(r).to_string()),
        }],
        usage: Some(WireUsage::from(usage)),
    }
}

#[cfg(test)]
mod tests {
    use trellis_llm::FinishReason;

    use super::*;

    fn head() -> Head {
        Head {
            id: "chatcmpl-ab000001".into(),
            model: "local".into(),
            created: 7,
        }
    }

    fn json(b: &Bytes) -> serde_json::Value {
        let s = std::str::from_utf8(b).unwrap();
        let data = s
            .strip_prefix("data: ")
            .unwrap()
            .strip_suffix("\n\n")
            .unwrap();
        serde_json::from_str(data).unwrap()
    }

    #[test]
    fn a_tool_call_streams_its_id_and_name_once() {
        let mut e = Encoder::new(head(), true);
        let first = e
            .event(StreamEvent::ToolCallDelta {
                index: 0,
                id: Some("call_0".into()),
                name: Some("ls".into()),
                arguments: "{\"pa".into(),
            })
            .unwrap();
        let more = e
            .event(StreamEvent::ToolCallDelta {
                index: 0,
                id: None,
                name: None,
                arguments: "th\":1}".into(),
            })
            .unwrap();
        let first = json(&first);
        let call = &first["choices"][0]["delta"]["tool_calls"][0];
        assert_eq!(call["id"], "call_ab000001_0");
        assert_eq!(call["type"], "function");
        assert_eq!(call["function"]["name"], "ls");
        let more = json(&more);
        let call = &more["choices"][0]["delta"]["tool_calls"][0];
        assert!(call.get("id").is_none() && call["function"].get("name").is_none());
        assert_eq!(call["function"]["arguments"], "th\":1}");
        let fin = json(
            &e.event(StreamEvent::Finish {
                reason: FinishReason::ToolCalls,
            })
            .unwrap(),
        );
        assert_eq!(fin["choices"][0]["finish_reason"], "tool_calls");
        let end = e.end(Usage {
            prompt_tokens: 3,
            completion_tokens: 2,
            cached_prompt_tokens: 0,
        });
        let usage = json(&end[0]);
        assert_eq!(usage["choices"], serde_json::json!([]));
        assert_eq!(usage["usage"]["total_tokens"], 5);
        assert_eq!(&end[1][..], b"data: [DONE]\n\n");
    }
}
