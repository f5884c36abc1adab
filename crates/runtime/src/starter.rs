//! `trellis init`'s starter `AGENTS.md`: what Trellis detects in a repository — its
//! languages, its test, lint and format commands, its top-level layout — as a file the user
//! edits, with a place for what no detection can know.

use std::path::Path;

use serde_json::Value;

use crate::instructions::Instructions;

/// The lint and format commands the manifests at the top of `dir` suggest.
fn checks(dir: &Path) -> Vec<(&'static str, String)> {
    let has = |f: &str| dir.join(f).exists();
    let read = |f: &str| std::fs::read_to_string(dir.join(f)).unwrap_or_default();
    let mut out = Vec::new();
    if has("Cargo.toml") {
        out.push(("Lint", "cargo clippy --all-targets -- -D warnings".into()));
        out.push(("Format", "cargo fmt --check".into()));
    }
    if has("go.mod") {
        out.push(("Lint", "go vet ./...".into()));
        out.push(("Format", "gofmt -l .".into()));
    }
    let pyproject = read("pyproject.toml");
    if pyproject.contains("[tool.ruff") || has("ruff.toml") || has(".ruff.toml") {
        out.push(("Lint", "ruff check .".into()));
        out.push(("Format", "ruff format --check .".into()));
    } else if pyproject.contains("[tool.black") {
        out.push(("Format", "black --check .".into()));
    }
    if let Ok(pkg) = serde_json::from_str::<Value>(&read("package.json")) {
        for (script, label) in [
            ("lint", "Lint"),
            ("typecheck", "Type check"),
            ("format", "Format"),
        ] {
            if pkg["scripts"][script].is_string() {
                out.push((label, format!("npm run {script}")));
            }
        }
    }
    let makefile = read("Makefile");
    for (target, label) in [("lint", "Lint"), ("fmt", "Format"), ("check", "Check")] {
        if makefile
            .lines()
            .any(|l| l.starts_with(&format!("{target}:")))
            && !out.iter().any(|(l, _)| *l == label)
        {
            out.push((label, format!("make {target}")));
        }
    }
    out
}

/// The top-level directories of `dir` (git's ignore rules apply; hidden ones skipped).
fn layout(dir: &Path) -> Vec<String> {
    let walk = ignore::WalkBuilder::new(dir)
        .max_depth(Some(1))
        .hidden(true)
        .require_git(false)
        .sort_by_file_path(Ord::cmp)
        .build();
    walk.flatten()
        .filter(|e| e.depth() == 1 && e.file_type().is_some_and(|t| t.is_dir()))
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .take(20)
        .collect()
}

/// The starter `AGENTS.md` of the repository at `dir`, from `languages` (most files
/// first, as the orchestrator's project context counts them).
pub fn starter(dir: &Path, languages: &[(String, usize)]) -> String {
    let mut s = String::from(
        "# AGENTS.md\n\n\
         Instructions for coding agents working in this repository (read by Trellis, Codex, \
         Cursor, Zed and others; <https://agents.md>). Written by `trellis init` from what it \
         detected: check it, keep it short and specific, and add what only you know.\n\n\
         ## Project\n\n",
    );
    let langs: Vec<String> = languages
        .iter()
        .take(5)
        .map(|(l, n)| format!("{l} ({n} files)"))
        .collect();
    s.push_str(&format!(
        "- Languages: {}\n",
        if langs.is_empty() {
            "none detected".to_owned()
        } else {
            langs.join(", ")
        }
    ));
    let dirs = layout(dir);
    if !dirs.is_empty() {
        let dirs: Vec<String> = dirs.iter().map(|d| format!("`{d}/`")).collect();
        s.push_str(&format!("- Layout: {}\n", dirs.join(", ")));
    }
    s.push_str("\n## Build and test\n\n");
    match crate::testcmd::detect(dir, None, &Instructions::default()) {
        Some(t) => s.push_str(&format!("- Test: `{}`\n", t.command)),
        None => s.push_str("- Test: (no test command detected — name yours here: Run `…`)\n"),
    }
    for (label, command) in checks(dir) {
        s.push_str(&format!("- {label}: `{command}`\n"));
    }
    s.push_str(
        "\nRun the tests and the checks above before you finish a change.\n\n\
         ## Conventions\n\n\
         - (Naming, error handling, dependencies, what not to touch: add your project's rules \
         here.)\n",
    );
    s
}

/// What [`init`] did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Init {
    /// Wrote the starter here.
    Wrote(std::path::PathBuf),
    /// The root already has this instructions file (one of `names`): nothing written.
    Exists(String),
}

/// `trellis init`: writes the starter `AGENTS.md` at `root` unless the root already has
/// one of `names` (`[instructions] names`: an `AGENTS.md`, or another tool's file a new
/// `AGENTS.md` would hide). A file that appears meanwhile is not overwritten either.
pub fn init(root: &Path, names: &[String]) -> std::io::Result<Init> {
    if let Some(existing) = names.iter().find(|n| root.join(n).is_file()) {
        return Ok(Init::Exists(existing.clone()));
    }
    let text = starter_for(root);
    let path = root.join("AGENTS.md");
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&path)?;
    std::io::Write::write_all(&mut file, text.as_bytes())?;
    Ok(Init::Wrote(path))
}

/// The starter of the repository at `root`, its languages counted as the orchestrator's
/// project context counts them.
pub fn starter_for(root: &Path) -> String {
    let project = trellis_agents::ProjectContext::detect(root, "");
    starter(root, &project.languages)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_starter_names_what_the_repository_shows_and_its_test_command_is_read_back() {
        let repo = tempfile::tempdir().expect("test");
        let r = repo.path();
        std::fs::write(r.join("Cargo.toml"), "[package]\nname = \"x\"\n").expect("test");
        std::fs::create_dir_all(r.join("src")).expect("test");
        std::fs::create_dir_all(r.join("target")).expect("test");
        std::fs::write(r.join(".gitignore"), "target/\n").expect("test");
        let text = starter(r, &[("Rust".into(), 3)]);
        assert!(text.contains("- Languages: Rust (3 files)"), "{text}");
        assert!(text.contains("- Layout: `src/`\n"), "{text}");
        assert!(text.contains("- Test: `cargo test --quiet`"), "{text}");
        assert!(text.contains("- Lint: `cargo clippy --all-targets -- -D warnings`"));
        // The file it writes names its test command in a way the detection reads back.
        std::fs::write(r.join("AGENTS.md"), &text).expect("test");
        let found = Instructions::discover(r, None, &crate::instructions::DEFAULT_NAMES);
        assert_eq!(
            found.test_command().map(|(c, _)| c),
            Some("cargo test --quiet".into())
        );
    }
}
