//! Context management against a real endpoint: the OpenAI provider (built from
//! configuration, `context = 3000` or no `context` and an Ollama-like server that reports
//! 3000 tokens) talking to a loopback chat-completions server that
//! enforces what real servers enforce — a prompt within the context window (counted with
//! tiktoken) and tool results that answer the call right before them — and answers 400
//! otherwise, as vLLM and OpenAI do.

use std::sync::{Arc, Mutex};

use serde_json::{Value, json};
use trellis_agents::context::ContextPolicy;
use trellis_agents::{ContextConfig, Resume};
use trellis_llm::tokens::count_openai;
use trellis_llm::types::ResponseFormat;
use trellis_llm::{ChatRequest, Message, ModelRegistry, ToolCall, ToolSpec};
use trellis_protocol::{CompactionMethod, SessionEvent};
use trellis_test_support::wire::{self, Reply, text_sse, tool_sse};

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

/// What the server saw: request bodies, and the refusals it answered.
#[derive(Clone, Default)]
struct Seen {
    bodies: Arc<Mutex<Vec<Value>>>,
    refused: Arc<Mutex<Vec<String>>>,
}

/// Serves until the returned server is dropped: summary requests (by their instruction) get a
/// summary, the agent's get eight `dump` calls and then its report; `routes` answer the
/// server's other endpoints.
fn serve(routes: Vec<wire::Route>) -> (wire::Wire, Seen) {
    let refused: Arc<Mutex<Vec<String>>> = Arc::default();
    let log = refused.clone();
    let mut agent_calls = 0;
    let (url, bodies) = wire::serve_with(routes, move |body| {
        if let Some(why) = refusal(body) {
            log.lock().unwrap().push(why.clone());
            Reply::json(
                400,
                &json!({ "error": { "message": why, "type": "invalid_request_error" } }),
            )
        } else if body["messages"][0]["content"]
            .as_str()
            .is_some_and(|s| s.starts_with("You maintain the working memory"))
        {
            Reply::sse(text_sse("Dumped tags W0 to W3; W4 onwards remain."))
        } else {
            agent_calls += 1;
            if agent_calls <= 8 {
                let args = json!({ "tag": format!("W{agent_calls}"), "bytes": 1500 });
                Reply::sse(tool_sse(
                    &format!("call_w{agent_calls}"),
                    "dump",
                    &args.to_string(),
                ))
            } else {
                let report = json!({ "failure": false, "output": "dumped eight tags" });
                Reply::sse(text_sse(&report.to_string()))
            }
        }
    });
    (url, Seen { bodies, refused })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_openai_wire_endpoint_never_sees_a_prompt_beyond_its_window() {
    let (url, seen) = serve(Vec::new());
    let context = format!("context = {WINDOW}\n");
    let toml = config(&url, &context);
    let provider_window = run_within_the_window(&toml, &seen).await;
    assert_eq!(provider_window, Some(WINDOW as u32));
}

/// The case: an Ollama profile with no `context`. Ollama cuts a prompt at its own
/// `num_ctx` without a word (this server refuses instead, so an overflow fails the test);
/// the provider reads the window from `/api/show` (the model's Modelfile sets `num_ctx`;
/// `/api/ps` shows nothing loaded) and the agent keeps every prompt within it. Before, the
/// window was unknown and compaction waited for 30,000 tokens.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_ollama_endpoint_without_context_is_kept_within_the_window_it_reports() {
    // Shapes of Ollama's `ShowResponse` and `ProcessResponse` (api/types.go, docs/api.md).
    let show = json!({
        "parameters": format!("num_ctx                        {WINDOW}\nstop                           \"<|im_end|>\""),
        "model_info": {"general.architecture": "qwen2", "qwen2.context_length": 32768},
        "details": {"format": "gguf", "family": "qwen2"},
        "capabilities": ["completion", "tools"],
    });
    let routes = vec![
        ("POST", "/api/show", Reply::json(200, &show)),
        ("GET", "/api/ps", Reply::json(200, &json!({"models": []}))),
    ];
    let (url, seen) = serve(routes);
    let toml = config(&url, "");
    let provider_window = run_within_the_window(&toml, &seen).await;
    assert_eq!(provider_window, Some(WINDOW as u32));
}

/// Two profiles on the server at `url` (the agent's and the summary model's), each with the
/// `context` line `context` (or none).
fn config(url: &str, context: &str) -> String {
    format!(
        "[models]\ndefault = \"mock\"\n\n\
         [models.profiles.mock]\nprovider = \"openai\"\nbase_url = \"{url}\"\nmodel = \"mock-model\"\n{context}max_retries = 0\n\n\
         [models.profiles.mock-summary]\nprovider = \"openai\"\nbase_url = \"{url}\"\nmodel = \"mock-summary\"\n{context}max_retries = 0\n\n\
         [roles]\nplanner = \"mock-summary\"\n\n\
         [context]\nkeep_last = 6\n"
    )
}

/// Runs the dumping agent on the configuration `toml` and checks that the server refused
/// nothing although the outputs far exceed the window; returns the agent model's window as
/// its provider states it after the run.
async fn run_within_the_window(toml: &str, seen: &Seen) -> Option<u32> {
    let config =
        trellis_config::Config::from_toml(std::path::Path::new("config.toml"), toml).unwrap();
    let models = ModelRegistry::from_config(&config).unwrap();
    let context: ContextConfig = config.section("context").unwrap();
    context.validate().unwrap();
    let mut policy: ContextPolicy = context.policy_for("dumper");
    policy.summarizer = Some(models.for_role(context.summary_role()).unwrap());
    let provider = models.for_role("default").unwrap();

    let fx = fixture();
    let recorder = Recorder::default();
    let out = done(
        agent(&fx, provider.clone(), policy, &recorder)
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
    provider.info().context_window
}
