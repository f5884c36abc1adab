//! The workspace's records, read from its store alone: [`Records`].
//!
//! Runs and their logs, checkpoints and replayed graphs, sessions and turns, usage and model
//! calls, artifacts, change sets, the sessions of clients and the tool knowledge graph. A
//! reader needs no [`Runtime`](crate::Runtime) — no configuration, models or catalogs — so a
//! command that only reads (`trellis runs list | show | events | usage`) works, and starts
//! fast, whatever the workspace's model configuration says. The service's queries
//! ([`Service::run_record`](crate::service::Service::run_record), …) answer through the same
//! reader: every query has one implementation.
//!
//! The answers are wire types ([`trellis_protocol::records`]); every query reads SQLite and
//! may block (async callers run it on the blocking pool).

use std::collections::BTreeMap;
use std::sync::Arc;

use serde_json::Value;
use trellis_graph::{Engine, Graph};
use trellis_protocol::records::{
    ChangeSetRecord, Checkpoint, ClientSession, ClientTurn, ModelCallRecord, RunFilter, RunGraph,
    RunGroup, RunRecord, RunState, RunUsage, RunView, SessionFilter, SessionRecord, ToolGraphView,
    TurnRecord,
};
use trellis_protocol::{
    Artifact, Event, Interrupt, NodeId, NodeState, RunId, RunStatus, ServiceEvent, SessionId,
    StreamId,
};
use trellis_runtime::planning::{self, Stage};
use trellis_store::Store;
use trellis_workflow::Plan;

/// The state channel a task-tree run keeps its tree in (`RunState::state[TASK_TREE]`,
/// docs/workflows.md).
pub const TASK_TREE: &str = trellis_workflow::tasktree::CHANNEL;

/// What reading the records can fail with.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The store.
    #[error(transparent)]
    Store(#[from] trellis_store::Error),
    /// A workflow run's stage, plan or replay.
    #[error(transparent)]
    Runtime(#[from] trellis_runtime::Error),
    /// A demonstration run's graph or replay.
    #[error(transparent)]
    Graph(#[from] trellis_graph::Error),
    /// A recorded run's graph could not be rebuilt (see `source`).
    #[error("rebuilding the graph of run {run} (was it recorded by another trellis version?)")]
    Rebuild {
        /// The run.
        run: RunId,
        /// Why.
        #[source]
        source: Box<Error>,
    },
    /// A plan could not be encoded as JSON.
    #[error("encoding a plan: {0}")]
    Encode(#[source] serde_json::Error),
    /// The tool knowledge graph could not be read.
    #[error("reading the tool knowledge graph: {0}")]
    ToolGraph(#[source] trellis_toolgraph::Error),
}

/// A result of reading the records.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// A reader of one workspace's records, over its store (cheap to clone).
#[derive(Clone)]
pub struct Records {
    store: Arc<Store>,
}

impl Records {
    /// A reader of the records in `store`.
    pub fn new(store: Arc<Store>) -> Self {
        Self { store }
    }

    /// Where the records are read from: the database file, or the server's URL without its
    /// password.
    pub fn location(&self) -> String {
        self.store.location()
    }

    /// Resolves a run id or unique prefix.
    pub fn run_id(&self, id_or_prefix: &str) -> Result<RunId> {
        Ok(self.store.run_id(id_or_prefix)?)
    }

    /// The record of run `id_or_prefix` (a full id or a unique prefix).
    pub fn run_record(&self, id_or_prefix: &str) -> Result<RunRecord> {
        Ok(self.store.get_run(id_or_prefix)?)
    }

    /// The records of the runs `filter` selects, newest first.
    pub fn run_records(&self, filter: &RunFilter) -> Result<Vec<RunRecord>> {
        Ok(self.store.list_runs(filter)?)
    }

    /// `record` as a client lists it: with its usage, workflow and request, whether it is
    /// `live` (executing in this process), and, with `with_stage`, the stage an unfinished
    /// workflow run is in.
    pub(crate) fn view_of(
        &self,
        record: RunRecord,
        live: bool,
        with_stage: bool,
    ) -> Result<RunView> {
        let usage = self.usage(&record.id)?;
        let unfinished = matches!(
            record.summary.status,
            RunStatus::Running | RunStatus::WaitingInput
        );
        let (workflow, request, stage) = match Stage::read(&*self.store, &record.id).ok() {
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
        let outcome = self.run_state(run).ok()?;
        let state = |name: &str| outcome.node(name).and_then(|n| n.state);
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
    pub fn run_state(&self, run: &RunId) -> Result<RunState> {
        Ok(planning::stored_outcome(&self.store, run)?.map_state(|s| s.to_json()))
    }

    /// Where any recorded run stands, replayed from the store (nothing runs): a workflow
    /// run, or a demonstration graph's ([`Records::demo_graph`]). A graph that cannot be
    /// rebuilt is an [`Error::Rebuild`] naming the run.
    pub fn replay(&self, run: &RunId) -> Result<RunState> {
        let Some(graph) = self.demo_graph(run)? else {
            return self.run_state(run).map_err(|e| rebuild(run, e));
        };
        let outcome = Engine::new(self.store.clone()).inspect(graph, run)?;
        Ok(outcome.map_state(|s| s.to_json()))
    }

    /// Whether `run` is one of the engine's demonstration graphs (`trellis demo`) rather
    /// than a workflow run.
    pub fn is_demo(&self, run: &RunId) -> Result<bool> {
        let (graph, _) = self.store.started(run)?;
        Ok(trellis_graph::demo::NAMES.contains(&graph.as_str()))
    }

    /// The graph of demonstration run `run`, rebuilt from the name and parameters its
    /// `runStarted` recorded; `None` for a workflow run.
    pub fn demo_graph(&self, run: &RunId) -> Result<Option<Arc<Graph>>> {
        let (graph, params) = self.store.started(run)?;
        if !trellis_graph::demo::NAMES.contains(&graph.as_str()) {
            return Ok(None);
        }
        let built = trellis_graph::demo::build(&graph, &params).map_err(|e| rebuild(run, e))?;
        Ok(Some(Arc::new(built)))
    }

    /// A workflow run's graph as it stands, replayed from the store (nothing runs): nodes,
    /// fan-out groups, what waits, the plan's routing and the task tree.
    pub fn run_graph(&self, run: &RunId) -> Result<RunGraph> {
        let state = self.run_state(run)?;
        let plan = self.run_plan(run).ok();
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
            task_tree: state.state.get(TASK_TREE).cloned(),
            state,
        })
    }

    /// The questions and reviews waiting for an answer in workflow run `run`.
    pub fn interrupts(&self, run: &RunId) -> Result<Vec<(NodeId, Interrupt)>> {
        Ok(self.run_state(run)?.waiting)
    }

    /// The plan a workflow run follows; an error while it plans.
    pub fn run_plan(&self, run: &RunId) -> Result<Plan> {
        Ok(Stage::read(&*self.store, run)?.into_plan(run)?)
    }

    /// A run's graph events from `from_seq` to `to_seq` (inclusive; `None`: to the end).
    pub fn run_events(
        &self,
        run: &RunId,
        from_seq: u64,
        to_seq: Option<u64>,
    ) -> Result<Vec<Event>> {
        Ok(self.store.events(run, from_seq, to_seq)?)
    }

    /// The points `run` can be forked or resumed from.
    pub fn checkpoints(&self, run: &RunId) -> Result<Vec<Checkpoint>> {
        Ok(self.store.checkpoints(run)?)
    }

    /// The stored events of `stream` after `since` (at most `limit`).
    pub fn stream_events(
        &self,
        stream: &StreamId,
        since: u64,
        limit: Option<usize>,
    ) -> Result<Vec<ServiceEvent>> {
        Ok(self.store.stream_events(stream, since, limit)?)
    }

    /// A run's stored streams, each in its own order: its graph log, then its agents'
    /// sessions, oldest first (what `trellis runs trace` maps to spans).
    pub fn run_streams(&self, run: &RunId) -> Result<Vec<Vec<ServiceEvent>>> {
        let mut streams = vec![self.stream_events(&StreamId::Run(run.clone()), 0, None)?];
        let mut sessions = self.sessions(&SessionFilter {
            run: Some(run.clone()),
            ..SessionFilter::default()
        })?;
        sessions.sort_by(|a, b| (a.created_ms, &a.id).cmp(&(b.created_ms, &b.id)));
        for s in sessions {
            streams.push(self.stream_events(&StreamId::Session(s.id), 0, None)?);
        }
        Ok(streams)
    }

    /// The last seq of `stream` (0 when it has no events).
    pub fn stream_head(&self, stream: &StreamId) -> Result<u64> {
        Ok(self.store.stream_last_seq(stream)?)
    }

    /// The run's artifacts, each JSON card also rendered as markdown.
    pub fn artifacts(&self, run: &RunId) -> Result<Vec<Artifact>> {
        let mut artifacts = self.store.artifacts(run)?;
        for a in &mut artifacts {
            a.rendered = rendered(&a.kind, &a.content);
        }
        Ok(artifacts)
    }

    /// The run's tool calls in the order they started, the user's hooks' runs among them
    /// (tool `hook:<event>`).
    pub fn tool_calls(
        &self,
        run: &RunId,
    ) -> Result<Vec<trellis_protocol::records::ToolCallRecord>> {
        Ok(trellis_store::UsageStore::tool_calls(&*self.store, run)?)
    }

    /// The run's model usage: in total, per stage and per agent.
    pub fn usage(&self, run: &RunId) -> Result<RunUsage> {
        Ok(self.store.run_usage(run)?)
    }

    /// The run's model calls in order.
    pub fn model_calls(&self, run: &RunId) -> Result<Vec<ModelCallRecord>> {
        Ok(self.store.model_calls(run)?)
    }

    /// The agent and channel sessions `filter` selects, newest first.
    pub fn sessions(&self, filter: &SessionFilter) -> Result<Vec<SessionRecord>> {
        Ok(self.store.sessions(filter)?)
    }

    /// Session `id`.
    pub fn session(&self, id: &SessionId) -> Result<SessionRecord> {
        Ok(self.store.session(id)?)
    }

    /// The turns of session `id`, in order.
    pub fn turns(&self, id: &SessionId) -> Result<Vec<TurnRecord>> {
        Ok(self.store.turns(id)?)
    }

    /// The change set of run `id_or_prefix` and its review state.
    pub fn change_set_record(&self, id_or_prefix: &str) -> Result<ChangeSetRecord> {
        Ok(self.store.change_set(id_or_prefix)?)
    }

    /// The change set of `run` as `git diff --stat` shows it (its branch against its base);
    /// `None` when the run has none or git cannot tell.
    pub fn change_set_stat(&self, run: &RunId) -> Option<String> {
        let rec = self.store.change_set(run.as_str()).ok()?;
        trellis_tools::git::Git::new(&rec.repo)
            .text(&["diff", "--stat", &rec.base_commit, &rec.branch])
            .ok()
    }

    /// The sessions front-end `client` recorded (`acp`), newest first.
    pub fn client_sessions(&self, client: &str) -> Result<Vec<ClientSession>> {
        Ok(self.store.client_sessions(client)?)
    }

    /// Client session `id`, if recorded.
    pub fn client_session(&self, id: &str) -> Result<Option<ClientSession>> {
        Ok(self.store.client_session(id)?)
    }

    /// The prompt turns of client session `id`, in order.
    pub fn client_turns(&self, id: &str) -> Result<Vec<ClientTurn>> {
        Ok(self.store.client_turns(id)?)
    }

    /// The tool knowledge graph the agents' calls taught the workspace, with the speculation
    /// threshold and outcomes (`trellis tools graph`, `GET /api/tools/graph`).
    pub fn tool_graph(&self) -> Result<ToolGraphView> {
        trellis_toolgraph::ToolGraph::workspace_view(&*self.store).map_err(Error::ToolGraph)
    }
}

fn rebuild(run: &RunId, e: impl Into<Error>) -> Error {
    Error::Rebuild {
        run: run.clone(),
        source: Box::new(e.into()),
    }
}

fn to_json(v: &impl serde::Serialize) -> Result<Value> {
    serde_json::to_value(v).map_err(Error::Encode)
}

/// A JSON card (scope card, research card, plan) as markdown; `None` for markdown artifacts
/// and kinds the artifacts module does not know (the review, the pulse summary).
fn rendered(kind: &str, content: &str) -> Option<String> {
    let valid = trellis_workflow::artifacts::validate(kind, content).ok()?;
    let md = valid.to_markdown();
    (md != content).then_some(md)
}
