//! The task tree steps (`step:` on agent stages of a workflow with `state:
//! [task_tree]`, `docs/workflows.md` "task_tree"): each step's agent answers with a JSON object
//! (read leniently; a deterministic fallback when it cannot be read), which becomes task tree
//! operations ([`TreeOp`], applied by the `task_tree` channel's reducer) and the result's
//! `outcome` the workflow routes on. The prioritizer and the validator are deterministic
//! functions, not model calls.
//!
//! Retry limits: the implementor runs at most [`IMPLEMENTOR_RUNS`] times per task
//! (validation failures and QA `incomplete`), the planner [`PLANNER_RUNS`] (QA `plan_issue`),
//! the researcher [`RESEARCHER_RUNS`] (QA `wrong_approach`); then the task is marked failed
//! and its dependents are blocked.

use std::sync::Arc;

use serde_json::{Value, json};
use trellis_graph::{NodeContext, NodeError, NodeOutput};
use trellis_workflow::tasktree::{CHANNEL, FIELD_LIMITS, TaskStatus, TaskTree, TreeOp, clip_chars};
use trellis_workflow::{AgentSpec, StageContext};

use crate::handlers::RunContext;

mod answer;
mod decide;

pub use answer::json_in;
use answer::strings;
use decide::{Answer, decide};

/// Runs of the implementor per task: the first and 3 retries (`[agents.task_tree]`
/// `implementor_runs`).
pub const IMPLEMENTOR_RUNS: u32 = 4;
/// Runs of the planner per task: the first and 2 retries (`planner_runs`).
pub const PLANNER_RUNS: u32 = 3;
/// Runs of the researcher per task: the first and 2 retries (`researcher_runs`).
pub const RESEARCHER_RUNS: u32 = 3;
/// Expansions per run before gaps stop adding tasks (`max_expansions`).
pub const MAX_EXPANSIONS: u32 = 12;
/// Characters of a step's work item shown to its agent (the whole plan fits).
const ITEM_MAX_CHARS: u64 = 16_000;

/// The limits in force: the configuration's, else the defaults ([`IMPLEMENTOR_RUNS`] and
/// the others).
#[derive(Clone, Copy, Debug)]
struct Limits {
    implementor: u32,
    planner: u32,
    researcher: u32,
    expansions: u32,
    /// Handoffs kept to their field limits (`compress_handoffs`, default on).
    compress: bool,
}

/// The limits of the gap analysis' text fields (its whole is limited by `FIELD_LIMITS`).
const GAP_FIELD_LIMITS: [(&str, usize); 3] = [
    ("current_state_summary", 1000),
    ("desired_state_summary", 1000),
    ("gap_description", 2000),
];

/// Keeps the handoff fields the ops set to their limits ([`FIELD_LIMITS`]): an over-long one
/// is summarised by `summarizer` (the output normaliser: LLM compression before truncation),
/// truncated when that fails or overshoots. Returns the repairs, for the node's result.
async fn compress_ops(
    ops: &mut [TreeOp],
    summarizer: Option<&dyn trellis_llm::ModelProvider>,
    cancel: &tokio_util::sync::CancellationToken,
) -> Vec<trellis_agents::FieldRepair> {
    let mut repairs = Vec::new();
    for op in ops {
        let TreeOp::SetField { field, value, .. } = op else {
            continue;
        };
        let mut targets: Vec<(String, &mut String, usize)> = Vec::new();
        match value {
            Value::String(text) => {
                if let Some((_, max)) = FIELD_LIMITS.iter().find(|(f, _)| f == field) {
                    targets.push((field.clone(), text, *max));
                }
            }
            Value::Object(m) => {
                for (key, t) in m.iter_mut() {
                    if let (Some((_, max)), Value::String(t)) =
                        (GAP_FIELD_LIMITS.iter().find(|(k, _)| k == key), t)
                    {
                        targets.push((format!("{field}.{key}"), t, *max));
                    }
                }
            }
            _ => {}
        }
        for (name, text, max) in targets {
            match trellis_agents::compress_field(summarizer, &name, text, max, cancel).await {
                Ok(c) => {
                    *text = c.text;
                    repairs.extend(c.repair);
                }
                Err(e) => {
                    tracing::warn!(field = %name, error = %e, "compressing a handoff failed; truncated");
                    *text = clip_chars(text, max);
                }
            }
        }
    }
    for r in &repairs {
        tracing::info!(field = %r.field, from = r.from_chars, to = r.to_chars, method = ?r.method, "task tree handoff compressed");
    }
    repairs
}

impl Limits {
    fn of(c: &trellis_agents::config::TaskTreeLimits) -> Self {
        Self {
            implementor: c.implementor_runs.unwrap_or(IMPLEMENTOR_RUNS).max(1),
            planner: c.planner_runs.unwrap_or(PLANNER_RUNS).max(1),
            researcher: c.researcher_runs.unwrap_or(RESEARCHER_RUNS).max(1),
            expansions: c.max_expansions.unwrap_or(MAX_EXPANSIONS),
            compress: c.compress_handoffs.unwrap_or(true),
        }
    }
}

fn node_error(e: impl std::fmt::Display) -> NodeError {
    NodeError::new(e.to_string())
}

/// What a step decided: the ops, the outcome, feedback for another stage, and a note.
struct Decided {
    ops: Vec<TreeOp>,
    outcome: Option<&'static str>,
    feedback: Option<(&'static str, String)>,
    failure: Option<String>,
    note: Option<String>,
}

impl Decided {
    fn new(ops: Vec<TreeOp>, outcome: Option<&'static str>) -> Self {
        Self {
            ops,
            outcome,
            feedback: None,
            failure: None,
            note: None,
        }
    }
}

impl RunContext {
    /// A task tree step: the agent runs with the tree's view for its step as its work item,
    /// then its answer becomes tree operations and an outcome.
    pub(crate) async fn run_task_step(
        self: Arc<Self>,
        stage: StageContext,
        agent: AgentSpec,
        mut ctx: NodeContext,
    ) -> Result<NodeOutput, NodeError> {
        let step = stage.step.clone().unwrap_or_default();
        let tree = TaskTree::from_value(ctx.state.get(CHANNEL)).map_err(node_error)?;
        let task = tree.current_task.clone();
        if let Some(out) = step_without_agent(&tree, &step) {
            return Ok(out);
        }
        self.give_work_item(&tree, &step, &mut ctx);
        // The stage runs many times (once per task); earlier tasks' results are not this
        // task's previous attempt.
        ctx.previous = None;
        let cancel = ctx.cancel.clone();
        let agent_name = agent.agent.clone();
        let ctx_task = ctx
            .state
            .get("task")
            .and_then(Value::as_str)
            .map(str::to_owned);
        let out = self
            .clone()
            .run_stage_agent(stage, agent, ctx, None)
            .await?
            .0;
        if out.is_interrupt() {
            return Ok(out);
        }
        let mut result = out.recorded().clone();
        let answer = crate::handlers::output_text(&result);
        let parsed = json_in(&answer).unwrap_or(Value::Null);
        let request = ctx_task.unwrap_or_default();
        let limits = Limits::of(&self.runtime.agents.task_tree);
        let mut decided = decide(
            &tree,
            limits,
            &step,
            &parsed,
            Answer {
                text: &answer,
                request: &request,
            },
            &result,
            out.is_failure(),
        );
        let repairs = if limits.compress {
            self.compress_step_ops(&step, agent_name, &mut decided.ops, &cancel)
                .await
        } else {
            Vec::new()
        };
        let mut check = tree.clone();
        if let Err(e) = check.apply_all(&decided.ops) {
            return Ok(refused_answer(&step, result, &e));
        }
        annotate_result(&mut result, &decided, task.as_ref(), &repairs, &check);
        Ok(step_output(decided, result))
    }

    /// Puts the tree's view for `step` into the agent's input as its work item, with the
    /// item's size limit; with compressed handoffs the earlier stages' results stay out.
    fn give_work_item(&self, tree: &TaskTree, step: &str, ctx: &mut NodeContext) {
        let Value::Object(m) = &mut ctx.input else {
            return;
        };
        let compress = Limits::of(&self.runtime.agents.task_tree).compress;
        let mut item = view(tree, step, compress);
        // The implementor works from the whole plan, not its summary.
        if step == "implement"
            && let (Value::Object(v), Some(plan)) = (
                &mut item,
                ctx.state
                    .get_in("stage_results", "plan")
                    .and_then(|r| r.pointer("/output/output"))
                    .and_then(Value::as_str),
            )
        {
            v.insert("plan".into(), json!(plan));
        }
        m.insert("item".into(), item);
        // Compressed handoffs keep the item small; whole ones are shown whole (the
        // benchmark's baseline).
        m.insert(
            "item_max_chars".into(),
            json!(if compress { ITEM_MAX_CHARS } else { u64::MAX }),
        );
        // With compressed handoffs the work item is the whole handoff: the earlier stages'
        // raw results (every plan and report so far) are not sent again.
        if compress {
            m.insert("earlier_stages".into(), json!(false));
        }
    }

    /// Compresses the handoff fields `ops` set with the summary model, billed to the step's
    /// stage and agent; returns the repairs.
    async fn compress_step_ops(
        &self,
        step: &str,
        agent_name: String,
        ops: &mut [TreeOp],
        cancel: &tokio_util::sync::CancellationToken,
    ) -> Vec<trellis_agents::FieldRepair> {
        let summarizer = self
            .runtime
            .models
            .budgeted(
                self.runtime.context.summary_role(),
                self.ledger.clone(),
                trellis_llm::CallScope {
                    stage: Some(stage_key(step).to_owned()),
                    agent: Some(agent_name),
                },
            )
            .ok();
        compress_ops(
            ops,
            summarizer
                .as_deref()
                .map(|p| p as &dyn trellis_llm::ModelProvider),
            cancel,
        )
        .await
    }

    /// `prioritize`: the next READY task of the active milestone, or none.
    pub(crate) fn run_prioritize(&self, ctx: &NodeContext) -> Result<NodeOutput, NodeError> {
        let tree = TaskTree::from_value(ctx.state.get(CHANNEL)).map_err(node_error)?;
        Ok(match tree.prioritize() {
            Some(t) => NodeOutput::success()
                .result(json!({ "outcome": "selected", "task": t.id, "output": tree.summary(&t.id, 300) }))
                .write(CHANNEL, json!([{ "op": "select", "task": t.id }])),
            None => NodeOutput::success().result(json!({
                "outcome": "none", "output": "no READY task in the active milestone",
                "statistics": tree.statistics(),
            })),
        })
    }

    /// `validate_task`: the files the implementor's commit changed exist and are non-empty
    /// text in the run's worktree (no model call). Failing sends the implementor back (up to
    /// its limit), then fails the task.
    pub(crate) fn run_validate_task(&self, ctx: &NodeContext) -> Result<NodeOutput, NodeError> {
        let tree = TaskTree::from_value(ctx.state.get(CHANNEL)).map_err(node_error)?;
        let Some(task) = tree.current_task.clone() else {
            return Ok(NodeOutput::failure("no task is being executed"));
        };
        let implemented = ctx
            .state
            .get_in("stage_results", "implement")
            .and_then(|r| r.get("output"))
            .cloned()
            .unwrap_or(Value::Null);
        let files: Vec<String> = strings(&implemented, "files_changed");
        let root = self.space.read_root();
        let mut verified = Vec::new();
        let mut issues = Vec::new();
        for f in &files {
            let p = root.join(f);
            match std::fs::metadata(&p) {
                Ok(m) if m.is_file() && m.len() > 0 => verified.push(f.clone()),
                Ok(m) if m.is_file() => issues.push(format!("{f} is empty")),
                Ok(_) => issues.push(format!("{f} is not a file")),
                // A deletion is a change too: the file is gone on purpose.
                Err(_) => verified.push(format!("{f} (deleted)")),
            }
        }
        if files.is_empty() {
            issues.push("the implementor changed no file".into());
        }
        let passed = issues.is_empty();
        let runs = tree
            .task(&task)
            .and_then(|t| t.attempts.get("implementor"))
            .copied()
            .unwrap_or(0);
        let mut result = json!({
            "task": task, "files_verified": verified, "validation_passed": passed,
            "validation_issues": issues,
        });
        let mut ops = vec![TreeOp::Attempt {
            task: task.clone(),
            stage: "validator".into(),
        }];
        let outcome = if passed {
            "passed"
        } else if runs >= Limits::of(&self.runtime.agents.task_tree).implementor {
            ops.push(TreeOp::Fail {
                task: task.clone(),
                reason: format!("validation failed: {}", issues.join("; ")),
                stage: "validator".into(),
            });
            "task_failed"
        } else {
            "retry"
        };
        if let Value::Object(m) = &mut result {
            m.insert("outcome".into(), json!(outcome));
            m.insert(
                "output".into(),
                json!(if passed {
                    format!("verified {}", verified.join(", "))
                } else {
                    issues.join("; ")
                }),
            );
        }
        let mut out = NodeOutput::success()
            .result(result)
            .write(CHANNEL, json!({ "ops": ops }));
        if outcome == "retry" {
            out = out.write(
                "feedback",
                json!({ "implement": format!(
                    "The validator found: {}. Make the changes with the tools.",
                    issues.join("; ")
                ) }),
            );
        }
        Ok(out)
    }
}

/// The step's result without running its agent: a task step with no task selected fails,
/// and `expand` once every milestone is complete reports the tree.
fn step_without_agent(tree: &TaskTree, step: &str) -> Option<NodeOutput> {
    if matches!(step, "research" | "plan" | "implement" | "qa") && tree.current_task.is_none() {
        return Some(NodeOutput::failure(format!(
            "step `{step}` needs a task selected by the prioritizer"
        )));
    }
    if step == "expand" && tree.active_milestone.is_none() && !tree.milestones.is_empty() {
        return Some(NodeOutput::success().result(json!({
            "outcome": "complete", "output": "every milestone is complete",
            "report": tree.report(),
        })));
    }
    None
}

/// The answer's ops do not fit the tree (a cycle, an unknown dependency): the step fails and
/// its agent tries again with the reason.
fn refused_answer(step: &str, mut result: Value, e: &impl std::fmt::Display) -> NodeOutput {
    let why = format!("the task tree refused the answer: {e}");
    if let Value::Object(m) = &mut result {
        m.insert("feedback".into(), json!(why));
        m.insert("reason".into(), json!(why));
    }
    NodeOutput::failure(why.clone())
        .result(result)
        .write("feedback", json!({ stage_key(step): why }))
}

/// Records the decision in the step's result: the outcome, the note, the task, the handoff
/// repairs, and the tree's report when the run is complete.
fn annotate_result(
    result: &mut Value,
    decided: &Decided,
    task: Option<&String>,
    repairs: &[trellis_agents::FieldRepair],
    check: &TaskTree,
) {
    let Value::Object(m) = result else {
        return;
    };
    if let Some(o) = decided.outcome {
        m.insert("outcome".into(), json!(o));
    }
    if let Some(n) = &decided.note {
        m.insert("note".into(), json!(n));
    }
    m.insert("task".into(), json!(task));
    if !repairs.is_empty() {
        m.insert("handoff_repairs".into(), json!(repairs));
    }
    if decided.outcome == Some("complete") {
        m.insert("report".into(), json!(check.report()));
    }
}

/// The step's node output: its result, the tree ops and any feedback for another stage.
fn step_output(decided: Decided, result: Value) -> NodeOutput {
    let mut out = match &decided.failure {
        Some(why) => NodeOutput::failure(why.clone()),
        None => NodeOutput::success(),
    }
    .result(result);
    if !decided.ops.is_empty() {
        out = out.write(CHANNEL, json!({ "ops": decided.ops }));
    }
    if let Some((to, f)) = decided.feedback {
        out = out.write("feedback", json!({ to: f }));
    }
    out
}

/// The node (stage) name of a step in the built-in workflow, for feedback.
fn stage_key(step: &str) -> &'static str {
    match step {
        "intent" => "intent",
        "milestones" => "milestones",
        "expand" => "expand",
        "research" => "research",
        "plan" => "plan",
        "implement" => "implement",
        "qa" => "qa",
        _ => "assess",
    }
}

/// What the agent of `step` is shown of the tree (compressed handoffs: the fields its step needs).
fn view(tree: &TaskTree, step: &str, compress: bool) -> Value {
    // Completed tasks for the expander and assessor: 300 chars each, or whole when handoffs
    // are not compressed.
    let each = if compress { 300 } else { usize::MAX };
    let task = tree.current_task.as_deref().and_then(|id| tree.task(id));
    match step {
        "intent" => Value::Null,
        "milestones" => json!({
            "remit": tree.remit, "explicit_needs": tree.explicit_needs,
            "implied_needs": tree.implied_needs,
        }),
        "expand" | "assess" => {
            let active = tree.active_milestone.clone().unwrap_or_default();
            let done: Vec<String> = tree
                .order
                .iter()
                .filter(|id| {
                    tree.task(id)
                        .is_some_and(|t| t.status == TaskStatus::Complete)
                })
                .map(|id| tree.summary(id, each))
                .collect();
            let open: Vec<String> = tree
                .tasks_of(&active)
                .filter(|t| !t.status.is_final())
                .map(|t| tree.summary(&t.id, each))
                .collect();
            let failed: Vec<String> = tree
                .tasks_of(&active)
                .filter(|t| matches!(t.status, TaskStatus::Failed | TaskStatus::Blocked))
                .map(|t| tree.summary(&t.id, each))
                .collect();
            json!({
                "remit": tree.remit,
                "milestone": tree.milestones.iter().find(|m| m.id == active),
                "completed_tasks": done, "open_tasks_in_milestone": open,
                "failed_or_blocked": failed,
            })
        }
        // Whole handoffs: the task with everything it carries. `id` first (keys are sorted
        // when shown): the task is named even if the rest is cut.
        _ if !compress => json!({ "id": tree.current_task, "remit": tree.remit, "task": task }),
        // Typed handoffs: each step gets the fields it needs.
        _ => {
            let Some(t) = task else {
                return Value::Null;
            };
            let mut v = json!({
                "id": t.id, "description": t.description,
                "measurable_outcome": t.measurable_outcome,
            });
            let fields: &[(&str, Value)] = &[
                ("gap_analysis", json!(t.gap_analysis)),
                (
                    "implementation_plan_summary",
                    json!(t.implementation_plan_summary),
                ),
                ("result_summary", json!(t.result_summary)),
                ("qa_feedback", json!(t.qa_feedback)),
                ("last_failure_reason", json!(t.last_failure_reason)),
            ];
            let wanted: &[&str] = match step {
                "research" => &["qa_feedback", "last_failure_reason"],
                "plan" => &["gap_analysis", "qa_feedback"],
                "implement" => &["qa_feedback", "last_failure_reason"],
                _ => &["implementation_plan_summary", "result_summary"],
            };
            if let Value::Object(m) = &mut v {
                for (name, value) in fields {
                    if wanted.contains(name) && !value.is_null() {
                        m.insert((*name).to_owned(), value.clone());
                    }
                }
            }
            json!({ "id": t.id, "task": v })
        }
    }
}
