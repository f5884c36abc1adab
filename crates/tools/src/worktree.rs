//! Run worktrees: each run edits its own git worktree on its own branch.
//!
//! [`RunWorktree::create`] snapshots the user's working state — HEAD plus staged,
//! unstaged and untracked (not ignored) files — into a commit without touching the user's
//! working tree, index or config: it copies the index to a scratch file under `.trellis/`,
//! runs `git add -A` against that copy (`GIT_INDEX_FILE`), writes the tree and commits it
//! with HEAD as parent. That commit is the run's *base*; the branch `trellis/run-<id>`
//! starts there, checked out in `<repo>/.trellis/worktrees/<id>`. The only things written
//! inside `.git` are objects, the branch ref and git's own worktree bookkeeping
//! (`.git/worktrees/<id>`). `.trellis/` carries a `.gitignore` of `*`, so neither the store
//! nor the worktrees ever show up in the user's `git status`.
//!
//! [`nodes`] gives each agent node of a run a worktree and branch of its own, created from
//! the run branch (or another node's branch), merged back into it, reverted when pruned
//! (pruning a running agent deletes its worktree; nothing else is rolled back in place).
//! Worktree adds and removes and branch moves in one repository are serialised by
//! [`RepoLock`] (see [`lock`]).

use std::ffi::OsStr;
use std::path::{Path, PathBuf};

use trellis_protocol::RunId;
use trellis_store::ChangeSetRecord;

use crate::error::{Error, Result};
use crate::git::Git;

pub mod lock;
pub mod nodes;
pub mod remote;

pub use lock::RepoLock;
pub use nodes::{NodeWorktree, NodeWorktrees};

/// Branch name prefix of run branches.
pub const BRANCH_PREFIX: &str = "trellis/run-";

/// The user repository's top-level directory containing `dir`.
pub fn repo_root(dir: &Path) -> Result<PathBuf> {
    let shown = || dir.canonicalize().unwrap_or_else(|_| dir.to_owned());
    let top = match Git::new(dir).text(&["rev-parse", "--show-toplevel"]) {
        Ok(top) => top,
        Err(Error::Git { message, .. }) if message.contains("not a git repository") => {
            return Err(Error::NotARepository(shown()));
        }
        Err(e) => return Err(e),
    };
    if top.is_empty() {
        return Err(Error::Failed(format!(
            "{} is not inside a git working tree (a bare repository, or inside `.git`?); \
             pass -C with a checkout of the repository",
            shown().display()
        )));
    }
    PathBuf::from(top)
        .canonicalize()
        .map_err(Error::io("cannot open", dir))
}

/// Creates `<repo>/.trellis/` with a `.gitignore` of `*` if missing, and returns it.
pub fn trellis_dir(repo: &Path) -> Result<PathBuf> {
    let dir = repo.join(".trellis");
    std::fs::create_dir_all(&dir).map_err(Error::io("cannot create", &dir))?;
    let ignore = dir.join(".gitignore");
    if !ignore.exists() {
        std::fs::write(
            &ignore,
            "# Trellis state: never part of the repository.\n*\n",
        )
        .map_err(Error::io("cannot write", &ignore))?;
    }
    Ok(dir)
}

/// A run's worktree and branch.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RunWorktree {
    /// The user's repository (top-level directory).
    pub repo: PathBuf,
    /// The run.
    pub run: RunId,
    /// The run's branch.
    pub branch: String,
    /// The base commit (the user's state when the run started).
    pub base: String,
    /// The worktree directory.
    pub path: PathBuf,
}

impl RunWorktree {
    /// Snapshots the user's working state and creates the run's branch and worktree.
    pub fn create(repo: &Path, run: &RunId) -> Result<Self> {
        let repo = repo_root(repo)?;
        let state = trellis_dir(&repo)?;
        let git = Git::new(&repo);
        let branch = Self::branch_for(run);
        if git.resolve(&format!("refs/heads/{branch}"))?.is_some() {
            return Err(Error::Failed(format!("branch {branch} already exists")));
        }
        let base = snapshot(&git, &state, run)?;
        Self::create_at(&repo, run, &base)
    }

    /// Creates the run's branch and worktree at `commit` (whose tree becomes the run's
    /// base): what a forked run starts from, the commit of its source's run branch at the
    /// checkpoint it forks.
    pub fn create_at(repo: &Path, run: &RunId, commit: &str) -> Result<Self> {
        let repo = repo_root(repo)?;
        trellis_dir(&repo)?;
        let git = Git::new(&repo);
        let branch = Self::branch_for(run);
        let base = git
            .resolve(commit)?
            .ok_or_else(|| Error::Failed(format!("no commit `{commit}` in {}", repo.display())))?;
        let path = Self::path_for(&repo, run);
        let lock = RepoLock::acquire(&repo)?;
        if git.resolve(&format!("refs/heads/{branch}"))?.is_some() {
            return Err(Error::Failed(format!("branch {branch} already exists")));
        }
        add_worktree(&lock, &git, Some(&branch), &path, &base)?;
        Ok(Self {
            repo,
            run: run.clone(),
            branch,
            base,
            path,
        })
    }

    /// Where run `run`'s worktree is (or is created) in the repository whose top-level
    /// directory is `repo`: `<repo>/.trellis/worktrees/<run>`.
    pub fn path_for(repo: &Path, run: &RunId) -> PathBuf {
        repo.join(".trellis").join("worktrees").join(run.as_str())
    }

    /// The run branch of `run`: `trellis/run-<run>`.
    pub fn branch_for(run: &RunId) -> String {
        format!("{BRANCH_PREFIX}{run}")
    }

    /// The run's worktree in the repository `repo` (top-level directory) at commit `tip` of
    /// its branch, its base `base`: created, or (left here earlier) reset to `tip` with
    /// everything not committed removed — a run continued from another clone's work
    /// ([`remote`]).
    pub fn adopt(repo: &Path, run: &RunId, base: &str, tip: &str) -> Result<Self> {
        trellis_dir(repo)?;
        let git = Git::new(repo);
        let wt = Self {
            repo: repo.to_owned(),
            run: run.clone(),
            branch: Self::branch_for(run),
            base: base.to_owned(),
            path: Self::path_for(repo, run),
        };
        let lock = RepoLock::acquire(repo)?;
        if wt.path.exists() {
            let here = Git::new(&wt.path);
            ensure_on_branch(&here, &wt.branch, "reset")?;
            here.run(&["reset", "--quiet", "--hard", tip])?;
            here.run(&["clean", "--quiet", "-fdx"])?;
        } else if git.resolve(&format!("refs/heads/{}", wt.branch))?.is_some() {
            git.run(&["branch", "--quiet", "--force", &wt.branch, tip])?;
            if let Some(dir) = wt.path.parent() {
                std::fs::create_dir_all(dir).map_err(Error::io("cannot create", dir))?;
            }
            git.run(&[
                OsStr::new("worktree"),
                OsStr::new("add"),
                OsStr::new("--quiet"),
                wt.path.as_os_str(),
                OsStr::new(&wt.branch),
            ])?;
        } else {
            add_worktree(&lock, &git, Some(&wt.branch), &wt.path, tip)?;
        }
        Ok(wt)
    }

    /// The worktree of a recorded change set.
    pub fn from_record(rec: &ChangeSetRecord) -> Self {
        let repo = PathBuf::from(&rec.repo);
        Self {
            path: rec
                .worktree
                .as_ref()
                .map(PathBuf::from)
                .unwrap_or_else(|| Self::path_for(&repo, &rec.run_id)),
            repo,
            run: rec.run_id.clone(),
            branch: rec.branch.clone(),
            base: rec.base_commit.clone(),
        }
    }

    /// A change-set record for the store (state `open`).
    pub fn record(&self, now_ms: i64) -> ChangeSetRecord {
        ChangeSetRecord {
            run_id: self.run.clone(),
            repo: self.repo.to_string_lossy().into_owned(),
            branch: self.branch.clone(),
            base_commit: self.base.clone(),
            worktree: Some(self.path.to_string_lossy().into_owned()),
            state: "open".into(),
            review: None,
            created_at: now_ms,
            updated_at: now_ms,
        }
    }

    /// Commits everything changed in the worktree on the run's branch, with a message
    /// naming the run and the stage. Returns the new commit, or `None` when nothing
    /// changed.
    pub fn commit(&self, stage: &str, summary: &str) -> Result<Option<String>> {
        let git = Git::new(&self.path);
        ensure_on_branch(&git, &self.branch, "commit")?;
        let message = format!(
            "trellis run {} stage {stage}: {summary}\n\nTrellis-Run: {}\nTrellis-Stage: {stage}\n",
            self.run.short(),
            self.run
        );
        commit_all(&git, &message)
    }

    /// The branch's tip commit.
    pub fn head(&self) -> Result<String> {
        Git::new(&self.repo)
            .resolve(&format!("refs/heads/{}", self.branch))?
            .ok_or_else(|| Error::Failed(format!("branch {} is gone", self.branch)))
    }

    /// Removes the worktree directory (the branch stays, so the change can still be
    /// reviewed). Succeeds if it is already gone.
    pub fn remove(&self) -> Result<()> {
        let git = Git::new(&self.repo);
        let lock = RepoLock::acquire(&self.repo)?;
        remove_worktree(&lock, &git, &self.path)?;
        git.run(&["worktree", "prune"])?;
        Ok(())
    }

    /// Removes the worktree and deletes the branch.
    pub fn prune(&self) -> Result<()> {
        self.remove()?;
        let lock = RepoLock::acquire(&self.repo)?;
        delete_branch(&lock, &Git::new(&self.repo), &self.branch)
    }
}

/// Adds a worktree at `path` checking out `start`: on a new branch `branch`, or detached
/// when `branch` is `None`.
pub(crate) fn add_worktree(
    _lock: &RepoLock,
    git: &Git,
    branch: Option<&str>,
    path: &Path,
    start: &str,
) -> Result<()> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).map_err(Error::io("cannot create", dir))?;
    }
    let mut args: Vec<&OsStr> = vec!["worktree".as_ref(), "add".as_ref(), "--quiet".as_ref()];
    match branch {
        Some(b) => args.extend([OsStr::new("-b"), OsStr::new(b)]),
        None => args.push(OsStr::new("--detach")),
    }
    args.extend([path.as_os_str(), OsStr::new(start)]);
    git.run(&args).map(drop)
}

/// Removes the worktree at `path` (with its uncommitted changes); nothing when it is gone.
pub(crate) fn remove_worktree(_lock: &RepoLock, git: &Git, path: &Path) -> Result<()> {
    if path.exists() {
        git.run(&[
            "worktree".as_ref(),
            "remove".as_ref(),
            "--force".as_ref(),
            "--force".as_ref(),
            path.as_os_str(),
        ])?;
    }
    Ok(())
}

/// Deletes `branch` if it exists.
pub(crate) fn delete_branch(_lock: &RepoLock, git: &Git, branch: &str) -> Result<()> {
    if git.resolve(&format!("refs/heads/{branch}"))?.is_some() {
        git.run(&["branch", "--quiet", "-D", branch])?;
    }
    Ok(())
}

/// Refuses unless the HEAD of the worktree `git` runs in is `branch`.
pub(crate) fn ensure_on_branch(git: &Git, branch: &str, what: &str) -> Result<()> {
    let head = git
        .text(&["symbolic-ref", "--quiet", "HEAD"])
        .unwrap_or_default();
    if head != format!("refs/heads/{branch}") {
        return Err(Error::Failed(format!(
            "the worktree {} is not on {branch} (HEAD is `{head}`); refusing to {what} elsewhere",
            git.dir().display(),
        )));
    }
    Ok(())
}

/// Commits everything changed in the worktree `git` runs in (`git add -A`) with
/// `message`; the new commit, or `None` when nothing changed.
pub(crate) fn commit_all(git: &Git, message: &str) -> Result<Option<String>> {
    git.run(&["add", "-A"])?;
    if git.try_run(&["diff", "--cached", "--quiet"])?.is_ok() {
        return Ok(None);
    }
    git.run(&["commit", "--quiet", "--no-verify", "-m", message])?;
    Ok(Some(git.text(&["rev-parse", "HEAD"])?))
}

/// Commits the user's working state (HEAD + index + working tree + untracked files) using
/// a scratch index; returns HEAD itself when nothing differs from it.
fn snapshot(git: &Git, state: &Path, run: &RunId) -> Result<String> {
    let scratch = state.join("tmp");
    std::fs::create_dir_all(&scratch).map_err(Error::io("cannot create", &scratch))?;
    let index = scratch.join(format!("index-{run}"));
    // Starting from a copy of the user's index keeps git's stat cache, so unchanged files
    // are not re-hashed. The user's index itself is only read.
    let user_index = git.text(&["rev-parse", "--path-format=absolute", "--git-path", "index"])?;
    match std::fs::copy(&user_index, &index) {
        Ok(_) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(Error::io("cannot copy the index", &user_index)(e)),
    }
    let result = (|| {
        let scratch_git = git.with_index(&index);
        scratch_git.run(&["add", "-A", "--", "."])?;
        let tree = scratch_git.text(&["write-tree"])?;
        let head = git.resolve("HEAD")?;
        if let Some(h) = &head
            && git.text(&["rev-parse", &format!("{h}^{{tree}}")])? == tree
        {
            return Ok(h.clone());
        }
        let message = format!(
            "trellis: working state at the start of run {}\n\nHEAD plus the uncommitted and \
             untracked changes of the working tree.\n\nTrellis-Run: {run}\n",
            run.short()
        );
        let mut args = vec!["commit-tree".to_owned(), tree, "-m".into(), message];
        if let Some(h) = head {
            args.push("-p".into());
            args.push(h);
        }
        git.text(&args)
    })();
    let _ = std::fs::remove_file(&index);
    result
}
