//! A prompt turn: one Trellis request, from `startRun` to the run's stop, streamed as
//! `session/update`s, with approvals asked through `session/request_permission` and questions
//! through `_trellis/question` (when the client takes it).

pub(crate) mod change;
mod notice;
mod question;
mod revise;

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use agent_client_protocol::v1::ConnectionTo;
use agent_client_protocol::v1::schema as acp;
use agent_client_protocol::{Client, Error};
use serde_json::{Value, json};
use tokio::sync::broadcast;
use tokio_util::sync::CancellationToken;
use trellis_core::service::{DriveEnd, Followed, LiveEvent, OpError, RunFrontEnd, Service};
use trellis_notify::Detector;
use trellis_protocol::acp::FEEDBACK_META;
use trellis_protocol::records::{ClientTurn, RunPlanned, RunState};
use trellis_protocol::{
    Answer, InputMode, Interrupt, InterruptKind, NodeAnswer, NodeId, Op, RunId, RunStatus,
    ServiceEventBody, SessionEvent, SessionOwner, StreamId, WorkspaceEvent,
};

use crate::config::{Autonomy, SessionConfig};
use crate::map::{StagePlan, session_updates, tool_kind, usage_update};
use crate::{AcpAgent, invalid_params, lock};
use change::{Offer, UNDO};

/// How long a run may be silent after it stopped executing before the turn ends without its
/// `runStopped` announcement.
const GRACE: Duration = Duration::from_millis(500);

/// Removes the turn from its session when the turn ends, however it ends.
struct TurnGuard<'a> {
    agent: &'a AcpAgent,
    session: String,
}

impl Drop for TurnGuard<'_> {
    fn drop(&mut self) {
        if let Some(s) = lock(&self.agent.sessions).get_mut(&self.session) {
            s.turn = None;
        }
    }
}

/// The text of a prompt: its text blocks, and the resources it links or embeds.
fn prompt_text(blocks: &[acp::ContentBlock]) -> String {
    let mut parts = Vec::new();
    for b in blocks {
        match b {
            acp::ContentBlock::Text(t) => parts.push(t.text.clone()),
            acp::ContentBlock::ResourceLink(l) => parts.push(format!("(see {})", l.uri)),
            acp::ContentBlock::Resource(r) => {
                if let acp::EmbeddedResourceResource::TextResourceContents(t) = &r.resource {
                    parts.push(format!("{}:\n{}", t.uri, t.text));
                }
            }
            _ => {}
        }
    }
    parts.join("\n").trim().to_owned()
}

/// At most this much of a file read through the client goes into the request.
const BUFFER_LIMIT: usize = 200_000;

/// The text of a prompt with the files it links read through the client
/// (`fs/read_text_file`, when it advertised it): an editor's buffer wins over the file on
/// disk, unsaved changes included. A file the client cannot read stays a link.
async fn prompt_with_buffers(
    blocks: &[acp::ContentBlock],
    session: &acp::SessionId,
    conn: &ConnectionTo<Client>,
    can_read: bool,
) -> String {
    let mut parts = Vec::new();
    for b in blocks {
        if let acp::ContentBlock::ResourceLink(l) = b
            && can_read
            && let Some(path) = l.uri.strip_prefix("file://")
        {
            let read = conn
                .send_request(acp::ReadTextFileRequest::new(session.clone(), path))
                .block_task()
                .await;
            match read {
                Ok(r) => {
                    let mut text = r.content;
                    if text.len() > BUFFER_LIMIT {
                        let mut end = BUFFER_LIMIT;
                        while !text.is_char_boundary(end) {
                            end -= 1;
                        }
                        text.truncate(end);
                        text.push_str("\n… [cut]");
                    }
                    parts.push(format!("{path} (as open in the editor):\n```\n{text}\n```"));
                    continue;
                }
                Err(e) => tracing::info!("fs/read_text_file {path}: {e}"),
            }
        }
        parts.push(prompt_text(std::slice::from_ref(b)));
    }
    parts.join("\n").trim().to_owned()
}

/// What the turn is talking to.
pub(crate) struct Turn {
    pub(crate) conn: ConnectionTo<Client>,
    pub(crate) session: acp::SessionId,
    pub(crate) service: Arc<Service>,
    pub(crate) root: PathBuf,
    pub(crate) token: CancellationToken,
}

enum Stop {
    /// The run stopped executing (finished, failed, cancelled or waiting for input).
    Stopped,
    /// The client cancelled the turn.
    Cancelled,
}

impl Turn {
    /// Asks the client `session/request_permission` for tool call `id`; a failed request or
    /// the turn's cancellation is `Cancelled`.
    pub(crate) async fn ask_permission(
        &self,
        id: &acp::ToolCallId,
        fields: acp::ToolCallUpdateFields,
        options: Vec<acp::PermissionOption>,
    ) -> acp::RequestPermissionOutcome {
        let sent = self.conn.send_request(acp::RequestPermissionRequest::new(
            self.session.clone(),
            acp::ToolCallUpdate::new(id.clone(), fields),
            options,
        ));
        tokio::select! {
            r = sent.block_task() => match r {
                Ok(r) => r.outcome,
                Err(e) => {
                    tracing::warn!("session/request_permission failed: {e}");
                    acp::RequestPermissionOutcome::Cancelled
                }
            },
            () = self.token.cancelled() => acp::RequestPermissionOutcome::Cancelled,
        }
    }

    pub(crate) fn send(&self, update: acp::SessionUpdate) {
        if let Err(e) = self
            .conn
            .send_notification(acp::SessionNotification::new(self.session.clone(), update))
        {
            tracing::warn!("session/update not sent: {e}");
        }
    }

    pub(crate) fn message(&self, text: impl Into<String>) {
        self.send(acp::SessionUpdate::AgentMessageChunk(
            acp::ContentChunk::new(text.into().into()),
        ));
    }

    fn thought(&self, text: impl Into<String>) {
        self.send(acp::SessionUpdate::AgentThoughtChunk(
            acp::ContentChunk::new(text.into().into()),
        ));
    }

    /// Streams the run's events until it stops executing or the client cancels.
    async fn follow(
        &self,
        live: &mut broadcast::Receiver<Arc<LiveEvent>>,
        run: &RunId,
        plan: &mut StagePlan,
        windows: &mut HashMap<String, Option<u64>>,
        notices: &mut Option<Detector>,
    ) -> Result<Stop, Error> {
        let prefix = format!("{run}:");
        loop {
            let stopped = async {
                self.service.wait_run(run).await;
                tokio::time::sleep(GRACE).await;
            };
            let e = tokio::select! {
                biased;
                () = self.token.cancelled() => return Ok(Stop::Cancelled),
                e = live.recv() => e,
                () = stopped => return Ok(Stop::Stopped),
            };
            let e = match e {
                Ok(e) => e,
                Err(broadcast::error::RecvError::Lagged(n)) => {
                    tracing::warn!("{n} events of run {run} skipped (slow client)");
                    continue;
                }
                Err(broadcast::error::RecvError::Closed) => {
                    return Err(Error::internal_error().data("the runtime service stopped"));
                }
            };
            if let Some(notice) = notices
                .as_mut()
                .filter(|_| matches!(&e.stream, StreamId::Run(r) if r == run))
                .and_then(|d| d.event(&e))
            {
                self.notify(notice);
            }
            match (&e.stream, &e.event) {
                (StreamId::Run(r), ServiceEventBody::Run(kind)) if r == run && plan.apply(kind) => {
                    self.send(acp::SessionUpdate::Plan(plan.to_acp()));
                }
                (StreamId::Session(s), ServiceEventBody::Session(ev)) => {
                    if let Some(node) = s.as_str().strip_prefix(&prefix) {
                        for u in session_updates(node, &self.root, ev) {
                            self.send(u);
                        }
                        if let SessionEvent::SessionStarted {
                            owner: SessionOwner::Agent { role, .. },
                        } = ev
                        {
                            windows
                                .insert(node.to_owned(), self.service.context_window(Some(role)));
                        }
                        let window = *windows
                            .entry(node.to_owned())
                            .or_insert_with(|| self.service.context_window(None));
                        if let Some(u) = window.and_then(|w| usage_update(ev, w)) {
                            self.send(u);
                        }
                    }
                }
                (_, ServiceEventBody::Workspace(WorkspaceEvent::RunStopped { run: r, .. }))
                    if r == run =>
                {
                    return Ok(Stop::Stopped);
                }
                _ => {}
            }
        }
    }

    /// Asks the client about one interrupt. `None` when the turn was cancelled meanwhile.
    async fn ask(
        &self,
        agent: &AcpAgent,
        n: usize,
        node: &NodeId,
        it: &Interrupt,
    ) -> Option<Answer> {
        if it.kind == InterruptKind::Question {
            return self
                .question(agent.client_caps().questions, n, node, it)
                .await;
        }
        let request = &it.data["request"];
        let tool = request["tool"].as_str().map(str::to_owned);
        let key = tool.clone().unwrap_or_else(|| it.prompt.clone());
        let remembered = lock(&agent.sessions)
            .get(self.session.0.as_ref())
            .and_then(|s| s.config.approvals.get(&key).copied());
        if let Some(allow) = remembered {
            return Some(if allow {
                Answer::approve()
            } else {
                Answer::reject("rejected in the editor (always)")
            });
        }
        let id = acp::ToolCallId::new(format!("{node}/approval-{n}"));
        let mut fields = acp::ToolCallUpdateFields::new()
            .title(it.prompt.clone())
            .status(acp::ToolCallStatus::Pending);
        if let Some(t) = &tool {
            fields = fields.kind(tool_kind(t));
        }
        if !request["args"].is_null() {
            fields = fields.raw_input(request["args"].clone());
        }
        let mut call =
            acp::ToolCall::new(id.clone(), it.prompt.clone()).status(acp::ToolCallStatus::Pending);
        if let Some(t) = &tool {
            call = call.kind(tool_kind(t));
        }
        self.send(acp::SessionUpdate::ToolCall(call));
        let what = tool.as_deref().unwrap_or("this");
        let options = vec![
            acp::PermissionOption::new("allow_once", "Allow", acp::PermissionOptionKind::AllowOnce),
            acp::PermissionOption::new(
                "allow_always",
                format!("Always allow {what}"),
                acp::PermissionOptionKind::AllowAlways,
            ),
            acp::PermissionOption::new(
                "reject_once",
                "Reject",
                acp::PermissionOptionKind::RejectOnce,
            ),
            acp::PermissionOption::new(
                "reject_always",
                format!("Always reject {what}"),
                acp::PermissionOptionKind::RejectAlways,
            ),
        ];
        let outcome = self.ask_permission(&id, fields, options).await;
        let (chosen, feedback) = match outcome {
            acp::RequestPermissionOutcome::Selected(s) => {
                let feedback = s
                    .meta
                    .as_ref()
                    .and_then(|m| m.get(FEEDBACK_META))
                    .and_then(|v| v.as_str())
                    .map(str::trim)
                    .filter(|t| !t.is_empty())
                    .map(str::to_owned);
                (s.option_id.0.to_string(), feedback)
            }
            _ => {
                self.send(acp::SessionUpdate::ToolCallUpdate(
                    acp::ToolCallUpdate::new(
                        id,
                        acp::ToolCallUpdateFields::new().status(acp::ToolCallStatus::Failed),
                    ),
                ));
                return None;
            }
        };
        let allow = chosen.starts_with("allow");
        if chosen.ends_with("always")
            && let Err(e) = agent
                .remember(&self.service, &self.session, key, allow)
                .await
        {
            tracing::warn!("recording an approval of session {}: {e}", self.session);
        }
        let status = if allow {
            acp::ToolCallStatus::Completed
        } else {
            acp::ToolCallStatus::Failed
        };
        self.send(acp::SessionUpdate::ToolCallUpdate(
            acp::ToolCallUpdate::new(id, acp::ToolCallUpdateFields::new().status(status)),
        ));
        Some(if allow {
            Answer::approve()
        } else {
            Answer::reject(feedback.unwrap_or_else(|| "rejected in the editor".into()))
        })
    }

    /// Cancels the run (it stops where it is) and ends the turn as `cancelled`.
    async fn cancel_run(&self, run: &RunId) -> acp::StopReason {
        if let Err(e) = self
            .service
            .call(Op::Cancel {
                run: run.to_string(),
                reason: Some("cancelled in the editor".into()),
            })
            .await
        {
            tracing::warn!("cancelling run {run}: {e}");
        }
        self.service.wait_run(run).await;
        acp::StopReason::Cancelled
    }

    /// The end of the turn: the stages' answers and, for a failed run, why.
    fn summary(&self, outcome: &Outcome) {
        let text = summary_text(outcome);
        if !text.is_empty() {
            self.message(text);
        }
    }
}

/// The end-of-turn message: the stages' answers, why a run failed, the files it changed.
pub(crate) fn summary_text(outcome: &Outcome) -> String {
    let mut text = String::new();
    if let Value::Object(stages) = &outcome.stage_results {
        // By stage name, however serde_json keeps the map's keys.
        let mut stages: Vec<(&String, &Value)> = stages.iter().collect();
        stages.sort_by(|a, b| a.0.cmp(b.0));
        for (stage, r) in stages {
            let out = match &r["output"] {
                Value::String(s) => s.clone(),
                Value::Null => continue,
                other => other["output"]
                    .as_str()
                    .or_else(|| other["summary"].as_str())
                    .map(str::to_owned)
                    .unwrap_or_else(|| other.to_string()),
            };
            if !out.trim().is_empty() {
                text.push_str(&format!("\n**{stage}**: {}\n", out.trim()));
            }
        }
    }
    if let Some(e) = &outcome.error {
        text.push_str(&format!("\nThe run failed: {e}\n"));
    }
    if !outcome.files_changed.is_empty() {
        text.push_str(&format!(
            "\nFiles changed in the run's worktree (review with `trellis review {}`): {}\n",
            outcome.run,
            outcome.files_changed.join(", ")
        ));
    }
    text
}

/// What the turn needs of a run's outcome.
pub(crate) struct Outcome {
    run: RunId,
    status: RunStatus,
    error: Option<String>,
    stage_results: Value,
    files_changed: Vec<String>,
}

pub(crate) fn outcome(service: &Service, run: &RunId) -> Result<Outcome, Error> {
    let o = service
        .run_state(run)
        .map_err(|e| Error::internal_error().data(e.message))?;
    Ok(Outcome::from(o))
}

impl From<RunState> for Outcome {
    fn from(o: RunState) -> Self {
        Self {
            stage_results: o.state.get("stage_results").cloned().unwrap_or(Value::Null),
            files_changed: o.files_changed(),
            run: o.run,
            status: o.status,
            error: o.error,
        }
    }
}

impl AcpAgent {
    /// Records the turn's run in the session (and the first prompt as its title), so
    /// `session/load` finds it after a restart. A failure is logged: the turn goes on.
    async fn record_turn(
        &self,
        service: &Arc<Service>,
        session: &acp::SessionId,
        request: &str,
        run: &RunId,
        planned: Option<&RunPlanned>,
    ) {
        let key = session.0.to_string();
        let (cwd, title) = {
            let mut sessions = lock(&self.sessions);
            let Some(s) = sessions.get_mut(&key) else {
                return;
            };
            let new_title = s.title.is_none().then(|| {
                let line = request.lines().next().unwrap_or_default();
                let mut t: String = line.chars().take(80).collect();
                if t.len() < line.len() {
                    t.push('…');
                }
                t
            });
            if let Some(t) = &new_title {
                s.title = Some(t.clone());
            }
            (s.cwd.clone(), new_title)
        };
        let turn = ClientTurn {
            session: key.clone(),
            turn: 0,
            run: run.clone(),
            request: request.to_owned(),
            workflow: planned.map(|p| p.workflow.clone()),
            plan: planned.map_or_else(|| Value::Null.to_string(), |p| p.plan.to_string()),
            created_ms: 0,
        };
        let done = async {
            if let Some(title) = title {
                let svc = service.clone();
                let found = tokio::task::spawn_blocking(move || svc.client_session(&key))
                    .await
                    .map_err(|e| e.to_string())?
                    .map_err(|e| e.to_string())?;
                if let Some(mut record) = found {
                    record.title = Some(title);
                    record.cwd = cwd.display().to_string();
                    service
                        .call(Op::RecordClientSession { session: record })
                        .await
                        .map_err(|e| e.to_string())?;
                }
            }
            service
                .call(Op::RecordClientTurn { turn })
                .await
                .map_err(|e| e.to_string())
        }
        .await;
        if let Err(e) = done {
            tracing::warn!("recording the turn of session {session}: {e}");
        }
    }

    /// `session/prompt`: runs the request as a workflow run and streams it.
    pub(crate) async fn prompt(
        self: &Arc<Self>,
        req: acp::PromptRequest,
        conn: ConnectionTo<Client>,
    ) -> Result<acp::PromptResponse, Error> {
        let key = req.session_id.0.to_string();
        let token = CancellationToken::new();
        let (cwd, config) = self.claim_session(&req.session_id, &key, &token)?;
        let _guard = TurnGuard {
            agent: self,
            session: key,
        };
        let can_read = self.client_caps().read_text_file;
        let request = prompt_with_buffers(&req.prompt, &req.session_id, &conn, can_read).await;
        if request.is_empty() {
            return Err(invalid_params("the prompt has no text"));
        }
        let service = self.live_service(&req.session_id).await?;
        let root = service.root().to_path_buf();
        let turn = Turn {
            conn,
            session: req.session_id.clone(),
            service: service.clone(),
            root,
            token,
        };
        if request == UNDO {
            self.undo(&turn).await;
            return Ok(acp::PromptResponse::new(acp::StopReason::EndTurn));
        }
        // Planning (the orchestrator's model call, the worktree) takes a while: say so at once.
        turn.thought(match &config.workflow {
            Some(w) => format!("Planning the `{w}` workflow…\n"),
            None => "Choosing a workflow and its stages…\n".to_owned(),
        });
        let input = input_mode(config.autonomy);
        // Subscribed before the start, so the run's first events are not missed.
        let mut live = service.live();
        let op = Op::StartRun {
            request: request.clone(),
            repo: Some(cwd.display().to_string()),
            workflow: config.workflow.clone(),
            include: Vec::new(),
            skip: Vec::new(),
            input,
            budgets: None,
            plan_only: false,
        };
        let started = match turn.start_run(op).await {
            Ok(v) => v,
            Err(stop) => return Ok(acp::PromptResponse::new(stop)),
        };
        let run = RunId::from_string(started["run"].as_str().unwrap_or_default());
        // The run's first node plans: wait for its decision (a cancel cancels the run).
        let planned = tokio::select! {
            p = service.planned(&run, &mut live) => p,
            () = turn.token.cancelled() => {
                return Ok(acp::PromptResponse::new(turn.cancel_run(&run).await));
            }
        };
        let planned = match planned {
            Ok(p) => p,
            Err(e) => {
                turn.message(format!("Trellis could not follow the run's planning: {e}"));
                return Ok(acp::PromptResponse::new(acp::StopReason::EndTurn));
            }
        };
        self.record_turn(&service, &req.session_id, &request, &run, planned.as_ref())
            .await;
        let plan = planned
            .as_ref()
            .map(|p| StagePlan::from_plan(&p.plan))
            .unwrap_or_default();
        if let Some(p) = &planned {
            turn.thought(format!("Workflow `{}` (run {run}).\n", p.workflow));
        }
        if !plan.is_empty() {
            turn.send(acp::SessionUpdate::Plan(plan.to_acp()));
        }
        let stop = self
            .drive_run(&turn, &mut live, &run, plan, input, config.autonomy)
            .await?;
        Ok(acp::PromptResponse::new(stop))
    }

    /// Claims session `key` for a new turn, cancelled by `token`: its cwd and settings. A
    /// session with a turn running is refused.
    fn claim_session(
        &self,
        id: &acp::SessionId,
        key: &str,
        token: &CancellationToken,
    ) -> Result<(PathBuf, SessionConfig), Error> {
        let mut sessions = lock(&self.sessions);
        let Some(s) = sessions.get_mut(key) else {
            return Err(acp::Error::session_not_found(id.clone()).into());
        };
        if s.turn.is_some() {
            return Err(Error::invalid_request()
                .data(json!("a prompt turn is already running in this session")));
        }
        s.turn = Some(token.clone());
        Ok((s.cwd.clone(), s.config.clone()))
    }

    /// Follows the run until the turn ends, with the turn's stop reason: streams it, and
    /// each time it waits for input asks the client and resumes it with the answers.
    async fn drive_run(
        &self,
        turn: &Turn,
        live: &mut broadcast::Receiver<Arc<LiveEvent>>,
        run: &RunId,
        plan: StagePlan,
        input: InputMode,
        autonomy: Autonomy,
    ) -> Result<acp::StopReason, Error> {
        let notices = match self.client_caps().notifications {
            true => Some(self.notices(turn, run).await),
            false => None,
        };
        let mut front = TurnFront {
            agent: self,
            turn,
            plan,
            windows: HashMap::new(),
            asked: 0,
            notices,
        };
        Ok(
            match turn.service.drive(run, live, input, &mut front).await? {
                DriveEnd::Cancelled => turn.cancel_run(run).await,
                // Cancelled while asking: the run stays paused (resumable).
                DriveEnd::Paused(_) => acp::StopReason::Cancelled,
                DriveEnd::Ended(state) => {
                    self.end_of_run(turn, run, &Outcome::from(state), autonomy)
                        .await
                }
                DriveEnd::NotResumed(e) => {
                    turn.message(format!("\nTrellis could not continue the run: {e}\n"));
                    acp::StopReason::EndTurn
                }
            },
        )
    }

    /// The run stopped for good: the turn's summary, then the change set offered to the
    /// client for a run that succeeded.
    async fn end_of_run(
        &self,
        turn: &Turn,
        run: &RunId,
        o: &Outcome,
        autonomy: Autonomy,
    ) -> acp::StopReason {
        turn.summary(o);
        if o.status == RunStatus::Cancelled {
            return acp::StopReason::Cancelled;
        }
        if o.status == RunStatus::Succeeded
            && turn.offer_changes(self, run, autonomy).await == Offer::Cancelled
        {
            return acp::StopReason::Cancelled;
        }
        acp::StopReason::EndTurn
    }
}

/// A prompt turn as the run driver's front-end: it streams the run to the client and asks
/// the client for the answers.
struct TurnFront<'a> {
    agent: &'a AcpAgent,
    turn: &'a Turn,
    plan: StagePlan,
    windows: HashMap<String, Option<u64>>,
    /// Questions asked so far in the turn (numbers the permission requests).
    asked: usize,
    /// What becomes `_trellis/notification`s, for a client that takes them.
    notices: Option<Detector>,
}

impl RunFrontEnd for TurnFront<'_> {
    type Error = Error;

    async fn follow(
        &mut self,
        live: &mut broadcast::Receiver<Arc<LiveEvent>>,
        run: &RunId,
    ) -> Result<Followed, Error> {
        let stop = self
            .turn
            .follow(
                live,
                run,
                &mut self.plan,
                &mut self.windows,
                &mut self.notices,
            )
            .await?;
        Ok(match stop {
            Stop::Cancelled => Followed::Cancelled,
            Stop::Stopped => Followed::Stopped,
        })
    }

    /// The client's answers to the interrupts the run waits on; `None` when the turn was
    /// cancelled while asking.
    async fn ask(&mut self, state: &RunState) -> Result<Option<Vec<NodeAnswer>>, Error> {
        let mut answers = Vec::new();
        for (node, it) in &state.waiting {
            self.asked += 1;
            let Some(answer) = self.turn.ask(self.agent, self.asked, node, it).await else {
                return Ok(None);
            };
            answers.push(NodeAnswer {
                node: node.clone(),
                answer,
            });
        }
        Ok(Some(answers))
    }

    fn service_error(&self, error: OpError) -> Error {
        Error::internal_error().data(error.message)
    }
}

/// How the run asks for input: read-only denies what the policy would ask about and asks
/// nothing; otherwise approvals come to the client as interrupts.
fn input_mode(autonomy: Autonomy) -> InputMode {
    if autonomy == Autonomy::ReadOnly {
        InputMode::Deny
    } else {
        InputMode::Interrupts
    }
}

impl Turn {
    /// Sends the start op. `Err` ends the turn with its stop reason: the client cancelled
    /// meanwhile (the run the op starts is cancelled as soon as it has an id), or the run
    /// could not start (the client is told why).
    async fn start_run(&self, op: Op) -> Result<Value, acp::StopReason> {
        let svc = self.service.clone();
        let mut start = Box::pin(async move { svc.call(op).await });
        let started = tokio::select! {
            r = &mut start => r,
            () = self.token.cancelled() => {
                // The op runs on; cancel the run it starts as soon as it has an id.
                let svc = self.service.clone();
                tokio::spawn(async move {
                    if let Ok(v) = start.await
                        && let Some(run) = v["run"].as_str()
                    {
                        let _ = svc
                            .call(Op::Cancel {
                                run: run.to_owned(),
                                reason: Some("cancelled in the editor".into()),
                            })
                            .await;
                    }
                });
                return Err(acp::StopReason::Cancelled);
            }
        };
        started.map_err(|e| {
            // A request the orchestrator or the models cannot serve: say why, end the turn.
            self.message(format!("Trellis could not start the run: {e}"));
            acp::StopReason::EndTurn
        })
    }
}
