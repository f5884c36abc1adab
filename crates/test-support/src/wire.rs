//! A loopback server speaking the OpenAI chat-completions wire format (SSE), for tests that
//! drive a real provider over HTTP: it records every request body and answers each with what
//! the test's responder decides.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::sync::{Arc, Mutex};

use serde_json::{Value, json};

/// Request bodies received so far.
pub type Seen = Arc<Mutex<Vec<Value>>>;

/// One HTTP answer.
#[derive(Clone, Debug)]
pub struct Reply {
    /// Status line after `HTTP/1.1 ` (`200 OK`, `400 Bad Request`).
    pub status: &'static str,
    /// Content type.
    pub content_type: &'static str,
    /// Body.
    pub body: String,
}

impl Reply {
    /// `200 OK` with an SSE body (from [`text_sse`] or [`tool_sse`]).
    pub fn sse(body: String) -> Self {
        Reply {
            status: "200 OK",
            content_type: "text/event-stream",
            body,
        }
    }

    /// A JSON body with `status`.
    pub fn json(status: &'static str, body: &Value) -> Self {
        Reply {
            status,
            content_type: "application/json",
            body: body.to_string(),
        }
    }
}

/// A streamed chunk with `delta` and `finish` (`null` or a finish reason).
pub fn chunk(delta: Value, finish: Value) -> Value {
    json!({
        "id": "chatcmpl-mock", "object": "chat.completion.chunk", "created": 0, "model": "mock-model",
        "choices": [{ "index": 0, "delta": delta, "finish_reason": finish }]
    })
}

fn usage() -> String {
    format!(
        "data: {}\n\n",
        json!({ "id": "chatcmpl-mock", "object": "chat.completion.chunk", "created": 0, "model": "mock-model", "choices": [],
                "usage": { "prompt_tokens": 100, "completion_tokens": 20, "total_tokens": 120 } })
    )
}

/// `text` streamed in 16-byte pieces, then the finish, the usage and `[DONE]`.
pub fn text_sse(text: &str) -> String {
    let mut out = format!(
        "data: {}\n\n",
        chunk(json!({ "role": "assistant", "content": "" }), Value::Null)
    );
    for piece in text.as_bytes().chunks(16) {
        let piece = String::from_utf8_lossy(piece);
        out.push_str(&format!(
            "data: {}\n\n",
            chunk(json!({ "content": piece }), Value::Null)
        ));
    }
    out.push_str(&format!("data: {}\n\n", chunk(json!({}), json!("stop"))));
    out.push_str(&usage());
    out.push_str("data: [DONE]\n\n");
    out
}

/// A streamed call of tool `name` with JSON `arguments` (call id `id`), then the usage.
pub fn tool_sse(id: &str, name: &str, arguments: &str) -> String {
    let call = json!({ "tool_calls": [{ "index": 0, "id": id, "type": "function",
        "function": { "name": name, "arguments": arguments } }] });
    format!(
        "data: {}\n\ndata: {}\n\n{}data: [DONE]\n\n",
        chunk(call, Value::Null),
        chunk(json!({}), json!("tool_calls")),
        usage()
    )
}

/// Serves on 127.0.0.1 (a free port) until the test process ends, one request at a time:
/// records each request's JSON body and answers with `respond(body)`. Returns the base URL
/// (`http://127.0.0.1:PORT/v1`) and the recorded bodies.
///
/// # Panics
/// When no loopback port can be bound (a test helper).
pub fn serve(mut respond: impl FnMut(&Value) -> Reply + Send + 'static) -> (String, Seen) {
    #[allow(clippy::unwrap_used)]
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    #[allow(clippy::unwrap_used)]
    let url = format!("http://{}/v1", listener.local_addr().unwrap());
    let seen: Seen = Arc::default();
    let log = seen.clone();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { continue };
            let Ok(clone) = stream.try_clone() else {
                continue;
            };
            let mut reader = BufReader::new(clone);
            let (mut len, mut line) = (0usize, String::new());
            loop {
                line.clear();
                if reader.read_line(&mut line).unwrap_or(0) == 0 || line.trim_end().is_empty() {
                    break;
                }
                if let Some(v) = line.to_ascii_lowercase().strip_prefix("content-length:") {
                    len = v.trim().parse().unwrap_or(0);
                }
            }
            let mut body = vec![0; len];
            if reader.read_exact(&mut body).is_err() {
                continue;
            }
            let body: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
            log.lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .push(body.clone());
            let reply = respond(&body);
            let _ = write!(
                stream,
                "HTTP/1.1 {}\r\ncontent-type: {}\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{}",
                reply.status,
                reply.content_type,
                reply.body.len(),
                reply.body
            );
        }
    });
    (url, seen)
}
