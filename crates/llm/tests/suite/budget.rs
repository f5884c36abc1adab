use std::sync::Arc;

use tokio_util::sync::CancellationToken;
use trellis_llm::budget::BudgetUnit;
use trellis_llm::{
    Budget, BudgetLedger, Budgeted, CallOutcome, CallScope, ChatRequest, Error, Limit,
    MemoryUsageSink, Message, ModelProvider, Price, Scope, StreamEvent, Usage, UsageRecord,
};
use trellis_test_support::scripted::{ScriptedProvider, Turn};

fn request(max_tokens: u32) -> ChatRequest {
    ChatRequest {
        max_tokens: Some(max_tokens),
        ..ChatRequest::new(vec![Message::user(
            "Summarise the repository layout please.",
        )])
    }
}

fn scope() -> CallScope {
    CallScope {
        stage: Some("planning".into()),
        agent: Some("planner".into()),
    }
}

#[tokio::test]
async fn a_call_over_budget_is_not_made_and_can_resume_after_a_grant() {
    let scripted = ScriptedProvider::new([Turn::Text("ok".into()), Turn::Text("again".into())]);
    let budget = Budget {
        run: Limit {
            tokens: Some(200),
            cost_usd: None,
            calls: None,
        },
        ..Budget::default()
    };
    let ledger = Arc::new(BudgetLedger::new(budget));
    let p = Budgeted::new(
        Arc::new(scripted.clone()),
        Arc::clone(&ledger),
        scope(),
        None,
        512,
    );

    // prompt (~14 tokens estimated) + 100 fits in 200.
    let c = p
        .complete(request(100), CancellationToken::new())
        .await
        .unwrap();
    assert_eq!(c.text, "ok");
    let (spent, _) = ledger.spent(&Scope::Run);
    assert_eq!(spent, c.usage.total());
    let records = ledger.take_records();
    assert_eq!(records.len(), 1);
    assert_eq!(records[0].scope.agent.as_deref(), Some("planner"));
    assert!(records[0].reported);

    // The projection (prompt + 190) exceeds what is left: refused before any request.
    let err = p
        .complete(request(190), CancellationToken::new())
        .await
        .unwrap_err();
    let Error::Budget(exceeded) = err else {
        panic!("expected a budget error, got {err}");
    };
    assert_eq!(exceeded.scope, Scope::Run);
    assert_eq!(exceeded.unit, BudgetUnit::Tokens);
    assert!(exceeded.requested >= 190.0);
    assert_eq!(
        scripted.requests().len(),
        1,
        "the refused call was not made"
    );
    // The refusal is serialisable, to travel in a resumable interrupt.
    let wire = serde_json::to_value(&exceeded).unwrap();
    assert_eq!(wire["scope"]["scope"], "run");

    // Granting more budget lets the run continue.
    ledger.grant(
        &Scope::Run,
        Limit {
            tokens: Some(1000),
            cost_usd: None,
            calls: None,
        },
    );
    let c = p
        .complete(request(190), CancellationToken::new())
        .await
        .unwrap();
    assert_eq!(c.text, "again");
    assert_eq!(scripted.remaining(), 0);
}

#[tokio::test]
async fn cost_budgets_use_the_price_and_agent_limits_apply() {
    let scripted = ScriptedProvider::new([Turn::Text("fine".into())]);
    let mut budget = Budget::default();
    budget.agents.insert(
        "planner".into(),
        Limit {
            tokens: None,
            cost_usd: Some(0.01),
            calls: None,
        },
    );
    let ledger = Arc::new(BudgetLedger::new(budget));
    let price = Price {
        input_per_mtok: 3.0,
        output_per_mtok: 15.0,
    };
    let p = Budgeted::new(
        Arc::new(scripted.clone()),
        Arc::clone(&ledger),
        scope(),
        Some(price),
        512,
    );
    // 15 $/Mtok × 1000 output tokens = 0.015 $ > 0.01 $.
    let err = p
        .complete(request(1000), CancellationToken::new())
        .await
        .unwrap_err();
    assert!(
        matches!(&err, Error::Budget(e) if e.scope == Scope::Agent("planner".into()) && e.unit == BudgetUnit::CostUsd),
        "{err}"
    );
    // 200 output tokens: 0.003 $ plus the prompt fits.
    p.complete(request(200), CancellationToken::new())
        .await
        .unwrap();
    let records = ledger.take_records();
    let cost = records[0].cost_usd.unwrap();
    assert!(cost > 0.0 && cost < 0.01);
    assert_eq!(scripted.requests().len(), 1);
}

#[tokio::test]
async fn concurrent_calls_reserve_their_projection() {
    let ledger = Arc::new(BudgetLedger::new(Budget {
        run: Limit {
            tokens: Some(100),
            cost_usd: None,
            calls: None,
        },
        ..Budget::default()
    }));
    let first = ledger.reserve(&scope(), 60, 0.0).unwrap();
    assert!(
        ledger.reserve(&scope(), 60, 0.0).is_err(),
        "60 + 60 > 100 while the first runs"
    );
    drop(first);
}

#[tokio::test]
async fn the_scripted_provider_fails_loudly_when_its_script_runs_out() {
    let scripted = ScriptedProvider::new([]);
    let err = scripted
        .complete(request(10), CancellationToken::new())
        .await
        .unwrap_err();
    assert!(
        err.to_string().contains("script exhausted: request #1"),
        "{err}"
    );
    assert_eq!(scripted.requests().len(), 1);
}

fn limit(tokens: u64) -> Limit {
    Limit {
        tokens: Some(tokens),
        cost_usd: None,
        calls: None,
    }
}

#[tokio::test]
async fn every_finished_call_reaches_the_sink_once_refused_ones_never() {
    let cut_usage = Usage {
        prompt_tokens: 40,
        completion_tokens: 7,
        cached_prompt_tokens: 32,
    };
    let scripted = ScriptedProvider::new([
        Turn::Text("fine".into()),
        // The stream is cut after the provider reported usage: the call failed but consumed
        // tokens, and the reported numbers are what gets booked.
        Turn::Cut(vec![
            StreamEvent::TextDelta {
                text: "partial".into(),
            },
            StreamEvent::Usage { usage: cut_usage },
        ]),
        Turn::Text("never played".into()),
    ]);
    let sink = Arc::new(MemoryUsageSink::default());
    let ledger = Arc::new(BudgetLedger::new(Budget::default()).with_sink(sink.clone()));
    let price = Price {
        input_per_mtok: 1.0,
        output_per_mtok: 2.0,
    };
    let p = Budgeted::new(
        Arc::new(scripted.clone()),
        Arc::clone(&ledger),
        scope(),
        Some(price),
        512,
    );
    p.complete(request(50), CancellationToken::new())
        .await
        .unwrap();
    let err = p
        .complete(request(50), CancellationToken::new())
        .await
        .unwrap_err();
    assert!(matches!(err, Error::StreamCut { .. }), "{err}");
    // A cancelled call: the provider never answers, and nothing was reported.
    let cancelled = CancellationToken::new();
    cancelled.cancel();
    let err = p.complete(request(50), cancelled).await.unwrap_err();
    assert!(matches!(err, Error::Cancelled), "{err}");

    let records = sink.records();
    assert_eq!(records.len(), 3, "{records:?}");
    assert_eq!(records[0].outcome, CallOutcome::Ok);
    assert!(records[0].reported);
    assert_eq!(records[1].outcome, CallOutcome::Failed);
    assert!(records[1].reported);
    assert_eq!(records[1].usage, cut_usage);
    assert_eq!(records[1].cost_usd, Some(price.cost(40, 7)));
    assert_eq!(records[2].outcome, CallOutcome::Cancelled);
    assert!(!records[2].reported, "estimated, not reported");
    assert_eq!(records[2].usage.completion_tokens, 0);
    // The sink saw exactly what the ledger booked.
    assert_eq!(ledger.take_records(), records);
    let total: u64 = records.iter().map(|r| r.usage.total()).sum();
    assert_eq!(ledger.spent(&Scope::Run).0, total);

    // A refused call is not made, so there is nothing to record.
    let strict_sink = Arc::new(MemoryUsageSink::default());
    let strict = Arc::new(
        BudgetLedger::new(Budget {
            run: limit(10),
            ..Budget::default()
        })
        .with_sink(strict_sink.clone()),
    );
    let p = Budgeted::new(Arc::new(scripted.clone()), strict, scope(), None, 512);
    let err = p
        .complete(request(50), CancellationToken::new())
        .await
        .unwrap_err();
    assert!(matches!(err, Error::Budget(_)), "{err}");
    assert!(strict_sink.records().is_empty());
    assert_eq!(
        scripted.requests().len(),
        3,
        "the refused call was not made"
    );
}

fn persisted(stage: &str, agent: &str, prompt: u64, completion: u64, cost: f64) -> UsageRecord {
    UsageRecord {
        scope: CallScope {
            stage: Some(stage.into()),
            agent: Some(agent.into()),
        },
        profile: "remote".into(),
        model: "m".into(),
        usage: Usage {
            prompt_tokens: prompt,
            completion_tokens: completion,
            cached_prompt_tokens: 0,
        },
        reported: true,
        cost_usd: Some(cost),
        at_ms: 1,
        outcome: CallOutcome::Ok,
    }
}

#[tokio::test]
async fn restored_usage_counts_against_the_budgets_of_a_resumed_run() {
    let mut budget = Budget {
        run: limit(1000),
        ..Budget::default()
    };
    budget.stages.insert("planning".into(), limit(300));
    let before_crash = [
        persisted("planning", "planner", 150, 50, 0.25),
        persisted("coding", "coder", 400, 100, 0.5),
    ];
    let sink = Arc::new(MemoryUsageSink::default());
    let ledger = Arc::new(BudgetLedger::new(budget).with_sink(sink.clone()));
    ledger.restore(&before_crash);
    assert_eq!(ledger.spent(&Scope::Run), (700, 0.75));
    assert_eq!(ledger.spent(&Scope::Stage("planning".into())), (200, 0.25));
    assert_eq!(ledger.spent(&Scope::Agent("coder".into())), (500, 0.5));
    // Restoring neither re-persists nor re-reports the records.
    assert!(sink.records().is_empty());
    assert!(ledger.take_records().is_empty());

    // The planning stage has 100 tokens left: a call projected at ~14 + 150 is refused.
    let scripted = ScriptedProvider::new([Turn::Text("ok".into())]);
    let p = Budgeted::new(
        Arc::new(scripted.clone()),
        Arc::clone(&ledger),
        scope(),
        None,
        512,
    );
    let err = p
        .complete(request(150), CancellationToken::new())
        .await
        .unwrap_err();
    let Error::Budget(exceeded) = err else {
        panic!("expected a budget error, got {err}");
    };
    assert_eq!(exceeded.scope, Scope::Stage("planning".into()));
    assert_eq!(exceeded.used, 200.0);
    // One that fits still goes through, and is persisted.
    p.complete(request(50), CancellationToken::new())
        .await
        .unwrap();
    assert_eq!(sink.records().len(), 1);
    assert_eq!(scripted.requests().len(), 1);
}

/// `calls` counts model requests whatever their size: the third call of a run limited to two
/// is refused before it is made, and a granted call lets one more through.
#[tokio::test]
async fn a_call_limit_counts_requests() {
    let scripted = ScriptedProvider::new([
        Turn::Text("one".into()),
        Turn::Text("two".into()),
        Turn::Text("three".into()),
    ]);
    let budget = Budget {
        run: Limit {
            calls: Some(2),
            ..Limit::default()
        },
        ..Budget::default()
    };
    let ledger = Arc::new(BudgetLedger::new(budget));
    let p = Budgeted::new(
        Arc::new(scripted.clone()),
        Arc::clone(&ledger),
        scope(),
        None,
        512,
    );
    for _ in 0..2 {
        p.complete(request(10), CancellationToken::new())
            .await
            .unwrap();
    }
    let err = p
        .complete(request(10), CancellationToken::new())
        .await
        .unwrap_err();
    let Error::Budget(exceeded) = err else {
        panic!("expected a budget error, got {err}");
    };
    assert_eq!(
        (exceeded.unit, exceeded.limit, exceeded.used),
        (BudgetUnit::Calls, 2.0, 2.0)
    );
    assert_eq!(scripted.requests().len(), 2, "the third call was not made");
    ledger.grant(
        &Scope::Run,
        Limit {
            calls: Some(1),
            ..Limit::default()
        },
    );
    let c = p
        .complete(request(10), CancellationToken::new())
        .await
        .unwrap();
    assert_eq!(c.text, "three");
}
