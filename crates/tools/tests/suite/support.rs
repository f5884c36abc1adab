//! Helpers: git repositories and tool environments.

use std::path::Path;
use std::sync::Arc;

use serde_json::Value;
use tokio_util::sync::CancellationToken;
use trellis_tools::{
    Interaction, MemorySink, Registry, ToolEnv, ToolResult, ToolsConfig, Workspace,
};

pub use trellis_test_support::git;

/// A repository with one commit of `files`.
pub fn repo(files: &[(&str, &str)]) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    git(dir.path(), &["init", "-q", "-b", "main"]);
    for (p, c) in files {
        let path = dir.path().join(p);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, c).unwrap();
    }
    git(dir.path(), &["add", "-A"]);
    git(dir.path(), &["commit", "-q", "-m", "init"]);
    dir
}

pub struct Tools {
    pub env: ToolEnv,
    pub registry: Registry,
    pub sink: Arc<MemorySink>,
}

impl Tools {
    pub fn new(root: &Path, config: ToolsConfig, interaction: Arc<dyn Interaction>) -> Self {
        let config = Arc::new(config);
        let ws = Workspace::new(root, &config.secrets).unwrap();
        let sink = Arc::new(MemorySink::default());
        let registry = Registry::builtin(&config.roles).with_sink(sink.clone());
        Self {
            env: ToolEnv::new(ws, config, interaction),
            registry,
            sink,
        }
    }

    pub async fn call(&self, tool: &str, args: Value) -> ToolResult {
        self.registry
            .call(
                &self.env,
                "implementor",
                tool,
                args,
                CancellationToken::new(),
            )
            .await
    }
}

pub fn auto() -> Arc<dyn Interaction> {
    Arc::new(trellis_tools::NonInteractive { approve: false })
}

/// Every file and directory of a working tree (without `.git` and `.trellis`) with its
/// bytes (a symlink: its target) and permission bits.
pub fn snapshot(root: &Path) -> std::collections::BTreeMap<String, (Vec<u8>, u32)> {
    use std::os::unix::fs::PermissionsExt;
    let mut out = std::collections::BTreeMap::new();
    let mut stack = vec![root.to_owned()];
    while let Some(dir) = stack.pop() {
        for e in std::fs::read_dir(&dir).unwrap() {
            let e = e.unwrap();
            let p = e.path();
            let rel = p.strip_prefix(root).unwrap().to_string_lossy().into_owned();
            if rel == ".git" || rel == ".trellis" {
                continue;
            }
            let meta = std::fs::symlink_metadata(&p).unwrap();
            let mode = meta.permissions().mode() & 0o7777;
            if meta.is_dir() {
                out.insert(format!("{rel}/"), (Vec::new(), mode));
                stack.push(p);
            } else if meta.file_type().is_symlink() {
                let target = std::fs::read_link(&p).unwrap();
                let bytes = format!("symlink to {}", target.display()).into_bytes();
                out.insert(rel, (bytes, mode));
            } else {
                out.insert(rel, (std::fs::read(&p).unwrap(), mode));
            }
        }
    }
    out
}

/// Bytes of the files under `.git` that describe the user's state: index, config, HEAD.
pub fn git_state(root: &Path) -> Vec<(String, Vec<u8>)> {
    ["index", "config", "HEAD"]
        .iter()
        .map(|f| {
            (
                f.to_string(),
                std::fs::read(root.join(".git").join(f)).unwrap_or_default(),
            )
        })
        .collect()
}
