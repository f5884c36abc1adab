//! The built-in tools.

mod edit;
mod files;
mod git;
mod interact;
mod patch;
mod search;
mod shell;

use std::sync::{Arc, LazyLock};

use crate::tool::{Tool, typed};

pub use patch::{PatchFile, parse_patch};
pub use shell::{ShellOutcome, run_shell, run_shell_fed, run_shell_sandboxed, scrubbed_env};

/// Every built-in tool. They hold no state, so they (and their specs, whose JSON schemas
/// take a while to derive) are made once per process and shared.
pub fn all() -> Vec<Arc<dyn Tool>> {
    ALL.clone()
}

static ALL: LazyLock<Vec<Arc<dyn Tool>>> = LazyLock::new(|| {
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
});
