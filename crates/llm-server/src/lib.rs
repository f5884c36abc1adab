//! `trellis models serve`: one model provider behind an OpenAI-compatible endpoint, so that
//! editors, other tools (mini-swe-agent, aider) and several Trellis processes share one
//! loaded model.
//!
//! Routes ([`app`]):
//! - `POST /v1/chat/completions`: whole or streamed answers (server-sent events in OpenAI's
//!   chunk format, ending with `data: [DONE]`), tool calls in both, `response_format`
//!   (`json_schema`, `json_object`) mapped to the provider's structured output, `usage` (and
//!   `stream_options.include_usage`);
//! - `GET /v1/models`, `GET /v1/models/{id}`: the served model, its context window as
//!   `max_model_len` (vLLM's name) and `context_length`;
//! - `GET /health`: liveness, without the token.
//!
//! Every error is OpenAI-shaped (`{"error": {"message", "type", "param", "code"}}`) with the
//! status a client expects: 400 for bad requests, 401 for a missing or wrong token, 404 for
//! an unknown model or route, 503 when the queue is full.
//!
//! The model generates for [`Limits::parallel`] requests at a time (one by default: the
//! embedded model has one context); the others wait in one first-come-first-served queue of
//! at most [`Limits::queue`]. A client that hangs up stops its generation (and leaves the
//! queue). Each request is reported once, as a [`RequestRecord`], to [`Settings::log`].
//!
//! Security is `trellis serve`'s (`trellis-access`, `docs/security.md`): a [`Token`] sent as
//! `Authorization: Bearer` and compared in constant time, a `Host` allow-list against DNS
//! rebinding, and no cross-origin POSTs from browsers.

mod completions;
mod convert;
mod encode;
mod error;
mod guard;
mod queue;
mod record;

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use axum::Router;
use axum::extract::{Path, State};
use axum::http::{Method, Uri};
use axum::response::{IntoResponse, Json, Response};
use axum::routing::{get, post};
use tokio_util::sync::CancellationToken;
use trellis_llm::ModelProvider;
use trellis_llm::openai_wire::{ModelList, ModelObject};

pub use error::{ApiError, Error, Result};
pub use record::{Outcome, RequestRecord};
pub use trellis_access::{Token, TokenFile, loopback_hosts, served_hosts};

/// Receives one record per request, when the request is over (the CLI prints it on stderr).
pub type RequestLog = Arc<dyn Fn(&RequestRecord) + Send + Sync>;

/// The model served.
#[derive(Clone)]
pub struct ServedModel {
    /// The id clients name in `model` and see in `GET /v1/models` (the profile name).
    pub id: String,
    /// Other names a request may use for it (the provider's model name, the GGUF file).
    pub aliases: Vec<String>,
    /// The provider.
    pub provider: Arc<dyn ModelProvider>,
}

impl ServedModel {
    /// Serves `provider` under its profile name, with its model name as an alias.
    pub fn new(provider: Arc<dyn ModelProvider>) -> Self {
        let info = provider.info();
        let aliases = if info.model == info.profile {
            Vec::new()
        } else {
            vec![info.model.clone()]
        };
        Self {
            id: info.profile.clone(),
            aliases,
            provider,
        }
    }

    fn answers_to(&self, name: &str) -> bool {
        self.id == name || self.aliases.iter().any(|a| a == name)
    }
}

/// Sizes and times.
#[derive(Clone, Copy, Debug)]
pub struct Limits {
    /// Requests generating at once; more wait in the queue.
    pub parallel: usize,
    /// Requests waiting at most; one more is answered 503 (clients retry it).
    pub queue: usize,
    /// Largest request body, in bytes.
    pub body_bytes: usize,
    /// How often a queued streaming request gets an SSE comment (so that its client sees
    /// the connection alive, and a client that went away is noticed).
    pub keepalive: Duration,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            parallel: 1,
            queue: 64,
            body_bytes: 8 << 20,
            keepalive: Duration::from_secs(10),
        }
    }
}

/// How the server checks and reports requests.
#[derive(Clone)]
pub struct Settings {
    /// The access token clients send as `Authorization: Bearer …`.
    pub token: Token,
    /// `Host` header values accepted (`127.0.0.1:8421`, `localhost:8421`…), compared
    /// case-insensitively; browsers send the same values as `Origin` (with a scheme).
    pub allowed_hosts: Vec<String>,
    /// Limits.
    pub limits: Limits,
    /// Where request records go (none: nowhere).
    pub log: Option<RequestLog>,
}

impl std::fmt::Debug for Settings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Settings")
            .field("allowed_hosts", &self.allowed_hosts)
            .field("limits", &self.limits)
            .finish_non_exhaustive()
    }
}

/// Refuses a non-loopback bind unless `allow_remote`.
pub fn check_bind(addr: SocketAddr, allow_remote: bool) -> Result<()> {
    if addr.ip().is_loopback() || allow_remote {
        return Ok(());
    }
    Err(Error::Bind(format!(
        "refusing to listen on {addr}: it is reachable from other machines, which could then \
         use this machine's model (and CPU) with the token. Bind 127.0.0.1 (the default), or \
         pass --allow-remote to accept remote clients with the token (put TLS in front: it \
         travels in every request)"
    )))
}

pub(crate) struct Inner {
    pub(crate) model: ServedModel,
    pub(crate) settings: Settings,
    pub(crate) queue: Arc<queue::Queue>,
    /// Unix seconds of the start (`created` of the model object).
    pub(crate) started: u64,
    /// Numbers the responses (`chatcmpl-…` ids).
    pub(crate) seq: AtomicU64,
    /// Cancelled when the server stops: every generation ends.
    pub(crate) shutdown: CancellationToken,
}

/// What every handler sees. Cheap to clone.
#[derive(Clone)]
pub struct AppState(pub(crate) Arc<Inner>);

impl AppState {
    /// Serves `model` under `settings`.
    pub fn new(model: ServedModel, settings: Settings) -> Self {
        let started = unix_now();
        let queue = Arc::new(queue::Queue::new(
            settings.limits.parallel.max(1),
            settings.limits.queue,
        ));
        Self(Arc::new(Inner {
            model,
            settings,
            queue,
            started,
            seq: AtomicU64::new(0),
            shutdown: CancellationToken::new(),
        }))
    }

    /// The model served.
    pub fn model(&self) -> &ServedModel {
        &self.0.model
    }

    /// Stops every generation in progress (their streams end with an error event) and
    /// makes [`serve`] return.
    pub fn shutdown(&self) {
        self.0.shutdown.cancel();
    }

    /// A fresh response id: unique in this process, and across restarts by the start time.
    pub(crate) fn next_id(&self) -> String {
        let n = self.0.seq.fetch_add(1, Ordering::Relaxed);
        format!("chatcmpl-{:x}{n:06}", self.0.started)
    }

    pub(crate) fn report(&self, record: &RequestRecord) {
        if let Some(log) = &self.0.settings.log {
            log(record);
        }
    }

    fn model_object(&self) -> ModelObject {
        let window = self.0.model.provider.info().context_window;
        ModelObject {
            id: self.0.model.id.clone(),
            object: "model".into(),
            created: self.0.started,
            owned_by: "trellis".into(),
            max_model_len: window,
            context_length: window,
        }
    }
}

pub(crate) fn unix_now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

async fn models(State(state): State<AppState>) -> Json<ModelList> {
    Json(ModelList {
        object: "list".into(),
        data: vec![state.model_object()],
    })
}

async fn model(State(state): State<AppState>, Path(id): Path<String>) -> Response {
    if state.0.model.answers_to(&id) {
        Json(state.model_object()).into_response()
    } else {
        ApiError::model_not_found(&id, &state.0.model.id, None).into_response()
    }
}

async fn health() -> Json<serde_json::Value> {
    Json(serde_json::json!({"status": "ok"}))
}

async fn unknown_route(method: Method, uri: Uri) -> ApiError {
    ApiError::unknown_url(&method, uri.path())
}

/// The router. Testable with `tower::ServiceExt::oneshot`.
pub fn app(state: AppState) -> Router {
    Router::new()
        .route(
            "/v1/chat/completions",
            post(completions::chat_completions).fallback(unknown_route),
        )
        .route("/v1/models", get(models).fallback(unknown_route))
        .route("/v1/models/{id}", get(model).fallback(unknown_route))
        .route("/health", get(health).fallback(unknown_route))
        .fallback(unknown_route)
        .layer(axum::middleware::from_fn_with_state(
            state.clone(),
            guard::guard,
        ))
        .layer(axum::middleware::from_fn_with_state(
            state.clone(),
            record::log_requests,
        ))
        .with_state(state)
}

/// Longest a stop waits for responses in progress (their generations are cancelled first,
/// so this only covers writing their last bytes).
const DRAIN_TIMEOUT: Duration = Duration::from_secs(5);

/// Serves `state` on `listener` until `signal` completes (or [`AppState::shutdown`]), then
/// cancels the generations in progress and waits briefly for their responses to end.
pub async fn serve(
    listener: tokio::net::TcpListener,
    state: AppState,
    signal: impl std::future::Future<Output = ()> + Send + 'static,
) -> Result<()> {
    let stop = state.0.shutdown.clone();
    let on_signal = stop.clone();
    tokio::spawn(async move {
        signal.await;
        on_signal.cancel();
    });
    let graceful = stop.clone();
    let server = axum::serve(listener, app(state))
        .with_graceful_shutdown(async move { graceful.cancelled().await });
    let drained = async {
        stop.cancelled().await;
        tokio::time::sleep(DRAIN_TIMEOUT).await;
    };
    tokio::select! {
        r = server => r.map_err(Error::Io),
        () = drained => {
            tracing::warn!("responses still open {DRAIN_TIMEOUT:?} after the stop; closing them");
            Ok(())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_non_loopback_bind_needs_allow_remote() {
        let any: SocketAddr = "0.0.0.0:8421".parse().unwrap();
        let err = check_bind(any, false).unwrap_err().to_string();
        assert!(err.contains("--allow-remote"), "{err}");
        assert!(check_bind(any, true).is_ok());
        assert!(check_bind("127.0.0.1:0".parse().unwrap(), false).is_ok());
        assert!(check_bind("[::1]:0".parse().unwrap(), false).is_ok());
    }
}
