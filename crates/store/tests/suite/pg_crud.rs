//! Where the usage, review, artifact and tool-graph domains on PostgreSQL differ from SQLite:
//! several processes (here, stores) write one database at once — artifact versions stay
//! unique, learning neither deadlocks nor loses counts, records are seen by another process;
//! a queued record does not wait for the server; text cannot hold U+0000; and a run's usage
//! totals equal SQLite's for the same rows, bit for bit.

use std::sync::{Arc, Barrier, mpsc};
use std::time::{Duration, Instant};

use proptest::prelude::*;
use trellis_protocol::{ArtifactStatus, RunId};
use trellis_store::pg::tokio_postgres::error::SqlState;
use trellis_store::pg::{PgError, PgStore};
use trellis_store::prelude::*;
use trellis_store::{Error, ModelCallRecord, SqliteStore, StoreOptions, Synchronous};

use super::artifacts::new as artifact;
use super::pg_support::{cluster, connect};
use super::toolgraph::{exec, executions_bump_counts_and_apply_the_confidence_formula, share};
use super::usage::{call, model_calls_round_trip_in_order, tool_call};

/// Whether `err` is the server refusing a text holding U+0000.
fn refuses_nul(err: &Error) -> bool {
    match err {
        Error::Postgres(PgError::Query { source, .. }) => {
            source.code() == Some(&SqlState::CHARACTER_NOT_IN_REPERTOIRE)
        }
        _ => false,
    }
}

#[test]
fn two_stores_adding_versions_of_one_artifact_at_once_number_them_apart() {
    const STORES: usize = 3;
    const THREADS: usize = 2;
    const PUTS: usize = 15;
    let cluster = cluster();
    let db = cluster.database();
    let stores: Vec<Arc<PgStore>> = (0..STORES).map(|_| Arc::new(connect(&db))).collect();
    let run = RunId::from_string("run-race");
    let start = Arc::new(Barrier::new(STORES * THREADS));
    let handles: Vec<_> = (0..STORES * THREADS)
        .map(|i| {
            let (store, start, run) = (stores[i % STORES].clone(), start.clone(), run.clone());
            std::thread::spawn(move || {
                start.wait();
                (0..PUTS)
                    .map(|n| {
                        // Every other one of another kind: its numbering is its own.
                        let kind = if n % 2 == 0 { "plan" } else { "spec" };
                        let a = store
                            .put_artifact(artifact(&run, kind, &format!("{i}.{n}")))
                            .unwrap();
                        (a.kind, a.version, a.content)
                    })
                    .collect::<Vec<_>>()
            })
        })
        .collect();
    let mut got: Vec<(String, u32, String)> = handles
        .into_iter()
        .flat_map(|h| h.join().unwrap())
        .collect();
    got.sort();
    for kind in ["plan", "spec"] {
        let versions: Vec<u32> = got
            .iter()
            .filter(|(k, ..)| k == kind)
            .map(|(_, v, _)| *v)
            .collect();
        let n = versions.len() as u32;
        assert_eq!(versions, (1..=n).collect::<Vec<_>>(), "{kind}");
    }
    // What each store answered is what every store reads.
    let listed = stores[0].artifacts(&run).unwrap();
    assert_eq!(listed.len(), STORES * THREADS * PUTS);
    let mut read: Vec<(String, u32, String)> = listed
        .into_iter()
        .map(|a| (a.kind, a.version, a.content))
        .collect();
    read.sort();
    assert_eq!(read, got);
}

#[test]
fn two_stores_learning_at_once_neither_deadlock_nor_lose_counts() {
    const STORES: usize = 3;
    const ROUNDS: usize = 20;
    let cluster = cluster();
    let db = cluster.database();
    let stores: Vec<Arc<PgStore>> = (0..STORES).map(|_| Arc::new(connect(&db))).collect();
    let start = Arc::new(Barrier::new(STORES));
    let handles: Vec<_> = stores
        .iter()
        .enumerate()
        .map(|(i, store)| {
            let (store, start) = (store.clone(), start.clone());
            std::thread::spawn(move || {
                start.wait();
                for n in 0..ROUNDS {
                    // The same tools and edges in opposite orders, in batches and alone.
                    let forward = exec(&[("a", true), ("b", n % 3 != 0), ("c", true)]);
                    let backward = exec(&[("c", true), ("b", true), ("a", i % 2 == 0)]);
                    store
                        .record_tool_executions(vec![forward, backward.clone()])
                        .unwrap();
                    store.record_tool_execution(backward).unwrap();
                    store
                        .upsert_tool_nodes(vec![trellis_store::ToolNodeUpsert {
                            tool: ["c", "a", "b"][n % 3].into(),
                            server: None,
                            description: format!("{i}.{n}"),
                        }])
                        .unwrap();
                }
            })
        })
        .collect();
    for h in handles {
        h.join().unwrap();
    }
    let snap = stores[0].tool_graph().unwrap();
    let calls: Vec<(&str, i64)> = snap
        .nodes
        .iter()
        .map(|n| (n.tool.as_str(), n.calls))
        .collect();
    let each = (STORES * ROUNDS * 3) as i64;
    assert_eq!(calls, [("a", each), ("b", each), ("c", each)]);
    for e in &snap.edges {
        // Every edge's confidence is the formula of the counts it ended with.
        assert_eq!(
            e.confidence,
            share(e.observed_count, e.success_count),
            "{e:?}"
        );
    }
    let observed: i64 = snap.edges.iter().map(|e| e.observed_count).sum();
    assert_eq!(observed, each * 2);
}

#[test]
fn records_are_seen_by_another_store_and_after_reconnecting() {
    let cluster = cluster();
    let db = cluster.database();
    let store = connect(&db);
    let (run, rows) = model_calls_round_trip_in_order(&store);
    let snap = executions_bump_counts_and_apply_the_confidence_formula(&store);
    let other = connect(&db);
    assert_eq!(other.model_calls(&run).unwrap(), rows);
    assert_eq!(other.tool_graph().unwrap(), snap);
    drop((store, other));
    let again = connect(&db);
    assert_eq!(again.model_calls(&run).unwrap(), rows);
    assert_eq!(again.tool_graph().unwrap(), snap);
}

/// While another connection holds `tool_calls` locked, queued tool calls return at once
/// (from an async task too); a call waited for then waits for all of them, in order.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn queued_records_do_not_wait_for_the_server() {
    let cluster = cluster();
    let db = cluster.database();
    let store = Arc::new(connect(&db));
    let locker = connect(&db);
    let (locked_tx, locked) = mpsc::channel();
    let holder = std::thread::spawn(move || {
        locker
            .write(async move |c| {
                let tx = c.transaction().await?;
                tx.batch_execute("LOCK TABLE tool_calls IN ACCESS EXCLUSIVE MODE")
                    .await?;
                let _ = locked_tx.send(());
                tokio::time::sleep(Duration::from_millis(800)).await;
                tx.commit().await?;
                Ok(())
            })
            .unwrap();
    });
    locked.recv().unwrap();
    let run = RunId::from_string("run-q");
    let started = Instant::now();
    let queued = {
        let (store, run) = (store.clone(), run.clone());
        tokio::spawn(async move {
            for i in 0..100 {
                store.record_tool_call_nowait(tool_call(Some(&run), &format!("t{i:03}"), false));
            }
            started.elapsed()
        })
        .await
        .unwrap()
    };
    assert!(
        queued < Duration::from_millis(300),
        "queueing took {queued:?}"
    );
    let last = store
        .record_tool_call(tool_call(Some(&run), "t100", false))
        .unwrap();
    assert!(started.elapsed() >= Duration::from_millis(500));
    holder.join().unwrap();
    let calls = store.tool_calls(&run).unwrap();
    let tools: Vec<String> = calls.iter().map(|c| c.tool.clone()).collect();
    let want: Vec<String> = (0..=100).map(|i| format!("t{i:03}")).collect();
    assert_eq!(tools, want);
    assert_eq!(calls[100].id, last);
}

/// PostgreSQL text cannot hold U+0000 (SQLite's can). Free text — a tool call's summary, an
/// artifact's content and feedback — has it replaced by U+FFFD, so nothing is lost (a queued
/// tool call included); an identifier such as a tool-graph context holding one is refused
/// with the server's error, nothing of that write is stored, and the store goes on.
#[test]
fn nul_in_free_text_is_replaced_and_in_identifiers_refused() {
    let cluster = cluster();
    let db = cluster.database();
    let store = connect(&db);
    let run = RunId::from_string("run-nul");

    let stored = store.put_artifact(artifact(&run, "plan", "a\0b")).unwrap();
    assert_eq!(stored.content, "a\u{FFFD}b");
    assert_eq!(stored.version, 1);

    let mut call = tool_call(Some(&run), "shell", false);
    call.summary = "\0\u{1}ELF".into();
    store.record_tool_call(call.clone()).unwrap();
    store.record_tool_call_nowait(call);
    store
        .record_tool_call(tool_call(Some(&run), "read_file", false))
        .unwrap();
    let calls = store.tool_calls(&run).unwrap();
    assert_eq!(calls.len(), 3);
    assert_eq!(calls[1].summary, "\u{FFFD}\u{1}ELF");

    store
        .record_tool_execution(exec(&[("a", true), ("b", true)]))
        .unwrap();
    let before = store.tool_graph().unwrap();
    let mut bad = exec(&[("b", true), ("c", true)]);
    bad.context = "nul\0".into();
    let err = store
        .record_tool_executions(vec![exec(&[("a", true), ("b", true)]), bad])
        .unwrap_err();
    assert!(refuses_nul(&err), "{err:?}");
    assert!(err.to_string().contains("0x00"), "{err}");
    assert_eq!(store.tool_graph().unwrap(), before);

    let changed = store
        .set_artifact_status(stored.id, ArtifactStatus::ChangesRequested, Some("\0"))
        .unwrap();
    assert_eq!(changed.feedback.as_deref(), Some("\u{FFFD}"));

    // SQLite keeps such text.
    let (_dir, sqlite) = super::backends::sqlite();
    let kept = sqlite.put_artifact(artifact(&run, "plan", "a\0b")).unwrap();
    assert_eq!(kept.content, "a\0b");
}

fn model_call() -> impl Strategy<Value = ModelCallRecord> {
    let name = |names: &'static [&'static str]| {
        prop::option::weighted(0.8, prop::sample::select(names).prop_map(str::to_owned))
    };
    let cost = prop_oneof![
        2 => Just(None),
        3 => (0.0f64..0.05).prop_map(Some),
        1 => (1e-9f64..1e4).prop_map(Some),
        1 => prop::sample::select(vec![0.1, 0.2, 0.3, 1e16, -1e16, 0.0]).prop_map(Some),
    ];
    (
        name(&["plan", "code", "Review", "é"]),
        name(&["planner", "coder", "b"]),
        (0u64..1 << 40, 0u64..1 << 40, 0u64..1 << 20),
        any::<bool>(),
        prop::sample::select(vec!["ok", "ok", "failed", "cancelled"]),
        cost,
    )
        .prop_map(|(stage, agent, tokens, reported, outcome, cost_usd)| {
            let mut r = call(&RunId::from_string("x"), None, "x", (tokens.0, tokens.1));
            (r.stage, r.agent, r.cached_tokens) = (stage, agent, tokens.2);
            (r.reported, r.outcome, r.cost_usd) = (reported, outcome.into(), cost_usd);
            r
        })
}

/// Property: for the same model calls, a run's usage on PostgreSQL equals SQLite's — counts,
/// token sums, `reported` flags counted, and the costs to the last bit (SQLite's compensated
/// summation, not the server's).
#[test]
fn usage_totals_equal_sqlites_for_the_same_rows() {
    let cluster = cluster();
    let db = cluster.database();
    let pg = connect(&db);
    let dir = tempfile::tempdir().unwrap();
    let options = StoreOptions {
        synchronous: Synchronous::Normal,
        ..StoreOptions::default()
    };
    let sqlite = SqliteStore::open(dir.path().join("t.db"), options).unwrap();
    let case = std::sync::atomic::AtomicUsize::new(0);
    let config = ProptestConfig {
        cases: 48,
        ..ProptestConfig::default()
    };
    proptest!(config, |(calls in prop::collection::vec(model_call(), 0..40))| {
        let n = case.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let run = RunId::from_string(format!("run-{n}"));
        let stores: [&dyn UsageStore; 2] = [&sqlite, &pg];
        for store in stores {
            for c in &calls {
                store.record_model_call_nowait(ModelCallRecord {
                    run_id: Some(run.clone()),
                    ..c.clone()
                });
            }
        }
        // Everything queued is committed once a write waited for returns.
        sqlite.flush().unwrap();
        pg.write(async |_| Ok(())).unwrap();
        let usage = sqlite.run_usage(&run).unwrap();
        prop_assert_eq!(&pg.run_usage(&run).unwrap(), &usage);
        let strip = |rows: Vec<ModelCallRecord>| -> Vec<ModelCallRecord> {
            rows.into_iter().map(|r| ModelCallRecord { id: 0, ..r }).collect()
        };
        prop_assert_eq!(
            strip(pg.model_calls(&run).unwrap()),
            strip(sqlite.model_calls(&run).unwrap())
        );
    });
}

/// Writes per second of `store`: tool calls waited for, tool calls queued (then one waited
/// for), executions learned in batches of 50, artifact versions of one run and kind.
fn write_rates<S: UsageStore + ToolGraphStore + ArtifactStore + ?Sized>(store: &S) -> [f64; 4] {
    let run = RunId::from_string("run-rate");
    let rate = |n: usize, f: &mut dyn FnMut(usize)| {
        let started = Instant::now();
        (0..n).for_each(&mut *f);
        n as f64 / started.elapsed().as_secs_f64()
    };
    let waited = rate(300, &mut |i| {
        store
            .record_tool_call(tool_call(Some(&run), &format!("w{i}"), false))
            .unwrap();
    });
    let queued = rate(3000, &mut |i| {
        store.record_tool_call_nowait(tool_call(Some(&run), &format!("q{i}"), false));
        if i == 2999 {
            store
                .record_tool_call(tool_call(Some(&run), "last", false))
                .unwrap();
        }
    });
    let tools = [
        "read_file",
        "grep",
        "parse",
        "apply_patch",
        "shell",
        "list_dir",
    ];
    let learned = 50.0
        * rate(20, &mut |i| {
            let batch = (0..50)
                .map(|j| {
                    let t = |k: usize| {
                        (
                            tools[(i + j + k) % tools.len()],
                            !(i + j + k).is_multiple_of(7),
                        )
                    };
                    exec(&[t(0), t(1), t(2)])
                })
                .collect();
            store.record_tool_executions(batch).unwrap();
        });
    let versions = rate(200, &mut |i| {
        store
            .put_artifact(artifact(&run, "plan", &format!("v{i}")))
            .unwrap();
    });
    [waited, queued, learned, versions]
}

#[test]
#[ignore = "a measurement: cargo nextest run -p trellis-store --features postgres \
            --run-ignored only pg_crud_write_rates --no-capture"]
fn pg_crud_write_rates() {
    let cluster = cluster();
    let names = [
        "tool calls waited for",
        "tool calls queued",
        "executions learned (batches of 50)",
        "artifact versions",
    ];
    let mut rates = [
        [Vec::new(), Vec::new(), Vec::new(), Vec::new()],
        Default::default(),
    ];
    // Rounds outside, backends inside: a change in the machine's load hits both alike.
    for _ in 0..3 {
        let (_dir, sqlite) = super::backends::sqlite();
        let db = cluster.database();
        let pg = connect(&db);
        for (b, got) in [write_rates(&sqlite), write_rates(&pg)]
            .into_iter()
            .enumerate()
        {
            for (i, r) in got.into_iter().enumerate() {
                rates[b][i].push(r);
            }
        }
    }
    for (i, name) in names.iter().enumerate() {
        let median = |v: &mut Vec<f64>| {
            v.sort_by(f64::total_cmp);
            v[1]
        };
        let (s, p) = (median(&mut rates[0][i]), median(&mut rates[1][i]));
        eprintln!("{name}: SQLite {s:.0}/s, PostgreSQL {p:.0}/s");
    }
}
