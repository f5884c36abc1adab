//! Speculative execution (seed 002 Pattern 3): while the model is called, the calls the
//! tool knowledge graph predicts with a confidence at or above its threshold run before the
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

/// A completed call of the activation.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub(super) struct Done {
    pub tool: String,
    pub args: Value,
    /// Its structured result, if it has one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data: Option<Value>,
}

/// A call run ahead of the model.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub(super) struct Speculated {
    tool: String,
    args: Value,
    content: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    data: Option<Value>,
    confidence: f64,
    /// Its result is in the prompt already (foresight).
    #[serde(default)]
    shown: bool,
}

impl Speculated {
    pub(super) fn new(done: Done, content: String, confidence: f64, shown: bool) -> Self {
        Self {
            tool: done.tool,
            args: done.args,
            content,
            data: done.data,
            confidence,
            shown,
        }
    }
}

impl AgentRun {
    /// Notes a completed call (the arguments later speculative calls are filled from).
    pub(super) fn remember(&self, st: &mut Saved, tool: &str, args: Value, data: Option<Value>) {
        st.history.push(Done {
            tool: tool.to_owned(),
            args,
            data,
        });
    }

    /// Runs the safe predictions of the tool knowledge graph (during a model call).
    pub(super) async fn speculate(&self, st: &mut Saved) {
        let config = &self.env.config.speculation;
        let Some(advisor) = self.env.advisor.clone() else {
            return;
        };
        if !config.enabled || st.history.is_empty() {
            return;
        }
        let completed: Vec<String> = st.history.iter().map(|d| d.tool.clone()).collect();
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
                data: r.result.data,
                content: r.result.content,
                confidence,
                shown: false,
            });
        }
    }

    /// Whether `tool` may run speculatively: it exists, only reads, the agent may use it, and
    /// its name is not on the dangerous list.
    pub(super) fn safe_to_speculate(&self, tool: &str) -> bool {
        self.tools.read_only(tool)
            && self.tools.allows(self.allow_list(), tool)
            && !advice::dangerous(tool)
    }

    /// Arguments for `tool`, by the DAG builder's rules: each required parameter from the
    /// latest earlier call's structured result with a property of that name and a fitting
    /// type, else carried from the latest earlier call given one; `None` if one cannot be.
    fn carried_args(&self, st: &Saved, tool: &str) -> Option<Value> {
        let spec = self.tools.spec(tool)?;
        let mut args = Map::new();
        for param in schema::inputs(&spec.input_schema)
            .into_iter()
            .filter(|p| p.required)
        {
            let outputs: Vec<&Value> = st
                .history
                .iter()
                .map(|d| d.data.as_ref().unwrap_or(&Value::Null))
                .collect();
            let (_, value) = given_earlier(&param, outputs)
                .or_else(|| given_earlier(&param, st.history.iter().map(|d| &d.args)))?;
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
    ) -> Option<(String, ToolStatus, Option<Value>)> {
        let at = st
            .speculated
            .iter()
            .position(|s| s.tool == tool && &s.args == args)?;
        let s = st.speculated.remove(at);
        if let Some(advisor) = &self.env.advisor {
            advisor.speculated(&s.tool, s.confidence, SpeculationOutcome::Used);
        }
        Some((s.content, ToolStatus::Ok, s.data))
    }

    /// Reports what became of the speculative results left at the end: one nobody asked
    /// for is wasted; one shown in the prompt is used, unless the model then called the
    /// same tool with other arguments (it wanted something else).
    pub(super) fn waste_speculations(&self, st: &mut Saved) {
        let Some(advisor) = &self.env.advisor else {
            st.speculated.clear();
            return;
        };
        let model_calls = st.history.get(st.foresight..).unwrap_or_default();
        for s in st.speculated.drain(..) {
            let redone = model_calls
                .iter()
                .any(|d| d.tool == s.tool && d.args != s.args);
            let outcome = if s.shown && !redone {
                SpeculationOutcome::Used
            } else {
                SpeculationOutcome::Wasted
            };
            advisor.speculated(&s.tool, s.confidence, outcome);
        }
    }
}
