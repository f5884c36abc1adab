use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::StreamExt;
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::json;
use tokio_util::sync::CancellationToken;
use trellis_llm::{
    Error, FinishReason, Message, ModelProvider, StreamEvent, StructuredOptions, ToolCall,
    ToolSpec, complete_structured,
};

use super::mock::{MockServer, Reply, fixture, hello, profile, sent_tools, tools};
use super::recorded::{expected_usage, recorded_text, recording, replay, usage_tuple};

fn provider(server: &MockServer, extra: &str) -> Arc<dyn ModelProvider> {
    let key = if extra.contains("api_key_env") {
        ""
    } else {
        "api_key_env = \"CARGO_PKG_NAME\""
    };
    let toml = format!(
        r#"
[models.profiles.mock]
provider = "openai"
model = "gpt-4o-mini"
base_url = "{}"
{key}
max_retries = 2
headers = {{ "X-Title" = "trellis-tests" }}
{extra}
"#,
        server.base_url
    );
    profile(&toml, "mock")
}

#[tokio::test]
async fn text_stream_and_request_body() {
    let server = MockServer::start(vec![replay("openai", "text")]).await;
    let p = provider(&server, "");
    let mut stream = p.stream(hello(), CancellationToken::new());
    let mut events = Vec::new();
    while let Some(e) = stream.next().await {
        events.push(e.unwrap());
    }
    let texts: Vec<&str> = events
        .iter()
        .filter_map(|e| match e {
            StreamEvent::TextDelta { text } => Some(text.as_str()),
            _ => None,
        })
        .collect();
    assert!(texts.len() > 1, "{texts:?}");
    assert_eq!(texts.concat(), recorded_text("openai", "text"));
    assert_eq!(
        events.last(),
        Some(&StreamEvent::Finish {
            reason: FinishReason::Stop
        })
    );
    let reqs = server.requests();
    assert_eq!(reqs.len(), 1);
    let r = &reqs[0];
    assert_eq!(
        (r.method.as_str(), r.path.as_str()),
        ("POST", "/v1/chat/completions")
    );
    assert_eq!(r.header("authorization"), Some("Bearer trellis-llm"));
    assert_eq!(r.header("x-title"), Some("trellis-tests"));
    assert_eq!(
        r.body,
        json!({
            "model": "gpt-4o-mini",
            "messages": [
                {"role": "system", "content": "Be brief."},
                {"role": "user", "content": "Hi"},
            ],
            "stream": true,
            "stream_options": {"include_usage": true},
        })
    );
}

#[tokio::test]
async fn complete_collects_usage() {
    let server = MockServer::start(vec![replay("openai", "text")]).await;
    let seeded = trellis_llm::ChatRequest {
        seed: Some(7),
        frequency_penalty: Some(0.3),
        ..hello()
    };
    let c = provider(&server, "max_tokens = 77\ntemperature = 0.25")
        .complete(seeded, CancellationToken::new())
        .await
        .unwrap();
    assert_eq!(c.text, recorded_text("openai", "text"));
    // The recording's final chunk (empty `choices`) carries the usage.
    assert_eq!(
        usage_tuple(&c.usage),
        expected_usage(&recording("openai", "text"))
    );
    assert!(c.usage.prompt_tokens > 0 && c.usage.completion_tokens > 0);
    let body = &server.requests()[0].body;
    assert_eq!(body["max_tokens"], 77);
    assert_eq!(body["temperature"], 0.25);
    assert_eq!(body["seed"], 7);
    assert!((body["frequency_penalty"].as_f64().unwrap() - 0.3).abs() < 1e-6);
}

#[tokio::test]
async fn tool_call_deltas_and_tool_round_trip_body() {
    let server = MockServer::start(vec![
        Reply::sse(&fixture("openai/tool_calls.sse")),
        replay("openai", "text"),
    ])
    .await;
    let p = provider(&server, "");
    let mut req = hello();
    req.tools = vec![ToolSpec {
        name: "read_file".into(),
        description: "Read a file".into(),
        parameters: json!({"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]}),
    }];
    let c = p.complete(req, CancellationToken::new()).await.unwrap();
    assert_eq!(c.finish, Some(FinishReason::ToolCalls));
    assert_eq!(
        c.tool_calls,
        vec![
            ToolCall {
                id: "call_DdmO9pD3xa9XTPNJ32zg2hcA".into(),
                name: "read_file".into(),
                arguments: r#"{"path": "src/lib.rs"}"#.into(),
            },
            ToolCall {
                id: "call_q9Gk0tuf2Yw0uE1pQmJ0xQ3e".into(),
                name: "search".into(),
                arguments: r#"{"query": "Budget"}"#.into(),
            },
        ]
    );
    assert_eq!(c.usage.cached_prompt_tokens, 64);
    let body = &server.requests()[0].body;
    assert_eq!(body["tools"][0]["type"], "function");
    assert_eq!(body["tools"][0]["function"]["name"], "read_file");
    assert_eq!(
        body["tools"][0]["function"]["parameters"]["required"][0],
        "path"
    );

    // The next turn sends the calls and their results back in OpenAI's shape.
    let mut next = hello();
    next.messages.push(c.to_message());
    next.messages.push(Message::tool_result(
        "call_DdmO9pD3xa9XTPNJ32zg2hcA",
        "fn main() {}",
    ));
    p.complete(next, CancellationToken::new()).await.unwrap();
    let body = &server.requests()[1].body;
    assert_eq!(body["messages"][2]["role"], "assistant");
    assert_eq!(body["messages"][2]["content"], serde_json::Value::Null);
    assert_eq!(
        body["messages"][2]["tool_calls"][1]["function"]["name"],
        "search"
    );
    assert_eq!(
        body["messages"][3],
        json!({"role": "tool", "content": "fn main() {}", "tool_call_id": "call_DdmO9pD3xa9XTPNJ32zg2hcA"})
    );
}

#[derive(Debug, Deserialize, JsonSchema, PartialEq)]
struct CapitalAnswer {
    city: String,
    country: String,
}

// Native `response_format: json_schema`: recorded_replay::recorded_openai_structured_output.
#[tokio::test]
async fn structured_output_prompt_and_json_object_modes() {
    let server = MockServer::start(vec![replay("openai", "structured")]).await;
    // Servers without `response_format` (llama-cpp-python): the schema goes in the prompt.
    let prompt = provider(&server, "structured_output = \"prompt\"");
    complete_structured::<CapitalAnswer>(
        prompt.as_ref(),
        hello(),
        StructuredOptions::default(),
        CancellationToken::new(),
    )
    .await
    .unwrap();
    let body = &server.requests()[0].body;
    assert!(body.get("response_format").is_none());
    let system = body["messages"][0]["content"].as_str().unwrap();
    assert!(system.starts_with("Be brief.\n\nAnswer with a single JSON value"));
    assert!(system.contains("\"country\""));

    // JSON mode plus the schema in the prompt.
    let server = MockServer::start(vec![replay("openai", "structured")]).await;
    let json_mode = provider(&server, "structured_output = \"json_object\"");
    complete_structured::<CapitalAnswer>(
        json_mode.as_ref(),
        hello(),
        StructuredOptions::default(),
        CancellationToken::new(),
    )
    .await
    .unwrap();
    let body = &server.requests()[0].body;
    assert_eq!(body["response_format"], json!({"type": "json_object"}));
    assert!(
        body["messages"][0]["content"]
            .as_str()
            .unwrap()
            .contains("JSON Schema")
    );
}

#[tokio::test]
async fn reasoning_content_becomes_thinking() {
    let server = MockServer::start(vec![Reply::sse(&fixture("openai/reasoning_vllm.sse"))]).await;
    let c = provider(&server, "")
        .complete(hello(), CancellationToken::new())
        .await
        .unwrap();
    assert_eq!(c.text, "42");
    assert_eq!(c.thinking.unwrap().text, "The user wants a number.");
    assert_eq!(c.usage.completion_tokens, 12);
}

#[tokio::test]
async fn rate_limit_is_retried_after_retry_after() {
    let server = MockServer::start(vec![
        Reply::status(
            429,
            &[("retry-after-ms", "400")],
            r#"{"error":{"message":"Rate limit reached","type":"requests"}}"#,
        ),
        replay("openai", "text"),
    ])
    .await;
    let started = Instant::now();
    let c = provider(&server, "")
        .complete(hello(), CancellationToken::new())
        .await
        .unwrap();
    assert!(
        started.elapsed() >= Duration::from_millis(400),
        "{:?}",
        started.elapsed()
    );
    assert_eq!(c.text, recorded_text("openai", "text"));
    let reqs = server.requests();
    assert_eq!(reqs.len(), 2);
    assert_eq!(
        reqs[0].body, reqs[1].body,
        "the retry sends the same request"
    );
}

#[tokio::test]
async fn retries_give_up_after_max_retries() {
    let busy = || Reply::status(503, &[("retry-after", "0")], "upstream busy");
    let server = MockServer::start(vec![busy(), busy(), busy(), busy()]).await;
    let err = provider(&server, "")
        .complete(hello(), CancellationToken::new())
        .await
        .unwrap_err();
    assert!(matches!(err, Error::Http { status: 503, .. }), "{err}");
    assert_eq!(err.code(), "http");
    assert_eq!(server.requests().len(), 3, "1 attempt + max_retries = 2");
}

#[tokio::test]
async fn client_errors_are_not_retried() {
    let server = MockServer::start(vec![Reply::status(
        400,
        &[],
        r#"{"error":{"message":"Invalid schema for response_format","type":"invalid_request_error"}}"#,
    )])
    .await;
    let err = provider(&server, "")
        .complete(hello(), CancellationToken::new())
        .await
        .unwrap_err();
    assert!(!err.is_retryable());
    assert!(
        err.to_string()
            .contains("HTTP 400: Invalid schema for response_format"),
        "{err}"
    );
    assert_eq!(server.requests().len(), 1);
}

#[tokio::test]
async fn an_error_inside_the_stream_surfaces() {
    let server = MockServer::start(vec![Reply::sse(&fixture("openai/error_midstream.sse"))]).await;
    let err = provider(&server, "")
        .complete(hello(), CancellationToken::new())
        .await
        .unwrap_err();
    match err {
        Error::Protocol {
            message,
            overloaded,
            ..
        } => {
            assert!(message.contains("upstream overloaded"));
            assert!(overloaded);
        }
        other => panic!("{other}"),
    }
}

#[tokio::test]
async fn a_missing_key_fails_before_sending() {
    let server = MockServer::start(vec![]).await;
    let p = provider(&server, "api_key_env = \"TRELLIS_TEST_SURELY_UNSET_KEY\"");
    let err = p
        .complete(hello(), CancellationToken::new())
        .await
        .unwrap_err();
    assert!(
        matches!(&err, Error::MissingApiKey { var, .. } if var == "TRELLIS_TEST_SURELY_UNSET_KEY"),
        "{err}"
    );
    assert!(server.requests().is_empty());
}

#[tokio::test]
async fn cancellation_is_an_error() {
    let server = MockServer::start(vec![replay("openai", "text")]).await;
    let cancel = CancellationToken::new();
    cancel.cancel();
    let err = provider(&server, "")
        .complete(hello(), cancel)
        .await
        .unwrap_err();
    assert!(matches!(err, Error::Cancelled), "{err}");
}

/// `tool_choice` on the wire, for each choice: what is sent as `tools` and `tool_choice`.
#[tokio::test]
async fn tool_choices_are_sent_as_required_or_a_named_function_with_only_the_callable_tools() {
    use trellis_llm::ToolChoice;
    let one_of = |names: &[&str]| ToolChoice::OneOf(names.iter().map(|n| (*n).into()).collect());
    let all = ["read_file", "edit_file", "write_file"];
    let cases = [
        // Auto is the server's default: not sent.
        (ToolChoice::Auto, &all[..], None),
        (ToolChoice::Required, &all[..], Some(json!("required"))),
        // Names not offered are ignored; a single callable tool is named.
        (
            one_of(&["edit_file", "shell"]),
            &["edit_file"][..],
            Some(json!({"type": "function", "function": {"name": "edit_file"}})),
        ),
        (
            one_of(&["edit_file", "write_file"]),
            &["edit_file", "write_file"][..],
            Some(json!("required")),
        ),
        // None of the names offered: as Auto, every tool stays.
        (one_of(&["shell"]), &all[..], None),
    ];
    let replies = cases
        .iter()
        .map(|_| Reply::sse(&fixture("openai/tool_calls.sse")))
        .collect();
    let server = MockServer::start(replies).await;
    let p = provider(&server, "");
    for (choice, _, _) in &cases {
        let mut req = hello();
        req.tools = tools(&all);
        req.tool_choice = choice.clone();
        p.complete(req, CancellationToken::new()).await.unwrap();
    }
    for ((choice, sent, wire), r) in cases.iter().zip(server.requests()) {
        assert_eq!(sent_tools(&r.body, "/function/name"), *sent, "{choice:?}");
        assert_eq!(r.body.get("tool_choice"), wire.as_ref(), "{choice:?}");
    }
}
