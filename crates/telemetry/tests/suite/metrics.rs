//! The Prometheus counters of the scripted run.

use trellis_protocol::RunStatus;
use trellis_telemetry::metrics::Metrics;

use super::fixture;

#[test]
fn the_scripted_run_is_counted_by_outcome_role_and_tool() {
    let metrics = Metrics::default();
    let mut all = fixture::stored(None).streams.concat();
    all.sort_by_key(|e| e.ts);
    for ev in &all {
        metrics.observe(ev);
    }
    let running = metrics.prometheus();
    assert!(
        running.contains("trellis_runs_active{status=\"running\"} 1\n"),
        "{running}"
    );
    for ev in fixture::run_stream(Some(RunStatus::Failed))
        .iter()
        .rev()
        .take(1)
    {
        metrics.observe(ev);
    }
    let text = metrics.prometheus();
    for line in [
        "# TYPE trellis_runs_total counter",
        "trellis_runs_total{outcome=\"failed\"} 1",
        "trellis_runs_active{status=\"running\"} 0",
        "trellis_model_calls_total{role=\"coder\",outcome=\"ok\"} 2",
        "trellis_gen_ai_tokens_total{role=\"coder\",type=\"input\"} 2700",
        "trellis_gen_ai_tokens_total{role=\"coder\",type=\"output\"} 340",
        "trellis_tool_calls_total{tool=\"read_file\",status=\"ok\"} 1",
    ] {
        assert!(text.lines().any(|l| l == line), "{line:?} in\n{text}");
    }
}

#[test]
fn worker_events_are_counted_by_kind() {
    let metrics = Metrics::default();
    for event in ["resumed", "lease_lost", "resumed"] {
        metrics.worker_event(event);
    }
    let text = metrics.prometheus();
    for line in [
        "# TYPE trellis_worker_events_total counter",
        "trellis_worker_events_total{event=\"resumed\"} 2",
        "trellis_worker_events_total{event=\"lease_lost\"} 1",
    ] {
        assert!(text.lines().any(|l| l == line), "{line:?} in\n{text}");
    }
}
