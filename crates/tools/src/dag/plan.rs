//! The `execute_dag` tool, for agents and for the MCP gateway alike: a plan of steps in
//! (its arguments), the plan's DAG run through the registry — every step checked against
//! the caller's allow list and the policy, none asking the user — and a report out: the
//! data flows and each step's outcome with its text.

use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::Value;
use trellis_protocol::ToolStatus;

use super::build::{Dag, Step};
use super::exec::{Checkpoints, Execution};
use super::run::{Runner, StepResult, StepStatus, Stop};

/// The tool that runs a plan.
pub const EXECUTE_DAG: &str = "execute_dag";

/// How long a step's text may be in the report before it is cut.
const STEP_TEXT_MAX: usize = 4000;

/// `execute_dag` arguments.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ExecuteDagInput {
    /// The steps, in the order they would run one after another. Each names a tool and its
    /// arguments; `"${step}"` or `"${step.field}"` in an argument is replaced by that earlier
    /// step's output (or one of its fields), and a required argument left out is filled from
    /// an earlier step's output of the same name or type.
    pub steps: Vec<Step>,
    /// Step ids after which the run pauses with what it found so far, so you can decide how
    /// to go on (`replan_dag`: continue, add steps, remove pending ones).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub decide_after: Vec<String>,
}

/// `replan_dag` arguments.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ReplanDagInput {
    /// The paused DAG's id (from `execute_dag`'s report).
    pub dag_id: String,
    /// Steps to add (ids not used yet; they may refer to any step, done or not).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub add: Vec<Step>,
    /// Ids of pending steps to drop.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub remove: Vec<String>,
    /// Step ids (new or pending) after which to pause again.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub decide_after: Vec<String>,
}

/// The `execute_dag` tool's description.
pub fn execute_dag_description(max_steps: usize) -> String {
    format!(
        "Run a plan of up to {max_steps} tool calls in one go. Steps that do not depend \
         on each other run at the same time; a step's output flows into later steps \
         through \"${{step}}\" / \"${{step.field}}\" in their arguments, or into a \
         required argument you leave out. Use it when you already know the next calls \
         (read three files; list, then read what you found). `decide_after` pauses the plan \
         after the steps you name so you can look at their results and change the rest \
         (`{REPLAN_DAG}`). A step that needs the user's approval waits for it where the user \
         can be asked, else it is reported `needs input`: call that tool directly."
    )
}

/// The tool that continues a paused plan.
pub const REPLAN_DAG: &str = "replan_dag";

/// The `replan_dag` tool's description.
pub fn replan_dag_description() -> String {
    format!(
        "Continue a plan that `{EXECUTE_DAG}` paused (its `decide_after`): give its `dag_id`; \
         optionally `add` steps (new ids; they may use earlier steps' outputs) and `remove` \
         pending ones first. Completed steps do not run again."
    )
}

/// What a plan did: the report for the caller, its status, and each step's result (in the
/// plan's order; empty when the plan was refused before it ran).
#[derive(Clone, Debug)]
pub struct PlanReport {
    /// The report.
    pub text: String,
    /// `Ok` when every step succeeded (or the plan paused for a decision after successful
    /// steps), `Cancelled` when the run was, else `Error`.
    pub status: ToolStatus,
    /// The results of the steps that ran in this call.
    pub steps: Vec<StepResult>,
}

/// Where a controlled run of a plan ended.
#[derive(Debug)]
pub enum Outcome {
    /// Finished, paused for a decision, or refused: the report.
    Report(PlanReport),
    /// Step `step` needs the user: the caller runs it where the user can answer
    /// ([`Runner::run_alone`]), records its result in `execution` and calls [`drive`] again.
    /// The checkpoint is saved with the step held.
    NeedsUser {
        /// The execution, its step held.
        execution: Execution,
        /// The step.
        step: String,
    },
}

impl Outcome {
    /// The report of an outcome that is one.
    pub fn report(self) -> PlanReport {
        match self {
            Outcome::Report(r) => r,
            Outcome::NeedsUser { step, .. } => PlanReport {
                text: format!("step `{step}` needs the user, which this caller cannot ask"),
                status: ToolStatus::Error,
                steps: Vec::new(),
            },
        }
    }
}

fn refused(text: String) -> Outcome {
    Outcome::Report(PlanReport {
        text,
        status: ToolStatus::Error,
        steps: Vec::new(),
    })
}

/// Starts execution `id` of an `execute_dag` call: its steps run until the plan finishes,
/// pauses after a `decide_after` step (checkpoint saved), or — with `hold_for_user` — a step
/// needs the user.
pub async fn start(
    runner: &Runner<'_>,
    checkpoints: &dyn Checkpoints,
    id: String,
    args: &Value,
    max_steps: usize,
    hold_for_user: bool,
) -> Outcome {
    let input: ExecuteDagInput = match serde_json::from_value(args.clone()) {
        Ok(i) => i,
        Err(e) => {
            return refused(format!(
                "error: invalid arguments for `{EXECUTE_DAG}`: {e}; give {{\"steps\": [{{\"id\", \"tool\", \"args\"}}, …]}}"
            ));
        }
    };
    if input.steps.len() > max_steps {
        return refused(format!(
            "error: the plan has {} steps; at most {max_steps} are allowed (tools.dag.max_steps) — split it",
            input.steps.len()
        ));
    }
    if let Some(bad) = input
        .decide_after
        .iter()
        .find(|d| !input.steps.iter().any(|s| &s.id == *d))
    {
        return refused(format!(
            "error: `decide_after` names `{bad}`, which is not a step of the plan"
        ));
    }
    let execution = Execution::new(id, input.steps, input.decide_after);
    drive(runner, checkpoints, execution, hold_for_user).await
}

/// Continues the execution a `replan_dag` call names, after applying its changes.
pub async fn replan(
    runner: &Runner<'_>,
    checkpoints: &dyn Checkpoints,
    args: &Value,
    max_steps: usize,
    hold_for_user: bool,
) -> Outcome {
    let input: ReplanDagInput = match serde_json::from_value(args.clone()) {
        Ok(i) => i,
        Err(e) => {
            return refused(format!(
                "error: invalid arguments for `{REPLAN_DAG}`: {e}; give {{\"dag_id\", \"add\"?, \"remove\"?}}"
            ));
        }
    };
    let Some(mut execution) = checkpoints.load(&input.dag_id) else {
        return refused(format!(
            "error: no paused plan `{}` (it finished, or was never paused); run `{EXECUTE_DAG}` with the steps still to do",
            input.dag_id
        ));
    };
    if let Err(e) = execution.replan(input.add, &input.remove) {
        return refused(format!(
            "error: {e}; the plan is unchanged and still paused"
        ));
    }
    if execution.steps.len() > max_steps {
        return refused(format!(
            "error: the plan would have {} steps; at most {max_steps} are allowed (tools.dag.max_steps)",
            execution.steps.len()
        ));
    }
    execution.decide_after.extend(input.decide_after);
    execution.decisions.push(super::Decision {
        kind: "continue".into(),
        detail: execution.pending().join(", "),
    });
    drive(runner, checkpoints, execution, hold_for_user).await
}

/// Runs `execution`'s pending steps until it finishes (checkpoint removed), pauses for a
/// decision or holds a step for the user (checkpoint saved).
pub async fn drive(
    runner: &Runner<'_>,
    checkpoints: &dyn Checkpoints,
    mut execution: Execution,
    hold_for_user: bool,
) -> Outcome {
    let graph = match execution.dag(runner.registry) {
        Ok(g) => g,
        Err(e) => return refused(format!("error: {e}")),
    };
    let before: Vec<String> = execution.done.keys().cloned().collect();
    let pause_points: Vec<String> = execution
        .decide_after
        .iter()
        .filter(|d| !execution.done.contains_key(*d))
        .cloned()
        .collect();
    // A checkpoint after every layer: a process that stops mid-plan leaves what finished.
    let saving = |results: &std::collections::BTreeMap<usize, StepResult>| {
        let mut so_far = execution.clone();
        so_far.record(&graph, results.clone());
        checkpoints.save(&so_far);
    };
    let progress = runner
        .resume_saving(
            &graph,
            execution.done_by_index(&graph),
            &pause_points,
            hold_for_user,
            &saving,
        )
        .await;
    let ran: Vec<StepResult> = progress
        .results
        .values()
        .filter(|r| !before.contains(&r.id))
        .cloned()
        .collect();
    execution.record(&graph, progress.results);
    match progress.stop {
        Stop::NeedsUser { step } => {
            execution.held = Some(step.clone());
            checkpoints.save(&execution);
            Outcome::NeedsUser { execution, step }
        }
        Stop::Decision { after } => {
            checkpoints.save(&execution);
            Outcome::Report(report(&graph, &execution, ran, Some(&after)))
        }
        Stop::Finished => {
            checkpoints.remove(&execution.id);
            Outcome::Report(report(&graph, &execution, ran, None))
        }
    }
}

/// The report of `execution` over `graph`: data flows, every step's outcome so far, and
/// for a pause, what is pending and how to go on.
fn report(
    graph: &Dag,
    execution: &Execution,
    ran: Vec<StepResult>,
    paused_after: Option<&[String]>,
) -> PlanReport {
    if ran.iter().any(|r| r.status == StepStatus::Cancelled) {
        return PlanReport {
            text: "cancelled".into(),
            status: ToolStatus::Cancelled,
            steps: ran,
        };
    }
    let mut text = format!(
        "DAG of {} steps in {} layers.\n",
        graph.nodes.len(),
        graph.layers.len()
    );
    for e in graph.edges.iter().filter(|e| e.data_path.is_some()) {
        text.push_str(&format!(
            "{} → {}: {}\n",
            e.from,
            e.to,
            e.data_path.as_deref().unwrap_or_default()
        ));
    }
    for node in &graph.nodes {
        let Some(r) = execution.done.get(&node.id) else {
            continue;
        };
        let status = match r.status {
            StepStatus::Ok => "ok",
            StepStatus::Error => "error",
            StepStatus::NeedsInput => "needs input",
            StepStatus::Skipped => "skipped",
            StepStatus::Cancelled => "cancelled",
        };
        let again = if ran.iter().any(|x| x.id == r.id) {
            ""
        } else {
            " (earlier)"
        };
        text.push_str(&format!(
            "\n## {} ({}, layer {}): {status}{again}\n{}\n",
            r.id,
            r.tool,
            node.layer,
            cut(&r.text, STEP_TEXT_MAX)
        ));
    }
    let ok = execution.done.values().all(|r| r.status == StepStatus::Ok);
    if let Some(after) = paused_after {
        text.push_str(&format!(
            "\nPaused after {} for your decision (DAG `{}`; its completed steps are kept). \
             Pending: {}. Call `{REPLAN_DAG}` {{\"dag_id\": \"{}\"}} to go on as planned, \
             with \"add\": [steps] and/or \"remove\": [ids] to change the plan first.\n",
            after
                .iter()
                .map(|a| format!("`{a}`"))
                .collect::<Vec<_>>()
                .join(", "),
            execution.id,
            execution.pending().join(", "),
            execution.id
        ));
    }
    PlanReport {
        text,
        status: if ok {
            ToolStatus::Ok
        } else {
            ToolStatus::Error
        },
        steps: ran,
    }
}

/// `text` cut to about `max` bytes at a character boundary, saying so.
fn cut(text: &str, max: usize) -> String {
    if text.len() <= max {
        return text.to_owned();
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}\n… ({} bytes cut)", &text[..end], text.len() - end)
}
