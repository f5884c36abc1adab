//! Hard budgets in tokens and cost, per run, per stage and per agent.
//!
//! A call is checked *before* it is made against its projection — the prompt tokens
//! counted by the provider plus the `max_tokens` it may generate — and the projection is
//! reserved until the call ends, so concurrent calls cannot overrun a budget together. A
//! call that does not fit is not made: [`Budgeted`] fails it with
//! [`Error::Budget`](crate::Error::Budget) carrying a [`BudgetExceeded`], which the workflow
//! layer turns into a resumable "needs more budget" interrupt; [`BudgetLedger::grant`]
//! raises the limit and the run can continue. Actual usage is recorded per call as a
//! [`UsageRecord`], handed to the ledger's [`UsageSink`] (the store persists it), and
//! [`BudgetLedger::restore`] books persisted records again, so a run resumed after a crash
//! keeps honouring its budgets.

mod limits;

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, MutexGuard};

use futures::StreamExt;
use serde::{Deserialize, Serialize};
use tokio_util::sync::CancellationToken;

use crate::Result;
use crate::provider::{ChatStream, ModelProvider, ProviderInfo, spawn_stream};
use crate::tokens::{TokenCount, estimate_text};
use crate::types::{ChatRequest, StreamEvent, Usage};

pub use limits::{Budget, BudgetExceeded, BudgetUnit, Limit, Price, Scope};

/// Where a call belongs, for budgets and usage records.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CallScope {
    /// The stage (graph node), if any.
    pub stage: Option<String>,
    /// The agent (role), if any.
    pub agent: Option<String>,
}

impl CallScope {
    fn scopes(&self) -> Vec<Scope> {
        let mut v = vec![Scope::Run];
        v.extend(self.stage.clone().map(Scope::Stage));
        v.extend(self.agent.clone().map(Scope::Agent));
        v
    }
}

/// How a booked call ended.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CallOutcome {
    /// The stream finished.
    #[default]
    Ok,
    /// The call failed after it was made (HTTP error, a cut stream, a decode error).
    Failed,
    /// The call was cancelled through its token.
    Cancelled,
}

impl CallOutcome {
    /// `ok`, `failed` or `cancelled`.
    pub fn as_str(self) -> &'static str {
        match self {
            CallOutcome::Ok => "ok",
            CallOutcome::Failed => "failed",
            CallOutcome::Cancelled => "cancelled",
        }
    }

    /// Parses [`CallOutcome::as_str`]'s output.
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "ok" => Some(CallOutcome::Ok),
            "failed" => Some(CallOutcome::Failed),
            "cancelled" => Some(CallOutcome::Cancelled),
            _ => None,
        }
    }
}

/// One call's usage, ready to persist.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct UsageRecord {
    /// Stage and agent.
    pub scope: CallScope,
    /// Profile name.
    pub profile: String,
    /// Model identifier.
    pub model: String,
    /// Tokens used.
    pub usage: Usage,
    /// Whether the provider reported the usage (else it was counted/estimated locally).
    pub reported: bool,
    /// Cost, when the profile has a price.
    pub cost_usd: Option<f64>,
    /// Unix milliseconds at the end of the call.
    pub at_ms: u64,
    /// How the call ended. A failed or cancelled call is booked too: the endpoint may have
    /// processed (and billed) its prompt and whatever it generated before the end.
    #[serde(default)]
    pub outcome: CallOutcome,
}

/// Receives every call's [`UsageRecord`] once, when the call ends (successful, failed or
/// cancelled), to persist it. Called on the call's async task after the ledger booked it:
/// it must not block for long (queue the write).
pub trait UsageSink: Send + Sync {
    /// Records one finished call.
    fn record(&self, record: &UsageRecord);
}

/// Keeps usage records in memory (tests, and runs without a store).
#[derive(Debug, Default)]
pub struct MemoryUsageSink {
    records: Mutex<Vec<UsageRecord>>,
}

impl MemoryUsageSink {
    /// The records so far, in order.
    pub fn records(&self) -> Vec<UsageRecord> {
        self.records
            .lock()
            .map(|r| r.clone())
            .unwrap_or_else(|e| e.into_inner().clone())
    }
}

impl UsageSink for MemoryUsageSink {
    fn record(&self, record: &UsageRecord) {
        self.records
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .push(record.clone());
    }
}

#[derive(Clone, Copy, Debug, Default)]
struct Spend {
    tokens: u64,
    cost: f64,
    calls: u64,
}

#[derive(Default)]
struct LedgerState {
    budget: Budget,
    spent: BTreeMap<Scope, Spend>,
    reserved: BTreeMap<Scope, Spend>,
    records: Vec<UsageRecord>,
}

/// Budgets and what has been spent against them; share one per run (`Arc`).
#[derive(Default)]
pub struct BudgetLedger {
    state: Mutex<LedgerState>,
    sink: Option<Arc<dyn UsageSink>>,
}

/// A reservation held while a call runs.
#[derive(Debug)]
pub struct Reservation {
    scopes: Vec<Scope>,
    spend: Spend,
}

impl BudgetLedger {
    /// A ledger enforcing `budget`.
    pub fn new(budget: Budget) -> Self {
        Self {
            state: Mutex::new(LedgerState {
                budget,
                ..LedgerState::default()
            }),
            sink: None,
        }
    }

    /// Hands every settled call's record to `sink` as well (to persist it).
    pub fn with_sink(mut self, sink: Arc<dyn UsageSink>) -> Self {
        self.sink = Some(sink);
        self
    }

    /// Books previously persisted usage into what has been spent (a run resumed after a
    /// crash or a restart): its budgets then count every call the run made before. The
    /// records are not handed to the sink again nor returned by
    /// [`take_records`](Self::take_records).
    pub fn restore<'a>(&self, records: impl IntoIterator<Item = &'a UsageRecord>) {
        let mut st = self.lock();
        for record in records {
            book(&mut st, &record.scope.scopes(), record);
        }
    }

    fn lock(&self) -> MutexGuard<'_, LedgerState> {
        self.state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Checks a projected call and reserves it if it fits every scope.
    pub fn reserve(
        &self,
        scope: &CallScope,
        tokens: u64,
        cost: f64,
    ) -> Result<Reservation, BudgetExceeded> {
        let mut st = self.lock();
        let scopes = scope.scopes();
        for s in &scopes {
            let limit = match s {
                Scope::Run => Some(st.budget.run),
                Scope::Stage(n) => st.budget.stages.get(n).copied(),
                Scope::Agent(n) => st.budget.agents.get(n).copied(),
            };
            let Some(limit) = limit else { continue };
            let spent = st.spent.get(s).copied().unwrap_or_default();
            let held = st.reserved.get(s).copied().unwrap_or_default();
            if let Some(max) = limit.tokens {
                let used = spent.tokens + held.tokens;
                if used + tokens > max {
                    return Err(BudgetExceeded {
                        scope: s.clone(),
                        unit: BudgetUnit::Tokens,
                        limit: max as f64,
                        used: used as f64,
                        requested: tokens as f64,
                    });
                }
            }
            if let Some(max) = limit.calls {
                let used = spent.calls + held.calls;
                if used + 1 > max {
                    return Err(BudgetExceeded {
                        scope: s.clone(),
                        unit: BudgetUnit::Calls,
                        limit: max as f64,
                        used: used as f64,
                        requested: 1.0,
                    });
                }
            }
            if let Some(max) = limit.cost_usd {
                let used = spent.cost + held.cost;
                if used + cost > max {
                    return Err(BudgetExceeded {
                        scope: s.clone(),
                        unit: BudgetUnit::CostUsd,
                        limit: max,
                        used,
                        requested: cost,
                    });
                }
            }
        }
        let spend = Spend {
            tokens,
            cost,
            calls: 1,
        };
        for s in &scopes {
            let r = st.reserved.entry(s.clone()).or_default();
            r.tokens += tokens;
            r.cost += cost;
            r.calls += 1;
        }
        Ok(Reservation { scopes, spend })
    }

    /// Ends a reservation, books the call's actual usage and hands the record to the sink.
    pub fn settle(&self, reservation: Reservation, record: UsageRecord) {
        {
            let mut st = self.lock();
            for s in &reservation.scopes {
                if let Some(r) = st.reserved.get_mut(s) {
                    r.tokens = r.tokens.saturating_sub(reservation.spend.tokens);
                    r.cost = (r.cost - reservation.spend.cost).max(0.0);
                    r.calls = r.calls.saturating_sub(reservation.spend.calls);
                }
            }
            book(&mut st, &reservation.scopes, &record);
            st.records.push(record.clone());
        }
        // Outside the lock: a sink may take its time queueing the write.
        if let Some(sink) = &self.sink {
            sink.record(&record);
        }
    }

    /// Raises a scope's limit by `extra` (what a user grants to resume a run).
    pub fn grant(&self, scope: &Scope, extra: Limit) {
        let mut st = self.lock();
        let limit = match scope {
            Scope::Run => &mut st.budget.run,
            Scope::Stage(n) => st.budget.stages.entry(n.clone()).or_default(),
            Scope::Agent(n) => st.budget.agents.entry(n.clone()).or_default(),
        };
        if let (Some(t), Some(e)) = (&mut limit.tokens, extra.tokens) {
            *t += e;
        }
        if let (Some(c), Some(e)) = (&mut limit.cost_usd, extra.cost_usd) {
            *c += e;
        }
        if let (Some(c), Some(e)) = (&mut limit.calls, extra.calls) {
            *c += e;
        }
    }

    /// Tokens and cost spent in `scope` so far.
    pub fn spent(&self, scope: &Scope) -> (u64, f64) {
        let s = self.lock().spent.get(scope).copied().unwrap_or_default();
        (s.tokens, s.cost)
    }

    /// Takes the usage records booked since the last call, for persisting.
    pub fn take_records(&self) -> Vec<UsageRecord> {
        std::mem::take(&mut self.lock().records)
    }
}

/// Adds a call's usage to what `scopes` have spent.
fn book(st: &mut LedgerState, scopes: &[Scope], record: &UsageRecord) {
    let cost = record.cost_usd.unwrap_or(0.0);
    for s in scopes {
        let sp = st.spent.entry(s.clone()).or_default();
        sp.tokens += record.usage.total();
        sp.cost += cost;
        sp.calls += 1;
    }
}

/// A provider whose calls are checked against a ledger and booked to it.
pub struct Budgeted {
    inner: Arc<dyn ModelProvider>,
    ledger: Arc<BudgetLedger>,
    scope: CallScope,
    price: Option<Price>,
    default_max_tokens: u32,
}

impl Budgeted {
    /// Wraps `inner`. `default_max_tokens` is the projected output of a request that does
    /// not set `max_tokens` (use the profile's `max_tokens`).
    pub fn new(
        inner: Arc<dyn ModelProvider>,
        ledger: Arc<BudgetLedger>,
        scope: CallScope,
        price: Option<Price>,
        default_max_tokens: u32,
    ) -> Self {
        Self {
            inner,
            ledger,
            scope,
            price,
            default_max_tokens,
        }
    }
}

fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

impl ModelProvider for Budgeted {
    fn info(&self) -> &ProviderInfo {
        self.inner.info()
    }

    fn prepare(&self) -> futures::future::BoxFuture<'_, Result<()>> {
        self.inner.prepare()
    }

    fn context_window(
        &self,
    ) -> futures::future::BoxFuture<'_, Option<crate::window::ContextWindow>> {
        self.inner.context_window()
    }

    fn count_tokens(&self, request: &ChatRequest) -> Result<TokenCount> {
        self.inner.count_tokens(request)
    }

    fn stream(&self, request: ChatRequest, cancel: CancellationToken) -> ChatStream {
        let inner = Arc::clone(&self.inner);
        let ledger = Arc::clone(&self.ledger);
        let scope = self.scope.clone();
        let price = self.price;
        let max_out = u64::from(request.max_tokens.unwrap_or(self.default_max_tokens));
        spawn_stream(&self.inner.info().profile, move |tx| async move {
            inner.prepare().await?;
            let prompt = inner.count_tokens(&request)?.tokens;
            let projected_cost = price.map_or(0.0, |p| p.cost(prompt, max_out));
            let reservation = ledger.reserve(&scope, prompt + max_out, projected_cost)?;
            let mut stream = inner.stream(request, cancel);
            let mut usage = None;
            let mut generated = String::new();
            let mut outcome = Ok(());
            while let Some(item) = stream.next().await {
                match item {
                    Ok(event) => {
                        match &event {
                            StreamEvent::Usage { usage: u } => usage = Some(*u),
                            StreamEvent::TextDelta { text }
                            | StreamEvent::ThinkingDelta { text } => generated.push_str(text),
                            StreamEvent::ToolCallDelta { arguments, .. } => {
                                generated.push_str(arguments);
                            }
                            _ => {}
                        }
                        if tx.send(Ok(event)).await.is_err() {
                            // The caller dropped the stream: the call was abandoned.
                            outcome = Err(crate::Error::Cancelled);
                            break;
                        }
                    }
                    Err(e) => {
                        outcome = Err(e);
                        break;
                    }
                }
            }
            let info = inner.info();
            let reported = usage.is_some();
            let usage = usage.unwrap_or(Usage {
                prompt_tokens: prompt,
                completion_tokens: estimate_text(&generated),
                cached_prompt_tokens: 0,
            });
            let record = UsageRecord {
                scope,
                profile: info.profile.clone(),
                model: info.model.clone(),
                usage,
                reported,
                cost_usd: price.map(|p| p.cost(usage.prompt_tokens, usage.completion_tokens)),
                at_ms: now_ms(),
                outcome: match &outcome {
                    Ok(()) => CallOutcome::Ok,
                    Err(crate::Error::Cancelled) => CallOutcome::Cancelled,
                    Err(_) => CallOutcome::Failed,
                },
            };
            ledger.settle(reservation, record);
            outcome
        })
    }
}
