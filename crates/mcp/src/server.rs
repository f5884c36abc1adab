//! One server's shared state: its configuration, status, connection and tools — kept up
//! to date by the hub's supervisor task, called through by the server's tools.

use std::sync::{Arc, RwLock};

use rmcp::{Peer, RoleClient};
use tokio::sync::watch;
use trellis_tools::Tool;

use crate::config::ServerConfig;
use crate::error::{Error, Result};
use crate::progress::ProgressRoutes;
use crate::status::ServerStatus;

/// One server's shared state.
pub(crate) struct Server {
    pub(crate) name: String,
    pub(crate) config: ServerConfig,
    pub(crate) status: watch::Sender<ServerStatus>,
    pub(crate) peer: RwLock<Option<Peer<RoleClient>>>,
    pub(crate) tools: RwLock<Vec<Arc<dyn Tool>>>,
    /// The calls waiting for progress reports.
    pub(crate) progress: Arc<ProgressRoutes>,
}

impl Server {
    /// The connection to call tools on, or why there is none.
    pub(crate) fn peer(&self) -> Result<Peer<RoleClient>> {
        if let Some(p) = self.peer.read().ok().and_then(|p| p.clone()) {
            return Ok(p);
        }
        let s = self.status.borrow().clone();
        Err(Error::NotReady {
            server: self.name.clone(),
            state: s.state,
            why: s.last_error.unwrap_or_default(),
        })
    }

    /// Changes the status (watchers see the change).
    pub(crate) fn update(&self, f: impl FnOnce(&mut ServerStatus)) {
        self.status.send_modify(f);
    }
}
