//! PageRank, communities and the exports.

use trellis_toolgraph::{Execution, ToolGraph};

use super::fixtures::{PATTERN, learn, run, store};

/// Two clusters used together often, joined by one weak cross edge.
fn two_clusters() -> (tempfile::TempDir, ToolGraph) {
    let (dir, store) = store();
    let mut graph = ToolGraph::new();
    let triangle = |tools: [&str; 3]| Execution {
        data_edges: vec![(0, 1), (1, 2), (0, 2)],
        ..run(&tools, &[])
    };
    learn(&mut graph, &store, &triangle(PATTERN), 15);
    learn(
        &mut graph,
        &store,
        &triangle(["list_dir", "delete_file", "run_tests"]),
        15,
    );
    learn(
        &mut graph,
        &store,
        &run(&["create_issue", "list_dir"], &["list_dir"]),
        1,
    );
    (dir, graph)
}

#[test]
fn communities_separate_two_clusters() {
    let (_dir, graph) = two_clusters();
    let communities = graph.communities().unwrap();
    assert_eq!(
        communities,
        [
            vec!["create_issue", "parse_json", "read_file"],
            vec!["delete_file", "list_dir", "run_tests"],
        ]
    );
    // Deterministic.
    assert_eq!(graph.communities().unwrap(), communities);
    let of = graph.community_of().unwrap();
    assert_eq!(of["read_file"], of["create_issue"]);
    assert_ne!(of["read_file"], of["list_dir"]);
}

#[test]
fn pagerank_sums_to_one_and_favours_where_reliable_edges_lead() {
    let (_dir, store) = store();
    let mut graph = ToolGraph::new();
    // Everything leads to create_issue; a flaky edge leads to send_email.
    learn(
        &mut graph,
        &store,
        &run(&["read_file", "create_issue"], &[]),
        20,
    );
    learn(
        &mut graph,
        &store,
        &run(&["parse_json", "create_issue"], &[]),
        20,
    );
    learn(
        &mut graph,
        &store,
        &run(&["fetch_url", "send_email"], &["send_email"]),
        20,
    );
    learn(
        &mut graph,
        &store,
        &run(&["fetch_url", "create_issue"], &[]),
        20,
    );
    let pr = graph.pagerank().unwrap();
    assert_eq!(pr.len(), 5);
    let total: f64 = pr.values().sum();
    assert!((total - 1.0).abs() < 1e-6, "{total}");
    let top = pr
        .iter()
        .max_by(|a, b| a.1.total_cmp(b.1))
        .map(|(t, _)| t.as_str());
    assert_eq!(top, Some("create_issue"));
    // fetch_url's weight goes mostly to the reliable edge: weighted, not uniform.
    assert!(pr["create_issue"] > 2.0 * pr["send_email"], "{pr:?}");
    assert!(pr["send_email"] < pr["create_issue"]);
}

#[test]
fn exports_carry_pagerank_community_counts_and_confidence() {
    let (_dir, graph) = two_clusters();
    let json = graph.to_json().unwrap();
    let nodes = json["nodes"].as_array().unwrap();
    assert_eq!(nodes.len(), 6);
    let read = nodes.iter().find(|n| n["tool"] == "read_file").unwrap();
    assert!(read["pagerank"].as_f64().unwrap() > 0.0);
    assert!(read["community"].is_u64());
    let edges = json["edges"].as_array().unwrap();
    let e = edges
        .iter()
        .find(|e| e["from"] == "read_file" && e["to"] == "parse_json")
        .unwrap();
    assert_eq!(e["observedCount"], 15);
    assert!(e["confidence"].as_f64().unwrap() > 0.85);

    let dot = graph.to_dot().unwrap();
    assert!(dot.starts_with("digraph tools {"));
    assert!(
        dot.contains("\"read_file\" -> \"parse_json\" [label=\"15 × 0.88\""),
        "{dot}"
    );
    assert!(dot.contains("\"create_issue\" [label=\"create_issue\\npagerank "));
    assert_eq!(dot.matches(" -> ").count(), graph.edge_count());
}
