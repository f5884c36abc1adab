//! Project instructions: a repository's `AGENTS.md` files (the open format Codex, Cursor, Zed
//! and others read) and the user's own, read once per run and given to every agent inside its
//! input budget. Where a directory has no `AGENTS.md`, the first of `CLAUDE.md`, `.rules`,
//! `.cursorrules` and `.clinerules` it has stands in (docs/conventions.md).

mod cache;
mod commands;
mod include;

use std::path::{Path, PathBuf};
use std::sync::Arc;

pub use cache::{DEFAULT_MAX_CHARS, InstructionsCache, InstructionsConfig, REWALK, SECTION};
use sha2::{Digest, Sha256};

/// The file names read in each directory, in order of preference: the first one present is
/// the directory's instructions.
pub const DEFAULT_NAMES: [&str; 5] = [
    "AGENTS.md",
    "CLAUDE.md",
    ".rules",
    ".cursorrules",
    ".clinerules",
];

/// At most this many bytes of one file are read; the rest is left out with a note.
pub const MAX_FILE_BYTES: usize = 32 * 1024;

/// At most this many directories are looked at for nested files (a huge tree is cut off
/// with a problem noted, never walked for long).
const MAX_DIRS: usize = 20_000;

/// Where a file's instructions apply.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Scope {
    /// The user's own file, under the Trellis config directory: every repository.
    User,
    /// The repository's root: every path.
    Root,
    /// A directory of the repository (relative to its root): the paths below it.
    Dir(PathBuf),
}

/// One instructions file as read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct InstructionFile {
    /// Where it applies.
    pub scope: Scope,
    /// The file: relative to the repository root, or absolute for the user's.
    pub path: PathBuf,
    /// Its text (at most [`MAX_FILE_BYTES`]).
    pub text: String,
    /// The SHA-256 of the whole file, hex.
    pub sha256: String,
    /// Whether the file was longer than what was read.
    pub cut: bool,
    /// The files its `@path` lines included (their text is in `text`), with their hashes.
    pub included: Vec<Included>,
}

/// A file included by an instructions file's `@path` line.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Included {
    /// As the line named it.
    pub path: PathBuf,
    /// The SHA-256 of the whole file, hex.
    pub sha256: String,
    /// The file read (canonical).
    pub file: PathBuf,
}

/// A file as read: at most [`MAX_FILE_BYTES`] of its text, and the hash of all of it.
struct Loaded {
    text: String,
    sha256: String,
    cut: bool,
}

/// Reads `path` (named `shown` in problems): `None` with a problem noted when it cannot be
/// read or is not UTF-8 text; a file over the size limit is cut with a problem noted.
fn load(shown: &Path, path: &Path, problems: &mut Vec<String>) -> Option<Loaded> {
    let bytes = match std::fs::read(path) {
        Ok(b) => b,
        Err(e) => {
            problems.push(format!(
                "{}: cannot be read ({e}); left out",
                shown.display()
            ));
            return None;
        }
    };
    let sha256 = hex(&Sha256::digest(&bytes));
    let cut = bytes.len() > MAX_FILE_BYTES;
    let kept = &bytes[..bytes.len().min(MAX_FILE_BYTES)];
    let text = match std::str::from_utf8(kept) {
        Ok(t) => t.to_owned(),
        // Cut inside a character: keep the whole ones.
        Err(e) if cut && e.error_len().is_none() => {
            String::from_utf8_lossy(&kept[..e.valid_up_to()]).into_owned()
        }
        Err(_) => {
            problems.push(format!("{}: not UTF-8 text; left out", shown.display()));
            return None;
        }
    };
    if cut {
        problems.push(format!(
            "{}: longer than {} KiB; only its first {} KiB are used",
            shown.display(),
            MAX_FILE_BYTES / 1024,
            MAX_FILE_BYTES / 1024
        ));
    }
    Some(Loaded { text, sha256, cut })
}

/// The instructions of a repository, and what could not be read.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Instructions {
    /// The user's, then the root's, then nested ones in path order.
    pub files: Vec<InstructionFile>,
    /// One line per file or directory that was left out, naming it and why.
    pub problems: Vec<String>,
}

impl Instructions {
    /// Reads the instructions of the repository at `root` and the user's in `user_dir` (the
    /// Trellis config directory), looking for `names` in each directory, in order. Git's
    /// ignore rules apply to the walk; hidden directories (`.git`, `.trellis`) are skipped.
    pub fn discover(root: &Path, user_dir: Option<&Path>, names: &[&str]) -> Self {
        let mut out = Self::default();
        if let Some(dir) = user_dir
            && let Some(path) = first_present(dir, names)
        {
            out.read(Scope::User, path.clone(), &path, root);
        }
        let walk = ignore::WalkBuilder::new(root)
            .hidden(true)
            .parents(false)
            .require_git(false)
            .sort_by_file_path(Ord::cmp)
            .filter_entry(|e| e.file_type().is_some_and(|t| t.is_dir()))
            .build();
        let mut dirs = 0usize;
        for entry in walk {
            let dir = match entry {
                Ok(e) => e.into_path(),
                Err(e) => {
                    out.problems
                        .push(format!("a directory could not be read: {e}"));
                    continue;
                }
            };
            dirs += 1;
            if dirs > MAX_DIRS {
                out.problems.push(format!(
                    "more than {MAX_DIRS} directories: nested instructions below the first \
                     {MAX_DIRS} were not looked for"
                ));
                break;
            }
            let Some(path) = first_present(&dir, names) else {
                continue;
            };
            let rel = path.strip_prefix(root).unwrap_or(&path).to_path_buf();
            let scope = match dir.strip_prefix(root) {
                Ok(d) if d.as_os_str().is_empty() => Scope::Root,
                Ok(d) => Scope::Dir(d.to_path_buf()),
                Err(_) => continue,
            };
            out.read(scope, rel, &path, root);
        }
        out
    }

    fn read(&mut self, scope: Scope, shown: PathBuf, path: &Path, root: &Path) {
        let Some(loaded) = load(&shown, path, &mut self.problems) else {
            return;
        };
        // The user's own file may include any file of theirs; a repository's only files of
        // the repository (a cloned repository must not pull `~/.ssh` into a prompt).
        let within = (scope != Scope::User).then_some(root);
        let mut included = Vec::new();
        let text = include::expand(
            &loaded.text,
            path,
            &shown,
            within,
            &mut included,
            &mut self.problems,
        );
        self.files.push(InstructionFile {
            scope,
            path: shown,
            text,
            sha256: loaded.sha256,
            cut: loaded.cut,
            included,
        });
    }

    /// What the run record keeps of these instructions: each file's path, scope and hash,
    /// and the problems.
    pub fn record(&self) -> trellis_protocol::records::InstructionsUsed {
        use trellis_protocol::records::{IncludedRecord, InstructionFileRecord, InstructionsUsed};
        InstructionsUsed {
            files: self
                .files
                .iter()
                .map(|f| InstructionFileRecord {
                    path: f.path.display().to_string(),
                    applies_to: match &f.scope {
                        Scope::User => "user".into(),
                        Scope::Root => "root".into(),
                        Scope::Dir(d) => format!("{}/", d.display()),
                    },
                    sha256: f.sha256.clone(),
                    cut: f.cut,
                    included: f
                        .included
                        .iter()
                        .map(|i| IncludedRecord {
                            path: i.path.display().to_string(),
                            sha256: i.sha256.clone(),
                        })
                        .collect(),
                })
                .collect(),
            problems: self.problems.clone(),
        }
    }

    /// The test command the repository root's file names, with that file's path.
    pub fn test_command(&self) -> Option<(String, &Path)> {
        self.files
            .iter()
            .filter(|f| f.scope == Scope::Root)
            .find_map(|f| commands::test_command(&f.text).map(|c| (c, f.path.as_path())))
    }

    /// Whether nothing was found and nothing went wrong.
    pub fn is_empty(&self) -> bool {
        self.files.is_empty() && self.problems.is_empty()
    }

    /// The files that apply to work on `paths` (relative to the root): the user's, the
    /// root's, and each nested one above one of `paths`, outermost first. With no paths, the
    /// user's and the root's.
    pub fn applicable(&self, paths: &[&Path]) -> Vec<&InstructionFile> {
        self.files
            .iter()
            .filter(|f| match &f.scope {
                Scope::User | Scope::Root => true,
                Scope::Dir(d) => paths.iter().any(|p| p.starts_with(d)),
            })
            .collect()
    }

    /// `files` as one context text: each under a line naming it, outermost first (a nested
    /// file adds to those above it), at most `cap` characters — cut at a line with a note
    /// naming what was left out, never silently.
    pub fn render(files: &[&InstructionFile], cap: usize) -> String {
        let mut out = String::new();
        let mut left_out: Vec<String> = Vec::new();
        for f in files {
            let heading = match &f.scope {
                Scope::User => format!("### {} (yours, for every repository)\n", f.path.display()),
                Scope::Root => format!("### {} (this repository)\n", f.path.display()),
                Scope::Dir(d) => format!("### {} (for {}/)\n", f.path.display(), d.display()),
            };
            let body = f.text.trim();
            let room = cap.saturating_sub(out.chars().count());
            let whole = heading.chars().count() + body.chars().count() + 2;
            if whole <= room {
                out.push_str(&heading);
                out.push_str(body);
                out.push_str("\n\n");
                continue;
            }
            // What fits of this file, at a line boundary; the rest is named below.
            let budget = room.saturating_sub(heading.chars().count() + 120);
            let mut kept = String::new();
            for line in body.lines() {
                if kept.chars().count() + line.chars().count() + 1 > budget {
                    break;
                }
                kept.push_str(line);
                kept.push('\n');
            }
            if !kept.is_empty() {
                out.push_str(&heading);
                out.push_str(&kept);
            }
            left_out.push(f.path.display().to_string());
        }
        if !left_out.is_empty() {
            out.push_str(&format!(
                "[instructions cut to fit the input budget: the rest of {} is not shown]\n",
                left_out.join(", ")
            ));
        }
        out
    }
}

/// The line before a prompt's instructions.
pub const LEAD: &str = "\nThe project's instructions for agents follow; keep to them. Files in \
                        subdirectories may add their own when you work there.\n";

/// The nested files of a run's instructions, given with the first tool result that names a
/// path below their directory ([`trellis_agents::PathNotes`]).
pub struct NestedNotes {
    found: Arc<Instructions>,
    budget: usize,
}

impl NestedNotes {
    /// The notes of `found`'s nested files, each in at most `budget` characters; `None`
    /// when it has none.
    pub fn of(
        found: &Arc<Instructions>,
        budget: usize,
    ) -> Option<Arc<dyn trellis_agents::PathNotes>> {
        found
            .files
            .iter()
            .any(|f| matches!(f.scope, Scope::Dir(_)))
            .then(|| {
                Arc::new(Self {
                    found: found.clone(),
                    budget,
                }) as Arc<dyn trellis_agents::PathNotes>
            })
    }
}

impl trellis_agents::PathNotes for NestedNotes {
    fn notes_for(&self, path: &str) -> Vec<(String, String)> {
        let path = Path::new(path);
        self.found
            .files
            .iter()
            .filter(|f| matches!(&f.scope, Scope::Dir(d) if path.starts_with(d)))
            .map(|f| {
                let text = format!(
                    "[Instructions for this directory, adding to the project's:]\n{}",
                    Instructions::render(&[f], self.budget)
                );
                (f.path.display().to_string(), text)
            })
            .collect()
    }
}

/// The first of `names` present as a file in `dir`.
fn first_present(dir: &Path, names: &[&str]) -> Option<PathBuf> {
    names.iter().map(|n| dir.join(n)).find(|p| p.is_file())
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(root: &Path, rel: &str, text: &str) {
        let p = root.join(rel);
        std::fs::create_dir_all(p.parent().expect("test")).expect("test");
        std::fs::write(p, text).expect("test");
    }

    #[test]
    fn root_nested_and_user_files_are_found_each_directory_taking_its_first_name() {
        let repo = tempfile::tempdir().expect("test");
        let user = tempfile::tempdir().expect("test");
        let r = repo.path();
        write(r, "AGENTS.md", "Run `make test`.\n");
        write(r, "CLAUDE.md", "never read: AGENTS.md comes first\n");
        write(r, "web/.cursorrules", "Use pnpm.\n");
        write(r, "crates/core/AGENTS.md", "No unwrap here.\n");
        write(r, "target/AGENTS.md", "ignored by git\n");
        write(r, ".gitignore", "target/\n");
        write(user.path(), "AGENTS.md", "Answer briefly.\n");
        let found = Instructions::discover(r, Some(user.path()), &DEFAULT_NAMES);
        assert!(found.problems.is_empty(), "{:?}", found.problems);
        let paths: Vec<String> = found
            .files
            .iter()
            .map(|f| f.path.display().to_string())
            .collect();
        assert_eq!(
            paths[0],
            user.path().join("AGENTS.md").display().to_string()
        );
        assert_eq!(
            &paths[1..],
            ["AGENTS.md", "crates/core/AGENTS.md", "web/.cursorrules"]
        );
        assert_eq!(found.files[1].scope, Scope::Root);
        assert_eq!(
            found.files[2].scope,
            Scope::Dir(PathBuf::from("crates/core"))
        );
        // sha256 of "Run `make test`.\n"
        assert_eq!(
            found.files[1].sha256,
            hex(&Sha256::digest(b"Run `make test`.\n"))
        );

        // Nested files apply to the paths below them only, after the outer ones.
        let core = Path::new("crates/core/src/lib.rs");
        let names = |fs: Vec<&InstructionFile>| -> Vec<String> {
            fs.iter().map(|f| f.path.display().to_string()).collect()
        };
        assert_eq!(names(found.applicable(&[core])).len(), 3);
        assert_eq!(names(found.applicable(&[])).len(), 2);
        assert_eq!(
            names(found.applicable(&[Path::new("web/app.ts"), core]))[2..],
            ["crates/core/AGENTS.md", "web/.cursorrules"]
        );
        let text = Instructions::render(&found.applicable(&[core]), 10_000);
        let (u, root, nested) = (
            text.find("Answer briefly.").expect("user"),
            text.find("Run `make test`.").expect("root"),
            text.find("No unwrap here.").expect("nested"),
        );
        assert!(u < root && root < nested, "{text}");
        assert!(text.contains("### crates/core/AGENTS.md (for crates/core/)"));
    }

    #[test]
    fn what_does_not_fit_or_cannot_be_read_is_said_never_dropped_silently() {
        let repo = tempfile::tempdir().expect("test");
        let r = repo.path();
        let long: String = (0..400)
            .map(|i| format!("rule {i}: be careful\n"))
            .collect();
        write(r, "AGENTS.md", &long);
        std::fs::create_dir_all(r.join("bin")).expect("test");
        std::fs::write(r.join("bin/AGENTS.md"), [0xff, 0xfe, 0x00]).expect("test");
        let found = Instructions::discover(r, None, &DEFAULT_NAMES);
        assert_eq!(found.files.len(), 1);
        assert_eq!(found.problems.len(), 1, "{:?}", found.problems);
        assert!(found.problems[0].contains("bin/AGENTS.md") && found.problems[0].contains("UTF-8"));
        let text = Instructions::render(&found.applicable(&[]), 1_000);
        assert!(text.chars().count() <= 1_000, "{}", text.chars().count());
        assert!(text.contains("rule 0: be careful"));
        assert!(!text.contains("rule 399"));
        assert!(text.contains("instructions cut to fit") && text.contains("AGENTS.md"));

        // A file over the size limit is read up to it, and said so.
        let big = "x".repeat(MAX_FILE_BYTES + 10);
        write(r, "AGENTS.md", &big);
        let found = Instructions::discover(r, None, &DEFAULT_NAMES);
        assert!(found.files[0].cut && found.files[0].text.len() == MAX_FILE_BYTES);
        assert!(found.problems.iter().any(|p| p.contains("longer than")));
    }
}
