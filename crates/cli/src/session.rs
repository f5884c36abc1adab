//! `trellis run "<request>"` and `trellis runs resume` of workflow runs: the orchestrator's
//! choice, live progress (stage states, streaming model text, tool calls, retries and their
//! reasons), questions and approvals in the terminal, a summary with the change set, and the
//! batched review.

use std::io::{BufRead, IsTerminal, Write};
use std::path::Path;
use std::process::ExitCode;
use std::sync::Arc;

use serde_json::{Value, json};
use tokio::sync::broadcast;
use trellis_agents::Orchestration;
use trellis_core::InputMode;
use trellis_core::service::{DriveEnd, Followed, LiveEvent, OpError, RunFrontEnd, Service};
use trellis_protocol::records::RunState;
use trellis_protocol::{
    Answer, Interrupt, InterruptKind, NodeAnswer, NodeId, NodeMessage, Op, RunId, RunStatus,
};
use trellis_store::Store;
use trellis_workflow::Plan;

use crate::choice::print_choice;
use crate::workspace::open_service;

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
        // A gate on an artifact (or a human review): show it; a reason sends it back with
        // that feedback, a plain "no" ends the run.
        InterruptKind::Approval | InterruptKind::Review
            if it.data.get("artifact").is_some() || it.data.get("verdict").is_some() =>
        {
            for key in ["content", "summary"] {
                if let Some(text) = it.data.get(key).and_then(Value::as_str) {
                    println!("\n{}\n", text.trim_end());
                }
            }
            let a = read_line(
                "[y]es to approve / [n]o to end the run / or type the changes you want: ",
            );
            match a.to_ascii_lowercase().as_str() {
                "y" | "yes" => Answer::approve(),
                "" | "n" | "no" => Answer(json!({ "approved": false })),
                _ => Answer::reject(a.clone()),
            }
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

/// The terminal as the run driver's front-end: progress on stdout, questions on stdin,
/// Ctrl-C stops following.
struct TerminalFront<'a> {
    service: &'a Service,
    term: Terminal,
}

impl RunFrontEnd for TerminalFront<'_> {
    type Error = anyhow::Error;

    async fn follow(
        &mut self,
        live: &mut broadcast::Receiver<Arc<LiveEvent>>,
        run: &RunId,
    ) -> anyhow::Result<Followed> {
        tokio::select! {
            () = crate::follow::follow_run(self.service, live, run, self.term.json) => {
                Ok(Followed::Stopped)
            }
            _ = tokio::signal::ctrl_c() => Ok(Followed::Cancelled),
        }
    }

    async fn ask(&mut self, state: &RunState) -> anyhow::Result<Option<Vec<NodeAnswer>>> {
        if !self.term.interactive() {
            return Ok(None);
        }
        Ok(Some(
            state
                .waiting
                .iter()
                .map(|(node, it)| NodeAnswer {
                    node: node.clone(),
                    answer: ask(node, it),
                })
                .collect(),
        ))
    }

    fn service_error(&self, error: OpError) -> anyhow::Error {
        error.into()
    }
}

/// Follows a workflow run executing in `service` to its end: answers interrupts from the
/// terminal (resuming the run through the service), stops cleanly on Ctrl-C (the run stays
/// resumable), then prints the summary and offers the review. `live` was subscribed before
/// the run was started or resumed.
pub async fn drive_run(
    service: Arc<Service>,
    live: broadcast::Receiver<Arc<LiveEvent>>,
    run: RunId,
    term: Terminal,
) -> anyhow::Result<ExitCode> {
    let code = follow_to_end(service.clone(), live, run, term).await;
    // The process ends here: the service stops cleanly (the run's last hooks finish and
    // are recorded, the store is flushed, MCP servers stop).
    service.shutdown().await;
    code
}

async fn follow_to_end(
    service: Arc<Service>,
    mut live: broadcast::Receiver<Arc<LiveEvent>>,
    run: RunId,
    term: Terminal,
) -> anyhow::Result<ExitCode> {
    if !term.json {
        println!("run {run}");
    }
    let started = std::time::Instant::now();
    let mut front = TerminalFront {
        service: &service,
        term,
    };
    let state = match service
        .drive(&run, &mut live, term.input, &mut front)
        .await?
    {
        DriveEnd::Ended(state) => state,
        DriveEnd::Cancelled => {
            let elsewhere = service.dispatch() == trellis_core::service::Dispatch::Workers;
            service.shutdown().await;
            if elsewhere {
                eprintln!(
                    "\nstopped following: the run goes on where it executes (a worker); follow it with `trellis runs events {run} --follow`"
                );
            } else {
                eprintln!(
                    "\ninterrupted: completed stages are kept; continue with `trellis runs resume {run}` (review what exists with `trellis review {run}`)"
                );
            }
            return Ok(ExitCode::from(130));
        }
        DriveEnd::Paused(state) => {
            paused(&service, &state, term.json)?;
            return Ok(ExitCode::SUCCESS);
        }
        DriveEnd::NotResumed(e) => return Err(e.into()),
    };
    if !term.json {
        crate::drive::print_summary(&state, started.elapsed());
    }
    service.flush().await?;
    summary(&service, &state, term.json)?;
    let changed = !state.files_changed().is_empty();
    if !changed || term.json || term.no_review {
        if changed && !term.json {
            println!("review the change with `trellis review {run}`");
        }
        return Ok(exit_code(&state));
    }
    if std::io::stdin().is_terminal() {
        println!();
        crate::review::review_with(
            &service,
            crate::review::ReviewArgs {
                run: run.to_string(),
                approve_all: false,
                select: Vec::new(),
                reject: false,
                request_changes: Vec::new(),
                stage: None,
                json: false,
            },
        )
        .await?;
    } else {
        println!("review the change with `trellis review {run}`");
    }
    Ok(exit_code(&state))
}

/// A run waiting for input nobody here can give: what it waits for, and how to answer.
fn paused(service: &Service, state: &RunState, json: bool) -> anyhow::Result<()> {
    if json {
        // One JSON document, as for a finished run, with what the run waits for.
        return summary(service, state, true);
    }
    println!("\nthe run is waiting for input:");
    for (node, it) in &state.waiting {
        println!("  {node}: {}", it.prompt);
    }
    println!(
        "answer with `trellis runs resume {} --answer NODE=yes` (or =no, or =\"text\")",
        state.run
    );
    Ok(())
}

fn exit_code(o: &RunState) -> ExitCode {
    match (o.status, o.terminal.as_ref().map(|t| t.as_str())) {
        (RunStatus::Succeeded, Some("ABORT")) => ExitCode::from(2),
        (RunStatus::Succeeded, _) | (RunStatus::WaitingInput, _) => ExitCode::SUCCESS,
        _ => ExitCode::from(2),
    }
}

fn summary(service: &Service, o: &RunState, json: bool) -> anyhow::Result<()> {
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
                "files_changed": o.files_changed(),
                "waiting": o.waiting.iter().map(|(node, it)| (node.to_string(), json!({"prompt": it.prompt, "data": it.data}))).collect::<serde_json::Map<_, _>>(),
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
    let files = o.files_changed();
    if files.is_empty() {
        println!("no files changed");
        return Ok(());
    }
    // The change set: the run's branch against its base, as `git diff --stat` shows it.
    match service.change_set_stat(&o.run) {
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

/// A terminal asking for interrupts' answers (`runs resume`, `runs fork`).
fn asking(json: bool) -> Terminal {
    Terminal {
        input: InputMode::Interrupts,
        json,
        no_review: false,
    }
}

/// `trellis runs resume RUN` of a workflow run: continues it (answers applied first) with
/// the same progress, questions and review as `trellis run`.
pub async fn resume(
    service: Arc<Service>,
    run: &RunId,
    answers: Vec<NodeAnswer>,
    messages: Vec<NodeMessage>,
    json: bool,
) -> anyhow::Result<ExitCode> {
    let term = asking(json);
    let live = service.live();
    service
        .call(Op::ResumeRun {
            run: run.to_string(),
            answers,
            messages,
            input: term.input,
        })
        .await?;
    drive_run(service, live, run.clone(), term).await
}

/// `trellis runs fork` of a workflow run: the fork starts in the runtime service with
/// worktrees of its own and is followed like `trellis run`.
pub async fn fork(
    service: Arc<Service>,
    run: &RunId,
    seq: u64,
    commands: Vec<trellis_protocol::Command>,
    json: bool,
) -> anyhow::Result<ExitCode> {
    let term = asking(json);
    let live = service.live();
    let fork = service
        .fork_run(run.as_str(), seq, commands, term.input)
        .await?;
    if !json {
        println!("run {} forked from {}@{seq}", fork, run.short());
    }
    drive_run(service, live, fork, term).await
}

/// `trellis run "<request>"`: orchestrate, plan, run, review — through the runtime service.
pub async fn run(
    args: &crate::workflows::RunArgs,
    repo: &Path,
    overrides: &[String],
    store: Arc<Store>,
) -> anyhow::Result<ExitCode> {
    if args.queue || (!args.plan_only && crate::workspace::runs_on_workers(repo, overrides)?) {
        return queue(args, repo, overrides, store).await;
    }
    let service = open_service(repo, overrides, &args.dirs.dirs, store)?;
    if !args.json {
        let profile = service.profile_for_role("orchestrator");
        eprintln!("asking the orchestrator (model profile `{profile}`)…");
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
    // Subscribed before the start, so the run's first events are not missed.
    let live = service.live();
    let start = service.call(Op::StartRun {
        request: args.request.clone(),
        repo: None,
        workflow: args.workflow.clone(),
        include: args.include.clone(),
        skip: args.skip.clone(),
        input: term.input,
        budgets: None,
        plan_only: args.plan_only,
    });
    let started = tokio::select! {
        r = start => r?,
        _ = tokio::signal::ctrl_c() => {
            service.shutdown().await;
            eprintln!("\ninterrupted before the run started");
            return Ok(ExitCode::from(130));
        }
    };
    if args.plan_only {
        let orchestration: Orchestration =
            serde_json::from_value(started["orchestration"].clone())?;
        let plan: Plan = serde_json::from_value(started["plan"].clone())?;
        if !args.json {
            print_choice(&orchestration, &plan);
        }
        return crate::workflows::print_plan(&plan, args.json);
    }
    // The run's first node plans; the choice is printed when the run continues with the
    // workflow (`Progress`).
    let run = RunId::from_string(started["run"].as_str().unwrap_or_default());
    if !args.json {
        println!(
            "worktree {} (branch {}), created when an agent first edits",
            started["worktree"].as_str().unwrap_or_default(),
            started["branch"].as_str().unwrap_or_default()
        );
    }
    drive_run(service, live, run, term).await
}

/// `trellis run --queue`: records the run for the workers and prints where it is.
async fn queue(
    args: &crate::workflows::RunArgs,
    repo: &Path,
    overrides: &[String],
    store: Arc<Store>,
) -> anyhow::Result<ExitCode> {
    if args.yes || args.no_input {
        anyhow::bail!(
            "[store] workers = true: the run executes on a `trellis worker`, where its \
             questions and approvals wait for answers (`trellis runs resume RUN --answer \
             NODE=VALUE`); \
             drop --yes / --no-input"
        );
    }
    let service = crate::workspace::open_service_with(
        repo,
        overrides,
        &args.dirs.dirs,
        store,
        trellis_core::service::ServiceOptions {
            dispatch: trellis_core::service::Dispatch::Workers,
            ..Default::default()
        },
    )?;
    let started = service
        .call(Op::StartRun {
            request: args.request.clone(),
            repo: None,
            workflow: args.workflow.clone(),
            include: args.include.clone(),
            skip: args.skip.clone(),
            input: InputMode::Interrupts,
            budgets: None,
            plan_only: false,
        })
        .await;
    service.shutdown().await;
    let started = started?;
    if args.json {
        println!("{started}");
    } else {
        let run = started["run"].as_str().unwrap_or_default();
        println!("run {run} queued for the workers");
        println!(
            "branch {}, created on the worker when an agent first edits",
            started["branch"].as_str().unwrap_or_default()
        );
        println!("follow it: trellis runs events {run} --follow");
    }
    Ok(ExitCode::SUCCESS)
}
