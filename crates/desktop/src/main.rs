//! `trellis-desktop`: parse the flags, open the window.

use std::path::PathBuf;

use clap::Parser;
use trellis_desktop::acp::AgentCommand;

/// The Trellis desktop client: a window speaking ACP to `trellis acp`.
#[derive(Parser, Debug)]
#[command(name = "trellis-desktop", version)]
struct Args {
    /// The workspace (a git repository); default: the current directory.
    #[arg(long, value_name = "DIR")]
    repo: Option<PathBuf>,
    /// The `trellis` binary that serves `trellis acp`; default: `trellis` on PATH.
    #[arg(long, value_name = "PATH", default_value = "trellis")]
    agent: PathBuf,
    /// Configuration overrides handed to the agent (`trellis -c KEY=VALUE acp`).
    #[arg(short = 'c', long = "config", value_name = "KEY=VALUE")]
    config: Vec<String>,
    /// Run every prompt with this workflow (`trellis acp --workflow NAME`).
    #[arg(long, value_name = "NAME")]
    workflow: Option<String>,
    /// Start a new session at once.
    #[arg(long)]
    new: bool,
}

fn main() -> anyhow::Result<()> {
    tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
        .with_writer(std::io::stderr)
        .init();
    let args = Args::parse();
    let root = match args.repo {
        Some(r) => r,
        None => std::env::current_dir()?,
    };
    let root = root.canonicalize().unwrap_or(root);
    let mut agent_args = vec!["--repo".to_owned(), root.display().to_string()];
    for c in &args.config {
        agent_args.extend(["-c".to_owned(), c.clone()]);
    }
    if let Some(w) = args.workflow {
        agent_args.extend(["--workflow".to_owned(), w]);
    }
    let agent = AgentCommand {
        program: args.agent,
        args: agent_args,
        cwd: Some(root.clone()),
        env: Vec::new(),
    };
    trellis_desktop::run(trellis_desktop::Options {
        agent,
        root,
        new_session: args.new,
    })?;
    Ok(())
}
