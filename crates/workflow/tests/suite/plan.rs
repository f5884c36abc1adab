use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use serde_json::{Value, json};
use trellis_graph::{Engine, MemoryJournal, NodeContext, NodeError, NodeHandler, NodeOutput};
use trellis_protocol::{NodeState, RunStatus};
use trellis_workflow::{
    AgentSpec, BUILTINS, Decision, Decisions, Error, Plan, StageContext, StageHandlers, assemble,
    compile, enrichment_counter, load_str,
};

/// Agents that fail their first `n` attempts (per stage or per `stage/agent`), logging every
/// activation as `node#attempt`.
#[derive(Default)]
struct Script {
    fail_first: BTreeMap<String, u32>,
    log: Arc<Mutex<Vec<String>>>,
    retrieval_inputs: Arc<Mutex<Vec<Value>>>,
}

impl StageHandlers for Script {
    fn agent(&self, stage: &StageContext, agent: &AgentSpec) -> Arc<dyn NodeHandler> {
        let key = format!("{}/{}", stage.stage_name, agent.agent);
        let fails = self
            .fail_first
            .get(&key)
            .or_else(|| self.fail_first.get(&stage.stage_name))
            .copied()
            .unwrap_or(0);
        let log = self.log.clone();
        let expected = stage.stage_name.clone();
        Arc::new(move |ctx: NodeContext| {
            log.lock()
                .unwrap()
                .push(format!("{}#{}", ctx.node, ctx.attempt));
            let input_ok = ctx.input["stage_name"] == json!(expected);
            async move {
                if !input_ok {
                    return Err(NodeError::new("stage context missing from input"));
                }
                Ok(if ctx.attempt <= fails {
                    NodeOutput::failure("scripted failure")
                } else {
                    NodeOutput::success()
                })
            }
        })
    }

    fn adaptive_retrieval(&self, _plan: &Plan) -> Arc<dyn NodeHandler> {
        let (log, inputs) = (self.log.clone(), self.retrieval_inputs.clone());
        Arc::new(move |ctx: NodeContext| {
            log.lock()
                .unwrap()
                .push(format!("{}#{}", ctx.node, ctx.attempt));
            inputs.lock().unwrap().push(ctx.input.clone());
            let stage = ctx.input["retry_stage"]
                .as_str()
                .unwrap_or_default()
                .to_owned();
            async move {
                Ok::<_, NodeError>(
                    NodeOutput::success().write("retrieval_context", json!({ stage: "more docs" })),
                )
            }
        })
    }
}

fn feature() -> trellis_workflow::Workflow {
    load_str("feature", BUILTINS[0].1, None).unwrap()
}

fn include(stages: &[&str]) -> Decisions {
    let mut d = Decisions::default();
    for s in stages {
        d.set(*s, Decision::Include, Some(format!("test includes {s}")));
    }
    d
}

async fn run(plan: &Plan, script: &Script) -> trellis_graph::RunOutcome {
    let graph = Arc::new(compile(plan, script).unwrap());
    let engine = Engine::new(Arc::new(MemoryJournal::new()));
    engine
        .run(graph, json!({ "task": plan.task }))
        .await
        .unwrap()
}

fn log(script: &Script) -> Vec<String> {
    script.log.lock().unwrap().clone()
}

#[test]
fn assembly_is_deterministic_and_serialisable() {
    let w = feature();
    let d = include(&["3"]);
    let a = assemble(&w, &d, "Implement JWT auth").unwrap();
    let b = assemble(&w, &d, "Implement JWT auth").unwrap();
    assert_eq!(a, b);
    assert_eq!(
        serde_json::to_string(&a).unwrap(),
        serde_json::to_string(&b).unwrap()
    );
    let back: Plan = serde_json::from_value(serde_json::to_value(&a).unwrap()).unwrap();
    assert_eq!(back, a);
    let planned: Vec<&str> = a
        .planned
        .iter()
        .map(|p| p.context.stage_name.as_str())
        .collect();
    assert_eq!(
        planned,
        [
            "code_generation",
            "test_generation_and_execution",
            "security_review"
        ]
    );
    assert_eq!(a.planned[2].reason, "test includes 3");
    assert_eq!(a.skipped.len(), 1);
    assert_eq!(a.skipped[0].stage_name, "lint_and_format");
    assert_eq!(a.skipped[0].reason, "optional stage not included");
    assert_eq!(a.routing[1].next_on_failure, "code_generation");
    assert_eq!(a.routing[1].max_attempts, Some(3));
    assert_eq!(a.routing[0].next_on_failure, "ABORT");
    assert_eq!(a.planned[0].context.token_budget, Some(30000));
    assert_eq!(
        a.planned[0].context.tools,
        [
            "lsp_find_definition",
            "lsp_get_signature",
            "tree_sitter_get_ast"
        ]
    );
    assert!(
        a.planned[2]
            .context
            .reasoning_guidance
            .as_deref()
            .unwrap()
            .contains("auth")
    );
    assert!(a.adaptive_retrieval);
    // By name works as well as by id.
    let by_name = assemble(&w, &include(&["security_review"]), "Implement JWT auth").unwrap();
    assert_eq!(by_name.planned.len(), 3);
    assert_eq!(by_name.planned[2].reason, "test includes security_review");
}

#[test]
fn bad_decisions_are_refused() {
    let w = feature();
    let mut d = Decisions::default();
    d.set("1", Decision::Skip, None);
    let e = assemble(&w, &d, "x").unwrap_err().to_string();
    assert!(
        e.contains("`code_generation` is required and cannot be skipped"),
        "{e}"
    );
    let e = assemble(&w, &include(&["security_reveiw"]), "x").unwrap_err();
    assert!(matches!(e, Error::Decision { .. }));
    assert!(
        e.to_string().contains("did you mean `security_review`?"),
        "{e}"
    );
}

#[tokio::test]
async fn feature_stage_two_fails_twice_then_done() {
    let plan = assemble(&feature(), &include(&["3", "4"]), "Implement JWT auth").unwrap();
    let script = Script {
        fail_first: [("test_generation_and_execution".to_owned(), 2)].into(),
        ..Script::default()
    };
    let out = run(&plan, &script).await;
    assert_eq!(out.status, RunStatus::Succeeded, "{:?}", out.error);
    assert_eq!(out.terminal.as_ref().unwrap().as_str(), "DONE");
    let log = log(&script);
    // The feature workflow's failure path: failing tests enrich the context of the stage on the
    // failure route (code generation), which runs again before the tests do.
    assert_eq!(
        log[..9],
        [
            "code_generation#1",
            "test_generation_and_execution#1",
            "adaptive_retrieval#1",
            "code_generation#2",
            "test_generation_and_execution#2",
            "adaptive_retrieval#2",
            "code_generation#3",
            "test_generation_and_execution#3",
            "security_review#1",
        ]
    );
    // Stage 4 has two agents: a fan-out whose children both ran.
    let mut rest = log[9..].to_vec();
    rest.sort();
    assert_eq!(
        rest,
        [
            "lint_and_format/code_agent#1",
            "lint_and_format/formatter_agent#1"
        ]
    );
    assert_eq!(
        out.counters[&enrichment_counter("test_generation_and_execution")],
        2
    );
    let inputs = script.retrieval_inputs.lock().unwrap().clone();
    assert_eq!(inputs[0]["failed_stage"], "test_generation_and_execution");
    assert_eq!(inputs[0]["retry_stage"], "code_generation");
    assert_eq!(inputs[1]["round"], 2);
    assert_eq!(inputs[0]["failure"]["failure"], true);
    assert_eq!(inputs[0]["failure"]["output"]["reason"], "scripted failure");
    assert_eq!(out.state.get("outcome"), Some(&json!("DONE")));
}

#[tokio::test]
async fn always_failing_stage_aborts_after_max_attempts() {
    let plan = assemble(&feature(), &Decisions::default(), "x").unwrap();
    let script = Script {
        fail_first: [("test_generation_and_execution".to_owned(), u32::MAX)].into(),
        ..Script::default()
    };
    let out = run(&plan, &script).await;
    assert_eq!(out.terminal.as_ref().unwrap().as_str(), "ABORT");
    // The failure route back to code_generation is taken max_attempts (3) times — the first
    // two through adaptive retrieval, the third directly — and the fourth failure aborts.
    assert_eq!(
        log(&script),
        [
            "code_generation#1",
            "test_generation_and_execution#1",
            "adaptive_retrieval#1",
            "code_generation#2",
            "test_generation_and_execution#2",
            "adaptive_retrieval#2",
            "code_generation#3",
            "test_generation_and_execution#3",
            "code_generation#4",
            "test_generation_and_execution#4",
        ]
    );
    assert!(
        out.error
            .as_deref()
            .unwrap_or_default()
            .contains("max_attempts (3) reached"),
        "{:?}",
        out.error
    );
}

#[tokio::test]
async fn skipped_optional_stages_are_bypassed() {
    // Neither optional stage included: stage 2 succeeds → security (skipped) → lint (skipped) → DONE.
    let plan = assemble(&feature(), &Decisions::default(), "x").unwrap();
    let script = Script::default();
    let out = run(&plan, &script).await;
    assert_eq!(out.terminal.as_ref().unwrap().as_str(), "DONE");
    assert_eq!(
        log(&script),
        ["code_generation#1", "test_generation_and_execution#1"]
    );
    for skipped in ["security_review", "lint_and_format"] {
        let n = out.nodes.iter().find(|n| n.id.as_str() == skipped).unwrap();
        assert_eq!(n.state, Some(NodeState::Skipped), "{skipped}");
    }
}

#[tokio::test]
async fn parallel_stage_uses_the_failure_aggregation() {
    let yaml = |policy: &str| {
        format!(
            "metadata: {{name: par}}\nstages:\n  - stage_id: 1\n    name: review\n    parallel_agents:\n      - agent: a\n      - agent: b\n      - agent: c\n    parallel_config:\n      failure_aggregation: {policy}\n    routing: {{next_stage_on_success: DONE, next_stage_on_failure: 1, max_attempts: 2}}\n"
        )
    };
    let script = || Script {
        fail_first: [("review/a".to_owned(), u32::MAX)].into(),
        ..Script::default()
    };
    // One of three fails: majority_fail passes; any_fails routes back to the stage itself (no
    // retrieval config, so no enrichment) max_attempts (2) times, and the third failure aborts;
    // only the failed child re-runs.
    let plan = assemble(
        &load_str("p", &yaml("majority_fail"), None).unwrap(),
        &Decisions::default(),
        "x",
    )
    .unwrap();
    assert!(!plan.adaptive_retrieval);
    let s = script();
    let out = run(&plan, &s).await;
    assert_eq!(out.terminal.as_ref().unwrap().as_str(), "DONE");
    assert_eq!(log(&s).len(), 3);
    // The collector records the stage's result, its agents' reports combined.
    let result = out.state.get_in("stage_results", "review").unwrap();
    assert_eq!(result["failure"], false);
    assert_eq!(
        result["output"]["output"],
        "a (failed): scripted failure\n\nb (succeeded)\n\nc (succeeded)"
    );

    let plan = assemble(
        &load_str("p", &yaml("any_fails"), None).unwrap(),
        &Decisions::default(),
        "x",
    )
    .unwrap();
    let s = script();
    let out = run(&plan, &s).await;
    assert_eq!(out.terminal.unwrap().as_str(), "ABORT");
    let log = log(&s);
    assert_eq!(
        log.iter().filter(|l| l.starts_with("review/a#")).count(),
        3,
        "{log:?}"
    );
    assert_eq!(
        log.iter().filter(|l| l.starts_with("review/b#")).count(),
        1,
        "{log:?}"
    );
}

#[tokio::test]
async fn architecture_discussion_with_optional_stage_skipped() {
    let w = load_str("a", BUILTINS[1].1, None).unwrap();
    let plan = assemble(&w, &Decisions::default(), "discuss the architecture").unwrap();
    let script = Script::default();
    let out = run(&plan, &script).await;
    assert_eq!(out.terminal.unwrap().as_str(), "DONE");
    assert_eq!(log(&script), ["architectural_analysis#1"]);
}

#[tokio::test]
async fn scheduling_free_reaches_the_plan_and_the_graph_and_steps_stays_implicit() {
    let free = BUILTINS[0]
        .1
        .replacen("\nstages:", "\nscheduling: free\n\nstages:", 1);
    let w = load_str("feature-free", &free, None).unwrap();
    assert_eq!(w.scheduling, trellis_graph::Scheduling::Free);
    let plan = assemble(&w, &include(&[]), "Implement JWT auth").unwrap();
    assert_eq!(plan.scheduling, trellis_graph::Scheduling::Free);
    let json = serde_json::to_value(&plan).unwrap();
    assert_eq!(json["scheduling"], "free");
    let back: Plan = serde_json::from_value(json).unwrap();
    assert_eq!(back, plan);
    let script = Script::default();
    let graph = compile(&plan, &script).unwrap();
    assert_eq!(graph.scheduling(), trellis_graph::Scheduling::Free);
    // The free-running run reaches the same end as lock-step on this chain.
    let out = run(&plan, &script).await;
    assert_eq!(out.status, RunStatus::Succeeded, "{:?}", out.error);

    // Lock-step (the default) is not written into the plan: plans stored before the key
    // existed compile to the same graph.
    let steps = assemble(&feature(), &include(&[]), "Implement JWT auth").unwrap();
    assert!(
        serde_json::to_value(&steps)
            .unwrap()
            .get("scheduling")
            .is_none()
    );
    assert_eq!(
        compile(&steps, &Script::default()).unwrap().scheduling(),
        trellis_graph::Scheduling::Steps
    );
}
