//! The Trellis command line.
//!
//! `trellis runs …` inspects and drives runs recorded in the workspace store
//! (`<repo>/.trellis/trellis.db`); `trellis demo …` starts one of the built-in demonstration
//! graphs. Every command prints readable text, or JSON with `--json`.
#![allow(clippy::print_stdout, clippy::print_stderr)]

mod demo;
mod display;
mod drive;
mod models;
mod registry;
mod runs;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand, ValueEnum};
use trellis_store::{Store, StoreOptions, Synchronous};

/// Trellis: a self-hosted multi-agent coding system.
#[derive(Debug, Parser)]
#[command(name = "trellis", version, about, propagate_version = true)]
pub struct Cli {
    /// The workspace (repository) whose `.trellis/` store to use.
    #[arg(
        long,
        short = 'C',
        global = true,
        default_value = ".",
        value_name = "DIR"
    )]
    pub repo: PathBuf,
    /// Use this database file instead of `<repo>/.trellis/trellis.db`.
    #[arg(long, global = true, value_name = "PATH")]
    pub db: Option<PathBuf>,
    /// SQLite `synchronous` for commits: `full` survives power loss, `normal` survives
    /// process crashes and is faster.
    #[arg(long, global = true, value_enum, default_value_t = SyncArg::Full)]
    pub synchronous: SyncArg,
    /// Override a configuration key (`-c models.default=fast`, TOML value syntax; repeatable).
    #[arg(short = 'c', long = "config", global = true, value_name = "KEY=VALUE")]
    pub config: Vec<String>,
    /// What to do.
    #[command(subcommand)]
    pub command: Commands,
}

/// `--synchronous` values.
#[derive(Clone, Copy, Debug, ValueEnum)]
pub enum SyncArg {
    /// Fsync every commit.
    Full,
    /// Fsync at checkpoints only.
    Normal,
}

/// Top-level commands.
#[derive(Debug, Subcommand)]
pub enum Commands {
    /// Inspect and drive recorded runs.
    #[command(subcommand)]
    Runs(runs::RunsCommand),
    /// Run a built-in demonstration graph (feature, fanout, chain, crashtest).
    Demo(demo::DemoArgs),
    /// List and test model profiles (`list`, `test [PROFILE]`).
    #[command(subcommand)]
    Models(models::ModelsCommand),
}

/// Runs the command line and maps errors to exit code 1 (printed on stderr).
pub fn main(cli: Cli) -> ExitCode {
    match run(cli) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::FAILURE
        }
    }
}

/// Executes `cli`.
pub fn run(cli: Cli) -> anyhow::Result<ExitCode> {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    if let Commands::Models(cmd) = &cli.command {
        return rt.block_on(models::execute(cmd, &cli.repo, &cli.config));
    }
    let store = open_store(&cli)?;
    match cli.command {
        Commands::Runs(cmd) => rt.block_on(runs::execute(cmd, store)),
        Commands::Demo(args) => rt.block_on(demo::execute(args, store)),
        Commands::Models(_) => unreachable!("handled above"),
    }
}

fn open_store(cli: &Cli) -> anyhow::Result<Store> {
    let options = StoreOptions {
        synchronous: match cli.synchronous {
            SyncArg::Full => Synchronous::Full,
            SyncArg::Normal => Synchronous::Normal,
        },
        ..StoreOptions::default()
    };
    Ok(match &cli.db {
        Some(path) => Store::open(path, options)?,
        None => Store::open_workspace(&cli.repo, options)?,
    })
}
