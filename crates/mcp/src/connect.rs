//! Opening one connection: a child process on stdio or a Streamable HTTP endpoint, then the
//! handshake in rmcp's automatic lifecycle (the 2026-07-28 `server/discover`, falling back
//! to the 2025-11-25 `initialize` that today's servers speak).

use std::collections::{HashMap, VecDeque};
use std::path::Path;
use std::process::Stdio;
use std::sync::{Arc, Mutex};

use rmcp::model::{
    ClientCapabilities, ClientConfig, Implementation, ProgressNotificationParam, ProtocolVersion,
};
use rmcp::service::{NotificationContext, RunningService};
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::transport::{StreamableHttpClientTransport, TokioChildProcess};
use rmcp::{ClientHandler, ClientLifecycleMode, ClientServiceExt, RoleClient};
use tokio::io::AsyncBufReadExt;
use tokio::sync::Notify;

use crate::config::ServerConfig;
use crate::error::{Error, Result};
use crate::progress::ProgressRoutes;

/// Variables every stdio server gets from Trellis's environment (besides its own).
const BASE_ENV: &[&str] = &[
    "PATH",
    "HOME",
    "USER",
    "LOGNAME",
    "LANG",
    "LC_ALL",
    "LC_CTYPE",
    "TMPDIR",
    "TZ",
    "SHELL",
    "TERM",
    "XDG_CONFIG_HOME",
    "XDG_DATA_HOME",
    "XDG_CACHE_HOME",
    "XDG_RUNTIME_DIR",
];

/// Lines of a server's stderr kept for error messages.
const STDERR_LINES: usize = 20;

/// The client side of one connection: notices `tools/list_changed` and routes progress
/// notifications to the calls that wait for them.
#[derive(Clone)]
pub(crate) struct Handler {
    pub(crate) list_changed: Arc<Notify>,
    name: String,
    progress: Arc<ProgressRoutes>,
}

impl ClientHandler for Handler {
    async fn on_tool_list_changed(&self, _context: NotificationContext<RoleClient>) {
        tracing::debug!(server = %self.name, "tools/list_changed");
        self.list_changed.notify_one();
    }

    async fn on_progress(
        &self,
        params: ProgressNotificationParam,
        _context: NotificationContext<RoleClient>,
    ) {
        tracing::trace!(server = %self.name, progress = params.progress, total = ?params.total, message = ?params.message, "progress");
        self.progress.deliver(params);
    }

    fn get_info(&self) -> ClientConfig {
        // Only what this client handles: no sampling, roots or elicitation.
        ClientConfig::new(
            ClientCapabilities::default(),
            Implementation::new("trellis", env!("CARGO_PKG_VERSION")),
        )
    }
}

/// A live connection.
pub(crate) type Client = RunningService<RoleClient, Handler>;

/// The last lines a child wrote to stderr.
#[derive(Clone)]
pub(crate) struct StderrTail {
    lines: Arc<Mutex<VecDeque<String>>>,
    /// Set when the child's stderr reached its end.
    closed: Arc<tokio::sync::watch::Sender<bool>>,
}

impl Default for StderrTail {
    fn default() -> Self {
        Self {
            lines: Arc::default(),
            closed: Arc::new(tokio::sync::watch::channel(false).0),
        }
    }
}

impl StderrTail {
    /// Waits (at most `max`) for the child's stderr to end: a server that failed at start
    /// has usually said why just before it exited.
    pub(crate) async fn drained(&self, max: std::time::Duration) {
        let mut rx = self.closed.subscribe();
        let _ = tokio::time::timeout(max, rx.wait_for(|closed| *closed)).await;
    }

    fn push(&self, line: String) {
        if let Ok(mut q) = self.lines.lock() {
            if q.len() == STDERR_LINES {
                q.pop_front();
            }
            q.push_back(line);
        }
    }

    /// The kept lines, joined (empty when the server wrote nothing).
    pub(crate) fn text(&self) -> String {
        self.lines
            .lock()
            .map(|q| q.iter().cloned().collect::<Vec<_>>().join("\n"))
            .unwrap_or_default()
    }
}

/// Starts the server and completes the handshake.
pub(crate) async fn connect(
    name: &str,
    config: &ServerConfig,
    workspace: &Path,
    handler: Handler,
    stderr: &StderrTail,
) -> Result<Client> {
    let lifecycle = ClientLifecycleMode::Auto {
        preferred_versions: vec![ProtocolVersion::V_2026_07_28],
        legacy_version: Some(ProtocolVersion::V_2025_11_25),
    };
    let failed = |e: &dyn std::fmt::Display| Error::Start {
        server: name.to_owned(),
        message: e.to_string(),
    };
    if let Some(url) = &config.url {
        let mut headers = HashMap::new();
        let mut pairs: Vec<(String, String)> = config.headers.clone().into_iter().collect();
        for (k, var) in &config.header_env {
            pairs.push((k.clone(), env_value(name, var)?));
        }
        for (k, v) in pairs {
            let key = http::HeaderName::try_from(k.as_str())
                .map_err(|e| Error::Config(format!("mcp.servers.{name}.headers: {k:?}: {e}")))?;
            let value = http::HeaderValue::try_from(v.as_str()).map_err(|e| {
                Error::Config(format!("mcp.servers.{name}.headers: value of {k:?}: {e}"))
            })?;
            headers.insert(key, value);
        }
        let mut cfg =
            StreamableHttpClientTransportConfig::with_uri(url.as_str()).custom_headers(headers);
        if let Some(var) = &config.bearer_token_env {
            cfg = cfg.auth_header(env_value(name, var)?);
        }
        // The one HTTP client (rustls with ring, installed as the process's provider).
        let client = trellis_fetch::client(std::time::Duration::from_secs(10), None)
            .map_err(|e| failed(&e))?;
        let transport = StreamableHttpClientTransport::with_client(client, cfg);
        return handler
            .serve_with_lifecycle(transport, lifecycle)
            .await
            .map_err(|e| failed(&e));
    }
    let Some(program) = &config.command else {
        return Err(Error::Config(format!(
            "mcp.servers.{name}: neither command nor url"
        )));
    };
    let cwd = match &config.cwd {
        Some(dir) => workspace.join(dir),
        None => workspace.to_path_buf(),
    };
    let mut env: Vec<(std::ffi::OsString, std::ffi::OsString)> = Vec::new();
    for var in BASE_ENV {
        if let Some(v) = std::env::var_os(var) {
            env.push((var.into(), v));
        }
    }
    for var in &config.env_vars {
        env.push((var.into(), env_value(name, var)?.into()));
    }
    env.extend(config.env.iter().map(|(k, v)| (k.into(), v.into())));
    let (mut cmd, guard) = sandboxed(name, config, program, &cwd, env, workspace)?;
    cmd.kill_on_drop(true);
    let mut wrapped = process_wrap::tokio::CommandWrap::from(cmd);
    // npx, uvx and shells start the real server as their child: a process group lets the
    // whole tree be killed.
    wrapped.wrap(process_wrap::tokio::ProcessGroup::leader());
    let (transport, err) = TokioChildProcess::builder(wrapped)
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| Error::Start {
            server: name.to_owned(),
            message: format!("cannot start {program:?}: {e}"),
        })?;
    if let Some(err) = err {
        let tail = stderr.clone();
        let server = name.to_owned();
        tokio::spawn(async move {
            // The sandbox's pids cgroup and descriptors live as long as the server: its
            // stderr closes when it exits.
            let _guard = guard;
            let mut lines = tokio::io::BufReader::new(err).lines();
            while let Ok(Some(line)) = lines.next_line().await {
                tracing::debug!(server = %server, "stderr: {line}");
                tail.push(line);
            }
            tail.closed.send_replace(true);
        });
    }
    handler
        .serve_with_lifecycle(transport, lifecycle)
        .await
        .map_err(|e| failed(&e))
}

impl Handler {
    pub(crate) fn new(
        name: &str,
        list_changed: Arc<Notify>,
        progress: Arc<ProgressRoutes>,
    ) -> Self {
        Self {
            list_changed,
            name: name.to_owned(),
            progress,
        }
    }
}

/// The server's command: inside the OS sandbox when its configuration opts in (`sandbox =
/// "<preset>"`, the workspace as the worktree), else as it is. The guard lives as long as
/// the server.
fn sandboxed(
    name: &str,
    config: &ServerConfig,
    program: &str,
    cwd: &Path,
    env: Vec<(std::ffi::OsString, std::ffi::OsString)>,
    workspace: &Path,
) -> Result<(tokio::process::Command, Option<trellis_sandbox::Guard>)> {
    let Some(preset) = config.sandbox else {
        let mut cmd = tokio::process::Command::new(program);
        cmd.args(&config.args)
            .env_clear()
            .envs(env)
            .current_dir(cwd);
        return Ok((cmd, None));
    };
    let start_error = |message: String| Error::Start {
        server: name.to_owned(),
        message,
    };
    let sandbox = trellis_sandbox::Sandbox::new(config.sandbox_mode)
        .map_err(|e| start_error(e.to_string()))?;
    let policy = trellis_sandbox::SandboxPolicy::for_worktree(
        workspace,
        preset,
        &trellis_sandbox::SandboxConfig::default(),
        trellis_sandbox::home_dir().as_deref(),
        trellis_sandbox::trellis_config_dir().as_deref(),
    );
    let spec = trellis_sandbox::CommandSpec {
        program: program.into(),
        args: config.args.iter().map(Into::into).collect(),
        cwd: cwd.to_path_buf(),
        env,
    };
    let wrapped = sandbox
        .wrap(&spec, &policy)
        .map_err(|e| start_error(e.to_string()))?;
    Ok((
        tokio::process::Command::from(wrapped.command),
        Some(wrapped.guard),
    ))
}

fn env_value(server: &str, var: &str) -> Result<String> {
    std::env::var(var).map_err(|_| {
        Error::Config(format!(
            "mcp.servers.{server}: environment variable {var} is not set (it holds a secret \
             the server needs; export it before starting trellis)"
        ))
    })
}
