//! Usage: the `model_calls` table, one row per model call, and its totals; the `tool_calls`
//! table, one row per tool call. Behind [`UsageStore`].
//!
//! Rows are written through the writer thread (queued, group-committed) and read back to
//! show a run's usage and to re-book it into the budgets of a resumed run.

use std::sync::mpsc;

use rusqlite::{Connection, Row, params};
use trellis_protocol::RunId;
use trellis_protocol::records::{ModelCallRecord, RunUsage, ToolCallRecord, UsageTotals};

use crate::error::Result;
use crate::read::Reader;
use crate::{Msg, Record, SqliteStore};

/// Model and tool calls: recorded as they finish (waiting for the commit or not), read back
/// per run, and a run's model usage in total, per stage and per agent.
pub trait UsageStore: Send + Sync {
    /// Records a tool call; returns its row id once committed.
    fn record_tool_call(&self, record: ToolCallRecord) -> Result<i64>;

    /// Queues a tool-call record without waiting for its commit (for callers on an async
    /// executor; [`Backend::flush`](crate::Backend::flush) waits for it). A failure is not reported.
    fn record_tool_call_nowait(&self, record: ToolCallRecord);

    /// The run's tool calls, in order.
    fn tool_calls(&self, run: &RunId) -> Result<Vec<ToolCallRecord>>;

    /// Records a model call's usage; returns its row id once committed.
    fn record_model_call(&self, record: ModelCallRecord) -> Result<i64>;

    /// Queues a model call's usage without waiting for its commit (for callers on an async
    /// executor; [`Backend::flush`](crate::Backend::flush) waits for it). A failure is not reported.
    fn record_model_call_nowait(&self, record: ModelCallRecord);

    /// The run's model calls, in order.
    fn model_calls(&self, run: &RunId) -> Result<Vec<ModelCallRecord>>;

    /// The run's model usage: in total, per stage and per agent.
    fn run_usage(&self, run: &RunId) -> Result<RunUsage>;
}

impl UsageStore for SqliteStore {
    fn record_tool_call(&self, record: ToolCallRecord) -> Result<i64> {
        self.request(|reply| Msg::Record(Record::ToolCall(record), reply))?
    }

    fn record_tool_call_nowait(&self, record: ToolCallRecord) {
        if let Some(tx) = &self.tx {
            let (reply, _) = mpsc::channel();
            drop(tx.send(Msg::Record(Record::ToolCall(record), reply)));
        }
    }

    fn tool_calls(&self, run: &RunId) -> Result<Vec<ToolCallRecord>> {
        self.reader.tool_calls(run)
    }

    fn record_model_call(&self, record: ModelCallRecord) -> Result<i64> {
        self.request(|reply| Msg::Record(Record::ModelCall(record), reply))?
    }

    fn record_model_call_nowait(&self, record: ModelCallRecord) {
        drop(self.post(|reply| Msg::Record(Record::ModelCall(record), reply)));
    }

    fn model_calls(&self, run: &RunId) -> Result<Vec<ModelCallRecord>> {
        self.reader.model_calls(run)
    }

    fn run_usage(&self, run: &RunId) -> Result<RunUsage> {
        self.reader.run_usage(run)
    }
}

/// Inserts a tool call; returns its row id.
pub(crate) fn write_tool_call(conn: &Connection, r: &ToolCallRecord) -> rusqlite::Result<i64> {
    conn.prepare_cached(
        "INSERT INTO tool_calls (run_id, node_id, tool, args, decision, is_error, summary,
                                         duration_ms, started_at)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)",
    )?
    .execute(params![
        r.run_id.as_ref().map(RunId::as_str),
        r.node_id,
        r.tool,
        r.args,
        r.decision,
        r.is_error,
        r.summary,
        r.duration_ms,
        r.started_at
    ])?;
    Ok(conn.last_insert_rowid())
}

/// Inserts a model call; returns its row id.
pub(crate) fn write_model_call(conn: &Connection, r: &ModelCallRecord) -> rusqlite::Result<i64> {
    conn.prepare_cached(
        "INSERT INTO model_calls (run_id, stage, agent, profile, model, prompt_tokens,
                                  completion_tokens, cached_tokens, reported, cost_usd,
                                  outcome, at)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12)",
    )?
    .execute(params![
        r.run_id.as_ref().map(RunId::as_str),
        r.stage,
        r.agent,
        r.profile,
        r.model,
        to_sql(r.prompt_tokens),
        to_sql(r.completion_tokens),
        to_sql(r.cached_tokens),
        r.reported,
        r.cost_usd,
        r.outcome,
        r.at
    ])?;
    Ok(conn.last_insert_rowid())
}

/// A token count as the databases store it: their integers are signed (both backends); token
/// counts never come near the limit.
pub(crate) fn to_sql(n: u64) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

/// A stored count or sum as the records hold it (a negative one, which no write makes, as 0).
pub(crate) fn from_sql(n: i64) -> u64 {
    u64::try_from(n).unwrap_or(0)
}

fn record_row(r: &Row<'_>) -> rusqlite::Result<ModelCallRecord> {
    Ok(ModelCallRecord {
        id: r.get(0)?,
        run_id: r.get::<_, Option<String>>(1)?.map(RunId::from_string),
        stage: r.get(2)?,
        agent: r.get(3)?,
        profile: r.get(4)?,
        model: r.get(5)?,
        prompt_tokens: from_sql(r.get(6)?),
        completion_tokens: from_sql(r.get(7)?),
        cached_tokens: from_sql(r.get(8)?),
        reported: r.get(9)?,
        cost_usd: r.get(10)?,
        outcome: r.get(11)?,
        at: r.get(12)?,
    })
}

/// The aggregate columns, in [`totals_row`]'s order, after the group key.
const TOTALS: &str = "COUNT(*), COALESCE(SUM(prompt_tokens), 0), \
     COALESCE(SUM(completion_tokens), 0), COALESCE(SUM(cached_tokens), 0), \
     COALESCE(SUM(reported = 0), 0), COALESCE(SUM(outcome <> 'ok'), 0), SUM(cost_usd)";

fn totals_row(r: &Row<'_>, at: usize) -> rusqlite::Result<UsageTotals> {
    Ok(UsageTotals {
        calls: from_sql(r.get(at)?),
        prompt_tokens: from_sql(r.get(at + 1)?),
        completion_tokens: from_sql(r.get(at + 2)?),
        cached_tokens: from_sql(r.get(at + 3)?),
        estimated_calls: from_sql(r.get(at + 4)?),
        unfinished_calls: from_sql(r.get(at + 5)?),
        cost_usd: r.get(at + 6)?,
    })
}

impl Reader {
    /// The run's tool calls in order.
    pub(crate) fn tool_calls(&self, run: &RunId) -> Result<Vec<ToolCallRecord>> {
        self.with(|c| {
            c.prepare_cached(
                "SELECT id, run_id, node_id, tool, args, decision, is_error, summary,
                        duration_ms, started_at
                 FROM tool_calls WHERE run_id = ?1 ORDER BY id",
            )
            .and_then(|mut st| {
                st.query_map([run.as_str()], |r| {
                    Ok(ToolCallRecord {
                        id: r.get(0)?,
                        run_id: r.get::<_, Option<String>>(1)?.map(RunId::from_string),
                        node_id: r.get(2)?,
                        tool: r.get(3)?,
                        args: r.get(4)?,
                        decision: r.get(5)?,
                        is_error: r.get(6)?,
                        summary: r.get(7)?,
                        duration_ms: r.get(8)?,
                        started_at: r.get(9)?,
                    })
                })?
                .collect()
            })
            .map_err(self.sqlite())
        })
    }

    /// The run's model calls in order.
    pub(crate) fn model_calls(&self, run: &RunId) -> Result<Vec<ModelCallRecord>> {
        self.with(|c| {
            c.prepare_cached(
                "SELECT id, run_id, stage, agent, profile, model, prompt_tokens,
                        completion_tokens, cached_tokens, reported, cost_usd, outcome, at
                 FROM model_calls WHERE run_id = ?1 ORDER BY id",
            )
            .and_then(|mut st| st.query_map([run.as_str()], record_row)?.collect())
            .map_err(self.sqlite())
        })
    }

    /// The run's usage in total, per stage and per agent.
    pub(crate) fn run_usage(&self, run: &RunId) -> Result<RunUsage> {
        self.with(|c| read_usage(c, run).map_err(self.sqlite()))
    }
}

fn read_usage(c: &Connection, run: &RunId) -> rusqlite::Result<RunUsage> {
    let total = c
        .prepare_cached(&format!(
            "SELECT {TOTALS} FROM model_calls WHERE run_id = ?1"
        ))?
        .query_row([run.as_str()], |r| totals_row(r, 0))?;
    let grouped = |column: &str| -> rusqlite::Result<Vec<(String, UsageTotals)>> {
        c.prepare_cached(&format!(
            "SELECT {column}, {TOTALS} FROM model_calls
             WHERE run_id = ?1 AND {column} IS NOT NULL
             GROUP BY {column} ORDER BY {column}"
        ))?
        .query_map([run.as_str()], |r| Ok((r.get(0)?, totals_row(r, 1)?)))?
        .collect()
    };
    Ok(RunUsage {
        run: total,
        stages: grouped("stage")?,
        agents: grouped("agent")?,
    })
}
