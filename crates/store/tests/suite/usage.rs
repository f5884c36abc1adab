//! Model-call usage: rows round-trip, survive reopening, and sum per run, stage and agent.

use trellis_protocol::RunId;
use trellis_store::prelude::*;
use trellis_store::{ModelCallRecord, SqliteStore, StoreOptions, UsageTotals};

use super::fixtures::store;

fn call(run: &RunId, stage: Option<&str>, agent: &str, tokens: (u64, u64)) -> ModelCallRecord {
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

#[test]
fn model_calls_round_trip_in_order_and_survive_reopening() {
    let (dir, store) = store();
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
    store.flush().unwrap();

    let rows = store.model_calls(&run).unwrap();
    assert_eq!(rows.len(), 2);
    assert!(rows[0].id < rows[1].id);
    first.id = rows[0].id;
    second.id = rows[1].id;
    assert_eq!(rows, [first.clone(), second.clone()]);

    let path = store.db_path().to_owned();
    drop(store);
    let reopened = SqliteStore::open(&path, StoreOptions::default()).unwrap();
    assert_eq!(reopened.model_calls(&run).unwrap(), [first, second]);
    assert_eq!(reopened.model_calls(&other).unwrap().len(), 1);
    assert!(
        reopened
            .model_calls(&RunId::from_string("none"))
            .unwrap()
            .is_empty()
    );
    drop(dir);
}

#[test]
fn totals_per_run_stage_and_agent() {
    let (_dir, store) = store();
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
