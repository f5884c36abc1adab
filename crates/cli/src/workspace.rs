//! Opening a workspace: its layered configuration (with `-c` overrides), its runtime and
//! the runtime service the commands talk to.

use std::path::Path;
use std::sync::Arc;

use trellis_config::{Config, LoadOptions};
use trellis_core::Runtime;
use trellis_core::service::{Service, ServiceOptions};
use trellis_store::Store;

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
    let runtime = open_runtime(repo, overrides, dirs, store)?;
    Ok(Service::start(runtime, ServiceOptions::default()))
}
