//! A run's worktree, created when the run first needs it.
//!
//! A run does no repository work until one of its agents can change files: planning,
//! retrieval and agents whose tools only read files (a discussion's analysis) read the
//! repository's own working tree, and no git process starts. The first activation that can
//! write (a write tool or the shell), looks at the run's changes (git tools, stage tools)
//! or runs the tests creates the run's worktree and branch ([`RunSpace::ensure`]): the
//! user's working state at that moment becomes the run's base (a fork starts at its
//! checkpoint's commit instead), and the change set is recorded. A run that never wrote has
//! no change set: its review shows nothing to apply.

use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use trellis_protocol::RunId;
use trellis_store::Store;
use trellis_tools::worktree::RunWorktree;

use crate::{Result, now_ms};

/// Where a fork's worktree starts: its checkpoint's commit, and the base its change set
/// is reviewed against (the forked run's).
#[derive(Clone, Debug)]
pub(crate) struct ForkPoint {
    pub at: String,
    pub base: String,
}

/// A run's worktree: created, or where it will be.
pub struct RunSpace {
    repo: PathBuf,
    run: RunId,
    store: Arc<Store>,
    fork: Option<ForkPoint>,
    made: Mutex<Option<RunWorktree>>,
}

impl RunSpace {
    /// A run whose worktree is created on first need (`fork`: where it starts).
    pub(crate) fn lazy(
        repo: PathBuf,
        run: RunId,
        store: Arc<Store>,
        fork: Option<ForkPoint>,
    ) -> Self {
        Self {
            repo,
            run,
            store,
            fork,
            made: Mutex::new(None),
        }
    }

    /// A run whose worktree exists (its change set recorded).
    pub(crate) fn made(repo: PathBuf, store: Arc<Store>, worktree: RunWorktree) -> Self {
        Self {
            repo,
            run: worktree.run.clone(),
            store,
            fork: None,
            made: Mutex::new(Some(worktree)),
        }
    }

    fn slot(&self) -> std::sync::MutexGuard<'_, Option<RunWorktree>> {
        self.made.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The run's branch (`trellis/run-<run>`), whether or not it exists yet.
    pub fn branch(&self) -> String {
        RunWorktree::branch_for(&self.run)
    }

    /// Where the run's worktree is, or will be when created.
    pub fn path(&self) -> PathBuf {
        match &*self.slot() {
            Some(wt) => wt.path.clone(),
            None => RunWorktree::path_for(&self.repo, &self.run),
        }
    }

    /// The worktree, if created.
    pub fn get(&self) -> Option<RunWorktree> {
        self.slot().clone()
    }

    /// Where the run's readers read: its worktree once created, the repository's working
    /// tree before.
    pub fn read_root(&self) -> PathBuf {
        match &*self.slot() {
            Some(wt) => wt.path.clone(),
            None => self.repo.clone(),
        }
    }

    /// The worktree, created now if it is not yet (blocking: runs git), its change set
    /// recorded. A branch of the run left by a crash before its change set was recorded
    /// (nobody saw it) is replaced.
    pub fn ensure(&self) -> Result<RunWorktree> {
        let mut slot = self.slot();
        if let Some(wt) = &*slot {
            return Ok(wt.clone());
        }
        let wt = match self.store.change_set_of(&self.run)? {
            // Recorded meanwhile by another handle of the run.
            Some(rec) => RunWorktree::from_record(&rec),
            None => {
                let leftover = RunWorktree {
                    repo: self.repo.clone(),
                    run: self.run.clone(),
                    branch: self.branch(),
                    base: String::new(),
                    path: RunWorktree::path_for(&self.repo, &self.run),
                };
                if leftover.path.exists() || self.branch_exists()? {
                    leftover.prune()?;
                }
                let wt = match &self.fork {
                    Some(f) => RunWorktree {
                        base: f.base.clone(),
                        ..RunWorktree::create_at(&self.repo, &self.run, &f.at)?
                    },
                    None => RunWorktree::create(&self.repo, &self.run)?,
                };
                self.store.put_change_set(wt.record(now_ms()))?;
                wt
            }
        };
        *slot = Some(wt.clone());
        Ok(wt)
    }

    fn branch_exists(&self) -> Result<bool> {
        let git = trellis_tools::git::Git::new(&self.repo);
        Ok(git
            .resolve(&format!("refs/heads/{}", self.branch()))?
            .is_some())
    }
}
