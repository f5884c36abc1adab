//! The runtime service's streams on PostgreSQL: [`StreamStore`] for [`PgStore`].
//!
//! [`StreamStore::append_stream`] encodes and checks the batch on the caller's thread
//! ([`crate::streams::encode`]), queues it on the write lane without waiting, and resolves
//! its [`Commit`] once the batch's transaction committed (or failed). One transaction per
//! batch, so a failing batch rolls back alone: it checks that every event follows its
//! stream's last one ([`crate::streams::check_seqs`]), then inserts the events and applies
//! the session events' changes to the session tables ([`crate::streams::writes`], the plan
//! SQLite applies too; `super::sessions` has the SQL) — all statements sent together
//! ([`super::pipeline`]).
//!
//! # Several processes on one stream
//!
//! Several servers may append to the same stream (the workspace stream is everyone's). Two
//! appenders that both read seq N as a stream's last and both insert N + 1 cannot both
//! succeed: `stream_events`' primary key `(stream, seq)` makes the second insert wait for the
//! first transaction and fail once it commits (a unique violation), never overwrite. That
//! batch rolls back whole and fails with [`Error::StreamSeq`] naming the stream's last seq as
//! it is then, as if it had been checked after the other one; the caller numbers its events
//! again (as the service's recorder does). Two batches that each span the same two streams
//! in opposite orders may instead deadlock: PostgreSQL aborts one of them, which then fails
//! with a retryable [`crate::pg::PgError::Query`].
//!
//! The session tables are updated by the same transactions, so they follow the log whoever
//! appends: a session's rows are only written by the batch that holds its next events.

use std::path::Path;
use std::sync::Arc;

use tokio_postgres::Client;
use tokio_postgres::error::SqlState;
use tokio_postgres::types::{ToSql, Type};
use trellis_graph::{Commit, JournalError};
use trellis_protocol::{RunId, ServiceEvent, StreamId, SubmissionId};

use super::error::PgError;
use super::journal::{CommitCount, Fence, lost_leases};
use super::pipeline::{Pipeline, int, text};
use super::runs::{self, storable};
use super::{JobError, PgStore, sessions};
use crate::StreamStore;
use crate::error::{Error, Result};
use crate::ops::to_i64;
use crate::streams::{Encoded, Write, check_seqs, encode, read_stream, stored_event, writes};

/// Refuses a batch whose ids PostgreSQL text cannot hold (a NUL; see `super::sessions`).
fn check_ids(batch: &[Encoded]) -> Result<()> {
    for enc in batch {
        let submission = enc.event.submission.as_ref().map(SubmissionId::as_str);
        let which = if !storable(&enc.key) {
            "the stream's id"
        } else if !submission.is_none_or(storable) {
            "the event's submission id"
        } else {
            continue;
        };
        return Err(Error::BadStreamEvent {
            stream: enc.key.replace('\0', "\\0"),
            detail: format!(
                "{which} holds a NUL character, which a PostgreSQL store cannot keep in an id"
            ),
        });
    }
    Ok(())
}

/// The last stored seq of each of `keys`' streams (0 when empty).
const LAST_SEQS_SQL: &str =
    "SELECT k, (SELECT seq FROM stream_events WHERE stream = k ORDER BY seq DESC LIMIT 1)
     FROM unnest($1::text[]) AS k";

/// The last stored seq of a service stream.
const LAST_SEQ_SQL: &str =
    "SELECT seq FROM stream_events WHERE stream = $1 ORDER BY seq DESC LIMIT 1";

const INSERT_SQL: &str = "INSERT INTO stream_events (stream, seq, ts, submission, data)
     VALUES ($1, $2, $3, $4, $5)";

const READ_SQL: &str = "SELECT seq, ts, submission, data FROM stream_events
     WHERE stream = $1 AND seq >= $2 ORDER BY seq LIMIT $3";

/// A stored seq (never negative).
fn seq(v: Option<i64>) -> u64 {
    v.map_or(0, |s| u64::try_from(s).unwrap_or(0))
}

/// The last stored seq of a service stream (0 when empty).
async fn last_seq(c: &Client, key: &str) -> Result<u64, tokio_postgres::Error> {
    let row = c
        .query_typed_opt(LAST_SEQ_SQL, &[(&key, Type::TEXT)])
        .await?;
    Ok(seq(row.map(|r| r.try_get(0)).transpose()?))
}

/// Writes one batch in a transaction of its own (the write lane's job): its `BEGIN` and the
/// read of its streams' last seqs sent together, then its statements, then `COMMIT`.
async fn append(
    c: &Client,
    batch: &[Encoded],
    url: &str,
    fences: &[Fence],
) -> Result<(), JobError> {
    let location = Path::new(url);
    let mut keys: Vec<&str> = Vec::new();
    for enc in batch {
        if !keys.contains(&enc.key.as_str()) {
            keys.push(&enc.key);
        }
    }
    let lasts: [(&(dyn ToSql + Sync), Type); 1] = [(&keys, Type::TEXT_ARRAY)];
    let (begun, rows) = futures::join!(
        c.batch_execute("BEGIN"),
        c.query_typed(LAST_SEQS_SQL, &lasts)
    );
    begun.map_err(|e| Error::from(PgError::transaction(url, e)))?;
    if !fences.is_empty() {
        let lost = match lost_leases(c, fences).await {
            Ok(lost) => lost,
            Err(e) => {
                c.batch_execute("ROLLBACK").await?;
                return Err(e.into());
            }
        };
        if let Some((run, worker)) = lost.into_iter().next() {
            c.batch_execute("ROLLBACK").await?;
            return Err(JobError::Store(Error::LeaseLost {
                run: run.to_string(),
                worker,
            }));
        }
    }
    let checked = rows.map_err(JobError::from).and_then(|rows| {
        let stored = rows
            .iter()
            .map(|r| Ok((r.try_get::<_, String>(0)?, seq(r.try_get(1)?))))
            .collect::<Result<Vec<_>, tokio_postgres::Error>>()?;
        check_seqs(batch, location, |key| {
            Ok(stored.iter().find(|(k, _)| k == key).map_or(0, |(_, s)| *s))
        })
        .map_err(JobError::from)
    });
    if let Err(e) = checked {
        c.batch_execute("ROLLBACK").await?;
        return Err(e);
    }
    let writes: Vec<Write<'_>> = writes(batch).collect();
    let mut p = Pipeline::default();
    // The event each `stream_events` insert writes, by its index in the pipeline.
    let mut inserts: Vec<(usize, &Encoded)> = Vec::new();
    for write in &writes {
        match write {
            Write::Event(enc) => {
                let e = &enc.event;
                inserts.push((p.len(), enc));
                let submission = e.submission.as_ref().map(|s| s.as_str().into());
                p.push(
                    INSERT_SQL,
                    vec![
                        text(Some(enc.key.as_str().into())),
                        int(to_i64(e.seq)),
                        int(e.ts),
                        text(submission),
                        text(Some(enc.data.as_str().into())),
                    ],
                );
            }
            Write::Session(id, change) => sessions::push_change(&mut p, id.as_str(), change),
        }
    }
    // Delivered when the transaction commits: each stream with its new last seq.
    for key in &keys {
        let last = batch
            .iter()
            .filter(|enc| enc.key == *key)
            .map(|enc| enc.event.seq)
            .max()
            .unwrap_or_default();
        let payload = crate::Notice::Appended { key, seq: last }.text();
        p.push(super::notify::NOTIFY_SQL, vec![text(Some(payload.into()))]);
    }
    let Err((at, e)) = p.run(c).await else {
        return c
            .batch_execute("COMMIT")
            .await
            .map_err(|e| Error::from(PgError::transaction(url, e)).into());
    };
    c.batch_execute("ROLLBACK").await?;
    // Another process appended the same seq first (see the module docs).
    match inserts.iter().find(|(i, _)| *i == at) {
        Some((_, enc)) if e.code() == Some(&SqlState::UNIQUE_VIOLATION) => {
            Err(JobError::Store(Error::StreamSeq {
                path: location.to_owned(),
                stream: enc.key.clone(),
                seq: enc.event.seq,
                last: last_seq(c, &enc.key).await?,
            }))
        }
        _ => Err(e.into()),
    }
}

/// The run of an agent node's session stream (`session:<run>:<node>`).
fn node_session_run(key: &str) -> Option<&str> {
    key.strip_prefix("session:")?
        .split_once(':')
        .map(|(run, _)| run)
}

/// The write lane's job for one batch: writes it, counts it, answers its commit.
async fn append_job(
    conn: Result<&mut Client, crate::Error>,
    batch: Vec<Encoded>,
    url: Arc<str>,
    fences: Vec<Fence>,
    count: CommitCount,
    ack: tokio::sync::oneshot::Sender<Result<(), JournalError>>,
) {
    let written = match conn {
        Ok(c) => append(c, &batch, &url, &fences)
            .await
            .map_err(|e| e.into_error(&url)),
        Err(e) => Err(e),
    };
    match &written {
        Ok(()) => count.stream_batch(batch.len()),
        // No connection, or a transaction that could not begin or commit (a refused batch
        // is rolled back, as a savepoint is on SQLite: no failed commit).
        Err(crate::Error::Postgres(
            PgError::Transaction { .. } | PgError::Connect { .. } | PgError::Closed { .. },
        )) => count.failed(),
        Err(_) => {}
    }
    let _ = ack.send(written.map_err(JournalError::from));
}

impl StreamStore for PgStore {
    fn append_shared(&self, events: Vec<Arc<ServiceEvent>>) -> Commit {
        let (ack, commit) = Commit::pending();
        let batch = match encode(events).and_then(|b| check_ids(&b).map(|()| b)) {
            Ok(batch) => batch,
            Err(e) => {
                drop(ack.send(Err(e.into())));
                return commit;
            }
        };
        let url = self.url.clone();
        let count = self.journal.commit_count(true);
        // An agent's session of a run this store holds a lease on is fenced like the run's
        // journal: a worker whose lease was taken writes no more of its turns.
        let fences = self
            .journal
            .fences_of(batch.iter().filter_map(|enc| node_session_run(&enc.key)));
        // When the store is closed the job and `ack` are dropped: the commit resolves to
        // `JournalError::Closed`.
        let _ = self.exec.post_write(async move |conn| {
            append_job(conn, batch, url, fences, count, ack).await;
        });
        commit
    }

    fn stream_events(
        &self,
        stream: &StreamId,
        after_seq: u64,
        limit: Option<usize>,
    ) -> Result<Vec<ServiceEvent>> {
        let run_events = |run: &RunId, from, to| self.read_events(run, from, to);
        read_stream(stream, after_seq, limit, run_events, |key, from, limit| {
            if !storable(&key) {
                return Ok(Vec::new());
            }
            let (stream, url) = (stream.clone(), self.url.clone());
            self.read(async move |c| {
                let (from, limit) = (to_i64(from), limit.map(to_i64));
                let params: [(&(dyn ToSql + Sync), Type); 3] = [
                    (&key, Type::TEXT),
                    (&from, Type::INT8),
                    (&limit, Type::INT8),
                ];
                let rows = c.query_typed(READ_SQL, &params).await?;
                let location = Path::new(&*url);
                let mut out = Vec::with_capacity(rows.len());
                for r in &rows {
                    out.push(stored_event(
                        &stream,
                        &key,
                        location,
                        r.try_get(0)?,
                        r.try_get(1)?,
                        r.try_get(2)?,
                        r.try_get(3)?,
                    )?);
                }
                Ok(out)
            })
        })
    }

    fn stream_last_seq(&self, stream: &StreamId) -> Result<u64> {
        let key = match stream {
            StreamId::Run(run) if runs::storable(run.as_str()) => run.as_str().to_owned(),
            _ => stream.key(),
        };
        if !storable(&key) {
            return Ok(0);
        }
        let is_run = matches!(stream, StreamId::Run(_));
        self.read(async move |c| {
            if !is_run {
                return Ok(last_seq(c, &key).await?);
            }
            let row = c
                .query_typed_opt(
                    "SELECT last_seq FROM runs WHERE id = $1",
                    &[(&key, Type::TEXT)],
                )
                .await?;
            Ok(seq(row.map(|r| r.try_get(0)).transpose()?))
        })
    }
}
