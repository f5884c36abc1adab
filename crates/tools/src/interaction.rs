//! The seam to the user: approvals and questions.
//!
//! Tools never talk to a terminal. When the policy says `ask`, or a tool wants answers
//! (`ask_questions`), it calls an [`Interaction`]. The workflow layer implements it with
//! the graph engine's interrupts (the run pauses, the question is persisted, the answer
//! resumes it); [`NonInteractive`] answers from policy (`--yes` / `--no-input`), and
//! [`ScriptedInteraction`] is the test double.

use std::collections::VecDeque;
use std::sync::Mutex;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::error::{Error, Result};
use crate::policy::CommandClass;
use crate::spec::BoxFuture;

/// A request for approval of one action.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ApprovalRequest {
    /// The tool asking.
    pub tool: String,
    /// Its arguments.
    pub args: Value,
    /// Why approval is needed (`` `curl x` is network ``).
    pub reason: String,
    /// The command class, for shell commands.
    pub class: Option<CommandClass>,
}

/// The user's answer to an [`ApprovalRequest`].
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "camelCase")]
pub enum ApprovalDecision {
    /// Go ahead.
    Approve,
    /// Do not.
    Deny {
        /// What the user said, passed on to the model.
        reason: Option<String>,
    },
}

/// One question for the user.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Question {
    /// The question.
    pub question: String,
    /// Suggested answers, if it is a choice.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub options: Vec<String>,
}

/// The user's answer to one [`Question`].
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct Answer {
    /// The question answered.
    pub question: String,
    /// The answer.
    pub answer: String,
}

/// Asks the user. Implementations may take arbitrarily long (a run waits in an
/// interrupt); callers cancel through their token.
pub trait Interaction: Send + Sync {
    /// Asks for approval of an action.
    fn approve(&self, request: ApprovalRequest) -> BoxFuture<'_, Result<ApprovalDecision>>;

    /// Asks questions; answers come back in the same order.
    fn ask(&self, questions: Vec<Question>) -> BoxFuture<'_, Result<Vec<Answer>>>;
}

/// Answers without a user: approves everything (`--yes`) or denies everything
/// (`--no-input`), and answers questions with a note telling the model to decide itself.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NonInteractive {
    /// Approve every `ask` (`--yes`); otherwise deny it.
    pub approve: bool,
}

impl Interaction for NonInteractive {
    fn approve(&self, request: ApprovalRequest) -> BoxFuture<'_, Result<ApprovalDecision>> {
        let approve = self.approve;
        Box::pin(async move {
            Ok(if approve {
                ApprovalDecision::Approve
            } else {
                ApprovalDecision::Deny {
                    reason: Some(format!(
                        "running without input (--no-input), so `{}` cannot be approved; \
                         rerun with --yes or change the policy",
                        request.tool
                    )),
                }
            })
        })
    }

    fn ask(&self, questions: Vec<Question>) -> BoxFuture<'_, Result<Vec<Answer>>> {
        Box::pin(async move {
            Ok(questions
                .into_iter()
                .map(|q| Answer {
                    question: q.question,
                    answer: "(no answer: the run is non-interactive; decide yourself and state \
                             the assumption you made)"
                        .into(),
                })
                .collect())
        })
    }
}

/// A scripted [`Interaction`] for tests: answers from queues, records every request, and
/// fails when its script runs out (so a test notices an unexpected prompt).
#[derive(Debug, Default)]
pub struct ScriptedInteraction {
    approvals: Mutex<VecDeque<ApprovalDecision>>,
    answers: Mutex<VecDeque<Vec<String>>>,
    seen: Mutex<Vec<ApprovalRequest>>,
    asked: Mutex<Vec<Vec<Question>>>,
}

impl ScriptedInteraction {
    /// An interaction with the given approval answers and question answers, in order.
    pub fn new(
        approvals: impl IntoIterator<Item = ApprovalDecision>,
        answers: impl IntoIterator<Item = Vec<String>>,
    ) -> Self {
        Self {
            approvals: Mutex::new(approvals.into_iter().collect()),
            answers: Mutex::new(answers.into_iter().collect()),
            ..Self::default()
        }
    }

    /// The approval requests seen so far.
    pub fn approval_requests(&self) -> Vec<ApprovalRequest> {
        self.seen.lock().map(|s| s.clone()).unwrap_or_default()
    }

    /// The question batches seen so far.
    pub fn questions(&self) -> Vec<Vec<Question>> {
        self.asked.lock().map(|s| s.clone()).unwrap_or_default()
    }
}

impl Interaction for ScriptedInteraction {
    fn approve(&self, request: ApprovalRequest) -> BoxFuture<'_, Result<ApprovalDecision>> {
        Box::pin(async move {
            let reason = request.reason.clone();
            if let Ok(mut seen) = self.seen.lock() {
                seen.push(request);
            }
            self.approvals
                .lock()
                .ok()
                .and_then(|mut q| q.pop_front())
                .ok_or_else(|| {
                    Error::Failed(format!(
                        "scripted interaction: unexpected approval request ({reason})"
                    ))
                })
        })
    }

    fn ask(&self, questions: Vec<Question>) -> BoxFuture<'_, Result<Vec<Answer>>> {
        Box::pin(async move {
            if let Ok(mut asked) = self.asked.lock() {
                asked.push(questions.clone());
            }
            let answers = self
                .answers
                .lock()
                .ok()
                .and_then(|mut q| q.pop_front())
                .ok_or_else(|| {
                    Error::Failed("scripted interaction: unexpected questions".into())
                })?;
            Ok(questions
                .into_iter()
                .zip(answers.into_iter().chain(std::iter::repeat(String::new())))
                .map(|(q, answer)| Answer {
                    question: q.question,
                    answer,
                })
                .collect())
        })
    }
}
