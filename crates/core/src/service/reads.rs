//! The service's read side: typed queries over the workspace's records, answered from the
//! store (and, for a run's graph, by replaying its log). Front-ends read through these and
//! never through the store; the parameter and answer types live in
//! [`trellis_protocol::records`].
//!
//! Every query reads SQLite and may block: async callers run it on the blocking pool.

use std::collections::BTreeMap;

use serde_json::Value;
use trellis_protocol::records::{
    ChangeSetRecord, Checkpoint, ClientSession, ClientTurn, ModelCallRecord, RunFilter, RunGraph,
    RunGroup, RunRecord, RunState, RunUsage, RunView, SessionFilter, SessionRecord, TurnRecord,
    WorkflowCatalog,
};
use trellis_protocol::{
    Artifact, Event, Interrupt, NodeId, NodeState, RunId, RunStatus, ServiceEvent, SessionId,
    StreamId,
};
use trellis_runtime::planning::{self, Stage};
use trellis_workflow::Plan;

use super::{OpError, Service};

impl Service {
    /// The record of run `id_or_prefix` (a full id or a unique prefix).
    pub fn run_record(&self, id_or_prefix: &str) -> Result<RunRecord, OpError> {
        Ok(self.runtime.store().get_run(id_or_prefix)?)
    }

    /// Run `id_or_prefix` as a client lists it: record, liveness, usage, workflow and stage.
    pub fn run_view(&self, id_or_prefix: &str) -> Result<RunView, OpError> {
        let record = self.run_record(id_or_prefix)?;
        self.view_of(record, false)
    }

    /// The runs `filter` selects, newest first, as a client lists them (with the stage an
    /// unfinished workflow run is in).
    pub fn run_views(&self, filter: &RunFilter) -> Result<Vec<RunView>, OpError> {
        self.runtime
            .store()
            .list_runs(filter)?
            .into_iter()
            .map(|record| self.view_of(record, true))
            .collect()
    }

    /// The records of the runs `filter` selects, newest first.
    pub fn run_records(&self, filter: &RunFilter) -> Result<Vec<RunRecord>, OpError> {
        Ok(self.runtime.store().list_runs(filter)?)
    }

    fn view_of(&self, record: RunRecord, with_stage: bool) -> Result<RunView, OpError> {
        let usage = self.runtime.store().run_usage(&record.id)?;
        let live = self.is_live(&record.id);
        let unfinished = matches!(
            record.summary.status,
            RunStatus::Running | RunStatus::WaitingInput
        );
        let (workflow, request, stage) = match self.runtime.stage(&record.id).ok() {
            Some(Stage::Planned { plan, .. }) => {
                let stage =
                    (with_stage && unfinished).then(|| self.current_stage(&record.id, &plan));
                (Some(plan.workflow), Some(plan.task), stage)
            }
            // Still planning: the workflow is not decided; the planning node is the stage.
            Some(Stage::Planning(params)) => (
                Some(planning::PLANNING_GRAPH.to_owned()),
                Some(params.request),
                (with_stage && unfinished).then(|| Some(planning::ORCHESTRATE.to_owned())),
            ),
            None => (None, None, None),
        };
        Ok(RunView {
            live,
            usage,
            workflow,
            request,
            stage,
            record,
        })
    }

    /// The stage an unfinished workflow run is in: the last stage (in plan order) whose
    /// latest activation is RUNNING or WAITING_INPUT, else the last one that has run.
    fn current_stage(&self, run: &RunId, plan: &Plan) -> Option<String> {
        let outcome = self.runtime.inspect(run).ok()?;
        let state = |name: &str| {
            outcome
                .nodes
                .iter()
                .find(|n| n.id.as_str() == name)
                .and_then(|n| n.state)
        };
        let stages: Vec<&str> = plan
            .planned
            .iter()
            .map(|p| p.context.stage_name.as_str())
            .collect();
        let active = stages
            .iter()
            .rev()
            .find(|s| matches!(state(s), Some(NodeState::Running | NodeState::WaitingInput)));
        active
            .or_else(|| stages.iter().rev().find(|s| state(s).is_some()))
            .map(|s| (*s).to_owned())
    }

    /// Where workflow run `run` stands, replayed from the store (nothing runs).
    pub fn run_state(&self, run: &RunId) -> Result<RunState, OpError> {
        Ok(self.runtime.inspect(run)?.to_state())
    }

    /// A workflow run's graph as it stands, replayed from the store (nothing runs): nodes,
    /// fan-out groups, what waits, the plan's routing and the task tree.
    pub fn run_graph(&self, run: &RunId) -> Result<RunGraph, OpError> {
        let state = self.run_state(run)?;
        let plan = self.runtime.stored_plan(run).ok();
        let mut groups: BTreeMap<String, RunGroup> = BTreeMap::new();
        for n in &state.nodes {
            if let Some(parent) = &n.parent {
                let g = groups
                    .entry(parent.to_string())
                    .or_insert_with(|| RunGroup {
                        parent: parent.to_string(),
                        nodes: Vec::new(),
                        counts: BTreeMap::new(),
                    });
                g.nodes.push(n.id.to_string());
                let name = n
                    .state
                    .map_or_else(|| "PENDING".to_owned(), |s| s.to_string());
                *g.counts.entry(name).or_default() += 1;
            }
        }
        Ok(RunGraph {
            groups: groups.into_values().collect(),
            workflow: plan.as_ref().map(|p| p.workflow.clone()),
            entry: plan.as_ref().map(|p| p.entry.clone()),
            routing: plan.as_ref().map(|p| to_json(&p.routing)).transpose()?,
            skipped: plan.as_ref().map(|p| to_json(&p.skipped)).transpose()?,
            task_tree: state
                .state
                .get(trellis_workflow::tasktree::CHANNEL)
                .cloned(),
            state,
        })
    }

    /// The questions and reviews waiting for an answer in `run`.
    pub fn interrupts(&self, run: &RunId) -> Result<Vec<(NodeId, Interrupt)>, OpError> {
        Ok(self.runtime.inspect(run)?.waiting)
    }

    /// The plan a workflow run was started with.
    pub fn run_plan(&self, run: &RunId) -> Result<Plan, OpError> {
        Ok(self.runtime.stored_plan(run)?)
    }

    /// The stored events of `stream` after `since` (at most `limit`).
    pub fn stream_events(
        &self,
        stream: &StreamId,
        since: u64,
        limit: Option<usize>,
    ) -> Result<Vec<ServiceEvent>, OpError> {
        Ok(self.runtime.store().stream_events(stream, since, limit)?)
    }

    /// The last seq of `stream` (0 when it has no events).
    pub fn stream_head(&self, stream: &StreamId) -> Result<u64, OpError> {
        Ok(self.runtime.store().stream_last_seq(stream)?)
    }

    /// A run's graph events from `from_seq` to `to_seq` (inclusive; `None`: to the end).
    pub fn run_events(
        &self,
        run: &RunId,
        from_seq: u64,
        to_seq: Option<u64>,
    ) -> Result<Vec<Event>, OpError> {
        Ok(self.runtime.store().events(run, from_seq, to_seq)?)
    }

    /// The points `run` can be forked or resumed from.
    pub fn checkpoints(&self, run: &RunId) -> Result<Vec<Checkpoint>, OpError> {
        Ok(self.runtime.store().checkpoints(run)?)
    }

    /// The run's artifacts, each JSON card also rendered as markdown.
    pub fn artifacts(&self, run: &RunId) -> Result<Vec<Artifact>, OpError> {
        let mut artifacts = self.runtime.store().artifacts(run)?;
        for a in &mut artifacts {
            a.rendered = rendered(&a.kind, &a.content);
        }
        Ok(artifacts)
    }

    /// The run's model usage: in total, per stage and per agent.
    pub fn usage(&self, run: &RunId) -> Result<RunUsage, OpError> {
        Ok(self.runtime.store().run_usage(run)?)
    }

    /// The run's model calls in order.
    pub fn model_calls(&self, run: &RunId) -> Result<Vec<ModelCallRecord>, OpError> {
        Ok(self.runtime.store().model_calls(run)?)
    }

    /// The agent and channel sessions `filter` selects, newest first.
    pub fn sessions(&self, filter: &SessionFilter) -> Result<Vec<SessionRecord>, OpError> {
        Ok(self.runtime.store().sessions(filter)?)
    }

    /// Session `id`.
    pub fn session(&self, id: &SessionId) -> Result<SessionRecord, OpError> {
        Ok(self.runtime.store().session(id)?)
    }

    /// The turns of session `id`, in order.
    pub fn turns(&self, id: &SessionId) -> Result<Vec<TurnRecord>, OpError> {
        Ok(self.runtime.store().turns(id)?)
    }

    /// The change set of run `id_or_prefix` and its review state.
    pub fn change_set_record(&self, id_or_prefix: &str) -> Result<ChangeSetRecord, OpError> {
        Ok(self.runtime.store().change_set(id_or_prefix)?)
    }

    /// The change set of `run` as `git diff --stat` shows it (its branch against its base);
    /// `None` when the run has none or git cannot tell.
    pub fn change_set_stat(&self, run: &RunId) -> Option<String> {
        let rec = self.runtime.store().change_set(run.as_str()).ok()?;
        trellis_tools::git::Git::new(&rec.repo)
            .text(&["diff", "--stat", &rec.base_commit, &rec.branch])
            .ok()
    }

    /// The sessions front-end `client` recorded (`acp`), newest first.
    pub fn client_sessions(&self, client: &str) -> Result<Vec<ClientSession>, OpError> {
        Ok(self.runtime.store().client_sessions(client)?)
    }

    /// Client session `id`, if recorded.
    pub fn client_session(&self, id: &str) -> Result<Option<ClientSession>, OpError> {
        Ok(self.runtime.store().client_session(id)?)
    }

    /// The prompt turns of client session `id`, in order.
    pub fn client_turns(&self, id: &str) -> Result<Vec<ClientTurn>, OpError> {
        Ok(self.runtime.store().client_turns(id)?)
    }

    /// The workflows a run can use, and the files that failed to load.
    pub fn workflow_catalog(&self) -> Result<WorkflowCatalog, OpError> {
        let catalog = self.runtime.catalog();
        let workflows = serde_json::to_value(catalog.entries())
            .map_err(|e| OpError::internal(format!("encoding the workflow catalog: {e}")))?;
        Ok(WorkflowCatalog {
            workflows,
            errors: catalog.errors().iter().map(|e| e.to_string()).collect(),
        })
    }

    /// The tool knowledge graph the agents' calls taught the workspace, with the speculation
    /// threshold and outcomes (`trellis tools graph --format json`).
    pub fn tool_graph(&self) -> Result<Value, OpError> {
        trellis_toolgraph::ToolGraph::workspace_json(self.runtime.store())
            .map_err(|e| OpError::internal(format!("reading the tool knowledge graph: {e}")))
    }
}

fn to_json(v: &impl serde::Serialize) -> Result<Value, OpError> {
    serde_json::to_value(v).map_err(|e| OpError::internal(format!("encoding a plan: {e}")))
}

/// A JSON card (scope card, research card, plan) as markdown; `None` for markdown artifacts
/// and kinds the artifacts module does not know (the review, the pulse summary).
fn rendered(kind: &str, content: &str) -> Option<String> {
    let valid = trellis_workflow::artifacts::validate(kind, content).ok()?;
    let md = valid.to_markdown();
    (md != content).then_some(md)
}
