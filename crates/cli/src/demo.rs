//! `trellis demo`: runs a built-in demonstration graph, recorded in the workspace store.

use std::process::ExitCode;
use std::sync::Arc;

use anyhow::Context;
use clap::{Args, ValueEnum};
use serde_json::{Map, Value};
use trellis_graph::{Durability, Engine, EngineConfig};
use trellis_store::Store;

use crate::drive::{Show, drive};

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
pub async fn execute(args: DemoArgs, store: Store) -> anyhow::Result<ExitCode> {
    let params = parse_params(&args.params)?;
    let graph = crate::registry::build(&args.graph, &params)?;
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
        Arc::new(store),
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
