//! Context management against a real endpoint: the OpenAI provider (built from
//! configuration, `context = 3000`) talking to a loopback chat-completions server that
//! enforces what real servers enforce — a prompt within the context window (counted with
//! tiktoken) and tool results that answer the call right before them — and answers 400
//! otherwise, as vLLM and OpenAI do.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::sync::{Arc, Mutex};

use serde_json::{Value, json};
use trellis_agents::context::ContextPolicy;
use trellis_agents::{ContextConfig, Resume};
use trellis_llm::tokens::count_openai;
use trellis_llm::types::ResponseFormat;
use trellis_llm::{ChatRequest, Message, ModelRegistry, ToolCall, ToolSpec};
use trellis_protocol::{CompactionMethod, SessionEvent};

use super::context::{Recorder, agent, consistent, done, fixture};

const WINDOW: u64 = 3000;

/// The request a body carries, as the model's side sees it.
fn request_of(body: &Value) -> ChatRequest {
    let messages = body["messages"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|m| {
            let content = m["content"].as_str().unwrap_or_default();
            match m["role"].as_str() {
                Some("system") => Message::system(content),
                Some("tool") => {
                    Message::tool_result(m["tool_call_id"].as_str().unwrap_or_default(), content)
                }
                Some("assistant") => {
                    let mut a = Message::assistant(content);
                    a.tool_calls = m["tool_calls"]
                        .as_array()
                        .into_iter()
                        .flatten()
                        .map(|c| ToolCall {
                            id: c["id"].as_str().unwrap_or_default().into(),
                            name: c["function"]["name"].as_str().unwrap_or_default().into(),
                            arguments: c["function"]["arguments"]
                                .as_str()
                                .unwrap_or_default()
                                .into(),
                        })
                        .collect();
                    a
                }
                _ => Message::user(content),
            }
        })
        .collect();
    let tools = body["tools"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|t| ToolSpec {
            name: t["function"]["name"].as_str().unwrap_or_default().into(),
            description: t["function"]["description"]
                .as_str()
                .unwrap_or_default()
                .into(),
            parameters: t["function"]["parameters"].clone(),
        })
        .collect();
    let response_format = body["response_format"]
        .get("json_schema")
        .map(|f| ResponseFormat {
            name: f["name"].as_str().unwrap_or_default().into(),
            schema: f["schema"].clone(),
        });
    ChatRequest {
        messages,
        tools,
        response_format,
        ..ChatRequest::default()
    }
}

/// Why a server would refuse `body`, if it would.
fn refusal(body: &Value) -> Option<String> {
    let request = request_of(body);
    let tokens = count_openai("gpt-4o", &request).tokens;
    let answer = body["max_tokens"]
        .as_u64()
        .or(body["max_completion_tokens"].as_u64())
        .unwrap_or(0);
    if tokens + answer > WINDOW {
        return Some(format!(
            "This model's maximum context length is {WINDOW} tokens. However, you requested {} tokens ({tokens} in the messages, {answer} in the completion).",
            tokens + answer
        ));
    }
    consistent(&request.messages).err()
}

fn chunk(delta: Value, finish: Value) -> Value {
    json!({ "id": "chatcmpl-mock", "object": "chat.completion.chunk", "created": 0,
            "model": "mock-model", "choices": [{ "index": 0, "delta": delta, "finish_reason": finish }] })
}

fn usage() -> String {
    format!(
        "data: {}\n\n",
        json!({ "id": "chatcmpl-mock", "object": "chat.completion.chunk", "created": 0, "model": "mock-model",
                "choices": [], "usage": { "prompt_tokens": 100, "completion_tokens": 20, "total_tokens": 120 } })
    )
}

fn text_sse(text: &str) -> String {
    format!(
        "data: {}\n\ndata: {}\n\n{}data: [DONE]\n\n",
        chunk(json!({ "role": "assistant", "content": text }), Value::Null),
        chunk(json!({}), json!("stop")),
        usage()
    )
}

fn tool_sse(id: &str, name: &str, arguments: &Value) -> String {
    let call = json!({ "tool_calls": [{ "index": 0, "id": id, "type": "function",
        "function": { "name": name, "arguments": arguments.to_string() } }] });
    format!(
        "data: {}\n\ndata: {}\n\n{}data: [DONE]\n\n",
        chunk(call, Value::Null),
        chunk(json!({}), json!("tool_calls")),
        usage()
    )
}

/// What the server saw: request bodies, and the refusals it answered.
#[derive(Clone, Default)]
struct Seen {
    bodies: Arc<Mutex<Vec<Value>>>,
    refused: Arc<Mutex<Vec<String>>>,
}

/// Serves until the test process ends: summary requests (by their instruction) get a
/// summary, the agent's get eight `dump` calls and then its report.
fn serve() -> (String, Seen) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/v1", listener.local_addr().unwrap());
    let seen = Seen::default();
    let log = seen.clone();
    std::thread::spawn(move || {
        let mut agent_calls = 0;
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { continue };
            let mut reader = BufReader::new(stream.try_clone().unwrap());
            let mut len = 0usize;
            let mut line = String::new();
            loop {
                line.clear();
                if reader.read_line(&mut line).unwrap_or(0) == 0 {
                    break;
                }
                let l = line.trim_end();
                if l.is_empty() {
                    break;
                }
                if let Some(v) = l.to_ascii_lowercase().strip_prefix("content-length:") {
                    len = v.trim().parse().unwrap_or(0);
                }
            }
            let mut body = vec![0; len];
            if reader.read_exact(&mut body).is_err() {
                continue;
            }
            let body: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
            log.bodies.lock().unwrap().push(body.clone());
            let (status, reply) = if let Some(why) = refusal(&body) {
                log.refused.lock().unwrap().push(why.clone());
                (
                    "400 Bad Request",
                    json!({ "error": { "message": why, "type": "invalid_request_error" } })
                        .to_string(),
                )
            } else if body["messages"][0]["content"]
                .as_str()
                .is_some_and(|s| s.starts_with("You maintain the working memory"))
            {
                (
                    "200 OK",
                    text_sse("Dumped tags W0 to W3; W4 onwards remain."),
                )
            } else {
                agent_calls += 1;
                if agent_calls <= 8 {
                    let args = json!({ "tag": format!("W{agent_calls}"), "bytes": 1500 });
                    (
                        "200 OK",
                        tool_sse(&format!("call_w{agent_calls}"), "dump", &args),
                    )
                } else {
                    let report = json!({ "failure": false, "output": "dumped eight tags" });
                    ("200 OK", text_sse(&report.to_string()))
                }
            };
            let kind = if status.starts_with("200") {
                "text/event-stream"
            } else {
                "application/json"
            };
            let _ = write!(
                stream,
                "HTTP/1.1 {status}\r\ncontent-type: {kind}\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{reply}",
                reply.len()
            );
        }
    });
    (url, seen)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_openai_wire_endpoint_never_sees_a_prompt_beyond_its_window() {
    let (url, seen) = serve();
    let toml = format!(
        "[models]\ndefault = \"mock\"\n\n\
         [models.profiles.mock]\nprovider = \"openai\"\nbase_url = \"{url}\"\nmodel = \"mock-model\"\ncontext = {WINDOW}\nmax_retries = 0\n\n\
         [models.profiles.mock-summary]\nprovider = \"openai\"\nbase_url = \"{url}\"\nmodel = \"mock-summary\"\ncontext = {WINDOW}\nmax_retries = 0\n\n\
         [roles]\nplanner = \"mock-summary\"\n\n\
         [context]\nkeep_last = 6\n"
    );
    let config =
        trellis_config::Config::from_toml(std::path::Path::new("config.toml"), &toml).unwrap();
    let models = ModelRegistry::from_config(&config).unwrap();
    let context: ContextConfig = config.section("context").unwrap();
    context.validate().unwrap();
    let mut policy: ContextPolicy = context.policy_for("dumper");
    policy.summarizer = Some(models.for_role(context.summary_role()).unwrap());
    let provider = models.for_role("default").unwrap();
    assert_eq!(provider.info().context_window, Some(WINDOW as u32));

    let fx = fixture();
    let recorder = Recorder::default();
    let out = done(
        agent(&fx, provider, policy, &recorder)
            .run(Resume::Fresh)
            .await
            .unwrap(),
    );
    assert_eq!(out.report.output, "dumped eight tags");
    assert_eq!(out.tool_calls, 8);
    assert_eq!(*seen.refused.lock().unwrap(), Vec::<String>::new());

    let bodies = seen.bodies.lock().unwrap().clone();
    let (summaries, agent_bodies): (Vec<&Value>, Vec<&Value>) =
        bodies.iter().partition(|b| b["model"] == "mock-summary");
    assert_eq!(agent_bodies.len(), 9);
    assert!(!summaries.is_empty());
    // The dump outputs alone (8 × 1,500 bytes) are far beyond the window.
    let peak = agent_bodies
        .iter()
        .map(|b| count_openai("gpt-4o", &request_of(b)).tokens)
        .max()
        .unwrap();
    let compacted: Vec<SessionEvent> = recorder
        .events()
        .into_iter()
        .filter(|e| matches!(e, SessionEvent::ContextCompacted { .. }))
        .collect();
    assert_eq!(compacted.len(), summaries.len());
    assert!(compacted.iter().all(|e| matches!(
        e,
        SessionEvent::ContextCompacted {
            method: CompactionMethod::Summary,
            ..
        }
    )));
    println!(
        "OpenAI wire, window {WINDOW}: {} agent requests, peak {peak} tokens (tiktoken), {} summary calls",
        agent_bodies.len(),
        summaries.len()
    );
    for e in &compacted {
        println!("{}", e.compaction_text().unwrap());
    }
}
