//! Pure mappings from Trellis service events to ACP `session/update` payloads: the plan of
//! a run (its planned stages), agent text and thinking, and tool calls.

use std::path::{Path, PathBuf};

use agent_client_protocol::v1::schema as acp;
use serde_json::Value;
use trellis_protocol::{
    EventKind, NodeState, ServiceEvent, ServiceEventBody, SessionEvent, ToolStatus,
};

/// The planned stages of a run and how far each got: the ACP `plan` of a prompt turn.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct StagePlan {
    stages: Vec<Stage>,
}

#[derive(Clone, Debug, PartialEq)]
struct Stage {
    /// The stage's id in the workflow.
    id: String,
    /// Its name: the id of its node in the run's graph.
    name: String,
    status: acp::PlanEntryStatus,
    /// Skipped or pruned: shown as completed, with a note.
    note: Option<&'static str>,
}

impl StagePlan {
    /// The planned stages of a `startRun` result's `plan` (`planned[].context.stage_name`,
    /// the node's id, and `stage_id`), all pending.
    pub fn from_plan(plan: &Value) -> Self {
        let stages = plan["planned"]
            .as_array()
            .map(|planned| {
                planned
                    .iter()
                    .filter_map(|p| {
                        let ctx = &p["context"];
                        let id = ctx["stage_id"].as_str()?;
                        let name = ctx["stage_name"].as_str().unwrap_or(id);
                        Some(Stage {
                            id: id.to_owned(),
                            name: name.to_owned(),
                            status: acp::PlanEntryStatus::Pending,
                            note: None,
                        })
                    })
                    .collect()
            })
            .unwrap_or_default();
        Self { stages }
    }

    /// The planned stages of `plan` as a run's recorded `events` left them.
    pub fn replayed(plan: &Value, events: &[ServiceEvent]) -> Self {
        let mut out = Self::from_plan(plan);
        for e in events {
            if let ServiceEventBody::Run(kind) = &e.event {
                out.apply(kind);
            }
        }
        out
    }

    /// Whether the plan has no stage.
    pub fn is_empty(&self) -> bool {
        self.stages.is_empty()
    }

    /// Applies a run event; true when an entry changed.
    pub fn apply(&mut self, kind: &EventKind) -> bool {
        let EventKind::NodeTransition { node, to, .. } = kind else {
            return false;
        };
        let node = node.as_str();
        // A stage's node is named after the stage (its fan-out children `<stage>/…`).
        let of = |key: &str| {
            node == key
                || node
                    .strip_prefix(key)
                    .is_some_and(|rest| rest.starts_with('/'))
        };
        let Some(stage) = self.stages.iter_mut().find(|s| of(&s.name) || of(&s.id)) else {
            return false;
        };
        let (status, note) = match to {
            NodeState::Running | NodeState::WaitingInput => {
                (acp::PlanEntryStatus::InProgress, None)
            }
            NodeState::Completed => (acp::PlanEntryStatus::Completed, None),
            NodeState::Skipped => (acp::PlanEntryStatus::Completed, Some("skipped")),
            NodeState::Pruned => (acp::PlanEntryStatus::Completed, Some("pruned")),
            // ACP has no failed status: the stage is over, saying it failed; a retry shows
            // it in progress again.
            NodeState::Failed => (acp::PlanEntryStatus::Completed, Some("failed")),
            // A ready node has not started yet.
            NodeState::Ready => return false,
        };
        if stage.status == status && stage.note == note {
            return false;
        }
        stage.status = status;
        stage.note = note;
        true
    }

    /// The ACP plan: every entry, as the protocol wants the whole list each time.
    pub fn to_acp(&self) -> acp::Plan {
        acp::Plan::new(
            self.stages
                .iter()
                .map(|s| {
                    let content = match s.note {
                        Some(note) => format!("{} ({note})", s.name),
                        None => s.name.clone(),
                    };
                    acp::PlanEntry::new(content, acp::PlanEntryPriority::Medium, s.status.clone())
                })
                .collect(),
        )
    }
}

/// The ACP tool kind of a Trellis tool.
pub fn tool_kind(name: &str) -> acp::ToolKind {
    match name {
        "read_file" | "list_directory" | "git_status" | "git_diff" | "git_log" => {
            acp::ToolKind::Read
        }
        "edit_file" | "multi_edit" | "apply_patch" | "write_file" => acp::ToolKind::Edit,
        "grep" | "glob_search" => acp::ToolKind::Search,
        "shell" => acp::ToolKind::Execute,
        "take_note" | "ask_questions" => acp::ToolKind::Think,
        n if n.contains("search") || n.contains("retriev") => acp::ToolKind::Search,
        n if n.contains("fetch") => acp::ToolKind::Fetch,
        _ => acp::ToolKind::Other,
    }
}

/// The workspace path of a tool's `path` argument (absolute, as ACP wants).
fn abs(root: &Path, path: &str) -> PathBuf {
    let p = Path::new(path);
    if p.is_absolute() {
        p.to_path_buf()
    } else {
        root.join(p.strip_prefix("./").unwrap_or(p))
    }
}

/// A one-line title: the tool and what it works on.
fn title(name: &str, input: &Value) -> String {
    let arg = ["path", "pattern", "command", "query", "note"]
        .iter()
        .find_map(|k| input.get(*k).and_then(Value::as_str));
    match arg {
        Some(a) => {
            let a: String = a
                .lines()
                .next()
                .unwrap_or_default()
                .chars()
                .take(80)
                .collect();
            format!("{name} {a}")
        }
        None => name.to_owned(),
    }
}

/// Diffs of an edit tool's arguments, for the editor to show (`edit_file`, `multi_edit`,
/// `write_file`); empty for other tools.
fn diffs(root: &Path, name: &str, input: &Value) -> Vec<acp::ToolCallContent> {
    let path = input["path"].as_str().map(|p| abs(root, p));
    let diff = |path: &PathBuf, old: Option<&str>, new: &str| {
        acp::ToolCallContent::from(
            acp::Diff::new(path.clone(), new).old_text(old.map(str::to_owned)),
        )
    };
    match (name, path) {
        ("write_file", Some(path)) => input["content"]
            .as_str()
            .map(|new| vec![diff(&path, None, new)])
            .unwrap_or_default(),
        ("edit_file", Some(path)) => {
            match (input["old_string"].as_str(), input["new_string"].as_str()) {
                (Some(old), Some(new)) => vec![diff(&path, Some(old), new)],
                _ => Vec::new(),
            }
        }
        ("multi_edit", Some(path)) => input["edits"]
            .as_array()
            .map(|edits| {
                edits
                    .iter()
                    .filter_map(|e| {
                        Some(diff(
                            &path,
                            Some(e["old_string"].as_str()?),
                            e["new_string"].as_str()?,
                        ))
                    })
                    .collect()
            })
            .unwrap_or_default(),
        _ => Vec::new(),
    }
}

/// The `session/update` payloads of one event of an agent session of the run: text and
/// thinking chunks, tool calls and their updates. `node` names the agent's node; `root` is
/// the workspace (tool paths are relative to it).
pub fn session_updates(node: &str, root: &Path, event: &SessionEvent) -> Vec<acp::SessionUpdate> {
    let tool_id = |call_id: &str| acp::ToolCallId::new(format!("{node}/{call_id}"));
    match event {
        SessionEvent::MessageDelta { text, .. } if !text.is_empty() => {
            vec![acp::SessionUpdate::AgentMessageChunk(
                acp::ContentChunk::new(text.clone().into()),
            )]
        }
        SessionEvent::ThoughtDelta { text, .. } if !text.is_empty() => {
            vec![acp::SessionUpdate::AgentThoughtChunk(
                acp::ContentChunk::new(text.clone().into()),
            )]
        }
        SessionEvent::Note { text } => vec![acp::SessionUpdate::AgentThoughtChunk(
            acp::ContentChunk::new(format!("[{node}] {text}\n").into()),
        )],
        SessionEvent::ContextCompacted { .. } => event
            .compaction_text()
            .map(|text| {
                acp::SessionUpdate::AgentThoughtChunk(acp::ContentChunk::new(
                    format!("[{node}] {text}\n").into(),
                ))
            })
            .into_iter()
            .collect(),
        SessionEvent::ToolStarted {
            call_id,
            name,
            input,
            ..
        } => {
            let mut call = acp::ToolCall::new(tool_id(call_id), title(name, input))
                .kind(tool_kind(name))
                .status(acp::ToolCallStatus::InProgress)
                .raw_input(input.clone());
            if let Some(path) = input.get("path").and_then(Value::as_str) {
                call = call.locations(vec![acp::ToolCallLocation::new(abs(root, path))]);
            }
            let content = diffs(root, name, input);
            if !content.is_empty() {
                call = call.content(content);
            }
            vec![acp::SessionUpdate::ToolCall(call)]
        }
        SessionEvent::ToolCompleted {
            call_id,
            output,
            status,
            ..
        } => {
            let done = match status {
                ToolStatus::Ok => acp::ToolCallStatus::Completed,
                _ => acp::ToolCallStatus::Failed,
            };
            let mut fields = acp::ToolCallUpdateFields::new()
                .status(done)
                .raw_output(Value::String(output.clone()));
            if done == acp::ToolCallStatus::Failed {
                let text: String = output.chars().take(2000).collect();
                fields = fields.content(vec![acp::ToolCallContent::from(text)]);
            }
            vec![acp::SessionUpdate::ToolCallUpdate(
                acp::ToolCallUpdate::new(tool_id(call_id), fields),
            )]
        }
        // The call's content becomes the latest progress line (ACP replaces a call's content
        // on update; only MCP tools report progress, and their calls carry no diff).
        SessionEvent::ToolProgress { call_id, .. } => match event.progress_text() {
            Some(text) => vec![acp::SessionUpdate::ToolCallUpdate(
                acp::ToolCallUpdate::new(
                    tool_id(call_id),
                    acp::ToolCallUpdateFields::new()
                        .status(acp::ToolCallStatus::InProgress)
                        .content(vec![acp::ToolCallContent::from(text)]),
                ),
            )],
            None => Vec::new(),
        },
        SessionEvent::SessionError { error } => vec![acp::SessionUpdate::AgentMessageChunk(
            acp::ContentChunk::new(format!("\n[{node}] error: {error}\n").into()),
        )],
        _ => Vec::new(),
    }
}

/// The `usage_update` of a completed model call: the tokens it had in context (prompt and
/// answer) out of the model's context `window`; `None` for other events.
pub fn usage_update(event: &SessionEvent, window: u64) -> Option<acp::SessionUpdate> {
    let SessionEvent::TurnCompleted { usage, .. } = event else {
        return None;
    };
    let used = usage.prompt_tokens + usage.completion_tokens;
    Some(acp::SessionUpdate::UsageUpdate(acp::UsageUpdate::new(
        used, window,
    )))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;
    use serde_json::json;
    use trellis_protocol::NodeId;

    fn transition(node: &str, to: NodeState) -> EventKind {
        EventKind::NodeTransition {
            node: NodeId::new(node),
            attempt: 1,
            from: None,
            to,
            reason: None,
        }
    }

    #[test]
    fn a_completed_model_call_is_a_usage_update() {
        let ev = SessionEvent::TurnCompleted {
            turn: 1,
            message: json!({}),
            usage: trellis_protocol::TurnUsage {
                prompt_tokens: 1200,
                completion_tokens: 34,
            },
        };
        let v = serde_json::to_value(usage_update(&ev, 8192).unwrap()).unwrap();
        assert_eq!(
            v,
            json!({"sessionUpdate": "usage_update", "used": 1234, "size": 8192})
        );
        assert!(usage_update(&SessionEvent::Note { text: "x".into() }, 8192).is_none());
    }

    #[test]
    fn the_plan_follows_node_states() {
        let mut plan = StagePlan::from_plan(&json!({"planned": [
            {"context": {"stage_id": "1", "stage_name": "analysis"}},
            {"context": {"stage_id": "2", "stage_name": "review"}},
        ]}));
        let statuses = |p: &StagePlan| {
            serde_json::to_value(p.to_acp()).unwrap()["entries"]
                .as_array()
                .unwrap()
                .iter()
                .map(|e| {
                    format!(
                        "{}={}",
                        e["content"].as_str().unwrap(),
                        e["status"].as_str().unwrap()
                    )
                })
                .collect::<Vec<_>>()
        };
        assert_eq!(statuses(&plan), ["analysis=pending", "review=pending"]);
        assert!(plan.apply(&transition("analysis", NodeState::Running)));
        assert!(!plan.apply(&transition("analysis", NodeState::Running)));
        assert!(!plan.apply(&transition("upfront_retrieval", NodeState::Running)));
        assert!(plan.apply(&transition("analysis/worker-1", NodeState::Completed)));
        assert!(plan.apply(&transition("review", NodeState::Skipped)));
        assert_eq!(
            statuses(&plan),
            ["analysis=completed", "review (skipped)=completed"]
        );
        // A failed stage is over (ACP has no failed status) until a retry runs it again.
        assert!(plan.apply(&transition("analysis", NodeState::Failed)));
        assert_eq!(
            statuses(&plan),
            ["analysis (failed)=completed", "review (skipped)=completed"]
        );
        assert!(plan.apply(&transition("analysis", NodeState::Running)));
        assert_eq!(statuses(&plan)[0], "analysis=in_progress");
    }

    #[test]
    fn edits_become_tool_calls_with_diffs_and_locations() {
        let root = Path::new("/repo");
        let ups = session_updates(
            "code",
            root,
            &SessionEvent::ToolStarted {
                turn: 1,
                call_id: "c1".into(),
                name: "edit_file".into(),
                input: json!({"path": "src/a.rs", "old_string": "a", "new_string": "b"}),
            },
        );
        let v = serde_json::to_value(&ups[0]).unwrap();
        assert_eq!(v["sessionUpdate"], "tool_call");
        assert_eq!(v["toolCallId"], "code/c1");
        assert_eq!(v["kind"], "edit");
        assert_eq!(v["status"], "in_progress");
        assert_eq!(v["locations"][0]["path"], "/repo/src/a.rs");
        assert_eq!(v["content"][0]["type"], "diff");
        assert_eq!(v["content"][0]["oldText"], "a");
        assert_eq!(v["content"][0]["newText"], "b");

        let ups = session_updates(
            "code",
            root,
            &SessionEvent::ToolCompleted {
                turn: 1,
                call_id: "c1".into(),
                name: "edit_file".into(),
                output: "error: no match".into(),
                status: ToolStatus::Error,
                duration_ms: 1,
            },
        );
        let v = serde_json::to_value(&ups[0]).unwrap();
        assert_eq!(v["sessionUpdate"], "tool_call_update");
        assert_eq!(v["status"], "failed");
        assert_eq!(v["content"][0]["content"]["text"], "error: no match");
    }

    #[test]
    fn tool_progress_updates_the_call_with_its_latest_line() {
        let ups = session_updates(
            "analysis",
            Path::new("/repo"),
            &SessionEvent::ToolProgress {
                turn: 2,
                call_id: "c7".into(),
                progress: 3.0,
                total: Some(4.0),
                message: Some("indexing".into()),
            },
        );
        assert_eq!(ups.len(), 1);
        let v = serde_json::to_value(&ups[0]).unwrap();
        assert_eq!(v["sessionUpdate"], "tool_call_update");
        assert_eq!(v["toolCallId"], "analysis/c7");
        assert_eq!(v["status"], "in_progress");
        assert_eq!(v["content"][0]["type"], "content");
        assert_eq!(v["content"][0]["content"]["text"], "3/4 (75%) · indexing");
    }
}
