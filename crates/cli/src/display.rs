//! Human-readable rendering of runs and events.

use serde_json::Value;
use std::sync::Arc;

use trellis_protocol::{Event, EventKind, ForkRef, NodeId, NodeState, RunStatus};

/// `2026-11-21 21:04:05.123Z` from milliseconds since the epoch (UTC).
pub fn timestamp(ms: i64) -> String {
    trellis_protocol::format_utc_ms(ms)
}

/// Shortens `s` to at most `n` characters, marking the cut.
pub fn truncate(s: &str, n: usize) -> String {
    if s.chars().count() <= n {
        s.to_owned()
    } else {
        let mut t: String = s.chars().take(n.saturating_sub(1)).collect();
        t.push('…');
        t
    }
}

/// Compact one-line JSON.
pub fn compact(v: &Value) -> String {
    serde_json::to_string(v).unwrap_or_default()
}

/// A marker for a node state.
pub fn mark(state: Option<NodeState>) -> &'static str {
    match state {
        None => "·",
        Some(NodeState::Ready) => "○",
        Some(NodeState::Running) => "▶",
        Some(NodeState::Completed) => "✓",
        Some(NodeState::Failed) => "✗",
        Some(NodeState::WaitingInput) => "?",
        Some(NodeState::Pruned) => "✂",
        Some(NodeState::Skipped) => "↷",
    }
}

/// A run status for tables.
pub fn status(s: RunStatus) -> &'static str {
    match s {
        RunStatus::Running => "running",
        RunStatus::WaitingInput => "waiting",
        RunStatus::Succeeded => "succeeded",
        RunStatus::Failed => "failed",
        RunStatus::Cancelled => "cancelled",
    }
}

/// The details of an event, for `runs events`.
pub fn details(e: &Event) -> String {
    match &e.kind {
        EventKind::RunStarted {
            graph,
            fork,
            params,
            ..
        } => run_started(graph, params, fork.as_ref()),
        EventKind::RunContinued { graph, params, .. } => run_started(graph, params, None),
        EventKind::RunResumed { requeued } => run_resumed(requeued),
        EventKind::NodeAdded {
            node,
            template,
            parent,
            after,
            ..
        } => node_added(node, template, parent.as_ref(), after),
        EventKind::EdgeAdded { edge } => format!("{} → {}", edge.from, edge.to),
        EventKind::NodeTransition {
            node,
            attempt,
            from,
            to,
            reason,
        } => format!(
            "{node}#{attempt} {} → {to}{}",
            from.map_or("new", NodeState::as_str),
            reason
                .as_ref()
                .map(|r| format!(" ({r})"))
                .unwrap_or_default()
        ),
        EventKind::NodeOutput {
            node,
            attempt,
            failure,
            result,
            error,
            writes,
            spawns,
            revise,
            ..
        } => {
            let mut s = format!(
                "{node}#{attempt} {}",
                if *failure { "failure" } else { "success" }
            );
            s.push_str(&output_value(error.as_deref(), result));
            s.push_str(&output_effects(writes, spawns.len(), revise));
            s
        }
        EventKind::InterruptRaised {
            node,
            attempt,
            interrupt,
            ..
        } => {
            format!(
                "{node}#{attempt} asks ({:?}): {}",
                interrupt.kind, interrupt.prompt
            )
        }
        EventKind::InputReceived {
            node,
            attempt,
            answer,
        } => format!("{node}#{attempt} answer={}", compact(&answer.0)),
        EventKind::Routed {
            from,
            attempt,
            to,
            reason,
        } => routed(from, *attempt, to, reason),
        EventKind::StepStarted { step } => format!("step {step}"),
        EventKind::StepCompleted { step, changed } => {
            format!(
                "step {step}{}",
                if changed.is_empty() {
                    String::new()
                } else {
                    format!(" changed {}", changed.join(","))
                }
            )
        }
        EventKind::CommandReceived { id, command } => format!(
            "#{id} {}",
            truncate(&serde_json::to_string(command).unwrap_or_default(), 80)
        ),
        EventKind::CommandRefused { id, reason } => format!("#{id} {reason}"),
        EventKind::MessageQueued {
            id,
            node,
            attempt,
            delivered,
        } => {
            format!(
                "#{id} → {node}#{attempt} {}",
                if *delivered { "delivered" } else { "buffered" }
            )
        }
        EventKind::RunStatusChanged {
            status,
            terminal,
            error,
        } => format!(
            "{status}{}{}",
            terminal
                .as_ref()
                .map(|t| format!(" at {t}"))
                .unwrap_or_default(),
            error.as_ref().map(|e| format!(": {e}")).unwrap_or_default()
        ),
    }
}

/// A started run's details: its graph, its parameters, and the run it was forked from.
fn run_started(graph: &str, params: &Value, fork: Option<&ForkRef>) -> String {
    let mut s = format!("graph={graph}");
    if !params.is_null() {
        s.push_str(&format!(" params={}", truncate(&compact(params), 60)));
    }
    if let Some(f) = fork {
        s.push_str(&format!(" forked from {}@{}", f.run.short(), f.seq));
    }
    s
}

/// A resumed run's details: the nodes it runs again, if any.
fn run_resumed(requeued: &[NodeId]) -> String {
    if requeued.is_empty() {
        String::new()
    } else {
        let ids: Vec<&str> = requeued.iter().map(|n| n.as_str()).collect();
        format!("re-running {}", ids.join(", "))
    }
}

/// An added node's details: its template, parent and the nodes it runs after.
fn node_added(node: &NodeId, template: &str, parent: Option<&NodeId>, after: &[NodeId]) -> String {
    let after: Vec<&str> = after.iter().map(|n| n.as_str()).collect();
    format!(
        "{node} (template {template}{}{})",
        parent.map(|p| format!(", parent {p}")).unwrap_or_default(),
        if after.is_empty() {
            String::new()
        } else {
            format!(", after {}", after.join(", "))
        }
    )
}

/// A node output's error, else its result (shortened; empty when neither).
fn output_value(error: Option<&str>, result: &Value) -> String {
    if let Some(e) = error {
        format!(" error={}", truncate(e, 60))
    } else if !result.is_null() {
        format!(" result={}", truncate(&compact(result), 60))
    } else {
        String::new()
    }
}

/// What a node output does besides its value: the channels it writes, how many nodes it
/// spawns, and the nodes it sends back for revision.
fn output_effects(writes: &[(String, Arc<Value>)], spawns: usize, revise: &[NodeId]) -> String {
    let mut s = String::new();
    if !writes.is_empty() {
        let ch: Vec<&str> = writes.iter().map(|(c, _)| c.as_str()).collect();
        s.push_str(&format!(" writes={}", ch.join(",")));
    }
    if spawns > 0 {
        s.push_str(&format!(" spawns={spawns}"));
    }
    if !revise.is_empty() {
        let ids: Vec<&str> = revise.iter().map(|n| n.as_str()).collect();
        s.push_str(&format!(" revise={}", ids.join(",")));
    }
    s
}

/// A routing decision's details: where the node's activation goes next (or the end), and why.
fn routed(from: &NodeId, attempt: u32, to: &[NodeId], reason: &str) -> String {
    let to: Vec<&str> = to.iter().map(|n| n.as_str()).collect();
    format!(
        "{from}#{attempt} → {} ({reason})",
        if to.is_empty() {
            "(end)".to_owned()
        } else {
            to.join(", ")
        }
    )
}

/// A task tree (the `task_tree` channel) as `runs show` prints it: milestones with
/// their tasks, statuses, dependencies and failure reasons, then the counts.
pub fn task_tree(value: &serde_json::Value) -> String {
    use trellis_workflow::tasktree::{MilestoneStatus, TaskTree};
    let Ok(tree) = TaskTree::from_value(Some(value)) else {
        return String::new();
    };
    let mut s = String::from("\ntask tree");
    if !tree.remit.is_empty() {
        s.push_str(&format!(" — {}", tree.remit));
    }
    s.push('\n');
    for m in &tree.milestones {
        let status = match m.status {
            MilestoneStatus::Pending => "pending",
            MilestoneStatus::Active => "active",
            MilestoneStatus::Complete => "complete",
        };
        s.push_str(&format!("  {} [{status}] {}\n", m.id, m.description));
        for t in tree.tasks_of(&m.id) {
            s.push_str(&format!(
                "    {} {:<11} {}",
                t.id,
                t.status.name(),
                t.description
            ));
            if !t.depends_on.is_empty() {
                s.push_str(&format!(" (after {})", t.depends_on.join(", ")));
            }
            if let Some(r) = &t.last_failure_reason {
                s.push_str(&format!(" — {r}"));
            }
            s.push('\n');
        }
    }
    let stats = tree.statistics();
    let counts: Vec<String> = stats
        .by_status
        .iter()
        .map(|(k, v)| format!("{v} {}", k.to_lowercase()))
        .collect();
    s.push_str(&format!(
        "  {} tasks: {}; milestones {}/{} complete\n",
        stats.total,
        counts.join(", "),
        stats.milestones_complete,
        stats.milestones
    ));
    s
}

/// Prints a server's lines to stdout. A server whose stdout reader went away (a closed
/// pipe, `| head -1`, a detached terminal) keeps serving: `println!` would panic on the
/// broken pipe and take the server down with it.
pub fn announce<S: AsRef<str>>(lines: &[S]) {
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    for line in lines {
        if writeln!(out, "{}", line.as_ref()).is_err() {
            return;
        }
    }
    let _ = out.flush();
}

/// The `instructions` block of `runs show`: each file the run's agents were given, where it
/// applies and the start of its SHA-256, then what could not be read.
pub fn instructions(used: &trellis_protocol::records::InstructionsUsed) -> String {
    let mut s = String::from("instructions\n");
    for f in &used.files {
        let applies = match f.applies_to.as_str() {
            "user" => "yours, every repository".to_owned(),
            "root" => "the whole repository".to_owned(),
            dir => format!("paths under {dir}"),
        };
        s.push_str(&format!(
            "  {}  ({applies})  sha256 {}{}\n",
            f.path,
            f.sha256.get(..12).unwrap_or(&f.sha256),
            if f.cut { "  (first 32 KiB used)" } else { "" }
        ));
        for i in &f.included {
            s.push_str(&format!(
                "    includes {}  sha256 {}\n",
                i.path,
                i.sha256.get(..12).unwrap_or(&i.sha256)
            ));
        }
    }
    for p in &used.problems {
        s.push_str(&format!("  ! {p}\n"));
    }
    s
}

/// The `hooks` block of `runs show`: each hook run (`hook:<event>`), its verdict, time and
/// output's first line.
pub fn hook_runs(calls: &[trellis_protocol::records::ToolCallRecord]) -> String {
    let mut s = String::from("hooks\n");
    for c in calls {
        let args: serde_json::Value = serde_json::from_str(&c.args).unwrap_or_default();
        let name = args["hook"].as_str().unwrap_or_default();
        let tool = args["tool"]
            .as_str()
            .map(|t| format!(" ({t})"))
            .unwrap_or_default();
        s.push_str(&format!(
            "  {:<18} {:<10} {:>6} ms  {}{tool}  {}\n",
            c.tool,
            c.decision,
            c.duration_ms,
            truncate(name, 40),
            truncate(&c.summary, 80)
        ));
    }
    s
}
