//! The one run driver every front-end uses: follow a run until it stops executing, and each
//! time it waits for input ask a person and resume it with the answers. A front-end supplies
//! only how it shows the run and how it asks ([`RunFrontEnd`]): the terminal, an editor's
//! permission requests, a web client.

use std::future::Future;
use std::sync::Arc;

use tokio::sync::broadcast;
use trellis_protocol::records::{RunPlanned, RunState};
use trellis_protocol::{
    EventKind, InputMode, NodeAnswer, Op, RunId, RunStatus, ServiceEventBody, StreamId,
    WorkspaceEvent,
};

use super::{LiveEvent, OpError, Service};

/// How following a run ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Followed {
    /// The run stopped executing (finished, failed, or paused on input).
    Stopped,
    /// The person stopped following (Ctrl-C, the editor's cancel) while it executed.
    Cancelled,
}

/// What a front-end supplies to [`Service::drive`]: how it shows a run, and how it asks a
/// person for the answers the run waits on.
pub trait RunFrontEnd: Send {
    /// The front-end's error.
    type Error: Send;

    /// Shows the run's events from `live` until the run stops executing in the service, or
    /// the person stops following it.
    fn follow(
        &mut self,
        live: &mut broadcast::Receiver<Arc<LiveEvent>>,
        run: &RunId,
    ) -> impl Future<Output = Result<Followed, Self::Error>> + Send;

    /// The answers to what the paused run waits on (`state.waiting`); `None` leaves the run
    /// paused (nobody can answer here, or the person cancelled while asked).
    fn ask(
        &mut self,
        state: &RunState,
    ) -> impl Future<Output = Result<Option<Vec<NodeAnswer>>, Self::Error>> + Send;

    /// The front-end's error for a failure of the service (reading the run's state).
    fn service_error(&self, error: OpError) -> Self::Error;
}

/// How [`Service::drive`] ended.
#[derive(Clone, Debug)]
pub enum DriveEnd {
    /// The run stopped for good: succeeded, failed or cancelled.
    Ended(RunState),
    /// The run waits for input the front-end did not give; it stays paused and resumable.
    Paused(RunState),
    /// The person stopped following while the run executed.
    Cancelled,
    /// The answers were given but resuming the run with them failed.
    NotResumed(OpError),
}

impl Service {
    /// Drives workflow run `run` (started or resumed with `live` subscribed before) through
    /// `front` until it ends, stays paused, or the person stops following: follow, read
    /// where it stands, ask, resume with the answers (approvals by `input`), follow again.
    pub async fn drive<F: RunFrontEnd>(
        &self,
        run: &RunId,
        live: &mut broadcast::Receiver<Arc<LiveEvent>>,
        input: InputMode,
        front: &mut F,
    ) -> Result<DriveEnd, F::Error> {
        loop {
            if front.follow(live, run).await? == Followed::Cancelled {
                return Ok(DriveEnd::Cancelled);
            }
            self.wait_run(run).await;
            self.bus.flush().await;
            let state = self.run_state(run).map_err(|e| front.service_error(e))?;
            if state.status != RunStatus::WaitingInput {
                return Ok(DriveEnd::Ended(state));
            }
            let Some(answers) = front.ask(&state).await? else {
                return Ok(DriveEnd::Paused(state));
            };
            let resumed = self
                .call(Op::ResumeRun {
                    run: run.to_string(),
                    answers,
                    messages: Vec::new(),
                    input,
                })
                .await;
            if let Err(e) = resumed {
                return Ok(DriveEnd::NotResumed(e));
            }
        }
    }

    /// Waits until workflow run `run` (started with `live` subscribed before) has decided its
    /// plan — its planning node done and the run continued with the workflow — and returns
    /// what was decided; `None` when the run stopped executing here before (its planning
    /// failed, was cancelled, or waits for input). The run's events `live` carried
    /// meanwhile are consumed.
    pub async fn planned(
        &self,
        run: &RunId,
        live: &mut broadcast::Receiver<Arc<LiveEvent>>,
    ) -> Result<Option<RunPlanned>, OpError> {
        loop {
            if let Some(p) = self.run_planned(run)? {
                return Ok(Some(p));
            }
            if !self.is_live(run) {
                return Ok(None);
            }
            match live.recv().await {
                Ok(e) => match (&e.stream, &e.event) {
                    (StreamId::Run(r), ServiceEventBody::Run(EventKind::RunContinued { .. }))
                        if r == run => {}
                    (_, ServiceEventBody::Workspace(WorkspaceEvent::RunStopped { run: r, .. }))
                        if r == run => {}
                    _ => continue,
                },
                // Fell behind, or the service is stopping: the store says where it stands.
                Err(broadcast::error::RecvError::Lagged(_)) => {}
                Err(broadcast::error::RecvError::Closed) => {
                    return self.run_planned(run);
                }
            }
        }
    }

    /// What workflow run `run`'s planning decided, read from the store (for a run recorded
    /// before planning was a node: its plan and the orchestrator's decisions it started
    /// with); `None` while it plans.
    pub fn run_planned(&self, run: &RunId) -> Result<Option<RunPlanned>, OpError> {
        let trellis_runtime::planning::Stage::Planned { plan, .. } = self.runtime.stage(run)?
        else {
            return Ok(None);
        };
        let state = self.runtime.inspect(run)?;
        let orchestration = state
            .node(trellis_runtime::planning::ORCHESTRATE)
            .and_then(|n| n.result.get("orchestration").cloned())
            .or_else(|| state.state.get("orchestrator").cloned())
            .unwrap_or_default();
        Ok(Some(RunPlanned {
            workflow: plan.workflow.clone(),
            orchestration,
            plan: serde_json::to_value(&plan)
                .map_err(|e| OpError::internal(format!("encoding the plan: {e}")))?,
        }))
    }

    /// Waits until every event recorded so far is in the store (before a front-end reads
    /// what a run left: its summary, its change set).
    pub async fn flush(&self) -> Result<(), OpError> {
        self.bus.flush().await;
        Ok(self.runtime.store().flush()?)
    }
}
