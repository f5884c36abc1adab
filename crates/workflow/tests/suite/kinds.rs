//! Stage kinds as data: validation of each kind's mistakes, and compiled graphs that route
//! gates, reviews, fan-outs and collectors as `docs/workflows.md` says.

use std::sync::{Arc, Mutex};

use serde_json::{Value, json};
use trellis_graph::{Engine, MemoryJournal, NodeContext, NodeError, NodeHandler, NodeOutput};
use trellis_protocol::{Answer, Command, Interrupt, NodeState, RunStatus};
use trellis_workflow::{
    AgentSpec, Aggregation, BUILTINS, Decisions, Error, Kind, Plan, Problem, StageContext,
    StageHandlers, StageKind, Target, assemble, compile, load_str,
};

fn problems(text: &str) -> Vec<Problem> {
    match load_str("w.yaml", text, None) {
        Err(Error::Invalid { problems, .. }) => problems.0,
        other => panic!("expected problems, got {other:?}"),
    }
}

fn has(ps: &[Problem], line: usize, needle: &str) {
    assert!(
        ps.iter()
            .any(|p| p.line == line && format!("{p}").contains(needle)),
        "no problem at line {line} containing {needle:?}: {ps:#?}"
    );
}

const HEAD: &str = "metadata:\n  name: k\nstages:";

#[test]
fn each_kind_reports_what_it_lacks_with_position_and_fix() {
    let ps = problems(&format!(
        "{HEAD}
  - stage_id: 1
    name: a
    parallel_agents: [{{agent: x}}]
  - stage_id: 2
    name: g
    kind: gate
  - stage_id: 3
    name: f
    kind: fan_out
    parallel_agents: [{{agent: o}}]
  - stage_id: 4
    name: c
    kind: collector
    collects: 1
  - stage_id: 5
    name: d
    kind: deterministic
    function: run_test
  - stage_id: 6
    name: r
    kind: reveiw
"
    ));
    // A gate without an artifact (the error points at the stage), and nothing else.
    has(&ps, 7, "stage #2 has no `artifact`");
    // A fan-out without a template.
    has(&ps, 10, "stage #3 has no `template`");
    // A collector of a stage that has no work nodes.
    has(&ps, 17, "a `agent` stage, which has no work nodes");
    // Unknown function and kind, with suggestions.
    let f = ps.iter().find(|p| p.line == 21).unwrap();
    assert!(
        f.fix
            .as_deref()
            .unwrap()
            .starts_with("did you mean `run_tests`"),
        "{f:?}"
    );
    let k = ps.iter().find(|p| p.line == 24).unwrap();
    assert!(k.message.contains("unknown stage kind `reveiw`"), "{k:?}");
    assert!(k.fix.as_deref().unwrap().contains("`review`"), "{k:?}");
    assert_eq!(ps.len(), 5, "{ps:#?}");

    // A fan-out whose work nobody collects.
    let ps = problems(&format!(
        "{HEAD}
  - stage_id: 1
    name: f
    kind: fan_out
    parallel_agents: [{{agent: o}}]
    template: {{agent: code_agent}}
"
    ));
    has(&ps, 6, "fan-out `f` has no collector");
}

#[test]
fn gates_need_a_producer_and_keys_belong_to_their_kind() {
    let ps = problems(&format!(
        "{HEAD}
  - stage_id: 1
    name: a
    artifact: plan
    parallel_agents: [{{agent: x}}]
  - stage_id: 2
    name: g
    kind: gate
    artifact: tickets
    parallel_agents: [{{agent: x}}]
  - stage_id: 3
    name: h
    kind: gate
    artifact: scope_crad
  - stage_id: 4
    name: r
    kind: review
    reviews: 9
    parallel_agents: [{{agent: x}}]
"
    ));
    has(
        &ps,
        6,
        "`artifact` belongs to `gate` stages; this stage is `agent`",
    );
    has(
        &ps,
        11,
        "gate `g` awaits `tickets`, which no stage produces",
    );
    has(&ps, 12, "takes no `parallel_agents`");
    let typo = ps.iter().find(|p| p.line == 16).unwrap();
    assert!(
        typo.message.contains("unknown artifact `scope_crad`"),
        "{typo:?}"
    );
    assert!(typo.fix.as_deref().unwrap().contains("`scope_card`"));
    has(&ps, 20, "`reviews` names stage `9`, which does not exist");
}

#[test]
fn quorum_is_an_aggregation() {
    assert_eq!(
        Aggregation::parse("quorum(2)"),
        Some(Aggregation::Quorum(2))
    );
    assert_eq!(Aggregation::parse("quorum(0)"), None);
    assert_eq!(Aggregation::parse("quorum(x)"), None);
    assert_eq!(Aggregation::Quorum(3).name(), "quorum(3)");
    let ps = problems(&format!(
        "{HEAD}
  - stage_id: 1
    name: a
    parallel_agents: [{{agent: x}}, {{agent: y}}]
    parallel_config: {{failure_aggregation: quorum(0)}}
"
    ));
    has(&ps, 7, "unknown failure_aggregation `quorum(0)`");
}

#[test]
fn staged_review_resolves_producers_and_revision_routes() {
    let w = load_str("staged_review", BUILTINS[2].1, None).unwrap();
    assert_eq!(w.name(), "staged_review");
    let stage = |n: &str| w.stage(n).unwrap();
    match &stage("approve_scope").kind.value {
        StageKind::Gate { artifact, producer } => {
            assert_eq!(artifact.value, "scope_card");
            assert_eq!(producer.as_ref().unwrap().value.as_str(), "scoping");
        }
        other => panic!("{other:?}"),
    }
    // Request changes goes back to the producer; a review's revision to the reviewed stage.
    assert_eq!(
        stage("approve_plan").routing.next_stage_on_failure.value,
        Target::Stage(trellis_workflow::StageId("planning".into()))
    );
    assert_eq!(
        stage("review").routing.next_stage_on_failure.value,
        Target::Stage(trellis_workflow::StageId("execution".into()))
    );
    // Plans keep the kinds (and load back).
    let plan = assemble(&w, &Decisions::default(), "add a flag").unwrap();
    let back: Plan = serde_json::from_value(serde_json::to_value(&plan).unwrap()).unwrap();
    assert_eq!(back, plan);
    let kinds: Vec<&str> = plan
        .planned
        .iter()
        .map(|p| match &p.context.kind {
            Kind::Agent => "agent",
            Kind::Gate { .. } => "gate",
            Kind::Review { .. } => "review",
            _ => "other",
        })
        .collect();
    assert_eq!(
        kinds,
        [
            "agent", "gate", "agent", "gate", "agent", "gate", "agent", "review", "gate"
        ]
    );
}

/// Handlers whose behaviour the test scripts: a gate interrupts until answered (approve or
/// feedback), a review says NEEDS_REVISION on its first activation, agents log their input.
#[derive(Default)]
struct Scripted {
    log: Arc<Mutex<Vec<String>>>,
    inputs: Arc<Mutex<Vec<Value>>>,
    items: Value,
}

impl StageHandlers for Scripted {
    fn agent(&self, stage: &StageContext, _agent: &AgentSpec) -> Arc<dyn NodeHandler> {
        let (log, inputs, items) = (self.log.clone(), self.inputs.clone(), self.items.clone());
        let fan_out = matches!(stage.kind, Kind::FanOut { .. });
        Arc::new(move |ctx: NodeContext| {
            log.lock()
                .unwrap()
                .push(format!("{}#{}", ctx.node, ctx.attempt));
            inputs.lock().unwrap().push(ctx.input.clone());
            let out = if fan_out {
                NodeOutput::success().result(json!({ "items": items }))
            } else if ctx.input.pointer("/item/fail") == Some(&json!(true)) {
                NodeOutput::failure("item failed")
            } else {
                NodeOutput::success()
            };
            async move { Ok::<_, NodeError>(out) }
        })
    }

    fn adaptive_retrieval(&self, _plan: &Plan) -> Arc<dyn NodeHandler> {
        Arc::new(|_ctx: NodeContext| async { Ok::<_, NodeError>(NodeOutput::success()) })
    }

    fn gate(&self, _stage: &StageContext) -> Arc<dyn NodeHandler> {
        let log = self.log.clone();
        Arc::new(move |ctx: NodeContext| {
            log.lock()
                .unwrap()
                .push(format!("{}#{}", ctx.node, ctx.attempt));
            let out = match &ctx.resume {
                None => NodeOutput::interrupt(Interrupt::approval("approve?")),
                Some(r) if r.answer.is_approval() => NodeOutput::success(),
                Some(r) => NodeOutput::failure("changes requested")
                    .result(json!({ "feedback": r.answer.0["comment"] })),
            };
            async move { Ok::<_, NodeError>(out) }
        })
    }

    fn merge(&self, _stage: &StageContext, _agent: Option<&AgentSpec>) -> Arc<dyn NodeHandler> {
        let (log, inputs) = (self.log.clone(), self.inputs.clone());
        Arc::new(move |ctx: NodeContext| {
            log.lock()
                .unwrap()
                .push(format!("{}#{}", ctx.node, ctx.attempt));
            inputs.lock().unwrap().push(ctx.input.clone());
            async move { Ok::<_, NodeError>(NodeOutput::success()) }
        })
    }

    fn review(&self, _stage: &StageContext, _agent: &AgentSpec) -> Arc<dyn NodeHandler> {
        let log = self.log.clone();
        Arc::new(move |ctx: NodeContext| {
            log.lock()
                .unwrap()
                .push(format!("{}#{}", ctx.node, ctx.attempt));
            // A fan-out's item reviews: only item A is sent back, once.
            let item = ctx.input.pointer("/item/id").and_then(Value::as_str);
            let first = ctx.attempt == 1 && item.is_none_or(|i| i == "A");
            let out = if first {
                NodeOutput::failure("NEEDS_REVISION")
                    .result(json!({ "verdict": "NEEDS_REVISION", "feedback": "add a test" }))
            } else {
                NodeOutput::success().result(json!({ "verdict": "APPROVED" }))
            };
            async move { Ok::<_, NodeError>(out) }
        })
    }
}

const GATED: &str = "\
metadata:
  name: gated
stages:
  - stage_id: 1
    name: write
    produces: plan
    parallel_agents: [{agent: planning}]
    routing: {max_attempts: 3}
  - stage_id: 2
    name: approve
    kind: gate
    artifact: plan
  - stage_id: 3
    name: build
    parallel_agents: [{agent: pulsing}]
    routing: {max_attempts: 3}
  - stage_id: 4
    name: check
    kind: review
    reviews: 3
    parallel_agents: [{agent: review}]
    routing: {next_stage_on_success: DONE, max_attempts: 3}
";

async fn answer(
    engine: &Engine,
    graph: &Arc<trellis_graph::Graph>,
    run: &trellis_protocol::RunId,
    node: &str,
    answer: Answer,
) -> trellis_graph::RunOutcome {
    engine
        .resume(
            graph.clone(),
            run,
            vec![Command::Answer {
                node: node.into(),
                answer,
            }],
        )
        .unwrap()
        .wait()
        .await
        .unwrap()
}

/// `yaml` compiled with `script`'s handlers and run until it stops.
async fn started(
    yaml: &str,
    script: Scripted,
) -> (
    Scripted,
    Arc<trellis_graph::Graph>,
    Engine,
    trellis_graph::RunOutcome,
) {
    let w = load_str("w.yaml", yaml, None).unwrap();
    let plan = assemble(&w, &Decisions::default(), "t").unwrap();
    let graph = Arc::new(compile(&plan, &script).unwrap());
    let engine = Engine::new(Arc::new(MemoryJournal::new()));
    let out = engine
        .run(graph.clone(), json!({ "task": "t" }))
        .await
        .unwrap();
    (script, graph, engine, out)
}

#[tokio::test]
async fn gates_wait_send_feedback_back_and_reviews_branch_a_revision() {
    let (script, graph, engine, paused) = started(GATED, Scripted::default()).await;
    assert_eq!(paused.status, RunStatus::WaitingInput);
    assert_eq!(paused.waiting[0].0.as_str(), "approve");
    // Request changes: the producer runs again with the feedback, then the gate asks again.
    let again = answer(
        &engine,
        &graph,
        &paused.run,
        "approve",
        Answer::reject("shorter"),
    )
    .await;
    assert_eq!(again.status, RunStatus::WaitingInput);
    let second_write = script
        .inputs
        .lock()
        .unwrap()
        .iter()
        .filter(|i| i["stage_name"] == "write")
        .nth(1)
        .cloned()
        .unwrap();
    assert_eq!(second_write["feedback"], json!("shorter"));
    let done = answer(&engine, &graph, &again.run, "approve", Answer::approve()).await;
    assert_eq!(done.status, RunStatus::Succeeded, "{:?}", done.error);
    assert_eq!(
        *script.log.lock().unwrap(),
        [
            "write#1",
            "approve#1",
            "approve#1",
            "write#2",
            "approve#2",
            "approve#2",
            "build#1",
            "check#1",
            "build#2",
            "check#2",
        ]
    );
    // The review's NEEDS_REVISION reached the reviewed stage as feedback, which its success
    // then cleared.
    let builds: Vec<Value> = script
        .inputs
        .lock()
        .unwrap()
        .iter()
        .filter(|i| i["stage_name"] == "build")
        .cloned()
        .collect();
    assert_eq!(builds[0].get("feedback"), None);
    assert_eq!(builds[1]["feedback"], json!("add a test"));
    assert_eq!(done.state.get("feedback").unwrap()["build"], Value::Null);
}

#[tokio::test]
async fn a_rejection_without_feedback_ends_the_run() {
    let (_, graph, engine, paused) = started(GATED, Scripted::default()).await;
    let no = Answer(json!({ "approved": false }));
    let done = answer(&engine, &graph, &paused.run, "approve", no).await;
    assert_eq!(done.status, RunStatus::Failed);
    assert_eq!(done.terminal.as_ref().map(|t| t.as_str()), Some("ABORT"));
}

const FAN: &str = "\
metadata:
  name: fan
stages:
  - stage_id: split
    name: split
    kind: fan_out
    parallel_agents: [{agent: planning}]
    template: {agent: code_agent}
    max_items: 4
  - stage_id: join
    name: join
    kind: collector
    collects: split
    parallel_config: {failure_aggregation: quorum(2)}
    routing: {next_stage_on_success: DONE}
";

#[tokio::test]
async fn fan_out_items_become_work_nodes_and_the_collector_applies_its_quorum() {
    let script = Scripted {
        items: json!([
            { "id": "T1", "title": "one" },
            { "id": "T 2", "title": "two" },
            { "title": "three", "fail": true },
        ]),
        ..Scripted::default()
    };
    let (script, _, _, done) = started(FAN, script).await;
    // Two of three succeeded: quorum(2) holds.
    assert_eq!(done.status, RunStatus::Succeeded, "{:?}", done.error);
    let mut work: Vec<&str> = done
        .nodes
        .iter()
        .map(|n| n.id.as_str())
        .filter(|id| id.starts_with("split/"))
        .collect();
    work.sort();
    assert_eq!(work, ["split/T1", "split/T_2", "split/item_3"]);
    assert_eq!(
        done.node("split/item_3").unwrap().state,
        Some(NodeState::Failed)
    );
    // Each work node got the template stage's context and its item.
    let inputs = script.inputs.lock().unwrap().clone();
    let t1 = inputs.iter().find(|i| i["item"]["id"] == "T1").unwrap();
    assert_eq!(t1["agents"][0]["agent"], "code_agent");
    assert_eq!(t1["stage_name"], "split");

    // Too many items fail the fan-out with the limit named.
    let script = Scripted {
        items: json!([{}, {}, {}, {}, {}]),
        ..Scripted::default()
    };
    let (_, _, _, done) = started(FAN, script).await;
    assert_eq!(done.status, RunStatus::Failed);
    let split = done.node("split").unwrap();
    assert!(
        split.result.to_string().contains("max_items is 4"),
        "{:?}",
        split.result
    );
}

#[tokio::test]
async fn a_kind_the_runtime_cannot_run_fails_naming_it() {
    let yaml = "\
metadata:
  name: m
stages:
  - stage_id: 1
    name: build
    parallel_agents: [{agent: pulsing}]
  - stage_id: 2
    name: land
    kind: deterministic
    function: run_tests
";
    let (_, _, _, done) = started(yaml, Scripted::default()).await;
    assert_eq!(done.status, RunStatus::Failed);
    let land = done.node("land").unwrap();
    assert!(
        land.result
            .to_string()
            .contains("stage `land`: this runtime cannot run `deterministic` stages"),
        "{:?}",
        land.result
    );
}

#[test]
fn items_from_and_produces_lists_are_checked() {
    let ps = problems(&format!(
        "{HEAD}
  - stage_id: 1
    name: plan
    produces: [plan_md, tickts]
    parallel_agents: [{{agent: x}}]
  - stage_id: 2
    name: work
    kind: fan_out
    items_from: plan_md
    parallel_agents: [{{agent: o}}]
    template: {{agent: y}}
  - stage_id: 3
    name: join
    kind: collector
    collects: 2
  - stage_id: 4
    name: more
    kind: fan_out
    items_from: tickets
    template: {{agent: y}}
  - stage_id: 5
    name: join2
    kind: collector
    collects: 4
"
    ));
    // An unknown artifact in a `produces` list, at its item.
    has(&ps, 6, "produces: unknown artifact `tickts`");
    // Only tickets have items; and a fan-out with items_from has no orchestrator.
    has(
        &ps,
        11,
        "items_from `plan_md` is not an artifact with items",
    );
    has(&ps, 11, "so it runs no orchestrator agent");
    // Nobody before stage 4 produces tickets (`tickts` is a typo).
    has(&ps, 21, "which no earlier stage produces");
    assert_eq!(ps.len(), 4, "{ps:#?}");

    // The `three_phase` built-in is valid: items from the tickets its planning collector produces.
    let w = load_str("three_phase", BUILTINS[3].1, None).unwrap();
    let plan = assemble(&w, &Decisions::default(), "t").unwrap();
    let implementation = plan
        .planned
        .iter()
        .find(|p| p.context.stage_name == "implementation")
        .unwrap();
    match &implementation.context.kind {
        Kind::FanOut {
            items_from,
            review,
            merge,
            ..
        } => {
            assert_eq!(items_from.as_deref(), Some("tickets"));
            assert_eq!(review.as_ref().unwrap().agent, "review");
            assert_eq!(merge.as_ref().unwrap().agent, "merger");
        }
        other => panic!("{other:?}"),
    }
    let collector = plan
        .planned
        .iter()
        .find(|p| p.context.stage_name == "planning_collector")
        .unwrap();
    assert_eq!(collector.context.produces.as_deref(), Some("plan_md"));
    assert_eq!(collector.context.also_produces, ["spec", "tickets"]);
}

const PIPELINE: &str = "\
metadata:
  name: pipe
scheduling: free
stages:
  - stage_id: split
    name: split
    kind: fan_out
    parallel_agents: [{agent: planning}]
    template: {agent: code_agent}
    review: {agent: review}
    merge: {agent: merger}
  - stage_id: join
    name: join
    kind: collector
    collects: split
    routing: {next_stage_on_success: DONE}
";

#[tokio::test]
async fn each_item_runs_its_own_work_review_merge_pipeline_in_dependency_order() {
    let script = Scripted {
        // B is listed first but depends on A: it waits for A's merge.
        items: json!([
            { "id": "B", "depends_on": ["A"] },
            { "id": "A" },
            { "id": "C", "dependencies": "none" },
        ]),
        ..Scripted::default()
    };
    let (script, _, _, done) = started(PIPELINE, script).await;
    assert_eq!(done.status, RunStatus::Succeeded, "{:?}", done.error);
    let log = script.log.lock().unwrap().clone();
    let at = |a: &str| {
        log.iter()
            .position(|l| l == a)
            .unwrap_or_else(|| panic!("{a} never ran: {log:?}"))
    };
    // A's first review sent it back: A ran again, then its review, then its merge; B only
    // after A's merge.
    assert!(at("split/A#1") < at("split/A.review#1"));
    assert!(at("split/A.review#1") < at("split/A#2"));
    assert!(at("split/A#2") < at("split/A.review#2"));
    assert!(at("split/A.review#2") < at("split/A.merge#1"));
    assert!(at("split/A.merge#1") < at("split/B#1"), "{log:?}");
    for n in ["split/B.merge#1", "split/C.merge#1"] {
        at(n);
    }
    assert!(!log.contains(&"split/B#2".to_owned()));
    // The revision carried the review's feedback; the merge node names the work it merges.
    let inputs = script.inputs.lock().unwrap().clone();
    let revised = inputs
        .iter()
        .filter(|i| i["item"]["id"] == "A" && i.get("feedback").is_some())
        .count();
    assert_eq!(revised, 1, "{inputs:#?}");
    let merge = inputs
        .iter()
        .find(|i| i["kind"]["merge"].is_object() && i["item"]["id"] == "C")
        .unwrap();
    assert_eq!(merge["kind"]["merge"]["merges"], "split/C");
    // The work nodes' results are in stage_results under their node ids.
    assert!(done.state.get_in("stage_results", "split/B").is_some());
}
