//! `trellis run "<request>"` and `trellis runs resume` of workflow runs: the orchestrator's
//! choice, live progress (stage states, streaming model text, tool calls, retries and their
//! reasons), questions and approvals in the terminal, a summary with the change set, and the
//! batched review.

use std::io::{BufRead, IsTerminal, Write};
use std::path::Path;
use std::process::ExitCode;
use std::sync::{Arc, Mutex};

use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;
use trellis_agents::{DecidedBy, Orchestration, SessionSink, SinkFactory};
use trellis_core::{InputMode, RunOptions, Runtime};
use trellis_graph::{RunHandle, RunOutcome};
use trellis_protocol::{
    Answer, Command, Interrupt, InterruptKind, NodeId, RunId, RunStatus, SessionEvent, ToolStatus,
};
use trellis_store::Store;
use trellis_workflow::Plan;

use crate::drive::{Show, drive};

/// How a workflow run is driven from the terminal.
#[derive(Clone, Copy, Debug)]
pub struct Terminal {
    /// How interrupts are answered.
    pub input: InputMode,
    /// Print JSON only.
    pub json: bool,
    /// Skip the review at the end.
    pub no_review: bool,
}

impl Terminal {
    fn interactive(&self) -> bool {
        self.input == InputMode::Interrupts && !self.json && std::io::stdin().is_terminal()
    }
}

/// Prints agent progress: streamed model text per node (line by line, so it does not mix
/// with the stage lines), tool calls and their results, messages received, notes. The
/// factory gives each node's activation a sink that knows the node (a [`SessionEvent`] does
/// not name it); all sinks share the unfinished lines.
pub fn printer(json: bool) -> Option<SinkFactory> {
    if json {
        return None;
    }
    // Text of each node not yet printed (an unfinished line).
    let pending: Arc<Mutex<Vec<(String, String)>>> = Arc::default();
    Some(Arc::new(move |node: &NodeId| -> SessionSink {
        let pending = Arc::clone(&pending);
        let node = node.to_string();
        Arc::new(move |e: SessionEvent| {
            let mut out = std::io::stdout().lock();
            print_event(&mut out, &pending, &node, e);
        })
    }))
}

/// Prints one event of `node` to `out`; `pending` holds every node's unfinished line.
fn print_event(
    out: &mut dyn Write,
    pending: &Mutex<Vec<(String, String)>>,
    node: &str,
    e: SessionEvent,
) {
    let flush_node = |out: &mut dyn Write, text: &str| {
        for line in text.lines().filter(|l| !l.trim().is_empty()) {
            let _ = writeln!(out, "    [{node}] {line}");
        }
    };
    let Ok(mut pending) = pending.lock() else {
        return;
    };
    if let SessionEvent::MessageDelta { text, .. } = &e {
        let i = match pending.iter().position(|(n, _)| n == node) {
            Some(i) => i,
            None => {
                pending.push((node.to_owned(), String::new()));
                pending.len() - 1
            }
        };
        pending[i].1.push_str(text);
        if let Some(cut) = pending[i].1.rfind('\n') {
            let done: String = pending[i].1.drain(..=cut).collect();
            flush_node(out, &done);
        }
        let _ = out.flush();
        return;
    }
    // Anything else ends the node's streamed text.
    if let Some(i) = pending.iter().position(|(n, _)| n == node) {
        let (_, rest) = pending.remove(i);
        flush_node(out, &rest);
    }
    let first_line =
        |text: &str| crate::display::truncate(text.lines().next().unwrap_or_default(), 160);
    let _ = match e {
        SessionEvent::ToolStarted { name, input, .. } => {
            let args = match input {
                Value::String(s) => s,
                other => other.to_string(),
            };
            writeln!(
                out,
                "    [{node}] → {name} {}",
                crate::display::truncate(&args, 160)
            )
        }
        SessionEvent::ToolCompleted { output, status, .. } => {
            let (label, text) = match status {
                ToolStatus::Ok => ("ok", output.as_str()),
                ToolStatus::Error | ToolStatus::Denied => {
                    ("error:", output.strip_prefix("error: ").unwrap_or(&output))
                }
                ToolStatus::Interrupted => ("interrupted:", ""),
                ToolStatus::Cancelled => ("cancelled", ""),
            };
            writeln!(out, "    [{node}]   {label} {}", first_line(text))
        }
        SessionEvent::MessagesReceived { texts, .. } => {
            let mut r = Ok(());
            for t in texts {
                r = r.and(writeln!(out, "    [{node}] ← {}", first_line(&t)));
            }
            r
        }
        SessionEvent::Note { text } => writeln!(out, "    [{node}] note: {text}"),
        _ => Ok(()),
    };
    let _ = out.flush();
}

/// Prints the orchestrator's decisions and the plan.
pub fn print_choice(o: &Orchestration, plan: &Plan) {
    let by = |b: DecidedBy| match b {
        DecidedBy::Model => "chosen by the orchestrator",
        DecidedBy::User => "chosen on the command line",
        DecidedBy::Default => "chosen by the selection prior (the model's answer was unusable)",
    };
    println!("workflow: {} ({})", o.workflow, by(o.workflow_by));
    println!("project: {}", o.project.describe());
    if !o.reasoning.trim().is_empty() {
        println!("reasoning: {}", o.reasoning.trim());
    }
    for n in &o.notes {
        println!("note: {n}");
    }
    println!("stages:");
    for p in &plan.planned {
        let agents: Vec<&str> = p.context.agents.iter().map(|a| a.agent.as_str()).collect();
        println!(
            "  run  {:<32} {:<28} {}",
            p.context.stage_name,
            agents.join(", "),
            p.reason
        );
    }
    for s in &plan.skipped {
        println!("  skip {:<32} {:<28} {}", s.stage_name, "", s.reason);
    }
    print_graph(plan);
}

/// The stage graph: where each stage goes on success and on failure.
fn print_graph(plan: &Plan) {
    println!("graph:");
    if plan.has_upfront_retrieval() {
        println!("  upfront_retrieval → {}", plan.entry);
    }
    for r in &plan.routing {
        if !plan.is_planned(&r.stage) {
            continue;
        }
        let failure = if r.max_attempts == Some(1) {
            "ABORT (max_attempts 1)".to_owned()
        } else {
            let target = if plan.is_planned(&r.next_on_failure) {
                r.next_on_failure.as_str()
            } else {
                r.stage.as_str()
            };
            let retry = if plan.adaptive_retrieval {
                format!("adaptive_retrieval → {target} (up to 2×), then ")
            } else {
                String::new()
            };
            let max = r
                .max_attempts
                .map(|n| format!("; its {n}th failure → ABORT"))
                .unwrap_or_default();
            format!("{retry}{}{max}", r.next_on_failure)
        };
        println!("  {} ✓→ {}   ✗→ {failure}", r.stage, r.next_on_success);
    }
}

fn read_line(prompt: &str) -> String {
    print!("{prompt}");
    let _ = std::io::stdout().flush();
    let mut line = String::new();
    let _ = std::io::stdin().lock().read_line(&mut line);
    line.trim().to_owned()
}

/// Asks the terminal for the answer to one interrupt.
fn ask(node: &NodeId, it: &Interrupt) -> Answer {
    println!("\n? {node}: {}", it.prompt);
    match it.kind {
        InterruptKind::Question => {
            let questions: Vec<String> = it
                .data
                .get("questions")
                .and_then(Value::as_array)
                .map(|qs| {
                    qs.iter()
                        .filter_map(|q| q["question"].as_str().map(str::to_owned))
                        .collect()
                })
                .unwrap_or_default();
            if questions.len() <= 1 {
                return Answer::text(read_line("> "));
            }
            let answers: Vec<Value> = questions
                .iter()
                .map(|q| json!(read_line(&format!("{q}\n> "))))
                .collect();
            Answer(Value::Array(answers))
        }
        InterruptKind::Approval | InterruptKind::Review => {
            let a = read_line("[y]es / [n]o (or a reason, or a number to grant): ");
            match a.to_ascii_lowercase().as_str() {
                "y" | "yes" => Answer::approve(),
                "" | "n" | "no" => Answer::reject("denied in the terminal"),
                other => match other.parse::<f64>() {
                    Ok(n) => Answer(json!({ "grant": n })),
                    Err(_) => Answer::reject(a.clone()),
                },
            }
        }
    }
}

/// Drives a workflow run to its end: answers interrupts from the terminal (resuming the
/// run in this process), stops cleanly on Ctrl-C (the run stays resumable), then prints the
/// summary and offers the review.
pub async fn drive_run(
    runtime: Arc<Runtime>,
    mut handle: RunHandle,
    term: Terminal,
) -> anyhow::Result<ExitCode> {
    let run: RunId = handle.id().clone();
    if !term.json {
        println!("run {run}");
    }
    let outcome = loop {
        let show = Show {
            json: false,
            quiet: false,
        };
        // JSON mode prints one document at the end and nothing else.
        let finished = async move {
            if term.json {
                Ok(handle.wait().await?)
            } else {
                drive(handle, show).await.map(|r| r.0)
            }
        };
        let outcome = tokio::select! {
            r = finished => r?,
            _ = tokio::signal::ctrl_c() => {
                let _ = runtime.store.flush();
                eprintln!(
                    "\ninterrupted: completed stages are kept; continue with `trellis runs resume {run}` (review what exists with `trellis review {run}`)"
                );
                return Ok(ExitCode::from(130));
            }
        };
        if outcome.status != RunStatus::WaitingInput {
            break outcome;
        }
        if !term.interactive() {
            println!("\nthe run is waiting for input:");
            for (node, it) in &outcome.waiting {
                println!("  {node}: {}", it.prompt);
            }
            println!(
                "answer with `trellis runs resume {run} --answer NODE=yes` (or =no, or =\"text\")"
            );
            return Ok(ExitCode::SUCCESS);
        }
        let commands: Vec<Command> = outcome
            .waiting
            .iter()
            .map(|(node, it)| Command::Answer {
                node: node.clone(),
                answer: ask(node, it),
            })
            .collect();
        let options = RunOptions {
            input: term.input,
            events: printer(term.json),
        };
        handle = runtime.resume(&run, commands, options)?.0;
    };
    runtime.store.flush()?;
    summary(&runtime.store, &outcome, term.json)?;
    let changed = !changed_files(&outcome).is_empty();
    if !changed || term.json || term.no_review {
        if changed && !term.json {
            println!("review the change with `trellis review {run}`");
        }
        return Ok(exit_code(&outcome));
    }
    if std::io::stdin().is_terminal() {
        println!();
        crate::review::review(
            crate::review::ReviewArgs {
                run: run.to_string(),
                approve_all: false,
                select: Vec::new(),
                reject: false,
                request_changes: Vec::new(),
                stage: None,
                json: false,
            },
            &runtime.store,
        )?;
    } else {
        println!("review the change with `trellis review {run}`");
    }
    Ok(exit_code(&outcome))
}

fn exit_code(o: &RunOutcome) -> ExitCode {
    match (o.status, o.terminal.as_ref().map(|t| t.as_str())) {
        (RunStatus::Succeeded, Some("ABORT")) => ExitCode::from(2),
        (RunStatus::Succeeded, _) | (RunStatus::WaitingInput, _) => ExitCode::SUCCESS,
        _ => ExitCode::from(2),
    }
}

fn changed_files(o: &RunOutcome) -> Vec<String> {
    let mut files: Vec<String> = o
        .nodes
        .iter()
        .filter_map(|n| n.result.get("files_changed").and_then(Value::as_array))
        .flatten()
        .filter_map(Value::as_str)
        .map(str::to_owned)
        .collect();
    files.sort();
    files.dedup();
    files
}

fn summary(store: &Store, o: &RunOutcome, json: bool) -> anyhow::Result<()> {
    let stages = o.state.get("stage_results").cloned().unwrap_or(Value::Null);
    if json {
        println!(
            "{}",
            serde_json::to_string_pretty(&json!({
                "run": o.run,
                "status": o.status,
                "terminal": o.terminal,
                "stages": stages,
                "orchestrator": o.state.get("orchestrator"),
                "files_changed": changed_files(o),
            }))?
        );
        return Ok(());
    }
    println!("\nstages:");
    let more = format!("trellis runs show {} --json", o.run.short());
    if let Value::Object(m) = &stages {
        for (stage, r) in m {
            let failed = r["failure"].as_bool().unwrap_or(false);
            let mark = if failed { "✗" } else { "✓" };
            println!("  {mark} {stage} (attempt {})", r["attempt"]);
            let layout = crate::answer::Layout::default();
            for line in crate::answer::render(&r["output"], layout, &more) {
                println!("{line}");
            }
        }
    }
    println!(
        "full transcript: `trellis runs show {run}` (events: `trellis runs events {run}`)",
        run = o.run.short()
    );
    let files = changed_files(o);
    if files.is_empty() {
        println!("no files changed");
        return Ok(());
    }
    // The change set: the run's branch against its base, as `git diff --stat` shows it.
    let stat = store.change_set(o.run.as_str()).ok().and_then(|rec| {
        trellis_tools::git::Git::new(&rec.repo)
            .text(&["diff", "--stat", &rec.base_commit, &rec.branch])
            .ok()
    });
    match stat {
        Some(stat) if !stat.trim().is_empty() => {
            println!("change set:");
            for line in stat.lines() {
                println!("  {line}");
            }
        }
        _ => println!("files changed: {}", files.join(", ")),
    }
    Ok(())
}

/// Opens the runtime of `repo`.
pub fn open_runtime(
    repo: &Path,
    overrides: &[String],
    dirs: &[std::path::PathBuf],
    store: Arc<Store>,
) -> anyhow::Result<Arc<Runtime>> {
    Ok(Arc::new(Runtime::open(repo, overrides, dirs, store)?))
}

/// `trellis runs resume RUN` of a workflow run: continues it (answers applied first) with
/// the same progress, questions and review as `trellis run`.
pub async fn resume(
    run: &RunId,
    commands: Vec<Command>,
    repo: &Path,
    overrides: &[String],
    store: Arc<Store>,
    json: bool,
) -> anyhow::Result<ExitCode> {
    let runtime = open_runtime(repo, overrides, &[], store)?;
    let term = Terminal {
        input: InputMode::Interrupts,
        json,
        no_review: false,
    };
    let options = RunOptions {
        input: term.input,
        events: printer(json),
    };
    let (handle, _ctx) = runtime.resume(run, commands, options)?;
    drive_run(runtime, handle, term).await
}

/// A cancellation token cancelled on the first Ctrl-C (for the orchestrator call).
pub fn ctrl_c_token() -> CancellationToken {
    let token = CancellationToken::new();
    let t = token.clone();
    tokio::spawn(async move {
        if tokio::signal::ctrl_c().await.is_ok() {
            t.cancel();
        }
    });
    token
}

/// `trellis run "<request>"`: orchestrate, plan, run, review.
pub async fn run(
    args: &crate::workflows::RunArgs,
    repo: &Path,
    overrides: &[String],
    store: Store,
) -> anyhow::Result<ExitCode> {
    let runtime = open_runtime(repo, overrides, &args.dirs.dirs, Arc::new(store))?;
    let overrides = trellis_agents::Overrides {
        workflow: args.workflow.clone(),
        include: args.include.clone(),
        skip: args.skip.clone(),
    };
    if !args.json {
        let profile = runtime.models.profile_for_role("orchestrator");
        eprintln!("asking the orchestrator (model profile `{profile}`)…");
    }
    let cancel = ctrl_c_token();
    let (orchestration, plan) = runtime.plan(&args.request, &overrides, cancel).await?;
    if args.plan_only {
        if !args.json {
            print_choice(&orchestration, &plan);
        }
        return crate::workflows::print_plan(&plan, args.json);
    }
    if !args.json {
        print_choice(&orchestration, &plan);
    }
    let term = Terminal {
        input: if args.yes {
            InputMode::Approve
        } else if args.no_input {
            InputMode::Deny
        } else {
            InputMode::Interrupts
        },
        json: args.json,
        no_review: args.no_review,
    };
    let options = RunOptions {
        input: term.input,
        events: printer(args.json),
    };
    let (handle, ctx) = runtime.start(&plan, &orchestration, options)?;
    if !args.json {
        println!(
            "worktree {} (branch {})",
            ctx.worktree.path.display(),
            ctx.worktree.branch
        );
    }
    drive_run(runtime, handle, term).await
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn the_printer_shows_text_by_line_tool_calls_and_notes_per_node() {
        let pending = Mutex::new(Vec::new());
        let mut out = Vec::new();
        let events = [
            (
                "code",
                SessionEvent::MessageDelta {
                    turn: 1,
                    text: "Reading ".into(),
                },
            ),
            (
                "test",
                SessionEvent::Note {
                    text: "index up to date".into(),
                },
            ),
            (
                "code",
                SessionEvent::MessageDelta {
                    turn: 1,
                    text: "the file.\nThen ".into(),
                },
            ),
            (
                "code",
                SessionEvent::ThoughtDelta {
                    turn: 1,
                    text: "hidden".into(),
                },
            ),
            (
                "code",
                SessionEvent::TurnCompleted {
                    turn: 1,
                    message: Value::Null,
                    usage: Default::default(),
                },
            ),
            (
                "code",
                SessionEvent::ToolStarted {
                    turn: 1,
                    call_id: "c1".into(),
                    name: "read_file".into(),
                    input: json!({ "path": "a.rs" }),
                },
            ),
            (
                "code",
                SessionEvent::ToolCompleted {
                    turn: 1,
                    call_id: "c1".into(),
                    name: "read_file".into(),
                    output: "error: no such file\nmore".into(),
                    status: ToolStatus::Error,
                    duration_ms: 3,
                },
            ),
            (
                "code",
                SessionEvent::MessagesReceived {
                    turn: 2,
                    texts: vec!["user: use b.rs".into()],
                },
            ),
        ];
        for (node, e) in events {
            print_event(&mut out, &pending, node, e);
        }
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "    [test] note: index up to date\n\
             \x20   [code] Reading the file.\n\
             \x20   [code] Then \n\
             \x20   [code] → read_file {\"path\":\"a.rs\"}\n\
             \x20   [code]   error: no such file\n\
             \x20   [code] ← user: use b.rs\n"
        );
    }
}
