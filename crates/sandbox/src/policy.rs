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
    /// Directories (or files) the command may read although they lie under a hidden or
    /// private path (the worktree of a read-only command under the home directory or
    /// `/tmp`); the rest of the system is readable anyway.
    pub readable: Vec<PathBuf>,
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
        let git = git_paths(worktree);
        // The repository's git dir readable wherever it is (a repository under the home
        // directory is hidden, one under `/tmp` private): what is written lands on top.
        policy.readable.extend(git.common.iter().cloned());
        if preset.writes() {
            policy.writable.push(worktree.to_path_buf());
            policy.writable.extend(config.writable.iter().cloned());
            policy.writable.extend(git.writable);
            policy.protected.extend(git.protected);
        } else {
            policy.readable.push(worktree.to_path_buf());
            policy.readable.extend(git.writable);
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
            readable: canon(&self.readable),
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
    /// A linked worktree's common dir (the repository's `.git`, outside the worktree).
    common: Option<PathBuf>,
    writable: Vec<PathBuf>,
    protected: Vec<PathBuf>,
}

/// A linked worktree (`.git` is a file `gitdir: X`) writes its own git dir `X`, the common
/// dir's objects and the directory of its branch's ref and reflog; a plain repository's
/// `.git` is inside the worktree. Either way the common dir's `hooks` and `config` stay
/// read-only.
fn git_paths(worktree: &Path) -> GitPaths {
    let dot_git = worktree.join(".git");
    let mut out = GitPaths {
        common: None,
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
            .unwrap_or_else(|_| gitdir.clone());
        out.writable.push(common.join("objects"));
        // Of the shared refs only the directory of the worktree's own branch (and its
        // reflog's): a command commits on its branch but cannot move the user's branches
        // or tags (`git stash`, whose ref is shared, fails too).
        if let Some(dir) = branch_dir(&gitdir) {
            for base in ["refs", "logs/refs"] {
                let d = common.join(base).join(&dir);
                let _ = std::fs::create_dir_all(&d);
                out.writable.push(d);
            }
        }
        out.common = Some(common.clone());
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

/// The directory of the branch a linked worktree has checked out, relative to `refs/`
/// (`heads/trellis` for `refs/heads/trellis/run-1`); `None` when its HEAD is detached.
fn branch_dir(gitdir: &Path) -> Option<PathBuf> {
    let head = std::fs::read_to_string(gitdir.join("HEAD")).ok()?;
    let name = head.strip_prefix("ref:")?.trim().strip_prefix("refs/")?;
    let dir = Path::new(name).parent()?;
    // Nothing that climbs out of `refs/`.
    dir.components()
        .all(|c| matches!(c, std::path::Component::Normal(_)))
        .then(|| dir.to_path_buf())
}
