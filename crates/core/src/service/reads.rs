//! The service's read side: typed queries over the workspace's records. Front-ends read
//! through these and never through the store; the parameter and answer types live in
//! [`trellis_protocol::records`].
//!
//! Each query is answered by the service's [`Records`] — the store-only reader that a
//! command which only reads uses without a service — with the service adding what only it
//! knows: whether a run executes here, and its runtime's workflow catalog. Every query reads
//! SQLite and may block: async callers run it on the blocking pool.

use trellis_protocol::records::{
    ChangeSetRecord, Checkpoint, ClientSession, ClientTurn, ModelCallRecord, RunFilter, RunGraph,
    RunRecord, RunState, RunUsage, RunView, SessionFilter, SessionRecord, ToolGraphView,
    TurnRecord, WorkflowCatalog,
};
use trellis_protocol::{
    Artifact, Event, Interrupt, NodeId, RunId, ServiceEvent, SessionId, StreamId,
};
use trellis_workflow::Plan;

use super::{OpError, Service};
use crate::Records;

impl Service {
    /// The workspace's records: the reader every query below answers through.
    pub fn records(&self) -> &Records {
        &self.records
    }

    /// The record of run `id_or_prefix` (a full id or a unique prefix).
    pub fn run_record(&self, id_or_prefix: &str) -> Result<RunRecord, OpError> {
        Ok(self.records.run_record(id_or_prefix)?)
    }

    /// Run `id_or_prefix` as a client lists it: record, liveness, usage, workflow and stage.
    pub fn run_view(&self, id_or_prefix: &str) -> Result<RunView, OpError> {
        let record = self.run_record(id_or_prefix)?;
        let live = self.is_live(&record.id);
        Ok(self.records.view_of(record, live, false)?)
    }

    /// The runs `filter` selects, newest first, as a client lists them (with the stage an
    /// unfinished workflow run is in).
    pub fn run_views(&self, filter: &RunFilter) -> Result<Vec<RunView>, OpError> {
        self.run_records(filter)?
            .into_iter()
            .map(|record| {
                let live = self.is_live(&record.id);
                Ok(self.records.view_of(record, live, true)?)
            })
            .collect()
    }

    /// The records of the runs `filter` selects, newest first.
    pub fn run_records(&self, filter: &RunFilter) -> Result<Vec<RunRecord>, OpError> {
        Ok(self.records.run_records(filter)?)
    }

    /// Where workflow run `run` stands, replayed from the store (nothing runs).
    pub fn run_state(&self, run: &RunId) -> Result<RunState, OpError> {
        Ok(self.records.run_state(run)?)
    }

    /// A workflow run's graph as it stands, replayed from the store (nothing runs): nodes,
    /// fan-out groups, what waits, the plan's routing and the task tree.
    pub fn run_graph(&self, run: &RunId) -> Result<RunGraph, OpError> {
        Ok(self.records.run_graph(run)?)
    }

    /// The questions and reviews waiting for an answer in `run`.
    pub fn interrupts(&self, run: &RunId) -> Result<Vec<(NodeId, Interrupt)>, OpError> {
        Ok(self.records.interrupts(run)?)
    }

    /// The plan a workflow run was started with.
    pub fn run_plan(&self, run: &RunId) -> Result<Plan, OpError> {
        Ok(self.records.run_plan(run)?)
    }

    /// The stored events of `stream` after `since` (at most `limit`).
    pub fn stream_events(
        &self,
        stream: &StreamId,
        since: u64,
        limit: Option<usize>,
    ) -> Result<Vec<ServiceEvent>, OpError> {
        Ok(self.records.stream_events(stream, since, limit)?)
    }

    /// The last seq of `stream` (0 when it has no events).
    pub fn stream_head(&self, stream: &StreamId) -> Result<u64, OpError> {
        Ok(self.records.stream_head(stream)?)
    }

    /// A run's graph events from `from_seq` to `to_seq` (inclusive; `None`: to the end).
    pub fn run_events(
        &self,
        run: &RunId,
        from_seq: u64,
        to_seq: Option<u64>,
    ) -> Result<Vec<Event>, OpError> {
        Ok(self.records.run_events(run, from_seq, to_seq)?)
    }

    /// The points `run` can be forked or resumed from.
    pub fn checkpoints(&self, run: &RunId) -> Result<Vec<Checkpoint>, OpError> {
        Ok(self.records.checkpoints(run)?)
    }

    /// The run's artifacts, each JSON card also rendered as markdown.
    pub fn artifacts(&self, run: &RunId) -> Result<Vec<Artifact>, OpError> {
        Ok(self.records.artifacts(run)?)
    }

    /// The run's model usage: in total, per stage and per agent.
    pub fn usage(&self, run: &RunId) -> Result<RunUsage, OpError> {
        Ok(self.records.usage(run)?)
    }

    /// The run's model calls in order.
    pub fn model_calls(&self, run: &RunId) -> Result<Vec<ModelCallRecord>, OpError> {
        Ok(self.records.model_calls(run)?)
    }

    /// The agent and channel sessions `filter` selects, newest first.
    pub fn sessions(&self, filter: &SessionFilter) -> Result<Vec<SessionRecord>, OpError> {
        Ok(self.records.sessions(filter)?)
    }

    /// Session `id`.
    pub fn session(&self, id: &SessionId) -> Result<SessionRecord, OpError> {
        Ok(self.records.session(id)?)
    }

    /// The turns of session `id`, in order.
    pub fn turns(&self, id: &SessionId) -> Result<Vec<TurnRecord>, OpError> {
        Ok(self.records.turns(id)?)
    }

    /// The change set of run `id_or_prefix` and its review state.
    pub fn change_set_record(&self, id_or_prefix: &str) -> Result<ChangeSetRecord, OpError> {
        Ok(self.records.change_set_record(id_or_prefix)?)
    }

    /// The change set of `run` as `git diff --stat` shows it (its branch against its base);
    /// `None` when the run has none or git cannot tell.
    pub fn change_set_stat(&self, run: &RunId) -> Option<String> {
        self.records.change_set_stat(run)
    }

    /// The sessions front-end `client` recorded (`acp`), newest first.
    pub fn client_sessions(&self, client: &str) -> Result<Vec<ClientSession>, OpError> {
        Ok(self.records.client_sessions(client)?)
    }

    /// Client session `id`, if recorded.
    pub fn client_session(&self, id: &str) -> Result<Option<ClientSession>, OpError> {
        Ok(self.records.client_session(id)?)
    }

    /// The prompt turns of client session `id`, in order.
    pub fn client_turns(&self, id: &str) -> Result<Vec<ClientTurn>, OpError> {
        Ok(self.records.client_turns(id)?)
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
    /// threshold and outcomes (`trellis tools graph`, `GET /api/tools/graph`).
    pub fn tool_graph(&self) -> Result<ToolGraphView, OpError> {
        Ok(self.records.tool_graph()?)
    }
}
