//! A loopback fake of SearXNG, Brave Search and the OSV API that records what it is asked.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use axum::Router;
use axum::extract::{Path, Query, State};
use axum::http::HeaderMap;
use axum::routing::{get, post};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

/// One request the fake saw.
#[derive(Clone, Debug)]
pub struct Seen {
    pub path: String,
    pub query: HashMap<String, String>,
    pub token: Option<String>,
    pub body: Option<Value>,
}

#[derive(Clone, Default)]
struct Shared {
    seen: Arc<Mutex<Vec<Seen>>>,
    advisories: Arc<HashMap<String, Value>>,
    batch: Arc<Vec<Vec<String>>>,
}

pub struct Fake {
    pub url: String,
    shared: Shared,
    stop: CancellationToken,
}

impl Drop for Fake {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

impl Fake {
    pub fn seen(&self) -> Vec<Seen> {
        self.shared.seen.lock().unwrap().clone()
    }

    pub fn count(&self, path: &str) -> usize {
        self.seen()
            .iter()
            .filter(|s| s.path.starts_with(path))
            .count()
    }
}

fn record(
    s: &Shared,
    path: String,
    query: HashMap<String, String>,
    headers: &HeaderMap,
    body: Option<Value>,
) {
    let token = headers
        .get("x-subscription-token")
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    s.seen.lock().unwrap().push(Seen {
        path,
        query,
        token,
        body,
    });
}

async fn searxng(
    State(s): State<Shared>,
    Query(q): Query<HashMap<String, String>>,
    headers: HeaderMap,
) -> axum::Json<Value> {
    let text = q.get("q").cloned().unwrap_or_default();
    record(&s, "/search".into(), q, &headers, None);
    axum::Json(json!({
        "query": text,
        "results": [
            {"url": "https://owasp.org/www-project-cheat-sheets/jwt", "title": "JWT <b>Cheat</b> Sheet", "content": "Validate &amp; rotate keys", "engine": "ddg"},
            {"url": "https://example.com/blog/jwt", "title": "A blog", "content": "about JWT"},
            {"url": "https://developer.mozilla.org/en-US/docs/Web/HTTP", "title": "HTTP | MDN", "content": "HTTP headers"}
        ]
    }))
}

async fn brave(
    State(s): State<Shared>,
    Query(q): Query<HashMap<String, String>>,
    headers: HeaderMap,
) -> axum::Json<Value> {
    record(&s, "/res/v1/web/search".into(), q, &headers, None);
    axum::Json(json!({
        "type": "search",
        "web": {"results": [
            {"url": "https://www.rfc-editor.org/rfc/rfc7519", "title": "RFC 7519: JSON Web Token", "description": "<strong>JWT</strong> is a compact claims representation"}
        ]}
    }))
}

async fn querybatch(
    State(s): State<Shared>,
    headers: HeaderMap,
    axum::Json(body): axum::Json<Value>,
) -> axum::Json<Value> {
    let n = body["queries"].as_array().map_or(0, Vec::len);
    record(
        &s,
        "/v1/querybatch".into(),
        HashMap::new(),
        &headers,
        Some(body.clone()),
    );
    let results: Vec<Value> = (0..n)
        .map(|i| {
            let q = &body["queries"][i];
            let name = q["package"]["name"].as_str().unwrap_or("");
            let ids: Vec<Value> = s
                .batch
                .iter()
                .filter(|entry| entry[0] == name)
                .flat_map(|entry| {
                    entry[1..]
                        .iter()
                        .map(|id| json!({"id": id, "modified": "2024-01-01T00:00:00Z"}))
                })
                .collect();
            if ids.is_empty() {
                json!({})
            } else {
                json!({"vulns": ids})
            }
        })
        .collect();
    axum::Json(json!({ "results": results }))
}

async fn vuln(
    State(s): State<Shared>,
    Path(id): Path<String>,
    headers: HeaderMap,
) -> Result<axum::Json<Value>, axum::http::StatusCode> {
    record(
        &s,
        format!("/v1/vulns/{id}"),
        HashMap::new(),
        &headers,
        None,
    );
    s.advisories
        .get(&id)
        .cloned()
        .map(axum::Json)
        .ok_or(axum::http::StatusCode::NOT_FOUND)
}

/// Starts the fake on a free loopback port. `batch`: `[package, id, id…]` answers of the
/// OSV querybatch; `advisories`: what `/v1/vulns/{id}` returns.
pub async fn start(batch: Vec<Vec<String>>, advisories: HashMap<String, Value>) -> Fake {
    let shared = Shared {
        seen: Arc::default(),
        advisories: Arc::new(advisories),
        batch: Arc::new(batch),
    };
    let app = Router::new()
        .route("/search", get(searxng))
        .route("/res/v1/web/search", get(brave))
        .route("/v1/querybatch", post(querybatch))
        .route("/v1/vulns/{id}", get(vuln))
        .with_state(shared.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let stop = CancellationToken::new();
    let token = stop.clone();
    tokio::spawn(async move {
        let _ = axum::serve(listener, app)
            .with_graceful_shutdown(async move { token.cancelled().await })
            .await;
    });
    Fake { url, shared, stop }
}
