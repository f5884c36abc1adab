//! One session's state: its transcript (streamed chunks joined into entries), plan, tool
//! calls, usage and config options.

use std::path::PathBuf;

use crate::acp::{ConfigOption, PlanEntry, SessionId, ToolCallView, Update};

/// One entry of a transcript.
#[derive(Clone, Debug, PartialEq)]
pub enum Entry {
    /// The user's prompt.
    User(String),
    /// The agent's answer text (chunks joined).
    Message(String),
    /// The agent's thinking (chunks joined).
    Thought(String),
    /// A tool call, as it stands.
    Tool(ToolCallView),
    /// How a turn ended, when not normally.
    Stop(String),
}

/// An open session.
#[derive(Clone, Debug)]
pub struct Session {
    /// Its id.
    pub id: SessionId,
    /// Its working directory.
    pub cwd: PathBuf,
    /// Its title (the first prompt's first line).
    pub title: String,
    /// What was said, in order.
    pub transcript: Vec<Entry>,
    /// The workflow's stages.
    pub plan: Vec<PlanEntry>,
    /// Tokens used and the context window, from the last usage update.
    pub usage: Option<(u64, u64)>,
    /// Its config options (workflow, autonomy).
    pub options: Vec<ConfigOption>,
    /// Its slash commands.
    pub commands: Vec<String>,
    /// A prompt turn is running.
    pub running: bool,
    /// Updates received (for the status line).
    pub updates: u64,
}

impl Session {
    /// A session with nothing in it yet.
    pub fn new(id: SessionId, cwd: PathBuf) -> Self {
        Self {
            title: format!("Session {}", short(&id.to_string())),
            id,
            cwd,
            transcript: Vec::new(),
            plan: Vec::new(),
            usage: None,
            options: Vec::new(),
            commands: Vec::new(),
            running: false,
            updates: 0,
        }
    }

    /// A prompt was sent.
    pub fn begin_turn(&mut self, text: &str) {
        if self.transcript.is_empty() {
            self.title = text
                .lines()
                .next()
                .unwrap_or(text)
                .chars()
                .take(60)
                .collect();
        }
        self.transcript.push(Entry::User(text.to_owned()));
        self.running = true;
    }

    /// The turn ended with `stop`.
    pub fn end_turn(&mut self, stop: &str) {
        self.running = false;
        if stop != "end_turn" {
            self.transcript.push(Entry::Stop(stop.to_owned()));
        }
    }

    /// Applies a `session/update`.
    pub fn apply(&mut self, update: Update) {
        self.updates += 1;
        match update {
            Update::UserText(t) => {
                if let Some(Entry::User(s)) = self.transcript.last_mut() {
                    s.push_str(&t);
                } else {
                    if self.transcript.is_empty() {
                        self.title = t
                            .lines()
                            .next()
                            .unwrap_or_default()
                            .chars()
                            .take(60)
                            .collect();
                    }
                    self.transcript.push(Entry::User(t));
                }
            }
            Update::MessageText(t) => match self.transcript.last_mut() {
                Some(Entry::Message(s)) => s.push_str(&t),
                // A new paragraph after a tool call needs no blank line of its own.
                _ => self
                    .transcript
                    .push(Entry::Message(t.trim_start_matches('\n').to_owned())),
            },
            Update::ThoughtText(t) => match self.transcript.last_mut() {
                Some(Entry::Thought(s)) => s.push_str(&t),
                _ => self.transcript.push(Entry::Thought(t)),
            },
            Update::Plan(p) => self.plan = p,
            Update::ToolCall(call) => {
                if let Some(t) = self.tool_mut(&call.id) {
                    *t = call;
                } else {
                    self.transcript.push(Entry::Tool(call));
                }
            }
            Update::ToolCallUpdate {
                id,
                status,
                title,
                text,
            } => {
                if let Some(t) = self.tool_mut(&id) {
                    if let Some(s) = status {
                        t.status = s;
                    }
                    if let Some(s) = title {
                        t.title = s;
                    }
                    if let Some(s) = text {
                        t.text = s;
                    }
                }
            }
            Update::Usage { used, size } => self.usage = Some((used, size)),
            Update::ConfigOptions(o) => self.options = o,
            Update::Commands(c) => self.commands = c,
            Update::Other(_) => {}
        }
    }

    fn tool_mut(&mut self, id: &str) -> Option<&mut ToolCallView> {
        self.transcript.iter_mut().rev().find_map(|e| match e {
            Entry::Tool(t) if t.id == id => Some(t),
            _ => None,
        })
    }
}

/// The first 8 characters of an id.
pub fn short(id: &str) -> &str {
    id.get(..8).unwrap_or(id)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;
    use crate::acp::{ToolCallStatus, ToolKind};

    fn tool(id: &str) -> ToolCallView {
        ToolCallView {
            id: id.into(),
            title: "read a.rs".into(),
            kind: ToolKind::Read,
            status: ToolCallStatus::InProgress,
            text: String::new(),
            locations: Vec::new(),
            diffs: Vec::new(),
        }
    }

    #[test]
    fn chunks_join_and_tools_update_in_place() {
        let mut s = Session::new(SessionId::new("abcdef123456"), "/r".into());
        assert_eq!(s.title, "Session abcdef12");
        s.begin_turn("Explain the stock\nmore");
        s.apply(Update::ThoughtText("Choosing".into()));
        s.apply(Update::ThoughtText(" a workflow".into()));
        s.apply(Update::ToolCall(tool("n/1")));
        s.apply(Update::MessageText("Stock ".into()));
        s.apply(Update::MessageText("lives in memory.".into()));
        s.apply(Update::ToolCallUpdate {
            id: "n/1".into(),
            status: Some(ToolCallStatus::Completed),
            title: None,
            text: Some("done".into()),
        });
        assert_eq!(s.title, "Explain the stock");
        assert_eq!(s.transcript.len(), 4);
        assert_eq!(
            s.transcript[1],
            Entry::Thought("Choosing a workflow".into())
        );
        assert_eq!(
            s.transcript[3],
            Entry::Message("Stock lives in memory.".into())
        );
        let Entry::Tool(t) = &s.transcript[2] else {
            panic!("not a tool: {:?}", s.transcript[2]);
        };
        assert_eq!(t.status, ToolCallStatus::Completed);
        assert_eq!(t.text, "done");
        assert!(s.running);
        s.end_turn("cancelled");
        assert!(!s.running);
        assert_eq!(s.transcript.last(), Some(&Entry::Stop("cancelled".into())));
    }
}
