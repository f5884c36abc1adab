//! Tracking a run that executes in this service: its committed batches published on the bus
//! as they commit, and its end recorded when it stops.

use std::collections::HashSet;
use std::sync::Arc;

use tokio::sync::{broadcast, oneshot, watch};
use tokio_util::sync::CancellationToken;
use trellis_graph::{RunHandle, RunOutcome};
use trellis_protocol::{
    Event, EventKind, NodeState, RunId, RunStatus, ServiceEvent, WorkspaceEvent,
};

use super::LiveRun;
use crate::service::{Bus, Service, lock};
use trellis_runtime::planning::{ORCHESTRATE, PlanningParams, Stage};
use trellis_runtime::{RunContext, Runtime};

impl Service {
    /// Publishes the run's events as they commit, and cleans up when it stops. The
    /// receiver resolves when the run's first batch is committed (or the run ended).
    pub(super) fn track(
        self: &Arc<Self>,
        mut handle: RunHandle,
        ctx: Arc<RunContext>,
    ) -> oneshot::Receiver<()> {
        let (first_tx, first_rx) = oneshot::channel();
        let run = handle.id().clone();
        let events = handle.subscribe();
        let commands = handle.commands();
        let engine = handle.stopper();
        let (done_tx, done) = watch::channel(false);
        let quiet = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let lost = quiet.clone();
        let me = self.clone();
        let id = run.clone();
        // Registered before the task starts, so that a command sent right after the start
        // op finds the run live.
        let mut runs = lock(&self.runs);
        tokio::spawn(async move {
            let forwarder = Forwarder {
                bus: me.bus.clone(),
                runtime: me.runtime.clone(),
                run: id.clone(),
                ctx: ctx.clone(),
                stages: None,
                first: Some(first_tx),
            };
            // Set once the run's task has ended: every batch it published is then queued in
            // `events`, so the forwarder drains the queue and stops (it does not wait for the
            // broadcast to close, which another holder of the sender could delay).
            let ended = CancellationToken::new();
            let forward = tokio::spawn(forwarder.forward(events, ended.clone()));
            let outcome = handle.wait().await;
            ended.cancel();
            let _ = forward.await;
            let lost = lost.load(std::sync::atomic::Ordering::SeqCst);
            me.record_end(&id, &ctx, &outcome, lost).await;
            let _ = done_tx.send(true);
        });
        // A run that starts after a shutdown took the live runs stops at once (the shutdown
        // cancels its token before it takes them, and this check holds their lock).
        if self.shutdown.is_cancelled() {
            engine.stop();
        }
        runs.insert(
            run,
            LiveRun {
                commands,
                done,
                engine,
                quiet,
            },
        );
        first_rx
    }

    /// Records that the run stopped executing here: an ended run's agent worktrees are
    /// dropped, the run leaves the live runs, and `RunStopped` is published — unless the
    /// run was `lost` to another worker (or its journal said so): then it only leaves the
    /// live runs.
    async fn record_end(
        &self,
        id: &RunId,
        ctx: &Arc<RunContext>,
        outcome: &Result<RunOutcome, trellis_graph::Error>,
        lost: bool,
    ) {
        let fenced = matches!(
            outcome,
            Err(trellis_graph::Error::Journal(
                trellis_graph::JournalError::LeaseLost { .. }
            ))
        );
        if lost || fenced {
            // Another worker took the run over: this process writes nothing more about it.
            lock(&self.runs).remove(id);
            return;
        }
        let (status, error) = match outcome {
            Ok(o) => (o.status, o.error.clone()),
            // Stopped by a shutdown: the stored run is still running, and resumable.
            Err(e @ trellis_graph::Error::Stopped) => (RunStatus::Running, Some(e.to_string())),
            Err(e) => (RunStatus::Failed, Some(e.to_string())),
        };
        // A run that ended drops its agents' worktrees and branches; its own branch and
        // worktree stay for the review.
        if outcome.as_ref().is_ok_and(|o| o.status.is_final())
            && let Err(why) = ctx.drop_node_worktrees().await
        {
            tracing::warn!("run {id}: removing its node worktrees: {why}");
        }
        lock(&self.runs).remove(id);
        super::hooks::on_end(ctx, status, error.as_deref());
        self.bus.workspace(
            None,
            WorkspaceEvent::RunStopped {
                run: id.clone(),
                status,
                error,
            },
        );
    }
}

/// Publishes one run's committed batches on the bus.
struct Forwarder {
    bus: Bus,
    runtime: Arc<Runtime>,
    run: RunId,
    ctx: Arc<RunContext>,
    /// The workflow's stages, for `workflow:stage_changed` (empty for other graphs): read
    /// when the first batch is committed (a new run's plan is in that batch).
    stages: Option<HashSet<String>>,
    /// Told when the first batch is committed.
    first: Option<oneshot::Sender<()>>,
}

impl Forwarder {
    /// Forwards the run's batches until the broadcast closes, or, once `ended`, until the
    /// batches already queued are drained.
    async fn forward(
        mut self,
        mut events: broadcast::Receiver<Arc<Vec<Event>>>,
        ended: CancellationToken,
    ) {
        loop {
            let received = tokio::select! {
                biased;
                r = events.recv() => r,
                () = ended.cancelled() => match events.try_recv() {
                    Ok(batch) => Ok(batch),
                    Err(_) => break,
                },
            };
            match received {
                Ok(batch) => self.publish(&batch).await,
                // Subscribers see the gap and read the store.
                Err(broadcast::error::RecvError::Lagged(_)) => continue,
                Err(broadcast::error::RecvError::Closed) => break,
            }
        }
    }

    /// Publishes one batch: the run's events, then a `workflow:stage_changed` for each stage
    /// that started running; pruned agents' worktrees are rolled back first.
    async fn publish(&mut self, batch: &[Event]) {
        if let Some(tx) = self.first.take() {
            let _ = tx.send(());
        }
        // A run that continued with its workflow has the workflow's stages from then on.
        if batch
            .iter()
            .any(|e| matches!(e.kind, EventKind::RunContinued { .. }))
        {
            self.stages = None;
        }
        // A pruned agent's worktree is pruned (its merges undone) before anything after its
        // pruning is published.
        let stages = self
            .stages
            .get_or_insert_with(|| workflow_stages(&self.runtime, &self.run, batch));
        let mut stage_changes = Vec::new();
        for e in batch {
            if let EventKind::NodeTransition {
                node,
                attempt,
                to: NodeState::Running,
                ..
            } = &e.kind
                && stages.contains(node.as_str())
            {
                stage_changes.push(WorkspaceEvent::StageChanged {
                    run: self.run.clone(),
                    stage: node.clone(),
                    attempt: *attempt,
                });
            }
            if let EventKind::NodeTransition {
                node,
                to: NodeState::Pruned,
                ..
            } = &e.kind
                && let Some(Err(why)) = self.ctx.roll_back(node.as_str()).await
            {
                tracing::error!("run {}: rolling back {node}: {why}", self.run);
            }
        }
        super::hooks::on_batch(&self.ctx, stages, batch);
        self.bus.publish(batch.iter().map(ServiceEvent::from));
        for change in stage_changes {
            self.bus.workspace(None, change);
        }
    }
}

/// The stage names of the run's workflow: from the plan in the batch's `runContinued` or
/// `runStarted` event when it holds one, else from the stored plan; while the run plans,
/// its planning node; none when there is no plan.
fn workflow_stages(runtime: &Runtime, run: &RunId, batch: &[Event]) -> HashSet<String> {
    let params = batch.iter().rev().find_map(|e| match &e.kind {
        EventKind::RunStarted { params, .. } | EventKind::RunContinued { params, .. } => {
            Some(params.clone())
        }
        _ => None,
    });
    let planning = || HashSet::from([ORCHESTRATE.to_owned()]);
    let plan: Option<trellis_workflow::Plan> = match params {
        Some(p) if PlanningParams::from_params(&p).is_some() => return planning(),
        Some(p) => serde_json::from_value(p).ok(),
        None => match runtime.stage(run) {
            Ok(Stage::Planning(_)) => return planning(),
            Ok(Stage::Planned { plan, .. }) => Some(plan),
            Err(_) => None,
        },
    };
    plan.map(|p| {
        p.planned
            .iter()
            .map(|s| s.context.stage_name.clone())
            .collect()
    })
    .unwrap_or_default()
}
