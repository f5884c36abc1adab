//! `trellis runs list | show | events | usage | trace | resume | fork | cancel`.
//!
//! The read commands (`list`, `show`, `events`, `usage`, `trace`) read the workspace's
//! [`Records`](trellis_core::Records) and nothing else: no configuration, models or service
//! (`scripts/frontdeps.py` checks this module's imports). The commands that act on a run go
//! through the runtime service, or, for a demonstration run, to the engine in `crate::demo`.

use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context;
use clap::Subcommand;
use trellis_core::Records;
use trellis_core::records::TASK_TREE;
use trellis_protocol::records::{RunFilter, RunRecord};
use trellis_protocol::{Answer, Command, Message, NodeId, RunStatus};

use crate::display::{compact, details, mark, status, timestamp, truncate};
use crate::drive::Show;
use crate::workspace::Workspace;

/// `trellis runs` subcommands.
#[derive(Debug, Subcommand)]
pub enum RunsCommand {
    /// List runs, newest first.
    List {
        /// Only runs with this status (running, waitingInput, succeeded, failed, cancelled).
        #[arg(long)]
        status: Option<String>,
        /// At most this many.
        #[arg(long, default_value_t = 20)]
        limit: usize,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// Show a run: status, nodes, counters, state, pending questions, checkpoints.
    Show {
        /// Run id or a unique prefix of it.
        run: String,
        /// Print the agents' recorded turns instead: messages, thinking, tool calls, usage.
        #[arg(long)]
        turns: bool,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// Send a message to a node: a RUNNING agent sees it before its next model call; a
    /// READY or waiting node gets it when it runs.
    Message {
        /// Run id or a unique prefix of it.
        run: String,
        /// The node.
        node: String,
        /// The text.
        text: String,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// Prune a READY or RUNNING node: cancel it and roll back its worktree edits.
    Prune {
        /// Run id or a unique prefix of it.
        run: String,
        /// The node.
        node: String,
        /// Also prune the nodes it spawned that have not finished.
        #[arg(long)]
        subtree: bool,
        /// Why (kept in the log).
        #[arg(long)]
        reason: Option<String>,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// Print a run's event log.
    Events {
        /// Run id or a unique prefix of it.
        run: String,
        /// First seq to print.
        #[arg(long, default_value_t = 1)]
        from: u64,
        /// Last seq to print.
        #[arg(long)]
        to: Option<u64>,
        /// Keep printing new events until the run finishes.
        #[arg(long, short)]
        follow: bool,
        /// One JSON event per line.
        #[arg(long)]
        json: bool,
    },
    /// Show a run's model calls: tokens and cost per call, and totals per run, stage and
    /// agent.
    Usage {
        /// Run id or a unique prefix of it.
        run: String,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// Export a stored run's spans (the run, node activations, agents, model and tool
    /// calls) as OTLP/JSON for an OpenTelemetry backend, or as a Chrome trace for Perfetto.
    Trace {
        /// Run id or a unique prefix of it.
        run: String,
        /// What to write.
        #[arg(long, value_enum, default_value_t)]
        format: crate::trace::TraceFormat,
        /// Write to this file instead of stdout.
        #[arg(long, short)]
        output: Option<std::path::PathBuf>,
        /// Include prompts, answers, tool arguments and results (off: they may hold code and
        /// secrets).
        #[arg(long)]
        content: bool,
    },
    /// Continue a run that crashed, was interrupted or waits for input. Nodes that were
    /// running when its process stopped run again; completed ones never do.
    Resume {
        /// Run id or a unique prefix of it.
        run: String,
        /// Answer a waiting node, `NODE=VALUE` (`yes`/`no` for approvals, or any text/JSON).
        #[arg(long, value_name = "NODE=VALUE")]
        answer: Vec<String>,
        /// Send a message to a node, `NODE=TEXT`.
        #[arg(long, value_name = "NODE=TEXT")]
        message: Vec<String>,
        /// Print the outcome as JSON.
        #[arg(long)]
        json: bool,
        /// No progress lines.
        #[arg(long, short)]
        quiet: bool,
    },
    /// Start a new run from a checkpoint of another (time travel); the original is unchanged.
    Fork {
        /// Run id or a unique prefix of it.
        run: String,
        /// The checkpoint: an event seq listed by `runs show`, or `step:N` for the state after
        /// step N (`step:0` starts over with the same input).
        #[arg(long)]
        at: String,
        /// Answer a waiting node in the fork, `NODE=VALUE`.
        #[arg(long, value_name = "NODE=VALUE")]
        answer: Vec<String>,
        /// Print the outcome as JSON.
        #[arg(long)]
        json: bool,
        /// No progress lines.
        #[arg(long, short)]
        quiet: bool,
    },
    /// Cancel a run: a run executing in another process is stopped by that process;
    /// otherwise it is marked cancelled here.
    Cancel {
        /// Run id or a unique prefix of it.
        run: String,
        /// Why (kept in the log).
        #[arg(long)]
        reason: Option<String>,
    },
}

/// Executes a `runs` subcommand.
pub async fn execute(cmd: RunsCommand, ws: &Workspace<'_>) -> anyhow::Result<ExitCode> {
    let records = ws.records();
    match cmd {
        RunsCommand::List {
            status,
            limit,
            json,
        } => list(&records, status, limit, json),
        RunsCommand::Show { run, turns, json } => {
            if turns {
                let rec = records.run_record(&run)?;
                crate::steer::turns(&records, &rec.id, json)?;
                return Ok(ExitCode::SUCCESS);
            }
            show(&records, &run, json)
        }
        RunsCommand::Message {
            run,
            node,
            text,
            json,
        } => {
            let rec = records.run_record(&run)?;
            let op = trellis_protocol::Op::SendMessage {
                run: rec.id.to_string(),
                node: NodeId::new(node),
                text,
            };
            crate::steer::steer(&ws.service()?, &rec.id, op, json).await
        }
        RunsCommand::Prune {
            run,
            node,
            subtree,
            reason,
            json,
        } => {
            let rec = records.run_record(&run)?;
            let op = trellis_protocol::Op::Prune {
                run: rec.id.to_string(),
                node: NodeId::new(node),
                subtree,
                reason,
            };
            crate::steer::steer(&ws.service()?, &rec.id, op, json).await
        }
        RunsCommand::Events {
            run,
            from,
            to,
            follow,
            json,
        } => events(&records, &run, from, to, follow, json).await,
        RunsCommand::Usage { run, json } => crate::usage::usage(&records, &run, json),
        RunsCommand::Trace {
            run,
            format,
            output,
            content,
        } => crate::trace::trace(&records, &run, format, output, content),
        RunsCommand::Resume {
            run,
            answer,
            message,
            json,
            quiet,
        } => resume_run(ws, &run, &answer, &message, Show { json, quiet }).await,
        RunsCommand::Fork {
            run,
            at,
            answer,
            json,
            quiet,
        } => fork_run(ws, &run, &at, &answer, Show { json, quiet }).await,
        RunsCommand::Cancel { run, reason } => {
            let rec = records.run_record(&run)?;
            if records.is_demo(&rec.id)? {
                return crate::demo::cancel(ws, &rec, reason).await;
            }
            let op = trellis_protocol::Op::Cancel {
                run: rec.id.to_string(),
                reason: Some(reason.unwrap_or_else(|| "cancelled from the command line".into())),
            };
            crate::steer::steer(&ws.service()?, &rec.id, op, false).await
        }
    }
}

/// `runs resume`: continues a workflow run through the service, or a demo run here with
/// the engine (refused while another process executes it), answering and messaging nodes.
async fn resume_run(
    ws: &Workspace<'_>,
    run: &str,
    answer: &[String],
    message: &[String],
    show: Show,
) -> anyhow::Result<ExitCode> {
    let records = ws.records();
    let rec = records.run_record(run)?;
    let mut commands = parse_answers(answer)?;
    commands.extend(parse_messages(message)?);
    if records.is_demo(&rec.id)? {
        return crate::demo::resume(ws, &rec, commands, show).await;
    }
    let (answers, messages) = answers_and_messages(commands);
    crate::session::resume(ws.service()?, &rec.id, answers, messages, show.json).await
}

/// `runs fork`: starts a new run from a checkpoint of another, through the service for a
/// workflow run (its fork gets worktrees of its own), here with the engine for a demo run.
async fn fork_run(
    ws: &Workspace<'_>,
    run: &str,
    at: &str,
    answer: &[String],
    show: Show,
) -> anyhow::Result<ExitCode> {
    let records = ws.records();
    let rec = records.run_record(run)?;
    let seq = checkpoint_seq(&records, &rec, at)?;
    let commands = parse_answers(answer)?;
    if records.is_demo(&rec.id)? {
        return crate::demo::fork(ws, &rec, seq, commands, show).await;
    }
    // A workflow run: the fork gets worktrees of its own (through the service).
    crate::session::fork(ws.service()?, &rec.id, seq, commands, show.json).await
}

/// `NODE=TEXT` pairs as messages to send.
fn parse_messages(pairs: &[String]) -> anyhow::Result<Vec<Command>> {
    pairs
        .iter()
        .map(|m| {
            let (node, text) = m
                .split_once('=')
                .with_context(|| format!("`{m}` is not NODE=TEXT"))?;
            Ok(Command::SendMessage {
                node: NodeId::new(node),
                message: Message::user(text),
            })
        })
        .collect()
}

/// The answers and the messages among `commands`, as the service takes them.
fn answers_and_messages(
    commands: Vec<Command>,
) -> (
    Vec<trellis_protocol::NodeAnswer>,
    Vec<trellis_protocol::NodeMessage>,
) {
    let mut answers = Vec::new();
    let mut messages = Vec::new();
    for c in commands {
        match c {
            Command::Answer { node, answer } => {
                answers.push(trellis_protocol::NodeAnswer { node, answer })
            }
            Command::SendMessage { node, message } => {
                messages.push(trellis_protocol::NodeMessage {
                    node,
                    text: message.text,
                })
            }
            _ => {}
        }
    }
    (answers, messages)
}

fn parse_answers(pairs: &[String]) -> anyhow::Result<Vec<Command>> {
    pairs
        .iter()
        .map(|p| {
            let (node, v) = p
                .split_once('=')
                .with_context(|| format!("`{p}` is not NODE=VALUE"))?;
            let answer = match v.trim().to_ascii_lowercase().as_str() {
                "yes" | "y" | "approve" | "approved" => Answer::approve(),
                "no" | "n" | "reject" => Answer::reject("rejected from the command line"),
                _ => Answer(
                    serde_json::from_str(v)
                        .unwrap_or_else(|_| serde_json::Value::String(v.to_owned())),
                ),
            };
            Ok(Command::Answer {
                node: NodeId::new(node),
                answer,
            })
        })
        .collect()
}

fn checkpoint_seq(records: &Records, rec: &RunRecord, at: &str) -> anyhow::Result<u64> {
    let cps = records.checkpoints(&rec.id)?;
    if let Some(step) = at.strip_prefix("step:") {
        let step: u64 = step
            .parse()
            .with_context(|| format!("`{at}`: step must be a number"))?;
        return cps
            .iter()
            .find(|c| c.step == step)
            .map(|c| c.seq)
            .with_context(|| {
                format!(
                    "run {} has no checkpoint after step {step} (it has steps 0..={})",
                    rec.id.short(),
                    cps.last().map_or(0, |c| c.step)
                )
            });
    }
    at.parse()
        .with_context(|| format!("`--at {at}`: use an event seq or step:N"))
}

fn list(
    records: &Records,
    status_filter: Option<String>,
    limit: usize,
    json: bool,
) -> anyhow::Result<ExitCode> {
    let wanted = status_filter
        .map(|s| {
            RunStatus::parse(&s).with_context(|| {
                format!("unknown status `{s}`; use running, waitingInput, succeeded, failed or cancelled")
            })
        })
        .transpose()?;
    let runs = records.run_records(&RunFilter {
        status: wanted,
        limit: Some(limit),
    })?;
    if json {
        println!("{}", serde_json::to_string_pretty(&runs)?);
        return Ok(ExitCode::SUCCESS);
    }
    if runs.is_empty() {
        println!(
            "no runs in {} (start one with `trellis demo feature`)",
            records.location()
        );
        return Ok(ExitCode::SUCCESS);
    }
    println!(
        "{:<16}  {:<10}  {:<10}  {:>5}  {:<23}  NOTE",
        "RUN", "GRAPH", "STATUS", "STEPS", "UPDATED"
    );
    for r in runs {
        println!(
            "{:<16}  {:<10}  {:<10}  {:>5}  {:<23}  {}",
            r.id.short(),
            truncate(&r.summary.graph, 10),
            status(r.summary.status),
            r.summary.step,
            timestamp(r.summary.updated_ts),
            note(&r)
        );
    }
    Ok(ExitCode::SUCCESS)
}

fn note(r: &RunRecord) -> String {
    let mut parts = Vec::new();
    if let Some(t) = &r.summary.terminal {
        parts.push(format!("at {t}"));
    }
    if r.summary.status == RunStatus::Running {
        parts.push(if r.owner_alive {
            format!(
                "live in {}",
                r.owner.as_ref().map(|o| o.label()).unwrap_or_default()
            )
        } else {
            "interrupted: trellis runs resume".to_owned()
        });
    }
    if let Some(f) = &r.summary.fork {
        parts.push(format!("fork of {}@{}", f.run.short(), f.seq));
    }
    if let Some(e) = &r.summary.error {
        parts.push(truncate(e, 50));
    }
    parts.join("; ")
}

fn show(records: &Records, run: &str, json: bool) -> anyhow::Result<ExitCode> {
    let rec = records.run_record(run)?;
    let checkpoints = records.checkpoints(&rec.id)?;
    let outcome = match records.replay(&rec.id).map_err(anyhow::Error::from) {
        Ok(outcome) => Some(outcome),
        Err(e) if json => return Err(e),
        Err(e) => {
            println!("(node details unavailable: {e:#})");
            None
        }
    };
    let instructions = instructions_used(records, &rec.id)?;
    if json {
        let v = serde_json::json!({
            "run": rec,
            "checkpoints": checkpoints,
            "outcome": outcome,
            "instructions": instructions,
        });
        println!("{}", serde_json::to_string_pretty(&v)?);
        return Ok(ExitCode::SUCCESS);
    }
    println!("run      {}", rec.id);
    println!("graph    {}", rec.summary.graph);
    println!(
        "status   {}{}",
        status(rec.summary.status),
        rec.summary
            .terminal
            .as_ref()
            .map(|t| format!(" at {t}"))
            .unwrap_or_default()
    );
    if let Some(e) = &rec.summary.error {
        println!("error    {e}");
    }
    println!("created  {}", timestamp(rec.summary.created_ts));
    println!(
        "updated  {}  (step {}, {} events)",
        timestamp(rec.summary.updated_ts),
        rec.summary.step,
        rec.summary.last_seq
    );
    if let Some(f) = &rec.summary.fork {
        println!("fork of  {} at seq {}", f.run, f.seq);
    }
    if let Some(o) = &rec.owner {
        println!(
            "owner    {} ({})",
            o.label(),
            if rec.owner_alive { "alive" } else { "gone" }
        );
    }
    let cps: Vec<String> = checkpoints
        .iter()
        .map(|c| format!("{}(step {})", c.seq, c.step))
        .collect();
    println!("checkpoints  {}", truncate(&cps.join(" "), 200));
    if let Some(used) = &instructions {
        print!("{}", crate::display::instructions(used));
    }
    let hooks: Vec<_> = records
        .tool_calls(&rec.id)?
        .into_iter()
        .filter(|c| c.tool.starts_with("hook:"))
        .collect();
    if !hooks.is_empty() {
        print!("{}", crate::display::hook_runs(&hooks));
    }
    let Some(o) = outcome else {
        return Ok(ExitCode::SUCCESS);
    };
    println!("\nnodes");
    for n in o.nodes.iter().filter(|n| n.state.is_some()) {
        let detail = n.error.clone().unwrap_or_else(|| {
            if n.result.is_null() {
                String::new()
            } else {
                compact(&n.result)
            }
        });
        println!(
            "  {} {:<32} {:<13} {}",
            mark(n.state),
            format!("{}#{}", n.id, n.attempt),
            n.state.map_or("", |s| s.as_str()),
            truncate(&detail, 70)
        );
    }
    let unreached: Vec<&str> = o
        .nodes
        .iter()
        .filter(|n| n.state.is_none())
        .map(|n| n.id.as_str())
        .collect();
    if !unreached.is_empty() {
        println!("  · not reached: {}", unreached.join(", "));
    }
    if !o.counters.is_empty() {
        println!("\ncounters");
        for (k, v) in &o.counters {
            println!("  {k} = {v}");
        }
    }
    println!("\nstate");
    for (k, v) in o.state.as_object().into_iter().flatten() {
        println!("  {k} = {}", truncate(&compact(v), 100));
    }
    if let Some(tree) = o.state.get(TASK_TREE) {
        print!("{}", crate::display::task_tree(tree));
    }
    for (node, q) in &o.waiting {
        println!(
            "\n{node} is waiting ({:?}): {}\n  answer with: trellis runs resume {} --answer {node}=yes",
            q.kind,
            q.prompt,
            rec.id.short()
        );
    }
    Ok(ExitCode::SUCCESS)
}

/// The instructions the run's agents were given: the latest version of its
/// `instructions` artifact (none when the repository has no instruction files).
fn instructions_used(
    records: &Records,
    run: &trellis_protocol::RunId,
) -> anyhow::Result<Option<trellis_protocol::records::InstructionsUsed>> {
    use trellis_protocol::records::INSTRUCTIONS_ARTIFACT;
    let Some(latest) = records
        .artifacts(run)?
        .into_iter()
        .filter(|a| a.kind == INSTRUCTIONS_ARTIFACT)
        .max_by_key(|a| a.version)
    else {
        return Ok(None);
    };
    Ok(Some(serde_json::from_str(&latest.content).map_err(
        |e| {
            anyhow::anyhow!(
                "the run's instructions record (artifact {}) is not readable: {e}",
                latest.id
            )
        },
    )?))
}

async fn events(
    records: &Records,
    run: &str,
    from: u64,
    to: Option<u64>,
    follow: bool,
    json: bool,
) -> anyhow::Result<ExitCode> {
    let rec = records.run_record(run)?;
    let mut next = from.max(1);
    loop {
        for e in records.run_events(&rec.id, next, to)? {
            next = e.seq + 1;
            if json {
                println!("{}", serde_json::to_string(&e)?);
            } else {
                println!(
                    "{:>6}  {}  {:<17} {}",
                    e.seq,
                    timestamp(e.ts),
                    e.kind.name(),
                    details(&e)
                );
            }
        }
        if !follow || to.is_some_and(|t| next > t) {
            return Ok(ExitCode::SUCCESS);
        }
        let now = records.run_record(rec.id.as_str())?;
        if now.summary.status.is_final() && now.summary.last_seq < next {
            return Ok(ExitCode::SUCCESS);
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}
