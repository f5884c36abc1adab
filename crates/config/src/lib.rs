//! Layered Trellis configuration.
//!
//! Three layers, later ones winning key by key (tables merge, everything else replaces):
//! 1. the user file, `$XDG_CONFIG_HOME/trellis/config.toml` (default `~/.config/trellis/config.toml`);
//! 2. the project file, `<repo>/.trellis/config.toml`;
//! 3. `-c key=value` overrides from the command line (dotted keys, TOML value syntax; a value
//!    that is not valid TOML is taken as a string).
//!
//! The top level is a set of named sections ([`SECTIONS`]); each crate owns one and reads it
//! with [`Config::section`] into its own type. A section type derives `Deserialize` and
//! `JsonSchema`: the schema is used to reject unknown keys with the nearest valid key and the
//! file and line that set them, so the section types need no hand-written validation.

mod error;
mod layer;
mod schema;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::de::DeserializeOwned;

pub use error::{Error, Result};
use layer::{Layer, merge};
pub use schema::nearest;

/// The top-level sections and their owners. Adding a section is adding its name here.
pub const SECTIONS: &[&str] = &[
    "models",       // trellis-llm: model profiles
    "roles",        // trellis-llm: role → profile assignment
    "budgets",      // trellis-llm: token and cost budgets, prices
    "tools",        // trellis-tools
    "index",        // trellis-index
    "agents",       // trellis-agents: test command, turn caps, role directories, retrieval agent
    "context",      // trellis-agents: input caps, summarisation, tool-output handles
    "mcp",          // trellis-mcp: MCP servers whose tools agents use
    "lsp",          // trellis-lsp: language server commands
    "sources",      // trellis-sources: web search, documentation sites, OSV advisories
    "store",        // trellis-store: a PostgreSQL server instead of the workspace's SQLite file
    "repository",   // trellis-tools: the git remote runs' branches travel through (team scale)
    "sandbox",      // trellis-sandbox: the OS sandbox of every command agents run
    "telemetry",    // trellis-telemetry: OpenTelemetry export of runs' spans (OTLP)
    "instructions", // trellis-runtime: AGENTS.md and its stand-ins given to agents
    "hooks",        // trellis-tools: the user's commands around tool calls and runs (a list)
    "notify",       // trellis-notify: desktop and webhook notifications of runs
];

/// The top-level sections that are lists of tables (`[[hooks]]`): each layer's entries are
/// added after the earlier layers' instead of replacing them.
pub const LIST_SECTIONS: &[&str] = &["hooks"];

/// Where to look for configuration.
#[derive(Clone, Debug, Default)]
pub struct LoadOptions {
    /// The user file; read if it exists.
    pub user_file: Option<PathBuf>,
    /// The project file; read if it exists.
    pub project_file: Option<PathBuf>,
    /// `-c key=value` arguments, applied in order.
    pub overrides: Vec<String>,
}

impl LoadOptions {
    /// The standard locations for a repository: the user file from `XDG_CONFIG_HOME` (or
    /// `HOME/.config`) and `<repo>/.trellis/config.toml`.
    pub fn discover(repo: &Path, overrides: Vec<String>) -> Self {
        Self {
            user_file: user_config_file(),
            project_file: Some(repo.join(".trellis").join("config.toml")),
            overrides,
        }
    }
}

/// `$XDG_CONFIG_HOME/trellis/config.toml`, else `$HOME/.config/trellis/config.toml`.
pub fn user_config_file() -> Option<PathBuf> {
    let base = std::env::var_os("XDG_CONFIG_HOME")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".config")))?;
    Some(base.join("trellis").join("config.toml"))
}

/// Where a key's effective value was set.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Origin {
    /// A file, with the 1-based line of the key.
    File {
        /// The file.
        path: PathBuf,
        /// The line.
        line: usize,
    },
    /// A `-c` argument.
    Override(String),
}

impl std::fmt::Display for Origin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Origin::File { path, line } => write!(f, "{}:{line}", path.display()),
            Origin::Override(arg) => write!(f, "-c {arg}"),
        }
    }
}

/// The merged configuration.
#[derive(Clone, Debug, Default)]
pub struct Config {
    merged: toml::Table,
    origins: BTreeMap<String, Origin>,
    files: Vec<PathBuf>,
}

impl Config {
    /// Loads the layers named by `options`. Missing files are skipped; an unknown top-level
    /// section is an error.
    pub fn load(options: &LoadOptions) -> Result<Self> {
        let mut layers = Vec::new();
        for path in [&options.user_file, &options.project_file]
            .into_iter()
            .flatten()
        {
            match std::fs::read_to_string(path) {
                Ok(text) => layers.push(Layer::from_file(path, &text)?),
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(source) => {
                    return Err(Error::Read {
                        path: path.clone(),
                        source,
                    });
                }
            }
        }
        for arg in &options.overrides {
            layers.push(Layer::from_override(arg)?);
        }
        Self::from_layers(layers)
    }

    /// Parses one TOML document as the only layer (for tests and embedding).
    pub fn from_toml(name: &Path, text: &str) -> Result<Self> {
        Self::from_layers(vec![Layer::from_file(name, text)?])
    }

    fn from_layers(layers: Vec<Layer>) -> Result<Self> {
        let mut config = Config::default();
        for layer in layers {
            if let Some(path) = &layer.file {
                config.files.push(path.clone());
            }
            merge(&mut config.merged, &mut config.origins, layer);
        }
        for (key, value) in &config.merged {
            if !SECTIONS.contains(&key.as_str()) {
                return Err(Error::UnknownKey {
                    key: key.clone(),
                    origin: config.origin_text(key),
                    suggestion: schema::nearest(key, SECTIONS.iter().copied()),
                });
            }
            let list = LIST_SECTIONS.contains(&key.as_str());
            let fits = if list {
                value
                    .as_array()
                    .is_some_and(|a| a.iter().all(toml::Value::is_table))
            } else {
                value.is_table()
            };
            if !fits {
                return Err(Error::Invalid {
                    key: key.clone(),
                    origin: config.origin_text(key),
                    message: if list {
                        format!("`{key}` is a list of tables: write each entry as [[{key}]]")
                    } else {
                        "a section must be a table".into()
                    },
                });
            }
        }
        Ok(config)
    }

    /// The files that were read, lowest priority first.
    pub fn files(&self) -> &[PathBuf] {
        &self.files
    }

    /// Where the effective value of a dotted key was set.
    pub fn origin(&self, key: &str) -> Option<&Origin> {
        self.origins.get(key)
    }

    fn origin_text(&self, key: &str) -> String {
        // A key may be unknown because of a parent table set elsewhere; walk up to the
        // nearest recorded ancestor.
        let mut k = key;
        loop {
            if let Some(o) = self.origins.get(k) {
                return o.to_string();
            }
            match k.rfind('.') {
                Some(i) => k = &k[..i],
                None => return "configuration".to_string(),
            }
        }
    }

    /// The raw merged table of a section, if present.
    pub fn raw_section(&self, name: &str) -> Option<&toml::Table> {
        self.merged.get(name).and_then(toml::Value::as_table)
    }

    /// Reads section `name` into `T` (an empty table when absent). Keys not in `T`'s schema
    /// are rejected with the nearest valid key; type errors name the key and its origin.
    /// This is the recommended way: it finds unknown keys at any depth, whatever serde
    /// attributes the section types use.
    pub fn section<T>(&self, name: &str) -> Result<T>
    where
        T: DeserializeOwned + schemars::JsonSchema,
    {
        let table = self.raw_section(name).cloned().unwrap_or_default();
        let value = toml::Value::Table(table);
        let schema = schemars::schema_for!(T);
        let json = serde_json::to_value(&value).map_err(|e| Error::Invalid {
            key: name.to_string(),
            origin: self.origin_text(name),
            message: e.to_string(),
        })?;
        if let Some(unknown) = schema::first_unknown_key(schema.as_value(), &json) {
            let key = format!("{name}.{}", unknown.path);
            return Err(Error::UnknownKey {
                origin: self.origin_text(&key),
                key,
                suggestion: unknown.suggestion.map(|s| format!("{name}.{s}")),
            });
        }
        self.deserialize_section(name, value)
    }

    /// Reads list section `name` (`[[name]]` entries of every layer, in order) into `T`s:
    /// each entry is checked like [`Config::section`] checks a section, and errors name the
    /// entry (`hooks[1].event`) and where it was set.
    pub fn list<T>(&self, name: &str) -> Result<Vec<T>>
    where
        T: DeserializeOwned + schemars::JsonSchema,
    {
        let Some(items) = self.merged.get(name).and_then(toml::Value::as_array) else {
            return Ok(Vec::new());
        };
        let schema = schemars::schema_for!(T);
        let mut out = Vec::with_capacity(items.len());
        for (i, item) in items.iter().enumerate() {
            let entry = format!("{name}[{i}]");
            let json = serde_json::to_value(item).map_err(|e| Error::Invalid {
                key: entry.clone(),
                origin: self.origin_text(&entry),
                message: e.to_string(),
            })?;
            if let Some(unknown) = schema::first_unknown_key(schema.as_value(), &json) {
                let key = format!("{entry}.{}", unknown.path);
                return Err(Error::UnknownKey {
                    origin: self.origin_text(&key),
                    key,
                    suggestion: unknown.suggestion.map(|s| format!("{entry}.{s}")),
                });
            }
            out.push(self.deserialize_section(&entry, item.clone())?);
        }
        Ok(out)
    }

    /// Reads section `name` into a `T` without a JSON Schema. Unknown keys are caught only
    /// where `T`'s types use `#[serde(deny_unknown_fields)]`; serde's list of expected fields
    /// still yields the nearest valid key, and the file and line are found as usual.
    pub fn section_serde<T: DeserializeOwned>(&self, name: &str) -> Result<T> {
        let table = self.raw_section(name).cloned().unwrap_or_default();
        self.deserialize_section(name, toml::Value::Table(table))
    }

    fn deserialize_section<T: DeserializeOwned>(
        &self,
        name: &str,
        value: toml::Value,
    ) -> Result<T> {
        serde_path_to_error::deserialize(value).map_err(|e| {
            let inner = e.path().to_string();
            let key = if inner == "." || inner.is_empty() {
                name.to_string()
            } else {
                format!("{name}.{inner}")
            };
            let message = e.into_inner().to_string();
            if let Some((unknown, expected)) = schema::serde_unknown_field(&message) {
                // The path usually ends with the unknown key itself.
                let suffix = format!(".{unknown}");
                let parent = key.strip_suffix(&suffix).unwrap_or(&key).to_string();
                let full = format!("{parent}.{unknown}");
                return Error::UnknownKey {
                    origin: self.origin_text(&full),
                    suggestion: nearest(&unknown, expected.iter().map(String::as_str))
                        .map(|s| format!("{parent}.{s}")),
                    key: full,
                };
            }
            Error::Invalid {
                origin: self.origin_text(&key),
                message,
                key,
            }
        })
    }
}
