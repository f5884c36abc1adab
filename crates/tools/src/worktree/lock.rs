//! The per-repository lock serialising git's worktree bookkeeping and branch moves.
//!
//! `git worktree add` run concurrently in one repository corrupts git's bookkeeping
//! (`fatal: failed to read .git/worktrees/<id>/commondir`), and two merges moving the same
//! branch must not interleave. Every worktree add and remove of [`crate::worktree`] (run
//! worktrees and node worktrees alike), every branch it creates, deletes or moves, and every
//! update of a run's node journal happens while holding [`RepoLock`]: an exclusive
//! advisory lock (`flock`) on `<repo>/.trellis/worktrees.lock`. Being a file lock, it
//! serialises threads of one process (each [`RepoLock::acquire`] opens the file anew, and
//! such locks belong to the open file) and separate processes working on the same
//! repository alike; the kernel drops it when its holder dies, so a crash never leaves it
//! held. It is not re-entrant: code holding it passes the guard down instead of acquiring
//! it again.

use std::fs::File;
use std::path::Path;

use super::trellis_dir;
use crate::error::{Error, Result};

/// Held while git's worktree bookkeeping or Trellis's branches of one repository change;
/// released when dropped.
#[derive(Debug)]
pub struct RepoLock {
    _file: File,
}

impl RepoLock {
    /// Waits for and takes the lock of `repo` (its top-level directory).
    pub fn acquire(repo: &Path) -> Result<Self> {
        let path = trellis_dir(repo)?.join("worktrees.lock");
        let file = std::fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&path)
            .map_err(Error::io("cannot open", &path))?;
        file.lock().map_err(Error::io("cannot lock", &path))?;
        Ok(Self { _file: file })
    }
}
