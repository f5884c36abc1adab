//! `apply_patch`: unified diffs, applied exactly (no fuzz), all files or none.
//!
//! A hunk applies where its header says, or — if the file moved under it — at the one
//! other place where its context and removed lines occur exactly. Anything else is
//! rejected with a report naming the file, the hunk and the lines that differ.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::files::resolve_gated;
use crate::context::ToolContext;
use crate::error::{Error, Result};
use crate::fsutil::{FileWrite, commit_all};
use crate::tool::TypedTool;

/// One hunk of a parsed patch.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PatchHunk {
    /// The `@@ … @@` header.
    pub header: String,
    /// First old line (1-based; for a pure insertion the line after which to insert).
    pub old_start: usize,
    /// Lines the hunk expects (context and removed), with line ends.
    pub old: Vec<String>,
    /// Lines it leaves (context and added), with line ends.
    pub new: Vec<String>,
}

/// One file of a parsed patch.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PatchFile {
    /// Old path (`None` for a new file).
    pub old_path: Option<String>,
    /// New path (`None` for a deletion).
    pub new_path: Option<String>,
    /// The hunks in order.
    pub hunks: Vec<PatchHunk>,
}

fn strip_prefix(p: &str) -> Option<String> {
    let p = p.split('\t').next().unwrap_or(p).trim_end();
    if p == "/dev/null" {
        return None;
    }
    Some(
        p.strip_prefix("a/")
            .or_else(|| p.strip_prefix("b/"))
            .unwrap_or(p)
            .to_owned(),
    )
}

fn parse_range(s: &str) -> Option<(usize, usize)> {
    let s = s.get(1..)?;
    match s.split_once(',') {
        Some((a, b)) => Some((a.parse().ok()?, b.parse().ok()?)),
        None => Some((s.parse().ok()?, 1)),
    }
}

/// Parses a unified diff (`git diff` or `diff -u` output).
pub fn parse_patch(text: &str) -> Result<Vec<PatchFile>> {
    let bad = |msg: String| Error::Failed(format!("malformed patch: {msg}"));
    let lines: Vec<&str> = text.lines().collect();
    let mut files = Vec::new();
    let mut i = 0;
    while i < lines.len() {
        let line = lines.get(i).copied().unwrap_or("");
        let Some(old) = line.strip_prefix("--- ") else {
            i += 1;
            continue;
        };
        let Some(new) = lines.get(i + 1).and_then(|l| l.strip_prefix("+++ ")) else {
            return Err(bad(format!(
                "line {}: `---` without a following `+++`",
                i + 1
            )));
        };
        let mut file = PatchFile {
            old_path: strip_prefix(old),
            new_path: strip_prefix(new),
            hunks: Vec::new(),
        };
        i += 2;
        while let Some(h) = lines.get(i).and_then(|l| l.strip_prefix("@@ ")) {
            let header = format!("@@ {h}");
            let mut parts = h.split_whitespace();
            let (old_start, old_count) = parts
                .next()
                .and_then(parse_range)
                .ok_or_else(|| bad(format!("line {}: bad hunk header `{header}`", i + 1)))?;
            let (_, new_count) = parts
                .next()
                .and_then(parse_range)
                .ok_or_else(|| bad(format!("line {}: bad hunk header `{header}`", i + 1)))?;
            i += 1;
            let mut hunk = PatchHunk {
                header,
                old_start,
                old: Vec::new(),
                new: Vec::new(),
            };
            let (mut seen_old, mut seen_new) = (0, 0);
            while seen_old < old_count || seen_new < new_count {
                let Some(l) = lines.get(i) else {
                    return Err(bad(format!(
                        "hunk `{}` of {} ends early (expected {old_count} old and {new_count} new lines)",
                        hunk.header,
                        file.new_path
                            .as_deref()
                            .or(file.old_path.as_deref())
                            .unwrap_or("?")
                    )));
                };
                let (tag, body) = match l.chars().next() {
                    Some(c @ (' ' | '-' | '+')) => (c, l.get(1..).unwrap_or("")),
                    None => (' ', ""),
                    Some('\\') => {
                        i += 1;
                        continue;
                    }
                    Some(_) => {
                        return Err(bad(format!(
                            "line {}: unexpected `{l}` inside a hunk",
                            i + 1
                        )));
                    }
                };
                let no_eol = lines.get(i + 1).is_some_and(|n| n.starts_with('\\'));
                let full = if no_eol {
                    body.to_owned()
                } else {
                    format!("{body}\n")
                };
                match tag {
                    ' ' => {
                        hunk.old.push(full.clone());
                        hunk.new.push(full);
                        seen_old += 1;
                        seen_new += 1;
                    }
                    '-' => {
                        hunk.old.push(full);
                        seen_old += 1;
                    }
                    _ => {
                        hunk.new.push(full);
                        seen_new += 1;
                    }
                }
                i += 1;
            }
            if lines.get(i).is_some_and(|l| l.starts_with('\\')) {
                i += 1;
            }
            file.hunks.push(hunk);
        }
        if file.hunks.is_empty() {
            return Err(bad(format!(
                "no hunks for {}",
                file.new_path
                    .as_deref()
                    .or(file.old_path.as_deref())
                    .unwrap_or("?")
            )));
        }
        files.push(file);
    }
    if files.is_empty() {
        return Err(bad("no `--- a/…` / `+++ b/…` file headers found".into()));
    }
    Ok(files)
}

/// Applies `file`'s hunks to `text` (the current contents, `""` for a new file).
fn apply_hunks(text: &str, file: &PatchFile, name: &str) -> Result<String> {
    let mut lines: Vec<String> = text.split_inclusive('\n').map(str::to_owned).collect();
    let mut delta: isize = 0;
    let mut floor = 0usize;
    for (n, h) in file.hunks.iter().enumerate() {
        // For a pure insertion, old_start names the line after which to insert.
        let stated = if h.old.is_empty() {
            h.old_start
        } else {
            h.old_start.saturating_sub(1)
        };
        let expected = usize::try_from(stated as isize + delta).unwrap_or(0);
        let fits = |at: usize| {
            at >= floor
                && lines
                    .get(at..at + h.old.len())
                    .is_some_and(|s| s.iter().zip(&h.old).all(|(a, b)| a == b))
        };
        let at = if fits(expected) {
            expected
        } else {
            let found: Vec<usize> = (floor..=lines.len().saturating_sub(h.old.len()))
                .filter(|&at| fits(at))
                .collect();
            match found.as_slice() {
                [one] if !h.old.is_empty() => *one,
                _ => {
                    let shown: Vec<String> = lines
                        .get(expected..(expected + h.old.len()).min(lines.len()))
                        .unwrap_or_default()
                        .iter()
                        .map(|l| format!("    |{}", l.trim_end_matches('\n')))
                        .collect();
                    let wanted: Vec<String> = h
                        .old
                        .iter()
                        .map(|l| format!("    |{}", l.trim_end_matches('\n')))
                        .collect();
                    let why = if found.len() > 1 {
                        format!(
                            "its lines occur {} times and not at line {}",
                            found.len(),
                            expected + 1
                        )
                    } else {
                        format!(
                            "the file does not contain its lines at line {}",
                            expected + 1
                        )
                    };
                    return Err(Error::Failed(format!(
                        "patch rejected: {name} hunk {} `{}`: {why}.\n  expected:\n{}\n  found:\n{}\nNo file was changed; read the file and regenerate the patch.",
                        n + 1,
                        h.header,
                        wanted.join("\n"),
                        if shown.is_empty() {
                            "    (end of file)".into()
                        } else {
                            shown.join("\n")
                        }
                    )));
                }
            }
        };
        lines.splice(at..at + h.old.len(), h.new.iter().cloned());
        delta += h.new.len() as isize - h.old.len() as isize + (at as isize - expected as isize);
        floor = at + h.new.len();
    }
    Ok(lines.concat())
}

/// `apply_patch` arguments.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ApplyPatchInput {
    /// A unified diff (as `git diff` prints it), paths relative to the workspace root,
    /// optionally prefixed `a/` and `b/`. New files use `--- /dev/null`, deletions
    /// `+++ /dev/null`.
    pub patch: String,
}

/// `apply_patch` result.
#[derive(Debug, Serialize, JsonSchema)]
pub struct ApplyPatchOutput {
    /// Files changed, with what happened (`modified`, `created`, `deleted`).
    pub files: Vec<(String, String)>,
}

/// Applies a unified diff.
pub struct ApplyPatch;

impl TypedTool for ApplyPatch {
    type Input = ApplyPatchInput;
    type Output = ApplyPatchOutput;

    fn name(&self) -> &'static str {
        "apply_patch"
    }

    fn description(&self) -> &'static str {
        "Apply a unified diff to the workspace. Context and removed lines must match exactly \
         (no fuzz); if any hunk of any file does not apply, nothing is changed and the \
         rejection names the file, hunk and differing lines."
    }

    async fn run(&self, ctx: &ToolContext, input: ApplyPatchInput) -> Result<ApplyPatchOutput> {
        let files = parse_patch(&input.patch)?;
        let mut writes = Vec::new();
        let mut report = Vec::new();
        for f in &files {
            let name = f
                .new_path
                .as_deref()
                .or(f.old_path.as_deref())
                .unwrap_or("?");
            let target = resolve_gated(ctx, name, "patching").await?;
            let current = match &f.old_path {
                None => {
                    if target.abs.exists() {
                        return Err(Error::Failed(format!(
                            "patch rejected: {name} is a new file in the patch but already \
                             exists; no file was changed"
                        )));
                    }
                    String::new()
                }
                Some(old) => {
                    let src = ctx.workspace().resolve(old)?;
                    let bytes = tokio::fs::read(&src.abs)
                        .await
                        .map_err(Error::io("cannot read", &src.abs))?;
                    String::from_utf8(bytes)
                        .map_err(|_| Error::Failed(format!("`{old}` is not UTF-8 text")))?
                }
            };
            let next = apply_hunks(&current, f, name)?;
            match (&f.old_path, &f.new_path) {
                (_, None) => {
                    if !next.is_empty() {
                        return Err(Error::Failed(format!(
                            "patch rejected: deleting {name} but the patch does not remove all \
                             of its lines; no file was changed"
                        )));
                    }
                    writes.push(FileWrite {
                        path: target.abs,
                        content: None,
                    });
                    report.push((name.to_owned(), "deleted".to_owned()));
                }
                (old, Some(_)) => {
                    if let Some(old) = old.as_deref().filter(|o| *o != name) {
                        // A rename: remove the old path too.
                        writes.push(FileWrite {
                            path: ctx.workspace().resolve(old)?.abs,
                            content: None,
                        });
                    }
                    writes.push(FileWrite {
                        path: target.abs,
                        content: Some(next.into_bytes()),
                    });
                    let what = if old.is_none() { "created" } else { "modified" };
                    report.push((name.to_owned(), what.to_owned()));
                }
            }
        }
        commit_all(&writes)?;
        Ok(ApplyPatchOutput { files: report })
    }

    fn render(&self, o: &ApplyPatchOutput) -> String {
        o.files
            .iter()
            .map(|(f, what)| format!("{what} {f}"))
            .collect::<Vec<_>>()
            .join("\n")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn applies_and_rejects_exactly() {
        let patch = "--- a/f.txt\n+++ b/f.txt\n@@ -2,3 +2,3 @@\n b\n-c\n+C\n d\n";
        let files = parse_patch(patch).unwrap();
        let out = apply_hunks("a\nb\nc\nd\ne\n", &files[0], "f.txt").unwrap();
        assert_eq!(out, "a\nb\nC\nd\ne\n");
        // Shifted by one line: still unique, applies at the new place.
        let out = apply_hunks("z\na\nb\nc\nd\ne\n", &files[0], "f.txt").unwrap();
        assert_eq!(out, "z\na\nb\nC\nd\ne\n");
        // Context changed: rejected with a report.
        let err = apply_hunks("a\nb\nX\nd\n", &files[0], "f.txt").unwrap_err();
        assert!(err.to_string().contains("hunk 1"), "{err}");
    }

    #[test]
    fn new_file_and_missing_newline() {
        let patch =
            "--- /dev/null\n+++ b/n.txt\n@@ -0,0 +1,2 @@\n+x\n+y\n\\ No newline at end of file\n";
        let files = parse_patch(patch).unwrap();
        assert_eq!(files[0].old_path, None);
        assert_eq!(apply_hunks("", &files[0], "n.txt").unwrap(), "x\ny");
    }
}
