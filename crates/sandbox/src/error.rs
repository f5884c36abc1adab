//! The sandbox's errors: each names the cause and the setting that changes it.

use std::path::PathBuf;

/// Why a command could not be sandboxed.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Neither bubblewrap nor Landlock + seccomp can be set up on this machine.
    #[error(
        "cannot sandbox commands here: {cause}. Install bubblewrap (`apt-get install bubblewrap`, \
         or `scripts/setup`), allow unprivileged user namespaces, or run on a kernel with Landlock; \
         `[sandbox] mode = \"off\"` runs commands unsandboxed (not recommended; docs/security.md)"
    )]
    Unavailable {
        /// What failed, per backend.
        cause: String,
    },
    /// The backend named by `[sandbox] mode` cannot run here.
    #[error(
        "`[sandbox] mode = \"{mode}\"` cannot run here: {cause}. Set `[sandbox] mode = \"auto\"` \
         to use whichever backend works (docs/security.md)"
    )]
    Backend {
        /// The configured mode.
        mode: &'static str,
        /// What failed.
        cause: String,
    },
    /// A path the policy names cannot be used.
    #[error("sandbox path {path}: {source}")]
    Path {
        /// The path.
        path: PathBuf,
        /// The error.
        #[source]
        source: std::io::Error,
    },
    /// The seccomp filter could not be built.
    #[error("cannot build the seccomp filter: {0}")]
    Seccomp(String),
    /// The Landlock ruleset could not be built.
    #[error("cannot build the Landlock ruleset: {0}")]
    Landlock(String),
    /// Other I/O.
    #[error("sandbox: {0}")]
    Io(#[from] std::io::Error),
}

/// The crate's result type.
pub type Result<T, E = Error> = std::result::Result<T, E>;

#[cfg(test)]
mod tests {
    #[test]
    fn refusals_name_the_cause_and_the_setting() {
        let e = super::Error::Unavailable {
            cause: "bubblewrap: bwrap is not on PATH; Landlock: none".into(),
        };
        let text = e.to_string();
        assert!(text.contains("bwrap is not on PATH"), "{text}");
        assert!(text.contains("[sandbox] mode"), "{text}");
    }
}
