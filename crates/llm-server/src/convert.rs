//! A chat-completions request body → the provider's [`ChatRequest`], refusing what cannot
//! be served with a 400 that names the field.

use serde_json::{Value, json};
use trellis_llm::openai_wire::{
    ChatCompletionRequest, Content, RequestMessage, ResponseFormatParam, Tool, WireRole,
};
use trellis_llm::{
    ChatRequest, Message, ResponseFormat, Role, Thinking, ToolCall, ToolChoice, ToolSpec,
};

use crate::ApiError;

/// A request ready for the provider.
#[derive(Debug)]
pub(crate) struct Call {
    /// The model id the client named.
    pub(crate) model: String,
    pub(crate) request: ChatRequest,
    pub(crate) stream: bool,
    pub(crate) include_usage: bool,
}

/// Parses the body; a refusal names the field at fault (`messages[1].role`).
pub(crate) fn parse(body: &[u8]) -> Result<ChatCompletionRequest, ApiError> {
    let de = &mut serde_json::Deserializer::from_slice(body);
    serde_path_to_error::deserialize(de).map_err(|e| {
        let path = e.path().to_string();
        let inner = e.into_inner();
        if inner.is_syntax() || inner.is_eof() {
            return ApiError::invalid(format!("the body is not valid JSON: {inner}"), None);
        }
        // serde's message for a missing field names it; the path is its parent.
        let param = (path != ".").then_some(path);
        ApiError::invalid(format!("invalid request: {inner}"), param)
    })
}

fn param(path: impl Into<String>) -> Option<String> {
    Some(path.into())
}

/// Checks and maps a parsed request.
pub(crate) fn to_call(wire: ChatCompletionRequest) -> Result<Call, ApiError> {
    if wire.messages.is_empty() {
        return Err(ApiError::invalid(
            "`messages` must hold at least one message",
            param("messages"),
        ));
    }
    if wire.n.is_some_and(|n| n != 1) {
        return Err(ApiError::invalid(
            "only one answer per request is served (`n` must be 1)",
            param("n"),
        ));
    }
    let messages = wire
        .messages
        .into_iter()
        .enumerate()
        .map(|(i, m)| message(i, m))
        .collect::<Result<Vec<_>, _>>()?;
    let tools = tools(wire.tools.unwrap_or_default(), wire.tool_choice.as_ref())?;
    // `required` and a named function must be answered by a call (of the named one: the
    // tools were narrowed to it); the embedded model's grammar then has no other answer.
    let tool_choice = match &wire.tool_choice {
        Some(Value::String(s)) if s == "required" => ToolChoice::Required,
        Some(Value::Object(_)) => ToolChoice::OneOf(tools.iter().map(|t| t.name.clone()).collect()),
        _ => ToolChoice::Auto,
    };
    let max_tokens = wire.max_completion_tokens.or(wire.max_tokens);
    if max_tokens == Some(0) {
        let field = if wire.max_completion_tokens.is_some() {
            "max_completion_tokens"
        } else {
            "max_tokens"
        };
        return Err(ApiError::invalid("must be at least 1", param(field)));
    }
    if let Some(t) = wire.temperature
        && !(0.0..=2.0).contains(&t)
    {
        return Err(ApiError::invalid(
            format!("{t} is not a temperature between 0 and 2"),
            param("temperature"),
        ));
    }
    if let Some(f) = wire.frequency_penalty
        && !(-2.0..=2.0).contains(&f)
    {
        return Err(ApiError::invalid(
            format!("{f} is not a frequency_penalty between -2 and 2"),
            param("frequency_penalty"),
        ));
    }
    let response_format = match wire.response_format {
        None | Some(ResponseFormatParam::Text) => None,
        Some(ResponseFormatParam::JsonObject) => Some(ResponseFormat {
            name: "json_object".into(),
            schema: json!({"type": "object"}),
        }),
        Some(ResponseFormatParam::JsonSchema { json_schema }) => Some(ResponseFormat {
            name: json_schema.name,
            // No schema: any JSON value.
            schema: json_schema.schema.unwrap_or_else(|| json!({})),
        }),
    };
    let stream = wire.stream.unwrap_or(false);
    Ok(Call {
        model: wire.model,
        request: ChatRequest {
            messages,
            tools,
            max_tokens,
            temperature: wire.temperature,
            response_format,
            // The OpenAI wire has no such field: a client's tools and its schema are sent
            // as tools and response_format.
            final_format: None,
            tool_choice,
            thinking_budget: None,
            stop: wire.stop.map(|s| s.into_vec()).unwrap_or_default(),
            seed: wire.seed,
            frequency_penalty: wire.frequency_penalty,
            grammar: wire.grammar,
        },
        stream,
        include_usage: stream
            && wire
                .stream_options
                .and_then(|o| o.include_usage)
                .unwrap_or(false),
    })
}

fn message(i: usize, m: RequestMessage) -> Result<Message, ApiError> {
    let at = |field: &str| param(format!("messages[{i}].{field}"));
    let role = match m.role {
        WireRole::System | WireRole::Developer => Role::System,
        WireRole::User => Role::User,
        WireRole::Assistant => Role::Assistant,
        WireRole::Tool => Role::Tool,
        WireRole::Function => {
            return Err(ApiError::invalid(
                "the legacy `function` role is not served: send tool results with role `tool`",
                at("role"),
            ));
        }
    };
    let content = match m.content {
        None => String::new(),
        Some(Content::Text(t)) => t,
        Some(Content::Parts(parts)) => {
            let mut text = String::new();
            for (j, part) in parts.into_iter().enumerate() {
                match (part.kind.as_str(), part.text, part.refusal) {
                    ("text", Some(t), _) | ("refusal", _, Some(t)) => text.push_str(&t),
                    ("text", None, _) => {
                        return Err(ApiError::invalid(
                            "a text part needs `text`",
                            at(&format!("content[{j}].text")),
                        ));
                    }
                    (kind, _, _) => {
                        return Err(ApiError::invalid(
                            format!(
                                "content parts of type `{kind}` are not supported: this model \
                                 reads text only"
                            ),
                            at(&format!("content[{j}].type")),
                        ));
                    }
                }
            }
            text
        }
    };
    let tool_calls = match (role, m.tool_calls) {
        (Role::Assistant, Some(calls)) => calls
            .into_iter()
            .map(|c| ToolCall {
                id: c.id,
                name: c.function.name,
                arguments: c.function.arguments,
            })
            .collect(),
        _ => Vec::new(),
    };
    let tool_call_id = match role {
        Role::Tool => Some(m.tool_call_id.filter(|id| !id.is_empty()).ok_or_else(|| {
            ApiError::invalid(
                "a `tool` message needs the `tool_call_id` of the call it answers",
                at("tool_call_id"),
            )
        })?),
        _ => None,
    };
    Ok(Message {
        role,
        content,
        tool_calls,
        tool_call_id,
        thinking: m
            .reasoning_content
            .filter(|t| role == Role::Assistant && !t.is_empty())
            .map(|text| Thinking {
                text,
                signature: None,
            }),
    })
}

/// The tools offered, after `tool_choice`: `none` offers none; a named function offers
/// only that one; `auto` and `required` offer all.
fn tools(wire: Vec<Tool>, choice: Option<&Value>) -> Result<Vec<ToolSpec>, ApiError> {
    let mut specs = Vec::with_capacity(wire.len());
    for (i, t) in wire.into_iter().enumerate() {
        if t.kind != "function" {
            return Err(ApiError::invalid(
                format!(
                    "tools of type `{}` are not supported: use `function`",
                    t.kind
                ),
                param(format!("tools[{i}].type")),
            ));
        }
        if t.function.name.is_empty() {
            return Err(ApiError::invalid(
                "a function needs a name",
                param(format!("tools[{i}].function.name")),
            ));
        }
        specs.push(ToolSpec {
            name: t.function.name,
            description: t.function.description.unwrap_or_default(),
            parameters: t
                .function
                .parameters
                .unwrap_or_else(|| json!({"type": "object", "properties": {}})),
        });
    }
    match choice {
        None | Some(Value::Null) => Ok(specs),
        Some(Value::String(s)) if s == "auto" || s == "required" => Ok(specs),
        Some(Value::String(s)) if s == "none" => Ok(Vec::new()),
        Some(v) => {
            let name = v
                .pointer("/function/name")
                .and_then(Value::as_str)
                .filter(|_| v.get("type").and_then(Value::as_str) == Some("function"));
            let Some(name) = name else {
                return Err(ApiError::invalid(
                    "`tool_choice` must be `none`, `auto`, `required` or \
                     {\"type\": \"function\", \"function\": {\"name\": …}}",
                    param("tool_choice"),
                ));
            };
            let chosen: Vec<ToolSpec> = specs.into_iter().filter(|t| t.name == name).collect();
            if chosen.is_empty() {
                return Err(ApiError::invalid(
                    format!("`tool_choice` names `{name}`, which is not in `tools`"),
                    param("tool_choice"),
                ));
            }
            Ok(chosen)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn call(body: Value) -> Result<Call, ApiError> {
        to_call(parse(body.to_string().as_bytes())?)
    }

    fn param_of(r: Result<Call, ApiError>) -> Option<String> {
        r.unwrap_err().body.error.param
    }

    #[test]
    fn a_conversation_with_tools_maps_to_the_provider_request() {
        let c = call(json!({
            "model": "local", "stream": true, "stream_options": {"include_usage": true},
            "max_completion_tokens": 50, "stop": ["END"], "seed": 9, "frequency_penalty": 0.5,
            "messages": [
                {"role": "developer", "content": "be brief"},
                {"role": "user", "content": [{"type": "text", "text": "list "}, {"type": "text", "text": "files"}]},
                {"role": "assistant", "content": null, "reasoning_content": "ls it",
                 "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "ls", "arguments": "{}"}}]},
                {"role": "tool", "tool_call_id": "c1", "content": "a.rs"}
            ],
            "tools": [{"type": "function", "function": {"name": "ls"}}],
            "response_format": {"type": "json_object"}
        }))
        .unwrap();
        assert!(c.stream && c.include_usage);
        let r = &c.request;
        assert_eq!(r.messages[0].role, Role::System);
        assert_eq!(r.messages[1].content, "list files");
        assert_eq!(r.messages[2].tool_calls[0].name, "ls");
        assert_eq!(r.messages[2].thinking.as_ref().unwrap().text, "ls it");
        assert_eq!(r.messages[3].tool_call_id.as_deref(), Some("c1"));
        assert_eq!(r.tools[0].parameters["type"], "object");
        assert_eq!(r.max_tokens, Some(50));
        assert_eq!(r.stop, vec!["END"]);
        assert_eq!(r.seed, Some(9));
        assert_eq!(r.frequency_penalty, Some(0.5));
        assert_eq!(
            r.response_format.as_ref().unwrap().schema,
            json!({"type": "object"})
        );
    }

    #[test]
    fn tool_choice_narrows_or_removes_the_tools() {
        let tools = json!([
            {"type": "function", "function": {"name": "a"}},
            {"type": "function", "function": {"name": "b"}}
        ]);
        let with = |choice: Value| {
            call(
                json!({"model": "m", "messages": [{"role": "user", "content": "x"}],
                        "tools": tools, "tool_choice": choice}),
            )
        };
        let auto = with(json!("auto")).unwrap().request;
        assert_eq!((auto.tools.len(), auto.tool_choice), (2, ToolChoice::Auto));
        let required = with(json!("required")).unwrap().request;
        assert_eq!(
            (required.tools.len(), required.tool_choice),
            (2, ToolChoice::Required)
        );
        assert!(with(json!("none")).unwrap().request.tools.is_empty());
        let named = with(json!({"type": "function", "function": {"name": "b"}})).unwrap();
        assert_eq!(named.request.tools[0].name, "b");
        assert_eq!(named.request.tools.len(), 1);
        assert_eq!(
            named.request.tool_choice,
            ToolChoice::OneOf(vec!["b".into()])
        );
        let missing = with(json!({"type": "function", "function": {"name": "z"}}));
        assert_eq!(param_of(missing).as_deref(), Some("tool_choice"));
    }

    #[test]
    fn refusals_name_the_field() {
        let user = json!({"role": "user", "content": "x"});
        let cases = [
            (json!({"messages": [user]}), None, "model"),
            (json!({"model": "m", "messages": []}), Some("messages"), ""),
            (
                json!({"model": "m", "messages": [{"role": "robot", "content": "x"}]}),
                Some("messages[0].role"),
                "robot",
            ),
            (
                json!({"model": "m", "messages": [user, {"role": "tool", "content": "x"}]}),
                Some("messages[1].tool_call_id"),
                "",
            ),
            (
                json!({"model": "m", "messages": [{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "x"}}]}]}),
                Some("messages[0].content[0].type"),
                "image_url",
            ),
            (
                json!({"model": "m", "messages": [user], "n": 2}),
                Some("n"),
                "",
            ),
            (
                json!({"model": "m", "messages": [user], "temperature": 3}),
                Some("temperature"),
                "",
            ),
            (
                json!({"model": "m", "messages": [user], "frequency_penalty": 9}),
                Some("frequency_penalty"),
                "",
            ),
            (
                json!({"model": "m", "messages": [user], "tools": [{"type": "custom", "function": {"name": "a"}}]}),
                Some("tools[0].type"),
                "custom",
            ),
            (
                json!({"model": "m", "messages": [user], "response_format": {"type": "yaml"}}),
                Some("response_format.type"),
                "yaml",
            ),
        ];
        for (body, want, mentions) in cases {
            let e = call(body.clone()).unwrap_err();
            assert_eq!(e.status, 400, "{body}");
            assert_eq!(e.body.error.kind, "invalid_request_error");
            assert_eq!(e.body.error.param.as_deref(), want, "{body}");
            assert!(
                e.body.error.message.contains(mentions),
                "{body}: {}",
                e.body.error.message
            );
        }
        let e = parse(b"{\"model\": ").unwrap_err();
        assert!(
            e.body.error.message.contains("not valid JSON"),
            "{:?}",
            e.body
        );
    }
}
