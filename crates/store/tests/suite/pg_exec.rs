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
