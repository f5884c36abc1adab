//! Node worktrees: every agent node of a run edits its own worktree on its own branch, and
//! its work reaches the run branch only through a merge.
//!
//! [`RunWorktree`](super::RunWorktree) owns the run branch `trellis/run-<run>`. This module
//! adds, per run, [`NodeWorktrees`]: for an agent node it creates a branch and worktree
//! from a parent branch (the run branch, or another node's branch — a stage's), commits the
//! node's work there, merges the node's branch into a target branch, and prunes a node:
//! its worktree and branch go, and every merge it made is undone.
//!
//! # Names
//!
//! * Branch: `trellis/nodes/<run>/<slug>`. `trellis/run-<run>/<slug>` is impossible: a ref
//!   cannot be both a file (`trellis/run-<run>`) and a directory. `trellis/nodes/` is a
//!   directory of its own, one level per run, so a run's branches are listed (and swept)
//!   with one prefix.
//! * Slug ([`slug`]): the node id's letters, digits, `_` and `-` (lowercased, anything
//!   else — `/`, `:`, `.` — becomes `-`), cut to 40 characters, plus 10 hex digits of a
//!   hash of the whole id, so `tickets/T1` and `tickets:T1` never share a branch.
//! * Worktree: `<repo>/.trellis/nodes/<run>/work/<slug>` (not under the run's worktree
//!   `.trellis/worktrees/<run>`, whose `git add -A` would take nested checkouts in);
//!   merge worktrees `.trellis/nodes/<run>/merge/<slug>`; the journal
//!   `.trellis/nodes/<run>/journal.json`. Run ids must be letters, digits, `_` and `-`
//!   (generated ids are hex).
//!
//! # Merges
//!
//! [`NodeWorktrees::merge`] fast-forwards the target when the node's branch contains it.
//! Otherwise `git merge-tree --write-tree` merges without any checkout; a clean result
//! becomes a merge commit (first parent: the target) whose message records the node, the
//! target and the strategy (`Trellis-Node:`, `Trellis-Merge-Strategy:` trailers), and the
//! target moves to it. A conflict is laid out in a *merge worktree*: a detached checkout of
//! the target's tip where `git merge` left its conflict markers, files a merge agent can
//! edit while the target itself is never half-merged; [`NodeWorktrees::merge`] returns
//! [`MergeOutcome::Conflict`] with the conflicted files, [`NodeWorktrees::complete_merge`]
//! commits the resolution and moves the target, [`NodeWorktrees::abort_merge`] drops it.
//! (`merge-tree --write-tree --merge-base` needs git 2.40 or later.)
//!
//! Moving a target is a compare-and-swap from the tip the merge started at: when another
//! merge moved the target meanwhile, a clean merge is redone on the new tip, a completed
//! resolution is refused (abort and merge again). When the target is checked out in a
//! worktree (the run branch in the run's worktree, a stage's branch in the stage node's),
//! it moves there with `git merge --ff-only` or `git reset --keep`, so that checkout's
//! files follow and its uncommitted edits are kept (or the move is refused, changing
//! nothing).
//!
//! # Pruning
//!
//! Every merge is recorded in the run's journal (target, tip before, tip after). Pruning
//! undoes them newest first: when nothing was built on the merge (the target's tip is still
//! its result) the target is reset to its tip before; otherwise a revert commit goes on
//! the target: a three-way merge of the target with the tip before the merge, from the
//! merge's result as base — what `git revert -m 1 <merge>` does for a merge commit, and
//! for a fast-forward all its commits (merges among them included) at once. A revert that
//! conflicts with work merged later fails with [`Error::Conflict`] naming the files,
//! leaving the target untouched. Then the worktree and branch are deleted. Pruning a node
//! does not touch nodes created from its branch: the runtime prunes those first
//! (cascading).
//!
//! # Cleanup and crashes
//!
//! [`NodeWorktrees::cleanup`] removes every node and merge worktree and node branch of the
//! run (merged work stays on the run branch). [`sweep`] does that for every run not in a
//! list of live runs and drops git's bookkeeping of worktrees whose directories are gone
//! (`git worktree prune`): run at start, it removes whatever a crashed process left.
//! Worktree adds and removes, branch creation, deletion and moves, and journal updates
//! hold the repository's [`RepoLock`].

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use trellis_protocol::RunId;

use super::{
    RepoLock, add_worktree, commit_all, delete_branch, ensure_on_branch, remove_worktree,
    repo_root, trellis_dir,
};
use crate::error::{Error, Result};
use crate::git::Git;

mod journal;
mod merge;

pub use journal::slug;
use journal::{Journal, NodeEntry};

/// The prefix of node branches: `trellis/nodes/<run>/<slug>`.
pub const NODE_BRANCH_PREFIX: &str = "trellis/nodes/";

/// One agent node's worktree and branch.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct NodeWorktree {
    /// The user's repository (top-level directory).
    pub repo: PathBuf,
    /// The run.
    pub run: RunId,
    /// The node id (any text, e.g. `tickets/T1`).
    pub node: String,
    /// The node's slug (see [`slug`]).
    pub slug: String,
    /// The node's branch.
    pub branch: String,
    /// The branch it was created from.
    pub parent: String,
    /// The commit it was created at.
    pub base: String,
    /// The worktree directory.
    pub path: PathBuf,
}

impl NodeWorktree {
    /// Commits everything changed in the node's worktree (`git add -A`) on its branch,
    /// with a message naming the run and the node. The new commit, or `None` when nothing
    /// changed.
    pub fn commit(&self, summary: &str) -> Result<Option<String>> {
        let git = Git::new(&self.path);
        ensure_on_branch(&git, &self.branch, "commit")?;
        let message = format!(
            "trellis run {} node {}: {summary}\n\nTrellis-Run: {}\nTrellis-Node: {}\n",
            self.run.short(),
            self.node,
            self.run,
            self.node
        );
        commit_all(&git, &message)
    }

    /// The branch's tip commit.
    pub fn head(&self) -> Result<String> {
        tip(&Git::new(&self.repo), &self.branch)
    }
}

/// How a merge moved its target.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum MergeKind {
    /// The target moved forward to the node's tip (it had nothing the node lacked).
    FastForward,
    /// A merge commit (first parent: the target) joined the node's branch into it.
    MergeCommit,
}

/// A merge a node made, as the journal keeps it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct MergeRecord {
    /// The merged node.
    pub node: String,
    /// The target branch.
    pub target: String,
    /// How the target moved.
    pub kind: MergeKind,
    /// The merge strategy as the caller named it (recorded in the commit message).
    pub strategy: String,
    /// The target's tip before the merge.
    pub before: String,
    /// The target's tip after it (the merge commit, or the node's tip when fast-forwarded).
    pub after: String,
}

/// A merge left in conflict for a merge agent: the merge worktree holds the conflict
/// markers; the target is untouched.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PendingMerge {
    /// The merged node.
    pub node: String,
    /// The target branch.
    pub target: String,
    /// The merge strategy as the caller named it.
    pub strategy: String,
    /// The target's tip the merge started from.
    pub before: String,
    /// The node's tip being merged.
    pub source: String,
    /// The merge worktree (detached at `before`, in git's merging state): resolve the
    /// conflicts in these files, then call [`NodeWorktrees::complete_merge`].
    pub path: PathBuf,
    /// The conflicted files, relative to the worktree, sorted.
    pub files: Vec<String>,
}

/// What [`NodeWorktrees::merge`] did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum MergeOutcome {
    /// The target already contained the node's work; nothing moved (nothing recorded).
    UpToDate,
    /// The target moved (fast-forward or merge commit); recorded for pruning.
    Merged(MergeRecord),
    /// The merge conflicts; the target is untouched.
    Conflict(PendingMerge),
}

/// How a prune undid one merge.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Undo {
    /// Nothing was built on the merge: the target went back to its tip before.
    Reset,
    /// A revert commit on the target.
    Revert(String),
    /// The target no longer contains the merge (or is gone): nothing to undo.
    Absent,
}

/// What [`NodeWorktrees::prune`] did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PruneReport {
    /// The node.
    pub node: String,
    /// Whether the node had a worktree in the journal.
    pub known: bool,
    /// The merges undone, newest first.
    pub undone: Vec<(MergeRecord, Undo)>,
}

/// What [`sweep`] removed.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SweepReport {
    /// The runs whose node worktrees and branches were removed, sorted.
    pub runs: Vec<String>,
}

/// The node worktrees of one run.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NodeWorktrees {
    repo: PathBuf,
    run: RunId,
    dir: PathBuf,
}

impl NodeWorktrees {
    /// The node worktrees of `run` in the repository containing `repo` (nothing is created
    /// yet).
    pub fn open(repo: &Path, run: &RunId) -> Result<Self> {
        Self::at_root(&repo_root(repo)?, run)
    }

    /// [`NodeWorktrees::open`] for `root`, the repository's top-level directory already
    /// found ([`repo_root`]): no git process.
    pub fn at_root(root: &Path, run: &RunId) -> Result<Self> {
        check_run_id(run)?;
        let dir = trellis_dir(root)?.join("nodes").join(run.as_str());
        Ok(Self {
            repo: root.to_owned(),
            run: run.clone(),
            dir,
        })
    }

    /// The repository's top-level directory.
    pub fn repo(&self) -> &Path {
        &self.repo
    }

    /// The run.
    pub fn run(&self) -> &RunId {
        &self.run
    }

    /// The run branch (`trellis/run-<run>`, owned by [`super::RunWorktree`]).
    pub fn run_branch(&self) -> String {
        super::RunWorktree::branch_for(&self.run)
    }

    /// The branch a node gets.
    pub fn branch_of(&self, node: &str) -> String {
        format!("{NODE_BRANCH_PREFIX}{}/{}", self.run, slug(node))
    }

    /// Creates `node`'s branch at `parent`'s tip and checks it out in a new worktree.
    pub fn create(&self, node: &str, parent: &str) -> Result<NodeWorktree> {
        let git = self.git();
        let at = tip(&git, parent)?;
        self.create_at(node, parent, &at)
    }

    /// Creates `node`'s branch at `commit` (recording `parent` as the branch it comes
    /// from) and checks it out in a new worktree; what a fork uses.
    ///
    /// Refuses when the node already has a worktree in this run. A branch or worktree of
    /// the node that the journal does not know (a crash between creating and recording
    /// it; no caller ever saw it) is replaced.
    pub fn create_at(&self, node: &str, parent: &str, commit: &str) -> Result<NodeWorktree> {
        let git = self.git();
        let base = git.resolve(commit)?.ok_or_else(|| {
            Error::Failed(format!("no commit `{commit}` in {}", self.repo.display()))
        })?;
        let slug = slug(node);
        let wt = NodeWorktree {
            repo: self.repo.clone(),
            run: self.run.clone(),
            node: node.to_owned(),
            branch: self.branch_of(node),
            parent: parent.to_owned(),
            base,
            path: self.dir.join("work").join(&slug),
            slug,
        };
        let lock = RepoLock::acquire(&self.repo)?;
        let mut journal = self.load()?;
        if journal.nodes.contains_key(node) {
            return Err(Error::Failed(format!(
                "node `{node}` of run {} already has a worktree ({})",
                self.run,
                wt.path.display()
            )));
        }
        if let Some(other) = journal.nodes.values().find(|e| e.worktree.slug == wt.slug) {
            return Err(Error::Failed(format!(
                "nodes `{node}` and `{}` map to the same worktree name {}; rename one",
                other.worktree.node, wt.slug
            )));
        }
        remove_worktree(&lock, &git, &wt.path)?;
        delete_branch(&lock, &git, &wt.branch)?;
        add_worktree(&lock, &git, Some(&wt.branch), &wt.path, &wt.base)?;
        journal.nodes.insert(
            node.to_owned(),
            NodeEntry {
                worktree: wt.clone(),
                merges: Vec::new(),
            },
        );
        self.save(&lock, &journal)?;
        Ok(wt)
    }

    /// The worktree of `node`, if it has one.
    pub fn get(&self, node: &str) -> Result<Option<NodeWorktree>> {
        Ok(self.load()?.nodes.remove(node).map(|e| e.worktree))
    }

    /// Every node worktree of the run, by node id.
    pub fn list(&self) -> Result<Vec<NodeWorktree>> {
        Ok(self
            .load()?
            .nodes
            .into_values()
            .map(|e| e.worktree)
            .collect())
    }

    /// The merges `node` made and that are not undone, oldest first.
    pub fn merges(&self, node: &str) -> Result<Vec<MergeRecord>> {
        Ok(self.load()?.entry(node)?.merges.clone())
    }

    /// The merge of `node` waiting for a merge agent, if any.
    pub fn pending(&self, node: &str) -> Result<Option<PendingMerge>> {
        Ok(self.load()?.pending.remove(node))
    }

    /// Prunes `node`: drops a merge of it waiting for a merge agent, undoes every merge it
    /// made (newest first; see the module docs), then deletes its worktree (uncommitted
    /// edits included) and its branch. Pruning a node without a worktree removes whatever
    /// branch or directory of it is left and reports `known: false`.
    ///
    /// A revert that conflicts fails with [`Error::Conflict`]; the merges undone before it
    /// stay undone (and are no longer recorded), the node keeps its worktree and branch, so
    /// the prune can be retried once the conflict is dealt with.
    pub fn prune(&self, node: &str) -> Result<PruneReport> {
        self.abort_merge(node)?;
        let entry = self.load()?.nodes.remove(node);
        let mut undone = Vec::new();
        if let Some(entry) = &entry {
            for record in entry.merges.iter().rev() {
                let how = self.undo(record)?;
                let lock = RepoLock::acquire(&self.repo)?;
                let mut journal = self.load()?;
                if let Some(e) = journal.nodes.get_mut(node) {
                    e.merges.retain(|m| m != record);
                }
                self.save(&lock, &journal)?;
                undone.push((record.clone(), how));
            }
        }
        let git = self.git();
        let lock = RepoLock::acquire(&self.repo)?;
        let slug = slug(node);
        remove_worktree(&lock, &git, &self.dir.join("work").join(&slug))?;
        delete_branch(&lock, &git, &self.branch_of(node))?;
        let mut journal = self.load()?;
        journal.nodes.remove(node);
        self.save(&lock, &journal)?;
        Ok(PruneReport {
            node: node.to_owned(),
            known: entry.is_some(),
            undone,
        })
    }

    /// Creates the node worktrees of the fork `into` of this run: for each `(node,
    /// commit)`, the node's worktree and a branch of the fork at that commit (the node's
    /// branch tip at the checkpoint forked). Parents are mapped to the fork's branches
    /// (this run's branch to the fork's run branch, a forked node's branch to its fork).
    /// The merges of forked nodes into mapped targets are recorded for the fork too when
    /// the fork's target contains them, so pruning in the fork undoes them there. The
    /// fork's run branch is [`super::RunWorktree::create_at`]'s to make.
    pub fn fork(&self, into: &RunId, nodes: &[(String, String)]) -> Result<NodeWorktrees> {
        let fork = NodeWorktrees::open(&self.repo, into)?;
        let source = self.load()?;
        let mut branches = BTreeMap::from([(self.run_branch(), fork.run_branch())]);
        for (node, _) in nodes {
            branches.insert(self.branch_of(node), fork.branch_of(node));
        }
        let map = |b: &str| branches.get(b).cloned();
        for (node, commit) in nodes {
            let entry = source.entry(node)?;
            let parent = map(&entry.worktree.parent).unwrap_or(entry.worktree.parent.clone());
            fork.create_at(node, &parent, commit)?;
        }
        let git = self.git();
        let lock = RepoLock::acquire(&self.repo)?;
        let mut journal = fork.load()?;
        for (node, _) in nodes {
            let mut kept = Vec::new();
            for m in &source.entry(node)?.merges {
                let Some(target) = map(&m.target) else {
                    continue;
                };
                let Some(now) = git.resolve(&format!("refs/heads/{target}"))? else {
                    continue;
                };
                if is_ancestor(&git, &m.after, &now)? {
                    kept.push(MergeRecord {
                        target,
                        ..m.clone()
                    });
                }
            }
            if let Some(e) = journal.nodes.get_mut(node) {
                e.merges = kept;
            }
        }
        fork.save(&lock, &journal)?;
        Ok(fork)
    }

    /// Removes every node and merge worktree and every node branch of the run, and the
    /// journal (when the run ends or is discarded; merged work stays on the run branch).
    pub fn cleanup(&self) -> Result<()> {
        let lock = RepoLock::acquire(&self.repo)?;
        cleanup_run(&lock, &self.git(), &self.repo, self.run.as_str())
    }

    fn git(&self) -> Git {
        Git::new(&self.repo)
    }

    fn journal_path(&self) -> PathBuf {
        self.dir.join("journal.json")
    }

    fn load(&self) -> Result<Journal> {
        Journal::load(&self.journal_path())
    }

    fn save(&self, _lock: &RepoLock, journal: &Journal) -> Result<()> {
        journal.save(&self.journal_path())
    }
}

/// Removes the node worktrees and branches of every run of the repository containing
/// `repo` that is not in `live`, and git's bookkeeping of worktrees whose directories are
/// gone. Run at start, before any run resumes, it removes whatever a crashed process left.
/// Run branches and worktrees (`trellis/run-<run>`) are not touched: they carry the run's
/// result for review.
pub fn sweep(repo: &Path, live: &[RunId]) -> Result<SweepReport> {
    let repo = repo_root(repo)?;
    let git = Git::new(&repo);
    let nodes = trellis_dir(&repo)?.join("nodes");
    let lock = RepoLock::acquire(&repo)?;
    let mut runs = BTreeSet::new();
    match std::fs::read_dir(&nodes) {
        Ok(entries) => {
            for e in entries {
                let e = e.map_err(Error::io("cannot list", &nodes))?;
                runs.insert(e.file_name().to_string_lossy().into_owned());
            }
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(Error::io("cannot list", &nodes)(e)),
    }
    for branch in branches(&git, NODE_BRANCH_PREFIX)? {
        if let Some(run) = branch
            .strip_prefix(NODE_BRANCH_PREFIX)
            .and_then(|rest| rest.split('/').next())
        {
            runs.insert(run.to_owned());
        }
    }
    let live: BTreeSet<&str> = live.iter().map(RunId::as_str).collect();
    runs.retain(|r| !live.contains(r.as_str()));
    for run in &runs {
        cleanup_run(&lock, &git, &repo, run)?;
    }
    git.run(&["worktree", "prune"])?;
    Ok(SweepReport {
        runs: runs.into_iter().collect(),
    })
}

/// Removes the node and merge worktrees, node branches and journal of `run`.
fn cleanup_run(lock: &RepoLock, git: &Git, repo: &Path, run: &str) -> Result<()> {
    let dir = trellis_dir(repo)?.join("nodes").join(run);
    for path in worktrees(git)? {
        if path.starts_with(&dir) {
            remove_worktree(lock, git, &path)?;
        }
    }
    match std::fs::remove_dir_all(&dir) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
            return Err(Error::io("cannot remove", &dir)(e));
        }
        _ => {}
    }
    git.run(&["worktree", "prune"])?;
    for branch in branches(git, &format!("{NODE_BRANCH_PREFIX}{run}/"))? {
        delete_branch(lock, git, &branch)?;
    }
    Ok(())
}

/// The branches whose names start with `prefix`.
fn branches(git: &Git, prefix: &str) -> Result<Vec<String>> {
    let pattern = format!("refs/heads/{}", prefix.trim_end_matches('/'));
    let out = git.text(&["for-each-ref", "--format=%(refname:strip=2)", &pattern])?;
    Ok(out
        .lines()
        .filter(|b| b.starts_with(prefix))
        .map(str::to_owned)
        .collect())
}

/// The paths of the repository's worktrees, with the branch each has checked out.
fn checkouts(git: &Git) -> Result<Vec<(PathBuf, Option<String>)>> {
    let out = git.run(&["worktree", "list", "--porcelain", "-z"])?;
    let mut list: Vec<(PathBuf, Option<String>)> = Vec::new();
    for field in out.split(|b| *b == 0) {
        let field = String::from_utf8_lossy(field);
        if let Some(path) = field.strip_prefix("worktree ") {
            list.push((PathBuf::from(path), None));
        } else if let (Some(branch), Some(last)) =
            (field.strip_prefix("branch refs/heads/"), list.last_mut())
        {
            last.1 = Some(branch.to_owned());
        }
    }
    Ok(list)
}

/// The paths of the repository's worktrees.
fn worktrees(git: &Git) -> Result<Vec<PathBuf>> {
    Ok(checkouts(git)?.into_iter().map(|(p, _)| p).collect())
}

/// The tip of `branch`, or an error naming it.
fn tip(git: &Git, branch: &str) -> Result<String> {
    git.resolve(&format!("refs/heads/{branch}"))?
        .ok_or_else(|| Error::Failed(format!("branch {branch} does not exist")))
}

/// Whether `a` is an ancestor of (or equal to) `b`.
fn is_ancestor(git: &Git, a: &str, b: &str) -> Result<bool> {
    Ok(git.try_run(&["merge-base", "--is-ancestor", a, b])?.is_ok())
}

/// Refuses run ids that cannot be one ref and path component.
fn check_run_id(run: &RunId) -> Result<()> {
    let id = run.as_str();
    if id.is_empty()
        || id.starts_with('-')
        || !id
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
    {
        return Err(Error::Failed(format!(
            "run id `{id}` cannot name node branches (letters, digits, `_` and `-` only)"
        )));
    }
    Ok(())
}
