//! The project instructions a run's agents were given (`AGENTS.md` and its stand-ins),
//! stored with the run as its `instructions` artifact (docs/conventions.md).

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// The artifact kind a run's instructions are stored under.
pub const INSTRUCTIONS_ARTIFACT: &str = "instructions";

/// The instruction files a run read, and what could not be read.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct InstructionsUsed {
    /// The files: the user's, the repository root's, then nested ones in path order.
    pub files: Vec<InstructionFileRecord>,
    /// One line per file or directory left out, naming it and why.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub problems: Vec<String>,
}

/// One instruction file.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct InstructionFileRecord {
    /// Relative to the repository root; absolute for the user's own file.
    pub path: String,
    /// Where it applies: `user` (every repository), `root` (every path), or the directory
    /// (relative to the root) whose paths it applies to.
    pub applies_to: String,
    /// The SHA-256 of the whole file, hex.
    pub sha256: String,
    /// Whether only the file's first 32 KiB were used.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub cut: bool,
    /// The files its `@path` lines included.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub included: Vec<IncludedRecord>,
}

/// A file an instructions file included with an `@path` line.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct IncludedRecord {
    /// As the line named it.
    pub path: String,
    /// The SHA-256 of the whole file, hex.
    pub sha256: String,
}
