//! The `execute_dag` tool, for agents and for the MCP gateway alike: a plan of steps in
//! (its arguments), the plan's DAG run through the registry — every step checked against
//! the caller's allow list and the policy, none asking the user — and a report out: the
//! data flows and each step's outcome with its text.

use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::Value;
use trellis_protocol::ToolStatus;

use super::build::{Step, build};
use super::run::{Runner, StepResult, StepStatus};

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
}

/// The `execute_dag` tool's description.
pub fn execute_dag_description(max_steps: usize) -> String {
    format!(
        "Run a plan of up to {max_steps} tool calls in one go. Steps that do not depend \
         on each other run at the same time; a step's output flows into later steps \
         through \"${{step}}\" / \"${{step.field}}\" in their arguments, or into a \
         required argument you leave out. Use it when you already know the next calls \
         (read three files; list, then read what you found). Steps that need the user's \
         approval are not run: call those tools directly."
    )
}

/// What a plan did: the report for the caller, its status, and each step's result (in the
/// plan's order; empty when the plan was refused before it ran).
#[derive(Clone, Debug)]
pub struct PlanReport {
    /// The report.
    pub text: String,
    /// `Ok` when every step succeeded, `Cancelled` when the run was, else `Error`.
    pub status: ToolStatus,
    /// The steps' results.
    pub steps: Vec<StepResult>,
}

/// Runs an `execute_dag` call with `args` (at most `max_steps` steps) through `runner`.
pub async fn run_plan(runner: &Runner<'_>, args: &Value, max_steps: usize) -> PlanReport {
    let refused = |text: String| PlanReport {
        text,
        status: ToolStatus::Error,
        steps: Vec::new(),
    };
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
    let graph = match build(&input.steps, runner.registry) {
        Ok(g) => g,
        Err(e) => return refused(format!("error: {e}")),
    };
    let results = runner.run(&graph).await;
    if results.iter().any(|r| r.status == StepStatus::Cancelled) {
        return PlanReport {
            text: "cancelled".into(),
            status: ToolStatus::Cancelled,
            steps: results,
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
    for (node, r) in graph.nodes.iter().zip(&results) {
        let status = match r.status {
            StepStatus::Ok => "ok",
            StepStatus::Error => "error",
            StepStatus::NeedsInput => "needs input",
            StepStatus::Skipped => "skipped",
            StepStatus::Cancelled => "cancelled",
        };
        text.push_str(&format!(
            "\n## {} ({}, layer {}): {status}\n{}\n",
            r.id,
            r.tool,
            node.layer,
            cut(&r.text, STEP_TEXT_MAX)
        ));
    }
    let ok = results.iter().all(|r| r.status == StepStatus::Ok);
    PlanReport {
        text,
        status: if ok {
            ToolStatus::Ok
        } else {
            ToolStatus::Error
        },
        steps: results,
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
