//! The workspace a tool call may touch: path resolution and secret-file gating.
//!
//! Every path a model passes is relative to the workspace root. [`Workspace::resolve`]
//! refuses absolute paths, `..` that climbs out, anything inside `.git`, and paths whose
//! existing part resolves (through symlinks) outside the root. It checks the path that will
//! actually be opened, so a symlink inside the workspace pointing at `/etc` is refused too.

use std::path::{Component, Path, PathBuf};
use std::sync::{Arc, LazyLock, Mutex};

use globset::{Glob, GlobSet, GlobSetBuilder};

use crate::config::SecretsConfig;
use crate::error::{Error, Result};

/// File patterns treated as secrets by default (each matches at any depth; a pattern
/// starting with `/` would be anchored at the workspace root).
pub const DEFAULT_SECRET_GLOBS: &[&str] = &[
    ".env",
    ".env.*",
    "*.env",
    "*.pem",
    "*.key",
    "*.p12",
    "*.pfx",
    "*.jks",
    "*.keystore",
    "id_rsa*",
    "id_dsa*",
    "id_ecdsa*",
    "id_ed25519*",
    ".netrc",
    ".npmrc",
    ".pypirc",
    ".htpasswd",
    "credentials",
    "credentials.json",
    "*secret*",
    ".aws/**",
    ".ssh/**",
    ".gnupg/**",
    ".docker/config.json",
    ".kube/config",
];

/// A workspace root with its secret patterns.
#[derive(Clone, Debug)]
pub struct Workspace {
    root: PathBuf,
    matchers: Arc<Matchers>,
}

/// The compiled secret patterns of one [`SecretsConfig`].
#[derive(Debug)]
struct Matchers {
    secrets: GlobSet,
    exempt: GlobSet,
}

impl Matchers {
    fn compile(secrets: &SecretsConfig) -> Result<Self> {
        let mut patterns: Vec<&str> = Vec::new();
        if secrets.use_defaults {
            patterns.extend(DEFAULT_SECRET_GLOBS);
        }
        patterns.extend(secrets.globs.iter().map(String::as_str));
        Ok(Self {
            secrets: glob_set(&patterns)?,
            exempt: glob_set(
                &secrets
                    .exempt
                    .iter()
                    .map(String::as_str)
                    .collect::<Vec<_>>(),
            )?,
        })
    }

    /// The compiled patterns of `secrets`, compiled once per process: a workspace is made
    /// for every agent activation, and compiling the default patterns' regexes took a
    /// quarter of the CPU of a run of nine tool-less agents (docs/benchmarks.md).
    fn of(secrets: &SecretsConfig) -> Result<Arc<Self>> {
        /// Distinct configurations kept (a process has one or two).
        const KEEP: usize = 8;
        type Compiled = Vec<(SecretsConfig, Arc<Matchers>)>;
        static COMPILED: LazyLock<Mutex<Compiled>> = LazyLock::new(Mutex::default);
        let mut compiled = COMPILED.lock().unwrap_or_else(|p| p.into_inner());
        if let Some((_, m)) = compiled.iter().find(|(c, _)| c == secrets) {
            return Ok(m.clone());
        }
        let m = Arc::new(Self::compile(secrets)?);
        if compiled.len() == KEEP {
            compiled.remove(0);
        }
        compiled.push((secrets.clone(), m.clone()));
        Ok(m)
    }
}

/// A path inside the workspace, resolved.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Resolved {
    /// The absolute path to open.
    pub abs: PathBuf,
    /// The path relative to the root, with `/` separators (for messages and records).
    pub rel: String,
}

impl Workspace {
    /// A workspace rooted at `root` (which must exist) with the given secret patterns.
    pub fn new(root: impl AsRef<Path>, secrets: &SecretsConfig) -> Result<Self> {
        let root = root.as_ref();
        let root = root
            .canonicalize()
            .map_err(Error::io("cannot open the workspace", root))?;
        Ok(Self {
            root,
            matchers: Matchers::of(secrets)?,
        })
    }

    /// The canonical root.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// Resolves `path` (relative to the root) for reading or writing. See the module docs
    /// for what is refused.
    pub fn resolve(&self, path: &str) -> Result<Resolved> {
        let refuse = |reason: &str| Error::PathRefused {
            path: path.to_owned(),
            reason: reason.to_owned(),
        };
        let given = Path::new(path);
        if given.is_absolute() {
            return Err(refuse(
                "absolute paths are not allowed; give a path relative to the workspace root",
            ));
        }
        // Normalise lexically first: `a/../b` is fine, `../x` is not.
        let mut parts: Vec<&std::ffi::OsStr> = Vec::new();
        for c in given.components() {
            match c {
                Component::Normal(p) => parts.push(p),
                Component::CurDir => {}
                Component::ParentDir => {
                    if parts.pop().is_none() {
                        return Err(refuse("`..` leads outside the workspace"));
                    }
                }
                Component::RootDir | Component::Prefix(_) => {
                    return Err(refuse("absolute paths are not allowed"));
                }
            }
        }
        if parts.first().is_some_and(|p| *p == ".git") {
            return Err(refuse(
                "the .git directory is off limits; use the git tools",
            ));
        }
        let mut abs = self.root.clone();
        abs.extend(&parts);
        // Resolve symlinks in the longest existing prefix and check it stays inside.
        let mut existing = abs.as_path();
        let mut rest: Vec<&std::ffi::OsStr> = Vec::new();
        let real = loop {
            match existing.canonicalize() {
                Ok(real) => break real,
                Err(_) => {
                    // A dangling symlink also fails canonicalize: refuse it rather than
                    // write through it.
                    if existing.symlink_metadata().is_ok() {
                        return Err(refuse("it is a symlink to a missing target"));
                    }
                    match (existing.parent(), existing.file_name()) {
                        (Some(parent), Some(name)) => {
                            rest.push(name);
                            existing = parent;
                        }
                        _ => return Err(refuse("it cannot be resolved")),
                    }
                }
            }
        };
        if !real.starts_with(&self.root) {
            return Err(refuse(
                "it resolves (through a symlink) outside the workspace",
            ));
        }
        let mut full = real;
        full.extend(rest.iter().rev());
        let rel_path = full.strip_prefix(&self.root).unwrap_or(Path::new(""));
        if rel_path
            .components()
            .next()
            .is_some_and(|c| c.as_os_str() == ".git")
        {
            return Err(refuse(
                "the .git directory is off limits; use the git tools",
            ));
        }
        let rel = rel_path.to_string_lossy().replace('\\', "/");
        Ok(Resolved { abs: full, rel })
    }

    /// Whether the workspace-relative path `rel` is a secret file.
    pub fn is_secret(&self, rel: &str) -> bool {
        self.matchers.secrets.is_match(rel) && !self.matchers.exempt.is_match(rel)
    }

    /// Whether a word of a shell command names a secret file (by path or by file name).
    pub fn mentions_secret(&self, word: &str) -> bool {
        let word = word.trim_start_matches("./");
        !word.is_empty() && self.is_secret(word)
    }
}

/// Builds a glob set where a pattern matches at any depth unless it starts with `/`.
fn glob_set(patterns: &[&str]) -> Result<GlobSet> {
    let mut b = GlobSetBuilder::new();
    for p in patterns {
        // `/x` is anchored at the root; anything else matches at any depth.
        let full = match p.strip_prefix('/') {
            Some(anchored) => anchored.to_owned(),
            None if p.starts_with("**/") => (*p).to_owned(),
            None => format!("**/{p}"),
        };
        let glob = Glob::new(&full).map_err(|e| Error::InvalidArgs {
            tool: "config".into(),
            message: format!("secret pattern `{p}`: {e}"),
        })?;
        b.add(glob);
    }
    b.build().map_err(|e| Error::InvalidArgs {
        tool: "config".into(),
        message: format!("secret patterns: {e}"),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secrets_match_by_name_at_any_depth() {
        let dir = tempfile::tempdir().unwrap();
        let ws = Workspace::new(dir.path(), &SecretsConfig::default()).unwrap();
        for s in [
            ".env",
            "app/.env.local",
            "keys/server.pem",
            "id_rsa",
            ".aws/credentials",
        ] {
            assert!(ws.is_secret(s), "{s} should be secret");
        }
        for s in ["src/main.rs", ".env.example", "README.md", "environment.rs"] {
            assert!(!ws.is_secret(s), "{s} should not be secret");
        }
    }
}
