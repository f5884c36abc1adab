//! OpenAI-compatible chat completions (`POST {base_url}/chat/completions`, SSE).
//!
//! One implementation for every server speaking this format — OpenAI, Ollama, vLLM,
//! llama.cpp server, TabbyAPI, LM Studio, OpenRouter — which differ only in configuration
//! (base URL, key variable, model, headers, structured-output mode).

use futures::future::BoxFuture;
use serde_json::{Map, Value, json};
use tokio_util::sync::CancellationToken;

use crate::http::{Decoded, Endpoint, KeyHeader, StreamHandler, stream_error};
use crate::openai_wire::{arguments_text, finish_reason};
use crate::provider::{ChatStream, ModelProvider, ProviderInfo, spawn_stream};
use crate::sse::{SseDecoder, SseEvent};
use crate::structured::{StructuredMode, schema_instruction};
use crate::tokens::TokenCount;
use crate::types::{
    ChatRequest, FinishReason, Message, Role, StreamEvent, ToolChoice, ToolSpec, Usage,
};
use crate::window::{ContextWindow, Window};
use crate::{Error, Result};

/// An OpenAI-compatible endpoint.
pub struct OpenAiProvider {
    info: ProviderInfo,
    window: Window,
    endpoint: Endpoint,
    structured: StructuredMode,
    default_max_tokens: Option<u32>,
    default_temperature: Option<f32>,
}

impl OpenAiProvider {
    pub(crate) fn new(
        info: ProviderInfo,
        endpoint: Endpoint,
        structured: StructuredMode,
        default_max_tokens: Option<u32>,
        default_temperature: Option<f32>,
    ) -> Self {
        Self {
            window: Window::new(endpoint.clone(), KeyHeader::Bearer, &info),
            info,
            endpoint,
            structured,
            default_max_tokens,
            default_temperature,
        }
    }

    /// OpenAI itself takes `max_completion_tokens` (its reasoning models reject `max_tokens`);
    /// compatible servers take `max_tokens`.
    fn max_tokens_field(&self) -> &'static str {
        if self.endpoint.base_url.contains("api.openai.com") {
            "max_completion_tokens"
        } else {
            "max_tokens"
        }
    }

    /// The JSON body sent for `request` (public for tests and `--dry-run` style tooling), its
    /// objects' keys sorted ([`trellis_protocol::canonical`]).
    pub fn request_body(&self, request: &ChatRequest) -> Value {
        let mut messages: Vec<Message> = request.messages.clone();
        let mut body = Map::new();
        body.insert("model".into(), json!(self.info.model));
        if let Some(format) = &request.response_format {
            match self.structured {
                StructuredMode::Native => {
                    body.insert(
                        "response_format".into(),
                        json!({
                            "type": "json_schema",
                            "json_schema": {"name": format.name, "schema": format.schema, "strict": false},
                        }),
                    );
                }
                StructuredMode::JsonObject => {
                    body.insert("response_format".into(), json!({"type": "json_object"}));
                    add_instruction(&mut messages, &schema_instruction(&format.schema));
                }
                StructuredMode::Prompt | StructuredMode::Tool => {
                    add_instruction(&mut messages, &schema_instruction(&format.schema));
                }
            }
        }
        body.insert(
            "messages".into(),
            Value::Array(messages.iter().map(wire_message).collect()),
        );
        if !request.tools.is_empty() {
            // A choice among some tools sends only those (servers differ in what else they
            // accept); one of them is named.
            let callable = request.tool_choice.callable(&request.tools);
            let tools: Vec<Value> = callable.iter().map(|t| function_tool(t)).collect();
            body.insert("tools".into(), Value::Array(tools));
            if request.tool_choice.requires_call(&request.tools) {
                let choice = match (&request.tool_choice, callable.as_slice()) {
                    (ToolChoice::OneOf(_), [one]) => {
                        json!({"type": "function", "function": {"name": one.name}})
                    }
                    _ => json!("required"),
                };
                body.insert("tool_choice".into(), choice);
            }
        }
        if let Some(n) = request.max_tokens.or(self.default_max_tokens) {
            body.insert(self.max_tokens_field().into(), json!(n));
        }
        if let Some(t) = request.temperature.or(self.default_temperature) {
            body.insert("temperature".into(), json!(t));
        }
        if let Some(seed) = request.seed {
            body.insert("seed".into(), json!(seed));
        }
        if let Some(p) = request.frequency_penalty.filter(|p| *p != 0.0) {
            body.insert("frequency_penalty".into(), json!(p));
        }
        if !request.stop.is_empty() {
            body.insert("stop".into(), json!(request.stop));
        }
        body.insert("stream".into(), json!(true));
        body.insert("stream_options".into(), json!({"include_usage": true}));
        // Servers render the tool and answer schemas into the model's prompt in the order
        // they arrive: sorted, whichever way serde_json keeps maps in this build.
        trellis_protocol::canonical::canonical(Value::Object(body))
    }
}

/// A tool in the OpenAI function shape (`{"type": "function", "function": {name,
/// description, parameters}}`), which Ollama's native API takes too.
pub(crate) fn function_tool(t: &ToolSpec) -> Value {
    json!({"type": "function", "function": {
        "name": t.name, "description": t.description, "parameters": t.parameters,
    }})
}

/// Puts a structured-output instruction at the end of the system prompt (or adds one).
pub(crate) fn add_instruction(messages: &mut Vec<Message>, instruction: &str) {
    match messages.iter_mut().find(|m| m.role == Role::System) {
        Some(m) => {
            m.content.push_str("\n\n");
            m.content.push_str(instruction);
        }
        None => messages.insert(0, Message::system(instruction)),
    }
}

fn wire_message(m: &Message) -> Value {
    let mut o = Map::new();
    o.insert("role".into(), json!(m.role.as_str()));
    match m.role {
        Role::Assistant if !m.tool_calls.is_empty() => {
            let content = if m.content.is_empty() {
                Value::Null
            } else {
                json!(m.content)
            };
            o.insert("content".into(), content);
            let calls: Vec<Value> = m
                .tool_calls
                .iter()
                .map(|c| {
                    json!({"id": c.id, "type": "function",
                           "function": {"name": c.name, "arguments": c.arguments}})
                })
                .collect();
            o.insert("tool_calls".into(), Value::Array(calls));
        }
        Role::Tool => {
            o.insert("content".into(), json!(m.content));
            o.insert(
                "tool_call_id".into(),
                json!(m.tool_call_id.clone().unwrap_or_default()),
            );
        }
        _ => {
            o.insert("content".into(), json!(m.content));
        }
    }
    Value::Object(o)
}

impl ModelProvider for OpenAiProvider {
    fn info(&self) -> &ProviderInfo {
        self.window.info().unwrap_or(&self.info)
    }

    fn context_window(&self) -> BoxFuture<'_, Option<ContextWindow>> {
        Box::pin(async move { Some(self.window.get(&self.info).await) })
    }

    fn count_tokens(&self, request: &ChatRequest) -> Result<TokenCount> {
        Ok(crate::tokens::count_openai(&self.info.model, request))
    }

    fn stream(&self, request: ChatRequest, cancel: CancellationToken) -> ChatStream {
        let body = self.request_body(&request);
        let endpoint = self.endpoint.clone();
        spawn_stream(&self.info.profile, move |tx| async move {
            let mut decoder = ChunkDecoder {
                profile: endpoint.profile.clone(),
                finish: None,
            };
            endpoint
                .stream(
                    "chat/completions",
                    KeyHeader::Bearer,
                    &[],
                    &body,
                    &cancel,
                    &tx,
                    SseDecoder::new(),
                    &mut decoder,
                )
                .await
        })
    }
}

/// Decodes `chat.completion.chunk` events.
struct ChunkDecoder {
    profile: String,
    finish: Option<FinishReason>,
}

impl ChunkDecoder {
    fn protocol(&self, message: String, overloaded: bool) -> Error {
        Error::Protocol {
            provider: self.profile.clone(),
            message,
            overloaded,
        }
    }
}

impl StreamHandler<SseEvent> for ChunkDecoder {
    fn event(&mut self, event: SseEvent) -> Result<Decoded> {
        let data = event.data.trim();
        if data == "[DONE]" {
            return Ok(Decoded {
                events: vec![StreamEvent::Finish {
                    reason: self.finish.take().unwrap_or(FinishReason::Stop),
                }],
                done: true,
            });
        }
        let chunk: Value = serde_json::from_str(data)
            .map_err(|e| self.protocol(format!("malformed stream chunk ({e}): {data}"), false))?;
        if let Some(err) = chunk.get("error") {
            let message = err
                .get("message")
                .and_then(Value::as_str)
                .map_or_else(|| err.to_string(), str::to_string);
            let code = err.get("code").and_then(Value::as_u64);
            return Err(stream_error(&self.profile, message, code));
        }
        let mut events = Vec::new();
        if let Some(choice) = chunk.pointer("/choices/0") {
            let delta = choice.get("delta").unwrap_or(&Value::Null);
            for key in ["reasoning_content", "reasoning"] {
                if let Some(t) = delta.get(key).and_then(Value::as_str)
                    && !t.is_empty()
                {
                    events.push(StreamEvent::ThinkingDelta { text: t.into() });
                }
            }
            if let Some(t) = delta.get("content").and_then(Value::as_str)
                && !t.is_empty()
            {
                events.push(StreamEvent::TextDelta { text: t.into() });
            }
            if let Some(calls) = delta.get("tool_calls").and_then(Value::as_array) {
                for (pos, call) in calls.iter().enumerate() {
                    let index = call
                        .get("index")
                        .and_then(Value::as_u64)
                        .map_or(pos, |i| i as usize);
                    let function = call.get("function").unwrap_or(&Value::Null);
                    events.push(StreamEvent::ToolCallDelta {
                        index,
                        id: call.get("id").and_then(Value::as_str).map(str::to_string),
                        name: function
                            .get("name")
                            .and_then(Value::as_str)
                            .map(str::to_string),
                        // Some servers send the arguments as an object, not JSON text.
                        arguments: arguments_text(
                            function.get("arguments").cloned().unwrap_or_default(),
                        ),
                    });
                }
            }
            if let Some(reason) = choice.get("finish_reason").and_then(Value::as_str) {
                self.finish = Some(finish_reason(reason));
            }
        }
        if let Some(u) = chunk.get("usage").filter(|u| u.is_object()) {
            let n = |p: &str| u.pointer(p).and_then(Value::as_u64).unwrap_or(0);
            events.push(StreamEvent::Usage {
                usage: Usage {
                    prompt_tokens: n("/prompt_tokens"),
                    completion_tokens: n("/completion_tokens"),
                    cached_prompt_tokens: n("/prompt_tokens_details/cached_tokens"),
                },
            });
        }
        Ok(Decoded {
            events,
            done: false,
        })
    }

    fn eof(&mut self) -> Option<Vec<StreamEvent>> {
        // Some servers close the body after the finishing chunk without `[DONE]`.
        self.finish
            .take()
            .map(|reason| vec![StreamEvent::Finish { reason }])
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::provider::ProviderKind;

    fn provider(base_url: &str) -> OpenAiProvider {
        let endpoint = Endpoint {
            profile: "p".into(),
            client: crate::http::client(std::time::Duration::from_secs(1), None).unwrap(),
            base_url: base_url.into(),
            api_key_env: None,
            headers: reqwest::header::HeaderMap::new(),
        };
        let info = ProviderInfo {
            profile: "p".into(),
            kind: ProviderKind::Openai,
            model: "m".into(),
            native_structured_output: true,
            context_window: None,
        };
        OpenAiProvider::new(info, endpoint, StructuredMode::Native, Some(100), None)
    }

    #[test]
    fn schemas_reach_the_server_with_sorted_keys_whatever_the_map_order() {
        let mut props = serde_json::Map::new();
        props.insert("zeta".into(), json!({"type": "string"}));
        props.insert("alpha".into(), json!({"type": "integer"}));
        let schema = json!({"type": "object", "properties": Value::Object(props)});
        let req = ChatRequest {
            tools: vec![crate::types::ToolSpec {
                name: "t".into(),
                description: "d".into(),
                parameters: schema.clone(),
            }],
            response_format: Some(crate::types::ResponseFormat {
                name: "r".into(),
                schema,
            }),
            ..ChatRequest::new(vec![Message::user("hi")])
        };
        let body = serde_json::to_string(&provider("http://x/v1").request_body(&req)).unwrap();
        let alpha: Vec<_> = body.match_indices("\"alpha\"").map(|(i, _)| i).collect();
        let zeta: Vec<_> = body.match_indices("\"zeta\"").map(|(i, _)| i).collect();
        assert_eq!(alpha.len(), 2, "{body}");
        assert!(alpha.iter().zip(&zeta).all(|(a, z)| a < z), "{body}");
    }

    #[test]
    fn tool_arguments_given_as_an_object_are_kept_as_json_text() {
        let mut d = ChunkDecoder {
            profile: "p".into(),
            finish: None,
        };
        let data = r#"{"choices":[{"index":0,"delta":{"tool_calls":[{"id":"c1","function":{"name":"f","arguments":{"a":1}}}]}}]}"#;
        let out = d
            .event(SseEvent {
                event: None,
                data: data.into(),
            })
            .unwrap();
        assert_eq!(
            out.events,
            vec![StreamEvent::ToolCallDelta {
                index: 0,
                id: Some("c1".into()),
                name: Some("f".into()),
                arguments: r#"{"a":1}"#.into(),
            }]
        );
    }

    #[test]
    fn max_tokens_field_depends_on_the_server() {
        let req = ChatRequest::new(vec![Message::user("x")]);
        let openai = provider("https://api.openai.com/v1").request_body(&req);
        assert_eq!(openai["max_completion_tokens"], 100);
        assert!(openai.get("max_tokens").is_none());
        let ollama = provider("http://localhost:11434/v1").request_body(&req);
        assert_eq!(ollama["max_tokens"], 100);
    }
}
