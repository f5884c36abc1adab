//! On a real loopback port: a client that hangs up cancels its generation, requests are
//! served in arrival order one at a time, a full queue answers 503, and a stop ends the
//! streams in progress.

use std::sync::Arc;
use std::time::Duration;

use serde_json::json;
use trellis_llm_server::{Limits, Outcome};

use super::common::*;

fn streamed(text: &str) -> serde_json::Value {
    json!({"model": "gate", "stream": true, "messages": [{"role": "user", "content": text}]})
}

/// Sends `body`, hangs up once the model has started, and checks that the generation was
/// cancelled and reported so.
async fn hang_up_after_the_start(body: serde_json::Value) {
    let gate = Gate::new();
    let server = start(Arc::new(gate.clone()), Limits::default()).await;
    let stream = body["stream"] == true;
    let mut client = Raw::post(server.addr, &body).await;
    if stream {
        // The first delta has reached the client.
        client.read_until("working on a").await;
    } else {
        gate.wait_started(1).await;
    }
    drop(client);
    wait_for(
        || gate.tokens.lock().unwrap()[0].is_cancelled(),
        "the generation to be cancelled",
    )
    .await;
    let records = server.wait_records(1).await;
    assert_eq!(records[0].outcome, Outcome::Cancelled, "{}", records[0]);
    assert_eq!(records[0].stream, stream);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hanging_up_mid_stream_cancels_the_generation() {
    hang_up_after_the_start(streamed("a")).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hanging_up_on_a_whole_answer_cancels_the_generation() {
    hang_up_after_the_start(
        json!({"model": "gate", "messages": [{"role": "user", "content": "a"}]}),
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn requests_wait_their_turn_in_arrival_order() {
    let gate = Gate::new();
    let server = start(Arc::new(gate.clone()), Limits::default()).await;
    let mut a = Raw::post(server.addr, &streamed("a")).await;
    a.read_until("working on a").await;
    // Each later request is told how many are ahead as soon as it is queued.
    let mut b = Raw::post(server.addr, &streamed("b")).await;
    b.read_until("queued behind 1 request(s)").await;
    let mut c = Raw::post(server.addr, &streamed("c")).await;
    c.read_until("queued behind 2 request(s)").await;
    assert_eq!(gate.started(), vec!["a"], "one generation at a time");
    tokio::time::sleep(Duration::from_millis(100)).await;
    gate.release(3);
    for (client, name) in [(&mut a, "a"), (&mut b, "b"), (&mut c, "c")] {
        client.read_until("data: [DONE]").await;
        assert!(client.received.contains(&format!("working on {name}")));
    }
    assert_eq!(gate.started(), vec!["a", "b", "c"]);
    let records = server.wait_records(3).await;
    // `a` went straight to the model; `b` and `c` waited at least while it was held.
    let mut queued: Vec<_> = records.iter().map(|r| r.queued).collect();
    queued.sort();
    let held = Duration::from_millis(100);
    assert!(queued[0] < held && queued[1] >= held, "{records:#?}");
    assert!(
        records
            .iter()
            .all(|r| r.outcome == Outcome::Done("stop".into()))
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_queue_answers_503_and_a_client_that_leaves_the_queue_frees_its_place() {
    let gate = Gate::new();
    let limits = Limits {
        queue: 1,
        ..Limits::default()
    };
    let server = start(Arc::new(gate.clone()), limits).await;
    let mut a = Raw::post(server.addr, &streamed("a")).await;
    a.read_until("working on a").await;
    let mut b = Raw::post(server.addr, &streamed("b")).await;
    b.read_until("queued behind 1").await;
    let mut c = Raw::post(server.addr, &streamed("c")).await;
    c.read_until("\r\n\r\n").await;
    assert!(c.received.starts_with("HTTP/1.1 503"), "{}", c.received);
    assert!(c.received.to_lowercase().contains("retry-after: 1"));
    c.read_until("\"code\":\"overloaded\"").await;
    // `b` gives up while waiting: its place is free again.
    drop(b);
    wait_for(|| server.records.lock().unwrap().len() >= 2, "b's record").await;
    let mut d = Raw::post(server.addr, &streamed("d")).await;
    d.read_until("queued behind 1").await;
    gate.release(2);
    d.read_until("data: [DONE]").await;
    assert_eq!(gate.started(), vec!["a", "d"], "b never ran");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stopping_the_server_ends_the_streams_in_progress() {
    let gate = Gate::new();
    let server = start(Arc::new(gate.clone()), Limits::default()).await;
    let mut a = Raw::post(server.addr, &streamed("a")).await;
    a.read_until("working on a").await;
    server.state.shutdown();
    a.read_until("\"type\":\"server_error\"").await;
    assert!(gate.tokens.lock().unwrap()[0].is_cancelled());
    assert!(!a.received.contains("[DONE]"));
}
