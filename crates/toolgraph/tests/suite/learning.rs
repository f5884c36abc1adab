//! Learning from executions: counts and confidence, persistence, paths, predictions.

use trellis_toolgraph::{ExecutedCall, Execution, ToolGraph, edge_confidence};

use super::fixtures::{PATTERN, learn, run, store};

#[test]
fn confidence_climbs_with_successful_repetitions_and_stays_low_with_failures() {
    assert_eq!(edge_confidence(0, 0), 0.0);
    assert!(edge_confidence(1, 1) < 0.4);
    assert!(edge_confidence(10, 10) < 0.85);
    assert!(edge_confidence(12, 12) > 0.85);
    assert!((edge_confidence(23, 23) - 0.92).abs() < 1e-12);
    assert!(edge_confidence(24, 24) > 0.92);
    assert!(edge_confidence(40, 20) < 0.55);
    assert!(edge_confidence(40, 0) < 0.05);
    let mut last = 0.0;
    for n in 1..60 {
        let c = edge_confidence(n, n);
        assert!(c > last && c < 1.0, "n={n}: {c}");
        last = c;
    }
}

#[test]
fn executions_persist_and_a_new_load_sees_the_learned_edges() {
    let (_dir, store) = store();
    let mut graph = ToolGraph::new();
    learn(&mut graph, &store, &run(&PATTERN, &[]), 5);
    learn(&mut graph, &store, &run(&PATTERN, &["create_issue"]), 2);

    let parse_create = graph.edge("parse_json", "create_issue").unwrap();
    assert_eq!(
        (parse_create.observed_count, parse_create.success_count),
        (7, 5)
    );
    assert_eq!(parse_create.confidence, edge_confidence(7, 5));
    assert_eq!(graph.calls("create_issue"), Some((7, 5)));

    let loaded = ToolGraph::load(&store).unwrap();
    assert_eq!(loaded.node_count(), 3);
    assert_eq!(loaded.edge_count(), 2);
    for (from, to, stats) in graph.edges() {
        assert_eq!(loaded.edge(from, to), Some(stats), "{from} → {to}");
    }
    assert_eq!(loaded.calls("read_file"), Some((7, 7)));
    assert_eq!(loaded.edge("create_issue", "read_file"), None);
}

#[test]
fn data_edges_are_learned_beside_the_call_order_and_checked() {
    let (_dir, store) = store();
    let mut graph = ToolGraph::new();
    let exec = Execution {
        context: "read two files and diff them".into(),
        calls: vec![
            ExecutedCall::new("read_file", true),
            ExecutedCall::new("read_file", true),
            ExecutedCall::new("list_dir", true),
            ExecutedCall::new("write_file", false),
        ],
        // The first read fed the write, two calls later.
        data_edges: vec![(0, 3)],
    };
    graph.record_execution(&store, &exec).unwrap();
    // read_file → read_file is no dependency; read_file → write_file came from the data.
    assert_eq!(graph.edge("read_file", "read_file"), None);
    let data = graph.edge("read_file", "write_file").unwrap();
    assert_eq!((data.observed_count, data.success_count), (1, 0));
    assert_eq!(
        graph.edge("read_file", "list_dir").unwrap().success_count,
        1
    );
    assert_eq!(graph.edge_count(), 3);

    let bad = Execution {
        data_edges: vec![(1, 4)],
        ..exec
    };
    let err = graph.record_execution(&store, &bad).unwrap_err();
    assert!(err.to_string().contains("1 → 4"), "{err}");
    // Nothing of the refused execution was stored or applied.
    assert_eq!(ToolGraph::load(&store).unwrap().edge_count(), 3);
    assert_eq!(graph.calls("read_file"), Some((2, 2)));
}

#[test]
fn path_finds_the_two_hop_chain_and_prefers_strong_edges() {
    let (_dir, store) = store();
    let mut graph = ToolGraph::new();
    learn(&mut graph, &store, &run(&PATTERN, &[]), 10);
    assert_eq!(
        graph.path("read_file", "create_issue").unwrap(),
        PATTERN.map(String::from)
    );
    assert_eq!(graph.path("create_issue", "read_file"), None);
    assert_eq!(graph.path("read_file", "no_such_tool"), None);

    // Two chains of two hops from a to d: through a weak b and through a strong c.
    learn(&mut graph, &store, &run(&["a", "b", "d"], &["d"]), 3);
    learn(&mut graph, &store, &run(&["a", "c", "d"], &[]), 3);
    assert_eq!(graph.path("a", "d").unwrap(), ["a", "c", "d"]);
    // A direct edge beats any chain, however weak.
    learn(&mut graph, &store, &run(&["a", "d"], &["d"]), 1);
    assert_eq!(graph.path("a", "d").unwrap(), ["a", "d"]);
}

#[test]
fn predict_next_ranks_what_usually_follows() {
    let (_dir, store) = store();
    let mut graph = ToolGraph::new();
    learn(&mut graph, &store, &run(&PATTERN, &[]), 9);
    learn(
        &mut graph,
        &store,
        &run(&["read_file", "write_file"], &[]),
        1,
    );

    let after_read = graph.predict_next(&["read_file".into()]);
    assert_eq!(after_read[0].0, "parse_json");
    assert_eq!(after_read[1].0, "write_file");
    let expected = edge_confidence(9, 9) * 0.9;
    assert!((after_read[0].1 - expected).abs() < 1e-9, "{after_read:?}");

    let after_parse = graph.predict_next(&["read_file".into(), "parse_json".into()]);
    assert_eq!(after_parse[0].0, "create_issue");
    assert!(
        after_parse
            .iter()
            .all(|(t, _)| t != "parse_json" && t != "read_file")
    );
    assert!(graph.predict_next(&["create_issue".into()]).is_empty());
}
