//! Merging node branches into targets, conflicts left to a merge agent, and undoing merges
//! (see the parent module's docs).

use std::path::{Path, PathBuf};

use super::{
    MergeKind, MergeOutcome, MergeRecord, NodeWorktrees, PendingMerge, Undo, checkouts,
    is_ancestor, slug, tip,
};
use crate::error::{Error, Result};
use crate::git::Git;
use crate::worktree::{RepoLock, add_worktree, remove_worktree};

/// How often a merge or revert is redone because another merge moved its target meanwhile.
const ATTEMPTS: usize = 16;

impl NodeWorktrees {
    /// Merges `node`'s branch into `target` (the run branch, or a stage's branch):
    /// fast-forward when the target has nothing the node lacks, else a merge commit whose
    /// message records the node and `strategy` (how the merge is meant: "stage merge",
    /// "ticket merge by merger node", …). The target never holds a half-done merge: a
    /// conflict returns [`MergeOutcome::Conflict`] with the files, in a merge worktree of
    /// their own; resolve them there, then [`Self::complete_merge`] or
    /// [`Self::abort_merge`].
    ///
    /// Refuses while a merge of the node waits for a merge agent, and when the target is
    /// checked out in a worktree whose uncommitted edits the merge would overwrite.
    pub fn merge(&self, node: &str, target: &str, strategy: &str) -> Result<MergeOutcome> {
        let journal = self.load()?;
        let entry = journal.entry(node)?;
        if let Some(p) = journal.pending.get(node) {
            return Err(Error::Failed(format!(
                "a merge of node `{node}` into {} waits for its conflicts to be resolved in {}; \
                 complete or abort it first",
                p.target,
                p.path.display()
            )));
        }
        let git = self.git();
        let source = entry.worktree.head()?;
        let message = merge_message(&self.run, node, target, strategy);
        let record = |kind, before: &str, after: &str| MergeRecord {
            node: node.to_owned(),
            target: target.to_owned(),
            kind,
            strategy: strategy.to_owned(),
            before: before.to_owned(),
            after: after.to_owned(),
        };
        for _ in 0..ATTEMPTS {
            let before = tip(&git, target)?;
            if is_ancestor(&git, &source, &before)? {
                return Ok(MergeOutcome::UpToDate);
            }
            if is_ancestor(&git, &before, &source)? {
                let rec = record(MergeKind::FastForward, &before, &source);
                if self.advance_and_record(&rec)? {
                    return Ok(MergeOutcome::Merged(rec));
                }
                continue;
            }
            // A clean merge needs no checkout: `merge-tree` writes the merged tree.
            let (clean, out) = git.run_or_1(&[
                "merge-tree",
                "--write-tree",
                "--name-only",
                "--no-messages",
                &before,
                &source,
            ])?;
            let after = if clean {
                let tree = first_line(&out)?;
                git.text(&[
                    "commit-tree",
                    &tree,
                    "-p",
                    &before,
                    "-p",
                    &source,
                    "-m",
                    &message,
                ])?
            } else {
                return self.conflict(node, target, strategy, &before, &source, &message);
            };
            let rec = record(MergeKind::MergeCommit, &before, &after);
            if self.advance_and_record(&rec)? {
                return Ok(MergeOutcome::Merged(rec));
            }
        }
        Err(moving(target))
    }

    /// Commits the resolved merge of `node` waiting in its merge worktree (every file there
    /// as it is now; `resolution` says how the conflicts were resolved and goes into the
    /// commit message) and moves the target to it.
    ///
    /// Refuses, changing nothing, while a conflicted file still holds conflict markers; and
    /// when the target moved since the merge started (abort and merge again).
    pub fn complete_merge(&self, node: &str, resolution: &str) -> Result<MergeRecord> {
        let pending = self.load()?.pending.remove(node).ok_or_else(|| {
            Error::Failed(format!("no merge of node `{node}` waits for a resolution"))
        })?;
        let left: Vec<&String> = pending
            .files
            .iter()
            .filter(|f| has_markers(&pending.path.join(f)))
            .collect();
        if !left.is_empty() {
            return Err(Error::Conflict(format!(
                "the merge of node `{node}` into {} still has conflict markers in: {}",
                pending.target,
                join(&left)
            )));
        }
        let git = self.git();
        if tip(&git, &pending.target)? != pending.before {
            return Err(moved_during_resolution(&pending));
        }
        let wt = Git::new(&pending.path);
        wt.run(&["add", "-A"])?;
        let message = format!(
            "{}Trellis-Conflicts: {}\nTrellis-Resolution: {}\n",
            merge_message(&self.run, node, &pending.target, &pending.strategy),
            pending.files.join(", "),
            resolution.replace('\n', " ")
        );
        if wt.resolve("MERGE_HEAD")?.is_some() {
            wt.run(&["commit", "--quiet", "--no-verify", "-m", &message])?;
        }
        let after = wt.text(&["rev-parse", "HEAD"])?;
        let rec = MergeRecord {
            node: node.to_owned(),
            target: pending.target.clone(),
            kind: MergeKind::MergeCommit,
            strategy: pending.strategy.clone(),
            before: pending.before.clone(),
            after,
        };
        let lock = RepoLock::acquire(&self.repo)?;
        if !advance(&lock, &git, &rec.target, &rec.before, &rec.after)? {
            return Err(moved_during_resolution(&pending));
        }
        remove_worktree(&lock, &git, &pending.path)?;
        let mut journal = self.load()?;
        journal.pending.remove(node);
        if let Some(e) = journal.nodes.get_mut(node) {
            e.merges.push(rec.clone());
        }
        self.save(&lock, &journal)?;
        Ok(rec)
    }

    /// Drops the merge of `node` waiting for a merge agent (its merge worktree goes; the
    /// target was never touched). Whether there was one.
    pub fn abort_merge(&self, node: &str) -> Result<bool> {
        let lock = RepoLock::acquire(&self.repo)?;
        let mut journal = self.load()?;
        let Some(pending) = journal.pending.remove(node) else {
            return Ok(false);
        };
        remove_worktree(&lock, &self.git(), &pending.path)?;
        self.save(&lock, &journal)?;
        Ok(true)
    }

    /// Undoes one merge on its target: a reset when nothing was built on it, else a revert
    /// commit.
    pub(super) fn undo(&self, m: &MergeRecord) -> Result<Undo> {
        let git = self.git();
        for _ in 0..ATTEMPTS {
            let Some(now) = git.resolve(&format!("refs/heads/{}", m.target))? else {
                return Ok(Undo::Absent);
            };
            if !is_ancestor(&git, &m.after, &now)? {
                return Ok(Undo::Absent);
            }
            if now == m.after {
                let lock = RepoLock::acquire(&self.repo)?;
                if advance(&lock, &git, &m.target, &now, &m.before)? {
                    return Ok(Undo::Reset);
                }
                continue;
            }
            // Reverting is a merge of the target with the tip before the merge, from the
            // merge's result as base (what `git revert -m 1` does for a merge commit; for a
            // fast-forward it reverts all its commits, merges among them included, at once).
            let base = format!("--merge-base={}", m.after);
            let (clean, out) = git.run_or_1(&[
                "merge-tree",
                "--write-tree",
                "--name-only",
                "--no-messages",
                &base,
                &now,
                &m.before,
            ])?;
            if !clean {
                let files = conflicted_files(&out);
                return Err(Error::Conflict(format!(
                    "reverting the merge {} of node `{}` conflicts with later work on {} in: {}; \
                     the target is unchanged",
                    m.after,
                    m.node,
                    m.target,
                    join(&files.iter().collect::<Vec<_>>())
                )));
            }
            let tree = first_line(&out)?;
            if git.text(&["rev-parse", &format!("{now}^{{tree}}")])? == tree {
                // The changes are gone from the target already (reverted before a crash).
                return Ok(Undo::Absent);
            }
            let message = format!(
                "trellis: revert node {} (pruned) on {}\n\nUndoes {} ({}).\n\n\
                 Trellis-Run: {}\nTrellis-Node: {}\nTrellis-Reverts: {}\n",
                m.node,
                m.target,
                m.after,
                match m.kind {
                    MergeKind::MergeCommit => "merge commit",
                    MergeKind::FastForward => "fast-forward",
                },
                self.run,
                m.node,
                m.after
            );
            let revert = git.text(&["commit-tree", &tree, "-p", &now, "-m", &message])?;
            let lock = RepoLock::acquire(&self.repo)?;
            if advance(&lock, &git, &m.target, &now, &revert)? {
                return Ok(Undo::Revert(revert));
            }
        }
        Err(moving(&m.target))
    }

    /// Lays a conflicting merge out in a merge worktree for a merge agent and records it.
    fn conflict(
        &self,
        node: &str,
        target: &str,
        strategy: &str,
        before: &str,
        source: &str,
        message: &str,
    ) -> Result<MergeOutcome> {
        let path = self.scratch(node, before)?;
        let wt = Git::new(&path);
        let merged = wt.try_run(&[
            "merge",
            "--no-ff",
            "--no-edit",
            "--quiet",
            "-m",
            message,
            source,
        ])?;
        let files = unmerged(&wt)?;
        if files.is_empty() {
            self.drop_scratch(&path)?;
            return Err(Error::Failed(format!(
                "cannot merge node `{node}` into {target}: {}",
                merged
                    .err()
                    .unwrap_or_else(|| "git merge-tree and git merge disagree".into())
            )));
        }
        let pending = PendingMerge {
            node: node.to_owned(),
            target: target.to_owned(),
            strategy: strategy.to_owned(),
            before: before.to_owned(),
            source: source.to_owned(),
            path,
            files,
        };
        let lock = RepoLock::acquire(&self.repo)?;
        let mut journal = self.load()?;
        journal.pending.insert(node.to_owned(), pending.clone());
        self.save(&lock, &journal)?;
        Ok(MergeOutcome::Conflict(pending))
    }

    /// Moves the target of `rec` from its tip before to its tip after and records the
    /// merge; `false` when the target moved meanwhile.
    fn advance_and_record(&self, rec: &MergeRecord) -> Result<bool> {
        let lock = RepoLock::acquire(&self.repo)?;
        if !advance(&lock, &self.git(), &rec.target, &rec.before, &rec.after)? {
            return Ok(false);
        }
        let mut journal = self.load()?;
        if let Some(e) = journal.nodes.get_mut(&rec.node) {
            e.merges.push(rec.clone());
        }
        self.save(&lock, &journal)?;
        Ok(true)
    }

    /// A fresh merge worktree for `node`, detached at `at`.
    fn scratch(&self, node: &str, at: &str) -> Result<PathBuf> {
        let path = self.dir.join("merge").join(slug(node));
        let lock = RepoLock::acquire(&self.repo)?;
        let git = self.git();
        remove_worktree(&lock, &git, &path)?;
        add_worktree(&lock, &git, None, &path, at)?;
        Ok(path)
    }

    /// Removes a merge worktree.
    fn drop_scratch(&self, path: &Path) -> Result<()> {
        let lock = RepoLock::acquire(&self.repo)?;
        remove_worktree(&lock, &self.git(), path)
    }
}

/// Moves `branch` from `old` to `new` (compare-and-swap): `false`, changing nothing, when
/// it is no longer at `old`. Where the branch is checked out, the checkout follows
/// (`merge --ff-only` forward, `reset --keep` otherwise), keeping its uncommitted edits or
/// failing without moving when they are in the way.
fn advance(_lock: &RepoLock, git: &Git, branch: &str, old: &str, new: &str) -> Result<bool> {
    let reference = format!("refs/heads/{branch}");
    let checkout = checkouts(git)?
        .into_iter()
        .find(|(_, b)| b.as_deref() == Some(branch));
    let Some((path, _)) = checkout else {
        let message = format!("trellis: move {branch} to {new}");
        return match git.try_run(&["update-ref", "-m", &message, &reference, new, old])? {
            Ok(_) => Ok(true),
            Err(stderr) => match git.resolve(&reference)? {
                Some(now) if now != old => Ok(false),
                _ => Err(Error::Failed(format!("cannot move {branch}: {stderr}"))),
            },
        };
    };
    let wt = Git::new(&path);
    if wt.resolve("HEAD")?.as_deref() != Some(old) {
        return Ok(false);
    }
    let moved = if is_ancestor(git, old, new)? {
        wt.try_run(&["merge", "--ff-only", "--quiet", new])?
    } else {
        wt.try_run(&["reset", "--quiet", "--keep", new])?
    };
    moved.map(drop).map_err(|stderr| {
        Error::Failed(format!(
            "cannot move {branch} to {new} in its worktree {}: {stderr} (commit or discard \
             the uncommitted edits there that the change would overwrite)",
            path.display()
        ))
    })?;
    Ok(true)
}

/// The tree id on the first line of `merge-tree --write-tree` output.
fn first_line(out: &[u8]) -> Result<String> {
    String::from_utf8_lossy(out)
        .lines()
        .next()
        .map(str::to_owned)
        .filter(|t| !t.is_empty())
        .ok_or_else(|| Error::Failed("git merge-tree printed no tree".into()))
}

/// The conflicted files `merge-tree --write-tree --name-only` lists after the tree, sorted.
fn conflicted_files(out: &[u8]) -> Vec<String> {
    let mut files: Vec<String> = String::from_utf8_lossy(out)
        .lines()
        .skip(1)
        .take_while(|l| !l.is_empty())
        .map(str::to_owned)
        .collect();
    files.sort();
    files.dedup();
    files
}

/// The unmerged paths of a merge worktree, sorted.
fn unmerged(wt: &Git) -> Result<Vec<String>> {
    let out = wt.run(&["diff", "--name-only", "-z", "--diff-filter=U"])?;
    let mut files: Vec<String> = out
        .split(|b| *b == 0)
        .filter(|f| !f.is_empty())
        .map(|f| String::from_utf8_lossy(f).into_owned())
        .collect();
    files.sort();
    files.dedup();
    Ok(files)
}

/// Whether the file holds a line opening or closing a conflict region.
fn has_markers(path: &Path) -> bool {
    std::fs::read(path).is_ok_and(|bytes| {
        bytes
            .split(|b| *b == b'\n')
            .any(|l| l.starts_with(b"<<<<<<< ") || l.starts_with(b">>>>>>> "))
    })
}

fn merge_message(
    run: &trellis_protocol::RunId,
    node: &str,
    target: &str,
    strategy: &str,
) -> String {
    format!(
        "trellis: merge node {node} into {target}\n\nStrategy: {strategy}\n\n\
         Trellis-Run: {run}\nTrellis-Node: {node}\nTrellis-Merge-Strategy: {strategy}\n"
    )
}

fn join(files: &[&String]) -> String {
    files
        .iter()
        .map(|f| f.as_str())
        .collect::<Vec<_>>()
        .join(", ")
}

fn moving(target: &str) -> Error {
    Error::Failed(format!(
        "{target} kept moving while merging into it ({ATTEMPTS} attempts); try again"
    ))
}

fn moved_during_resolution(p: &PendingMerge) -> Error {
    Error::Failed(format!(
        "{} moved since the merge of node `{}` started (it was at {}); abort this merge and \
         merge again",
        p.target, p.node, p.before
    ))
}
