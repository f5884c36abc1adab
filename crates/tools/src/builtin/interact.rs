//! `take_note` and `ask_questions`.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::context::{Note, ToolContext};
use crate::error::{Error, Result};
use crate::interaction::{Answer, Question};
use crate::tool::TypedTool;

/// `take_note` arguments.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct TakeNoteInput {
    /// The note: a finding, a decision, something to remember for later stages.
    pub note: String,
    /// Optional tags.
    #[serde(default)]
    pub tags: Vec<String>,
}

/// `take_note` result.
#[derive(Debug, Serialize, JsonSchema)]
pub struct TakeNoteOutput {
    /// Notes taken so far in this run.
    pub count: usize,
}

/// Records a note for later stages.
pub struct TakeNote;

impl TypedTool for TakeNote {
    type Input = TakeNoteInput;
    type Output = TakeNoteOutput;

    fn name(&self) -> &'static str {
        "take_note"
    }

    fn description(&self) -> &'static str {
        "Record a note (finding, decision, open question) that later stages of the run can read."
    }

    async fn run(&self, ctx: &ToolContext, input: TakeNoteInput) -> Result<TakeNoteOutput> {
        if input.note.trim().is_empty() {
            return Err(Error::Failed("the note is empty".into()));
        }
        let mut notes = ctx
            .env
            .notes
            .lock()
            .map_err(|_| Error::Failed("notes are unavailable".into()))?;
        notes.push(Note {
            text: input.note,
            tags: input.tags,
        });
        Ok(TakeNoteOutput { count: notes.len() })
    }

    fn render(&self, o: &TakeNoteOutput) -> String {
        format!("noted ({} notes so far)", o.count)
    }
}

/// `ask_questions` arguments.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct AskQuestionsInput {
    /// The questions for the user (ask only what you cannot find out yourself).
    pub questions: Vec<Question>,
}

/// `ask_questions` result.
#[derive(Debug, Serialize, JsonSchema)]
pub struct AskQuestionsOutput {
    /// The answers, in order.
    pub answers: Vec<Answer>,
}

/// Asks the user; the run pauses until they answer.
pub struct AskQuestions;

impl TypedTool for AskQuestions {
    type Input = AskQuestionsInput;
    type Output = AskQuestionsOutput;

    fn name(&self) -> &'static str {
        "ask_questions"
    }

    fn description(&self) -> &'static str {
        "Ask the user one or more questions and wait for the answers (the run pauses). Use it \
         for decisions only the user can make; give options when it is a choice."
    }

    async fn run(&self, ctx: &ToolContext, input: AskQuestionsInput) -> Result<AskQuestionsOutput> {
        if input.questions.is_empty() {
            return Err(Error::Failed("no questions given".into()));
        }
        let answers = ctx.env.interaction.ask(input.questions).await?;
        Ok(AskQuestionsOutput { answers })
    }

    fn render(&self, o: &AskQuestionsOutput) -> String {
        o.answers
            .iter()
            .map(|a| format!("Q: {}\nA: {}", a.question, a.answer))
            .collect::<Vec<_>>()
            .join("\n\n")
    }
}
