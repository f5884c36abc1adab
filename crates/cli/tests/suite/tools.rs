//! `trellis tools graph`: the tool knowledge graph learned from a real run's tool calls
//! (the binary against the loopback OpenAI-wire mock), printed as text and JSON.

use serde_json::json;

use super::common::*;
use super::mock::*;

#[test]
fn a_runs_tool_calls_teach_the_graph_and_tools_graph_prints_it() {
    // Before anything ran here there is no store: said, and nothing is created.
    let empty = tempfile::tempdir().unwrap();
    let out = args(trellis(empty.path()), &["tools", "graph"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("nothing has run here yet"), "{err}");
    assert!(!empty.path().join(".trellis").exists());

    // The analysis agent reads a file, then searches, then answers.
    let (url, _seen) = serve(|body| {
        if !body["response_format"].is_null() {
            return sse(&answer(body));
        }
        match tool_results(body) {
            0 => tool_sse(
                "call_1",
                "read_file",
                &json!({ "path": "inventory.py" }).to_string(),
            ),
            1 => tool_sse("call_2", "grep", &json!({ "pattern": "def " }).to_string()),
            _ => sse(&answer(body)),
        }
    });
    let ws = trellis_test_support::example_repo("inventory", &mock_config(&url)).unwrap();
    let out = ok(args(
        isolated(ws.path()),
        &[
            "run",
            "Let's discuss the decision to keep stock in memory",
            "--workflow",
            "architecture_discussion",
            "--skip",
            "decision_documentation",
            "--no-input",
            "--no-review",
        ],
    ));
    assert!(out.contains("succeeded at DONE"), "{out}");

    let graph = json(args(
        isolated(ws.path()),
        &["tools", "graph", "--format", "json"],
    ));
    let tools: Vec<&str> = graph["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n["tool"].as_str().unwrap())
        .collect();
    assert_eq!(tools, ["grep", "read_file"], "{graph}");
    let edges = graph["edges"].as_array().unwrap();
    assert_eq!(edges.len(), 1, "{graph}");
    assert_eq!(
        (
            &edges[0]["from"],
            &edges[0]["to"],
            &edges[0]["observedCount"]
        ),
        (&json!("read_file"), &json!("grep"), &json!(1))
    );
    let text = ok(args(isolated(ws.path()), &["tools", "graph"]));
    assert!(text.contains("2 tools, 1 learned dependencies"), "{text}");
    assert!(text.contains("read_file → grep  observed 1"), "{text}");
    let dot = ok(args(
        isolated(ws.path()),
        &["tools", "graph", "--format", "dot"],
    ));
    assert!(dot.starts_with("digraph"), "{dot}");
    // Nothing was speculated yet (one observation is far below the threshold).
    assert!(
        text.contains("Speculation: threshold 0.92, no speculation recorded yet"),
        "{text}"
    );
    assert_eq!(graph["speculation"]["threshold"], json!(0.92), "{graph}");
    assert_eq!(graph["speculation"]["samples"], json!(0), "{graph}");
}
