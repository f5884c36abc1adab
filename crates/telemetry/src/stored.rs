//! A stored run as spans: the events of its graph log and of its agents' sessions, merged
//! into the order they happened and fed through the same [`Mapper`] as live events.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use trellis_protocol::ServiceEvent;
use trellis_protocol::records::ModelCallRecord;

use crate::mapper::{Mapper, Options};
use crate::span::Span;

/// What the store holds about one run.
#[derive(Clone, Debug, Default)]
pub struct StoredRun {
    /// Each stream's events in its own order: the run's graph log (`run:<id>`) and each of
    /// its sessions (`session:<run>:<node>`).
    pub streams: Vec<Vec<ServiceEvent>>,
    /// The run's model calls (`runs usage`).
    pub model_calls: Vec<ModelCallRecord>,
}

/// The spans of `run`, ordered by start; spans whose end is not recorded end at the last
/// event, marked unfinished.
pub fn run_spans(run: StoredRun, options: Options) -> Vec<Span> {
    let mut mapper = Mapper::new(options);
    mapper.add_model_calls(run.model_calls);
    for ev in merge(run.streams) {
        mapper.event(&ev);
    }
    mapper.finish()
}

/// The streams' events by time; each stream keeps its own order (a merge, not a sort, so a
/// clock that stepped back inside one stream does not reorder it), ties in stream order.
fn merge(streams: Vec<Vec<ServiceEvent>>) -> Vec<ServiceEvent> {
    let total = streams.iter().map(Vec::len).sum();
    let mut iters: Vec<_> = streams
        .into_iter()
        .map(|s| s.into_iter().peekable())
        .collect();
    let mut heads = BinaryHeap::new();
    for (i, it) in iters.iter_mut().enumerate() {
        if let Some(ev) = it.peek() {
            heads.push(Reverse((ev.ts, i)));
        }
    }
    let mut out = Vec::with_capacity(total);
    while let Some(Reverse((_, i))) = heads.pop() {
        if let Some(ev) = iters[i].next() {
            out.push(ev);
        }
        if let Some(ev) = iters[i].peek() {
            heads.push(Reverse((ev.ts, i)));
        }
    }
    out
}
