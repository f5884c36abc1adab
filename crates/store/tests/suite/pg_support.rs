//! Helpers of the PostgreSQL tests: stores on a throwaway cluster's fresh databases.

use trellis_store::pg::{PgOptions, PgStore};
use trellis_test_pg::{Cluster, Database};

/// Connects to `db` with the default options.
pub fn connect(db: &Database<'_>) -> PgStore {
    PgStore::connect(&db.url(), PgOptions::default()).unwrap()
}

/// The connection error of `url` (panics if it connects).
pub fn connect_error(url: &str) -> trellis_store::Error {
    PgStore::connect(url, PgOptions::default()).unwrap_err()
}

/// A database on the suite's cluster (see `Cluster::shared`).
pub fn cluster() -> Cluster {
    Cluster::shared()
}

/// Rows of a query answering text columns, read through the store's read lane.
pub fn rows(store: &PgStore, sql: &'static str) -> Vec<Vec<String>> {
    store
        .read(async |c| {
            let rows = c.query(sql, &[]).await?;
            Ok(rows
                .iter()
                .map(|r| (0..r.len()).map(|i| r.get::<_, String>(i)).collect())
                .collect())
        })
        .unwrap()
}

/// The recorded migrations, `(version, name, applied_at)`.
pub fn recorded(store: &PgStore) -> Vec<(i64, String, i64)> {
    store
        .read(async |c| {
            let rows = c
                .query(
                    "SELECT version, name, applied_at FROM schema_migrations ORDER BY version",
                    &[],
                )
                .await?;
            Ok(rows
                .iter()
                .map(|r| (r.get(0), r.get(1), r.get(2)))
                .collect())
        })
        .unwrap()
}
