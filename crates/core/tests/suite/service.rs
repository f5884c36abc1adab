//! The runtime service: concurrent runs and channels in one service, replayable
//! subscriptions, messages reaching running agents, pruning (the agent's worktree goes),
//! request-changes running a stage again.

use std::sync::Arc;
use std::sync::mpsc;
use std::time::Duration;

use serde_json::{Value, json};
use trellis_core::service::{Service, ServiceOptions};
use trellis_llm::ChatRequest;
use trellis_protocol::{
    EventKind, InputMode, NodeId, Op, RunId, RunStatus, ServiceEvent, ServiceEventBody,
    SessionEvent, SessionId, StreamId,
};
use trellis_test_support::scripted::{ScriptedProvider, Turn};

use super::common::*;

const ANALYSIS: &str = "architectural_analysis";
const DOCUMENTATION: &str = "decision_documentation";

fn is_documentation(r: &ChatRequest) -> bool {
    r.messages
        .first()
        .is_some_and(|m| m.content.contains("technical writer who records"))
}

fn is_queries(r: &ChatRequest) -> bool {
    r.response_format
        .as_ref()
        .is_some_and(|f| f.schema["properties"].get("queries").is_some())
}

fn all_text(r: &ChatRequest) -> String {
    r.messages.iter().map(|m| m.content.as_str()).collect()
}

fn is_channel(r: &ChatRequest) -> bool {
    r.messages
        .first()
        .is_some_and(|m| m.content.contains("discuss this repository"))
}

/// Answers retrieval query requests with queries, channel turns with text, and agents
/// with a report.
pub(super) fn answer(r: &ChatRequest) -> Turn {
    if is_queries(r) {
        queries()
    } else if is_channel(r) {
        Turn::Text("Stock is kept in memory (docs/adr/0001).".into())
    } else {
        report(false, "Stock lives in memory; see ADR 0001.")
    }
}

fn start_op(request: &str) -> Op {
    discussion(request, &[], &["decision_documentation"])
}

fn discussion(request: &str, include: &[&str], skip: &[&str]) -> Op {
    Op::StartRun {
        request: request.into(),
        repo: None,
        workflow: Some("architecture_discussion".into()),
        include: include.iter().map(|s| (*s).to_owned()).collect(),
        skip: skip.iter().map(|s| (*s).to_owned()).collect(),
        input: InputMode::Approve,
        budgets: None,
        plan_only: false,
    }
}

pub(super) fn service(repo: &std::path::Path, script: &ScriptedProvider) -> Arc<Service> {
    Service::start(runtime(repo, script), ServiceOptions::default())
}

/// A service over a fresh copy of the inventory workspace whose models play [`answer`].
fn answering() -> (trellis_test_support::TempWorkspace, Arc<Service>) {
    let ws = inventory(CONFIG);
    let svc = service(&path_of(&ws), &ScriptedProvider::responding(answer));
    (ws, svc)
}

async fn start(svc: &Service, op: Op) -> RunId {
    let out = svc.call(op).await.unwrap();
    RunId::from_string(out["run"].as_str().unwrap())
}

async fn stopped(svc: &Service, run: &RunId) -> trellis_protocol::records::RunState {
    svc.wait_run(run).await;
    svc.flush().await.unwrap();
    svc.run_state(run).unwrap()
}

pub(super) fn stored(svc: &Service, stream: &StreamId) -> Vec<ServiceEvent> {
    svc.stream_events(stream, 0, None).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn runs_and_channels_run_concurrently_in_one_service() {
    let (_ws, svc) = answering();
    let (a, b, c, x, y) = tokio::join!(
        start(&svc, start_op("Why is stock in memory?")),
        start(&svc, start_op("What does reserve do?")),
        start(&svc, start_op("How is commit tested?")),
        svc.call(Op::StartChannel {
            channel: "design".into(),
            message: Some("Where is stock kept?".into()),
        }),
        svc.call(Op::StartChannel {
            channel: "random".into(),
            message: Some("What is this repository?".into()),
        }),
    );
    for run in [&a, &b, &c] {
        let o = stopped(&svc, run).await;
        assert_eq!(o.status, RunStatus::Succeeded, "{run}: {:?}", o.error);
        // Every agent turn is recorded in the node's session.
        let turns = svc
            .turns(&SessionId::for_node(run, &NodeId::new(ANALYSIS)))
            .unwrap();
        assert!(!turns.is_empty(), "no turns recorded for {run}");
        assert!(
            turns
                .iter()
                .any(|t| t.text.contains("Stock lives in memory"))
        );
    }
    for out in [x.unwrap(), y.unwrap()] {
        assert_eq!(out["answer"], "Stock is kept in memory (docs/adr/0001).");
        let session = SessionId::from_string(out["session"].as_str().unwrap());
        let turns = svc.turns(&session).unwrap();
        assert_eq!(turns.len(), 1, "{turns:?}");
        assert!(turns[0].user_texts.iter().any(|t| t.ends_with('?')));
    }
    // A failing op is reported and the service keeps working.
    let err = svc
        .call(Op::SendMessage {
            run: a.to_string(),
            node: NodeId::new(ANALYSIS),
            text: "too late".into(),
        })
        .await
        .unwrap_err();
    assert!(err.message.contains("succeeded"), "{err}");
    assert_eq!(err.kind, trellis_core::service::OpErrorKind::Conflict);
    let d = start(&svc, start_op("Still alive?")).await;
    assert_eq!(stopped(&svc, &d).await.status, RunStatus::Succeeded);
}

/// Reads `n` events from a subscription.
async fn read(svc: &Service, stream: &StreamId, since: u64, n: usize) -> Vec<ServiceEvent> {
    let mut sub = svc.subscribe(stream.clone(), since);
    let mut out = Vec::new();
    while out.len() < n {
        let e = tokio::time::timeout(Duration::from_secs(20), sub.next())
            .await
            .expect("subscription stalled")
            .unwrap()
            .expect("service stopped");
        out.push(e);
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn subscribing_at_any_seq_replays_the_rest_of_the_stream() {
    let (_ws, svc) = answering();
    // A live subscriber from the start sees exactly what is stored at the end.
    let run_started = start(&svc, start_op("Why is stock in memory?")).await;
    let live = {
        let svc = svc.clone();
        let run = run_started.clone();
        tokio::spawn(async move {
            let mut sub = svc.subscribe(StreamId::Run(run), 0);
            let mut seen = Vec::new();
            loop {
                let e = sub.next().await.unwrap().unwrap();
                let end = matches!(
                    &e.event,
                    ServiceEventBody::Run(EventKind::RunStatusChanged { status, .. }) if status.is_final()
                );
                seen.push(e);
                if end {
                    return seen;
                }
            }
        })
    };
    stopped(&svc, &run_started).await;
    let seen = tokio::time::timeout(Duration::from_secs(20), live)
        .await
        .unwrap()
        .unwrap();
    let run_stream = StreamId::Run(run_started.clone());
    let all = stored(&svc, &run_stream);
    assert_eq!(seen, all, "the live stream differs from the stored one");
    assert!(
        all.iter().all(|e| e.submission.is_some()),
        "every run event names its cause"
    );
    let session = StreamId::Session(SessionId::for_node(&run_started, &NodeId::new(ANALYSIS)));
    for stream in [run_stream, session, StreamId::Workspace] {
        let all = stored(&svc, &stream);
        assert!(!all.is_empty(), "{stream} is empty");
        assert_eq!(
            all.iter().map(|e| e.seq).collect::<Vec<_>>(),
            (1..=all.len() as u64).collect::<Vec<_>>(),
            "{stream} is not numbered 1..n"
        );
        // Every starting point: the rest of the stream, nothing more, nothing less.
        for since in 0..=all.len() {
            let got = read(&svc, &stream, since as u64, all.len() - since).await;
            assert_eq!(got, all[since..].to_vec(), "{stream} from {since}");
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_message_to_a_running_agent_reaches_its_next_model_call() {
    let ws = inventory(CONFIG);
    let repo = path_of(&ws);
    let (asked_tx, asked_rx) = mpsc::channel::<()>();
    let (go_tx, go_rx) = mpsc::channel::<()>();
    let asked_tx = std::sync::Mutex::new(asked_tx);
    let go_rx = std::sync::Mutex::new(go_rx);
    let script = ScriptedProvider::responding(move |r| {
        if is_queries(r) {
            return queries();
        }
        let text = all_text(r);
        if !text.contains("read_file") || r.messages.iter().any(|m| m.tool_call_id.is_some()) {
            return report(false, "done");
        }
        // The agent's first call: hold it until the test has sent its message.
        let _ = asked_tx.lock().unwrap().send(());
        let _ = go_rx.lock().unwrap().recv_timeout(Duration::from_secs(20));
        tool("read_file", json!({ "path": "inventory.py" }))
    });
    let svc = service(&repo, &script);
    let run = start(&svc, start_op("Why is stock in memory?")).await;
    tokio::task::spawn_blocking(move || asked_rx.recv_timeout(Duration::from_secs(60)))
        .await
        .unwrap()
        .expect("the agent never called the model");
    let out = svc
        .call(Op::SendMessage {
            run: run.to_string(),
            node: NodeId::new(ANALYSIS),
            text: "Focus on the reserve method, please.".into(),
        })
        .await
        .unwrap();
    assert_eq!(out["delivered"], "live");
    go_tx.send(()).unwrap();
    assert_eq!(stopped(&svc, &run).await.status, RunStatus::Succeeded);
    let agent_requests: Vec<ChatRequest> = script
        .requests()
        .into_iter()
        .filter(|r| !is_queries(r))
        .collect();
    assert_eq!(agent_requests.len(), 2, "one tool turn and the report");
    assert!(!all_text(&agent_requests[0]).contains("reserve method"));
    assert!(all_text(&agent_requests[1]).contains("Focus on the reserve method, please."));
    let history = stored(
        &svc,
        &StreamId::Session(SessionId::for_node(&run, &NodeId::new(ANALYSIS))),
    );
    assert!(history.iter().any(|e| matches!(
        &e.event,
        ServiceEventBody::Session(SessionEvent::MessagesReceived { turn: 2, texts })
            if texts.iter().any(|t| t.contains("reserve method"))
    )));
}

fn tree(dir: &std::path::Path) -> Vec<(String, Vec<u8>)> {
    let mut out = Vec::new();
    for entry in walk(dir) {
        let rel = entry
            .strip_prefix(dir)
            .unwrap()
            .to_string_lossy()
            .into_owned();
        if rel.starts_with(".git") {
            continue;
        }
        out.push((rel, std::fs::read(&entry).unwrap()));
    }
    out.sort();
    out
}

fn walk(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            // Trellis's own state changes under a running service (the index's files come
            // and go): only the user's files are compared.
            if p.file_name()
                .is_some_and(|n| n == ".git" || n == ".trellis")
            {
                continue;
            }
            out.extend(walk(&p));
        } else {
            out.push(p);
        }
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn pruning_a_running_agent_removes_its_worktree_and_branch() {
    let ws = inventory(CONFIG);
    let repo = path_of(&ws);
    let (asked_tx, asked_rx) = mpsc::channel::<()>();
    let (go_tx, go_rx) = mpsc::channel::<()>();
    let asked_tx = std::sync::Mutex::new(asked_tx);
    let go_rx = std::sync::Mutex::new(go_rx);
    let script = ScriptedProvider::responding(move |r| {
        if is_queries(r) {
            return queries();
        }
        if !is_documentation(r) {
            return report(false, "Stock lives in memory.");
        }
        match r
            .messages
            .iter()
            .filter(|m| m.tool_call_id.is_some())
            .count()
        {
            0 => tool(
                "write_file",
                json!({ "path": "notes/analysis.md", "content": "draft\n" }),
            ),
            1 => tool(
                "edit_file",
                json!({ "path": "inventory.py", "old_string": "class Inventory", "new_string": "class Stock" }),
            ),
            _ => {
                // Hold the third call until the test has pruned the node.
                let _ = asked_tx.lock().unwrap().send(());
                let _ = go_rx.lock().unwrap().recv_timeout(Duration::from_secs(20));
                report(false, "done")
            }
        }
    });
    let svc = service(&repo, &script);
    let out = svc
        .call(discussion(
            "Document the stock decision",
            &["decision_documentation"],
            &[],
        ))
        .await
        .unwrap();
    let run = RunId::from_string(out["run"].as_str().unwrap());
    let worktree = std::path::PathBuf::from(out["worktree"].as_str().unwrap());
    // The run's worktree is created when the agent that edits starts, from the user's
    // working state.
    let mut before = tree(&repo);
    before.retain(|(path, _)| !path.starts_with(".trellis"));
    tokio::task::spawn_blocking(move || asked_rx.recv_timeout(Duration::from_secs(60)))
        .await
        .unwrap()
        .expect("the agent never made its third call");
    // The agent edits in a worktree of its own, on a branch of its own.
    let nodes = trellis_tools::worktree::NodeWorktrees::open(&repo, &run).unwrap();
    let own = nodes
        .get(DOCUMENTATION)
        .unwrap()
        .expect("the agent's worktree");
    assert_ne!(tree(&own.path), tree(&worktree), "the agent edited nothing");
    assert_eq!(
        tree(&worktree),
        before,
        "the agent edited the run's worktree"
    );
    let pruned = svc
        .call(Op::Prune {
            run: run.to_string(),
            node: NodeId::new(DOCUMENTATION),
            subtree: false,
            reason: Some("wrong direction".into()),
        })
        .await;
    go_tx.send(()).unwrap();
    pruned.unwrap();
    let o = stopped(&svc, &run).await;
    assert_eq!(
        o.node(DOCUMENTATION).and_then(|n| n.state),
        Some(trellis_protocol::NodeState::Pruned)
    );
    assert_eq!(tree(&worktree), before, "the run's worktree changed");
    assert!(!own.path.exists(), "the agent's worktree is left");
    let branch = trellis_tools::git::Git::new(&repo)
        .resolve(&format!("refs/heads/{}", own.branch))
        .unwrap();
    assert_eq!(branch, None, "the agent's branch is left");
    // Finished nodes cannot be pruned, with a reason.
    let err = svc
        .call(Op::Prune {
            run: run.to_string(),
            node: NodeId::new("upfront_retrieval"),
            subtree: false,
            reason: None,
        })
        .await
        .unwrap_err();
    assert!(err.message.contains("COMPLETED"), "{err}");
    assert_eq!(err.kind, trellis_core::service::OpErrorKind::Conflict);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn request_changes_runs_the_stage_again_with_the_feedback() {
    let ws = inventory(CONFIG);
    let repo = path_of(&ws);
    let script = ScriptedProvider::responding(|r| {
        if is_queries(r) {
            return queries();
        }
        let text = all_text(r);
        let asked = text.contains("Status must be Accepted");
        let wrote = r.messages.iter().any(|m| m.tool_call_id.is_some());
        if text.contains("decision record") || text.contains("decision_documentation") {
            if !wrote {
                let status = if asked { "Accepted" } else { "Proposed" };
                return tool(
                    "write_file",
                    json!({ "path": "docs/adr/0002-persist-stock.md", "content": format!("# ADR 0002\n\nStatus: {status}\n") }),
                );
            }
            return report(false, "recorded ADR 0002");
        }
        report(false, "Stock lives in memory.")
    });
    let svc = service(&repo, &script);
    let out = svc
        .call(discussion(
            "Document the stock decision",
            &["decision_documentation"],
            &[],
        ))
        .await
        .unwrap();
    let run = RunId::from_string(out["run"].as_str().unwrap());
    assert_eq!(stopped(&svc, &run).await.status, RunStatus::Succeeded);
    let show = |v: Value| v["changeSet"].to_string();
    let first = show(
        svc.call(Op::Review {
            run: run.to_string(),
            action: trellis_protocol::ReviewAction::Show,
        })
        .await
        .unwrap(),
    );
    assert!(first.contains("Status: Proposed"), "{first}");
    let out = svc
        .call(Op::RequestChanges {
            run: run.to_string(),
            node: None,
            artifact: None,
            feedback: "Status must be Accepted.".into(),
        })
        .await
        .unwrap();
    assert_eq!(out["revising"], "decision_documentation");
    let o = stopped(&svc, &run).await;
    assert_eq!(o.status, RunStatus::Succeeded, "{:?}", o.error);
    assert_eq!(o.node("decision_documentation").unwrap().attempt, 2);
    let second = show(
        svc.call(Op::Review {
            run: run.to_string(),
            action: trellis_protocol::ReviewAction::Show,
        })
        .await
        .unwrap(),
    );
    assert!(second.contains("Status: Accepted"), "{second}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_channel_answers_from_the_repository_map_and_the_index() {
    let ws = inventory(CONFIG);
    let repo = path_of(&ws);
    let script = ScriptedProvider::responding(answer);
    let rt = runtime(&repo, &script);
    let mut index = trellis_index::Index::open(&repo, rt.index_config().clone()).unwrap();
    index
        .update(&trellis_index::UpdateOptions {
            scope: trellis_index::Scope::All,
            embed: false,
            ..trellis_index::UpdateOptions::default()
        })
        .unwrap();
    drop(index);
    let svc = Service::start(rt, ServiceOptions::default());
    let out = svc
        .call(Op::StartChannel {
            channel: "design".into(),
            message: Some("How does reserve hold stock?".into()),
        })
        .await
        .unwrap();
    assert_eq!(out["answer"], "Stock is kept in memory (docs/adr/0001).");
    let request = script.requests().into_iter().find(is_channel).unwrap();
    let text = all_text(&request);
    assert!(text.contains("### Repository map"), "{text}");
    assert!(text.contains("inventory.py"), "{text}");
    assert!(text.contains("def reserve"), "{text}");
    // The tools offered are read-only.
    let mut tools: Vec<&str> = request.tools.iter().map(|t| t.name.as_str()).collect();
    tools.sort();
    assert_eq!(
        tools,
        ["glob_search", "grep", "list_directory", "read_file"]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_panicking_model_fails_its_run_and_the_others_carry_on() {
    let ws = inventory(CONFIG);
    let repo = path_of(&ws);
    let script = ScriptedProvider::responding(|r| {
        if !is_queries(r) && all_text(r).contains("PANIC-PLEASE") {
            panic!("the model provider blew up");
        }
        answer(r)
    });
    let svc = service(&repo, &script);
    let (bad, good) = tokio::join!(
        start(&svc, start_op("PANIC-PLEASE: why is stock in memory?")),
        start(&svc, start_op("What does reserve do?")),
    );
    let bad = stopped(&svc, &bad).await;
    assert_eq!(bad.status, RunStatus::Failed, "{bad:?}");
    // The provider's panic ends its stream: the agent's model call fails, the stage fails.
    let reason = bad.node(ANALYSIS).unwrap().result["reason"].to_string();
    assert!(reason.contains("model call failed"), "{reason}");
    assert_eq!(stopped(&svc, &good).await.status, RunStatus::Succeeded);
    // The service still takes work.
    let again = start(&svc, start_op("Still there?")).await;
    assert_eq!(stopped(&svc, &again).await.status, RunStatus::Succeeded);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ops_on_a_cancelled_run_are_conflicts() {
    let (_ws, svc) = answering();
    let run = start(&svc, start_op("Why is stock in memory?")).await;
    stopped(&svc, &run).await;
    // A finished run: cancelling it is refused, and so is anything after a cancel.
    let err = svc
        .call(Op::Cancel {
            run: run.to_string(),
            reason: None,
        })
        .await
        .unwrap_err();
    assert_eq!(
        err.kind,
        trellis_core::service::OpErrorKind::Conflict,
        "{err}"
    );
    let err = svc
        .call(Op::RequestChanges {
            run: "no-such-run".into(),
            node: None,
            artifact: None,
            feedback: "x".into(),
        })
        .await
        .unwrap_err();
    assert_eq!(
        err.kind,
        trellis_core::service::OpErrorKind::NotFound,
        "{err}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reader_over_the_store_alone_answers_as_the_service() {
    let (ws, svc) = answering();
    let run = start(&svc, start_op("Why is stock in memory?")).await;
    let state = stopped(&svc, &run).await;
    // Another store handle on the same file, and no runtime: what `trellis runs show` reads.
    let store = trellis_store::Store::open_workspace(path_of(&ws), Default::default()).unwrap();
    let records = trellis_core::Records::new(store);
    assert!(!records.is_demo(&run).unwrap());
    assert_eq!(records.run_state(&run).unwrap(), state);
    assert_eq!(records.replay(&run).unwrap(), state);
    assert_eq!(
        records.run_graph(&run).unwrap(),
        svc.run_graph(&run).unwrap()
    );
    assert_eq!(records.usage(&run).unwrap(), svc.usage(&run).unwrap());
    assert!(records.usage(&run).unwrap().run.calls > 0);
    let filter = trellis_protocol::records::SessionFilter {
        run: Some(run.clone()),
        ..Default::default()
    };
    let sessions = records.sessions(&filter).unwrap();
    assert!(!sessions.is_empty());
    assert_eq!(sessions, svc.sessions(&filter).unwrap());
    assert_eq!(
        records.turns(&sessions[0].id).unwrap(),
        svc.turns(&sessions[0].id).unwrap()
    );
}

/// The npm server-everything the MCP client tests use (scripts/setup.d/70-mcp-peers.sh).
fn server_everything() -> std::path::PathBuf {
    let entry = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(
        "../mcp/tests/peers/node_modules/@modelcontextprotocol/server-everything/dist/index.js",
    );
    assert!(
        entry.is_file(),
        "{} is missing: run scripts/setup.d/70-mcp-peers.sh",
        entry.display()
    );
    entry
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_mcp_tools_progress_reaches_the_agents_session_in_order() {
    const LONG: &str = "everything__trigger-long-running-operation";
    let config = format!(
        "{CONFIG}\n[mcp.servers.everything]\ncommand = \"node\"\nargs = [{:?}, \"stdio\"]\n",
        server_everything().display().to_string()
    );
    let ws = inventory(&config);
    // The discussion workflow, its analysis agent granted the long-running tool.
    let builtin = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../workflows/architecture_discussion.yaml"),
    )
    .unwrap();
    let granted = builtin.replace(
        "mcp_tools: []  # No MCP tools for document analysis",
        "mcp_tools: [\"everything.trigger-long-running-operation\"]",
    );
    assert_ne!(granted, builtin);
    std::fs::create_dir_all(ws.path().join(".trellis/workflows")).unwrap();
    std::fs::write(
        ws.path()
            .join(".trellis/workflows/architecture_discussion.yaml"),
        granted,
    )
    .unwrap();
    let repo = path_of(&ws);
    let script = ScriptedProvider::responding(|r| {
        if is_queries(r) {
            queries()
        } else if r.tools.iter().any(|t| t.name == LONG)
            && !r.messages.iter().any(|m| m.tool_call_id.is_some())
        {
            tool(LONG, json!({ "duration": 1.5, "steps": 5 }))
        } else {
            report(false, "The long operation finished.")
        }
    });
    let svc = service(&repo, &script);
    let run = start(&svc, start_op("Why is stock in memory?")).await;
    let o = stopped(&svc, &run).await;
    assert_eq!(o.status, RunStatus::Succeeded, "{:?}", o.error);

    let history = stored(
        &svc,
        &StreamId::Session(SessionId::for_node(&run, &NodeId::new(ANALYSIS))),
    );
    let tool_events: Vec<&SessionEvent> = history
        .iter()
        .filter_map(|e| match &e.event {
            ServiceEventBody::Session(
                ev @ (SessionEvent::ToolStarted { .. }
                | SessionEvent::ToolProgress { .. }
                | SessionEvent::ToolCompleted { .. }),
            ) => Some(ev),
            _ => None,
        })
        .collect();
    let Some(SessionEvent::ToolStarted { call_id, name, .. }) = tool_events.first() else {
        panic!("no tool call recorded: {tool_events:?}");
    };
    assert_eq!(name, LONG);
    let Some(SessionEvent::ToolCompleted { status, output, .. }) = tool_events.last() else {
        panic!("the call did not complete last: {tool_events:?}");
    };
    assert_eq!(*status, trellis_protocol::ToolStatus::Ok, "{output}");
    // Between them, the server's reports of that call, in order, increasing.
    let progress: Vec<(f64, Option<f64>)> = tool_events[1..tool_events.len() - 1]
        .iter()
        .map(|e| match e {
            SessionEvent::ToolProgress {
                call_id: c,
                progress,
                total,
                ..
            } if c == call_id => (*progress, *total),
            other => panic!("not a progress report of {call_id}: {other:?}"),
        })
        .collect();
    assert!(progress.len() >= 4, "{progress:?}");
    assert!(
        progress.windows(2).all(|w| w[0].0 < w[1].0),
        "not increasing: {progress:?}"
    );
    assert!(
        progress
            .iter()
            .all(|(p, t)| *t == Some(5.0) && (1.0..=5.0).contains(p)),
        "{progress:?}"
    );
    // The model saw the tool's answer.
    let asked = script
        .requests()
        .into_iter()
        .any(|r| all_text(&r).contains("Long running operation completed"));
    assert!(asked);
}

/// A run whose agents only read has no change set: its review shows no files (so front-ends
/// and `trellis eval` read "changed nothing"), and approving or rejecting it is refused with
/// that reason; an unknown run is still not found.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_that_wrote_nothing_reviews_as_unchanged() {
    let (_ws, svc) = answering();
    let run = start(
        &svc,
        discussion("Why is stock in memory?", &[], &["decision_documentation"]),
    )
    .await;
    assert_eq!(stopped(&svc, &run).await.status, RunStatus::Succeeded);
    let review = |action| {
        svc.call(Op::Review {
            run: run.to_string(),
            action,
        })
    };
    let shown = review(trellis_protocol::ReviewAction::Show).await.unwrap();
    assert_eq!(shown["state"], "unchanged");
    assert_eq!(shown["changeSet"]["files"], json!([]));
    let refused = review(trellis_protocol::ReviewAction::Apply { accept: None })
        .await
        .unwrap_err();
    assert!(
        refused.message.contains("changed no files"),
        "{}",
        refused.message
    );
    let unknown = svc
        .call(Op::Review {
            run: "ffffffff".into(),
            action: trellis_protocol::ReviewAction::Show,
        })
        .await
        .unwrap_err();
    assert!(
        unknown.message.contains("no run matches"),
        "{}",
        unknown.message
    );
}
