//! The `[instructions]` section and the per-workspace cache of what it finds: a run reads
//! its instructions from the cache, which re-checks the files it knows (and the root's and
//! the user's candidates) on every read and walks the repository again for new nested files
//! at most every [`REWALK`].

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::{DEFAULT_NAMES, Instructions, Scope};

/// The configuration section.
pub const SECTION: &str = "instructions";

/// The most characters of instructions one prompt carries by default.
pub const DEFAULT_MAX_CHARS: usize = 16_000;

/// How long a walk for nested files is trusted (known files are re-checked every read).
pub const REWALK: Duration = Duration::from_secs(5);

/// The `[instructions]` section: which files carry a project's instructions for agents.
#[derive(Clone, Debug, PartialEq, Eq, Deserialize, Serialize, JsonSchema)]
#[serde(default, deny_unknown_fields)]
pub struct InstructionsConfig {
    /// Whether instruction files are read at all.
    pub enabled: bool,
    /// The file names looked for in each directory, in order of preference: the first
    /// present is the directory's instructions.
    pub names: Vec<String>,
    /// The directory of the user's own file, read for every repository (default: the
    /// Trellis config directory, `~/.config/trellis`).
    pub user_dir: Option<PathBuf>,
    /// The most characters of instructions one prompt carries (a quarter of the role's
    /// input cap is the other bound); what does not fit is cut with a note.
    pub max_chars: usize,
}

impl Default for InstructionsConfig {
    fn default() -> Self {
        Self {
            enabled: true,
            names: DEFAULT_NAMES.iter().map(|n| (*n).to_owned()).collect(),
            user_dir: None,
            max_chars: DEFAULT_MAX_CHARS,
        }
    }
}

impl InstructionsConfig {
    /// The characters of instructions a prompt of a model with an input cap of `cap_tokens`
    /// carries: a quarter of the cap (about four characters a token), at most `max_chars`.
    pub fn budget(&self, cap_tokens: Option<u64>) -> usize {
        let quarter = cap_tokens.map_or(usize::MAX, |t| usize::try_from(t).unwrap_or(usize::MAX));
        self.max_chars.min(quarter)
    }
}

/// A file's modification time and length, or `None` when it is absent.
type Stamp = Option<(SystemTime, u64)>;

fn stamp(path: &Path) -> Stamp {
    let m = std::fs::metadata(path).ok().filter(|m| m.is_file())?;
    Some((m.modified().ok()?, m.len()))
}

struct Cached {
    walked: Instant,
    found: Arc<Instructions>,
    stamps: Vec<(PathBuf, Stamp)>,
}

/// The instructions of one repository, read again only when something changed.
pub struct InstructionsCache {
    config: InstructionsConfig,
    root: PathBuf,
    user_dir: Option<PathBuf>,
    state: Mutex<Option<Cached>>,
}

impl InstructionsCache {
    /// The cache of the repository at `root`; the user's directory is `config.user_dir`,
    /// else `default_user_dir`.
    pub fn new(root: &Path, config: InstructionsConfig, default_user_dir: Option<PathBuf>) -> Self {
        let user_dir = config.user_dir.clone().or(default_user_dir);
        Self {
            config,
            root: root.to_path_buf(),
            user_dir,
            state: Mutex::new(None),
        }
    }

    /// The section this cache was made with.
    pub fn config(&self) -> &InstructionsConfig {
        &self.config
    }

    /// The instructions as they are now: the cached ones unless a known file (or a
    /// candidate name at the root or in the user's directory) changed, or the last walk is
    /// older than [`REWALK`].
    pub fn get(&self) -> Arc<Instructions> {
        if !self.config.enabled {
            return Arc::new(Instructions::default());
        }
        let mut state = self.state.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(c) = state.as_ref()
            && c.walked.elapsed() < REWALK
            && c.stamps.iter().all(|(p, s)| stamp(p) == *s)
        {
            return c.found.clone();
        }
        let names: Vec<&str> = self.config.names.iter().map(String::as_str).collect();
        let found = Arc::new(Instructions::discover(
            &self.root,
            self.user_dir.as_deref(),
            &names,
        ));
        let stamps = self.stamps(&found, &names);
        *state = Some(Cached {
            walked: Instant::now(),
            found: found.clone(),
            stamps,
        });
        found
    }

    /// What tells a change: every candidate name at the root and in the user's directory
    /// (present or not), every nested file found, and every included one.
    fn stamps(&self, found: &Instructions, names: &[&str]) -> Vec<(PathBuf, Stamp)> {
        let mut paths: Vec<PathBuf> = names.iter().map(|n| self.root.join(n)).collect();
        if let Some(dir) = &self.user_dir {
            paths.extend(names.iter().map(|n| dir.join(n)));
        }
        paths.extend(
            found
                .files
                .iter()
                .filter(|f| matches!(f.scope, Scope::Dir(_)))
                .map(|f| self.root.join(&f.path)),
        );
        paths.extend(
            found
                .files
                .iter()
                .flat_map(|f| &f.included)
                .map(|i| i.file.clone()),
        );
        paths
            .into_iter()
            .map(|p| {
                let s = stamp(&p);
                (p, s)
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_changed_or_new_root_file_is_seen_at_once_and_a_disabled_section_reads_nothing() {
        let repo = tempfile::tempdir().expect("test");
        let r = repo.path();
        let cache = InstructionsCache::new(r, InstructionsConfig::default(), None);
        assert!(cache.get().files.is_empty());
        // A root file created after the first read: seen without waiting for a walk.
        std::fs::write(r.join("CLAUDE.md"), "one\n").expect("test");
        assert_eq!(cache.get().files[0].text, "one\n");
        // An AGENTS.md beside it wins, at once.
        std::fs::write(r.join("AGENTS.md"), "two, longer\n").expect("test");
        let now = cache.get();
        assert_eq!(now.files.len(), 1);
        assert_eq!(now.files[0].text, "two, longer\n");
        // Nothing changed: the same read.
        assert!(Arc::ptr_eq(&now, &cache.get()));

        let off = InstructionsCache::new(
            r,
            InstructionsConfig {
                enabled: false,
                ..InstructionsConfig::default()
            },
            None,
        );
        assert!(off.get().files.is_empty());
        assert_eq!(InstructionsConfig::default().budget(Some(8000)), 8000);
        assert_eq!(
            InstructionsConfig::default().budget(None),
            DEFAULT_MAX_CHARS
        );
    }
}
