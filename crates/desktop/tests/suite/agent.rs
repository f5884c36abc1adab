//! A scripted ACP agent (the SDK's agent side) over an in-memory pipe: it plays one turn —
//! a thought, a plan, streamed answer text, a tool call, usage, then the change set's
//! permission request — and answers `_trellis/review` from a fixed change set; a
//! `_trellis/requestChanges` plays the turn again (the revision). It records what the
//! client sent so tests can check it.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use agent_client_protocol::schema::ProtocolVersion;
use agent_client_protocol::v1::schema as acp;
use agent_client_protocol::{
    Agent, ByteStreams, ConnectTo, Error, JsonRpcMessage, JsonRpcRequest, UntypedMessage,
};
use futures::StreamExt;
use futures::channel::mpsc::UnboundedReceiver;
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio_util::compat::{TokioAsyncReadCompatExt, TokioAsyncWriteCompatExt};
use trellis_desktop::acp::question::{QUESTION_METHOD, QuestionParams};
use trellis_desktop::acp::review::{
    REQUEST_CHANGES_METHOD, REVIEW_METHOD, RequestChangesParams, ReviewAction, ReviewParams,
};
use trellis_desktop::acp::{Event, FEEDBACK_META, Handle, Transport, connect};

/// What the client did, as the agent saw it.
#[derive(Debug, Default)]
pub struct Log {
    pub prompts: Vec<String>,
    /// Permission answers: the option id, or `cancelled`.
    pub answers: Vec<String>,
    /// The feedback typed with each answer (`_meta`, [`FEEDBACK_META`]).
    pub feedback: Vec<Option<String>>,
    /// `_trellis/review` params, as JSON.
    pub reviews: Vec<Value>,
    /// `_trellis/requestChanges` params.
    pub changes: Vec<RequestChangesParams>,
    pub cancels: usize,
    /// What reading the prompt's linked files gave.
    pub reads: Vec<String>,
    /// `session/set_config_option`: (option, value).
    pub config: Vec<(String, String)>,
    /// The extension methods the client listed in `initialize`.
    pub client_methods: Vec<String>,
    /// `_trellis/question` answers, as JSON.
    pub questions: Vec<Value>,
}

pub type Shared = Arc<Mutex<Log>>;

/// How the agent behaves.
#[derive(Clone, Copy, Debug, Default)]
pub struct Script {
    /// Write a line that is not JSON before the first message.
    pub garbage_first: bool,
    /// Stall after the first answer chunk (the test kills the agent then).
    pub stall: bool,
    /// Ask a question (`_trellis/question`, when the client takes it) before the change
    /// set.
    pub question: bool,
}

/// A `_trellis/review` or `_trellis/requestChanges` request.
#[derive(Clone, Debug)]
enum ExtRequest {
    Review(ReviewParams),
    RequestChanges(RequestChangesParams),
}

impl JsonRpcMessage for ExtRequest {
    fn matches_method(method: &str) -> bool {
        [REVIEW_METHOD, REQUEST_CHANGES_METHOD].contains(&method)
    }
    fn method(&self) -> &str {
        match self {
            Self::Review(_) => REVIEW_METHOD,
            Self::RequestChanges(_) => REQUEST_CHANGES_METHOD,
        }
    }
    fn to_untyped_message(&self) -> Result<UntypedMessage, Error> {
        match self {
            Self::Review(p) => UntypedMessage::new(REVIEW_METHOD, p),
            Self::RequestChanges(p) => UntypedMessage::new(REQUEST_CHANGES_METHOD, p),
        }
    }
    fn parse_message(method: &str, params: &Value) -> Result<Self, Error> {
        let bad = |e: serde_json::Error| Error::invalid_params().data(e.to_string());
        if method == REVIEW_METHOD {
            serde_json::from_value(params.clone())
                .map(Self::Review)
                .map_err(bad)
        } else {
            serde_json::from_value(params.clone())
                .map(Self::RequestChanges)
                .map_err(bad)
        }
    }
}

impl JsonRpcRequest for ExtRequest {
    type Response = Value;
}

pub const SESSION: &str = "sess-0001";
pub const RUN: &str = "run-0001";
/// The session `session/list` shows besides.
pub const EARLIER: &str = "sess-0000";

fn text(s: &str) -> acp::ContentChunk {
    acp::ContentChunk::new(s.into())
}

fn initialize() -> acp::InitializeResponse {
    let mut meta = serde_json::Map::new();
    meta.insert(
        "trellis.dev/extensions".into(),
        json!({ "methods": ["_trellis/graph", REVIEW_METHOD, REQUEST_CHANGES_METHOD] }),
    );
    acp::InitializeResponse::new(ProtocolVersion::V1)
        .agent_capabilities(
            acp::AgentCapabilities::new()
                .load_session(true)
                .session_capabilities(
                    acp::SessionCapabilities::new().list(acp::SessionListCapabilities::new()),
                )
                .meta(meta),
        )
        .agent_info(acp::Implementation::new("trellis", "9.9.9").title("Scripted Trellis"))
}

fn options() -> Vec<acp::SessionConfigOption> {
    vec![acp::SessionConfigOption::select(
        "autonomy",
        "Autonomy",
        "ask",
        vec![
            acp::SessionConfigSelectOption::new("ask", "Ask"),
            acp::SessionConfigSelectOption::new("auto-edit", "Auto-edit"),
        ],
    )]
}

/// The change set `review show` answers: a.md with two hunks, b.md with one.
pub fn change_set() -> Value {
    let hunk = |index: usize, old: &str, new: &str| {
        json!({"index": index, "oldStart": 1 + index * 10, "oldLines": 2, "newStart": 1 + index * 10, "newLines": 2,
               "lines": [{"kind": "context", "text": "# Title"},
                         {"kind": "removed", "text": old},
                         {"kind": "added", "text": new}]})
    };
    json!({"run": RUN, "base": "b", "head": "h", "files": [
        {"path": "a.md", "status": "modified", "additions": 2, "deletions": 2, "binary": false,
         "hunks": [hunk(0, "old one", "new one"), hunk(1, "old two", "new two")]},
        {"path": "b.md", "status": "modified", "additions": 1, "deletions": 1, "binary": false,
         "hunks": [hunk(0, "old three", "new three")]}
    ]})
}

fn review_answer(p: &ReviewParams) -> Value {
    match &p.action {
        ReviewAction::Show => {
            json!({"run": RUN, "state": "open", "changeSet": change_set(), "selection": {}})
        }
        ReviewAction::Apply { accept } => {
            let files: Vec<Value> = accept
                .iter()
                .flatten()
                .map(|f| json!([f.file, "modified"]))
                .collect();
            json!({"outcome": "applied", "applied": {"run": RUN, "seq": 1, "files": files}})
        }
        ReviewAction::Undo => {
            json!({"outcome": "undone", "undo": {"run": RUN, "kind": "undo", "seq": 2, "files": ["a.md", "b.md"]}})
        }
        _ => json!({"outcome": "ok"}),
    }
}

/// The agent side, as an SDK builder.
fn agent(log: Shared, script: Script) -> impl ConnectTo<agent_client_protocol::Client> {
    let (l1, l2, l3, l4, l5) = (log.clone(), log.clone(), log.clone(), log.clone(), log);
    Agent
        .v1()
        .name("scripted")
        .on_receive_request(
            async move |r: acp::InitializeRequest, responder, _cx| {
                let methods = r
                    .client_capabilities
                    .meta
                    .as_ref()
                    .and_then(|m| m.get("trellis.dev/extensions"))
                    .and_then(|e| e["methods"].as_array())
                    .into_iter()
                    .flatten()
                    .filter_map(|m| m.as_str().map(str::to_owned))
                    .collect();
                l5.lock().unwrap().client_methods = methods;
                responder.respond(initialize())
            },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_request(
            async move |_r: acp::NewSessionRequest, responder, _cx| {
                responder.respond(acp::NewSessionResponse::new(SESSION).config_options(options()))
            },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_request(
            async move |r: acp::SetSessionConfigOptionRequest, responder, _cx| {
                let value = serde_json::to_value(&r.value).unwrap();
                let value = value
                    .as_str()
                    .or(value["value"].as_str())
                    .unwrap_or_default()
                    .to_owned();
                l4.lock()
                    .unwrap()
                    .config
                    .push((r.config_id.to_string(), value.clone()));
                let mut opts = options();
                if let acp::SessionConfigKind::Select(s) = &mut opts[0].kind {
                    s.current_value = value.into();
                }
                responder.respond(acp::SetSessionConfigOptionResponse::new(opts))
            },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_request(
            async move |_r: acp::ListSessionsRequest, responder, _cx| {
                let earlier =
                    acp::SessionInfo::new(EARLIER, "/repo").title("Persist the stock".to_owned());
                responder.respond(acp::ListSessionsResponse::new(vec![earlier]))
            },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_request(
            // The replay comes before the answer, as `trellis acp` does it.
            async move |r: acp::LoadSessionRequest, responder, cx| {
                use acp::SessionUpdate as U;
                let send = |u: U| {
                    cx.send_notification(acp::SessionNotification::new(r.session_id.clone(), u))
                };
                send(U::UserMessageChunk(text("Persist the stock")))?;
                send(U::AgentMessageChunk(text("Recorded ADR 0002.")))?;
                responder.respond(acp::LoadSessionResponse::new().config_options(options()))
            },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_request(
            async move |_r: acp::ResumeSessionRequest, responder, _cx| {
                responder.respond(acp::ResumeSessionResponse::new().config_options(options()))
            },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_request(
            async move |r: acp::PromptRequest, responder, cx| {
                if ![SESSION, EARLIER].contains(&r.session_id.0.as_ref()) {
                    return responder.respond_with_result(Err(
                        Error::invalid_params().data(format!("no session {}", r.session_id))
                    ));
                }
                let text = r
                    .prompt
                    .iter()
                    .filter_map(|b| match b {
                        acp::ContentBlock::Text(t) => Some(t.text.clone()),
                        _ => None,
                    })
                    .collect::<String>();
                l1.lock().unwrap().prompts.push(text);
                let links: Vec<String> = r
                    .prompt
                    .iter()
                    .filter_map(|b| match b {
                        acp::ContentBlock::ResourceLink(l) => Some(l.uri.clone()),
                        _ => None,
                    })
                    .collect();
                let (log, conn) = (l1.clone(), cx.clone());
                // The turn runs off the dispatch loop: it waits for a permission answer.
                cx.spawn(async move {
                    read_links(&conn, &r.session_id, &links, &log).await?;
                    let stop = turn(&conn, r.session_id.clone(), &log, script).await?;
                    responder.respond(acp::PromptResponse::new(stop))
                })
            },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_request(
            async move |r: ExtRequest, responder, cx| match r {
                ExtRequest::Review(p) => {
                    let answer = review_answer(&p);
                    l2.lock()
                        .unwrap()
                        .reviews
                        .push(serde_json::to_value(&p).unwrap());
                    responder.respond(answer)
                }
                // The revision streams and offers its change set like a turn.
                ExtRequest::RequestChanges(p) => {
                    let session = acp::SessionId::new(p.session_id.clone());
                    l2.lock().unwrap().changes.push(p);
                    let (log, conn) = (l2.clone(), cx.clone());
                    cx.spawn(async move {
                        let stop = turn(&conn, session, &log, script).await?;
                        responder.respond(json!({
                            "run": RUN, "revising": "write", "stopReason": stop
                        }))
                    })
                }
            },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_notification(
            async move |_n: acp::CancelNotification, _cx| {
                l3.lock().unwrap().cancels += 1;
                Ok(())
            },
            agent_client_protocol::on_receive_notification!(),
        )
}

/// Reads each linked file's first line through the client, as `trellis acp` reads the
/// editor's buffers, and says it.
async fn read_links(
    cx: &agent_client_protocol::v1::ConnectionTo<agent_client_protocol::Client>,
    session: &acp::SessionId,
    links: &[String],
    log: &Shared,
) -> Result<(), Error> {
    for uri in links {
        let path = uri.strip_prefix("file://").unwrap_or(uri);
        let read = cx
            .send_request(
                acp::ReadTextFileRequest::new(session.clone(), path)
                    .line(1)
                    .limit(1),
            )
            .block_task()
            .await;
        let said = match read {
            Ok(r) => format!("Read {path}: {}", r.content.trim_end()),
            Err(e) => format!("Could not read {path}: {e}"),
        };
        log.lock().unwrap().reads.push(said.clone());
        cx.send_notification(acp::SessionNotification::new(
            session.clone(),
            acp::SessionUpdate::AgentThoughtChunk(text(&said)),
        ))?;
    }
    Ok(())
}

async fn turn(
    cx: &agent_client_protocol::v1::ConnectionTo<agent_client_protocol::Client>,
    session: acp::SessionId,
    log: &Shared,
    script: Script,
) -> Result<acp::StopReason, Error> {
    use acp::SessionUpdate as U;
    let send = |u: U| cx.send_notification(acp::SessionNotification::new(session.clone(), u));
    send(U::AgentThoughtChunk(text("Choosing a workflow…")))?;
    let entry = |c: &str, s| acp::PlanEntry::new(c, acp::PlanEntryPriority::Medium, s);
    send(U::Plan(acp::Plan::new(vec![
        entry("Research the stock", acp::PlanEntryStatus::Completed),
        entry("Write the answer", acp::PlanEntryStatus::InProgress),
    ])))?;
    send(U::AgentMessageChunk(text("Stock lives")))?;
    if script.stall {
        futures::future::pending::<()>().await;
    }
    send(U::AgentMessageChunk(text(" in memory.")))?;
    send(U::ToolCall(
        acp::ToolCall::new("n1/c1", "read src/lib.rs")
            .kind(acp::ToolKind::Read)
            .status(acp::ToolCallStatus::InProgress)
            .locations(vec![acp::ToolCallLocation::new("src/lib.rs").line(2)]),
    ))?;
    send(U::ToolCallUpdate(acp::ToolCallUpdate::new(
        "n1/c1",
        acp::ToolCallUpdateFields::new().status(acp::ToolCallStatus::Completed),
    )))?;
    send(U::UsageUpdate(acp::UsageUpdate::new(1234, 8192)))?;
    let can_ask = log
        .lock()
        .unwrap()
        .client_methods
        .iter()
        .any(|m| m == QUESTION_METHOD);
    if script.question && can_ask {
        let q = QuestionParams {
            session_id: session.to_string(),
            tool_call_id: "write/question-1".into(),
            node: "write".into(),
            question: "Which status does the ADR get? [Proposed / Accepted]".into(),
        };
        let answer = cx
            .send_request(UntypedMessage::new(QUESTION_METHOD, q)?)
            .block_task()
            .await?;
        log.lock().unwrap().questions.push(answer);
    }
    let options = vec![
        acp::PermissionOption::new(
            "allow_once",
            "Apply to my files",
            acp::PermissionOptionKind::AllowOnce,
        ),
        acp::PermissionOption::new(
            "reject_once",
            "Keep them in the run's worktree",
            acp::PermissionOptionKind::RejectOnce,
        ),
    ];
    let fields = acp::ToolCallUpdateFields::new()
        .title("Apply the changes to your files: a.md, b.md")
        .kind(acp::ToolKind::Edit)
        .content(vec![acp::ToolCallContent::from(
            acp::Diff::new("/repo/a.md", "new one\n").old_text(Some("old one\n".to_owned())),
        )]);
    let answer = cx
        .send_request(acp::RequestPermissionRequest::new(
            session.clone(),
            acp::ToolCallUpdate::new(format!("{RUN}/apply"), fields),
            options,
        ))
        .block_task()
        .await?;
    let (chosen, feedback) = match answer.outcome {
        acp::RequestPermissionOutcome::Selected(s) => {
            let feedback = s
                .meta
                .and_then(|m| m.get(FEEDBACK_META)?.as_str().map(str::to_owned));
            (s.option_id.to_string(), feedback)
        }
        _ => ("cancelled".to_owned(), None),
    };
    {
        let mut log = log.lock().unwrap();
        log.answers.push(chosen.clone());
        log.feedback.push(feedback);
    }
    let said = if chosen == "allow_once" {
        "\nApplied the run's changes."
    } else {
        "\nThe changes stay in the run's worktree."
    };
    send(U::AgentMessageChunk(text(said)))?;
    Ok(acp::StopReason::EndTurn)
}

/// A scripted agent on `rt` and a client connected to it: the client's handle and events,
/// the agent's log, and the agent task (abort it to kill the agent).
pub fn start(rt: &tokio::runtime::Runtime, script: Script) -> Started {
    start_serving(rt, script, None)
}

/// What [`start`] gives: the client's handle and events, the agent's log, the agent task.
pub type Started = (
    Handle,
    UnboundedReceiver<Event>,
    Shared,
    tokio::task::JoinHandle<()>,
);

/// [`start`], the client serving the files under `files` to the agent.
pub fn start_serving(
    rt: &tokio::runtime::Runtime,
    script: Script,
    files: Option<std::path::PathBuf>,
) -> Started {
    let log = Shared::default();
    let (client_io, agent_io) = tokio::io::duplex(1 << 16);
    let (agent_read, agent_write) = tokio::io::split(agent_io);
    let (client_read, client_write) = tokio::io::split(client_io);
    let a = agent(log.clone(), script);
    let task = rt.spawn(async move {
        // With `garbage_first`, the agent writes into a relay that puts one line of garbage
        // before its first message on the way to the client.
        let (agent_side, relay_side) = tokio::io::duplex(1 << 16);
        let (_agent_side_read, agent_side_write) = tokio::io::split(agent_side);
        let (relay_read, _relay_write) = tokio::io::split(relay_side);
        let out: Box<dyn tokio::io::AsyncWrite + Send + Unpin> = if script.garbage_first {
            let mut write = agent_write;
            tokio::spawn(async move {
                let _ = write.write_all(b"this is {not json\n").await;
                let mut lines = BufReader::new(relay_read).lines();
                while let Ok(Some(l)) = lines.next_line().await {
                    if write.write_all(format!("{l}\n").as_bytes()).await.is_err() {
                        break;
                    }
                }
            });
            Box::new(agent_side_write)
        } else {
            Box::new(agent_write)
        };
        let _ = a
            .connect_to(ByteStreams::new(out.compat_write(), agent_read.compat()))
            .await;
    });
    let mut transport = Transport::streams(client_read, client_write, "scripted agent");
    if let Some(root) = files {
        transport = transport.serve_files(root);
    }
    let (handle, events) = connect(rt.handle(), transport);
    (handle, events, log, task)
}

/// The next event, or a panic after 20 s.
pub fn next(rt: &tokio::runtime::Runtime, events: &mut UnboundedReceiver<Event>) -> Event {
    rt.block_on(async {
        tokio::time::timeout(Duration::from_secs(20), events.next())
            .await
            .expect("no event within 20 s")
            .expect("the event stream ended")
    })
}

/// A multi-thread runtime for a test.
pub fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
}
