//! The end of a turn that changed files: the run's change set (in its worktree) reaches the
//! user's files only when accepted — a permission request showing the diffs (`ask`), at
//! once (`auto-edit`), or never (`read-only`) — through the runtime service's review ops
//! (journaled apply, undo). `/undo` reverses the session's last apply.

use std::path::Path;

use agent_client_protocol::v1::schema as acp;
use serde_json::Value;
use trellis_protocol::{Op, ReviewAction, RunId};

use super::Turn;
use crate::config::Autonomy;
use crate::{AcpAgent, config};

/// The slash command that undoes (or redoes) the session's last apply.
pub(crate) const UNDO: &str = "/undo";

/// What became of a change set.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Offer {
    /// No change set, or nothing in it.
    Nothing,
    /// Applied to the user's files.
    Applied,
    /// Left in the run's worktree.
    Kept,
    /// The turn was cancelled while asking.
    Cancelled,
}

/// ACP diffs of a change set (the `review show` result's `changeSet`): per file, its hunks'
/// old and new lines (with their context), the path absolute under `root`.
pub fn change_set_diffs(change_set: &Value, root: &Path) -> Vec<acp::ToolCallContent> {
    let Some(files) = change_set["files"].as_array() else {
        return Vec::new();
    };
    files
        .iter()
        .filter_map(|f| {
            let path = root.join(f["path"].as_str()?);
            let status = f["status"].as_str().unwrap_or("modified");
            let (mut old, mut new) = (String::new(), String::new());
            for (i, hunk) in f["hunks"].as_array().into_iter().flatten().enumerate() {
                if i > 0 {
                    old.push_str("…\n");
                    new.push_str("…\n");
                }
                for line in hunk["lines"].as_array().into_iter().flatten() {
                    let text = line["text"].as_str().unwrap_or_default();
                    match line["kind"].as_str() {
                        Some("removed") => old.push_str(&format!("{text}\n")),
                        Some("added") => new.push_str(&format!("{text}\n")),
                        _ => {
                            old.push_str(&format!("{text}\n"));
                            new.push_str(&format!("{text}\n"));
                        }
                    }
                }
            }
            let old = (status != "added").then_some(old);
            Some(acp::ToolCallContent::from(
                acp::Diff::new(path, new).old_text(old),
            ))
        })
        .collect()
}

/// The changed files' paths of a change set.
fn files(change_set: &Value) -> Vec<String> {
    change_set["files"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|f| f["path"].as_str().map(str::to_owned))
        .collect()
}

impl Turn {
    /// Applies the run's change set to the user's files; the message says what happened.
    async fn apply(&self, run: &RunId, n: usize) -> bool {
        let applied = self
            .service
            .call(Op::Review {
                run: run.to_string(),
                action: ReviewAction::Apply { accept: None },
            })
            .await;
        match applied {
            Ok(v) if v["outcome"] == "applied" => {
                self.message(format!(
                    "\nApplied the run's changes to your files ({n} file{}); `{UNDO}` reverses them.\n",
                    if n == 1 { "" } else { "s" }
                ));
                true
            }
            Ok(v) => {
                self.message(format!("\nThe changes were not applied: {v}\n"));
                false
            }
            Err(e) => {
                self.message(format!("\nThe changes could not be applied: {e}\n"));
                false
            }
        }
    }

    /// Offers the run's change set per the session's autonomy.
    pub(crate) async fn offer_changes(
        &self,
        agent: &AcpAgent,
        run: &RunId,
        autonomy: Autonomy,
    ) -> Offer {
        let Ok(show) = self
            .service
            .call(Op::Review {
                run: run.to_string(),
                action: ReviewAction::Show,
            })
            .await
        else {
            return Offer::Nothing;
        };
        let set = &show["changeSet"];
        let paths = files(set);
        if paths.is_empty() {
            return Offer::Nothing;
        }
        let n = paths.len();
        let kept = |why: &str| {
            self.message(format!(
                "\nThe changes stay in the run's worktree ({why}): review them with `trellis review {run}`.\n"
            ));
            Offer::Kept
        };
        match autonomy {
            Autonomy::ReadOnly => return kept("read-only session"),
            Autonomy::AutoEdit => {
                return if self.apply(run, n).await {
                    Offer::Applied
                } else {
                    Offer::Kept
                };
            }
            Autonomy::Ask => {}
        }
        let id = acp::ToolCallId::new(format!("{run}/apply"));
        let title = format!(
            "Apply the changes to your files: {}",
            if n <= 3 {
                paths.join(", ")
            } else {
                format!("{n} files")
            }
        );
        let diffs = change_set_diffs(set, &self.root);
        let locations: Vec<acp::ToolCallLocation> = paths
            .iter()
            .map(|p| acp::ToolCallLocation::new(self.root.join(p)))
            .collect();
        self.send(acp::SessionUpdate::ToolCall(
            acp::ToolCall::new(id.clone(), title.clone())
                .kind(acp::ToolKind::Edit)
                .status(acp::ToolCallStatus::Pending)
                .content(diffs.clone())
                .locations(locations.clone()),
        ));
        let fields = acp::ToolCallUpdateFields::new()
            .title(title)
            .kind(acp::ToolKind::Edit)
            .status(acp::ToolCallStatus::Pending)
            .content(diffs)
            .locations(locations);
        let options = vec![
            acp::PermissionOption::new(
                "allow_once",
                "Apply to my files",
                acp::PermissionOptionKind::AllowOnce,
            ),
            acp::PermissionOption::new(
                "allow_always",
                "Apply, and from now on without asking (auto-edit)",
                acp::PermissionOptionKind::AllowAlways,
            ),
            acp::PermissionOption::new(
                "reject_once",
                "Keep them in the run's worktree",
                acp::PermissionOptionKind::RejectOnce,
            ),
        ];
        let outcome = self.ask_permission(&id, fields, options).await;
        let status = |s| {
            acp::SessionUpdate::ToolCallUpdate(acp::ToolCallUpdate::new(
                id.clone(),
                acp::ToolCallUpdateFields::new().status(s),
            ))
        };
        let chosen = match outcome {
            acp::RequestPermissionOutcome::Selected(s) => s.option_id.0.to_string(),
            _ => {
                self.send(status(acp::ToolCallStatus::Failed));
                kept("not answered");
                return Offer::Cancelled;
            }
        };
        if !chosen.starts_with("allow") {
            self.send(status(acp::ToolCallStatus::Failed));
            return kept("not accepted");
        }
        if chosen == "allow_always"
            && let Err(e) = agent
                .set_config(&self.session, config::AUTONOMY, Autonomy::AutoEdit.id())
                .await
        {
            tracing::warn!("setting auto-edit: {e}");
        }
        if self.apply(run, n).await {
            self.send(status(acp::ToolCallStatus::Completed));
            Offer::Applied
        } else {
            self.send(status(acp::ToolCallStatus::Failed));
            Offer::Kept
        }
    }
}

impl AcpAgent {
    /// `/undo`: reverses the last change set applied in the session (or re-applies the last
    /// one undone); the answer says which.
    pub(crate) async fn undo(&self, turn: &Turn) {
        let service = turn.service.clone();
        let key = turn.session.0.to_string();
        let found = tokio::task::spawn_blocking(move || -> Option<(RunId, String)> {
            let turns = service.client_turns(&key).ok()?;
            turns.iter().rev().find_map(|t| {
                let rec = service.change_set_record(t.run.as_str()).ok()?;
                matches!(rec.state.as_str(), "applied" | "undone")
                    .then(|| (t.run.clone(), rec.state))
            })
        })
        .await
        .ok()
        .flatten();
        let Some((run, state)) = found else {
            turn.message("Nothing to undo: no change set of this session was applied.");
            return;
        };
        let done = turn
            .service
            .call(Op::Review {
                run: run.to_string(),
                action: ReviewAction::Undo,
            })
            .await;
        match done {
            Ok(v) => {
                let files = v["undo"]["files"]
                    .as_array()
                    .map(|f| {
                        f.iter()
                            .filter_map(Value::as_str)
                            .collect::<Vec<_>>()
                            .join(", ")
                    })
                    .unwrap_or_default();
                let what = if state == "applied" {
                    "Undid"
                } else {
                    "Re-applied"
                };
                turn.message(format!("{what} the changes of run {run}: {files}"));
            }
            Err(e) => turn.message(format!("Could not undo run {run}: {e}")),
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;
    use serde_json::json;

    #[test]
    fn hunks_become_diffs_with_context() {
        let set = json!({"files": [
            {"path": "a.md", "status": "modified", "hunks": [
                {"lines": [
                    {"kind": "context", "text": "# A"},
                    {"kind": "removed", "text": "old"},
                    {"kind": "added", "text": "new"}
                ]},
                {"lines": [{"kind": "added", "text": "tail"}]}
            ]},
            {"path": "b.md", "status": "added", "hunks": [
                {"lines": [{"kind": "added", "text": "hello"}]}
            ]}
        ]});
        let d = change_set_diffs(&set, Path::new("/repo"));
        let v = serde_json::to_value(&d).unwrap();
        assert_eq!(v[0]["type"], "diff");
        assert_eq!(v[0]["path"], "/repo/a.md");
        assert_eq!(v[0]["oldText"], "# A\nold\n…\n");
        assert_eq!(v[0]["newText"], "# A\nnew\n…\ntail\n");
        assert_eq!(v[1]["path"], "/repo/b.md");
        assert!(v[1].get("oldText").is_none() || v[1]["oldText"].is_null());
        assert_eq!(v[1]["newText"], "hello\n");
        assert_eq!(files(&set), ["a.md", "b.md"]);
        assert!(change_set_diffs(&json!({}), Path::new("/")).is_empty());
    }
}
