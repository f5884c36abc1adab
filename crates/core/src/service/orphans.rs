//! The runs a crashed or stopped process left behind: recorded as running, with no live
//! owner. A front-end that hosts runs for a long time (`trellis serve`) resumes them when it
//! starts; the policy lives here so every front-end applies the same one.

use trellis_protocol::{InputMode, Op, RunId, RunStatus};
use trellis_store::RunFilter;

use super::{OpError, Service};

/// One orphaned run and what resuming it gave.
#[derive(Clone, Debug)]
pub struct ResumedOrphan {
    /// The run.
    pub run: RunId,
    /// `Ok` once it runs again here; the refusal otherwise.
    pub result: Result<(), OpError>,
}

impl Service {
    /// Resumes every workflow run of this workspace that is recorded as running while the
    /// process that owned it is gone, with questions and approvals raised as interrupts (no
    /// one is at a terminal). Demonstration graphs are left alone: they have no stored plan
    /// to rebuild their handlers from (`trellis runs resume` continues them). Errors listing
    /// the runs are the store's; a run that cannot be resumed is reported, not fatal.
    /// A service whose runs execute on workers ([`super::Dispatch::Workers`]) resumes
    /// nothing: the workers take over the runs of a dead worker.
    pub async fn resume_orphaned_runs(&self) -> trellis_runtime::Result<Vec<ResumedOrphan>> {
        if self.options.dispatch == super::Dispatch::Workers {
            return Ok(Vec::new());
        }
        let filter = RunFilter {
            status: Some(RunStatus::Running),
            limit: None,
        };
        let runs = self.runtime().store().list_runs(&filter)?;
        let mut out = Vec::new();
        for rec in runs.into_iter().filter(|r| !r.owner_alive) {
            if self.runtime().stored_plan(&rec.id).is_err() {
                continue;
            }
            let op = Op::ResumeRun {
                run: rec.id.to_string(),
                answers: Vec::new(),
                messages: Vec::new(),
                input: InputMode::Interrupts,
            };
            let result = self.call(op).await.map(|_| ());
            out.push(ResumedOrphan {
                run: rec.id,
                result,
            });
        }
        Ok(out)
    }
}
