//! The tool knowledge graph's tables: executions bump node and edge counts in one
//! transaction with the caller's confidence formula, descriptions and embeddings are kept
//! apart from the counts, speculation outcomes list the newest N oldest first.

use trellis_store::prelude::*;
use trellis_store::{
    CachedEmbedding, CallOutcome, EdgeObservation, NewSpeculation, NewToolExecution,
    SpeculationOutcome, StoreOptions, ToolNodeUpsert,
};

use super::fixtures::store;

/// A formula whose value the test can predict: the success share plus a thousandth per
/// observation.
fn share(observed: i64, successes: i64) -> f64 {
    successes as f64 / observed as f64 + observed as f64 / 1000.0
}

fn exec(calls: &[(&str, bool)]) -> NewToolExecution {
    let calls: Vec<CallOutcome> = calls
        .iter()
        .map(|(t, ok)| CallOutcome {
            tool: (*t).into(),
            ok: *ok,
        })
        .collect();
    let edges = calls
        .windows(2)
        .map(|w| EdgeObservation {
            from: w[0].tool.clone(),
            to: w[1].tool.clone(),
            ok: w[0].ok && w[1].ok,
        })
        .collect();
    NewToolExecution {
        context: "read and parse".into(),
        calls,
        edges,
        confidence: share,
    }
}

#[test]
fn executions_bump_counts_and_apply_the_confidence_formula() {
    let (dir, store) = store();
    store
        .upsert_tool_nodes(vec![ToolNodeUpsert {
            tool: "read_file".into(),
            server: Some("fs".into()),
            description: "Read a file".into(),
        }])
        .unwrap();
    let first = store
        .record_tool_execution(exec(&[("read_file", true), ("parse", true)]))
        .unwrap();
    let last = store
        .record_tool_executions(vec![
            exec(&[("read_file", true), ("parse", false)]),
            exec(&[("read_file", true), ("parse", true), ("create", true)]),
        ])
        .unwrap();
    assert!(last > first);

    let snap = store.tool_graph().unwrap();
    let names: Vec<&str> = snap.nodes.iter().map(|n| n.tool.as_str()).collect();
    assert_eq!(names, ["create", "parse", "read_file"]);
    let read = &snap.nodes[2];
    assert_eq!(
        (read.calls, read.successes, read.description.as_str()),
        (3, 3, "Read a file")
    );
    assert_eq!(read.server.as_deref(), Some("fs"));
    let parse = &snap.nodes[1];
    assert_eq!((parse.calls, parse.successes), (3, 2));

    let e = snap
        .edges
        .iter()
        .find(|e| e.from == "read_file" && e.to == "parse")
        .unwrap();
    assert_eq!((e.observed_count, e.success_count), (3, 2));
    assert!((e.confidence - share(3, 2)).abs() < 1e-12);
    assert_eq!(snap.edges.len(), 2);

    // Refreshing a description keeps the counts; everything survives reopening.
    store
        .upsert_tool_nodes(vec![ToolNodeUpsert {
            tool: "read_file".into(),
            server: Some("fs".into()),
            description: "Read a text file".into(),
        }])
        .unwrap();
    drop(store);
    let store =
        trellis_store::SqliteStore::open_workspace(dir.path(), StoreOptions::default()).unwrap();
    let snap = store.tool_graph().unwrap();
    let read = snap.nodes.iter().find(|n| n.tool == "read_file").unwrap();
    assert_eq!(
        (read.calls, read.description.as_str()),
        (3, "Read a text file")
    );
    assert_eq!(snap.edges.len(), 2);
}

#[test]
fn embeddings_are_cached_with_their_embedder_key() {
    let (_dir, store) = store();
    let cached = |tool: &str, key: &str, vector: Vec<f32>| CachedEmbedding {
        tool: tool.into(),
        embedder: key.into(),
        vector,
    };
    store
        .set_tool_embeddings(vec![
            cached("read_file", "m1:abc", vec![0.5, -1.25, 3.0]),
            cached("parse", "m1:def", vec![1.0]),
        ])
        .unwrap();
    assert_eq!(
        store.tool_embeddings().unwrap(),
        [
            cached("parse", "m1:def", vec![1.0]),
            cached("read_file", "m1:abc", vec![0.5, -1.25, 3.0])
        ]
    );
    // A node created by its embedding takes a description later, keeping the vector; a new
    // vector replaces the old one and its key.
    store
        .upsert_tool_nodes(vec![ToolNodeUpsert {
            tool: "read_file".into(),
            server: None,
            description: "Read".into(),
        }])
        .unwrap();
    store
        .set_tool_embeddings(vec![cached("parse", "m2:def", vec![2.0, 2.0])])
        .unwrap();
    assert_eq!(
        store.tool_embeddings().unwrap(),
        [
            cached("parse", "m2:def", vec![2.0, 2.0]),
            cached("read_file", "m1:abc", vec![0.5, -1.25, 3.0])
        ]
    );
    let snap = store.tool_graph().unwrap();
    assert_eq!(snap.nodes[1].description, "Read");
}

#[test]
fn speculations_list_the_last_n_oldest_first() {
    let (_dir, store) = store();
    let outcomes = [
        SpeculationOutcome::Used,
        SpeculationOutcome::Wasted,
        SpeculationOutcome::Failed,
        SpeculationOutcome::Used,
    ];
    for (i, outcome) in outcomes.into_iter().enumerate() {
        store
            .record_speculation(NewSpeculation {
                context: format!("c{i}"),
                tools: vec!["read_file".into(), "parse".into()],
                confidence: 0.9,
                outcome,
            })
            .unwrap();
    }
    let last = store.speculations(3).unwrap();
    let got: Vec<(&str, SpeculationOutcome)> = last
        .iter()
        .map(|s| (s.context.as_str(), s.outcome))
        .collect();
    assert_eq!(
        got,
        [
            ("c1", SpeculationOutcome::Wasted),
            ("c2", SpeculationOutcome::Failed),
            ("c3", SpeculationOutcome::Used)
        ]
    );
    assert_eq!(last[0].tools, ["read_file", "parse"]);
    assert_eq!(store.speculations(100).unwrap().len(), 4);
}
