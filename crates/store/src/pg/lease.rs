//! [`LeaseStore`] on PostgreSQL: the `run_leases` table, one statement per operation.
//!
//! A claim is a single `UPDATE` (or upsert) that picks its row, raises the token and sets
//! the owner and the expiry — the row of the oldest runnable run whose lease is free or
//! expired, locked with `FOR UPDATE SKIP LOCKED` so concurrent claimers take different runs
//! without waiting for each other. Expiries are the server's clock (`now()`, in ms). Every
//! lease this store claims is remembered (`journal::JournalState::leases`) so that the run
//! journal's group transactions fence the run's batches with its token.

use std::time::Duration;

use tokio_postgres::Row;
use tokio_postgres::types::{ToSql, Type};
use trellis_protocol::RunId;

use super::PgStore;
use crate::Result;
use crate::lease::{Lease, LeaseStore};

/// The server's clock in ms since the epoch.
const NOW_MS: &str = "(extract(epoch FROM now()) * 1000)::bigint";

/// The longest ttl taken (about 31 700 years), so that an expiry never overflows.
const MAX_TTL_MS: i64 = 1_000_000_000_000_000;

/// `ttl` in whole ms, from 1 to [`MAX_TTL_MS`].
fn ttl_ms(ttl: Duration) -> i64 {
    i64::try_from(ttl.as_millis()).map_or(MAX_TTL_MS, |ms| ms.clamp(1, MAX_TTL_MS))
}

/// Claims the oldest runnable run whose lease is free or expired: `$1` worker, `$2` ttl (ms).
/// Answers the lease and the owner of the expired lease it took over (the row as the
/// subquery locked it, before the update).
fn claim_next_sql() -> String {
    format!(
        "UPDATE run_leases l SET owner = $1, token = l.token + 1, expires_at = {NOW_MS} + $2
         FROM (
             SELECT run_id, owner FROM run_leases
             WHERE runnable AND (owner IS NULL OR expires_at <= {NOW_MS})
             ORDER BY queued_at, run_id LIMIT 1 FOR UPDATE SKIP LOCKED) p
         WHERE l.run_id = p.run_id
         RETURNING l.run_id, l.token, l.expires_at, p.owner"
    )
}

/// Claims `$1` for `$2` for `$3` ms if its lease is free or expired; inserts its row (not
/// runnable) when there is none. Answers like [`claim_next_sql`], the previous owner as the
/// statement's snapshot saw it (not locked: the upsert locks the row, and a `FOR UPDATE`
/// in the `WITH` would find it already updated by this statement and see nothing). A
/// concurrent claim makes the upsert's condition fail; only a release committed in
/// between can leave the answer naming the owner that had just let the lease go.
fn claim_run_sql() -> String {
    format!(
        "WITH p AS (SELECT owner FROM run_leases WHERE run_id = $1)
         INSERT INTO run_leases AS l (run_id, owner, token, expires_at, runnable, queued_at)
         VALUES ($1, $2, 1, {NOW_MS} + $3, false, {NOW_MS})
         ON CONFLICT (run_id) DO UPDATE
             SET owner = excluded.owner, token = l.token + 1, expires_at = excluded.expires_at
             WHERE l.owner IS NULL OR l.expires_at <= {NOW_MS}
         RETURNING l.run_id, l.token, l.expires_at, (SELECT owner FROM p)"
    )
}

/// How many runs are runnable with a free or expired lease (see
/// [`LeaseStore::claimable_count`]); reads the `run_leases_queue` partial index's rows.
fn claimable_sql() -> String {
    format!(
        "SELECT count(*) FROM run_leases
         WHERE runnable AND (owner IS NULL OR expires_at <= {NOW_MS})"
    )
}

/// Marks `$1` runnable (`$2`) or not; a run newly runnable joins the end of the queue.
fn set_runnable_sql() -> String {
    format!(
        "INSERT INTO run_leases AS l (run_id, runnable, queued_at) VALUES ($1, $2, {NOW_MS})
         ON CONFLICT (run_id) DO UPDATE SET runnable = excluded.runnable,
             queued_at = CASE WHEN excluded.runnable AND NOT l.runnable
                              THEN excluded.queued_at ELSE l.queued_at END"
    )
}

/// Extends the lease of `$1` with token `$2` held by `$3` to `$4` ms from now.
fn renew_sql() -> String {
    format!(
        "UPDATE run_leases SET expires_at = {NOW_MS} + $4
         WHERE run_id = $1 AND token = $2 AND owner = $3"
    )
}

/// Frees the lease of `$1` with token `$2` held by `$3`.
const RELEASE: &str = "UPDATE run_leases SET owner = NULL, expires_at = NULL
    WHERE run_id = $1 AND token = $2 AND owner = $3";

/// Whether `$1` is runnable or held (see [`LeaseStore::with_workers`]).
const WITH_WORKERS: &str = "SELECT runnable OR owner IS NOT NULL FROM run_leases WHERE run_id = $1";

fn lease(row: &Row, worker: &str) -> std::result::Result<Lease, tokio_postgres::Error> {
    Ok(Lease {
        run: RunId::from_string(row.try_get::<_, String>(0)?),
        worker: worker.to_owned(),
        token: row.try_get(1)?,
        expires_at: row.try_get(2)?,
        taken_over_from: row.try_get(3)?,
    })
}

impl PgStore {
    /// Runs a claim statement and remembers the lease it answers for fencing.
    fn claim_with(
        &self,
        sql: String,
        run: Option<&RunId>,
        worker: &str,
        ttl: Duration,
    ) -> Result<Option<Lease>> {
        let (run, worker, ttl) = (run.map(|r| r.to_string()), worker.to_owned(), ttl_ms(ttl));
        let count = self.journal.commit_count(true);
        let claimed = self.write(async move |c| {
            let row = match &run {
                Some(run) => {
                    let params: [(&(dyn ToSql + Sync), Type); 3] =
                        [(run, Type::TEXT), (&worker, Type::TEXT), (&ttl, Type::INT8)];
                    c.query_typed_opt(&sql, &params).await?
                }
                None => {
                    let params: [(&(dyn ToSql + Sync), Type); 2] =
                        [(&worker, Type::TEXT), (&ttl, Type::INT8)];
                    c.query_typed_opt(&sql, &params).await?
                }
            };
            count.commit();
            Ok(row.map(|r| lease(&r, &worker)).transpose()?)
        })?;
        if let Some(lease) = &claimed {
            self.journal.hold(lease);
        }
        Ok(claimed)
    }
}

impl LeaseStore for PgStore {
    fn set_runnable(&self, run: &RunId, runnable: bool) -> Result<()> {
        let run = run.to_string();
        let count = self.journal.commit_count(true);
        self.write(async move |c| {
            c.execute_typed(
                &set_runnable_sql(),
                &[(&run, Type::TEXT), (&runnable, Type::BOOL)],
            )
            .await?;
            count.commit();
            if runnable {
                // Wakes the workers waiting for work (`super::notify`).
                let payload = crate::Notice::Runnable.text();
                c.execute_typed(super::notify::NOTIFY_SQL, &[(&payload, Type::TEXT)])
                    .await?;
            }
            Ok(())
        })
    }

    fn claim_lease(&self, worker: &str, ttl: Duration) -> Result<Option<Lease>> {
        self.claim_with(claim_next_sql(), None, worker, ttl)
    }

    fn claim_run_lease(&self, run: &RunId, worker: &str, ttl: Duration) -> Result<Option<Lease>> {
        self.claim_with(claim_run_sql(), Some(run), worker, ttl)
    }

    fn renew_lease(&self, lease: &Lease, ttl: Duration) -> Result<bool> {
        let (run, worker, token, ttl) = (
            lease.run.to_string(),
            lease.worker.clone(),
            lease.token,
            ttl_ms(ttl),
        );
        let count = self.journal.commit_count(true);
        self.write(async move |c| {
            let params: [(&(dyn ToSql + Sync), Type); 4] = [
                (&run, Type::TEXT),
                (&token, Type::INT8),
                (&worker, Type::TEXT),
                (&ttl, Type::INT8),
            ];
            let renewed = c.execute_typed(&renew_sql(), &params).await?;
            count.commit();
            Ok(renewed == 1)
        })
    }

    fn release_lease(&self, lease: &Lease) -> Result<bool> {
        let (run, worker, token) = (lease.run.to_string(), lease.worker.clone(), lease.token);
        let count = self.journal.commit_count(true);
        let released = self.write(async move |c| {
            let params: [(&(dyn ToSql + Sync), Type); 3] = [
                (&run, Type::TEXT),
                (&token, Type::INT8),
                (&worker, Type::TEXT),
            ];
            let released = c.execute_typed(RELEASE, &params).await?;
            count.commit();
            Ok(released == 1)
        })?;
        self.journal.forget(lease);
        Ok(released)
    }

    fn claimable_count(&self) -> Result<u64> {
        self.read(async move |c| {
            let row = c.query_typed_one(&claimable_sql(), &[]).await?;
            Ok(u64::try_from(row.try_get::<_, i64>(0)?).unwrap_or(0))
        })
    }

    fn with_workers(&self, run: &RunId) -> Result<bool> {
        let run = run.to_string();
        self.read(async move |c| {
            let row = c
                .query_typed_opt(WITH_WORKERS, &[(&run, Type::TEXT)])
                .await?;
            Ok(match row {
                Some(row) => row.try_get::<_, bool>(0)?,
                None => false,
            })
        })
    }
}
