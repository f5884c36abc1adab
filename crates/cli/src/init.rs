//! `trellis init`: a starter `AGENTS.md` for the repository, from what Trellis detects in it
//! (docs/conventions.md). An existing instructions file is never overwritten.

use std::path::Path;
use std::process::ExitCode;

use clap::Args;
use trellis_core::instructions::{self, InstructionsConfig};
use trellis_core::starter;

/// `trellis init` options.
#[derive(Debug, Args)]
pub struct InitArgs {
    /// Print the starter file instead of writing it.
    #[arg(long)]
    pub print: bool,
}

/// Writes `<repo>/AGENTS.md` unless the repository root already has an instructions file
/// (`trellis_runtime::starter::init`), or prints the starter.
pub fn execute(args: &InitArgs, repo: &Path, overrides: &[String]) -> anyhow::Result<ExitCode> {
    let root = trellis_tools::worktree::repo_root(repo)?;
    if args.print {
        print!("{}", starter::starter_for(&root));
        return Ok(ExitCode::SUCCESS);
    }
    let config = trellis_config::Config::load(&trellis_config::LoadOptions::discover(
        &root,
        overrides.to_vec(),
    ))?;
    let section: InstructionsConfig = config.section(instructions::SECTION)?;
    match starter::init(&root, &section.names)
        .map_err(|e| anyhow::anyhow!("cannot create {}: {e}", root.join("AGENTS.md").display()))?
    {
        starter::Init::Exists(existing) => println!(
            "{existing} already holds this repository's instructions: nothing written \
             (`trellis init --print` shows what Trellis would suggest)"
        ),
        starter::Init::Wrote(path) => println!(
            "wrote {} — check it, add your conventions, and commit it",
            path.display()
        ),
    }
    Ok(ExitCode::SUCCESS)
}
