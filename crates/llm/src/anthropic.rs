//! The Anthropic Messages API (`POST {base_url}/messages`, SSE), with tools, extended
//! thinking (thinking blocks and their signatures are kept and sent back), and structured
//! output through a forced tool call whose input schema is the requested schema.

use std::collections::BTreeMap;

use futures::future::BoxFuture;
use serde_json::{Map, Value, json};
use tokio_util::sync::CancellationToken;

use crate::http::{Decoded, Endpoint, KeyHeader, StreamHandler};
use crate::provider::{ChatStream, ModelProvider, ProviderInfo, spawn_stream};
use crate::sse::{SseDecoder, SseEvent};
use crate::structured::{StructuredMode, schema_instruction};
use crate::types::{ChatRequest, FinishReason, Message, Role, StreamEvent, ToolChoice, Usage};
use crate::window::{ContextWindow, Window};
use crate::{Error, Result};

/// The API version header value.
pub const ANTHROPIC_VERSION: &str = "2023-06-01";

/// An Anthropic Messages endpoint.
pub struct AnthropicProvider {
    info: ProviderInfo,
    window: Window,
    endpoint: Endpoint,
    structured: StructuredMode,
    default_max_tokens: u32,
    default_temperature: Option<f32>,
}

impl AnthropicProvider {
    pub(crate) fn new(
        info: ProviderInfo,
        endpoint: Endpoint,
        structured: StructuredMode,
        default_max_tokens: u32,
        default_temperature: Option<f32>,
    ) -> Self {
        Self {
            window: Window::new(endpoint.clone(), KeyHeader::Named("x-api-key"), &info),
            info,
            endpoint,
            structured,
            default_max_tokens,
            default_temperature,
        }
    }

    /// The name of the forced tool when structured output goes through a tool call.
    fn structured_tool(&self, request: &ChatRequest) -> Option<String> {
        let format = request.response_format.as_ref()?;
        let object = format.schema.get("type").and_then(Value::as_str) == Some("object");
        let tool_mode = matches!(
            self.structured,
            StructuredMode::Native | StructuredMode::Tool
        );
        // Anthropic refuses a forced tool together with extended thinking.
        (tool_mode && object && request.thinking_budget.is_none()).then(|| format.name.clone())
    }

    /// The JSON body sent for `request`.
    pub fn request_body(&self, request: &ChatRequest) -> Value {
        let structured_tool = self.structured_tool(request);
        let mut system: Vec<String> = request
            .messages
            .iter()
            .filter(|m| m.role == Role::System)
            .map(|m| m.content.clone())
            .collect();
        if let (Some(format), None) = (&request.response_format, &structured_tool) {
            system.push(schema_instruction(&format.schema));
        }
        let mut body = Map::new();
        body.insert("model".into(), json!(self.info.model));
        body.insert(
            "max_tokens".into(),
            json!(request.max_tokens.unwrap_or(self.default_max_tokens)),
        );
        if !system.is_empty() {
            body.insert("system".into(), json!(system.join("\n\n")));
        }
        body.insert(
            "messages".into(),
            Value::Array(wire_messages(&request.messages)),
        );
        // A forced choice among some tools sends only those; with thinking nothing is forced
        // (Anthropic refuses it), so all stay offered.
        let forced =
            request.tool_choice.requires_call(&request.tools) && request.thinking_budget.is_none();
        let offered = if forced {
            request.tool_choice.callable(&request.tools)
        } else {
            request.tools.iter().collect()
        };
        let mut tools: Vec<Value> = offered
            .iter()
            .map(|t| json!({"name": t.name, "description": t.description, "input_schema": t.parameters}))
            .collect();
        if let (Some(name), Some(format)) = (&structured_tool, &request.response_format) {
            tools.push(json!({
                "name": name,
                "description": "Reply with the answer, as this tool's input.",
                "input_schema": format.schema,
            }));
            body.insert("tool_choice".into(), json!({"type": "tool", "name": name}));
        } else if forced {
            let choice = match (&request.tool_choice, offered.as_slice()) {
                (ToolChoice::OneOf(_), [one]) => json!({"type": "tool", "name": one.name}),
                _ => json!({"type": "any"}),
            };
            body.insert("tool_choice".into(), choice);
        }
        if !tools.is_empty() {
            body.insert("tools".into(), Value::Array(tools));
        }
        if let Some(budget) = request.thinking_budget {
            body.insert(
                "thinking".into(),
                json!({"type": "enabled", "budget_tokens": budget}),
            );
        } else if let Some(t) = request.temperature.or(self.default_temperature) {
            // Anthropic rejects a temperature together with thinking.
            body.insert("temperature".into(), json!(t));
        }
        if !request.stop.is_empty() {
            body.insert("stop_sequences".into(), json!(request.stop));
        }
        body.insert("stream".into(), json!(true));
        // Sorted keys: the schemas reach the model in the same order in every build.
        trellis_protocol::canonical::canonical(Value::Object(body))
    }
}

/// Converts the conversation: system messages go to `system`; tool results become
/// `tool_result` blocks of a user turn; consecutive turns of one role are merged.
fn wire_messages(messages: &[Message]) -> Vec<Value> {
    let mut out: Vec<(String, Vec<Value>)> = Vec::new();
    for m in messages {
        let (role, blocks) = match m.role {
            Role::System => continue,
            Role::User => ("user", vec![json!({"type": "text", "text": m.content})]),
            Role::Tool => (
                "user",
                vec![json!({
                    "type": "tool_result",
                    "tool_use_id": m.tool_call_id.clone().unwrap_or_default(),
                    "content": m.content,
                })],
            ),
            Role::Assistant => {
                let mut blocks = Vec::new();
                if let Some(t) = &m.thinking
                    && let Some(sig) = &t.signature
                {
                    blocks.push(json!({"type": "thinking", "thinking": t.text, "signature": sig}));
                }
                if !m.content.is_empty() {
                    blocks.push(json!({"type": "text", "text": m.content}));
                }
                for c in &m.tool_calls {
                    blocks.push(json!({"type": "tool_use", "id": c.id, "name": c.name,
                                       "input": c.arguments_object()}));
                }
                ("assistant", blocks)
            }
        };
        match out.last_mut() {
            Some((r, b)) if r == role => b.extend(blocks),
            _ => out.push((role.to_string(), blocks)),
        }
    }
    out.into_iter()
        .map(|(role, blocks)| json!({"role": role, "content": blocks}))
        .collect()
}

impl ModelProvider for AnthropicProvider {
    fn info(&self) -> &ProviderInfo {
        self.window.info().unwrap_or(&self.info)
    }

    fn context_window(&self) -> BoxFuture<'_, Option<ContextWindow>> {
        Box::pin(async move { Some(self.window.get(&self.info).await) })
    }

    fn stream(&self, request: ChatRequest, cancel: CancellationToken) -> ChatStream {
        let body = self.request_body(&request);
        let structured_tool = self.structured_tool(&request);
        let endpoint = self.endpoint.clone();
        spawn_stream(&self.info.profile, move |tx| async move {
            let mut decoder = EventDecoder {
                profile: endpoint.profile.clone(),
                structured_tool,
                blocks: BTreeMap::new(),
                tools: 0,
                usage: Usage::default(),
                finish: None,
            };
            let version = [("anthropic-version", ANTHROPIC_VERSION)];
            endpoint
                .stream(
                    "messages",
                    KeyHeader::Named("x-api-key"),
                    &version,
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

/// What a content block index holds.
enum Block {
    Text,
    Thinking,
    /// A tool call, by its position among tool calls.
    Tool(usize),
    /// The forced structured-output tool: its input is the answer text.
    Answer,
    Other,
}

struct EventDecoder {
    profile: String,
    structured_tool: Option<String>,
    blocks: BTreeMap<u64, Block>,
    tools: usize,
    usage: Usage,
    finish: Option<FinishReason>,
}

impl StreamHandler<SseEvent> for EventDecoder {
    fn event(&mut self, event: SseEvent) -> Result<Decoded> {
        let v: Value = serde_json::from_str(&event.data).map_err(|e| Error::Protocol {
            provider: self.profile.clone(),
            message: format!("malformed event ({e}): {}", event.data),
            overloaded: false,
        })?;
        let kind = v.get("type").and_then(Value::as_str).unwrap_or_default();
        let index = v.get("index").and_then(Value::as_u64).unwrap_or(0);
        let mut events = Vec::new();
        match kind {
            "message_start" => self.start_message(&v),
            "content_block_start" => events.extend(self.start_block(index, &v)),
            "content_block_delta" => events.extend(self.block_delta(index, &v)),
            "message_delta" => events.push(self.message_delta(&v)),
            "message_stop" => {
                events.push(StreamEvent::Finish {
                    reason: self.finish.take().unwrap_or(FinishReason::Stop),
                });
                return Ok(Decoded { events, done: true });
            }
            "error" => return Err(self.stream_error(&v)),
            _ => {}
        }
        Ok(Decoded {
            events,
            done: false,
        })
    }

    fn eof(&mut self) -> Option<Vec<StreamEvent>> {
        None
    }
}

/// The unsigned integer at JSON pointer `p` of `v`.
fn uint(v: &Value, p: &str) -> Option<u64> {
    v.pointer(p).and_then(Value::as_u64)
}

impl EventDecoder {
    /// `message_start`: the prompt's tokens (cached ones included) and the first count of
    /// generated ones.
    fn start_message(&mut self, v: &Value) {
        let n = |p: &str| uint(v, p);
        self.usage.prompt_tokens = n("/message/usage/input_tokens").unwrap_or(0)
            + n("/message/usage/cache_read_input_tokens").unwrap_or(0)
            + n("/message/usage/cache_creation_input_tokens").unwrap_or(0);
        self.usage.cached_prompt_tokens = n("/message/usage/cache_read_input_tokens").unwrap_or(0);
        self.usage.completion_tokens = n("/message/usage/output_tokens").unwrap_or(0);
    }

    /// `content_block_start`: notes what block `index` holds; a tool call (other than the
    /// structured-output tool) starts with its id and name.
    fn start_block(&mut self, index: u64, v: &Value) -> Option<StreamEvent> {
        let block = v.get("content_block").unwrap_or(&Value::Null);
        let mut event = None;
        let b = match block.get("type").and_then(Value::as_str) {
            Some("text") => Block::Text,
            Some("thinking") => Block::Thinking,
            Some("tool_use") => {
                let name = block
                    .get("name")
                    .and_then(Value::as_str)
                    .unwrap_or_default();
                if self.structured_tool.as_deref() == Some(name) {
                    Block::Answer
                } else {
                    let i = self.tools;
                    self.tools += 1;
                    event = Some(StreamEvent::ToolCallDelta {
                        index: i,
                        id: block.get("id").and_then(Value::as_str).map(str::to_string),
                        name: Some(name.to_string()),
                        arguments: String::new(),
                    });
                    Block::Tool(i)
                }
            }
            _ => Block::Other,
        };
        self.blocks.insert(index, b);
        event
    }

    /// `content_block_delta`: text, thinking, a thinking signature, or a piece of a tool
    /// call's arguments (the answer text, for the structured-output tool) of block `index`.
    fn block_delta(&self, index: u64, v: &Value) -> Option<StreamEvent> {
        let delta = v.get("delta").unwrap_or(&Value::Null);
        let s = |k: &str| {
            delta
                .get(k)
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_string()
        };
        match (
            delta.get("type").and_then(Value::as_str),
            self.blocks.get(&index),
        ) {
            (Some("text_delta"), _) => Some(StreamEvent::TextDelta { text: s("text") }),
            (Some("thinking_delta"), _) => Some(StreamEvent::ThinkingDelta {
                text: s("thinking"),
            }),
            (Some("signature_delta"), _) => Some(StreamEvent::ThinkingSignature {
                signature: s("signature"),
            }),
            (Some("input_json_delta"), Some(Block::Tool(i))) => Some(StreamEvent::ToolCallDelta {
                index: *i,
                id: None,
                name: None,
                arguments: s("partial_json"),
            }),
            (Some("input_json_delta"), Some(Block::Answer)) => Some(StreamEvent::TextDelta {
                text: s("partial_json"),
            }),
            _ => None,
        }
    }

    /// `message_delta`: the final token counts (reported) and why the message ends.
    fn message_delta(&mut self, v: &Value) -> StreamEvent {
        if let Some(out) = uint(v, "/usage/output_tokens") {
            self.usage.completion_tokens = out;
        }
        if let Some(input) = uint(v, "/usage/input_tokens") {
            self.usage.prompt_tokens = self.usage.prompt_tokens.max(input);
        }
        let usage = StreamEvent::Usage { usage: self.usage };
        if let Some(reason) = v.pointer("/delta/stop_reason").and_then(Value::as_str) {
            let answered = self.blocks.values().any(|b| matches!(b, Block::Answer));
            self.finish = Some(match reason {
                "end_turn" | "stop_sequence" => FinishReason::Stop,
                "max_tokens" => FinishReason::Length,
                "tool_use" if answered && self.tools == 0 => FinishReason::Stop,
                "tool_use" => FinishReason::ToolCalls,
                "refusal" => FinishReason::ContentFilter,
                other => FinishReason::Other(other.to_string()),
            });
        }
        usage
    }

    /// An `error` event as an error (overloaded when the provider says to retry).
    fn stream_error(&self, v: &Value) -> Error {
        let etype = v
            .pointer("/error/type")
            .and_then(Value::as_str)
            .unwrap_or("error");
        let message = v
            .pointer("/error/message")
            .and_then(Value::as_str)
            .unwrap_or("unknown error");
        Error::Protocol {
            provider: self.profile.clone(),
            message: format!("{etype}: {message}"),
            overloaded: matches!(etype, "overloaded_error" | "api_error" | "rate_limit_error"),
        }
    }
}
