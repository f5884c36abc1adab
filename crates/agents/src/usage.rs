//! Model usage of a run, persisted: the store-backed [`UsageSink`] of a run's budget ledger,
//! and the ledger of a resumed run, re-booked from what the store recorded before.
//!
//! This adapter lives here rather than in `trellis-llm` or `trellis-store` so that neither
//! of those depends on the other: the agents layer is the first that sees both.

use std::sync::Arc;

use trellis_llm::{Budget, BudgetLedger, CallOutcome, CallScope, Usage, UsageRecord, UsageSink};
use trellis_protocol::RunId;
use trellis_store::{ModelCallRecord, UsageStore};

/// Persists every call of one run into the store's `model_calls` table (queued; the
/// store's writer group-commits it, [`trellis_store::Backend::flush`] waits for it).
pub struct StoreUsageSink {
    store: Arc<dyn UsageStore>,
    run: RunId,
}

impl StoreUsageSink {
    /// A sink recording `run`'s calls into `store`.
    pub fn new(store: Arc<dyn UsageStore>, run: RunId) -> Self {
        Self { store, run }
    }
}

impl UsageSink for StoreUsageSink {
    fn record(&self, record: &UsageRecord) {
        self.store
            .record_model_call_nowait(model_call_row(Some(&self.run), record));
    }
}

/// The ledger of `run`: enforcing `budget`, persisting every call into `store`, and with
/// the usage the store already holds for the run (a resumed run) booked as spent.
pub fn run_ledger(
    store: Arc<dyn UsageStore>,
    run: &RunId,
    budget: Budget,
) -> trellis_store::Result<Arc<BudgetLedger>> {
    let earlier: Vec<UsageRecord> = store.model_calls(run)?.iter().map(usage_record).collect();
    let ledger =
        BudgetLedger::new(budget).with_sink(Arc::new(StoreUsageSink::new(store, run.clone())));
    ledger.restore(&earlier);
    Ok(Arc::new(ledger))
}

/// The store row of a call.
pub fn model_call_row(run: Option<&RunId>, r: &UsageRecord) -> ModelCallRecord {
    ModelCallRecord {
        id: 0,
        run_id: run.cloned(),
        stage: r.scope.stage.clone(),
        agent: r.scope.agent.clone(),
        profile: r.profile.clone(),
        model: r.model.clone(),
        prompt_tokens: r.usage.prompt_tokens,
        completion_tokens: r.usage.completion_tokens,
        cached_tokens: r.usage.cached_prompt_tokens,
        reported: r.reported,
        cost_usd: r.cost_usd,
        outcome: r.outcome.as_str().to_owned(),
        at: i64::try_from(r.at_ms).unwrap_or(i64::MAX),
    }
}

/// The usage record of a store row (an unknown outcome reads as failed).
pub fn usage_record(row: &ModelCallRecord) -> UsageRecord {
    UsageRecord {
        scope: CallScope {
            stage: row.stage.clone(),
            agent: row.agent.clone(),
        },
        profile: row.profile.clone(),
        model: row.model.clone(),
        usage: Usage {
            prompt_tokens: row.prompt_tokens,
            completion_tokens: row.completion_tokens,
            cached_prompt_tokens: row.cached_tokens,
        },
        reported: row.reported,
        cost_usd: row.cost_usd,
        at_ms: u64::try_from(row.at).unwrap_or(0),
        outcome: CallOutcome::parse(&row.outcome).unwrap_or(CallOutcome::Failed),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use tokio_util::sync::CancellationToken;
    use trellis_llm::{Budgeted, ChatRequest, Limit, Message, ModelProvider, Price, Scope};
    use trellis_store::{Store, StoreOptions};
    use trellis_test_support::scripted::{ScriptedProvider, Turn};

    use super::*;

    fn request() -> ChatRequest {
        ChatRequest {
            max_tokens: Some(40),
            ..ChatRequest::new(vec![Message::user("List the crates.")])
        }
    }

    #[tokio::test]
    async fn calls_are_persisted_and_a_resumed_run_keeps_its_spend() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open_workspace(dir.path(), StoreOptions::default()).unwrap();
        let run = RunId::from_string("run-usage");
        let scope = CallScope {
            stage: Some("plan".into()),
            agent: Some("planner".into()),
        };
        let price = Price {
            input_per_mtok: 1.0,
            output_per_mtok: 4.0,
        };
        let budget = Budget {
            run: Limit {
                tokens: Some(200),
                cost_usd: None,
                calls: None,
            },
            ..Budget::default()
        };
        let ledger = run_ledger(store.clone(), &run, budget.clone()).unwrap();
        let scripted = ScriptedProvider::new([
            Turn::Text("trellis-llm and trellis-store".into()),
            Turn::Text("again".into()),
        ]);
        let provider = Budgeted::new(
            Arc::new(scripted.clone()),
            Arc::clone(&ledger),
            scope.clone(),
            Some(price),
            64,
        );
        provider
            .complete(request(), CancellationToken::new())
            .await
            .unwrap();
        store.flush().unwrap();
        let rows = store.model_calls(&run).unwrap();
        assert_eq!(rows.len(), 1);
        let booked = ledger.take_records();
        assert_eq!(
            rows[0],
            ModelCallRecord {
                id: rows[0].id,
                ..model_call_row(Some(&run), &booked[0])
            }
        );
        assert_eq!(usage_record(&rows[0]), booked[0]);
        let spent = ledger.spent(&Scope::Run);
        assert!(spent.0 > 0);

        // "Crash": a new ledger for the same run starts from what the store holds.
        drop((provider, ledger));
        let resumed = run_ledger(store.clone(), &run, budget).unwrap();
        assert_eq!(resumed.spent(&Scope::Run), spent);
        assert_eq!(resumed.spent(&Scope::Agent("planner".into())), spent);
        // 200 - spent tokens left: a call projected over it is refused, and not persisted.
        let provider = Budgeted::new(Arc::new(scripted.clone()), resumed, scope, None, 64);
        let big = ChatRequest {
            max_tokens: Some(u32::try_from(200 - spent.0).unwrap()),
            ..request()
        };
        let err = provider
            .complete(big, CancellationToken::new())
            .await
            .unwrap_err();
        assert!(matches!(err, trellis_llm::Error::Budget(_)), "{err}");
        store.flush().unwrap();
        assert_eq!(store.model_calls(&run).unwrap().len(), 1);
        assert_eq!(scripted.requests().len(), 1);
    }
}
