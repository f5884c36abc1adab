//! Budget interrupts: a model call the budget refused stops the activation with a question;
//! the answer grants more budget or ends the stage.

use serde_json::{Value, json};
use trellis_llm::{BudgetExceeded, Limit};
use trellis_protocol::{Answer, Interrupt, InterruptKind};

use super::{AgentOutcome, AgentReport, AgentRun, Saved, Waiting};
use crate::output::StageReport;

/// How much a "yes" to a budget interrupt grants: what the refused call needed plus half of
/// the original limit, so the run does not stop again at the very next call.
fn default_grant(e: &BudgetExceeded) -> f64 {
    e.requested + e.limit / 2.0
}

impl AgentRun {
    /// Books the budget the user granted after a budget interrupt.
    pub(super) fn grant(&self, st: &mut Saved, exceeded: &BudgetExceeded, answer: &Answer) {
        let extra = grant_of(answer).unwrap_or_else(|| default_grant(exceeded));
        if let Some(ledger) = &self.ledger {
            let limit = match exceeded.unit {
                trellis_llm::budget::BudgetUnit::Tokens => Limit {
                    tokens: Some(extra.ceil() as u64),
                    ..Limit::default()
                },
                trellis_llm::budget::BudgetUnit::CostUsd => Limit {
                    cost_usd: Some(extra),
                    ..Limit::default()
                },
                trellis_llm::budget::BudgetUnit::Calls => Limit {
                    calls: Some(extra.ceil() as u64),
                    ..Limit::default()
                },
            };
            ledger.grant(&exceeded.scope, limit);
            self.note(st, format!("{} granted {extra:.0} more", exceeded.scope));
        }
    }

    pub(super) fn budget_interrupt(&self, mut st: Saved, exceeded: BudgetExceeded) -> AgentOutcome {
        let interrupt = Interrupt {
            kind: InterruptKind::Approval,
            prompt: format!(
                "{}: {exceeded}. Grant {:.0} more (yes), a specific amount ({{\"grant\": N}}), or stop this stage (no)?",
                self.node,
                default_grant(&exceeded)
            ),
            data: json!({ "budget": exceeded }),
        };
        st.waiting = Waiting::Budget { exceeded };
        AgentOutcome::Interrupted {
            interrupt,
            scratch: serde_json::to_value(&st).unwrap_or(Value::Null),
        }
    }

    pub(super) fn budget_refused(&self, st: &Saved, exceeded: &BudgetExceeded) -> AgentReport {
        AgentReport {
            report: StageReport {
                failure: true,
                output: format!("stopped: {exceeded}; the user did not grant more budget"),
                ..StageReport::default()
            },
            turns: st.turns,
            tool_calls: st.tool_calls,
            usage: st.usage,
            notes: vec!["budget refused".into()],
        }
    }
}

/// An explicit grant in an answer: `{"grant": N}` or a bare number.
pub(super) fn grant_of(answer: &Answer) -> Option<f64> {
    match &answer.0 {
        Value::Number(n) => n.as_f64(),
        Value::Object(m) => m.get("grant").and_then(Value::as_f64),
        Value::String(s) => s.trim().parse().ok(),
        _ => None,
    }
    .filter(|g| *g > 0.0)
}
