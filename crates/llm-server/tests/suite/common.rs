//! A served scripted model, in process and on a loopback port, and a provider that holds
//! its answer until released (queue and cancellation tests).

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::body::{Body, Bytes};
use axum::http::{HeaderMap, Request, StatusCode, header};
use http_body_util::BodyExt;
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio_util::sync::CancellationToken;
use tower::ServiceExt;
use trellis_llm::{
    ChatRequest, ChatStream, Error, FinishReason, ModelProvider, ProviderInfo, ProviderKind, Role,
    StreamEvent, Usage,
};
use trellis_llm_server::{AppState, Limits, RequestRecord, ServedModel, Settings, Token};
use trellis_test_support::scripted::{ScriptedProvider, Turn};

pub const TOKEN: &str = "0123456789abcdef0123456789abcdef";
pub const HOST: &str = "127.0.0.1:8421";

/// The scripted model's answers, by what the last message asks.
pub fn answer(r: &ChatRequest) -> Turn {
    let last = r.messages.last().map(|m| (m.role, m.content.as_str()));
    match last {
        Some((Role::Tool, result)) => Turn::Text(format!("The tool said: {result}")),
        Some((_, text)) if text.contains("fail") => Turn::HttpError {
            status: 500,
            message: "upstream exploded in /secret/place".into(),
        },
        Some((_, text)) if text.contains("read") && !r.tools.is_empty() => Turn::ToolCall {
            name: r.tools[0].name.clone(),
            arguments: json!({"path": "README.md"}),
        },
        _ if r.response_format.is_some() => {
            Turn::Json(json!({"city": "Paris", "country": "France"}))
        }
        _ => Turn::Text("Hello from the scripted model.".into()),
    }
}

/// The scripted model (profile `scripted`), 4096 tokens of context.
pub fn scripted() -> ScriptedProvider {
    ScriptedProvider::responding(answer).with_context_window(4096)
}

/// Every record reported so far.
pub type Records = Arc<Mutex<Vec<RequestRecord>>>;

pub fn settings(hosts: Vec<String>, limits: Limits, records: &Records) -> Settings {
    let sink = records.clone();
    Settings {
        token: Token::new(TOKEN),
        allowed_hosts: hosts,
        limits,
        log: Some(Arc::new(move |r: &RequestRecord| {
            sink.lock().unwrap().push(r.clone());
        })),
    }
}

/// A served provider, in process.
pub struct Served {
    pub app: Router,
    pub records: Records,
}

pub fn served(provider: Arc<dyn ModelProvider>) -> Served {
    let records = Records::default();
    let hosts = trellis_llm_server::loopback_hosts(8421);
    let state = AppState::new(
        ServedModel::new(provider),
        settings(hosts, Limits::default(), &records),
    );
    Served {
        app: trellis_llm_server::app(state),
        records,
    }
}

/// A request with the token and the allowed host.
pub fn request(method: &str, uri: &str) -> axum::http::request::Builder {
    Request::builder()
        .method(method)
        .uri(uri)
        .header(header::HOST, HOST)
        .header(header::AUTHORIZATION, format!("Bearer {TOKEN}"))
}

pub async fn send(app: &Router, req: Request<Body>) -> (StatusCode, HeaderMap, Bytes) {
    let res = app.clone().oneshot(req).await.unwrap();
    let status = res.status();
    let headers = res.headers().clone();
    let body = res.into_body().collect().await.unwrap().to_bytes();
    (status, headers, body)
}

/// POSTs `body` to `/v1/chat/completions`; the status and the body as JSON (or the raw
/// text of a stream as a JSON string).
pub async fn chat(app: &Router, body: &Value) -> (StatusCode, Value) {
    let req = request("POST", "/v1/chat/completions")
        .header(header::CONTENT_TYPE, "application/json")
        .body(Body::from(body.to_string()))
        .unwrap();
    let (status, headers, bytes) = send(app, req).await;
    let text = String::from_utf8(bytes.to_vec()).unwrap();
    let is_sse = headers
        .get(header::CONTENT_TYPE)
        .is_some_and(|v| v == "text/event-stream");
    if is_sse {
        (status, Value::String(text))
    } else {
        (
            status,
            serde_json::from_str(&text).unwrap_or(Value::String(text)),
        )
    }
}

/// The `data:` payloads of an SSE body, in order (`[DONE]` as a string).
pub fn sse_data(body: &str) -> Vec<Value> {
    body.split("\n\n")
        .filter_map(|event| event.strip_prefix("data: "))
        .map(|d| serde_json::from_str(d).unwrap_or_else(|_| Value::String(d.to_string())))
        .collect()
}

pub fn user(text: &str) -> Value {
    json!({"model": "scripted", "messages": [{"role": "user", "content": text}]})
}

/// Holds each answer after its first delta until [`Gate::release`] (or cancellation);
/// records the order in which requests started and the token each call got.
#[derive(Clone)]
pub struct Gate {
    info: ProviderInfo,
    pub started: Arc<Mutex<Vec<String>>>,
    pub tokens: Arc<Mutex<Vec<CancellationToken>>>,
    release: Arc<tokio::sync::Semaphore>,
}

impl Gate {
    pub fn new() -> Self {
        Self {
            info: ProviderInfo {
                profile: "gate".into(),
                kind: ProviderKind::Scripted,
                model: "gate".into(),
                native_structured_output: false,
                context_window: Some(1000),
            },
            started: Arc::default(),
            tokens: Arc::default(),
            release: Arc::new(tokio::sync::Semaphore::new(0)),
        }
    }

    /// Lets `n` held answers finish.
    pub fn release(&self, n: usize) {
        self.release.add_permits(n);
    }

    pub fn started(&self) -> Vec<String> {
        self.started.lock().unwrap().clone()
    }

    /// Waits until `n` requests started (at most 10 s).
    pub async fn wait_started(&self, n: usize) {
        wait_for(
            || self.started.lock().unwrap().len() >= n,
            "requests to start",
        )
        .await;
    }
}

impl ModelProvider for Gate {
    fn info(&self) -> &ProviderInfo {
        &self.info
    }

    fn stream(&self, request: ChatRequest, cancel: CancellationToken) -> ChatStream {
        let this = self.clone();
        let last = request
            .messages
            .last()
            .map(|m| m.content.clone())
            .unwrap_or_default();
        Box::pin(futures::stream::unfold(0u8, move |step| {
            let (this, cancel, last) = (this.clone(), cancel.clone(), last.clone());
            async move {
                let event = match step {
                    0 => {
                        this.started.lock().unwrap().push(last.clone());
                        this.tokens.lock().unwrap().push(cancel.clone());
                        Ok(StreamEvent::TextDelta {
                            text: format!("working on {last}"),
                        })
                    }
                    1 => {
                        tokio::select! {
                            p = this.release.acquire() => {
                                p.unwrap().forget();
                                Ok(StreamEvent::TextDelta { text: " done".into() })
                            }
                            () = cancel.cancelled() => Err(Error::Cancelled),
                        }
                    }
                    2 => Ok(StreamEvent::Usage {
                        usage: Usage {
                            prompt_tokens: 7,
                            completion_tokens: 3,
                            cached_prompt_tokens: 0,
                        },
                    }),
                    3 => Ok(StreamEvent::Finish {
                        reason: FinishReason::Stop,
                    }),
                    _ => return None,
                };
                let next = if event.is_err() { 4 } else { step + 1 };
                Some((event, next))
            }
        }))
    }
}

/// Polls `done` every 20 ms for up to 10 s.
pub async fn wait_for(mut done: impl FnMut() -> bool, what: &str) {
    for _ in 0..500 {
        if done() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    panic!("timed out waiting for {what}");
}

/// A server on a free loopback port; stopped when dropped.
pub struct Running {
    pub addr: SocketAddr,
    pub state: AppState,
    pub records: Records,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for Running {
    fn drop(&mut self) {
        self.state.shutdown();
        self.task.abort();
    }
}

impl Running {
    pub fn base_url(&self) -> String {
        format!("http://{}/v1", self.addr)
    }

    /// Waits until `n` requests were reported.
    pub async fn wait_records(&self, n: usize) -> Vec<RequestRecord> {
        wait_for(
            || self.records.lock().unwrap().len() >= n,
            "request records",
        )
        .await;
        self.records.lock().unwrap().clone()
    }
}

pub async fn start(provider: Arc<dyn ModelProvider>, limits: Limits) -> Running {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let records = Records::default();
    let hosts = trellis_llm_server::loopback_hosts(addr.port());
    let state = AppState::new(
        ServedModel::new(provider),
        settings(hosts, limits, &records),
    );
    let serving = state.clone();
    let task = tokio::spawn(async move {
        trellis_llm_server::serve(listener, serving, std::future::pending())
            .await
            .unwrap();
    });
    Running {
        addr,
        state,
        records,
        task,
    }
}

/// A raw HTTP/1.1 client connection (to hang up at a chosen moment).
pub struct Raw {
    pub stream: TcpStream,
    pub received: String,
}

impl Raw {
    /// Connects and POSTs `body` to the chat route.
    pub async fn post(addr: SocketAddr, body: &Value) -> Self {
        let mut stream = TcpStream::connect(addr).await.unwrap();
        let body = body.to_string();
        let head = format!(
            "POST /v1/chat/completions HTTP/1.1\r\nHost: {addr}\r\nAuthorization: Bearer {TOKEN}\r\n\
             Content-Type: application/json\r\nContent-Length: {}\r\n\r\n",
            body.len()
        );
        stream.write_all(head.as_bytes()).await.unwrap();
        stream.write_all(body.as_bytes()).await.unwrap();
        Self {
            stream,
            received: String::new(),
        }
    }

    /// Reads until `needle` has arrived (at most 10 s).
    pub async fn read_until(&mut self, needle: &str) {
        let mut buf = [0u8; 4096];
        let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
        while !self.received.contains(needle) {
            let n = tokio::time::timeout_at(deadline, self.stream.read(&mut buf))
                .await
                .unwrap_or_else(|_| panic!("no `{needle}` in: {}", self.received))
                .unwrap();
            assert!(
                n > 0,
                "connection closed before `{needle}`: {}",
                self.received
            );
            self.received.push_str(&String::from_utf8_lossy(&buf[..n]));
        }
    }
}
