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
pub use trellis_tools::dag::{EXECUTE_DAG, ExecuteDagInput};
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
        let runner = Runner {
            registry: &self.tools,
            env: &self.env,
            role: self.allow_list(),
            cancel: self.cancel.clone(),
            events: None,
        };
        let report = dag::run_plan(&runner, args, self.env.config.dag.max_steps).await;
        (report.text, report.status)
    }
}
