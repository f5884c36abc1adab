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
//!
//! With a git remote (`[repository] remote`, team scale) the run's branch and its node
//! branches are pushed whenever they move ([`RunSpace::publish`]), and a process resuming a
//! run another clone wrote (a worker taking over a dead worker's run) makes its worktree at
//! the branch's tip on the remote ([`trellis_tools::worktree::remote`]).

use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use trellis_protocol::RunId;
use trellis_store::Store;
use trellis_tools::git::Git;
use trellis_tools::worktree::RunWorktree;
use trellis_tools::worktree::remote::Remote;

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
    /// The git remote the run's branches travel through (`[repository] remote`).
    remote: Option<Remote>,
    made: Mutex<Option<RunWorktree>>,
    /// The run branch's tip on the remote as this process last fetched or pushed it.
    published: Mutex<Option<String>>,
}

impl RunSpace {
    /// A run whose worktree is created on first need (`fork`: where it starts).
    pub(crate) fn lazy(
        repo: PathBuf,
        run: RunId,
        store: Arc<Store>,
        fork: Option<ForkPoint>,
        remote: Option<Remote>,
    ) -> Self {
        Self {
            repo,
            run,
            store,
            fork,
            remote,
            made: Mutex::new(None),
            published: Mutex::new(None),
        }
    }

    /// A run whose worktree exists (its change set recorded).
    pub(crate) fn made(repo: PathBuf, store: Arc<Store>, worktree: RunWorktree) -> Self {
        Self {
            repo,
            run: worktree.run.clone(),
            store,
            fork: None,
            remote: None,
            made: Mutex::new(Some(worktree)),
            published: Mutex::new(None),
        }
    }

    /// Pushes the run's branch and node branches to the remote, if one is configured and
    /// the run has a worktree (blocking: runs git). Refused when another process moved the
    /// remote branch since this one last fetched or pushed it (it took the run over).
    pub fn publish(&self) -> Result<()> {
        let (Some(remote), Some(wt)) = (&self.remote, self.get()) else {
            return Ok(());
        };
        let mut published = self.published.lock().unwrap_or_else(|p| p.into_inner());
        let tip = remote.publish(&Git::new(&wt.repo), &self.run, published.as_deref())?;
        *published = Some(tip);
        Ok(())
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
            // Written in another clone: its branch comes from the remote.
            Some(rec) if self.remote.is_some() => self.adopt(&rec.base_commit)?,
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
                if let Some(remote) = &self.remote {
                    let tip = remote.publish(&Git::new(&self.repo), &self.run, None)?;
                    *self.published.lock().unwrap_or_else(|p| p.into_inner()) = Some(tip);
                }
                self.store.put_change_set(wt.record(now_ms()))?;
                wt
            }
        };
        *slot = Some(wt.clone());
        Ok(wt)
    }

    /// The run's worktree here at its branch's tip on the remote (the work of the clone that
    /// ran it before).
    fn adopt(&self, base: &str) -> Result<RunWorktree> {
        let remote = self.remote.as_ref().ok_or_else(|| {
            crate::Error::Resume("a run's branch is adopted only through a remote".into())
        })?;
        let git = Git::new(&self.repo);
        let tip = remote.fetch(&git, &self.run)?.ok_or_else(|| {
            crate::Error::Resume(format!(
                "run {} has a change set but its branch {} is not on the remote `{}` \
                 ([repository] remote); the run cannot continue here",
                self.run,
                self.branch(),
                remote.url
            ))
        })?;
        let wt = RunWorktree::adopt(&self.repo, &self.run, base, &tip)?;
        *self.published.lock().unwrap_or_else(|p| p.into_inner()) = Some(tip);
        Ok(wt)
    }

    fn branch_exists(&self) -> Result<bool> {
        let git = Git::new(&self.repo);
        Ok(git
            .resolve(&format!("refs/heads/{}", self.branch()))?
            .is_some())
    }
}
