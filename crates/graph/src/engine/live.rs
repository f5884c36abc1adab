//! The live driver: executes steps, records events, flushes them to the journal and publishes
//! them once committed.

use std::collections::VecDeque;

use rustc_hash::FxHashMap;
use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::task::Poll;

use futures::FutureExt;
use futures::future::BoxFuture;
use futures::stream::{FuturesUnordered, StreamExt};
use tokio::sync::{broadcast, mpsc};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use trellis_protocol::{Event, EventKind, NodeState, RunStatus, SubmissionId};

use super::core::RunCore;
use super::{EngineConfig, RunOutcome, Sent, outcome_of};
use crate::handler::{Mailbox, MailboxSender, NodeContext, NodeError, NodeOutput, Outcome};
use crate::journal::{Batch, Commit, Durability, Journal, RunSummary};
use crate::spec::{NodeKind, Scheduling};
use crate::{Error, Result};

pub(super) type Done = (usize, u32, Finished);

pub(super) enum Finished {
    /// Boxed: a `NodeOutput` is large (more so with serde_json's `preserve_order`, which the
    /// ACP crate turns on for the whole workspace), the other variants small.
    Output(Box<std::result::Result<NodeOutput, NodeError>>),
    Panicked(String),
    Aborted,
}

/// A handler that has started and not finished. Dropping it closes the mailbox; cancelling
/// it fires the handler's token and makes its in-flight future resolve as aborted.
pub(super) struct Running {
    pub mailbox: MailboxSender,
    pub cancel: CancellationToken,
}

impl Running {
    /// Stops the handler (pruning, run cancellation).
    pub fn stop(self) {
        self.cancel.cancel();
    }
}

type HandlerFuture = BoxFuture<'static, std::result::Result<NodeOutput, NodeError>>;

pub(crate) struct Live {
    pub core: RunCore,
    pub(super) journal: Arc<dyn Journal>,
    pub(super) config: EngineConfig,
    buffer: Vec<Event>,
    pub events: broadcast::Sender<Arc<Vec<Event>>>,
    pub(super) unpublished: VecDeque<(Arc<Vec<Event>>, Commit)>,
    cmd_tx: mpsc::UnboundedSender<Sent>,
    pub(super) cmd_rx: mpsc::UnboundedReceiver<Sent>,
    pub(super) inflight: FuturesUnordered<BoxFuture<'static, Done>>,
    pub(super) running: FxHashMap<usize, Running>,
    pub(super) next_inbox: Instant,
    /// Fires when another process queued commands for the run ([`Journal::inbox_signal`]).
    inbox_signal: Option<Arc<tokio::sync::Notify>>,
    /// Timestamp given to recorded events, read from the clock at every point where the
    /// driver resumes work (step start, a handler finishing, a command, end of step) rather
    /// than once per event.
    now: i64,
    /// Reused buffer for the activations of a step.
    pub(super) queue: VecDeque<usize>,
    /// The submission recorded events are attributed to: the one that started or resumed
    /// the run, or — while a command is handled — the command's.
    pub(super) cause: Option<SubmissionId>,
    /// Set when the run continued with another graph: the driver starts over with it (its
    /// scheduling may differ).
    continued: bool,
}

pub(crate) use trellis_protocol::now_ms;

impl Live {
    /// A driver for `core`, attributing what it records to `cause` (see [`Live::command`]
    /// for commands).
    pub fn new(
        core: RunCore,
        journal: Arc<dyn Journal>,
        config: EngineConfig,
        cause: Option<SubmissionId>,
    ) -> Self {
        let (events, _) = broadcast::channel(config.broadcast_capacity.max(1));
        let (cmd_tx, cmd_rx) = mpsc::unbounded_channel();
        let next_inbox = Instant::now() + config.inbox_poll;
        let inbox_signal = journal.inbox_signal(&core.run);
        // A run of quick steps records ~7 events per node before its first flush.
        let buffer = Vec::with_capacity((core.graph.nodes.len() * 8).clamp(64, 1024));
        Self {
            core,
            journal,
            config,
            buffer,
            events,
            unpublished: VecDeque::new(),
            cmd_tx,
            cmd_rx,
            inflight: FuturesUnordered::new(),
            running: FxHashMap::default(),
            next_inbox,
            inbox_signal,
            now: now_ms(),
            queue: VecDeque::new(),
            cause,
            continued: false,
        }
    }

    pub fn command_sender(&self) -> mpsc::UnboundedSender<Sent> {
        self.cmd_tx.clone()
    }

    /// Makes room for `n` more events in the unflushed batch (one allocation instead of
    /// repeated doubling when a fan-out is about to record thousands).
    pub fn reserve_events(&mut self, n: usize) {
        self.buffer.reserve(n);
    }

    /// Reads the clock for the events recorded next.
    pub fn tick(&mut self) {
        self.now = now_ms();
    }

    /// Records an event: applies it to the run state, then buffers it for the next flush.
    pub fn emit(&mut self, kind: EventKind) -> Result<()> {
        let event = Event {
            run: self.core.run.clone(),
            seq: self.core.last_seq + 1,
            ts: self.now,
            cause: self.cause.clone(),
            kind,
        };
        self.core.apply(&event)?;
        self.buffer.push(event);
        Ok(())
    }

    /// Hands everything recorded since the last flush to the journal as one atomic batch.
    pub(super) fn flush(&mut self) {
        if self.buffer.is_empty() {
            return;
        }
        // The next batch is likely as long as this one: keep the capacity, so recording a
        // long burst of quick steps does not copy the events again and again while growing.
        let capacity = self.buffer.len();
        let events = Arc::new(std::mem::replace(
            &mut self.buffer,
            Vec::with_capacity(capacity),
        ));
        let core = &self.core;
        let summary = RunSummary {
            graph: core.graph.name().to_owned(),
            status: core.status,
            step: core.step,
            last_seq: core.last_seq,
            terminal: core.terminal.clone(),
            error: core.error.clone(),
            fork: core.fork.clone(),
            created_ts: core.created_ts,
            updated_ts: now_ms(),
        };
        let commit = self.journal.append(Batch {
            run: core.run.clone(),
            events: events.clone(),
            summary,
        });
        self.unpublished.push_back((events, commit));
    }

    /// Flushes what was recorded and hands over its commit, for a run that is recorded and
    /// not driven ([`super::Engine::create_as_by`]).
    pub(super) fn record(&mut self) -> Commit {
        self.flush();
        self.unpublished
            .pop_front()
            .map_or_else(|| Commit::done(Ok(())), |(_, commit)| commit)
    }

    /// Waits until every flushed batch is durable, publishing each as it commits.
    pub(super) async fn settle(&mut self) -> Result<()> {
        while let Some((events, commit)) = self.unpublished.pop_front() {
            commit.await?;
            let _ = self.events.send(events);
        }
        Ok(())
    }

    /// Waits for the next thing to happen — a command (handled here), a handler finishing
    /// (returned), a batch committing (published here) or the inbox falling due (polled
    /// here) — after making everything recorded so far durable.
    pub(super) async fn wait(&mut self) -> Result<Option<Done>> {
        self.flush();
        self.publish_committed()?;
        let has_inbox = self.journal.has_inbox();
        let inbox_at = self.next_inbox;
        tokio::select! {
            biased;
            Some((cmd, cause, reply)) = self.cmd_rx.recv() => self.command(cmd, cause, reply)?,
            Some(done) = self.inflight.next() => return Ok(Some(done)),
            r = head_commit(&mut self.unpublished), if !self.unpublished.is_empty() => {
                r?;
                if let Some((events, _)) = self.unpublished.pop_front() {
                    let _ = self.events.send(events);
                }
            }
            _ = tokio::time::sleep_until(inbox_at), if has_inbox => self.poll_inbox()?,
            () = signalled(self.inbox_signal.as_deref()), if has_inbox => self.poll_inbox()?,
        }
        Ok(None)
    }

    /// Publishes the batches already committed, without waiting.
    pub(super) fn publish_committed(&mut self) -> Result<()> {
        while let Some((_, commit)) = self.unpublished.front_mut() {
            match commit.now_or_never() {
                None => break,
                Some(r) => {
                    r?;
                    if let Some((events, _)) = self.unpublished.pop_front() {
                        let _ = self.events.send(events);
                    }
                }
            }
        }
        Ok(())
    }

    /// Runs until the run finishes or pauses, then reports where it stands.
    pub async fn drive(mut self) -> Result<RunOutcome> {
        let result = loop {
            let result = match self.core.graph.scheduling() {
                Scheduling::Steps => self.drive_steps().await,
                Scheduling::Free => self.drive_free().await,
            };
            if !(result.is_ok() && std::mem::take(&mut self.continued)) {
                break result;
            }
        };
        let result = match result {
            Ok(()) => Ok(()),
            // A definition-level failure (router bug, reducer error, step limit) ends the run
            // as FAILED with the reason; journal failures end the task with the error.
            Err(Error::Journal(e)) => Err(Error::Journal(e)),
            Err(e) => self.fail_run(e.to_string()),
        };
        let flushed = match result {
            Ok(()) => {
                self.flush();
                self.settle().await
            }
            Err(e) => Err(e),
        };
        self.stop_handlers();
        flushed.map(|()| outcome_of(&self.core))
    }

    fn fail_run(&mut self, error: String) -> Result<()> {
        self.tick();
        self.stop_all("run failed")?;
        self.emit(EventKind::RunStatusChanged {
            status: RunStatus::Failed,
            terminal: None,
            error: Some(error),
        })
    }

    async fn drive_steps(&mut self) -> Result<()> {
        loop {
            self.tick();
            self.take_commands()?;
            if self.core.status.is_final() {
                return Ok(());
            }
            if !self.core.step_open {
                if !self.core.has_ready() {
                    if self.release_held()? {
                        continue;
                    }
                    if self.continue_graph().await? {
                        return Ok(());
                    }
                    return self.conclude();
                }
                if self.core.step >= self.core.graph.max_steps {
                    return Err(Error::StepLimit(self.core.graph.max_steps));
                }
                self.emit(EventKind::StepStarted {
                    step: self.core.step + 1,
                })?;
            }
            self.run_step().await?;
            if self.core.status.is_final() {
                return Ok(());
            }
            self.end_step()?;
            if self.config.durability == Durability::Sync {
                self.flush();
                self.settle().await?;
            }
        }
    }

    /// Nothing is left to run and the run would succeed: when its graph has a continuation
    /// that names a next graph, records `runContinued`, activates the new graph's entry and
    /// returns true (the driver then starts over with that graph).
    pub(super) async fn continue_graph(&mut self) -> Result<bool> {
        let Some(next) = self.core.graph.continuation.clone() else {
            return Ok(false);
        };
        if self.ending().0 != RunStatus::Succeeded {
            return Ok(false);
        }
        // What the first graph decided is committed before the next graph is built.
        self.flush();
        let Some((graph, input)) = next
            .next(outcome_of(&self.core))
            .await
            .map_err(Error::Continuation)?
        else {
            return Ok(false);
        };
        self.tick();
        let kind = EventKind::RunContinued {
            graph: graph.name().to_owned(),
            fingerprint: graph.fingerprint().to_owned(),
            params: graph.params().clone(),
            input,
        };
        self.core.next_graph = Some(graph);
        self.emit(kind)?;
        self.activate_entry()?;
        self.continued = true;
        Ok(true)
    }

    /// Nothing is left to run: the run waits for input, failed (a failure with nowhere to
    /// route) or succeeded.
    pub(super) fn conclude(&mut self) -> Result<()> {
        let (status, error) = self.ending();
        if self.core.status != status {
            self.emit(EventKind::RunStatusChanged {
                status,
                terminal: None,
                error,
            })?;
        }
        Ok(())
    }

    /// How the run ends when nothing is left to run: waiting for input, failed (a failure
    /// with nowhere to route, with why) or succeeded.
    fn ending(&self) -> (RunStatus, Option<String>) {
        let waiting = self
            .core
            .nodes
            .iter()
            .any(|n| n.state == Some(NodeState::WaitingInput));
        if waiting {
            (RunStatus::WaitingInput, None)
        } else if let Some(e) = self.core.unrouted_failure() {
            (RunStatus::Failed, Some(e))
        } else {
            (RunStatus::Succeeded, None)
        }
    }

    /// Takes commands queued locally and, when due, from the journal's inbox.
    pub(super) fn take_commands(&mut self) -> Result<()> {
        while let Ok((cmd, cause, reply)) = self.cmd_rx.try_recv() {
            self.command(cmd, cause, reply)?;
        }
        if self.journal.has_inbox() && Instant::now() >= self.next_inbox {
            self.poll_inbox()?;
        }
        Ok(())
    }

    pub(super) fn poll_inbox(&mut self) -> Result<()> {
        self.next_inbox = Instant::now() + self.config.inbox_poll;
        // The inbox keeps no submission ids: these commands have no cause.
        for cmd in self.journal.take_commands(&self.core.run)? {
            self.command(cmd, None, None)?;
        }
        Ok(())
    }

    pub(super) async fn run_step(&mut self) -> Result<()> {
        let step = self.core.step;
        let mut queue = std::mem::take(&mut self.queue);
        queue.clear();
        self.core.take_ready(step, &mut queue);
        let result = self.run_queue(&mut queue).await;
        self.queue = queue;
        result
    }

    async fn run_queue(&mut self, queue: &mut VecDeque<usize>) -> Result<()> {
        let state = self.core.state.clone();
        let counters = self.core.counters.clone();
        let attempts = self.core.attempts.clone();
        let limit = self.core.graph.concurrency;
        loop {
            while self.running.len() < limit
                && let Some(o) = queue.pop_front()
            {
                if self.core.nodes[o].state == Some(NodeState::Ready) {
                    let attempt = self.core.nodes[o].attempt;
                    match self.start(o, &state, &counters, &attempts)? {
                        Started::Finished(f) => self.finish((o, attempt, f))?,
                        Started::Handler(fut, cancel) => {
                            self.poll_first(o, attempt, fut, cancel).await?;
                        }
                    }
                }
            }
            if self.inflight.is_empty() {
                if queue.is_empty() {
                    return Ok(());
                }
                continue;
            }
            // Fast path: handlers that finish without waiting are collected without flushing,
            // so a burst of quick steps costs one commit.
            if let Some(Some(done)) = self.inflight.next().now_or_never() {
                self.finish(done)?;
                continue;
            }
            if let Some(done) = self.wait().await? {
                self.finish(done)?;
            }
            if self.core.status.is_final() {
                return Ok(());
            }
        }
    }

    /// Marks activation `o` RUNNING and either finishes it on the spot (nodes without a
    /// handler) or hands back its handler's future.
    pub(super) fn start(
        &mut self,
        o: usize,
        state: &Arc<crate::State>,
        counters: &Arc<std::collections::BTreeMap<String, i64>>,
        attempts: &Arc<crate::handler::Attempts>,
    ) -> Result<Started> {
        let attempt = self.core.nodes[o].attempt;
        let id = self.core.nodes[o].id.clone();
        self.emit(EventKind::NodeTransition {
            node: id.clone(),
            attempt,
            from: Some(NodeState::Ready),
            to: NodeState::Running,
            reason: None,
        })?;
        let n = &self.core.nodes[o];
        let children = match &n.def.kind {
            NodeKind::Collector { of, policy } => {
                self.core.ordinal(of).map(|s| self.core.collect(s, *policy))
            }
            _ => None,
        };
        let Some(handler) = &n.def.handler else {
            let out = match children {
                Some((children, agg)) => {
                    let result = serde_json::json!({ "aggregate": agg, "children": children });
                    if agg.failed {
                        NodeOutput::failure("failure policy").result(result)
                    } else {
                        NodeOutput::success().result(result)
                    }
                }
                None => NodeOutput::success(),
            };
            return Ok(Started::Finished(Finished::Output(Box::new(Ok(out)))));
        };
        let (mailbox, sender) = Mailbox::pair();
        let cancel = CancellationToken::new();
        let ctx = NodeContext {
            run: self.core.run.clone(),
            node: id,
            attempt,
            step: self.core.step,
            input: n.input.clone(),
            state: state.clone(),
            counters: counters.clone(),
            attempts: attempts.clone(),
            messages: n.inbox.clone(),
            mailbox,
            resume: n.resume.clone(),
            previous: (attempt > 1).then(|| (*n.result).clone()),
            children,
            cancel: cancel.clone(),
        };
        let fut = handler.call(ctx);
        self.running.insert(
            o,
            Running {
                mailbox: sender,
                cancel: cancel.clone(),
            },
        );
        Ok(Started::Handler(fut, cancel))
    }

    /// Polls a handler once in place: most handlers finish without waiting, and those are
    /// recorded without the cost of a task. The others join the in-flight set, racing their
    /// cancellation token.
    pub(super) async fn poll_first(
        &mut self,
        o: usize,
        attempt: u32,
        mut fut: HandlerFuture,
        cancel: CancellationToken,
    ) -> Result<()> {
        let first = std::future::poll_fn(|cx| {
            Poll::Ready(
                match std::panic::catch_unwind(AssertUnwindSafe(|| fut.as_mut().poll(cx))) {
                    Ok(Poll::Ready(out)) => Some(Finished::Output(Box::new(out))),
                    Ok(Poll::Pending) => None,
                    Err(panic) => Some(Finished::Panicked(panic_text(panic))),
                },
            )
        })
        .await;
        if let Some(f) = first {
            return self.finish((o, attempt, f));
        }
        self.inflight.push(Box::pin(async move {
            let f = tokio::select! {
                biased;
                () = cancel.cancelled() => Finished::Aborted,
                r = AssertUnwindSafe(fut).catch_unwind() => match r {
                    Ok(out) => Finished::Output(Box::new(out)),
                    Err(panic) => Finished::Panicked(panic_text(panic)),
                },
            };
            (o, attempt, f)
        }));
        Ok(())
    }

    /// Stops every running handler (the run ended or the driver is going away).
    fn stop_handlers(&mut self) {
        for (_, r) in self.running.drain() {
            r.stop();
        }
    }

    pub(super) fn finish(&mut self, (o, attempt, finished): Done) -> Result<()> {
        self.tick();
        let n = &self.core.nodes[o];
        if n.attempt != attempt || n.state != Some(NodeState::Running) {
            return Ok(()); // pruned or cancelled meanwhile
        }
        self.running.remove(&o);
        let node = n.id.clone();
        let out = match finished {
            Finished::Aborted => return Ok(()),
            Finished::Output(out) => match *out {
                Ok(mut out) => match self.check_output(o, &out) {
                    Ok(revise) => {
                        out.revise = revise;
                        out
                    }
                    Err(e) => return self.record_error(node, attempt, e),
                },
                Err(e) => return self.record_error(node, attempt, e.message),
            },
            Finished::Panicked(p) => {
                return self.record_error(node, attempt, format!("handler panicked: {p}"));
            }
        };
        match out.outcome {
            Outcome::Interrupt { interrupt, scratch } => {
                self.emit(EventKind::InterruptRaised {
                    node: node.clone(),
                    attempt,
                    interrupt,
                    scratch,
                })?;
                self.emit(EventKind::NodeTransition {
                    node,
                    attempt,
                    from: Some(NodeState::Running),
                    to: NodeState::WaitingInput,
                    reason: None,
                })
            }
            outcome => {
                let failure = outcome == Outcome::Failure;
                let spawn_after = super::core::spawn_after(&out.spawns, &out.spawn_after);
                self.emit(EventKind::NodeOutput {
                    node: node.clone(),
                    attempt,
                    failure,
                    result: Arc::new(out.result),
                    error: None,
                    writes: out.writes,
                    counters: out.counters,
                    spawns: out.spawns.into(),
                    spawn_after,
                    revise: out.revise,
                })?;
                let to = if failure {
                    NodeState::Failed
                } else {
                    NodeState::Completed
                };
                self.emit(EventKind::NodeTransition {
                    node,
                    attempt,
                    from: Some(NodeState::Running),
                    to,
                    reason: None,
                })
            }
        }
    }

    fn record_error(
        &mut self,
        node: trellis_protocol::NodeId,
        attempt: u32,
        error: String,
    ) -> Result<()> {
        self.emit(EventKind::NodeOutput {
            node: node.clone(),
            attempt,
            failure: true,
            result: Arc::default(),
            error: Some(error),
            writes: Vec::new(),
            counters: Vec::new(),
            spawns: Arc::from([]),
            spawn_after: Default::default(),
            revise: Vec::new(),
        })?;
        self.emit(EventKind::NodeTransition {
            node,
            attempt,
            from: Some(NodeState::Running),
            to: NodeState::Failed,
            reason: None,
        })
    }

    /// Rejects writes to undeclared channels, ill-typed writes, unknown templates, bad spawn
    /// dependencies and revisions the node may not ask for, so a handler bug fails that node
    /// with a precise message instead of corrupting the step. Returns the ids of the
    /// dependencies to revise.
    fn check_output(
        &self,
        o: usize,
        out: &NodeOutput,
    ) -> std::result::Result<Vec<trellis_protocol::NodeId>, String> {
        let graph = &self.core.graph;
        for (channel, value) in &out.writes {
            let Some(reducer) = graph.channel(channel) else {
                let hint = crate::spec::nearest(channel, graph.channel_names())
                    .map(|n| format!("; did you mean `{n}`?"))
                    .unwrap_or_default();
                let declared: Vec<&str> = graph.channel_names().collect();
                return Err(format!(
                    "wrote undeclared channel `{channel}` (declared: {}){hint}",
                    declared.join(", ")
                ));
            };
            reducer
                .precheck(value)
                .map_err(|e| format!("write to channel `{channel}`: {e}"))?;
        }
        for (key, template, _) in &out.spawns {
            if graph.template(template).is_none() {
                let names: Vec<&str> = graph.templates.keys().map(String::as_str).collect();
                return Err(format!(
                    "spawned `{key}` from unknown template `{template}` (templates: {})",
                    names.join(", ")
                ));
            }
            if key.is_empty() || key.contains('/') {
                return Err(format!(
                    "spawn key `{key}` must be non-empty and must not contain `/`"
                ));
            }
        }
        self.check_deps(o, out)
    }

    /// Cancels every running handler and prunes every unfinished activation.
    pub(super) fn stop_all(&mut self, reason: &str) -> Result<()> {
        for o in 0..self.core.nodes.len() {
            let n = &self.core.nodes[o];
            if n.is_active() {
                let (node, attempt, from) = (n.id.clone(), n.attempt, n.state);
                if let Some(r) = self.running.remove(&o) {
                    r.stop();
                }
                self.emit(EventKind::NodeTransition {
                    node,
                    attempt,
                    from,
                    to: NodeState::Pruned,
                    reason: Some(reason.to_owned()),
                })?;
            }
        }
        Ok(())
    }

    /// After loading a run: re-queue activations that were RUNNING when the last process
    /// stopped (their handlers run again) and mark the run as running.
    pub fn recover(&mut self) -> Result<()> {
        self.tick();
        let requeued = self.core.running();
        let ids = requeued
            .iter()
            .map(|&o| self.core.nodes[o].id.clone())
            .collect();
        let was = self.core.status;
        self.emit(EventKind::RunResumed { requeued: ids })?;
        // Clients that follow status changes only (a status line, say) see the paused run
        // running again; a final run stays final until a revision reopens it.
        if was != RunStatus::Running && !was.is_final() {
            self.emit(EventKind::RunStatusChanged {
                status: RunStatus::Running,
                terminal: None,
                error: None,
            })?;
        }
        self.requeue(&requeued, "re-run: the process running it stopped")
    }

    /// Re-queues activations left RUNNING by the log (`RUNNING → READY`): their handlers run
    /// again.
    pub fn requeue(&mut self, activations: &[usize], reason: &str) -> Result<()> {
        for &o in activations {
            let n = &self.core.nodes[o];
            self.emit(EventKind::NodeTransition {
                node: n.id.clone(),
                attempt: n.attempt,
                from: Some(NodeState::Running),
                to: NodeState::Ready,
                reason: Some(reason.to_owned()),
            })?;
        }
        Ok(())
    }
}

impl Drop for Live {
    /// Runs when the driver finishes — or is dropped mid-run (a dropped `Engine::run`
    /// future, a runtime shutting down): handlers are stopped and the claim released, so the
    /// run can be resumed.
    fn drop(&mut self) {
        self.stop_handlers();
        self.journal.release(&self.core.run);
    }
}

/// What starting an activation produced.
pub(super) enum Started {
    /// It finished on the spot (no handler).
    Finished(Finished),
    /// Its handler's future, with the activation's cancellation token.
    Handler(HandlerFuture, CancellationToken),
}

async fn head_commit(
    q: &mut VecDeque<(Arc<Vec<Event>>, Commit)>,
) -> std::result::Result<(), crate::JournalError> {
    match q.front_mut() {
        Some((_, commit)) => commit.await,
        None => std::future::pending().await,
    }
}

fn panic_text(p: Box<dyn std::any::Any + Send>) -> String {
    if let Some(s) = p.downcast_ref::<&str>() {
        (*s).to_owned()
    } else if let Some(s) = p.downcast_ref::<String>() {
        s.clone()
    } else {
        "unknown panic payload".into()
    }
}

/// Resolves when `signal` fires; never without one.
async fn signalled(signal: Option<&tokio::sync::Notify>) {
    match signal {
        Some(n) => n.notified().await,
        None => std::future::pending().await,
    }
}
