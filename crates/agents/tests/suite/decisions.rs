//! Decision points in a plan's execution (`docs/tools.md`, "Tool DAGs"): a plan pauses after the
//! steps it names and the agent replans it (`replan_dag`: add, remove, go on) without completed
//! steps running again; a step the policy asks about waits for the user through the run's interrupt
//! and the plan continues from its checkpoint once approved.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use serde_json::json;
use trellis_agents::{AgentOutcome, GraphInteraction, Resume};
use trellis_protocol::Answer;
use trellis_test_support::scripted::ScriptedProvider;
use trellis_tools::dag::{Checkpoints, MemoryCheckpoints};

use super::parallel::{Recorder, agent, calls, fixture, report, results};

/// The id `execute_dag` call `d1` of the first attempt of `read_stage` gets outside a run.
const DAG: &str = "-/read_stage#1/d1";

#[tokio::test]
async fn a_plan_pauses_for_a_decision_and_is_replanned_without_rerunning_steps() {
    let fx = fixture();
    let plan = json!({
        "steps": [
            {"id": "list", "tool": "plain", "args": {"n": 1}},
            {"id": "side", "tool": "plain", "args": {"n": 2}},
            {"id": "later", "tool": "plain", "args": {"n": "${list.value}"}}
        ],
        "decide_after": ["list"]
    });
    let replan = json!({
        "dag_id": DAG,
        "remove": ["later"],
        "add": [{"id": "instead", "tool": "plain", "args": {"n": "${list.value}"}}]
    });
    let model = ScriptedProvider::new([
        calls(&[("d1", "execute_dag", plan)]),
        calls(&[("r1", "replan_dag", replan.clone())]),
        calls(&[("r2", "replan_dag", replan)]),
        report(),
    ])
    .with_context_window(128_000);
    let checkpoints = Arc::new(MemoryCheckpoints::default());
    let mut a = agent(
        &fx,
        model.clone(),
        &Recorder::default(),
        None,
        Default::default(),
    );
    a.env.checkpoints = checkpoints.clone();
    let out = a.run(Resume::Fresh).await.unwrap();
    assert!(matches!(out, AgentOutcome::Done(_)), "{out:?}");
    assert!(
        model.requests()[0]
            .tools
            .iter()
            .any(|t| t.name == "replan_dag")
    );
    let paused = &results(&model.requests()[1].messages)[0].1;
    assert!(paused.contains("Paused after `list`"), "{paused}");
    assert!(paused.contains(&format!("DAG `{DAG}`")), "{paused}");
    assert!(paused.contains("Pending: later"), "{paused}");
    assert!(paused.contains("## side (plain, layer 0): ok"), "{paused}");
    let done = &results(&model.requests()[2].messages)[1].1;
    assert!(
        done.contains("## instead (plain, layer 1): ok\nplain saw 10"),
        "{done}"
    );
    assert!(
        done.contains("## list (plain, layer 0): ok (earlier)"),
        "{done}"
    );
    assert!(!done.contains("## later"), "{done}");
    // list and side once, instead once; later never.
    assert_eq!(fx.runs.load(Ordering::SeqCst), 3);
    // Finished: its checkpoint is gone, and replanning it again says so.
    assert!(checkpoints.load(DAG).is_none());
    let again = &results(&model.requests()[3].messages)[2].1;
    assert!(again.contains("no paused plan"), "{again}");
}

#[tokio::test]
async fn a_step_the_policy_asks_about_waits_for_the_user_and_the_plan_resumes_from_its_checkpoint()
{
    let fx = fixture();
    let plan = json!({"steps": [
        {"id": "first", "tool": "plain", "args": {"n": 4}},
        {"id": "check", "tool": "careful", "args": {"n": "${first.value}"}},
        {"id": "after", "tool": "plain", "args": {"n": "${check.value}"}}
    ]});
    let model = ScriptedProvider::new([calls(&[("d1", "execute_dag", plan)]), report()])
        .with_context_window(128_000);
    // The workspace store's role: kept across the two processes of the run.
    let checkpoints = Arc::new(MemoryCheckpoints::default());
    let recorder = Recorder::default();
    let mut a = agent(
        &fx,
        model.clone(),
        &recorder,
        Some(Arc::new(GraphInteraction::new())),
        Default::default(),
    );
    a.env.checkpoints = checkpoints.clone();
    let out = a.run(Resume::Fresh).await.unwrap();
    let AgentOutcome::Interrupted { interrupt, scratch } = out else {
        panic!("not interrupted: {out:?}");
    };
    assert!(
        interrupt.prompt.contains("allow `careful`"),
        "{interrupt:?}"
    );
    assert_eq!(fx.runs.load(Ordering::SeqCst), 1, "first ran; check waits");
    let held = checkpoints.load(DAG).expect("a checkpoint holds the plan");
    assert_eq!(held.held.as_deref(), Some("check"));
    assert!(held.done.contains_key("first"));

    let mut a = agent(
        &fx,
        model.clone(),
        &recorder,
        Some(Arc::new(GraphInteraction::new())),
        Default::default(),
    );
    a.env.checkpoints = checkpoints.clone();
    let out = a
        .run(Resume::Interrupt {
            scratch,
            answer: Answer::approve(),
        })
        .await
        .unwrap();
    assert!(matches!(out, AgentOutcome::Done(_)), "{out:?}");
    assert_eq!(
        fx.runs.load(Ordering::SeqCst),
        3,
        "check and after ran once each; first did not run again"
    );
    let got = results(&model.requests()[1].messages);
    let report = &got[0].1;
    assert!(
        report.contains("## check (careful, layer 1): ok"),
        "{report}"
    );
    assert!(
        report.contains("## after (plain, layer 2): ok\nplain saw 400"),
        "{report}"
    );
    assert!(checkpoints.load(DAG).is_none());
}

/// Checkpoints that also remember every state saved.
#[derive(Default)]
struct Spy {
    inner: MemoryCheckpoints,
    saved: std::sync::Mutex<Vec<trellis_tools::dag::Execution>>,
}

impl Checkpoints for Spy {
    fn save(&self, execution: &trellis_tools::dag::Execution) {
        self.saved.lock().unwrap().push(execution.clone());
        self.inner.save(execution);
    }

    fn load(&self, id: &str) -> Option<trellis_tools::dag::Execution> {
        self.inner.load(id)
    }

    fn remove(&self, id: &str) {
        self.inner.remove(id);
    }
}

#[tokio::test]
async fn a_plan_the_process_stopped_in_continues_from_the_checkpoint_of_its_last_layer() {
    use trellis_protocol::SessionEvent;
    let fx = fixture();
    let plan = json!({"steps": [
        {"id": "first", "tool": "plain", "args": {"n": 4}},
        {"id": "second", "tool": "plain", "args": {"n": "${first.value}"}}
    ]});
    let model = ScriptedProvider::new([calls(&[("d1", "execute_dag", plan)]), report()])
        .with_context_window(128_000);
    let spy = Arc::new(Spy::default());
    let recorder = Recorder::default();
    let mut a = agent(&fx, model, &recorder, None, Default::default());
    a.env.checkpoints = spy.clone();
    a.run(Resume::Fresh).await.unwrap();
    assert_eq!(fx.runs.load(Ordering::SeqCst), 2);
    // The process "stopped" after the plan's first layer: its record ends at the call's
    // start, the store holds the checkpoint saved after that layer.
    let after_first = spy.saved.lock().unwrap()[0].clone();
    assert_eq!(after_first.pending(), ["second"]);
    let events = recorder.0.lock().unwrap().clone();
    let cut = events
        .iter()
        .position(|e| matches!(e, SessionEvent::ToolStarted { call_id, .. } if call_id == "d1"))
        .unwrap();
    let store = Arc::new(MemoryCheckpoints::default());
    store.save(&after_first);

    let model = ScriptedProvider::new([
        calls(&[("r1", "replan_dag", json!({"dag_id": DAG}))]),
        report(),
    ])
    .with_context_window(128_000);
    let mut a = agent(
        &fx,
        model.clone(),
        &Recorder::default(),
        None,
        Default::default(),
    );
    a.env.checkpoints = store.clone();
    let out = a
        .run(Resume::Recorded(events[..=cut].to_vec()))
        .await
        .unwrap();
    assert!(matches!(out, AgentOutcome::Done(_)), "{out:?}");
    let told = &results(&model.requests()[0].messages)[0].1;
    assert!(told.contains("Continue it with `replan_dag`"), "{told}");
    assert!(
        told.contains("1 completed steps (first); pending: second"),
        "{told}"
    );
    let report = &results(&model.requests()[1].messages)[1].1;
    assert!(
        report.contains("## second (plain, layer 1): ok\nplain saw 40"),
        "{report}"
    );
    assert!(
        report.contains("## first (plain, layer 0): ok (earlier)"),
        "{report}"
    );
    assert_eq!(fx.runs.load(Ordering::SeqCst), 3, "only second ran again");
}
