use std::sync::Arc;

use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::json;
use tokio_util::sync::CancellationToken;
use trellis_llm::{Error, FinishReason, Message, ModelProvider, ToolSpec};

use super::mock::{MockServer, Reply, fixture, hello, profile, sent_tools, tools};
use super::recorded::{expected_usage, recorded_text, recording, replay, usage_tuple};

fn provider(server: &MockServer, extra: &str) -> Arc<dyn ModelProvider> {
    let toml = format!(
        r#"
[models.profiles.claude]
provider = "anthropic"
model = "claude-sonnet-4-5"
base_url = "{}"
api_key_env = "CARGO_PKG_NAME"
max_retries = 1
{extra}
"#,
        server.base_url
    );
    profile(&toml, "claude")
}

#[tokio::test]
async fn text_and_request_shape() {
    let server = MockServer::start(vec![replay("anthropic", "text")]).await;
    let c = provider(&server, "")
        .complete(hello(), CancellationToken::new())
        .await
        .unwrap();
    assert_eq!(c.text, recorded_text("anthropic", "text"));
    assert_eq!(c.finish, Some(FinishReason::Stop));
    // input_tokens plus cache_read_input_tokens, as llama-server reported them.
    assert_eq!(
        usage_tuple(&c.usage),
        expected_usage(&recording("anthropic", "text"))
    );
    let r = &server.requests()[0];
    assert_eq!(r.path, "/v1/messages");
    assert_eq!(r.header("x-api-key"), Some("trellis-llm"));
    assert_eq!(r.header("anthropic-version"), Some("2023-06-01"));
    assert_eq!(r.header("authorization"), None);
    assert_eq!(
        r.body,
        json!({
            "model": "claude-sonnet-4-5",
            "max_tokens": 4096,
            "system": "Be brief.",
            "messages": [{"role": "user", "content": [{"type": "text", "text": "Hi"}]}],
            "stream": true,
        })
    );
}

#[tokio::test]
async fn thinking_tool_use_and_the_round_trip() {
    let server = MockServer::start(vec![
        Reply::sse(&fixture("anthropic/tool_use_thinking.sse")),
        replay("anthropic", "text"),
    ])
    .await;
    let p = provider(&server, "temperature = 0.5");
    let mut req = hello();
    req.thinking_budget = Some(2048);
    req.tools = vec![ToolSpec {
        name: "read_file".into(),
        description: "Read a file".into(),
        parameters: json!({"type": "object", "properties": {"path": {"type": "string"}}}),
    }];
    let c = p
        .complete(req.clone(), CancellationToken::new())
        .await
        .unwrap();
    let thinking = c.thinking.clone().unwrap();
    assert_eq!(thinking.text, "I should read the file before answering.");
    assert_eq!(
        thinking.signature.as_deref(),
        Some("EqQBCgIYAhIM1gbcDa9GJwZA2b3hGgxBdjrkzLoky3dl1pkiMOYds")
    );
    assert_eq!(c.text, "Let me look at it.");
    assert_eq!(c.tool_calls.len(), 1);
    assert_eq!(c.tool_calls[0].id, "toolu_01T1x1fJ34qAmk2tNTrN7Up6");
    assert_eq!(c.tool_calls[0].name, "read_file");
    assert_eq!(c.tool_calls[0].arguments, r#"{"path": "src/lib.rs"}"#);
    assert_eq!(c.finish, Some(FinishReason::ToolCalls));
    assert_eq!(c.usage.prompt_tokens, 572);
    assert_eq!(c.usage.cached_prompt_tokens, 100);
    assert_eq!(c.usage.completion_tokens, 89);
    let body = &server.requests()[0].body;
    assert_eq!(
        body["thinking"],
        json!({"type": "enabled", "budget_tokens": 2048})
    );
    assert!(
        body.get("temperature").is_none(),
        "no temperature with thinking"
    );
    assert_eq!(body["tools"][0]["input_schema"]["type"], "object");

    let mut next = req;
    next.messages.push(c.to_message());
    next.messages.push(Message::tool_result(
        "toolu_01T1x1fJ34qAmk2tNTrN7Up6",
        "fn main() {}",
    ));
    p.complete(next, CancellationToken::new()).await.unwrap();
    let body = &server.requests()[1].body;
    assert_eq!(
        body["messages"][1],
        json!({"role": "assistant", "content": [
            {"type": "thinking", "thinking": "I should read the file before answering.",
             "signature": "EqQBCgIYAhIM1gbcDa9GJwZA2b3hGgxBdjrkzLoky3dl1pkiMOYds"},
            {"type": "text", "text": "Let me look at it."},
            {"type": "tool_use", "id": "toolu_01T1x1fJ34qAmk2tNTrN7Up6", "name": "read_file",
             "input": {"path": "src/lib.rs"}},
        ]})
    );
    assert_eq!(
        body["messages"][2],
        json!({"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "toolu_01T1x1fJ34qAmk2tNTrN7Up6", "content": "fn main() {}"}
        ]})
    );
}

#[derive(Debug, Deserialize, JsonSchema, PartialEq)]
struct CapitalAnswer {
    city: String,
    country: String,
}

// Structured output through the forced tool: recorded_replay::recorded_anthropic_structured_output.

#[tokio::test]
async fn with_thinking_the_schema_goes_in_the_system_prompt() {
    let server = MockServer::start(vec![replay("anthropic", "text")]).await;
    let p = provider(&server, "");
    let mut req = hello();
    req.thinking_budget = Some(1024);
    req.response_format = Some(trellis_llm::structured::response_format::<CapitalAnswer>());
    p.complete(req, CancellationToken::new()).await.unwrap();
    let body = &server.requests()[0].body;
    assert!(
        body.get("tool_choice").is_none(),
        "no forced tool with thinking"
    );
    assert!(body.get("tools").is_none());
    let system = body["system"].as_str().unwrap();
    assert!(
        system.starts_with("Be brief.\n\nAnswer with a single JSON value"),
        "{system}"
    );
}

#[tokio::test]
async fn overloaded_before_output_is_retried() {
    let server = MockServer::start(vec![
        Reply::sse(&fixture("anthropic/overloaded.sse")),
        replay("anthropic", "text"),
    ])
    .await;
    let c = provider(&server, "")
        .complete(hello(), CancellationToken::new())
        .await
        .unwrap();
    assert_eq!(c.text, recorded_text("anthropic", "text"));
    assert_eq!(server.requests().len(), 2);
}

#[tokio::test]
async fn a_529_then_a_cut_stream() {
    let server = MockServer::start(vec![
        Reply::status(
            529,
            &[("retry-after", "0")],
            r#"{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}"#,
        ),
        replay("anthropic", "cut"),
    ])
    .await;
    let err = provider(&server, "")
        .complete(hello(), CancellationToken::new())
        .await
        .unwrap_err();
    assert!(matches!(err, Error::StreamCut { .. }), "{err}");
    assert_eq!(server.requests().len(), 2);
}

/// `tool_choice` on Anthropic's wire, for each choice, with and without thinking (which
/// refuses a forced tool: then nothing is forced and every tool stays offered).
#[tokio::test]
async fn tool_choices_are_any_or_a_named_tool_with_only_the_callable_tools_unless_thinking() {
    use trellis_llm::ToolChoice;
    let one_of = |names: &[&str]| ToolChoice::OneOf(names.iter().map(|n| (*n).into()).collect());
    let all = ["read_file", "edit_file", "write_file"];
    let cases = [
        (ToolChoice::Auto, None, &all[..], None),
        (
            ToolChoice::Required,
            None,
            &all[..],
            Some(json!({"type": "any"})),
        ),
        (ToolChoice::Required, Some(1024), &all[..], None),
        (
            one_of(&["edit_file"]),
            None,
            &["edit_file"][..],
            Some(json!({"type": "tool", "name": "edit_file"})),
        ),
        (
            one_of(&["edit_file", "write_file"]),
            None,
            &["edit_file", "write_file"][..],
            Some(json!({"type": "any"})),
        ),
        (
            one_of(&["edit_file", "write_file"]),
            Some(1024),
            &all[..],
            None,
        ),
        (one_of(&["shell"]), None, &all[..], None),
    ];
    let replies = cases.iter().map(|_| replay("anthropic", "text")).collect();
    let server = MockServer::start(replies).await;
    let p = provider(&server, "");
    for (choice, thinking, _, _) in &cases {
        let mut req = hello();
        req.tools = tools(&all);
        req.tool_choice = choice.clone();
        req.thinking_budget = *thinking;
        p.complete(req, CancellationToken::new()).await.unwrap();
    }
    for ((choice, thinking, sent, wire), r) in cases.iter().zip(server.requests()) {
        let case = format!("{choice:?}, thinking {thinking:?}");
        assert_eq!(sent_tools(&r.body, "/name"), *sent, "{case}");
        assert_eq!(r.body.get("tool_choice"), wire.as_ref(), "{case}");
    }
}
