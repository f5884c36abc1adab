//! The task tree: DAG rules (cycles refused with their path, READY/PENDING from
//! dependencies, completion unblocks, failure blocks transitively while other branches go on),
//! milestones, the deterministic prioritizer, and the tree as engine state: written as ops
//! through the channel reducer, restored exactly by replay.

use std::sync::Arc;

use serde_json::{Value, json};
use trellis_graph::{
    Engine, GraphBuilder, MemoryJournal, NodeContext, NodeError, NodeOutput, Reducer,
};
use trellis_protocol::TerminalKind;
use trellis_workflow::tasktree::{
    CHANNEL, MilestoneStatus, NewTask, TaskStatus, TaskTree, TreeOp, reducer,
};

fn task(id: &str, deps: &[&str]) -> NewTask {
    NewTask {
        id: Some(id.into()),
        description: format!("do {id}"),
        measurable_outcome: format!("{id} works"),
        depends_on: deps.iter().map(|d| (*d).to_owned()).collect(),
        estimated_complexity: None,
    }
}

fn tree() -> TaskTree {
    let mut t = TaskTree::default();
    t.apply_all(&[
        TreeOp::SetIntent {
            remit: "colony management".into(),
            explicit_needs: vec!["colonies".into()],
            implied_needs: vec!["a data model".into()],
        },
        TreeOp::SetMilestones {
            milestones: vec!["models exist".into(), "UI exists".into()],
        },
        TreeOp::AddTasks {
            milestone: "m1".into(),
            created_by: "expander".into(),
            // a ← b ← c, and d on its own.
            tasks: vec![
                task("a", &[]),
                task("b", &["a"]),
                task("c", &["b"]),
                task("d", &[]),
            ],
        },
    ])
    .unwrap();
    t
}

fn status(t: &TaskTree, id: &str) -> TaskStatus {
    t.task(id).unwrap().status
}

#[test]
fn dependencies_decide_readiness_and_completion_unblocks() {
    let mut t = tree();
    assert_eq!(t.active_milestone.as_deref(), Some("m1"));
    assert_eq!(t.milestones[0].status, MilestoneStatus::Active);
    assert_eq!(status(&t, "a"), TaskStatus::Ready);
    assert_eq!(status(&t, "b"), TaskStatus::Pending);
    let ready: Vec<&str> = t.ready_tasks("m1").iter().map(|x| x.id.as_str()).collect();
    assert_eq!(ready, ["a", "d"]);
    // `a` unblocks two tasks, `d` none: the prioritizer takes `a`.
    assert_eq!(t.prioritize().unwrap().id, "a");
    t.apply(&TreeOp::Select { task: "a".into() }).unwrap();
    assert_eq!(status(&t, "a"), TaskStatus::InProgress);
    assert_eq!(t.current_task.as_deref(), Some("a"));
    t.apply(&TreeOp::Complete { task: "a".into() }).unwrap();
    assert_eq!(status(&t, "b"), TaskStatus::Ready);
    assert_eq!(status(&t, "c"), TaskStatus::Pending);
    assert_eq!(t.current_task, None);
    // Selecting a task that is not READY is refused and changes nothing.
    let before = t.clone();
    let e = t.apply(&TreeOp::Select { task: "c".into() }).unwrap_err();
    assert!(e.message.contains("`c` is PENDING"), "{e}");
    assert_eq!(t, before);
}

#[test]
fn a_failure_blocks_its_dependents_transitively_while_other_branches_go_on() {
    let mut t = tree();
    t.apply_all(&[
        TreeOp::Select { task: "a".into() },
        TreeOp::Fail {
            task: "a".into(),
            reason: "wrong approach twice".into(),
            stage: "qa".into(),
        },
    ])
    .unwrap();
    assert_eq!(status(&t, "a"), TaskStatus::Failed);
    assert_eq!(status(&t, "b"), TaskStatus::Blocked);
    assert_eq!(status(&t, "c"), TaskStatus::Blocked);
    assert_eq!(
        t.task("c").unwrap().last_failure_reason.as_deref(),
        Some("blocked: `a` failed")
    );
    assert_eq!(status(&t, "d"), TaskStatus::Ready);
    assert!(!t.is_milestone_complete("m1"));
    t.apply_all(&[
        TreeOp::Select { task: "d".into() },
        TreeOp::Complete { task: "d".into() },
    ])
    .unwrap();
    assert!(t.is_milestone_complete("m1"));
    let stats = t.statistics();
    assert_eq!(stats.by_status["BLOCKED"], 2);
    assert_eq!(stats.by_status["COMPLETE"], 1);
    let report = t.report();
    assert!(
        report.contains("Failed (1):\n- a: do a — failed at qa: wrong approach twice"),
        "{report}"
    );
    assert!(report.contains("Blocked (2)"), "{report}");
    // The next milestone becomes active.
    t.apply(&TreeOp::AdvanceMilestone).unwrap();
    assert_eq!(t.active_milestone.as_deref(), Some("m2"));
    assert_eq!(t.milestones[0].status, MilestoneStatus::Complete);
    assert_eq!(t.milestones[1].status, MilestoneStatus::Active);
    // A task of m2 may not depend on one of m1.
    let e = t
        .apply(&TreeOp::AddTasks {
            milestone: "m2".into(),
            created_by: "expander".into(),
            tasks: vec![task("e", &["d"])],
        })
        .unwrap_err();
    assert!(e.message.contains("not a task of milestone `m2`"), "{e}");
}

#[test]
fn a_cycle_is_refused_with_its_path() {
    let mut t = tree();
    let before = t.clone();
    let e = t
        .apply(&TreeOp::AddTasks {
            milestone: "m1".into(),
            created_by: "assessor".into(),
            tasks: vec![task("x", &["z"]), task("y", &["x"]), task("z", &["y"])],
        })
        .unwrap_err();
    assert!(e.message.contains("form a cycle: "), "{e}");
    assert!(
        ["x → z → y → x", "z → y → x → z", "y → x → z → y"]
            .iter()
            .any(|p| e.message.contains(p)),
        "{e}"
    );
    assert_eq!(t, before);
    // Taken or missing ids get fresh ones; dependencies follow the renaming.
    t.apply(&TreeOp::AddTasks {
        milestone: "m1".into(),
        created_by: "assessor".into(),
        tasks: vec![task("a", &[]), task("f", &["a"])],
    })
    .unwrap();
    let added: Vec<&String> = t.order.iter().skip(4).collect();
    assert_eq!(added, ["t5", "f"]);
    assert_eq!(t.task("f").unwrap().depends_on, ["t5"]);
    assert_eq!(t.tasks_created_this_iteration, 2);
}

#[test]
fn the_tree_is_engine_state_restored_exactly_by_replay() {
    let journal = Arc::new(MemoryJournal::new());
    let graph = Arc::new(
        GraphBuilder::new("tree")
            .channel(CHANNEL, Reducer::custom("task_tree", reducer))
            .node("plan", |_ctx: NodeContext| async {
                Ok::<_, NodeError>(NodeOutput::success().write(
                    CHANNEL,
                    json!({ "ops": [
                        { "op": "set_milestones", "milestones": ["one"] },
                        { "op": "add_tasks", "milestone": "m1", "created_by": "expander",
                          "tasks": [{ "id": "a", "description": "A" },
                                    { "id": "b", "description": "B", "depends_on": ["a"] }] },
                    ]}),
                ))
            })
            .node("work", |ctx: NodeContext| async move {
                let t = TaskTree::from_value(ctx.state.get(CHANNEL)).unwrap();
                let next = t.prioritize().map(|x| x.id.clone());
                let out = match next {
                    Some(id) => NodeOutput::success().write(
                        CHANNEL,
                        json!([{ "op": "select", "task": id },
                               { "op": "set_field", "task": id, "field": "result_summary",
                                 "value": format!("did {id}") },
                               { "op": "complete", "task": id }]),
                    ),
                    None => NodeOutput::failure("nothing left"),
                };
                Ok::<_, NodeError>(out)
            })
            .terminal("DONE", TerminalKind::Success, None)
            .edge("plan", "work")
            .outcome_edge("work", "work", "DONE")
            .entry("plan")
            .build()
            .unwrap(),
    );
    let rt = tokio::runtime::Runtime::new().unwrap();
    let engine = Engine::new(journal.clone());
    let done = rt.block_on(engine.run(graph.clone(), Value::Null)).unwrap();
    let live = TaskTree::from_value(done.state.get(CHANNEL)).unwrap();
    assert_eq!(status(&live, "a"), TaskStatus::Complete);
    assert_eq!(status(&live, "b"), TaskStatus::Complete);
    assert_eq!(
        live.task("b").unwrap().result_summary.as_deref(),
        Some("did b")
    );
    // A fresh engine rebuilds the same tree from the log alone.
    let replayed = Engine::new(journal).inspect(graph, &done.run).unwrap();
    assert_eq!(replayed.state.get(CHANNEL), done.state.get(CHANNEL));
    // A bad op fails the write with the reason.
    let e = reducer(None, json!({ "op": "complete", "task": "nope" })).unwrap_err();
    assert!(e.contains("no task `nope`"), "{e}");
}

fn problems(text: &str) -> Vec<trellis_workflow::Problem> {
    match trellis_workflow::load_str("w.yaml", text, None) {
        Err(trellis_workflow::Error::Invalid { problems, .. }) => problems.0,
        other => panic!("expected problems, got {other:?}"),
    }
}

#[test]
fn steps_states_and_outcome_routes_are_validated_with_positions() {
    let ps = problems(
        "metadata:\n  name: t\nstate: [task_trees]\nstages:
  - stage_id: a
    name: a
    step: intnt
    parallel_agents: [{agent: intent}]
    routing:
      outcomes: {yes: b, no: nowhere}
  - stage_id: b
    name: b
    step: qa
    parallel_agents: [{agent: qa}]
    routing: {outcomes: {again: a}, next_stage_on_success: DONE}
",
    );
    let has = |line: usize, needle: &str| {
        assert!(
            ps.iter()
                .any(|p| p.line == line && format!("{p}").contains(needle)),
            "no problem at line {line} containing {needle:?}: {ps:#?}"
        );
    };
    has(3, "unknown state `task_trees`");
    has(7, "unknown task tree step `intnt`");
    // Without `state: [task_tree]` (the typo) a step has no tree to work on.
    has(7, "the workflow keeps no task tree");
    has(
        10,
        "outcomes.no routes to stage `nowhere`, which does not exist",
    );
    // a → b → a through outcome routes, no max_attempts: an unbounded loop.
    assert!(
        ps.iter()
            .any(|p| format!("{p}").contains("routing loop without max_attempts")),
        "{ps:#?}"
    );
    // The built-in is valid and plans a task tree channel.
    let w = trellis_workflow::load_str(
        "task_tree",
        trellis_workflow::BUILTINS
            .iter()
            .find(|(f, _)| *f == "task_tree.yaml")
            .unwrap()
            .1,
        None,
    )
    .unwrap();
    let plan =
        trellis_workflow::assemble(&w, &trellis_workflow::Decisions::default(), "t").unwrap();
    assert_eq!(plan.state, ["task_tree"]);
    let qa = plan.routing.iter().find(|r| r.stage == "qa").unwrap();
    assert_eq!(qa.outcomes["wrong_approach"], "research");
}
