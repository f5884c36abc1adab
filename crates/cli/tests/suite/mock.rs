//! A loopback server speaking the OpenAI chat-completions wire format (SSE), answering each
//! request with what a responder decides, and the answers the tests' agents give.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::sync::{Arc, Mutex};

use serde_json::{Value, json};

/// The answer a model would give to `body`, by what it asks for.
pub fn answer(body: &Value) -> String {
    let schema = &body["response_format"]["json_schema"]["schema"]["properties"];
    if schema.get("workflow").is_some() {
        json!({
            "reasoning": "A question about a past decision: discuss it; no record needed.",
            "workflow": "architecture_discussion",
            "stages": [{ "stage": "decision_documentation", "include": false, "reason": "nothing to record" }]
        })
        .to_string()
    } else if schema.get("queries").is_some() {
        json!({ "queries": ["stock kept in memory", "reservations"] }).to_string()
    } else {
        json!({
            "failure": false,
            "output": "MOCK-ANALYSIS: stock lives in memory per ADR 0001; persistence is the next step.\n\n## Options\n- keep it in memory\n- persist to SQLite",
            "files_changed": [],
            "findings": ["MOCK-FINDING: a restart loses every reservation"]
        })
        .to_string()
    }
}

fn chunk(delta: Value, finish: Value) -> Value {
    json!({
        "id": "chatcmpl-mock", "object": "chat.completion.chunk", "created": 0, "model": "mock-model",
        "choices": [{ "index": 0, "delta": delta, "finish_reason": finish }]
    })
}

/// A streamed call of tool `name` with JSON `arguments` (call id `id`).
pub fn tool_sse(id: &str, name: &str, arguments: &str) -> String {
    let call = json!({ "tool_calls": [{ "index": 0, "id": id, "type": "function",
        "function": { "name": name, "arguments": arguments } }] });
    format!(
        "data: {}\n\ndata: {}\n\ndata: [DONE]\n\n",
        chunk(call, Value::Null),
        chunk(json!({}), json!("tool_calls"))
    )
}

/// `text` streamed in 16-byte pieces, then usage.
pub fn sse(text: &str) -> String {
    let mut out = String::new();
    out.push_str(&format!(
        "data: {}\n\n",
        chunk(json!({ "role": "assistant", "content": "" }), Value::Null)
    ));
    for piece in text.as_bytes().chunks(16) {
        let piece = String::from_utf8_lossy(piece);
        out.push_str(&format!(
            "data: {}\n\n",
            chunk(json!({ "content": piece }), Value::Null)
        ));
    }
    out.push_str(&format!("data: {}\n\n", chunk(json!({}), json!("stop"))));
    out.push_str(&format!(
        "data: {}\n\n",
        json!({ "id": "chatcmpl-mock", "object": "chat.completion.chunk", "created": 0, "model": "mock-model", "choices": [],
                "usage": { "prompt_tokens": 100, "completion_tokens": 20, "total_tokens": 120 } })
    ));
    out.push_str("data: [DONE]\n\n");
    out
}

/// Request bodies received so far.
pub type Seen = Arc<Mutex<Vec<Value>>>;

/// Serves chat completions on 127.0.0.1 (a free port) until the test process ends, answering
/// each request with `respond(body)` (an SSE body); records the request bodies.
pub fn serve(respond: impl Fn(&Value) -> String + Send + 'static) -> (String, Seen) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/v1", listener.local_addr().unwrap());
    let seen: Seen = Arc::new(Mutex::new(Vec::new()));
    let log = seen.clone();
    std::thread::spawn(move || {
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
            log.lock().unwrap().push(body.clone());
            let reply = respond(&body);
            let _ = write!(
                stream,
                "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{reply}",
                reply.len()
            );
        }
    });
    (url, seen)
}

/// The configuration of a workspace whose every model role uses the mock at `url`.
pub fn mock_config(url: &str) -> String {
    format!(
        "[models]\ndefault = \"mock\"\n\n[models.profiles.mock]\nprovider = \"openai\"\nbase_url = \"{url}\"\nmodel = \"mock-model\"\n\n[index.embedding]\nbackend = \"none\"\n"
    )
}

/// `trellis` with no user configuration (an empty config home for the child).
pub fn isolated(repo: &std::path::Path) -> std::process::Command {
    let mut c = super::common::trellis(repo);
    c.env("XDG_CONFIG_HOME", repo.join(".trellis/xdg-config"));
    c
}

/// The number of tool results in a request.
pub fn tool_results(body: &Value) -> usize {
    body["messages"]
        .as_array()
        .map_or(0, |m| m.iter().filter(|m| m["role"] == "tool").count())
}

/// `trellis run REQUEST --workflow architecture_discussion FLAGS…` to its end; its output.
pub fn discuss(ws: &trellis_test_support::TempWorkspace, request: &str, flags: &[&str]) -> String {
    let mut a = vec!["run", request, "--workflow", "architecture_discussion"];
    a.extend_from_slice(flags);
    super::common::ok(super::common::args(isolated(ws.path()), &a))
}

/// The run id `trellis run` printed (`run <id> …`).
pub fn run_id(printed: &str) -> String {
    printed
        .lines()
        .find_map(|l| l.strip_prefix("run "))
        .and_then(|l| l.split_whitespace().next())
        .expect("no run line")
        .to_owned()
}

/// The system prompt of a request body (which role is asking).
pub fn system(body: &Value) -> String {
    body["messages"][0]["content"]
        .as_str()
        .unwrap_or_default()
        .to_owned()
}
