//! Apply, undo, redo and recovery, recorded in the store.

use std::collections::BTreeSet;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use serde::Serialize;
use trellis_protocol::RunId;
use trellis_store::{ChangeOpRecord, ChangeSetRecord, ReviewStore};

use super::diff::{ChangeSet, FileChange};
use super::journal::{self, Manifest, OpKind, Side};
use super::merge::{Merged, Overlap, merge};
use super::{FileSelection, ReviewOutcome, Selection};
use crate::error::{Error, Result};

/// What an apply did.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ApplyReport {
    /// The run.
    pub run: RunId,
    /// The operation's sequence number (0 when nothing needed writing).
    pub seq: i64,
    /// Files and what happened to them (`modified`, `created`, `deleted`, `merged`,
    /// `already applied`).
    pub files: Vec<(String, String)>,
}

/// What an undo (or redo) did.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct UndoReport {
    /// The run.
    pub run: RunId,
    /// `undo` or `redo`.
    pub kind: String,
    /// The operation's sequence number.
    pub seq: i64,
    /// Files restored.
    pub files: Vec<String>,
}

fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
        .unwrap_or(0)
}

fn read_current(path: &Path) -> Result<Option<(Vec<u8>, u32)>> {
    match std::fs::symlink_metadata(path) {
        Ok(m) if m.file_type().is_symlink() => Err(Error::Conflict(format!(
            "{} is a symlink in your working tree; applying through symlinks is not supported",
            path.display()
        ))),
        Ok(m) if m.is_dir() => Err(Error::Conflict(format!(
            "{} is a directory in your working tree",
            path.display()
        ))),
        Ok(m) => {
            let bytes = std::fs::read(path).map_err(Error::io("cannot read", path))?;
            Ok(Some((bytes, m.permissions().mode() & 0o7777)))
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(Error::io("cannot read", path)(e)),
    }
}

/// Permission bits after a change from git mode `old` to `new` on a file with `current`
/// bits (0o644 for a new file).
fn permissions(current: Option<u32>, old: Option<u32>, new: Option<u32>) -> u32 {
    let p = current.unwrap_or(0o644);
    match (old, new) {
        (_, Some(0o100755)) if old != Some(0o100755) => p | ((p & 0o444) >> 2),
        (Some(0o100755), Some(0o100644)) => p & !0o111,
        (None, Some(0o100755)) => 0o755,
        _ => p,
    }
}

/// Finishes interrupted operations in `repo` and brings the store up to date. Every
/// review, apply and undo calls it first.
pub fn recover(store: &dyn ReviewStore, repo: &Path) -> Result<Vec<Manifest>> {
    let done = journal::recover_pending(repo)?;
    for (op, m) in &done {
        record_op(store, op, m, "done")?;
    }
    Ok(done.into_iter().map(|(_, m)| m).collect())
}

fn record_op(store: &dyn ReviewStore, op: &Path, m: &Manifest, state: &str) -> Result<()> {
    let now = now_ms();
    store.put_change_op(ChangeOpRecord {
        run_id: m.run.clone(),
        seq: m.seq,
        kind: m.kind.as_str().into(),
        state: state.into(),
        journal: op.to_string_lossy().into_owned(),
        files: i64::try_from(m.entries.len()).unwrap_or(i64::MAX),
        created_at: now,
        finished_at: (state == "done").then_some(now),
    })?;
    if state == "done" {
        let cs_state = match m.kind {
            OpKind::Apply | OpKind::Redo => "applied",
            OpKind::Undo => "undone",
        };
        set_state(store, &m.run, cs_state, None)?;
    }
    Ok(())
}

fn set_state(
    store: &dyn ReviewStore,
    run: &RunId,
    state: &str,
    review: Option<String>,
) -> Result<()> {
    match store.change_set(run.as_str()) {
        Ok(mut rec) => {
            rec.state = state.into();
            if review.is_some() {
                rec.review = review;
            }
            rec.updated_at = now_ms();
            store.put_change_set(rec)?;
            Ok(())
        }
        // A dev run without a recorded change set: nothing to update.
        Err(trellis_store::Error::RunNotFound(_)) => Ok(()),
        Err(e) => Err(e.into()),
    }
}

/// Records a review outcome that does not apply anything (changes requested, rejected).
pub fn record_outcome(
    store: &dyn ReviewStore,
    rec: &ChangeSetRecord,
    outcome: &ReviewOutcome,
) -> Result<()> {
    let state = match outcome {
        ReviewOutcome::Approved { .. } => "approved",
        ReviewOutcome::ChangesRequested { .. } => "changes_requested",
        ReviewOutcome::Rejected { .. } => "rejected",
    };
    let json = serde_json::to_string(outcome).map_err(|source| Error::Json {
        what: "encode the review outcome".into(),
        source,
    })?;
    set_state(store, &rec.run_id, state, Some(json))
}

/// The last completed operation of the run, if any.
fn last_done(repo: &Path, run: &RunId) -> Result<Option<(PathBuf, Manifest)>> {
    let mut last = None;
    for op in journal::list_ops(repo, run)? {
        if journal::is_done(&op) {
            let m = journal::read_manifest(&op)?;
            last = Some((op, m));
        }
    }
    Ok(last)
}

fn next_seq(repo: &Path, run: &RunId) -> Result<i64> {
    Ok(i64::try_from(journal::list_ops(repo, run)?.len()).unwrap_or(i64::MAX) + 1)
}

/// Applies the approved parts of `set` onto the user's working tree at `rec.repo`.
///
/// Refuses (changing nothing) when the run is already applied, or when a file the
/// approved change touches was changed by the user on the same lines since the run's
/// base; edits to other lines are kept (3-way merge).
pub fn apply(
    store: &dyn ReviewStore,
    rec: &ChangeSetRecord,
    set: &ChangeSet,
    selection: &Selection,
) -> Result<ApplyReport> {
    let repo = PathBuf::from(&rec.repo);
    recover(store, &repo)?;
    refuse_if_applied(&repo, &rec.run_id)?;
    let mut plan = ApplyPlan::default();
    for f in &set.files {
        plan.add_file(&repo, f, selection);
    }
    plan.refuse_problems()?;
    let seq = if plan.files.is_empty() {
        0
    } else {
        write_apply(store, &repo, &rec.run_id, plan.files, plan.created_dirs)?
    };
    record_approval(store, rec, set, selection, seq)?;
    Ok(ApplyReport {
        run: rec.run_id.clone(),
        seq,
        files: plan.report,
    })
}

/// Refuses to apply a run whose last completed operation applied it.
fn refuse_if_applied(repo: &Path, run: &RunId) -> Result<()> {
    if let Some((_, m)) = last_done(repo, run)?
        && m.kind != OpKind::Undo
    {
        return Err(Error::Failed(format!(
            "run {} is already applied; `trellis undo {}` first to apply it again",
            run,
            run.short()
        )));
    }
    Ok(())
}

/// What an apply will write, worked out file by file before anything is written.
#[derive(Default)]
struct ApplyPlan {
    /// The files to write: (path, what is there now, what to put there).
    files: Vec<(String, Side, Side)>,
    /// Files and what happens to them, for the report.
    report: Vec<(String, String)>,
    /// Why files cannot be applied.
    problems: Vec<String>,
    /// Directories the apply creates (relative to the repository).
    created_dirs: BTreeSet<String>,
}

impl ApplyPlan {
    /// Works out what applying the approved part of one file's change writes, or why it
    /// cannot.
    fn add_file(&mut self, repo: &Path, f: &FileChange, selection: &Selection) {
        let approved: BTreeSet<usize> = match selection.for_file(f) {
            FileSelection::None => return,
            FileSelection::All => (0..f.hunks.len().max(1)).collect(),
            FileSelection::Hunks(h) => h,
        };
        if f.old_mode == Some(0o120000) || f.new_mode == Some(0o120000) {
            self.problems
                .push(format!("{}: symlink changes cannot be applied yet", f.path));
            return;
        }
        let all = selection.for_file(f) == FileSelection::All;
        let target = if all {
            f.new.clone()
        } else {
            f.with_hunks(&approved)
        };
        let path = repo.join(&f.path);
        let current = match read_current(&path) {
            Ok(c) => c,
            Err(e) => {
                self.problems.push(e.to_string());
                return;
            }
        };
        match merge_file(f, target, current.as_ref()) {
            FileOutcome::AlreadyApplied => {
                self.report
                    .push((f.path.clone(), "already applied".to_owned()));
            }
            FileOutcome::Problem(problem) => self.problems.push(problem),
            FileOutcome::Write { after, what } => {
                if current.is_none() {
                    self.note_created_dirs(repo, &path);
                }
                self.report.push((f.path.clone(), what.to_owned()));
                self.files.push((f.path.clone(), current, after));
            }
        }
    }

    /// Records the missing directories above `path`, a file the apply creates.
    fn note_created_dirs(&mut self, repo: &Path, path: &Path) {
        let mut dir = path.parent();
        while let Some(d) = dir {
            if d == repo || d.exists() {
                break;
            }
            if let Ok(rel) = d.strip_prefix(repo) {
                self.created_dirs.insert(rel.to_string_lossy().into_owned());
            }
            dir = d.parent();
        }
    }

    /// Refuses the whole apply when any file cannot be applied.
    fn refuse_problems(&self) -> Result<()> {
        if self.problems.is_empty() {
            return Ok(());
        }
        Err(Error::Conflict(format!(
            "nothing was applied: the working tree changed under the approved change.\n  {}\n\
             Commit or stash your edits to those lines (or reject those hunks) and review again.",
            self.problems.join("\n  ")
        )))
    }
}

/// What applying one file's approved change comes to.
enum FileOutcome {
    /// The working tree already has it: nothing to write.
    AlreadyApplied,
    /// Write `after`; `what` happens to the file (`modified`, `created`, `deleted`,
    /// `merged`).
    Write { after: Side, what: &'static str },
    /// It cannot be applied, and why.
    Problem(String),
}

/// Merges the approved `target` of file `f` into what the working tree has now
/// (`current`, with its permission bits).
fn merge_file(
    f: &FileChange,
    target: Option<Vec<u8>>,
    current: Option<&(Vec<u8>, u32)>,
) -> FileOutcome {
    let cur_bytes = current.map(|(b, _)| b.as_slice());
    let cur_mode = current.map(|(_, m)| *m);
    let mode = permissions(cur_mode, f.old_mode, f.new_mode);
    match merge(f.old.as_deref(), cur_bytes, target.as_deref()) {
        Merged::AlreadyThere if cur_mode == Some(mode) || target.is_none() => {
            FileOutcome::AlreadyApplied
        }
        Merged::AlreadyThere => FileOutcome::Write {
            after: target.map(|t| (t, mode)),
            what: "modified",
        },
        Merged::Delete => FileOutcome::Write {
            after: None,
            what: "deleted",
        },
        Merged::Clean(bytes) => {
            let what = if cur_bytes != f.old.as_deref() {
                "merged"
            } else if current.is_none() {
                "created"
            } else {
                "modified"
            };
            FileOutcome::Write {
                after: Some((bytes, mode)),
                what,
            }
        }
        Merged::Conflict(overlaps) => FileOutcome::Problem(conflict_problem(&f.path, &overlaps)),
        Merged::Incompatible => FileOutcome::Problem(format!(
            "{}: you changed (or created/deleted) this file since the run started, and it \
             cannot be merged line by line",
            f.path
        )),
    }
}

/// The problem of a file whose approved change edits lines the user changed too.
fn conflict_problem(path: &str, overlaps: &[Overlap]) -> String {
    let spans: Vec<String> = overlaps
        .iter()
        .map(|o| {
            format!(
                "you changed line(s) {}-{} and the approved change edits line(s) {}-{} (of the run's base)",
                o.user.0, o.user.1.max(o.user.0), o.ours.0, o.ours.1.max(o.ours.0)
            )
        })
        .collect();
    format!("{}: {}", path, spans.join("; "))
}

/// Writes the planned files through a journalled apply operation, recorded in the store;
/// returns its sequence number.
fn write_apply(
    store: &dyn ReviewStore,
    repo: &Path,
    run: &RunId,
    files: Vec<(String, Side, Side)>,
    created_dirs: BTreeSet<String>,
) -> Result<i64> {
    let seq = next_seq(repo, run)?;
    // Deepest first, so removing them on undo works bottom-up.
    let mut dirs: Vec<String> = created_dirs.into_iter().collect();
    dirs.sort_by_key(|d| std::cmp::Reverse(d.matches('/').count()));
    let op = journal::prepare(repo, run, seq, OpKind::Apply, files, dirs, Vec::new())?;
    let m = journal::read_manifest(&op)?;
    record_op(store, &op, &m, "pending")?;
    journal::execute(&op)?;
    record_op(store, &op, &m, "done")?;
    Ok(seq)
}

/// Records the approval (and whether it was partial) on the change set: `applied` when
/// operation `seq` wrote something, else `approved`.
fn record_approval(
    store: &dyn ReviewStore,
    rec: &ChangeSetRecord,
    set: &ChangeSet,
    selection: &Selection,
    seq: i64,
) -> Result<()> {
    let outcome = ReviewOutcome::Approved {
        partial: selection != &Selection::all(set),
        selection: selection.clone(),
    };
    let json = serde_json::to_string(&outcome).map_err(|source| Error::Json {
        what: "encode the review outcome".into(),
        source,
    })?;
    set_state(
        store,
        &rec.run_id,
        if seq > 0 { "applied" } else { "approved" },
        Some(json),
    )
}

/// Reverses the run's last apply (or redo) byte for byte; on an undone run, re-applies it
/// (undoing the undo). Refuses if the user changed any of those files since.
pub fn undo(store: &dyn ReviewStore, rec: &ChangeSetRecord) -> Result<UndoReport> {
    let repo = PathBuf::from(&rec.repo);
    recover(store, &repo)?;
    let Some((op, m)) = last_done(&repo, &rec.run_id)? else {
        return Err(Error::Failed(format!(
            "run {} has not been applied; there is nothing to undo",
            rec.run_id
        )));
    };
    let mut changed = Vec::new();
    let mut files: Vec<(String, Side, Side)> = Vec::new();
    for e in &m.entries {
        let path = repo.join(&e.path);
        let current = read_current(&path)?;
        let expected = journal::read_side(&op, &e.after)?;
        if current.as_ref().map(|(b, _)| b) != expected.as_ref() {
            changed.push(e.path.clone());
            continue;
        }
        let before = journal::read_side(&op, &e.before)?;
        files.push((
            e.path.clone(),
            current,
            before.map(|b| (b, e.before.mode.unwrap_or(0o644))),
        ));
    }
    if !changed.is_empty() {
        return Err(Error::Conflict(format!(
            "cannot {} run {}: these files changed since it was {}: {}. Undoing would lose \
             those edits; revert them first.",
            if m.kind == OpKind::Undo {
                "redo"
            } else {
                "undo"
            },
            rec.run_id.short(),
            if m.kind == OpKind::Undo {
                "undone"
            } else {
                "applied"
            },
            changed.join(", ")
        )));
    }
    let kind = if m.kind == OpKind::Undo {
        OpKind::Redo
    } else {
        OpKind::Undo
    };
    let remove_dirs = if kind == OpKind::Undo {
        m.created_dirs.clone()
    } else {
        Vec::new()
    };
    let seq = next_seq(&repo, &rec.run_id)?;
    let paths = files.iter().map(|(p, _, _)| p.clone()).collect();
    let new_op = journal::prepare(
        &repo,
        &rec.run_id,
        seq,
        kind,
        files,
        m.created_dirs.clone(),
        remove_dirs,
    )?;
    let nm = journal::read_manifest(&new_op)?;
    record_op(store, &new_op, &nm, "pending")?;
    journal::execute(&new_op)?;
    record_op(store, &new_op, &nm, "done")?;
    Ok(UndoReport {
        run: rec.run_id.clone(),
        kind: kind.as_str().into(),
        seq,
        files: paths,
    })
}
