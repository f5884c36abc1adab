//! Steering runs through the runtime service: `trellis runs message`, `runs prune`, and
//! `runs cancel` of workflow runs, and the recorded turns of `runs show --turns`.
//!
//! A run executing in another process gets the command through the store's command inbox;
//! a paused run is resumed here with the command applied first, and followed until it
//! stops again.

use std::process::ExitCode;
use std::sync::Arc;

use serde_json::{Value, json};
use trellis_core::Records;
use trellis_core::service::Service;
use trellis_protocol::records::SessionFilter;
use trellis_protocol::{Op, RunId};

use crate::display::truncate;

/// Submits a steering op for `run` and follows the run if it was resumed here.
pub async fn steer(
    service: &Arc<Service>,
    run: &RunId,
    op: Op,
    json: bool,
) -> anyhow::Result<ExitCode> {
    let mut live = service.live();
    let out = service.call(op).await?;
    let how = out["delivered"].as_str().unwrap_or_default();
    if json {
        println!("{}", serde_json::to_string_pretty(&out)?);
    } else {
        match how {
            "inbox" => println!(
                "sent to {} (the process executing run {}); it applies it within a second",
                out["owner"].as_str().unwrap_or("its owner"),
                run.short()
            ),
            "resumed" => println!("run {} resumed here to apply it", run.short()),
            "queued" => println!(
                "queued for the workers: the worker executing run {} applies it before its next \
                 step, or a worker resumes the run with it",
                run.short()
            ),
            _ => println!("done"),
        }
    }
    if how == "resumed" {
        crate::follow::follow_run(service, &mut live, run, json).await;
        let o = service.run_state(run)?;
        if !json {
            println!("run {} {}", run.short(), o.status);
            for (node, it) in &o.waiting {
                println!("  {node} is waiting: {}", it.prompt);
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// Prints the recorded turns of every agent session of `run`.
pub fn turns(records: &Records, run: &RunId, as_json: bool) -> anyhow::Result<()> {
    let mut sessions = records.sessions(&SessionFilter {
        run: Some(run.clone()),
        ..SessionFilter::default()
    })?;
    sessions.sort_by_key(|s| s.created_ms);
    if as_json {
        let mut all = Vec::new();
        for s in &sessions {
            all.push(json!({ "session": s, "turns": records.turns(&s.id)? }));
        }
        println!("{}", serde_json::to_string_pretty(&Value::Array(all))?);
        return Ok(());
    }
    if sessions.is_empty() {
        println!("no recorded turns (runs recorded before turn recording have none)");
        return Ok(());
    }
    for s in &sessions {
        let who = match &s.owner {
            trellis_protocol::SessionOwner::Agent { node, role, .. } => format!("{node} ({role})"),
            trellis_protocol::SessionOwner::Channel { channel } => format!("channel {channel}"),
        };
        println!("── {who}  [{}]", s.status.as_str());
        for t in records.turns(&s.id)? {
            println!(
                "  turn {} (attempt {}, {}, {}+{} tokens)",
                t.turn,
                t.attempt,
                t.status.as_str(),
                t.usage.prompt_tokens,
                t.usage.completion_tokens
            );
            for u in &t.user_texts {
                println!("    user: {}", truncate(&one_line(u), 200));
            }
            if !t.thoughts.trim().is_empty() {
                println!("    thinking: {}", truncate(&one_line(&t.thoughts), 200));
            }
            // A structured call (the final report) is not streamed: its text is the message's.
            let text = if t.text.is_empty() {
                t.message
                    .as_ref()
                    .and_then(|m| m["content"].as_str())
                    .unwrap_or_default()
                    .to_owned()
            } else {
                t.text.clone()
            };
            for line in text.lines().filter(|l| !l.trim().is_empty()) {
                println!("    {}", truncate(line, 200));
            }
            for tool in &t.tools {
                let status = tool
                    .status
                    .map(|s| format!("{s:?}").to_lowercase())
                    .unwrap_or_else(|| "running".into());
                println!(
                    "    → {} {}  [{status}{}]",
                    tool.name,
                    truncate(&tool.input.to_string(), 120),
                    tool.duration_ms
                        .map(|d| format!(", {d} ms"))
                        .unwrap_or_default()
                );
                if let Some(out) = &tool.output {
                    println!("      {}", truncate(&one_line(out), 160));
                }
            }
            if let Some(e) = &t.error {
                println!("    error: {e}");
            }
        }
    }
    Ok(())
}

fn one_line(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}
