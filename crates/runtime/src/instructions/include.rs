//! `@path` lines: an instructions file includes another file by a line that is only `@`
//! and a path (Claude Code's `CLAUDE.md` imports), relative to the including file, `~/` for
//! the home directory. Includes nest up to [`MAX_DEPTH`] deep; a file that cannot be
//! included is left out with a problem naming the file and line. Lines in code blocks are
//! text, never includes.

use std::path::{Path, PathBuf};

use super::{Included, MAX_FILE_BYTES, load};

/// How deep includes nest.
pub const MAX_DEPTH: usize = 5;

/// The path an include line names, if `line` is one.
fn include_target(line: &str) -> Option<&str> {
    let rest = line.trim().strip_prefix('@')?;
    (!rest.is_empty()
        && !rest.contains(char::is_whitespace)
        && (rest.contains('/') || rest.contains('.')))
    .then_some(rest)
}

fn resolve(target: &str, including: &Path) -> Option<PathBuf> {
    if let Some(rest) = target.strip_prefix("~/") {
        return std::env::var_os("HOME").map(|h| PathBuf::from(h).join(rest));
    }
    let p = Path::new(target);
    Some(if p.is_absolute() {
        p.to_path_buf()
    } else {
        including.parent()?.join(p)
    })
}

struct Expander<'a> {
    within: Option<PathBuf>,
    included: &'a mut Vec<Included>,
    problems: &'a mut Vec<String>,
    /// The files being expanded (a cycle is refused).
    stack: Vec<PathBuf>,
    /// Bytes included so far (at most [`MAX_FILE_BYTES`] in all).
    bytes: usize,
}

impl Expander<'_> {
    fn expand(&mut self, text: &str, path: &Path, shown: &Path) -> String {
        let mut out = String::with_capacity(text.len());
        let mut fenced = false;
        for (n, line) in text.lines().enumerate() {
            let t = line.trim_start();
            if t.starts_with("```") || t.starts_with("~~~") {
                fenced = !fenced;
            }
            match include_target(line).filter(|_| !fenced) {
                Some(target) => {
                    let at = format!("{}:{}", shown.display(), n + 1);
                    if let Some(text) = self.include(target, path, &at) {
                        out.push_str(text.trim_end());
                        out.push('\n');
                    }
                }
                None => {
                    out.push_str(line);
                    out.push('\n');
                }
            }
        }
        out
    }

    /// The expanded text of the file `target` names (from `including`, at `at`), or `None`
    /// with a problem noted.
    fn include(&mut self, target: &str, including: &Path, at: &str) -> Option<String> {
        let mut refuse = |why: String| {
            self.problems
                .push(format!("{at}: include @{target} {why}; left out"));
            None
        };
        if self.stack.len() > MAX_DEPTH {
            return refuse(format!("is nested more than {MAX_DEPTH} deep"));
        }
        let Some(path) = resolve(target, including) else {
            return refuse("cannot be resolved (no home directory)".into());
        };
        let real = match path.canonicalize() {
            Ok(p) => p,
            Err(e) => return refuse(format!("cannot be read ({e})")),
        };
        if let Some(root) = &self.within
            && !real.starts_with(root)
        {
            return refuse("is outside the repository (a repository's instructions include only its own files)".into());
        }
        if !real.is_file() {
            return refuse("is not a file".into());
        }
        if self.stack.contains(&real) {
            return refuse("includes itself (a cycle)".into());
        }
        if self.bytes >= MAX_FILE_BYTES {
            return refuse(format!(
                "does not fit: includes add at most {} KiB to a file",
                MAX_FILE_BYTES / 1024
            ));
        }
        let shown = PathBuf::from(target);
        let mut problems = Vec::new();
        let loaded = load(&shown, &real, &mut problems);
        for p in problems {
            self.problems.push(format!("{at}: include {p}"));
        }
        let loaded = loaded?;
        self.bytes += loaded.text.len();
        self.included.push(Included {
            path: shown.clone(),
            sha256: loaded.sha256,
            file: real.clone(),
        });
        self.stack.push(real.clone());
        let text = self.expand(&loaded.text, &real, &shown);
        self.stack.pop();
        Some(text)
    }
}

/// `text` (the file at `path`, shown as `shown`) with its include lines replaced by the
/// files they name; only files under `within` when it is set. Included files are added to
/// `included`, what could not be included to `problems`.
pub fn expand(
    text: &str,
    path: &Path,
    shown: &Path,
    within: Option<&Path>,
    included: &mut Vec<Included>,
    problems: &mut Vec<String>,
) -> String {
    if !text.lines().any(|l| include_target(l).is_some()) {
        return text.to_owned();
    }
    let mut e = Expander {
        within: within.and_then(|r| r.canonicalize().ok()),
        included,
        problems,
        stack: path.canonicalize().into_iter().collect(),
        bytes: 0,
    };
    e.expand(text, path, shown)
}

#[cfg(test)]
mod tests {
    use super::super::{DEFAULT_NAMES, Instructions};

    #[test]
    fn includes_are_expanded_and_a_missing_cyclic_or_outside_one_is_named_and_left_out() {
        let repo = tempfile::tempdir().expect("test");
        let outside = tempfile::tempdir().expect("test");
        let r = repo.path();
        std::fs::create_dir_all(r.join("docs")).expect("test");
        std::fs::write(outside.path().join("secret.md"), "SECRET\n").expect("test");
        std::fs::write(
            r.join("AGENTS.md"),
            format!(
                "Rules:\n@docs/style.md\n@docs/missing.md\n@{}\n```\n@docs/style.md\n```\n",
                outside.path().join("secret.md").display()
            ),
        )
        .expect("test");
        std::fs::write(r.join("docs/style.md"), "Use tabs.\n@../AGENTS.md\n").expect("test");
        let found = Instructions::discover(r, None, &DEFAULT_NAMES);
        let text = &found.files[0].text;
        assert!(text.starts_with("Rules:\nUse tabs.\n"), "{text}");
        assert!(!text.contains("SECRET"), "{text}");
        // In a code block the line is text.
        assert!(text.contains("```\n@docs/style.md\n```"), "{text}");
        assert_eq!(found.files[0].included.len(), 1);
        let problems = found.problems.join("\n");
        assert!(
            problems.contains("AGENTS.md:3: include @docs/missing.md cannot be read"),
            "{problems}"
        );
        assert!(
            problems.contains("AGENTS.md:4: include @")
                && problems.contains("outside the repository"),
            "{problems}"
        );
        assert!(
            problems.contains("docs/style.md:2: include @../AGENTS.md includes itself"),
            "{problems}"
        );
    }
}
