//! What the run journal's tests need beyond the traits, for both backends: [`Backdoor`] (wait
//! for queued writes, the counters, rows written behind the store's back), `two!(body)`,
//! which runs `body(&a, &b)` with two stores on one database, as two processes would hold
//! them, and `held!(body)`, which runs `body(&store, hold)` where a [`Hold`] keeps the
//! store's writer from committing until released.

use std::path::Path;

use trellis_graph::Journal;
use trellis_protocol::RunId;
use trellis_protocol::records::Owner;
use trellis_store::prelude::*;
use trellis_store::{SqliteStore, StoreStats, hostname};

/// A run journal under test: the store's traits, and what a test does behind them.
pub trait Backdoor: RunStore + Journal {
    /// Waits until every write sent before is committed.
    fn flush_writes(&self);

    /// This process, as its claims name it.
    fn me(&self) -> Owner;

    /// The counters of the journal's writes.
    fn journal_counters(&self) -> StoreStats;

    /// Writes a claim as if process `pid` on this host had taken it.
    fn claim_as(&self, run: &RunId, pid: u32);

    /// Queues a command body as it is, parsable or not.
    fn raw_command(&self, run: &RunId, body: &str);

    /// Replaces the blob of every event row; answers how many rows changed.
    fn set_event_blobs(&self, blob: &[u8]) -> u64;
}

impl Backdoor for SqliteStore {
    fn flush_writes(&self) {
        self.flush().unwrap();
    }

    fn me(&self) -> Owner {
        self.owner().clone()
    }

    fn journal_counters(&self) -> StoreStats {
        self.stats()
    }

    fn claim_as(&self, run: &RunId, pid: u32) {
        rusqlite::Connection::open(self.db_path())
            .unwrap()
            .execute(
                "INSERT OR REPLACE INTO run_owners (run_id, pid, host, start_time, claimed_at, heartbeat)
                 VALUES (?1, ?2, ?3, NULL, 0, 0)",
                rusqlite::params![run.as_str(), pid, hostname()],
            )
            .unwrap();
    }

    fn raw_command(&self, run: &RunId, body: &str) {
        rusqlite::Connection::open(self.db_path())
            .unwrap()
            .execute(
                "INSERT INTO commands (run_id, created_at, body) VALUES (?1, 0, ?2)",
                [run.as_str(), body],
            )
            .unwrap();
    }

    fn set_event_blobs(&self, blob: &[u8]) -> u64 {
        rusqlite::Connection::open(self.db_path())
            .unwrap()
            .execute("UPDATE events SET data = ?1", [blob])
            .unwrap() as u64
    }
}

#[cfg(feature = "postgres")]
impl Backdoor for trellis_store::pg::PgStore {
    fn flush_writes(&self) {
        self.write(async |_| Ok(())).unwrap();
    }

    fn me(&self) -> Owner {
        self.owner().clone()
    }

    fn journal_counters(&self) -> StoreStats {
        self.journal_stats()
    }

    fn claim_as(&self, run: &RunId, pid: u32) {
        let (run, pid, host) = (run.to_string(), i64::from(pid), hostname());
        self.write(async move |c| {
            c.execute(
                "INSERT INTO run_owners (run_id, pid, host, start_time, claimed_at, heartbeat)
                 VALUES ($1, $2, $3, NULL, 0, 0)
                 ON CONFLICT (run_id) DO UPDATE SET pid = $2, host = $3, start_time = NULL,
                     claimed_at = 0, heartbeat = 0",
                &[&run, &pid, &host],
            )
            .await?;
            Ok(())
        })
        .unwrap();
    }

    fn raw_command(&self, run: &RunId, body: &str) {
        let (run, body) = (run.to_string(), body.to_owned());
        self.write(async move |c| {
            c.execute(
                "INSERT INTO commands (run_id, created_at, body) VALUES ($1, 0, $2)",
                &[&run, &body],
            )
            .await?;
            Ok(())
        })
        .unwrap();
    }

    fn set_event_blobs(&self, blob: &[u8]) -> u64 {
        let blob = blob.to_vec();
        self.write(async move |c| Ok(c.execute("UPDATE events SET data = $1", &[&blob]).await?))
            .unwrap()
    }
}

/// Lets the writer go on.
pub type Release = Box<dyn FnOnce()>;

/// Keeps a store's writer from committing until the [`Release`] it answers is called, so what
/// is appended meanwhile queues up: the SQLite file's write lock taken by another connection,
/// or the PostgreSQL write lane held by a job.
pub type Hold<'a> = &'a dyn Fn() -> Release;

/// Holds the write lock of the SQLite file at `path`.
pub fn hold_file(path: &Path) -> Release {
    let lock = super::group_commit::hold_write_lock(path);
    Box::new(move || lock.execute_batch("ROLLBACK").unwrap())
}

/// Holds the write lane of `store` with a job of another thread; returns once the job runs,
/// so what is sent next queues behind it.
#[cfg(feature = "postgres")]
pub fn hold_lane(store: &std::sync::Arc<trellis_store::pg::PgStore>) -> Release {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::time::Duration;
    let (running, release) = (
        Arc::new(AtomicBool::new(false)),
        Arc::new(AtomicBool::new(false)),
    );
    let job = {
        let (store, running, release) = (store.clone(), running.clone(), release.clone());
        std::thread::spawn(move || {
            store
                .write(async move |_| {
                    running.store(true, Ordering::SeqCst);
                    while !release.load(Ordering::SeqCst) {
                        tokio::time::sleep(Duration::from_millis(1)).await;
                    }
                    Ok(())
                })
                .unwrap();
        })
    };
    while !running.load(Ordering::SeqCst) {
        std::thread::sleep(Duration::from_millis(1));
    }
    Box::new(move || {
        release.store(true, Ordering::SeqCst);
        job.join().unwrap();
    })
}

/// `held!(body)`: tests `body::sqlite` and (feature `postgres`) `body::postgres`, each calling
/// `body(&store, hold)` with a fresh store of its backend and the [`Hold`] of its writer.
macro_rules! held {
    ($body:ident) => {
        mod $body {
            #[test]
            fn sqlite() {
                let (_dir, store) = $crate::suite::backends::sqlite();
                let path = store.db_path().to_owned();
                super::$body(&store, &move || {
                    $crate::suite::run_support::hold_file(&path)
                });
            }

            #[cfg(feature = "postgres")]
            #[test]
            fn postgres() {
                let cluster = trellis_test_pg::Cluster::shared();
                let db = cluster.database();
                let store = std::sync::Arc::new($crate::suite::pg_support::connect(&db));
                let lane = store.clone();
                super::$body(&*store, &move || {
                    $crate::suite::run_support::hold_lane(&lane)
                });
            }
        }
    };
}

/// `two!(body)`: tests `body::sqlite` and (feature `postgres`) `body::postgres`, each calling
/// `body(&a, &b)` with two stores of its backend on one fresh database.
macro_rules! two {
    ($body:ident) => {
        mod $body {
            #[test]
            fn sqlite() {
                let (_dir, a) = $crate::suite::backends::sqlite();
                let b = trellis_store::SqliteStore::open(a.db_path(), Default::default()).unwrap();
                super::$body(&a, &b);
            }

            #[cfg(feature = "postgres")]
            #[test]
            fn postgres() {
                let cluster = trellis_test_pg::Cluster::shared();
                let db = cluster.database();
                let a = $crate::suite::pg_support::connect(&db);
                let b = $crate::suite::pg_support::connect(&db);
                super::$body(&a, &b);
            }
        }
    };
}
