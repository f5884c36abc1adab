//! The OpenAI chat-completions wire format as typed structs: the request body, the whole
//! response, the streamed chunks, the model list and the error body.
//!
//! `trellis-llm-server` serves a provider with these types; a client reading an endpoint's
//! model list (the context window in `max_model_len`, vLLM's name) can parse it with
//! [`ModelList`]. Field names are the wire's. Every optional request field is an `Option`
//! because clients send `null` for "unset" as often as they leave a field out; fields this
//! module does not name are ignored when parsing.

use serde::{Deserialize, Deserializer, Serialize};
use serde_json::Value;

use crate::types::{FinishReason, Usage};

/// `POST /v1/chat/completions`: the fields Trellis reads.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ChatCompletionRequest {
    /// The model id (one of `GET /v1/models`).
    pub model: String,
    /// The conversation.
    pub messages: Vec<RequestMessage>,
    /// Tools the model may call.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tools: Option<Vec<Tool>>,
    /// `"none"`, `"auto"`, `"required"` or `{"type":"function","function":{"name":…}}`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_choice: Option<Value>,
    /// The answer's length limit (older name; compatible servers' usual one).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_tokens: Option<u32>,
    /// The answer's length limit (OpenAI's current name).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_completion_tokens: Option<u32>,
    /// Sampling temperature.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub temperature: Option<f32>,
    /// Sampling seed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seed: Option<u32>,
    /// Penalty on tokens by how often the answer used them (-2 to 2).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub frequency_penalty: Option<f32>,
    /// Stop sequences: one string or a list.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stop: Option<Stop>,
    /// Stream the answer as server-sent events.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stream: Option<bool>,
    /// Streaming options.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stream_options: Option<StreamOptions>,
    /// Structured output.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub response_format: Option<ResponseFormatParam>,
    /// How many answers (only 1 is served).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub n: Option<u32>,
    /// A GBNF grammar the answer follows (llama.cpp server's extension of the wire; a
    /// provider that cannot constrain output ignores it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub grammar: Option<String>,
}

/// `stop`: a string or a list of strings.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum Stop {
    /// One sequence.
    One(String),
    /// Several.
    Many(Vec<String>),
}

impl Stop {
    /// The sequences as a list.
    pub fn into_vec(self) -> Vec<String> {
        match self {
            Stop::One(s) => vec![s],
            Stop::Many(v) => v,
        }
    }
}

/// `stream_options`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct StreamOptions {
    /// Send a last chunk with the usage (and `choices: []`) before `[DONE]`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub include_usage: Option<bool>,
}

/// `response_format`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum ResponseFormatParam {
    /// Free text (the default).
    Text,
    /// Any JSON object.
    JsonObject,
    /// JSON matching a schema.
    JsonSchema {
        /// The schema and its name.
        json_schema: JsonSchemaFormat,
    },
}

/// `response_format.json_schema`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct JsonSchemaFormat {
    /// The schema's name.
    pub name: String,
    /// The JSON Schema (absent: any JSON value).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub schema: Option<Value>,
    /// Whether the endpoint must follow the schema exactly.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub strict: Option<bool>,
}

/// Who wrote a request message.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum WireRole {
    /// Instructions.
    System,
    /// Instructions (OpenAI's newer name for `system`).
    Developer,
    /// The user.
    User,
    /// The model.
    Assistant,
    /// A tool result.
    Tool,
    /// A function result (the legacy form of `tool`).
    Function,
}

/// One message of a request.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RequestMessage {
    /// The author.
    pub role: WireRole,
    /// Text, a list of content parts, or null (an assistant turn that only calls tools).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub content: Option<Content>,
    /// An assistant turn's tool calls.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_calls: Option<Vec<ToolCall>>,
    /// A tool result's call id.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_call_id: Option<String>,
    /// Reasoning that preceded an assistant turn (vLLM's and DeepSeek's field).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reasoning_content: Option<String>,
}

/// A message's content.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum Content {
    /// Plain text.
    Text(String),
    /// Content parts (`{"type":"text","text":…}`, images, …).
    Parts(Vec<ContentPart>),
}

/// One content part. Kept loose (a type name and the text, if any) so that an unsupported
/// part can be named in the error rather than failing the whole parse.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ContentPart {
    /// `text`, `image_url`, `input_audio`, `file`, `refusal`…
    #[serde(rename = "type")]
    pub kind: String,
    /// The text of a `text` part.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub text: Option<String>,
    /// The text of a `refusal` part.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub refusal: Option<String>,
}

/// A tool offered to the model.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Tool {
    /// `function` (the only kind served).
    #[serde(rename = "type")]
    pub kind: String,
    /// The function.
    pub function: FunctionDef,
}

/// A function tool's definition.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct FunctionDef {
    /// The name the model calls it by.
    pub name: String,
    /// What it does.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// JSON Schema of the arguments (absent: no arguments).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parameters: Option<Value>,
}

/// A complete tool call (in a request's assistant message or a whole response).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ToolCall {
    /// The call id.
    pub id: String,
    /// `function`.
    #[serde(rename = "type", default = "function_kind")]
    pub kind: String,
    /// The function and its arguments.
    pub function: FunctionCall,
}

fn function_kind() -> String {
    "function".into()
}

/// The function of a tool call.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct FunctionCall {
    /// The tool name.
    pub name: String,
    /// The arguments as JSON text. Some clients send an object instead; it is kept as its
    /// JSON text.
    #[serde(default, deserialize_with = "json_text")]
    pub arguments: String,
}

/// A string as it is; any other JSON value as its text (null as empty).
fn json_text<'de, D: Deserializer<'de>>(d: D) -> Result<String, D::Error> {
    Ok(arguments_text(Value::deserialize(d)?))
}

/// Tool-call arguments as JSON text: a string as it is (the OpenAI wire's form), any other
/// value — the object some servers and Ollama's native API send — as its JSON text, null
/// or absent as empty.
pub(crate) fn arguments_text(arguments: Value) -> String {
    match arguments {
        Value::String(s) => s,
        Value::Null => String::new(),
        other => other.to_string(),
    }
}

/// Token usage.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct WireUsage {
    /// Prompt tokens.
    pub prompt_tokens: u64,
    /// Generated tokens.
    pub completion_tokens: u64,
    /// Their sum.
    pub total_tokens: u64,
    /// Prompt tokens served from a cache.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prompt_tokens_details: Option<PromptTokensDetails>,
}

/// `usage.prompt_tokens_details`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PromptTokensDetails {
    /// Prompt tokens served from a cache.
    pub cached_tokens: u64,
}

impl From<Usage> for WireUsage {
    fn from(u: Usage) -> Self {
        Self {
            prompt_tokens: u.prompt_tokens,
            completion_tokens: u.completion_tokens,
            total_tokens: u.total(),
            prompt_tokens_details: (u.cached_prompt_tokens > 0).then_some(PromptTokensDetails {
                cached_tokens: u.cached_prompt_tokens,
            }),
        }
    }
}

impl From<WireUsage> for Usage {
    fn from(u: WireUsage) -> Self {
        Self {
            prompt_tokens: u.prompt_tokens,
            completion_tokens: u.completion_tokens,
            cached_prompt_tokens: u.prompt_tokens_details.map_or(0, |d| d.cached_tokens),
        }
    }
}

/// The wire name of a finish reason (`stop`, `length`, `tool_calls`, `content_filter`;
/// anything else under its own name).
pub fn finish_reason_name(reason: &FinishReason) -> &str {
    match reason {
        FinishReason::Stop => "stop",
        FinishReason::Length => "length",
        FinishReason::ToolCalls => "tool_calls",
        FinishReason::ContentFilter => "content_filter",
        FinishReason::Cancelled => "cancelled",
        FinishReason::Other(other) => other,
    }
}

/// The finish reason a wire name stands for ([`finish_reason_name`]'s inverse; the legacy
/// `function_call` is a tool call).
pub fn finish_reason(name: &str) -> FinishReason {
    match name {
        "stop" => FinishReason::Stop,
        "length" => FinishReason::Length,
        "tool_calls" | "function_call" => FinishReason::ToolCalls,
        "content_filter" => FinishReason::ContentFilter,
        other => FinishReason::Other(other.to_string()),
    }
}

/// A whole (non-streamed) response: `object` is `chat.completion`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ChatCompletion {
    /// The response id (`chatcmpl-…`).
    pub id: String,
    /// `chat.completion`.
    pub object: String,
    /// Unix seconds.
    pub created: u64,
    /// The model id.
    pub model: String,
    /// The answers (one).
    pub choices: Vec<Choice>,
    /// Token usage.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usage: Option<WireUsage>,
}

/// One answer of a whole response.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Choice {
    /// Its position.
    pub index: u32,
    /// The assistant message.
    pub message: ResponseMessage,
    /// Why the model stopped.
    pub finish_reason: Option<String>,
}

/// The assistant message of a whole response.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ResponseMessage {
    /// `assistant`.
    pub role: String,
    /// The text (null when the model only called tools).
    pub content: Option<String>,
    /// Tool calls.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_calls: Option<Vec<ToolCall>>,
    /// Reasoning the model emitted before answering.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reasoning_content: Option<String>,
}

/// One streamed event: `object` is `chat.completion.chunk`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ChatCompletionChunk {
    /// The response id (the same in every chunk of a response).
    pub id: String,
    /// `chat.completion.chunk`.
    pub object: String,
    /// Unix seconds.
    pub created: u64,
    /// The model id.
    pub model: String,
    /// The answer's delta (empty in the last chunk of `stream_options.include_usage`).
    pub choices: Vec<ChunkChoice>,
    /// Usage: only in that last chunk.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usage: Option<WireUsage>,
}

/// One answer's delta.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ChunkChoice {
    /// Its position.
    pub index: u32,
    /// What is new.
    pub delta: Delta,
    /// Set in the answer's last chunk.
    pub finish_reason: Option<String>,
}

/// What a chunk adds to the answer.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Delta {
    /// `assistant`, in the first chunk.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub role: Option<String>,
    /// Answer text.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub content: Option<String>,
    /// Reasoning text.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reasoning_content: Option<String>,
    /// Pieces of tool calls.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_calls: Option<Vec<ToolCallDelta>>,
}

/// A piece of a tool call: the first piece of a call has its id, type and name, later ones
/// append to the arguments.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ToolCallDelta {
    /// The call's position in the answer.
    pub index: u32,
    /// The call id (first piece).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    /// `function` (first piece).
    #[serde(rename = "type", default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    /// The name (first piece) and arguments text.
    pub function: FunctionDelta,
}

/// The function part of a tool-call piece.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct FunctionDelta {
    /// The tool name (first piece).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// Text appended to the arguments.
    #[serde(default)]
    pub arguments: String,
}

/// `GET /v1/models`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ModelList {
    /// `list`.
    pub object: String,
    /// The models.
    pub data: Vec<ModelObject>,
}

/// One model of `GET /v1/models` (and `GET /v1/models/{id}`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ModelObject {
    /// The id requests name.
    pub id: String,
    /// `model`.
    pub object: String,
    /// Unix seconds.
    pub created: u64,
    /// Who serves it.
    pub owned_by: String,
    /// The context window in tokens (vLLM's field name; what context-window discovery
    /// reads).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_model_len: Option<u32>,
    /// The same, under the name OpenRouter and LM Studio use.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub context_length: Option<u32>,
}

/// An error answer: `{"error": {…}}`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ErrorBody {
    /// The error.
    pub error: ErrorObject,
}

/// The error of an [`ErrorBody`].
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ErrorObject {
    /// What went wrong and what to do.
    pub message: String,
    /// `invalid_request_error`, `authentication_error`, `server_error`…
    #[serde(rename = "type")]
    pub kind: String,
    /// The request field at fault (`messages[0].role`), if one is.
    pub param: Option<String>,
    /// A machine-readable code (`invalid_api_key`, `model_not_found`…).
    pub code: Option<String>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_request_with_nulls_parts_and_object_arguments_parses() {
        let body = r#"{"model":"m","stream":null,"tools":null,"messages":[
            {"role":"developer","content":[{"type":"text","text":"be brief"}]},
            {"role":"assistant","content":null,"tool_calls":[
                {"id":"c1","type":"function","function":{"name":"f","arguments":{"a":1}}}]},
            {"role":"tool","tool_call_id":"c1","content":"ok"}],
            "stop":"END","response_format":{"type":"json_schema","json_schema":{"name":"x"}}}"#;
        let r: ChatCompletionRequest = serde_json::from_str(body).unwrap();
        assert_eq!(r.messages[0].role, WireRole::Developer);
        let calls = r.messages[1].tool_calls.as_ref().unwrap();
        assert_eq!(calls[0].function.arguments, r#"{"a":1}"#);
        assert_eq!(r.stop.unwrap().into_vec(), vec!["END".to_string()]);
        assert!(matches!(
            r.response_format,
            Some(ResponseFormatParam::JsonSchema { .. })
        ));
    }

    #[test]
    fn usage_round_trips_with_cached_tokens() {
        let u = Usage {
            prompt_tokens: 10,
            completion_tokens: 5,
            cached_prompt_tokens: 4,
        };
        let wire = WireUsage::from(u);
        assert_eq!(wire.total_tokens, 15);
        let text = serde_json::to_value(wire).unwrap();
        assert_eq!(text["prompt_tokens_details"]["cached_tokens"], 4);
        assert_eq!(Usage::from(wire), u);
    }

    #[test]
    fn the_model_list_names_the_context_window_as_vllm_does() {
        let m = ModelObject {
            id: "local".into(),
            object: "model".into(),
            created: 0,
            owned_by: "trellis".into(),
            max_model_len: Some(16_384),
            context_length: Some(16_384),
        };
        let v = serde_json::to_value(&m).unwrap();
        assert_eq!(v["max_model_len"], 16_384);
        assert_eq!(v["context_length"], 16_384);
    }
}
