//! Several tool calls in one turn run as a tool DAG: independent read-only calls at the
//! same time (observed through the session events), results back in the model's order, a
//! call that needs the user run on its own, and the `execute_dag` tool.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{Value, json};
use tokio::sync::Barrier;
use trellis_agents::{AgentOutcome, AgentRun, GraphInteraction, Resume, RoleSpec, SessionSink};
use trellis_llm::{FinishReason, Message, Role, StreamEvent};
use trellis_protocol::{Answer, SessionEvent, ToolStatus};
use trellis_test_support::TempWorkspace;
use trellis_test_support::scripted::{ScriptedProvider, Turn};
use trellis_test_support::tools::FakeTool;
use trellis_tools::{
    DagConfig, Interaction, NonInteractive, Registry, ToolEnv, ToolOutput, ToolsConfig, Workspace,
};

const ROLE: &str = "reader";

pub(crate) struct Fixture {
    _ws: TempWorkspace,
    registry: Arc<Registry>,
    pub(crate) runs: Arc<AtomicUsize>,
    workspace: Workspace,
}

/// Tools `a`, `b`, `c` meet at one barrier (3); `plain` and `double` are read-only,
/// `careful` asks, `write` changes things.
pub(crate) fn fixture() -> Fixture {
    let ws = TempWorkspace::new("parallel").unwrap();
    let runs = Arc::new(AtomicUsize::new(0));
    let barrier = Arc::new(Barrier::new(3));
    let mut registry = Registry::new();
    let n = json!({"type": "object", "properties": {"n": {"type": "integer"}}});
    for (name, meet, asks, writes) in [
        ("a", true, false, false),
        ("b", true, false, false),
        ("c", true, false, false),
        ("plain", false, false, false),
        ("careful", false, true, false),
        ("write", false, false, true),
    ] {
        let (label, barrier, runs) = (name.to_owned(), barrier.clone(), runs.clone());
        let mut tool = FakeTool::new(name)
            .input(n.clone())
            .output(json!({"type": "object", "properties": {"value": {"type": "integer"}}}))
            .runs(move |args| {
                let (label, barrier, runs) = (label.clone(), barrier.clone(), runs.clone());
                Box::pin(async move {
                    if meet {
                        barrier.wait().await;
                    }
                    runs.fetch_add(1, Ordering::SeqCst);
                    let n = args["n"].as_i64().unwrap_or(0);
                    Ok(ToolOutput {
                        text: format!("{label} saw {n}"),
                        data: Some(json!({ "value": n * 10 })),
                    })
                })
            });
        if asks {
            tool = tool.asks();
        }
        if writes {
            tool = tool.writes();
        }
        registry.register(tool.arc());
    }
    registry.allow(ROLE, ["a", "b", "c", "plain", "careful", "write"]);
    let workspace = Workspace::new(ws.path(), &Default::default()).unwrap();
    Fixture {
        _ws: ws,
        registry: Arc::new(registry),
        runs,
        workspace,
    }
}

#[derive(Clone, Default)]
pub(crate) struct Recorder(pub(crate) Arc<Mutex<Vec<SessionEvent>>>);

impl Recorder {
    fn sink(&self) -> SessionSink {
        let events = self.0.clone();
        Arc::new(move |e| events.lock().unwrap().push(e))
    }

    /// `started x` / `completed x` per tool event.
    fn tool_events(&self) -> Vec<String> {
        self.0
            .lock()
            .unwrap()
            .iter()
            .filter_map(|e| match e {
                SessionEvent::ToolStarted { call_id, .. } => Some(format!("started {call_id}")),
                SessionEvent::ToolCompleted { call_id, .. } => Some(format!("completed {call_id}")),
                _ => None,
            })
            .collect()
    }
}

pub(crate) fn agent(
    fx: &Fixture,
    provider: ScriptedProvider,
    recorder: &Recorder,
    gate: Option<Arc<GraphInteraction>>,
    dag: DagConfig,
) -> AgentRun {
    let interaction: Arc<dyn Interaction> = match &gate {
        Some(g) => g.clone(),
        None => Arc::new(NonInteractive { approve: true }),
    };
    let config = ToolsConfig {
        dag,
        ..ToolsConfig::default()
    };
    AgentRun {
        gate,
        max_turns: 6,
        events: Some(recorder.sink()),
        ..AgentRun::new(
            "read_stage",
            RoleSpec {
                name: ROLE.into(),
                role: "You read.".into(),
                objective: "Read.".into(),
                max_turns: 6,
                ..Default::default()
            },
            Arc::new(provider),
            fx.registry.clone(),
            ToolEnv::new(fx.workspace.clone(), Arc::new(config), interaction),
            vec![
                Message::system("## ROLE\nYou read."),
                Message::user("Read."),
            ],
        )
    }
}

/// One model turn asking for `calls` (id, tool, arguments) at once.
pub(crate) fn calls(calls: &[(&str, &str, Value)]) -> Turn {
    let mut events: Vec<StreamEvent> = calls
        .iter()
        .enumerate()
        .map(|(i, (id, tool, args))| StreamEvent::ToolCallDelta {
            index: i,
            id: Some((*id).into()),
            name: Some((*tool).into()),
            arguments: args.to_string(),
        })
        .collect();
    events.push(StreamEvent::Finish {
        reason: FinishReason::ToolCalls,
    });
    Turn::Events(events)
}

pub(crate) fn report() -> Turn {
    Turn::Json(json!({ "failure": false, "output": "read", "files_changed": [], "findings": [] }))
}

/// The tool results of a request, as (call id, content), in order.
pub(crate) fn results(messages: &[Message]) -> Vec<(String, String)> {
    messages
        .iter()
        .filter(|m| m.role == Role::Tool)
        .map(|m| {
            (
                m.tool_call_id.clone().unwrap_or_default(),
                m.content.clone(),
            )
        })
        .collect()
}

#[tokio::test]
async fn independent_read_only_calls_run_together_and_answer_in_order() {
    let fx = fixture();
    let model = ScriptedProvider::new([
        calls(&[
            ("x1", "a", json!({"n": 1})),
            ("x2", "b", json!({"n": 2})),
            ("x3", "c", json!({"n": 3})),
        ]),
        report(),
    ]);
    let recorder = Recorder::default();
    let run = agent(&fx, model.clone(), &recorder, None, DagConfig::default());
    // Each call waits at a barrier for the other two: one after another they never pass.
    let out = tokio::time::timeout(Duration::from_secs(60), run.run(Resume::Fresh))
        .await
        .expect("the three calls did not run at the same time")
        .unwrap();
    assert!(matches!(out, AgentOutcome::Done(_)));
    assert_eq!(
        recorder.tool_events(),
        [
            "started x1",
            "started x2",
            "started x3",
            "completed x1",
            "completed x2",
            "completed x3"
        ]
    );
    let second = &model.requests()[1];
    let got = results(&second.messages);
    assert_eq!(
        got.iter().map(|(id, _)| id.as_str()).collect::<Vec<_>>(),
        ["x1", "x2", "x3"]
    );
    assert!(got[2].1.contains("c saw 3"), "{got:?}");
}

#[tokio::test]
async fn a_call_that_changes_things_keeps_its_place_and_parallel_can_be_turned_off() {
    let fx = fixture();
    let model = ScriptedProvider::new([
        calls(&[
            ("p1", "plain", json!({"n": 1})),
            ("w", "write", json!({"n": 2})),
            ("p2", "plain", json!({"n": 3})),
            ("p3", "plain", json!({"n": 4})),
        ]),
        report(),
    ]);
    let recorder = Recorder::default();
    let run = agent(&fx, model, &recorder, None, DagConfig::default());
    run.run(Resume::Fresh).await.unwrap();
    assert_eq!(
        recorder.tool_events(),
        [
            "started p1",
            "completed p1",
            "started w",
            "completed w",
            "started p2",
            "started p3",
            "completed p2",
            "completed p3"
        ]
    );

    let model = ScriptedProvider::new([
        calls(&[
            ("p1", "plain", json!({"n": 1})),
            ("p2", "plain", json!({"n": 2})),
        ]),
        report(),
    ]);
    let recorder = Recorder::default();
    let off = DagConfig {
        parallel: false,
        ..DagConfig::default()
    };
    agent(&fx, model, &recorder, None, off)
        .run(Resume::Fresh)
        .await
        .unwrap();
    assert_eq!(
        recorder.tool_events(),
        ["started p1", "completed p1", "started p2", "completed p2"]
    );
}

#[tokio::test]
async fn a_call_that_needs_the_user_waits_alone_and_the_others_do_not_run_twice() {
    let fx = fixture();
    let model = ScriptedProvider::new([
        calls(&[
            ("k", "careful", json!({"n": 1})),
            ("p", "plain", json!({"n": 2})),
        ]),
        report(),
    ]);
    let recorder = Recorder::default();
    let gate = Arc::new(GraphInteraction::new());
    let out = agent(
        &fx,
        model.clone(),
        &recorder,
        Some(gate),
        DagConfig::default(),
    )
    .run(Resume::Fresh)
    .await
    .unwrap();
    let AgentOutcome::Interrupted { interrupt, scratch } = out else {
        panic!("not interrupted: {out:?}");
    };
    assert!(
        interrupt.prompt.contains("allow `careful`"),
        "{interrupt:?}"
    );
    // `plain` ran beside it; `careful` was refused without asking, then asked on its own.
    assert_eq!(fx.runs.load(Ordering::SeqCst), 1);

    let gate = Arc::new(GraphInteraction::new());
    let resume = Resume::Interrupt {
        scratch,
        answer: Answer::approve(),
    };
    let out = agent(
        &fx,
        model.clone(),
        &recorder,
        Some(gate),
        DagConfig::default(),
    )
    .run(resume)
    .await
    .unwrap();
    assert!(matches!(out, AgentOutcome::Done(_)), "{out:?}");
    assert_eq!(
        fx.runs.load(Ordering::SeqCst),
        2,
        "plain ran again, or careful did not run"
    );
    let got = results(&model.requests()[1].messages);
    assert_eq!(
        got.iter().map(|(id, _)| id.as_str()).collect::<Vec<_>>(),
        ["k", "p"]
    );
    assert!(got[0].1.contains("careful saw 1") && got[1].1.contains("plain saw 2"));
}

#[tokio::test]
async fn execute_dag_runs_a_plan_with_outputs_flowing_into_later_steps() {
    let fx = fixture();
    let plan = json!({"steps": [
        {"id": "first", "tool": "plain", "args": {"n": 4}},
        {"id": "second", "tool": "plain", "args": {"n": "${first.value}"}},
        {"id": "beside", "tool": "plain", "args": {"n": 1}},
        {"id": "nope", "tool": "write", "args": {"n": "${missing.value}"}}
    ]});
    let good = json!({"steps": [
        {"id": "first", "tool": "plain", "args": {"n": 4}},
        {"id": "second", "tool": "plain", "args": {"n": "${first.value}"}},
        {"id": "beside", "tool": "plain", "args": {"n": 1}}
    ]});
    let model = ScriptedProvider::new([
        calls(&[("d1", "execute_dag", plan)]),
        calls(&[("d2", "execute_dag", good)]),
        report(),
    ])
    .with_context_window(128_000);
    let recorder = Recorder::default();
    let out = agent(&fx, model.clone(), &recorder, None, DagConfig::default())
        .run(Resume::Fresh)
        .await
        .unwrap();
    assert!(matches!(out, AgentOutcome::Done(_)));
    let first = &model.requests()[0];
    assert!(first.tools.iter().any(|t| t.name == "execute_dag"));
    // A small model is not offered it.
    let small = ScriptedProvider::new([report()]).with_context_window(4096);
    agent(
        &fx,
        small.clone(),
        &Recorder::default(),
        None,
        DagConfig::default(),
    )
    .run(Resume::Fresh)
    .await
    .unwrap();
    assert!(
        !small.requests()[0]
            .tools
            .iter()
            .any(|t| t.name == "execute_dag")
    );
    let got = results(&model.requests()[1].messages);
    assert!(
        got[0].1.contains("refers to `missing`"),
        "an unknown reference is refused before anything runs: {got:?}"
    );
    let got = results(&model.requests()[2].messages);
    let report = &got[1].1;
    assert!(report.contains("DAG of 3 steps in 2 layers"), "{report}");
    assert!(
        report.contains("## second (plain, layer 1): ok\nplain saw 40"),
        "{report}"
    );
    assert!(
        report.contains("## beside (plain, layer 0): ok"),
        "{report}"
    );
    assert_eq!(fx.runs.load(Ordering::SeqCst), 3);
    let statuses: Vec<ToolStatus> = recorder
        .0
        .lock()
        .unwrap()
        .iter()
        .filter_map(|e| match e {
            SessionEvent::ToolCompleted { status, .. } => Some(*status),
            _ => None,
        })
        .collect();
    assert_eq!(statuses, [ToolStatus::Error, ToolStatus::Ok]);
}
