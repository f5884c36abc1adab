//! Every route in process: the model list, whole and streamed answers, tool calls,
//! structured output, usage, and OpenAI-shaped refusals.

use std::sync::Arc;

use axum::body::Body;
use axum::http::{StatusCode, header};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;
use trellis_llm::tokens::TokenCount;
use trellis_llm::{ChatRequest, ChatStream, ModelProvider, ProviderInfo};
use trellis_llm_server::Outcome;

use super::common::*;

fn error_of(v: &Value) -> (&str, Option<&str>, Option<&str>) {
    let e = &v["error"];
    assert!(e["message"].as_str().is_some_and(|m| !m.is_empty()), "{v}");
    (
        e["type"].as_str().unwrap(),
        e["param"].as_str(),
        e["code"].as_str(),
    )
}

#[tokio::test]
async fn the_model_list_reports_the_context_window() {
    let s = served(Arc::new(scripted()));
    let (status, _, body) = send(
        &s.app,
        request("GET", "/v1/models").body(Body::empty()).unwrap(),
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    let v: Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(v["object"], "list");
    let m = &v["data"][0];
    assert_eq!(m["id"], "scripted");
    assert_eq!(m["object"], "model");
    assert_eq!(m["max_model_len"], 4096);
    assert_eq!(m["context_length"], 4096);
    // The list parses as the shared wire type (what context-window discovery reads).
    let list: trellis_llm::openai_wire::ModelList = serde_json::from_slice(&body).unwrap();
    assert_eq!(list.data[0].max_model_len, Some(4096));
    let (status, _, one) = send(
        &s.app,
        request("GET", "/v1/models/scripted")
            .body(Body::empty())
            .unwrap(),
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(serde_json::from_slice::<Value>(&one).unwrap(), *m);
    let (status, _, body) = send(
        &s.app,
        request("GET", "/v1/models/gpt-4o")
            .body(Body::empty())
            .unwrap(),
    )
    .await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    let v: Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(
        error_of(&v),
        ("invalid_request_error", None, Some("model_not_found"))
    );
}

#[tokio::test]
async fn a_whole_answer_has_the_text_the_finish_and_the_usage() {
    let s = served(Arc::new(scripted()));
    let (status, v) = chat(&s.app, &user("hi")).await;
    assert_eq!(status, StatusCode::OK, "{v}");
    assert_eq!(v["object"], "chat.completion");
    assert!(v["id"].as_str().unwrap().starts_with("chatcmpl-"));
    assert_eq!(v["model"], "scripted");
    let choice = &v["choices"][0];
    assert_eq!(choice["message"]["role"], "assistant");
    assert_eq!(
        choice["message"]["content"],
        "Hello from the scripted model."
    );
    assert!(choice["message"].get("tool_calls").is_none());
    assert_eq!(choice["finish_reason"], "stop");
    let u = &v["usage"];
    assert!(u["prompt_tokens"].as_u64().unwrap() > 0);
    assert!(u["completion_tokens"].as_u64().unwrap() > 0);
    assert_eq!(
        u["total_tokens"].as_u64().unwrap(),
        u["prompt_tokens"].as_u64().unwrap() + u["completion_tokens"].as_u64().unwrap()
    );
    let records = s.records.lock().unwrap().clone();
    assert_eq!(records.len(), 1);
    assert_eq!(records[0].status, 200);
    assert_eq!(records[0].outcome, Outcome::Done("stop".into()));
    assert!(
        records[0].to_string().contains("generated tokens"),
        "{}",
        records[0]
    );
}

#[tokio::test]
async fn a_stream_sends_the_role_then_deltas_the_finish_usage_and_done() {
    let provider = scripted();
    let s = served(Arc::new(provider.clone()));
    let mut body = user("hi");
    body["stream"] = json!(true);
    body["stream_options"] = json!({"include_usage": true});
    let (status, v) = chat(&s.app, &body).await;
    assert_eq!(status, StatusCode::OK);
    let text = v.as_str().unwrap();
    assert!(text.ends_with("data: [DONE]\n\n"), "{text}");
    let events = sse_data(text);
    let id = events[0]["id"].as_str().unwrap();
    assert_eq!(events[0]["choices"][0]["delta"]["role"], "assistant");
    let chunks: Vec<&Value> = events.iter().filter(|e| e.is_object()).collect();
    assert!(
        chunks
            .iter()
            .all(|c| c["id"] == id && c["object"] == "chat.completion.chunk")
    );
    let answer: String = chunks
        .iter()
        .filter_map(|c| c["choices"][0]["delta"]["content"].as_str())
        .collect();
    assert_eq!(answer, "Hello from the scripted model.");
    assert!(
        chunks.len() > 4,
        "the text arrives in several chunks: {text}"
    );
    let finish: Vec<&Value> = chunks
        .iter()
        .filter(|c| !c["choices"][0]["finish_reason"].is_null())
        .copied()
        .collect();
    assert_eq!(finish.len(), 1);
    assert_eq!(finish[0]["choices"][0]["finish_reason"], "stop");
    let last = chunks.last().unwrap();
    assert_eq!(last["choices"], json!([]));
    assert!(last["usage"]["completion_tokens"].as_u64().unwrap() > 0);
    // Without include_usage there is no usage chunk.
    body["stream_options"] = json!(null);
    let (_, v) = chat(&s.app, &body).await;
    let events = sse_data(v.as_str().unwrap());
    assert!(
        events.iter().all(|e| e.get("usage").is_none()),
        "{events:?}"
    );
    assert_eq!(provider.requests().len(), 2);
}

fn tool_request(stream: bool) -> Value {
    json!({
        "model": "scripted", "stream": stream,
        "messages": [{"role": "user", "content": "read the readme"}],
        "tools": [{"type": "function", "function": {
            "name": "read_file", "description": "Reads a file",
            "parameters": {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]}
        }}]
    })
}

#[tokio::test]
async fn tool_calls_come_whole_or_in_deltas_and_their_results_go_back() {
    let provider = scripted();
    let s = served(Arc::new(provider.clone()));
    let (status, v) = chat(&s.app, &tool_request(false)).await;
    assert_eq!(status, StatusCode::OK, "{v}");
    let choice = &v["choices"][0];
    assert_eq!(choice["finish_reason"], "tool_calls");
    assert!(choice["message"]["content"].is_null());
    let call = &choice["message"]["tool_calls"][0];
    assert_eq!(call["type"], "function");
    assert_eq!(call["function"]["name"], "read_file");
    let args: Value =
        serde_json::from_str(call["function"]["arguments"].as_str().unwrap()).unwrap();
    assert_eq!(args, json!({"path": "README.md"}));
    let id = call["id"].as_str().unwrap().to_string();
    assert!(id.starts_with("call_"));
    // The provider got the tool with its schema.
    let sent = &provider.requests()[0];
    assert_eq!(sent.tools[0].name, "read_file");
    assert_eq!(sent.tools[0].parameters["required"], json!(["path"]));

    // Streamed: the first delta of the call carries its id, type and name.
    let (_, v) = chat(&s.app, &tool_request(true)).await;
    let events = sse_data(v.as_str().unwrap());
    let calls: Vec<&Value> = events
        .iter()
        .filter_map(|e| e["choices"][0]["delta"]["tool_calls"].get(0))
        .collect();
    assert_eq!(calls[0]["index"], 0);
    assert_eq!(calls[0]["function"]["name"], "read_file");
    assert!(calls[0]["id"].as_str().unwrap().starts_with("call_"));
    let streamed_id = calls[0]["id"].as_str().unwrap();
    assert_ne!(streamed_id, id, "ids are unique across responses");
    let args: String = calls
        .iter()
        .map(|c| c["function"]["arguments"].as_str().unwrap())
        .collect();
    assert_eq!(
        serde_json::from_str::<Value>(&args).unwrap(),
        json!({"path": "README.md"})
    );
    assert!(
        events
            .iter()
            .any(|e| e["choices"][0]["finish_reason"] == "tool_calls")
    );

    // The result goes back as a `tool` message answering the call.
    let mut follow = tool_request(false);
    follow["messages"] = json!([
        {"role": "user", "content": "read the readme"},
        {"role": "assistant", "content": null, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": id, "content": "3 lines"}
    ]);
    let (status, v) = chat(&s.app, &follow).await;
    assert_eq!(status, StatusCode::OK, "{v}");
    assert_eq!(
        v["choices"][0]["message"]["content"],
        "The tool said: 3 lines"
    );
    let sent = provider.requests().pop().unwrap();
    assert_eq!(sent.messages[1].tool_calls[0].id, id);
    assert_eq!(sent.messages[2].tool_call_id.as_deref(), Some(id.as_str()));
}

#[tokio::test]
async fn response_format_reaches_the_provider_as_structured_output() {
    let provider = scripted();
    let s = served(Arc::new(provider.clone()));
    let schema =
        json!({"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]});
    let mut body = user("capital of France?");
    body["response_format"] = json!({"type": "json_schema", "json_schema": {"name": "capital", "schema": schema, "strict": true}});
    let (status, v) = chat(&s.app, &body).await;
    assert_eq!(status, StatusCode::OK, "{v}");
    let content: Value =
        serde_json::from_str(v["choices"][0]["message"]["content"].as_str().unwrap()).unwrap();
    assert_eq!(content["city"], "Paris");
    let format = provider.requests()[0].response_format.clone().unwrap();
    assert_eq!(format.name, "capital");
    assert_eq!(format.schema, schema);
    body["response_format"] = json!({"type": "json_object"});
    chat(&s.app, &body).await;
    let format = provider.requests()[1].response_format.clone().unwrap();
    assert_eq!(format.schema, json!({"type": "object"}));
}

#[tokio::test]
async fn bad_requests_get_openai_shaped_errors() {
    let s = served(Arc::new(scripted()));
    let post = |body: &'static str| {
        request("POST", "/v1/chat/completions")
            .body(Body::from(body))
            .unwrap()
    };
    let cases = [
        ("{\"model\": ", StatusCode::BAD_REQUEST, None, None),
        (
            "{\"model\": \"scripted\"}",
            StatusCode::BAD_REQUEST,
            None,
            None,
        ),
        (
            "{\"model\": \"scripted\", \"messages\": [{\"role\": \"robot\", \"content\": \"x\"}]}",
            StatusCode::BAD_REQUEST,
            Some("messages[0].role"),
            None,
        ),
        (
            "{\"model\": \"gpt-4o\", \"messages\": [{\"role\": \"user\", \"content\": \"x\"}]}",
            StatusCode::NOT_FOUND,
            Some("model"),
            Some("model_not_found"),
        ),
    ];
    for (body, status, param, code) in cases {
        let (got, _, bytes) = send(&s.app, post(body)).await;
        assert_eq!(got, status, "{body}");
        let v: Value = serde_json::from_slice(&bytes).unwrap();
        let (kind, p, c) = error_of(&v);
        assert_eq!(kind, "invalid_request_error", "{v}");
        assert_eq!((p, c), (param, code), "{v}");
    }
    let (_, _, bytes) = send(&s.app, post("{\"model\": \"scripted\"}")).await;
    assert!(String::from_utf8_lossy(&bytes).contains("messages"));
    // Unknown routes and methods.
    for (method, uri) in [
        ("GET", "/v1/completions"),
        ("POST", "/v1/embeddings"),
        ("GET", "/v1/chat/completions"),
    ] {
        let (status, _, bytes) =
            send(&s.app, request(method, uri).body(Body::empty()).unwrap()).await;
        assert_eq!(status, StatusCode::NOT_FOUND, "{method} {uri}");
        let v: Value = serde_json::from_slice(&bytes).unwrap();
        assert_eq!(error_of(&v).2, Some("unknown_url"));
    }
    let records = s.records.lock().unwrap().clone();
    assert!(
        records
            .iter()
            .all(|r| matches!(r.outcome, Outcome::Failed(_))),
        "{records:?}"
    );
}

#[tokio::test]
async fn the_token_host_and_origin_are_checked_before_anything_else() {
    let s = served(Arc::new(scripted()));
    let bare = |method: &str, uri: &str| {
        axum::http::Request::builder()
            .method(method)
            .uri(uri)
            .header(header::HOST, HOST)
    };
    for auth in [
        None,
        Some("Bearer wrong"),
        Some(format!("Basic {TOKEN}").as_str()),
        Some("Bearer "),
    ] {
        for (method, uri) in [
            ("GET", "/v1/models"),
            ("POST", "/v1/chat/completions"),
            ("GET", "/nowhere"),
        ] {
            let mut req = bare(method, uri);
            if let Some(a) = auth {
                req = req.header(header::AUTHORIZATION, a);
            }
            let (status, headers, bytes) = send(&s.app, req.body(Body::empty()).unwrap()).await;
            assert_eq!(status, StatusCode::UNAUTHORIZED, "{auth:?} {method} {uri}");
            assert_eq!(headers[header::WWW_AUTHENTICATE], "Bearer");
            let v: Value = serde_json::from_slice(&bytes).unwrap();
            assert_eq!(
                error_of(&v),
                ("invalid_request_error", None, Some("invalid_api_key"))
            );
            assert!(!v.to_string().contains(TOKEN));
        }
    }
    // Liveness needs no token.
    let (status, _, _) = send(&s.app, bare("GET", "/health").body(Body::empty()).unwrap()).await;
    assert_eq!(status, StatusCode::OK);
    // A foreign Host (DNS rebinding) and a foreign Origin are refused even with the token.
    let req = axum::http::Request::builder()
        .uri("/v1/models")
        .header(header::HOST, "evil.example:8421")
        .header(header::AUTHORIZATION, format!("Bearer {TOKEN}"))
        .body(Body::empty())
        .unwrap();
    let (status, _, _) = send(&s.app, req).await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    let req = request("POST", "/v1/chat/completions")
        .header(header::ORIGIN, "https://evil.example")
        .body(Body::from(user("hi").to_string()))
        .unwrap();
    let (status, _, _) = send(&s.app, req).await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    let req = request("POST", "/v1/chat/completions")
        .header(header::ORIGIN, format!("http://{HOST}"))
        .body(Body::from(user("hi").to_string()))
        .unwrap();
    let (status, _, _) = send(&s.app, req).await;
    assert_eq!(status, StatusCode::OK);
}

#[tokio::test]
async fn a_model_failure_is_a_500_or_an_error_event_without_its_details() {
    let s = served(Arc::new(scripted()));
    let (status, v) = chat(&s.app, &user("please fail")).await;
    assert_eq!(status, StatusCode::INTERNAL_SERVER_ERROR);
    assert_eq!(error_of(&v).0, "server_error");
    assert!(!v.to_string().contains("/secret/place"), "{v}");
    let mut body = user("please fail");
    body["stream"] = json!(true);
    let (status, v) = chat(&s.app, &body).await;
    assert_eq!(status, StatusCode::OK, "the stream had started");
    let text = v.as_str().unwrap();
    let events = sse_data(text);
    let last = events.last().unwrap();
    assert_eq!(last["error"]["type"], "server_error", "{text}");
    assert!(
        !text.contains("[DONE]"),
        "a failed stream does not end as a success"
    );
    // The server's own log has the details.
    let records = s.records.lock().unwrap().clone();
    assert!(
        records
            .iter()
            .all(|r| r.to_string().contains("/secret/place")),
        "{records:?}"
    );
}

/// The scripted model with an exact token count, as the embedded model has.
struct Counted(trellis_test_support::scripted::ScriptedProvider);

impl ModelProvider for Counted {
    fn info(&self) -> &ProviderInfo {
        self.0.info()
    }
    fn stream(&self, request: ChatRequest, cancel: CancellationToken) -> ChatStream {
        self.0.stream(request, cancel)
    }
    fn count_tokens(&self, request: &ChatRequest) -> trellis_llm::Result<TokenCount> {
        let bytes: usize = request.messages.iter().map(|m| m.content.len()).sum();
        Ok(TokenCount {
            tokens: bytes as u64,
            exact: true,
        })
    }
}

#[tokio::test]
async fn a_prompt_longer_than_the_context_window_is_refused_before_the_model_runs() {
    let provider = scripted();
    let s = served(Arc::new(Counted(provider.clone())));
    let (status, v) = chat(&s.app, &user(&"x".repeat(5000))).await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert_eq!(
        error_of(&v),
        (
            "invalid_request_error",
            Some("messages"),
            Some("context_length_exceeded")
        )
    );
    assert!(provider.requests().is_empty());
    let (status, v) = chat(&s.app, &user(&"x".repeat(100))).await;
    assert_eq!(status, StatusCode::OK, "{v}");
    assert!(v["usage"]["prompt_tokens"].as_u64().unwrap() > 0);
}
