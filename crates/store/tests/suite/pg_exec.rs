//! The PostgreSQL executor: callable from async code and from many threads at once; reads
//! are read-only; a failing, erring or panicking job answers its caller and the lane goes
//! on; connections the server cut off are reopened.

use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

use trellis_store::Error;
use trellis_store::pg::{JobError, PgError, PgOptions, PgStore};

use super::pg_support::{cluster, connect};

fn count(store: &PgStore, table: &'static str) -> i64 {
    let sql = match table {
        "dag_checkpoints" => "SELECT count(*) FROM dag_checkpoints",
        "scratch" => "SELECT count(*) FROM scratch",
        other => panic!("no count query for {other}"),
    };
    store
        .read(async |c| Ok(c.query_one(sql, &[]).await?.get(0)))
        .unwrap()
}

fn checkpoint(store: &PgStore, id: String) {
    store
        .write(async move |c| {
            c.execute(
                "INSERT INTO dag_checkpoints (id, state, updated_ms) VALUES ($1, '{}', 1)",
                &[&id],
            )
            .await?;
            Ok(())
        })
        .unwrap();
}

#[tokio::test]
async fn the_executor_answers_inside_a_current_thread_runtime() {
    let cluster = cluster();
    let db = cluster.database();
    let store = Arc::new(connect(&db));
    let n: i64 = store
        .read(async |c| Ok(c.query_one("SELECT 41::int8 + 1", &[]).await?.get(0)))
        .unwrap();
    assert_eq!(n, 42);
    checkpoint(&store, "d1".into());
    // From a task of the runtime, too.
    let s = store.clone();
    let counted = tokio::spawn(async move { count(&s, "dag_checkpoints") })
        .await
        .unwrap();
    assert_eq!(counted, 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_executor_answers_tasks_of_a_multi_thread_runtime() {
    let cluster = cluster();
    let db = cluster.database();
    let store = Arc::new(connect(&db));
    let tasks: Vec<_> = (0..8)
        .map(|t| {
            let store = store.clone();
            tokio::spawn(async move {
                for i in 0..10 {
                    checkpoint(&store, format!("t{t}-{i}"));
                    tokio::task::yield_now().await;
                }
            })
        })
        .collect();
    for t in tasks {
        t.await.unwrap();
    }
    assert_eq!(count(&store, "dag_checkpoints"), 80);
}

#[test]
fn threads_share_the_store_and_each_ones_writes_keep_their_order() {
    let cluster = cluster();
    let db = cluster.database();
    let store = Arc::new(connect(&db));
    store
        .write(async |c| {
            c.batch_execute(
                "CREATE TABLE scratch (id BIGSERIAL PRIMARY KEY, thread BIGINT, n BIGINT)",
            )
            .await?;
            Ok(())
        })
        .unwrap();
    const THREADS: i64 = 8;
    const WRITES: i64 = 40;
    let start = Arc::new(Barrier::new(THREADS as usize));
    let handles: Vec<_> = (0..THREADS)
        .map(|t| {
            let (store, start) = (store.clone(), start.clone());
            std::thread::spawn(move || {
                start.wait();
                for n in 0..WRITES {
                    store
                        .write(async move |c| {
                            c.execute("INSERT INTO scratch (thread, n) VALUES ($1, $2)", &[&t, &n])
                                .await?;
                            Ok(())
                        })
                        .unwrap();
                    // A read after a write sees it (the write has committed).
                    let mine: i64 = store
                        .read(async move |c| {
                            let sql = "SELECT count(*) FROM scratch WHERE thread = $1";
                            Ok(c.query_one(sql, &[&t]).await?.get(0))
                        })
                        .unwrap();
                    assert_eq!(mine, n + 1);
                }
            })
        })
        .collect();
    for h in handles {
        h.join().unwrap();
    }
    assert_eq!(count(&store, "scratch"), THREADS * WRITES);
    // The write lane keeps each thread's writes in the order sent.
    let orders: Vec<(i64, Vec<i64>)> = store
        .read(async |c| {
            let rows = c
                .query(
                    "SELECT thread, array_agg(n ORDER BY id) FROM scratch GROUP BY thread",
                    &[],
                )
                .await?;
            Ok(rows.iter().map(|r| (r.get(0), r.get(1))).collect())
        })
        .unwrap();
    assert_eq!(orders.len() as i64, THREADS);
    for (_, ns) in orders {
        assert_eq!(ns, (0..WRITES).collect::<Vec<_>>());
    }
}

#[test]
fn reads_cannot_write() {
    let cluster = cluster();
    let db = cluster.database();
    let store = connect(&db);
    let err = store
        .read(async |c| {
            c.execute(
                "INSERT INTO dag_checkpoints (id, state, updated_ms) VALUES ('x', '{}', 1)",
                &[],
            )
            .await?;
            Ok(())
        })
        .unwrap_err();
    assert!(
        matches!(&err, Error::Postgres(PgError::Query { .. })),
        "{err:?}"
    );
    let msg = err.to_string();
    assert!(
        msg.contains("read-only transaction") && msg.contains("[store] url"),
        "{msg}"
    );
    assert_eq!(count(&store, "dag_checkpoints"), 0);
}

#[test]
fn a_failing_erring_or_panicking_job_answers_and_the_lane_goes_on() {
    let cluster = cluster();
    let db = cluster.database();
    let store = connect(&db);
    let err = store
        .read(async |c| Ok(c.query_one("SELEC 1", &[]).await?.get::<_, i32>(0)))
        .unwrap_err();
    assert!(err.to_string().contains("syntax error"), "{err}");
    assert!(!err.is_retryable());

    let err = store
        .read(async |_| -> Result<(), JobError> { Err(Error::RunNotFound("r9".into()).into()) })
        .unwrap_err();
    assert!(
        matches!(&err, Error::RunNotFound(id) if id == "r9"),
        "{err:?}"
    );

    for _ in 0..2 {
        let err = store
            .write(async |_| -> Result<(), JobError> { panic!("a job's bug") })
            .unwrap_err();
        assert!(
            matches!(&err, Error::Postgres(PgError::Closed { .. })),
            "{err:?}"
        );
        let err = store
            .read(async |_| -> Result<(), JobError> { panic!("a job's bug") })
            .unwrap_err();
        assert!(err.to_string().contains("without an answer"), "{err}");
    }
    // Both lanes reconnect and serve.
    checkpoint(&store, "after".into());
    assert_eq!(count(&store, "dag_checkpoints"), 1);
}

#[test]
fn dropping_the_store_closes_its_connections() {
    let cluster = cluster();
    let db = cluster.database();
    let store = connect(&db);
    checkpoint(&store, "d".into());
    assert_eq!(count(&store, "dag_checkpoints"), 1);
    let sessions = format!(
        "SELECT count(*) FROM pg_stat_activity WHERE datname = '{}' AND pid <> pg_backend_pid()",
        db.name()
    );
    assert_eq!(db.psql(&sessions).trim(), "2");
    drop(store);
    let deadline = Instant::now() + Duration::from_secs(5);
    while db.psql(&sessions).trim() != "0" {
        assert!(Instant::now() < deadline, "connections left open");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Calls `f` until it succeeds (at most 5 s), checking each failure is a retryable error
/// naming the setting; answers how many calls failed.
fn until_ok(mut f: impl FnMut() -> trellis_store::Result<()>) -> usize {
    let deadline = Instant::now() + Duration::from_secs(5);
    let mut failed = 0;
    loop {
        match f() {
            Ok(()) => return failed,
            Err(e) => {
                assert!(e.is_retryable(), "{e}");
                assert!(e.to_string().contains("[store] url"), "{e}");
                assert!(Instant::now() < deadline, "still failing: {e}");
                failed += 1;
                std::thread::sleep(Duration::from_millis(20));
            }
        }
    }
}

#[test]
fn connections_the_server_cut_off_are_reopened() {
    let cluster = cluster();
    let db = cluster.database();
    let store = PgStore::connect(
        &db.url(),
        PgOptions {
            readers: 1,
            ..PgOptions::default()
        },
    )
    .unwrap();
    checkpoint(&store, "before".into());
    assert_eq!(count(&store, "dag_checkpoints"), 1);
    // The writer's and the reader's connection.
    assert_eq!(cluster.terminate_connections(db.name()), 2);
    let mut n = 0;
    until_ok(|| {
        n += 1;
        let id = format!("after-{n}");
        store.write(async move |c| {
            c.execute(
                "INSERT INTO dag_checkpoints (id, state, updated_ms) VALUES ($1, '{}', 1)",
                &[&id],
            )
            .await?;
            Ok(())
        })
    });
    until_ok(|| {
        store.read(async |c| {
            c.query_one("SELECT 1", &[]).await?;
            Ok(())
        })
    });
    assert_eq!(count(&store, "dag_checkpoints"), 2);
}

/// How read throughput scales with the read connections ([`PgOptions::readers`]): 8 threads
/// each load a run's events (4 batches of 1.5 KB) 1,000 times, for 1, 2, 3, 4 and 8
/// readers, 5 rounds each; prints calls per second. The default, `DEFAULT_READERS`, is from it.
#[test]
#[ignore = "a measurement: cargo nextest run -p trellis-store --features postgres \
            --run-ignored only pg_readers_throughput --no-capture"]
fn pg_readers_throughput() {
    const RUNS: i64 = 200;
    const THREADS: i64 = 8;
    const CALLS: i64 = 1000;
    let cluster = cluster();
    let db = cluster.database();
    let seed = connect(&db);
    seed.write(async |c| {
        let mut x: u64 = 0x2545_f491_4f6c_dd1d;
        for rk in 0..RUNS {
            for batch in 0..4_i64 {
                let blob: Vec<u8> = (0..1536)
                    .map(|_| {
                        x ^= x << 13;
                        x ^= x >> 7;
                        x ^= x << 17;
                        x.to_le_bytes()[0]
                    })
                    .collect();
                let key = (rk << 32) | (batch * 10 + 1);
                c.execute(
                    "INSERT INTO events (key, last_seq, data) VALUES ($1, $2, $3)",
                    &[&key, &(batch * 10 + 10), &blob],
                )
                .await?;
            }
        }
        Ok(())
    })
    .unwrap();
    drop(seed);
    // Rounds outside, configurations inside: a change in the machine's load hits all alike.
    const READERS: [usize; 5] = [1, 2, 3, 4, 8];
    let mut rates = vec![Vec::new(); READERS.len()];
    for _ in 0..5 {
        for (i, readers) in READERS.into_iter().enumerate() {
            rates[i].push(read_rate(&db.url(), readers, RUNS, THREADS, CALLS));
        }
    }
    for (readers, mut rates) in READERS.into_iter().zip(rates) {
        rates.sort_by(f64::total_cmp);
        let all: Vec<String> = rates.iter().map(|r| format!("{r:.0}")).collect();
        eprintln!(
            "readers {readers}: median {:.0} calls/s ({})",
            rates[2],
            all.join(" ")
        );
    }
}

/// Calls per second of `threads` threads each loading `calls` runs' events through a store
/// with `readers` read connections.
fn read_rate(url: &str, readers: usize, runs: i64, threads: i64, calls: i64) -> f64 {
    let options = PgOptions {
        readers,
        ..PgOptions::default()
    };
    let store = Arc::new(PgStore::connect(url, options).unwrap());
    let load = |store: &PgStore, rk: i64| {
        store
            .read(async move |c| {
                let rows = c
                    .query(
                        "SELECT key, last_seq, data FROM events
                         WHERE key BETWEEN $1 AND $2 ORDER BY key",
                        &[&(rk << 32), &((rk << 32) | 0xffff_ffff)],
                    )
                    .await?;
                Ok(rows.len())
            })
            .unwrap()
    };
    // Open every reader before timing.
    for rk in 0..(readers as i64 * 4) {
        assert_eq!(load(&store, rk % runs), 4);
    }
    let started = Instant::now();
    let handles: Vec<_> = (0..threads)
        .map(|t| {
            let store = store.clone();
            std::thread::spawn(move || {
                for i in 0..calls {
                    assert_eq!(load(&store, (t * 37 + i) % runs), 4);
                }
            })
        })
        .collect();
    for h in handles {
        h.join().unwrap();
    }
    (threads * calls) as f64 / started.elapsed().as_secs_f64()
}
