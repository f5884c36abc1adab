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

use serde_json::Value;
use trellis_llm::{ToolCall, ToolSpec};
use trellis_protocol::ToolStatus;
use trellis_tools::dag::{self, Runner, Step};
pub use trellis_tools::dag::{EXECUTE_DAG, ExecuteDagInput, REPLAN_DAG, ReplanDagInput};
use trellis_tools::tool::schema_for;

use super::AgentRun;

/// Models with a smaller context window are not offered `execute_dag`: its schema costs
/// ~300 tokens, and small local models do not plan multi-step calls.
pub const EXECUTE_DAG_MIN_WINDOW: u32 = 16_384;

/// The `execute_dag` tool's description, as offered to a model.
pub fn execute_dag_spec(max_steps: usize) -> ToolSpec {
    ToolSpec {
        name: EXECUTE_DAG.into(),
        description: dag::execute_dag_description(max_steps),
        parameters: schema_for::<ExecuteDagInput>(),
    }
}

/// The `replan_dag` tool's description, as offered to a model (with `execute_dag`).
pub fn replan_dag_spec() -> ToolSpec {
    ToolSpec {
        name: REPLAN_DAG.into(),
        description: dag::replan_dag_description(),
        parameters: schema_for::<ReplanDagInput>(),
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
            && call.name != REPLAN_DAG
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

    /// The id of the DAG execution started by `call` (stable across an interrupt, so the
    /// call continues its checkpoint when it runs again).
    fn dag_id(&self, call_id: &str) -> String {
        format!(
            "{}/{}#{}/{}",
            self.env.run.as_ref().map_or("-", |r| r.as_str()),
            self.node,
            self.attempt,
            call_id
        )
    }

    /// What the model reads for an `execute_dag` call the process stopped in, when its
    /// checkpoint lets the plan continue: what is done and how to go on.
    pub(super) fn interrupted_plan(&self, tool: &str, call_id: &str) -> Option<String> {
        if tool != EXECUTE_DAG {
            return None;
        }
        let id = self.dag_id(call_id);
        let execution = self.env.checkpoints.load(&id)?;
        Some(format!(
            "interrupted: the process stopped while this plan ran. Its checkpoint keeps {} \
             completed steps ({}); pending: {}. Continue it with `{REPLAN_DAG}` \
             {{\"dag_id\": \"{id}\"}} (completed steps do not run again).",
            execution.done.len(),
            execution
                .done
                .keys()
                .cloned()
                .collect::<Vec<_>>()
                .join(", "),
            execution.pending().join(", ")
        ))
    }

    /// Runs an `execute_dag` or `replan_dag` call (the controlled executor): the
    /// plan's DAG through the registry, every step checked against the agent's allow list,
    /// paused where the plan asks for a decision (checkpoint kept for `replan_dag`). A step
    /// that needs the user is asked on its own through the agent's gate: if the answer is
    /// not there yet the checkpoint holds the step and the caller sees the gate's pending
    /// request (an interrupt); when the call runs again with the answer, it continues from
    /// the checkpoint. Returns the report for the model.
    pub(super) async fn execute_dag(&self, call: &ToolCall, args: &Value) -> (String, ToolStatus) {
        let runner = Runner {
            registry: &self.tools,
            env: &self.env,
            role: self.allow_list(),
            cancel: self.cancel.clone(),
            events: None,
        };
        let checkpoints = self.env.checkpoints.as_ref();
        let max = self.env.config.dag.max_steps;
        let hold = self.gate.is_some();
        let id = self.dag_id(&call.id);
        let mut outcome = match checkpoints.load(&id) {
            Some(execution) if call.name == EXECUTE_DAG && execution.held.is_some() => {
                let step = execution.held.clone().unwrap_or_default();
                dag::Outcome::NeedsUser { execution, step }
            }
            _ if call.name == EXECUTE_DAG => {
                dag::plan::start(&runner, checkpoints, id, args, max, hold).await
            }
            _ => dag::plan::replan(&runner, checkpoints, args, max, hold).await,
        };
        loop {
            let (mut execution, step) = match outcome {
                dag::Outcome::Report(r) => return (r.text, r.status),
                dag::Outcome::NeedsUser { execution, step } => (execution, step),
            };
            let graph = match execution.dag(self.tools.as_ref()) {
                Ok(g) => g,
                Err(e) => return (format!("error: {e}"), ToolStatus::Error),
            };
            let Some(i) = graph.nodes.iter().position(|n| n.id == step) else {
                return (
                    format!("error: the held step `{step}` is gone"),
                    ToolStatus::Error,
                );
            };
            let result = runner
                .run_alone(&graph, i, &execution.done_by_index(&graph))
                .await;
            if self.gate.as_ref().is_some_and(|g| g.has_pending()) {
                // The checkpoint holds the step; the caller turns the request into an
                // interrupt and this call runs again with the answer.
                return (
                    format!("step `{step}` waits for the user's answer"),
                    ToolStatus::Error,
                );
            }
            execution.decisions.push(dag::Decision {
                kind: if result.status == dag::StepStatus::Ok {
                    "approved"
                } else {
                    "refused"
                }
                .into(),
                detail: step.clone(),
            });
            execution.held = None;
            execution.done.insert(step, result);
            outcome = dag::plan::drive(&runner, checkpoints, execution, hold).await;
        }
    }
}
