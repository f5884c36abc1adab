//! Opening a workspace: its layered configuration (with `-c` overrides), its runtime, the
//! runtime service the commands talk to, and the reader of its records.

use std::path::Path;
use std::sync::Arc;

use trellis_config::{Config, LoadOptions};
use trellis_core::service::{Dispatch, Service, ServiceOptions};
use trellis_core::{Records, Runtime};
use trellis_store::{Store, StoreConfig, StoreOptions};

/// Opens the store of `repo`: the database file `db` when given, else what the `[store]`
/// section names — a PostgreSQL server (`url`) or the workspace's SQLite file
/// (docs/configuration.md, "Store"). With `existing`, a SQLite file is opened only if it is
/// there (`trellis_store::Error::NoStore` otherwise).
pub fn open_store(
    repo: &Path,
    overrides: &[String],
    db: Option<&Path>,
    options: StoreOptions,
    existing: bool,
) -> anyhow::Result<Arc<Store>> {
    if let Some(path) = db {
        return Ok(if existing {
            Store::open_existing(path, options)?
        } else {
            Store::open(path, options)?
        });
    }
    let config = store_config(repo, overrides)?;
    Ok(Store::open_configured(repo, &config, options, existing)?)
}

/// The `[store]` section of `repo`'s configuration.
fn store_config(repo: &Path, overrides: &[String]) -> anyhow::Result<StoreConfig> {
    Ok(load_config(repo, overrides)?.section_serde("store")?)
}

/// Whether the workspace's runs execute on `trellis worker` processes (`[store] workers`).
pub fn runs_on_workers(repo: &Path, overrides: &[String]) -> anyhow::Result<bool> {
    Ok(store_config(repo, overrides)?.workers)
}

/// Loads the layered configuration for `repo` with `-c` overrides.
pub fn load_config(repo: &Path, overrides: &[String]) -> anyhow::Result<Config> {
    Ok(Config::load(&LoadOptions::discover(
        repo,
        overrides.to_vec(),
    ))?)
}

/// Opens the runtime of `repo`.
pub fn open_runtime(
    repo: &Path,
    overrides: &[String],
    dirs: &[std::path::PathBuf],
    store: Arc<Store>,
) -> anyhow::Result<Arc<Runtime>> {
    Ok(Arc::new(Runtime::open(repo, overrides, dirs, store)?))
}

/// Starts the runtime service of `repo` in this process.
pub fn open_service(
    repo: &Path,
    overrides: &[String],
    dirs: &[std::path::PathBuf],
    store: Arc<Store>,
) -> anyhow::Result<Arc<Service>> {
    let dispatch = if runs_on_workers(repo, overrides)? {
        Dispatch::Workers
    } else {
        Dispatch::Here
    };
    let options = ServiceOptions {
        dispatch,
        ..ServiceOptions::default()
    };
    open_service_with(repo, overrides, dirs, store, options)
}

/// [`open_service`] with explicit service settings (`trellis serve --workers`,
/// `trellis worker`).
pub fn open_service_with(
    repo: &Path,
    overrides: &[String],
    dirs: &[std::path::PathBuf],
    store: Arc<Store>,
    options: ServiceOptions,
) -> anyhow::Result<Arc<Service>> {
    if options.dispatch == Dispatch::Workers && !store.keeps_leases() {
        anyhow::bail!(
            "runs handed to workers (`[store] workers`, `trellis serve --workers`, \
             `trellis run --queue`) need a PostgreSQL store shared with them: set [store] url \
             (docs/configuration.md, \"Store\"; docs/deploy.md)"
        );
    }
    let runtime = open_runtime(repo, overrides, dirs, store)?;
    let service = Service::start(runtime, options);
    let config = load_config(repo, overrides)?;
    crate::telemetry::start(&config, &service)?;
    crate::notify::start(&config, &service)?;
    Ok(service)
}

/// A workspace whose store is open, as the `runs` commands use it: they read its
/// [`Records`] (no configuration, models or service needed), and start its service only to
/// act on a run. The store itself stays with the modules that drive demonstration runs.
pub struct Workspace<'a> {
    repo: &'a Path,
    overrides: &'a [String],
    store: Arc<Store>,
}

impl<'a> Workspace<'a> {
    /// Workspace `repo` with `-c` overrides, over its open `store`.
    pub fn new(repo: &'a Path, overrides: &'a [String], store: Arc<Store>) -> Self {
        Self {
            repo,
            overrides,
            store,
        }
    }

    /// The reader of the workspace's records.
    pub fn records(&self) -> Records {
        Records::new(self.store.clone())
    }

    /// Starts the workspace's runtime service in this process.
    pub fn service(&self) -> anyhow::Result<Arc<Service>> {
        open_service(self.repo, self.overrides, &[], self.store.clone())
    }

    /// The store, for the engine that drives demonstration runs (`crate::demo`).
    pub(crate) fn store(&self) -> &Arc<Store> {
        &self.store
    }
}
