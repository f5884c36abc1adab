//! The task harness (`trellis eval`): coding tasks in SWE-bench's instance format run through
//! Trellis — and through anchor agents on the same model — each in a fresh checkout, scored
//! by the task's hidden tests, recorded as resumable JSONL with a summary.
//!
//! - [`task`]: the task file, checked line by line.
//! - [`workdir`]: fresh checkouts at a task's base commit, and set-up environments cached
//!   per `env_key`.
//! - [`score`]: the hidden tests applied after the agent's change, and the verdict.
//! - [`trellis`], [`mini`]: the agents — Trellis, and the anchor mini-swe-agent on the same
//!   model behind `trellis models serve`.
//! - [`results`]: the records (one JSON line per task and agent), resuming, the summary.

pub mod agentenv;
pub mod mini;
pub mod results;
pub mod run;
pub mod score;
pub mod task;
pub mod trellis;
pub mod workdir;

use std::path::PathBuf;

/// What can go wrong.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A task file problem, with its place.
    #[error("{}", task_place(file, *line, field, message))]
    Task {
        /// The task file.
        file: PathBuf,
        /// The 1-based line (0: the file as a whole).
        line: usize,
        /// The field (empty: the line as a whole).
        field: String,
        /// What is wrong and what is expected.
        message: String,
    },
    /// A file or process operation failed.
    #[error("{what}: {source}")]
    Io {
        /// What was being done.
        what: String,
        /// The cause.
        source: std::io::Error,
    },
    /// A step failed (a git command, a setup command) — the message says which and why.
    #[error("{0}")]
    Failed(String),
}

fn task_place(file: &std::path::Path, line: usize, field: &str, message: &str) -> String {
    let mut s = format!("{}:", file.display());
    if line > 0 {
        s.push_str(&format!(" line {line},"));
    }
    if !field.is_empty() {
        s.push_str(&format!(" field `{field}`:"));
    }
    format!("{s} {message}")
}

/// The harness's result type.
pub type Result<T, E = Error> = std::result::Result<T, E>;
