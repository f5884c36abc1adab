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
fn the_view_carries_pagerank_community_counts_and_confidence() {
    let (_dir, graph) = two_clusters();
    let view = graph.view(Default::default()).unwrap();
    assert_eq!(view.nodes.len(), 6);
    let read = view.nodes.iter().find(|n| n.tool == "read_file").unwrap();
    assert!(read.pagerank > 0.0);
    let e = view
        .edges
        .iter()
        .find(|e| e.from == "read_file" && e.to == "parse_json")
        .unwrap();
    assert_eq!(e.observed_count, 15);
    assert!(e.confidence > 0.85);
    // The communities read back from the nodes are the graph's own, in order.
    let communities = graph.communities().unwrap();
    assert!(communities.len() > 1, "{communities:?}");
    assert_eq!(view.communities(), communities);

    let json = serde_json::to_value(&view).unwrap();
    assert_eq!(
        json["edges"][0]["observedCount"],
        view.edges[0].observed_count
    );
    assert!(json["nodes"][0]["community"].is_u64());
    assert_eq!(
        json.as_object().unwrap().keys().collect::<Vec<_>>(),
        ["nodes", "edges", "speculation"]
    );
}
