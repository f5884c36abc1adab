//! `RunCore`: the complete state of one run, changed only by applying events.
//!
//! The live driver decides *what* happens and expresses it as events; [`RunCore::apply`] is the
//! only code that changes state. Replay after a crash, resume and fork feed the stored events
//! through the same function, so a replayed run is identical to the live one by construction.

mod apply;

use std::collections::BTreeMap;

use rustc_hash::FxHashMap;
use std::sync::Arc;

use serde_json::Value;
use trellis_protocol::{
    Command, Event, ForkRef, Interrupt, Message, NodeId, NodeState, RunId, RunStatus, TerminalKind,
};

use crate::handler::Resume;
use crate::spec::{Graph, NodeDef, NodeKind};
use crate::state::State;
use crate::{Error, Result};

/// Routing reason recorded when a failed activation has nowhere to go.
pub(crate) const NO_FAILURE_ROUTE: &str = "failure: no route";

/// The reason of the transition that starts a revision.
pub(crate) const REVISION_REASON: &str = "revision requested";

/// How the routing reason of a failure sent to `on_exhausted` begins (the engine wrote
/// "max_attempts (N) reached" before the rule counted failure routes, so old logs match too).
pub(crate) const MAX_ATTEMPTS_REACHED: &str = "max_attempts (";

/// Run-time record of one node (static or dynamic).
#[derive(Clone)]
pub(crate) struct NodeRt {
    pub id: NodeId,
    pub def: NodeDef,
    pub template: Option<String>,
    pub parent: Option<usize>,
    pub children: Vec<usize>,
    /// Siblings it waits for (`nodeAdded.after`), as ordinals.
    pub after: Vec<usize>,
    /// Added with dependencies and not activated since: it waits for them (not final for
    /// its collector, whatever the state of its previous activation).
    pub held: bool,
    pub input: Value,
    /// Latest activation number (0: never activated).
    pub attempt: u32,
    /// State of the latest activation.
    pub state: Option<NodeState>,
    /// The step the latest READY activation may run in.
    pub ready_step: u64,
    /// Routing hops from the entry to the latest activation: the step it would run in under
    /// lock-step (free-running's loop guard).
    pub depth: u64,
    /// Latest finished activation's record.
    pub failed: bool,
    pub result: Arc<Value>,
    pub error: Option<String>,
    pub pruned: bool,
    /// The latest activation failed and had nowhere to route (the run fails unless a later
    /// activation — a revision — supersedes it).
    pub unrouted: bool,
    /// Revisions applied to this node (`revise` commands that took effect).
    pub revisions: u32,
    /// Failed activations routed back into the graph (to a node that is not a terminal):
    /// what `max_attempts` bounds.
    pub failure_routes: u32,
    /// For terminals: the reason of the `max_attempts` exhaustion that routed here, as
    /// `node: reason` (`None` when the latest route here was an ordinary one).
    pub exhausted: Option<String>,
    pub inbox: Vec<Message>,
    pub interrupt: Option<Interrupt>,
    pub scratch: Value,
    pub resume: Option<Resume>,
    /// For spawners: child ids of the latest fan-out, in spawn order, and its generation.
    pub group: Vec<NodeId>,
    pub group_gen: u64,
    /// For collectors: the spawner generation last collected.
    pub collected_gen: u64,
}

impl NodeRt {
    fn new(id: NodeId, def: NodeDef) -> Self {
        Self {
            id,
            def,
            template: None,
            parent: None,
            children: Vec::new(),
            after: Vec::new(),
            held: false,
            input: Value::Null,
            attempt: 0,
            state: None,
            ready_step: 0,
            depth: 0,
            failed: false,
            result: Arc::default(),
            error: None,
            pruned: false,
            unrouted: false,
            revisions: 0,
            failure_routes: 0,
            exhausted: None,
            inbox: Vec::new(),
            interrupt: None,
            scratch: Value::Null,
            resume: None,
            group: Vec::new(),
            group_gen: 0,
            collected_gen: 0,
        }
    }

    /// Whether the latest activation is READY, RUNNING or WAITING_INPUT.
    pub fn is_active(&self) -> bool {
        matches!(
            self.state,
            Some(NodeState::Ready | NodeState::Running | NodeState::WaitingInput)
        )
    }
}

/// A child to spawn: (key, template, input).
pub(crate) type Spawn = (String, String, Value);

/// Spawn key → keys of the siblings that child waits for.
pub(crate) type SpawnAfter = BTreeMap<String, Vec<String>>;

/// The dependencies of an output's spawns, keyed by spawn key (as recorded in `nodeOutput`).
pub(super) fn spawn_after(spawns: &[Spawn], after: &[Vec<String>]) -> SpawnAfter {
    let mut map = BTreeMap::new();
    for ((key, _, _), after) in spawns.iter().zip(after) {
        if !after.is_empty() {
            map.entry(key.clone()).or_insert_with(|| after.clone());
        }
    }
    map
}

/// Writes, counters, spawns and revisions of a finished activation, applied at the end of its
/// step.
#[derive(Clone, Default)]
pub(crate) struct Pending {
    pub writes: Vec<(String, Arc<Value>)>,
    pub counters: Vec<(String, i64)>,
    pub spawns: Arc<[Spawn]>,
    pub spawn_after: SpawnAfter,
    pub revise: Vec<NodeId>,
}

/// A fan-out applied by a `stepCompleted`, for the live driver to create the children.
pub(crate) struct Spawned {
    pub spawner: usize,
    pub spawns: Arc<[Spawn]>,
    pub after: SpawnAfter,
}

/// Ordinals of the collector nodes among `nodes`, in order.
fn collectors(nodes: &[NodeRt]) -> Vec<usize> {
    nodes
        .iter()
        .enumerate()
        .filter(|(_, n)| matches!(n.def.kind, NodeKind::Collector { .. }))
        .map(|(o, _)| o)
        .collect()
}

/// The state of one run.
pub(crate) struct RunCore {
    pub run: RunId,
    pub graph: Arc<Graph>,
    pub nodes: Vec<NodeRt>,
    /// Ordinals of the graph's collector nodes, in declaration order.
    pub collectors: Vec<usize>,
    pub by_id: FxHashMap<NodeId, usize>,
    /// Shared with the activations of the open step (copy-on-write: `Arc::make_mut`).
    pub state: Arc<State>,
    pub counters: Arc<BTreeMap<String, i64>>,
    pub attempts: Arc<crate::handler::Attempts>,
    pub extra_edges: FxHashMap<usize, Vec<NodeId>>,
    pub status: RunStatus,
    pub terminal: Option<NodeId>,
    pub error: Option<String>,
    /// Last started step.
    pub step: u64,
    pub step_open: bool,
    /// Depth given to activations created now: one more than the activation being routed
    /// from (or spawning), else than the deepest one that finished in the last step.
    pub route_depth: u64,
    /// Activations that finished (COMPLETED/FAILED) in the open step, for routing.
    pub finished: Vec<usize>,
    /// Nodes that became READY (possibly stale: check the state), so a step does not scan
    /// every node.
    pub ready: Vec<usize>,
    pub pending: BTreeMap<usize, Pending>,
    /// Spawns applied by the last `stepCompleted` (the live driver creates the children).
    pub spawned: Vec<Spawned>,
    /// Revisions requested by handlers whose outputs the last `stepCompleted` applied:
    /// (requesting node, dependencies to run again).
    pub revised: Vec<(usize, Vec<NodeId>)>,
    /// Whether some node was added with dependencies (else the dependency pass is skipped).
    pub has_deps: bool,
    pub commands: FxHashMap<u64, Command>,
    pub next_command: u64,
    pub fork: Option<ForkRef>,
    pub created_ts: i64,
    pub last_seq: u64,
    /// The graph the live driver is about to continue with: its `runContinued` takes it
    /// (replay builds the run with that graph from the start).
    pub next_graph: Option<Arc<Graph>>,
}

impl RunCore {
    /// A run of `graph` with no events applied yet.
    pub fn new(run: RunId, graph: Arc<Graph>) -> Self {
        let mut nodes = Vec::with_capacity(graph.nodes.len());
        let mut by_id = FxHashMap::with_capacity_and_hasher(graph.nodes.len(), Default::default());
        for (i, (id, def)) in graph.nodes.iter().enumerate() {
            nodes.push(NodeRt::new(id.clone(), def.clone()));
            by_id.insert(id.clone(), i);
        }
        let collectors = collectors(&nodes);
        Self {
            run,
            graph,
            nodes,
            collectors,
            by_id,
            state: Arc::default(),
            counters: Arc::default(),
            attempts: Arc::default(),
            extra_edges: FxHashMap::default(),
            status: RunStatus::Running,
            terminal: None,
            error: None,
            step: 0,
            step_open: false,
            route_depth: 1,
            finished: Vec::new(),
            ready: Vec::new(),
            pending: BTreeMap::new(),
            spawned: Vec::new(),
            revised: Vec::new(),
            has_deps: false,
            commands: FxHashMap::default(),
            next_command: 1,
            fork: None,
            created_ts: 0,
            last_seq: 0,
            next_graph: None,
        }
    }

    /// Takes `next` as the run's graph (a live run continuing): the nodes it adds after the
    /// current graph's join the run, with no activation yet.
    pub(super) fn take_graph(&mut self, next: Arc<Graph>) -> Result<()> {
        let statics = self.graph.nodes.len();
        let same = next
            .prelude
            .as_ref()
            .is_some_and(|p| p.fingerprint == self.graph.fingerprint && p.nodes == statics);
        if !same {
            let of = next
                .prelude
                .as_ref()
                .map_or("no graph".to_owned(), |p| format!("graph `{}`", p.name));
            return Err(self.mismatch(format!(
                "graph `{}` continues {of}, not this run's graph `{}`",
                next.name, self.graph.name
            )));
        }
        if self.nodes.len() != statics {
            return Err(self.mismatch(format!(
                "graph `{}` added nodes at run time; a graph that continues into another must not",
                self.graph.name
            )));
        }
        for (id, def) in next.nodes.iter().skip(statics) {
            self.by_id.insert(id.clone(), self.nodes.len());
            self.nodes.push(NodeRt::new(id.clone(), def.clone()));
        }
        self.collectors = collectors(&self.nodes);
        self.graph = next;
        Ok(())
    }

    /// The node with this id.
    pub fn ordinal(&self, id: &NodeId) -> Option<usize> {
        self.by_id.get(id).copied()
    }

    pub(super) fn node_of(&self, id: &NodeId) -> Result<usize> {
        self.ordinal(id)
            .ok_or_else(|| self.mismatch(format!("event names unknown node `{id}`")))
    }

    fn mismatch(&self, message: String) -> Error {
        Error::Replay {
            run: self.run.to_string(),
            message,
        }
    }

    /// Activations left RUNNING, in node order.
    pub fn running(&self) -> Vec<usize> {
        (0..self.nodes.len())
            .filter(|&o| self.nodes[o].state == Some(NodeState::Running))
            .collect()
    }

    /// Whether any activation is READY (drops stale entries of the ready list).
    pub fn has_ready(&mut self) -> bool {
        let nodes = &self.nodes;
        self.ready
            .retain(|&o| nodes[o].state == Some(NodeState::Ready));
        !self.ready.is_empty()
    }

    /// Moves the READY activations that may run in `step` into `queue`, in node order.
    pub fn take_ready(&mut self, step: u64, queue: &mut std::collections::VecDeque<usize>) {
        self.ready.sort_unstable();
        self.ready.dedup();
        let nodes = &self.nodes;
        self.ready.retain(|&o| {
            let n = &nodes[o];
            if n.state != Some(NodeState::Ready) {
                return false;
            }
            if n.ready_step <= step {
                queue.push_back(o);
                return false;
            }
            true
        });
    }

    /// Moves up to `n` READY activations into `queue`, in node order, leaving the others
    /// READY (free-running: a slot freed by a finishing handler takes the next one).
    pub fn take_ready_upto(&mut self, n: usize, queue: &mut std::collections::VecDeque<usize>) {
        self.ready.sort_unstable();
        self.ready.dedup();
        let nodes = &self.nodes;
        let mut left = n;
        self.ready.retain(|&o| {
            if nodes[o].state != Some(NodeState::Ready) {
                return false;
            }
            if left > 0 {
                left -= 1;
                queue.push_back(o);
                return false;
            }
            true
        });
    }

    /// Why the run fails when nothing is left to run: a node whose latest activation failed
    /// with nowhere to route.
    pub fn unrouted_failure(&self) -> Option<String> {
        self.nodes
            .iter()
            .find(|n| n.unrouted)
            .map(|n| format!("node {} failed and has no failure route", n.id))
    }

    /// Activations waiting for input, with their questions.
    pub fn waiting(&self) -> Vec<(NodeId, Interrupt)> {
        self.nodes
            .iter()
            .filter(|n| n.state == Some(NodeState::WaitingInput))
            .filter_map(|n| n.interrupt.clone().map(|i| (n.id.clone(), i)))
            .collect()
    }

    /// Whether `id` is a terminal node (an unknown id is not).
    pub fn is_terminal(&self, id: &NodeId) -> bool {
        self.ordinal(id)
            .is_some_and(|o| matches!(self.nodes[o].def.kind, NodeKind::Terminal(_)))
    }

    /// The terminal kind of a node, if it is a terminal.
    pub fn terminal_kind(&self, o: usize) -> Option<TerminalKind> {
        match self.nodes[o].def.kind {
            NodeKind::Terminal(k) => Some(k),
            _ => None,
        }
    }

    /// Rebuilds a run from its log segments (ancestors first for forks).
    pub fn replay(graph: Arc<Graph>, run: RunId, segments: &[Vec<Event>]) -> Result<Self> {
        let mut core = RunCore::new(run, graph);
        for events in segments {
            for e in events {
                core.apply(e)?;
            }
        }
        Ok(core)
    }
}
