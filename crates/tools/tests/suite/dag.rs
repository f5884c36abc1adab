//! Tool DAGs: dependency detection from schemas, references, cycles, layers, parallel
//! execution observed through events, skipped dependents, steps that need the user.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{Value, json};
use tokio::sync::Barrier;
use tokio_util::sync::CancellationToken;
use trellis_test_support::tools::{FakeTool, Runs, count};
use trellis_tools::dag::{self, Catalog, DagError, DagEvent, EdgeKind, Runner, Step, StepStatus};
use trellis_tools::{
    ApprovalDecision, Registry, ScriptedInteraction, Tool, ToolEnv, ToolOutput, ToolsConfig,
    Workspace,
};

fn schema(props: Value, required: &[&str]) -> Value {
    json!({"type": "object", "properties": props, "required": required})
}

fn fake(
    name: &str,
    input: Value,
    output: Option<Value>,
    read_only: bool,
    run: impl Fn(Value) -> trellis_tools::Result<ToolOutput> + Send + Sync + 'static,
) -> Arc<dyn Tool> {
    let mut tool = FakeTool::new(name)
        .description(&format!("{name} (a test tool)"))
        .input(input)
        .returns(run);
    if let Some(output) = output {
        tool = tool.output(output);
    }
    if !read_only {
        tool = tool.writes();
    }
    tool.arc()
}

fn data(text: &str, data: Value) -> trellis_tools::Result<ToolOutput> {
    Ok(ToolOutput {
        text: text.into(),
        data: Some(data),
    })
}

/// The reference example of a tool DAG: filesystem read → JSON parse → GitHub create.
fn seed_tools() -> Vec<Arc<dyn Tool>> {
    vec![
        fake(
            "fs_read",
            schema(json!({"path": {"type": "string"}}), &["path"]),
            Some(schema(json!({"content": {"type": "string"}}), &["content"])),
            true,
            |args| {
                let path = args["path"].as_str().unwrap_or_default().to_owned();
                data(&format!("read {path}"), json!({"content": "{\"k\": 7}"}))
            },
        ),
        fake(
            "json_parse",
            schema(json!({"jsonString": {"type": "string"}}), &["jsonString"]),
            Some(schema(json!({"parsed": {"type": "object"}}), &["parsed"])),
            true,
            |args| {
                let s = args["jsonString"].as_str().unwrap_or_default();
                let parsed: Value = serde_json::from_str(s)
                    .map_err(|e| trellis_tools::Error::Failed(e.to_string()))?;
                data("parsed", json!({ "parsed": parsed }))
            },
        ),
        fake(
            "github_create",
            schema(json!({"data": {"type": "object"}}), &["data"]),
            Some(schema(json!({"url": {"type": "string"}}), &[])),
            false,
            |args| {
                data(
                    &format!("created {}", args["data"]),
                    json!({"url": "https://x/1"}),
                )
            },
        ),
    ]
}

fn registry(tools: Vec<Arc<dyn Tool>>) -> Registry {
    let mut r = Registry::new();
    let names: Vec<String> = tools.iter().map(|t| t.spec().name.clone()).collect();
    for t in tools {
        r.register(t);
    }
    r.allow("agent", names.iter().map(String::as_str));
    r
}

fn env(dir: &std::path::Path, interaction: Arc<ScriptedInteraction>) -> ToolEnv {
    let config = Arc::new(ToolsConfig::default());
    let ws = Workspace::new(dir, &config.secrets).unwrap();
    ToolEnv::new(ws, config, interaction)
}

fn step(id: &str, tool: &str, args: Value) -> Step {
    Step {
        id: id.into(),
        tool: tool.into(),
        args,
        depends_on: Vec::new(),
    }
}

#[test]
fn the_seeds_example_is_detected_from_the_schemas_alone() {
    let r = registry(seed_tools());
    let plan = [
        step("read", "fs_read", json!({"path": "data.json"})),
        step("parse", "json_parse", json!({})),
        step("create", "github_create", json!({})),
    ];
    let d = dag::build(&plan, &r).unwrap();
    let flows: Vec<(String, String, Option<String>)> = d
        .edges
        .iter()
        .filter(|e| e.kind == EdgeKind::Schema)
        .map(|e| (e.from.clone(), e.to.clone(), e.data_path.clone()))
        .collect();
    assert_eq!(
        flows,
        vec![
            (
                "read".into(),
                "parse".into(),
                Some("output.content → input.jsonString".into())
            ),
            (
                "parse".into(),
                "create".into(),
                Some("output.parsed → input.data".into())
            ),
        ]
    );
    assert_eq!(d.layers, vec![vec![0], vec![1], vec![2]]);
    assert!(d.nodes[1].bindings.iter().all(|b| !b.ambiguous));
}

#[test]
fn independent_steps_share_a_layer_and_a_write_keeps_its_place() {
    let r = registry(seed_tools());
    let plan = [
        step("a", "fs_read", json!({"path": "a"})),
        step("b", "fs_read", json!({"path": "b"})),
        step("w", "github_create", json!({"data": {}})),
        step("c", "fs_read", json!({"path": "c"})),
    ];
    let d = dag::build(&plan, &r).unwrap();
    assert_eq!(d.layers, vec![vec![0, 1], vec![2], vec![3]]);
    assert!(
        d.edges
            .iter()
            .any(|e| e.from == "w" && e.to == "c" && e.kind == EdgeKind::Order)
    );
    assert!(!d.nodes[2].parallel && d.nodes[3].parallel);
}

#[test]
fn ambiguous_matches_become_dependencies_on_every_candidate() {
    let r = registry(seed_tools());
    // Two earlier reads could both feed the parser's string: both are dependencies, the
    // nearer one is bound and the binding says it was ambiguous.
    let plan = [
        step("r1", "fs_read", json!({"path": "1"})),
        step("r2", "fs_read", json!({"path": "2"})),
        step("parse", "json_parse", json!({})),
    ];
    let d = dag::build(&plan, &r).unwrap();
    assert_eq!(d.nodes[2].dependencies, vec!["r1", "r2"]);
    let b = &d.nodes[2].bindings[0];
    assert_eq!(
        (b.from.as_str(), b.output.as_str(), b.ambiguous),
        ("r2", "content", true)
    );
    // A given argument needs no provider.
    let plan = [
        step("r1", "fs_read", json!({"path": "1"})),
        step("parse", "json_parse", json!({"jsonString": "{}"})),
    ];
    assert_eq!(dag::build(&plan, &r).unwrap().layers, vec![vec![0, 1]]);
}

#[test]
fn cycles_unknown_steps_and_duplicates_are_refused_by_name() {
    let r = registry(seed_tools());
    let plan = [
        step("a", "fs_read", json!({"path": "${c.content}"})),
        step("b", "json_parse", json!({"jsonString": "${a.content}"})),
        step("c", "fs_read", json!({"path": "${b.parsed}"})),
    ];
    let err = dag::build(&plan, &r).unwrap_err();
    assert_eq!(
        err,
        DagError::Cycle(vec!["a".into(), "b".into(), "c".into(), "a".into()])
    );
    assert!(err.to_string().contains("a → b → c → a"), "{err}");
    let plan = [step("a", "fs_read", json!({"path": "${nope.content}"}))];
    let err = dag::build(&plan, &r).unwrap_err().to_string();
    assert!(err.contains("`nope`") && err.contains("steps: a"), "{err}");
    let plan = [
        step("a", "fs_read", json!({})),
        step("a", "fs_read", json!({})),
    ];
    assert_eq!(
        dag::build(&plan, &r).unwrap_err(),
        DagError::DuplicateId("a".into())
    );
    assert_eq!(dag::build(&[], &r).unwrap_err(), DagError::Empty);
}

#[tokio::test]
async fn outputs_flow_into_dependents_and_a_failure_skips_them() {
    let dir = tempfile::tempdir().unwrap();
    let r = registry(seed_tools());
    let env = env(dir.path(), Arc::new(ScriptedInteraction::default()));
    let runner = Runner {
        registry: &r,
        env: &env,
        role: "agent",
        cancel: CancellationToken::new(),
        events: None,
    };
    let plan = [
        step("read", "fs_read", json!({"path": "data.json"})),
        step("parse", "json_parse", json!({})),
        step(
            "create",
            "github_create",
            json!({"title": "from ${read.text}"}),
        ),
    ];
    let d = dag::build(&plan, &r).unwrap();
    let out = runner.run(&d).await;
    assert!(out.iter().all(|s| s.status == StepStatus::Ok), "{out:#?}");
    assert_eq!(out[1].args.as_ref().unwrap()["jsonString"], "{\"k\": 7}");
    assert_eq!(out[2].args.as_ref().unwrap()["data"], json!({"k": 7}));
    assert_eq!(
        out[2].args.as_ref().unwrap()["title"],
        "from read data.json"
    );

    // A parse error: the parser fails, the create step is skipped, naming why.
    let mut tools = seed_tools();
    tools[0] = fake(
        "fs_read",
        schema(json!({"path": {"type": "string"}}), &["path"]),
        Some(schema(json!({"content": {"type": "string"}}), &[])),
        true,
        |_| data("read", json!({"content": "not json"})),
    );
    let r = registry(tools);
    let runner = Runner {
        registry: &r,
        ..runner
    };
    let out = runner.run(&dag::build(&plan, &r).unwrap()).await;
    assert_eq!(out[1].status, StepStatus::Error);
    assert_eq!(out[2].status, StepStatus::Skipped);
    assert!(
        out[2].text.contains("`parse` did not succeed"),
        "{}",
        out[2].text
    );
}

#[tokio::test]
async fn a_layers_steps_run_at_the_same_time() {
    // Each step waits at a barrier for all three: run one after another they would never
    // pass it (the timeout fails the test); the events show every start before any end.
    let barrier = Arc::new(Barrier::new(3));
    let mut tools = Vec::new();
    for name in ["one", "two", "three"] {
        let barrier = barrier.clone();
        tools.push(
            FakeTool::new(name)
                .input(schema(json!({}), &[]))
                .runs(move |_| {
                    let barrier = barrier.clone();
                    Box::pin(async move {
                        barrier.wait().await;
                        Ok(ToolOutput::text("ok"))
                    })
                })
                .arc(),
        );
    }
    let r = registry(tools);
    let dir = tempfile::tempdir().unwrap();
    let env = env(dir.path(), Arc::new(ScriptedInteraction::default()));
    let seen = Mutex::new(Vec::new());
    let record = |e: DagEvent| seen.lock().unwrap().push(e);
    let runner = Runner {
        registry: &r,
        env: &env,
        role: "agent",
        cancel: CancellationToken::new(),
        events: Some(&record),
    };
    let plan = [
        step("1", "one", json!({})),
        step("2", "two", json!({})),
        step("3", "three", json!({})),
    ];
    let d = dag::build(&plan, &r).unwrap();
    let out = tokio::time::timeout(Duration::from_secs(60), runner.run(&d))
        .await
        .expect("the steps of one layer did not run at the same time");
    assert!(out.iter().all(|s| s.status == StepStatus::Ok));
    let kinds: Vec<&str> = seen
        .lock()
        .unwrap()
        .iter()
        .map(|e| match e {
            DagEvent::Started { .. } => "started",
            DagEvent::Completed { .. } => "completed",
            DagEvent::Skipped { .. } => "skipped",
        })
        .collect();
    assert_eq!(kinds[..3], ["started"; 3]);
    assert_eq!(kinds[3..], ["completed"; 3]);
}

#[tokio::test]
async fn a_step_that_needs_the_user_is_not_asked_for() {
    let asking = FakeTool::new("careful")
        .input(schema(json!({}), &[]))
        .asks()
        .returns(|_| Ok(ToolOutput::text("done")))
        .arc();
    let r = registry(vec![asking]);
    let dir = tempfile::tempdir().unwrap();
    let user = Arc::new(ScriptedInteraction::new([ApprovalDecision::Approve], []));
    let env = env(dir.path(), user.clone());
    let runner = Runner {
        registry: &r,
        env: &env,
        role: "agent",
        cancel: CancellationToken::new(),
        events: None,
    };
    let out = runner
        .run(&dag::build(&[step("c", "careful", json!({}))], &r).unwrap())
        .await;
    assert_eq!(out[0].status, StepStatus::NeedsInput);
    assert!(
        out[0].text.contains("call the tool on its own"),
        "{}",
        out[0].text
    );
    assert!(user.approval_requests().is_empty());
    assert!(r.parallel_safe("careful") && !r.parallel_safe("missing"));
}

#[tokio::test]
async fn a_run_stops_for_a_decision_and_for_the_user_and_resumes_without_rerunning() {
    use std::collections::BTreeMap;
    let runs: Runs = Arc::default();
    let counted = |name: &str, asks: bool| -> Arc<dyn Tool> {
        let tool = FakeTool::new(name)
            .input(schema(json!({}), &[]))
            .counting(&runs)
            .returns(|_| Ok(ToolOutput::text("ok")));
        if asks { tool.asks().arc() } else { tool.arc() }
    };
    let r = registry(vec![
        counted("list", false),
        counted("careful", true),
        counted("sum", false),
    ]);
    let dir = tempfile::tempdir().unwrap();
    let env = env(dir.path(), Arc::new(ScriptedInteraction::default()));
    let runner = Runner {
        registry: &r,
        env: &env,
        role: "agent",
        cancel: CancellationToken::new(),
        events: None,
    };
    let mut sum = step("sum", "sum", json!({}));
    sum.depends_on = vec!["careful".into()];
    let mut careful = step("careful", "careful", json!({}));
    careful.depends_on = vec!["list".into()];
    let d = dag::build(&[step("list", "list", json!({})), careful, sum], &r).unwrap();

    // A decision after `list`: the rest waits.
    let p = runner
        .resume(&d, BTreeMap::new(), &["list".into()], true)
        .await;
    assert_eq!(
        p.stop,
        dag::Stop::Decision {
            after: vec!["list".into()]
        }
    );
    assert_eq!(p.results.len(), 1);
    // Going on: `careful` needs the user; held without a result, `sum` not reached.
    let p = runner.resume(&d, p.results, &[], true).await;
    assert_eq!(
        p.stop,
        dag::Stop::NeedsUser {
            step: "careful".into()
        }
    );
    assert_eq!(p.results.len(), 1);
    // The caller ran it where the user could answer; the run ends without running `list`
    // again.
    let mut done = p.results;
    done.insert(
        1,
        dag::StepResult {
            id: "careful".into(),
            tool: "careful".into(),
            status: StepStatus::Ok,
            args: Some(json!({})),
            text: "approved and done".into(),
            data: None,
            duration_ms: 0,
        },
    );
    let p = runner.resume(&d, done, &[], true).await;
    assert_eq!(p.stop, dag::Stop::Finished);
    assert_eq!(p.results.len(), 3);
    assert_eq!(
        (
            count(&runs, "list"),
            count(&runs, "careful"),
            count(&runs, "sum")
        ),
        (1, 0, 1),
        "list and sum once each; careful ran where the user was asked (outside)"
    );
}

#[tokio::test]
async fn a_paused_plan_survives_the_process_in_the_store_and_bad_replans_are_refused() {
    use trellis_store::{Store, StoreOptions};
    use trellis_tools::dag::{Checkpoints, Outcome, StoreCheckpoints, plan};
    let r = registry(seed_tools());
    let dir = tempfile::tempdir().unwrap();
    let env = env(dir.path(), Arc::new(ScriptedInteraction::default()));
    let runner = Runner {
        registry: &r,
        env: &env,
        role: "agent",
        cancel: CancellationToken::new(),
        events: None,
    };
    let store_dir = tempfile::tempdir().unwrap();
    let open = || Store::open_workspace(store_dir.path(), StoreOptions::default()).unwrap();
    let args = json!({
        "steps": [
            {"id": "read", "tool": "fs_read", "args": {"path": "a.json"}},
            {"id": "parse", "tool": "json_parse", "args": {}}
        ],
        "decide_after": ["read"]
    });
    {
        let store = open();
        let cps = StoreCheckpoints(store.clone());
        let Outcome::Report(paused) =
            plan::start(&runner, &cps, "p1".into(), &args, 10, false).await
        else {
            panic!("held");
        };
        assert!(
            paused.text.contains("Paused after `read`"),
            "{}",
            paused.text
        );
        // Refused replans leave it paused.
        for (bad, why) in [
            (json!({"dag_id": "p1", "remove": ["read"]}), "ran already"),
            (
                json!({"dag_id": "p1", "remove": ["nope"]}),
                "no step `nope`",
            ),
            (
                json!({"dag_id": "p1", "add": [{"id": "parse", "tool": "json_parse"}]}),
                "already called `parse`",
            ),
            (json!({"dag_id": "p9"}), "no paused plan `p9`"),
        ] {
            let out = plan::replan(&runner, &cps, &bad, 10, false).await.report();
            assert!(out.text.contains(why), "{bad}: {}", out.text);
        }
        assert!(cps.load("p1").is_some());
        store.flush().unwrap();
    }
    // Another process continues it from the store: `read` does not run again.
    let store = open();
    let cps = StoreCheckpoints(store);
    let done = plan::replan(&runner, &cps, &json!({"dag_id": "p1"}), 10, false)
        .await
        .report();
    assert_eq!(done.steps.len(), 1, "only parse ran: {:?}", done.steps);
    assert!(
        done.text.contains("## parse (json_parse, layer 1): ok"),
        "{}",
        done.text
    );
    assert!(
        done.text
            .contains("## read (fs_read, layer 0): ok (earlier)"),
        "{}",
        done.text
    );
    let decisions = cps.load("p1");
    assert!(decisions.is_none(), "finished: the checkpoint is removed");
}
