//! Snapshots of a run's worktree and exact rollback to them, for pruning a running agent.
//!
//! [`RunWorktree::snapshot`] records the branch tip and a git *tree* of every tracked and
//! untracked (not ignored) file of the worktree, without touching its index or files: the
//! files are added to a private index (`.trellis/tmp/snapshot-index-<run>`, kept between
//! snapshots as a stat cache so unchanged files are not re-hashed) and `git write-tree`
//! turns that into a tree object. Attributes are switched off for that `git add`
//! (`GIT_ATTR_SOURCE` = the empty tree, no global attributes file), so no end-of-line
//! conversion or clean filter runs and the blobs hold the files' exact bytes;
//! `core.fileMode` is forced on, so executable bits are recorded.
//!
//! [`RunWorktree::restore`] moves the branch back to the snapshot's commit when commits
//! were added after it (only forward: a branch that no longer contains that commit is
//! refused), captures the current state the same way, and rewrites every path where the
//! two trees differ from the snapshot's blobs: contents, modes and symlinks; files
//! created since are deleted (with directories that become empty). Ignored files are never
//! looked at. Empty directories are not part of a snapshot (git does not record them).
//!
//! Snapshot trees are unreachable git objects: `git gc` keeps them for its prune grace
//! period (two weeks by default), far longer than an agent runs.

use std::ffi::OsStr;
use std::io::Write;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::sync::atomic::{AtomicU64, Ordering};

use serde::{Deserialize, Serialize};

use super::{RunWorktree, ensure_on_branch, trellis_dir};
use crate::error::{Error, Result};
use crate::git::Git;

/// The state of a run's worktree at one moment (see [`RunWorktree::snapshot`]).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct WorktreeSnapshot {
    /// The run branch's commit at that moment.
    pub head: String,
    /// A git tree of every tracked and untracked (not ignored) file of the worktree, with
    /// the files' exact bytes, executable bits and symlinks.
    pub tree: String,
}

/// One path where two trees differ (`git diff-tree --raw`).
struct Change {
    /// The mode in the snapshot (0: the path did not exist).
    mode: u32,
    /// The blob in the snapshot.
    oid: String,
    /// The mode now (0: the path does not exist).
    now: u32,
    /// The path, relative to the worktree.
    path: Vec<u8>,
}

const SYMLINK: u32 = 0o120000;
const GITLINK: u32 = 0o160000;
const EXECUTABLE: u32 = 0o100755;

impl RunWorktree {
    /// Records the worktree's state: the branch tip and every tracked and untracked (not
    /// ignored) file, byte for byte with its executable bit. Neither the worktree's index
    /// nor its files are touched (only git objects and Trellis's private index are
    /// written).
    pub fn snapshot(&self) -> Result<WorktreeSnapshot> {
        let head = self.head()?;
        let tree = self.capture()?;
        Ok(WorktreeSnapshot { head, tree })
    }

    /// Rolls the worktree back to `snap`: the branch returns to the snapshot's commit if
    /// commits were added after it, and every path that differs from the snapshot — or,
    /// with `only`, every differing path equal to or under one of those (for agents that
    /// share the worktree with siblings) — gets the snapshot's contents and executable bit
    /// back; files created since are deleted. Returns the restored paths, sorted.
    ///
    /// Refuses, changing nothing, when the branch no longer contains the snapshot's commit
    /// or the worktree is not on the run's branch. Stop the agent first: files it writes
    /// while this runs are not rolled back.
    pub fn restore(&self, snap: &WorktreeSnapshot, only: Option<&[String]>) -> Result<Vec<String>> {
        let git = Git::new(&self.path);
        ensure_on_branch(&git, &self.branch, "roll back")?;
        let head = self.head()?;
        let moved = head != snap.head;
        if moved
            && git
                .try_run(&["merge-base", "--is-ancestor", &snap.head, &head])?
                .is_err()
        {
            return Err(Error::Failed(format!(
                "cannot roll back the worktree {}: branch {} is at {head}, which does not \
                 contain the snapshot's commit {} (the branch was reset or rewritten since); \
                 inspect it with `git -C {} log {}` and restore by hand",
                self.path.display(),
                self.branch,
                snap.head,
                self.path.display(),
                self.branch
            )));
        }
        let current = self.capture()?;
        let raw = git.run(&[
            "diff-tree",
            "-r",
            "-z",
            "--no-renames",
            &snap.tree,
            &current,
        ])?;
        let only: Option<Vec<&[u8]>> = only.map(|paths| {
            paths
                .iter()
                .map(|p| {
                    let p = p.strip_prefix("./").unwrap_or(p);
                    p.trim_end_matches('/').as_bytes()
                })
                .collect()
        });
        let changes: Vec<Change> = parse_raw(&raw)?
            .into_iter()
            .filter(|c| only.as_ref().is_none_or(|o| selected(&c.path, o)))
            .collect();
        if moved {
            let reference = format!("refs/heads/{}", self.branch);
            let message = format!(
                "trellis: roll back run {} to {}",
                self.run.short(),
                snap.head
            );
            git.run(&["update-ref", "-m", &message, &reference, &snap.head, &head])?;
        }
        // Deletions first: a file created since may sit where the snapshot has a directory.
        for c in changes.iter().filter(|c| c.mode == 0) {
            self.delete(c)?;
        }
        for c in changes.iter().filter(|c| c.mode != 0) {
            self.write(&git, c)?;
        }
        let restored: Vec<String> = changes
            .iter()
            .map(|c| String::from_utf8_lossy(&c.path).into_owned())
            .collect();
        self.reset_index(&git, &snap.head, &changes, moved && only.is_none())?;
        Ok(restored)
    }

    /// Trellis's private index of the worktree's snapshots (a stat cache).
    pub(super) fn snapshot_index(&self) -> Result<std::path::PathBuf> {
        Ok(trellis_dir(&self.repo)?
            .join("tmp")
            .join(format!("snapshot-index-{}", self.run)))
    }

    /// The tree of the worktree's files as they are now (see the module docs).
    fn capture(&self) -> Result<String> {
        static NEXT: AtomicU64 = AtomicU64::new(0);
        let scratch = trellis_dir(&self.repo)?.join("tmp");
        std::fs::create_dir_all(&scratch).map_err(Error::io("cannot create", &scratch))?;
        let cache = self.snapshot_index()?;
        let index = scratch.join(format!(
            "snapshot-index-{}-{}-{}",
            self.run,
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        ));
        match std::fs::copy(&cache, &index) {
            Ok(_) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(Error::io("cannot copy the snapshot index", &cache)(e)),
        }
        let result = (|| {
            let plain = Git::new(&self.path);
            let empty_tree = plain.text(&["hash-object", "-t", "tree", "/dev/null"])?;
            let git = plain
                .with_index(&index)
                .with_env("GIT_ATTR_SOURCE", &empty_tree);
            git.run(&[
                "-c",
                "core.fileMode=true",
                "-c",
                "core.symlinks=true",
                "-c",
                "core.attributesFile=/dev/null",
                "add",
                "-A",
                "--",
                ".",
            ])?;
            git.text(&["write-tree"])
        })();
        match &result {
            // The next capture starts from this index: its stat data spares re-hashing.
            Ok(_) => std::fs::rename(&index, &cache).map_err(Error::io("cannot keep", &cache))?,
            Err(_) => {
                let _ = std::fs::remove_file(&index);
            }
        }
        result
    }

    /// Deletes a file created since the snapshot, and directories left empty by that.
    fn delete(&self, c: &Change) -> Result<()> {
        let full = self.path.join(OsStr::from_bytes(&c.path));
        if c.now == GITLINK {
            return Err(Error::Failed(format!(
                "cannot roll back {}: it is a nested git repository created after the \
                 snapshot; remove it by hand",
                full.display()
            )));
        }
        match std::fs::remove_file(&full) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(Error::io("cannot remove", &full)(e)),
        }
        let mut dir = full.parent();
        while let Some(d) = dir {
            if d == self.path || std::fs::remove_dir(d).is_err() {
                break;
            }
            dir = d.parent();
        }
        Ok(())
    }

    /// Gives a path the snapshot's contents and mode.
    fn write(&self, git: &Git, c: &Change) -> Result<()> {
        let full = self.path.join(OsStr::from_bytes(&c.path));
        if c.mode == GITLINK {
            return Err(Error::Failed(format!(
                "cannot roll back {}: it is a nested git repository (submodule); restore it by hand",
                full.display()
            )));
        }
        let bytes = git.blob(&c.oid)?;
        let existing = match std::fs::symlink_metadata(&full) {
            Ok(m) => Some(m),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
            Err(e) => return Err(Error::io("cannot inspect", &full)(e)),
        };
        let regular = match &existing {
            Some(m) if m.is_dir() => {
                return Err(Error::Failed(format!(
                    "cannot roll back {}: a directory is there now (holding files git \
                     ignores); move it away and roll back again",
                    full.display()
                )));
            }
            Some(m) if m.file_type().is_symlink() || c.mode == SYMLINK => {
                std::fs::remove_file(&full).map_err(Error::io("cannot remove", &full))?;
                None
            }
            Some(m) => Some(m.permissions().mode()),
            None => None,
        };
        if let Some(dir) = full.parent() {
            std::fs::create_dir_all(dir).map_err(Error::io("cannot create directory", dir))?;
        }
        if c.mode == SYMLINK {
            return std::os::unix::fs::symlink(OsStr::from_bytes(&bytes), &full)
                .map_err(Error::io("cannot create the symlink", &full));
        }
        let executable = c.mode == EXECUTABLE;
        let written = match regular {
            // In place, so the file keeps its other permission bits (as git checkout does).
            Some(p) => std::fs::OpenOptions::new()
                .write(true)
                .truncate(true)
                .open(&full)
                .and_then(|mut f| f.write_all(&bytes))
                .and_then(|()| {
                    let p = if executable {
                        p | ((p & 0o444) >> 2)
                    } else {
                        p & !0o111
                    };
                    std::fs::set_permissions(&full, std::fs::Permissions::from_mode(p))
                }),
            // New files get git's modes, less the umask.
            None => std::fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .mode(if executable { 0o777 } else { 0o666 })
                .open(&full)
                .and_then(|mut f| f.write_all(&bytes)),
        };
        written.map_err(Error::io("cannot restore", &full))
    }

    /// Points the worktree's index back at the snapshot's commit for the restored paths
    /// (all of it when `all`), so `git status` shows what it showed then.
    fn reset_index(&self, git: &Git, head: &str, changes: &[Change], all: bool) -> Result<()> {
        if all {
            git.run(&["reset", "--quiet", head])?;
            return Ok(());
        }
        if changes.is_empty() {
            return Ok(());
        }
        let list = trellis_dir(&self.repo)?.join("tmp").join(format!(
            "restore-paths-{}-{}",
            self.run,
            std::process::id()
        ));
        let mut bytes = Vec::new();
        for c in changes {
            bytes.extend_from_slice(&c.path);
            bytes.push(0);
        }
        std::fs::write(&list, bytes).map_err(Error::io("cannot write", &list))?;
        let from = format!("--pathspec-from-file={}", list.display());
        let result = git.run(&[
            "--literal-pathspecs",
            "reset",
            "--quiet",
            head,
            from.as_str(),
            "--pathspec-file-nul",
        ]);
        let _ = std::fs::remove_file(&list);
        result.map(drop)
    }
}

/// Whether `path` is one of `only` or inside one of them.
fn selected(path: &[u8], only: &[&[u8]]) -> bool {
    only.iter().any(|o| {
        path == *o
            || (path.len() > o.len() && path.starts_with(o) && path.get(o.len()) == Some(&b'/'))
    })
}

/// Parses `git diff-tree -r -z` output: `:MODE MODE OID OID STATUS\0PATH\0` per path.
fn parse_raw(raw: &[u8]) -> Result<Vec<Change>> {
    let bad = || Error::Failed("cannot parse the output of git diff-tree".into());
    let mut out = Vec::new();
    let mut fields = raw.split(|b| *b == 0);
    while let Some(meta) = fields.next() {
        if meta.is_empty() {
            continue;
        }
        let meta = std::str::from_utf8(meta).map_err(|_| bad())?;
        let mut parts = meta.trim_start_matches(':').split(' ');
        let mut mode = || {
            parts
                .next()
                .and_then(|m| u32::from_str_radix(m, 8).ok())
                .ok_or_else(bad)
        };
        let (old, new) = (mode()?, mode()?);
        let oid = parts.next().ok_or_else(bad)?.to_owned();
        let path = fields.next().ok_or_else(bad)?.to_vec();
        out.push(Change {
            mode: old,
            oid,
            now: new,
            path,
        });
    }
    Ok(out)
}
