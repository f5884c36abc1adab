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
//! | `trellis_worker_events_total` | counter | `event` (`resumed`, `parked`, `handed_back`, `lease_lost`, `error`) |
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
    worker: BTreeMap<&'static str, u64>,
}

impl Metrics {
    /// Counts `ev`.
    pub fn observe(&self, ev: &ServiceEvent) {
        self.observe_all([ev]);
    }

    /// Counts `events`, under one lock.
    pub fn observe_all<'a>(&self, events: impl IntoIterator<Item = &'a ServiceEvent>) {
        let mut c = self.inner.lock().unwrap_or_else(PoisonError::into_inner);
        for ev in events {
            match (&ev.stream, &ev.event) {
                (StreamId::Run(run), ServiceEventBody::Run(kind)) => c.run_event(run, kind),
                (StreamId::Session(id), ServiceEventBody::Session(e)) => c.session_event(id, e),
                _ => {}
            }
        }
    }

    /// Counts a team-scale worker's event (`trellis worker`): `resumed` (it claimed a run and
    /// resumed it), `parked`, `handed_back`, `lease_lost` (another worker took a run's lease
    /// over: this one had been cut off), `error`.
    pub fn worker_event(&self, event: &'static str) {
        let mut c = self.inner.lock().unwrap_or_else(PoisonError::into_inner);
        *c.worker.entry(event).or_default() += 1;
    }

    /// Every metric now, in a fixed order.
    pub fn families(&self) -> Vec<Family> {
        let c = self.inner.lock().unwrap_or_else(PoisonError::into_inner);
        let labelled = |pairs: &[(&'static str, &str)], value: u64| Point {
            labels: pairs.iter().map(|(k, v)| (*k, (*v).to_owned())).collect(),
            value,
        };
        let active = [
            (RunStatus::Running, "running"),
            (RunStatus::WaitingInput, "waiting_input"),
        ]
        .map(|(status, label)| {
            let n = c.active.values().filter(|s| **s == status).count() as u64;
            labelled(&[("status", label)], n)
        });
        vec![
            Family {
                name: "trellis.runs",
                unit: "{run}",
                kind: Kind::Counter,
                help: "Runs that ended, by outcome.",
                points: c
                    .runs
                    .iter()
                    .map(|(outcome, n)| labelled(&[("outcome", outcome)], *n))
                    .collect(),
            },
            Family {
                name: "trellis.runs.active",
                unit: "{run}",
                kind: Kind::Gauge,
                help: "Runs seen running or waiting for input, not ended.",
                points: active.into(),
            },
            Family {
                name: "trellis.model_calls",
                unit: "{call}",
                kind: Kind::Counter,
                help: "Model calls (turns), by agent role and outcome.",
                points: c
                    .calls
                    .iter()
                    .map(|((role, outcome), n)| {
                        labelled(&[("role", role), ("outcome", outcome)], *n)
                    })
                    .collect(),
            },
            Family {
                name: "trellis.gen_ai.tokens",
                unit: "{token}",
                kind: Kind::Counter,
                help: "Tokens of completed model calls, by agent role and type.",
                points: c
                    .tokens
                    .iter()
                    .map(|((role, kind), n)| labelled(&[("role", role), ("type", kind)], *n))
                    .collect(),
            },
            Family {
                name: "trellis.tool_calls",
                unit: "{call}",
                kind: Kind::Counter,
                help: "Tool calls, by tool and how they ended.",
                points: c
                    .tools
                    .iter()
                    .map(|((tool, status), n)| labelled(&[("tool", tool), ("status", status)], *n))
                    .collect(),
            },
            Family {
                name: "trellis.worker.events",
                kind: Kind::Counter,
                help: "What a team-scale worker did with runs: resumed, parked, handed_back, lease_lost (taken over by another worker), error.",
                unit: "{event}",
                points: c
                    .worker
                    .iter()
                    .map(|(event, n)| labelled(&[("event", event)], *n))
                    .collect(),
            },
        ]
    }

    /// The counters in the Prometheus text format (version 0.0.4).
    pub fn prometheus(&self) -> String {
        let mut out = String::new();
        for family in self.families() {
            let name = family.prometheus_name();
            let kind = match family.kind {
                Kind::Counter => "counter",
                Kind::Gauge => "gauge",
            };
            let _ = writeln!(out, "# HELP {name} {}", family.help);
            let _ = writeln!(out, "# TYPE {name} {kind}");
            for point in &family.points {
                let labels: Vec<String> = point
                    .labels
                    .iter()
                    .map(|(k, v)| format!("{k}=\"{}\"", escape(v)))
                    .collect();
                let _ = writeln!(out, "{name}{{{}}} {}", labels.join(","), point.value);
            }
        }
        out
    }
}

/// One metric: its points by label set.
#[derive(Clone, Debug, PartialEq)]
pub struct Family {
    /// The OpenTelemetry name (`trellis.runs`); Prometheus's is [`Family::prometheus_name`].
    pub name: &'static str,
    /// Counter or gauge.
    pub kind: Kind,
    /// What it counts.
    pub help: &'static str,
    /// The unit (UCUM, as OTLP writes it: `{run}`, `{token}`).
    pub unit: &'static str,
    /// The value of each label set seen.
    pub points: Vec<Point>,
}

impl Family {
    /// The Prometheus name: dots as underscores, counters ending in `_total`.
    pub fn prometheus_name(&self) -> String {
        let base = self.name.replace('.', "_");
        match self.kind {
            Kind::Counter => format!("{base}_total"),
            Kind::Gauge => base,
        }
    }
}

/// A metric's kind.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// Only goes up (an OTLP monotonic cumulative sum).
    Counter,
    /// A value now.
    Gauge,
}

/// A value under one set of labels.
#[derive(Clone, Debug, PartialEq)]
pub struct Point {
    /// `(label, value)` pairs.
    pub labels: Vec<(&'static str, String)>,
    /// The value.
    pub value: u64,
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

/// A label value with `\`, `"` and line breaks escaped.
fn escape(v: &str) -> String {
    v.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}
