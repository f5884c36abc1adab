//! The Prometheus counters of the scripted run.

use trellis_protocol::{RunStatus, ServiceEvent, ServiceEventBody, SessionEvent};
use trellis_telemetry::metrics::{Metrics, Number, Pricing};

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
        "trellis_gen_ai_tokens_total{role=\"coder\",model=\"coder-model\",type=\"input\"} 2700",
        "trellis_gen_ai_tokens_total{role=\"coder\",model=\"coder-model\",type=\"output\"} 340",
        "trellis_tool_calls_total{tool=\"read_file\",status=\"ok\"} 1",
    ] {
        assert!(text.lines().any(|l| l == line), "{line:?} in\n{text}");
    }
}

/// The scripted run's session with its turns' models as given (`None`: an event recorded
/// before turns named their model).
fn session_with_models(first: Option<&str>, second: Option<&str>) -> Vec<ServiceEvent> {
    let mut models = [first, second].into_iter();
    fixture::code_session()
        .into_iter()
        .map(|mut ev| {
            if let ServiceEventBody::Session(SessionEvent::TurnStarted { model, .. }) =
                &mut ev.event
            {
                *model = models.next().flatten().map(str::to_owned);
            }
            ev
        })
        .collect()
}

#[test]
fn tokens_and_cost_are_counted_by_model_where_the_model_has_a_price() {
    let metrics = Metrics::default();
    // $2 and $10 per million input and output tokens.
    let price = Pricing::new(|input, output| (input as f64 * 2.0 + output as f64 * 10.0) / 1e6);
    metrics.set_prices([("big".to_owned(), price)]);
    // Turn 1 (1200 in, 40 out) on `big`, turn 2 (1500 in, 300 out) on `small`; then the same
    // session recorded before turns named their model.
    for ev in session_with_models(Some("big"), Some("small")) {
        metrics.observe(&ev);
    }
    for ev in session_with_models(None, None) {
        metrics.observe(&ev);
    }
    let text = metrics.prometheus();
    for line in [
        "trellis_gen_ai_tokens_total{role=\"coder\",model=\"big\",type=\"input\"} 1200",
        "trellis_gen_ai_tokens_total{role=\"coder\",model=\"big\",type=\"output\"} 40",
        "trellis_gen_ai_tokens_total{role=\"coder\",model=\"small\",type=\"input\"} 1500",
        "trellis_gen_ai_tokens_total{role=\"coder\",model=\"small\",type=\"output\"} 300",
        "trellis_gen_ai_tokens_total{role=\"coder\",model=\"unknown\",type=\"input\"} 2700",
        "# TYPE trellis_gen_ai_cost_usd_total counter",
        // (1200 × 2 + 40 × 10) / 1e6
        "trellis_gen_ai_cost_usd_total{role=\"coder\",model=\"big\"} 0.0028",
    ] {
        assert!(text.lines().any(|l| l == line), "{line:?} in\n{text}");
    }
    assert_eq!(
        text.lines()
            .filter(|l| l.starts_with("trellis_gen_ai_cost_usd_total"))
            .count(),
        1,
        "no cost without a price:\n{text}"
    );
    let cost = metrics
        .families()
        .into_iter()
        .find(|f| f.name == "trellis.gen_ai.cost_usd")
        .unwrap();
    assert_eq!(cost.points[0].value, Number::Float(0.0028));
}

#[test]
fn worker_events_are_counted_by_kind_and_the_queue_is_its_last_sample() {
    let metrics = Metrics::default();
    let text = metrics.prometheus();
    assert!(
        !text.lines().any(|l| l.starts_with("trellis_worker_queue")),
        "no queue before a worker looked: {text}"
    );
    for event in ["resumed", "lease_lost", "resumed", "took_over"] {
        metrics.worker_event(event);
    }
    metrics.worker_queue(5);
    metrics.worker_queue(3);
    let text = metrics.prometheus();
    for line in [
        "# TYPE trellis_worker_events_total counter",
        "trellis_worker_events_total{event=\"resumed\"} 2",
        "trellis_worker_events_total{event=\"lease_lost\"} 1",
        "trellis_worker_events_total{event=\"took_over\"} 1",
        "# TYPE trellis_worker_queue gauge",
        "trellis_worker_queue 3",
    ] {
        assert!(text.lines().any(|l| l == line), "{line:?} in\n{text}");
    }
}

#[test]
fn a_turn_published_after_its_runs_end_keeps_its_role_and_model() {
    let metrics = Metrics::default();
    let session = fixture::code_session();
    // The session is a stream of its own: its last turn's completion may be broadcast after
    // the run's final status.
    let last_turn = session
        .iter()
        .rposition(|e| {
            matches!(
                e.event,
                ServiceEventBody::Session(SessionEvent::TurnCompleted { .. })
            )
        })
        .unwrap();
    let late = fixture::run_stream(Some(RunStatus::Succeeded));
    let events = session[..last_turn]
        .iter()
        .chain(&late)
        .chain(&session[last_turn..]);
    for ev in events {
        metrics.observe(ev);
    }
    let text = metrics.prometheus();
    for line in [
        "trellis_model_calls_total{role=\"coder\",outcome=\"ok\"} 2",
        "trellis_gen_ai_tokens_total{role=\"coder\",model=\"coder-model\",type=\"input\"} 2700",
    ] {
        assert!(text.lines().any(|l| l == line), "{line:?} in\n{text}");
    }
}
