//! The language servers of one workspace: started on first use, started again when they
//! have died, shut down when idle.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Weak};
use std::time::Duration;

use tokio::time::Instant;

use crate::client::LspClient;
use crate::spec::{LspConfig, ServerCommand, ServerSpec, locate};
use crate::{Error, Result};

/// The language servers of one workspace: one per server program, started on first use,
/// started again when it has died, shut down after `idle_shutdown_secs` without use.
#[derive(Debug)]
pub struct LspPool {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    root: PathBuf,
    ready_timeout: Duration,
    /// `None`: never shut down for idleness.
    idle: Option<Duration>,
    commands: BTreeMap<String, ServerCommand>,
    servers: tokio::sync::Mutex<HashMap<String, Slot>>,
}

#[derive(Debug)]
struct Slot {
    client: Arc<LspClient>,
    used: Instant,
}

impl LspPool {
    /// A pool for the workspace at `root` with `config`'s servers; a server that has not
    /// finished indexing after `ready_timeout_secs` answers anyway (possibly incompletely).
    pub fn new(root: &Path, config: &LspConfig) -> Self {
        Self {
            inner: Arc::new(Inner {
                root: root.to_path_buf(),
                ready_timeout: Duration::try_from_secs_f64(config.ready_timeout_secs)
                    .unwrap_or(Duration::from_secs(120)),
                idle: Duration::try_from_secs_f64(config.idle_shutdown_secs)
                    .ok()
                    .filter(|d| !d.is_zero()),
                commands: config.servers.clone(),
                servers: tokio::sync::Mutex::default(),
            }),
        }
    }

    /// The server that serves `path`: `[lsp.servers.LANGUAGE]`'s command, else the default
    /// program where it is installed ([`locate`]).
    pub fn spec_for(&self, path: &str) -> Result<ServerSpec> {
        let mut spec = ServerSpec::for_path(Path::new(path)).ok_or_else(|| {
            Error::Path(format!(
                "{path}: no language server for this kind of file (Rust, Python, TypeScript and JavaScript have one)"
            ))
        })?;
        match self.inner.commands.get(spec.config_key()) {
            Some(c) => {
                spec.program.clone_from(&c.command);
                spec.args.clone_from(&c.args);
            }
            None => spec.program = locate(&spec.program),
        }
        Ok(spec)
    }

    /// The running server for `path`'s language (started, or restarted, if need be).
    pub async fn for_path(&self, path: &str) -> Result<Arc<LspClient>> {
        let spec = self.spec_for(path)?;
        let inner = &self.inner;
        let mut servers = inner.servers.lock().await;
        if let Some(slot) = servers.get_mut(&spec.program)
            && slot.client.alive()
        {
            slot.used = Instant::now();
            return Ok(slot.client.clone());
        }
        if let Some(dead) = servers.remove(&spec.program) {
            tracing::info!("{} has exited; starting it again", spec.program);
            dead.client.shutdown().await;
        }
        let client = LspClient::start(&spec, &inner.root).await?;
        if !client.ready(inner.ready_timeout).await {
            tracing::warn!(
                "{} has not finished indexing after {:?}; answers may be incomplete",
                spec.program,
                inner.ready_timeout
            );
        }
        servers.insert(
            spec.program.clone(),
            Slot {
                client: client.clone(),
                used: Instant::now(),
            },
        );
        if let Some(idle) = inner.idle {
            tokio::spawn(reap_when_idle(
                Arc::downgrade(inner),
                spec.program,
                Arc::downgrade(&client),
                idle,
            ));
        }
        Ok(client)
    }

    /// The programs of the servers running now.
    pub async fn running(&self) -> Vec<String> {
        let servers = self.inner.servers.lock().await;
        let mut names: Vec<String> = servers
            .iter()
            .filter(|(_, s)| s.client.alive())
            .map(|(n, _)| n.clone())
            .collect();
        names.sort();
        names
    }

    /// Shuts every server down.
    pub async fn shutdown(&self) {
        let servers: Vec<_> = self.inner.servers.lock().await.drain().collect();
        for (_, slot) in servers {
            slot.client.shutdown().await;
        }
    }
}

/// Watches one server: once it has not been used for `idle` and no call holds it, takes it
/// out of the pool and shuts it down. Ends when the pool, or this server, is gone.
async fn reap_when_idle(
    pool: Weak<Inner>,
    program: String,
    watched: Weak<LspClient>,
    idle: Duration,
) {
    let mut wake = Instant::now() + idle;
    loop {
        tokio::time::sleep_until(wake).await;
        let Some(inner) = pool.upgrade() else { return };
        let mut servers = inner.servers.lock().await;
        let Some(slot) = servers
            .get(&program)
            .filter(|s| std::ptr::eq(Arc::as_ptr(&s.client), watched.as_ptr()))
        else {
            return;
        };
        let now = Instant::now();
        // Held only by the pool: no call is using it.
        let unused = Arc::strong_count(&slot.client) == 1;
        if unused && slot.used + idle <= now {
            if let Some(slot) = servers.remove(&program) {
                drop(servers);
                tracing::info!("{program}: idle for {idle:?}; shutting it down");
                slot.client.shutdown().await;
            }
            return;
        }
        wake = if unused {
            slot.used + idle
        } else {
            now + idle.min(Duration::from_secs(1))
        };
    }
}
