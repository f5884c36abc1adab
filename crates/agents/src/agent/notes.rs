//! Notes that come with a path the first time an activation's tool touches it: the
//! instructions of the directory above it (a nested `AGENTS.md`) that the activation's
//! prompt did not carry ([`crate::ContextPolicy::path_notes`]).

use serde_json::Value;
use trellis_llm::ToolCall;

use super::AgentRun;
use super::state::Saved;

/// What applies to paths below some directories (the runtime's project instructions).
pub trait PathNotes: Send + Sync {
    /// The notes for `path` (relative to the workspace root) as (key, text) pairs: each key
    /// names one note (a file), given once per activation.
    fn notes_for(&self, path: &str) -> Vec<(String, String)>;
}

/// The paths a call's arguments name (`path`, `paths`, `file`, `files`).
fn paths_of(args: &Value) -> Vec<&str> {
    let mut out = Vec::new();
    for key in ["path", "paths", "file", "files"] {
        match args.get(key) {
            Some(Value::String(s)) => out.push(s.as_str()),
            Some(Value::Array(items)) => out.extend(items.iter().filter_map(Value::as_str)),
            _ => {}
        }
    }
    out
}

impl AgentRun {
    /// `content` (the result of `call`) with the notes of the paths it names that this
    /// activation was not given yet.
    pub(super) fn with_path_notes(
        &self,
        st: &mut Saved,
        call: &ToolCall,
        content: String,
    ) -> String {
        let Some(notes) = &self.context.path_notes else {
            return content;
        };
        let Ok(args) = call.arguments_json() else {
            return content;
        };
        let mut out = content;
        for path in paths_of(&args) {
            let path = path.trim_start_matches("./");
            for (key, text) in notes.notes_for(path) {
                if st.noted.contains(&key) {
                    continue;
                }
                out.push_str(&format!("\n\n{}", text.trim_end()));
                st.noted.push(key);
            }
        }
        out
    }
}
