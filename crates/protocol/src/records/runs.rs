//! Runs: their records, the points they can be forked from, and what a client is shown of
//! one (its graph's nodes, its plan, its usage).

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::{ForkRef, Interrupt, NodeId, NodeState, RunId, RunStatus};

use super::RunUsage;

/// Which runs a run listing returns.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RunFilter {
    /// Only runs with this status.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<RunStatus>,
    /// At most this many (newest first).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limit: Option<usize>,
}

/// The per-run summary kept alongside the log (what `runs list` shows).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RunSummary {
    /// Graph name.
    pub graph: String,
    /// Current status.
    pub status: RunStatus,
    /// Steps completed so far.
    pub step: u64,
    /// Seq of the last event of this batch.
    pub last_seq: u64,
    /// Terminal reached, if any.
    pub terminal: Option<NodeId>,
    /// Error text for failed runs.
    pub error: Option<String>,
    /// Where the run was forked from.
    pub fork: Option<ForkRef>,
    /// Creation time (ms since epoch).
    pub created_ts: i64,
    /// Time of this batch (ms since epoch).
    pub updated_ts: i64,
}

/// The process holding (or asking for) a run's claim.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Owner {
    /// Process id.
    pub pid: u32,
    /// Host name.
    pub host: String,
    /// Process start time in clock ticks since boot, when `/proc` tells it; guards against pid
    /// reuse.
    pub start_time: Option<u64>,
}

impl Owner {
    /// `pid@host`, as shown in messages.
    pub fn label(&self) -> String {
        format!("{}@{}", self.pid, self.host)
    }

    /// Whether `self` and `other` are the same process.
    pub fn same_process(&self, other: &Owner) -> bool {
        self.pid == other.pid
            && self.host == other.host
            && (self.start_time.is_none()
                || other.start_time.is_none()
                || self.start_time == other.start_time)
    }
}

/// One run as recorded in the `runs` table.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RunRecord {
    /// The run id.
    pub id: RunId,
    /// Graph, status, progress, fork origin and times, as the journal keeps them.
    #[serde(flatten)]
    pub summary: RunSummary,
    /// The process that claimed the run, if any.
    pub owner: Option<Owner>,
    /// When the claim was taken (ms since epoch).
    pub claimed_at: Option<i64>,
    /// When the owner last committed a batch of this run (ms since epoch).
    pub heartbeat: Option<i64>,
    /// Whether the owner is still running (always false without an owner).
    pub owner_alive: bool,
}

/// A point a run can be forked or resumed from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Checkpoint {
    /// The seq of the `runStarted` or `stepCompleted` event.
    pub seq: u64,
    /// Its time (ms since epoch).
    pub ts: i64,
    /// Steps completed at that point (0 at `runStarted`).
    pub step: u64,
}

/// A run as a client lists it: its record, whether this process executes it, its usage, and
/// for workflow runs the workflow, the request and the stage it is in.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RunView {
    /// The record.
    pub record: RunRecord,
    /// Whether this process executes the run now.
    pub live: bool,
    /// Model usage so far.
    pub usage: RunUsage,
    /// The workflow, for runs started from one.
    pub workflow: Option<String>,
    /// The request the workflow run was started with.
    pub request: Option<String>,
    /// For an unfinished workflow run: the last stage (in plan order) that is running or
    /// waiting for input, else the last one that has run (`Some(None)` when none has).
    /// `None` for finished runs and runs without a plan.
    pub stage: Option<Option<String>>,
}

/// The state of a node as clients see it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct NodeView {
    /// Node id.
    pub id: NodeId,
    /// Latest activation number (0 if never reached).
    pub attempt: u32,
    /// State of the latest activation (`None` if never reached).
    pub state: Option<NodeState>,
    /// Parent in the spawn tree.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parent: Option<NodeId>,
    /// Latest recorded result.
    #[serde(default, skip_serializing_if = "Value::is_null")]
    pub result: Value,
    /// Latest error.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// The pending question, when WAITING_INPUT.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub interrupt: Option<Interrupt>,
}

/// The children one node spawned (a fan-out), with how many are in each state.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RunGroup {
    /// The parent node.
    pub parent: String,
    /// Its children, in node order.
    pub nodes: Vec<String>,
    /// Children per state name (`PENDING` for never reached).
    pub counts: BTreeMap<String, usize>,
}

/// Where a run stands, replayed from its log (nothing runs): what a front-end shows when a
/// run pauses or ends. `S` holds the channel values: JSON here and on the wire; the engine's
/// own state in the outcome it returns (`trellis_graph::RunOutcome`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(rename = "RunState")]
pub struct RunState<S = Value> {
    /// The run.
    pub run: RunId,
    /// Its status.
    pub status: RunStatus,
    /// Terminal reached.
    pub terminal: Option<NodeId>,
    /// Error text for failures.
    pub error: Option<String>,
    /// Steps executed.
    pub steps: u64,
    /// Seq of the last event.
    pub last_seq: u64,
    /// The run's channel values by channel name (`stage_results`, `task_tree`, …).
    pub state: S,
    /// Named counters.
    pub counters: BTreeMap<String, i64>,
    /// Every node.
    pub nodes: Vec<NodeView>,
    /// Questions waiting for an answer, by node.
    pub waiting: Vec<(NodeId, Interrupt)>,
}

impl<S> RunState<S> {
    /// Node `id`, if the run has it.
    pub fn node(&self, id: &str) -> Option<&NodeView> {
        self.nodes.iter().find(|n| n.id.as_str() == id)
    }

    /// The files the run's nodes report changed (`files_changed` in their results), sorted,
    /// without duplicates.
    pub fn files_changed(&self) -> Vec<String> {
        files_changed(&self.nodes)
    }

    /// The same run with its channel values held as `f` makes them (the engine's state as
    /// JSON, for the wire).
    pub fn map_state<T>(self, f: impl FnOnce(S) -> T) -> RunState<T> {
        RunState {
            run: self.run,
            status: self.status,
            terminal: self.terminal,
            error: self.error,
            steps: self.steps,
            last_seq: self.last_seq,
            state: f(self.state),
            counters: self.counters,
            nodes: self.nodes,
            waiting: self.waiting,
        }
    }
}

/// The files `nodes` report changed (`files_changed` in their results), sorted, without
/// duplicates.
pub fn files_changed(nodes: &[NodeView]) -> Vec<String> {
    let mut files: Vec<String> = nodes
        .iter()
        .filter_map(|n| n.result.get("files_changed").and_then(Value::as_array))
        .flatten()
        .filter_map(Value::as_str)
        .map(str::to_owned)
        .collect();
    files.sort();
    files.dedup();
    files
}

/// A workflow run's graph as it stands: every node with its state, the fan-out groups, what
/// waits for an answer, and the plan's routing.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RunGraph {
    /// Where the run stands.
    pub state: RunState,
    /// Fan-out groups by parent.
    pub groups: Vec<RunGroup>,
    /// The workflow.
    pub workflow: Option<String>,
    /// The plan's entry stage.
    pub entry: Option<String>,
    /// The plan's stage routing.
    pub routing: Option<Value>,
    /// Stages the plan skipped, with the reason.
    pub skipped: Option<Value>,
    /// The task tree, for runs that keep one (`task_tree`, docs/workflows.md).
    pub task_tree: Option<Value>,
}

/// What a workflow run's planning node decided: the workflow, the orchestrator's decisions
/// and the assembled plan (as `startRun` with `planOnly` answers them).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RunPlanned {
    /// The workflow chosen.
    pub workflow: String,
    /// The orchestrator's decisions (workflow, by whom, reasoning, stages, notes).
    pub orchestration: Value,
    /// The assembled plan (stages, routing, what was skipped).
    pub plan: Value,
}
