//! Speculative execution: predicted read-only calls run before the model asks, their result
//! answers the model's identical call at once (used) or is reported wasted; dangerous and
//! writing tools never run ahead.

use std::sync::{Arc, Mutex};

use serde_json::{Value, json};
use trellis_agents::{AgentOutcome, AgentRun, Resume, RoleSpec, SessionSink};
use trellis_llm::{FinishReason, Message, StreamEvent};
use trellis_protocol::SessionEvent;
use trellis_test_support::TempWorkspace;
use trellis_test_support::scripted::{ScriptedProvider, Turn};
use trellis_test_support::tools::{FakeTool, Runs, count, object_schema};
use trellis_tools::{
    NonInteractive, Registry, SpeculationOutcome, ToolAdvisor, ToolEnv, ToolOutput, ToolsConfig,
    Workspace,
};

/// Predicts `details` (0.95), `purge_cache` (0.99, read-only but dangerous) and `write`
/// (0.97, not read-only) after `lookup`; records outcomes.
#[derive(Default)]
struct Advisor(Mutex<Vec<(String, SpeculationOutcome)>>);

impl ToolAdvisor for Advisor {
    fn predict_next(&self, completed: &[String]) -> Vec<(String, f64)> {
        if completed.last().map(String::as_str) == Some("lookup") {
            vec![
                ("purge_cache".into(), 0.99),
                ("write".into(), 0.97),
                ("details".into(), 0.95),
            ]
        } else {
            Vec::new()
        }
    }

    fn threshold(&self) -> f64 {
        0.92
    }

    fn speculated(&self, tool: &str, _confidence: f64, outcome: SpeculationOutcome) {
        self.0.lock().unwrap().push((tool.into(), outcome));
    }
}

fn registry(runs: &Runs) -> Registry {
    let mut r = Registry::new();
    for (name, read_only) in [
        ("lookup", true),
        ("details", true),
        ("purge_cache", true),
        ("write", false),
    ] {
        let label = name.to_owned();
        let mut tool = FakeTool::new(name)
            .input(object_schema(&[("key", "string")], &["key"]))
            .counting(runs)
            .returns(move |args| Ok(ToolOutput::text(format!("{label} of {}", args["key"]))));
        if !read_only {
            tool = tool.writes();
        }
        r.register(tool.arc());
    }
    r.allow("reader", ["lookup", "details", "purge_cache", "write"]);
    r
}

pub(crate) fn call(id: &str, name: &str, args: Value) -> Turn {
    Turn::Events(vec![
        StreamEvent::ToolCallDelta {
            index: 0,
            id: Some(id.into()),
            name: Some(name.into()),
            arguments: args.to_string(),
        },
        StreamEvent::Finish {
            reason: FinishReason::ToolCalls,
        },
    ])
}

pub(crate) fn report() -> Turn {
    Turn::Json(json!({ "failure": false, "output": "done", "files_changed": [], "findings": [] }))
}

async fn run(
    script: Vec<Turn>,
    advisor: &Arc<Advisor>,
    config: ToolsConfig,
) -> (Runs, Vec<SessionEvent>) {
    let runs: Runs = Arc::default();
    let (events, _) = run_with(script, advisor.clone(), registry(&runs), config).await;
    (runs, events)
}

/// Runs a `reader` agent (task "Look up a.") over `tools` with `advisor`; its events and
/// the model requests.
pub(crate) async fn run_with(
    script: Vec<Turn>,
    advisor: Arc<dyn ToolAdvisor>,
    tools: Registry,
    config: ToolsConfig,
) -> (Vec<SessionEvent>, Vec<trellis_llm::ChatRequest>) {
    let ws = TempWorkspace::new("speculation").unwrap();
    let mut env = ToolEnv::new(
        Workspace::new(ws.path(), &Default::default()).unwrap(),
        Arc::new(config),
        Arc::new(NonInteractive { approve: true }),
    );
    env.advisor = Some(advisor);
    let events = Arc::new(Mutex::new(Vec::new()));
    let sink: SessionSink = {
        let events = events.clone();
        Arc::new(move |e| events.lock().unwrap().push(e))
    };
    let provider = Arc::new(ScriptedProvider::new(script));
    let agent = AgentRun {
        max_turns: 6,
        events: Some(sink),
        ..AgentRun::new(
            "read",
            RoleSpec {
                name: "reader".into(),
                role: "You read.".into(),
                objective: "Read.".into(),
                max_turns: 6,
                ..Default::default()
            },
            provider.clone(),
            Arc::new(tools),
            env,
            vec![Message::system("You read."), Message::user("Look up a.")],
        )
    };
    let out = agent.run(Resume::Fresh).await.unwrap();
    assert!(matches!(out, AgentOutcome::Done(_)), "{out:?}");
    let events = events.lock().unwrap().clone();
    (events, provider.requests())
}

#[tokio::test]
async fn a_predicted_safe_call_is_ready_when_the_model_asks_and_dangerous_ones_never_run() {
    let advisor = Arc::new(Advisor::default());
    let (runs, events) = run(
        vec![
            call("c1", "lookup", json!({"key": "a"})),
            call("c2", "details", json!({"key": "a"})),
            report(),
        ],
        &advisor,
        ToolsConfig::default(),
    )
    .await;
    // `details` ran once — ahead of the model's second call — and answered it.
    assert_eq!(count(&runs, "details"), 1);
    assert_eq!(count(&runs, "purge_cache"), 0, "dangerous by name");
    assert_eq!(count(&runs, "write"), 0, "not read-only");
    let ahead = events
        .iter()
        .position(
            |e| matches!(e, SessionEvent::Note { text } if text.contains("ran `details` ahead")),
        )
        .expect("a note of the speculative call");
    // It ran during the second model call, before the model asked for it.
    let second_turn = events
        .iter()
        .position(|e| matches!(e, SessionEvent::TurnStarted { turn: 2, .. }))
        .unwrap();
    let asked = events
        .iter()
        .position(|e| matches!(e, SessionEvent::TurnCompleted { turn: 2, .. }))
        .unwrap();
    assert!(second_turn < ahead && ahead < asked, "{events:?}");
    let answered = events.iter().find_map(|e| match e {
        SessionEvent::ToolCompleted {
            call_id, output, ..
        } if call_id == "c2" => Some(output),
        _ => None,
    });
    assert_eq!(answered.map(String::as_str), Some("details of \"a\""));
    assert_eq!(
        *advisor.0.lock().unwrap(),
        [("details".to_owned(), SpeculationOutcome::Used)]
    );
}

#[tokio::test]
async fn a_result_nobody_asks_for_is_wasted_and_speculation_can_be_turned_off() {
    let advisor = Arc::new(Advisor::default());
    let (runs, _) = run(
        vec![
            call("c1", "lookup", json!({"key": "a"})),
            call("c2", "details", json!({"key": "b"})),
            report(),
        ],
        &advisor,
        ToolsConfig::default(),
    )
    .await;
    // Ran ahead with key "a", asked for with "b": two runs, one wasted.
    assert_eq!(count(&runs, "details"), 2);
    assert_eq!(
        *advisor.0.lock().unwrap(),
        [("details".to_owned(), SpeculationOutcome::Wasted)]
    );

    let advisor = Arc::new(Advisor::default());
    let mut off = ToolsConfig::default();
    off.speculation.enabled = false;
    let (runs, _) = run(
        vec![call("c1", "lookup", json!({"key": "a"})), report()],
        &advisor,
        off,
    )
    .await;
    assert_eq!(count(&runs, "details"), 0);
    assert!(advisor.0.lock().unwrap().is_empty());
}
