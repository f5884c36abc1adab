//! The Trellis command line.
//!
//! `trellis runs …` inspects and drives runs recorded in the workspace store
//! (`<repo>/.trellis/trellis.db`); `trellis demo …` starts one of the built-in demonstration
//! graphs. Every command prints readable text, or JSON with `--json`.
#![allow(clippy::print_stdout, clippy::print_stderr)]

mod acp;
mod answer;
mod chat;
mod choice;
mod demo;
mod display;
mod drive;
mod eval;
mod follow;
mod init;
mod mcp;
mod models;
mod notify;
mod retrieval;
mod review;
mod runs;
mod serve;
mod session;
mod steer;
mod telemetry;
mod tools;
mod trace;
mod usage;
mod worker;
mod workflows;
mod workspace;

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::bail;
use clap::{Parser, Subcommand, ValueEnum};
use trellis_store::{Store, StoreOptions, Synchronous};

/// Trellis: a self-hosted multi-agent coding system. Ask for work in a repository
/// (`trellis run "…"`), discuss its code (`trellis chat`), review and apply the changes
/// (`trellis review`); or drive it from the web UI (`trellis serve`), an editor (`trellis acp`)
/// or another agent (`trellis mcp`).
#[derive(Debug, Parser)]
#[command(name = "trellis", version, propagate_version = true)]
pub struct Cli {
    /// The workspace (repository) whose `.trellis/` store to use (`trellis serve` takes
    /// several).
    #[arg(
        long = "repo",
        short = 'C',
        global = true,
        value_name = "DIR",
        action = clap::ArgAction::Append
    )]
    pub repos: Vec<PathBuf>,
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
    /// Run a built-in demonstration graph (feature, fanout, chain, pipelines, crashtest,
    /// tickets; `-p scheduling=free` runs any of them free-running, `tickets` is by default).
    Demo(demo::DemoArgs),
    /// List and test model profiles (`list`, `test [PROFILE]`).
    #[command(subcommand)]
    Models(models::ModelsCommand),
    /// Review a run's changes: approve all, per file or per hunk, request changes, or
    /// reject; approved hunks are applied to the working tree.
    Review(review::ReviewArgs),
    /// Reverse an applied run exactly (undoing an undo re-applies it).
    Undo(review::UndoArgs),
    /// Discuss the codebase in a channel: a conversation with read-only tools and the
    /// workspace index, recorded and resumable (`--session`).
    Chat(chat::ChatArgs),
    /// Developer helper: create a run worktree and edit it through the tools.
    #[command(subcommand, hide = true)]
    Sandbox(review::SandboxCommand),
    /// Index the workspace (symbols, document sections, full text, embeddings).
    Index(retrieval::IndexArgs),
    /// Search the workspace index and print packed, attributed context.
    Search(retrieval::SearchArgs),
    /// Print the repo map (definitions ranked by PageRank) or the AST context map.
    Map(retrieval::MapArgs),
    /// List, show and validate workflows (built-in, `.trellis/workflows`, `--workflows-dir`).
    Workflows(workflows::WorkflowsArgs),
    /// Write a starter `AGENTS.md` (the project's instructions for agents) from what Trellis
    /// detects in the repository; an existing instructions file is never overwritten.
    Init(init::InitArgs),
    /// Run a request: the orchestrator picks a workflow, agents work in a git worktree, and
    /// the change ends in a batched review.
    Run(workflows::RunArgs),
    /// MCP: without a subcommand, serve the workspace's code intelligence (search, symbols,
    /// repo map …) to MCP clients on stdio; `list` starts the MCP servers agents use
    /// (`[mcp.servers]`) and shows their state, tools and last error.
    Mcp(mcp::McpArgs),
    /// Serve the HTTP + WebSocket API (and web UI) for one or more workspaces (`--repo DIR`,
    /// repeatable) on loopback, with token authentication.
    Serve(serve::ServeArgs),
    /// Execute the runs of a workspace whose records are on a PostgreSQL server
    /// (`[store] url`): claim runnable runs with a lease, run them, hand them back; beside
    /// other workers and `trellis serve --workers` (docs/deploy.md).
    Worker(worker::WorkerArgs),
    /// Be an Agent Client Protocol (v1) agent on stdin/stdout, for editors such as Zed
    /// (`docs/acp.md`).
    Acp(acp::AcpArgs),
    /// The task harness: `run` scores Trellis on coding tasks (SWE-bench's format) by their
    /// hidden tests, `validate` checks a task file (docs/eval.md).
    #[command(subcommand)]
    Eval(eval::EvalCommand),
    /// The tools' knowledge: `graph` prints the tool knowledge graph learned from the
    /// agents' tool calls (text, DOT or JSON).
    #[command(subcommand)]
    Tools(tools::ToolsCommand),
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

impl Cli {
    /// The workspace of commands that take one (the last `--repo`, else `.`).
    pub fn repo(&self) -> PathBuf {
        self.repos
            .last()
            .cloned()
            .unwrap_or_else(|| PathBuf::from("."))
    }
}

/// Executes `cli`.
pub fn run(mut cli: Cli) -> anyhow::Result<ExitCode> {
    if let Commands::Serve(args) = &cli.command {
        return serve::serve(args, &cli.repos, &cli.config, store_options(&cli));
    }
    if cli.repos.len() > 1 {
        bail!("only `trellis serve` takes several --repo; give one workspace");
    }
    if let Commands::Acp(args) = &cli.command {
        return acp::acp(
            args,
            cli.repos.last().cloned(),
            &cli.config,
            cli.db.clone(),
            store_options(&cli),
        );
    }
    let repo = cli.repo();
    cli.repos = vec![repo.clone()];
    check_dir(&repo)?;
    if retrieval::handles(&cli.command) {
        return retrieval::execute(&repo, &cli.config, cli.command);
    }
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    if let Commands::Models(cmd) = &cli.command {
        return rt.block_on(models::execute(cmd, &repo, &cli.config));
    }
    if let Commands::Eval(cmd) = cli.command {
        return rt.block_on(eval::execute(cmd, &cli.config));
    }
    if let Commands::Mcp(cmd) = &cli.command
        && cmd.gateway
    {
        return rt.block_on(mcp::gateway(cmd, &repo, &cli.config, || {
            open_store(&cli, false)
        }));
    }
    if let Commands::Mcp(cmd) = cli.command {
        return rt.block_on(mcp::execute(cmd, &repo, &cli.config));
    }
    if let Commands::Run(args) = &cli.command
        && !(args.plan_only && args.workflow.is_some())
    {
        // Before the store is created: a directory that is not a repository gets nothing.
        trellis_tools::worktree::repo_root(&repo)?;
        let store = open_store(&cli, false)?;
        return rt.block_on(async {
            let code = session::run(args, &repo, &cli.config, store).await;
            telemetry::flush().await;
            notify::flush().await;
            code
        });
    }
    // Workflow commands and `init` need no store; dispatch them before one is created.
    match cli.command {
        Commands::Init(args) => return init::execute(&args, &repo, &cli.config),
        Commands::Workflows(args) => return workflows::workflows(args, &repo),
        Commands::Run(args) => return workflows::run(args, &repo),
        _ => {}
    }
    let store = if needs_existing_store(&cli.command) {
        match open_store(&cli, true) {
            Ok(store) => store,
            Err(e) if matches!(e.downcast_ref(), Some(trellis_store::Error::NoStore(_))) => {
                return no_store(&cli);
            }
            Err(e) => return Err(e),
        }
    } else {
        open_store(&cli, false)?
    };
    let code = command(cli, &repo, store, &rt);
    rt.block_on(async {
        telemetry::flush().await;
        notify::flush().await;
    });
    code
}

/// Executes a command that uses the store (the runtime service's commands among them).
fn command(
    cli: Cli,
    repo: &Path,
    store: Arc<Store>,
    rt: &tokio::runtime::Runtime,
) -> anyhow::Result<ExitCode> {
    let repo = repo.to_path_buf();
    match cli.command {
        Commands::Runs(cmd) => {
            let ws = workspace::Workspace::new(&repo, &cli.config, store);
            rt.block_on(runs::execute(cmd, &ws))
        }
        Commands::Demo(args) => rt.block_on(demo::execute(args, store)),
        Commands::Review(args) => rt.block_on(async {
            let service = workspace::open_service(&repo, &cli.config, &[], store)?;
            let code = review::review_with(&service, args).await;
            service.shutdown().await;
            code
        }),
        Commands::Undo(args) => rt.block_on(async {
            let service = workspace::open_service(&repo, &cli.config, &[], store)?;
            let code = review::undo_with(&service, args).await;
            service.shutdown().await;
            code
        }),
        Commands::Chat(args) => rt.block_on(async {
            let service = workspace::open_service(&repo, &cli.config, &[], store)?;
            let code = chat::chat(&service, args).await;
            service.shutdown().await;
            code
        }),
        Commands::Sandbox(cmd) => rt.block_on(review::sandbox(cmd, &repo, &cli.config, store)),
        Commands::Worker(args) => rt.block_on(worker::work(&args, &repo, &cli.config, store)),
        Commands::Tools(cmd) => tools::execute(cmd, &trellis_core::Records::new(store)),
        Commands::Index(_)
        | Commands::Search(_)
        | Commands::Map(_)
        | Commands::Workflows(_)
        | Commands::Init(_)
        | Commands::Run(_)
        | Commands::Models(_)
        | Commands::Eval(_)
        | Commands::Mcp(_)
        | Commands::Serve(_)
        | Commands::Acp(_) => unreachable!("handled before the store is opened"),
    }
}

/// `-C DIR` must name an existing directory (nothing is created in a mistyped one).
fn check_dir(dir: &Path) -> anyhow::Result<()> {
    match std::fs::metadata(dir) {
        Ok(m) if m.is_dir() => Ok(()),
        Ok(_) => bail!("-C {}: not a directory", dir.display()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            bail!("-C {}: no such directory", dir.display())
        }
        Err(e) => bail!("-C {}: {e}", dir.display()),
    }
}

/// Commands that only read the store or act on runs already in it: they never create one.
fn needs_existing_store(command: &Commands) -> bool {
    matches!(
        command,
        Commands::Runs(_) | Commands::Review(_) | Commands::Undo(_) | Commands::Tools(_)
    )
}

fn store_options(cli: &Cli) -> StoreOptions {
    StoreOptions {
        synchronous: match cli.synchronous {
            SyncArg::Full => Synchronous::Full,
            SyncArg::Normal => Synchronous::Normal,
        },
        ..StoreOptions::default()
    }
}

/// The workspace's store as `--db` or the `[store]` section name it; with `existing`, a
/// SQLite file only if it is there.
fn open_store(cli: &Cli, existing: bool) -> anyhow::Result<Arc<Store>> {
    let repo = cli.repo();
    let options = store_options(cli);
    workspace::open_store(&repo, &cli.config, cli.db.as_deref(), options, existing)
}

/// What a command that needs an existing store says when there is none: `runs list` lists
/// nothing (exit 0), every other command names the missing store (exit 1).
fn no_store(cli: &Cli) -> anyhow::Result<ExitCode> {
    let message = match &cli.db {
        Some(path) => format!(
            "no Trellis store at {} (nothing has run here yet)",
            path.display()
        ),
        None => format!(
            "no Trellis store in {} (nothing has run here yet)",
            cli.repo()
                .canonicalize()
                .unwrap_or_else(|_| cli.repo())
                .display()
        ),
    };
    match &cli.command {
        Commands::Runs(runs::RunsCommand::List { json, .. }) => {
            if *json {
                println!("[]");
            } else {
                println!("{message}");
            }
            Ok(ExitCode::SUCCESS)
        }
        _ => bail!("{message}"),
    }
}
