//! The language servers of one workspace: started on first use (or ahead of it with
//! [`LspPool::warm`]), started again when they have died, shut down when idle. A server
//! starts outside the pool's lock, in its program's own slot.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError, Weak};
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
    /// One entry per server program, made on first use and kept. The map's lock is held
    /// only to find an entry, never while a server starts.
    servers: Mutex<HashMap<String, Arc<Entry>>>,
}

/// One server program's place in the pool.
#[derive(Debug, Default)]
struct Entry {
    /// Held while the program is being started: callers for the same program wait for that
    /// one start, callers for other programs do not.
    starting: tokio::sync::Mutex<()>,
    running: Mutex<Option<Slot>>,
}

#[derive(Debug)]
struct Slot {
    client: Arc<LspClient>,
    used: Instant,
}

impl Entry {
    /// The running server, marked as used now; `None` when there is none or it has died.
    fn live(&self) -> Option<Arc<LspClient>> {
        let mut running = self.running.lock().ok()?;
        let slot = running.as_mut().filter(|s| s.client.alive())?;
        slot.used = Instant::now();
        Some(slot.client.clone())
    }

    fn take(&self) -> Option<Slot> {
        self.running.lock().ok().and_then(|mut r| r.take())
    }
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
                servers: Mutex::default(),
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

    /// The running server for `path`'s language (started, or restarted, if need be). While
    /// a server starts, calls for other programs go on; calls for the same program wait for
    /// that start and share its server.
    pub async fn for_path(&self, path: &str) -> Result<Arc<LspClient>> {
        let spec = self.spec_for(path)?;
        let inner = &self.inner;
        let entry = inner.entry(&spec.program);
        if let Some(client) = entry.live() {
            return Ok(client);
        }
        let _starting = entry.starting.lock().await;
        // Another caller may have started it while this one waited.
        if let Some(client) = entry.live() {
            return Ok(client);
        }
        if let Some(dead) = entry.take() {
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
        if let Ok(mut running) = entry.running.lock() {
            *running = Some(Slot {
                client: client.clone(),
                used: Instant::now(),
            });
        }
        if let Some(idle) = inner.idle {
            tokio::spawn(reap_when_idle(
                Arc::downgrade(&entry),
                spec.program,
                Arc::downgrade(&client),
                idle,
            ));
        }
        Ok(client)
    }

    /// Starts the servers of `paths`' languages in the background (one start per program,
    /// shared with the calls that come meanwhile), so the first call does not wait for the
    /// whole start. With `open`, each server is also given its files to analyse in the
    /// background ([`LspClient::prime`]). Paths no server serves are skipped; a server that
    /// fails to start is logged, and tried again on first use.
    pub fn warm<'a>(&self, paths: impl IntoIterator<Item = &'a str>, open: bool) {
        let mut by_program: BTreeMap<String, Vec<String>> = BTreeMap::new();
        for path in paths {
            if let Ok(spec) = self.spec_for(path) {
                by_program
                    .entry(spec.program)
                    .or_default()
                    .push(path.to_owned());
            }
        }
        for (program, files) in by_program {
            let pool = Self {
                inner: self.inner.clone(),
            };
            tokio::spawn(async move {
                let Some(first) = files.first() else { return };
                match pool.for_path(first).await {
                    Ok(c) if open => {
                        let files: Vec<&str> = files.iter().map(String::as_str).collect();
                        let opened = c.prime(&files);
                        tracing::info!("{program}: started ahead of use, {opened} file(s) opened");
                    }
                    Ok(_) => tracing::info!("{program}: started ahead of use"),
                    Err(e) => tracing::warn!("starting {program} ahead of use: {e}"),
                }
            });
        }
    }

    /// The programs of the servers running now.
    pub async fn running(&self) -> Vec<String> {
        let mut names: Vec<String> = self
            .inner
            .entries()
            .into_iter()
            .filter(|(_, e)| {
                e.running
                    .lock()
                    .is_ok_and(|r| r.as_ref().is_some_and(|s| s.client.alive()))
            })
            .map(|(n, _)| n)
            .collect();
        names.sort();
        names
    }

    /// Shuts every server down.
    pub async fn shutdown(&self) {
        for (_, entry) in self.inner.entries() {
            if let Some(slot) = entry.take() {
                slot.client.shutdown().await;
            }
        }
    }
}

impl Inner {
    /// `program`'s entry, made on first use.
    fn entry(&self, program: &str) -> Arc<Entry> {
        // The map only ever gains entries: a panic elsewhere cannot leave it half-changed.
        let mut servers = self.servers.lock().unwrap_or_else(PoisonError::into_inner);
        servers.entry(program.to_owned()).or_default().clone()
    }

    fn entries(&self) -> Vec<(String, Arc<Entry>)> {
        let servers = self.servers.lock().unwrap_or_else(PoisonError::into_inner);
        servers
            .iter()
            .map(|(n, e)| (n.clone(), e.clone()))
            .collect()
    }
}

/// Watches one server: once it has not been used for `idle` and no call holds it, takes it
/// out of the pool and shuts it down. Ends when the pool, or this server, is gone.
async fn reap_when_idle(
    entry: Weak<Entry>,
    program: String,
    watched: Weak<LspClient>,
    idle: Duration,
) {
    let mut wake = Instant::now() + idle;
    loop {
        tokio::time::sleep_until(wake).await;
        let Some(entry) = entry.upgrade() else { return };
        let idle_slot = {
            let Ok(mut running) = entry.running.lock() else {
                return;
            };
            let Some(slot) = running
                .as_ref()
                .filter(|s| std::ptr::eq(Arc::as_ptr(&s.client), watched.as_ptr()))
            else {
                return;
            };
            let now = Instant::now();
            // Held only by the pool: no call is using it.
            let unused = Arc::strong_count(&slot.client) == 1;
            if unused && slot.used + idle <= now {
                running.take()
            } else {
                wake = if unused {
                    slot.used + idle
                } else {
                    now + idle.min(Duration::from_secs(1))
                };
                None
            }
        };
        if let Some(slot) = idle_slot {
            tracing::info!("{program}: idle for {idle:?}; shutting it down");
            slot.client.shutdown().await;
            return;
        }
    }
}
