//! Spans in the Chrome trace event format (the JSON object form), which Perfetto
//! (ui.perfetto.dev), `chrome://tracing` and speedscope open.
//!
//! Each span is a complete event (`"ph": "X"`, microseconds). A viewer draws the events of
//! one thread as a stack, so slices on one thread must nest strictly; spans that run side by
//! side (parallel nodes, parallel tool calls) go to further threads of the run's process. A
//! span goes on its parent's thread when it fits inside what is open there, otherwise on the
//! first thread where it fits, otherwise on a new one. Threads are named after the first
//! span placed on them; a span's events are instant events (`"ph": "i"`) on its thread;
//! its attributes, status and ids are the slice's `args`.

use std::collections::HashMap;

use serde_json::{Map, Value as Json, json};

use crate::span::{Span, SpanId, Status};

/// The trace of `spans` (one process per trace, named `name_of(trace)`).
pub fn trace_events(spans: &[Span]) -> Json {
    let mut ordered: Vec<&Span> = spans.iter().collect();
    ordered.sort_by_key(|s| (s.start_ms, std::cmp::Reverse(s.end_ms)));
    let mut pids: HashMap<_, usize> = HashMap::new();
    let mut lanes: Vec<Lanes> = Vec::new();
    let mut events = Vec::new();
    for s in ordered {
        let next = pids.len() + 1;
        let pid = *pids.entry(s.trace).or_insert(next);
        if pid > lanes.len() {
            lanes.push(Lanes::default());
            events.push(json!({
                "ph": "M", "pid": pid, "tid": 0, "name": "process_name",
                "args": { "name": format!("trace {}", s.trace.hex()) },
            }));
        }
        let lanes = &mut lanes[pid - 1];
        let (tid, new) = lanes.place(s);
        if new {
            events.push(json!({
                "ph": "M", "pid": pid, "tid": tid, "name": "thread_name",
                "args": { "name": s.name },
            }));
        }
        events.push(slice(s, pid, tid));
        for e in &s.events {
            events.push(json!({
                "ph": "i", "s": "t", "pid": pid, "tid": tid, "name": e.name,
                "ts": micros(e.at_ms), "cat": "event",
                "args": args(&e.attributes),
            }));
        }
    }
    json!({ "traceEvents": events, "displayTimeUnit": "ms" })
}

fn slice(s: &Span, pid: usize, tid: usize) -> Json {
    let mut a = match args(&s.attributes) {
        Json::Object(m) => m,
        _ => Map::new(),
    };
    a.insert("span_id".into(), s.id.hex().into());
    if let Some(p) = s.parent {
        a.insert("parent_span_id".into(), p.hex().into());
    }
    if let Status::Error(message) = &s.status {
        a.insert("error".into(), message.clone().into());
    }
    let cat = s.name.split(' ').next().unwrap_or("span");
    json!({
        "ph": "X", "pid": pid, "tid": tid, "name": s.name, "cat": cat,
        "ts": micros(s.start_ms), "dur": micros(s.end_ms - s.start_ms),
        "args": Json::Object(a),
    })
}

fn args(attrs: &crate::span::Attributes) -> Json {
    Json::Object(
        attrs
            .iter()
            .map(|(k, v)| (k.to_owned(), Json::from(v)))
            .collect(),
    )
}

fn micros(ms: i64) -> i64 {
    ms.saturating_mul(1000)
}

/// The threads of one process, each with the stack of slices open on it.
#[derive(Default)]
struct Lanes {
    /// Per thread: the (end, span) of the slices enclosing the last one placed.
    stacks: Vec<Vec<(i64, SpanId)>>,
    /// Where each span went.
    lane_of: HashMap<SpanId, usize>,
}

impl Lanes {
    /// The thread (from 1) for `s`, and whether it is new. Spans must come by start.
    fn place(&mut self, s: &Span) -> (usize, bool) {
        let preferred = s.parent.and_then(|p| self.lane_of.get(&p).copied());
        let fits = |stack: &mut Vec<(i64, SpanId)>| {
            while stack.last().is_some_and(|(end, _)| *end <= s.start_ms) {
                stack.pop();
            }
            stack.last().is_none_or(|(end, _)| s.end_ms <= *end)
        };
        let lane = match preferred {
            Some(l) if fits(&mut self.stacks[l]) => Some(l),
            _ => (0..self.stacks.len()).find(|&l| fits(&mut self.stacks[l])),
        };
        let (lane, new) = match lane {
            Some(l) => (l, false),
            None => {
                self.stacks.push(Vec::new());
                (self.stacks.len() - 1, true)
            }
        };
        // A zero-length slice closes at once; it need not enclose anything.
        if s.end_ms > s.start_ms {
            self.stacks[lane].push((s.end_ms, s.id));
        }
        self.lane_of.insert(s.id, lane);
        (lane + 1, new)
    }
}
