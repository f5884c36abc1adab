//! The Chrome trace of a run: what a trace viewer needs to draw it (see also
//! `scripts/check-trace.py`, which loads it with a viewer's own parser).

use std::collections::HashMap;

use trellis_protocol::RunStatus;
use trellis_telemetry::chrome::trace_events;
use trellis_telemetry::{Options, run_spans};

use super::fixture::{self, T0};

#[test]
fn every_span_is_a_complete_event_and_slices_nest_on_each_thread() {
    let spans = run_spans(
        fixture::stored(Some(RunStatus::Succeeded)),
        Options::default(),
    );
    let trace = trace_events(&spans);
    let events = trace["traceEvents"].as_array().unwrap();
    let slices: Vec<_> = events.iter().filter(|e| e["ph"] == "X").collect();
    assert_eq!(slices.len(), spans.len());
    let root = slices
        .iter()
        .find(|e| e["name"] == "invoke_workflow feature")
        .unwrap();
    assert_eq!(root["ts"], T0 * 1000);
    assert_eq!(root["dur"], 1000 * 1000);
    assert_eq!(root["args"]["trellis.run.status"], "succeeded");

    // On one thread, two slices are disjoint or one holds the other: otherwise a viewer
    // drops or misdraws them.
    let mut by_thread: HashMap<(i64, i64), Vec<(i64, i64)>> = HashMap::new();
    for e in &slices {
        let ts = e["ts"].as_i64().unwrap();
        let end = ts + e["dur"].as_i64().unwrap();
        let key = (e["pid"].as_i64().unwrap(), e["tid"].as_i64().unwrap());
        by_thread.entry(key).or_default().push((ts, end));
    }
    for (thread, slices) in &by_thread {
        for (i, a) in slices.iter().enumerate() {
            for b in &slices[i + 1..] {
                let disjoint = a.1 <= b.0 || b.1 <= a.0;
                let nested = (a.0 <= b.0 && b.1 <= a.1) || (b.0 <= a.0 && a.1 <= b.1);
                assert!(disjoint || nested, "{thread:?}: {a:?} overlaps {b:?}");
            }
        }
    }
    // The two review activations and the code agent nest under the run on its thread;
    // nothing here runs side by side, so one thread holds everything.
    assert_eq!(by_thread.len(), 1, "{by_thread:?}");
    let named: Vec<_> = events
        .iter()
        .filter(|e| e["ph"] == "M" && e["name"] == "thread_name")
        .collect();
    assert_eq!(named.len(), by_thread.len());
}

#[test]
fn spans_that_overlap_without_nesting_go_to_another_thread() {
    let mut spans = run_spans(
        fixture::stored(Some(RunStatus::Succeeded)),
        Options::default(),
    );
    // A second tool call that starts inside the first and outlives it (parallel calls).
    let first = spans
        .iter()
        .find(|s| s.name == "execute_tool read_file")
        .unwrap()
        .clone();
    let mut second = first.clone();
    second.id = trellis_telemetry::SpanId([9; 8]);
    second.start_ms = first.start_ms + 10;
    second.end_ms = first.end_ms + 100;
    spans.push(second);
    spans.sort_by_key(|s| s.start_ms);
    let trace = trace_events(&spans);
    let tid = |start: i64| {
        trace["traceEvents"]
            .as_array()
            .unwrap()
            .iter()
            .find(|e| e["ph"] == "X" && e["ts"] == start * 1000 && e["name"] == first.name)
            .map(|e| e["tid"].clone())
            .unwrap()
    };
    assert_ne!(tid(first.start_ms), tid(first.start_ms + 10));
}
