//! Graph definitions: nodes, templates, edges, routers, channels, limits.

use std::collections::{BTreeMap, BTreeSet};

use rustc_hash::FxHashMap;
use std::fmt;
use std::sync::Arc;

use serde::{Deserialize, Serialize};
use serde_json::Value;
use trellis_protocol::{NodeId, TerminalKind};

use crate::handler::{NodeHandler, RouteContext};
use crate::policy::FailurePolicy;
use crate::state::Reducer;
use crate::{Error, Result};

/// When the successors of a finished activation may start.
///
/// Both orders are recorded in the event log, so replay, resume and fork are exact either way;
/// a run may even be resumed under the other mode (the mode is not part of the fingerprint).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Scheduling {
    /// Lock-step supersteps (Pregel/LangGraph): every READY activation of a step runs, and
    /// the step's writes are applied in node declaration order once all of them finished. The
    /// final state does not depend on which handler finished first; a slow node delays the
    /// successors of its step-mates.
    #[default]
    Steps,
    /// Free-running: whenever handlers finish, their writes are applied (in node order among
    /// those that finished together) and their successors start, without waiting for
    /// unrelated activations still running. Every such batch is a step of its own in the log
    /// (a checkpoint); writes merge in completion order, so the final state may depend on
    /// timing — the log records which order happened.
    Free,
}

impl Scheduling {
    /// `steps` or `free`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Steps => "steps",
            Self::Free => "free",
        }
    }
}

/// Decides where to go after a node, from its recorded outcome, the run state and the
/// counters. Routers must be deterministic: they run again on replay-free resume only through
/// recorded events, but forks and tests rely on them giving the same answer for the same input.
pub trait Router: Send + Sync + 'static {
    /// The targets to activate (each must be one of the edge's declared targets).
    fn route(&self, ctx: &RouteContext<'_>) -> std::result::Result<Vec<NodeId>, String>;
}

impl<F> Router for F
where
    F: Fn(&RouteContext<'_>) -> std::result::Result<Vec<NodeId>, String> + Send + Sync + 'static,
{
    fn route(&self, ctx: &RouteContext<'_>) -> std::result::Result<Vec<NodeId>, String> {
        self(ctx)
    }
}

/// An outgoing edge set of a node.
#[derive(Clone)]
pub enum Edge {
    /// Always go to these nodes, whatever the outcome.
    Always(Vec<NodeId>),
    /// Binary routing: one target list on success, another on failure.
    Outcome {
        /// On success.
        success: Vec<NodeId>,
        /// On failure.
        failure: Vec<NodeId>,
    },
    /// A router picks among declared targets.
    Conditional {
        /// The decision.
        router: Arc<dyn Router>,
        /// Every node the router may return.
        targets: Vec<NodeId>,
    },
}

impl Edge {
    fn targets(&self) -> Vec<&NodeId> {
        match self {
            Edge::Always(t) => t.iter().collect(),
            Edge::Outcome { success, failure } => success.iter().chain(failure).collect(),
            Edge::Conditional { targets, .. } => targets.iter().collect(),
        }
    }

    fn describe(&self) -> String {
        let names = |v: &[NodeId]| v.iter().map(NodeId::as_str).collect::<Vec<_>>().join(",");
        match self {
            Edge::Always(t) => format!("always[{}]", names(t)),
            Edge::Outcome { success, failure } => {
                format!("outcome[ok:{};fail:{}]", names(success), names(failure))
            }
            Edge::Conditional { targets, .. } => format!("router[{}]", names(targets)),
        }
    }
}

impl fmt::Debug for Edge {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.describe())
    }
}

/// What a node is.
#[derive(Clone, Debug, PartialEq)]
pub enum NodeKind {
    /// Runs its handler.
    Task,
    /// Fires once every non-pruned child spawned by `of` (in its latest fan-out) is final, and
    /// aggregates their outcomes with `policy`.
    Collector {
        /// The spawning node.
        of: NodeId,
        /// Failure aggregation.
        policy: FailurePolicy,
    },
    /// Ends the run when it completes.
    Terminal(TerminalKind),
}

/// A node (or template) definition.
#[derive(Clone)]
pub struct NodeDef {
    pub(crate) handler: Option<Arc<dyn NodeHandler>>,
    pub(crate) kind: NodeKind,
    pub(crate) max_attempts: Option<u32>,
    pub(crate) on_exhausted: Option<NodeId>,
    pub(crate) skip: bool,
}

impl NodeDef {
    /// The node's kind.
    pub fn kind(&self) -> &NodeKind {
        &self.kind
    }
}

/// Options of a node declared with [`GraphBuilder::node`] and friends.
pub struct NodeOptions<'a> {
    def: &'a mut NodeDef,
}

impl NodeOptions<'_> {
    /// Bounds the node's failure routes back into the graph (a stage's `max_attempts`): a
    /// failed activation is routed as its edge says, and a route to terminals only is always
    /// taken; a route to any other node (a retry, an earlier node, an enrichment step) is taken
    /// at most `n` times per run, after which such failures go to `on_exhausted` instead.
    /// Also bounds the node's revisions to `n`.
    pub fn max_attempts(self, n: u32, on_exhausted: impl Into<NodeId>) -> Self {
        self.def.max_attempts = Some(n.max(1));
        self.def.on_exhausted = Some(on_exhausted.into());
        self
    }

    /// A planned-but-skipped node: when reached it goes READY → SKIPPED and routing continues
    /// as after a success with no output.
    pub fn skipped(self) -> Self {
        self.def.skip = true;
        self
    }
}

/// What a run of a graph continues with once nothing is left to run in it (a workflow run's
/// planning graph names the planned workflow's graph): see [`GraphBuilder::then`].
pub trait Continuation: Send + Sync {
    /// Called when the run would succeed, with where it stands. Returns the graph the run
    /// continues with — built with [`Graph::after`] this graph, so that it holds every node
    /// so far — and the channel values written as it starts; `None` lets the run succeed.
    /// An error fails the run with it.
    fn next(
        &self,
        at: crate::outcome::RunOutcome,
    ) -> futures::future::BoxFuture<'static, std::result::Result<Option<Next>, String>>;
}

/// What a [`Continuation`] names: the graph the run continues with and the channel values
/// written as it starts.
pub type Next = (Arc<Graph>, Value);

/// The graph a graph built with [`Graph::after`] continues.
#[derive(Clone, Debug)]
pub(crate) struct Prelude {
    pub name: String,
    pub fingerprint: String,
    /// Its static nodes: the first ones of the continuing graph, in the same order.
    pub nodes: usize,
}

/// A compiled, validated graph. Cheap to share (`Arc<Graph>`), reusable across runs.
pub struct Graph {
    pub(crate) name: String,
    pub(crate) params: Value,
    pub(crate) nodes: Vec<(NodeId, NodeDef)>,
    pub(crate) index: FxHashMap<NodeId, usize>,
    pub(crate) templates: BTreeMap<String, NodeDef>,
    pub(crate) edges: FxHashMap<NodeId, Edge>,
    pub(crate) entry: NodeId,
    pub(crate) channels: BTreeMap<String, Reducer>,
    pub(crate) collectors: FxHashMap<NodeId, Vec<NodeId>>,
    pub(crate) max_steps: u64,
    pub(crate) concurrency: usize,
    pub(crate) scheduling: Scheduling,
    pub(crate) fingerprint: String,
    /// The graph this one continues (its runs started with that one).
    pub(crate) prelude: Option<Prelude>,
    /// What a run continues with once nothing is left to run.
    pub(crate) continuation: Option<Arc<dyn Continuation>>,
}

impl Graph {
    /// This graph continuing `prelude`: `prelude`'s nodes come first, in their order, with
    /// their definitions and no edges (they ran before the run continued), then this graph's
    /// own. A run that started with `prelude` and continued (`runContinued`) replays with it.
    /// Fails when a node id is in both, or `prelude` continues another graph itself.
    pub fn after(self, prelude: &Graph) -> Result<Graph> {
        if prelude.prelude.is_some() {
            return Err(Error::InvalidGraph {
                graph: self.name,
                problems: format!(
                    "graph `{}` continues another graph; a graph continues one that does not",
                    prelude.name
                ),
            });
        }
        let clash: Vec<&str> = prelude
            .nodes
            .iter()
            .filter(|(id, _)| self.index.contains_key(id))
            .map(|(id, _)| id.as_str())
            .collect();
        if !clash.is_empty() {
            return Err(Error::InvalidGraph {
                graph: self.name,
                problems: format!(
                    "node(s) {} are also nodes of graph `{}`, which this one continues",
                    clash.join(", "),
                    prelude.name
                ),
            });
        }
        let mut nodes = prelude.nodes.clone();
        nodes.extend(self.nodes);
        let index = nodes
            .iter()
            .enumerate()
            .map(|(i, (id, _))| (id.clone(), i))
            .collect();
        let fingerprint = fingerprint(
            &format!("{} after {}", self.name, prelude.fingerprint),
            &nodes,
            &self.templates,
            &self.edges,
            &self.entry,
            &self.channels,
        );
        Ok(Graph {
            name: self.name,
            params: self.params,
            nodes,
            index,
            templates: self.templates,
            edges: self.edges,
            entry: self.entry,
            channels: self.channels,
            collectors: self.collectors,
            max_steps: self.max_steps,
            concurrency: self.concurrency,
            scheduling: self.scheduling,
            fingerprint,
            prelude: Some(Prelude {
                name: prelude.name.clone(),
                fingerprint: prelude.fingerprint.clone(),
                nodes: prelude.nodes.len(),
            }),
            continuation: self.continuation,
        })
    }

    /// Whether a run recorded with fingerprint `recorded` in its `runStarted` replays with
    /// this graph: its own, or that of the graph it continues.
    pub(crate) fn started_as(&self, recorded: &str) -> bool {
        recorded == self.fingerprint
            || self
                .prelude
                .as_ref()
                .is_some_and(|p| p.fingerprint == recorded)
    }

    /// The graph's name (recorded in `runStarted`, used to find it again on resume).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The parameters it was built with.
    pub fn params(&self) -> &Value {
        &self.params
    }

    /// Structural fingerprint (nodes, kinds, edges, templates, channels, reducers).
    pub fn fingerprint(&self) -> &str {
        &self.fingerprint
    }

    /// The entry node.
    pub fn entry(&self) -> &NodeId {
        &self.entry
    }

    /// Static nodes in declaration order.
    pub fn node_ids(&self) -> impl Iterator<Item = &NodeId> {
        self.nodes.iter().map(|(id, _)| id)
    }

    /// A static node's definition.
    pub fn node(&self, id: &NodeId) -> Option<&NodeDef> {
        self.index.get(id).map(|&i| &self.nodes[i].1)
    }

    /// A template's definition.
    pub fn template(&self, name: &str) -> Option<&NodeDef> {
        self.templates.get(name)
    }

    /// The outgoing edge of a static node.
    pub fn edge(&self, id: &NodeId) -> Option<&Edge> {
        self.edges.get(id)
    }

    /// The reducer of a channel.
    pub fn channel(&self, name: &str) -> Option<&Reducer> {
        self.channels.get(name)
    }

    /// Declared channel names.
    pub fn channel_names(&self) -> impl Iterator<Item = &str> {
        self.channels.keys().map(String::as_str)
    }

    /// The step limit.
    pub fn max_steps(&self) -> u64 {
        self.max_steps
    }

    /// How many handlers of one run may execute at once.
    pub fn concurrency(&self) -> usize {
        self.concurrency
    }

    /// Lock-step or free-running.
    pub fn scheduling(&self) -> Scheduling {
        self.scheduling
    }
}

impl fmt::Debug for Graph {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Graph")
            .field("name", &self.name)
            .field(
                "nodes",
                &self.nodes.iter().map(|(id, _)| id).collect::<Vec<_>>(),
            )
            .field("edges", &self.edges)
            .field("entry", &self.entry)
            .finish()
    }
}

/// Builds a [`Graph`]. Declaration order is significant: it is the order in which writes of
/// nodes finishing in the same step are merged, which makes state deterministic.
pub struct GraphBuilder {
    name: String,
    params: Value,
    nodes: Vec<(NodeId, NodeDef)>,
    templates: BTreeMap<String, NodeDef>,
    edges: Vec<(NodeId, Edge)>,
    entry: Option<NodeId>,
    channels: BTreeMap<String, Reducer>,
    max_steps: u64,
    concurrency: usize,
    scheduling: Scheduling,
    continuation: Option<Arc<dyn Continuation>>,
}

/// Default loop guard: steps per run.
pub const DEFAULT_MAX_STEPS: u64 = 1000;
/// Default number of handlers of one run executing at once.
pub const DEFAULT_CONCURRENCY: usize = 16;

impl GraphBuilder {
    /// Starts a graph called `name`.
    pub fn new(name: impl Into<String>) -> Self {
        Self {
            name: name.into(),
            params: Value::Null,
            nodes: Vec::new(),
            templates: BTreeMap::new(),
            edges: Vec::new(),
            entry: None,
            channels: BTreeMap::new(),
            max_steps: DEFAULT_MAX_STEPS,
            concurrency: DEFAULT_CONCURRENCY,
            scheduling: Scheduling::Steps,
            continuation: None,
        }
    }

    /// What a run continues with once nothing is left to run in this graph (see
    /// [`Continuation`]); the continuing graph is built with [`Graph::after`] this one.
    pub fn then(mut self, continuation: Arc<dyn Continuation>) -> Self {
        self.continuation = Some(continuation);
        self
    }

    /// Parameters recorded with each run (a registry rebuilds the graph from name + params).
    pub fn params(mut self, params: Value) -> Self {
        self.params = params;
        self
    }

    /// Declares a state channel with its reducer.
    pub fn channel(mut self, name: impl Into<String>, reducer: Reducer) -> Self {
        self.channels.insert(name.into(), reducer);
        self
    }

    /// The loop guard: the run fails when it would start step `n + 1` (free-running: an
    /// activation more than `n` routing hops from the entry, the step it would have run in
    /// under lock-step).
    pub fn max_steps(mut self, n: u64) -> Self {
        self.max_steps = n.max(1);
        self
    }

    /// How many handlers of one run may execute at once (at least 1).
    pub fn concurrency(mut self, n: usize) -> Self {
        self.concurrency = n.max(1);
        self
    }

    /// Lock-step (the default) or free-running scheduling (see [`Scheduling`]).
    pub fn scheduling(mut self, scheduling: Scheduling) -> Self {
        self.scheduling = scheduling;
        self
    }

    /// The entry node.
    pub fn entry(mut self, node: impl Into<NodeId>) -> Self {
        self.entry = Some(node.into());
        self
    }

    fn push(&mut self, id: NodeId, def: NodeDef) -> NodeOptions<'_> {
        self.nodes.push((id, def));
        let last = self.nodes.len() - 1;
        NodeOptions {
            def: &mut self.nodes[last].1,
        }
    }

    /// Adds a task node.
    pub fn node(mut self, id: impl Into<NodeId>, handler: impl NodeHandler) -> Self {
        self.push(id.into(), task(Some(Arc::new(handler))));
        self
    }

    /// Adds a task node and configures it.
    pub fn node_with(
        mut self,
        id: impl Into<NodeId>,
        handler: impl NodeHandler,
        configure: impl FnOnce(NodeOptions<'_>) -> NodeOptions<'_>,
    ) -> Self {
        let opts = self.push(id.into(), task(Some(Arc::new(handler))));
        configure(opts);
        self
    }

    /// Adds a collector of the children spawned by `of`. Without a handler, the collector
    /// completes or fails with the policy's verdict and records the aggregate as its result.
    pub fn collector(
        mut self,
        id: impl Into<NodeId>,
        of: impl Into<NodeId>,
        policy: FailurePolicy,
        handler: Option<Arc<dyn NodeHandler>>,
    ) -> Self {
        let def = NodeDef {
            handler,
            kind: NodeKind::Collector {
                of: of.into(),
                policy,
            },
            max_attempts: None,
            on_exhausted: None,
            skip: false,
        };
        self.push(id.into(), def);
        self
    }

    /// Adds a terminal node (`DONE`, `ABORT` or user-named). An optional handler runs first
    /// (it may write final state).
    pub fn terminal(
        mut self,
        id: impl Into<NodeId>,
        kind: TerminalKind,
        handler: Option<Arc<dyn NodeHandler>>,
    ) -> Self {
        let def = NodeDef {
            handler,
            kind: NodeKind::Terminal(kind),
            max_attempts: None,
            on_exhausted: None,
            skip: false,
        };
        self.push(id.into(), def);
        self
    }

    /// Registers a template: a handler that nodes spawned at run time (fan-out) or injected
    /// by a command are instances of.
    pub fn template(mut self, name: impl Into<String>, handler: impl NodeHandler) -> Self {
        self.templates
            .insert(name.into(), task(Some(Arc::new(handler))));
        self
    }

    /// `from` always continues to `to`.
    pub fn edge(mut self, from: impl Into<NodeId>, to: impl Into<NodeId>) -> Self {
        let from = from.into();
        let to = to.into();
        if let Some((_, Edge::Always(targets))) = self.edges.iter_mut().find(|(f, _)| *f == from) {
            targets.push(to);
        } else {
            self.edges.push((from, Edge::Always(vec![to])));
        }
        self
    }

    /// Binary routing on the outcome of `from`.
    pub fn outcome_edge(
        mut self,
        from: impl Into<NodeId>,
        on_success: impl Into<NodeId>,
        on_failure: impl Into<NodeId>,
    ) -> Self {
        self.edges.push((
            from.into(),
            Edge::Outcome {
                success: vec![on_success.into()],
                failure: vec![on_failure.into()],
            },
        ));
        self
    }

    /// A conditional edge: `router` picks among `targets`.
    pub fn conditional_edge<I, T>(
        mut self,
        from: impl Into<NodeId>,
        targets: I,
        router: impl Router,
    ) -> Self
    where
        I: IntoIterator<Item = T>,
        T: Into<NodeId>,
    {
        self.edges.push((
            from.into(),
            Edge::Conditional {
                router: Arc::new(router),
                targets: targets.into_iter().map(Into::into).collect(),
            },
        ));
        self
    }

    /// Validates and compiles the graph. Every problem is reported at once.
    pub fn build(self) -> Result<Graph> {
        let mut problems = Vec::new();
        let mut index = FxHashMap::default();
        for (i, (id, _)) in self.nodes.iter().enumerate() {
            if id.as_str().is_empty() || id.as_str().contains('/') {
                problems.push(format!(
                    "node name `{id}` must be non-empty and must not contain `/`"
                ));
            }
            if index.insert(id.clone(), i).is_some() {
                problems.push(format!("node `{id}` is declared twice"));
            }
        }
        let known = |id: &NodeId| index.contains_key(id);
        let suggest = |id: &NodeId| -> String {
            nearest(id.as_str(), index.keys().map(NodeId::as_str))
                .map(|n| format!(" (did you mean `{n}`?)"))
                .unwrap_or_default()
        };
        let entry = match &self.entry {
            Some(e) if known(e) => Some(e.clone()),
            Some(e) => {
                problems.push(format!("entry node `{e}` is not declared{}", suggest(e)));
                None
            }
            None => {
                problems.push("no entry node: call GraphBuilder::entry".into());
                None
            }
        };
        let mut edges = FxHashMap::default();
        for (from, edge) in self.edges {
            if !known(&from) {
                problems.push(format!(
                    "edge from undeclared node `{from}`{}",
                    suggest(&from)
                ));
            }
            for t in edge.targets() {
                if !known(t) {
                    problems.push(format!(
                        "edge {from} → `{t}`: target is not declared{}",
                        suggest(t)
                    ));
                }
            }
            if edges.insert(from.clone(), edge).is_some() {
                problems.push(format!(
                    "node `{from}` has two outgoing edge sets; use one conditional edge, or several `edge` calls for fan-out"
                ));
            }
        }
        let mut collectors: FxHashMap<NodeId, Vec<NodeId>> = FxHashMap::default();
        for (id, def) in &self.nodes {
            if let Some(t) = &def.on_exhausted
                && !known(t)
            {
                problems.push(format!(
                    "node `{id}`: max_attempts failure target `{t}` is not declared{}",
                    suggest(t)
                ));
            }
            match &def.kind {
                NodeKind::Collector { of, .. } => {
                    if !known(of) {
                        problems.push(format!(
                            "collector `{id}` collects from undeclared node `{of}`{}",
                            suggest(of)
                        ));
                    }
                    collectors.entry(of.clone()).or_default().push(id.clone());
                }
                NodeKind::Terminal(_) => {
                    if edges.contains_key(id) {
                        problems.push(format!("terminal node `{id}` must not have outgoing edges"));
                    }
                }
                NodeKind::Task => {}
            }
        }
        if !problems.is_empty() {
            return Err(Error::InvalidGraph {
                graph: self.name,
                problems: problems.join("\n  "),
            });
        }
        let Some(entry) = entry else {
            return Err(Error::InvalidGraph {
                graph: self.name,
                problems: "no entry".into(),
            });
        };
        let fingerprint = fingerprint(
            &self.name,
            &self.nodes,
            &self.templates,
            &edges,
            &entry,
            &self.channels,
        );
        Ok(Graph {
            name: self.name,
            params: self.params,
            nodes: self.nodes,
            index,
            templates: self.templates,
            edges,
            entry,
            channels: self.channels,
            collectors,
            max_steps: self.max_steps,
            concurrency: self.concurrency,
            scheduling: self.scheduling,
            fingerprint,
            prelude: None,
            continuation: self.continuation,
        })
    }
}

fn task(handler: Option<Arc<dyn NodeHandler>>) -> NodeDef {
    NodeDef {
        handler,
        kind: NodeKind::Task,
        max_attempts: None,
        on_exhausted: None,
        skip: false,
    }
}

/// FNV-1a over a canonical description: stable across builds and platforms.
fn fingerprint(
    name: &str,
    nodes: &[(NodeId, NodeDef)],
    templates: &BTreeMap<String, NodeDef>,
    edges: &FxHashMap<NodeId, Edge>,
    entry: &NodeId,
    channels: &BTreeMap<String, Reducer>,
) -> String {
    let mut text = format!("graph {name}\nentry {entry}\n");
    let describe = |def: &NodeDef| {
        let kind = match &def.kind {
            NodeKind::Task => "task".to_string(),
            NodeKind::Collector { of, policy } => format!("collector({of},{})", policy.name()),
            NodeKind::Terminal(k) => format!("terminal({k:?})"),
        };
        format!(
            "{kind} max={:?} exhausted={:?} skip={}",
            def.max_attempts, def.on_exhausted, def.skip
        )
    };
    for (id, def) in nodes {
        text.push_str(&format!("node {id} {}\n", describe(def)));
    }
    for (name, def) in templates {
        text.push_str(&format!("template {name} {}\n", describe(def)));
    }
    let sorted: BTreeSet<String> = edges
        .iter()
        .map(|(f, e)| format!("edge {f} {}", e.describe()))
        .collect();
    for e in sorted {
        text.push_str(&e);
        text.push('\n');
    }
    for (c, r) in channels {
        text.push_str(&format!("channel {c} {}\n", r.name()));
    }
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in text.bytes() {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    format!("{h:016x}")
}

/// The candidate closest to `name` by edit distance, if reasonably close.
pub fn nearest<'a>(name: &str, candidates: impl Iterator<Item = &'a str>) -> Option<&'a str> {
    candidates
        .map(|c| (levenshtein(name, c), c))
        .filter(|(d, c)| *d <= (c.len().max(name.len()) / 3).max(2))
        .min()
        .map(|(_, c)| c)
}

fn levenshtein(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut cur = vec![i + 1; b.len() + 1];
        for (j, cb) in b.iter().enumerate() {
            cur[j + 1] = (prev[j] + usize::from(ca != *cb))
                .min(prev[j + 1] + 1)
                .min(cur[j] + 1);
        }
        prev = cur;
    }
    prev[b.len()]
}
