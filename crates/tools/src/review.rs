//! The batched review of a run's changes.
//!
//! [`load`] computes the run's *net* change — its base commit against its branch tip — as
//! [`FileChange`]s split into [`Hunk`]s. The user answers with a [`ReviewOutcome`]:
//! approve (all, or a [`Selection`] of files and hunks), request changes with comments
//! (the workflow routes those to a stage), or reject. [`apply`] puts exactly the approved
//! hunks onto the user's working tree, after a 3-way check against the base that refuses
//! if the user changed the same lines meanwhile; [`undo`] reverses an applied run byte for
//! byte, and undoing an undo re-applies it. Applies and undos are journaled (see
//! [`journal`]) so a crash at any point is completed by the next command.

pub mod comments;
pub mod diff;
pub mod journal;
pub mod merge;
mod ops;

use std::collections::{BTreeMap, BTreeSet};

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

pub use comments::{AuthoredComment, add_comment, comments};
pub use diff::{ChangeSet, FileChange, FileStatus, Hunk, HunkLine, LineKind, load};
pub use ops::{ApplyReport, UndoReport, apply, record_outcome, recover, undo};

/// Which parts of a change set are approved.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct Selection {
    /// Per file (by path): what is approved. Files not listed are rejected.
    pub files: BTreeMap<String, FileSelection>,
}

/// What is approved of one file.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", tag = "type", content = "hunks")]
pub enum FileSelection {
    /// The whole file.
    All,
    /// Nothing.
    None,
    /// These hunks (by index).
    Hunks(BTreeSet<usize>),
}

impl Selection {
    /// Everything in `set`.
    pub fn all(set: &ChangeSet) -> Self {
        Self {
            files: set
                .files
                .iter()
                .map(|f| (f.path.clone(), FileSelection::All))
                .collect(),
        }
    }

    /// What is approved of `file`, normalised: hunk sets covering every hunk become
    /// `All`, empty ones `None`.
    pub fn for_file(&self, file: &FileChange) -> FileSelection {
        match self.files.get(&file.path) {
            None | Some(FileSelection::None) => FileSelection::None,
            Some(FileSelection::All) => FileSelection::All,
            Some(FileSelection::Hunks(h)) => {
                let h: BTreeSet<usize> = h
                    .iter()
                    .copied()
                    .filter(|i| *i < file.hunks.len())
                    .collect();
                if h.is_empty() {
                    FileSelection::None
                } else if h.len() == file.hunks.len() {
                    FileSelection::All
                } else {
                    FileSelection::Hunks(h)
                }
            }
        }
    }

    /// Whether nothing at all is approved.
    pub fn is_empty(&self, set: &ChangeSet) -> bool {
        set.files
            .iter()
            .all(|f| self.for_file(f) == FileSelection::None)
    }
}

/// A reviewer's comment.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ReviewComment {
    /// The file it is about, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
    /// The hunk it is about, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hunk: Option<usize>,
    /// The line it is about (1-based, in the file's new version), if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub line: Option<u32>,
    /// How much it matters (`info`, `suggestion`, `warning`, `error`), if said.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub severity: Option<String>,
    /// The comment.
    pub body: String,
}

impl ReviewComment {
    /// A comment on the whole change.
    pub fn general(body: impl Into<String>) -> Self {
        Self {
            path: None,
            hunk: None,
            line: None,
            severity: None,
            body: body.into(),
        }
    }

    /// Where it points: `path:line`, `path (hunk n)`, `path`, or empty.
    pub fn location(&self) -> String {
        match (&self.path, self.line, self.hunk) {
            (Some(p), Some(l), _) => format!("{p}:{l}"),
            (Some(p), None, Some(h)) => format!("{p} (hunk {h})"),
            (Some(p), None, None) => p.clone(),
            (None, ..) => String::new(),
        }
    }
}

impl std::fmt::Display for ReviewComment {
    /// `[warning] src/a.rs:12: body`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if let Some(s) = &self.severity {
            write!(f, "[{s}] ")?;
        }
        let at = self.location();
        if !at.is_empty() {
            write!(f, "{at}: ")?;
        }
        f.write_str(&self.body)
    }
}

/// The result of a review: what the workflow routes on.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "type", rename_all = "camelCase")]
pub enum ReviewOutcome {
    /// Apply the selected parts.
    #[serde(rename_all = "camelCase")]
    Approved {
        /// What is approved.
        selection: Selection,
        /// Whether some parts were rejected.
        partial: bool,
    },
    /// Send the run back with comments, to `stage` if given (the workflow decides
    /// otherwise).
    #[serde(rename_all = "camelCase")]
    ChangesRequested {
        /// The comments.
        comments: Vec<ReviewComment>,
        /// The stage that should address them.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        stage: Option<String>,
    },
    /// Drop the change entirely.
    Rejected {
        /// Why.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        reason: Option<String>,
    },
}

impl ReviewOutcome {
    /// The outcome in the review verdicts' vocabulary (docs/workflows.md): `APPROVED`,
    /// `NEEDS_REVISION` or `REJECTED`.
    pub fn code(&self) -> &'static str {
        match self {
            ReviewOutcome::Approved { .. } => "APPROVED",
            ReviewOutcome::ChangesRequested { .. } => "NEEDS_REVISION",
            ReviewOutcome::Rejected { .. } => "REJECTED",
        }
    }
}
