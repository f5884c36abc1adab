//! The SQL each writer message runs, inside the writer's transaction.

use std::path::Path;

use rusqlite::{Connection, OptionalExtension, params};
use trellis_graph::{Batch, JournalError};
use trellis_protocol::{Command, RunId};

use crate::error::{Error, Result};
use crate::schema::now_ms;
use trellis_protocol::records::Owner;

/// Writes a batch: the run summary first, then the events, so a failure of the event insert
/// exercises the savepoint rollback of the summary. `blob` is the batch's events, encoded.
pub(crate) fn append(
    conn: &Connection,
    batch: &Batch,
    blob: &[u8],
    me: &Owner,
    path: &Path,
) -> Result<()> {
    let sqlite = |source| Error::Sqlite {
        path: path.to_owned(),
        source,
    };
    let s = &batch.summary;
    let rk: i64 = conn
        .prepare_cached(
            "INSERT INTO runs (id, graph, status, step, last_seq, terminal, error, fork_run,
                               fork_seq, created_ts, updated_ts)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11)
             ON CONFLICT (id) DO UPDATE SET
                graph = excluded.graph, status = excluded.status, step = excluded.step,
                last_seq = excluded.last_seq, terminal = excluded.terminal,
                error = excluded.error, fork_run = excluded.fork_run,
                fork_seq = excluded.fork_seq, updated_ts = excluded.updated_ts
             RETURNING rk",
        )
        .and_then(|mut st| {
            st.query_row(
                params![
                    batch.run.as_str(),
                    s.graph,
                    s.status.as_str(),
                    to_i64(s.step),
                    to_i64(s.last_seq),
                    s.terminal.as_ref().map(|t| t.as_str()),
                    s.error,
                    s.fork.as_ref().map(|f| f.run.as_str()),
                    s.fork.as_ref().map(|f| to_i64(f.seq)),
                    s.created_ts,
                    s.updated_ts,
                ],
                |r| r.get(0),
            )
        })
        .map_err(sqlite)?;

    let (Some(first), Some(last)) = (batch.events.first(), batch.events.last()) else {
        return Ok(());
    };
    let key = event_key(rk, first.seq).ok_or_else(|| Error::Limit {
        path: path.to_owned(),
        detail: seq_limit(&batch.run, first.seq),
    })?;
    conn.prepare_cached("INSERT INTO events (key, last_seq, data) VALUES (?1, ?2, ?3)")
        .and_then(|mut st| st.execute(params![key, to_i64(last.seq), blob]))
        .map_err(sqlite)?;
    conn.prepare_cached(
        "UPDATE run_owners SET heartbeat = ?2 WHERE run_id = ?1 AND pid = ?3 AND host = ?4",
    )
    .and_then(|mut st| st.execute(params![batch.run.as_str(), now_ms(), me.pid, me.host]))
    .map_err(sqlite)?;
    Ok(())
}

/// Claims `run` unless a live other process holds it.
pub(crate) fn claim(
    conn: &Connection,
    run: &RunId,
    me: &Owner,
) -> rusqlite::Result<Result<(), JournalError>> {
    let holder = conn
        .query_row(
            "SELECT pid, host, start_time FROM run_owners WHERE run_id = ?1",
            [run.as_str()],
            |r| {
                Ok(Owner {
                    pid: r.get(0)?,
                    host: r.get(1)?,
                    start_time: r.get::<_, Option<i64>>(2)?.map(|t| t as u64),
                })
            },
        )
        .optional()?;
    if let Some(busy) = refusal(run, holder.as_ref(), me) {
        return Ok(Err(busy));
    }
    let now = now_ms();
    conn.execute(
        "INSERT OR REPLACE INTO run_owners (run_id, pid, host, start_time, claimed_at, heartbeat)
         VALUES (?1, ?2, ?3, ?4, ?5, ?5)",
        params![
            run.as_str(),
            me.pid,
            me.host,
            me.start_time.map(to_i64),
            now
        ],
    )?;
    Ok(Ok(()))
}

/// Drops the claim on `run` held by `owner` (by anyone when `None`).
pub(crate) fn release(
    conn: &Connection,
    run: &RunId,
    owner: Option<&Owner>,
) -> rusqlite::Result<()> {
    match owner {
        None => conn.execute("DELETE FROM run_owners WHERE run_id = ?1", [run.as_str()]),
        Some(me) => conn.execute(
            "DELETE FROM run_owners WHERE run_id = ?1 AND pid = ?2 AND host = ?3",
            params![run.as_str(), me.pid, me.host],
        ),
    }
    .map(drop)
}

/// Queues a command; returns its id.
pub(crate) fn enqueue(conn: &Connection, run: &RunId, body: &str) -> rusqlite::Result<i64> {
    conn.execute(
        "INSERT INTO commands (run_id, created_at, body) VALUES (?1, ?2, ?3)",
        params![run.as_str(), now_ms(), body],
    )?;
    Ok(conn.last_insert_rowid())
}

/// Marks the run's pending commands taken and returns them in id order. Bodies this binary
/// cannot parse (a newer trellis's command) stay pending for a process that can.
pub(crate) fn take_commands(conn: &Connection, run: &RunId) -> rusqlite::Result<Vec<Command>> {
    let mut st = conn.prepare_cached(
        "SELECT id, body FROM commands WHERE run_id = ?1 AND taken_at IS NULL ORDER BY id",
    )?;
    let rows = st
        .query_map([run.as_str()], |r| {
            Ok((r.get::<_, i64>(0)?, r.get::<_, String>(1)?))
        })?
        .collect::<rusqlite::Result<Vec<_>>>()?;
    let (ids, out) = parse_commands(rows);
    let now = now_ms();
    let mut mark = conn.prepare_cached("UPDATE commands SET taken_at = ?2 WHERE id = ?1")?;
    for id in ids {
        mark.execute(params![id, now])?;
    }
    Ok(out)
}

/// A command as the inbox stores it: its JSON (every backend's enqueue).
pub(crate) fn command_body(command: &Command) -> Result<String> {
    serde_json::to_string(command).map_err(|source| Error::Encode {
        what: "command",
        source,
    })
}

/// Why `me` may not claim `run` from its current `holder`: [`JournalError::Busy`] when a live
/// other process holds it (every backend's claim rule).
pub(crate) fn refusal(run: &RunId, holder: Option<&Owner>, me: &Owner) -> Option<JournalError> {
    let holder = holder?;
    (!holder.same_process(me) && crate::claim::is_alive(holder, &me.host)).then(|| {
        JournalError::Busy {
            run: run.to_string(),
            owner: holder.label(),
        }
    })
}

/// The commands of pending `(id, body)` rows, in the rows' order, with the ids to mark
/// taken: bodies this binary cannot parse (a newer trellis's command) are left out, to stay
/// pending for a process that can (every backend's take).
pub(crate) fn parse_commands(rows: Vec<(i64, String)>) -> (Vec<i64>, Vec<Command>) {
    rows.into_iter()
        .filter_map(|(id, body)| Some((id, serde_json::from_str::<Command>(&body).ok()?)))
        .unzip()
}

/// Why a batch starting at `seq` cannot be stored: event keys hold seqs below 2^32.
pub(crate) fn seq_limit(run: &RunId, seq: u64) -> String {
    format!("run {run} reached seq {seq} (at most 2^32 - 1 per run)")
}

/// The `events` rowid of a run's batch: `(rk << 32) | first_seq`.
pub(crate) fn event_key(rk: i64, first_seq: u64) -> Option<i64> {
    let seq = u32::try_from(first_seq).ok()?;
    if !(0..=i64::from(i32::MAX)).contains(&rk) {
        return None;
    }
    Some((rk << 32) | i64::from(seq))
}

/// SQLite integers are signed; seqs and steps never come near `i64::MAX`.
pub(crate) fn to_i64(v: u64) -> i64 {
    i64::try_from(v).unwrap_or(i64::MAX)
}
