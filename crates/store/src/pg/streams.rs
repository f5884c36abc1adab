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
use trellis_graph::{Commit, JournalError};
use trellis_protocol::{Event, RunId, ServiceEvent, StreamId, SubmissionId};

use super::exec::Lane;
use super::pipeline::{Pipeline, param};
use super::sessions::{self, storable};
use super::{JobError, PgStore};
use crate::StreamStore;
use crate::error::{Error, Result};
use crate::ops::to_i64;
use crate::streams::{
    Encoded, Range, Write, check_seqs, encode, run_service_event, stored_event, writes,
};

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
async fn last_seqs(
    tx: &tokio_postgres::Transaction<'_>,
    keys: &[&str],
) -> Result<Vec<(String, u64)>, tokio_postgres::Error> {
    let rows = tx
        .query(
            "SELECT k, (SELECT seq FROM stream_events WHERE stream = k ORDER BY seq DESC LIMIT 1)
             FROM unnest($1::text[]) AS k",
            &[&keys],
        )
        .await?;
    rows.iter()
        .map(|r| {
            let last: Option<i64> = r.try_get(1)?;
            Ok((
                r.try_get(0)?,
                last.map_or(0, |s| u64::try_from(s).unwrap_or(0)),
            ))
        })
        .collect()
}

/// The last stored seq of a service stream (0 when empty).
async fn last_seq(c: &Client, key: &str) -> Result<u64, tokio_postgres::Error> {
    let row = c
        .query_opt(
            "SELECT seq FROM stream_events WHERE stream = $1 ORDER BY seq DESC LIMIT 1",
            &[&key],
        )
        .await?;
    Ok(match row {
        Some(r) => u64::try_from(r.try_get::<_, i64>(0)?).unwrap_or(0),
        None => 0,
    })
}

/// Writes one batch in a transaction of its own (the write lane's job).
async fn append(c: &mut Client, batch: &[Encoded], url: &str) -> Result<(), JobError> {
    let location = Path::new(url);
    let mut keys: Vec<&str> = Vec::new();
    for enc in batch {
        if !keys.contains(&enc.key.as_str()) {
            keys.push(&enc.key);
        }
    }
    let tx = c.transaction().await?;
    let stored = last_seqs(&tx, &keys).await?;
    check_seqs(batch, location, |key| {
        Ok(stored.iter().find(|(k, _)| k == key).map_or(0, |(_, s)| *s))
    })?;
    let writes: Vec<Write<'_>> = writes(batch).collect();
    let mut p = Pipeline::default();
    // The event each `stream_events` insert writes, by its index in the pipeline.
    let mut inserts: Vec<(usize, &Encoded)> = Vec::new();
    for write in &writes {
        match write {
            Write::Event(enc) => {
                let e = &enc.event;
                inserts.push((p.len(), enc));
                p.push(
                    "INSERT INTO stream_events (stream, seq, ts, submission, data)
                     VALUES ($1, $2, $3, $4, $5)",
                    vec![
                        param(enc.key.as_str()),
                        param(to_i64(e.seq)),
                        param(e.ts),
                        param(e.submission.as_ref().map(SubmissionId::as_str)),
                        param(enc.data.as_str()),
                    ],
                );
            }
            Write::Session(id, change) => sessions::push_change(&mut p, id.as_str(), change),
        }
    }
    let failed = p.run(&tx).await.err();
    drop(p);
    let Some((at, e)) = failed else {
        tx.commit().await?;
        return Ok(());
    };
    tx.rollback().await?;
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

/// A run's events with `from <= seq <= to`, in seq order (none when the run is unknown).
async fn run_events(
    c: &Client,
    run: &RunId,
    from: u64,
    to: u64,
    url: &str,
) -> Result<Vec<Event>, JobError> {
    // Keys run from `rk << 32 | 0`; a batch starting before `from` may reach into it.
    let rows = c
        .query(
            "SELECT e.key & 4294967295, e.last_seq, e.data
             FROM runs r JOIN events e ON e.key BETWEEN r.rk << 32 AND (r.rk << 32) | $2
             WHERE r.id = $1 AND e.last_seq >= $3 ORDER BY e.key",
            &[
                &run.as_str(),
                &i64::from(u32::try_from(to).unwrap_or(u32::MAX)),
                &to_i64(from),
            ],
        )
        .await?;
    let mut out = Vec::new();
    for r in &rows {
        let first_seq = u64::try_from(r.try_get::<_, i64>(0)?).unwrap_or(0);
        let last_seq = u64::try_from(r.try_get::<_, i64>(1)?).unwrap_or(0);
        let batch =
            crate::codec::decode(run, first_seq, last_seq, r.try_get(2)?).map_err(|detail| {
                Error::Corrupt {
                    path: Path::new(url).to_owned(),
                    run: run.to_string(),
                    first_seq,
                    detail,
                }
            })?;
        out.extend(batch.into_iter().filter(|e| e.seq >= from && e.seq <= to));
    }
    Ok(out)
}

impl StreamStore for PgStore {
    fn append_stream(&self, events: Vec<ServiceEvent>) -> Commit {
        let (ack, commit) = Commit::pending();
        let batch = match encode(events).and_then(|b| check_ids(&b).map(|()| b)) {
            Ok(batch) => batch,
            Err(e) => {
                drop(ack.send(Err(e.into())));
                return commit;
            }
        };
        let url: Arc<str> = self.url.clone();
        // When the store is closed the job and `ack` are dropped: the commit resolves to
        // `JournalError::Closed`.
        let _ = self.exec.queue_then(
            Lane::Write,
            async move |c| append(c, &batch, &url).await,
            move |r: Result<()>| drop(ack.send(r.map_err(JournalError::from))),
        );
        commit
    }

    fn stream_events(
        &self,
        stream: &StreamId,
        after_seq: u64,
        limit: Option<usize>,
    ) -> Result<Vec<ServiceEvent>> {
        let Some(Range { from, to, limit }) = Range::after(after_seq, limit) else {
            return Ok(Vec::new());
        };
        if !storable(&stream.key()) {
            return Ok(Vec::new());
        }
        let stream = stream.clone();
        let url = self.url.clone();
        self.read(async move |c| {
            if let StreamId::Run(run) = &stream {
                let events = run_events(c, run, from, to, &url).await?;
                return Ok(events.into_iter().map(run_service_event).collect());
            }
            let key = stream.key();
            let rows = c
                .query(
                    "SELECT seq, ts, submission, data FROM stream_events
                     WHERE stream = $1 AND seq >= $2 ORDER BY seq LIMIT $3",
                    &[&key, &to_i64(from), &limit.map(to_i64)],
                )
                .await?;
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
    }

    fn stream_last_seq(&self, stream: &StreamId) -> Result<u64> {
        if !storable(&stream.key()) {
            return Ok(0);
        }
        let stream = stream.clone();
        self.read(async move |c| match &stream {
            StreamId::Run(run) => {
                let row = c
                    .query_opt("SELECT last_seq FROM runs WHERE id = $1", &[&run.as_str()])
                    .await?;
                Ok(match row {
                    Some(r) => u64::try_from(r.try_get::<_, i64>(0)?).unwrap_or(0),
                    None => 0,
                })
            }
            _ => Ok(last_seq(c, &stream.key()).await?),
        })
    }
}
