//! The one mapping from Trellis's events to spans, for a stored run (`trellis runs trace`)
//! and for the live broadcast alike: [`Mapper`] is fed [`ServiceEvent`]s one at a time, in
//! each stream's order, and hands back the spans that ended.
//!
//! | span | opens at | ends at | parent |
//! |---|---|---|---|
//! | `invoke_workflow {graph}` | `runStarted` | a final `runStatusChanged` | — (the trace's root) |
//! | `node {id}` | an activation's `nodeTransition` to RUNNING | to COMPLETED, FAILED, PRUNED, SKIPPED | the run |
//! | `invoke_agent {role}` | `promptSet` (a channel: `userMessage`) | `sessionCompleted`, `sessionError` | the node activation (a channel: none) |
//! | `chat {model}` | `turnStarted` | `turnCompleted`, `turnFailed` | the agent |
//! | `execute_tool {name}` | `toolStarted` | `toolCompleted` | the agent |
//!
//! Span ids are derived from what the span is (run, node and attempt, session and turn, tool
//! call id) and a run's trace id is its id, so parents never depend on the order in which
//! streams interleave, and a run resumed by another process, or mapped again later, gives
//! the same ids. Content — prompts, answers, tool arguments and results, questions — is
//! written only with [`Options::capture_content`].

mod calls;
mod session;

use std::collections::{HashMap, VecDeque};

use rustc_hash::FxHashMap;
use trellis_protocol::records::ModelCallRecord;
use trellis_protocol::{
    EventKind, NodeId, NodeState, RunId, RunStatus, ServiceEvent, ServiceEventBody, SessionId,
    StreamId, WorkspaceEvent,
};

use crate::semconv::{self, op, trellis};
use crate::span::{Attributes, Span, SpanEvent, SpanId, SpanKind, Status, TraceId, Value};
use calls::ModelCalls;
use session::SessionMeta;

/// What the mapping writes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Options {
    /// Write prompts, answers, tool arguments and results, and questions (`[telemetry]
    /// capture_content`; off by default: they may hold code and secrets).
    pub capture_content: bool,
}

/// An open span's key: its trace and id (ids are derived from what the span is, so an
/// event finds its span without any id string being copied).
type Key = (TraceId, SpanId);

/// Maps events to spans (see the module docs).
///
/// What it keeps of a run that ended (its nodes' templates, its sessions' roles) is
/// forgotten 256 run ends later, so a live exporter's memory stays bounded.
#[derive(Debug, Default)]
pub struct Mapper {
    options: Options,
    runs: FxHashMap<TraceId, Span>,
    nodes: FxHashMap<Key, Span>,
    run_meta: FxHashMap<TraceId, RunMeta>,
    /// Runs that ended, oldest first, whose metadata is still kept.
    ended: VecDeque<TraceId>,
    sessions: FxHashMap<SessionId, SessionMeta>,
    agents: FxHashMap<Key, Span>,
    turns: FxHashMap<Key, Span>,
    tools: FxHashMap<Key, Span>,
    calls: ModelCalls,
    finished: Vec<Span>,
    last_ms: i64,
}

/// How many ended runs keep their metadata: a session's last events may come after its
/// run's end (a session is a stream of its own), and a live exporter's memory stays bounded.
const KEEP_ENDED: usize = 256;

/// What is known about a run's nodes and sessions.
#[derive(Debug, Default)]
struct RunMeta {
    nodes: FxHashMap<NodeId, NodeMeta>,
    /// Its agents' sessions (forgotten with it).
    sessions: Vec<SessionId>,
}

/// What is known about a node before it runs.
#[derive(Debug, Default)]
struct NodeMeta {
    template: Option<String>,
    parent: Option<NodeId>,
    /// Its activations' starts, for placing model calls recorded without a turn.
    starts: Vec<(u32, i64)>,
}

/// The span of run `run`'s root.
pub(crate) fn run_span_id(run: &RunId) -> (TraceId, SpanId) {
    let trace = TraceId::of(run.as_str());
    (trace, SpanId::of(trace, &["run"]))
}

/// The span of activation `attempt` of `node`.
pub(crate) fn node_span_id(run: &RunId, node: &NodeId, attempt: u32) -> (TraceId, SpanId) {
    let trace = TraceId::of(run.as_str());
    (trace, node_span_in(trace, node, attempt))
}

/// The span of activation `attempt` of `node` in the run whose trace is `trace`.
fn node_span_in(trace: TraceId, node: &NodeId, attempt: u32) -> SpanId {
    let mut digits = itoa::Buffer::new();
    SpanId::of(trace, &["node", node.as_str(), digits.format(attempt)])
}

/// A span of GenAI operation `op` (`gen_ai.operation.name`), named `op` or `op what`.
pub(crate) fn gen_ai_span(
    (trace, id, parent): (TraceId, SpanId, Option<SpanId>),
    op: &'static str,
    what: Option<&str>,
    kind: SpanKind,
    at_ms: i64,
) -> Span {
    let name = what.map_or_else(|| op.to_owned(), |w| format!("{op} {w}"));
    let mut span = open_span(trace, id, parent, name, kind, at_ms);
    span.attributes.set(semconv::GEN_AI_OPERATION_NAME, op);
    span
}

pub(crate) fn open_span(
    trace: TraceId,
    id: SpanId,
    parent: Option<SpanId>,
    name: String,
    kind: SpanKind,
    at_ms: i64,
) -> Span {
    Span {
        trace,
        id,
        parent,
        name,
        kind,
        start_ms: at_ms,
        end_ms: at_ms,
        // A node's span has 5–6 attributes, an agent's and a model call's up to 10.
        attributes: Attributes::with_capacity(8),
        events: Vec::new(),
        status: Status::Unset,
    }
}

impl Mapper {
    /// A mapper writing what `options` allow.
    pub fn new(options: Options) -> Self {
        Self {
            options,
            ..Self::default()
        }
    }

    /// The model calls recorded for the runs being mapped (`runs usage`): each turn takes its
    /// model, profile, cached tokens and cost from the call recorded for its stage as it ended;
    /// calls no turn claims (planning, summaries) become spans of their own at [`finish`].
    ///
    /// [`finish`]: Mapper::finish
    pub fn add_model_calls(&mut self, calls: impl IntoIterator<Item = ModelCallRecord>) {
        self.calls.extend(calls);
    }

    /// Feeds one event.
    pub fn event(&mut self, ev: &ServiceEvent) {
        self.last_ms = self.last_ms.max(ev.ts);
        match (&ev.stream, &ev.event) {
            (StreamId::Run(run), ServiceEventBody::Run(kind)) => self.run_event(run, ev.ts, kind),
            (StreamId::Session(id), ServiceEventBody::Session(e)) => {
                self.session_event(id, ev.ts, e);
            }
            (StreamId::Workspace, ServiceEventBody::Workspace(e)) => self.workspace_event(e),
            _ => {}
        }
    }

    /// The spans that ended since the last call, in the order they ended.
    pub fn take_finished(&mut self) -> Vec<Span> {
        std::mem::take(&mut self.finished)
    }

    /// Spans still open.
    pub fn open_spans(&self) -> usize {
        self.runs.len() + self.nodes.len() + self.agents.len() + self.turns.len() + self.tools.len()
    }

    /// Ends every span still open at the last event seen, marked [`trellis::UNFINISHED`],
    /// places the model calls no turn claimed, and returns every span not taken yet, ordered
    /// by start (parents before their children when they start together).
    pub fn finish(mut self) -> Vec<Span> {
        let at = self.last_ms;
        let open: Vec<Span> = self
            .tools
            .drain()
            .map(|(_, s)| s)
            .chain(self.turns.drain().map(|(_, s)| s))
            .chain(self.agents.drain().map(|(_, s)| s))
            .chain(self.nodes.drain().map(|(_, s)| s))
            .chain(self.runs.drain().map(|(_, s)| s))
            .collect();
        for mut span in open {
            span.attributes.set(trellis::UNFINISHED, true);
            span.end_ms = at.max(span.start_ms);
            self.finished.push(span);
        }
        for call in self.calls.unclaimed() {
            let span = self.call_span(&call);
            self.finished.push(span);
        }
        let mut spans = self.finished;
        let depth = depths(&spans);
        spans.sort_by_key(|s| (s.start_ms, depth.get(&s.id).copied().unwrap_or(0), s.end_ms));
        spans
    }

    fn end(&mut self, mut span: Span, at_ms: i64) {
        span.end_ms = at_ms.max(span.start_ms);
        self.finished.push(span);
    }

    fn workspace_event(&mut self, e: &WorkspaceEvent) {
        if let WorkspaceEvent::RunCreated { run, workflow, .. } = e
            && let Some(span) = self.runs.get_mut(&TraceId::of(run.as_str()))
        {
            span.attributes
                .set(semconv::GEN_AI_WORKFLOW_NAME, workflow.as_str());
        }
    }

    /// The run's span, opened at `at_ms` if this mapper has not seen it start (a live
    /// exporter started after the run, or a run resumed here).
    fn run_span(&mut self, run: &RunId, at_ms: i64) -> &mut Span {
        let (trace, id) = run_span_id(run);
        self.runs.entry(trace).or_insert_with(|| {
            let mut span = gen_ai_span(
                (trace, id, None),
                op::INVOKE_WORKFLOW,
                None,
                SpanKind::Internal,
                at_ms,
            );
            span.attributes.set(trellis::RUN_ID, run.as_str());
            span
        })
    }

    fn run_event(&mut self, run: &RunId, at: i64, kind: &EventKind) {
        match kind {
            EventKind::RunStarted { graph, .. } | EventKind::RunContinued { graph, .. } => {
                let started = matches!(kind, EventKind::RunStarted { .. });
                let span = self.run_span(run, at);
                span.name = format!("{} {graph}", op::INVOKE_WORKFLOW);
                span.attributes
                    .set(semconv::GEN_AI_WORKFLOW_NAME, graph.as_str());
                if started {
                    span.attributes.set(trellis::RUN_GRAPH, graph.as_str());
                }
            }
            EventKind::RunResumed { .. } => {
                let span = self.run_span(run, at);
                span.events.push(event(at, "graph:run_resumed"));
            }
            EventKind::NodeAdded {
                node,
                template,
                parent,
                ..
            } => {
                if let Some(meta) = self.node_meta(TraceId::of(run.as_str()), node) {
                    meta.template = Some(template.clone());
                    meta.parent = parent.clone();
                }
            }
            EventKind::NodeTransition {
                node,
                attempt,
                to,
                reason,
                ..
            } => self.transition(run, at, node, *attempt, *to, reason.as_deref()),
            EventKind::NodeOutput {
                node,
                attempt,
                failure: true,
                error,
                ..
            } => {
                if let Some(span) = self.nodes.get_mut(&node_key(run, node, *attempt)) {
                    span.status = Status::Error(error.clone().unwrap_or_else(|| "failed".into()));
                    span.attributes.set(semconv::ERROR_TYPE, "node_failed");
                }
            }
            EventKind::InterruptRaised {
                node,
                attempt,
                interrupt,
                ..
            } => {
                let capture = self.options.capture_content;
                if let Some(span) = self.nodes.get_mut(&node_key(run, node, *attempt)) {
                    let mut ev = event(at, "graph:interrupt_raised");
                    let kind = serde_json::to_value(interrupt.kind)
                        .ok()
                        .and_then(|v| v.as_str().map(str::to_owned))
                        .unwrap_or_default();
                    ev.attributes.set("trellis.interrupt.kind", kind);
                    if capture {
                        ev.attributes
                            .set("trellis.interrupt.prompt", interrupt.prompt.as_str());
                    }
                    span.events.push(ev);
                }
            }
            EventKind::InputReceived { node, attempt, .. } => {
                if let Some(span) = self.nodes.get_mut(&node_key(run, node, *attempt)) {
                    span.events.push(event(at, "graph:input_received"));
                }
            }
            EventKind::CommandReceived { .. }
            | EventKind::CommandRefused { .. }
            | EventKind::MessageQueued { .. } => {
                let name = trellis_protocol::ServiceEventBody::Run(kind.clone()).topic();
                self.run_span(run, at).events.push(event(at, name));
            }
            EventKind::RunStatusChanged { status, error, .. } => {
                self.run_status(run, at, *status, error.as_deref());
            }
            EventKind::EdgeAdded { .. }
            | EventKind::NodeOutput { .. }
            | EventKind::Routed { .. }
            | EventKind::StepStarted { .. }
            | EventKind::StepCompleted { .. } => {}
        }
    }

    fn transition(
        &mut self,
        run: &RunId,
        at: i64,
        node: &NodeId,
        attempt: u32,
        to: NodeState,
        reason: Option<&str>,
    ) {
        if to == NodeState::Ready {
            return;
        }
        let key = node_key(run, node, attempt);
        match to {
            NodeState::Running if !self.nodes.contains_key(&key) => {
                let parent = self.run_span(run, at).id;
                let (trace, id) = key;
                let mut span = open_span(
                    trace,
                    id,
                    Some(parent),
                    format!("node {node}"),
                    SpanKind::Internal,
                    at,
                );
                span.attributes.set(trellis::RUN_ID, run.as_str());
                span.attributes.set(trellis::NODE_ID, node.as_str());
                span.attributes.set(trellis::NODE_ATTEMPT, attempt);
                // A node's metadata is made here only to place recorded model calls later
                // (`runs trace`); a live mapper has none and reads what `nodeAdded` left.
                let meta = if self.calls.is_empty() {
                    self.run_meta
                        .get_mut(&trace)
                        .and_then(|m| m.nodes.get_mut(node))
                } else {
                    self.node_meta(trace, node)
                };
                if let Some(meta) = meta {
                    if let Some(t) = &meta.template {
                        span.attributes.set(trellis::NODE_TEMPLATE, t.as_str());
                    }
                    if let Some(p) = &meta.parent {
                        span.attributes.set(trellis::NODE_PARENT, p.as_str());
                    }
                    meta.starts.push((attempt, at));
                }
                self.nodes.insert(key, span);
            }
            NodeState::WaitingInput => {
                if let Some(span) = self.nodes.get_mut(&key) {
                    span.events.push(event(at, "graph:waiting_input"));
                }
            }
            NodeState::Completed | NodeState::Failed | NodeState::Pruned | NodeState::Skipped => {
                let Some(mut span) = self.nodes.remove(&key) else {
                    return;
                };
                span.attributes.set(trellis::NODE_STATE, to.as_str());
                if to == NodeState::Failed && span.status == Status::Unset {
                    span.status = Status::Error(reason.unwrap_or("failed").to_owned());
                    span.attributes.set(semconv::ERROR_TYPE, "node_failed");
                }
                self.end(span, at);
            }
            NodeState::Ready | NodeState::Running => {}
        }
    }

    fn run_status(&mut self, run: &RunId, at: i64, status: RunStatus, error: Option<&str>) {
        if !status.is_final() {
            let name = if status == RunStatus::WaitingInput {
                "workflow:waiting_input"
            } else {
                "workflow:running"
            };
            self.run_span(run, at).events.push(event(at, name));
            return;
        }
        let (trace, id) = run_span_id(run);
        let mut span = self.runs.remove(&trace).unwrap_or_else(|| {
            gen_ai_span(
                (trace, id, None),
                op::INVOKE_WORKFLOW,
                None,
                SpanKind::Internal,
                at,
            )
        });
        span.attributes.set(trellis::RUN_STATUS, status.as_str());
        if status == RunStatus::Failed {
            span.status = Status::Error(error.unwrap_or("failed").to_owned());
            span.attributes.set(semconv::ERROR_TYPE, "run_failed");
        }
        self.end(span, at);
        // Activations the run left open end with it.
        let left: Vec<Key> = self
            .nodes
            .keys()
            .filter(|k| k.0 == trace)
            .copied()
            .collect();
        for key in left {
            if let Some(mut node) = self.nodes.remove(&key) {
                node.attributes.set(trellis::UNFINISHED, true);
                self.end(node, at);
            }
        }
        self.ended(trace);
    }

    /// What is known about `node` of the run whose trace is `trace`.
    fn node_meta(&mut self, trace: TraceId, node: &NodeId) -> Option<&mut NodeMeta> {
        let nodes = &mut self.run_meta.entry(trace).or_default().nodes;
        if !nodes.contains_key(node) {
            nodes.insert(node.clone(), NodeMeta::default());
        }
        nodes.get_mut(node)
    }

    /// Notes that the run whose trace is `trace` ended, and forgets the metadata of the run
    /// that ended [`KEEP_ENDED`] run ends ago (unless it runs again).
    fn ended(&mut self, trace: TraceId) {
        self.ended.push_back(trace);
        if self.ended.len() <= KEEP_ENDED {
            return;
        }
        let Some(old) = self.ended.pop_front() else {
            return;
        };
        if self.runs.contains_key(&old) || self.ended.contains(&old) {
            return;
        }
        if let Some(meta) = self.run_meta.remove(&old) {
            for session in &meta.sessions {
                self.sessions.remove(session);
            }
        }
    }

    /// A span for a model call no turn claimed, ending when it was recorded (its start is
    /// not recorded), under its stage's activation running then.
    fn call_span(&self, call: &ModelCallRecord) -> Span {
        let run = call.run_id.clone().unwrap_or_default();
        let (trace, run_span) = run_span_id(&run);
        let parent = call
            .stage
            .as_ref()
            .and_then(|stage| {
                let node = NodeId::new(stage.as_str());
                let meta = self.run_meta.get(&trace)?.nodes.get(&node)?;
                let (attempt, _) = meta.starts.iter().rev().find(|(_, s)| *s <= call.at)?;
                Some(node_span_id(&run, &node, *attempt).1)
            })
            .unwrap_or(run_span);
        let key = call.id.to_string();
        let id = SpanId::of(trace, &["call", &key]);
        let mut span = gen_ai_span(
            (trace, id, Some(parent)),
            op::CHAT,
            Some(&call.model),
            SpanKind::Client,
            call.at,
        );
        calls::describe(&mut span.attributes, call);
        span.attributes
            .set(semconv::GEN_AI_USAGE_INPUT_TOKENS, call.prompt_tokens);
        span.attributes
            .set(semconv::GEN_AI_USAGE_OUTPUT_TOKENS, call.completion_tokens);
        if call.outcome != "ok" {
            span.status = Status::Error(call.outcome.clone());
            span.attributes
                .set(semconv::ERROR_TYPE, call.outcome.clone());
        }
        span
    }
}

/// The key of activation `attempt` of `node` of `run`.
fn node_key(run: &RunId, node: &NodeId, attempt: u32) -> Key {
    let trace = TraceId::of(run.as_str());
    (trace, node_span_in(trace, node, attempt))
}

/// A span event named `name` at `at_ms`.
pub(crate) fn event(at_ms: i64, name: &str) -> SpanEvent {
    SpanEvent {
        at_ms,
        name: name.to_owned(),
        attributes: Attributes::default(),
    }
}

/// Each span's depth below its trace's root (0 for a root or a span whose parent is absent).
fn depths(spans: &[Span]) -> HashMap<SpanId, usize> {
    let parent: HashMap<SpanId, Option<SpanId>> = spans.iter().map(|s| (s.id, s.parent)).collect();
    let mut out = HashMap::new();
    for s in spans {
        let mut d = 0;
        let mut at = s.parent;
        while let Some(p) = at {
            d += 1;
            at = parent.get(&p).copied().flatten();
            if d > spans.len() {
                break;
            }
        }
        out.insert(s.id, d);
    }
    out
}

impl From<&Value> for serde_json::Value {
    fn from(v: &Value) -> Self {
        match v {
            Value::Str(s) => serde_json::Value::from(s.as_str()),
            Value::Int(i) => serde_json::Value::from(*i),
            Value::Double(d) => serde_json::Value::from(*d),
            Value::Bool(b) => serde_json::Value::from(*b),
        }
    }
}
