//! The runtime service's streams: the `stream_events` log of session and workspace streams,
//! and the read side of every stream (a run's stream is its `events` log), behind
//! [`StreamStore`].
//!
//! [`StreamStore::append_stream`] encodes on the caller's thread and hands one batch to the
//! writer thread, which checks that every event follows its stream's last one, inserts the
//! events and materialises session events into the session tables (see [`crate::sessions`])
//! inside the batch's savepoint — so a batch is applied entirely or not at all, and the
//! tables never disagree with the log.

use std::path::Path;

use rusqlite::{Connection, OptionalExtension, params};
use trellis_graph::{Commit, JournalError};
use trellis_protocol::{
    Event, ServiceEvent, ServiceEventBody, SessionEvent, SessionId, StreamId, SubmissionId,
    WorkspaceEvent,
};

use crate::error::{Error, Result};
use crate::ops::to_i64;
use crate::read::Reader;
use crate::sessions;
use crate::{Msg, SqliteStore};

/// A service event ready for the writer: the event and its body's compact JSON.
pub(crate) struct Encoded {
    /// The event.
    pub(crate) event: ServiceEvent,
    /// `event.stream`'s text form.
    pub(crate) key: String,
    /// The body's JSON.
    pub(crate) data: String,
}

/// Checks that `events` belong on service streams (not run streams, and each body matches
/// its stream's kind) and encodes their bodies.
pub(crate) fn encode(events: Vec<ServiceEvent>) -> Result<Vec<Encoded>> {
    events
        .into_iter()
        .map(|event| {
            let key = event.stream.key();
            let bad = |detail: &str| Error::BadStreamEvent {
                stream: key.clone(),
                detail: detail.to_owned(),
            };
            let data = match (&event.stream, &event.event) {
                (StreamId::Run(_), _) => {
                    return Err(bad(
                        "a run's events are appended by its engine (Journal::append), not as \
                         service stream events",
                    ));
                }
                (StreamId::Session(_), ServiceEventBody::Session(body)) => {
                    serde_json::to_string(body)
                }
                (StreamId::Workspace, ServiceEventBody::Workspace(body)) => {
                    serde_json::to_string(body)
                }
                (StreamId::Session(_), _) => {
                    return Err(bad("a session stream takes session events"));
                }
                (StreamId::Workspace, _) => {
                    return Err(bad("the workspace stream takes workspace events"));
                }
            }
            .map_err(|source| Error::Encode {
                what: "stream event",
                source,
            })?;
            Ok(Encoded { event, key, data })
        })
        .collect()
}

/// Writes one batch inside the writer's savepoint: every event must follow its stream's last
/// one; session events are materialised as they are inserted.
pub(crate) fn append(conn: &Connection, batch: &[Encoded], path: &Path) -> Result<()> {
    let sqlite = |source| Error::Sqlite {
        path: path.to_owned(),
        source,
    };
    // The last seq of each stream the batch touched so far (a batch spans few streams).
    let mut last: Vec<(&str, u64)> = Vec::new();
    // Per session: the batch's last seq and timestamp, written once at the end.
    let mut touched: Vec<(&SessionId, u64, i64)> = Vec::new();
    let mut insert = conn
        .prepare_cached(
            "INSERT INTO stream_events (stream, seq, ts, submission, data)
             VALUES (?1, ?2, ?3, ?4, ?5)",
        )
        .map_err(sqlite)?;
    for enc in batch {
        let e = &enc.event;
        let slot = match last.iter().position(|(k, _)| *k == enc.key) {
            Some(i) => i,
            None => {
                last.push((&enc.key, last_seq(conn, &enc.key).map_err(sqlite)?));
                last.len() - 1
            }
        };
        let prev = last[slot].1;
        if e.seq != prev.saturating_add(1) {
            return Err(Error::StreamSeq {
                path: path.to_owned(),
                stream: enc.key.clone(),
                seq: e.seq,
                last: prev,
            });
        }
        last[slot].1 = e.seq;
        insert
            .execute(params![
                enc.key,
                to_i64(e.seq),
                e.ts,
                e.submission.as_ref().map(SubmissionId::as_str),
                enc.data
            ])
            .map_err(sqlite)?;
        if let (StreamId::Session(id), ServiceEventBody::Session(body)) = (&e.stream, &e.event) {
            sessions::materialise(conn, id, body, e.seq, e.ts).map_err(sqlite)?;
            match touched.iter_mut().find(|(s, _, _)| *s == id) {
                Some(t) => (t.1, t.2) = (e.seq, e.ts),
                None => touched.push((id, e.seq, e.ts)),
            }
        }
    }
    for (id, seq, ts) in touched {
        sessions::touch(conn, id, seq, ts).map_err(sqlite)?;
    }
    Ok(())
}

/// The last seq stored for a service stream (0 when empty).
fn last_seq(conn: &Connection, key: &str) -> rusqlite::Result<u64> {
    conn.prepare_cached(
        "SELECT seq FROM stream_events WHERE stream = ?1 ORDER BY seq DESC LIMIT 1",
    )?
    .query_row([key], |r| r.get::<_, i64>(0))
    .optional()
    .map(|s| s.map_or(0, |s| u64::try_from(s).unwrap_or(0)))
}

/// A run's graph event as an event of its stream.
fn run_service_event(event: Event) -> ServiceEvent {
    ServiceEvent {
        stream: StreamId::Run(event.run),
        seq: event.seq,
        ts: event.ts,
        submission: event.cause,
        event: ServiceEventBody::Run(event.kind),
    }
}

impl Reader {
    /// The events of `stream` after `after_seq`, at most `limit` of them, in seq order.
    pub(crate) fn stream_events(
        &self,
        stream: &StreamId,
        after_seq: u64,
        limit: Option<usize>,
    ) -> Result<Vec<ServiceEvent>> {
        let from = after_seq.saturating_add(1);
        let limit = limit.map(|l| u64::try_from(l).unwrap_or(u64::MAX));
        if limit == Some(0) {
            return Ok(Vec::new());
        }
        if let StreamId::Run(run) = stream {
            // A run's seqs are contiguous, so `limit` events end at `after_seq + limit`.
            let to = limit.map_or(u64::MAX, |l| after_seq.saturating_add(l));
            let events = self.events(run, from, to)?.unwrap_or_default();
            return Ok(events.into_iter().map(run_service_event).collect());
        }
        let key = stream.key();
        let rows: Vec<(i64, i64, Option<String>, String)> = self.with(|c| {
            c.prepare_cached(
                "SELECT seq, ts, submission, data FROM stream_events
                 WHERE stream = ?1 AND seq >= ?2 ORDER BY seq LIMIT ?3",
            )
            .and_then(|mut st| {
                st.query_map(params![key, to_i64(from), limit.map_or(-1, to_i64)], |r| {
                    Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?))
                })?
                .collect()
            })
            .map_err(self.sqlite())
        })?;
        rows.into_iter()
            .map(|(seq, ts, submission, data)| {
                let seq = u64::try_from(seq).unwrap_or(0);
                let body = match stream {
                    StreamId::Workspace => serde_json::from_str::<WorkspaceEvent>(&data)
                        .map(ServiceEventBody::Workspace),
                    _ => serde_json::from_str::<SessionEvent>(&data).map(ServiceEventBody::Session),
                }
                .map_err(|e| Error::CorruptStream {
                    path: self.path().to_owned(),
                    stream: key.clone(),
                    seq,
                    detail: e.to_string(),
                })?;
                Ok(ServiceEvent {
                    stream: stream.clone(),
                    seq,
                    ts,
                    submission: submission.map(SubmissionId::from_string),
                    event: body,
                })
            })
            .collect()
    }

    /// The last seq of `stream` (0 when empty; for a run, its last seq).
    pub(crate) fn stream_last_seq(&self, stream: &StreamId) -> Result<u64> {
        match stream {
            StreamId::Run(run) => Ok(self.run(run.as_str())?.map_or(0, |r| r.summary.last_seq)),
            _ => {
                let key = stream.key();
                self.with(|c| last_seq(c, &key).map_err(self.sqlite()))
            }
        }
    }
}

/// The runtime service's streams: session and workspace events appended through the
/// writer's group commit, and every stream (a run's too) read from a seq on.
pub trait StreamStore: Send + Sync {
    /// Appends a batch of session and workspace stream events (it may mix streams) through
    /// the writer thread and its group commit, like a run's event batch: the returned
    /// [`Commit`] resolves once the transaction holding the batch committed (with an fsync
    /// under [`crate::Synchronous::Full`]). In the same transaction, session events are
    /// materialised into the session tables ([`crate::SessionStore::sessions`],
    /// [`crate::SessionStore::turns`]).
    ///
    /// Every event must follow its stream's last one (`seq` = last + 1, from 1); a batch
    /// with a duplicate or a gap fails alone, rolled back through its savepoint, and leaves
    /// the other batches of its transaction untouched. Events of a run's stream are refused:
    /// a run's log is written by its engine through [`trellis_graph::Journal::append`].
    fn append_stream(&self, events: Vec<ServiceEvent>) -> Commit;

    /// The events of `stream` with a seq above `after_seq` (0: from the start), at most
    /// `limit` of them, in seq order. A run's stream is its graph event log, each event
    /// wrapped as [`ServiceEventBody::Run`]. A stream nothing was appended to — also a run
    /// not in the store — is empty.
    fn stream_events(
        &self,
        stream: &StreamId,
        after_seq: u64,
        limit: Option<usize>,
    ) -> Result<Vec<ServiceEvent>>;

    /// The last seq of `stream`: 0 when it is empty; for a run, the run's last seq.
    fn stream_last_seq(&self, stream: &StreamId) -> Result<u64>;
}

impl StreamStore for SqliteStore {
    fn append_stream(&self, events: Vec<ServiceEvent>) -> Commit {
        let (ack, commit) = Commit::pending();
        match (&self.tx, encode(events)) {
            (Some(tx), Ok(batch)) => drop(tx.send(Msg::Stream(batch, ack))),
            (_, Err(e)) => drop(ack.send(Err(e.into()))),
            (None, _) => drop(ack.send(Err(JournalError::Closed))),
        }
        commit
    }

    fn stream_events(
        &self,
        stream: &StreamId,
        after_seq: u64,
        limit: Option<usize>,
    ) -> Result<Vec<ServiceEvent>> {
        self.reader.stream_events(stream, after_seq, limit)
    }

    fn stream_last_seq(&self, stream: &StreamId) -> Result<u64> {
        self.reader.stream_last_seq(stream)
    }
}
