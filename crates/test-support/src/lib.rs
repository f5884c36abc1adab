//! Helpers shared by the test suites of Trellis crates.
//!
//! Temporary workspaces, the [scripted model provider](scripted), a deterministic
//! [interruption point](interrupt) for models and tools, and for the benchmarks the
//! [paced one](paced), a configurable [fake tool](tools) and the process's [CPU time and
//! memory](usage), and a loopback [OpenAI-wire server](wire). This crate is a dev-dependency only (`publish = false`), so the test
//! doubles never reach a release build.

pub mod interrupt;
pub mod paced;
pub mod scripted;
pub mod tools;
pub mod usage;
pub mod wire;

use std::path::{Path, PathBuf};

/// Runs `git args` in `dir` as a fixed test author and returns its stdout; panics with git's
/// stderr when it fails (for tests building fixture repositories).
pub fn git(dir: &Path, args: &[&str]) -> String {
    let out = std::process::Command::new("git")
        .current_dir(dir)
        .args(args)
        .env("GIT_AUTHOR_NAME", "User")
        .env("GIT_AUTHOR_EMAIL", "user@example.com")
        .env("GIT_COMMITTER_NAME", "User")
        .env("GIT_COMMITTER_EMAIL", "user@example.com")
        .output()
        .unwrap_or_else(|e| panic!("cannot run git {args:?}: {e}"));
    assert!(
        out.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Copies the directory tree `src` into `dst` (which must exist).
pub fn copy_tree(src: &Path, dst: &Path) -> std::io::Result<()> {
    for e in std::fs::read_dir(src)? {
        let e = e?;
        let to = dst.join(e.file_name());
        if e.file_type()?.is_dir() {
            std::fs::create_dir_all(&to)?;
            copy_tree(&e.path(), &to)?;
        } else {
            std::fs::copy(e.path(), &to)?;
        }
    }
    Ok(())
}

/// A copy of the bundled example repository `examples/<name>` as a fresh git repository
/// (one commit) with `config` as its `.trellis/config.toml`.
pub fn example_repo(name: &str, config: &str) -> std::io::Result<TempWorkspace> {
    let ws = TempWorkspace::new(&format!("example-{name}"))?;
    let src = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../examples")
        .join(name);
    copy_tree(&src, ws.path())?;
    git(ws.path(), &["init", "-q"]);
    git(ws.path(), &["add", "-A"]);
    git(ws.path(), &["commit", "-qm", "initial"]);
    std::fs::create_dir_all(ws.path().join(".trellis"))?;
    std::fs::write(ws.path().join(".trellis/config.toml"), config)?;
    Ok(ws)
}

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
