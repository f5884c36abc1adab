//! What the client tests share: the npm peers, hubs of servers and an agent calling their tools.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use serde_json::Value;
use tokio_util::sync::CancellationToken;
use trellis_mcp::{McpConfig, McpHub, ServerConfig, ServerStatus};
use trellis_tools::interaction::NonInteractive;
use trellis_tools::{Registry, ToolEnv, ToolProgress, ToolResult, ToolsConfig, Workspace};

pub fn peers() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/peers/node_modules/@modelcontextprotocol")
}

/// The npm peer `name`'s entry point, run by `node` with `args`.
pub fn node_peer(name: &str, args: &[&str]) -> ServerConfig {
    let entry = peers().join(name).join("dist/index.js");
    assert!(
        entry.is_file(),
        "{} is missing: run scripts/setup.d/70-mcp-peers.sh",
        entry.display()
    );
    let mut all = vec![entry.display().to_string()];
    all.extend(args.iter().map(|a| (*a).to_owned()));
    ServerConfig {
        command: Some("node".into()),
        args: all,
        ..ServerConfig::default()
    }
}

/// server-everything on stdio.
pub fn everything() -> ServerConfig {
    node_peer("server-everything", &["stdio"])
}

pub fn sh(script: &str) -> ServerConfig {
    ServerConfig {
        command: Some("sh".into()),
        args: vec!["-c".into(), script.into()],
        ..ServerConfig::default()
    }
}

pub fn hub(dir: &Path, servers: Vec<(&str, ServerConfig)>) -> McpHub {
    let config = McpConfig {
        servers: servers
            .into_iter()
            .map(|(n, s)| (n.to_owned(), s))
            .collect(),
        startup_wait_secs: 0.0,
    };
    McpHub::new(dir, &config).unwrap()
}

pub struct Agent {
    pub env: ToolEnv,
    pub registry: Registry,
}

impl Agent {
    /// A role `agent` allowed every tool of the hub's servers.
    pub fn new(dir: &Path, hub: &McpHub) -> Self {
        let config = Arc::new(ToolsConfig::default());
        let ws = Workspace::new(dir, &config.secrets).unwrap();
        let mut registry = Registry::new().with_source(Arc::new(hub.clone()));
        for name in hub.names() {
            registry.allow("agent", [format!("{name}__*").as_str()]);
        }
        Self {
            env: ToolEnv::new(ws, config, Arc::new(NonInteractive { approve: true })),
            registry,
        }
    }

    pub async fn call(&self, tool: &str, args: Value) -> ToolResult {
        self.registry
            .call(&self.env, "agent", tool, args, CancellationToken::new())
            .await
    }
}

impl Agent {
    /// Calls `tool` and collects the progress it reports while it runs.
    pub async fn call_with_progress(
        &self,
        tool: &str,
        args: Value,
    ) -> (ToolResult, Vec<ToolProgress>) {
        let seen = Arc::new(Mutex::new(Vec::new()));
        let sink = seen.clone();
        let r = self
            .registry
            .call_with_progress(
                &self.env,
                "agent",
                tool,
                args,
                CancellationToken::new(),
                Some(Arc::new(move |p| sink.lock().unwrap().push(p))),
            )
            .await;
        let seen = seen.lock().unwrap().clone();
        (r, seen)
    }
}

/// Asserts that `seen` is the progress of server-everything's long-running operation of
/// `steps` steps: at least `min` reports, increasing, each out of `steps`.
pub fn assert_steps(seen: &[ToolProgress], steps: f64, min: usize) {
    assert!(seen.len() >= min, "{seen:?}");
    assert!(
        seen.windows(2).all(|w| w[0].progress < w[1].progress),
        "not increasing: {seen:?}"
    );
    assert!(
        seen.iter()
            .all(|p| p.total == Some(steps) && p.progress >= 1.0 && p.progress <= steps),
        "{seen:?}"
    );
}

pub fn status<'a>(all: &'a [ServerStatus], name: &str) -> &'a ServerStatus {
    all.iter().find(|s| s.name == name).unwrap()
}
