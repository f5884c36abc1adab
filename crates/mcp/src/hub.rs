//! The servers of one workspace, each on its own supervisor task: it starts the server,
//! lists its tools (again on `tools/list_changed`), notices when it exits, and restarts it
//! with a growing delay, up to `max_restarts`. A server that fails, hangs or exits changes
//! only its own status: the others and the runs go on, and its tools answer with why.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock};
use std::time::Duration;

use futures::FutureExt as _;
use rmcp::Peer;
use rmcp::RoleClient;
use tokio::sync::{Notify, watch};
use tokio_util::sync::CancellationToken;
use trellis_tools::{Tool, ToolSource};

use crate::config::{McpConfig, ServerConfig};
use crate::connect::{Client, Handler, StderrTail, connect};
use crate::error::{Error, Result};
use crate::server::Server;
use crate::tool::{McpTool, exposed_name};

pub use crate::status::{ServerState, ServerStatus, ToolInfo};

/// The MCP servers of one workspace.
#[derive(Clone)]
pub struct McpHub {
    inner: Arc<Inner>,
}

struct Inner {
    workspace: PathBuf,
    servers: RwLock<BTreeMap<String, Arc<Server>>>,
    shutdown: CancellationToken,
    startup_wait: Duration,
}

impl std::fmt::Debug for McpHub {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("McpHub")
            .field("servers", &self.names())
            .finish_non_exhaustive()
    }
}

impl McpHub {
    /// The configured servers of the workspace at `workspace` (nothing starts yet).
    pub fn new(workspace: &Path, config: &McpConfig) -> Result<Self> {
        config.validate()?;
        let hub = Self {
            inner: Arc::new(Inner {
                workspace: workspace.to_path_buf(),
                servers: RwLock::default(),
                shutdown: CancellationToken::new(),
                startup_wait: config.startup_wait(),
            }),
        };
        for (name, server) in &config.servers {
            hub.insert(name, server.clone());
        }
        Ok(hub)
    }

    fn insert(&self, name: &str, config: ServerConfig) -> Arc<Server> {
        let state = if config.enabled {
            ServerState::Idle
        } else {
            ServerState::Disabled
        };
        let (status, _) = watch::channel(ServerStatus {
            name: name.to_owned(),
            transport: config.transport(),
            state,
            tools: Vec::new(),
            last_error: None,
            restarts: 0,
            server_info: None,
            protocol: None,
        });
        let server = Arc::new(Server {
            name: name.to_owned(),
            config,
            status,
            peer: RwLock::default(),
            tools: RwLock::default(),
            progress: Arc::default(),
        });
        if let Ok(mut all) = self.inner.servers.write() {
            all.insert(name.to_owned(), server.clone());
        }
        server
    }

    /// Adds a server at run time (e.g. one an editor passes in) and starts it. A server of
    /// the same name that is already there is kept.
    pub fn add(&self, name: &str, config: ServerConfig) -> Result<()> {
        config.validate(name)?;
        if self.server(name).is_some() {
            return Ok(());
        }
        let server = self.insert(name, config);
        self.spawn(server);
        Ok(())
    }

    /// The servers' names.
    pub fn names(&self) -> Vec<String> {
        self.inner
            .servers
            .read()
            .map(|s| s.keys().cloned().collect())
            .unwrap_or_default()
    }

    pub(crate) fn server(&self, name: &str) -> Option<Arc<Server>> {
        self.inner.servers.read().ok()?.get(name).cloned()
    }

    fn all(&self) -> Vec<Arc<Server>> {
        self.inner
            .servers
            .read()
            .map(|s| s.values().cloned().collect())
            .unwrap_or_default()
    }

    /// Whether any server is configured.
    pub fn is_empty(&self) -> bool {
        self.names().is_empty()
    }

    /// Starts every enabled server that has not started (each on its own task; returns at
    /// once). Needs a Tokio runtime.
    pub fn start(&self) {
        for server in self.all() {
            let idle = server.status.borrow().state == ServerState::Idle;
            if idle {
                server.update(|s| s.state = ServerState::Starting);
                self.spawn(server);
            }
        }
    }

    fn spawn(&self, server: Arc<Server>) {
        let workspace = self.inner.workspace.clone();
        let shutdown = self.inner.shutdown.child_token();
        tokio::spawn(supervise(server, workspace, shutdown));
    }

    /// Every server's status.
    pub fn status(&self) -> Vec<ServerStatus> {
        self.all()
            .iter()
            .map(|s| s.status.borrow().clone())
            .collect()
    }

    /// Waits until no server is starting, or `timeout`; returns the statuses then.
    pub async fn settled(&self, timeout: Duration) -> Vec<ServerStatus> {
        let wait = async {
            for server in self.all() {
                let mut rx = server.status.subscribe();
                let _ = rx
                    .wait_for(|s| !matches!(s.state, ServerState::Starting))
                    .await;
            }
        };
        let _ = tokio::time::timeout(timeout, wait).await;
        self.status()
    }

    /// Starts the servers and waits at most `mcp.startup_wait_secs` for them (what a run
    /// does before its first agent).
    pub async fn ready_for_run(&self) {
        if self.is_empty() {
            return;
        }
        self.start();
        let _ = self.settled(self.inner.startup_wait).await;
    }

    /// Allow-list entries granting each server's tools to the roles it names
    /// (`[("code_agent", "git__*")]`).
    pub fn role_grants(&self) -> Vec<(String, String)> {
        self.all()
            .iter()
            .flat_map(|s| {
                s.config
                    .roles
                    .iter()
                    .map(|r| (r.clone(), format!("{}__*", s.name)))
                    .collect::<Vec<_>>()
            })
            .collect()
    }

    /// Stops every server (their child processes are killed); returns at once.
    pub fn shutdown(&self) {
        self.inner.shutdown.cancel();
    }

    /// Stops every server and waits (at most `timeout`) until each has stopped.
    pub async fn stop(&self, timeout: Duration) -> Vec<ServerStatus> {
        self.shutdown();
        let wait = async {
            for server in self.all() {
                let mut rx = server.status.subscribe();
                let _ = rx
                    .wait_for(|s| !matches!(s.state, ServerState::Starting | ServerState::Ready))
                    .await;
            }
        };
        let _ = tokio::time::timeout(timeout, wait).await;
        self.status()
    }
}

impl ToolSource for McpHub {
    fn tools(&self) -> Vec<Arc<dyn Tool>> {
        self.all()
            .iter()
            .flat_map(|s| s.tools.read().map(|t| t.clone()).unwrap_or_default())
            .collect()
    }
}

impl Drop for Inner {
    fn drop(&mut self) {
        self.shutdown.cancel();
    }
}

/// Runs one server until shutdown: start, list, watch, restart.
async fn supervise(server: Arc<Server>, workspace: PathBuf, shutdown: CancellationToken) {
    let mut failures = 0u32;
    loop {
        server.update(|s| s.state = ServerState::Starting);
        let stderr = StderrTail::default();
        let changed = Arc::new(Notify::new());
        let handler = Handler::new(&server.name, changed.clone(), server.progress.clone());
        // A panic inside the SDK or a transport fails this attempt, not the supervisor.
        let attempt = std::panic::AssertUnwindSafe(start(&server, &workspace, handler, &stderr))
            .catch_unwind();
        let started = tokio::select! {
            () = shutdown.cancelled() => break,
            r = tokio::time::timeout(server.config.startup_timeout(), attempt) => match r {
                Ok(Ok(r)) => r,
                Ok(Err(panic)) => Err(Error::Start {
                    server: server.name.clone(),
                    message: format!("internal error: {}", panic_text(&panic)),
                }),
                Err(_) => Err(Error::Start {
                    server: server.name.clone(),
                    message: format!(
                        "no answer within {} s (startup_timeout_secs)",
                        server.config.startup_timeout_secs
                    ),
                }),
            },
        };
        let outcome = match started {
            Ok(client) => {
                failures = 0;
                run(&server, client, changed, &shutdown).await
            }
            Err(e) => Err(e),
        };
        clear(&server);
        if shutdown.is_cancelled() {
            break;
        }
        let why = match outcome {
            Ok(()) => "the server closed the connection".to_owned(),
            Err(e) => e.to_string(),
        };
        stderr.drained(Duration::from_millis(500)).await;
        let tail = stderr.text();
        let message = if tail.is_empty() {
            why
        } else {
            format!("{why}\nstderr:\n{tail}")
        };
        tracing::warn!(server = %server.name, "MCP server failed: {message}");
        failures += 1;
        let restarts = server.status.borrow().restarts;
        if restarts >= server.config.max_restarts {
            server.update(|s| {
                s.state = ServerState::Failed;
                s.last_error = Some(message);
            });
            return;
        }
        server.update(|s| {
            s.state = ServerState::Starting;
            s.last_error = Some(message);
            s.restarts += 1;
        });
        // 0.5 s, 1 s, 2 s … up to 30 s between attempts.
        let delay = Duration::from_millis(500u64.saturating_mul(1 << failures.min(6)) / 2);
        tokio::select! {
            () = shutdown.cancelled() => break,
            () = tokio::time::sleep(delay.min(Duration::from_secs(30))) => {}
        }
    }
    clear(&server);
    server.update(|s| s.state = ServerState::Stopped);
}

/// Connects and lists the tools.
async fn start(
    server: &Arc<Server>,
    workspace: &Path,
    handler: Handler,
    stderr: &StderrTail,
) -> Result<Client> {
    let client = connect(&server.name, &server.config, workspace, handler, stderr).await?;
    let info = client.peer().peer_info();
    server.update(|s| {
        s.server_info = info
            .as_ref()
            .and_then(|i| i.server_info.as_ref())
            .map(|i| format!("{} {}", i.name, i.version));
        s.protocol = info.as_ref().map(|i| i.protocol_version.to_string());
    });
    list(server, client.peer()).await?;
    Ok(client)
}

/// Lists the tools and publishes them.
async fn list(server: &Arc<Server>, peer: &Peer<RoleClient>) -> Result<()> {
    let listed = peer.list_all_tools().await.map_err(|e| Error::Start {
        server: server.name.clone(),
        message: format!("tools/list failed: {e}"),
    })?;
    let mut infos = Vec::new();
    let mut tools: Vec<Arc<dyn Tool>> = Vec::new();
    for t in listed {
        let offered = server.config.offers(&t.name);
        infos.push(ToolInfo {
            name: exposed_name(&server.name, &t.name),
            remote: t.name.to_string(),
            description: t.description.as_deref().unwrap_or_default().to_owned(),
            read_only: t
                .annotations
                .as_ref()
                .and_then(|a| a.read_only_hint)
                .unwrap_or(false),
            offered,
            annotations: t
                .annotations
                .as_ref()
                .and_then(|a| serde_json::to_value(a).ok()),
        });
        if offered {
            tools.push(Arc::new(McpTool::new(server.clone(), &t)));
        }
    }
    if let Ok(mut slot) = server.tools.write() {
        *slot = tools;
    }
    if let Ok(mut slot) = server.peer.write() {
        *slot = Some(peer.clone());
    }
    server.update(|s| {
        s.tools = infos;
        s.state = ServerState::Ready;
    });
    Ok(())
}

/// Serves a connected server until it closes or the hub stops; re-lists on list_changed.
async fn run(
    server: &Arc<Server>,
    client: Client,
    changed: Arc<Notify>,
    shutdown: &CancellationToken,
) -> Result<()> {
    let peer = client.peer().clone();
    let stop = client.cancellation_token();
    let mut closed = Box::pin(client.waiting());
    loop {
        tokio::select! {
            r = &mut closed => {
                return match r {
                    Ok(reason) => Err(Error::Exited {
                        server: server.name.clone(),
                        reason: format!("{reason:?}"),
                    }),
                    Err(e) => Err(Error::Exited {
                        server: server.name.clone(),
                        reason: e.to_string(),
                    }),
                };
            }
            () = changed.notified() => {
                if let Err(e) = list(server, &peer).await {
                    tracing::warn!(server = %server.name, "re-listing tools failed: {e}");
                }
            }
            () = shutdown.cancelled() => {
                stop.cancel();
                let _ = closed.await;
                return Ok(());
            }
        }
    }
}

fn panic_text(panic: &Box<dyn std::any::Any + Send>) -> String {
    panic
        .downcast_ref::<String>()
        .cloned()
        .or_else(|| panic.downcast_ref::<&str>().map(|s| (*s).to_owned()))
        .unwrap_or_else(|| "a panic".to_owned())
}

fn clear(server: &Server) {
    if let Ok(mut p) = server.peer.write() {
        *p = None;
    }
    if let Ok(mut t) = server.tools.write() {
        t.clear();
    }
}
