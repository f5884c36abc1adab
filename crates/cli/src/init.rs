//! `trellis init`: a starter `AGENTS.md` for the repository, from what Trellis detects in it
//! (docs/conventions.md). An existing instructions file is never overwritten.

use std::path::Path;
use std::process::ExitCode;

use clap::Args;
use trellis_core::instructions::{self, InstructionsConfig};

/// `trellis init` options.
#[derive(Debug, Args)]
pub struct InitArgs {
    /// Print the starter file instead of writing it.
    #[arg(long)]
    pub print: bool,
}

/// Writes `<repo>/AGENTS.md` unless the repository root already has an instructions file
/// (any name of `[instructions] names`).
pub fn execute(args: &InitArgs, repo: &Path, overrides: &[String]) -> anyhow::Result<ExitCode> {
    let root = trellis_tools::worktree::repo_root(repo)?;
    let config = trellis_config::Config::load(&trellis_config::LoadOptions::discover(
        &root,
        overrides.to_vec(),
    ))?;
    let section: InstructionsConfig = config.section(instructions::SECTION)?;
    let project = trellis_agents::ProjectContext::detect(&root, "");
    let text = trellis_core::starter::starter(&root, &project.languages);
    if args.print {
        print!("{text}");
        return Ok(ExitCode::SUCCESS);
    }
    if let Some(existing) = section.names.iter().find(|n| root.join(n).is_file()) {
        println!(
            "{existing} already holds this repository's instructions: nothing written \
             (`trellis init --print` shows what Trellis would suggest)"
        );
        return Ok(ExitCode::SUCCESS);
    }
    let path = root.join("AGENTS.md");
    // `create_new`: a file that appeared since the check is not overwritten either.
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&path)
        .map_err(|e| anyhow::anyhow!("cannot create {}: {e}", path.display()))?;
    std::io::Write::write_all(&mut file, text.as_bytes())?;
    println!(
        "wrote {} — check it, add your conventions, and commit it",
        path.display()
    );
    Ok(ExitCode::SUCCESS)
}
