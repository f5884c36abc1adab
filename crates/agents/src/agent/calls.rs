//! Several tool calls in one turn, and the `execute_dag` tool.
//!
//! - The calls a model asks for at once become a tool DAG ([`trellis_tools::dag`]); runs of
//!   consecutive calls that only read, need nothing from each other and are allowed to the
//!   agent run at the same time ([`segments`]). Their results still go back to the model in
//!   the order it asked. A call that turns out to need the user is run again on its own
//!   (where it may ask); a call that changes things runs alone, in its place.
//! - `execute_dag` lets an agent submit a multi-step plan in one turn: the steps' outputs
//!   flow into later steps' arguments (`${step.field}` references and schema matching), the
//!   independent ones run together, and the report lists every step's outcome.

use std::ops::Range;

use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::Value;
use trellis_llm::{ToolCall, ToolSpec};
use trellis_protocol::ToolStatus;
use trellis_tools::dag::{self, Runner, Step, StepStatus};
use trellis_tools::tool::schema_for;

use super::AgentRun;

/// The tool agents submit plans with.
pub const EXECUTE_DAG: &str = "execute_dag";

/// Models with a smaller context window are not offered `execute_dag`: its schema costs
/// ~300 tokens, and small local models do not plan multi-step calls.
pub const EXECUTE_DAG_MIN_WINDOW: u32 = 16_384;

/// How long a step's text may be in the `execute_dag` report before it is cut.
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

/// The `execute_dag` tool's description, as offered to a model.
pub fn execute_dag_spec(max_steps: usize) -> ToolSpec {
    ToolSpec {
        name: EXECUTE_DAG.into(),
        description: format!(
            "Run a plan of up to {max_steps} tool calls in one go. Steps that do not depend \
             on each other run at the same time; a step's output flows into later steps \
             through \"${{step}}\" / \"${{step.field}}\" in their arguments, or into a \
             required argument you leave out. Use it when you already know the next calls \
             (read three files; list, then read what you found). Steps that need the user's \
             approval are not run: call those tools directly."
        ),
        parameters: schema_for::<ExecuteDagInput>(),
    }
}

impl AgentRun {
    /// Whether this agent runs independent calls of one turn at the same time.
    fn parallel_calls(&self) -> bool {
        self.env.config.dag.parallel
    }

    /// Whether this agent is offered `execute_dag`: the configuration allows it, the agent
    /// has tools and reports (not a conversation), and its model's window is known and at
    /// least [`EXECUTE_DAG_MIN_WINDOW`].
    pub(super) fn offers_execute_dag(&self, own: &[ToolSpec]) -> bool {
        self.env.config.dag.execute_dag
            && !own.is_empty()
            && !self.free_text
            && self
                .provider
                .info()
                .context_window
                .is_some_and(|w| w >= EXECUTE_DAG_MIN_WINDOW)
    }

    /// Whether call `call` may run beside others: valid arguments, a registry tool the agent
    /// may use, and one that only reads.
    fn may_run_beside(&self, call: &ToolCall) -> bool {
        call.arguments_json().is_ok()
            && !self.reads_output(&call.name)
            && call.name != EXECUTE_DAG
            && call.name != super::SEARCH_TOOLS
            && self.tools.allows(self.allow_list(), &call.name)
            && self.tools.read_only(&call.name)
    }

    /// `calls[next..]` cut into runs that may go at the same time: consecutive calls that
    /// may run beside others and have no dependency between them in the calls' DAG. Every
    /// other call is a run of its own.
    pub(super) fn segments(&self, calls: &[ToolCall], next: usize) -> Vec<Range<usize>> {
        let singles = || (next..calls.len()).map(|i| i..i + 1).collect();
        if !self.parallel_calls() || calls.len().saturating_sub(next) < 2 {
            return singles();
        }
        let steps: Vec<Step> = calls[next..]
            .iter()
            .enumerate()
            .map(|(i, c)| Step {
                id: format!("c{i}"),
                tool: c.name.clone(),
                args: c.arguments_json().unwrap_or(Value::Null),
                depends_on: Vec::new(),
            })
            .collect();
        let Ok(graph) = dag::build(&steps, self.tools.as_ref()) else {
            return singles();
        };
        let linked = |a: usize, b: usize| {
            let (a, b) = (format!("c{}", a - next), format!("c{}", b - next));
            graph
                .edges
                .iter()
                .any(|e| (e.from == a && e.to == b) || (e.from == b && e.to == a))
        };
        let mut out: Vec<Range<usize>> = Vec::new();
        for i in next..calls.len() {
            let joins = self.may_run_beside(&calls[i])
                && out.last().is_some_and(|run| {
                    (run.start..run.end).all(|j| self.may_run_beside(&calls[j]) && !linked(j, i))
                });
            match out.last_mut() {
                Some(run) if joins => run.end = i + 1,
                _ => out.push(i..i + 1),
            }
        }
        out
    }

    /// Runs an `execute_dag` call: the plan's DAG through the registry, every step checked
    /// against the agent's allow list; the report for the model.
    pub(super) async fn execute_dag(&self, args: &Value) -> (String, ToolStatus) {
        let input: ExecuteDagInput = match serde_json::from_value(args.clone()) {
            Ok(i) => i,
            Err(e) => {
                return (
                    format!(
                        "error: invalid arguments for `{EXECUTE_DAG}`: {e}; give {{\"steps\": [{{\"id\", \"tool\", \"args\"}}, …]}}"
                    ),
                    ToolStatus::Error,
                );
            }
        };
        let max = self.env.config.dag.max_steps;
        if input.steps.len() > max {
            return (
                format!(
                    "error: the plan has {} steps; at most {max} are allowed (tools.dag.max_steps) — split it",
                    input.steps.len()
                ),
                ToolStatus::Error,
            );
        }
        let graph = match dag::build(&input.steps, self.tools.as_ref()) {
            Ok(g) => g,
            Err(e) => return (format!("error: {e}"), ToolStatus::Error),
        };
        let runner = Runner {
            registry: &self.tools,
            env: &self.env,
            role: self.allow_list(),
            cancel: self.cancel.clone(),
            events: None,
        };
        let results = runner.run(&graph).await;
        if results.iter().any(|r| r.status == StepStatus::Cancelled) {
            return ("cancelled".into(), ToolStatus::Cancelled);
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
        (
            text,
            if ok {
                ToolStatus::Ok
            } else {
                ToolStatus::Error
            },
        )
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
