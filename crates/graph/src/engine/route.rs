//! End of a step: apply writes, create spawned children, route, fire collectors, stop at
//! terminals. Also the command handlers, which share the activation logic.

use std::borrow::Cow;

use trellis_protocol::{
    Command, EventKind, NodeId, NodeState, RunStatus, SubmissionId, TerminalKind,
};

use super::CommandReply;
use super::core::{MAX_ATTEMPTS_REACHED, NO_FAILURE_ROUTE, Spawned};
use super::live::Live;
use crate::handler::RouteContext;
use crate::spec::{Edge, NodeKind};
use crate::{Error, Result};

impl Live {
    pub(super) fn end_step(&mut self) -> Result<()> {
        self.tick();
        let mut changed: Vec<String> = self
            .core
            .pending
            .values()
            .flat_map(|p| p.writes.iter().map(|(c, _)| c.clone()))
            .collect();
        changed.sort();
        changed.dedup();
        self.emit(EventKind::StepCompleted {
            step: self.core.step,
            changed,
        })?;
        let mut finished = std::mem::take(&mut self.core.finished);
        finished.sort_unstable();
        let result = self.route_finished(&finished);
        if self.core.finished.is_empty() {
            // Keep the allocation for the next step.
            finished.clear();
            self.core.finished = finished;
        }
        result
    }

    fn route_finished(&mut self, finished: &[usize]) -> Result<()> {
        let mut held = Vec::new();
        for spawned in std::mem::take(&mut self.core.spawned) {
            self.spawn_children(spawned, &mut held)?;
        }
        if !self.core.revised.is_empty() {
            self.apply_revisions()?;
        }
        let mut reached = None;
        for &o in finished {
            match self.core.terminal_kind(o) {
                Some(kind) => {
                    if reached.is_none() {
                        let failed = self.core.nodes[o].state == Some(NodeState::Failed);
                        reached = Some((o, kind, failed));
                    }
                }
                None => self.route_from(o, 0)?,
            }
        }
        if self.core.has_deps {
            held.extend_from_slice(finished);
            self.settle_dependents(&held)?;
        }
        self.fire_collectors()?;
        if let Some((o, kind, failed)) = reached {
            let id = self.core.nodes[o].id.clone();
            self.stop_all(&format!("run ended at terminal {id}"))?;
            let (status, error) = match (kind, failed) {
                (_, true) => (
                    RunStatus::Failed,
                    Some(format!(
                        "terminal node {id} failed: {}",
                        self.core.nodes[o].error.clone().unwrap_or_default()
                    )),
                ),
                (TerminalKind::Success, false) => (RunStatus::Succeeded, None),
                (TerminalKind::Failure, false) => (
                    RunStatus::Failed,
                    Some(match &self.core.nodes[o].exhausted {
                        Some(why) => format!("reached failure terminal {id} ({why})"),
                        None => format!("reached failure terminal {id}"),
                    }),
                ),
            };
            self.emit(EventKind::RunStatusChanged {
                status,
                terminal: Some(id),
                error,
            })?;
        }
        Ok(())
    }

    /// Adds the children of a fan-out and activates them, except those that wait for
    /// siblings: these are held (pushed to `held`) until the dependency pass settles them.
    fn spawn_children(&mut self, spawned: Spawned, held: &mut Vec<usize>) -> Result<()> {
        let Spawned {
            spawner,
            spawns,
            after,
        } = spawned;
        let parent = self.core.nodes[spawner].id.clone();
        // Each child records about seven events before the next flush.
        self.reserve_events(spawns.len() * 7);
        for (i, (key, template, input)) in spawns.iter().enumerate() {
            // The ids were formed when the spawns were applied (the spawner's group).
            let Some(id) = self.core.nodes[spawner].group.get(i).cloned() else {
                break;
            };
            if let Some(c) = self.core.ordinal(&id) {
                let n = &self.core.nodes[c];
                // Completed children keep their result; pruned ones stay pruned; a child
                // listed twice is activated (or held) once.
                if n.pruned
                    || n.is_active()
                    || n.state == Some(NodeState::Completed)
                    || held.contains(&c)
                {
                    continue;
                }
            }
            let after: Vec<NodeId> = after
                .get(key)
                .map(|keys| keys.iter().map(|k| parent.child(k)).collect())
                .unwrap_or_default();
            let waits = !after.is_empty();
            self.emit(EventKind::NodeAdded {
                node: id.clone(),
                template: template.clone(),
                parent: Some(parent.clone()),
                input: input.clone(),
                after,
            })?;
            match self.core.ordinal(&id) {
                Some(c) if waits => held.push(c),
                _ => self.activate(&id, 0)?,
            }
        }
        Ok(())
    }

    /// Decides where to go after activation `o` finished, and activates the targets.
    fn route_from(&mut self, o: usize, depth: usize) -> Result<()> {
        let n = &self.core.nodes[o];
        let id = n.id.clone();
        let attempt = n.attempt;
        let failed = n.state == Some(NodeState::Failed);
        let is_static = o < self.core.graph.nodes.len();
        let extra = match self.core.extra_edges.get(&o) {
            Some(e) => e.clone(),
            None => Vec::new(),
        };
        let (mut targets, mut reason) = match is_static.then(|| self.core.graph.edge(&id)).flatten()
        {
            None if extra.is_empty() && failed => (Vec::new(), Cow::Borrowed(NO_FAILURE_ROUTE)),
            None if extra.is_empty() => return Ok(()),
            None => (extra, Cow::Borrowed("always")),
            Some(Edge::Always(t)) => (
                t.iter().cloned().chain(extra).collect(),
                Cow::Borrowed("always"),
            ),
            Some(Edge::Outcome { success, failure }) => {
                let (t, r) = if failed {
                    (failure, "failure")
                } else {
                    (success, "success")
                };
                (t.iter().cloned().chain(extra).collect(), Cow::Borrowed(r))
            }
            Some(Edge::Conditional { router, targets }) => {
                let ctx = RouteContext {
                    node: &id,
                    attempt,
                    failed,
                    result: &n.result,
                    error: n.error.as_deref(),
                    state: &self.core.state,
                    counters: &self.core.counters,
                    attempts: &self.core.attempts,
                    failure_routes: n.failure_routes,
                };
                let chosen = router.route(&ctx).map_err(|message| Error::Routing {
                    node: id.clone(),
                    message,
                })?;
                if let Some(bad) = chosen.iter().find(|t| !targets.contains(t)) {
                    return Err(Error::Routing {
                        node: id.clone(),
                        message: format!(
                            "router returned `{bad}`, which is not among its declared targets"
                        ),
                    });
                }
                (
                    chosen.into_iter().chain(extra).collect(),
                    Cow::Borrowed("router"),
                )
            }
        };
        // A failure route to a terminal (DONE, ABORT) is taken as written, whatever
        // the count; one back into the graph (a retry, an earlier stage, adaptive retrieval)
        // is taken at most `max_attempts` times, after which failures go to `on_exhausted`.
        let n = &self.core.nodes[o];
        if failed
            && let (Some(max), Some(to)) = (n.def.max_attempts, &n.def.on_exhausted)
            && n.failure_routes >= max
            && targets.iter().any(|t| !self.core.is_terminal(t))
        {
            reason = Cow::Owned(format!(
                "{MAX_ATTEMPTS_REACHED}{max}) reached: failed again after its failure route was taken {} time(s)",
                n.failure_routes
            ));
            targets = vec![to.clone()];
        }
        targets.dedup();
        self.emit(EventKind::Routed {
            from: id,
            attempt,
            to: targets.clone(),
            reason,
        })?;
        for t in targets {
            self.activate(&t, depth)?;
        }
        Ok(())
    }

    /// Creates a new READY activation of `id` unless it is pruned or already active. A
    /// skipped node is bypassed at once and routing continues after it.
    pub(super) fn activate(&mut self, id: &NodeId, depth: usize) -> Result<()> {
        let Some(o) = self.core.ordinal(id) else {
            return Err(Error::Routing {
                node: id.clone(),
                message: "target node does not exist".into(),
            });
        };
        let n = &self.core.nodes[o];
        if n.pruned || n.is_active() {
            return Ok(());
        }
        let attempt = n.attempt + 1;
        let skip = n.def.skip;
        self.emit(EventKind::NodeTransition {
            node: id.clone(),
            attempt,
            from: None,
            to: NodeState::Ready,
            reason: None,
        })?;
        if skip {
            if depth > self.core.nodes.len() {
                return Err(Error::Routing {
                    node: id.clone(),
                    message: "skipped nodes route to each other in a loop".into(),
                });
            }
            self.emit(EventKind::NodeTransition {
                node: id.clone(),
                attempt,
                from: Some(NodeState::Ready),
                to: NodeState::Skipped,
                reason: Some("stage skipped by the plan".into()),
            })?;
            self.route_from(o, depth + 1)?;
        }
        Ok(())
    }

    /// Activates each collector whose spawner's latest fan-out is entirely final.
    pub(super) fn fire_collectors(&mut self) -> Result<()> {
        for i in 0..self.core.collectors.len() {
            let c = self.core.collectors[i];
            let NodeKind::Collector { of, .. } = &self.core.nodes[c].def.kind else {
                continue;
            };
            let Some(s) = self.core.ordinal(of) else {
                continue;
            };
            let (sn, cn) = (&self.core.nodes[s], &self.core.nodes[c]);
            if sn.group_gen > cn.collected_gen
                && !cn.pruned
                && !cn.is_active()
                && self.core.group_done(s)
            {
                let id = cn.id.clone();
                self.activate(&id, 0)?;
            }
        }
        Ok(())
    }

    /// Records a command and applies it (or records why it cannot apply). Everything it
    /// records carries `cause`, the submission that sent it.
    pub fn command(
        &mut self,
        command: Command,
        cause: Option<SubmissionId>,
        reply: Option<CommandReply>,
    ) -> Result<()> {
        let driver = std::mem::replace(&mut self.cause, cause);
        let result = self.record_command(command, reply);
        self.cause = driver;
        result
    }

    fn record_command(&mut self, command: Command, reply: Option<CommandReply>) -> Result<()> {
        self.tick();
        let id = self.core.next_command;
        self.emit(EventKind::CommandReceived {
            id,
            command: command.clone(),
        })?;
        let status = self.core.status;
        let outcome = match &command {
            // A revision reopens a finished run; a cancelled one stays cancelled.
            Command::Revise { .. } if status == RunStatus::Cancelled => Err(format!(
                "run is already {status}; a cancelled run cannot be revised (fork it to run again)"
            )),
            Command::Revise { .. } => self.apply_command(id, command),
            _ if status.is_final() => Err(format!("run is already {status}")),
            _ => self.apply_command(id, command),
        };
        if let Err(reason) = &outcome {
            self.emit(EventKind::CommandRefused {
                id,
                reason: reason.clone(),
            })?;
        }
        if let Some(reply) = reply {
            let _ = reply.send(outcome);
        }
        Ok(())
    }

    fn find(&self, node: &NodeId) -> std::result::Result<usize, String> {
        self.core.ordinal(node).ok_or_else(|| {
            let hint =
                crate::spec::nearest(node.as_str(), self.core.nodes.iter().map(|n| n.id.as_str()))
                    .map(|n| format!("; did you mean `{n}`?"))
                    .unwrap_or_default();
            format!("no node named `{node}`{hint}")
        })
    }

    fn apply_command(&mut self, id: u64, command: Command) -> std::result::Result<(), String> {
        let fatal = |e: Error| e.to_string();
        match command {
            Command::SendMessage { node, message } => {
                let o = self.find(&node)?;
                let n = &self.core.nodes[o];
                let attempt = n.attempt;
                let delivered = match n.state {
                    None | Some(NodeState::Ready | NodeState::WaitingInput) => false,
                    Some(NodeState::Running) => true,
                    Some(NodeState::Failed) => {
                        return Err(format!(
                            "node {node} is FAILED; send a revise command to run it again with the message"
                        ));
                    }
                    Some(s) => {
                        return Err(format!(
                            "node {node} is {s}; messages to finished nodes are discarded"
                        ));
                    }
                };
                if delivered && let Some(r) = self.running.get(&o) {
                    r.mailbox.send(message);
                }
                self.emit(EventKind::MessageQueued {
                    id,
                    node,
                    attempt,
                    delivered,
                })
                .map_err(fatal)
            }
            Command::Answer { node, answer } => {
                let o = self.find(&node)?;
                let n = &self.core.nodes[o];
                if n.state != Some(NodeState::WaitingInput) {
                    return Err(format!(
                        "node {node} is {}, not WAITING_INPUT; only waiting nodes take answers",
                        n.state.map_or("not started", NodeState::as_str)
                    ));
                }
                let attempt = n.attempt;
                self.emit(EventKind::InputReceived {
                    node: node.clone(),
                    attempt,
                    answer,
                })
                .map_err(fatal)?;
                self.emit(EventKind::NodeTransition {
                    node,
                    attempt,
                    from: Some(NodeState::WaitingInput),
                    to: NodeState::Ready,
                    reason: Some("answered".into()),
                })
                .map_err(fatal)
            }
            // The message reaches the new activation from the recorded command (`messageQueued`).
            Command::Revise { node, .. } => self.revise(id, node),
            Command::Prune { node, reason } => self.prune(&node, reason).map_err(fatal)?,
            Command::Inject { nodes, edges } => self.inject(nodes, edges),
            Command::Cancel { reason } => {
                let why = reason.unwrap_or_else(|| "cancelled".into());
                self.stop_all(&format!("run cancelled: {why}"))
                    .map_err(fatal)?;
                self.emit(EventKind::RunStatusChanged {
                    status: RunStatus::Cancelled,
                    terminal: None,
                    error: Some(why),
                })
                .map_err(fatal)
            }
        }
    }

    /// Runs a finished node again as a new READY activation with the revision message
    /// buffered for it, reopening the run if it had ended.
    fn revise(&mut self, id: u64, node: NodeId) -> std::result::Result<(), String> {
        let o = self.find(&node)?;
        let n = &self.core.nodes[o];
        if n.held {
            return Err(format!(
                "node {node} waits for its dependencies; it runs once they complete"
            ));
        }
        match n.state {
            Some(NodeState::Completed | NodeState::Failed) => {}
            None => {
                return Err(format!(
                    "node {node} has not run yet; only COMPLETED or FAILED nodes can be revised (send it a message instead)"
                ));
            }
            Some(s @ (NodeState::Ready | NodeState::Running | NodeState::WaitingInput)) => {
                return Err(format!(
                    "node {node} is {s}, not finished; use sendMessage to reach an active node"
                ));
            }
            Some(s @ (NodeState::Pruned | NodeState::Skipped)) => {
                return Err(format!(
                    "node {node} is {s}; only COMPLETED or FAILED nodes can be revised"
                ));
            }
        }
        let attempt = n.attempt + 1;
        // max_attempts bounds the review loop: a node may be revised that many times
        // (activations by routing — retries after other stages failed — do not count).
        if let Some(max) = n.def.max_attempts
            && n.revisions >= max
        {
            return Err(format!(
                "node {node} was revised {} time(s), its max_attempts ({max}); no more revisions",
                n.revisions
            ));
        }
        let fatal = |e: Error| e.to_string();
        if self.core.status.is_final() {
            self.emit(EventKind::RunStatusChanged {
                status: RunStatus::Running,
                terminal: None,
                error: None,
            })
            .map_err(fatal)?;
        }
        self.emit(EventKind::NodeTransition {
            node: node.clone(),
            attempt,
            from: None,
            to: NodeState::Ready,
            reason: Some(super::core::REVISION_REASON.into()),
        })
        .map_err(fatal)?;
        self.emit(EventKind::MessageQueued {
            id,
            node,
            attempt,
            delivered: false,
        })
        .map_err(fatal)
    }

    fn prune(
        &mut self,
        node: &NodeId,
        reason: Option<String>,
    ) -> Result<std::result::Result<(), String>> {
        let o = match self.find(node) {
            Ok(o) => o,
            Err(e) => return Ok(Err(e)),
        };
        let root = &self.core.nodes[o];
        if root.pruned {
            return Ok(Err(format!("node {node} is already pruned")));
        }
        if let Some(s @ (NodeState::Completed | NodeState::Failed | NodeState::Skipped)) =
            root.state
            && !root.is_active()
            && !root.held
        {
            return Ok(Err(format!(
                "cannot prune {node}: it is {s}, and finished nodes are final"
            )));
        }
        let why = format!(
            "pruned{}",
            reason.map(|r| format!(": {r}")).unwrap_or_default()
        );
        let mut pruned = Vec::new();
        for c in self.core.subtree(o) {
            let n = &self.core.nodes[c];
            if n.pruned {
                continue;
            }
            let (cid, attempt) = (n.id.clone(), n.attempt);
            // A held child has no activation, whatever its previous one ended as.
            let state = if n.held { None } else { n.state };
            match state {
                Some(from @ (NodeState::Ready | NodeState::Running | NodeState::WaitingInput)) => {
                    if let Some(r) = self.running.remove(&c) {
                        r.stop();
                    }
                    self.emit(EventKind::NodeTransition {
                        node: cid,
                        attempt,
                        from: Some(from),
                        to: NodeState::Pruned,
                        reason: Some(why.clone()),
                    })?;
                }
                None => {
                    // Never reached: record an activation so later routes to it are dropped.
                    self.emit(EventKind::NodeTransition {
                        node: cid.clone(),
                        attempt: attempt + 1,
                        from: None,
                        to: NodeState::Ready,
                        reason: None,
                    })?;
                    self.emit(EventKind::NodeTransition {
                        node: cid,
                        attempt: attempt + 1,
                        from: Some(NodeState::Ready),
                        to: NodeState::Pruned,
                        reason: Some(why.clone()),
                    })?;
                }
                Some(_) => continue,
            }
            pruned.push(c);
        }
        // Held dependents of what was pruned are skipped.
        self.settle_dependents(&pruned)?;
        if !self.core.step_open {
            self.fire_collectors()?;
        }
        Ok(Ok(()))
    }

    fn inject(
        &mut self,
        nodes: Vec<trellis_protocol::InjectNode>,
        edges: Vec<trellis_protocol::EdgeSpec>,
    ) -> std::result::Result<(), String> {
        let graph = self.core.graph.clone();
        let mut new_ids = std::collections::HashSet::new();
        for n in &nodes {
            if self.core.ordinal(&n.id).is_some() || !new_ids.insert(n.id.clone()) {
                return Err(format!("node `{}` already exists", n.id));
            }
            if n.id.as_str().is_empty() {
                return Err("injected node ids must be non-empty".into());
            }
            if graph.template(&n.template).is_none() {
                let names: Vec<&str> = graph.templates.keys().map(String::as_str).collect();
                return Err(format!(
                    "unknown template `{}` (templates: {})",
                    n.template,
                    names.join(", ")
                ));
            }
            if let Some(p) = &n.parent {
                self.find(p)?;
            }
        }
        for e in &edges {
            for end in [&e.from, &e.to] {
                if !new_ids.contains(end) {
                    self.find(end)?;
                }
            }
            if let Some(Edge::Conditional { .. } | Edge::Outcome { .. }) = graph.edge(&e.from) {
                return Err(format!(
                    "node {} routes conditionally; injected edges must start at a node without conditional routing",
                    e.from
                ));
            }
        }
        let fatal = |e: Error| e.to_string();
        for n in &nodes {
            self.emit(EventKind::NodeAdded {
                node: n.id.clone(),
                template: n.template.clone(),
                parent: n.parent.clone(),
                input: n.input.clone(),
                after: Vec::new(),
            })
            .map_err(fatal)?;
        }
        for e in edges {
            self.emit(EventKind::EdgeAdded { edge: e }).map_err(fatal)?;
        }
        for n in nodes.iter().filter(|n| n.activate) {
            self.activate(&n.id, 0).map_err(fatal)?;
        }
        Ok(())
    }

    /// Activates the entry node of a new run.
    pub fn activate_entry(&mut self) -> Result<()> {
        let entry = self.core.graph.entry().clone();
        self.activate(&entry, 0)
    }
}
