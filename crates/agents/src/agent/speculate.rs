//! Speculative execution (seed 002 Pattern 3): between model calls, the calls the tool
//! knowledge graph predicts with a confidence at or above its threshold run before the
//! model asks — only when they are safe: the tool only reads (its annotation), the agent may
//! use it, its name is not on the dangerous list, every required argument can be carried
//! from the activation's earlier calls, it never needs the user, and it ends within
//! `tools.speculation.max_ms`. The result waits, keyed by tool and arguments; when the model
//! asks for exactly that call it is answered at once (used); what the model never asks for
//! is wasted. Both go back to the advisor, which adapts its threshold.

use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use trellis_protocol::ToolStatus;
use trellis_tools::dag::{Catalog, call_parallel, given_earlier, schema};
use trellis_tools::{SpeculationOutcome, advice};

use super::{AgentRun, Saved};

/// A call run ahead of the model.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub(super) struct Speculated {
    tool: String,
    args: Value,
    content: String,
    confidence: f64,
}

impl AgentRun {
    /// Notes a completed call (the arguments later speculative calls are filled from).
    pub(super) fn remember(&self, st: &mut Saved, tool: &str, args: Value) {
        st.history.push((tool.to_owned(), args));
    }

    /// Runs the safe predictions of the tool knowledge graph ahead of the next model call.
    pub(super) async fn speculate(&self, st: &mut Saved) {
        let config = &self.env.config.speculation;
        let Some(advisor) = self.env.advisor.clone() else {
            return;
        };
        if !config.enabled || st.history.is_empty() {
            return;
        }
        let completed: Vec<String> = st.history.iter().map(|(t, _)| t.clone()).collect();
        let threshold = advisor.threshold();
        let mut planned: Vec<(String, Value, f64)> = Vec::new();
        for (tool, confidence) in advisor.predict_next(&completed) {
            if planned.len() >= config.max_per_turn || confidence < threshold {
                break;
            }
            if !self.safe_to_speculate(&tool) {
                continue;
            }
            let Some(args) = self.carried_args(st, &tool) else {
                continue;
            };
            let ready = st
                .speculated
                .iter()
                .any(|s| s.tool == tool && s.args == args);
            if !ready {
                planned.push((tool, args, confidence));
            }
        }
        if planned.is_empty() {
            return;
        }
        let calls = planned
            .iter()
            .map(|(t, a, _)| (t.clone(), a.clone()))
            .collect();
        let run = call_parallel(
            &self.tools,
            &self.env,
            self.allow_list(),
            calls,
            self.cancel.clone(),
            true,
        );
        let limit = Duration::from_millis(config.max_ms);
        let Ok(results) = tokio::time::timeout(limit, run).await else {
            for (tool, _, confidence) in &planned {
                advisor.speculated(tool, *confidence, SpeculationOutcome::Failed);
            }
            self.note(st, "speculative calls took too long and were dropped");
            return;
        };
        for ((tool, args, confidence), r) in planned.into_iter().zip(results) {
            if r.deferred || r.result.is_error {
                advisor.speculated(&tool, confidence, SpeculationOutcome::Failed);
                continue;
            }
            self.note(
                st,
                format!("ran `{tool}` ahead of the model (confidence {confidence:.2})"),
            );
            st.speculated.push(Speculated {
                tool,
                args,
                content: r.result.content,
                confidence,
            });
        }
    }

    /// Whether `tool` may run speculatively: it exists, only reads, the agent may use it, and
    /// its name is not on the dangerous list.
    fn safe_to_speculate(&self, tool: &str) -> bool {
        self.tools.read_only(tool)
            && self.tools.allows(self.allow_list(), tool)
            && !advice::dangerous(tool)
    }

    /// Arguments for `tool`: each required parameter carried from the latest earlier call
    /// given one of that name and a fitting type (the DAG builder's rule); `None` if one
    /// cannot be.
    fn carried_args(&self, st: &Saved, tool: &str) -> Option<Value> {
        let spec = self.tools.spec(tool)?;
        let mut args = Map::new();
        for param in schema::inputs(&spec.input_schema)
            .into_iter()
            .filter(|p| p.required)
        {
            let (_, value) = given_earlier(&param, st.history.iter().map(|(_, a)| a))?;
            args.insert(param.name, value);
        }
        Some(Value::Object(args))
    }

    /// The speculative result of exactly this call, if one waits (it is used up).
    pub(super) fn take_speculated(
        &self,
        st: &mut Saved,
        tool: &str,
        args: &Value,
    ) -> Option<(String, ToolStatus)> {
        let at = st
            .speculated
            .iter()
            .position(|s| s.tool == tool && &s.args == args)?;
        let s = st.speculated.remove(at);
        if let Some(advisor) = &self.env.advisor {
            advisor.speculated(&s.tool, s.confidence, SpeculationOutcome::Used);
        }
        Some((s.content, ToolStatus::Ok))
    }

    /// Reports the speculative results nobody asked for as wasted.
    pub(super) fn waste_speculations(&self, st: &mut Saved) {
        let Some(advisor) = &self.env.advisor else {
            st.speculated.clear();
            return;
        };
        for s in st.speculated.drain(..) {
            advisor.speculated(&s.tool, s.confidence, SpeculationOutcome::Wasted);
        }
    }
}
