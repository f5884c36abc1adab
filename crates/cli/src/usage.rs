//! `trellis runs usage`: a run's model calls and their token and cost totals, per run,
//! stage and agent (the `model_calls` the workspace's records keep).

use std::process::ExitCode;

use trellis_core::Records;
use trellis_protocol::records::{ModelCallRecord, UsageTotals};

use crate::display::{timestamp, truncate};

/// Prints the usage of the run `run` (an id or a unique prefix).
pub fn usage(records: &Records, run: &str, json: bool) -> anyhow::Result<ExitCode> {
    let rec = records.run_record(run)?;
    let calls = records.model_calls(&rec.id)?;
    let totals = records.usage(&rec.id)?;
    if json {
        let v = serde_json::json!({ "run": rec.id, "usage": totals, "calls": calls });
        println!("{}", serde_json::to_string_pretty(&v)?);
        return Ok(ExitCode::SUCCESS);
    }
    println!("run    {}", rec.id);
    if calls.is_empty() {
        println!("usage  no model calls recorded");
        return Ok(ExitCode::SUCCESS);
    }
    println!("usage  {}", summary(&totals.run));
    let mut notes = Vec::new();
    if totals.run.estimated_calls > 0 {
        notes.push(format!(
            "{} estimated (the provider reported no counts)",
            plural(totals.run.estimated_calls, "call")
        ));
    }
    if totals.run.unfinished_calls > 0 {
        notes.push(format!(
            "{} failed or cancelled",
            plural(totals.run.unfinished_calls, "call")
        ));
    }
    if !notes.is_empty() {
        println!("       {}", notes.join("; "));
    }
    for (title, groups) in [("stage", &totals.stages), ("agent", &totals.agents)] {
        if groups.is_empty() {
            continue;
        }
        println!("\nby {title}");
        let width = groups
            .iter()
            .map(|(n, _)| n.chars().count())
            .max()
            .unwrap_or(0);
        for (name, t) in groups {
            println!("  {name:<width$}  {}", summary(t));
        }
    }
    println!("\ncalls");
    for c in &calls {
        println!("  {}", call_line(c));
    }
    Ok(ExitCode::SUCCESS)
}

fn plural(n: u64, word: &str) -> String {
    if n == 1 {
        format!("1 {word}")
    } else {
        format!("{n} {word}s")
    }
}

/// `4 calls, 785 tokens (610 prompt of which 60 cached, 175 completion), $0.7500`.
fn summary(t: &UsageTotals) -> String {
    let cached = if t.cached_tokens > 0 {
        format!(" of which {} cached", t.cached_tokens)
    } else {
        String::new()
    };
    let cost = t.cost_usd.map(|c| format!(", ${c:.4}")).unwrap_or_default();
    format!(
        "{}, {} tokens ({} prompt{cached}, {} completion){cost}",
        plural(t.calls, "call"),
        t.total_tokens(),
        t.prompt_tokens,
        t.completion_tokens,
    )
}

fn call_line(c: &ModelCallRecord) -> String {
    let place = match (&c.stage, &c.agent) {
        (Some(s), Some(a)) => format!("{s}/{a}"),
        (Some(s), None) => s.clone(),
        (None, Some(a)) => a.clone(),
        (None, None) => "-".into(),
    };
    let mut line = format!(
        "{}  {}  {} ({})  {}+{} tokens",
        timestamp(c.at),
        truncate(&place, 40),
        c.profile,
        truncate(&c.model, 40),
        c.prompt_tokens,
        c.completion_tokens
    );
    if !c.reported {
        line.push_str(" (estimated)");
    }
    if let Some(cost) = c.cost_usd {
        line.push_str(&format!("  ${cost:.4}"));
    }
    if c.outcome != "ok" {
        line.push_str(&format!("  {}", c.outcome));
    }
    line
}
