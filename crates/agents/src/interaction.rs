//! [`Interaction`] backed by graph interrupts.
//!
//! A tool that needs the user (a shell command the policy says to `ask` about, a secret file,
//! `ask_questions`) calls the run's [`Interaction`]. This one does not block: it records what
//! it needs and refuses the call; the agent loop sees the pending request, stops, and returns
//! an interrupt whose scratch holds the conversation. The run pauses in WAITING_INPUT with the
//! question persisted; when it is answered, the node runs again, the loop restores the
//! conversation, [`GraphInteraction::preset`] hands the answer to the same tool call, and the
//! agent continues where it stopped.

use std::sync::Mutex;

use serde::{Deserialize, Serialize};
use serde_json::Value;
use trellis_protocol::{Answer, Interrupt, InterruptKind};
use trellis_tools::tool::BoxFuture;
use trellis_tools::{
    Answer as QuestionAnswer, ApprovalDecision, ApprovalRequest, Interaction, Question,
};

/// What a tool call is waiting for.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum PendingInput {
    /// Approval of an action.
    Approval {
        /// The action.
        request: ApprovalRequest,
    },
    /// Answers to questions.
    Questions {
        /// The questions, in order.
        questions: Vec<Question>,
    },
}

impl PendingInput {
    /// The interrupt shown to the user.
    pub fn interrupt(&self, node: &str) -> Interrupt {
        match self {
            PendingInput::Approval { request: r } => Interrupt {
                kind: InterruptKind::Approval,
                prompt: format!("{node}: allow `{}`? {}", r.tool, r.reason),
                data: serde_json::to_value(self).unwrap_or(Value::Null),
            },
            PendingInput::Questions { questions: q } => Interrupt {
                kind: InterruptKind::Question,
                prompt: q
                    .iter()
                    .map(|q| {
                        if q.options.is_empty() {
                            q.question.clone()
                        } else {
                            format!("{} [{}]", q.question, q.options.join(" / "))
                        }
                    })
                    .collect::<Vec<_>>()
                    .join("\n"),
                data: serde_json::to_value(self).unwrap_or(Value::Null),
            },
        }
    }
}

/// The graph-interrupt [`Interaction`] of one agent activation.
#[derive(Debug, Default)]
pub struct GraphInteraction {
    preset: Mutex<Option<Answer>>,
    pending: Mutex<Option<PendingInput>>,
}

impl GraphInteraction {
    /// A new interaction with nothing pending.
    pub fn new() -> Self {
        Self::default()
    }

    /// Supplies the user's answer for the next request (set when the node resumes).
    pub fn preset(&self, answer: Answer) {
        if let Ok(mut p) = self.preset.lock() {
            *p = Some(answer);
        }
    }

    /// Takes the request a refused call is waiting for, if any.
    pub fn take_pending(&self) -> Option<PendingInput> {
        self.pending.lock().ok().and_then(|mut p| p.take())
    }

    /// Whether a refused call waits for the user.
    pub fn has_pending(&self) -> bool {
        self.pending.lock().is_ok_and(|p| p.is_some())
    }

    fn take_preset(&self) -> Option<Answer> {
        self.preset.lock().ok().and_then(|mut p| p.take())
    }

    fn wait_for(&self, input: PendingInput) -> trellis_tools::Error {
        if let Ok(mut p) = self.pending.lock() {
            *p = Some(input);
        }
        trellis_tools::Error::Failed("waiting for the user's answer".into())
    }
}

/// The text of an approval answer's comment, if any.
fn comment(answer: &Answer) -> Option<String> {
    match &answer.0 {
        Value::Object(m) => m
            .get("comment")
            .or_else(|| m.get("reason"))
            .and_then(Value::as_str)
            .map(str::to_owned),
        Value::String(s) if !answer.is_approval() => Some(s.clone()),
        _ => None,
    }
}

/// Answers from a JSON value: an array of strings (in order), an object `{answers: […]}`,
/// or one string (for the first question).
fn answers_of(answer: &Answer, questions: &[Question]) -> Vec<QuestionAnswer> {
    let texts: Vec<String> = match &answer.0 {
        Value::Array(items) => items.iter().map(text_of).collect(),
        Value::Object(m) => match m.get("answers") {
            Some(Value::Array(items)) => items.iter().map(text_of).collect(),
            _ => vec![text_of(&answer.0)],
        },
        other => vec![text_of(other)],
    };
    questions
        .iter()
        .enumerate()
        .map(|(i, q)| QuestionAnswer {
            question: q.question.clone(),
            answer: texts.get(i).cloned().unwrap_or_default(),
        })
        .collect()
}

fn text_of(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        other => trellis_protocol::canonical::to_canonical_string(other).unwrap_or_default(),
    }
}

impl Interaction for GraphInteraction {
    fn approve(
        &self,
        request: ApprovalRequest,
    ) -> BoxFuture<'_, trellis_tools::Result<ApprovalDecision>> {
        Box::pin(async move {
            match self.take_preset() {
                Some(answer) if answer.is_approval() => Ok(ApprovalDecision::Approve),
                Some(answer) => Ok(ApprovalDecision::Deny {
                    reason: comment(&answer),
                }),
                None => Err(self.wait_for(PendingInput::Approval { request })),
            }
        })
    }

    fn ask(
        &self,
        questions: Vec<Question>,
    ) -> BoxFuture<'_, trellis_tools::Result<Vec<QuestionAnswer>>> {
        Box::pin(async move {
            match self.take_preset() {
                Some(answer) => Ok(answers_of(&answer, &questions)),
                None => Err(self.wait_for(PendingInput::Questions { questions })),
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn first_request_waits_then_the_preset_answers_it() {
        let i = GraphInteraction::new();
        let req = ApprovalRequest {
            tool: "shell".into(),
            args: serde_json::json!({"command": "curl x"}),
            reason: "`curl x` is network".into(),
            class: None,
        };
        assert!(i.approve(req.clone()).await.is_err());
        let pending = i.take_pending();
        assert_eq!(
            pending,
            Some(PendingInput::Approval {
                request: req.clone()
            })
        );
        let it = pending.map(|p| p.interrupt("code_generation"));
        assert!(it.is_some_and(|it| it.prompt.contains("allow `shell`")));
        i.preset(Answer::reject("no network"));
        let d = i.approve(req).await.ok();
        assert_eq!(
            d,
            Some(ApprovalDecision::Deny {
                reason: Some("no network".into())
            })
        );
        let q = vec![
            Question {
                question: "Which DB?".into(),
                options: vec![],
            },
            Question {
                question: "Port?".into(),
                options: vec![],
            },
        ];
        assert!(i.ask(q.clone()).await.is_err());
        assert!(matches!(
            i.take_pending(),
            Some(PendingInput::Questions { .. })
        ));
        i.preset(Answer(serde_json::json!(["sqlite", "8080"])));
        let a = i.ask(q).await.unwrap_or_default();
        assert_eq!(a[1].answer, "8080");
    }
}
