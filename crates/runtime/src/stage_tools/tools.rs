//! The stage tools themselves (see the parent module for who gets which).

use std::borrow::Cow;
use std::marker::PhantomData;
use std::sync::Arc;

use schemars::{JsonSchema, Schema, SchemaGenerator};
use serde::{Deserialize, Deserializer};
use serde_json::Value;
use trellis_tools::git::Git;
use trellis_tools::review::{self, ReviewComment};
use trellis_tools::{Error as ToolError, Question, ToolContext, TypedTool};
use trellis_workflow::artifacts::{
    self, ArtifactKind, PlanCard, ResearchCard, ScopeCard, Validated,
};

use super::{Caller, ReviewVerdict, StageError, StageSink, Verdict};

type Out = trellis_tools::Result<String>;

fn failed(e: StageError) -> ToolError {
    match e {
        // Kept as it is: the agent loop may act on it (a question waiting for the user).
        StageError::Tools(e) => e,
        other => ToolError::Failed(other.to_string()),
    }
}

/// Runs a (possibly blocking) sink call off the async workers.
async fn on_sink<T: Send + 'static>(
    sink: &Arc<dyn StageSink>,
    f: impl FnOnce(&dyn StageSink) -> Result<T, StageError> + Send + 'static,
) -> trellis_tools::Result<T> {
    let sink = sink.clone();
    tokio::task::spawn_blocking(move || f(sink.as_ref()))
        .await
        .map_err(|e| ToolError::Failed(format!("internal error: {e}")))?
        .map_err(failed)
}

fn required(field: &str, value: &str) -> trellis_tools::Result<String> {
    let v = value.trim();
    if v.is_empty() {
        return Err(ToolError::Failed(format!(
            "`{field}` is empty; say something"
        )));
    }
    Ok(v.to_owned())
}

const END_TURN: &str = "End your turn now with a one-line summary; do not call more tools.";

// ---- submit_scope, submit_research, submit_plan ----

/// A card kind a `submit_*` tool takes.
pub(super) trait Card: Send + Sync + 'static {
    const KIND: ArtifactKind;
    const NAME: &'static str;
    const DESCRIPTION: &'static str;
    type Schema: JsonSchema;
}

pub(super) struct ScopeKind;
pub(super) struct ResearchKind;
pub(super) struct PlanKind;

impl Card for ScopeKind {
    const KIND: ArtifactKind = ArtifactKind::ScopeCard;
    const NAME: &'static str = "submit_scope";
    const DESCRIPTION: &'static str = "Submit the scope card for the user's approval: \
        `in_scope` (what the change covers, at least one item), `out_of_scope`, `constraints` \
        and an optional `summary`. An invalid card is refused with what to fix; call again \
        with the whole corrected card. After a successful submission, end your turn.";
    type Schema = ScopeCard;
}

impl Card for ResearchKind {
    const KIND: ArtifactKind = ArtifactKind::ResearchCard;
    const NAME: &'static str = "submit_research";
    const DESCRIPTION: &'static str = "Submit the research card for the user's approval: \
        `key_files` (each `path` and `why`, at least one), `patterns`, `recommendations` and \
        an optional `summary`. An invalid card is refused with what to fix; call again with \
        the whole corrected card. After a successful submission, end your turn.";
    type Schema = ResearchCard;
}

impl Card for PlanKind {
    const KIND: ArtifactKind = ArtifactKind::Plan;
    const NAME: &'static str = "submit_plan";
    const DESCRIPTION: &'static str = "Submit the plan for the user's approval: \
        `approach_summary` and `pulses` (each `id`, `title`, `description` and optional \
        `files`, in execution order). An invalid plan is refused with what to fix; call again \
        with the whole corrected plan. After a successful submission, end your turn.";
    type Schema = PlanCard;
}

/// Any JSON, advertised with the card's schema: validation happens in the tool, so a model
/// gets the artifact's own messages instead of a deserialiser's.
pub(super) struct CardInput<T>(Value, PhantomData<fn() -> T>);

impl<'de, T> Deserialize<'de> for CardInput<T> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        Ok(Self(Value::deserialize(d)?, PhantomData))
    }
}

impl<T: JsonSchema> JsonSchema for CardInput<T> {
    fn schema_name() -> Cow<'static, str> {
        T::schema_name()
    }

    fn schema_id() -> Cow<'static, str> {
        T::schema_id()
    }

    fn json_schema(generator: &mut SchemaGenerator) -> Schema {
        T::json_schema(generator)
    }
}

pub(super) struct Submit<K>(Arc<dyn StageSink>, PhantomData<fn() -> K>);

impl<K> Submit<K> {
    pub(super) fn new(sink: Arc<dyn StageSink>) -> Self {
        Self(sink, PhantomData)
    }
}

impl<K: Card> TypedTool for Submit<K> {
    type Input = CardInput<K::Schema>;
    type Output = String;

    fn name(&self) -> &'static str {
        K::NAME
    }

    fn description(&self) -> &'static str {
        K::DESCRIPTION
    }

    fn text_only(&self) -> bool {
        true
    }

    async fn run(&self, ctx: &ToolContext, input: Self::Input) -> Out {
        let card: Validated = artifacts::validate_json(K::KIND, &input.0).map_err(|e| {
            ToolError::Failed(format!(
                "{e}\nFix this and call {} again with the whole {}.",
                K::NAME,
                K::KIND.label()
            ))
        })?;
        let from = Caller::of(ctx);
        let done = on_sink(&self.0, move |s| s.submit(&from, &card)).await?;
        let file = done
            .file
            .map(|f| format!(" and saved as {f}"))
            .unwrap_or_default();
        Ok(format!(
            "Submitted the {} (version {}) for the user's approval{file}. {END_TURN}",
            K::KIND.label(),
            done.version
        ))
    }

    fn render(&self, o: &String) -> String {
        o.clone()
    }
}

// ---- complete_pulse, request_extension, ask_questions ----

/// `complete_pulse` arguments.
#[derive(Debug, Deserialize, JsonSchema)]
pub(super) struct CompletePulseInput {
    /// What was done: the pulses implemented, what was tested, anything left open.
    summary: String,
}

pub(super) struct CompletePulse(pub(super) Arc<dyn StageSink>);

impl TypedTool for CompletePulse {
    type Input = CompletePulseInput;
    type Output = String;

    fn name(&self) -> &'static str {
        "complete_pulse"
    }

    fn description(&self) -> &'static str {
        "Mark execution complete once every pulse of the plan is implemented (and tested): \
         give a `summary` of what was done. The review stage starts next; end your turn after."
    }

    fn text_only(&self) -> bool {
        true
    }

    async fn run(&self, ctx: &ToolContext, input: CompletePulseInput) -> Out {
        let summary = required("summary", &input.summary)?;
        let from = Caller::of(ctx);
        on_sink(&self.0, move |s| s.pulse_complete(&from, &summary)).await?;
        Ok(format!(
            "Execution is marked complete; the review starts next. {END_TURN}"
        ))
    }

    fn render(&self, o: &String) -> String {
        o.clone()
    }
}

/// `request_extension` arguments.
#[derive(Debug, Deserialize, JsonSchema)]
pub(super) struct RequestExtensionInput {
    /// Why more turns are needed: what is left and why it did not fit.
    reason: String,
    /// How many more turns you need, if you can tell.
    #[serde(default)]
    turns: Option<u32>,
}

pub(super) struct RequestExtension(pub(super) Arc<dyn StageSink>);

impl TypedTool for RequestExtension {
    type Input = RequestExtensionInput;
    type Output = String;

    fn name(&self) -> &'static str {
        "request_extension"
    }

    fn description(&self) -> &'static str {
        "Ask for more turns when the stage's work does not fit in what is left: give the \
         `reason` (what remains) and optionally how many `turns`."
    }

    fn text_only(&self) -> bool {
        true
    }

    async fn run(&self, ctx: &ToolContext, input: RequestExtensionInput) -> Out {
        let reason = required("reason", &input.reason)?;
        let from = Caller::of(ctx);
        let turns = input.turns;
        let granted = on_sink(&self.0, move |s| s.extension(&from, &reason, turns)).await?;
        Ok(match granted {
            Some(n) => format!("Granted: you have {n} more turn(s). Continue."),
            None => "Your request was recorded. Continue with the most important work first; \
                     if you run out, finish with what you have and say what is left."
                .to_owned(),
        })
    }

    fn render(&self, o: &String) -> String {
        o.clone()
    }
}

/// A question: its text, or the text and suggested answers.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(untagged)]
pub(super) enum QuestionItem {
    /// Just the question.
    Text(String),
    /// The question with options.
    Full(Question),
}

/// `ask_questions` arguments.
#[derive(Debug, Deserialize, JsonSchema)]
pub(super) struct AskQuestionsInput {
    /// The questions for the user (only what you cannot find out yourself).
    questions: Vec<QuestionItem>,
}

pub(super) struct AskQuestions(pub(super) Arc<dyn StageSink>);

impl TypedTool for AskQuestions {
    type Input = AskQuestionsInput;
    type Output = String;

    fn name(&self) -> &'static str {
        "ask_questions"
    }

    fn description(&self) -> &'static str {
        "Ask the user questions you cannot answer from the code (scope decisions, \
         preferences); give options when it is a choice. Returns the answers when the user \
         gives them, otherwise continue with stated assumptions."
    }

    fn text_only(&self) -> bool {
        true
    }

    async fn run(&self, ctx: &ToolContext, input: AskQuestionsInput) -> Out {
        let questions: Vec<Question> = input
            .questions
            .into_iter()
            .map(|q| match q {
                QuestionItem::Text(question) => Question {
                    question,
                    options: Vec::new(),
                },
                QuestionItem::Full(q) => q,
            })
            .filter(|q| !q.question.trim().is_empty())
            .collect();
        if questions.is_empty() {
            return Err(ToolError::Failed(
                "no questions given; pass `questions`, a list of questions".into(),
            ));
        }
        let from = Caller::of(ctx);
        let answers = self
            .0
            .questions(&from, questions, ctx.env.interaction.as_ref())
            .await
            .map_err(failed)?;
        Ok(match answers {
            Some(answers) => answers
                .iter()
                .map(|a| format!("Q: {}\nA: {}", a.question, a.answer))
                .collect::<Vec<_>>()
                .join("\n\n"),
            None => "Your questions were recorded for the user. Continue with reasonable \
                     assumptions and state them in what you submit."
                .to_owned(),
        })
    }

    fn render(&self, o: &String) -> String {
        o.clone()
    }
}

// ---- review tools ----

/// `get_diff` arguments.
#[derive(Debug, Default, Deserialize, JsonSchema)]
pub(super) struct GetDiffInput {
    /// Only this file (relative to the repository root); all files when omitted.
    #[serde(default)]
    path: Option<String>,
}

pub(super) struct GetDiff;

impl TypedTool for GetDiff {
    type Input = GetDiffInput;
    type Output = String;

    fn name(&self) -> &'static str {
        "get_diff"
    }

    fn description(&self) -> &'static str {
        "The run's changes against its starting point (what `trellis review` shows): per file \
         its hunks, each line with its line number in the new version, for line comments."
    }

    fn text_only(&self) -> bool {
        true
    }

    async fn run(&self, ctx: &ToolContext, input: GetDiffInput) -> Out {
        let base = ctx.env.base_commit.clone().ok_or_else(|| {
            ToolError::Failed("this workspace has no run start commit, so there is no diff".into())
        })?;
        let only = match input.path.as_deref().map(str::trim) {
            Some(p) if !p.is_empty() => Some(ctx.workspace().resolve(p)?.rel),
            _ => None,
        };
        let root = ctx.workspace().root().to_path_buf();
        let run = ctx
            .env
            .run
            .clone()
            .unwrap_or_else(|| trellis_protocol::RunId::from_string("workspace"));
        let (mut set, dirty) = tokio::task::spawn_blocking(move || {
            let git = Git::new(&root);
            let head = git.text(&["rev-parse", "HEAD"])?;
            let set = review::load(&git, &run, &base, &head)?;
            let dirty = git.text(&["status", "--porcelain", "--untracked-files=all"])?;
            Ok::<_, ToolError>((set, dirty))
        })
        .await
        .map_err(|e| ToolError::Failed(format!("internal error: {e}")))??;
        if let Some(p) = &only {
            set.files.retain(|f| &f.path == p);
        }
        let mut text = if set.files.is_empty() {
            match &only {
                Some(p) => format!("{p} is not changed by this run.\n"),
                None => "This run changed nothing.\n".to_owned(),
            }
        } else {
            set.to_text()
        };
        if !dirty.trim().is_empty() {
            text.push_str("\nNot yet committed in the worktree (not part of the diff above):\n");
            text.push_str(&dirty);
            text.push('\n');
        }
        Ok(text)
    }

    fn render(&self, o: &String) -> String {
        o.clone()
    }
}

/// No arguments.
#[derive(Debug, Default, Deserialize, JsonSchema)]
pub(super) struct NoInput {}

pub(super) struct GetScopeCard(pub(super) Arc<dyn StageSink>);

impl TypedTool for GetScopeCard {
    type Input = NoInput;
    type Output = String;

    fn name(&self) -> &'static str {
        "get_scope_card"
    }

    fn description(&self) -> &'static str {
        "The scope card the user approved for this run (in scope, out of scope, \
         constraints): review the change against it."
    }

    fn text_only(&self) -> bool {
        true
    }

    async fn run(&self, _ctx: &ToolContext, _input: NoInput) -> Out {
        let card = on_sink(&self.0, |s| s.approved(ArtifactKind::ScopeCard)).await?;
        Ok(match card {
            None => "This run has no approved scope card; review the change against the \
                     request."
                .to_owned(),
            Some(content) => match artifacts::validate_kind(ArtifactKind::ScopeCard, &content) {
                Ok(v) => v.to_markdown(),
                Err(_) => content,
            },
        })
    }

    fn render(&self, o: &String) -> String {
        o.clone()
    }
}

/// How much a comment matters.
#[derive(Clone, Copy, Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub(super) enum Severity {
    /// A remark.
    #[serde(alias = "note")]
    Info,
    /// Worth changing.
    #[serde(alias = "nit", alias = "minor")]
    Suggestion,
    /// Should be changed.
    #[serde(alias = "major")]
    Warning,
    /// Must be changed.
    #[serde(alias = "critical", alias = "blocker")]
    Error,
}

impl Severity {
    fn name(s: Option<Severity>) -> Option<String> {
        s.map(|s| {
            match s {
                Severity::Info => "info",
                Severity::Suggestion => "suggestion",
                Severity::Warning => "warning",
                Severity::Error => "error",
            }
            .to_owned()
        })
    }
}

/// `add_line_comment` arguments.
#[derive(Debug, Deserialize, JsonSchema)]
pub(super) struct LineCommentInput {
    /// The file, relative to the repository root.
    path: String,
    /// The line (1-based, as `get_diff` numbers it in the new version).
    line: u32,
    /// The comment: what is wrong and what to do.
    comment: String,
    /// How much it matters.
    #[serde(default)]
    severity: Option<Severity>,
}

/// `add_file_comment` arguments.
#[derive(Debug, Deserialize, JsonSchema)]
pub(super) struct FileCommentInput {
    /// The file, relative to the repository root.
    path: String,
    /// The comment about the file as a whole.
    comment: String,
    /// How much it matters.
    #[serde(default)]
    severity: Option<Severity>,
}

/// `add_review_comment` arguments.
#[derive(Debug, Deserialize, JsonSchema)]
pub(super) struct ReviewCommentInput {
    /// The comment about the change as a whole.
    comment: String,
    /// How much it matters.
    #[serde(default)]
    severity: Option<Severity>,
}

async fn add_comment(sink: &Arc<dyn StageSink>, ctx: &ToolContext, comment: ReviewComment) -> Out {
    let from = Caller::of(ctx);
    let at = comment.location();
    let n = on_sink(sink, move |s| s.comment(&from, &comment)).await?;
    let on = if at.is_empty() {
        String::new()
    } else {
        format!(" on {at}")
    };
    Ok(format!(
        "Comment added{on} ({n} in this review). Finish with complete_review."
    ))
}

fn rel_path(ctx: &ToolContext, path: &str) -> trellis_tools::Result<String> {
    Ok(ctx.workspace().resolve(&required("path", path)?)?.rel)
}

pub(super) struct AddLineComment(pub(super) Arc<dyn StageSink>);

impl TypedTool for AddLineComment {
    type Input = LineCommentInput;
    type Output = String;

    fn name(&self) -> &'static str {
        "add_line_comment"
    }

    fn description(&self) -> &'static str {
        "Comment on one line of a changed file (`path`, `line` as get_diff numbers it, \
         `comment`, optional `severity`: info, suggestion, warning or error)."
    }

    fn text_only(&self) -> bool {
        true
    }

    async fn run(&self, ctx: &ToolContext, input: LineCommentInput) -> Out {
        if input.line == 0 {
            return Err(ToolError::Failed(
                "`line` is 1-based; give the line number get_diff shows".into(),
            ));
        }
        let comment = ReviewComment {
            path: Some(rel_path(ctx, &input.path)?),
            line: Some(input.line),
            severity: Severity::name(input.severity),
            ..ReviewComment::general(required("comment", &input.comment)?)
        };
        add_comment(&self.0, ctx, comment).await
    }

    fn render(&self, o: &String) -> String {
        o.clone()
    }
}

pub(super) struct AddFileComment(pub(super) Arc<dyn StageSink>);

impl TypedTool for AddFileComment {
    type Input = FileCommentInput;
    type Output = String;

    fn name(&self) -> &'static str {
        "add_file_comment"
    }

    fn description(&self) -> &'static str {
        "Comment on a changed file as a whole (`path`, `comment`, optional `severity`: info, \
         suggestion, warning or error)."
    }

    fn text_only(&self) -> bool {
        true
    }

    async fn run(&self, ctx: &ToolContext, input: FileCommentInput) -> Out {
        let comment = ReviewComment {
            path: Some(rel_path(ctx, &input.path)?),
            severity: Severity::name(input.severity),
            ..ReviewComment::general(required("comment", &input.comment)?)
        };
        add_comment(&self.0, ctx, comment).await
    }

    fn render(&self, o: &String) -> String {
        o.clone()
    }
}

pub(super) struct AddReviewComment(pub(super) Arc<dyn StageSink>);

impl TypedTool for AddReviewComment {
    type Input = ReviewCommentInput;
    type Output = String;

    fn name(&self) -> &'static str {
        "add_review_comment"
    }

    fn description(&self) -> &'static str {
        "Comment on the change as a whole (`comment`, optional `severity`: info, suggestion, \
         warning or error)."
    }

    fn text_only(&self) -> bool {
        true
    }

    async fn run(&self, ctx: &ToolContext, input: ReviewCommentInput) -> Out {
        let comment = ReviewComment {
            severity: Severity::name(input.severity),
            ..ReviewComment::general(required("comment", &input.comment)?)
        };
        add_comment(&self.0, ctx, comment).await
    }

    fn render(&self, o: &String) -> String {
        o.clone()
    }
}

/// `complete_review` arguments.
#[derive(Debug, Deserialize, JsonSchema)]
pub(super) struct CompleteReviewInput {
    /// `APPROVED` (ready to merge), `NEEDS_REVISION` (the comments must be addressed) or
    /// `HUMAN_REVIEW_REQUESTED` (a person should decide).
    verdict: String,
    /// The review's conclusion in a few sentences.
    summary: String,
}

pub(super) struct CompleteReview(pub(super) Arc<dyn StageSink>);

impl TypedTool for CompleteReview {
    type Input = CompleteReviewInput;
    type Output = String;

    fn name(&self) -> &'static str {
        "complete_review"
    }

    fn description(&self) -> &'static str {
        "Finish the review with a `verdict` (APPROVED, NEEDS_REVISION or \
         HUMAN_REVIEW_REQUESTED) and a `summary`; add comments first. End your turn after."
    }

    fn text_only(&self) -> bool {
        true
    }

    async fn run(&self, ctx: &ToolContext, input: CompleteReviewInput) -> Out {
        let verdict = Verdict::parse(&input.verdict).map_err(ToolError::Failed)?;
        let review = ReviewVerdict {
            verdict,
            summary: required("summary", &input.summary)?,
        };
        let from = Caller::of(ctx);
        let done = on_sink(&self.0, move |s| s.verdict(&from, &review)).await?;
        Ok(format!(
            "Review completed with {} (review version {}); it goes to the user for approval. \
             {END_TURN}",
            verdict.as_str(),
            done.version
        ))
    }

    fn render(&self, o: &String) -> String {
        o.clone()
    }
}
