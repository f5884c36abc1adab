//! The workspace's dependencies, read from its lockfiles: `Cargo.lock` (crates.io
//! packages), `package-lock.json` (npm, lockfileVersion 2 and 3 `packages`; version 1's
//! nested `dependencies` too), `poetry.lock` and `requirements*.txt` (PyPI; only pinned
//! `==` versions: a range says nothing about what is installed), `go.sum` (Go modules).

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use serde::Deserialize;

use super::version::Ecosystem;

/// One locked dependency.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Dependency {
    /// Its ecosystem.
    pub ecosystem: Ecosystem,
    /// Its name as written in the lockfile.
    pub name: String,
    /// The locked version.
    pub version: String,
    /// The lockfile, relative to the workspace.
    pub file: String,
}

/// A lockfile found, with its modification time (what a reload compares).
pub type Found = (PathBuf, Option<SystemTime>);

fn is_lockfile(name: &str) -> bool {
    matches!(
        name,
        "Cargo.lock" | "package-lock.json" | "poetry.lock" | "go.sum"
    ) || (name.starts_with("requirements") && name.ends_with(".txt"))
}

/// The lockfiles under `root`, at most `max_depth` levels down (`.gitignore` honoured;
/// `node_modules`, `target`, `.git` and `.trellis` skipped).
pub fn find(root: &Path, max_depth: usize) -> Vec<Found> {
    let walk = ignore::WalkBuilder::new(root)
        .max_depth(Some(max_depth.max(1)))
        .filter_entry(|e| {
            !matches!(
                e.file_name().to_str(),
                Some("node_modules" | "target" | ".git" | ".trellis" | ".venv" | "venv")
            )
        })
        .build();
    let mut out: Vec<Found> = walk
        .filter_map(Result::ok)
        .filter(|e| e.file_type().is_some_and(|t| t.is_file()))
        .filter(|e| e.file_name().to_str().is_some_and(is_lockfile))
        .map(|e| {
            let mtime = e.metadata().ok().and_then(|m| m.modified().ok());
            (e.into_path(), mtime)
        })
        .collect();
    out.sort();
    out
}

/// The dependencies of the lockfiles (duplicates removed); unreadable files are skipped
/// with a warning.
pub fn read(root: &Path, files: &[Found]) -> Vec<Dependency> {
    let mut deps = BTreeSet::new();
    for (path, _) in files {
        let rel = path
            .strip_prefix(root)
            .unwrap_or(path)
            .display()
            .to_string();
        let Ok(text) = std::fs::read_to_string(path) else {
            tracing::warn!("{}: unreadable", path.display());
            continue;
        };
        let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
        let parsed = match name {
            "Cargo.lock" => cargo_lock(&text),
            "package-lock.json" => package_lock(&text),
            "poetry.lock" => poetry_lock(&text),
            "go.sum" => Ok(go_sum(&text)),
            _ => Ok(requirements(&text)),
        };
        match parsed {
            Ok(list) => {
                deps.extend(
                    list.into_iter()
                        .map(|(ecosystem, name, version)| Dependency {
                            ecosystem,
                            name,
                            version,
                            file: rel.clone(),
                        }),
                )
            }
            Err(e) => tracing::warn!("{}: {e}", path.display()),
        }
    }
    deps.into_iter().collect()
}

type Locked = Vec<(Ecosystem, String, String)>;

#[derive(Deserialize)]
struct TomlLock {
    #[serde(default)]
    package: Vec<TomlPackage>,
}

#[derive(Deserialize)]
struct TomlPackage {
    name: String,
    version: String,
    #[serde(default)]
    source: Option<String>,
}

/// Packages from crates.io (the registry's git or sparse index); path and git
/// dependencies (the workspace's own crates) are left out.
fn cargo_lock(text: &str) -> Result<Locked, String> {
    let lock: TomlLock = toml::from_str(text).map_err(|e| e.to_string())?;
    Ok(lock
        .package
        .into_iter()
        .filter(|p| {
            p.source.as_deref().is_some_and(|s| {
                s.contains("github.com/rust-lang/crates.io-index") || s.contains("index.crates.io")
            })
        })
        .map(|p| (Ecosystem::CratesIo, p.name, p.version))
        .collect())
}

fn poetry_lock(text: &str) -> Result<Locked, String> {
    let lock: TomlLock = toml::from_str(text).map_err(|e| e.to_string())?;
    Ok(lock
        .package
        .into_iter()
        .map(|p| (Ecosystem::PyPI, p.name, p.version))
        .collect())
}

#[derive(Deserialize)]
struct NpmLock {
    #[serde(default)]
    packages: Option<serde_json::Map<String, serde_json::Value>>,
    #[serde(default)]
    dependencies: Option<serde_json::Map<String, serde_json::Value>>,
}

fn package_lock(text: &str) -> Result<Locked, String> {
    let lock: NpmLock = serde_json::from_str(text).map_err(|e| e.to_string())?;
    let mut out = Vec::new();
    if let Some(packages) = lock.packages {
        for (key, v) in packages {
            // "" is the project itself; links point at workspace folders.
            let Some(at) = key.rfind("node_modules/") else {
                continue;
            };
            if v.get("link").and_then(serde_json::Value::as_bool) == Some(true) {
                continue;
            }
            let name = v
                .get("name")
                .and_then(serde_json::Value::as_str)
                .unwrap_or(&key[at + "node_modules/".len()..]);
            if let Some(version) = v.get("version").and_then(serde_json::Value::as_str) {
                out.push((Ecosystem::Npm, name.to_owned(), version.to_owned()));
            }
        }
    } else if let Some(deps) = lock.dependencies {
        npm_v1(&deps, &mut out);
    }
    Ok(out)
}

/// lockfileVersion 1: `dependencies` nested by `dependencies`.
fn npm_v1(deps: &serde_json::Map<String, serde_json::Value>, out: &mut Locked) {
    for (name, v) in deps {
        if let Some(version) = v.get("version").and_then(serde_json::Value::as_str)
            && !version.starts_with("file:")
        {
            out.push((Ecosystem::Npm, name.clone(), version.to_owned()));
        }
        if let Some(nested) = v.get("dependencies").and_then(serde_json::Value::as_object) {
            npm_v1(nested, out);
        }
    }
}

/// `name==version` lines (extras, environment markers, hashes and comments dropped).
fn requirements(text: &str) -> Locked {
    text.lines()
        .filter_map(|line| {
            let line = line.split(" #").next().unwrap_or("").trim();
            if line.starts_with('#') || line.starts_with('-') {
                return None;
            }
            let line = line.split(';').next().unwrap_or("");
            let line = line.split(" --").next().unwrap_or("").trim();
            let (name, version) = line.split_once("==")?;
            let name = name.split('[').next().unwrap_or("").trim();
            let version = version.trim().trim_end_matches('\\').trim();
            let ok = |s: &str| {
                !s.is_empty()
                    && s.chars().all(|c| {
                        c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.' | '!' | '+')
                    })
            };
            (ok(name) && ok(version) && !version.contains('*'))
                .then(|| (Ecosystem::PyPI, name.to_owned(), version.to_owned()))
        })
        .collect()
}

/// `module version[/go.mod] hash` lines.
fn go_sum(text: &str) -> Locked {
    text.lines()
        .filter_map(|line| {
            let mut words = line.split_whitespace();
            let (module, version) = (words.next()?, words.next()?);
            let version = version.strip_suffix("/go.mod").unwrap_or(version);
            Some((Ecosystem::Go, module.to_owned(), version.to_owned()))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requirements_keep_pinned_versions_only() {
        let got = requirements(
            "# comment\nDjango==4.2.1  # pinned\nrequests[socks]==2.31.0 ; python_version > \"3.8\"\nflask>=2\n-r other.txt\nPyYAML==6.0.1 --hash=sha256:abc\n",
        );
        let names: Vec<(&str, &str)> = got
            .iter()
            .map(|(_, n, v)| (n.as_str(), v.as_str()))
            .collect();
        assert_eq!(
            names,
            [
                ("Django", "4.2.1"),
                ("requests", "2.31.0"),
                ("PyYAML", "6.0.1")
            ]
        );
    }

    #[test]
    fn go_sum_versions_lose_the_go_mod_suffix() {
        let got =
            go_sum("golang.org/x/net v0.17.0 h1:abc=\ngolang.org/x/net v0.17.0/go.mod h1:def=\n");
        assert!(
            got.iter()
                .all(|(_, n, v)| n == "golang.org/x/net" && v == "v0.17.0")
        );
    }
}
