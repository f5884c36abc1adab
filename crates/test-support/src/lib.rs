//! Helpers shared by the test suites of Trellis crates.
//!
//! Temporary workspaces and the [scripted model provider](scripted). This crate is a
//! dev-dependency only (`publish = false`), so the test double never reaches a release build.

pub mod scripted;

use std::path::{Path, PathBuf};

/// A directory removed when dropped, for tests that need a workspace on disk.
#[derive(Debug)]
pub struct TempWorkspace {
    path: PathBuf,
}

impl TempWorkspace {
    /// Creates an empty directory under the system temp dir, named after `label`, the process
    /// id and a counter so parallel tests never collide.
    pub fn new(label: &str) -> std::io::Result<Self> {
        use std::sync::atomic::{AtomicU64, Ordering};
        static NEXT: AtomicU64 = AtomicU64::new(0);
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let path = std::env::temp_dir().join(format!("trellis-{label}-{}-{n}", std::process::id()));
        std::fs::create_dir_all(&path)?;
        Ok(Self { path })
    }

    /// The directory.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for TempWorkspace {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.path);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn workspace_is_created_and_removed() {
        let ws = TempWorkspace::new("t").unwrap();
        let p = ws.path().to_path_buf();
        assert!(p.is_dir());
        drop(ws);
        assert!(!p.exists());
    }
}
