//! The net change of a run as files and hunks, computed from git blobs with `similar`.
//!
//! Lines are byte slices including their line ends, so reconstructing a file from the
//! diff is byte-exact (CRLF, missing final newline and non-UTF-8 text included).

use std::collections::BTreeSet;

use serde::{Deserialize, Serialize};
use similar::{Algorithm, DiffOp, capture_diff_slices};
use trellis_protocol::RunId;

use crate::error::{Error, Result};
use crate::fsutil::is_binary;
use crate::git::Git;

/// Lines of context shown around a change; changes closer than twice this share a hunk.
pub const CONTEXT: usize = 3;

/// How a file changed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum FileStatus {
    /// New file.
    Added,
    /// Removed file.
    Deleted,
    /// Changed contents or mode.
    Modified,
}

/// A line of a hunk.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum LineKind {
    /// Unchanged context.
    Context,
    /// Removed.
    Removed,
    /// Added.
    Added,
}

/// One displayed line.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct HunkLine {
    /// Context, removed or added.
    pub kind: LineKind,
    /// The text (lossy UTF-8, without the line end).
    pub text: String,
}

/// A group of nearby changes, approved or rejected as one.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Hunk {
    /// Index within the file.
    pub index: usize,
    /// First old line shown (1-based).
    pub old_start: usize,
    /// Old lines shown.
    pub old_lines: usize,
    /// First new line shown (1-based).
    pub new_start: usize,
    /// New lines shown.
    pub new_lines: usize,
    /// The lines.
    pub lines: Vec<HunkLine>,
    /// Indices of the file's diff ops this hunk changes.
    #[serde(skip)]
    pub(crate) ops: Vec<usize>,
}

/// One changed file.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct FileChange {
    /// Path relative to the repository root.
    pub path: String,
    /// Added, deleted or modified.
    pub status: FileStatus,
    /// Old mode (`0o100644`, `0o100755`, `0o120000` for symlinks).
    pub old_mode: Option<u32>,
    /// New mode.
    pub new_mode: Option<u32>,
    /// Whether either side is binary (then the file is all-or-nothing).
    pub binary: bool,
    /// Lines added.
    pub additions: usize,
    /// Lines removed.
    pub deletions: usize,
    /// The hunks (one pseudo-hunk for added, deleted and binary files; none for a mode-only
    /// change).
    pub hunks: Vec<Hunk>,
    /// Old contents.
    #[serde(skip)]
    pub old: Option<Vec<u8>>,
    /// New contents.
    #[serde(skip)]
    pub new: Option<Vec<u8>>,
    #[serde(skip)]
    pub(crate) diff: Vec<DiffOp>,
}

/// A run's net change. Serialised, it carries what a reviewer sees (paths, modes, hunks and
/// their lines); a deserialised one is such a view: file contents and diff ops are left out,
/// so it can be shown and selected from, not applied.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ChangeSet {
    /// The run.
    pub run: RunId,
    /// The base commit.
    pub base: String,
    /// The branch tip.
    pub head: String,
    /// Changed files, by path.
    pub files: Vec<FileChange>,
}

impl ChangeSet {
    /// The change as plain text for a reader without colours (a model): a summary line,
    /// then per file a header and its hunks, each line with its number in the new version
    /// (removed lines have none), so comments can name `path` and `line`.
    pub fn to_text(&self) -> String {
        use std::fmt::Write as _;
        let (adds, dels) = self
            .files
            .iter()
            .fold((0, 0), |(a, d), f| (a + f.additions, d + f.deletions));
        let short = |c: &str| c.get(..12).unwrap_or(c).to_owned();
        let mut s = format!(
            "{} file(s) changed, +{adds} -{dels} ({}..{})\n",
            self.files.len(),
            short(&self.base),
            short(&self.head)
        );
        for f in &self.files {
            let status = match f.status {
                FileStatus::Added => "added",
                FileStatus::Deleted => "deleted",
                FileStatus::Modified => "modified",
            };
            let _ = write!(
                s,
                "\n── {} ({status}, +{} -{})\n",
                f.path, f.additions, f.deletions
            );
            if let (Some(o), Some(n)) = (f.old_mode, f.new_mode)
                && o != n
            {
                let _ = writeln!(s, "mode {o:o} → {n:o}");
            }
            for h in &f.hunks {
                let _ = writeln!(
                    s,
                    "@@ -{},{} +{},{} @@ (hunk {})",
                    h.old_start, h.old_lines, h.new_start, h.new_lines, h.index
                );
                let mut line = h.new_start;
                for l in &h.lines {
                    match l.kind {
                        LineKind::Removed => {
                            let _ = writeln!(s, "      -{}", l.text);
                        }
                        LineKind::Added | LineKind::Context if f.binary => {
                            let _ = writeln!(s, "       {}", l.text);
                        }
                        kind => {
                            let sign = if kind == LineKind::Added { '+' } else { ' ' };
                            let _ = writeln!(s, "{line:>5} {sign}{}", l.text);
                            line += 1;
                        }
                    }
                }
            }
        }
        s
    }
}

/// Splits bytes into lines that keep their `\n`.
pub fn split_lines(bytes: &[u8]) -> Vec<&[u8]> {
    bytes.split_inclusive(|b| *b == b'\n').collect()
}

fn show(line: &[u8]) -> String {
    let l = line.strip_suffix(b"\n").unwrap_or(line);
    let l = l.strip_suffix(b"\r").unwrap_or(l);
    String::from_utf8_lossy(l).into_owned()
}

/// The net change between `base` and `head` in the repository at `repo`.
pub fn load(repo: &Git, run: &RunId, base: &str, head: &str) -> Result<ChangeSet> {
    let raw = repo.run(&[
        "diff-tree",
        "-r",
        "-z",
        "--no-renames",
        "--no-commit-id",
        base,
        head,
    ])?;
    let mut files = Vec::new();
    let mut fields = raw.split(|b| *b == 0).filter(|f| !f.is_empty());
    while let (Some(meta), Some(path)) = (fields.next(), fields.next()) {
        let meta = String::from_utf8_lossy(meta);
        let parts: Vec<&str> = meta.trim_start_matches(':').split(' ').collect();
        let [old_mode, new_mode, old_oid, new_oid, status] = parts.as_slice() else {
            return Err(Error::Failed(format!(
                "unexpected git diff-tree output `{meta}`"
            )));
        };
        let path = String::from_utf8_lossy(path).into_owned();
        let mode = |m: &str| u32::from_str_radix(m, 8).ok().filter(|m| *m != 0);
        let blob = |oid: &str, m: Option<u32>| -> Result<Option<Vec<u8>>> {
            match m {
                // Submodules (160000) have no blob.
                Some(0o160000) => Ok(Some(format!("Subproject commit {oid}\n").into_bytes())),
                Some(_) => repo.blob(oid).map(Some),
                None => Ok(None),
            }
        };
        let (old_mode, new_mode) = (mode(old_mode), mode(new_mode));
        let old = blob(old_oid, old_mode)?;
        let new = blob(new_oid, new_mode)?;
        let status = match status.chars().next() {
            Some('A') => FileStatus::Added,
            Some('D') => FileStatus::Deleted,
            _ => FileStatus::Modified,
        };
        files.push(file_change(path, status, old_mode, new_mode, old, new));
    }
    files.sort_by(|a, b| a.path.cmp(&b.path));
    Ok(ChangeSet {
        run: run.clone(),
        base: base.to_owned(),
        head: head.to_owned(),
        files,
    })
}

/// Builds a [`FileChange`] with its hunks.
pub fn file_change(
    path: String,
    status: FileStatus,
    old_mode: Option<u32>,
    new_mode: Option<u32>,
    old: Option<Vec<u8>>,
    new: Option<Vec<u8>>,
) -> FileChange {
    let binary = old.as_deref().is_some_and(is_binary)
        || new.as_deref().is_some_and(is_binary)
        || old_mode == Some(0o120000)
        || new_mode == Some(0o120000);
    let empty: &[u8] = &[];
    let old_lines = split_lines(old.as_deref().unwrap_or(empty));
    let new_lines = split_lines(new.as_deref().unwrap_or(empty));
    let diff = if binary {
        Vec::new()
    } else {
        capture_diff_slices(Algorithm::Myers, &old_lines, &new_lines)
    };
    let mut additions = 0;
    let mut deletions = 0;
    for op in &diff {
        let (_, o, n) = op.as_tag_tuple();
        if !matches!(op, DiffOp::Equal { .. }) {
            deletions += o.len();
            additions += n.len();
        }
    }
    let hunks = if binary {
        vec![Hunk {
            index: 0,
            old_start: 1,
            old_lines: 0,
            new_start: 1,
            new_lines: 0,
            lines: vec![HunkLine {
                kind: LineKind::Context,
                text: format!(
                    "binary file: {} → {} bytes",
                    old.as_ref().map_or(0, Vec::len),
                    new.as_ref().map_or(0, Vec::len)
                ),
            }],
            ops: Vec::new(),
        }]
    } else {
        group(&diff, &old_lines, &new_lines)
    };
    FileChange {
        path,
        status,
        old_mode,
        new_mode,
        binary,
        additions,
        deletions,
        hunks,
        old,
        new,
        diff,
    }
}

/// Groups the change ops into hunks with [`CONTEXT`] lines around them.
fn group(diff: &[DiffOp], old: &[&[u8]], new: &[&[u8]]) -> Vec<Hunk> {
    let changes: Vec<usize> = diff
        .iter()
        .enumerate()
        .filter(|(_, op)| !matches!(op, DiffOp::Equal { .. }))
        .map(|(i, _)| i)
        .collect();
    // Split where the equal run between two changes is longer than 2 * CONTEXT.
    let mut groups: Vec<Vec<usize>> = Vec::new();
    for &c in &changes {
        let split = match groups.last().and_then(|g| g.last()) {
            None => true,
            Some(&prev) => {
                let gap: usize = diff
                    .get(prev + 1..c)
                    .unwrap_or_default()
                    .iter()
                    .map(|op| op.old_range().len())
                    .sum();
                gap > 2 * CONTEXT
            }
        };
        if split {
            groups.push(vec![c]);
        } else if let Some(g) = groups.last_mut() {
            g.push(c);
        }
    }
    groups
        .into_iter()
        .enumerate()
        .map(|(index, ops)| {
            let first = ops.first().and_then(|i| diff.get(*i));
            let last = ops.last().and_then(|i| diff.get(*i));
            let (Some(first), Some(last)) = (first, last) else {
                return Hunk {
                    index,
                    old_start: 0,
                    old_lines: 0,
                    new_start: 0,
                    new_lines: 0,
                    lines: Vec::new(),
                    ops,
                };
            };
            let old_from = first.old_range().start.saturating_sub(CONTEXT);
            let old_to = (last.old_range().end + CONTEXT).min(old.len());
            let new_from = first.new_range().start.saturating_sub(CONTEXT);
            let new_to = (last.new_range().end + CONTEXT).min(new.len());
            let mut lines = Vec::new();
            let mut o = old_from;
            let mut n = new_from;
            let set: BTreeSet<usize> = ops.iter().copied().collect();
            let first_i = *ops.first().unwrap_or(&0);
            let last_i = *ops.last().unwrap_or(&0);
            // Leading context.
            while o < first.old_range().start {
                lines.push(HunkLine {
                    kind: LineKind::Context,
                    text: show(old.get(o).copied().unwrap_or_default()),
                });
                o += 1;
                n += 1;
            }
            for (i, op) in diff.iter().enumerate().take(last_i + 1).skip(first_i) {
                if set.contains(&i) {
                    for l in op.old_range() {
                        lines.push(HunkLine {
                            kind: LineKind::Removed,
                            text: show(old.get(l).copied().unwrap_or_default()),
                        });
                    }
                    for l in op.new_range() {
                        lines.push(HunkLine {
                            kind: LineKind::Added,
                            text: show(new.get(l).copied().unwrap_or_default()),
                        });
                    }
                } else {
                    for l in op.old_range() {
                        lines.push(HunkLine {
                            kind: LineKind::Context,
                            text: show(old.get(l).copied().unwrap_or_default()),
                        });
                    }
                }
                o = op.old_range().end;
                n = op.new_range().end;
            }
            while o < old_to {
                lines.push(HunkLine {
                    kind: LineKind::Context,
                    text: show(old.get(o).copied().unwrap_or_default()),
                });
                o += 1;
                n += 1;
            }
            let _ = n;
            Hunk {
                index,
                old_start: old_from + 1,
                old_lines: old_to - old_from,
                new_start: new_from + 1,
                new_lines: new_to - new_from,
                lines,
                ops,
            }
        })
        .collect()
}

impl FileChange {
    /// The contents of the file with only the hunks in `approved` applied to the old
    /// side: `None` means the file does not exist. Binary, added and deleted files are
    /// all-or-nothing (any approved hunk counts as all).
    pub fn with_hunks(&self, approved: &BTreeSet<usize>) -> Option<Vec<u8>> {
        if approved.is_empty() {
            return self.old.clone();
        }
        if self.binary || self.status != FileStatus::Modified || approved.len() >= self.hunks.len()
        {
            return self.new.clone();
        }
        let empty: &[u8] = &[];
        let old = split_lines(self.old.as_deref().unwrap_or(empty));
        let new = split_lines(self.new.as_deref().unwrap_or(empty));
        let take: BTreeSet<usize> = self
            .hunks
            .iter()
            .filter(|h| approved.contains(&h.index))
            .flat_map(|h| h.ops.iter().copied())
            .collect();
        let mut out = Vec::new();
        for (i, op) in self.diff.iter().enumerate() {
            let lines: Vec<&[u8]> = if take.contains(&i) {
                op.new_range().filter_map(|l| new.get(l).copied()).collect()
            } else {
                op.old_range().filter_map(|l| old.get(l).copied()).collect()
            };
            for l in lines {
                out.extend_from_slice(l);
            }
        }
        Some(out)
    }

    /// The file's mode after applying with some hunks approved.
    pub fn mode_with(&self, approved: bool) -> Option<u32> {
        if approved {
            self.new_mode
        } else {
            self.old_mode
        }
    }
}
