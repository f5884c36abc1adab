//! Usage: tool and model calls round-trip in order (queued or waited for), survive
//! reopening, and a run's model calls sum per run, stage and agent — on both backends.

use trellis_protocol::RunId;
use trellis_store::prelude::*;
use trellis_store::{ModelCallRecord, SqliteStore, StoreOptions, ToolCallRecord, UsageTotals};

use super::backends::sqlite;

pub fn call(run: &RunId, stage: Option<&str>, agent: &str, tokens: (u64, u64)) -> ModelCallRecord {
    ModelCallRecord {
        id: 0,
        run_id: Some(run.clone()),
        stage: stage.map(str::to_owned),
        agent: Some(agent.to_owned()),
        profile: "default".into(),
        model: "smollm2-135m-instruct".into(),
        prompt_tokens: tokens.0,
        completion_tokens: tokens.1,
        cached_tokens: 0,
        reported: true,
        cost_usd: None,
        outcome: "ok".into(),
        at: 1_763_700_000_000,
    }
}

pub fn tool_call(run: Option<&RunId>, tool: &str, is_error: bool) -> ToolCallRecord {
    ToolCallRecord {
        id: 0,
        run_id: run.cloned(),
        node_id: Some("code".into()),
        tool: tool.into(),
        args: r#"{"path":"src/lib.rs"}"#.into(),
        decision: "auto".into(),
        is_error,
        summary: "read 120 lines (+3 lines)".into(),
        duration_ms: 12,
        started_at: 1_763_700_000_000,
    }
}

/// Records `run-a`'s calls (one waited for, one queued) and another run's, and checks them;
/// answers the run and its rows, for the reopening tests.
pub fn model_calls_round_trip_in_order(store: &dyn UsageStore) -> (RunId, Vec<ModelCallRecord>) {
    let run = RunId::from_string("run-a");
    let other = RunId::from_string("run-b");
    let mut first = call(&run, Some("plan"), "planner", (120, 30));
    first.cached_tokens = 100;
    first.cost_usd = Some(0.0021);
    let mut second = call(&run, None, "coder", (400, 0));
    second.reported = false;
    second.outcome = "cancelled".into();
    let id = store.record_model_call(first.clone()).unwrap();
    assert!(id > 0);
    // The queued path, as a budget ledger's sink uses it.
    store.record_model_call_nowait(second.clone());
    store.record_model_call_nowait(call(&other, Some("plan"), "planner", (1, 1)));
    // A write waited for comes after every one queued before it.
    let last = store
        .record_model_call(call(&other, None, "coder", (2, 2)))
        .unwrap();

    let rows = store.model_calls(&run).unwrap();
    assert_eq!(rows.len(), 2);
    assert!(id == rows[0].id && rows[0].id < rows[1].id);
    first.id = rows[0].id;
    second.id = rows[1].id;
    assert_eq!(rows, [first, second]);
    let others = store.model_calls(&other).unwrap();
    assert_eq!(others.len(), 2);
    assert!(rows[1].id < others[0].id && others[1].id == last);
    assert!(
        store
            .model_calls(&RunId::from_string("none"))
            .unwrap()
            .is_empty()
    );
    (run, rows)
}
both!(model_calls_round_trip_in_order);

#[test]
fn model_calls_survive_reopening() {
    let (dir, store) = sqlite();
    let (run, rows) = model_calls_round_trip_in_order(&store);
    let path = store.db_path().to_owned();
    drop(store);
    let reopened = SqliteStore::open(&path, StoreOptions::default()).unwrap();
    assert_eq!(reopened.model_calls(&run).unwrap(), rows);
    drop(dir);
}

fn tool_calls_round_trip_in_order(store: &dyn UsageStore) {
    let run = RunId::from_string("run-t");
    let mut read = tool_call(Some(&run), "read_file", false);
    let id = store.record_tool_call(read.clone()).unwrap();
    let mut failed = tool_call(Some(&run), "shell", true);
    failed.node_id = None;
    failed.summary = String::new();
    // Queued as the tools' sink queues them, between calls waited for.
    store.record_tool_call_nowait(failed.clone());
    store.record_tool_call_nowait(tool_call(None, "web_search", false));
    let mut last = tool_call(Some(&run), "apply_patch", false);
    let last_id = store.record_tool_call(last.clone()).unwrap();

    let rows = store.tool_calls(&run).unwrap();
    assert_eq!(rows.len(), 3, "{rows:?}");
    assert!(rows[0].id == id && rows[0].id < rows[1].id && rows[1].id < last_id);
    read.id = id;
    failed.id = rows[1].id;
    last.id = last_id;
    assert_eq!(rows, [read, failed, last]);
    // A call outside any run is stored but listed under none.
    assert!(
        store
            .tool_calls(&RunId::from_string("none"))
            .unwrap()
            .is_empty()
    );
}
both!(tool_calls_round_trip_in_order);

fn totals_per_run_stage_and_agent(store: &dyn UsageStore) {
    let run = RunId::from_string("run-t");
    let mut priced = call(&run, Some("plan"), "planner", (100, 20));
    priced.cost_usd = Some(0.25);
    priced.cached_tokens = 60;
    let mut failed = call(&run, Some("code"), "coder", (300, 50));
    failed.outcome = "failed".into();
    failed.reported = false;
    let mut priced_coder = call(&run, Some("code"), "coder", (200, 100));
    priced_coder.cost_usd = Some(0.5);
    for r in [
        priced,
        failed,
        priced_coder,
        call(&run, None, "planner", (10, 5)),
        // Another run's call is not counted.
        call(
            &RunId::from_string("run-x"),
            Some("plan"),
            "planner",
            (9, 9),
        ),
    ] {
        store.record_model_call(r).unwrap();
    }

    let usage = store.run_usage(&run).unwrap();
    assert_eq!(
        usage.run,
        UsageTotals {
            calls: 4,
            prompt_tokens: 610,
            completion_tokens: 175,
            cached_tokens: 60,
            estimated_calls: 1,
            unfinished_calls: 1,
            cost_usd: Some(0.75),
        }
    );
    assert_eq!(usage.run.total_tokens(), 785);
    let stages: Vec<(&str, u64, Option<f64>)> = usage
        .stages
        .iter()
        .map(|(s, t)| (s.as_str(), t.total_tokens(), t.cost_usd))
        .collect();
    // The call without a stage counts for the run and its agent only.
    assert_eq!(
        stages,
        [("code", 650, Some(0.5)), ("plan", 120, Some(0.25))]
    );
    let agents: Vec<(&str, u64, u64)> = usage
        .agents
        .iter()
        .map(|(a, t)| (a.as_str(), t.calls, t.total_tokens()))
        .collect();
    assert_eq!(agents, [("coder", 2, 650), ("planner", 2, 135)]);

    // A run without calls has zero totals and no cost.
    let none = store.run_usage(&RunId::from_string("idle")).unwrap();
    assert_eq!(none.run, UsageTotals::default());
    assert!(none.stages.is_empty() && none.agents.is_empty());
}
both!(totals_per_run_stage_and_agent);

/// Edge cases of the sums: costs SQLite's compensated `SUM` keeps exact (naive addition
/// gives 0.9999999999999999 for ten 0.1s), a NaN cost stored as none (SQLite stores a NaN as
/// NULL), calls without an agent, names ordered bytewise, token counts at the top of the
/// range and sums past it.
fn totals_keep_sqlites_arithmetic(store: &dyn UsageStore) {
    let run = RunId::from_string("run-sum");
    for i in 0..10 {
        let mut r = call(&run, Some("Zeta"), "b", (1, 0));
        r.cost_usd = Some(0.1);
        r.reported = i % 3 != 0;
        store.record_model_call(r).unwrap();
    }
    let mut nan = call(&run, Some("alpha"), "a", (0, 1));
    nan.cost_usd = Some(f64::NAN);
    nan.agent = None;
    store.record_model_call(nan).unwrap();
    let mut big = call(&run, Some("éclair"), "a", (0, 0));
    big.cached_tokens = u64::MAX;
    store.record_model_call(big.clone()).unwrap();

    let calls = store.model_calls(&run).unwrap();
    assert_eq!(calls[10].cost_usd, None);
    assert_eq!(calls[11].cached_tokens, i64::MAX as u64);
    let usage = store.run_usage(&run).unwrap();
    assert_eq!(usage.run.calls, 12);
    assert_eq!(usage.run.estimated_calls, 4);
    assert_eq!(usage.run.cost_usd, Some(1.0));
    assert_eq!(usage.run.cached_tokens, i64::MAX as u64);
    let stages: Vec<(&str, u64, Option<f64>)> = usage
        .stages
        .iter()
        .map(|(s, t)| (s.as_str(), t.calls, t.cost_usd))
        .collect();
    assert_eq!(
        stages,
        [
            ("Zeta", 10, Some(1.0)),
            ("alpha", 1, None),
            ("éclair", 1, None)
        ]
    );
    let agents: Vec<(&str, u64)> = usage
        .agents
        .iter()
        .map(|(a, t)| (a.as_str(), t.calls))
        .collect();
    assert_eq!(agents, [("a", 1), ("b", 10)]);

    // A sum past the range fails on both backends (SQLite's `integer overflow`).
    let over = RunId::from_string("run-over");
    big.run_id = Some(over.clone());
    store.record_model_call(big.clone()).unwrap();
    store.record_model_call(big).unwrap();
    assert!(store.run_usage(&over).is_err());
}
both!(totals_keep_sqlites_arithmetic);
