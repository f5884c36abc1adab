//! The connection task: the SDK's client side over a [`Transport`], commands in, events out.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use agent_client_protocol::schema::ProtocolVersion;
use agent_client_protocol::v1::schema as acp;
use agent_client_protocol::v1::{self, ConnectionTo};
use agent_client_protocol::{Agent, Client, UntypedMessage};
use futures::channel::mpsc::{UnboundedReceiver, UnboundedSender, unbounded};
use tokio::sync::mpsc;

use super::event::{AgentInfo, SessionOpened, SessionSummary, Update, config_options};
use super::review::{
    REQUEST_CHANGES_METHOD, REVIEW_METHOD, RequestChangesParams, ReviewAction, ReviewParams,
    ReviewReply,
};
use super::{Event, FEEDBACK_META, PermissionAsk, SessionId, Transport, question};
use crate::error::{Error, Result};

/// Something for the agent to do.
#[derive(Clone, Debug)]
pub enum Command {
    /// `session/new` in `cwd`.
    NewSession {
        /// The session's working directory (absolute, in the repository).
        cwd: PathBuf,
    },
    /// `session/list`.
    ListSessions,
    /// `session/load` (replays the conversation).
    LoadSession {
        /// The session.
        id: SessionId,
        /// Its working directory.
        cwd: PathBuf,
    },
    /// `session/resume` (no replay).
    ResumeSession {
        /// The session.
        id: SessionId,
        /// Its working directory.
        cwd: PathBuf,
    },
    /// `session/close`.
    CloseSession {
        /// The session.
        id: SessionId,
    },
    /// `session/prompt` with a text block and links to files (`resource_link`, `file://`).
    Prompt {
        /// The session.
        session: SessionId,
        /// The text.
        text: String,
        /// Files the prompt refers to (the open file): the agent reads them through the
        /// client when it may (`fs/read_text_file`).
        links: Vec<PathBuf>,
    },
    /// `session/cancel`.
    Cancel {
        /// The session.
        session: SessionId,
    },
    /// Answer permission request `ask` with an option id, or question `ask` with a text
    /// (`None`: cancelled).
    Answer {
        /// The request ([`PermissionAsk::id`]).
        ask: u64,
        /// The chosen option's id, or the answer's text.
        option: Option<String>,
        /// Text typed with a permission's option (a rejection's comment, a review gate's
        /// feedback): sent in the answer's `_meta` ([`FEEDBACK_META`]).
        feedback: Option<String>,
    },
    /// `session/set_config_option`.
    SetConfig {
        /// The session.
        session: SessionId,
        /// The option (`workflow`, `autonomy`).
        option: String,
        /// Its new value.
        value: String,
    },
    /// `_trellis/review`.
    Review {
        /// The session.
        session: SessionId,
        /// The run (default: the session's latest).
        run: Option<String>,
        /// What to do.
        action: ReviewAction,
    },
    /// `_trellis/requestChanges`: the run's stage runs again with `feedback`; the request
    /// lasts like a prompt turn (it streams, asks permissions, ends with a stop reason).
    RequestChanges {
        /// The session.
        session: SessionId,
        /// The run (default: the session's latest).
        run: Option<String>,
        /// What to change.
        feedback: String,
    },
}

impl Command {
    /// The ACP method the command sends.
    pub fn method(&self) -> &'static str {
        match self {
            Self::NewSession { .. } => "session/new",
            Self::ListSessions => "session/list",
            Self::LoadSession { .. } => "session/load",
            Self::ResumeSession { .. } => "session/resume",
            Self::CloseSession { .. } => "session/close",
            Self::Prompt { .. } => "session/prompt",
            Self::Cancel { .. } => "session/cancel",
            Self::Answer { .. } => "session/request_permission",
            Self::SetConfig { .. } => "session/set_config_option",
            Self::Review { .. } => REVIEW_METHOD,
            Self::RequestChanges { .. } => REQUEST_CHANGES_METHOD,
        }
    }
}

/// The window's handle on the connection: cheap to clone; sending never blocks.
#[derive(Clone, Debug)]
pub struct Handle {
    tx: mpsc::UnboundedSender<Command>,
}

impl Handle {
    /// Queues `command`; [`Error::Closed`] when the connection is gone.
    pub fn send(&self, command: Command) -> Result<()> {
        self.tx.send(command).map_err(|_| Error::Closed)
    }

    /// A handle whose commands go to `rx` instead of an agent (for tests of the window, and
    /// for a window that is not connected yet).
    pub fn detached() -> (Self, mpsc::UnboundedReceiver<Command>) {
        let (tx, rx) = mpsc::unbounded_channel();
        (Self { tx }, rx)
    }
}

/// A request of the agent waiting for the window's answer.
enum Parked {
    /// `session/request_permission`.
    Permission(v1::Responder<acp::RequestPermissionResponse>),
    /// `_trellis/question`.
    Question(v1::Responder<serde_json::Value>),
}

impl Parked {
    /// Answers with an option id (a permission, with the feedback typed with it) or a text
    /// (a question); `None`: cancelled.
    fn answer(self, with: Option<String>, feedback: Option<String>) {
        let sent = match self {
            Self::Permission(r) => {
                let outcome = match with {
                    Some(id) => {
                        let mut selected = acp::SelectedPermissionOutcome::new(id);
                        if let Some(f) = feedback {
                            let mut meta = serde_json::Map::new();
                            meta.insert(FEEDBACK_META.into(), f.into());
                            selected = selected.meta(meta);
                        }
                        acp::RequestPermissionOutcome::Selected(selected)
                    }
                    None => acp::RequestPermissionOutcome::Cancelled,
                };
                r.respond(acp::RequestPermissionResponse::new(outcome))
            }
            Self::Question(r) => r.respond(question::response(with)),
        };
        if let Err(e) = sent {
            tracing::warn!("answering the agent's request: {e}");
        }
    }
}

type Pending = Arc<Mutex<HashMap<u64, (SessionId, Parked)>>>;

/// Connects to the agent over `transport` on `runtime`: the handle to drive it and the stream
/// of what happens. The first event is [`Event::Connected`] (or a failure and
/// [`Event::Disconnected`]); the last is always [`Event::Disconnected`].
pub fn connect(
    runtime: &tokio::runtime::Handle,
    transport: Transport,
) -> (Handle, UnboundedReceiver<Event>) {
    let (events, rx) = unbounded();
    let (tx, commands) = mpsc::unbounded_channel();
    runtime.spawn(run(transport, commands, events));
    (Handle { tx }, rx)
}

fn emit(events: &UnboundedSender<Event>, e: Event) {
    // The window is gone: nothing to tell.
    let _ = events.unbounded_send(e);
}

async fn run(
    transport: Transport,
    mut commands: mpsc::UnboundedReceiver<Command>,
    events: UnboundedSender<Event>,
) {
    let Transport {
        reader,
        writer,
        child,
        stderr,
        name,
        files,
        stderr_task,
    } = transport;
    let serving = files.is_some();
    let lines = Transport::lines(reader, writer, events.clone());
    let pending: Pending = Arc::default();
    let next = Arc::new(AtomicU64::new(1));
    let (on_update, on_ask, asks) = (events.clone(), events.clone(), pending.clone());
    let (on_question, questions, next_q) = (events.clone(), pending.clone(), next.clone());
    let main_events = events.clone();
    let main_pending = pending.clone();
    let result = Client
        .v1()
        .name("trellis-desktop")
        .on_receive_notification(
            async move |n: acp::SessionNotification, _cx| {
                emit(
                    &on_update,
                    Event::Update {
                        session: n.session_id.clone(),
                        update: Update::from(&n.update),
                    },
                );
                Ok(())
            },
            agent_client_protocol::on_receive_notification!(),
        )
        .on_receive_request(
            // Answered later, from the window: the responder waits in `pending`.
            async move |r: acp::RequestPermissionRequest, responder, _cx| {
                let id = next.fetch_add(1, Ordering::Relaxed);
                if let Ok(mut p) = asks.lock() {
                    p.insert(id, (r.session_id.clone(), Parked::Permission(responder)));
                }
                emit(&on_ask, Event::Permission(PermissionAsk::new(id, &r)));
                Ok(())
            },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_request(
            async move |r: acp::ReadTextFileRequest, responder, _cx| {
                responder.respond_with_result(read_text_file(files.as_deref(), &r))
            },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_request(
            // The agent's other requests (last: this one takes any method).
            async move |r: UntypedMessage, responder, _cx| {
                park_question(&r, responder, &questions, &next_q, &on_question)
            },
            agent_client_protocol::on_receive_request!(),
        )
        .connect_with(lines, async move |cx: ConnectionTo<Agent>| {
            // The workflow's questions come as `_trellis/question`.
            let mut meta = serde_json::Map::new();
            meta.insert(
                super::EXTENSIONS_META.into(),
                serde_json::json!({ "methods": [question::QUESTION_METHOD] }),
            );
            let caps = acp::ClientCapabilities::new()
                .fs(acp::FileSystemCapabilities::new().read_text_file(serving))
                .meta(meta);
            let init = acp::InitializeRequest::new(ProtocolVersion::V1)
                .client_capabilities(caps)
                .client_info(
                    acp::Implementation::new("trellis-desktop", env!("CARGO_PKG_VERSION"))
                        .title("Trellis Desktop"),
                );
            match cx.send_request(init).block_task().await {
                Ok(r) => emit(&main_events, Event::Connected(AgentInfo::from_response(&r))),
                Err(e) => {
                    fail(&main_events, "initialize", &e);
                    return Err(e);
                }
            }
            while let Some(cmd) = commands.recv().await {
                match cmd {
                    Command::Answer {
                        ask,
                        option,
                        feedback,
                    } => answer(&main_pending, ask, option, feedback),
                    Command::Cancel { session } => {
                        if let Err(e) = cx.send_notification(acp::CancelNotification::new(session))
                        {
                            fail(&main_events, "session/cancel", &e);
                        }
                    }
                    cmd => {
                        let (cx, events, pending) =
                            (cx.clone(), main_events.clone(), main_pending.clone());
                        tokio::spawn(async move { execute(&cx, cmd, &events, &pending).await });
                    }
                }
            }
            Ok(())
        })
        .await;
    // Unanswered permission requests die with the connection.
    if let Ok(mut p) = pending.lock() {
        p.clear();
    }
    emit(
        &events,
        Event::Disconnected(farewell(&name, result.err(), child, stderr_task, &stderr).await),
    );
}

/// Why the connection ended: the SDK's error, the agent's exit status, its last stderr lines.
async fn farewell(
    name: &str,
    error: Option<agent_client_protocol::Error>,
    child: Option<tokio::process::Child>,
    stderr_task: Option<tokio::task::JoinHandle<()>>,
    stderr: &Mutex<std::collections::VecDeque<String>>,
) -> String {
    let mut why = format!("The connection to `{name}` closed");
    if let Some(mut child) = child {
        match tokio::time::timeout(Duration::from_secs(2), child.wait()).await {
            Ok(Ok(status)) => why.push_str(&format!("; the agent exited ({status})")),
            Ok(Err(e)) => why.push_str(&format!("; waiting for the agent: {e}")),
            Err(_) => {
                let _ = child.start_kill();
                why.push_str("; the agent stopped answering and was killed");
            }
        }
    }
    if let Some(e) = error {
        why.push_str(&format!(": {e}"));
    }
    // Its stderr closes with it: read to the end before quoting it.
    if let Some(task) = stderr_task {
        let _ = tokio::time::timeout(Duration::from_secs(1), task).await;
    }
    let tail = Transport::stderr_tail(stderr);
    if !tail.is_empty() {
        why.push_str(&format!("\nIts last words (stderr):\n{tail}"));
    }
    why
}

fn fail(events: &UnboundedSender<Event>, context: &str, e: &agent_client_protocol::Error) {
    emit(
        events,
        Event::Failed {
            context: context.to_owned(),
            message: Error::request(context, e).to_string(),
        },
    );
}

/// The agent's request `r` beyond ACP's: a workflow's question (`_trellis/question`) is
/// parked like a permission, to be answered with text; any other method is not found.
fn park_question(
    r: &UntypedMessage,
    responder: v1::Responder<serde_json::Value>,
    pending: &Pending,
    next: &AtomicU64,
    events: &UnboundedSender<Event>,
) -> std::result::Result<(), agent_client_protocol::Error> {
    if r.method() != question::QUESTION_METHOD {
        return responder.respond_with_error(agent_client_protocol::Error::method_not_found());
    }
    let params: question::QuestionParams = match serde_json::from_value(r.params().clone()) {
        Ok(p) => p,
        Err(e) => {
            let e = agent_client_protocol::Error::invalid_params().data(e.to_string());
            return responder.respond_with_error(e);
        }
    };
    let id = next.fetch_add(1, Ordering::Relaxed);
    let ask = PermissionAsk::question(id, &params);
    if let Ok(mut p) = pending.lock() {
        p.insert(id, (ask.session.clone(), Parked::Question(responder)));
    }
    emit(events, Event::Permission(ask));
    Ok(())
}

/// Answers permission request (or question) `ask`.
fn answer(pending: &Pending, ask: u64, option: Option<String>, feedback: Option<String>) {
    if let Some((_, parked)) = pending.lock().ok().and_then(|mut p| p.remove(&ask)) {
        parked.answer(option, feedback);
    }
}

/// Drops the permission requests of `session` still waiting (its turn ended: the agent
/// treats them as cancelled): their ids.
fn withdraw(pending: &Pending, session: &SessionId) -> Vec<u64> {
    let Ok(mut p) = pending.lock() else {
        return Vec::new();
    };
    let ids: Vec<u64> = p
        .iter()
        .filter(|(_, (s, _))| s == session)
        .map(|(id, _)| *id)
        .collect();
    for id in &ids {
        if let Some((_, parked)) = p.remove(id) {
            parked.answer(None, None);
        }
    }
    ids
}

/// Runs one request and reports its answer.
async fn execute(
    cx: &ConnectionTo<Agent>,
    cmd: Command,
    events: &UnboundedSender<Event>,
    pending: &Pending,
) {
    let method = cmd.method();
    let result: Result<Event, agent_client_protocol::Error> = match cmd {
        Command::NewSession { cwd } => cx
            .send_request(acp::NewSessionRequest::new(cwd.clone()))
            .block_task()
            .await
            .map(|r| opened(r.session_id, cwd, r.config_options.as_ref(), "new")),
        Command::ListSessions => cx
            .send_request(acp::ListSessionsRequest::new())
            .block_task()
            .await
            .map(|r| {
                Event::Sessions(
                    r.sessions
                        .into_iter()
                        .map(|s| SessionSummary {
                            title: s.title.unwrap_or_else(|| s.session_id.to_string()),
                            id: s.session_id,
                            cwd: s.cwd,
                            updated_at: s.updated_at,
                        })
                        .collect(),
                )
            }),
        Command::LoadSession { id, cwd } => cx
            .send_request(acp::LoadSessionRequest::new(id.clone(), cwd.clone()))
            .block_task()
            .await
            .map(|r| opened(id, cwd, r.config_options.as_ref(), "load")),
        Command::ResumeSession { id, cwd } => cx
            .send_request(acp::ResumeSessionRequest::new(id.clone(), cwd.clone()))
            .block_task()
            .await
            .map(|r| opened(id, cwd, r.config_options.as_ref(), "resume")),
        Command::CloseSession { id } => cx
            .send_request(acp::CloseSessionRequest::new(id.clone()))
            .block_task()
            .await
            .map(|_| Event::Update {
                session: id,
                update: Update::Other("closed".into()),
            }),
        Command::Prompt {
            session,
            text,
            links,
        } => prompt(cx, session, text, &links, events, pending).await,
        Command::SetConfig {
            session,
            option,
            value,
        } => cx
            .send_request(acp::SetSessionConfigOptionRequest::new(
                session.clone(),
                option,
                value.as_str(),
            ))
            .block_task()
            .await
            .map(|r| Event::Update {
                session,
                update: Update::ConfigOptions(config_options(Some(&r.config_options))),
            }),
        Command::Review {
            session,
            run,
            action,
        } => review(cx, session, run, action).await,
        Command::RequestChanges {
            session,
            run,
            feedback,
        } => {
            let params = RequestChangesParams {
                session_id: session.to_string(),
                run,
                node: None,
                artifact: None,
                feedback,
            };
            let r = match UntypedMessage::new(REQUEST_CHANGES_METHOD, params) {
                Ok(m) => cx.send_request(m).block_task().await,
                Err(e) => Err(e),
            };
            turn_over(
                events,
                pending,
                session,
                r.map(|v| v["stopReason"].as_str().unwrap_or("end_turn").to_owned()),
            )
        }
        Command::Answer { .. } | Command::Cancel { .. } => return,
    };
    match result {
        Ok(e) => emit(events, e),
        Err(e) => fail(events, method, &e),
    }
}

/// `session/prompt`: the text and links to files; when the turn ends, its permission
/// requests still waiting are withdrawn.
async fn prompt(
    cx: &ConnectionTo<Agent>,
    session: SessionId,
    text: String,
    links: &[PathBuf],
    events: &UnboundedSender<Event>,
    pending: &Pending,
) -> Result<Event, agent_client_protocol::Error> {
    let mut blocks: Vec<acp::ContentBlock> = vec![text.into()];
    blocks.extend(links.iter().map(|p| {
        let name = p.file_name().map_or_else(
            || p.display().to_string(),
            |n| n.to_string_lossy().into_owned(),
        );
        acp::ContentBlock::ResourceLink(acp::ResourceLink::new(
            name,
            format!("file://{}", p.display()),
        ))
    }));
    let r = cx
        .send_request(acp::PromptRequest::new(session.clone(), blocks))
        .block_task()
        .await;
    turn_over(
        events,
        pending,
        session,
        r.map(|r| {
            serde_json::to_value(r.stop_reason)
                .ok()
                .and_then(|v| v.as_str().map(str::to_owned))
                .unwrap_or_default()
        }),
    )
}

/// A turn (a prompt, or a request for changes) answered with its stop reason, or failed:
/// its permission requests still waiting are withdrawn, and it ends.
fn turn_over(
    events: &UnboundedSender<Event>,
    pending: &Pending,
    session: SessionId,
    stop: Result<String, agent_client_protocol::Error>,
) -> Result<Event, agent_client_protocol::Error> {
    for id in withdraw(pending, &session) {
        emit(events, Event::PermissionGone(id));
    }
    if stop.is_err() {
        // The turn is over for the window too (the failure follows as `Failed`).
        emit(
            events,
            Event::TurnEnded {
                session: session.clone(),
                stop: "failed".into(),
            },
        );
    }
    stop.map(|stop| Event::TurnEnded { session, stop })
}

async fn review(
    cx: &ConnectionTo<Agent>,
    session: SessionId,
    run: Option<String>,
    action: ReviewAction,
) -> Result<Event, agent_client_protocol::Error> {
    let params = ReviewParams {
        session_id: session.to_string(),
        run,
        action: action.clone(),
    };
    let v = cx
        .send_request(UntypedMessage::new(REVIEW_METHOD, params)?)
        .block_task()
        .await?;
    let reply = ReviewReply::parse(&action, v).map_err(|m| {
        agent_client_protocol::Error::invalid_params().data(serde_json::Value::String(m))
    })?;
    Ok(Event::Review { session, reply })
}

/// `fs/read_text_file`: a file under `root` (the lines asked for), refused outside it.
fn read_text_file(
    root: Option<&std::path::Path>,
    r: &acp::ReadTextFileRequest,
) -> Result<acp::ReadTextFileResponse, agent_client_protocol::Error> {
    let refuse = |why: String| agent_client_protocol::Error::invalid_params().data(why);
    let Some(root) = root else {
        return Err(agent_client_protocol::Error::method_not_found());
    };
    let path = r
        .path
        .canonicalize()
        .map_err(|e| refuse(format!("{}: {e}", r.path.display())))?;
    let root = root.canonicalize().unwrap_or_else(|_| root.to_owned());
    if !path.starts_with(&root) {
        return Err(refuse(format!(
            "{} is outside the workspace {}",
            path.display(),
            root.display()
        )));
    }
    let text =
        std::fs::read_to_string(&path).map_err(|e| refuse(format!("{}: {e}", path.display())))?;
    let skip = r.line.map_or(0, |l| l.saturating_sub(1) as usize);
    let take = r.limit.map_or(usize::MAX, |l| l as usize);
    let content = if skip == 0 && take == usize::MAX {
        text
    } else {
        text.split_inclusive('\n').skip(skip).take(take).collect()
    };
    Ok(acp::ReadTextFileResponse::new(content))
}

/// The event of a session opened `how` (`new`, `load`, `resume`).
fn opened(
    id: acp::SessionId,
    cwd: PathBuf,
    options: Option<&Vec<acp::SessionConfigOption>>,
    how: &'static str,
) -> Event {
    Event::SessionOpened(SessionOpened {
        id,
        cwd,
        options: config_options(options),
        how,
    })
}
