//! What the agent said, as the window needs it: session updates flattened to text, plan
//! entries, tool calls and usage; permission requests with their options; the ends of
//! requests. Conversions from the SDK's schema types live here.

use std::path::PathBuf;

use agent_client_protocol::v1::schema as acp;
use serde_json::Value;

use super::review::ReviewReply;
use super::{EXTENSIONS_META, SessionId};

/// Something the window should know.
#[derive(Clone, Debug)]
pub enum Event {
    /// `initialize` answered.
    Connected(AgentInfo),
    /// `session/list` answered.
    Sessions(Vec<SessionSummary>),
    /// A session was created, loaded or resumed (load's replay came before this).
    SessionOpened(SessionOpened),
    /// A `session/update` notification.
    Update {
        /// The session.
        session: SessionId,
        /// What changed.
        update: Update,
    },
    /// The agent asks for a permission; answer with [`super::Command::Answer`].
    Permission(PermissionAsk),
    /// The agent withdrew a permission request (the turn was cancelled, or it answered
    /// itself); the request id.
    PermissionGone(u64),
    /// A prompt turn ended.
    TurnEnded {
        /// The session.
        session: SessionId,
        /// Why (`end_turn`, `cancelled`, …).
        stop: String,
    },
    /// A `_trellis/review` request answered.
    Review {
        /// The session.
        session: SessionId,
        /// The answer.
        reply: ReviewReply,
    },
    /// A request failed; the session is still usable.
    Failed {
        /// What was being done (`session/prompt`, …).
        context: String,
        /// The agent's or the connection's message.
        message: String,
    },
    /// The agent sent something that is not JSON-RPC; it was dropped.
    Malformed(String),
    /// The connection is gone (the agent exited or closed its stdout); why, with the end of
    /// its stderr.
    Disconnected(String),
}

/// The agent as `initialize` describes it.
#[derive(Clone, Debug, Default)]
pub struct AgentInfo {
    /// `agentInfo.title` or `.name`.
    pub name: String,
    /// `agentInfo.version`.
    pub version: String,
    /// `session/load` supported.
    pub load_session: bool,
    /// `session/list` supported.
    pub list_sessions: bool,
    /// The `_trellis/…` extension methods advertised.
    pub extensions: Vec<String>,
}

impl AgentInfo {
    pub(crate) fn from_response(r: &acp::InitializeResponse) -> Self {
        let caps = &r.agent_capabilities;
        let extensions = caps
            .meta
            .as_ref()
            .and_then(|m| m.get(EXTENSIONS_META))
            .and_then(|e| e["methods"].as_array())
            .map(|a| {
                a.iter()
                    .filter_map(Value::as_str)
                    .map(str::to_owned)
                    .collect()
            })
            .unwrap_or_default();
        let (name, version) = r
            .agent_info
            .as_ref()
            .map(|i| {
                (
                    i.title.clone().unwrap_or_else(|| i.name.clone()),
                    i.version.clone(),
                )
            })
            .unwrap_or_default();
        Self {
            name,
            version,
            load_session: caps.load_session,
            list_sessions: caps.session_capabilities.list.is_some(),
            extensions,
        }
    }
}

/// A session as `session/list` shows it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SessionSummary {
    /// Its id.
    pub id: SessionId,
    /// Its working directory.
    pub cwd: PathBuf,
    /// Its title (the first prompt's first line).
    pub title: String,
    /// When it was last used (RFC 3339), if said.
    pub updated_at: Option<String>,
}

/// A session opened by new, load or resume.
#[derive(Clone, Debug)]
pub struct SessionOpened {
    /// Its id.
    pub id: SessionId,
    /// Its working directory.
    pub cwd: PathBuf,
    /// Its config options (workflow, autonomy).
    pub options: Vec<ConfigOption>,
    /// How it was opened: `new`, `load` or `resume`.
    pub how: &'static str,
}

/// A select config option of a session.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConfigOption {
    /// Its id (`workflow`, `autonomy`).
    pub id: String,
    /// Its display name.
    pub name: String,
    /// The current value.
    pub current: String,
    /// The values to choose from.
    pub choices: Vec<ConfigChoice>,
}

/// One value of a [`ConfigOption`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConfigChoice {
    /// The value id.
    pub value: String,
    /// Its display name.
    pub name: String,
}

impl std::fmt::Display for ConfigChoice {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.name)
    }
}

/// The select options of a session (boolean ones are not shown).
pub(crate) fn config_options(options: Option<&Vec<acp::SessionConfigOption>>) -> Vec<ConfigOption> {
    options
        .into_iter()
        .flatten()
        .filter_map(|o| match &o.kind {
            acp::SessionConfigKind::Select(s) => {
                let choices = match &s.options {
                    acp::SessionConfigSelectOptions::Ungrouped(v) => v.iter().collect::<Vec<_>>(),
                    acp::SessionConfigSelectOptions::Grouped(g) => {
                        g.iter().flat_map(|g| g.options.iter()).collect()
                    }
                    _ => Vec::new(),
                };
                Some(ConfigOption {
                    id: o.id.to_string(),
                    name: o.name.clone(),
                    current: s.current_value.to_string(),
                    choices: choices
                        .into_iter()
                        .map(|c| ConfigChoice {
                            value: c.value.to_string(),
                            name: c.name.clone(),
                        })
                        .collect(),
                })
            }
            _ => None,
        })
        .collect()
}

/// A `session/update`, as the window shows it.
#[derive(Clone, Debug, PartialEq)]
pub enum Update {
    /// The user's prompt (replayed by `session/load`).
    UserText(String),
    /// A chunk of the agent's answer.
    MessageText(String),
    /// A chunk of the agent's thinking.
    ThoughtText(String),
    /// The whole plan.
    Plan(Vec<PlanEntry>),
    /// A new tool call.
    ToolCall(ToolCallView),
    /// A tool call changed: new status, title or content.
    ToolCallUpdate {
        /// The tool call.
        id: String,
        /// Its new status.
        status: Option<acp::ToolCallStatus>,
        /// Its new title.
        title: Option<String>,
        /// Its new text content (progress, the error).
        text: Option<String>,
    },
    /// Tokens used against the context window.
    Usage {
        /// Tokens used.
        used: u64,
        /// The context window.
        size: u64,
    },
    /// The session's config options changed.
    ConfigOptions(Vec<ConfigOption>),
    /// The session's slash commands.
    Commands(Vec<String>),
    /// Anything else (its kind, for the log).
    Other(String),
}

/// A plan entry: a stage of the workflow.
#[derive(Clone, Debug, PartialEq)]
pub struct PlanEntry {
    /// Its text.
    pub content: String,
    /// Pending, in progress or completed.
    pub status: acp::PlanEntryStatus,
}

/// A tool call.
#[derive(Clone, Debug, PartialEq)]
pub struct ToolCallView {
    /// Its id (`<node>/<call>` from `trellis acp`).
    pub id: String,
    /// Its title.
    pub title: String,
    /// What kind of tool.
    pub kind: acp::ToolKind,
    /// Its status.
    pub status: acp::ToolCallStatus,
    /// Its text content.
    pub text: String,
    /// The files it touches, with their line when known.
    pub locations: Vec<(PathBuf, Option<u32>)>,
    /// The diffs it carries (edits).
    pub diffs: Vec<DiffView>,
}

/// A diff of one file, as ACP carries it (old and new text).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DiffView {
    /// The file.
    pub path: PathBuf,
    /// The old text (absent: a new file).
    pub old: Option<String>,
    /// The new text.
    pub new: String,
}

fn block_text(b: &acp::ContentBlock) -> String {
    match b {
        acp::ContentBlock::Text(t) => t.text.clone(),
        acp::ContentBlock::ResourceLink(l) => format!("[{}]({})", l.name, l.uri),
        _ => String::new(),
    }
}

fn content_text(content: &[acp::ToolCallContent]) -> String {
    content
        .iter()
        .filter_map(|c| match c {
            acp::ToolCallContent::Content(c) => Some(block_text(&c.content)),
            _ => None,
        })
        .collect::<Vec<_>>()
        .join("\n")
}

fn diffs(content: &[acp::ToolCallContent]) -> Vec<DiffView> {
    content
        .iter()
        .filter_map(|c| match c {
            acp::ToolCallContent::Diff(d) => Some(DiffView {
                path: d.path.clone(),
                old: d.old_text.clone(),
                new: d.new_text.clone(),
            }),
            _ => None,
        })
        .collect()
}

fn locations(l: &[acp::ToolCallLocation]) -> Vec<(PathBuf, Option<u32>)> {
    l.iter().map(|l| (l.path.clone(), l.line)).collect()
}

impl From<&acp::SessionUpdate> for Update {
    fn from(u: &acp::SessionUpdate) -> Self {
        use acp::SessionUpdate as U;
        match u {
            U::UserMessageChunk(c) => Update::UserText(block_text(&c.content)),
            U::AgentMessageChunk(c) => Update::MessageText(block_text(&c.content)),
            U::AgentThoughtChunk(c) => Update::ThoughtText(block_text(&c.content)),
            U::Plan(p) => Update::Plan(
                p.entries
                    .iter()
                    .map(|e| PlanEntry {
                        content: e.content.clone(),
                        status: e.status.clone(),
                    })
                    .collect(),
            ),
            U::ToolCall(t) => Update::ToolCall(ToolCallView {
                id: t.tool_call_id.to_string(),
                title: t.title.clone(),
                kind: t.kind,
                status: t.status,
                text: content_text(&t.content),
                locations: locations(&t.locations),
                diffs: diffs(&t.content),
            }),
            U::ToolCallUpdate(t) => Update::ToolCallUpdate {
                id: t.tool_call_id.to_string(),
                status: t.fields.status,
                title: t.fields.title.clone(),
                text: t.fields.content.as_deref().map(content_text),
            },
            U::UsageUpdate(u) => Update::Usage {
                used: u.used,
                size: u.size,
            },
            U::ConfigOptionUpdate(c) => {
                Update::ConfigOptions(config_options(Some(&c.config_options)))
            }
            U::AvailableCommandsUpdate(c) => Update::Commands(
                c.available_commands
                    .iter()
                    .map(|c| format!("/{}", c.name))
                    .collect(),
            ),
            other => Update::Other(
                serde_json::to_value(other)
                    .ok()
                    .and_then(|v| v["sessionUpdate"].as_str().map(str::to_owned))
                    .unwrap_or_else(|| "unknown".into()),
            ),
        }
    }
}

/// A permission request, waiting for the user.
#[derive(Clone, Debug, PartialEq)]
pub struct PermissionAsk {
    /// This client's id for the request (answer with it).
    pub id: u64,
    /// The session.
    pub session: SessionId,
    /// The tool call it is about (`<run>/apply` for a change set).
    pub tool_call: String,
    /// What is asked.
    pub title: String,
    /// The tool's kind (`edit` for a change set).
    pub kind: Option<acp::ToolKind>,
    /// The options, in the agent's order.
    pub options: Vec<PermissionChoice>,
    /// The diffs shown with it.
    pub diffs: Vec<DiffView>,
    /// A workflow's question (`_trellis/question`): answered with text, not an option.
    pub question: bool,
}

impl PermissionAsk {
    /// The run of a change-set request (`<run>/apply`).
    pub fn change_set_run(&self) -> Option<&str> {
        self.tool_call.strip_suffix("/apply")
    }
}

/// One answer a permission request offers.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PermissionChoice {
    /// The option id to answer with.
    pub id: String,
    /// Its label.
    pub name: String,
    /// `allow_once`, `allow_always`, `reject_once` or `reject_always`.
    pub kind: String,
}

impl PermissionAsk {
    pub(crate) fn new(id: u64, r: &acp::RequestPermissionRequest) -> Self {
        let f = &r.tool_call.fields;
        let kind = |k: &acp::PermissionOptionKind| {
            serde_json::to_value(k)
                .ok()
                .and_then(|v| v.as_str().map(str::to_owned))
                .unwrap_or_default()
        };
        Self {
            id,
            session: r.session_id.clone(),
            tool_call: r.tool_call.tool_call_id.to_string(),
            title: f.title.clone().unwrap_or_else(|| "A tool call".into()),
            kind: f.kind,
            options: r
                .options
                .iter()
                .map(|o| PermissionChoice {
                    id: o.option_id.to_string(),
                    name: o.name.clone(),
                    kind: kind(&o.kind),
                })
                .collect(),
            diffs: f.content.as_deref().map(diffs).unwrap_or_default(),
            question: false,
        }
    }
}
