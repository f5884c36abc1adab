//! The OpenAPI document: up to date in docs/, covering every route, its request schemas
//! accepting what the routes accept.

use axum::http::StatusCode;
use serde_json::{Value, json};

use super::common::*;

const FILE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/openapi.json");

/// `docs/openapi.json` is the served document; `UPDATE_SCHEMAS=1` rewrites it.
#[test]
fn the_published_document_is_current() {
    let doc = trellis_server::openapi::document();
    if std::env::var_os("UPDATE_SCHEMAS").is_some() {
        std::fs::write(FILE, serde_json::to_string_pretty(&doc).unwrap() + "\n").unwrap();
    }
    let published: Value = serde_json::from_str(&std::fs::read_to_string(FILE).unwrap()).unwrap();
    assert!(
        published == doc,
        "docs/openapi.json is out of date: run `UPDATE_SCHEMAS=1 cargo test -p trellis-server --test all openapi`"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_documented_route_is_served_and_the_document_too() {
    let s = served();
    let doc = trellis_server::openapi::document();
    let paths = doc["paths"].as_object().unwrap();
    assert!(paths.len() >= 35, "{}", paths.len());
    for (path, ops) in paths {
        for method in ops.as_object().unwrap().keys() {
            let uri = path
                .replace("{id}", "0000-none")
                .replace("{node}", "n")
                .replace("{stream}", "workspace");
            let body = (method == "post").then(|| json!({}));
            let (status, answer) = send(&s.app, request(&method.to_uppercase(), &uri, body)).await;
            let unrouted = status == StatusCode::NOT_FOUND && answer["error"] == "no such route"
                || status == StatusCode::METHOD_NOT_ALLOWED;
            assert!(!unrouted, "{method} {path} is documented but not routed");
        }
    }
    let (status, served) = get(&s.app, "/api/openapi.json").await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(served, doc);
}

#[test]
fn request_schemas_accept_what_the_routes_accept() {
    let doc = trellis_server::openapi::document();
    let schema_of = |path: &str| {
        let mut root =
            doc["paths"][path]["post"]["requestBody"]["content"]["application/json"]["schema"]
                .clone();
        root["components"] = doc["components"].clone();
        jsonschema::validator_for(&root).unwrap()
    };
    let create = schema_of("/api/workflows");
    assert!(create.is_valid(
        &json!({ "request": "add a flag", "skip": ["lint_and_format"], "input": "interrupts" })
    ));
    assert!(!create.is_valid(&json!({})));
    assert!(!create.is_valid(&json!({ "request": 3 })));
    assert!(!create.is_valid(&json!({ "request": "x", "nope": 1 })));
    let prune = schema_of("/api/workflows/{id}/nodes/{node}/prune");
    assert!(prune.is_valid(&json!({ "subtree": true })));
    assert!(!prune.is_valid(&json!({ "subtree": "yes" })));
    let apply = schema_of("/api/workflows/{id}/changes/apply");
    assert!(apply.is_valid(&json!({ "accept": [{ "file": "a.py", "hunks": [0, 2] }] })));
}
