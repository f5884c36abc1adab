//! Forking a workflow run (`trellis runs fork`): the fork continues from a checkpoint of
//! its parent with worktrees of its own.
//!
//! The fork's run branch starts at the commit the parent's run branch had at the
//! checkpoint: every editing agent's result records the run branch's tip after its merge
//! (`run_head`), so that is the newest `run_head` among the node outputs the fork keeps
//! (the checkpoint's own log up to the next step, then, when there is none, the parent's
//! own fork point, and so on), else the run's base. Its change set's base stays the
//! parent's (the user's state when the first run started), so the review shows the whole
//! change. Node worktrees are not copied: an activation that was unfinished at the
//! checkpoint had nothing committed in its current attempt, so in the fork it starts (or
//! resumes) in a new worktree from the fork's run branch; its uncommitted edits in the
//! parent are not carried over. A fork from a checkpoint where the parent still planned (its
//! `runStarted`, before the planning node's step) plans again.

use std::path::Path;
use std::sync::Arc;

use serde_json::Value;
use trellis_graph::{Engine, RunHandle};
use trellis_protocol::{Command, EventKind, RunId};
use trellis_store::Store;
use trellis_tools::git::Git;

use crate::planning::{PlanningParams, Stage};
use crate::space::ForkPoint;
use crate::{Error, Result, RunContext, RunOptions, Runtime};
use trellis_store::RunGraphs;

impl Runtime {
    /// Starts a new run continuing from checkpoint `seq` (a `runStarted` or
    /// `stepCompleted` event of `parent`'s own log) with its own run worktree and branch at
    /// the parent's run branch commit of that checkpoint. The parent is unchanged.
    pub fn fork(
        self: &Arc<Self>,
        parent: &RunId,
        seq: u64,
        commands: Vec<Command>,
        options: RunOptions,
    ) -> Result<(RunHandle, Arc<RunContext>)> {
        let graphs = self.store.graphs(parent)?;
        let stage = match PlanningParams::from_params(&graphs.params) {
            // Forked where the parent still planned: the fork plans again.
            Some(params) if !continued_by(&*self.store, parent, seq, &graphs)? => {
                Stage::Planning(params)
            }
            _ => Stage::of(parent, &graphs)?,
        };
        let plan = match &stage {
            Stage::Planned { plan, .. } => Some(plan),
            Stage::Planning(_) => None,
        };
        // A parent that never wrote has no worktree: the fork snapshots the working state
        // when it first needs one, as a new run does.
        let start = match self.store.change_set_of(parent)? {
            Some(record) => {
                // Written in another clone (`[repository] remote`): its commits come first.
                if let Some(remote) = &self.remote {
                    remote.fetch(&Git::new(&self.repo), parent)?;
                }
                let at = fork_point(&*self.store, &self.repo, parent, seq)?;
                Some(ForkPoint {
                    at: at.unwrap_or_else(|| record.base_commit.clone()),
                    base: record.base_commit,
                })
            }
            None => {
                check_checkpoint(&*self.store, parent, seq)?;
                None
            }
        };
        let run = RunId::new();
        // A fork of a run that wrote carries its work up to the checkpoint: its worktree
        // and change set exist from the start, for the review.
        let inherits = start.is_some();
        let space = self.space(&run, start);
        if inherits {
            space.ensure()?;
        }
        let ctx = self.context(run.clone(), space, options, plan)?;
        let graph = Arc::new(crate::planning::workflow_graph(
            &stage,
            ctx.as_ref(),
            Some(&ctx),
        )?);
        let cause = ctx.options.cause.clone();
        let handle =
            Engine::new(self.store.clone()).fork_as_by(run, graph, parent, seq, commands, cause)?;
        Ok((handle, ctx))
    }
}

/// Whether a fork of `run` at checkpoint `seq` keeps its continuation into the workflow:
/// the fork takes the log up to the next `stepStarted`, which holds the `runContinued` that
/// follows the planning node's step.
fn continued_by(store: &Store, run: &RunId, seq: u64, graphs: &RunGraphs) -> Result<bool> {
    let Some(c) = &graphs.continued else {
        return Ok(false);
    };
    if c.seq <= seq {
        return Ok(true);
    }
    let between = store.events(run, seq + 1, Some(c.seq))?;
    Ok(!between
        .iter()
        .any(|e| matches!(e.kind, EventKind::StepStarted { .. })))
}

/// The commit `run`'s branch had at its checkpoint `seq` (see the module docs); `None`
/// when no agent had merged anything by then. Refuses a `seq` that is not a checkpoint of
/// `run`'s own log (before anything is created).
fn fork_point(store: &Store, repo: &Path, run: &RunId, seq: u64) -> Result<Option<String>> {
    let own = check_checkpoint(store, run, seq)?;
    let (mut events, mut upto, mut run) = (own, seq, run.clone());
    loop {
        let heads = run_heads(&events, upto);
        if !heads.is_empty() {
            return Ok(newest(repo, &heads));
        }
        match store.get_run(run.as_str())?.summary.fork {
            Some(f) => {
                events = store.events(&f.run, 1, None)?;
                (upto, run) = (f.seq, f.run);
            }
            None => return Ok(None),
        }
    }
}

/// `run`'s own log, after refusing a `seq` that is not one of its checkpoints.
fn check_checkpoint(store: &Store, run: &RunId, seq: u64) -> Result<Vec<trellis_protocol::Event>> {
    let own = store.events(run, 1, None)?;
    if !own.iter().any(|e| e.seq == seq && e.kind.is_checkpoint()) {
        return Err(Error::Resume(format!(
            "event {seq} of run {run} is not a checkpoint (a runStarted or stepCompleted event; \
             `trellis runs show` lists them)"
        )));
    }
    Ok(own)
}

/// The `run_head`s of the node outputs a fork at `seq` keeps (up to it, and after it until
/// the next step starts, as the engine cuts the log), in log order.
fn run_heads(events: &[trellis_protocol::Event], seq: u64) -> Vec<String> {
    let mut heads = Vec::new();
    for e in events {
        if e.seq > seq && matches!(e.kind, EventKind::StepStarted { .. }) {
            break;
        }
        if let EventKind::NodeOutput { result, .. } = &e.kind
            && let Some(h) = result.get("run_head").and_then(Value::as_str)
        {
            heads.push(h.to_owned());
        }
    }
    heads
}

/// The head that every other is an ancestor of (merges move the run branch forward), else
/// the last logged (a prune that reset the branch).
fn newest(repo: &Path, heads: &[String]) -> Option<String> {
    let git = Git::new(repo);
    let ancestor = |a: &str, b: &str| {
        a == b
            || git
                .try_run(&["merge-base", "--is-ancestor", a, b])
                .is_ok_and(|r| r.is_ok())
    };
    heads
        .iter()
        .rev()
        .find(|h| heads.iter().all(|o| ancestor(o, h)))
        .or(heads.last())
        .cloned()
}
