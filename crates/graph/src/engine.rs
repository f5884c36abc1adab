//! Running graphs: start, resume, fork, commands, subscriptions.

mod core;
mod deps;
mod free;
mod group;
mod live;
mod route;

use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;
use tokio::sync::{broadcast, mpsc, oneshot};
use tokio::task::JoinHandle;
use trellis_protocol::{Command, Event, EventKind, NodeState, RunId, RunStatus, SubmissionId};

use self::core::RunCore;
use self::live::Live;
use crate::journal::{Commit, Durability, Journal};
pub(crate) use crate::outcome::{NodeView, RunOutcome};
use crate::spec::Graph;
use crate::{Error, Result};

/// Engine settings.
#[derive(Clone, Debug)]
pub struct EngineConfig {
    /// Commit pipelining (see [`Durability`]).
    pub durability: Durability,
    /// How often a live run polls the journal's command inbox (for commands sent by other
    /// processes, e.g. `trellis runs cancel`).
    pub inbox_poll: Duration,
    /// Capacity of each run's event broadcast, in batches.
    pub broadcast_capacity: usize,
}

impl Default for EngineConfig {
    fn default() -> Self {
        Self {
            durability: Durability::Async,
            inbox_poll: Duration::from_millis(250),
            broadcast_capacity: 128,
        }
    }
}

/// Runs graphs against a journal.
#[derive(Clone)]
pub struct Engine {
    journal: Arc<dyn Journal>,
    config: EngineConfig,
}

pub(crate) type CommandReply = oneshot::Sender<std::result::Result<(), String>>;

/// A command on its way to a live run: the command, its cause, and where to report whether it
/// applied.
pub(crate) type Sent = (Command, Option<SubmissionId>, Option<CommandReply>);

/// A run being executed by this process.
pub struct RunHandle {
    run: RunId,
    commands: mpsc::UnboundedSender<Sent>,
    events: broadcast::Sender<Arc<Vec<Event>>>,
    first: Option<broadcast::Receiver<Arc<Vec<Event>>>>,
    task: JoinHandle<Result<RunOutcome>>,
}

/// Where the run of `core` stands.
pub(crate) fn outcome_of(core: &RunCore) -> RunOutcome {
    let nodes = core
        .nodes
        .iter()
        .map(|n| NodeView {
            id: n.id.clone(),
            attempt: n.attempt,
            state: n.state,
            parent: n.parent.map(|p| core.nodes[p].id.clone()),
            result: (*n.result).clone(),
            error: n.error.clone(),
            interrupt: n
                .interrupt
                .clone()
                .filter(|_| n.state == Some(NodeState::WaitingInput)),
        })
        .collect();
    RunOutcome {
        run: core.run.clone(),
        status: core.status,
        terminal: core.terminal.clone(),
        error: core.error.clone(),
        steps: core.step,
        last_seq: core.last_seq,
        state: (*core.state).clone(),
        counters: (*core.counters).clone(),
        nodes,
        waiting: core.waiting(),
    }
}

impl Engine {
    /// An engine recording into `journal` with default settings.
    pub fn new(journal: Arc<dyn Journal>) -> Self {
        Self::with_config(journal, EngineConfig::default())
    }

    /// An engine with explicit settings.
    pub fn with_config(journal: Arc<dyn Journal>, config: EngineConfig) -> Self {
        Self { journal, config }
    }

    /// The journal.
    pub fn journal(&self) -> &Arc<dyn Journal> {
        &self.journal
    }

    /// Starts a new run of `graph` with `input` (an object of initial channel values) on its
    /// own task, returning a handle to command, observe and await it.
    pub fn start(&self, graph: Arc<Graph>, input: Value) -> Result<RunHandle> {
        Ok(self.spawn(self.prepare(RunId::new(), graph, input, None)?))
    }

    /// Like [`Engine::start`], with a run id chosen by the caller (so that resources named
    /// after the run — a git worktree, a branch — can exist before its first node runs).
    /// `run` must be fresh ([`RunId::new`]).
    pub fn start_as(&self, run: RunId, graph: Arc<Graph>, input: Value) -> Result<RunHandle> {
        self.start_as_by(run, graph, input, None)
    }

    /// Like [`Engine::start_as`], attributing the run to submission `cause`: every event its
    /// driver records carries it (those recorded for a command carry the command's own cause,
    /// see [`RunHandle::send_by`]).
    pub fn start_as_by(
        &self,
        run: RunId,
        graph: Arc<Graph>,
        input: Value,
        cause: Option<SubmissionId>,
    ) -> Result<RunHandle> {
        Ok(self.spawn(self.prepare(run, graph, input, cause)?))
    }

    /// Records a new run of `graph` — its `runStarted`, its entry made ready — without
    /// executing anything, and gives up its claim: another process resumes it
    /// ([`Engine::resume_by`]; a `trellis worker` takes runs created so by a server). The
    /// returned commit resolves when the run is durable.
    pub fn create_as_by(
        &self,
        run: RunId,
        graph: Arc<Graph>,
        input: Value,
        cause: Option<SubmissionId>,
    ) -> Result<Commit> {
        let mut live = self.prepare(run.clone(), graph, input, cause)?;
        let commit = live.record();
        self.journal.release(&run);
        Ok(commit)
    }

    /// Runs a new run of `graph` to its outcome on the calling task (no task hand-off, so a
    /// short run costs no cross-thread wake-ups). Dropping the future stops the run where it
    /// is; it stays resumable from the journal.
    pub async fn run(&self, graph: Arc<Graph>, input: Value) -> Result<RunOutcome> {
        self.prepare(RunId::new(), graph, input, None)?
            .drive()
            .await
    }

    fn prepare(
        &self,
        run: RunId,
        graph: Arc<Graph>,
        input: Value,
        cause: Option<SubmissionId>,
    ) -> Result<Live> {
        self.journal.claim_new(&run)?;
        let core = RunCore::new(run.clone(), graph.clone());
        let started = EventKind::RunStarted {
            graph: graph.name().to_owned(),
            fingerprint: graph.fingerprint().to_owned(),
            params: graph.params().clone(),
            input,
            fork: None,
        };
        let mut live = Live::new(core, self.journal.clone(), self.config.clone(), cause);
        live.emit(started)?;
        live.activate_entry()?;
        Ok(live)
    }

    /// Resumes a stored run (after a crash, a pause on an interrupt, or a restart), applying
    /// `commands` (answers, messages…) first. Activations that were RUNNING when the previous
    /// process stopped run again; COMPLETED ones never do.
    ///
    /// A run that has succeeded or failed resumes only to be revised: `commands` must hold a
    /// [`Command::Revise`] (which reopens it); otherwise, and for cancelled runs, this fails
    /// with [`Error::NotResumable`].
    pub fn resume(
        &self,
        graph: Arc<Graph>,
        run: &RunId,
        commands: Vec<Command>,
    ) -> Result<RunHandle> {
        self.resume_by(graph, run, commands, None)
    }

    /// Like [`Engine::resume`], attributing the resumption to submission `cause`: the events
    /// the driver records (from `runResumed` on) and those of `commands` carry it.
    pub fn resume_by(
        &self,
        graph: Arc<Graph>,
        run: &RunId,
        commands: Vec<Command>,
        cause: Option<SubmissionId>,
    ) -> Result<RunHandle> {
        let core = self.load(graph, run)?;
        let revised = commands.iter().any(|c| matches!(c, Command::Revise { .. }));
        match core.status {
            RunStatus::Succeeded | RunStatus::Failed if revised => {}
            RunStatus::Cancelled => {
                return Err(Error::NotResumable(format!(
                    "run {run} already cancelled; fork it to run again"
                )));
            }
            status if status.is_final() => {
                return Err(Error::NotResumable(format!(
                    "run {run} already {status}; fork it to run again, or revise one of its nodes"
                )));
            }
            _ => {}
        }
        self.journal.claim(run)?;
        let mut live = Live::new(
            core,
            self.journal.clone(),
            self.config.clone(),
            cause.clone(),
        );
        live.recover()?;
        for c in commands {
            live.command(c, cause.clone(), None)?;
        }
        Ok(self.spawn(live))
    }

    /// Creates a new run continuing from checkpoint `seq` of `parent` (a `runStarted` or
    /// `stepCompleted` event of that run's own log) and starts it. The parent is unchanged.
    pub fn fork(
        &self,
        graph: Arc<Graph>,
        parent: &RunId,
        seq: u64,
        commands: Vec<Command>,
    ) -> Result<RunHandle> {
        self.fork_by(graph, parent, seq, commands, None)
    }

    /// Like [`Engine::fork`], attributing the new run to submission `cause`: its events (and
    /// those of `commands`) carry it.
    pub fn fork_by(
        &self,
        graph: Arc<Graph>,
        parent: &RunId,
        seq: u64,
        commands: Vec<Command>,
        cause: Option<SubmissionId>,
    ) -> Result<RunHandle> {
        self.fork_as_by(RunId::new(), graph, parent, seq, commands, cause)
    }

    /// Like [`Engine::fork_by`], the new run's id chosen by the caller (whose handlers may
    /// need it before the graph is built, e.g. for the fork's worktree).
    pub fn fork_as_by(
        &self,
        run: RunId,
        graph: Arc<Graph>,
        parent: &RunId,
        seq: u64,
        commands: Vec<Command>,
        cause: Option<SubmissionId>,
    ) -> Result<RunHandle> {
        let mut segments = self.segments(parent)?;
        let own = segments.pop().unwrap_or_default();
        let Some(at) = own.iter().position(|e| e.seq == seq) else {
            return Err(Error::NotResumable(format!(
                "run {parent} has no event {seq} (last is {})",
                own.last().map_or(0, |e| e.seq)
            )));
        };
        if !own[at].kind.is_checkpoint() {
            let near: Vec<String> = own
                .iter()
                .filter(|e| e.kind.is_checkpoint())
                .map(|e| e.seq.to_string())
                .collect();
            return Err(Error::NotResumable(format!(
                "event {seq} of run {parent} is a {}, not a checkpoint; checkpoints are: {}",
                own[at].kind.name(),
                near.join(", ")
            )));
        }
        let cut = own[at + 1..]
            .iter()
            .position(|e| matches!(e.kind, EventKind::StepStarted { .. }))
            .map_or(own.len(), |p| at + 1 + p);
        segments.push(own[..cut].to_vec());
        let mut core = RunCore::replay(graph.clone(), run.clone(), &segments)?;
        core.last_seq = 0;
        core.status = RunStatus::Running;
        self.journal.claim(&run)?;
        let mut live = Live::new(
            core,
            self.journal.clone(),
            self.config.clone(),
            cause.clone(),
        );
        live.emit(EventKind::RunStarted {
            graph: graph.name().to_owned(),
            fingerprint: graph.fingerprint().to_owned(),
            params: graph.params().clone(),
            input: Value::Null,
            fork: Some(trellis_protocol::ForkRef {
                run: parent.clone(),
                seq,
            }),
        })?;
        // Free-running checkpoints may fall while handlers run: in the fork they start over.
        let running = live.core.running();
        live.requeue(&running, "re-run: forked while it was running")?;
        for c in commands {
            live.command(c, cause.clone(), None)?;
        }
        Ok(self.spawn(live))
    }

    /// Rebuilds a stored run's current state without executing anything.
    pub fn inspect(&self, graph: Arc<Graph>, run: &RunId) -> Result<RunOutcome> {
        Ok(outcome_of(&self.load(graph, run)?))
    }

    fn load(&self, graph: Arc<Graph>, run: &RunId) -> Result<RunCore> {
        let segments = self.segments(run)?;
        RunCore::replay(graph, run.clone(), &segments)
    }

    /// The run's log with its fork ancestry: the ancestors' prefixes first, its own log last.
    fn segments(&self, run: &RunId) -> Result<Vec<Vec<Event>>> {
        let own = self.journal.load(run)?;
        let fork = match own.first().map(|e| &e.kind) {
            Some(EventKind::RunStarted { fork, .. }) => fork.clone(),
            _ => {
                return Err(Error::Replay {
                    run: run.to_string(),
                    message: "log does not start with runStarted".into(),
                });
            }
        };
        let Some(f) = fork else { return Ok(vec![own]) };
        let mut segments = self.segments(&f.run)?;
        let parent = segments.pop().unwrap_or_default();
        let at = parent
            .iter()
            .position(|e| e.seq == f.seq)
            .ok_or_else(|| Error::Replay {
                run: run.to_string(),
                message: format!("fork point {} missing from parent run {}", f.seq, f.run),
            })?;
        let cut = parent[at + 1..]
            .iter()
            .position(|e| matches!(e.kind, EventKind::StepStarted { .. }))
            .map_or(parent.len(), |p| at + 1 + p);
        segments.push(parent[..cut].to_vec());
        segments.push(own);
        Ok(segments)
    }

    fn spawn(&self, live: Live) -> RunHandle {
        let run = live.core.run.clone();
        let commands = live.command_sender();
        let events = live.events.clone();
        let first = Some(events.subscribe());
        let task = tokio::spawn(live.drive());
        RunHandle {
            run,
            commands,
            events,
            first,
            task,
        }
    }
}

async fn send(
    commands: &mpsc::UnboundedSender<Sent>,
    command: Command,
    cause: Option<SubmissionId>,
) -> std::result::Result<(), String> {
    let (tx, rx) = oneshot::channel();
    commands
        .send((command, cause, Some(tx)))
        .map_err(|_| "the run is no longer executing in this process".to_string())?;
    rx.await
        .unwrap_or_else(|_| Err("the run stopped before handling the command".into()))
}

/// Sends commands to a run executing in this process (see [`RunHandle::commands`]).
#[derive(Clone, Debug)]
pub struct RunCommands {
    commands: mpsc::UnboundedSender<Sent>,
}

impl RunCommands {
    /// Like [`RunHandle::send_by`].
    pub async fn send_by(
        &self,
        command: Command,
        cause: Option<SubmissionId>,
    ) -> std::result::Result<(), String> {
        send(&self.commands, command, cause).await
    }
}

impl RunHandle {
    /// The run's id.
    pub fn id(&self) -> &RunId {
        &self.run
    }

    /// Sends a command; resolves once the run has recorded it, with the refusal reason if it
    /// could not apply. What it records has no cause (see [`RunHandle::send_by`]).
    pub async fn send(&self, command: Command) -> std::result::Result<(), String> {
        self.send_by(command, None).await
    }

    /// Like [`RunHandle::send`], attributing the command to submission `cause`: its
    /// `commandReceived` and every event it leads to while it is handled (messages queued,
    /// transitions, a refusal…) carry it.
    pub async fn send_by(
        &self,
        command: Command,
        cause: Option<SubmissionId>,
    ) -> std::result::Result<(), String> {
        send(&self.commands, command, cause).await
    }

    /// A cloneable sender of commands to this run, usable while [`RunHandle::wait`] owns the
    /// handle.
    pub fn commands(&self) -> RunCommands {
        RunCommands {
            commands: self.commands.clone(),
        }
    }

    /// Events from the start of the run (first call) or from now on (later calls), in
    /// committed batches. A receiver that falls behind by more than the broadcast capacity
    /// gets `Lagged` and should re-read the journal.
    pub fn subscribe(&mut self) -> broadcast::Receiver<Arc<Vec<Event>>> {
        self.first.take().unwrap_or_else(|| self.events.subscribe())
    }

    /// Something that stops this run where it is, usable while [`RunHandle::wait`] owns the
    /// handle.
    pub fn stopper(&self) -> RunStopper {
        RunStopper(self.task.abort_handle())
    }

    /// Waits for the run to finish or pause; [`Error::Stopped`] if it was stopped.
    pub async fn wait(self) -> Result<RunOutcome> {
        match self.task.await {
            Ok(r) => r,
            Err(e) if e.is_cancelled() => Err(Error::Stopped),
            Err(e) => Err(Error::Task(e.to_string())),
        }
    }
}

/// Stops a run executing in this process where it is, as the process stopping would (see
/// [`RunHandle::stopper`]).
#[derive(Clone, Debug)]
pub struct RunStopper(tokio::task::AbortHandle);

impl RunStopper {
    /// Stops the run: its driver is dropped at its next await point, so nothing more is
    /// recorded — a handler cut short by the stop is not recorded as failing — its handlers
    /// are stopped and its claim released (batches already handed to the journal still
    /// commit). The run resumes from its log like one whose process died
    /// ([`Engine::resume`]). [`RunHandle::wait`] then returns [`Error::Stopped`].
    pub fn stop(&self) {
        self.0.abort();
    }
}
