//! End-to-end latency of a 5-step read-only workflow (issue 20 item 8, the "4-5x" target):
//! the model calling the tools one turn at a time, against the same agent with per-call
//! speculation only, and with foresight (the task's learned workflow run before the first
//! model call, its results in the prompt).
//!
//! What is real: the agent loop (`trellis_agents::AgentRun`), the tool registry and DAG
//! runner, and the workspace's tool knowledge graph (`trellis_core::toolknow::ToolKnowledge`
//! over a SQLite store), which learns the workflow from 30 sequential runs first — exactly
//! as `trellis run` teaches it — and then decides, from the task text alone, what to run
//! ahead. What is simulated: the model (every call takes `--model-ms`, then asks for the
//! first step of the workflow whose result is not in its conversation yet, and answers once
//! all are; so it uses results it was given exactly like the calls it made) and the five
//! tools (each takes `--tool-ms` and returns fixed data).
//!
//! ```text
//! cargo run --release -p trellis-core --example speculation_bench -- [--model-ms 1000] [--tool-ms 150] [--runs 5]
//! ```
//!
//! `--check` (run by `scripts/check` in the dev profile with small delays) exits 1 unless the
//! learned workflow is run ahead from the task alone — one model call instead of six, every
//! speculation used, none wasted — and per-call speculation answers calls too.

#![allow(clippy::print_stdout)]

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use futures::StreamExt;
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;
use trellis_agents::{AgentOutcome, AgentRun, Resume, RoleSpec, SessionSink};
use trellis_core::toolknow::{CallLog, ToolKnowledge};
use trellis_llm::{
    ChatRequest, ChatStream, FinishReason, Message, ModelProvider, ProviderInfo, Role, StreamEvent,
};
use trellis_store::{Store, StoreOptions};
use trellis_test_support::scripted::{ScriptedProvider, Turn};
use trellis_test_support::tools::{FakeTool, Runs, count, object_schema};
use trellis_tools::{NonInteractive, Registry, ToolEnv, ToolOutput, ToolsConfig, Workspace};

const TASK: &str = "Find the open issue, read the source file it names and the function in \
                    it, find the callers of that function and read their tests.";

/// One step: tool, its description, its required input, its output (name, value).
type StepDef = (
    &'static str,
    &'static str,
    Option<&'static str>,
    (&'static str, &'static str),
);

/// The workflow.
const STEPS: [StepDef; 5] = [
    (
        "list_issues",
        "List the open issues of the project.",
        None,
        ("issue_id", "42"),
    ),
    (
        "get_issue",
        "Get an issue by id: its text and the source file it names.",
        Some("issue_id"),
        ("path", "src/stock.rs"),
    ),
    (
        "read_source",
        "Read a source file and the function it is about.",
        Some("path"),
        ("function", "reserve"),
    ),
    (
        "find_callers",
        "Find the callers of a function.",
        Some("function"),
        ("caller_path", "src/orders.rs"),
    ),
    (
        "read_tests",
        "Read the tests of a caller's file.",
        Some("caller_path"),
        ("tests", "orders_reserve_stock: ok"),
    ),
];

fn registry(tool_ms: u64, calls: &Runs) -> Registry {
    let mut r = Registry::new();
    for (name, description, input, (out, value)) in STEPS {
        let output = json!({ out: value });
        let label = name.to_owned();
        let tool = FakeTool::new(name)
            .description(description)
            .input(object_schema(
                &input.map(|p| vec![(p, "string")]).unwrap_or_default(),
                &input.map(|p| vec![p]).unwrap_or_default(),
            ))
            .output(object_schema(&[(out, "string")], &[]))
            .delay(Duration::from_millis(tool_ms))
            .counting(calls)
            .returns(move |args| {
                Ok(ToolOutput {
                    text: format!("{label} {args}: {output}"),
                    data: Some(output.clone()),
                })
            });
        r.register(tool.arc());
    }
    r.allow("reader", STEPS.map(|s| s.0));
    r
}

/// The arguments the model gives step `i` (the previous step's output, as it read it).
fn args_of(i: usize) -> Value {
    match STEPS[i].2 {
        Some(p) => json!({ p: STEPS[i - 1].3.1 }),
        None => json!({}),
    }
}

/// The simulated model: the first step whose result its conversation lacks, else the report.
fn respond(request: &ChatRequest) -> Turn {
    let seen: String = request
        .messages
        .iter()
        .filter(|m| m.role != Role::System)
        .map(|m| m.content.as_str())
        .collect();
    for (i, step) in STEPS.iter().enumerate() {
        let args = args_of(i);
        let asked = format!("{} {args}", step.0);
        let given = format!("### {} {args}", step.0);
        if !seen.contains(&asked) && !seen.contains(&given) {
            return Turn::Events(vec![
                StreamEvent::ToolCallDelta {
                    index: 0,
                    id: Some(format!("call_{i}")),
                    name: Some(step.0.into()),
                    arguments: args.to_string(),
                },
                StreamEvent::Finish {
                    reason: FinishReason::ToolCalls,
                },
            ]);
        }
    }
    Turn::Json(
        json!({"failure": false, "output": "orders_reserve_stock passes", "files_changed": [], "findings": []}),
    )
}

/// The simulated model with its latency.
struct Model {
    inner: ScriptedProvider,
    delay: Duration,
    calls: AtomicU32,
}

impl ModelProvider for Model {
    fn info(&self) -> &ProviderInfo {
        self.inner.info()
    }

    fn stream(&self, request: ChatRequest, cancel: CancellationToken) -> ChatStream {
        self.calls.fetch_add(1, Ordering::SeqCst);
        let inner = self.inner.clone();
        let delay = self.delay;
        futures::stream::once(async move {
            tokio::time::sleep(delay).await;
            inner.stream(request, cancel)
        })
        .flatten()
        .boxed()
    }
}

struct Measured {
    elapsed: Duration,
    model_calls: u32,
    tool_calls: u32,
}

async fn once(
    knowledge: &Arc<ToolKnowledge>,
    config: &ToolsConfig,
    model_ms: u64,
    tool_ms: u64,
) -> anyhow::Result<Measured> {
    let ws = tempfile::tempdir()?;
    let tool_calls: Runs = Arc::default();
    let mut env = ToolEnv::new(
        Workspace::new(ws.path(), &Default::default())?,
        Arc::new(config.clone()),
        Arc::new(NonInteractive { approve: true }),
    );
    env.advisor = Some(knowledge.clone());
    let log = CallLog::default();
    let sink: SessionSink = {
        let log = log.clone();
        Arc::new(move |e| log.note(&e))
    };
    let model = Arc::new(Model {
        inner: ScriptedProvider::responding(respond),
        delay: Duration::from_millis(model_ms),
        calls: AtomicU32::new(0),
    });
    let agent = AgentRun {
        max_turns: 10,
        events: Some(sink),
        ..AgentRun::new(
            "investigate",
            RoleSpec {
                name: "reader".into(),
                role: "You investigate issues.".into(),
                objective: "Investigate.".into(),
                max_turns: 10,
                ..Default::default()
            },
            model.clone(),
            Arc::new(registry(tool_ms, &tool_calls)),
            env,
            vec![
                Message::system("You investigate issues."),
                Message::user(TASK),
            ],
        )
    };
    let clock = Instant::now();
    let out = agent.run(Resume::Fresh).await?;
    let elapsed = clock.elapsed();
    anyhow::ensure!(
        matches!(out, AgentOutcome::Done(_)),
        "the agent did not finish: {out:?}"
    );
    knowledge.learn("investigate/reader", log.take());
    Ok(Measured {
        elapsed,
        model_calls: model.calls.load(Ordering::SeqCst),
        tool_calls: STEPS.iter().map(|s| count(&tool_calls, s.0)).sum::<usize>() as u32,
    })
}

fn arg(name: &str, default: u64) -> anyhow::Result<u64> {
    let args: Vec<String> = std::env::args().collect();
    match args.iter().position(|a| a == name) {
        Some(i) => Ok(args
            .get(i + 1)
            .ok_or_else(|| anyhow::anyhow!("{name} needs a value"))?
            .parse()?),
        None => Ok(default),
    }
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let check = std::env::args().any(|a| a == "--check");
    let model_ms = arg("--model-ms", 1000)?;
    let tool_ms = arg("--tool-ms", 150)?;
    let runs = arg("--runs", 5)?.max(1);
    let dir = tempfile::tempdir()?;
    let store = Store::open_workspace(dir.path(), StoreOptions::default())?;
    let knowledge = Arc::new(ToolKnowledge::new(store, true));

    let mut sequential = ToolsConfig::default();
    sequential.speculation.enabled = false;
    let mut per_call = ToolsConfig::default();
    per_call.speculation.from_task = false;
    let foresight = ToolsConfig::default();

    // Learning: the workflow as the model runs it, 30 times (no latency needed).
    for _ in 0..30 {
        once(&knowledge, &sequential, 0, 0).await?;
    }
    println!(
        "5-step read-only workflow; model call {model_ms} ms, tool call {tool_ms} ms; \
         mean of {runs} runs each, after 30 learning runs"
    );
    let mut means = Vec::new();
    let mut model_calls = Vec::new();
    for (label, config) in [
        ("sequential (no speculation)", &sequential),
        ("per-call speculation only", &per_call),
        ("foresight + speculation (default)", &foresight),
    ] {
        let mut total = Duration::ZERO;
        let mut last = None;
        for _ in 0..runs {
            let m = once(&knowledge, config, model_ms, tool_ms).await?;
            total += m.elapsed;
            last = Some(m);
        }
        let mean = total / u32::try_from(runs)?;
        let last = last.ok_or_else(|| anyhow::anyhow!("no run"))?;
        println!(
            "  {label:<36} {:>7.0} ms   model calls {}   tool calls {}",
            mean.as_secs_f64() * 1000.0,
            last.model_calls,
            last.tool_calls
        );
        means.push(mean);
        model_calls.push(last.model_calls);
    }
    println!(
        "  speed-up: foresight {:.2}x, per-call {:.2}x (against sequential)",
        means[0].as_secs_f64() / means[2].as_secs_f64(),
        means[0].as_secs_f64() / means[1].as_secs_f64()
    );
    let t = knowledge
        .thresholds()
        .ok_or_else(|| anyhow::anyhow!("the speculation outcomes could not be read"))?;
    println!(
        "  speculation outcomes: {} recorded, {:.0}% used, {:.0}% wasted, threshold {:.2}",
        t.samples,
        t.acceptance * 100.0,
        t.waste * 100.0,
        t.threshold
    );
    if check {
        // Sequential: 6 model calls; foresight: 1; per call: 4 of the 5 answered ahead
        // (the first call has nothing to predict from) plus foresight's results, all used.
        anyhow::ensure!(
            model_calls == [6, 6, 1],
            "model calls per mode {model_calls:?}, expected [6, 6, 1]"
        );
        anyhow::ensure!(
            t.samples >= 5 * runs as usize && t.acceptance == 1.0 && t.waste == 0.0,
            "speculations: {} recorded, {:.2} used, {:.2} wasted",
            t.samples,
            t.acceptance,
            t.waste
        );
        println!("  check passed");
    }
    Ok(())
}
