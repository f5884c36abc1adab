//! Webhooks against loopback receivers: the body, the signature, a retry after a 500, and a
//! dead receiver that costs nothing but one reported problem.

use std::time::{Duration, Instant};

use trellis_notify::webhook::{DELIVERY_HEADER, EVENT_HEADER, SIGNATURE_HEADER, signature};
use trellis_protocol::{RunId, RunStatus};
use trellis_test_http::{Response, Server};

use super::common::{Problems, asked, created, notifier, status};

#[tokio::test]
async fn a_signed_post_is_retried_after_a_500_and_carries_the_documented_body() {
    let receiver = Server::scripted(vec![
        Response::json_status(500, "{}"),
        Response::json("{}"),
        Response::json("{}"),
    ]);
    let problems = Problems::default();
    let (tx, notifier) = notifier(
        serde_json::json!({"webhooks": [{
            "url": format!("{}/hooks/trellis?token=t0k", receiver.url()),
            "events": ["input", "failed"],
            "secret_env": "HOOK_SECRET",
            "backoff_ms": 20,
        }]}),
        &[("HOOK_SECRET", "s3cret")],
        &problems,
    );
    notifier.set_base_url("http://127.0.0.1:8420".to_owned());
    let run = RunId::from_string("run-webhook-1");
    tx.send(created(&run, "feature"));
    tx.send(asked(&run, 5, "review", 1, "Ship it?"));
    // Not in this webhook's events.
    tx.send(status(&run, 9, RunStatus::Succeeded, None));
    notifier.shutdown(Duration::from_secs(10)).await;

    let requests = receiver.requests();
    assert_eq!(requests.len(), 2, "one 500, one retry: {requests:?}");
    for r in &requests {
        assert_eq!(r.method, "POST");
        assert_eq!(r.target, "/hooks/trellis?token=t0k");
        assert_eq!(r.header("content-type"), Some("application/json"));
        assert_eq!(r.header(EVENT_HEADER), Some("input"));
        assert_eq!(r.header(DELIVERY_HEADER), Some("run-webhook-1:input:5"));
        assert_eq!(
            r.header(SIGNATURE_HEADER),
            Some(signature(b"s3cret", &r.body).as_str())
        );
    }
    assert_eq!(requests[0].body, requests[1].body);
    assert_eq!(
        requests[1].json(),
        serde_json::json!({
            "event": "input",
            "run": "run-webhook-1",
            "workflow": "feature",
            "outcome": "waiting_input",
            "message": "review asks: Ship it?",
            "node": "review",
            "input": "question",
            "url": "http://127.0.0.1:8420/#/runs/run-webhook-1",
            "seq": 5,
            "timestamp": "2025-12-01T13:05:25.123Z",
        })
    );
    assert!(problems.lines().is_empty(), "{:?}", problems.lines());
}

#[tokio::test]
async fn an_unreachable_webhook_is_reported_once_and_never_waited_for() {
    // A port nobody listens on.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let problems = Problems::default();
    let (tx, notifier) = notifier(
        serde_json::json!({"webhooks": [{
            "url": format!("http://127.0.0.1:{port}/secret-path"),
            "attempts": 2,
            "backoff_ms": 10,
        }]}),
        &[],
        &problems,
    );
    let mut seen = notifier.notifications();
    let run = RunId::from_string("run-dead-hook");
    let started = Instant::now();
    for seq in 1..=3 {
        tx.send(asked(&run, seq, &format!("n{seq}"), 1, "?"));
    }
    tx.send(status(&run, 4, RunStatus::Failed, Some("boom")));
    // The sender never waits: all four were broadcast at once, and the dispatcher went on.
    assert!(started.elapsed() < Duration::from_millis(100));
    for _ in 0..4 {
        tokio::time::timeout(Duration::from_secs(5), seen.recv())
            .await
            .unwrap()
            .unwrap();
    }
    notifier.shutdown(Duration::from_secs(10)).await;
    let lines = problems.lines();
    assert_eq!(lines.len(), 1, "{lines:?}");
    assert!(lines[0].contains("notify.webhooks[0]"), "{lines:?}");
    assert!(lines[0].contains("2 attempts failed"), "{lines:?}");
    assert!(
        !lines[0].contains("secret-path"),
        "the path is not shown: {lines:?}"
    );
}

#[tokio::test]
async fn misconfigured_webhooks_are_reported_with_their_setting_and_left_out() {
    let receiver = Server::scripted(vec![Response::json("{}")]);
    let problems = Problems::default();
    let (tx, notifier) = notifier(
        serde_json::json!({"webhooks": [
            {"url": receiver.url(), "secret_env": "NOT_SET_HERE"},
            {"url": "ftp://hooks.example/x"},
        ]}),
        &[],
        &problems,
    );
    let run = RunId::from_string("run-no-secret");
    tx.send(status(&run, 3, RunStatus::Failed, None));
    notifier.shutdown(Duration::from_secs(5)).await;
    assert!(receiver.requests().is_empty());
    let lines = problems.lines();
    assert_eq!(lines.len(), 2, "{lines:?}");
    assert!(
        lines[0].contains("notify.webhooks[0].secret_env"),
        "{lines:?}"
    );
    assert!(lines[0].contains("NOT_SET_HERE"), "{lines:?}");
    assert!(lines[1].contains("notify.webhooks[1].url"), "{lines:?}");
}
