//! Every route in process (`Router::oneshot`): results, 400 naming the field, 404, 409.

use axum::http::StatusCode;
use serde_json::json;

use super::common::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_run_is_created_listed_inspected_and_refuses_what_its_state_forbids() {
    let s = served();
    let app = &s.app;
    let (status, body) = get(app, "/api/health").await;
    assert_eq!((status, body["ok"].clone()), (StatusCode::OK, json!(true)));
    let (_, ws) = get(app, "/api/workspaces").await;
    assert_eq!(ws[0]["id"], "inventory");
    let (status, cat) = get(app, "/api/catalog/workflows").await;
    assert_eq!(status, StatusCode::OK);
    assert!(
        cat["workflows"]
            .as_array()
            .unwrap()
            .iter()
            .any(|w| w["workflow"]["metadata"]["name"] == "architecture_discussion"),
        "{cat}"
    );

    let run = start_run(app, "Why is stock kept in memory?").await;
    finished(&s, &run).await;

    // The tool knowledge graph (the scripted agents call no tools: empty, nothing speculated).
    let (status, graph) = get(app, "/api/tools/graph").await;
    assert_eq!(status, StatusCode::OK, "{graph}");
    assert_eq!(graph["workspace"], "inventory");
    assert!(
        graph["nodes"].is_array() && graph["edges"].is_array(),
        "{graph}"
    );
    assert_eq!(graph["speculation"]["threshold"], json!(0.92), "{graph}");
    assert_eq!(graph["speculation"]["samples"], json!(0), "{graph}");

    let (status, list) = get(app, "/api/workflows").await;
    assert_eq!(status, StatusCode::OK);
    let row = list
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["id"] == run.as_str())
        .unwrap();
    assert_eq!(row["status"], "succeeded", "{row}");
    assert_eq!(row["workspace"], "inventory");
    assert_eq!(row["workflow"], "architecture_discussion");
    assert_eq!(row["request"], "Why is stock kept in memory?");
    assert!(row["usage"].is_object());
    let (_, none) = get(app, "/api/workflows?status=failed").await;
    assert!(
        none.as_array()
            .unwrap()
            .iter()
            .all(|r| r["id"] != run.as_str())
    );

    // A unique prefix names the run too.
    let (status, shown) = get(app, &format!("/api/workflows/{}", &run[..13])).await;
    assert_eq!(status, StatusCode::OK, "{shown}");
    assert_eq!(shown["id"], run.as_str());
    assert_eq!(shown["workflow"], "architecture_discussion");
    assert_eq!(shown["live"], false);

    let (status, graph) = get(app, &format!("/api/workflows/{run}/graph")).await;
    assert_eq!(status, StatusCode::OK, "{graph}");
    let node = graph["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|n| n["id"] == ANALYSIS)
        .unwrap();
    assert_eq!(node["state"], "COMPLETED");
    assert_eq!(node["attempt"], 1);
    assert!(graph["routing"].as_array().unwrap().len() >= 2, "{graph}");

    let (_, events) = get(app, &format!("/api/workflows/{run}/events?since=0&limit=5")).await;
    let events = events.as_array().unwrap();
    assert_eq!(events.len(), 5);
    assert_eq!(events[0]["seq"], 1);
    assert_eq!(events[0]["name"], "graph:run_started");
    assert_eq!(events[0]["type"], "event");
    let (_, later) = get(app, &format!("/api/workflows/{run}/events?since=5")).await;
    assert_eq!(later[0]["seq"], 6);
    let (_, all) = get(app, &format!("/api/workflows/{run}/events")).await;
    let (status, head) = get(app, &format!("/api/streams/run:{run}")).await;
    assert_eq!(status, StatusCode::OK, "{head}");
    assert_eq!(
        head["lastSeq"],
        all.as_array().unwrap().last().unwrap()["seq"]
    );
    let (_, ws_head) = get(app, "/api/streams/workspace").await;
    assert!(ws_head["lastSeq"].as_u64().unwrap() >= 3, "{ws_head}");
    assert!(
        row.get("stage").is_none(),
        "a finished run has no stage in progress: {row}"
    );
    let (_, ws_events) = get(app, "/api/streams/workspace/events").await;
    let names: Vec<&str> = ws_events
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["name"].as_str().unwrap())
        .collect();
    assert!(names.contains(&"workflow:created"), "{names:?}");
    assert!(names.contains(&"workflow:stage_changed"), "{names:?}");
    assert!(names.contains(&"workflow:stopped"), "{names:?}");

    let (status, sessions) = get(app, &format!("/api/workflows/{run}/sessions")).await;
    assert_eq!(status, StatusCode::OK);
    let session = sessions
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["owner"]["node"] == ANALYSIS)
        .unwrap()["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let (status, shown) = get(app, &format!("/api/sessions/{session}")).await;
    assert_eq!(status, StatusCode::OK, "{shown}");
    assert!(!shown["turns"].as_array().unwrap().is_empty(), "{shown}");
    // A message to an agent's session goes to its node: the run has finished, so 409.
    let (status, e) = post(
        app,
        &format!("/api/sessions/{session}/message"),
        json!({ "text": "one more thing" }),
    )
    .await;
    assert_eq!(status, StatusCode::CONFLICT, "{e}");
    assert!(e["error"].as_str().unwrap().contains("succeeded"), "{e}");
    let (status, _) = get(app, &format!("/api/sessions?run={run}")).await;
    assert_eq!(status, StatusCode::OK);
    let (status, _) = get(app, &format!("/api/streams/session:{session}/events")).await;
    assert_eq!(status, StatusCode::OK);
    for what in ["artifacts", "usage", "interrupts"] {
        let (status, body) = get(app, &format!("/api/workflows/{run}/{what}")).await;
        assert_eq!(status, StatusCode::OK, "{what}: {body}");
    }
    let (status, changes) = get(app, &format!("/api/workflows/{run}/changes")).await;
    assert_eq!(status, StatusCode::OK, "{changes}");

    // What the run's state forbids: 409 with the reason.
    let conflicts = [
        (
            format!("/api/workflows/{run}/nodes/{ANALYSIS}/prune"),
            json!({}),
            "finished work cannot be pruned",
        ),
        (
            format!("/ws/graph/prune/{ANALYSIS}?run={run}"),
            json!({ "subtree": true }),
            "finished work cannot be pruned",
        ),
        (
            format!("/api/workflows/{run}/approve"),
            json!({}),
            "nothing waiting for approval",
        ),
        (
            format!("/ws/review/{ANALYSIS}/approve"),
            json!({ "run": run }),
            "nothing waiting for approval",
        ),
        (
            format!("/api/workflows/{run}/nodes/{ANALYSIS}/message"),
            json!({ "text": "also check reservations" }),
            "",
        ),
        (
            format!("/ws/agent/{ANALYSIS}/message"),
            json!({ "run": run, "text": "hello" }),
            "",
        ),
        (
            format!("/api/workflows/{run}/cancel"),
            json!({}),
            "nothing to cancel",
        ),
    ];
    for (uri, body, why) in conflicts {
        let (status, answer) = post(app, &uri, body).await;
        assert_eq!(status, StatusCode::CONFLICT, "{uri}: {answer}");
        assert_eq!(answer["kind"], "conflict");
        assert!(
            answer["error"].as_str().unwrap().contains(why),
            "{uri}: {answer}"
        );
    }
    // A revision of a finished stage reopens the run (the node interaction `revise`).
    let (status, revised) = post(
        app,
        &format!("/ws/review/{ANALYSIS}/revise"),
        json!({ "run": run, "feedback": "cover reservations too" }),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{revised}");
    assert_eq!(revised["revising"], ANALYSIS);
    finished(&s, &run).await;
    let (_, graph) = get(app, &format!("/api/workflows/{run}/graph")).await;
    let node = graph["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|n| n["id"] == ANALYSIS)
        .unwrap()
        .clone();
    assert_eq!(node["attempt"], 2, "{graph}");
    // Revise again and cancel at once: whichever wins, what follows is an answer, never a
    // 500 (a cancelled run refuses changes with 409).
    let (status, _) = post(
        app,
        &format!("/api/workflows/{run}/nodes/{ANALYSIS}/revise"),
        json!({ "feedback": "and releases" }),
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    let (status, _) = post(app, &format!("/api/workflows/{run}/cancel"), json!({})).await;
    assert!(
        [StatusCode::OK, StatusCode::CONFLICT].contains(&status),
        "{status}"
    );
    finished(&s, &run).await;
    let (_, shown) = get(app, &format!("/api/workflows/{run}")).await;
    let (status, answer) = post(
        app,
        &format!("/api/workflows/{run}/request-changes"),
        json!({ "feedback": "more" }),
    )
    .await;
    if shown["status"] == "cancelled" {
        assert_eq!(status, StatusCode::CONFLICT, "{answer}");
    } else {
        assert_eq!(status, StatusCode::OK, "{answer}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn bad_input_is_refused_with_the_field_and_unknown_ids_are_404() {
    let s = served();
    let app = &s.app;
    let (status, e) = post(app, "/api/workflows", json!({})).await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert_eq!(e["field"], "request", "{e}");
    let (status, e) = post(app, "/api/workflows", json!({ "request": 7 })).await;
    assert_eq!(
        (status, e["field"].clone()),
        (StatusCode::BAD_REQUEST, json!("request"))
    );
    let (status, e) = post(app, "/api/workflows", json!({ "request": "x", "nope": 1 })).await;
    assert_eq!(
        (status, e["field"].clone()),
        (StatusCode::BAD_REQUEST, json!("nope"))
    );
    let (status, e) = post(app, "/api/workflows", json!({ "request": "  " })).await;
    assert_eq!(
        (status, e["field"].clone()),
        (StatusCode::BAD_REQUEST, json!("request"))
    );
    let (status, e) = post(
        app,
        "/api/workflows",
        json!({ "request": "x", "input": "sometimes" }),
    )
    .await;
    assert_eq!(
        (status, e["field"].clone()),
        (StatusCode::BAD_REQUEST, json!("input"))
    );
    // Malformed JSON, and JSON without its content type.
    let mut req = request("POST", "/api/workflows", None);
    *req.body_mut() = axum::body::Body::from("{\"request\": ");
    req.headers_mut().insert(
        axum::http::header::CONTENT_TYPE,
        "application/json".parse().unwrap(),
    );
    let (status, e) = send(app, req).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{e}");
    let mut req = request("POST", "/api/workflows", None);
    *req.body_mut() = axum::body::Body::from("{\"request\": \"x\"}");
    let (status, _) = send(app, req).await;
    assert_eq!(status, StatusCode::UNSUPPORTED_MEDIA_TYPE);
    // Too large.
    let big = "x".repeat(2 << 20);
    let (status, e) = post(app, "/api/workflows", json!({ "request": big })).await;
    assert_eq!(status, StatusCode::PAYLOAD_TOO_LARGE, "{e}");
    // Unknown ids and routes.
    for uri in [
        "/api/workflows/0000-none",
        "/api/workflows/0000-none/graph",
        "/api/workflows/0000-none/changes",
        "/api/sessions/nope",
        "/api/nothing-here",
    ] {
        let (status, e) = get(app, uri).await;
        assert_eq!(status, StatusCode::NOT_FOUND, "{uri}: {e}");
    }
    let (status, _) = post(
        app,
        "/api/workflows/0000-none/nodes/x/message",
        json!({ "text": "hi" }),
    )
    .await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    // Ids that cannot be ids.
    let (status, _) = get(app, "/api/workflows/..%2F..%2Fetc").await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    let (status, e) = post(app, "/ws/graph/prune/x", json!({})).await;
    assert_eq!(
        (status, e["field"].clone()),
        (StatusCode::BAD_REQUEST, json!("run"))
    );
    let (status, e) = post(
        app,
        "/api/channels/design/session",
        json!({ "workspace": "other" }),
    )
    .await;
    assert_eq!(status, StatusCode::NOT_FOUND, "{e}");
    let (status, e) = get(app, "/api/streams/bogus/events").await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{e}");
    // The service still works.
    let (status, _) = get(app, "/api/workflows").await;
    assert_eq!(status, StatusCode::OK);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn channels_start_answer_and_keep_their_turns() {
    let s = served();
    let app = &s.app;
    // A session started without a message is readable at once.
    for _ in 0..5 {
        let (status, out) = post(app, "/api/channels/quick/session", json!({})).await;
        assert_eq!(status, StatusCode::CREATED, "{out}");
        let (status, shown) = get(
            app,
            &format!("/api/sessions/{}", out["session"].as_str().unwrap()),
        )
        .await;
        assert_eq!(status, StatusCode::OK, "{shown}");
    }
    let (status, out) = post(
        app,
        "/api/channels/design/session",
        json!({ "message": "Where is stock kept?" }),
    )
    .await;
    assert_eq!(status, StatusCode::CREATED, "{out}");
    assert_eq!(out["answer"], "Stock is kept in memory (docs/adr/0001).");
    let session = out["session"].as_str().unwrap().to_owned();
    let (status, out) = post(
        app,
        &format!("/api/sessions/{session}/message"),
        json!({ "text": "And reservations?" }),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{out}");
    let (status, e) = post(
        app,
        &format!("/api/sessions/{session}/message"),
        json!({ "text": "" }),
    )
    .await;
    assert_eq!(
        (status, e["field"].clone()),
        (StatusCode::BAD_REQUEST, json!("text"))
    );
    s.service().bus().flush().await;
    let (_, shown) = get(app, &format!("/api/sessions/{session}")).await;
    assert_eq!(shown["turns"].as_array().unwrap().len(), 2, "{shown}");
    let (_, channels) = get(app, "/api/channels").await;
    assert!(
        channels
            .as_array()
            .unwrap()
            .iter()
            .any(|c| c["id"] == session.as_str()),
        "{channels}"
    );
    let (_, events) = get(app, &format!("/api/streams/session:{session}/events")).await;
    let names: Vec<&str> = events
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["name"].as_str().unwrap())
        .collect();
    for n in [
        "session:started",
        "turn:started",
        "turn:message_delta",
        "turn:completed",
    ] {
        assert!(names.contains(&n), "{n} missing: {names:?}");
    }
    let (status, _) = post(app, &format!("/api/sessions/{session}/cancel"), json!({})).await;
    assert_eq!(status, StatusCode::OK);
    let (status, _) = post(app, "/api/sessions/nope/cancel", json!({})).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn several_workspaces_are_served_and_runs_found_in_theirs() {
    let s = served_many(
        &["app", "lib"],
        vec![HOST.into()],
        trellis_server::Limits::default(),
    );
    let app = &s.app;
    let (_, ws) = get(app, "/api/workspaces").await;
    assert_eq!(ws.as_array().unwrap().len(), 2);
    let body = json!({ "request": "Why?", "workflow": "architecture_discussion", "skip": ["decision_documentation"], "input": "approve" });
    let (status, e) = post(app, "/api/workflows", body.clone()).await;
    assert_eq!(
        (status, e["field"].clone()),
        (StatusCode::BAD_REQUEST, json!("workspace")),
        "{e}"
    );
    let mut with = body.clone();
    with["workspace"] = json!("lib");
    let (status, out) = post(app, "/api/workflows", with).await;
    assert_eq!(status, StatusCode::CREATED, "{out}");
    assert_eq!(out["workspace"], "lib");
    let run = out["run"].as_str().unwrap().to_owned();
    // Found in its workspace by id alone.
    let (status, shown) = get(app, &format!("/api/workflows/{run}")).await;
    assert_eq!(
        (status, shown["workspace"].clone()),
        (StatusCode::OK, json!("lib"))
    );
    let (_, in_app) = get(app, "/api/workflows?workspace=app").await;
    assert!(in_app.as_array().unwrap().is_empty(), "{in_app}");
    let (_, all) = get(app, "/api/workflows").await;
    assert_eq!(all.as_array().unwrap().len(), 1);
    let (status, _) = get(app, "/api/streams/workspace/events").await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    let (status, _) = get(app, "/api/streams/workspace/events?workspace=lib").await;
    assert_eq!(status, StatusCode::OK);
    let (status, _) = get(app, "/api/catalog/workflows?workspace=nope").await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    // Ids must be unique.
    let dup =
        trellis_server::AppState::new(vec![], settings(vec![], trellis_server::Limits::default()));
    assert!(dup.is_err());
}
