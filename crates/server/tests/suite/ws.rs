//! WebSocket clients on a loopback port: order, two clients, reconnect with `since`, ops
//! over the socket, refusals.

use std::net::SocketAddr;
use std::time::Duration;

use futures::{SinkExt, StreamExt};
use serde_json::{Value, json};
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use trellis_server::Limits;

use super::common::*;

type Socket =
    tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;

async fn connect(addr: SocketAddr, query: &str) -> Socket {
    try_connect(addr, query, None).await.unwrap()
}

async fn try_connect(
    addr: SocketAddr,
    query: &str,
    origin: Option<&str>,
) -> Result<Socket, tokio_tungstenite::tungstenite::Error> {
    let mut req = format!("ws://{addr}/api/events{query}")
        .into_client_request()
        .unwrap();
    req.headers_mut()
        .insert("authorization", format!("Bearer {TOKEN}").parse().unwrap());
    if let Some(o) = origin {
        req.headers_mut().insert("origin", o.parse().unwrap());
    }
    tokio_tungstenite::connect_async(req).await.map(|(s, _)| s)
}

/// The next JSON frame (pings skipped) within 60 s, or `None` when closed.
async fn next(ws: &mut Socket) -> Option<Value> {
    let read = async {
        loop {
            match ws.next().await?.ok()? {
                Message::Text(t) => return Some(serde_json::from_str(&t).unwrap()),
                Message::Close(_) => return None,
                _ => {}
            }
        }
    };
    tokio::time::timeout(Duration::from_secs(60), read)
        .await
        .expect("no frame within 60 s")
}

/// Event frames until one named `until` (included).
async fn events_until(ws: &mut Socket, until: &str) -> Vec<Value> {
    let mut out = Vec::new();
    while let Some(f) = next(ws).await {
        if f["type"] == "event" {
            let done = f["name"] == until;
            out.push(f);
            if done {
                return out;
            }
        }
    }
    panic!("closed before {until}: {out:?}");
}

fn seqs(frames: &[Value]) -> Vec<u64> {
    frames.iter().map(|f| f["seq"].as_u64().unwrap()).collect()
}

async fn send(ws: &mut Socket, v: Value) {
    ws.send(Message::text(v.to_string())).await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn two_clients_see_one_run_in_order_and_a_reconnect_loses_and_repeats_nothing() {
    let (s, addr) = listening(Limits::default()).await;
    // Both clients follow the workspace stream to learn the run id.
    let mut a = connect(addr, "?stream=workspace").await;
    let mut b = connect(addr, "?stream=workspace&since=0").await;
    for ws in [&mut a, &mut b] {
        assert_eq!(next(ws).await.unwrap()["type"], "subscribed");
    }
    let run = start_run(&s.app, "Why is stock kept in memory?").await;
    let stream = format!("run:{run}");
    for ws in [&mut a, &mut b] {
        send(
            ws,
            json!({ "type": "subscribe", "stream": stream, "since": 0 }),
        )
        .await;
    }
    // Client A reads everything; client B reads a few events, drops, and reconnects with
    // `since` = the last seq it saw.
    let mut a_frames = Vec::new();
    let mut b_frames = Vec::new();
    while let Some(f) = next(&mut b).await {
        if f["type"] == "event" && f["stream"] == stream.as_str() {
            b_frames.push(f);
            if b_frames.len() == 4 {
                break;
            }
        }
    }
    drop(b);
    let last = b_frames.last().unwrap()["seq"].as_u64().unwrap();
    let mut b = connect(addr, &format!("?stream={stream}&since={last}")).await;
    assert_eq!(next(&mut b).await.unwrap()["since"], last);
    b_frames.extend(events_until(&mut b, "workflow:completed").await);
    while let Some(f) = next(&mut a).await {
        if f["type"] == "event" && f["stream"] == stream.as_str() {
            let done = f["name"] == "workflow:completed";
            a_frames.push(f);
            if done {
                break;
            }
        }
    }
    let n = a_frames.len() as u64;
    assert_eq!(
        seqs(&a_frames),
        (1..=n).collect::<Vec<_>>(),
        "A saw a gap or a repeat"
    );
    assert_eq!(
        seqs(&b_frames),
        seqs(&a_frames),
        "B after reconnect differs from A"
    );
    assert_eq!(a_frames, b_frames);
    assert_eq!(a_frames[0]["name"], "graph:run_started");
    for f in &a_frames {
        assert_eq!(f["workspace"], "inventory");
        assert!(f["ts"].as_i64().unwrap() > 0);
    }
    let names: Vec<&str> = a_frames
        .iter()
        .map(|f| f["name"].as_str().unwrap())
        .collect();
    assert!(names.contains(&"graph:node_status_changed"), "{names:?}");
    // Replaying the whole run from 0 gives the same frames.
    let mut c = connect(addr, &format!("?stream={stream}")).await;
    next(&mut c).await;
    let replay = events_until(&mut c, "workflow:completed").await;
    assert_eq!(replay, a_frames);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn ops_go_over_the_socket_and_bad_frames_do_not_close_it() {
    let (s, addr) = listening(Limits::default()).await;
    let run = start_run(&s.app, "What does reserve do?").await;
    finished(&s, &run).await;
    let mut ws = connect(addr, "").await;
    send(&mut ws, json!({ "type": "ping", "id": 1 })).await;
    assert_eq!(
        next(&mut ws).await.unwrap(),
        json!({ "type": "pong", "id": 1 })
    );
    for bad in [
        "not json".to_owned(),
        json!({ "type": "dance" }).to_string(),
        json!({ "type": "subscribe" }).to_string(),
        json!({ "type": "op", "op": { "op": "prune" } }).to_string(),
        json!({ "type": "subscribe", "stream": "run:nope" }).to_string(),
        json!({ "type": "subscribe", "stream": "bogus" }).to_string(),
    ] {
        ws.send(Message::text(bad.clone())).await.unwrap();
        let f = next(&mut ws).await.unwrap();
        assert_eq!(f["type"], "error", "{bad}: {f}");
        assert!(f["status"] == 400 || f["status"] == 404, "{bad}: {f}");
    }
    ws.send(Message::binary(vec![1, 2, 3])).await.unwrap();
    assert_eq!(next(&mut ws).await.unwrap()["type"], "error");
    // An op the run's state forbids: 409 with its id.
    send(
        &mut ws,
        json!({ "type": "op", "id": "p1", "op": { "op": "prune", "run": run, "node": ANALYSIS } }),
    )
    .await;
    let f = next(&mut ws).await.unwrap();
    assert_eq!(
        (f["type"].clone(), f["id"].clone(), f["status"].clone()),
        (json!("error"), json!("p1"), json!(409)),
        "{f}"
    );
    // A channel over the socket.
    send(
        &mut ws,
        json!({ "type": "op", "id": 2, "op": { "op": "startChannel", "channel": "design", "message": "Where is stock kept?" } }),
    )
    .await;
    let f = next(&mut ws).await.unwrap();
    assert_eq!(f["type"], "result", "{f}");
    assert_eq!(f["id"], 2);
    assert_eq!(
        f["result"]["answer"],
        "Stock is kept in memory (docs/adr/0001)."
    );
    send(
        &mut ws,
        json!({ "type": "unsubscribe", "stream": "workspace" }),
    )
    .await;
    assert_eq!(next(&mut ws).await.unwrap()["found"], false);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn upgrades_are_refused_for_unknown_streams_foreign_origins_and_big_frames() {
    let limits = Limits {
        ws_message_bytes: 1024,
        ..Limits::default()
    };
    let (_s, addr) = listening(limits).await;
    assert!(try_connect(addr, "?stream=run:nope", None).await.is_err());
    assert!(try_connect(addr, "?stream=bogus", None).await.is_err());
    assert!(
        try_connect(addr, "", Some("http://evil.example"))
            .await
            .is_err()
    );
    let own = format!("http://{addr}");
    let mut ws = try_connect(addr, "", Some(&own)).await.unwrap();
    // A frame over the limit closes the connection.
    ws.send(Message::text("x".repeat(4096))).await.unwrap();
    assert!(next(&mut ws).await.is_none());
}
