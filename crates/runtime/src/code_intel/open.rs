//! Code intelligence served on its own (`trellis mcp`): the index opened once and brought up
//! to date in the background, the language servers started ahead of use.

use std::path::Path;
use std::sync::{Arc, Mutex};

use trellis_index::{Index, UpdateOptions};
use trellis_lsp::LspPool;

use super::{CodeIntel, Error, IndexConfig, IndexHandle, LspConfig};

impl CodeIntel {
    /// Code intelligence over the index of `root` (created if missing) with `config`, and
    /// the language servers of `lsp`. Brings the index up to date in the background
    /// (progress on stderr; calls wait for it) and, with `[lsp] warm_for_mcp`, starts the
    /// language servers of the languages present in the workspace in the background too.
    pub fn open(root: &Path, config: IndexConfig, lsp: &LspConfig) -> Result<Self, Error> {
        let config_for_scan = config.clone();
        let index = Arc::new(Mutex::new(Index::open(root, config)?));
        let (done, indexed) = tokio::sync::watch::channel(false);
        let intel = Self {
            repo: root.to_path_buf(),
            index: IndexHandle::Shared {
                index: index.clone(),
                indexed,
            },
            lsp: Arc::new(LspPool::new(root, lsp)),
        };
        let refresh = move || {
            // Whatever happens, calls stop waiting.
            let _done = Finished(done);
            let Ok(mut index) = index.lock() else { return };
            let progress = |p: trellis_index::Progress| tracing::debug!(?p, "indexing");
            match index.update(&UpdateOptions {
                embed: false,
                progress: Some(&progress),
                ..UpdateOptions::default()
            }) {
                Ok(s) => eprintln!(
                    "trellis mcp: index up to date ({} files, {} re-indexed, {} symbols)",
                    s.files, s.files_indexed, s.symbols
                ),
                Err(e) => eprintln!("trellis mcp: indexing failed: {e}"),
            }
            let _ = index.close_writer();
            // Hybrid search when the index has embeddings (made by `trellis index`).
            if index.has_embeddings().unwrap_or(false) {
                match trellis_index::embed::from_config(&index.config().embedding.clone(), false) {
                    Ok(Some(e)) => index.set_embedder(e),
                    Ok(None) => {}
                    Err(e) => {
                        eprintln!("trellis mcp: embeddings unavailable ({e}); text search only")
                    }
                }
            }
        };
        match tokio::runtime::Handle::try_current() {
            Ok(rt) => {
                drop(rt.spawn_blocking(refresh));
                if lsp.warm_for_mcp {
                    intel.warm_language_servers(&rt, &config_for_scan, lsp.warm_open_files);
                }
            }
            Err(_) => refresh(),
        }
        Ok(intel)
    }

    /// Starts the language servers of the languages present in the workspace in the
    /// background (`[lsp] warm_for_mcp`; with `open`, `warm_open_files`, they also get the
    /// files to analyse), so the first `references` does not wait for a whole server start.
    fn warm_language_servers(&self, rt: &tokio::runtime::Handle, config: &IndexConfig, open: bool) {
        let root = self.repo.clone();
        let lsp = self.lsp.clone();
        let excludes = trellis_index::scan::Excludes::new(config);
        rt.spawn(async move {
            let excludes = match excludes {
                Ok(e) => e,
                Err(e) => {
                    tracing::warn!("not starting language servers ahead of use: {e}");
                    return;
                }
            };
            let walk =
                tokio::task::spawn_blocking(move || trellis_index::scan::scan(&root, &excludes));
            match walk.await {
                Ok(Ok(files)) => lsp.warm(files.iter().map(|f| f.path.as_str()), open),
                Ok(Err(e)) => tracing::warn!("not starting language servers ahead of use: {e}"),
                Err(e) => tracing::warn!("not starting language servers ahead of use: {e}"),
            }
        });
    }
}

/// Marks the start-up update finished when dropped.
struct Finished(tokio::sync::watch::Sender<bool>);

impl Drop for Finished {
    fn drop(&mut self) {
        self.0.send_replace(true);
    }
}
