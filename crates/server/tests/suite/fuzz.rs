//! Whatever a client sends, the server answers with a 2xx or 4xx and keeps serving.

use axum::http::StatusCode;
use proptest::prelude::*;
use serde_json::{Value, json};

use super::common::*;

fn json_value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::from),
        any::<f64>()
            .prop_filter("finite", |f| f.is_finite())
            .prop_map(Value::from),
        "[a-z_]{0,8}".prop_map(Value::String),
        prop_oneof![
            Just("run".to_owned()),
            Just("node".to_owned()),
            Just("../../etc/passwd".to_owned()),
            Just(ANALYSIS.to_owned()),
            Just("\u{0}".to_owned()),
        ]
        .prop_map(Value::String),
    ];
    leaf.prop_recursive(3, 24, 6, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            prop::collection::btree_map(
                prop_oneof![
                    "[a-z]{1,8}".boxed(),
                    Just("request".to_owned()).boxed(),
                    Just("text".to_owned()).boxed(),
                    Just("node".to_owned()).boxed(),
                    Just("run".to_owned()).boxed(),
                    Just("feedback".to_owned()).boxed(),
                    Just("op".to_owned()).boxed(),
                ],
                inner,
                0..5
            )
            .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

const ROUTES: &[&str] = &[
    "/api/workflows",
    "/api/workflows/{run}/answer",
    "/api/workflows/{run}/approve",
    "/api/workflows/{run}/request-changes",
    "/api/workflows/{run}/cancel",
    "/api/workflows/{run}/nodes/{node}/message",
    "/api/workflows/{run}/nodes/{node}/prune",
    "/api/workflows/{run}/nodes/{node}/approve",
    "/api/workflows/{run}/nodes/{node}/revise",
    "/api/workflows/{run}/changes/select",
    "/api/workflows/{run}/changes/apply",
    "/api/sessions/{run}/message",
    "/api/channels/{node}/session",
    "/ws/agent/{node}/message",
    "/ws/graph/prune/{node}",
    "/ws/review/{node}/approve",
    "/ws/review/{node}/revise",
];

#[test]
fn fuzzed_bodies_never_crash_the_server_or_a_run() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let _guard = rt.enter();
    let s = served();
    let run = rt.block_on(async {
        let run = start_run(&s.app, "Why is stock kept in memory?").await;
        finished(&s, &run).await;
        run
    });
    let config = ProptestConfig {
        cases: 192,
        failure_persistence: None,
        ..ProptestConfig::default()
    };
    proptest!(config, |(route in 0..ROUTES.len(), node in prop_oneof![Just(ANALYSIS.to_owned()), "[a-z]{1,6}".boxed()], body in json_value())| {
        // Never start a real run from a fuzzed body: keep `request` away from a string.
        let mut body = body;
        if ROUTES[route] == "/api/workflows" && body.get("request").is_some_and(Value::is_string) {
            body["request"] = json!(1);
        }
        if ROUTES[route].starts_with("/api/channels") {
            body = json!({ "workspace": body });
        }
        let uri = ROUTES[route].replace("{run}", &run).replace("{node}", &node);
        let (status, answer) = rt.block_on(post(&s.app, &uri, body.clone()));
        prop_assert!(
            status.is_success() || status.is_client_error(),
            "{uri} {body} -> {status} {answer}"
        );
        if status.is_client_error() {
            prop_assert!(answer["error"].is_string(), "{uri} {body} -> {answer}");
        }
    });
    // The run and the server are intact.
    rt.block_on(async {
        let (status, shown) = get(&s.app, &format!("/api/workflows/{run}")).await;
        assert_eq!(status, StatusCode::OK);
        // A fuzzed body may be a valid request: a revision sends the run back to work and
        // a cancel stops it (seen once in 742 tests: revise `{}`, then cancel `{}`).
        assert!(
            ["succeeded", "running", "cancelled"].contains(&shown["status"].as_str().unwrap()),
            "{shown}"
        );
        let (status, _) = get(&s.app, "/api/health").await;
        assert_eq!(status, StatusCode::OK);
    });
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fuzzed_websocket_frames_get_answers_and_never_close_the_socket() {
    use futures::{SinkExt, StreamExt};
    use proptest::strategy::ValueTree;
    use proptest::test_runner::TestRunner;
    use tokio_tungstenite::tungstenite::Message;
    use tokio_tungstenite::tungstenite::client::IntoClientRequest;

    let (_s, addr) = listening(trellis_server::Limits::default()).await;
    let mut req = format!("ws://{addr}/api/events")
        .into_client_request()
        .unwrap();
    req.headers_mut()
        .insert("authorization", format!("Bearer {TOKEN}").parse().unwrap());
    let (mut ws, _) = tokio_tungstenite::connect_async(req).await.unwrap();
    let mut runner = TestRunner::deterministic();
    let frames = prop_oneof![
        json_value().boxed(),
        json_value()
            .prop_map(|op| json!({ "type": "op", "id": 1, "op": op }))
            .boxed(),
        json_value()
            .prop_map(|v| json!({ "type": "subscribe", "stream": v, "since": v }))
            .boxed(),
        ".{0,40}".prop_map(Value::String).boxed(),
    ];
    let mut sent = 0;
    for _ in 0..300 {
        let frame = frames.new_tree(&mut runner).unwrap().current();
        let text = match &frame {
            Value::String(s) => s.clone(),
            v => v.to_string(),
        };
        ws.send(Message::text(text)).await.unwrap();
        sent += 1;
    }
    ws.send(Message::text(
        json!({ "type": "ping", "id": "end" }).to_string(),
    ))
    .await
    .unwrap();
    let mut errors = 0;
    let done = tokio::time::timeout(std::time::Duration::from_secs(60), async {
        while let Some(msg) = ws.next().await {
            match msg.unwrap() {
                Message::Text(t) => {
                    let f: Value = serde_json::from_str(&t).unwrap();
                    if f["type"] == "error" {
                        errors += 1;
                        assert!(f["status"].as_u64().unwrap() < 500, "{f}");
                    }
                    if f == json!({ "type": "pong", "id": "end" }) {
                        return true;
                    }
                }
                Message::Close(c) => panic!("closed: {c:?}"),
                _ => {}
            }
        }
        false
    })
    .await
    .expect("no pong within 60 s");
    assert!(done);
    assert!(errors > sent / 2, "{errors} errors for {sent} frames");
}
