//! The stage tools of `staged_review` (`docs/tools.md`, "Stage tools"): the block tools that
//! end a stage and the review agent's tools, built as [`Tool`]s over a [`StageSink`] that
//! decides where their effects go.
//!
//! | role | tools |
//! |---|---|
//! | `scoping` | `submit_scope`, `ask_questions`, `request_extension` |
//! | `research` | `submit_research`, `ask_questions`, `request_extension` |
//! | `planning` | `submit_plan`, `ask_questions`, `request_extension` |
//! | `pulsing` | `complete_pulse`, `request_extension`, `ask_questions` |
//! | `review` | `get_diff`, `get_scope_card`, `add_line_comment`, `add_file_comment`, `add_review_comment`, `complete_review` |
//!
//! The `submit_*` tools validate the card with [`trellis_workflow::artifacts`]; an invalid
//! card is a tool error carrying the validation message (the model fixes it and calls
//! again), a valid one goes to [`StageSink::submit`] and the model is told to end its turn.
//! Every call that ends a stage (a submission, `complete_pulse`, `complete_review`) is also
//! a [`StageSignal`] the node's handler reads with [`StageSink::signals`] to route.
//!
//! [`StoreSink`] is the runtime's sink (artifacts in the store and in
//! `<repo>/.trellis/runs/<run>/artifacts/`, comments in the change set's review);
//! [`MemorySink`] is for tests. Nothing is registered globally: a handler builds
//! [`StageTools`] for a node and registers [`StageTools::tools`] for its role.

mod sink;
mod tools;

use std::sync::Arc;

use serde::Serialize;
use trellis_protocol::{NodeId, RunId};
use trellis_tools::review::ReviewComment;
use trellis_tools::tool::{BoxFuture, typed};
use trellis_tools::{Answer, Interaction, Question, Tool, ToolContext};
use trellis_workflow::artifacts::{ArtifactKind, Validated};

pub use sink::{
    Announce, MemoryArtifact, MemorySink, PULSE_KIND, REVIEW_KIND, StoreSink, artifacts_dir,
};

/// The stage roles of `staged_review` and their tools.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum StageRole {
    /// Scoping: defines what the request covers.
    Scoping,
    /// Research: explores the codebase.
    Research,
    /// Planning: the approach and its pulses.
    Planning,
    /// Execution: implements the pulses.
    Pulsing,
    /// Review: reviews the change.
    Review,
}

impl StageRole {
    /// Every role.
    pub const ALL: [StageRole; 5] = [
        StageRole::Scoping,
        StageRole::Research,
        StageRole::Planning,
        StageRole::Pulsing,
        StageRole::Review,
    ];

    /// Its name in workflow YAML.
    pub fn as_str(self) -> &'static str {
        match self {
            StageRole::Scoping => "scoping",
            StageRole::Research => "research",
            StageRole::Planning => "planning",
            StageRole::Pulsing => "pulsing",
            StageRole::Review => "review",
        }
    }

    /// The role called `name`, if it is one of these.
    pub fn parse(name: &str) -> Option<Self> {
        StageRole::ALL.into_iter().find(|r| r.as_str() == name)
    }

    /// The names of the stage tools the role gets (for a registry's allow-list).
    pub fn tool_names(self) -> &'static [&'static str] {
        match self {
            StageRole::Scoping => &["submit_scope", "ask_questions", "request_extension"],
            StageRole::Research => &["submit_research", "ask_questions", "request_extension"],
            StageRole::Planning => &["submit_plan", "ask_questions", "request_extension"],
            StageRole::Pulsing => &["complete_pulse", "request_extension", "ask_questions"],
            StageRole::Review => &[
                "get_diff",
                "get_scope_card",
                "add_line_comment",
                "add_file_comment",
                "add_review_comment",
                "complete_review",
            ],
        }
    }
}

/// Who is calling: the run and node of the tool context.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Caller {
    /// The run.
    pub run: Option<RunId>,
    /// The node.
    pub node: Option<NodeId>,
}

impl Caller {
    /// The caller of a tool call.
    pub fn of(ctx: &ToolContext) -> Self {
        Self {
            run: ctx.env.run.clone(),
            node: ctx.env.node.as_deref().map(NodeId::new),
        }
    }
}

/// A stored artifact version.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Submitted {
    /// The artifact's id (the store's; the sink's own numbering for [`MemorySink`]).
    pub id: i64,
    /// Its kind (`scope_card`, …, or `review`).
    pub kind: String,
    /// Its version, 1, 2, … per run and kind.
    pub version: u32,
    /// The file it was written to, relative to the repository, if any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub file: Option<String>,
}

/// The review agent's verdict (the review outcomes).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
pub enum Verdict {
    /// The change is good.
    #[serde(rename = "APPROVED")]
    Approved,
    /// The change needs another pass.
    #[serde(rename = "NEEDS_REVISION")]
    NeedsRevision,
    /// A person should decide.
    #[serde(rename = "HUMAN_REVIEW_REQUESTED")]
    HumanReviewRequested,
}

impl Verdict {
    /// Every verdict.
    pub const ALL: [Verdict; 3] = [
        Verdict::Approved,
        Verdict::NeedsRevision,
        Verdict::HumanReviewRequested,
    ];

    /// `APPROVED`, `NEEDS_REVISION` or `HUMAN_REVIEW_REQUESTED`.
    pub fn as_str(self) -> &'static str {
        match self {
            Verdict::Approved => "APPROVED",
            Verdict::NeedsRevision => "NEEDS_REVISION",
            Verdict::HumanReviewRequested => "HUMAN_REVIEW_REQUESTED",
        }
    }

    /// Parses a verdict leniently (case, spaces and hyphens do not matter); the error lists
    /// the allowed ones.
    pub fn parse(s: &str) -> Result<Self, String> {
        let norm = s.trim().to_ascii_uppercase().replace([' ', '-'], "_");
        Verdict::ALL
            .into_iter()
            .find(|v| v.as_str() == norm)
            .ok_or_else(|| {
                format!(
                    "unknown verdict `{}`; use one of {}",
                    s.trim(),
                    Verdict::ALL.map(Verdict::as_str).join(", ")
                )
            })
    }
}

/// The review agent's conclusion.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct ReviewVerdict {
    /// The verdict.
    pub verdict: Verdict,
    /// Its summary.
    pub summary: String,
}

/// What a stage tool did that the node's handler routes on.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum StageSignal {
    /// An artifact was submitted for approval.
    Submitted(Submitted),
    /// Execution is complete (`complete_pulse`).
    PulseComplete {
        /// The pulse summary.
        summary: String,
    },
    /// The review is complete (`complete_review`).
    Verdict {
        /// The verdict.
        verdict: ReviewVerdict,
        /// The stored review.
        review: Submitted,
    },
    /// A review comment was added.
    Comment(ReviewComment),
    /// The agent asked for more turns.
    Extension {
        /// Why.
        reason: String,
        /// How many it asked for.
        turns: Option<u32>,
        /// How many the sink granted (`None`: not decided by the sink).
        granted: Option<u32>,
    },
    /// The agent asked the user questions.
    Questions {
        /// The questions.
        questions: Vec<Question>,
        /// Whether answers came back.
        answered: bool,
    },
}

impl StageSignal {
    /// Whether the agent should end its turn after this (a submission, the end of
    /// execution, the review's verdict).
    pub fn ends_stage(&self) -> bool {
        matches!(
            self,
            StageSignal::Submitted(_)
                | StageSignal::PulseComplete { .. }
                | StageSignal::Verdict { .. }
        )
    }
}

/// Errors of a sink.
#[derive(Debug, thiserror::Error)]
pub enum StageError {
    /// The store failed.
    #[error(transparent)]
    Store(#[from] trellis_store::Error),
    /// A tools-layer operation (git, review records) failed.
    #[error(transparent)]
    Tools(#[from] trellis_tools::Error),
    /// A file could not be written.
    #[error("cannot write {}: {source}", path.display())]
    Io {
        /// The path.
        path: std::path::PathBuf,
        /// The cause.
        source: std::io::Error,
    },
    /// Anything else, said plainly.
    #[error("{0}")]
    Failed(String),
}

/// Where the stage tools' effects go. Methods other than [`StageSink::questions`] may block
/// (the tools call them off the async workers).
pub trait StageSink: Send + Sync {
    /// Stores a validated artifact as the next version of its kind, awaiting approval.
    fn submit(&self, from: &Caller, artifact: &Validated) -> Result<Submitted, StageError>;

    /// The content of the latest approved artifact of `kind`, if there is one.
    fn approved(&self, kind: ArtifactKind) -> Result<Option<String>, StageError>;

    /// Adds a review comment; returns how many comments the current review has.
    fn comment(&self, from: &Caller, comment: &ReviewComment) -> Result<usize, StageError>;

    /// Records the review's verdict (with its comments) for approval.
    fn verdict(&self, from: &Caller, verdict: &ReviewVerdict) -> Result<Submitted, StageError>;

    /// Records that execution is complete.
    fn pulse_complete(&self, from: &Caller, summary: &str) -> Result<(), StageError>;

    /// Records a signal (what [`StageSink::signals`] returns).
    fn record(&self, signal: StageSignal);

    /// The turns granted to every `request_extension` (`None`: the handler decides).
    fn extension_turns(&self) -> Option<u32> {
        None
    }

    /// Records a request for more turns; returns how many were granted, if the sink decides.
    fn extension(
        &self,
        _from: &Caller,
        reason: &str,
        turns: Option<u32>,
    ) -> Result<Option<u32>, StageError> {
        let granted = self.extension_turns();
        self.record(StageSignal::Extension {
            reason: reason.to_owned(),
            turns,
            granted,
        });
        Ok(granted)
    }

    /// Puts questions to the user (through `interaction`, the run's, or its own way);
    /// returns the answers, or `None` when they were only recorded.
    fn questions<'a>(
        &'a self,
        from: &'a Caller,
        questions: Vec<Question>,
        interaction: &'a dyn Interaction,
    ) -> BoxFuture<'a, Result<Option<Vec<Answer>>, StageError>>;

    /// What the tools did so far, in order.
    fn signals(&self) -> Vec<StageSignal>;
}

/// The stage tools over one sink.
#[derive(Clone)]
pub struct StageTools {
    sink: Arc<dyn StageSink>,
}

impl StageTools {
    /// Tools whose effects go to `sink`.
    pub fn new(sink: Arc<dyn StageSink>) -> Self {
        Self { sink }
    }

    /// The sink.
    pub fn sink(&self) -> &Arc<dyn StageSink> {
        &self.sink
    }

    /// The tools of `role` (see the module's table).
    pub fn tools(&self, role: StageRole) -> Vec<Arc<dyn Tool>> {
        role.tool_names()
            .iter()
            .filter_map(|name| self.tool(name))
            .collect()
    }

    /// The tools of the role called `name`; none for a role that is not a stage role.
    pub fn tools_for(&self, name: &str) -> Vec<Arc<dyn Tool>> {
        StageRole::parse(name)
            .map(|r| self.tools(r))
            .unwrap_or_default()
    }

    /// The stage tool called `name`.
    pub fn tool(&self, name: &str) -> Option<Arc<dyn Tool>> {
        use tools::*;
        let sink = self.sink.clone();
        Some(match name {
            "submit_scope" => typed(Submit::<ScopeKind>::new(sink)),
            "submit_research" => typed(Submit::<ResearchKind>::new(sink)),
            "submit_plan" => typed(Submit::<PlanKind>::new(sink)),
            "complete_pulse" => typed(CompletePulse(sink)),
            "request_extension" => typed(RequestExtension(sink)),
            "ask_questions" => typed(AskQuestions(sink)),
            "get_diff" => typed(GetDiff),
            "get_scope_card" => typed(GetScopeCard(sink)),
            "add_line_comment" => typed(AddLineComment(sink)),
            "add_file_comment" => typed(AddFileComment(sink)),
            "add_review_comment" => typed(AddReviewComment(sink)),
            "complete_review" => typed(CompleteReview(sink)),
            _ => return None,
        })
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;

    #[test]
    fn every_role_gets_its_tools() {
        let tools = StageTools::new(Arc::new(MemorySink::default()));
        for role in StageRole::ALL {
            let names: Vec<String> = tools
                .tools(role)
                .iter()
                .map(|t| t.spec().name.clone())
                .collect();
            assert_eq!(names, role.tool_names(), "{role:?}");
        }
        assert!(tools.tools_for("implementor").is_empty());
    }

    #[test]
    fn verdicts_parse_leniently_and_refuse_with_the_list() {
        assert_eq!(Verdict::parse("approved"), Ok(Verdict::Approved));
        assert_eq!(Verdict::parse("needs revision"), Ok(Verdict::NeedsRevision));
        assert_eq!(
            Verdict::parse("human-review-requested"),
            Ok(Verdict::HumanReviewRequested)
        );
        assert_eq!(
            Verdict::parse("LGTM"),
            Err(
                "unknown verdict `LGTM`; use one of APPROVED, NEEDS_REVISION, \
                 HUMAN_REVIEW_REQUESTED"
                    .into()
            )
        );
    }
}
