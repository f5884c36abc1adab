//! Batched review of a run's change set through `_trellis/review`: the change set as the
//! runtime service's `review show` returns it (files, hunks, lines), and what apply, undo and
//! reject answered.

use serde::Deserialize;
use serde_json::Value;
pub use trellis_protocol::acp::{
    REQUEST_CHANGES_METHOD, REVIEW_METHOD, RequestChangesParams, ReviewParams,
};
pub use trellis_protocol::{FileHunks, ReviewAction};

/// A run's change set: what a reviewer sees.
#[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize)]
pub struct ChangeSet {
    /// The run.
    #[serde(default)]
    pub run: String,
    /// The changed files.
    #[serde(default)]
    pub files: Vec<FileChange>,
}

/// One changed file.
#[derive(Clone, Debug, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct FileChange {
    /// Its path, relative to the repository.
    pub path: String,
    /// `added`, `deleted` or `modified`.
    #[serde(default)]
    pub status: String,
    /// Lines added.
    #[serde(default)]
    pub additions: usize,
    /// Lines removed.
    #[serde(default)]
    pub deletions: usize,
    /// Its hunks.
    #[serde(default)]
    pub hunks: Vec<Hunk>,
}

/// A group of nearby changes, accepted or rejected as one.
#[derive(Clone, Debug, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Hunk {
    /// Its index within the file.
    pub index: usize,
    /// First old line shown (1-based).
    #[serde(default)]
    pub old_start: usize,
    /// First new line shown (1-based).
    #[serde(default)]
    pub new_start: usize,
    /// The lines.
    #[serde(default)]
    pub lines: Vec<HunkLine>,
}

/// One line of a hunk.
#[derive(Clone, Debug, PartialEq, Eq, Deserialize)]
pub struct HunkLine {
    /// `context`, `removed` or `added`.
    pub kind: LineKind,
    /// The text, without its line end.
    pub text: String,
}

/// What a hunk line is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum LineKind {
    /// Unchanged.
    Context,
    /// Removed.
    Removed,
    /// Added.
    Added,
}

/// What a `_trellis/review` request answered.
#[derive(Clone, Debug, PartialEq)]
pub enum ReviewReply {
    /// `show`: the change set and its state (`open`, `applied`, `undone`, …).
    Shown {
        /// The run.
        run: String,
        /// The change set's review state.
        state: String,
        /// The change set.
        change_set: ChangeSet,
    },
    /// `apply`: applied (the files), or nothing was (`rejected`, with why).
    Applied {
        /// `applied` or `rejected`.
        outcome: String,
        /// The files written.
        files: Vec<String>,
    },
    /// `undo`: the files restored.
    Undone {
        /// The files restored.
        files: Vec<String>,
    },
    /// `reject` or `select`: the raw answer.
    Other(Value),
}

fn strings(v: &Value) -> Vec<String> {
    v.as_array()
        .into_iter()
        .flatten()
        .filter_map(|f| {
            // Apply reports `[path, what]` pairs, undo paths.
            f.as_str().or_else(|| f[0].as_str()).map(str::to_owned)
        })
        .collect()
}

impl ReviewReply {
    /// Reads the answer to `action`.
    pub fn parse(action: &ReviewAction, v: Value) -> Result<Self, String> {
        Ok(match action {
            ReviewAction::Show => Self::Shown {
                run: v["run"].as_str().unwrap_or_default().to_owned(),
                state: v["state"].as_str().unwrap_or_default().to_owned(),
                change_set: serde_json::from_value(v["changeSet"].clone())
                    .map_err(|e| format!("the change set: {e}"))?,
            },
            ReviewAction::Apply { .. } => Self::Applied {
                outcome: v["outcome"].as_str().unwrap_or_default().to_owned(),
                files: strings(&v["applied"]["files"]),
            },
            ReviewAction::Undo => Self::Undone {
                files: strings(&v["undo"]["files"]),
            },
            _ => Self::Other(v),
        })
    }
}
