//! A loopback HTTP/1.1 server that replays canned responses in order and records every
//! request (method, path, headers, JSON body).

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::Value;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

#[derive(Clone, Debug)]
pub enum Reply {
    /// 200 with an SSE body sent in small chunks (chunked encoding).
    Sse { body: String },
    /// Any status with a JSON body and extra headers.
    Status {
        code: u16,
        headers: Vec<(String, String)>,
        body: String,
    },
    /// A recorded response, replayed byte for byte: event streams chunked (as the recording
    /// servers sent them), other bodies with a `content-length`. With `cut: Some(n)`, the
    /// body is a truncated stream: a chunk of the `n` missing bytes is announced, and the
    /// connection drops instead.
    Replay {
        code: u16,
        headers: Vec<(String, String)>,
        body: Vec<u8>,
        cut: Option<usize>,
    },
}

impl Reply {
    pub fn sse(body: &str) -> Self {
        Reply::Sse {
            body: body.to_string(),
        }
    }

    pub fn status(code: u16, headers: &[(&str, &str)], body: &str) -> Self {
        Reply::Status {
            code,
            headers: headers
                .iter()
                .map(|(k, v)| ((*k).to_string(), (*v).to_string()))
                .collect(),
            body: body.to_string(),
        }
    }
}

#[derive(Clone, Debug)]
pub struct Recorded {
    pub method: String,
    pub path: String,
    pub headers: Vec<(String, String)>,
    pub body: Value,
}

impl Recorded {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
}

pub struct MockServer {
    pub base_url: String,
    requests: Arc<Mutex<Vec<Recorded>>>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for MockServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl MockServer {
    pub async fn start(replies: Vec<Reply>) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let requests = Arc::new(Mutex::new(Vec::new()));
        let queue = Arc::new(Mutex::new(VecDeque::from(replies)));
        let recorded = Arc::clone(&requests);
        let task = tokio::spawn(async move {
            loop {
                let Ok((mut sock, _)) = listener.accept().await else {
                    return;
                };
                let recorded = Arc::clone(&recorded);
                let queue = Arc::clone(&queue);
                tokio::spawn(async move {
                    let Some(req) = read_request(&mut sock).await else {
                        return;
                    };
                    recorded.lock().unwrap().push(req);
                    let reply = queue.lock().unwrap().pop_front();
                    let reply = reply.unwrap_or_else(|| {
                        Reply::status(500, &[], r#"{"error":{"message":"mock: no reply left"}}"#)
                    });
                    write_reply(&mut sock, reply).await;
                });
            }
        });
        Self {
            base_url: format!("http://{addr}/v1"),
            requests,
            task,
        }
    }

    pub fn requests(&self) -> Vec<Recorded> {
        self.requests.lock().unwrap().clone()
    }
}

async fn read_request(sock: &mut tokio::net::TcpStream) -> Option<Recorded> {
    let mut buf = Vec::new();
    let mut tmp = [0u8; 4096];
    let header_end = loop {
        let n = sock.read(&mut tmp).await.ok()?;
        if n == 0 {
            return None;
        }
        buf.extend_from_slice(&tmp[..n]);
        if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break i + 4;
        }
    };
    let head = String::from_utf8_lossy(&buf[..header_end]).to_string();
    let mut lines = head.split("\r\n");
    let mut first = lines.next()?.split(' ');
    let method = first.next()?.to_string();
    let path = first.next()?.to_string();
    let headers: Vec<(String, String)> = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_lowercase(), v.trim().to_string()))
        .collect();
    let len: usize = headers
        .iter()
        .find(|(k, _)| k == "content-length")
        .and_then(|(_, v)| v.parse().ok())
        .unwrap_or(0);
    while buf.len() < header_end + len {
        let n = sock.read(&mut tmp).await.ok()?;
        if n == 0 {
            break;
        }
        buf.extend_from_slice(&tmp[..n]);
    }
    let body = serde_json::from_slice(&buf[header_end..]).unwrap_or(Value::Null);
    Some(Recorded {
        method,
        path,
        headers,
        body,
    })
}

async fn write_reply(sock: &mut tokio::net::TcpStream, reply: Reply) {
    match reply {
        Reply::Status {
            code,
            headers,
            body,
        } => {
            let mut head = format!(
                "HTTP/1.1 {code} Mock\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n",
                body.len()
            );
            for (k, v) in headers {
                head.push_str(&format!("{k}: {v}\r\n"));
            }
            head.push_str("\r\n");
            let _ = sock.write_all(head.as_bytes()).await;
            let _ = sock.write_all(body.as_bytes()).await;
        }
        Reply::Sse { body } => {
            let head = "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncache-control: no-cache\r\ntransfer-encoding: chunked\r\nconnection: close\r\n\r\n";
            let _ = sock.write_all(head.as_bytes()).await;
            write_chunks(sock, body.as_bytes()).await;
            let _ = sock.write_all(b"0\r\n\r\n").await;
        }
        Reply::Replay {
            code,
            headers,
            body,
            cut,
        } => {
            let chunked = headers
                .iter()
                .any(|(k, v)| k.eq_ignore_ascii_case("content-type") && v.contains("event-stream"));
            let mut head = format!("HTTP/1.1 {code} Replay\r\nconnection: close\r\n");
            for (k, v) in headers {
                head.push_str(&format!("{k}: {v}\r\n"));
            }
            if chunked {
                head.push_str("transfer-encoding: chunked\r\n\r\n");
                let _ = sock.write_all(head.as_bytes()).await;
                write_chunks(sock, &body).await;
                if let Some(missing) = cut {
                    let _ = sock.write_all(format!("{missing:x}\r\n").as_bytes()).await;
                } else {
                    let _ = sock.write_all(b"0\r\n\r\n").await;
                }
            } else {
                head.push_str(&format!("content-length: {}\r\n\r\n", body.len()));
                let _ = sock.write_all(head.as_bytes()).await;
                let _ = sock.write_all(&body).await;
            }
            let _ = sock.flush().await;
        }
    }
    let _ = sock.shutdown().await;
}

/// Writes `bytes` as HTTP chunks of uneven sizes, so events straddle reads.
async fn write_chunks(sock: &mut tokio::net::TcpStream, bytes: &[u8]) {
    let mut i = 0;
    let mut size = 37;
    while i < bytes.len() {
        let end = (i + size).min(bytes.len());
        let chunk = &bytes[i..end];
        let _ = sock
            .write_all(format!("{:x}\r\n", chunk.len()).as_bytes())
            .await;
        let _ = sock.write_all(chunk).await;
        let _ = sock.write_all(b"\r\n").await;
        let _ = sock.flush().await;
        tokio::time::sleep(Duration::from_millis(1)).await;
        i = end;
        size = if size == 37 { 101 } else { 37 };
    }
}

pub fn fixture(path: &str) -> String {
    let p = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(path);
    std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

/// The provider of profile `name` defined by `toml` — built exactly as configuration builds it.
pub fn profile(toml: &str, name: &str) -> std::sync::Arc<dyn trellis_llm::ModelProvider> {
    let config =
        trellis_config::Config::from_toml(std::path::Path::new("test.toml"), toml).unwrap();
    trellis_llm::ModelRegistry::from_config(&config)
        .unwrap()
        .provider(name)
        .unwrap()
}

/// A system and a user message.
pub fn hello() -> trellis_llm::ChatRequest {
    trellis_llm::ChatRequest::new(vec![
        trellis_llm::Message::system("Be brief."),
        trellis_llm::Message::user("Hi"),
    ])
}

/// Tool specs named `names` ("NAME tool", an object of arguments).
pub fn tools(names: &[&str]) -> Vec<trellis_llm::ToolSpec> {
    names
        .iter()
        .map(|name| trellis_llm::ToolSpec {
            name: (*name).into(),
            description: format!("{name} tool"),
            parameters: serde_json::json!({"type": "object"}),
        })
        .collect()
}

/// The names of the tools a request body sends; `pointer` finds a tool's name in its entry
/// (`/function/name` on the OpenAI wire, `/name` on Anthropic's).
pub fn sent_tools(body: &Value, pointer: &str) -> Vec<String> {
    body["tools"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|t| t.pointer(pointer).and_then(Value::as_str))
                .map(str::to_owned)
                .collect()
        })
        .unwrap_or_default()
}
