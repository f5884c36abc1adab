//! Speculative execution (docs/tools.md, "Speculative execution"), shared by the agent loop and the MCP
//! gateway: after a caller's calls, the calls the tool knowledge graph ([`ToolAdvisor`])
//! predicts with a confidence at or above its threshold run before the caller asks — only
//! when they are safe: the tool only reads (its annotation), the caller may use it, its name
//! is not on the dangerous list ([`advice::dangerous`]), every required argument can be
//! carried from the caller's earlier calls ([`given_earlier`], the DAG builder's rule), it
//! never needs the user, and it ends within `tools.speculation.max_ms` (or, argument by
//! argument, filled from an earlier call's structured result of that name). The result waits,
//! keyed by tool and arguments ([`Speculated`]); when the caller asks for exactly that call
//! it is answered at once ([`take`]: used); what the caller never asks for is wasted
//! ([`waste`]). Every outcome goes back to the advisor, which adapts its threshold.

use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use tokio_util::sync::CancellationToken;

use crate::advice::{self, SpeculationOutcome, ToolAdvisor};
use crate::config::SpeculationConfig;
use crate::context::ToolEnv;
use crate::dag::{Catalog, ParallelCall, call_parallel, given_earlier, schema};
use crate::registry::Registry;

/// A completed call of a caller (an agent activation, a gateway session).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Done {
    /// The tool.
    pub tool: String,
    /// The arguments it was called with.
    pub args: Value,
    /// Its structured result, if it has one (later arguments may come from it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data: Option<Value>,
}

/// A call run ahead of its caller, and its result.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Speculated {
    /// The tool.
    pub tool: String,
    /// The arguments it ran with.
    pub args: Value,
    /// Its text.
    pub content: String,
    /// Its structured result.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data: Option<Value>,
    /// The prediction's confidence.
    pub confidence: f64,
    /// Its result was given to the caller already (an agent's prompt, by foresight).
    #[serde(default)]
    pub shown: bool,
}

/// A prediction chosen to run ahead.
#[derive(Clone, Debug, PartialEq)]
pub struct Planned {
    /// The tool.
    pub tool: String,
    /// Its arguments, carried from earlier calls.
    pub args: Value,
    /// The prediction's confidence.
    pub confidence: f64,
}

/// Who speculates: the tools, the caller's allow list and the advisor.
#[derive(Clone, Copy)]
pub struct Ahead<'a> {
    /// The tools.
    pub registry: &'a Registry,
    /// The allow list the calls are checked against.
    pub role: &'a str,
    /// The tool knowledge graph.
    pub advisor: &'a dyn ToolAdvisor,
    /// `tools.speculation`.
    pub config: &'a SpeculationConfig,
}

impl Ahead<'_> {
    /// The predictions to run after the calls of `history` (oldest first):
    /// at most `max_per_turn`, each at or above the threshold, safe, with carried arguments,
    /// and not among `skip` (results already waiting or running).
    pub fn plan(&self, history: &[Done], skip: &[(&str, &Value)]) -> Vec<Planned> {
        if !self.config.enabled || history.is_empty() {
            return Vec::new();
        }
        let completed: Vec<String> = history.iter().map(|d| d.tool.clone()).collect();
        let threshold = self.advisor.threshold();
        let mut planned: Vec<Planned> = Vec::new();
        for (tool, confidence) in self.advisor.predict_next(&completed) {
            if planned.len() >= self.config.max_per_turn || confidence < threshold {
                break;
            }
            if !self.safe(&tool) {
                continue;
            }
            let Some(args) = carried_args(self.registry, &tool, history) else {
                continue;
            };
            if !skip.iter().any(|(t, a)| *t == tool && **a == args) {
                planned.push(Planned {
                    tool,
                    args,
                    confidence,
                });
            }
        }
        planned
    }

    /// Whether `tool` may run speculatively: it exists, only reads, the caller may use it,
    /// and its name is not on the dangerous list.
    pub fn safe(&self, tool: &str) -> bool {
        self.registry.read_only(tool)
            && self.registry.allows(self.role, tool)
            && !advice::dangerous(tool)
    }

    /// Runs `planned` at the same time (none may ask the user) within `max_ms`; `None` when
    /// they took too long (they are dropped).
    pub async fn run(
        &self,
        env: &ToolEnv,
        planned: &[Planned],
        cancel: CancellationToken,
    ) -> Option<Vec<ParallelCall>> {
        let calls = planned
            .iter()
            .map(|p| (p.tool.clone(), p.args.clone()))
            .collect();
        let run = call_parallel(self.registry, env, self.role, calls, cancel, true);
        let limit = Duration::from_millis(self.config.max_ms);
        tokio::time::timeout(limit, run).await.ok()
    }

    /// Keeps the results of `planned` that succeeded in `ready` and reports the others as
    /// failed; returns a note for each call (what ran ahead, or that they took too long).
    pub fn keep(
        &self,
        planned: Vec<Planned>,
        results: Option<Vec<ParallelCall>>,
        ready: &mut Vec<Speculated>,
    ) -> Vec<String> {
        let Some(results) = results else {
            for p in &planned {
                self.advisor
                    .speculated(&p.tool, p.confidence, SpeculationOutcome::Failed);
            }
            return vec!["speculative calls took too long and were dropped".into()];
        };
        let mut notes = Vec::new();
        for (p, r) in planned.into_iter().zip(results) {
            if r.deferred || r.result.is_error {
                self.advisor
                    .speculated(&p.tool, p.confidence, SpeculationOutcome::Failed);
                continue;
            }
            notes.push(format!(
                "ran `{}` ahead of the model (confidence {:.2})",
                p.tool, p.confidence
            ));
            ready.push(Speculated {
                tool: p.tool,
                args: p.args,
                content: r.result.content,
                data: r.result.data,
                confidence: p.confidence,
                shown: false,
            });
        }
        notes
    }

    /// [`Ahead::plan`], [`Ahead::run`] and [`Ahead::keep`] in one go; the notes.
    pub async fn speculate(
        &self,
        env: &ToolEnv,
        history: &[Done],
        ready: &mut Vec<Speculated>,
        cancel: CancellationToken,
    ) -> Vec<String> {
        let skip: Vec<(&str, &Value)> = ready.iter().map(|s| (s.tool.as_str(), &s.args)).collect();
        let planned = self.plan(history, &skip);
        if planned.is_empty() {
            return Vec::new();
        }
        let results = self.run(env, &planned, cancel).await;
        self.keep(planned, results, ready)
    }
}

/// Arguments for `tool`, by the DAG builder's rules: each required parameter from the
/// latest call of `history` whose structured result has a property of that name and a
/// fitting type, else carried from the latest call given an argument of that name
/// ([`given_earlier`]); `None` if one cannot be filled.
pub fn carried_args(registry: &Registry, tool: &str, history: &[Done]) -> Option<Value> {
    let spec = registry.spec(tool)?;
    let mut args = Map::new();
    let outputs: Vec<&Value> = history
        .iter()
        .map(|d| d.data.as_ref().unwrap_or(&Value::Null))
        .collect();
    for param in schema::inputs(&spec.input_schema)
        .into_iter()
        .filter(|p| p.required)
    {
        let (_, value) = given_earlier(&param, outputs.iter().copied())
            .or_else(|| given_earlier(&param, history.iter().map(|d| &d.args)))?;
        args.insert(param.name, value);
    }
    Some(Value::Object(args))
}

/// The speculative result of exactly this call, if one waits in `ready` (it is taken out
/// and reported used).
pub fn take(
    advisor: Option<&dyn ToolAdvisor>,
    ready: &mut Vec<Speculated>,
    tool: &str,
    args: &Value,
) -> Option<Speculated> {
    let at = ready
        .iter()
        .position(|s| s.tool == tool && &s.args == args)?;
    let s = ready.remove(at);
    if let Some(advisor) = advisor {
        advisor.speculated(&s.tool, s.confidence, SpeculationOutcome::Used);
    }
    Some(s)
}

/// Reports what became of the results left in `ready` when the caller is done, emptying
/// it: one nobody asked for is wasted; one already given to the caller (`shown`) is used,
/// unless the caller then called the same tool with other arguments (`later`: its calls
/// after the result was given) — it wanted something else.
pub fn waste(advisor: Option<&dyn ToolAdvisor>, ready: &mut Vec<Speculated>, later: &[Done]) {
    for s in ready.drain(..) {
        let redone = later.iter().any(|d| d.tool == s.tool && d.args != s.args);
        let outcome = if s.shown && !redone {
            SpeculationOutcome::Used
        } else {
            SpeculationOutcome::Wasted
        };
        if let Some(advisor) = advisor {
            advisor.speculated(&s.tool, s.confidence, outcome);
        }
    }
}
