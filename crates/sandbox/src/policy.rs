//! A [`SandboxPolicy`]: the concrete paths a command may write and read, its network and
//! its pids limit, made from a worktree, a [`Preset`] and the `[sandbox]` section.

use std::path::{Path, PathBuf};

use crate::config::{Preset, SandboxConfig};

/// What one sandboxed command may do. Everything not granted here is read-only (the
/// system) or hidden (the home directory, Trellis's own configuration directory).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SandboxPolicy {
    /// Directories (or files) the command may write, besides its private tmp.
    pub writable: Vec<PathBuf>,
    /// Paths inside writable ones that stay read-only (a repository's `.git/hooks` and
    /// `.git/config`: writing them would run code as the user later).
    pub protected: Vec<PathBuf>,
    /// The home directory, hidden except for [`SandboxPolicy::home_read`].
    pub home: Option<PathBuf>,
    /// Paths readable (read-only) although under the hidden home directory.
    pub home_read: Vec<PathBuf>,
    /// Other directories hidden entirely (Trellis's configuration: the `serve` token).
    pub hidden: Vec<PathBuf>,
    /// Whether the network is reachable.
    pub network: bool,
    /// The most processes at once (0: no limit).
    pub pids_max: u32,
}

impl SandboxPolicy {
    /// The policy of a command working in `worktree` under `preset`: the worktree and its
    /// git metadata writable (hooks and config excepted) unless the preset is read-only,
    /// the home directory `home` hidden but for the configured readable paths, Trellis's
    /// configuration directory `trellis_config` hidden.
    pub fn for_worktree(
        worktree: &Path,
        preset: Preset,
        config: &SandboxConfig,
        home: Option<&Path>,
        trellis_config: Option<&Path>,
    ) -> Self {
        let mut policy = Self {
            network: preset.network(),
            pids_max: config.pids_max,
            home: home.map(Path::to_path_buf),
            ..Self::default()
        };
        if preset.writes() {
            policy.writable.push(worktree.to_path_buf());
            policy.writable.extend(config.writable.iter().cloned());
            let git = git_paths(worktree);
            policy.writable.extend(git.writable);
            policy.protected.extend(git.protected);
        }
        if let Some(home) = home {
            policy.home_read = config
                .home_read
                .iter()
                .map(|p| home.join(p))
                .filter(|p| p.exists())
                .collect();
        }
        if let Some(dir) = trellis_config {
            policy.hidden.push(dir.to_path_buf());
        }
        policy
    }

    /// Every path the sandbox names that exists, canonical, so symlinks in configured
    /// paths cannot point a bind somewhere else than what was checked.
    pub(crate) fn canonical(&self) -> Self {
        let canon = |v: &[PathBuf]| -> Vec<PathBuf> {
            v.iter()
                .filter_map(|p| std::fs::canonicalize(p).ok())
                .collect()
        };
        Self {
            writable: canon(&self.writable),
            protected: canon(&self.protected),
            home: self
                .home
                .as_ref()
                .and_then(|h| std::fs::canonicalize(h).ok()),
            home_read: canon(&self.home_read),
            hidden: canon(&self.hidden),
            network: self.network,
            pids_max: self.pids_max,
        }
    }
}

/// The git metadata of a worktree a command may write, and what stays read-only.
struct GitPaths {
    writable: Vec<PathBuf>,
    protected: Vec<PathBuf>,
}

/// A linked worktree (`.git` is a file `gitdir: X`) writes its own git dir `X` and the
/// common dir's objects, refs and logs; a plain repository's `.git` is inside the worktree.
/// Either way the common dir's `hooks` and `config` stay read-only.
fn git_paths(worktree: &Path) -> GitPaths {
    let dot_git = worktree.join(".git");
    let mut out = GitPaths {
        writable: Vec::new(),
        protected: Vec::new(),
    };
    let common = if dot_git.is_dir() {
        dot_git
    } else if let Ok(text) = std::fs::read_to_string(&dot_git) {
        let Some(dir) = text.strip_prefix("gitdir:").map(str::trim) else {
            return out;
        };
        let gitdir = worktree.join(dir);
        out.writable.push(gitdir.clone());
        let common = std::fs::read_to_string(gitdir.join("commondir"))
            .map(|c| gitdir.join(c.trim()))
            .unwrap_or(gitdir);
        for sub in ["objects", "refs", "logs"] {
            out.writable.push(common.join(sub));
        }
        common
    } else {
        return out;
    };
    // A missing hooks directory would be created by the command and then run by git.
    let hooks = common.join("hooks");
    if !hooks.exists() {
        let _ = std::fs::create_dir_all(&hooks);
    }
    out.protected.push(hooks);
    out.protected.push(common.join("config"));
    out
}
