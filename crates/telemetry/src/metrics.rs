//! Counters of what the runs of a process did, kept from the same events as the spans, and
//! written in the Prometheus text exposition format (`trellis serve`'s `/metrics`).
//!
//! | metric | type | labels |
//! |---|---|---|
//! | `trellis_runs_total` | counter | `outcome` (`succeeded`, `failed`, `cancelled`) |
//! | `trellis_runs_active` | gauge | `status` (`running`, `waiting_input`) |
//! | `trellis_model_calls_total` | counter | `role`, `outcome` (`ok`, `failed`) |
//! | `trellis_gen_ai_tokens_total` | counter | `role`, `model`, `type` (`input`, `output`) |
//! | `trellis_gen_ai_cost_usd_total` | counter | `role`, `model` (models with a price) |
//! | `trellis_tool_calls_total` | counter | `tool`, `status` (`ok`, `error`, `denied`, …) |
//! | `trellis_worker_events_total` | counter | `event` (`resumed`, `took_over`, `parked`, `handed_back`, `lease_lost`, `error`) |
//! | `trellis_worker_queue` | gauge | — (runnable runs no worker holds, as this worker last saw them) |
//!
//! Events tell a turn's role (its session's owner) and model (`turnStarted`; `unknown` in
//! events recorded before turns named it). Its cost is its tokens at the model's price
//! ([`Metrics::set_prices`]: the model profiles' `price`), as the usage records book
//! it; a model without a price has no cost series. The counters start at zero with the
//! process.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::fmt::Write;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

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
    /// By role, model and type.
    tokens: BTreeMap<(String, String, &'static str), u64>,
    /// US dollars by role and model.
    cost: BTreeMap<(String, String), f64>,
    tools: BTreeMap<(String, &'static str), u64>,
    roles: HashMap<SessionId, String>,
    /// The model of each session's latest turn.
    models: HashMap<SessionId, String>,
    /// Runs that ended, oldest first, whose sessions' roles and models are still kept.
    ended: VecDeque<RunId>,
    prices: HashMap<String, Pricing>,
    worker: BTreeMap<&'static str, u64>,
    /// Runnable runs no worker holds, when a worker sampled them.
    queue: Option<u64>,
}

/// Counts events under the metrics' lock ([`Metrics::observer`]).
pub struct Observer<'a>(MutexGuard<'a, Counters>);

impl Observer<'_> {
    /// Counts `ev`.
    pub fn observe(&mut self, ev: &ServiceEvent) {
        match (&ev.stream, &ev.event) {
            (StreamId::Run(run), ServiceEventBody::Run(kind)) => self.0.run_event(run, kind),
            (StreamId::Session(id), ServiceEventBody::Session(e)) => self.0.session_event(id, e),
            _ => {}
        }
    }
}

/// What a model's tokens cost: US dollars for `(prompt, completion)` tokens — its model
/// profile's price (`trellis_llm::Price::cost`, as the usage records book a call).
#[derive(Clone)]
pub struct Pricing(Arc<dyn Fn(u64, u64) -> f64 + Send + Sync>);

impl Pricing {
    /// The pricing `cost` computes.
    pub fn new(cost: impl Fn(u64, u64) -> f64 + Send + Sync + 'static) -> Self {
        Self(Arc::new(cost))
    }

    fn cost(&self, prompt: u64, completion: u64) -> f64 {
        (self.0)(prompt, completion)
    }
}

impl std::fmt::Debug for Pricing {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Pricing")
    }
}

/// How many ended runs' sessions keep their roles and models: a session's last events (its
/// last turn's completion) may be published after its run's end, since a session is a
/// stream of its own, recorded apart from the run's graph log.
const KEEP_ENDED: usize = 16;

/// The label of a turn whose model its events do not name.
const UNKNOWN_MODEL: &str = "unknown";

impl Metrics {
    /// Counts `ev`.
    pub fn observe(&self, ev: &ServiceEvent) {
        self.observe_all([ev]);
    }

    /// Counts `events`, under one lock.
    pub fn observe_all<'a>(&self, events: impl IntoIterator<Item = &'a ServiceEvent>) {
        let mut observer = self.observer();
        for ev in events {
            observer.observe(ev);
        }
    }

    /// Counts events one by one under one lock, held until the observer is dropped (the
    /// live pipeline's bursts).
    pub fn observer(&self) -> Observer<'_> {
        Observer(self.inner.lock().unwrap_or_else(PoisonError::into_inner))
    }

    /// Prices the tokens of `prices`' models from now on (by model name; the cost of other
    /// models is not counted).
    pub fn set_prices(&self, prices: impl IntoIterator<Item = (String, Pricing)>) {
        let mut c = self.inner.lock().unwrap_or_else(PoisonError::into_inner);
        c.prices.extend(prices);
    }

    /// Counts a team-scale worker's event (`trellis worker`): `resumed` (it claimed a run and
    /// resumed it), `took_over` (its claim took over another worker's expired lease),
    /// `parked`, `handed_back`, `lease_lost` (another worker took a run's lease over: this
    /// one had been cut off), `error`.
    pub fn worker_event(&self, event: &'static str) {
        let mut c = self.inner.lock().unwrap_or_else(PoisonError::into_inner);
        *c.worker.entry(event).or_default() += 1;
    }

    /// Sets the worker's queue depth: the runnable runs no worker holds, as the worker saw
    /// them when it last looked for work.
    pub fn worker_queue(&self, runnable: u64) {
        let mut c = self.inner.lock().unwrap_or_else(PoisonError::into_inner);
        c.queue = Some(runnable);
    }

    /// Every metric now, in a fixed order.
    pub fn families(&self) -> Vec<Family> {
        let c = self.inner.lock().unwrap_or_else(PoisonError::into_inner);
        let mut out = c.run_families();
        out.extend(c.call_families());
        out.extend(c.worker_families());
        out
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
                if labels.is_empty() {
                    let _ = writeln!(out, "{name} {}", point.value);
                } else {
                    let _ = writeln!(out, "{name}{{{}}} {}", labels.join(","), point.value);
                }
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
    pub value: Number,
}

/// A point's value: a count, or an amount (US dollars).
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Number {
    /// A count.
    Int(u64),
    /// An amount.
    Float(f64),
}

impl From<u64> for Number {
    fn from(n: u64) -> Self {
        Self::Int(n)
    }
}

impl From<f64> for Number {
    fn from(x: f64) -> Self {
        Self::Float(x)
    }
}

impl std::fmt::Display for Number {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Int(n) => write!(f, "{n}"),
            Self::Float(x) => write!(f, "{x}"),
        }
    }
}

/// A point under `pairs`.
fn labelled(pairs: &[(&'static str, &str)], value: impl Into<Number>) -> Point {
    Point {
        labels: pairs.iter().map(|(k, v)| (*k, (*v).to_owned())).collect(),
        value: value.into(),
    }
}

impl Counters {
    /// `trellis.runs`, `trellis.runs.active`.
    fn run_families(&self) -> Vec<Family> {
        let active = [
            (RunStatus::Running, "running"),
            (RunStatus::WaitingInput, "waiting_input"),
        ]
        .map(|(status, label)| {
            let n = self.active.values().filter(|s| **s == status).count() as u64;
            labelled(&[("status", label)], n)
        });
        vec![
            Family {
                name: "trellis.runs",
                unit: "{run}",
                kind: Kind::Counter,
                help: "Runs that ended, by outcome.",
                points: self
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
        ]
    }

    /// `trellis.model_calls`, `trellis.gen_ai.tokens`, `trellis.gen_ai.cost_usd`,
    /// `trellis.tool_calls`.
    fn call_families(&self) -> Vec<Family> {
        vec![
            Family {
                name: "trellis.model_calls",
                unit: "{call}",
                kind: Kind::Counter,
                help: "Model calls (turns), by agent role and outcome.",
                points: self
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
                help: "Tokens of completed model calls, by agent role, model and type.",
                points: self
                    .tokens
                    .iter()
                    .map(|((role, model, kind), n)| {
                        labelled(&[("role", role), ("model", model), ("type", kind)], *n)
                    })
                    .collect(),
            },
            Family {
                name: "trellis.gen_ai.cost_usd",
                unit: "USD",
                kind: Kind::Counter,
                help: "Cost of completed model calls in US dollars, by agent role and model (models with a price).",
                points: self
                    .cost
                    .iter()
                    .map(|((role, model), usd)| labelled(&[("role", role), ("model", model)], *usd))
                    .collect(),
            },
            Family {
                name: "trellis.tool_calls",
                unit: "{call}",
                kind: Kind::Counter,
                help: "Tool calls, by tool and how they ended.",
                points: self
                    .tools
                    .iter()
                    .map(|((tool, status), n)| labelled(&[("tool", tool), ("status", status)], *n))
                    .collect(),
            },
        ]
    }

    /// `trellis.worker.events`, `trellis.worker.queue`.
    fn worker_families(&self) -> Vec<Family> {
        vec![
            Family {
                name: "trellis.worker.events",
                kind: Kind::Counter,
                help: "What a team-scale worker did with runs: resumed, took_over (another worker's expired lease), parked, handed_back, lease_lost (taken over by another worker), error.",
                unit: "{event}",
                points: self
                    .worker
                    .iter()
                    .map(|(event, n)| labelled(&[("event", event)], *n))
                    .collect(),
            },
            Family {
                name: "trellis.worker.queue",
                kind: Kind::Gauge,
                help: "Runnable runs no worker holds, as this worker saw them when it last looked for work.",
                unit: "{run}",
                points: self.queue.map(|n| labelled(&[], n)).into_iter().collect(),
            },
        ]
    }

    fn run_event(&mut self, run: &RunId, kind: &EventKind) {
        match kind {
            EventKind::RunStarted { .. } | EventKind::RunResumed { .. } => {
                self.active.insert(run.clone(), RunStatus::Running);
            }
            EventKind::RunStatusChanged { status, .. } if status.is_final() => {
                self.active.remove(run);
                *self.runs.entry(status.as_str()).or_default() += 1;
                // The run's sessions will soon say no more: forget the sessions of the
                // run that ended `KEEP_ENDED` ends ago.
                self.ended.push_back(run.clone());
                if self.ended.len() > KEEP_ENDED
                    && let Some(old) = self.ended.pop_front()
                {
                    let prefix = format!("{old}:");
                    self.roles.retain(|id, _| !id.as_str().starts_with(&prefix));
                    self.models
                        .retain(|id, _| !id.as_str().starts_with(&prefix));
                }
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
            SessionEvent::TurnStarted { model, .. } => match model {
                Some(model) => {
                    self.models.insert(id.clone(), model.clone());
                }
                None => {
                    self.models.remove(id);
                }
            },
            SessionEvent::TurnCompleted { usage, .. } => {
                let role = self.role(id);
                let model = self
                    .models
                    .get(id)
                    .map_or(UNKNOWN_MODEL, String::as_str)
                    .to_owned();
                *self.calls.entry((role.clone(), "ok")).or_default() += 1;
                let (input, output) = (usage.prompt_tokens, usage.completion_tokens);
                for (kind, n) in [("input", input), ("output", output)] {
                    *self
                        .tokens
                        .entry((role.clone(), model.clone(), kind))
                        .or_default() += n;
                }
                if let Some(price) = self.prices.get(&model) {
                    *self.cost.entry((role, model)).or_default() += price.cost(input, output);
                }
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
