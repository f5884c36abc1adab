//! The window against the real agent: `trellis acp` (`AcpAgent`) in process over an
//! in-memory pipe, on the runtime service over a copy of `examples/inventory`, its models a
//! script. A prompt streams, the change set is reviewed hunk by hunk — one hunk rejected, the
//! rest applied to the files — and undo restores them.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use agent_client_protocol::{ByteStreams, ConnectTo};
use serde_json::json;
use tokio_util::compat::{TokioAsyncReadCompatExt, TokioAsyncWriteCompatExt};
use trellis_acp::{AcpAgent, AcpOptions};
use trellis_core::Runtime;
use trellis_core::service::{Service, ServiceOptions};
use trellis_desktop::acp::review::ReviewReply;
use trellis_desktop::acp::{Event, Transport, connect};
use trellis_desktop::app::{App, Message};

use super::drive::{pump, until_permission};
use trellis_llm::Role;
use trellis_store::{Store, StoreOptions};
use trellis_test_support::scripted::{ScriptedProvider, Turn};

const CONFIG: &str = r#"
[index.embedding]
backend = "none"

[models.profiles.local]
context = 8192
"#;

const ADR: &str = "docs/adr/0002-persist-stock.md";
const ARCH: &str = "docs/architecture.md";

/// `docs/architecture.md` with its first and last lines changed: two hunks.
fn edited_architecture(root: &Path) -> String {
    let old = std::fs::read_to_string(root.join(ARCH)).unwrap();
    let mut lines: Vec<String> = old.lines().map(str::to_owned).collect();
    lines[0] = "# Architecture of the inventory".into();
    let last = lines.len() - 1;
    lines[last] = "- Concurrency: decided in ADR 0002.".into();
    lines.join("\n") + "\n"
}

/// The orchestrator includes the documentation stage; its agent writes an ADR, then edits
/// the architecture notes, then reports; the other agents report.
fn script(arch: String) -> ScriptedProvider {
    ScriptedProvider::responding(move |r| {
        let report = |output: &str| {
            Turn::Json(
                json!({"failure": false, "output": output, "files_changed": [], "findings": []}),
            )
        };
        let schema = r.response_format.as_ref().map(|f| &f.schema["properties"]);
        let tool_results = r.messages.iter().filter(|m| m.role == Role::Tool).count();
        if schema.is_some_and(|p| p.get("workflow").is_some()) {
            Turn::Json(json!({
                "reasoning": "record it",
                "workflow": "architecture_discussion",
                "stages": [{"stage": "decision_documentation", "include": true, "reason": "asked"}]
            }))
        } else if schema.is_some_and(|p| p.get("queries").is_some()) {
            Turn::Json(json!({ "queries": ["Inventory commit stock"] }))
        } else if r.tools.iter().any(|t| t.name == "write_file") && tool_results == 0 {
            Turn::ToolCall {
                name: "write_file".into(),
                arguments: json!({"path": ADR, "content": "# ADR 0002: persist stock\n\nStatus: Proposed\n"}),
            }
        } else if r.tools.iter().any(|t| t.name == "write_file") && tool_results == 1 {
            Turn::ToolCall {
                name: "write_file".into(),
                arguments: json!({"path": ARCH, "content": arch.clone()}),
            }
        } else {
            report("Recorded ADR 0002 and noted it in the architecture.")
        }
    })
}

fn click(
    app: &mut App,
    what: impl iced_test::Selector<
        Output = impl iced_test::selector::Bounded + Clone + Send + Sync + 'static,
    > + Send,
) {
    let messages: Vec<Message> = {
        // A tall window: the whole change set in view without scrolling.
        let mut ui = iced_test::Simulator::with_size(
            iced::Settings::default(),
            (1400.0, 1600.0),
            app.view(),
        );
        ui.click(what).unwrap();
        ui.into_messages().collect()
    };
    for m in messages {
        let _ = app.update(m);
    }
}

#[test]
fn the_real_agent_streams_a_turn_and_a_hunk_is_rejected_the_rest_applied_then_undone() {
    let ws = trellis_test_support::example_repo("inventory", CONFIG).unwrap();
    let root: PathBuf = ws.path().canonicalize().unwrap();
    let original = std::fs::read_to_string(root.join(ARCH)).unwrap();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(4)
        .enable_all()
        .build()
        .unwrap();
    let service = {
        let _g = rt.enter();
        let store = Store::open_workspace(&root, StoreOptions::default()).unwrap();
        let runtime = Runtime::open(&root, &[], &[], store).unwrap();
        runtime
            .models()
            .install("local", Arc::new(script(edited_architecture(&root))));
        Service::start(Arc::new(runtime), ServiceOptions::default())
    };
    let agent = AcpAgent::with_service(service, AcpOptions::default());
    let (client_io, agent_io) = tokio::io::duplex(1 << 20);
    let (agent_read, agent_write) = tokio::io::split(agent_io);
    let (client_read, client_write) = tokio::io::split(client_io);
    rt.spawn(async move {
        let _ = agent
            .connection()
            .connect_to(ByteStreams::new(
                agent_write.compat_write(),
                agent_read.compat(),
            ))
            .await;
    });
    let (handle, mut events) = connect(
        rt.handle(),
        Transport::streams(client_read, client_write, "trellis acp (in process)"),
    );
    let mut app = App::new(handle, root.clone());
    until_permission(
        &rt,
        &mut app,
        &mut events,
        |app| click(app, "New session"),
        "Record the decision to persist stock",
    );

    // The turn streamed: the plan, the agents' thoughts and text, the tool calls.
    let s = app.session().unwrap();
    assert!(!s.plan.is_empty(), "a plan");
    assert!(
        s.transcript.iter().any(|e| matches!(e, trellis_desktop::app::Entry::Tool(t) if t.title.contains("write_file") || t.locations.iter().any(|(p, _)| p.ends_with(ADR)))),
        "the ADR's tool call: {:#?}",
        s.transcript
    );
    assert!(
        !root.join(ADR).exists(),
        "nothing applied before the review"
    );

    click(&mut app, "Review hunks…");
    pump(&rt, &mut app, &mut events, |e| {
        matches!(
            e,
            Event::Review {
                reply: ReviewReply::Shown { .. },
                ..
            }
        )
    });
    let review = app.review.as_ref().expect("the review is shown");
    assert_eq!(review.state, "open");
    let files: Vec<&str> = review
        .change_set
        .files
        .iter()
        .map(|f| f.path.as_str())
        .collect();
    assert_eq!(files, [ADR, ARCH]);
    assert_eq!(
        review.change_set.files[1].hunks.len(),
        2,
        "two hunks in the architecture notes"
    );
    click(&mut app, iced_test::selector::id("reject-1-1"));
    click(&mut app, "Apply accepted");
    pump(&rt, &mut app, &mut events, |e| {
        matches!(
            e,
            Event::Review {
                reply: ReviewReply::Applied { .. },
                ..
            }
        )
    });
    assert!(root.join(ADR).exists(), "the ADR was applied");
    let arch = std::fs::read_to_string(root.join(ARCH)).unwrap();
    assert!(
        arch.starts_with("# Architecture of the inventory\n"),
        "{arch}"
    );
    assert!(
        !arch.contains("decided in ADR 0002"),
        "the rejected hunk stayed out: {arch}"
    );
    assert!(
        arch.contains("Concurrency: reservations from several processes"),
        "{arch}"
    );

    click(&mut app, "Undo");
    pump(&rt, &mut app, &mut events, |e| {
        matches!(
            e,
            Event::Review {
                reply: ReviewReply::Undone { .. },
                ..
            }
        )
    });
    assert!(!root.join(ADR).exists(), "undo removed the ADR");
    assert_eq!(
        std::fs::read_to_string(root.join(ARCH)).unwrap(),
        original,
        "undo restored the notes"
    );
}
