//! A loopback server speaking the OpenAI chat-completions wire format (SSE), for tests that
//! drive a real provider over HTTP: it records every request body and answers each with what
//! the test's responder decides.

use std::sync::{Arc, Mutex};

use serde_json::{Value, json};
use trellis_test_http::{Response, Server};

/// Request bodies received so far.
pub type Seen = Arc<Mutex<Vec<Value>>>;

/// One HTTP answer.
#[derive(Clone, Debug)]
pub struct Reply {
    /// Status code (`200`, `400`).
    pub status: u16,
    /// Content type.
    pub content_type: &'static str,
    /// Body.
    pub body: String,
}

impl Reply {
    /// `200 OK` with an SSE body (from [`text_sse`] or [`tool_sse`]).
    pub fn sse(body: String) -> Self {
        Reply {
            status: 200,
            content_type: "text/event-stream",
            body,
        }
    }

    /// A JSON body with `status`.
    pub fn json(status: u16, body: &Value) -> Self {
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

/// A running OpenAI-wire server: derefs to (and prints as) its base URL
/// (`http://127.0.0.1:PORT/v1`); stops when dropped.
pub struct Wire {
    url: String,
    _server: Server,
}

impl std::ops::Deref for Wire {
    type Target = str;
    fn deref(&self) -> &str {
        &self.url
    }
}

impl std::fmt::Display for Wire {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.url)
    }
}

/// Serves on 127.0.0.1 (a free port) until the returned [`Wire`] is dropped, one request at
/// a time: records each chat-completions request's JSON body and answers with
/// `respond(body)`. Any other request (a provider asking for its context window) gets 404,
/// as from a server that does not offer it, and is not recorded. Returns the server (its
/// base URL) and the recorded bodies.
pub fn serve(respond: impl FnMut(&Value) -> Reply + Send + 'static) -> (Wire, Seen) {
    serve_with(Vec::new(), respond)
}

/// A fixed answer to one other endpoint of the server: `("GET", "/props", reply)` (the path
/// is the request target without the query).
pub type Route = (&'static str, &'static str, Reply);

/// [`serve`], also answering `routes` (endpoints such as llama-server's `/props` or
/// Ollama's `/api/show`, which a provider asks for the model's context window).
pub fn serve_with(
    routes: Vec<Route>,
    mut respond: impl FnMut(&Value) -> Reply + Send + 'static,
) -> (Wire, Seen) {
    let seen: Seen = Arc::default();
    let log = seen.clone();
    let server = Server::start(move |request| {
        if request.method != "POST" || !request.target.ends_with("/chat/completions") {
            let path = request.target.split('?').next().unwrap_or_default();
            return match routes
                .iter()
                .find(|(method, route, _)| *method == request.method && *route == path)
            {
                Some((_, _, reply)) => {
                    Response::new(reply.status, reply.content_type, reply.body.clone())
                }
                None => Response::json_status(404, r#"{"error":"not found"}"#),
            };
        }
        let body = request.json();
        log.lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .push(body.clone());
        let reply = respond(&body);
        Response::new(reply.status, reply.content_type, reply.body)
    });
    let url = format!("{}/v1", server.url());
    (
        Wire {
            url,
            _server: server,
        },
        seen,
    )
}
