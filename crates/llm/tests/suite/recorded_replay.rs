//! The providers against streams recorded from a real server of each wire format
//! (see `recorded.rs`): parsed events against what the recording script read in the same
//! bytes, and the request bodies against the ones the recordings were made with.

use futures::StreamExt;
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;
use trellis_llm::{Error, FinishReason, StreamEvent, StructuredOptions, complete_structured};

use super::mock::MockServer;
use super::recorded::{
    CapitalAnswer, KEY_ENV, WRONG_KEY_ENV, case_request, expected_finish, expected_usage, provider,
    recording, run_case, usage_tuple,
};

/// Streams `case` of `format` from its recording; returns the events (all `Ok`) and the server.
async fn stream(format: &str, case: &str) -> (Vec<StreamEvent>, MockServer) {
    let r = recording(format, case);
    let server = MockServer::start(vec![r.reply()]).await;
    let p = provider(format, &server, KEY_ENV);
    let mut s = p.stream(case_request(format, case).0, CancellationToken::new());
    let mut events = Vec::new();
    while let Some(e) = s.next().await {
        events.push(e.unwrap());
    }
    (events, server)
}

fn texts(events: &[StreamEvent]) -> Vec<String> {
    events
        .iter()
        .filter_map(|e| match e {
            StreamEvent::TextDelta { text } => Some(text.clone()),
            _ => None,
        })
        .collect()
}

/// The body fields every streamed request of `format` carries.
fn assert_common_body(format: &str, body: &Value) {
    assert_eq!(body["model"], "SmolLM2-135M-Instruct");
    assert_eq!(body["stream"], true);
    assert_eq!(body["temperature"], 0.0);
    if format == "openai" {
        assert_eq!(body["stream_options"], json!({"include_usage": true}));
        assert_eq!(body["messages"][0]["role"], "system");
        assert_eq!(body["messages"][1]["role"], "user");
    } else {
        assert!(body["system"].is_string());
        assert_eq!(body["messages"][0]["role"], "user");
        assert_eq!(body["messages"][0]["content"][0]["type"], "text");
    }
}

async fn text(format: &str) {
    let r = recording(format, "text");
    let (events, server) = stream(format, "text").await;
    let deltas = texts(&events);
    assert!(deltas.len() >= 3, "streamed in pieces: {deltas:?}");
    let text = deltas.concat();
    assert!(!text.trim().is_empty());
    assert_eq!(text, r.expect("text").as_str().unwrap());
    let usage = events.iter().find_map(|e| match e {
        StreamEvent::Usage { usage } => Some(*usage),
        _ => None,
    });
    let usage = usage.expect("the recording reports usage");
    assert_eq!(usage_tuple(&usage), expected_usage(&r));
    assert_eq!(
        events.last(),
        Some(&StreamEvent::Finish {
            reason: expected_finish(&r)
        })
    );
    let sent = server.requests();
    assert_eq!(sent.len(), 1);
    r.assert_sent(&sent[0]);
    assert_common_body(format, &sent[0].body);
    assert_eq!(sent[0].body["max_tokens"], 40);
}

#[tokio::test]
async fn recorded_openai_text() {
    text("openai").await;
}

#[tokio::test]
async fn recorded_anthropic_text() {
    text("anthropic").await;
}

async fn tool_call(format: &str) {
    let r = recording(format, "tool_call");
    let server = MockServer::start(vec![r.reply()]).await;
    let c = run_case(
        format,
        provider(format, &server, KEY_ENV).as_ref(),
        "tool_call",
    )
    .await
    .unwrap();
    let expected = r.expect("tool_calls").as_array().unwrap();
    assert!(!expected.is_empty(), "the recording holds a tool call");
    assert_eq!(c.tool_calls.len(), expected.len());
    for (call, want) in c.tool_calls.iter().zip(expected) {
        assert_eq!(call.name, "get_weather");
        assert_eq!(call.name, want["name"].as_str().unwrap());
        assert_eq!(call.arguments, want["arguments"].as_str().unwrap());
        if let Some(id) = want["id"].as_str() {
            assert_eq!(call.id, id);
        }
        let args = call.arguments_json().unwrap();
        assert!(args["city"].is_string(), "{args}");
    }
    assert_eq!(c.finish, Some(FinishReason::ToolCalls));
    assert_eq!(c.finish, Some(expected_finish(&r)));
    assert_eq!(usage_tuple(&c.usage), expected_usage(&r));
    let sent = server.requests();
    r.assert_sent(&sent[0]);
    let body = &sent[0].body;
    assert_common_body(format, body);
    let tool = if format == "openai" {
        assert_eq!(body["tools"][0]["type"], "function");
        &body["tools"][0]["function"]
    } else {
        &body["tools"][0]
    };
    assert_eq!(tool["name"], "get_weather");
    let schema_key = if format == "openai" {
        "parameters"
    } else {
        "input_schema"
    };
    assert_eq!(tool[schema_key]["required"], json!(["city"]));
}

#[tokio::test]
async fn recorded_openai_tool_call() {
    tool_call("openai").await;
}

#[tokio::test]
async fn recorded_anthropic_tool_call() {
    tool_call("anthropic").await;
}

async fn structured(format: &str) {
    let r = recording(format, "structured");
    let server = MockServer::start(vec![r.reply()]).await;
    let p = provider(format, &server, KEY_ENV);
    let options = StructuredOptions {
        reask: false,
        ..StructuredOptions::default()
    };
    let (req, _) = case_request(format, "structured");
    let a =
        complete_structured::<CapitalAnswer>(p.as_ref(), req, options, CancellationToken::new())
            .await
            .unwrap();
    // The answer the server produced, as raw JSON text: in the text (OpenAI) or in the
    // forced tool's input (Anthropic).
    let raw = if format == "openai" {
        r.expect("text").as_str().unwrap().to_string()
    } else {
        r.expect("tool_calls")[0]["arguments"]
            .as_str()
            .unwrap()
            .to_string()
    };
    assert_eq!(a.completions[0].text, raw);
    let raw: Value = serde_json::from_str(&raw).unwrap();
    assert_eq!(a.value.city, raw["city"].as_str().unwrap());
    assert_eq!(a.value.country, raw["country"].as_str().unwrap());
    assert!(a.repairs.is_empty(), "{:?}", a.repairs);
    // Anthropic's forced answer tool is the answer, not a tool call.
    assert!(a.completions[0].tool_calls.is_empty());
    assert_eq!(a.completions[0].finish, Some(FinishReason::Stop));
    let sent = server.requests();
    r.assert_sent(&sent[0]);
    let body = &sent[0].body;
    assert_common_body(format, body);
    if format == "openai" {
        assert_eq!(body["response_format"]["type"], "json_schema");
        assert_eq!(
            body["response_format"]["json_schema"]["name"],
            "CapitalAnswer"
        );
        assert_eq!(
            body["response_format"]["json_schema"]["schema"]["required"],
            json!(["city", "country"])
        );
    } else {
        assert_eq!(
            body["tool_choice"],
            json!({"type": "tool", "name": "CapitalAnswer"})
        );
        assert_eq!(body["tools"][0]["name"], "CapitalAnswer");
        assert_eq!(
            body["tools"][0]["input_schema"]["required"],
            json!(["city", "country"])
        );
    }
}

#[tokio::test]
async fn recorded_openai_structured_output() {
    structured("openai").await;
}

#[tokio::test]
async fn recorded_anthropic_structured_output() {
    structured("anthropic").await;
}

/// A recorded error status: classified, with the server's message, and not retried.
async fn client_error(format: &str, case: &str, status: u16, code: &str) {
    let r = recording(format, case);
    assert_eq!(r.meta["status"], status);
    let server = MockServer::start(vec![r.reply(), r.reply()]).await;
    let (_, key_env) = case_request(format, case);
    let err = run_case(format, provider(format, &server, key_env).as_ref(), case)
        .await
        .unwrap_err();
    match &err {
        Error::Http {
            status: s, message, ..
        } => {
            assert_eq!(*s, status);
            assert_eq!(message, r.expect("error_message").as_str().unwrap());
        }
        other => panic!("{other}"),
    }
    assert!(!err.is_retryable());
    assert_eq!(err.code(), code);
    let sent = server.requests();
    assert_eq!(sent.len(), 1, "a client error is not retried");
    r.assert_sent(&sent[0]);
}

#[tokio::test]
async fn recorded_openai_context_exceeded_is_a_client_error() {
    client_error("openai", "context_exceeded", 400, "http").await;
}

#[tokio::test]
async fn recorded_anthropic_context_exceeded_is_a_client_error() {
    client_error("anthropic", "context_exceeded", 400, "http").await;
}

#[tokio::test]
async fn recorded_openai_wrong_key_is_unauthorized() {
    client_error("openai", "unauthorized", 401, "unauthorized").await;
    let r = recording("openai", "unauthorized");
    assert_ne!(r.request["headers"]["authorization"], "Bearer trellis-llm");
    assert!(WRONG_KEY_ENV != KEY_ENV);
}

#[tokio::test]
async fn recorded_anthropic_wrong_key_is_unauthorized() {
    client_error("anthropic", "unauthorized", 401, "unauthorized").await;
    let r = recording("anthropic", "unauthorized");
    assert_ne!(r.request["headers"]["x-api-key"], "trellis-llm");
}

/// The server's 503 while it loads the model is retried, and the retry gets the answer.
async fn loading_then_answer(format: &str) {
    let loading = recording(format, "loading");
    assert_eq!(loading.meta["status"], 503);
    let answer = recording(format, "text");
    let server = MockServer::start(vec![loading.reply(), answer.reply()]).await;
    let c = run_case(
        format,
        provider(format, &server, KEY_ENV).as_ref(),
        "loading",
    )
    .await
    .unwrap();
    assert_eq!(c.text, answer.expect("text").as_str().unwrap());
    let sent = server.requests();
    assert_eq!(sent.len(), 2, "retried once");
    loading.assert_sent(&sent[0]);
    assert_eq!(
        sent[0].body, sent[1].body,
        "the retry sends the same request"
    );
}

#[tokio::test]
async fn recorded_openai_loading_503_is_retried() {
    loading_then_answer("openai").await;
}

#[tokio::test]
async fn recorded_anthropic_loading_503_is_retried() {
    loading_then_answer("anthropic").await;
}

/// The recorded text stream cut inside an event: the text before the cut arrives, then a
/// `StreamCut` error — never a silent success; and, output having been delivered, no replay.
async fn cut(format: &str) {
    let r = recording(format, "cut");
    assert!(
        r.meta["cut"]["at_byte"].as_u64().unwrap() < r.meta["cut"]["of_bytes"].as_u64().unwrap()
    );
    let full = recording(format, "text");
    let server = MockServer::start(vec![r.reply(), full.reply()]).await;
    let p = provider(format, &server, KEY_ENV);
    let mut s = p.stream(case_request(format, "text").0, CancellationToken::new());
    let (mut text, mut error, mut finished) = (String::new(), None, false);
    while let Some(e) = s.next().await {
        match e {
            Ok(StreamEvent::TextDelta { text: t }) => text.push_str(&t),
            Ok(StreamEvent::Finish { .. }) => finished = true,
            Ok(_) => {}
            Err(e) => error = Some(e),
        }
    }
    let error = error.expect("the cut must surface");
    assert!(matches!(error, Error::StreamCut { .. }), "{error}");
    assert!(!finished, "no finish after a cut");
    assert!(!text.is_empty());
    assert_eq!(text, r.expect("text").as_str().unwrap());
    let whole = full.expect("text").as_str().unwrap();
    assert!(whole.starts_with(&text) && whole.len() > text.len());
    assert_eq!(server.requests().len(), 1, "output was already delivered");
}

#[tokio::test]
async fn recorded_openai_cut_stream_is_an_error() {
    cut("openai").await;
}

#[tokio::test]
async fn recorded_anthropic_cut_stream_is_an_error() {
    cut("anthropic").await;
}
