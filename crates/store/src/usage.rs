//! Model usage: the `model_calls` table, one row per model call, and its totals.
//!
//! Rows are written through the writer thread like tool calls (queued, group-committed) and
//! read back to show a run's usage and to re-book it into the budgets of a resumed run.

use rusqlite::{Connection, Row, params};
use trellis_protocol::RunId;
use trellis_protocol::records::{ModelCallRecord, RunUsage, UsageTotals};

use crate::error::Result;
use crate::read::Reader;

/// Inserts `r`; returns its row id.
pub(crate) fn write(conn: &Connection, r: &ModelCallRecord) -> rusqlite::Result<i64> {
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

/// SQLite integers are signed; token counts never come near the limit.
fn to_sql(n: u64) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

fn from_sql(n: i64) -> u64 {
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
