//! Finding workflows: the built-ins embedded in the binary, then `<repo>/.trellis/workflows`,
//! then configured directories. A later workflow with the same name overrides an earlier one.

use std::fmt;
use std::path::{Path, PathBuf};

use serde::Serialize;
use trellis_graph::nearest;

use crate::error::{Error, Result};
use crate::schema::Workflow;
use crate::validate::{ConfigCheck, load_str};

/// The built-in workflows (`workflows/` at the top of the repository), file name and text.
pub const BUILTINS: [(&str, &str); 6] = [
    (
        "feature_with_iterative_testing.yaml",
        include_str!("../../../workflows/feature_with_iterative_testing.yaml"),
    ),
    (
        "architecture_discussion.yaml",
        include_str!("../../../workflows/architecture_discussion.yaml"),
    ),
    (
        "staged_review.yaml",
        include_str!("../../../workflows/staged_review.yaml"),
    ),
    (
        "three_phase.yaml",
        include_str!("../../../workflows/three_phase.yaml"),
    ),
    (
        "task_tree.yaml",
        include_str!("../../../workflows/task_tree.yaml"),
    ),
    (
        "bug_fix.yaml",
        include_str!("../../../workflows/bug_fix.yaml"),
    ),
];

/// Where a workflow came from.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", content = "path", rename_all = "camelCase")]
pub enum Source {
    /// Embedded in the binary.
    Builtin,
    /// `<repo>/.trellis/workflows/`.
    Repo(PathBuf),
    /// A configured directory.
    Configured(PathBuf),
}

impl fmt::Display for Source {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Source::Builtin => f.write_str("builtin"),
            Source::Repo(p) => write!(f, "repo {}", p.display()),
            Source::Configured(p) => write!(f, "config {}", p.display()),
        }
    }
}

/// A discovered workflow.
#[derive(Clone, Debug, Serialize)]
pub struct Entry {
    /// The workflow.
    pub workflow: Workflow,
    /// Where it came from.
    pub source: Source,
    /// What it replaced, when it overrides a workflow of the same name.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub overrides: Option<Source>,
}

/// Every discovered workflow, by name, plus the files that failed to load.
#[derive(Debug, Default)]
pub struct Catalog {
    entries: Vec<Entry>,
    errors: Vec<Error>,
}

/// The label problems use for a built-in file.
pub fn builtin_label(file: &str) -> String {
    format!("builtin:workflows/{file}")
}

impl Catalog {
    /// Built-ins, then `<repo>/.trellis/workflows/*.yaml|yml` (when `repo` is given), then
    /// each of `dirs` in order. Files load in name order within a directory.
    pub fn discover(repo: Option<&Path>, dirs: &[PathBuf], check: Option<ConfigCheck<'_>>) -> Self {
        let mut c = Catalog::default();
        for (file, text) in BUILTINS {
            c.add(load_str(&builtin_label(file), text, check), Source::Builtin);
        }
        if let Some(repo) = repo {
            let dir = repo.join(".trellis").join("workflows");
            if dir.is_dir() {
                c.add_dir(&dir, Source::Repo, check);
            }
        }
        for dir in dirs {
            c.add_dir(dir, Source::Configured, check);
        }
        c
    }

    fn add_dir(
        &mut self,
        dir: &Path,
        source: fn(PathBuf) -> Source,
        check: Option<ConfigCheck<'_>>,
    ) {
        match yaml_files(dir) {
            Ok(files) => {
                for path in files {
                    let loaded = std::fs::read_to_string(&path)
                        .map_err(|source| Error::Io {
                            path: path.clone(),
                            source,
                        })
                        .and_then(|text| load_str(&path.display().to_string(), &text, check));
                    self.add(loaded, source(path));
                }
            }
            Err(e) => self.errors.push(e),
        }
    }

    fn add(&mut self, loaded: Result<Workflow>, source: Source) {
        let workflow = match loaded {
            Ok(w) => w,
            Err(e) => return self.errors.push(e),
        };
        let entry = match self
            .entries
            .iter()
            .position(|e| e.workflow.name() == workflow.name())
        {
            Some(i) => {
                let old = self.entries.remove(i);
                Entry {
                    workflow,
                    source,
                    overrides: Some(old.source),
                }
            }
            None => Entry {
                workflow,
                source,
                overrides: None,
            },
        };
        self.entries.push(entry);
        self.entries
            .sort_by(|a, b| a.workflow.name().cmp(b.workflow.name()));
    }

    /// Workflows sorted by name.
    pub fn entries(&self) -> &[Entry] {
        &self.entries
    }

    /// Files that failed to load (each with all its problems).
    pub fn errors(&self) -> &[Error] {
        &self.errors
    }

    /// The workflow called `name`.
    pub fn get(&self, name: &str) -> Result<&Entry> {
        self.entries
            .iter()
            .find(|e| e.workflow.name() == name)
            .ok_or_else(|| Error::UnknownWorkflow {
                name: name.to_owned(),
                suggestion: nearest(name, self.entries.iter().map(|e| e.workflow.name()))
                    .map(str::to_owned),
                known: self
                    .entries
                    .iter()
                    .map(|e| e.workflow.name())
                    .collect::<Vec<_>>()
                    .join(", "),
            })
    }
}

/// `*.yaml` and `*.yml` files of `dir`, sorted.
pub fn yaml_files(dir: &Path) -> Result<Vec<PathBuf>> {
    let io = |source| Error::Io {
        path: dir.to_owned(),
        source,
    };
    let mut files = Vec::new();
    for entry in std::fs::read_dir(dir).map_err(io)? {
        let path = entry.map_err(io)?.path();
        let yaml = path.extension().is_some_and(|e| e == "yaml" || e == "yml");
        if yaml && path.is_file() {
            files.push(path);
        }
    }
    files.sort();
    Ok(files)
}

/// Loads one workflow file from disk.
pub fn load_file(path: &Path, check: Option<ConfigCheck<'_>>) -> Result<Workflow> {
    let text = std::fs::read_to_string(path).map_err(|source| Error::Io {
        path: path.to_owned(),
        source,
    })?;
    load_str(&path.display().to_string(), &text, check)
}
