//! The store as the rest of Trellis holds it: [`Store`], a trait object over a backend.

use std::path::Path;
use std::sync::Arc;

use trellis_graph::Journal;

use crate::prelude::*;
use crate::{Owner, Result, SqliteStore, StoreConfig, StoreOptions, StoreStats};

/// A store backend: the engine's [`Journal`], every domain trait, and the lifecycle.
/// [`SqliteStore`] (one file per workspace) is the default.
pub trait Backend:
    Journal
    + RunStore
    + UsageStore
    + ReviewStore
    + ArtifactStore
    + StreamStore
    + SessionStore
    + ClientSessionStore
    + DagCheckpointStore
    + ToolGraphStore
    + LeaseStore
    + std::fmt::Debug
    + Send
    + Sync
{
    /// Where the records live, for messages: the database file, or the server's URL
    /// without its password.
    fn location(&self) -> String;

    /// This process, as recorded in the claims it takes.
    fn owner(&self) -> &Owner;

    /// The writer's counters since the store was opened.
    fn stats(&self) -> StoreStats;

    /// Bytes the records occupy.
    fn size_on_disk(&self) -> Result<u64>;

    /// Waits until everything sent before is committed.
    fn flush(&self) -> Result<()>;

    /// Reclaims free space (after committing everything sent before).
    fn vacuum(&self) -> Result<()>;

    /// Notifications of what other processes commit, when the backend has them
    /// (PostgreSQL's `LISTEN`/`NOTIFY`), from now on; read each with
    /// [`crate::Notice::parse`].
    /// `None` (SQLite): readers poll.
    fn watch(&self) -> Option<tokio::sync::broadcast::Receiver<Arc<str>>> {
        None
    }
}

/// The durable store of a workspace, whatever its backend: what the runtime, the service
/// and the front-ends hold (`Arc<Store>`). A feature that persists through one domain takes
/// that domain's trait instead (`&dyn ToolGraphStore`); an `Arc<Store>` or `&Store` converts
/// to it.
pub type Store = dyn Backend;

impl dyn Backend {
    /// Opens (creating if needed) the SQLite store of `workspace`:
    /// `<workspace>/.trellis/trellis.db` ([`SqliteStore::open_workspace`]).
    pub fn open_workspace(
        workspace: impl AsRef<Path>,
        options: StoreOptions,
    ) -> Result<Arc<Store>> {
        Ok(Arc::new(SqliteStore::open_workspace(workspace, options)?))
    }

    /// Opens the SQLite database file at `path` only if it exists
    /// ([`SqliteStore::open_existing`]).
    pub fn open_existing(path: impl AsRef<Path>, options: StoreOptions) -> Result<Arc<Store>> {
        Ok(Arc::new(SqliteStore::open_existing(path, options)?))
    }

    /// Opens the store the `[store]` section names for `workspace`: the PostgreSQL server of
    /// `url` (connected and migrated, the password from `password_env`), else the
    /// workspace's SQLite file — created if needed, or with `existing` only if it is there
    /// ([`crate::Error::NoStore`] otherwise).
    pub fn open_configured(
        workspace: impl AsRef<Path>,
        config: &StoreConfig,
        options: StoreOptions,
        existing: bool,
    ) -> Result<Arc<Store>> {
        if config.workers && config.url.is_none() {
            return Err(crate::Error::WorkersNeedPostgres);
        }
        match &config.url {
            Some(url) => Self::connect(url, config.password()?.as_deref(), options),
            None if existing => Self::open_existing(
                workspace
                    .as_ref()
                    .join(crate::STORE_DIR)
                    .join(crate::DB_FILE),
                options,
            ),
            None => Self::open_workspace(workspace, options),
        }
    }

    /// Connects to the PostgreSQL server of `url` and migrates its database
    /// ([`crate::pg::PgStore::connect_with_password`]).
    #[cfg(feature = "postgres")]
    pub fn connect(url: &str, password: Option<&str>, options: StoreOptions) -> Result<Arc<Store>> {
        let options = crate::pg::PgOptions {
            synchronous: options.synchronous,
            ..crate::pg::PgOptions::default()
        };
        Ok(Arc::new(crate::pg::PgStore::connect_with_password(
            url, password, options,
        )?))
    }

    /// Without the feature `postgres` a `[store] url` cannot be served: the error says so.
    #[cfg(not(feature = "postgres"))]
    pub fn connect(
        url: &str,
        _password: Option<&str>,
        _options: StoreOptions,
    ) -> Result<Arc<Store>> {
        Err(crate::Error::NoPostgres {
            url: url.split('@').next_back().unwrap_or_default().to_owned(),
        })
    }

    /// Opens (creating if needed) the SQLite database file at `path` and migrates it
    /// ([`SqliteStore::open`]).
    pub fn open(path: impl AsRef<Path>, options: StoreOptions) -> Result<Arc<Store>> {
        Ok(Arc::new(SqliteStore::open(path, options)?))
    }
}
