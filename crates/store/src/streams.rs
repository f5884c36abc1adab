//! The runtime service's streams: the `stream_events` log of session and workspace streams,
//! and the read side of every stream (a run's stream is its `events` log), behind
//! [`StreamStore`].
//!
//! [`StreamStore::append_stream`] encodes on the caller's thread and hands one batch to the
//! writer thread, which checks that every event follows its stream's last one, inserts the
//! events and materialises session events into the session tables (see [`crate::sessions`])
//! inside the batch's savepoint — so a batch is applied entirely or not at all, and the
//! tables never disagree with the log. What a batch must satisfy ([`check_seqs`]) and what
//! storing it writes, in which order ([`writes`]), is shared with the PostgreSQL backend,
//! which runs the same writes in a transaction of its own (`crate::pg`).

use std::path::Path;
use std::sync::Arc;

use rusqlite::{Connection, OptionalExtension, params};
use trellis_graph::{Commit, JournalError};
use trellis_protocol::{
    Event, RunId, ServiceEvent, ServiceEventBody, SessionEvent, SessionId, StreamId, SubmissionId,
    WorkspaceEvent,
};

use crate::error::{Error, Result};
use crate::ops::to_i64;
use crate::read::Reader;
use crate::session_rows::{RowChange, plan as sessions_plan};
use crate::sessions;
use crate::{Msg, SqliteStore};

/// A service event ready for the writer: the event and its body's compact JSON.
pub(crate) struct Encoded {
    /// The event (shared with the caller, who publishes it once committed).
    pub(crate) event: Arc<ServiceEvent>,
    /// `event.stream`'s text form.
    pub(crate) key: String,
    /// The body's JSON.
    pub(crate) data: String,
}

/// Checks that `events` belong on service streams (not run streams, and each body matches
/// its stream's kind) and encodes their bodies.
pub(crate) fn encode(events: Vec<Arc<ServiceEvent>>) -> Result<Vec<Encoded>> {
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

/// Checks that every event of `batch` follows its stream's last one: `stored` answers a
/// stream's last stored seq (0 when empty); it is asked once per stream, when the batch first
/// reaches it. Fails with [`Error::StreamSeq`] naming `location` (the database file, or the
/// redacted `[store] url`) at the first event that does not follow.
pub(crate) fn check_seqs(
    batch: &[Encoded],
    location: &Path,
    mut stored: impl FnMut(&str) -> Result<u64>,
) -> Result<()> {
    // The last seq of each stream the batch touched so far (a batch spans few streams).
    let mut last: Vec<(&str, u64)> = Vec::new();
    for enc in batch {
        let slot = match last.iter().position(|(k, _)| *k == enc.key) {
            Some(i) => i,
            None => {
                last.push((&enc.key, stored(&enc.key)?));
                last.len() - 1
            }
        };
        let prev = last[slot].1;
        let seq = enc.event.seq;
        if seq != prev.saturating_add(1) {
            return Err(Error::StreamSeq {
                path: location.to_owned(),
                stream: enc.key.clone(),
                seq,
                last: prev,
            });
        }
        last[slot].1 = seq;
    }
    Ok(())
}

/// One write of a service stream batch.
pub(crate) enum Write<'b> {
    /// Insert the event into `stream_events`.
    Event(&'b Encoded),
    /// Apply a change to the session tables of a session.
    Session(&'b SessionId, RowChange<'b>),
}

/// What storing a checked batch writes, in order, whatever the backend: each event, then
/// the changes it makes to its session's tables ([`crate::session_rows::plan`]); last, for
/// each session the batch reached, its last event ([`RowChange::Touch`]).
pub(crate) fn writes(batch: &[Encoded]) -> impl Iterator<Item = Write<'_>> {
    // Per session: the batch's last seq and timestamp, written once at the end.
    let mut touched: Vec<(&SessionId, u64, i64)> = Vec::new();
    for (id, _, e) in batch.iter().filter_map(Encoded::session) {
        match touched.iter_mut().find(|(s, _, _)| *s == id) {
            Some(t) => (t.1, t.2) = (e.seq, e.ts),
            None => touched.push((id, e.seq, e.ts)),
        }
    }
    let touches = touched.into_iter().map(|(id, seq, ts)| {
        Write::Session(
            id,
            RowChange::Touch {
                seq: to_i64(seq),
                ts,
            },
        )
    });
    batch
        .iter()
        .flat_map(|enc| {
            let changes = enc.session().into_iter().flat_map(|(id, body, e)| {
                sessions_plan(body, e.seq, e.ts).map(move |c| Write::Session(id, c))
            });
            std::iter::once(Write::Event(enc)).chain(changes)
        })
        .chain(touches)
}

impl Encoded {
    /// The session and the body of a session event.
    fn session(&self) -> Option<(&SessionId, &SessionEvent, &ServiceEvent)> {
        match (&self.event.stream, &self.event.event) {
            (StreamId::Session(id), ServiceEventBody::Session(body)) => {
                Some((id, body, &self.event))
            }
            _ => None,
        }
    }
}

/// Writes one batch inside the writer's savepoint: every event must follow its stream's last
/// one; session events are materialised as they are inserted.
pub(crate) fn append(conn: &Connection, batch: &[Encoded], path: &Path) -> Result<()> {
    let sqlite = |source| Error::Sqlite {
        path: path.to_owned(),
        source,
    };
    check_seqs(batch, path, |key| last_seq(conn, key).map_err(sqlite))?;
    let mut insert = conn
        .prepare_cached(
            "INSERT INTO stream_events (stream, seq, ts, submission, data)
             VALUES (?1, ?2, ?3, ?4, ?5)",
        )
        .map_err(sqlite)?;
    for write in writes(batch) {
        match write {
            Write::Event(enc) => {
                let e = &enc.event;
                insert
                    .execute(params![
                        enc.key,
                        to_i64(e.seq),
                        e.ts,
                        e.submission.as_ref().map(SubmissionId::as_str),
                        enc.data
                    ])
                    .map_err(sqlite)?;
            }
            Write::Session(id, change) => sessions::apply(conn, id, &change).map_err(sqlite)?,
        }
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

/// A read of `stream` after `after_seq`, at most `limit` events, whatever the backend
/// ([`StreamStore::stream_events`]): a run's stream from `run_events(run, from, to)` (its
/// events with `from <= seq <= to`, `None` for an unknown run), a service stream from
/// `service(key, from, limit)` (its stored events from seq `from`, at most `limit`).
pub(crate) fn read_stream(
    stream: &StreamId,
    after_seq: u64,
    limit: Option<usize>,
    run_events: impl FnOnce(&RunId, u64, u64) -> Result<Option<Vec<Event>>>,
    service: impl FnOnce(String, u64, Option<u64>) -> Result<Vec<ServiceEvent>>,
) -> Result<Vec<ServiceEvent>> {
    let limit = limit.map(|l| u64::try_from(l).unwrap_or(u64::MAX));
    if limit == Some(0) {
        return Ok(Vec::new());
    }
    let from = after_seq.saturating_add(1);
    match stream {
        StreamId::Run(run) => {
            // A run's seqs are contiguous, so `limit` events end at `after_seq + limit`.
            let to = limit.map_or(u64::MAX, |l| after_seq.saturating_add(l));
            let events = run_events(run, from, to)?.unwrap_or_default();
            Ok(events.into_iter().map(run_service_event).collect())
        }
        _ => service(stream.key(), from, limit),
    }
}

/// A stored event of the service stream `stream` (whose text form is `key`), from its
/// `stream_events` row; [`Error::CorruptStream`] naming `location` when its body does not
/// decode.
pub(crate) fn stored_event(
    stream: &StreamId,
    key: &str,
    location: &Path,
    seq: i64,
    ts: i64,
    submission: Option<String>,
    data: &str,
) -> Result<ServiceEvent> {
    let seq = u64::try_from(seq).unwrap_or(0);
    let body = match stream {
        StreamId::Workspace => {
            serde_json::from_str::<WorkspaceEvent>(data).map(ServiceEventBody::Workspace)
        }
        _ => serde_json::from_str::<SessionEvent>(data).map(ServiceEventBody::Session),
    }
    .map_err(|e| Error::CorruptStream {
        path: location.to_owned(),
        stream: key.to_owned(),
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
        let run_events = |run: &RunId, from, to| self.events(run, from, to);
        read_stream(stream, after_seq, limit, run_events, |key, from, limit| {
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
                    stored_event(stream, &key, self.path(), seq, ts, submission, &data)
                })
                .collect()
        })
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
    fn append_stream(&self, events: Vec<ServiceEvent>) -> Commit {
        self.append_shared(events.into_iter().map(Arc::new).collect())
    }

    /// [`StreamStore::append_stream`] of events the caller keeps sharing (to publish them
    /// once committed) instead of copying them.
    fn append_shared(&self, events: Vec<Arc<ServiceEvent>>) -> Commit;

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
    fn append_shared(&self, events: Vec<Arc<ServiceEvent>>) -> Commit {
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
