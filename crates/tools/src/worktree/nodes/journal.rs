//! The node journal of a run (`.trellis/nodes/<run>/journal.json`) and node slugs.
//!
//! The journal records each node's worktree and every merge it produced (the target, the
//! target's commit before and after), so a prune — in this process or another, before or
//! after a crash — knows exactly what to undo; and each merge left in conflict for a merge
//! agent. It is read and rewritten (atomically: a temporary file renamed over it) only
//! while holding the repository's [`RepoLock`](crate::worktree::RepoLock).

use std::collections::BTreeMap;
use std::path::Path;

use serde::{Deserialize, Serialize};

use super::{MergeRecord, NodeWorktree, PendingMerge};
use crate::error::{Error, Result};
use crate::fsutil;

/// What the journal holds.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub(super) struct Journal {
    /// The run's node worktrees, by node id.
    #[serde(default)]
    pub nodes: BTreeMap<String, NodeEntry>,
    /// Merges waiting for a merge agent, by node id.
    #[serde(default)]
    pub pending: BTreeMap<String, PendingMerge>,
}

/// One node's worktree and merges.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub(super) struct NodeEntry {
    /// The worktree.
    pub worktree: NodeWorktree,
    /// The merges of the node's branch, oldest first.
    #[serde(default)]
    pub merges: Vec<MergeRecord>,
}

impl Journal {
    /// Reads the journal at `path`; empty when there is none.
    pub fn load(path: &Path) -> Result<Self> {
        match std::fs::read(path) {
            Ok(bytes) => serde_json::from_slice(&bytes).map_err(|source| Error::Json {
                what: format!("read the node journal {}", path.display()),
                source,
            }),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Self::default()),
            Err(e) => Err(Error::io("cannot read", path)(e)),
        }
    }

    /// Writes the journal to `path` atomically.
    pub fn save(&self, path: &Path) -> Result<()> {
        let bytes = serde_json::to_vec_pretty(self).map_err(|source| Error::Json {
            what: "write the node journal".into(),
            source,
        })?;
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir).map_err(Error::io("cannot create", dir))?;
        }
        fsutil::write_atomic(path, &bytes, None, false)
    }

    /// The entry of `node`, or an error naming it.
    pub fn entry(&self, node: &str) -> Result<&NodeEntry> {
        self.nodes
            .get(node)
            .ok_or_else(|| Error::Failed(format!("node `{node}` has no worktree in this run")))
    }
}

/// Longest sanitised part of a slug (the hash follows it).
const SLUG_TEXT: usize = 40;

/// A name for `node` usable as one path component and one ref component: its letters,
/// digits, `_` and `-` (lowercased; every other run of characters becomes one `-`), cut to
/// 40 characters, then `-` and 10 hex digits of a hash of the whole id. Ids that sanitise
/// alike (`tickets/T1`, `tickets:T1`, `tickets-t1`) still get distinct slugs; the result
/// never contains `/`, `.`, `:` or anything git's ref rules forbid.
pub fn slug(node: &str) -> String {
    let mut text = String::new();
    for c in node.chars() {
        if c.is_ascii_alphanumeric() || c == '_' {
            text.push(c.to_ascii_lowercase());
        } else if !text.ends_with('-') {
            text.push('-');
        }
    }
    let text: String = text.trim_matches('-').chars().take(SLUG_TEXT).collect();
    let text = text.trim_end_matches('-');
    let text = if text.is_empty() { "node" } else { text };
    format!("{text}-{:010x}", fnv1a(node.as_bytes()) >> 24)
}

/// FNV-1a (64 bits): stable across builds and platforms, unlike std's hasher.
fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(*b)).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

#[cfg(test)]
mod tests {
    use super::slug;

    #[test]
    fn slugs_are_safe_and_distinct() {
        let ids = [
            "tickets/T1",
            "tickets:T1",
            "tickets-t1",
            "stage:collect",
            "..",
            "",
            "a.lock",
        ];
        let slugs: Vec<String> = ids.iter().map(|i| slug(i)).collect();
        for s in &slugs {
            assert!(
                s.chars()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '_'),
                "{s}"
            );
            assert!(!s.starts_with('-'), "{s}");
        }
        let mut unique = slugs.clone();
        unique.sort();
        unique.dedup();
        assert_eq!(unique.len(), slugs.len(), "{slugs:?}");
        assert!(slugs[0].starts_with("tickets-t1-"), "{}", slugs[0]);
        assert_eq!(slug("tickets/T1"), slugs[0], "stable");
    }
}
