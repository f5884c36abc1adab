//! Ollama's native chat API (`POST <root>/api/chat`, newline-delimited JSON), which — unlike
//! its OpenAI-compatible `/v1` — takes `options`, so every request sets the model's context
//! window (`options.num_ctx`) to the one Trellis fits its prompts into ([`crate::window`]).
//!
//! The shapes are Ollama's own: `api/types.go` (`ChatRequest`, `Message`, `ToolCall`,
//! `ToolCallFunction`, `Options` with `Runner`, `ChatResponse` with `Metrics`) and
//! `docs/api.md` ("Generate a chat completion"; `docs/api/errors.mdx` for errors before and
//! inside a stream):
//!
//! - request: `{"model", "messages": [{"role", "content", "thinking"?, "tool_calls"?: [{"id"?,
//!   "function": {"name", "arguments": {…}}}], "tool_name"?, "tool_call_id"?}], "tools"?
//!   (the OpenAI function shape), "format"? (`"json"` or a JSON Schema), "options": {"num_ctx",
//!   "num_predict", "temperature", "seed", "stop", "frequency_penalty"}, "think"?, "stream"}`;
//! - response lines: `{"model", "created_at", "message": {"role", "content", "thinking"?,
//!   "tool_calls"?}, "done": false}`, the last with `"done": true`, `"done_reason"`
//!   (`stop`, `length`, …), `"prompt_eval_count"` and `"eval_count"`; an error is
//!   `{"error": "…"}` — the whole body with an HTTP error status before the stream starts,
//!   a line of the stream after.

mod stream;

use std::collections::HashMap;
use std::sync::Arc;

use futures::future::BoxFuture;
use serde_json::{Map, Value, json};
use tokio_util::sync::CancellationToken;

use crate::http::{Endpoint, KeyHeader};
use crate::ndjson::LineDecoder;
use crate::openai::{add_instruction, function_tool};
use crate::provider::{ChatStream, ModelProvider, ProviderInfo, spawn_stream};
use crate::structured::{StructuredMode, schema_instruction};
use crate::tokens::TokenCount;
use crate::types::{ChatRequest, Message, Role};
use crate::window::{ContextWindow, Window, ollama_root};
use crate::{Error, Result};

use self::stream::ChatDecoder;

/// An Ollama server, through its native API.
pub struct OllamaProvider {
    info: ProviderInfo,
    window: Arc<Window>,
    endpoint: Endpoint,
    wire: Wire,
}

impl OllamaProvider {
    /// `endpoint.base_url` may name the server (`http://localhost:11434`) or one of its APIs
    /// (`…/v1`, `…/api`); requests go to `<root>/api/chat`.
    pub(crate) fn new(
        info: ProviderInfo,
        mut endpoint: Endpoint,
        structured: StructuredMode,
        default_max_tokens: Option<u32>,
        default_temperature: Option<f32>,
    ) -> Self {
        endpoint.base_url = ollama_root(&endpoint.base_url).to_string();
        Self {
            window: Arc::new(Window::ollama_native(
                endpoint.clone(),
                KeyHeader::Bearer,
                &info,
            )),
            wire: Wire {
                model: info.model.clone(),
                structured,
                default_max_tokens,
                default_temperature,
            },
            info,
            endpoint,
        }
    }

    /// The JSON body sent for `request` with the window `num_ctx` (public for tests and
    /// tooling), its objects' keys sorted ([`trellis_protocol::canonical`]).
    pub fn request_body(&self, request: &ChatRequest, num_ctx: u32) -> Value {
        self.wire.body(request, num_ctx)
    }
}

/// What a request body is made of besides the request.
#[derive(Clone, Debug)]
struct Wire {
    model: String,
    structured: StructuredMode,
    default_max_tokens: Option<u32>,
    default_temperature: Option<f32>,
}

impl Wire {
    fn body(&self, request: &ChatRequest, num_ctx: u32) -> Value {
        let mut messages: Vec<Message> = request.messages.clone();
        let mut body = Map::new();
        body.insert("model".into(), json!(self.model));
        if let Some(format) = &request.response_format {
            match self.structured {
                // Ollama constrains the answer to the schema itself (`format` takes one).
                StructuredMode::Native | StructuredMode::Tool => {
                    body.insert("format".into(), format.schema.clone());
                }
                StructuredMode::JsonObject => {
                    body.insert("format".into(), json!("json"));
                    add_instruction(&mut messages, &schema_instruction(&format.schema));
                }
                StructuredMode::Prompt => {
                    add_instruction(&mut messages, &schema_instruction(&format.schema));
                }
            }
        }
        body.insert("messages".into(), Value::Array(wire_messages(&messages)));
        if !request.tools.is_empty() {
            // Ollama cannot force a call (no `tool_choice`); a choice among some tools at
            // least offers only those.
            let callable = request.tool_choice.callable(&request.tools);
            let tools: Vec<Value> = callable.iter().map(|t| function_tool(t)).collect();
            body.insert("tools".into(), Value::Array(tools));
        }
        let mut options = Map::new();
        options.insert("num_ctx".into(), json!(num_ctx));
        if let Some(n) = request.max_tokens.or(self.default_max_tokens) {
            options.insert("num_predict".into(), json!(n));
        }
        if let Some(t) = request.temperature.or(self.default_temperature) {
            options.insert("temperature".into(), json!(t));
        }
        if let Some(seed) = request.seed {
            options.insert("seed".into(), json!(seed));
        }
        if let Some(p) = request.frequency_penalty.filter(|p| *p != 0.0) {
            options.insert("frequency_penalty".into(), json!(p));
        }
        if !request.stop.is_empty() {
            options.insert("stop".into(), json!(request.stop));
        }
        body.insert("options".into(), Value::Object(options));
        // Ollama has no thinking budget; asking for thinking at all is what maps. Unset, a
        // thinking model thinks by default (`server/routes.go`).
        if request.thinking_budget.is_some() {
            body.insert("think".into(), json!(true));
        }
        body.insert("stream".into(), json!(true));
        // Ollama renders the tool and answer schemas into the prompt in the order they
        // arrive: sorted, whichever way serde_json keeps maps in this build.
        trellis_protocol::canonical::canonical(Value::Object(body))
    }
}

/// The conversation in Ollama's shape: an assistant turn's calls with their arguments as
/// objects, a tool result with the name of the tool it answers (`tool_name`, looked up in the
/// nearest earlier call with its id) and that id.
fn wire_messages(messages: &[Message]) -> Vec<Value> {
    let mut names: HashMap<&str, &str> = HashMap::new();
    let mut out = Vec::with_capacity(messages.len());
    for m in messages {
        let mut o = Map::new();
        o.insert("role".into(), json!(m.role.as_str()));
        o.insert("content".into(), json!(m.content));
        match m.role {
            Role::Assistant => {
                if let Some(t) = m.thinking.as_ref().filter(|t| !t.text.is_empty()) {
                    o.insert("thinking".into(), json!(t.text));
                }
                if !m.tool_calls.is_empty() {
                    let calls: Vec<Value> = m
                        .tool_calls
                        .iter()
                        .map(|c| {
                            names.insert(&c.id, &c.name);
                            json!({"id": c.id,
                                   "function": {"name": c.name, "arguments": c.arguments_object()}})
                        })
                        .collect();
                    o.insert("tool_calls".into(), Value::Array(calls));
                }
            }
            Role::Tool => {
                if let Some(id) = &m.tool_call_id {
                    if let Some(name) = names.get(id.as_str()) {
                        o.insert("tool_name".into(), json!(name));
                    }
                    o.insert("tool_call_id".into(), json!(id));
                }
            }
            Role::System | Role::User => {}
        }
        out.push(Value::Object(o));
    }
    out
}

/// Adds to an HTTP 404 what to do: pull the model, or check that the address is Ollama's.
fn explain(error: Error, model: &str, root: &str) -> Error {
    match error {
        Error::Http {
            provider,
            status: 404,
            message,
            retry_after,
        } => {
            let hint = if message.to_lowercase().contains("model") {
                format!("run `ollama pull {model}` on the Ollama server at {root}")
            } else {
                format!("is {root} an Ollama server? (`provider = \"ollama\"` needs its /api)")
            };
            Error::Http {
                provider,
                status: 404,
                message: format!("{message}; {hint}"),
                retry_after,
            }
        }
        other => other,
    }
}

impl ModelProvider for OllamaProvider {
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
        let (window, info) = (Arc::clone(&self.window), self.info.clone());
        let (endpoint, wire) = (self.endpoint.clone(), self.wire.clone());
        spawn_stream(&self.info.profile, move |tx| async move {
            // The window is asked of the server once (a few seconds at most) and then kept.
            let num_ctx = tokio::select! {
                w = window.get(&info) => w.tokens,
                () = cancel.cancelled() => return Err(Error::Cancelled),
            };
            let body = wire.body(&request, num_ctx);
            let mut decoder = ChatDecoder::new(&endpoint.profile);
            endpoint
                .stream(
                    "api/chat",
                    KeyHeader::Bearer,
                    &[],
                    &body,
                    &cancel,
                    &tx,
                    LineDecoder::new(),
                    &mut decoder,
                )
                .await
                .map_err(|e| explain(e, &wire.model, &endpoint.base_url))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::ToolCall;

    #[test]
    fn a_tool_result_names_the_tool_of_the_nearest_call_with_its_id() {
        let call = |id: &str, name: &str| ToolCall {
            id: id.into(),
            name: name.into(),
            arguments: "not json".into(),
        };
        let mut first = Message::assistant("");
        first.tool_calls = vec![call("call_0", "read_file")];
        let mut second = Message::assistant("");
        second.tool_calls = vec![call("call_0", "search")];
        let wire = wire_messages(&[
            first,
            Message::tool_result("call_0", "a"),
            second,
            Message::tool_result("call_0", "b"),
            Message::tool_result("unknown", "c"),
        ]);
        assert_eq!(wire[1]["tool_name"], "read_file");
        assert_eq!(wire[3]["tool_name"], "search");
        assert_eq!(
            wire[4],
            json!({"role": "tool", "content": "c", "tool_call_id": "unknown"})
        );
        // Arguments that are not a JSON object go as an empty one (Ollama takes no other).
        assert_eq!(wire[0]["tool_calls"][0]["function"]["arguments"], json!({}));
        assert_eq!(wire[0]["content"], "");
    }

    #[test]
    fn a_choice_among_tools_offers_only_those_and_nothing_else_is_forced() {
        let wire = Wire {
            model: "m".into(),
            structured: StructuredMode::Native,
            default_max_tokens: None,
            default_temperature: None,
        };
        let tool = |name: &str| crate::types::ToolSpec {
            name: name.into(),
            description: String::new(),
            parameters: json!({"type": "object"}),
        };
        let request = ChatRequest {
            tools: vec![tool("a"), tool("b"), tool("c")],
            tool_choice: crate::types::ToolChoice::OneOf(vec!["b".into(), "z".into()]),
            ..ChatRequest::new(vec![Message::user("x")])
        };
        let body = wire.body(&request, 2048);
        let names: Vec<&Value> = body["tools"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|t| &t["function"]["name"])
            .collect();
        assert_eq!(names, [&json!("b")]);
        assert!(body.get("tool_choice").is_none(), "{body}");
        assert_eq!(body["options"], json!({"num_ctx": 2048}));
    }

    #[test]
    fn a_404_says_to_pull_the_model_or_check_the_address() {
        let not_found = |message: &str| Error::Http {
            provider: "o".into(),
            status: 404,
            message: message.into(),
            retry_after: None,
        };
        let e = explain(
            not_found("model 'qwen3' not found"),
            "qwen3",
            "http://h:11434",
        );
        assert_eq!(
            e.to_string(),
            "o: HTTP 404: model 'qwen3' not found; run `ollama pull qwen3` on the Ollama server at http://h:11434"
        );
        let e = explain(not_found("404 page not found"), "qwen3", "http://h:8080");
        assert!(
            e.to_string().contains("is http://h:8080 an Ollama server?"),
            "{e}"
        );
        assert!(matches!(
            explain(Error::Cancelled, "m", "r"),
            Error::Cancelled
        ));
    }
}
