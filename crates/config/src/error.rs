//! Configuration errors. Every variant names where the offending value came from.

use std::path::PathBuf;

/// Result alias for this crate.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// What went wrong while loading or reading configuration.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A configuration file exists but cannot be read.
    #[error("cannot read {path}: {source}")]
    Read {
        /// The file.
        path: PathBuf,
        /// The underlying error.
        source: std::io::Error,
    },
    /// A configuration file is not valid TOML.
    #[error("{origin}: {message}")]
    Parse {
        /// `file:line:column`.
        origin: String,
        /// The parser's message.
        message: String,
    },
    /// A `-c key=value` override is malformed.
    #[error("invalid override `-c {arg}`: {message}")]
    Override {
        /// The argument as given.
        arg: String,
        /// What is wrong with it.
        message: String,
    },
    /// A key that no section defines.
    #[error("{origin}: unknown key `{key}`{}", suggestion_text(.suggestion))]
    UnknownKey {
        /// The full dotted key, e.g. `models.profiles.fast.modle`.
        key: String,
        /// Where it was set (`file:line` or `-c …`).
        origin: String,
        /// The nearest valid key at the same level, if one is close.
        suggestion: Option<String>,
    },
    /// A value of the wrong type or out of range.
    #[error("{origin}: invalid value for `{key}`: {message}")]
    Invalid {
        /// The dotted key.
        key: String,
        /// Where it was set.
        origin: String,
        /// What the section expected.
        message: String,
    },
}

fn suggestion_text(s: &Option<String>) -> String {
    match s {
        Some(s) => format!(" (did you mean `{s}`?)"),
        None => String::new(),
    }
}
