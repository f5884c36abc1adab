//! What a node's handler receives and returns, and what routers see.

use std::collections::{BTreeMap, VecDeque};
use std::future::Future;
use std::sync::{Arc, Mutex, MutexGuard};

use futures::future::BoxFuture;
use serde::Serialize;
use serde_json::Value;
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;
use trellis_protocol::{Answer, Interrupt, Message, NodeId, NodeState, RunId};

use crate::policy::FailurePolicy;
use crate::state::State;

/// A node's behaviour. Implemented for every `Fn(NodeContext) -> impl Future<Output =
/// Result<NodeOutput, NodeError>>`, so closures and `async fn`s can be handlers.
///
/// A handler must stop promptly when [`NodeContext::cancel`] fires (pruning, run
/// cancellation); the engine also drops its future at that point.
pub trait NodeHandler: Send + Sync + 'static {
    /// Runs the node once.
    fn call(&self, ctx: NodeContext) -> BoxFuture<'static, Result<NodeOutput, NodeError>>;
}

impl<F, Fut> NodeHandler for F
where
    F: Fn(NodeContext) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<NodeOutput, NodeError>> + Send + 'static,
{
    fn call(&self, ctx: NodeContext) -> BoxFuture<'static, Result<NodeOutput, NodeError>> {
        Box::pin(self(ctx))
    }
}

/// An error from a handler. The activation becomes FAILED with this text and routing follows
/// the failure path.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct NodeError {
    /// What went wrong.
    pub message: String,
}

impl NodeError {
    /// An error with this text.
    pub fn new(message: impl Into<String>) -> Self {
        Self {
            message: message.into(),
        }
    }
}

/// The answer and the handler's saved data when a node runs again after an interrupt.
#[derive(Clone, Debug, PartialEq)]
pub struct Resume {
    /// The submitted answer.
    pub answer: Answer,
    /// What the handler saved with [`NodeOutput::interrupt_with`].
    pub scratch: Value,
}

/// One child's outcome, as a collector sees it.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ChildResult {
    /// Child node id (`<spawner>/<key>`).
    pub node: NodeId,
    /// The spawn key.
    pub key: String,
    /// Final state of its latest activation.
    pub state: NodeState,
    /// Its attempts so far.
    pub attempt: u32,
    /// Its recorded result.
    pub result: Value,
    /// Its error, if it failed with one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// The verdict of a collector's failure policy over its non-pruned children.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Aggregate {
    /// The policy applied.
    pub policy: FailurePolicy,
    /// Whether the group failed.
    pub failed: bool,
    /// Non-pruned children.
    pub total: usize,
    /// How many of them failed.
    pub failures: usize,
    /// Children pruned (excluded from the verdict).
    pub pruned: usize,
}

/// The latest activation number of every node activated so far (look up by node id).
pub type Attempts = std::collections::HashMap<NodeId, u32, rustc_hash::FxBuildHasher>;

/// Everything a handler gets.
pub struct NodeContext {
    /// The run.
    pub run: RunId,
    /// This node.
    pub node: NodeId,
    /// Activation number (1 on the first execution).
    pub attempt: u32,
    /// The step this activation runs in.
    pub step: u64,
    /// Input given when the node was spawned or injected (`null` for static nodes).
    pub input: Value,
    /// Run state at the start of the step.
    pub state: Arc<State>,
    /// Named counters at the start of the step.
    pub counters: Arc<BTreeMap<String, i64>>,
    /// Attempts of every node so far.
    pub attempts: Arc<Attempts>,
    /// Messages buffered for this node before it started (oldest first).
    pub messages: Vec<Message>,
    /// Messages sent while it runs.
    pub mailbox: Mailbox,
    /// Set when the node runs again after answering its interrupt.
    pub resume: Option<Resume>,
    /// The previous activation's result (for retries), if any.
    pub previous: Option<Value>,
    /// For collectors: the children's outcomes in spawn order and the policy's verdict.
    pub children: Option<(Vec<ChildResult>, Aggregate)>,
    /// Fires when the activation is pruned or the run is cancelled.
    pub cancel: CancellationToken,
}

impl NodeContext {
    /// Messages that arrived while running, without waiting.
    pub fn drain_mailbox(&mut self) -> Vec<Message> {
        let mut out = Vec::new();
        while let Some(m) = self.mailbox.try_recv() {
            out.push(m);
        }
        out
    }

    /// A named counter's value (0 when never incremented).
    pub fn counter(&self, name: &str) -> i64 {
        self.counters.get(name).copied().unwrap_or(0)
    }
}

/// Messages sent to a RUNNING activation (such as a running agent's). Closed once
/// the activation finishes or is pruned.
#[derive(Debug)]
pub struct Mailbox {
    shared: Arc<MailboxShared>,
}

#[derive(Debug, Default)]
pub(crate) struct MailboxShared {
    queue: Mutex<MailboxQueue>,
    notify: Notify,
}

#[derive(Debug, Default)]
struct MailboxQueue {
    messages: VecDeque<Message>,
    closed: bool,
}

impl MailboxShared {
    fn lock(&self) -> MutexGuard<'_, MailboxQueue> {
        // A panic while holding this lock cannot leave the queue inconsistent.
        self.queue.lock().unwrap_or_else(|p| p.into_inner())
    }
}

impl Mailbox {
    /// A mailbox and the engine's side of it.
    pub(crate) fn pair() -> (Self, MailboxSender) {
        let shared = Arc::new(MailboxShared::default());
        (
            Self {
                shared: shared.clone(),
            },
            MailboxSender { shared },
        )
    }

    /// Waits for the next message; `None` once the activation is over and the queue is empty.
    pub async fn recv(&mut self) -> Option<Message> {
        loop {
            {
                let mut q = self.shared.lock();
                if let Some(m) = q.messages.pop_front() {
                    return Some(m);
                }
                if q.closed {
                    return None;
                }
            }
            // `notify_one` stores a permit when nobody waits, so a message sent between the
            // check above and this await is not missed.
            self.shared.notify.notified().await;
        }
    }

    /// The next message if one is queued, without waiting.
    pub fn try_recv(&mut self) -> Option<Message> {
        self.shared.lock().messages.pop_front()
    }
}

/// The engine's side of a [`Mailbox`]; closes it when dropped.
#[derive(Debug)]
pub(crate) struct MailboxSender {
    shared: Arc<MailboxShared>,
}

impl MailboxSender {
    /// Queues a message and wakes the handler if it waits.
    pub fn send(&self, message: Message) {
        self.shared.lock().messages.push_back(message);
        self.shared.notify.notify_one();
    }
}

impl Drop for MailboxSender {
    fn drop(&mut self) {
        self.shared.lock().closed = true;
        self.shared.notify.notify_one();
    }
}

/// What a handler decided.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Outcome {
    Success,
    Failure,
    Interrupt {
        interrupt: Interrupt,
        scratch: Value,
    },
}

/// A handler's result: the outcome, a recorded result, channel writes, counter increments,
/// children to spawn and revisions to request. Writes are applied at the end of the step, in
/// node declaration order.
#[derive(Clone, Debug, PartialEq)]
pub struct NodeOutput {
    pub(crate) outcome: Outcome,
    pub(crate) result: Value,
    pub(crate) writes: Vec<(String, Arc<Value>)>,
    pub(crate) counters: Vec<(String, i64)>,
    pub(crate) spawns: Vec<(String, String, Value)>,
    /// The sibling keys each spawn waits for (parallel to `spawns`).
    pub(crate) spawn_after: Vec<Vec<String>>,
    /// Dependencies of this node to run again.
    pub(crate) revise: Vec<NodeId>,
}

impl NodeOutput {
    fn with(outcome: Outcome) -> Self {
        Self {
            outcome,
            result: Value::Null,
            writes: Vec::new(),
            counters: Vec::new(),
            spawns: Vec::new(),
            spawn_after: Vec::new(),
            revise: Vec::new(),
        }
    }

    /// A success.
    pub fn success() -> Self {
        Self::with(Outcome::Success)
    }

    /// A failure outcome (routing takes the failure path); `reason` becomes the result's
    /// `reason` field unless a result is set.
    pub fn failure(reason: impl Into<String>) -> Self {
        let mut out = Self::with(Outcome::Failure);
        out.result = serde_json::json!({ "reason": reason.into() });
        out
    }

    /// Stops in WAITING_INPUT with a question or approval. The node runs again, from the
    /// start, once answered ([`NodeContext::resume`] holds the answer). Writes of an
    /// interrupting activation are discarded.
    pub fn interrupt(interrupt: Interrupt) -> Self {
        Self::interrupt_with(interrupt, Value::Null)
    }

    /// Like [`NodeOutput::interrupt`], saving `scratch` for the next run of the handler.
    pub fn interrupt_with(interrupt: Interrupt, scratch: Value) -> Self {
        Self::with(Outcome::Interrupt { interrupt, scratch })
    }

    /// Sets the recorded result (what routers, collectors and `runs show` see).
    pub fn result(mut self, result: Value) -> Self {
        self.result = result;
        self
    }

    /// The recorded result set so far ([`NodeOutput::result`], or `{reason}` of a failure).
    pub fn recorded(&self) -> &Value {
        &self.result
    }

    /// Writes `value` to `channel` (merged by the channel's reducer).
    pub fn write(mut self, channel: impl Into<String>, value: Value) -> Self {
        self.writes.push((channel.into(), Arc::new(value)));
        self
    }

    /// Adds `delta` to a named counter.
    pub fn count(mut self, counter: impl Into<String>, delta: i64) -> Self {
        self.counters.push((counter.into(), delta));
        self
    }

    /// Spawns a child node `<this>/<key>` from `template` with `input` (dynamic fan-out).
    /// Re-spawning a key whose child already COMPLETED keeps that result instead of running it
    /// again, so a retried fan-out re-runs only the failed children.
    pub fn spawn(self, key: impl Into<String>, template: impl Into<String>, input: Value) -> Self {
        self.spawn_after(key, template, input, std::iter::empty::<String>())
    }

    /// Like [`NodeOutput::spawn`], the child waiting for siblings: `after` are spawn keys of
    /// other children of this node, listed earlier in this output or spawned before. The child
    /// is added at once but held, with no activation, until the latest activation of every
    /// one of them is COMPLETED; it then becomes READY at the end of that step. If one of them
    /// ends otherwise (FAILED, SKIPPED, PRUNED) and cannot run again, the child is SKIPPED,
    /// and so are its own dependents. When a dependency completes again later (a revision),
    /// its dependents run again. An unknown key, or one listed after this spawn, fails this
    /// activation (so dependencies never form a cycle).
    pub fn spawn_after(
        mut self,
        key: impl Into<String>,
        template: impl Into<String>,
        input: Value,
        after: impl IntoIterator<Item = impl Into<String>>,
    ) -> Self {
        self.spawns.push((key.into(), template.into(), input));
        self.spawn_after
            .push(after.into_iter().map(Into::into).collect());
        self
    }

    /// Asks the engine to run `node`, one of this node's own dependencies (see
    /// [`NodeOutput::spawn_after`]; its full id or its spawn key), again: a review sending
    /// work back. At the end of the step the dependency gets a new activation with the
    /// reason `revision requested`, as the `revise` command gives it; once it completes,
    /// this node runs again (as a dependent of it), then its own dependents. This activation
    /// typically returns a failure: while the revision is pending, its dependents stay held.
    /// Feedback travels through state channels ([`NodeOutput::write`]).
    ///
    /// This activation fails instead when `node` is not one of its dependencies, is active,
    /// pruned, not finished, or was already revised `max_attempts` times.
    pub fn revise(mut self, node: impl Into<NodeId>) -> Self {
        self.revise.push(node.into());
        self
    }

    /// Whether the outcome is a failure.
    pub fn is_failure(&self) -> bool {
        self.outcome == Outcome::Failure
    }

    /// Whether the outcome is an interrupt (WAITING_INPUT).
    pub fn is_interrupt(&self) -> bool {
        matches!(self.outcome, Outcome::Interrupt { .. })
    }
}

/// What a router sees after an activation finished.
pub struct RouteContext<'a> {
    /// The node routed from.
    pub node: &'a NodeId,
    /// Its activation number.
    pub attempt: u32,
    /// Whether that activation failed.
    pub failed: bool,
    /// Its recorded result.
    pub result: &'a Value,
    /// Its error text, if any.
    pub error: Option<&'a str>,
    /// Run state after the step's writes.
    pub state: &'a State,
    /// Named counters after the step.
    pub counters: &'a BTreeMap<String, i64>,
    /// Attempts per node.
    pub attempts: &'a Attempts,
    /// How many earlier failed activations of this node were routed back into the graph (to
    /// a node that is not a terminal): what `max_attempts` bounds.
    pub failure_routes: u32,
}

impl RouteContext<'_> {
    /// A named counter's value (0 when never incremented).
    pub fn counter(&self, name: &str) -> i64 {
        self.counters.get(name).copied().unwrap_or(0)
    }

    /// Attempts of `node` so far.
    pub fn attempts_of(&self, node: &str) -> u32 {
        self.attempts.get(&NodeId::new(node)).copied().unwrap_or(0)
    }
}
