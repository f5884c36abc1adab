//! The run journal's reads on PostgreSQL, and [`RunStore`] for [`PgStore`]: the SQL of
//! `crate::runs`' reader with the same results.
//!
//! Reads run on the read lane, one statement each (`query_typed`: parsed, bound and executed
//! in one round trip, no prepared statement to keep per connection); the driver-independent
//! parts — a row's record ([`RunRow`]), prefix resolution, decoding event blobs, parsing
//! commands — are the SQLite backend's own functions. Writes are in `journal` (batches) and
//! `ops` (claims and the command inbox).
//!
//! PostgreSQL text cannot hold NUL: a run id or prefix containing one names no stored run (no
//! run with such an id can be written), so reads answer as SQLite does for an unknown run
//! without asking the server.

use std::borrow::Cow;
use std::sync::Arc;

use tokio_postgres::types::{ToSql, Type};
use tokio_postgres::{Client, Row};
use trellis_protocol::records::{RunFilter, RunRecord};
use trellis_protocol::{Command, Event, RunId};

use super::error::PgError;
use super::{JobError, PgStore, ops};
use crate::codec;
use crate::error::{Error, Result};
use crate::runs::{Columns, RUN_COLUMNS, RUN_FROM, RunRow, RunStore, resolve};

/// A run's record by exact id.
fn run_sql() -> String {
    format!("SELECT {RUN_COLUMNS} FROM {RUN_FROM} WHERE r.id = $1")
}

/// Runs newest first, with an optional status and limit (`NULL`: none).
fn list_sql() -> String {
    format!(
        "SELECT {RUN_COLUMNS} FROM {RUN_FROM} WHERE ($1::text IS NULL OR r.status = $1)
         ORDER BY r.created_ts DESC, r.id DESC LIMIT $2"
    )
}

/// Ids in `[$1, $2)`, in order: the runs a prefix names (ids compare bytewise: `COLLATE "C"`).
const PREFIX_SQL: &str = "SELECT id FROM runs WHERE id >= $1 AND id < $2 ORDER BY id LIMIT $3";

/// A run's batches reaching into `[$3, $2]`: one row per batch, or one row of NULLs when the
/// run has none there, or no row when the run is unknown. Keys run from `rk << 32 | 0`; a
/// batch starting before `$3` may reach into the range.
const EVENTS_SQL: &str = "SELECT e.key & 4294967295, e.last_seq, e.data
     FROM runs r LEFT JOIN events e
       ON e.key BETWEEN r.rk << 32 AND (r.rk << 32) | $2 AND e.last_seq >= $3
     WHERE r.id = $1 ORDER BY e.key";

/// Whether a run has commands nobody has taken yet.
const PENDING_SQL: &str =
    "SELECT EXISTS (SELECT 1 FROM commands WHERE run_id = $1 AND taken_at IS NULL)";

/// Whether PostgreSQL can hold `s` as text (it refuses NUL).
pub(crate) fn storable(s: &str) -> bool {
    !s.contains('\0')
}

/// `s` as a text column of a run's summary can hold it: NUL, which PostgreSQL refuses, is
/// replaced by U+FFFD, so a run whose error message carries one still records it (its events
/// keep the text exactly: they are stored as a blob).
pub(crate) fn text(s: &str) -> Cow<'_, str> {
    if storable(s) {
        Cow::Borrowed(s)
    } else {
        Cow::Owned(s.replace('\0', "\u{FFFD}"))
    }
}

impl Columns for Row {
    type Error = tokio_postgres::Error;

    fn text(&self, i: usize) -> Result<String, Self::Error> {
        self.try_get(i)
    }

    fn text_opt(&self, i: usize) -> Result<Option<String>, Self::Error> {
        self.try_get(i)
    }

    fn int(&self, i: usize) -> Result<i64, Self::Error> {
        self.try_get(i)
    }

    fn int_opt(&self, i: usize) -> Result<Option<i64>, Self::Error> {
        self.try_get(i)
    }
}

/// A row of [`RUN_COLUMNS`] as a record; `host` judges the owner's liveness.
fn record(row: &Row, host: &str) -> Result<RunRecord, JobError> {
    RunRow::read(row)?
        .into_record(host)
        .map_err(|detail| Error::Damaged(detail).into())
}

/// The run's record, by exact id.
async fn run(client: &Client, id: &str, host: &str) -> Result<Option<RunRecord>, JobError> {
    if !storable(id) {
        return Ok(None);
    }
    let row = client
        .query_typed_opt(&run_sql(), &[(&id, Type::TEXT)])
        .await?;
    row.map(|r| record(&r, host)).transpose()
}

/// The run's events with `from <= seq <= to`, in seq order; `None` when the run is unknown.
/// `url` names the store in errors. For every reader of a run's event log (its stream, too).
pub(crate) async fn events(
    client: &Client,
    run: &RunId,
    from: u64,
    to: u64,
    url: &str,
) -> Result<Option<Vec<Event>>, JobError> {
    if !storable(run.as_str()) {
        return Ok(None);
    }
    let hi = i64::from(u32::try_from(to).unwrap_or(u32::MAX));
    let from_i = crate::ops::to_i64(from);
    let params: [(&(dyn ToSql + Sync), Type); 3] = [
        (&run.as_str(), Type::TEXT),
        (&hi, Type::INT8),
        (&from_i, Type::INT8),
    ];
    let rows = client.query_typed(EVENTS_SQL, &params).await?;
    if rows.is_empty() {
        return Ok(None);
    }
    let mut batches = Vec::with_capacity(rows.len());
    for row in &rows {
        let (Some(first), Some(last), Some(data)) = (
            row.try_get::<_, Option<i64>>(0)?,
            row.try_get::<_, Option<i64>>(1)?,
            row.try_get::<_, Option<Vec<u8>>>(2)?,
        ) else {
            continue;
        };
        batches.push((first as u64, last as u64, data));
    }
    let corrupt = |first_seq, detail| {
        JobError::Store(
            PgError::Corrupt {
                url: url.to_owned(),
                run: run.to_string(),
                first_seq,
                detail,
            }
            .into(),
        )
    };
    codec::decode_rows(run, batches, from, to, corrupt).map(Some)
}

/// Whether the run has commands nobody has taken yet.
pub(crate) async fn has_pending(client: &Client, run: &str) -> Result<bool, JobError> {
    if !storable(run) {
        return Ok(false);
    }
    let row = client
        .query_typed_one(PENDING_SQL, &[(&run, Type::TEXT)])
        .await?;
    Ok(row.try_get(0)?)
}

impl PgStore {
    /// The run's record by exact id, on the read lane.
    fn run_record(&self, id: &str) -> Result<Option<RunRecord>> {
        let id = id.to_owned();
        let host = self.journal.me.host.clone();
        self.read(async move |c| run(c, &id, &host).await)
    }

    /// The run's events with `from <= seq <= to`; `None` when the run is unknown.
    pub(crate) fn read_events(
        &self,
        run: &RunId,
        from: u64,
        to: u64,
    ) -> Result<Option<Vec<Event>>> {
        let (run, url) = (run.clone(), Arc::clone(&self.url));
        self.read(async move |c| events(c, &run, from, to, &url).await)
    }

    /// Whether the run has commands nobody has taken yet.
    pub(crate) fn has_pending_commands(&self, run: &RunId) -> Result<bool> {
        let run = run.to_string();
        self.read(async move |c| has_pending(c, &run).await)
    }
}

impl RunStore for PgStore {
    fn has_commands(&self, run: &RunId) -> Result<bool> {
        self.has_pending_commands(run)
    }

    fn enqueue_command(&self, run: &RunId, command: &Command) -> Result<i64> {
        let body = crate::ops::command_body(command)?;
        let (run, counters) = (run.to_string(), self.journal.commit_count(true));
        self.write(async move |c| {
            let id = ops::enqueue(c, &run, &body).await?;
            counters.commit();
            Ok(id)
        })
    }

    fn break_claim(&self, run: &RunId) -> Result<()> {
        let (run, counters) = (run.to_string(), self.journal.commit_count(true));
        self.write(async move |c| {
            ops::release(c, &run, None).await?;
            counters.commit();
            Ok(())
        })
    }

    fn list_runs(&self, filter: &RunFilter) -> Result<Vec<RunRecord>> {
        let limit = filter.limit.map(|l| i64::try_from(l).unwrap_or(i64::MAX));
        let status = filter.status.map(|s| s.as_str());
        let host = self.journal.me.host.clone();
        self.read(async move |c| {
            let params: [(&(dyn ToSql + Sync), Type); 2] =
                [(&status, Type::TEXT), (&limit, Type::INT8)];
            let rows = c.query_typed(&list_sql(), &params).await?;
            rows.iter().map(|r| record(r, &host)).collect()
        })
    }

    fn get_run(&self, id_or_prefix: &str) -> Result<RunRecord> {
        resolve(
            id_or_prefix,
            |id| self.run_record(id),
            |lo, hi, limit| {
                if !storable(lo) {
                    return Ok(Vec::new());
                }
                let (lo, hi) = (lo.to_owned(), hi.to_owned());
                self.read(async move |c| {
                    let params: [(&(dyn ToSql + Sync), Type); 3] =
                        [(&lo, Type::TEXT), (&hi, Type::TEXT), (&limit, Type::INT8)];
                    let rows = c.query_typed(PREFIX_SQL, &params).await?;
                    Ok(rows
                        .iter()
                        .map(|r| r.try_get(0))
                        .collect::<Result<_, _>>()?)
                })
            },
        )
    }

    fn events(&self, run: &RunId, from_seq: u64, to_seq: Option<u64>) -> Result<Vec<Event>> {
        self.read_events(run, from_seq, to_seq.unwrap_or(u64::MAX))?
            .ok_or_else(|| Error::RunNotFound(run.to_string()))
    }
}
