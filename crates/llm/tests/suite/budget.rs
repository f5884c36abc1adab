use std::sync::Arc;

use tokio_util::sync::CancellationToken;
use trellis_llm::budget::BudgetUnit;
use trellis_llm::{
    Budget, BudgetLedger, Budgeted, CallScope, ChatRequest, Error, Limit, Message, ModelProvider,
    Price, Scope,
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
