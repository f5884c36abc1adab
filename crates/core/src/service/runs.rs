//! Run ops: start, resume, and the commands that steer a run wherever it is — executing in
//! this service, executing in another process (through the store's command inbox), or
//! paused (resumed here with the command applied first).

mod hooks;
mod track;

use std::sync::Arc;

use serde_json::{Value, json};
use tokio::sync::watch;
use trellis_graph::{RunCommands, RunOutcome, RunStopper};
use trellis_protocol::{
    Answer, ArtifactStatus, Budgets, Command, InputMode, InterruptKind, Message, NodeAnswer,
    NodeId, NodeMessage, NodeState, RunId, SubmissionId, WorkspaceEvent,
};

use super::{Dispatch, OpError, OpResult, Service, lock};
use trellis_runtime::RunOptions;

/// The arguments of a start-run op.
pub(crate) struct StartRun {
    pub request: String,
    pub repo: Option<String>,
    pub workflow: Option<String>,
    pub include: Vec<String>,
    pub skip: Vec<String>,
    pub input: InputMode,
    pub budgets: Option<Budgets>,
    pub plan_only: bool,
}

/// A run executing in this service.
pub(crate) struct LiveRun {
    pub commands: RunCommands,
    /// Becomes true when the run stops executing here.
    pub done: watch::Receiver<bool>,
    engine: RunStopper,
    /// Set when the run stops because another worker took it over: nothing more is
    /// recorded or published about it here.
    quiet: Arc<std::sync::atomic::AtomicBool>,
}

impl LiveRun {
    /// Stops the run's driver where it is (it stays resumable from the store); see
    /// [`LiveRun::stopped`].
    pub fn stop(&self) {
        self.engine.stop();
    }

    /// Stops the run's driver for good in this process, recording and publishing nothing
    /// more about it (its lease went to another worker).
    pub fn stop_quietly(&self) {
        self.quiet.store(true, std::sync::atomic::Ordering::SeqCst);
        self.engine.stop();
    }

    /// Waits until the run's driver is gone and its tracking task has published what the
    /// run committed: from then on nothing more is recorded for it.
    pub async fn stopped(&self) {
        let mut done = self.done.clone();
        let _ = done.wait_for(|d| *d).await;
    }
}

impl Service {
    fn options(
        &self,
        sub: &SubmissionId,
        input: InputMode,
        budgets: Option<Budgets>,
    ) -> RunOptions {
        RunOptions {
            input,
            budgets,
            cause: Some(sub.clone()),
            sessions: Some(self.hub.clone()),
            events: None,
        }
    }

    pub(crate) async fn start_run(self: &Arc<Self>, sub: SubmissionId, args: StartRun) -> OpResult {
        if let Some(repo) = &args.repo {
            self.check_repo(repo)?;
        }
        let overrides = trellis_agents::Overrides {
            workflow: args.workflow,
            include: args.include,
            skip: args.skip,
        };
        if args.plan_only {
            let (orchestration, plan) = self
                .runtime
                .plan(&args.request, &overrides, self.shutdown.child_token())
                .await?;
            return Ok(json!({
                "workflow": plan.workflow,
                "orchestration": orchestration,
                "plan": plan,
            }));
        }
        // Checked now rather than when the planning node runs: a workflow that does not
        // exist is the caller's mistake, answered before a run is created.
        if let Some(w) = &overrides.workflow {
            self.runtime
                .catalog()
                .get(w)
                .map_err(|e| OpError::new(e.to_string()))?;
        }
        if self.options.dispatch == Dispatch::Workers {
            self.check_workers_store()?;
            return self
                .create_for_workers(sub, args.request, overrides, args.budgets)
                .await;
        }
        let options = self.options(&sub, args.input, args.budgets);
        // MCP servers start now; the run waits for them at most `mcp.startup_wait_secs`.
        self.runtime.mcp().ready_for_run().await;
        // Recording the run waits for the store: off the async workers, so that streaming
        // runs are not stalled by runs starting (its worktree waits for its first writer:
        // `RunSpace`). The run's first node plans: the op answers with its id at once.
        let (handle, ctx) = {
            let rt = self.runtime.clone();
            let request = args.request.clone();
            tokio::task::spawn_blocking(move || rt.start_planning(&request, &overrides, options))
                .await
                .map_err(|e| OpError::internal(format!("internal error: {e}")))??
        };
        let run = handle.id().clone();
        self.bus.workspace(
            Some(sub.clone()),
            WorkspaceEvent::RunCreated {
                run: run.clone(),
                workflow: trellis_runtime::planning::PLANNING_GRAPH.to_owned(),
                request: args.request.clone(),
            },
        );
        let out = json!({
            "run": run,
            "worktree": ctx.space.path(),
            "branch": ctx.space.branch(),
            "planning": trellis_runtime::planning::ORCHESTRATE,
        });
        let committed = self.track(handle, ctx);
        // The run is in the store before its id is handed out: a client that asks for it
        // right away finds it.
        let _ = committed.await;
        Ok(out)
    }

    /// Records a new run for a `trellis worker` to execute ([`Dispatch::Workers`]): its
    /// worktree and first batch, then marks it runnable. Answers as a start does.
    async fn create_for_workers(
        self: &Arc<Self>,
        sub: SubmissionId,
        request: String,
        overrides: trellis_agents::Overrides,
        budgets: Option<Budgets>,
    ) -> OpResult {
        let (rt, text, cause) = (self.runtime.clone(), request.clone(), Some(sub.clone()));
        let (run, commit) = tokio::task::spawn_blocking(move || {
            rt.create_planning(&text, &overrides, budgets, cause)
        })
        .await
        .map_err(|e| OpError::internal(format!("internal error: {e}")))??;
        commit
            .await
            .map_err(|e| OpError::internal(format!("run {run} could not be recorded: {e}")))?;
        let store = self.runtime.store().clone();
        let id = run.clone();
        super::blocking(move || Ok(store.set_runnable(&id, true)?)).await?;
        self.bus.workspace(
            Some(sub),
            WorkspaceEvent::RunCreated {
                run: run.clone(),
                workflow: trellis_runtime::planning::PLANNING_GRAPH.to_owned(),
                request,
            },
        );
        // The worktree is the worker's, created where it runs when an agent first writes.
        Ok(json!({
            "run": run,
            "worktree": null,
            "branch": trellis_tools::worktree::RunWorktree::branch_for(&run),
            "planning": trellis_runtime::planning::ORCHESTRATE,
            "delivered": "queued",
        }))
    }

    /// Refuses, before anything is written, to hand runs to workers without a store that
    /// keeps leases (PostgreSQL).
    fn check_workers_store(&self) -> Result<(), OpError> {
        if self.runtime.store().keeps_leases() {
            Ok(())
        } else {
            Err(trellis_store::Error::LeasesNeedPostgres.into())
        }
    }

    /// Hands `commands` to whichever worker runs `run` ([`Dispatch::Workers`]): queued in
    /// its inbox, then the run marked runnable (in that order: a worker that parks the run
    /// in between sees the commands and marks it runnable again).
    async fn queue_for_workers(&self, run: &RunId, commands: Vec<Command>) -> OpResult {
        self.check_workers_store()?;
        let store = self.runtime.store().clone();
        let id = run.clone();
        super::blocking(move || {
            let rec = store.get_run(id.as_str())?;
            let revise = commands.iter().any(|c| matches!(c, Command::Revise { .. }));
            if rec.summary.status.is_final() && !revise {
                return Err(OpError::conflict(format!(
                    "run {id} already {}; nothing can change it (request changes to run a stage again)",
                    rec.summary.status
                )));
            }
            for c in &commands {
                store.enqueue_command(&id, c)?;
            }
            store.set_runnable(&id, true)?;
            Ok(())
        })
        .await?;
        Ok(json!({ "run": run, "delivered": "queued" }))
    }

    /// Forks the workflow run `parent` at checkpoint `seq` (`trellis runs fork`) and starts
    /// the fork here, with worktrees of its own ([`trellis_runtime::Runtime::fork`]); `commands`
    /// (answers for its waiting nodes) apply first. Returns the fork's id once its first
    /// events are committed.
    pub async fn fork_run(
        self: &Arc<Self>,
        parent: &str,
        seq: u64,
        commands: Vec<Command>,
        input: InputMode,
    ) -> Result<RunId, OpError> {
        let parent = self.run_id(parent)?;
        let sub = SubmissionId::new();
        let options = self.options(&sub, input, None);
        self.runtime.mcp().ready_for_run().await;
        let (rt, from) = (self.runtime.clone(), parent.clone());
        let (handle, ctx) =
            tokio::task::spawn_blocking(move || rt.fork(&from, seq, commands, options))
                .await
                .map_err(|e| OpError::internal(format!("internal error: {e}")))??;
        let run = handle.id().clone();
        let plan = self.runtime.stored_plan(&parent).ok();
        self.bus.workspace(
            Some(sub),
            WorkspaceEvent::RunCreated {
                run: run.clone(),
                workflow: plan
                    .as_ref()
                    .map(|p| p.workflow.clone())
                    .unwrap_or_default(),
                request: plan.map(|p| p.task).unwrap_or_default(),
            },
        );
        let _ = self.track(handle, ctx).await;
        Ok(run)
    }

    fn check_repo(&self, repo: &str) -> Result<(), OpError> {
        let path = std::path::Path::new(repo);
        let canon = path
            .canonicalize()
            .map_err(|e| OpError::new(format!("repo {repo}: {e}")))?;
        let root = self
            .runtime
            .repo()
            .canonicalize()
            .unwrap_or_else(|_| self.runtime.repo().to_path_buf());
        if !canon.starts_with(&root) {
            return Err(OpError::new(format!(
                "repo {repo} is not this service's workspace ({}); start a service for it",
                root.display()
            )));
        }
        Ok(())
    }

    pub(crate) async fn resume_run(
        self: &Arc<Self>,
        sub: SubmissionId,
        run: &str,
        answers: Vec<NodeAnswer>,
        messages: Vec<NodeMessage>,
        input: InputMode,
    ) -> OpResult {
        let run = self.run_id(run)?;
        if self.is_live(&run) {
            return Err(OpError::conflict(format!(
                "run {run} is already executing in this service"
            )));
        }
        if self.options.dispatch == Dispatch::Workers {
            let commands = commands_of(answers, messages);
            self.queue_for_workers(&run, commands).await?;
            return Ok(json!({ "run": run, "resumed": "queued" }));
        }
        let rec = self.runtime.store().get_run(run.as_str())?;
        if rec.owner_alive {
            return Err(OpError::conflict(format!(
                "run {run} is executing in process {}; wait for it, or stop that process first",
                rec.owner.map(|o| o.label()).unwrap_or_default()
            )));
        }
        let commands = commands_of(answers, messages);
        self.resume_here(&sub, &run, commands, input).await?;
        Ok(json!({ "run": run, "resumed": true }))
    }

    pub(super) async fn resume_here(
        self: &Arc<Self>,
        sub: &SubmissionId,
        run: &RunId,
        commands: Vec<Command>,
        input: InputMode,
    ) -> Result<(), OpError> {
        let options = self.options(sub, input, None);
        self.runtime.mcp().ready_for_run().await;
        // Replaying the log and preparing the worktree context is blocking work.
        let (rt, id) = (self.runtime.clone(), run.clone());
        let (handle, ctx) = tokio::task::spawn_blocking(move || rt.resume(&id, commands, options))
            .await
            .map_err(|e| OpError::internal(format!("internal error: {e}")))??;
        drop(self.track(handle, ctx));
        Ok(())
    }

    /// Hands `command` to the run wherever it is.
    pub(crate) async fn deliver(
        self: &Arc<Self>,
        sub: &SubmissionId,
        run: &RunId,
        command: Command,
    ) -> OpResult {
        self.deliver_all(sub, run, vec![command]).await
    }

    pub(crate) async fn deliver_all(
        self: &Arc<Self>,
        sub: &SubmissionId,
        run: &RunId,
        commands: Vec<Command>,
    ) -> OpResult {
        let live = lock(&self.runs).get(run).map(|r| r.commands.clone());
        if let Some(tx) = live {
            for c in commands {
                let name = c.name();
                tx.send_by(c, Some(sub.clone()))
                    .await
                    .map_err(|why| OpError::conflict(format!("{name} refused: {why}")))?;
            }
            return Ok(json!({ "run": run, "delivered": "live" }));
        }
        if self.options.dispatch == Dispatch::Workers {
            return self.queue_for_workers(run, commands).await;
        }
        let rec = self.runtime.store().get_run(run.as_str())?;
        if rec.owner_alive {
            for c in &commands {
                self.runtime.store().enqueue_command(run, c)?;
            }
            let owner = rec.owner.map(|o| o.label()).unwrap_or_default();
            return Ok(json!({ "run": run, "delivered": "inbox", "owner": owner }));
        }
        let revise = commands.iter().any(|c| matches!(c, Command::Revise { .. }));
        if rec.summary.status.is_final() && !revise {
            return Err(OpError::conflict(format!(
                "run {run} already {}; nothing can change it (request changes to run a stage again)",
                rec.summary.status
            )));
        }
        self.resume_here(sub, run, commands, InputMode::Interrupts)
            .await?;
        Ok(json!({ "run": run, "delivered": "resumed" }))
    }

    /// The run's current state (replayed from the store).
    pub(crate) fn inspect(&self, run: &RunId) -> Result<RunOutcome, OpError> {
        Ok(self.runtime.inspect(run)?)
    }

    pub(crate) async fn approve(
        self: &Arc<Self>,
        sub: &SubmissionId,
        run: &str,
        node: Option<NodeId>,
        artifact: Option<i64>,
        comment: Option<String>,
    ) -> OpResult {
        let run = self.run_id(run)?;
        let mut answer = json!({ "approved": true });
        if let Some(c) = &comment {
            answer["comment"] = json!(c);
        }
        if let Some(id) = artifact {
            self.set_artifact(sub, id, ArtifactStatus::Approved, comment.as_deref())?;
        }
        let outcome = self.inspect(&run)?;
        let targets = waiting_for(&outcome, node.as_ref(), artifact);
        if targets.is_empty() {
            if artifact.is_some() {
                return Ok(json!({ "run": run, "artifact": artifact, "approved": true }));
            }
            return Err(nothing_waiting(&outcome, &run, node.as_ref()));
        }
        let commands = targets
            .iter()
            .map(|n| Command::Answer {
                node: n.clone(),
                answer: Answer(answer.clone()),
            })
            .collect();
        self.deliver_all(sub, &run, commands).await?;
        Ok(json!({ "run": run, "approved": targets }))
    }

    /// Records an artifact's new status and announces it on the workspace stream.
    fn set_artifact(
        &self,
        sub: &SubmissionId,
        id: i64,
        status: ArtifactStatus,
        feedback: Option<&str>,
    ) -> Result<(), OpError> {
        let a = self
            .runtime
            .store()
            .set_artifact_status(id, status, feedback)?;
        self.bus.workspace(
            Some(sub.clone()),
            WorkspaceEvent::ArtifactChanged {
                artifact: id,
                run: a.run,
                status: a.status,
            },
        );
        Ok(())
    }

    pub(crate) async fn request_changes(
        self: &Arc<Self>,
        sub: &SubmissionId,
        run: &str,
        node: Option<NodeId>,
        artifact: Option<i64>,
        feedback: String,
    ) -> OpResult {
        if feedback.trim().is_empty() {
            return Err(OpError::new(
                "request changes needs feedback: say what should change",
            ));
        }
        let run = match self.run_id(run) {
            Ok(r) => r,
            // A sandbox worktree has a change set and no run: the request is recorded.
            Err(e) => {
                let Ok(rec) = self.runtime.store().change_set(run) else {
                    return Err(e);
                };
                self.review_record_changes(&rec.run_id, node.as_ref(), &feedback)?;
                return Ok(json!({ "run": rec.run_id, "recorded": "changesRequested" }));
            }
        };
        if let Some(id) = artifact {
            self.set_artifact(sub, id, ArtifactStatus::ChangesRequested, Some(&feedback))?;
        }
        let outcome = self.inspect(&run)?;
        let targets = waiting_for(&outcome, node.as_ref(), artifact);
        if !targets.is_empty() {
            let commands = targets
                .iter()
                .map(|n| Command::Answer {
                    node: n.clone(),
                    answer: Answer::reject(feedback.clone()),
                })
                .collect();
            self.deliver_all(sub, &run, commands).await?;
            return Ok(json!({ "run": run, "changesRequested": targets }));
        }
        if !outcome.status.is_final() {
            return Err(OpError::conflict(format!(
                "run {run} is {} and nothing waits for a review; send a message to a running node instead",
                outcome.status
            )));
        }
        let stage = match node {
            Some(n) => n,
            None => last_changing_stage(&outcome).ok_or_else(|| {
                OpError::conflict(format!(
                    "run {run} has no stage to revise; name one (node ids: {})",
                    agent_nodes(&outcome).join(", ")
                ))
            })?,
        };
        if self.runtime.store().change_set(run.as_str()).is_ok() {
            let _ = self.review_record_changes(&run, Some(&stage), &feedback);
        }
        self.deliver(
            sub,
            &run,
            Command::Revise {
                node: stage.clone(),
                message: Message::user(format!(
                    "Changes requested in review — address them in this attempt:\n{feedback}"
                )),
            },
        )
        .await?;
        Ok(json!({ "run": run, "revising": stage }))
    }

    pub(crate) async fn prune(
        self: &Arc<Self>,
        sub: &SubmissionId,
        run: &str,
        node: NodeId,
        subtree: bool,
        reason: Option<String>,
    ) -> OpResult {
        let run = self.run_id(run)?;
        let outcome = self.inspect(&run)?;
        let Some(view) = outcome.node(node.as_str()) else {
            return Err(OpError::not_found(format!(
                "run {run} has no node `{node}` (nodes: {})",
                outcome
                    .nodes
                    .iter()
                    .map(|n| n.id.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            )));
        };
        match view.state {
            Some(NodeState::Ready | NodeState::Running | NodeState::WaitingInput) => {}
            Some(s @ (NodeState::Completed | NodeState::Failed)) => {
                return Err(OpError::conflict(format!(
                    "node `{node}` is {s}: finished work cannot be pruned (reject its changes in review, or request changes to run it again)"
                )));
            }
            Some(s) => {
                return Err(OpError::conflict(format!(
                    "node `{node}` is already {s}; there is nothing to prune"
                )));
            }
            None => {
                return Err(OpError::conflict(format!(
                    "node `{node}` has not been reached yet; there is nothing to prune"
                )));
            }
        }
        let children: Vec<&str> = outcome
            .nodes
            .iter()
            .filter(|n| n.parent.as_ref() == Some(&node))
            .filter(|n| n.state.is_some_and(|s| !s.is_final()))
            .map(|n| n.id.as_str())
            .collect();
        if !subtree && !children.is_empty() {
            return Err(OpError::conflict(format!(
                "node `{node}` has {} unfinished child node(s) ({}); prune with subtree to prune them too",
                children.len(),
                children.join(", ")
            )));
        }
        self.deliver(sub, &run, Command::Prune { node, reason })
            .await
    }

    pub(crate) async fn cancel(
        self: &Arc<Self>,
        sub: &SubmissionId,
        run: &str,
        reason: Option<String>,
    ) -> OpResult {
        let run = self.run_id(run)?;
        let status = self.runtime.store().get_run(run.as_str())?.summary.status;
        if status.is_final() {
            return Err(OpError::conflict(format!(
                "run {run} is already {status}; nothing to cancel"
            )));
        }
        self.deliver(sub, &run, Command::Cancel { reason }).await
    }
}

/// The commands of a resume: answers first, then messages.
fn commands_of(answers: Vec<NodeAnswer>, messages: Vec<NodeMessage>) -> Vec<Command> {
    let answers = answers.into_iter().map(|a| Command::Answer {
        node: a.node,
        answer: a.answer,
    });
    let messages = messages.into_iter().map(|m| Command::SendMessage {
        node: m.node,
        message: Message::user(m.text),
    });
    answers.chain(messages).collect()
}

/// Nodes waiting on an approval or review (of `node`, or of `artifact`, or all).
fn waiting_for(o: &RunOutcome, node: Option<&NodeId>, artifact: Option<i64>) -> Vec<NodeId> {
    o.waiting
        .iter()
        .filter(|(n, it)| {
            matches!(it.kind, InterruptKind::Approval | InterruptKind::Review)
                && node.is_none_or(|want| want == n)
                && artifact
                    .is_none_or(|a| it.data.get("artifact").and_then(Value::as_i64) == Some(a))
        })
        .map(|(n, _)| n.clone())
        .collect()
}

fn nothing_waiting(o: &RunOutcome, run: &RunId, node: Option<&NodeId>) -> OpError {
    if o.waiting.is_empty() {
        return OpError::conflict(format!(
            "run {run} ({}) has nothing waiting for approval",
            o.status
        ));
    }
    let list: Vec<String> = o
        .waiting
        .iter()
        .map(|(n, it)| format!("{n} ({:?})", it.kind))
        .collect();
    OpError::conflict(format!(
        "{} nothing waiting for approval; waiting: {}",
        node.map(|n| format!("node `{n}` has"))
            .unwrap_or_else(|| format!("run {run} has")),
        list.join(", ")
    ))
}

/// Agent nodes (those with a recorded agent result).
fn agent_nodes(o: &RunOutcome) -> Vec<String> {
    o.nodes
        .iter()
        .filter(|n| n.result.get("agent").is_some())
        .map(|n| n.id.to_string())
        .collect()
}

/// The last stage (in the log's order of nodes) whose result changed files; else the last
/// agent stage that completed.
fn last_changing_stage(o: &RunOutcome) -> Option<NodeId> {
    let changed = |n: &&trellis_graph::NodeView| {
        n.result
            .get("files_changed")
            .and_then(Value::as_array)
            .is_some_and(|a| !a.is_empty())
    };
    o.nodes
        .iter()
        .rev()
        .find(changed)
        .or_else(|| {
            o.nodes
                .iter()
                .rev()
                .find(|n| n.result.get("agent").is_some())
        })
        .map(|n| n.id.clone())
}
