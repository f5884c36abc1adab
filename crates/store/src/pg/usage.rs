//! [`UsageStore`] on PostgreSQL: the `tool_calls` and `model_calls` tables (SQLite's are in
//! `crate::usage`, whose count conversions both use).
//!
//! A record is one `INSERT … RETURNING id` on the write lane; the `*_nowait` methods queue it
//! there ([`PgStore::queue_write`]) and return at once, so an agent's async task never waits
//! for the server, and the writes keep the order they were sent in.
//!
//! A run's usage is one statement over grouping sets — the run, each stage, each agent — so
//! the three come from one snapshot. Its totals equal SQLite's for the same rows:
//!
//! * calls and token sums are exact integers (a BIGINT's `SUM` is a NUMERIC here, cast
//!   back; an overflow fails, as SQLite's `integer overflow`);
//! * `reported` is a BOOLEAN, counted with `FILTER (WHERE NOT reported)` where SQLite sums
//!   `reported = 0`; unfinished calls likewise (`outcome <> 'ok'`);
//! * the cost is not summed by the server, whose float `SUM` adds naively, but by
//!   [`kbn_sum`] — SQLite's Kahan–Babuška–Neumaier summation — over the costs in id order,
//!   the order SQLite reads them in; none when no call has one.

use tokio_postgres::Row;
use tokio_postgres::types::Type;
use trellis_protocol::RunId;
use trellis_protocol::records::{ModelCallRecord, RunUsage, ToolCallRecord, UsageTotals};

use super::PgStore;
use super::values::real;
use crate::UsageStore;
use crate::error::Result;
use crate::usage::{from_sql, to_sql};

impl UsageStore for PgStore {
    fn record_tool_call(&self, record: ToolCallRecord) -> Result<i64> {
        self.write(async move |c| Ok(insert_tool_call(c, &record).await?))
    }

    fn record_tool_call_nowait(&self, record: ToolCallRecord) {
        // A failure is not reported (the trait's contract); a closed store neither.
        drop(self.queue_write(async move |c| {
            insert_tool_call(c, &record).await?;
            Ok(())
        }));
    }

    fn tool_calls(&self, run: &RunId) -> Result<Vec<ToolCallRecord>> {
        let run = run.as_str().to_owned();
        self.read(async move |c| {
            let rows = c
                .query_typed(
                    "SELECT id, run_id, node_id, tool, args, decision, is_error, summary,
                            duration_ms, started_at
                     FROM tool_calls WHERE run_id = $1 ORDER BY id",
                    &[(&run, Type::TEXT)],
                )
                .await?;
            Ok(rows.iter().map(tool_call_row).collect::<Result<_, _>>()?)
        })
    }

    fn record_model_call(&self, record: ModelCallRecord) -> Result<i64> {
        self.write(async move |c| Ok(insert_model_call(c, &record).await?))
    }

    fn record_model_call_nowait(&self, record: ModelCallRecord) {
        // A failure is not reported (the trait's contract); a closed store neither.
        drop(self.queue_write(async move |c| {
            insert_model_call(c, &record).await?;
            Ok(())
        }));
    }

    fn model_calls(&self, run: &RunId) -> Result<Vec<ModelCallRecord>> {
        let run = run.as_str().to_owned();
        self.read(async move |c| {
            let rows = c
                .query_typed(
                    "SELECT id, run_id, stage, agent, profile, model, prompt_tokens,
                            completion_tokens, cached_tokens, reported, cost_usd, outcome, at
                     FROM model_calls WHERE run_id = $1 ORDER BY id",
                    &[(&run, Type::TEXT)],
                )
                .await?;
            Ok(rows.iter().map(model_call_row).collect::<Result<_, _>>()?)
        })
    }

    fn run_usage(&self, run: &RunId) -> Result<RunUsage> {
        let run = run.as_str().to_owned();
        self.read(async move |c| {
            let rows = c.query_typed(USAGE, &[(&run, Type::TEXT)]).await?;
            Ok(usage_of_rows(&rows)?)
        })
    }
}

/// Inserts a tool call; answers its id.
async fn insert_tool_call(
    c: &tokio_postgres::Client,
    r: &ToolCallRecord,
) -> Result<i64, tokio_postgres::Error> {
    let run = r.run_id.as_ref().map(RunId::as_str);
    // A tool's output may carry NUL, which PostgreSQL text refuses: replaced, not lost.
    let summary = super::runs::text(&r.summary);
    let row = c
        .query_typed_one(
            "INSERT INTO tool_calls (run_id, node_id, tool, args, decision, is_error, summary,
                                     duration_ms, started_at)
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9) RETURNING id",
            &[
                (&run, Type::TEXT),
                (&r.node_id, Type::TEXT),
                (&r.tool, Type::TEXT),
                (&r.args, Type::TEXT),
                (&r.decision, Type::TEXT),
                (&r.is_error, Type::BOOL),
                (&summary, Type::TEXT),
                (&r.duration_ms, Type::INT8),
                (&r.started_at, Type::INT8),
            ],
        )
        .await?;
    row.try_get(0)
}

/// Inserts a model call; answers its id.
async fn insert_model_call(
    c: &tokio_postgres::Client,
    r: &ModelCallRecord,
) -> Result<i64, tokio_postgres::Error> {
    let run = r.run_id.as_ref().map(RunId::as_str);
    let tokens = [r.prompt_tokens, r.completion_tokens, r.cached_tokens].map(to_sql);
    let cost = r.cost_usd.and_then(real);
    let row = c
        .query_typed_one(
            "INSERT INTO model_calls (run_id, stage, agent, profile, model, prompt_tokens,
                                      completion_tokens, cached_tokens, reported, cost_usd,
                                      outcome, at)
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12) RETURNING id",
            &[
                (&run, Type::TEXT),
                (&r.stage, Type::TEXT),
                (&r.agent, Type::TEXT),
                (&r.profile, Type::TEXT),
                (&r.model, Type::TEXT),
                (&tokens[0], Type::INT8),
                (&tokens[1], Type::INT8),
                (&tokens[2], Type::INT8),
                (&r.reported, Type::BOOL),
                (&cost, Type::FLOAT8),
                (&r.outcome, Type::TEXT),
                (&r.at, Type::INT8),
            ],
        )
        .await?;
    row.try_get(0)
}

fn tool_call_row(r: &Row) -> Result<ToolCallRecord, tokio_postgres::Error> {
    Ok(ToolCallRecord {
        id: r.try_get(0)?,
        run_id: r.try_get::<_, Option<String>>(1)?.map(RunId::from_string),
        node_id: r.try_get(2)?,
        tool: r.try_get(3)?,
        args: r.try_get(4)?,
        decision: r.try_get(5)?,
        is_error: r.try_get(6)?,
        summary: r.try_get(7)?,
        duration_ms: r.try_get(8)?,
        started_at: r.try_get(9)?,
    })
}

fn model_call_row(r: &Row) -> Result<ModelCallRecord, tokio_postgres::Error> {
    Ok(ModelCallRecord {
        id: r.try_get(0)?,
        run_id: r.try_get::<_, Option<String>>(1)?.map(RunId::from_string),
        stage: r.try_get(2)?,
        agent: r.try_get(3)?,
        profile: r.try_get(4)?,
        model: r.try_get(5)?,
        prompt_tokens: from_sql(r.try_get(6)?),
        completion_tokens: from_sql(r.try_get(7)?),
        cached_tokens: from_sql(r.try_get(8)?),
        reported: r.try_get(9)?,
        cost_usd: r.try_get(10)?,
        outcome: r.try_get(11)?,
        at: r.try_get(12)?,
    })
}

/// A run's usage: one row for the run (`GROUPING(stage, agent)` = 3), one per stage (1)
/// and one per agent (2) — the stage and agent sets each with a group for the calls without
/// one, which SQLite leaves out and so does [`usage_of_rows`].
const USAGE: &str = "SELECT GROUPING(stage, agent), stage, agent, COUNT(*),
        COALESCE(SUM(prompt_tokens), 0)::int8, COALESCE(SUM(completion_tokens), 0)::int8,
        COALESCE(SUM(cached_tokens), 0)::int8,
        COUNT(*) FILTER (WHERE NOT reported), COUNT(*) FILTER (WHERE outcome <> 'ok'),
        array_agg(cost_usd ORDER BY id) FILTER (WHERE cost_usd IS NOT NULL)
     FROM model_calls WHERE run_id = $1
     GROUP BY GROUPING SETS ((), (stage), (agent))";

/// The [`RunUsage`] of [`USAGE`]'s rows: stages and agents by name (bytewise, as SQLite's
/// `ORDER BY` of text).
fn usage_of_rows(rows: &[Row]) -> Result<RunUsage, tokio_postgres::Error> {
    let mut usage = RunUsage::default();
    for r in rows {
        let totals = UsageTotals {
            calls: from_sql(r.try_get(3)?),
            prompt_tokens: from_sql(r.try_get(4)?),
            completion_tokens: from_sql(r.try_get(5)?),
            cached_tokens: from_sql(r.try_get(6)?),
            estimated_calls: from_sql(r.try_get(7)?),
            unfinished_calls: from_sql(r.try_get(8)?),
            cost_usd: r.try_get::<_, Option<Vec<f64>>>(9)?.map(|c| kbn_sum(&c)),
        };
        let grouping: i32 = r.try_get(0)?;
        match grouping {
            1 => {
                if let Some(stage) = r.try_get::<_, Option<String>>(1)? {
                    usage.stages.push((stage, totals));
                }
            }
            2 => {
                if let Some(agent) = r.try_get::<_, Option<String>>(2)? {
                    usage.agents.push((agent, totals));
                }
            }
            _ => usage.run = totals,
        }
    }
    usage.stages.sort_by(|a, b| a.0.cmp(&b.0));
    usage.agents.sort_by(|a, b| a.0.cmp(&b.0));
    Ok(usage)
}

/// The sum of `values` as SQLite's `SUM` of REAL values computes it (sqlite3.c, `sumStep`
/// and `sumFinalize`): Kahan–Babuška–Neumaier compensated summation in the given order,
/// the running compensation added at the end unless it overflowed.
fn kbn_sum(values: &[f64]) -> f64 {
    let (mut sum, mut err) = (0.0_f64, 0.0_f64);
    for &r in values {
        let t = sum + r;
        if sum.abs() > r.abs() {
            err += (sum - t) + r;
        } else {
            err += (r - t) + sum;
        }
        sum = t;
    }
    if err.is_finite() { sum + err } else { sum }
}

#[cfg(test)]
mod tests {
    use super::kbn_sum;

    #[test]
    fn costs_sum_with_sqlites_compensation() {
        assert_eq!(kbn_sum(&[]), 0.0);
        assert_eq!(kbn_sum(&[0.25, 0.5]), 0.75);
        // Naive summation loses the small terms next to the large one; SQLite's does not.
        let values = [1e16, 1.0, 1.0, -1e16];
        assert_eq!(values.iter().sum::<f64>(), 0.0);
        assert_eq!(kbn_sum(&values), 2.0);
        // 0.1 ten times: naive gives 0.9999999999999999.
        assert_eq!(kbn_sum(&[0.1; 10]), 1.0);
        // An infinite compensation is left out, as sumFinalize does.
        assert_eq!(kbn_sum(&[f64::INFINITY, 1.0]), f64::INFINITY);
    }
}
