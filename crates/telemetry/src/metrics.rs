//! Counters of what the runs of a process did, kept from the same events as the spans, and
//! written in the Prometheus text exposition format (`trellis serve`'s `/metrics`).
//!
//! | metric | type | labels |
//! |---|---|---|
//! | `trellis_runs_total` | counter | `outcome` (`succeeded`, `failed`, `cancelled`) |
//! | `trellis_runs_active` | gauge | `status` (`running`, `waiting_input`) |
//! | `trellis_model_calls_total` | counter | `role`, `outcome` (`ok`, `failed`) |
//! | `trellis_gen_ai_tokens_total` | counter | `role`, `type` (`input`, `output`) |
//! | `trellis_tool_calls_total` | counter | `tool`, `status` (`ok`, `error`, `denied`, …) |
//!
//! Events tell a turn's role (its session's owner) but not its model or cost, which the
//! usage records hold (`trellis runs usage`); the counters start at zero with the process.

use std::collections::{BTreeMap, HashMap};
use std::fmt::Write;
use std::sync::{Mutex, PoisonError};

use trellis_protocol::{
    EventKind, RunId, RunStatus, ServiceEvent, ServiceEventBody, SessionEvent, SessionId,
    SessionOwner, StreamId, ToolStatus,
};

/// The counters (cheap to update; one lock per event).
#[derive(Debug, Default)]
pub struct Metrics {
    inner: Mutex<Counters>,
}

#[derive(Debug, Default)]
struct Counters {
    runs: BTreeMap<&'static str, u64>,
    active: HashMap<RunId, RunStatus>,
    calls: BTreeMap<(String, &'static str), u64>,
    tokens: BTreeMap<(String, &'static str), u64>,
    tools: BTreeMap<(String, &'static str), u64>,
    roles: HashMap<SessionId, String>,
}

impl Metrics {
    /// Counts `ev`.
    pub fn observe(&self, ev: &ServiceEvent) {
        let mut c = self.inner.lock().unwrap_or_else(PoisonError::into_inner);
        match (&ev.stream, &ev.event) {
            (StreamId::Run(run), ServiceEventBody::Run(kind)) => c.run_event(run, kind),
            (StreamId::Session(id), ServiceEventBody::Session(e)) => c.session_event(id, e),
            _ => {}
        }
    }

    /// The counters in the Prometheus text format (version 0.0.4).
    pub fn prometheus(&self) -> String {
        let c = self.inner.lock().unwrap_or_else(PoisonError::into_inner);
        let mut out = String::new();
        family(
            &mut out,
            "trellis_runs_total",
            "counter",
            "Runs that ended, by outcome.",
        );
        for (outcome, n) in &c.runs {
            let _ = writeln!(out, "trellis_runs_total{{outcome=\"{outcome}\"}} {n}");
        }
        family(
            &mut out,
            "trellis_runs_active",
            "gauge",
            "Runs seen running or waiting for input, not ended.",
        );
        for status in [RunStatus::Running, RunStatus::WaitingInput] {
            let n = c.active.values().filter(|s| **s == status).count();
            let label = if status == RunStatus::Running {
                "running"
            } else {
                "waiting_input"
            };
            let _ = writeln!(out, "trellis_runs_active{{status=\"{label}\"}} {n}");
        }
        family(
            &mut out,
            "trellis_model_calls_total",
            "counter",
            "Model calls (turns), by agent role and outcome.",
        );
        for ((role, outcome), n) in &c.calls {
            let _ = writeln!(
                out,
                "trellis_model_calls_total{{role=\"{}\",outcome=\"{outcome}\"}} {n}",
                escape(role)
            );
        }
        family(
            &mut out,
            "trellis_gen_ai_tokens_total",
            "counter",
            "Tokens of completed model calls, by agent role and type.",
        );
        for ((role, kind), n) in &c.tokens {
            let _ = writeln!(
                out,
                "trellis_gen_ai_tokens_total{{role=\"{}\",type=\"{kind}\"}} {n}",
                escape(role)
            );
        }
        family(
            &mut out,
            "trellis_tool_calls_total",
            "counter",
            "Tool calls, by tool and how they ended.",
        );
        for ((tool, status), n) in &c.tools {
            let _ = writeln!(
                out,
                "trellis_tool_calls_total{{tool=\"{}\",status=\"{status}\"}} {n}",
                escape(tool)
            );
        }
        out
    }
}

impl Counters {
    fn run_event(&mut self, run: &RunId, kind: &EventKind) {
        match kind {
            EventKind::RunStarted { .. } | EventKind::RunResumed { .. } => {
                self.active.insert(run.clone(), RunStatus::Running);
            }
            EventKind::RunStatusChanged { status, .. } if status.is_final() => {
                self.active.remove(run);
                *self.runs.entry(status.as_str()).or_default() += 1;
                // The run's sessions will say no more.
                let prefix = format!("{run}:");
                self.roles.retain(|id, _| !id.as_str().starts_with(&prefix));
            }
            EventKind::RunStatusChanged { status, .. } => {
                self.active.insert(run.clone(), *status);
            }
            _ => {}
        }
    }

    fn role(&self, id: &SessionId) -> String {
        self.roles.get(id).cloned().unwrap_or_else(|| {
            if id.as_str().contains(':') {
                "agent"
            } else {
                "channel"
            }
            .to_owned()
        })
    }

    fn session_event(&mut self, id: &SessionId, e: &SessionEvent) {
        match e {
            SessionEvent::SessionStarted { owner } => {
                let role = match owner {
                    SessionOwner::Agent { role, .. } => role.clone(),
                    SessionOwner::Channel { .. } => "channel".to_owned(),
                };
                self.roles.insert(id.clone(), role);
            }
            SessionEvent::TurnCompleted { usage, .. } => {
                let role = self.role(id);
                *self.calls.entry((role.clone(), "ok")).or_default() += 1;
                *self.tokens.entry((role.clone(), "input")).or_default() += usage.prompt_tokens;
                *self.tokens.entry((role, "output")).or_default() += usage.completion_tokens;
            }
            SessionEvent::TurnFailed { .. } => {
                let role = self.role(id);
                *self.calls.entry((role, "failed")).or_default() += 1;
            }
            SessionEvent::ToolCompleted { name, status, .. } => {
                *self
                    .tools
                    .entry((name.clone(), status_name(*status)))
                    .or_default() += 1;
            }
            _ => {}
        }
    }
}

fn status_name(s: ToolStatus) -> &'static str {
    s.as_str()
}

fn family(out: &mut String, name: &str, kind: &str, help: &str) {
    let _ = writeln!(out, "# HELP {name} {help}");
    let _ = writeln!(out, "# TYPE {name} {kind}");
}

/// A label value with `\`, `"` and line breaks escaped.
fn escape(v: &str) -> String {
    v.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}
