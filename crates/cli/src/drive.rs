//! Drives a run in this process with live progress, and prints its outcome.

use std::collections::HashMap;
use std::process::ExitCode;
use std::time::Instant;

use trellis_graph::{RunHandle, RunOutcome};
use trellis_protocol::records::RunState;
use trellis_protocol::{EventKind, NodeState, RunStatus};

use crate::display::{mark, status, truncate};

/// How to show a run.
#[derive(Clone, Copy, Debug)]
pub struct Show {
    /// Print the outcome as JSON (and no progress).
    pub json: bool,
    /// No progress lines.
    pub quiet: bool,
}

/// Prints a run's progress lines from its events: node state changes (with why a node
/// failed, was pruned or skipped), questions, non-trivial routing, resumptions.
#[derive(Default)]
pub struct Progress {
    /// Failure reasons seen in `nodeOutput`, printed with the FAILED transition.
    outputs: HashMap<String, String>,
}

impl Progress {
    /// Prints what `kind` changes, if anything worth a line.
    pub fn event(&mut self, kind: &EventKind) {
        match kind {
            EventKind::NodeOutput {
                node,
                result,
                error,
                failure: true,
                ..
            } => {
                let text = |k: &str| result.get(k).and_then(|r| r.as_str()).map(str::to_owned);
                let why = error
                    .clone()
                    .or_else(|| text("reason"))
                    .or_else(|| text("summary"));
                self.outputs
                    .insert(node.to_string(), why.unwrap_or_default());
            }
            EventKind::NodeTransition {
                node,
                attempt,
                to,
                reason,
                ..
            } => {
                let extra = match to {
                    NodeState::Failed => self.outputs.remove(node.as_str()).unwrap_or_default(),
                    NodeState::Pruned | NodeState::Skipped | NodeState::Ready => {
                        if *to == NodeState::Ready && reason.is_none() {
                            return;
                        }
                        reason.clone().unwrap_or_default()
                    }
                    _ => String::new(),
                };
                println!(
                    "  {} {:<32} {:<13} {}",
                    mark(Some(*to)),
                    format!("{node}#{attempt}"),
                    to.as_str(),
                    truncate(&extra, 60)
                );
            }
            EventKind::InterruptRaised {
                node, interrupt, ..
            } => {
                println!("    {node} asks: {}", interrupt.prompt);
            }
            EventKind::Routed {
                from, to, reason, ..
            } if reason != "always" && reason != "success" => {
                let to: Vec<&str> = to.iter().map(|n| n.as_str()).collect();
                println!(
                    "    {from} → {} ({reason})",
                    if to.is_empty() {
                        "(end)".into()
                    } else {
                        to.join(", ")
                    }
                );
            }
            // The planning node decided: what it chose, as `--plan-only` shows it.
            EventKind::RunContinued { params, input, .. } => {
                let plan = serde_json::from_value::<trellis_workflow::Plan>(params.clone());
                let orchestration = serde_json::from_value::<trellis_agents::Orchestration>(
                    input["orchestrator"].clone(),
                );
                if let (Ok(plan), Ok(o)) = (plan, orchestration) {
                    crate::choice::print_choice(&o, &plan);
                }
            }
            EventKind::RunResumed { requeued } if !requeued.is_empty() => {
                let ids: Vec<&str> = requeued.iter().map(|n| n.as_str()).collect();
                println!("  re-running what was interrupted: {}", ids.join(", "));
            }
            EventKind::CommandRefused { reason, .. } => {
                println!("    command refused: {reason}");
            }
            _ => {}
        }
    }
}

/// Waits for the run, printing node progress as committed events arrive.
pub async fn drive(mut handle: RunHandle, show: Show) -> anyhow::Result<(RunOutcome, ExitCode)> {
    let started = Instant::now();
    let mut events = handle.subscribe();
    let progress_on = !show.json && !show.quiet;
    let printer = tokio::spawn(async move {
        let mut progress = Progress::default();
        loop {
            let batch = match events.recv().await {
                Ok(batch) => batch,
                // Fell behind a burst of batches: the outcome is printed from the run itself,
                // so skipping progress lines loses nothing.
                Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => continue,
                Err(tokio::sync::broadcast::error::RecvError::Closed) => break,
            };
            if !progress_on {
                continue;
            }
            for e in batch.iter() {
                progress.event(&e.kind);
            }
        }
    });
    let outcome = handle.wait().await?;
    let _ = printer.await;
    let wire = trellis_graph::wire(&outcome);
    if show.json {
        println!("{}", serde_json::to_string_pretty(&wire)?);
    } else {
        print_summary(&wire, started.elapsed());
    }
    let code = match outcome.status {
        RunStatus::Succeeded | RunStatus::WaitingInput => ExitCode::SUCCESS,
        _ => ExitCode::from(2),
    };
    Ok((outcome, code))
}

pub(crate) fn print_summary(o: &RunState, elapsed: std::time::Duration) {
    let at = o
        .terminal
        .as_ref()
        .map(|t| format!(" at {t}"))
        .unwrap_or_default();
    println!(
        "run {} {}{at} after {} step{} ({:.1} ms)",
        o.run,
        status(o.status),
        o.steps,
        if o.steps == 1 { "" } else { "s" },
        elapsed.as_secs_f64() * 1e3
    );
    if let Some(e) = &o.error {
        println!("  error: {e}");
    }
    for (node, q) in &o.waiting {
        println!("  {node} is waiting ({:?}): {}", q.kind, q.prompt);
    }
    if !o.waiting.is_empty() {
        let (node, _) = &o.waiting[0];
        println!(
            "  answer with: trellis runs resume {} --answer {node}=yes",
            o.run.short()
        );
    }
}
