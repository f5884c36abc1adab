//! Decoding the lines of an `/api/chat` stream (`api/types.go` `ChatResponse`) into
//! [`StreamEvent`]s, as the OpenAI-compatible provider decodes its chunks: thinking and text
//! deltas, tool calls, then the usage and the finish from the line with `"done": true`.

use serde_json::Value;

use crate::http::{Decoded, StreamHandler, stream_error};
use crate::openai_wire::{arguments_text, finish_reason};
use crate::types::{FinishReason, StreamEvent, Usage};
use crate::{Error, Result};

/// Decodes one response's lines.
pub(super) struct ChatDecoder {
    profile: String,
    /// Tool calls so far: the next one's index.
    calls: usize,
}

impl ChatDecoder {
    pub(super) fn new(profile: &str) -> Self {
        Self {
            profile: profile.to_string(),
            calls: 0,
        }
    }

    /// A call's events: Ollama sends each call whole, its arguments as an object. Recent
    /// versions give it an id; older ones none, so the call's position names it (`call_0`,
    /// `call_1`, … — the same in every replay of the response, as the embedded model's).
    fn tool_call(&mut self, call: &Value) -> StreamEvent {
        let index = self.calls;
        self.calls += 1;
        let function = call.get("function").unwrap_or(&Value::Null);
        let id = call
            .get("id")
            .and_then(Value::as_str)
            .filter(|id| !id.is_empty())
            .map_or_else(|| format!("call_{index}"), str::to_string);
        StreamEvent::ToolCallDelta {
            index,
            id: Some(id),
            name: function
                .get("name")
                .and_then(Value::as_str)
                .map(str::to_string),
            arguments: arguments_text(function.get("arguments").cloned().unwrap_or_default()),
        }
    }

    /// The usage and finish of the last line.
    fn done(&self, line: &Value, events: &mut Vec<StreamEvent>) {
        let count = |key: &str| line.get(key).and_then(Value::as_u64);
        // Ollama leaves out a count of 0.
        let (prompt, eval) = (count("prompt_eval_count"), count("eval_count"));
        if prompt.is_some() || eval.is_some() {
            events.push(StreamEvent::Usage {
                usage: Usage {
                    prompt_tokens: prompt.unwrap_or(0),
                    completion_tokens: eval.unwrap_or(0),
                    cached_prompt_tokens: 0,
                },
            });
        }
        // Older versions send no `done_reason`. Ollama says `stop` after tool calls too; its
        // own OpenAI-compatible layer (`openai/openai.go`) reports those as `tool_calls`.
        let reason = match line.get("done_reason").and_then(Value::as_str) {
            Some(name) => finish_reason(name),
            None => FinishReason::Stop,
        };
        let reason = match reason {
            FinishReason::Stop if self.calls > 0 => FinishReason::ToolCalls,
            other => other,
        };
        events.push(StreamEvent::Finish { reason });
    }
}

impl StreamHandler<String> for ChatDecoder {
    fn event(&mut self, line: String) -> Result<Decoded> {
        let v: Value = serde_json::from_str(&line).map_err(|e| Error::Protocol {
            provider: self.profile.clone(),
            message: format!("malformed stream line ({e}): {line}"),
            overloaded: false,
        })?;
        if let Some(err) = v.get("error") {
            let message = err.as_str().map_or_else(|| err.to_string(), str::to_string);
            let status = v.get("status").and_then(Value::as_u64);
            return Err(stream_error(&self.profile, message, status));
        }
        let mut events = Vec::new();
        let message = v.get("message").unwrap_or(&Value::Null);
        let text = |key: &str| {
            message
                .get(key)
                .and_then(Value::as_str)
                .filter(|t| !t.is_empty())
                .map(str::to_string)
        };
        if let Some(text) = text("thinking") {
            events.push(StreamEvent::ThinkingDelta { text });
        }
        if let Some(text) = text("content") {
            events.push(StreamEvent::TextDelta { text });
        }
        if let Some(calls) = message.get("tool_calls").and_then(Value::as_array) {
            for call in calls {
                let event = self.tool_call(call);
                events.push(event);
            }
        }
        let done = v.get("done").and_then(Value::as_bool) == Some(true);
        if done {
            self.done(&v, &mut events);
        }
        Ok(Decoded { events, done })
    }

    /// A body that ends without the `"done": true` line is cut.
    fn eof(&mut self) -> Option<Vec<StreamEvent>> {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn decode(lines: &[&str]) -> Result<Vec<StreamEvent>> {
        let mut d = ChatDecoder::new("o");
        let mut events = Vec::new();
        for line in lines {
            events.extend(d.event((*line).to_string())?.events);
        }
        Ok(events)
    }

    #[test]
    fn thinking_text_and_the_last_line() {
        let events = decode(&[
            r#"{"model":"qwen3","created_at":"2026-01-05T10:00:00Z","message":{"role":"assistant","content":"","thinking":"Hm."},"done":false}"#,
            r#"{"model":"qwen3","created_at":"2026-01-05T10:00:01Z","message":{"role":"assistant","content":"Hi"},"done":false}"#,
            r#"{"model":"qwen3","created_at":"2026-01-05T10:00:02Z","message":{"role":"assistant","content":""},"done":true,"done_reason":"length","total_duration":1,"prompt_eval_count":26,"eval_count":282}"#,
        ])
        .unwrap();
        assert_eq!(
            events,
            vec![
                StreamEvent::ThinkingDelta { text: "Hm.".into() },
                StreamEvent::TextDelta { text: "Hi".into() },
                StreamEvent::Usage {
                    usage: Usage {
                        prompt_tokens: 26,
                        completion_tokens: 282,
                        cached_prompt_tokens: 0
                    }
                },
                StreamEvent::Finish {
                    reason: FinishReason::Length
                },
            ]
        );
    }

    #[test]
    fn calls_keep_ollamas_ids_or_get_their_position_and_stop_means_tool_calls() {
        let events = decode(&[
            r#"{"message":{"role":"assistant","content":"","tool_calls":[{"function":{"index":0,"name":"a","arguments":{"x":1}}}]},"done":false}"#,
            r#"{"message":{"role":"assistant","content":"","tool_calls":[{"id":"call_k3x9","function":{"index":0,"name":"b","arguments":{}}}]},"done":false}"#,
            r#"{"message":{"role":"assistant","content":""},"done":true}"#,
        ])
        .unwrap();
        assert_eq!(
            events,
            vec![
                StreamEvent::ToolCallDelta {
                    index: 0,
                    id: Some("call_0".into()),
                    name: Some("a".into()),
                    arguments: r#"{"x":1}"#.into(),
                },
                StreamEvent::ToolCallDelta {
                    index: 1,
                    id: Some("call_k3x9".into()),
                    name: Some("b".into()),
                    arguments: "{}".into(),
                },
                StreamEvent::Finish {
                    reason: FinishReason::ToolCalls
                },
            ]
        );
    }

    #[test]
    fn an_error_line_and_a_malformed_line_are_errors() {
        let err = decode(&[r#"{"error":"an error was encountered while running the model"}"#])
            .unwrap_err();
        assert!(
            matches!(&err, Error::Protocol { message, overloaded: false, .. }
                if message == "an error was encountered while running the model"),
            "{err}"
        );
        let err = decode(&["{\"message\":"]).unwrap_err();
        assert!(err.to_string().contains("malformed stream line"), "{err}");
    }
}
