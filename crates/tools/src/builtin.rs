//! The built-in tools.

mod edit;
mod files;
mod git;
mod interact;
mod patch;
mod search;
mod shell;

use std::sync::Arc;

use crate::tool::{Tool, typed};

pub use patch::{PatchFile, parse_patch};
pub use shell::{ShellOutcome, run_shell, run_shell_sandboxed, scrubbed_env};

/// Every built-in tool.
pub fn all() -> Vec<Arc<dyn Tool>> {
    vec![
        typed(files::ReadFile),
        typed(files::ListDirectory),
        typed(files::WriteFile),
        typed(search::GlobSearch),
        typed(search::Grep),
        typed(edit::EditFile),
        typed(edit::MultiEdit),
        typed(patch::ApplyPatch),
        typed(shell::Shell),
        typed(git::GitStatus),
        typed(git::GitDiff),
        typed(git::GitLog),
        typed(interact::TakeNote),
        typed(interact::AskQuestions),
    ]
}
