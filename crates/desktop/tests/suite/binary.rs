//! The window against the `trellis acp` binary: a child process started by the client, its
//! models the loopback OpenAI-wire mock (test-support's `wire`). The binary is
//! `$TRELLIS_BIN`, else `trellis` beside this test's directory in the target dir (`cargo build
//! -p trellis` makes it; `cargo nextest run --workspace` builds it with the workspace).

use std::path::{Path, PathBuf};

use serde_json::{Value, json};
use trellis_desktop::acp::review::ReviewReply;
use trellis_desktop::acp::{AgentCommand, Event, Transport, connect};
use trellis_desktop::app::{App, Message};

use super::drive::{pump, until_permission};
use trellis_test_support::wire::{self, Reply, text_sse, tool_sse};

const ADR: &str = "docs/adr/0002-persist-stock.md";

fn trellis_bin() -> PathBuf {
    if let Some(p) = std::env::var_os("TRELLIS_BIN") {
        return p.into();
    }
    // target/debug/deps/all-… → target/debug/trellis
    let exe = std::env::current_exe().unwrap();
    exe.parent().and_then(Path::parent).unwrap().join("trellis")
}

fn tool_results(body: &Value) -> usize {
    body["messages"]
        .as_array()
        .map_or(0, |m| m.iter().filter(|m| m["role"] == "tool").count())
}

/// The mock model: the orchestrator adds the documentation stage, whose agent writes an ADR;
/// every agent then reports.
fn answer(body: &Value) -> String {
    let schema = &body["response_format"]["json_schema"]["schema"]["properties"];
    let writes = body["tools"]
        .as_array()
        .is_some_and(|t| t.iter().any(|t| t["function"]["name"] == "write_file"));
    if schema.get("workflow").is_some() {
        text_sse(
            &json!({
                "reasoning": "record it",
                "workflow": "architecture_discussion",
                "stages": [{"stage": "decision_documentation", "include": true, "reason": "asked"}]
            })
            .to_string(),
        )
    } else if schema.get("queries").is_some() {
        text_sse(&json!({ "queries": ["Inventory commit stock"] }).to_string())
    } else if writes && tool_results(body) == 0 {
        let args =
            json!({"path": ADR, "content": "# ADR 0002: persist stock\n\nStatus: Proposed\n"});
        tool_sse("call-1", "write_file", &args.to_string())
    } else {
        text_sse(
            &json!({"failure": false, "output": "MOCK-ANSWER: recorded ADR 0002.", "files_changed": [], "findings": []})
                .to_string(),
        )
    }
}

#[test]
fn the_trellis_acp_binary_streams_a_turn_and_its_change_set_is_applied_and_undone() {
    let bin = trellis_bin();
    assert!(
        bin.exists(),
        "no trellis binary at {}: `cargo build -p trellis`, or set TRELLIS_BIN",
        bin.display()
    );
    let (url, seen) = wire::serve(|body| Reply::sse(answer(body)));
    let config = format!(
        "[models]\ndefault = \"mock\"\n\n[models.profiles.mock]\nprovider = \"openai\"\nbase_url = \"{url}\"\nmodel = \"mock-model\"\ncontext = 32768\n\n[index.embedding]\nbackend = \"none\"\n"
    );
    let ws = trellis_test_support::example_repo("inventory", &config).unwrap();
    let root = ws.path().canonicalize().unwrap();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let cmd = AgentCommand {
        program: bin,
        args: vec!["--repo".into(), root.display().to_string()],
        cwd: Some(root.clone()),
        env: vec![
            (
                "XDG_CONFIG_HOME".into(),
                root.join(".trellis/xdg-config").display().to_string(),
            ),
            ("RUST_LOG".into(), "warn".into()),
        ],
    };
    let transport = {
        let _g = rt.enter();
        Transport::spawn(&cmd).unwrap().serve_files(root.clone())
    };
    let (handle, mut events) = connect(rt.handle(), transport);
    let mut app = App::new(handle, root.clone());
    until_permission(
        &rt,
        &mut app,
        &mut events,
        |app| {
            let _ = app.update(Message::NewSession);
        },
        "Record the decision to persist stock",
    );
    let s = app.session().unwrap();
    assert!(!s.plan.is_empty(), "the plan streamed");
    assert!(s.usage.is_some(), "usage streamed");
    assert!(!root.join(ADR).exists());

    // Grant the change set's permission: the agent applies it.
    let ask = app.asks[0].clone();
    assert_eq!(ask.options[0].id, "allow_once", "{ask:?}");
    let _ = app.update(Message::Answer {
        ask: ask.id,
        option: Some("allow_once".into()),
    });
    pump(&rt, &mut app, &mut events, |e| {
        matches!(e, Event::TurnEnded { .. })
    });
    assert!(root.join(ADR).exists(), "applied by the agent");
    let said: String = app
        .session()
        .unwrap()
        .transcript
        .iter()
        .filter_map(|e| match e {
            trellis_desktop::app::Entry::Message(t) => Some(t.as_str()),
            _ => None,
        })
        .collect();
    assert!(said.contains("MOCK-ANSWER"), "{said}");

    // Undo from the review (`_trellis/review`), then redo.
    let _ = app.update(Message::OpenReview);
    pump(&rt, &mut app, &mut events, |e| {
        matches!(
            e,
            Event::Review {
                reply: ReviewReply::Shown { .. },
                ..
            }
        )
    });
    assert_eq!(app.review.as_ref().unwrap().state, "applied");
    let _ = app.update(Message::UndoReview);
    pump(&rt, &mut app, &mut events, |e| {
        matches!(
            e,
            Event::Review {
                reply: ReviewReply::Undone { .. },
                ..
            }
        )
    });
    assert!(!root.join(ADR).exists(), "undone");
    assert!(!seen.lock().unwrap().is_empty(), "the mock model was asked");
}
