//! Applying events to a [`RunCore`]: [`RunCore::apply`] hands each event kind to the step
//! that records it, and these steps are the only code that changes run state.

use std::sync::Arc;

use serde_json::Value;
use trellis_protocol::{
    Answer, Command, EdgeSpec, Event, EventKind, ForkRef, Interrupt, NodeId, NodeState, RunStatus,
};

use super::{
    MAX_ATTEMPTS_REACHED, NO_FAILURE_ROUTE, NodeRt, Pending, REVISION_REASON, RunCore, Spawn,
    SpawnAfter, Spawned,
};
use crate::handler::Resume;
use crate::spec::NodeKind;
use crate::{Error, Result};

/// What a `nodeOutput` hands to the end of its step: channel writes, counters, spawns and
/// revisions, borrowed from the event.
struct OutputEffects<'e> {
    writes: &'e [(String, Arc<Value>)],
    counters: &'e [(String, i64)],
    spawns: &'e Arc<[Spawn]>,
    spawn_after: &'e SpawnAfter,
    revise: &'e [NodeId],
}

impl OutputEffects<'_> {
    /// Whether the output asks for nothing at the end of its step.
    fn is_empty(&self) -> bool {
        self.writes.is_empty()
            && self.counters.is_empty()
            && self.spawns.is_empty()
            && self.revise.is_empty()
    }

    /// The effects as the open step keeps them until `stepCompleted`.
    fn to_pending(&self) -> Pending {
        Pending {
            writes: self.writes.to_vec(),
            counters: self.counters.to_vec(),
            spawns: self.spawns.clone(),
            spawn_after: self.spawn_after.clone(),
            revise: self.revise.to_vec(),
        }
    }
}

impl RunCore {
    /// Applies one event. This is the only place run state changes.
    pub fn apply(&mut self, event: &Event) -> Result<()> {
        self.last_seq = event.seq;
        match &event.kind {
            EventKind::RunStarted {
                input,
                fork,
                fingerprint,
                ..
            } => self.start_run(event.ts, input, fork.as_ref(), fingerprint)?,
            EventKind::RunContinued {
                fingerprint, input, ..
            } => self.continue_run(fingerprint, input)?,
            EventKind::RunResumed { .. } => self.resume_run(),
            EventKind::NodeAdded {
                node,
                template,
                parent,
                input,
                after,
            } => self.node_added(node, template, parent.as_ref(), input, after)?,
            EventKind::EdgeAdded { edge } => self.edge_added(edge)?,
            EventKind::NodeTransition {
                node,
                attempt,
                from,
                to,
                reason,
            } => self.node_transition(node, *attempt, *from, *to, reason.as_deref())?,
            EventKind::NodeOutput {
                node,
                attempt,
                failure,
                result,
                error,
                writes,
                counters,
                spawns,
                spawn_after,
                revise,
            } => {
                let o = self.record_output(node, *attempt, *failure, result, error.as_ref())?;
                let effects = OutputEffects {
                    writes,
                    counters,
                    spawns,
                    spawn_after,
                    revise,
                };
                self.hold_effects(o, node, &effects);
            }
            EventKind::InterruptRaised {
                node,
                interrupt,
                scratch,
                ..
            } => self.interrupt_raised(node, interrupt, scratch)?,
            EventKind::InputReceived { node, answer, .. } => self.input_received(node, answer)?,
            EventKind::Routed {
                from, to, reason, ..
            } => self.routed(from, to, reason)?,
            EventKind::StepStarted { step } => self.start_step(*step),
            EventKind::StepCompleted { .. } => self.complete_step()?,
            EventKind::CommandReceived { id, command } => self.command_received(*id, command),
            EventKind::CommandRefused { .. } => {}
            EventKind::MessageQueued { id, node, .. } => self.message_queued(*id, node)?,
            EventKind::RunStatusChanged {
                status,
                terminal,
                error,
            } => self.status_changed(*status, terminal.as_ref(), error.as_ref()),
        }
        Ok(())
    }

    /// `runStarted`: checks the graph is the one the run was recorded with, then takes the
    /// fork it continues or its input.
    fn start_run(
        &mut self,
        ts: i64,
        input: &Value,
        fork: Option<&ForkRef>,
        fingerprint: &str,
    ) -> Result<()> {
        if !self.graph.started_as(fingerprint) {
            return Err(self.mismatch(format!(
                "it was recorded with graph fingerprint {fingerprint}, but graph `{}` now has {}; the graph definition changed since the run started",
                self.graph.name(),
                self.graph.fingerprint()
            )));
        }
        self.created_ts = ts;
        self.status = RunStatus::Running;
        match fork {
            Some(f) => self.fork = Some(f.clone()),
            None => self.init_input(input)?,
        }
        Ok(())
    }

    /// `runContinued`: the run goes on with the graph it names (the live driver's next graph;
    /// a replay has had it from the start), running again, with the new channel values.
    fn continue_run(&mut self, fingerprint: &str, input: &Value) -> Result<()> {
        if let Some(next) = self.next_graph.take() {
            self.take_graph(next)?;
        }
        if fingerprint != self.graph.fingerprint() {
            return Err(self.mismatch(format!(
                "it continued with graph fingerprint {fingerprint}, but graph `{}` now has {}; the graph definition changed since the run continued",
                self.graph.name(),
                self.graph.fingerprint()
            )));
        }
        self.status = RunStatus::Running;
        self.terminal = None;
        self.error = None;
        self.init_input(input)
    }

    /// `runResumed`: a resumed final run stays final until a revision reopens it.
    fn resume_run(&mut self) {
        if !self.status.is_final() {
            self.status = RunStatus::Running;
        }
    }

    /// `nodeAdded`: a dynamic node, its dependencies, and the depth of what its parent spawns.
    fn node_added(
        &mut self,
        node: &NodeId,
        template: &str,
        parent: Option<&NodeId>,
        input: &Value,
        after: &[NodeId],
    ) -> Result<()> {
        self.add_node(node, template, parent, input)?;
        self.set_after(node, after)?;
        if let Some(p) = parent {
            self.route_depth = self.nodes[self.node_of(p)?].depth + 1;
        }
        Ok(())
    }

    /// `edgeAdded`: an edge between known nodes, kept beside the graph's own.
    fn edge_added(&mut self, edge: &EdgeSpec) -> Result<()> {
        let from = self.node_of(&edge.from)?;
        self.node_of(&edge.to)?;
        self.extra_edges
            .entry(from)
            .or_default()
            .push(edge.to.clone());
        Ok(())
    }

    /// `nodeTransition`: the activation's new state, counting the revisions it starts.
    fn node_transition(
        &mut self,
        node: &NodeId,
        attempt: u32,
        from: Option<NodeState>,
        to: NodeState,
        reason: Option<&str>,
    ) -> Result<()> {
        let o = self.node_of(node)?;
        self.transition(o, attempt, from, to)?;
        if reason == Some(REVISION_REASON) {
            self.nodes[o].revisions += 1;
        }
        Ok(())
    }

    /// `nodeOutput`, first part: the running activation's outcome; returns the node's ordinal.
    fn record_output(
        &mut self,
        node: &NodeId,
        attempt: u32,
        failure: bool,
        result: &Arc<Value>,
        error: Option<&String>,
    ) -> Result<usize> {
        let o = self.node_of(node)?;
        let n = &mut self.nodes[o];
        if n.attempt != attempt || n.state != Some(NodeState::Running) {
            return Err(self.mismatch(format!("output of {node}#{attempt}, which is not running")));
        }
        n.failed = failure;
        n.result = result.clone();
        n.error = error.cloned();
        Ok(o)
    }

    /// `nodeOutput`, second part: keeps what the output asks of the end of the step (always
    /// for a spawner, whose collectors wait for its group).
    fn hold_effects(&mut self, o: usize, node: &NodeId, effects: &OutputEffects<'_>) {
        let has_collectors = self.graph.collectors.contains_key(node);
        if !effects.is_empty() || has_collectors {
            self.pending.insert(o, effects.to_pending());
        }
    }

    /// `interruptRaised`: the question and the handler's scratch, kept until the answer.
    fn interrupt_raised(
        &mut self,
        node: &NodeId,
        interrupt: &Interrupt,
        scratch: &Value,
    ) -> Result<()> {
        let o = self.node_of(node)?;
        self.nodes[o].interrupt = Some(interrupt.clone());
        self.nodes[o].scratch = scratch.clone();
        Ok(())
    }

    /// `inputReceived`: the answer and the scratch become the activation's resume.
    fn input_received(&mut self, node: &NodeId, answer: &Answer) -> Result<()> {
        let o = self.node_of(node)?;
        let n = &mut self.nodes[o];
        n.resume = Some(Resume {
            answer: answer.clone(),
            scratch: std::mem::take(&mut n.scratch),
        });
        n.interrupt = None;
        Ok(())
    }

    /// `routed`: the depth of what it activates, an unrouted failure, the failure routes back
    /// into the graph, and the `max_attempts` exhaustion a terminal was reached by.
    fn routed(&mut self, from: &NodeId, to: &[NodeId], reason: &str) -> Result<()> {
        let o = self.node_of(from)?;
        self.route_depth = self.nodes[o].depth + 1;
        if to.is_empty() && reason == NO_FAILURE_ROUTE {
            self.nodes[o].unrouted = true;
        }
        // Counted from the log, so a replayed, resumed or forked run (old logs
        // included) knows how often each node's failures went back into the graph.
        if self.nodes[o].state == Some(NodeState::Failed) && to.iter().any(|t| !self.is_terminal(t))
        {
            self.nodes[o].failure_routes += 1;
        }
        let exhausted = reason
            .starts_with(MAX_ATTEMPTS_REACHED)
            .then(|| format!("{from}: {reason}"));
        for t in to {
            if let Some(t) = self.ordinal(t)
                && matches!(self.nodes[t].def.kind, NodeKind::Terminal(_))
            {
                self.nodes[t].exhausted = exhausted.clone();
            }
        }
        Ok(())
    }

    /// `stepStarted`: opens the step with nothing finished, spawned or revised yet.
    fn start_step(&mut self, step: u64) {
        self.step = step;
        self.step_open = true;
        self.finished.clear();
        self.spawned.clear();
        self.revised.clear();
    }

    /// `commandReceived`: the command, by id, and the next free id.
    fn command_received(&mut self, id: u64, command: &Command) {
        self.commands.insert(id, command.clone());
        self.next_command = self.next_command.max(id + 1);
    }

    /// `messageQueued`: the message of a received command goes to the node's inbox.
    fn message_queued(&mut self, id: u64, node: &NodeId) -> Result<()> {
        let o = self.node_of(node)?;
        if let Some(Command::SendMessage { message, .. } | Command::Revise { message, .. }) =
            self.commands.get(&id)
        {
            let message = message.clone();
            self.nodes[o].inbox.push(message);
        }
        Ok(())
    }

    /// `runStatusChanged`: the run's status, and how it ended (cleared when it reopens).
    fn status_changed(
        &mut self,
        status: RunStatus,
        terminal: Option<&NodeId>,
        error: Option<&String>,
    ) {
        if status == RunStatus::Running {
            // Reopened (a revision of a finished run): its old ending no longer holds.
            self.terminal = None;
            self.error = None;
        }
        self.status = status;
        if terminal.is_some() {
            self.terminal = terminal.cloned();
        }
        if error.is_some() {
            self.error = error.cloned();
        }
    }

    fn init_input(&mut self, input: &Value) -> Result<()> {
        let obj = match input {
            Value::Null => return Ok(()),
            Value::Object(o) => o,
            other => {
                return Err(Error::Input(format!(
                    "the input must be an object of channel values, got {other}"
                )));
            }
        };
        for (k, v) in obj {
            if self.graph.channel(k).is_none() {
                let hint = crate::spec::nearest(k, self.graph.channel_names())
                    .map(|n| format!(" (did you mean `{n}`?)"))
                    .unwrap_or_default();
                return Err(Error::Input(format!("unknown channel `{k}`{hint}")));
            }
            Arc::make_mut(&mut self.state)
                .channels
                .insert(k.clone(), Arc::new(v.clone()));
        }
        Ok(())
    }

    fn add_node(
        &mut self,
        id: &NodeId,
        template: &str,
        parent: Option<&NodeId>,
        input: &Value,
    ) -> Result<()> {
        let parent = parent.map(|p| self.node_of(p)).transpose()?;
        if let Some(&o) = self.by_id.get(id) {
            // A re-spawn of an existing child: same template and parent, new input.
            let n = &mut self.nodes[o];
            if n.template.as_deref() != Some(template) || n.parent != parent {
                return Err(self.mismatch(format!(
                    "node `{id}` added twice with different templates or parents"
                )));
            }
            n.input = input.clone();
            return Ok(());
        }
        let def = self.graph.template(template).cloned().ok_or_else(|| {
            self.mismatch(format!(
                "template `{template}` (for node `{id}`) is not registered"
            ))
        })?;
        let mut n = NodeRt::new(id.clone(), def);
        n.template = Some(template.to_owned());
        n.parent = parent;
        n.input = input.clone();
        let o = self.nodes.len();
        self.nodes.push(n);
        self.by_id.insert(id.clone(), o);
        if let Some(p) = parent {
            self.nodes[p].children.push(o);
        }
        Ok(())
    }

    fn transition(
        &mut self,
        o: usize,
        attempt: u32,
        from: Option<NodeState>,
        to: NodeState,
    ) -> Result<()> {
        let id = self.nodes[o].id.clone();
        let step = self.step;
        let n = &mut self.nodes[o];
        match from {
            None => {
                if to != NodeState::Ready || attempt != n.attempt + 1 || n.is_active() {
                    return Err(Error::InvalidTransition {
                        node: id,
                        attempt,
                        source: trellis_protocol::InvalidTransition {
                            from: n.state.unwrap_or(NodeState::Ready),
                            to,
                        },
                    });
                }
                n.attempt = attempt;
                n.state = Some(NodeState::Ready);
                n.unrouted = false;
                n.held = false;
                n.ready_step = step + 1;
                n.depth = self.route_depth;
                self.ready.push(o);
                if !self.nodes[o].after.is_empty() {
                    // One hop after its deepest dependency.
                    let deps = &self.nodes[o].after;
                    let depth = deps.iter().map(|&d| self.nodes[d].depth).max().unwrap_or(0) + 1;
                    self.nodes[o].depth = depth;
                }
                Arc::make_mut(&mut self.attempts).insert(id, attempt);
                if let NodeKind::Collector { of, .. } = &self.nodes[o].def.kind
                    && let Some(&s) = self.by_id.get(of)
                {
                    let sn = &self.nodes[s];
                    let gen_ = sn.group_gen;
                    // One hop after its deepest child (or its spawner, for an empty group).
                    let depth = sn
                        .group
                        .iter()
                        .filter_map(|c| self.by_id.get(c))
                        .map(|&c| self.nodes[c].depth)
                        .fold(sn.depth, u64::max)
                        + 1;
                    let n = &mut self.nodes[o];
                    n.collected_gen = gen_;
                    n.depth = depth;
                }
                return Ok(());
            }
            Some(from) => {
                if n.attempt != attempt || n.state != Some(from) {
                    let message = format!(
                        "transition {id}#{attempt} {from} → {to}, but the node is {}#{}",
                        n.state.map(NodeState::as_str).unwrap_or("new"),
                        n.attempt
                    );
                    return Err(Error::Replay {
                        run: self.run.to_string(),
                        message,
                    });
                }
                from.transition(to)
                    .map_err(|source| Error::InvalidTransition {
                        node: id.clone(),
                        attempt,
                        source,
                    })?;
            }
        }
        n.state = Some(to);
        match to {
            NodeState::Ready => {
                self.ready.push(o);
                // RUNNING → READY re-queues into the open step (dropping any output recorded by
                // the interrupted execution); WAITING → READY goes into the next step.
                n.ready_step = if from == Some(NodeState::Running) {
                    step
                } else {
                    step + 1
                };
                if from == Some(NodeState::Running) {
                    self.pending.remove(&o);
                }
            }
            NodeState::Running => {}
            NodeState::WaitingInput => {
                n.inbox.clear();
                n.resume = None;
            }
            NodeState::Completed | NodeState::Failed => {
                n.inbox.clear();
                n.resume = None;
                n.interrupt = None;
                self.finished.push(o);
            }
            NodeState::Pruned => {
                n.inbox.clear();
                n.resume = None;
                n.interrupt = None;
                n.pruned = true;
                n.held = false;
                self.pending.remove(&o);
            }
            NodeState::Skipped => {
                n.failed = false;
                n.result = Arc::default();
                n.error = None;
            }
        }
        Ok(())
    }

    /// Applies the pending writes of the open step in node order.
    fn complete_step(&mut self) -> Result<()> {
        if let Some(d) = self.finished.iter().map(|&o| self.nodes[o].depth).max() {
            self.route_depth = d + 1;
        }
        let pending = std::mem::take(&mut self.pending);
        for (o, p) in pending {
            let id = self.nodes[o].id.clone();
            for (channel, value) in p.writes {
                let reducer =
                    self.graph
                        .channel(&channel)
                        .cloned()
                        .ok_or_else(|| Error::Reducer {
                            node: id.clone(),
                            channel: channel.clone(),
                            message: "channel is not declared".into(),
                        })?;
                Arc::make_mut(&mut self.state)
                    .apply(&reducer, &channel, value)
                    .map_err(|message| Error::Reducer {
                        node: id.clone(),
                        channel: channel.clone(),
                        message,
                    })?;
            }
            for (name, delta) in p.counters {
                *Arc::make_mut(&mut self.counters).entry(name).or_insert(0) += delta;
            }
            if self.graph.collectors.contains_key(&id) || !p.spawns.is_empty() {
                let n = &mut self.nodes[o];
                n.group = p.spawns.iter().map(|(key, _, _)| id.child(key)).collect();
                n.group_gen += 1;
                self.spawned.push(Spawned {
                    spawner: o,
                    spawns: p.spawns,
                    after: p.spawn_after,
                });
            }
            if !p.revise.is_empty() {
                self.revised.push((o, p.revise));
            }
        }
        self.step_open = false;
        Ok(())
    }
}
