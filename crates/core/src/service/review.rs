//! Review ops: a run's change set (its branch against its base, in hunks), the selection of
//! hunks to accept, apply onto the user's working tree, reject, undo.

use std::collections::BTreeSet;
use std::path::Path;
use std::sync::Arc;

use serde_json::{Value, json};
use trellis_protocol::{FileHunks, NodeId, ReviewAction, RunId, SubmissionId, WorkspaceEvent};
use trellis_store::{ChangeSetRecord, Store};
use trellis_tools::git::Git;
use trellis_tools::review::{
    self, ChangeSet, FileSelection, ReviewComment, ReviewOutcome, Selection,
};
use trellis_tools::worktree::RunWorktree;
use trellis_tools::worktree::remote::Remote;

use super::{OpError, OpResult, Service, blocking, lock};

/// Loads the run's change set (finishing any interrupted apply first). With a git remote
/// (`remote`, `[repository] remote`) the run's branch is fetched from it — a worker in
/// another clone may have written it — and the change set is this workspace's (`repo`) to
/// apply and undo.
pub(crate) fn load_change_set(
    store: &Store,
    run: &str,
    repo: &Path,
    remote: Option<&Remote>,
) -> Result<(ChangeSetRecord, ChangeSet), OpError> {
    let mut rec = store
        .change_set(run)
        .map_err(|e| OpError::not_found(format!("no change set for run `{run}`: {e}")))?;
    let head = match remote {
        Some(remote) => {
            rec.repo = repo.to_string_lossy().into_owned();
            let here = RunWorktree::path_for(repo, &rec.run_id);
            rec.worktree = Some(here.to_string_lossy().into_owned());
            let git = Git::new(repo);
            match remote.fetch(&git, &rec.run_id)? {
                Some(tip) => tip,
                // Not pushed (yet): the branch here, if this clone has it.
                None => RunWorktree::from_record(&rec).head()?,
            }
        }
        None => RunWorktree::from_record(&rec).head()?,
    };
    review::recover(store, Path::new(&rec.repo))?;
    let set = review::load(&Git::new(&rec.repo), &rec.run_id, &rec.base_commit, &head)?;
    Ok((rec, set))
}

impl Service {
    pub(crate) async fn review(
        self: &Arc<Self>,
        sub: &SubmissionId,
        run: &str,
        action: ReviewAction,
    ) -> OpResult {
        // Change sets exist for runs that wrote and for sandbox worktrees (which have no
        // run log); a run that never wrote has none (`RunSpace`).
        let run = match self.runtime.store().change_set(run) {
            Ok(rec) => rec.run_id,
            Err(e) => match self.run_id(run) {
                Ok(id) => return unchanged(&id, &action, self.runtime.store().as_ref()),
                Err(_) => return Err(e.into()),
            },
        };
        if !matches!(action, ReviewAction::Show) && self.is_live(&run) {
            return Err(OpError::conflict(format!(
                "run {run} is still executing; review its change set when it has stopped"
            )));
        }
        let store = self.runtime.store().clone();
        let key = run.to_string();
        let (repo, remote) = (
            self.runtime.repo().to_owned(),
            self.runtime.remote().cloned(),
        );
        let (rec, set) =
            blocking(move || load_change_set(&*store, &key, &repo, remote.as_ref())).await?;
        let selection = lock(&self.selections)
            .get(&run)
            .cloned()
            .unwrap_or_else(|| Selection::all(&set));
        let result = match action {
            ReviewAction::Show => {
                let store: &Store = self.runtime.store().as_ref();
                return Ok(json!({
                    "run": run,
                    "state": rec.state,
                    "review": rec.review.as_deref().and_then(|r| serde_json::from_str::<Value>(r).ok()),
                    "comments": review::comments(store, &run)?,
                    "agentReview": agent_review(store, &run)?,
                    "changeSet": set,
                    "selection": selection,
                }));
            }
            ReviewAction::Select {
                file,
                hunks,
                accept,
            } => {
                let selection = select(selection, &set, &file, hunks, accept)?;
                lock(&self.selections).insert(run.clone(), selection.clone());
                json!({ "run": run, "selection": selection })
            }
            ReviewAction::Apply { accept } => {
                let store = self.runtime.store().clone();
                let sel = match accept {
                    Some(files) => accepted(&set, files)?,
                    None => selection.clone(),
                };
                let out = blocking(move || -> Result<Value, OpError> {
                    if sel.is_empty(&set) {
                        review::record_outcome(
                            &*store,
                            &rec,
                            &ReviewOutcome::Rejected {
                                reason: Some("nothing approved".into()),
                            },
                        )?;
                        return Ok(json!({ "outcome": "rejected", "reason": "nothing approved" }));
                    }
                    let report = review::apply(&*store, &rec, &set, &sel)?;
                    let _ = RunWorktree::from_record(&rec).remove();
                    trellis_runtime::nodes::discard(Path::new(&rec.repo), &rec.run_id);
                    Ok(json!({ "outcome": "applied", "applied": report }))
                })
                .await?;
                lock(&self.selections).remove(&run);
                out
            }
            ReviewAction::Reject { comment } => {
                let store = self.runtime.store().clone();
                blocking(move || -> Result<Value, OpError> {
                    review::record_outcome(
                        &*store,
                        &rec,
                        &ReviewOutcome::Rejected { reason: comment },
                    )?;
                    let _ = RunWorktree::from_record(&rec).remove();
                    trellis_runtime::nodes::discard(Path::new(&rec.repo), &rec.run_id);
                    Ok(json!({ "outcome": "rejected" }))
                })
                .await?
            }
            ReviewAction::Undo => {
                let store = self.runtime.store().clone();
                blocking(move || -> Result<Value, OpError> {
                    let report = review::undo(&*store, &rec)?;
                    Ok(json!({ "outcome": "undone", "undo": report }))
                })
                .await?
            }
        };
        let state = self
            .runtime
            .store()
            .change_set(run.as_str())
            .map(|r| r.state)
            .unwrap_or_default();
        self.bus.workspace(
            Some(sub.clone()),
            WorkspaceEvent::ReviewChanged {
                run: run.clone(),
                state,
            },
        );
        Ok(result)
    }

    /// Records that changes were requested on the run's change set (for `stage`, if named).
    pub(crate) fn review_record_changes(
        &self,
        run: &RunId,
        stage: Option<&NodeId>,
        feedback: &str,
    ) -> Result<(), OpError> {
        let rec = self.runtime.store().change_set(run.as_str())?;
        review::record_outcome(
            &**self.runtime.store(),
            &rec,
            &ReviewOutcome::ChangesRequested {
                comments: vec![ReviewComment::general(feedback)],
                stage: stage.map(NodeId::to_string),
            },
        )?;
        Ok(())
    }
}

/// The review of a run that changed nothing (no agent of it edited, so it has no worktree
/// and no change set): shown empty; nothing to apply, reject or undo.
fn unchanged(run: &RunId, action: &ReviewAction, store: &Store) -> OpResult {
    if !matches!(action, ReviewAction::Show) {
        return Err(OpError::conflict(format!(
            "run {run} changed no files (none of its agents edited), so there is nothing to \
             apply, select, reject or undo"
        )));
    }
    let empty = review::ChangeSet {
        run: run.clone(),
        base: String::new(),
        head: String::new(),
        files: Vec::new(),
    };
    Ok(json!({
        "run": run,
        "state": "unchanged",
        "review": null,
        "comments": review::comments(store, run)?,
        "agentReview": agent_review(store, run)?,
        "changeSet": empty,
        "selection": Selection::default(),
    }))
}

/// The review agent's latest verdict (`complete_review`), with its status.
fn agent_review(store: &Store, run: &RunId) -> Result<Option<Value>, OpError> {
    Ok(store
        .artifacts(run)?
        .into_iter()
        .filter(|a| a.kind == trellis_runtime::stage_tools::REVIEW_KIND)
        .max_by_key(|a| a.version)
        .map(|a| {
            let mut v = serde_json::from_str::<Value>(&a.content).unwrap_or_default();
            if let Value::Object(m) = &mut v {
                m.insert("artifact".into(), json!(a.id));
                m.insert("version".into(), json!(a.version));
                m.insert("status".into(), json!(a.status));
            }
            v
        }))
}

/// The selection that accepts exactly `files` (and rejects the rest).
fn accepted(set: &ChangeSet, files: Vec<FileHunks>) -> Result<Selection, OpError> {
    let mut selection = Selection::default();
    for f in set.files.iter() {
        selection.files.insert(f.path.clone(), FileSelection::None);
    }
    for f in files {
        selection = select(selection, set, &f.file, f.hunks, true)?;
    }
    Ok(selection)
}

/// Accepts or rejects a file or some of its hunks in `selection`.
fn select(
    mut selection: Selection,
    set: &ChangeSet,
    file: &str,
    hunks: Option<Vec<usize>>,
    accept: bool,
) -> Result<Selection, OpError> {
    let Some(f) = set.files.iter().find(|f| f.path == file) else {
        let paths: Vec<&str> = set.files.iter().map(|f| f.path.as_str()).collect();
        return Err(OpError::not_found(format!(
            "the change set has no file `{file}` (files: {})",
            paths.join(", ")
        )));
    };
    let count = f.hunks.len().max(1);
    let mut chosen: BTreeSet<usize> = match selection.for_file(f) {
        FileSelection::All => (0..count).collect(),
        FileSelection::None => BTreeSet::new(),
        FileSelection::Hunks(h) => h,
    };
    match hunks {
        None => {
            if accept {
                chosen = (0..count).collect();
            } else {
                chosen.clear();
            }
        }
        Some(list) => {
            if let Some(bad) = list.iter().find(|h| **h >= count) {
                return Err(OpError::new(format!(
                    "`{file}` has {count} hunk(s), numbered 0 to {}; there is no hunk {bad}",
                    count - 1
                )));
            }
            for h in list {
                if accept {
                    chosen.insert(h);
                } else {
                    chosen.remove(&h);
                }
            }
        }
    }
    let fs = if chosen.len() == count {
        FileSelection::All
    } else if chosen.is_empty() {
        FileSelection::None
    } else {
        FileSelection::Hunks(chosen)
    };
    selection.files.insert(file.to_owned(), fs);
    Ok(selection)
}
