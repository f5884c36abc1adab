//! The tool knowledge graph's tables: executions bump node and edge counts in one
//! transaction with the caller's confidence formula, descriptions and embeddings are kept
//! apart from the counts, speculation outcomes list the newest N oldest first — on both
//! backends.

use trellis_store::prelude::*;
use trellis_store::{
    CachedEmbedding, CallOutcome, EdgeObservation, NewSpeculation, NewToolExecution,
    SpeculationOutcome, StoreOptions, ToolGraphSnapshot, ToolNodeUpsert,
};

use super::backends::sqlite;

/// A formula whose value the test can predict: the success share plus a thousandth per
/// observation.
pub fn share(observed: i64, successes: i64) -> f64 {
    successes as f64 / observed as f64 + observed as f64 / 1000.0
}

pub fn exec(calls: &[(&str, bool)]) -> NewToolExecution {
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

/// Learns from three executions and refreshes a description; answers the graph, for the
/// reopening tests.
pub fn executions_bump_counts_and_apply_the_confidence_formula(
    store: &dyn ToolGraphStore,
) -> ToolGraphSnapshot {
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

    // Refreshing a description keeps the counts.
    store
        .upsert_tool_nodes(vec![ToolNodeUpsert {
            tool: "read_file".into(),
            server: Some("fs".into()),
            description: "Read a text file".into(),
        }])
        .unwrap();
    let snap = store.tool_graph().unwrap();
    let read = snap.nodes.iter().find(|n| n.tool == "read_file").unwrap();
    assert_eq!(
        (read.calls, read.description.as_str()),
        (3, "Read a text file")
    );
    assert_eq!(snap.edges.len(), 2);
    snap
}
both!(executions_bump_counts_and_apply_the_confidence_formula);

#[test]
fn the_tool_graph_survives_reopening() {
    let (dir, store) = sqlite();
    let snap = executions_bump_counts_and_apply_the_confidence_formula(&store);
    drop(store);
    let store =
        trellis_store::SqliteStore::open_workspace(dir.path(), StoreOptions::default()).unwrap();
    assert_eq!(store.tool_graph().unwrap(), snap);
}

fn embeddings_are_cached_with_their_embedder_key(store: &dyn ToolGraphStore) {
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
both!(embeddings_are_cached_with_their_embedder_key);

fn speculations_list_the_last_n_oldest_first(store: &dyn ToolGraphStore) {
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
    assert!(store.speculations(0).unwrap().is_empty());
}
both!(speculations_list_the_last_n_oldest_first);

fn upsert(tool: &str, description: &str) -> ToolNodeUpsert {
    ToolNodeUpsert {
        tool: tool.into(),
        server: None,
        description: description.into(),
    }
}

fn node<'a>(snap: &'a ToolGraphSnapshot, tool: &str) -> &'a trellis_store::ToolNodeRecord {
    snap.nodes.iter().find(|n| n.tool == tool).unwrap()
}

/// Lets the millisecond clock move on, so a new `updated_ms` shows.
fn tick() {
    std::thread::sleep(std::time::Duration::from_millis(5));
}

/// A list naming a tool twice ends as if applied entry by entry: the last description or
/// embedding stays, and `updated_ms` moves when any entry changed the tool on the way.
fn lists_naming_a_tool_twice_apply_in_order(store: &dyn ToolGraphStore) {
    store.upsert_tool_nodes(vec![upsert("a", "x")]).unwrap();
    let t0 = node(&store.tool_graph().unwrap(), "a").updated_ms;
    tick();
    store
        .upsert_tool_nodes(vec![upsert("a", "x"), upsert("a", "x")])
        .unwrap();
    let same = store.tool_graph().unwrap();
    assert_eq!((node(&same, "a").updated_ms, same.nodes.len()), (t0, 1));
    tick();
    store
        .upsert_tool_nodes(vec![upsert("a", "y"), upsert("b", "b"), upsert("a", "x")])
        .unwrap();
    let snap = store.tool_graph().unwrap();
    let a = node(&snap, "a");
    assert_eq!(a.description, "x");
    assert!(a.updated_ms > t0, "{} > {t0}", a.updated_ms);
    let t1 = a.updated_ms;
    tick();
    store.upsert_tool_nodes(vec![upsert("a", "x")]).unwrap();
    assert_eq!(node(&store.tool_graph().unwrap(), "a").updated_ms, t1);
    store.upsert_tool_nodes(Vec::new()).unwrap();

    let cached = |key: &str, x: f32| CachedEmbedding {
        tool: "a".into(),
        embedder: key.into(),
        vector: vec![x, -x],
    };
    store
        .set_tool_embeddings(vec![cached("m1", 1.0), cached("m2", 2.0)])
        .unwrap();
    assert_eq!(store.tool_embeddings().unwrap(), [cached("m2", 2.0)]);
    store.set_tool_embeddings(Vec::new()).unwrap();
}
both!(lists_naming_a_tool_twice_apply_in_order);

/// Ten times the observations plus the successes: unlike [`share`], easy to tell apart.
fn tens(observed: i64, successes: i64) -> f64 {
    (observed * 10 + successes) as f64
}

/// One batch: a tool called twice in one execution counts twice, an edge observed by two
/// executions gets the last one's formula applied to its final counts; no executions is
/// id 0.
fn a_batch_counts_every_call_and_takes_the_last_formula(store: &dyn ToolGraphStore) {
    assert_eq!(store.record_tool_executions(Vec::new()).unwrap(), 0);
    let first = store
        .record_tool_execution(exec(&[("a", true), ("b", true)]))
        .unwrap();
    let mut second = exec(&[("a", true), ("b", false)]);
    second.confidence = tens;
    let last = store
        .record_tool_executions(vec![
            exec(&[("a", false), ("a", true)]),
            second,
            exec(&[("c", true)]),
        ])
        .unwrap();
    assert_eq!(last, first + 3);
    let snap = store.tool_graph().unwrap();
    let counts: Vec<(&str, i64, i64, &str)> = snap
        .nodes
        .iter()
        .map(|n| {
            (
                n.tool.as_str(),
                n.calls,
                n.successes,
                n.description.as_str(),
            )
        })
        .collect();
    assert_eq!(counts, [("a", 4, 3, ""), ("b", 2, 1, ""), ("c", 1, 1, "")]);
    let edges: Vec<(&str, &str, i64, i64, f64)> = snap
        .edges
        .iter()
        .map(|e| {
            let (f, t) = (e.from.as_str(), e.to.as_str());
            (f, t, e.observed_count, e.success_count, e.confidence)
        })
        .collect();
    assert_eq!(
        edges,
        [("a", "a", 1, 0, share(1, 0)), ("a", "b", 2, 1, tens(2, 1)),]
    );
}
both!(a_batch_counts_every_call_and_takes_the_last_formula);

/// A NaN confidence is refused (SQLite stores a NaN as NULL, which the column refuses),
/// and the whole batch with it: nothing of it is counted.
fn a_nan_confidence_fails_the_whole_write(store: &dyn ToolGraphStore) {
    store
        .record_tool_execution(exec(&[("a", true), ("b", true)]))
        .unwrap();
    let before = store.tool_graph().unwrap();
    let mut nan = exec(&[("b", true), ("c", true)]);
    nan.confidence = |_, _| f64::NAN;
    let err = store
        .record_tool_executions(vec![exec(&[("a", true), ("b", true)]), nan])
        .unwrap_err();
    assert!(!err.to_string().is_empty());
    assert_eq!(store.tool_graph().unwrap(), before);
    assert!(
        store
            .record_speculation(NewSpeculation {
                context: "c".into(),
                tools: vec!["a".into()],
                confidence: f64::NAN,
                outcome: SpeculationOutcome::Wasted,
            })
            .is_err()
    );
    assert!(store.speculations(10).unwrap().is_empty());
    // The store goes on.
    let id = store
        .record_tool_execution(exec(&[("a", true), ("b", true)]))
        .unwrap();
    assert!(id > 0);
}
both!(a_nan_confidence_fails_the_whole_write);

/// The graph is read from one snapshot: while executions `x → y` are learned one
/// transaction at a time, every read finds `x`'s calls equal to the edge's observations.
fn the_graph_is_read_from_one_snapshot(store: &dyn ToolGraphStore) {
    const LEARNED: usize = 60;
    std::thread::scope(|s| {
        let learner = s.spawn(|| {
            for _ in 0..LEARNED {
                store
                    .record_tool_execution(exec(&[("x", true), ("y", true)]))
                    .unwrap();
            }
        });
        let mut reads = 0;
        while !learner.is_finished() || reads == 0 {
            let snap = store.tool_graph().unwrap();
            let calls = snap.nodes.first().map_or(0, |n| n.calls);
            let observed = snap.edges.first().map_or(0, |e| e.observed_count);
            assert_eq!(calls, observed, "{snap:?}");
            reads += 1;
        }
        learner.join().unwrap();
    });
    assert_eq!(store.tool_graph().unwrap().nodes[0].calls, LEARNED as i64);
}
both!(the_graph_is_read_from_one_snapshot);
