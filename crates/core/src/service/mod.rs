//! The runtime service: one object per workspace that owns every run and session executing
//! in this process, takes [`Op`]s and publishes [`ServiceEvent`](trellis_protocol::ServiceEvent)s (the queue pair of
//! codex-rs's `Codex::submit` / `next_event`). The CLI, `trellis serve`, `trellis acp` and
//! `trellis mcp` drive Trellis only through it.
//!
//! - [`Service::submit`] returns a [`SubmissionId`] at once; the op runs on its own task and
//!   its outcome is recorded on the workspace stream ([`WorkspaceEvent::OpCompleted`] /
//!   [`WorkspaceEvent::OpFailed`]). [`Service::call`] submits and waits for that outcome.
//! - [`Service::subscribe`] replays a stream from the store and continues live.
//! - Runs execute on their own engine tasks and channels on their own tasks: an error or a
//!   panic in one is reported on its stream and never stops the others.

mod bus;
mod channel;
mod clients;
mod discussion;
mod drive;
mod fanout;
mod orphans;
mod reads;
mod review;
mod runs;
mod sessions;
mod subscription;
mod worker;
mod workspace;

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard, Weak};
use std::time::Duration;

use serde_json::Value;
use tokio::sync::{broadcast, oneshot};
use tokio_util::sync::CancellationToken;
use trellis_protocol::{Op, RunId, SessionId, StreamId, SubmissionId, WorkspaceEvent};

pub use bus::{Bus, DEFAULT_DELTA_FLUSH, RecordOptions};
pub use drive::{DriveEnd, Followed, RunFrontEnd};
pub use fanout::LiveEvent;
pub use orphans::ResumedOrphan;
pub use sessions::SessionHub;
pub use subscription::{Delivered, Subscription};
pub use worker::{WorkerEvent, WorkerOptions};
pub use workspace::{McpServerConfig, workflow_names_in};

use trellis_runtime::Runtime;

pub use trellis_protocol::OpErrorKind;

/// What went wrong with an op, in words a user can act on.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct OpError {
    /// The kind of failure.
    pub kind: OpErrorKind,
    /// The message.
    pub message: String,
}

impl OpError {
    /// An error of `kind`.
    pub fn of(kind: OpErrorKind, message: impl Into<String>) -> Self {
        Self {
            kind,
            message: message.into(),
        }
    }

    /// Bad arguments.
    pub(crate) fn new(message: impl Into<String>) -> Self {
        Self::of(OpErrorKind::Invalid, message)
    }

    /// Not valid in the current state.
    pub(crate) fn conflict(message: impl Into<String>) -> Self {
        Self::of(OpErrorKind::Conflict, message)
    }

    /// Names something that does not exist.
    pub(crate) fn not_found(message: impl Into<String>) -> Self {
        Self::of(OpErrorKind::NotFound, message)
    }

    /// A bug or an environment failure.
    pub(crate) fn internal(message: impl Into<String>) -> Self {
        Self::of(OpErrorKind::Internal, message)
    }
}

fn store_kind(e: &trellis_store::Error) -> OpErrorKind {
    use trellis_store::Error as S;
    match e {
        S::RunNotFound(_) | S::NotFound { .. } | S::NoStore(_) => OpErrorKind::NotFound,
        S::AmbiguousRun { .. } => OpErrorKind::Invalid,
        S::Closed(_) => OpErrorKind::Unavailable,
        _ => OpErrorKind::Internal,
    }
}

impl From<trellis_store::Error> for OpError {
    fn from(e: trellis_store::Error) -> Self {
        Self::of(store_kind(&e), e.to_string())
    }
}

impl From<trellis_llm::Error> for OpError {
    fn from(e: trellis_llm::Error) -> Self {
        Self::of(OpErrorKind::Upstream, e.to_string())
    }
}

impl From<trellis_tools::Error> for OpError {
    fn from(e: trellis_tools::Error) -> Self {
        Self::internal(e.to_string())
    }
}

impl From<trellis_runtime::Error> for OpError {
    fn from(e: trellis_runtime::Error) -> Self {
        let kind = match &e {
            trellis_runtime::Error::Store(s) => store_kind(s),
            trellis_runtime::Error::Model(_) => OpErrorKind::Upstream,
            trellis_runtime::Error::Workflow(_) | trellis_runtime::Error::Resume(_) => {
                OpErrorKind::Invalid
            }
            trellis_runtime::Error::Agents(_) => OpErrorKind::Upstream,
            trellis_runtime::Error::Graph(trellis_graph::Error::NotResumable(_)) => {
                OpErrorKind::Conflict
            }
            trellis_runtime::Error::Graph(trellis_graph::Error::Input(_)) => OpErrorKind::Invalid,
            _ => OpErrorKind::Internal,
        };
        Self::of(kind, e.to_string())
    }
}

impl From<crate::records::Error> for OpError {
    fn from(e: crate::records::Error) -> Self {
        use crate::records::Error as R;
        let message = e.to_string();
        let kind = match e {
            R::Store(e) => store_kind(&e),
            R::Runtime(e) => Self::from(e).kind,
            R::Graph(e) => Self::from(trellis_runtime::Error::Graph(e)).kind,
            R::Rebuild { source, .. } => Self::from(*source).kind,
            R::Encode(_) | R::ToolGraph(_) => OpErrorKind::Internal,
        };
        Self::of(kind, message)
    }
}

pub(crate) type OpResult = Result<Value, OpError>;

/// Service settings.
#[derive(Clone, Copy, Debug)]
pub struct ServiceOptions {
    /// Recording of session and workspace events.
    pub record: RecordOptions,
    /// How often a subscription to a stream re-reads the store when nothing arrives live
    /// (runs executing in another process).
    pub poll: Duration,
    /// Where the runs this service starts, resumes and steers execute.
    pub dispatch: Dispatch,
}

impl Default for ServiceOptions {
    fn default() -> Self {
        Self {
            record: RecordOptions::default(),
            poll: Duration::from_millis(250),
            dispatch: Dispatch::Here,
        }
    }
}

/// Where a service's runs execute.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Dispatch {
    /// In this process (one machine; the default).
    #[default]
    Here,
    /// On `trellis worker` processes sharing the PostgreSQL store (team scale): a started
    /// run is recorded and marked runnable, and a command for a run that does not execute
    /// here is queued in the run's inbox and the run marked runnable, so the worker that
    /// runs it takes the command, or a worker claims the run and resumes it with it.
    Workers,
}

/// The runtime service of one workspace.
pub struct Service {
    pub(crate) runtime: Arc<Runtime>,
    records: crate::Records,
    pub(crate) bus: Bus,
    pub(crate) hub: Arc<SessionHub>,
    pub(crate) runs: Mutex<HashMap<RunId, runs::LiveRun>>,
    pub(crate) channels: Mutex<HashMap<SessionId, Arc<channel::Channel>>>,
    pub(crate) selections: Mutex<HashMap<RunId, trellis_tools::review::Selection>>,
    pub(crate) shutdown: CancellationToken,
    options: ServiceOptions,
    me: Weak<Service>,
}

/// Locks a mutex, recovering from a panic of another holder (the maps stay consistent: every
/// critical section is a single insert, remove or lookup).
pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl Service {
    /// Starts the service of `runtime`'s workspace on the current tokio runtime, after
    /// removing the node worktrees of every run the store does not list as unfinished
    /// ([`trellis_runtime::nodes::sweep`]).
    pub fn start(runtime: Arc<Runtime>, options: ServiceOptions) -> Arc<Self> {
        // Before any run resumes here: the node worktrees a crashed process left go.
        trellis_runtime::nodes::sweep(&runtime);
        let bus = Bus::start(runtime.store().clone(), options.record);
        let hub = Arc::new(SessionHub::new(bus.clone(), runtime.store().clone()));
        let records = crate::Records::new(runtime.store().clone());
        Arc::new_cyclic(|me| Self {
            runtime,
            records,
            bus,
            hub,
            runs: Mutex::new(HashMap::new()),
            channels: Mutex::new(HashMap::new()),
            selections: Mutex::new(HashMap::new()),
            shutdown: CancellationToken::new(),
            options,
            me: me.clone(),
        })
    }

    /// The workspace runtime (configuration, models, catalogs, store): the service's own;
    /// front-ends use its queries and ops.
    pub(crate) fn runtime(&self) -> &Arc<Runtime> {
        &self.runtime
    }

    /// The recorder and live broadcast.
    pub fn bus(&self) -> &Bus {
        &self.bus
    }

    pub(crate) fn arc(&self) -> Option<Arc<Service>> {
        self.me.upgrade()
    }

    /// Submits an op; it runs on its own task. Its outcome arrives on the workspace stream
    /// as `opCompleted` / `opFailed` carrying the returned id.
    pub fn submit(&self, op: Op) -> SubmissionId {
        self.submit_inner(op).0
    }

    /// Submits an op and waits for its outcome.
    pub async fn call(&self, op: Op) -> Result<Value, OpError> {
        let (_, rx) = self.submit_inner(op);
        rx.await.unwrap_or_else(|_| {
            Err(OpError::of(
                OpErrorKind::Unavailable,
                "the service stopped before the op finished",
            ))
        })
    }

    fn submit_inner(&self, op: Op) -> (SubmissionId, oneshot::Receiver<OpResult>) {
        let id = SubmissionId::new();
        let (tx, rx) = oneshot::channel();
        let Some(me) = self.arc() else {
            let _ = tx.send(Err(OpError::of(
                OpErrorKind::Unavailable,
                "the service is shutting down",
            )));
            return (id, rx);
        };
        let sub = id.clone();
        tokio::spawn(async move {
            let name = op.name();
            // The op runs on a task of its own so that a panic inside it is caught here
            // (as a JoinError) and reported instead of taking the service down.
            let worker = {
                let me = me.clone();
                let sub = sub.clone();
                tokio::spawn(async move { me.handle(sub, op).await })
            };
            let result = match worker.await {
                Ok(r) => r,
                Err(e) if e.is_panic() => Err(OpError::internal(format!(
                    "internal error: the {name} op panicked ({}); other runs are unaffected",
                    panic_text(e)
                ))),
                Err(_) => Err(OpError::of(
                    OpErrorKind::Unavailable,
                    format!("the {name} op was cancelled"),
                )),
            };
            me.bus.workspace(
                Some(sub.clone()),
                match &result {
                    Ok(v) => WorkspaceEvent::OpCompleted {
                        op: name.to_owned(),
                        result: v.clone(),
                    },
                    Err(e) => WorkspaceEvent::OpFailed {
                        op: name.to_owned(),
                        error: e.message.clone(),
                        kind: Some(e.kind),
                    },
                },
            );
            let _ = tx.send(result);
        });
        (id, rx)
    }

    async fn handle(self: Arc<Self>, sub: SubmissionId, op: Op) -> OpResult {
        match op {
            Op::StartRun {
                request,
                repo,
                workflow,
                include,
                skip,
                input,
                budgets,
                plan_only,
            } => {
                self.start_run(
                    sub,
                    runs::StartRun {
                        request,
                        repo,
                        workflow,
                        include,
                        skip,
                        input,
                        budgets,
                        plan_only,
                    },
                )
                .await
            }
            Op::ResumeRun {
                run,
                answers,
                messages,
                input,
            } => self.resume_run(sub, &run, answers, messages, input).await,
            Op::Answer { run, node, answer } => {
                let run = self.run_id(&run)?;
                self.deliver(
                    &sub,
                    &run,
                    trellis_protocol::Command::Answer { node, answer },
                )
                .await
            }
            Op::Approve {
                run,
                node,
                artifact,
                comment,
            } => self.approve(&sub, &run, node, artifact, comment).await,
            Op::RequestChanges {
                run,
                node,
                artifact,
                feedback,
            } => {
                self.request_changes(&sub, &run, node, artifact, feedback)
                    .await
            }
            Op::SendMessage { run, node, text } => {
                let run = self.run_id(&run)?;
                self.deliver(
                    &sub,
                    &run,
                    trellis_protocol::Command::SendMessage {
                        node,
                        message: trellis_protocol::Message::user(text),
                    },
                )
                .await
            }
            Op::Prune {
                run,
                node,
                subtree,
                reason,
            } => self.prune(&sub, &run, node, subtree, reason).await,
            Op::Inject { run, nodes, edges } => {
                let run = self.run_id(&run)?;
                self.deliver(
                    &sub,
                    &run,
                    trellis_protocol::Command::Inject { nodes, edges },
                )
                .await
            }
            Op::Cancel { run, reason } => self.cancel(&sub, &run, reason).await,
            Op::Review { run, action } => self.review(&sub, &run, action).await,
            Op::StartChannel { channel, message } => {
                self.start_channel(&sub, channel, message).await
            }
            Op::SessionMessage { session, text } => {
                self.session_message(&sub, &session, text).await
            }
            Op::CancelSession { session } => self.cancel_session(&session),
            Op::RecordClientSession { session } => self.record_client_session(session).await,
            Op::RecordClientTurn { turn } => self.record_client_turn(turn).await,
        }
    }

    /// The stored events of `stream` after `since`, then the live ones, with no gap and no
    /// duplicate at the seam.
    pub fn subscribe(&self, stream: StreamId, since: u64) -> Subscription {
        self.bus.subscribe(stream, since, Some(self.options.poll))
    }

    /// Every event of every stream from now on (no replay): for front-ends that show a whole
    /// run — its graph and its sessions — as it happens. Each [`LiveEvent`] derefs to its
    /// [`ServiceEvent`](trellis_protocol::ServiceEvent) and carries the instant it was published.
    pub fn live(&self) -> broadcast::Receiver<Arc<LiveEvent>> {
        self.bus.live()
    }

    /// Resolves a run id or unique prefix.
    pub fn run_id(&self, id_or_prefix: &str) -> Result<RunId, OpError> {
        Ok(self.records.run_id(id_or_prefix)?)
    }

    /// Whether `run` executes in this service now.
    pub fn is_live(&self, run: &RunId) -> bool {
        lock(&self.runs).contains_key(run)
    }

    /// Waits until `run` stops executing in this service (finished, paused on input, failed
    /// or cancelled). When it does not execute here: a service whose runs execute on
    /// workers ([`Dispatch::Workers`]) waits until the workers are done with it (not
    /// runnable, no lease: finished or parked waiting for input — `wait_workers`);
    /// any other returns at once.
    pub async fn wait_run(&self, run: &RunId) {
        let done = lock(&self.runs).get(run).map(|r| r.done.clone());
        if let Some(mut done) = done {
            let _ = done.wait_for(|d| *d).await;
        } else if self.options.dispatch == Dispatch::Workers {
            self.wait_workers(run).await;
        }
    }

    /// Waits until the workers are done with `run` ([`trellis_store::LeaseStore::with_workers`]
    /// is false), woken by the store's notifications of other processes' commits and
    /// re-reading at least every [`ServiceOptions::poll`]. A failed read ends the wait (the
    /// caller reads where the run stands next and reports what fails).
    async fn wait_workers(&self, run: &RunId) {
        let mut wake = self.runtime.store().watch();
        loop {
            let store = self.runtime.store().clone();
            let id = run.clone();
            let busy = blocking(move || Ok(store.with_workers(&id)?)).await;
            if !matches!(busy, Ok(true)) {
                return;
            }
            let poll = tokio::time::sleep(self.options.poll);
            match wake.as_mut() {
                Some(rx) => {
                    tokio::select! {
                        r = rx.recv() => {
                            if matches!(r, Err(broadcast::error::RecvError::Closed)) {
                                wake = None;
                            }
                        }
                        () = poll => {}
                    }
                }
                None => poll.await,
            }
        }
    }

    /// Stops everything: live runs stop where they are (resumable from the store), channel
    /// turns are cancelled, and recorded events are flushed.
    ///
    /// Each run's driver is stopped, and waited for, before anything else is: a model call
    /// or tool cut short by the shutdown (or by the runtime going away after it) must not be
    /// recorded as its stage failing — that would end the run, which `runs resume` then
    /// refuses. (Runs get no shutdown token: cancelling it first cuts nothing short.)
    pub async fn shutdown(&self) {
        self.shutdown.cancel();
        let runs: Vec<runs::LiveRun> = lock(&self.runs).drain().map(|(_, r)| r).collect();
        for r in &runs {
            r.stop();
        }
        for r in &runs {
            r.stopped().await;
        }
        for c in lock(&self.channels).values() {
            c.cancel();
        }
        // The last runs' `run_end` hooks finish (each within its timeout) and are recorded.
        self.runtime.hooks().settle().await;
        self.bus.flush().await;
        let _ = self.runtime.store().flush();
        // The MCP servers' child processes go with the service.
        self.runtime.mcp().shutdown();
    }
}

fn panic_text(e: tokio::task::JoinError) -> String {
    match e.try_into_panic() {
        Ok(p) => p
            .downcast_ref::<&str>()
            .map(|s| (*s).to_owned())
            .or_else(|| p.downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "no message".into()),
        Err(_) => "no message".into(),
    }
}

/// Runs `f` on the blocking pool (git and file work of review ops).
pub(crate) async fn blocking<T: Send + 'static>(
    f: impl FnOnce() -> Result<T, OpError> + Send + 'static,
) -> Result<T, OpError> {
    tokio::task::spawn_blocking(f)
        .await
        .map_err(|e| OpError::internal(format!("internal error: {e}")))?
}
