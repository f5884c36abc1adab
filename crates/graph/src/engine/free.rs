//! Free-running scheduling ([`Scheduling::Free`](crate::Scheduling::Free)): a finished
//! activation's writes are applied and its successors start without waiting for unrelated
//! activations still running.
//!
//! The driver works in *batches*, each recorded as a step of its own: `stepStarted`, the
//! outputs of the handlers that finished since the last batch, the starts of the READY
//! activations (which see the state as of the batch's start; those that finish without
//! waiting are recorded on the spot), `stepCompleted` (the batch's writes applied in node
//! order), then routing. Handlers keep running across batch boundaries. Between batches no
//! step is open: the driver waits there, so a committed log always ends on a completed batch,
//! and commands (an answer, a revision, a prune) take effect at once. Replay needs nothing
//! special: `RunCore::apply` applies each batch's writes at its `stepCompleted`, in the order
//! the log recorded.

use futures::FutureExt;
use futures::stream::StreamExt;
use trellis_protocol::{EventKind, NodeState};

use super::live::{Done, Live, Started};
use crate::journal::Durability;
use crate::{Error, Result};

impl Live {
    pub(super) async fn drive_free(&mut self) -> Result<()> {
        // A log recorded under lock-step may stop inside a step: finish that step first.
        if self.core.step_open {
            self.run_step().await?;
            if self.core.status.is_final() {
                return Ok(());
            }
            self.end_step()?;
        }
        let mut arrived: Vec<Done> = Vec::new();
        loop {
            self.tick();
            self.take_commands()?;
            if self.core.status.is_final() {
                return Ok(());
            }
            // Handlers that finished meanwhile join this batch (a command may just have pruned
            // one that had finished).
            arrived.retain(|d| self.is_current(d));
            while let Some(Some(done)) = self.inflight.next().now_or_never() {
                if self.is_current(&done) {
                    arrived.push(done);
                }
            }
            // READY activations for the free slots (those held by `arrived` free up now).
            let slots = self
                .core
                .graph
                .concurrency()
                .saturating_sub(self.running.len().saturating_sub(arrived.len()));
            let mut queue = std::mem::take(&mut self.queue);
            queue.clear();
            self.core.take_ready_upto(slots, &mut queue);
            if arrived.is_empty() && queue.is_empty() {
                self.queue = queue;
                if self.running.is_empty() {
                    if self.release_held()? {
                        continue;
                    }
                    if self.continue_graph().await? {
                        return Ok(());
                    }
                    return self.conclude();
                }
                // Wait with no step open.
                if let Some(done) = self.wait().await?
                    && self.is_current(&done)
                {
                    arrived.push(done);
                }
                continue;
            }
            let max = self.core.graph.max_steps();
            if queue.iter().any(|&o| self.core.nodes[o].depth > max) {
                return Err(Error::StepLimit(max));
            }
            self.emit(EventKind::StepStarted {
                step: self.core.step + 1,
            })?;
            for done in arrived.drain(..) {
                self.finish(done)?;
            }
            let started = self.start_all(&mut queue).await;
            queue.clear();
            self.queue = queue;
            started?;
            self.end_step()?;
            if self.config.durability == Durability::Sync {
                self.flush();
                self.settle().await?;
            }
        }
    }

    /// Whether a finished handler's activation is still the one running (not pruned or
    /// cancelled meanwhile).
    fn is_current(&self, (o, attempt, _): &Done) -> bool {
        let n = &self.core.nodes[*o];
        n.attempt == *attempt && n.state == Some(NodeState::Running)
    }

    /// Starts the activations of `queue` in the open batch, each seeing the state as of the
    /// batch's start.
    async fn start_all(&mut self, queue: &mut std::collections::VecDeque<usize>) -> Result<()> {
        let (state, counters, attempts) = (
            self.core.state.clone(),
            self.core.counters.clone(),
            self.core.attempts.clone(),
        );
        while let Some(o) = queue.pop_front() {
            let attempt = self.core.nodes[o].attempt;
            match self.start(o, &state, &counters, &attempts)? {
                Started::Finished(f) => self.finish((o, attempt, f))?,
                Started::Handler(fut, cancel) => self.poll_first(o, attempt, fut, cancel).await?,
            }
        }
        Ok(())
    }
}
