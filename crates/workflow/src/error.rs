//! Errors of the workflow crate.

use std::fmt;
use std::path::PathBuf;

use serde::Serialize;

/// One problem found in a workflow file, with where it is and how to fix it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Problem {
    /// The file (or `builtin:<name>` for an embedded workflow).
    pub file: String,
    /// Line, from 1.
    pub line: usize,
    /// Column, from 1.
    pub column: usize,
    /// What is wrong.
    pub message: String,
    /// What to do about it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fix: Option<String>,
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}:{}:{}: {}",
            self.file, self.line, self.column, self.message
        )?;
        if let Some(fix) = &self.fix {
            write!(f, "\n    fix: {fix}")?;
        }
        Ok(())
    }
}

/// A list of problems, printed one per line.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Problems(pub Vec<Problem>);

impl fmt::Display for Problems {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, p) in self.0.iter().enumerate() {
            if i > 0 {
                writeln!(f)?;
            }
            write!(f, "{p}")?;
        }
        Ok(())
    }
}

/// Errors of loading, planning and compiling workflows.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The workflow file is invalid; every problem is listed, sorted by position.
    #[error("{file}: {} problem(s)\n{problems}", problems.0.len())]
    Invalid {
        /// The file.
        file: String,
        /// The problems.
        problems: Problems,
    },
    /// A file or directory could not be read.
    #[error("cannot read {}: {source}", path.display())]
    Io {
        /// The path.
        path: PathBuf,
        /// The cause.
        source: std::io::Error,
    },
    /// No workflow has this name.
    #[error("no workflow named `{name}`{}; known: {known}", suggestion.as_ref().map(|s| format!(" (did you mean `{s}`?)")).unwrap_or_default())]
    UnknownWorkflow {
        /// The name asked for.
        name: String,
        /// The closest known name.
        suggestion: Option<String>,
        /// Every known name, comma separated.
        known: String,
    },
    /// The stage decisions do not fit the workflow.
    #[error("workflow `{workflow}`: {message}")]
    Decision {
        /// The workflow.
        workflow: String,
        /// What is wrong and what to do.
        message: String,
    },
    /// The engine rejected the compiled graph (a bug in compilation).
    #[error(transparent)]
    Graph(#[from] trellis_graph::Error),
}

/// The crate's result type.
pub type Result<T, E = Error> = std::result::Result<T, E>;
