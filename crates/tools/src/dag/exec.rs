//! DAG executions that pause and resume (the controlled executor, docs/tools.md): the plan
//! as it stands (steps injected or removed by decisions included), the results of the steps
//! that ran, the steps to decide after, and the decisions taken — saved as a checkpoint
//! ([`Checkpoints`]) whenever the execution stops, so that it continues where it stopped,
//! in this process or the next, without running its completed steps again.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::build::{Catalog, Dag, DagError, Step, build};
use trellis_store::DagCheckpointStore;

/// A decision taken while an execution was paused, by the agent or by the user.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Decision {
    /// `continue`, `inject`, `remove`, `approved` or `refused`.
    pub kind: String,
    /// What it concerned (step ids, a requirement).
    pub detail: String,
}

/// How a step ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StepStatus {
    /// It ran and succeeded.
    Ok,
    /// It ran and failed (or its arguments could not be completed).
    Error,
    /// It needed the user, which a DAG step does not ask; call the tool on its own.
    NeedsInput,
    /// A dependency did not succeed.
    Skipped,
    /// The run was cancelled.
    Cancelled,
}

/// One step's result.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct StepResult {
    /// The step.
    pub id: String,
    /// Its tool.
    pub tool: String,
    /// How it ended.
    pub status: StepStatus,
    /// The arguments it ran with (after references and bindings), if it ran.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub args: Option<Value>,
    /// Its text (the error or the reason it was skipped, when it did not succeed).
    pub text: String,
    /// Its structured result.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub data: Option<Value>,
    /// How long it ran.
    pub duration_ms: u64,
}

/// The state of one DAG execution.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Execution {
    /// Its id (the checkpoint's key).
    pub id: String,
    /// The plan as it stands.
    pub steps: Vec<Step>,
    /// Results of the steps that ran, by step id.
    pub done: BTreeMap<String, StepResult>,
    /// Steps after which the execution stops for a decision.
    #[serde(default)]
    pub decide_after: Vec<String>,
    /// The decisions taken so far, oldest first.
    #[serde(default)]
    pub decisions: Vec<Decision>,
    /// A step waiting for the user (it runs first when the execution continues).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub held: Option<String>,
}

impl Execution {
    /// A fresh execution of `steps`.
    pub fn new(id: String, steps: Vec<Step>, decide_after: Vec<String>) -> Self {
        Self {
            id,
            steps,
            done: BTreeMap::new(),
            decide_after,
            decisions: Vec::new(),
            held: None,
        }
    }

    /// The plan's DAG.
    pub fn dag(&self, catalog: &dyn Catalog) -> Result<Dag, DagError> {
        build(&self.steps, catalog)
    }

    /// The completed steps' results by node index of `dag` (built from these steps).
    pub fn done_by_index(&self, dag: &Dag) -> BTreeMap<usize, StepResult> {
        dag.nodes
            .iter()
            .enumerate()
            .filter_map(|(i, n)| self.done.get(&n.id).map(|r| (i, r.clone())))
            .collect()
    }

    /// Keeps the results of a run of `dag` (node index → result).
    pub fn record(&mut self, dag: &Dag, results: BTreeMap<usize, StepResult>) {
        for (i, r) in results {
            if let Some(n) = dag.nodes.get(i) {
                self.done.insert(n.id.clone(), r);
            }
        }
    }

    /// The steps that have not run yet, in plan order.
    pub fn pending(&self) -> Vec<&str> {
        self.steps
            .iter()
            .filter(|s| !self.done.contains_key(&s.id))
            .map(|s| s.id.as_str())
            .collect()
    }

    /// Changes the plan: removes steps that have not run (`remove`), then appends `add`.
    /// Refused — naming the step — when a removed step ran already or does not exist, an
    /// added id is taken, or a kept step depends on a removed one.
    pub fn replan(&mut self, add: Vec<Step>, remove: &[String]) -> Result<(), String> {
        for id in remove {
            if self.done.contains_key(id) {
                return Err(format!(
                    "step `{id}` ran already; only pending steps can be removed"
                ));
            }
            if !self.steps.iter().any(|s| &s.id == id) {
                return Err(format!(
                    "there is no step `{id}` (pending: {})",
                    self.pending().join(", ")
                ));
            }
        }
        let kept: Vec<Step> = self
            .steps
            .iter()
            .filter(|s| !remove.contains(&s.id))
            .cloned()
            .collect();
        for s in &kept {
            if let Some(dep) = s.depends_on.iter().find(|d| remove.contains(d)) {
                return Err(format!(
                    "step `{}` depends on `{dep}`: remove it too, or keep `{dep}`",
                    s.id
                ));
            }
        }
        let mut ids: std::collections::HashSet<&str> = kept.iter().map(|s| s.id.as_str()).collect();
        for s in &add {
            if !ids.insert(s.id.as_str()) {
                return Err(format!(
                    "a step is already called `{}`; give the new one another id",
                    s.id
                ));
            }
        }
        if !remove.is_empty() {
            self.decisions.push(Decision {
                kind: "remove".into(),
                detail: remove.join(", "),
            });
        }
        if !add.is_empty() {
            self.decisions.push(Decision {
                kind: "inject".into(),
                detail: add
                    .iter()
                    .map(|s| s.id.as_str())
                    .collect::<Vec<_>>()
                    .join(", "),
            });
        }
        self.steps = kept;
        self.steps.extend(add);
        Ok(())
    }
}

/// Where executions' checkpoints are kept.
pub trait Checkpoints: Send + Sync {
    /// Saves `execution`'s state, replacing its previous checkpoint.
    fn save(&self, execution: &Execution);
    /// The checkpoint of execution `id`, if any.
    fn load(&self, id: &str) -> Option<Execution>;
    /// Removes execution `id`'s checkpoint (it finished).
    fn remove(&self, id: &str);
}

/// Checkpoints in this process's memory (the default; lost when it stops).
#[derive(Debug, Default)]
pub struct MemoryCheckpoints(Mutex<HashMap<String, Execution>>);

impl Checkpoints for MemoryCheckpoints {
    fn save(&self, execution: &Execution) {
        if let Ok(mut m) = self.0.lock() {
            m.insert(execution.id.clone(), execution.clone());
        }
    }

    fn load(&self, id: &str) -> Option<Execution> {
        self.0.lock().ok()?.get(id).cloned()
    }

    fn remove(&self, id: &str) {
        if let Ok(mut m) = self.0.lock() {
            m.remove(id);
        }
    }
}

/// Checkpoints in the workspace store (`dag_checkpoints`): they survive the process.
/// Failures are logged, never fatal: without its checkpoint an execution starts again.
pub struct StoreCheckpoints(pub Arc<dyn DagCheckpointStore>);

impl std::fmt::Debug for StoreCheckpoints {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StoreCheckpoints").finish_non_exhaustive()
    }
}

impl Checkpoints for StoreCheckpoints {
    fn save(&self, execution: &Execution) {
        let saved = serde_json::to_string(execution)
            .map_err(|e| e.to_string())
            .and_then(|json| {
                self.0
                    .save_dag_checkpoint(&execution.id, json)
                    .map_err(|e| e.to_string())
            });
        if let Err(e) = saved {
            tracing::warn!(id = %execution.id, error = %e, "a DAG checkpoint could not be saved");
        }
    }

    fn load(&self, id: &str) -> Option<Execution> {
        match self.0.dag_checkpoint(id) {
            Ok(Some(json)) => serde_json::from_str(&json)
                .map_err(|e| tracing::warn!(id, error = %e, "a DAG checkpoint is unreadable"))
                .ok(),
            Ok(None) => None,
            Err(e) => {
                tracing::warn!(id, error = %e, "a DAG checkpoint could not be read");
                None
            }
        }
    }

    fn remove(&self, id: &str) {
        if let Err(e) = self.0.remove_dag_checkpoint(id) {
            tracing::warn!(id, error = %e, "a DAG checkpoint could not be removed");
        }
    }
}
