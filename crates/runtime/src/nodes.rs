//! Node worktrees in the runtime ([`trellis_tools::worktree::nodes`]).
//!
//! Every agent activation whose tools can change files (a write tool, or the shell) works
//! in a worktree of its own, on a branch of its own created from the run branch. When the
//! agent is done, its work is committed there and merged into the run branch; the stage's
//! parallel agents merge one at a time, in the order they finish. A clean merge is
//! automatic; a conflict fails the activation, naming the conflicted files and the nodes
//! whose merged work it conflicts with, and keeps the node's branch (a merge agent comes
//! with the `merge` stage kind). The run branch is checked out in the run's worktree,
//! which follows every merge: read-only agents, the `run_tests` stage, retrieval and the
//! change set's review read the merged result there.
//!
//! A later activation of the same node (a retry, a revision, a resume after an interrupt
//! or a crash) continues in the node's worktree, brought forward to the run branch when
//! everything it committed is merged. Pruning a node deletes its worktree and branch and
//! undoes its merges ([`NodeWorktrees::prune`]); a run that ends (succeeded, failed,
//! cancelled) or whose change set is discarded drops its node worktrees and branches (the
//! run branch stays for the review); a service at start sweeps those of every run the
//! store does not list as unfinished, so a crash never leaks them.

use std::sync::{Arc, Mutex};

use tokio_util::sync::CancellationToken;
use trellis_protocol::RunId;
use trellis_tools::git::Git;
use trellis_tools::worktree::nodes::{
    MergeOutcome, MergeRecord, NodeWorktree, NodeWorktrees, PendingMerge, PruneReport,
};

use crate::Runtime;

/// The merge strategy recorded (`Trellis-Merge-Strategy:`) when a stage merges an agent's
/// branch into the run branch.
pub const STAGE_MERGE: &str = "stage";

/// The node worktrees of one run, as its handlers use them.
pub struct NodeSpaces {
    nodes: NodeWorktrees,
    run_branch: String,
    /// Serialises checkouts, commits with their merges, and prunes of this run's nodes.
    /// Taken inside the blocking tasks, so a handler dropped mid-merge (pruned, cancelled)
    /// still holds it until git is done.
    lock: Arc<Mutex<()>>,
}

/// What landing an activation's work on the run branch did.
pub enum Landed {
    /// Merged (or nothing to merge): the run branch's tip is `run_head`.
    Merged {
        /// The node's new commit, if it changed anything.
        commit: Option<String>,
        /// The files that commit changed.
        files: Vec<String>,
        /// The run branch's tip after the merge.
        run_head: String,
    },
    /// The merge conflicts: nothing reached the run branch; the node keeps its branch.
    Conflict {
        /// The node's new commit, if it changed anything.
        commit: Option<String>,
        /// The files that commit changed.
        files: Vec<String>,
        /// What conflicts.
        conflict: Conflict,
    },
    /// Committed on the node's branch only: a merge node of its own merges it later.
    Committed {
        /// The node's new commit, if it changed anything.
        commit: Option<String>,
        /// The files that commit changed.
        files: Vec<String>,
    },
    /// The activation was pruned or cancelled before its work was committed.
    Cancelled,
    /// A read-only agent: nothing to land.
    ReadOnly,
}

/// A merge conflict of a node's branch with the run branch.
#[derive(Clone, Debug, serde::Serialize)]
pub struct Conflict {
    /// The node's branch (kept).
    pub branch: String,
    /// The conflicted files.
    pub files: Vec<String>,
    /// The nodes whose work, merged into the run branch since the node's branch left it,
    /// changed those files (newest first).
    pub with: Vec<String>,
}

impl Conflict {
    /// What the failed activation reports.
    pub fn message(&self, run_branch: &str) -> String {
        let with = if self.with.is_empty() {
            "work merged meanwhile".to_owned()
        } else {
            format!("the work of {}", quoted(&self.with))
        };
        format!(
            "merge conflict: this agent's changes to {} conflict with {with} on {run_branch}; \
             nothing was merged (its commit stays on {} until the run ends)",
            self.files.join(", "),
            self.branch
        )
    }
}

fn quoted(list: &[String]) -> String {
    list.iter()
        .map(|n| format!("`{n}`"))
        .collect::<Vec<_>>()
        .join(", ")
}

fn text(e: impl std::fmt::Display) -> String {
    e.to_string()
}

impl NodeSpaces {
    /// The node worktrees of the run whose branch is `run_branch`, in the repository whose
    /// top-level directory is `repo` (no git process).
    pub fn open(repo: &std::path::Path, run: &RunId, run_branch: &str) -> crate::Result<Self> {
        Ok(Self {
            nodes: NodeWorktrees::at_root(repo, run)?,
            run_branch: run_branch.to_owned(),
            lock: Arc::default(),
        })
    }

    fn guard(&self) -> std::sync::MutexGuard<'_, ()> {
        self.lock.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The worktree `node`'s activation edits: its own from an earlier activation (brought
    /// forward to the run branch's tip when everything it committed is merged), else a new
    /// one from the run branch.
    /// Whether it was created now (the node had none).
    pub fn checkout(&self, node: &str) -> Result<(NodeWorktree, bool), String> {
        let _one = self.guard();
        let Some(wt) = self.nodes.get(node).map_err(text)? else {
            let wt = self.nodes.create(node, &self.run_branch).map_err(text)?;
            return Ok((wt, true));
        };
        let git = Git::new(&wt.path);
        let merged = git
            .try_run(&["merge-base", "--is-ancestor", "HEAD", &self.run_branch])
            .map_err(text)?
            .is_ok();
        if merged {
            // Refused (nothing changes) when its uncommitted edits touch files the run
            // branch changed: it then goes on from where it was, and its merge says so.
            let _ = git
                .try_run(&["merge", "--ff-only", "--quiet", &self.run_branch])
                .map_err(text)?;
        }
        Ok((wt, false))
    }

    /// Commits the node's work (`summary` in the message) and, when `merge`, merges its
    /// branch into the run branch; nothing when `cancel` fired (the node is pruned or the
    /// run cancelled).
    pub fn land(
        &self,
        wt: &NodeWorktree,
        summary: &str,
        merge: bool,
        cancel: &CancellationToken,
    ) -> Result<Landed, String> {
        let _one = self.guard();
        if cancel.is_cancelled() {
            return Ok(Landed::Cancelled);
        }
        let commit = wt.commit(summary).map_err(text)?;
        let files = match &commit {
            Some(c) => Git::new(&wt.path)
                .text(&["diff-tree", "--no-commit-id", "--name-only", "-r", c])
                .map_err(text)?
                .lines()
                .map(str::to_owned)
                .collect(),
            None => Vec::new(),
        };
        if !merge {
            return Ok(Landed::Committed { commit, files });
        }
        match self
            .nodes
            .merge(&wt.node, &self.run_branch, STAGE_MERGE)
            .map_err(text)?
        {
            MergeOutcome::UpToDate | MergeOutcome::Merged(_) => Ok(Landed::Merged {
                commit,
                files,
                run_head: self.run_head()?,
            }),
            MergeOutcome::Conflict(pending) => {
                let with = self.merged_by_others(wt, &pending.files);
                self.nodes.abort_merge(&wt.node).map_err(text)?;
                Ok(Landed::Conflict {
                    commit,
                    files,
                    conflict: Conflict {
                        branch: wt.branch.clone(),
                        files: pending.files,
                        with,
                    },
                })
            }
        }
    }

    /// Merges `node`'s branch into the run branch, recording `strategy`; `None` when the
    /// node has no worktree (it never edited). A conflict is left in a merge worktree
    /// ([`MergeOutcome::Conflict`]) for [`Self::complete_merge`] or [`Self::abort_merge`].
    pub fn merge_node(&self, node: &str, strategy: &str) -> Result<Option<MergeOutcome>, String> {
        let _one = self.guard();
        if self.nodes.get(node).map_err(text)?.is_none() {
            return Ok(None);
        }
        // A merge left waiting by an earlier activation (a crash, a person asked) is
        // started again from the run branch's current tip.
        self.nodes.abort_merge(node).map_err(text)?;
        self.nodes
            .merge(node, &self.run_branch, strategy)
            .map(Some)
            .map_err(text)
    }

    /// The nodes whose work a merge of `of` brings in: `of` itself when it has a worktree,
    /// else the worktrees of its children (`of/<key>`), by node id.
    pub fn nodes_of(&self, of: &str) -> Result<Vec<String>, String> {
        if self.nodes.get(of).map_err(text)?.is_some() {
            return Ok(vec![of.to_owned()]);
        }
        let prefix = format!("{of}/");
        let mut nodes: Vec<String> = self
            .nodes
            .list()
            .map_err(text)?
            .into_iter()
            .map(|w| w.node)
            .filter(|n| n.starts_with(&prefix))
            .collect();
        nodes.sort();
        Ok(nodes)
    }

    /// The merge of `node` waiting for its conflicts to be resolved, if any.
    pub fn pending_merge(&self, node: &str) -> Result<Option<PendingMerge>, String> {
        self.nodes.pending(node).map_err(text)
    }

    /// Commits the resolved merge of `node` (`resolution` says how) onto the run branch.
    pub fn complete_merge(&self, node: &str, resolution: &str) -> Result<MergeRecord, String> {
        let _one = self.guard();
        self.nodes.complete_merge(node, resolution).map_err(text)
    }

    /// Drops the merge of `node` waiting for a resolution.
    pub fn abort_merge(&self, node: &str) -> Result<bool, String> {
        let _one = self.guard();
        self.nodes.abort_merge(node).map_err(text)
    }

    /// `node`'s worktree and the diff of its branch against the run branch (what it changed
    /// since it left it), if it has a worktree.
    pub fn work_of(&self, node: &str) -> Result<Option<(std::path::PathBuf, String)>, String> {
        let Some(wt) = self.nodes.get(node).map_err(text)? else {
            return Ok(None);
        };
        let range = format!("{}...{}", self.run_branch, wt.branch);
        let diff = Git::new(self.nodes.repo())
            .text(&["diff", "--no-color", "--no-ext-diff", &range])
            .map_err(text)?;
        Ok(Some((wt.path, diff)))
    }

    /// The run branch's tip.
    pub fn run_head(&self) -> Result<String, String> {
        Git::new(self.nodes.repo())
            .resolve(&format!("refs/heads/{}", self.run_branch))
            .map_err(text)?
            .ok_or_else(|| format!("the run branch {} is gone", self.run_branch))
    }

    /// The nodes whose commits on the run branch, since `wt`'s branch left it, changed
    /// `files` (their `Trellis-Node:` trailers), newest first.
    fn merged_by_others(&self, wt: &NodeWorktree, files: &[String]) -> Vec<String> {
        let git = Git::new(self.nodes.repo());
        let Ok(base) = git.text(&["merge-base", &wt.branch, &self.run_branch]) else {
            return Vec::new();
        };
        let range = format!("{base}..{}", self.run_branch);
        let mut args = vec![
            "log",
            "--no-merges",
            "--format=%(trailers:key=Trellis-Node,valueonly)",
            range.as_str(),
            "--",
        ];
        args.extend(files.iter().map(String::as_str));
        let mut nodes: Vec<String> = Vec::new();
        for line in git.text(&args).unwrap_or_default().lines() {
            let n = line.trim();
            if !n.is_empty() && n != wt.node && !nodes.iter().any(|x| x == n) {
                nodes.push(n.to_owned());
            }
        }
        nodes
    }

    /// Prunes `node`: undoes its merges, deletes its worktree and branch. `None` when it
    /// has no worktree (it never edited, or is pruned already). With the report, the files
    /// whose changes were dropped.
    pub fn prune(&self, node: &str) -> Result<Option<(PruneReport, Vec<String>)>, String> {
        let _one = self.guard();
        let Some(wt) = self.nodes.get(node).map_err(text)? else {
            return Ok(None);
        };
        let files = self.dropped_files(&wt);
        let report = self.nodes.prune(node).map_err(text)?;
        Ok(Some((report, files)))
    }

    /// The files a prune of `wt`'s node drops changes of: its merges, its commits not
    /// merged, its uncommitted edits (best effort: for the user's note only).
    fn dropped_files(&self, wt: &NodeWorktree) -> Vec<String> {
        let repo = Git::new(self.nodes.repo());
        let here = Git::new(&wt.path);
        let lines = |git: &Git, args: &[&str]| -> Vec<String> {
            git.text(args)
                .unwrap_or_default()
                .lines()
                .map(str::to_owned)
                .collect()
        };
        let mut files = Vec::new();
        for m in self.nodes.merges(&wt.node).unwrap_or_default() {
            files.extend(lines(
                &repo,
                &["diff", "--name-only", "--no-renames", &m.before, &m.after],
            ));
        }
        if let Ok(base) = repo.text(&["merge-base", &wt.branch, &self.run_branch]) {
            files.extend(lines(
                &repo,
                &["diff", "--name-only", "--no-renames", &base, &wt.branch],
            ));
        }
        files.extend(lines(
            &here,
            &["diff", "--name-only", "--no-renames", "HEAD"],
        ));
        files.extend(lines(
            &here,
            &["ls-files", "--others", "--exclude-standard"],
        ));
        files.sort();
        files.dedup();
        files
    }

    /// Removes every node worktree and branch of the run (its merged work stays on the run
    /// branch).
    pub fn cleanup(&self) -> Result<(), String> {
        let _one = self.guard();
        self.nodes.cleanup().map_err(text)
    }
}

/// Removes the node worktrees and branches of `run` (its change set was applied or
/// rejected), if there are any.
pub fn discard(repo: &std::path::Path, run: &RunId) {
    if let Err(e) = NodeWorktrees::open(repo, run).and_then(|n| n.cleanup()) {
        tracing::warn!("run {run}: removing its node worktrees: {e}");
    }
}

/// Removes the node worktrees and branches that no unfinished run of the store owns:
/// what a crashed process left. Run before any run resumes in this process.
pub fn sweep(runtime: &Runtime) {
    let live: Vec<RunId> = match runtime.store.list_runs(&Default::default()) {
        Ok(runs) => runs
            .into_iter()
            .filter(|r| !r.summary.status.is_final())
            .map(|r| r.id)
            .collect(),
        Err(e) => {
            tracing::warn!("cannot list the runs, so no node worktree is swept: {e}");
            return;
        }
    };
    match trellis_tools::worktree::nodes::sweep(&runtime.repo, &live) {
        Ok(r) if !r.runs.is_empty() => {
            tracing::info!("removed the node worktrees of ended runs {:?}", r.runs);
        }
        Ok(_) => {}
        Err(e) => tracing::warn!("sweeping node worktrees: {e}"),
    }
}
