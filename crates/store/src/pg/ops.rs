//! Claims, releases and the command inbox on PostgreSQL: the SQL of `crate::ops` for the
//! write lane, where many processes share the tables.
//!
//! * **Claims.** A claim is one row of `run_owners` per run (a worker's lease, with its expiry
//!   and token, is a row of `run_leases`: `lease`). Claiming locks the run's row (`FOR UPDATE`) before judging its holder
//!   with the SQLite backend's rule (`crate::ops::refusal`: a live other process keeps it),
//!   and inserts with `ON CONFLICT DO NOTHING` when there is none, looking again if another
//!   process inserted first: two processes claiming at once cannot both win. Unlike SQLite's
//!   claims, which skip the fsync because every claimer dies with the machine, claims and
//!   releases commit synchronously here: the server outlives its clients' crashes and they
//!   its, so a claim lost in a server crash would let a second process take a run its owner
//!   still executes.
//! * **The inbox.** Command ids come from an identity column, drawn at insert, not at commit:
//!   with several processes enqueuing, a command with a lower id may commit after one with a
//!   higher id was taken. A take therefore marks rows taken (`taken_at`) rather than
//!   remembering the highest id delivered, so the late one is delivered by the next take,
//!   and takes the pending rows in id order with `FOR UPDATE SKIP LOCKED`: two takers never
//!   deliver a command twice (a row another taker holds is skipped, one it took is no longer
//!   pending once its lock is gone). A take commits without waiting for the WAL flush
//!   (`synchronous_commit = off`), as SQLite's does without an fsync: a lost take re-delivers
//!   a command the engine had not yet acted on durably, since its next batch's synchronous
//!   commit flushes the take too.

use tokio_postgres::types::{ToSql, Type};
use tokio_postgres::{Client, Error};
use trellis_graph::JournalError;
use trellis_protocol::records::Owner;
use trellis_protocol::{Command, RunId};

use crate::ops::{parse_commands, refusal, to_i64};
use crate::schema::now_ms;

/// How often a claim looks again when the run's row vanished or appeared under it.
const CLAIM_TRIES: usize = 3;

/// Claims `run` for `me` unless a live other process holds it (answered as
/// [`JournalError::Busy`]); commits.
pub(crate) async fn claim(
    client: &mut Client,
    run: &RunId,
    me: &Owner,
) -> Result<Result<(), JournalError>, Error> {
    let id = run.as_str();
    let pid = i64::from(me.pid);
    let start = me.start_time.map(to_i64);
    let tx = client.transaction().await?;
    for _ in 0..CLAIM_TRIES {
        let now = now_ms();
        let holder = tx
            .query_typed_opt(
                "SELECT pid, host, start_time FROM run_owners WHERE run_id = $1 FOR UPDATE",
                &[(&id, Type::TEXT)],
            )
            .await?;
        let params: [(&(dyn ToSql + Sync), Type); 5] = [
            (&id, Type::TEXT),
            (&pid, Type::INT8),
            (&me.host, Type::TEXT),
            (&start, Type::INT8),
            (&now, Type::INT8),
        ];
        let Some(holder) = holder else {
            let inserted = tx
                .execute_typed(
                    "INSERT INTO run_owners (run_id, pid, host, start_time, claimed_at, heartbeat)
                     VALUES ($1, $2, $3, $4, $5, $5) ON CONFLICT (run_id) DO NOTHING",
                    &params,
                )
                .await?;
            if inserted == 0 {
                // Another process claimed it meanwhile: judge that claim.
                continue;
            }
            tx.commit().await?;
            return Ok(Ok(()));
        };
        let holder = Owner {
            pid: u32::try_from(holder.try_get::<_, i64>(0)?).unwrap_or(0),
            host: holder.try_get(1)?,
            start_time: holder.try_get::<_, Option<i64>>(2)?.map(|t| t as u64),
        };
        if let Some(busy) = refusal(run, Some(&holder), me) {
            // Dropping the transaction rolls it back.
            return Ok(Err(busy));
        }
        tx.execute_typed(
            "UPDATE run_owners SET pid = $2, host = $3, start_time = $4, claimed_at = $5,
                 heartbeat = $5 WHERE run_id = $1",
            &params,
        )
        .await?;
        tx.commit().await?;
        return Ok(Ok(()));
    }
    Ok(Err(JournalError::Backend(format!(
        "cannot claim run {run}: its claim changed hands {CLAIM_TRIES} times while claiming; \
         try again"
    ))))
}

/// Drops the claim on `run` held by `owner` (by anyone when `None`).
pub(crate) async fn release(
    client: &Client,
    run: &str,
    owner: Option<&Owner>,
) -> Result<(), Error> {
    match owner {
        None => {
            client
                .execute_typed(
                    "DELETE FROM run_owners WHERE run_id = $1",
                    &[(&run, Type::TEXT)],
                )
                .await?
        }
        Some(me) => {
            let pid = i64::from(me.pid);
            client
                .execute_typed(
                    "DELETE FROM run_owners WHERE run_id = $1 AND pid = $2 AND host = $3",
                    &[
                        (&run, Type::TEXT),
                        (&pid, Type::INT8),
                        (&me.host, Type::TEXT),
                    ],
                )
                .await?
        }
    };
    Ok(())
}

/// Queues a command (its JSON body); returns its id.
pub(crate) async fn enqueue(client: &Client, run: &str, body: &str) -> Result<i64, Error> {
    let now = now_ms();
    // The engine executing the run is told at once (`crate::Notice::Queued`).
    let notice = crate::Notice::Queued(run).text();
    let params: [(&(dyn ToSql + Sync), Type); 4] = [
        (&run, Type::TEXT),
        (&now, Type::INT8),
        (&body, Type::TEXT),
        (&notice, Type::TEXT),
    ];
    let row = client
        .query_typed_one(
            "WITH queued AS (
                 INSERT INTO commands (run_id, created_at, body) VALUES ($1, $2, $3)
                 RETURNING id)
             SELECT id, pg_notify('trellis', $4) FROM queued",
            &params,
        )
        .await?;
    row.try_get(0)
}

/// Marks the run's pending commands taken and returns them in id order; commits. Bodies this
/// binary cannot parse stay pending for a process that can.
pub(crate) async fn take_commands(client: &mut Client, run: &str) -> Result<Vec<Command>, Error> {
    let tx = client.transaction().await?;
    let params: [(&(dyn ToSql + Sync), Type); 1] = [(&run, Type::TEXT)];
    let (off, rows) = futures::join!(
        tx.batch_execute("SET LOCAL synchronous_commit = off"),
        tx.query_typed(
            "SELECT id, body FROM commands WHERE run_id = $1 AND taken_at IS NULL
             ORDER BY id FOR UPDATE SKIP LOCKED",
            &params,
        ),
    );
    off?;
    let rows = rows?
        .iter()
        .map(|r| Ok((r.try_get(0)?, r.try_get(1)?)))
        .collect::<Result<Vec<(i64, String)>, Error>>()?;
    let (ids, commands) = parse_commands(rows);
    if !ids.is_empty() {
        let now = now_ms();
        tx.execute_typed(
            "UPDATE commands SET taken_at = $2 WHERE id = ANY($1)",
            &[(&ids, Type::INT8_ARRAY), (&now, Type::INT8)],
        )
        .await?;
    }
    tx.commit().await?;
    Ok(commands)
}
