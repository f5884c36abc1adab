//! The suite runs each domain's tests against both backends: a test body is a function of
//! the domain's trait object, and `both!(name)` makes `name::sqlite` (a fresh file store)
//! and, with the feature `postgres`, `name::postgres` (a fresh database on the suite's
//! cluster, `trellis_test_pg::Cluster::shared`) run it.

use tempfile::TempDir;
use trellis_store::{SqliteStore, StoreOptions};

/// A fresh SQLite workspace store; keep the `TempDir` alive as long as the store.
pub fn sqlite() -> (TempDir, SqliteStore) {
    let dir = tempfile::tempdir().unwrap();
    let store = SqliteStore::open_workspace(dir.path(), StoreOptions::default()).unwrap();
    (dir, store)
}

/// `both!(body)`: tests `body::sqlite` and `body::postgres`, each calling `body(&store)` on a
/// fresh store of its backend. `both!(async body)` does the same for an `async fn body`.
#[allow(unused_macros)] // until the domain modules use it
macro_rules! both {
    ($body:ident) => {
        mod $body {
            #[test]
            fn sqlite() {
                let (_dir, store) = $crate::suite::backends::sqlite();
                super::$body(&store);
            }

            #[cfg(feature = "postgres")]
            #[test]
            fn postgres() {
                let cluster = trellis_test_pg::Cluster::shared();
                let db = cluster.database();
                let store = $crate::suite::pg_support::connect(&db);
                super::$body(&store);
            }
        }
    };
    (async $body:ident) => {
        mod $body {
            #[test]
            fn sqlite() {
                let (_dir, store) = $crate::suite::backends::sqlite();
                $crate::suite::fixtures::block_on(super::$body(&store));
            }

            #[cfg(feature = "postgres")]
            #[test]
            fn postgres() {
                let cluster = trellis_test_pg::Cluster::shared();
                let db = cluster.database();
                let store = $crate::suite::pg_support::connect(&db);
                $crate::suite::fixtures::block_on(super::$body(&store));
            }
        }
    };
}
