//! The crate's error type.
//!
//! A tool's failure is *not* an agent failure: [`crate::Registry::call`] turns every
//! [`Error`] into a tool result with `is_error` set, whose text the model reads and acts on.
//! So messages say what went wrong and what to do instead.

use std::path::PathBuf;

/// Errors raised by tools, the policy, worktrees and the review.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The tool's arguments did not match its schema.
    #[error("invalid arguments for `{tool}`: {message}")]
    InvalidArgs {
        /// The tool.
        tool: String,
        /// What was wrong.
        message: String,
    },
    /// No tool of that name exists, or the role may not use it.
    #[error("unknown tool `{0}`; use one of the tools you were given")]
    UnknownTool(String),
    /// The role is not allowed to call the tool.
    #[error("tool `{tool}` is not allowed for role `{role}`")]
    NotAllowed {
        /// The tool.
        tool: String,
        /// The role.
        role: String,
    },
    /// A path resolved outside the workspace or into a protected place.
    #[error("path `{path}` is refused: {reason}")]
    PathRefused {
        /// The path as given.
        path: String,
        /// Why.
        reason: String,
    },
    /// The policy or the user refused the action.
    #[error("denied: {0}")]
    Denied(String),
    /// The tool ran but failed in a way the model should see (no match, bad patch …).
    #[error("{0}")]
    Failed(String),
    /// The call was cancelled.
    #[error("cancelled")]
    Cancelled,
    /// A file system operation failed.
    #[error("{op} {path}: {source}")]
    Io {
        /// What was being done ("cannot read").
        op: &'static str,
        /// The file.
        path: PathBuf,
        /// What the OS said.
        source: std::io::Error,
    },
    /// A git command failed.
    #[error("git {args} failed in {dir}: {message}")]
    Git {
        /// The arguments, joined.
        args: String,
        /// Where it ran.
        dir: PathBuf,
        /// Its stderr (or the spawn error).
        message: String,
    },
    /// The directory is not inside a git repository (runs need one for their worktree).
    #[error(
        "{0} is not inside a git repository: Trellis runs agents in a git worktree of your \
         repository. Run `git init && git add -A && git commit -m init` there, or pass -C REPO."
    )]
    NotARepository(PathBuf),
    /// Applying reviewed changes would overwrite lines the user changed meanwhile.
    #[error("{0}")]
    Conflict(String),
    /// The store refused a record.
    #[error("store: {0}")]
    Store(#[from] trellis_store::Error),
    /// JSON (de)serialisation of a journal or manifest failed.
    #[error("cannot {what}: {source}")]
    Json {
        /// What was being done.
        what: String,
        /// The serde error.
        source: serde_json::Error,
    },
}

impl Error {
    /// An [`Error::Io`] for `path`.
    pub fn io(op: &'static str, path: impl Into<PathBuf>) -> impl FnOnce(std::io::Error) -> Self {
        let path = path.into();
        move |source| Error::Io { op, path, source }
    }

    /// Whether the error is a cancellation.
    pub fn is_cancelled(&self) -> bool {
        matches!(self, Error::Cancelled)
    }
}

/// The crate's result type.
pub type Result<T, E = Error> = std::result::Result<T, E>;
