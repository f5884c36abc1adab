//! The workspace walk: `.gitignore`-aware, with default and configured exclusions, yielding
//! every candidate file with its size and modification time.

use std::path::Path;
use std::sync::Mutex;

use globset::{Glob, GlobSet, GlobSetBuilder};

use crate::config::{DEFAULT_EXCLUDES, IndexConfig};
use crate::error::{Error, Result};

/// A file found by the walk.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ScannedFile {
    /// Path relative to the root, `/`-separated.
    pub path: String,
    /// Size in bytes.
    pub size: u64,
    /// Modification time, nanoseconds since the epoch.
    pub mtime_ns: i64,
}

/// Compiled exclusion rules.
#[derive(Clone, Debug)]
pub struct Excludes {
    set: GlobSet,
    max_file_bytes: u64,
}

impl Excludes {
    /// Compiles the default exclusions plus `config.exclude`.
    pub fn new(config: &IndexConfig) -> Result<Self> {
        let mut b = GlobSetBuilder::new();
        for g in DEFAULT_EXCLUDES
            .iter()
            .copied()
            .chain(config.exclude.iter().map(String::as_str))
        {
            let glob = Glob::new(g).map_err(|e| Error::Glob {
                glob: g.to_string(),
                message: e.to_string(),
            })?;
            b.add(glob);
            // `dir/**` should also exclude `dir` when matched against a relative path at top.
            if let Some(stripped) = g.strip_prefix("**/")
                && let Ok(top) = Glob::new(stripped)
            {
                b.add(top);
            }
        }
        let set = b.build().map_err(|e| Error::Glob {
            glob: String::new(),
            message: e.to_string(),
        })?;
        Ok(Excludes {
            set,
            max_file_bytes: config.max_file_bytes,
        })
    }

    /// Whether the relative path is excluded.
    pub fn is_excluded(&self, rel: &str) -> bool {
        self.set.is_match(rel)
    }

    /// The size limit.
    pub fn max_file_bytes(&self) -> u64 {
        self.max_file_bytes
    }
}

/// Walks `root` in parallel and returns the indexable files, sorted by path.
pub fn scan(root: &Path, excludes: &Excludes) -> Result<Vec<ScannedFile>> {
    let found = Mutex::new(Vec::new());
    let walker = ignore::WalkBuilder::new(root)
        .hidden(false)
        .git_ignore(true)
        .git_global(false)
        .git_exclude(true)
        .require_git(false)
        .parents(false)
        .follow_links(false)
        .threads(2)
        .build_parallel();
    walker.run(|| {
        let found = &found;
        Box::new(move |entry| {
            let Ok(entry) = entry else {
                return ignore::WalkState::Continue;
            };
            let Ok(rel) = entry.path().strip_prefix(root) else {
                return ignore::WalkState::Continue;
            };
            let Some(rel) = rel.to_str() else {
                return ignore::WalkState::Continue;
            };
            if rel.is_empty() {
                return ignore::WalkState::Continue;
            }
            let rel = rel.replace('\\', "/");
            let is_dir = entry.file_type().is_some_and(|t| t.is_dir());
            if is_dir {
                let probe = format!("{rel}/x");
                if excludes.is_excluded(&rel) || excludes.is_excluded(&probe) {
                    return ignore::WalkState::Skip;
                }
                return ignore::WalkState::Continue;
            }
            if !entry.file_type().is_some_and(|t| t.is_file()) || excludes.is_excluded(&rel) {
                return ignore::WalkState::Continue;
            }
            if let Ok(md) = entry.metadata() {
                if md.len() > excludes.max_file_bytes() {
                    return ignore::WalkState::Continue;
                }
                let mtime_ns = md
                    .modified()
                    .ok()
                    .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
                    .map_or(0, |d| d.as_nanos() as i64);
                if let Ok(mut v) = found.lock() {
                    v.push(ScannedFile {
                        path: rel,
                        size: md.len(),
                        mtime_ns,
                    });
                }
            }
            ignore::WalkState::Continue
        })
    });
    let mut files = found.into_inner().unwrap_or_default();
    files.sort_by(|a, b| a.path.cmp(&b.path));
    Ok(files)
}

/// Stats one relative path the way [`scan`] would; `None` when it is gone, excluded or too big.
pub fn stat(root: &Path, rel: &str, excludes: &Excludes) -> Option<ScannedFile> {
    if excludes.is_excluded(rel) {
        return None;
    }
    let md = std::fs::metadata(root.join(rel)).ok()?;
    if !md.is_file() || md.len() > excludes.max_file_bytes() {
        return None;
    }
    let mtime_ns = md
        .modified()
        .ok()
        .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
        .map_or(0, |d| d.as_nanos() as i64);
    Some(ScannedFile {
        path: rel.to_string(),
        size: md.len(),
        mtime_ns,
    })
}
