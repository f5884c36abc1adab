//! `trellis demo`: runs a built-in demonstration graph, recorded in the workspace store; and
//! `trellis runs resume | fork | cancel` of such a run, which the engine drives here (a
//! workflow run goes through the runtime service instead).

use std::process::ExitCode;
use std::sync::Arc;

use anyhow::{Context, bail};
use clap::{Args, ValueEnum};
use serde_json::{Map, Value};
use trellis_graph::{Durability, Engine, EngineConfig, Graph};
use trellis_protocol::records::RunRecord;
use trellis_protocol::{Command, RunId};
use trellis_store::Store;

use crate::display::status;
use crate::drive::{Show, drive};
use crate::workspace::Workspace;

/// `trellis demo` arguments.
#[derive(Debug, Args)]
pub struct DemoArgs {
    /// Which graph: `feature` (a feature loop with retries), `fanout`, `chain`, `pipelines`,
    /// `crashtest` or `tickets`.
    pub graph: String,
    /// A graph parameter, `KEY=VALUE` (VALUE is JSON if it parses, else a string), e.g.
    /// `--param approval_stage=security_review`, `--param n=100`, `--param sleep_us=20000`.
    #[arg(long = "param", short = 'p', value_name = "KEY=VALUE")]
    pub params: Vec<String>,
    /// `async` pipelines commits (default); `sync` waits for each step's commit.
    #[arg(long, value_enum, default_value_t = DurabilityArg::Async)]
    pub durability: DurabilityArg,
    /// Print the outcome as JSON.
    #[arg(long)]
    pub json: bool,
    /// No progress lines.
    #[arg(long, short)]
    pub quiet: bool,
}

/// `--durability` values.
#[derive(Clone, Copy, Debug, ValueEnum)]
pub enum DurabilityArg {
    /// Pipelined commits.
    Async,
    /// One commit per step before the next starts.
    Sync,
}

/// Parses `KEY=VALUE` pairs into a JSON object.
pub fn parse_params(pairs: &[String]) -> anyhow::Result<Value> {
    let mut map = Map::new();
    for p in pairs {
        let (k, v) = p
            .split_once('=')
            .with_context(|| format!("`{p}` is not KEY=VALUE"))?;
        let value = serde_json::from_str(v).unwrap_or_else(|_| Value::String(v.to_owned()));
        map.insert(k.to_owned(), value);
    }
    Ok(Value::Object(map))
}

/// Runs `trellis demo`.
pub async fn execute(args: DemoArgs, store: Arc<Store>) -> anyhow::Result<ExitCode> {
    let params = parse_params(&args.params)?;
    let graph = build(&args.graph, &params)?;
    let input = if args.graph == "feature" {
        trellis_graph::demo::feature_input()
    } else {
        Value::Null
    };
    let durability = match args.durability {
        DurabilityArg::Async => Durability::Async,
        DurabilityArg::Sync => Durability::Sync,
    };
    let engine = Engine::with_config(
        store,
        EngineConfig {
            durability,
            ..EngineConfig::default()
        },
    );
    let handle = engine.start(graph, input)?;
    if !args.json && !args.quiet {
        println!("run {} started ({} graph)", handle.id(), args.graph);
    }
    let (_, code) = drive(
        handle,
        Show {
            json: args.json,
            quiet: args.quiet,
        },
    )
    .await?;
    Ok(code)
}

/// Builds demonstration graph `name` with `params`.
fn build(name: &str, params: &Value) -> anyhow::Result<Arc<Graph>> {
    if trellis_graph::demo::NAMES.contains(&name) {
        return Ok(Arc::new(trellis_graph::demo::build(name, params)?));
    }
    let hint = trellis_graph::nearest(name, trellis_graph::demo::NAMES.into_iter())
        .map(|n| format!(" (did you mean `{n}`?)"))
        .unwrap_or_default();
    bail!(
        "unknown graph `{name}`{hint}; this build knows: {}",
        trellis_graph::demo::NAMES.join(", ")
    )
}

/// The graph demonstration run `run` is driven with, rebuilt from its record.
fn graph_of(ws: &Workspace<'_>, run: &RunId) -> anyhow::Result<Arc<Graph>> {
    ws.records()
        .demo_graph(run)?
        .with_context(|| format!("run {run} is not a demonstration run"))
}

/// `runs resume` of a demonstration run: continued here with the engine (refused while
/// another process executes it), `commands` applied first.
pub async fn resume(
    ws: &Workspace<'_>,
    rec: &RunRecord,
    commands: Vec<Command>,
    show: Show,
) -> anyhow::Result<ExitCode> {
    if rec.owner_alive {
        bail!(
            "run {} is executing in process {}; wait for it, or stop that process first",
            rec.id,
            rec.owner.as_ref().map(|o| o.label()).unwrap_or_default()
        );
    }
    let graph = graph_of(ws, &rec.id)?;
    let handle = Engine::new(ws.store().clone()).resume(graph, &rec.id, commands)?;
    Ok(drive(handle, show).await?.1)
}

/// `runs fork` of a demonstration run: a new run from checkpoint `seq`, driven here.
pub async fn fork(
    ws: &Workspace<'_>,
    rec: &RunRecord,
    seq: u64,
    commands: Vec<Command>,
    show: Show,
) -> anyhow::Result<ExitCode> {
    let graph = graph_of(ws, &rec.id)?;
    let handle = Engine::new(ws.store().clone()).fork(graph, &rec.id, seq, commands)?;
    if !show.json && !show.quiet {
        println!("run {} forked from {}@{seq}", handle.id(), rec.id.short());
    }
    Ok(drive(handle, show).await?.1)
}

/// `runs cancel` of a demonstration run: through the store's command inbox while another
/// process executes it, else cancelled here.
pub async fn cancel(
    ws: &Workspace<'_>,
    rec: &RunRecord,
    reason: Option<String>,
) -> anyhow::Result<ExitCode> {
    if rec.summary.status.is_final() {
        bail!(
            "run {} is already {}; nothing to cancel",
            rec.id,
            status(rec.summary.status)
        );
    }
    let command = Command::Cancel {
        reason: Some(reason.unwrap_or_else(|| "cancelled from the command line".into())),
    };
    if rec.owner_alive {
        ws.store().enqueue_command(&rec.id, &command)?;
        println!(
            "cancel requested: run {} is executing in {}, which will stop it within a second",
            rec.id.short(),
            rec.owner.as_ref().map(|o| o.label()).unwrap_or_default()
        );
        return Ok(ExitCode::SUCCESS);
    }
    let graph = graph_of(ws, &rec.id)?;
    let handle = Engine::new(ws.store().clone()).resume(graph, &rec.id, vec![command])?;
    let outcome = handle.wait().await?;
    println!("run {} {}", outcome.run.short(), status(outcome.status));
    Ok(ExitCode::SUCCESS)
}
