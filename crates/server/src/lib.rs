//! `trellis serve`: the HTTP + WebSocket API over the runtime service.
//!
//! Every state-changing route is one [`Op`](trellis_protocol::Op) submitted to a workspace's
//! [`Service`]; every pushed frame is one [`ServiceEvent`](trellis_protocol::ServiceEvent).
//! Reads come from the workspace store. The server holds no control logic of its own.
//!
//! [`app`] builds the router (testable with `tower::ServiceExt::oneshot`); [`serve`] runs it on
//! a listener until a shutdown signal, then stops every workspace service so that live runs
//! stay resumable. Security (see `docs/security.md`): a bearer token or an HttpOnly cookie on
//! every API route, a `Host` allow-list, an `Origin` check on state-changing requests and
//! WebSocket upgrades, body and frame limits, bounded send queues.

mod assets;
mod error;
mod lookup;
mod routes;
mod security;
mod ws;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use tokio_util::sync::CancellationToken;
use trellis_core::service::Service;

pub use assets::embedded as ui_embedded;
pub use error::ApiError;
pub use routes::openapi;
pub use trellis_access::{Token, TokenFile, loopback_hosts, served_hosts};

/// One repository served, with its runtime service.
pub struct Workspace {
    /// Its id in URLs and frames (the directory name, made unique).
    pub id: String,
    /// The repository root.
    pub root: PathBuf,
    /// Its runtime service.
    pub service: Arc<Service>,
}

/// Size and time limits.
#[derive(Clone, Copy, Debug)]
pub struct Limits {
    /// Largest request body, in bytes.
    pub body_bytes: usize,
    /// Largest WebSocket message a client may send, in bytes.
    pub ws_message_bytes: usize,
    /// Frames queued for one WebSocket client; a client that falls this far behind is
    /// disconnected (it reconnects with `since` and loses nothing). Runs never wait for it.
    pub ws_queue: usize,
    /// Longest a request may take (a `POST /api/workflows` waits for the orchestrator); an
    /// op that takes longer keeps running, its outcome is on the `workspace` stream.
    pub request_timeout: Duration,
    /// Longest a client may take to send a request's headers (slow-loris defence).
    pub header_timeout: Duration,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            body_bytes: 1 << 20,
            ws_message_bytes: 1 << 20,
            ws_queue: 4096,
            request_timeout: Duration::from_secs(600),
            header_timeout: Duration::from_secs(30),
        }
    }
}

/// How the server checks requests.
#[derive(Clone, Debug)]
pub struct Settings {
    /// The access token.
    pub token: Token,
    /// `Host` header values accepted (`127.0.0.1:8420`, `localhost:8420`…), compared
    /// case-insensitively. Browsers send the same values as `Origin` (with a scheme).
    pub allowed_hosts: Vec<String>,
    /// Limits.
    pub limits: Limits,
}

/// Why the server could not be set up.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// No workspace.
    #[error("no workspace to serve: give at least one --repo DIR")]
    NoWorkspace,
    /// Two workspaces with one id.
    #[error("two workspaces have the id `{0}`")]
    DuplicateWorkspace(String),
    /// The token file.
    #[error(transparent)]
    Token(#[from] trellis_access::Error),
    /// A refused bind address.
    #[error("{0}")]
    Bind(String),
}

pub(crate) struct Inner {
    pub workspaces: Vec<Workspace>,
    pub settings: Settings,
    /// The served workspaces' run counters (`GET /metrics`), kept from their live events.
    pub metrics: Arc<trellis_telemetry::metrics::Metrics>,
    /// Cancelled when the server shuts down (closes WebSocket connections).
    pub shutdown: CancellationToken,
}

/// What every handler sees.
#[derive(Clone)]
pub struct AppState(pub(crate) Arc<Inner>);

impl AppState {
    /// The state serving `workspaces` under `settings`.
    pub fn new(workspaces: Vec<Workspace>, settings: Settings) -> Result<Self, Error> {
        if workspaces.is_empty() {
            return Err(Error::NoWorkspace);
        }
        let mut seen = std::collections::HashSet::new();
        for w in &workspaces {
            if !seen.insert(w.id.clone()) {
                return Err(Error::DuplicateWorkspace(w.id.clone()));
            }
        }
        let shutdown = CancellationToken::new();
        let metrics = Arc::new(trellis_telemetry::metrics::Metrics::default());
        for w in &workspaces {
            tokio::spawn(count(w.service.live(), metrics.clone(), shutdown.clone()));
        }
        Ok(Self(Arc::new(Inner {
            workspaces,
            settings,
            metrics,
            shutdown,
        })))
    }

    /// The workspaces.
    pub fn workspaces(&self) -> &[Workspace] {
        &self.0.workspaces
    }

    /// The counters `GET /metrics` serves (the caller prices the models with
    /// [`trellis_telemetry::metrics::Metrics::set_prices`]).
    pub fn metrics(&self) -> &Arc<trellis_telemetry::metrics::Metrics> {
        &self.0.metrics
    }

    /// Resumes, in their workspace's service, the workflow runs whose process stopped
    /// mid-run (status `running`, no live owner: a crash, a kill, a graceful stop). Returns
    /// each run tried with the outcome. Runs waiting for input stay paused until answered.
    pub async fn resume_interrupted(
        &self,
    ) -> Vec<(String, trellis_protocol::RunId, Result<(), String>)> {
        let mut out = Vec::new();
        for w in &self.0.workspaces {
            match w.service.resume_orphaned_runs().await {
                Ok(resumed) => out.extend(
                    resumed
                        .into_iter()
                        .map(|r| (w.id.clone(), r.run, r.result.map_err(|e| e.message))),
                ),
                Err(e) => tracing::error!("workspace {}: listing runs: {e}", w.id),
            }
        }
        out
    }

    /// Closes WebSocket connections and stops every workspace service (live runs stop
    /// where they are and stay resumable from the store).
    pub async fn shutdown(&self) {
        self.0.shutdown.cancel();
        for w in &self.0.workspaces {
            w.service.shutdown().await;
        }
    }
}

/// Workspace ids for `roots`: each directory's name, with `-2`, `-3`… on repeats.
pub fn workspace_ids(roots: &[PathBuf]) -> Vec<String> {
    let mut used = std::collections::HashMap::<String, usize>::new();
    roots
        .iter()
        .map(|r| {
            let base: String = r
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_else(|| "workspace".into())
                .chars()
                .map(|c| {
                    if c.is_ascii_alphanumeric() || c == '-' || c == '_' || c == '.' {
                        c
                    } else {
                        '-'
                    }
                })
                .collect();
            let n = used.entry(base.clone()).or_insert(0);
            *n += 1;
            if *n == 1 { base } else { format!("{base}-{n}") }
        })
        .collect()
}

/// The router: `/api/…` (REST and the `/api/events` WebSocket), the `/ws/…` aliases of
/// the node interactions (docs/api.md), `/login` and the landing page.
pub fn app(state: AppState) -> Router {
    routes::router(state)
}

/// Refuses a non-loopback bind unless `allow_remote` (auth is always on).
pub fn check_bind(addr: SocketAddr, allow_remote: bool) -> Result<(), Error> {
    if addr.ip().is_loopback() || allow_remote {
        return Ok(());
    }
    Err(Error::Bind(format!(
        "refusing to listen on {addr}: it is reachable from other machines, and this server \
         can edit repositories and run commands. Bind 127.0.0.1 (the default), or pass \
         --allow-remote to accept remote clients with the access token (put TLS in front)"
    )))
}

/// Longest a graceful shutdown waits for requests in progress.
const DRAIN_TIMEOUT: Duration = Duration::from_secs(10);

/// Serves `state` on `listener` until `signal` completes, then shuts down gracefully:
/// no new connections, WebSocket clients closed, requests in progress given
/// 10 s to finish, workspace services stopped (runs stay resumable).
///
/// Connections are HTTP/1.1 (with WebSocket upgrades); a client that does not finish
/// sending its headers within [`Limits::header_timeout`] is disconnected.
pub async fn serve(
    listener: tokio::net::TcpListener,
    state: AppState,
    signal: impl std::future::Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
    use tower::Service as _;

    let router = app(state.clone());
    let stop = state.0.shutdown.clone();
    let graceful = hyper_util::server::graceful::GracefulShutdown::new();
    let header_timeout = state.0.settings.limits.header_timeout;
    tokio::pin!(signal);
    loop {
        let accepted = tokio::select! {
            r = listener.accept() => r,
            () = &mut signal => break,
            () = stop.cancelled() => break,
        };
        let stream = match accepted {
            Ok((stream, _)) => stream,
            Err(e) => {
                // Out of file descriptors and the like: wait instead of spinning.
                tracing::warn!("accepting a connection: {e}");
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            }
        };
        let _ = stream.set_nodelay(true);
        let router = router.clone();
        let service =
            hyper::service::service_fn(move |req: hyper::Request<hyper::body::Incoming>| {
                let mut router = router.clone();
                async move { router.call(req.map(axum::body::Body::new)).await }
            });
        let mut builder = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new());
        builder
            .http1()
            .timer(TokioTimer::new())
            .header_read_timeout(header_timeout);
        let conn = builder
            .http1_only()
            .serve_connection_with_upgrades(TokioIo::new(stream), service)
            .into_owned();
        let conn = graceful.watch(conn);
        tokio::spawn(async move {
            if let Err(e) = conn.await {
                tracing::debug!("connection: {e}");
            }
        });
    }
    drop(listener);
    state.shutdown().await;
    if tokio::time::timeout(DRAIN_TIMEOUT, graceful.shutdown())
        .await
        .is_err()
    {
        tracing::warn!("requests still in progress after {DRAIN_TIMEOUT:?}; closing them");
    }
    Ok(())
}

/// Counts a workspace's live events into `metrics` until the server shuts down: a burst at a
/// time (whatever has been broadcast, under one lock), then a short pause, so a busy
/// workspace's publisher does not wake this task for every event.
async fn count(
    mut live: tokio::sync::broadcast::Receiver<Arc<trellis_core::service::LiveEvent>>,
    metrics: Arc<trellis_telemetry::metrics::Metrics>,
    shutdown: CancellationToken,
) {
    use tokio::sync::broadcast::error::{RecvError, TryRecvError};
    const PAUSE: std::time::Duration = std::time::Duration::from_millis(5);
    let mut burst = Vec::new();
    loop {
        tokio::select! {
            ev = live.recv() => match ev {
                Ok(ev) => burst.push(ev),
                // Missed events are not counted; the counters go on.
                Err(RecvError::Lagged(_)) => {}
                Err(RecvError::Closed) => return,
            },
            () = shutdown.cancelled() => return,
        }
        let closed = loop {
            match live.try_recv() {
                Ok(ev) => burst.push(ev),
                Err(TryRecvError::Lagged(_)) => {}
                Err(TryRecvError::Empty) => break false,
                Err(TryRecvError::Closed) => break true,
            }
        };
        metrics.observe_all(burst.iter().map(|ev| &***ev));
        burst.clear();
        if closed {
            return;
        }
        tokio::select! {
            () = tokio::time::sleep(PAUSE) => {}
            () = shutdown.cancelled() => return,
        }
    }
}
