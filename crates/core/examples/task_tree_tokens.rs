//! Issue 19's context benchmark: input tokens per completed task and the peak prompt size of a
//! `task_tree` run on a scripted 20-task remit (two milestones of ten tasks, some depending on
//! others), with compressed handoffs (`docs/context.md`) and with whole handoffs
//! (`[agents.task_tree] compress_handoffs = false`). The scripted agents answer at realistic
//! length (gap analyses of ~1.5k chars, PRP plans of ~5k, implementation reports of ~2.5k,
//! QA feedback of ~1k), so what grows is what the handoffs carry.
//!
//! ```sh
//! cargo run --release -p trellis-core --example task_tree_tokens
//! ```
//!
//! Tokens are counted by the provider's own counter on every request as it was sent (the
//! count the agent loop fits prompts with). Prints a markdown table for docs/benchmarks.md.
#![allow(
    clippy::print_stdout,
    clippy::unwrap_used,
    clippy::expect_used,
    missing_docs
)]

use std::sync::Arc;

use serde_json::{Value, json};
use trellis_core::service::{Service, ServiceOptions};
use trellis_core::{InputMode, Runtime};
use trellis_llm::{ChatRequest, ModelProvider};
use trellis_protocol::{Op, RunId, RunStatus};
use trellis_store::{Store, StoreOptions};
use trellis_test_support::scripted::{ScriptedProvider, Turn};
use trellis_workflow::tasktree::{CHANNEL, TaskStatus, TaskTree};

const TASKS_PER_MILESTONE: usize = 10;

fn system(r: &ChatRequest) -> &str {
    r.messages.first().map_or("", |m| m.content.as_str())
}

fn text(r: &ChatRequest) -> String {
    r.messages.iter().map(|m| m.content.as_str()).collect()
}

fn calls(r: &ChatRequest) -> usize {
    r.messages
        .iter()
        .filter(|m| m.tool_call_id.is_some())
        .count()
}

fn report(output: &str) -> Turn {
    Turn::Json(json!({ "failure": false, "output": output, "files_changed": [], "findings": [] }))
}

fn answer(v: Value) -> Turn {
    report(&v.to_string())
}

/// `n` characters of plausible prose about `what`.
fn prose(what: &str, n: usize) -> String {
    let sentence = format!(
        "The {what} touches the inventory's reservation bookkeeping and its tests; keep the public API and follow the module's patterns. "
    );
    sentence.repeat(n / sentence.len() + 1)[..n].to_owned()
}

fn task_of(r: &ChatRequest) -> String {
    let all = text(r);
    let Some(i) = all.find("\"task\":{") else {
        return String::new();
    };
    let rest = &all[i..];
    rest.find("\"id\":\"")
        .map(|j| rest[j + 6..].chars().take_while(|c| *c != '"').collect())
        .unwrap_or_default()
}

fn script(r: &ChatRequest) -> Turn {
    if r.response_format
        .as_ref()
        .is_some_and(|f| f.schema["properties"].get("queries").is_some())
    {
        return Turn::Json(json!({ "queries": ["inventory reservations"] }));
    }
    let (sys, all) = (system(r), text(r));
    // Handoff compression (the output normaliser): a summary of the field, within its limit.
    if sys.contains("You compress text that one agent hands to another") {
        let body: String = all.chars().skip(sys.len()).take(300).collect();
        return Turn::Text(format!("Summary: {body}"));
    }
    if sys.contains("You interpret a user's request") {
        return answer(json!({ "remit": prose("remit", 900), "explicit_needs": ["reports"] }));
    }
    if sys.contains("sequential milestones") {
        return answer(json!({ "milestones": ["Reports exist", "Reports are exported"] }));
    }
    if sys.contains("You expand one milestone") {
        let m = if all.contains("\"id\":\"m2\"") { 2 } else { 1 };
        let tasks: Vec<Value> = (1..=TASKS_PER_MILESTONE)
            .map(|i| {
                let id = format!("m{m}t{i}");
                // Every third task depends on the one before it.
                let deps: Vec<String> = if i % 3 == 0 {
                    vec![format!("m{m}t{}", i - 1)]
                } else {
                    Vec::new()
                };
                json!({ "id": id, "description": prose(&format!("task {id}"), 200),
                        "measurable_outcome": prose("outcome", 150), "depends_on": deps })
            })
            .collect();
        return answer(json!({ "tasks": tasks }));
    }
    let task = task_of(r);
    if sys.contains("You analyse the gap") {
        return answer(json!({
            "gap_exists": true,
            "current_state_summary": prose(&format!("current state of {task}"), 900),
            "desired_state_summary": prose(&format!("desired state of {task}"), 900),
            "gap_description": prose(&format!("gap of {task}"), 1500),
            "relevant_files": ["inventory.py"],
        }));
    }
    if sys.contains("You plan the change") {
        return report(&format!(
            "# Implementation Plan: {task}\n{}",
            prose("plan", 5000)
        ));
    }
    if sys.contains("implementing one task's plan") {
        return match calls(r) {
            0 => Turn::ToolCall {
                name: "write_file".into(),
                arguments: json!({ "path": format!("notes/{task}.md"), "content": prose(&task, 400) }),
            },
            _ => report(&prose(&format!("implementation of {task}"), 2500)),
        };
    }
    if sys.contains("implemented change satisfies") {
        return answer(json!({ "passed": true, "feedback": prose("review", 1000) }));
    }
    if sys.contains("You assess a milestone") {
        return answer(json!({ "uncovered_gaps": [] }));
    }
    report("nothing to do")
}

/// The role whose system prompt this is (the task tree's agents), if any.
fn role_of(r: &ChatRequest) -> Option<&'static str> {
    let sys = system(r);
    [
        ("You interpret a user's request", "intent"),
        ("sequential milestones", "milestone"),
        ("You expand one milestone", "expander"),
        ("You analyse the gap", "researcher"),
        ("You plan the change", "planner"),
        ("implementing one task's plan", "implementor"),
        ("implemented change satisfies", "qa"),
        ("You assess a milestone", "assessor"),
    ]
    .into_iter()
    .find(|(needle, _)| sys.contains(needle))
    .map(|(_, role)| role)
}

struct Measured {
    /// Agent requests over their role's input cap (`[context]`, the default caps table).
    over_cap: usize,
    agent_requests: usize,
    requests: usize,
    completed: usize,
    total_tokens: u64,
    peak: u64,
    status: RunStatus,
}

async fn measure(compress: bool) -> Measured {
    let config = format!(
        "[index.embedding]\nbackend = \"none\"\n\n[agents.task_tree]\ncompress_handoffs = {compress}\n"
    );
    let ws = trellis_test_support::example_repo("inventory", &config).unwrap();
    let repo = ws.path().canonicalize().unwrap();
    let provider = ScriptedProvider::responding(script);
    let store = Store::open_workspace(&repo, StoreOptions::default()).unwrap();
    let rt = Runtime::open(&repo, &[], &[], store).unwrap();
    rt.models().install("local", Arc::new(provider.clone()));
    let svc = Service::start(Arc::new(rt), ServiceOptions::default());
    let out = svc
        .call(Op::StartRun {
            request: "Add stock reports and export them".into(),
            repo: None,
            workflow: Some("task_tree".into()),
            include: Vec::new(),
            skip: Vec::new(),
            input: InputMode::Approve,
            budgets: None,
            plan_only: false,
        })
        .await
        .unwrap();
    let run = RunId::from_string(out["run"].as_str().unwrap());
    svc.wait_run(&run).await;
    let o = svc.run_state(&run).unwrap();
    let tree = TaskTree::from_value(o.state.get(CHANNEL)).unwrap();
    let completed = tree
        .tasks
        .values()
        .filter(|t| t.status == TaskStatus::Complete)
        .count();
    if std::env::var_os("TREE_DEBUG").is_some() {
        eprintln!("{}", tree.report());
    }
    let requests = provider.requests();
    let counts: Vec<u64> = requests
        .iter()
        .map(|r| provider.count_tokens(r).unwrap().tokens)
        .collect();
    if std::env::var_os("TREE_DEBUG").is_some() {
        let mut by: std::collections::BTreeMap<String, (u64, u64, usize)> = Default::default();
        for (r, c) in requests.iter().zip(&counts) {
            let role: String = system(r)
                .lines()
                .nth(1)
                .unwrap_or("")
                .chars()
                .take(50)
                .collect();
            let tools = r.tools.len();
            let e = by.entry(role).or_default();
            e.0 += c;
            e.1 += 1;
            e.2 = tools;
        }
        for (role, (t, n, tools)) in by {
            eprintln!("{t:>8} {n:>4} tools={tools:<3} {role}");
        }
    }
    let caps = trellis_agents::ContextConfig::default();
    let (mut over_cap, mut agent_requests) = (0, 0);
    for (r, c) in requests.iter().zip(&counts) {
        if let Some(cap) = role_of(r).and_then(|role| caps.cap_for(role)) {
            agent_requests += 1;
            if *c > cap {
                over_cap += 1;
            }
        }
    }
    Measured {
        over_cap,
        agent_requests,
        requests: requests.len(),
        completed,
        total_tokens: counts.iter().sum(),
        peak: counts.iter().copied().max().unwrap_or(0),
        status: o.status,
    }
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let compressed = measure(true).await;
    let whole = measure(false).await;
    println!(
        "| handoffs | run | tasks completed | model requests | input tokens | tokens per completed task | peak prompt tokens | agent requests over their role's cap |"
    );
    println!("|---|---|---|---|---|---|---|---|");
    for (name, m) in [
        ("compressed (handoff field limits)", &compressed),
        ("whole", &whole),
    ] {
        println!(
            "| {name} | {} | {} | {} | {} | {} | {} | {} of {} |",
            m.status,
            m.completed,
            m.requests,
            m.total_tokens,
            m.total_tokens / m.completed.max(1) as u64,
            m.peak,
            m.over_cap,
            m.agent_requests
        );
    }
    let per = |m: &Measured| m.total_tokens as f64 / m.completed.max(1) as f64;
    println!(
        "\nwhole / compressed input tokens per completed task: {:.2}×",
        per(&whole) / per(&compressed)
    );
}
