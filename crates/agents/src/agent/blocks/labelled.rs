//! Edits written without SEARCH/REPLACE markers, in forms small models use when they do
//! not write blocks (rare: 5 of 117 drawn answers without a block in the evaluation runs of
//! 2026-11-29, `fixtures/tasks/noblock.py`, `docs/eval.md`):
//!
//! - two fences, each after a line that labels it: "Search for:" / "Replace with:",
//!   "**SEARCH**:" / "**REPLACE**:", "Original code:" / "Modified code:", "Before:" /
//!   "After:" …;
//! - one fence whose comment lines label its parts: `# Original code` … `# Modified code`.
//!
//! Read as [`Block`]s, they are matched against the files exactly as blocks are. A pair is
//! taken only when both labels are among the words below, so two fences of ordinary code
//! ("Here is the function:", "And its test:") are never read as an edit.

use super::super::defs::{Fenced, fenced};
use super::{Block, path_in, trim_blank_ends};

/// Labels of the code being replaced.
const OLD: &[&str] = &[
    "search",
    "search for",
    "find",
    "original",
    "original code",
    "before",
    "old",
    "old code",
    "current",
    "current code",
    "existing code",
    "replace",
    "change",
    "change from",
    "from",
];

/// Labels of the code that replaces it.
const NEW: &[&str] = &[
    "replace",
    "replace with",
    "with",
    "after",
    "new",
    "new code",
    "modified",
    "modified code",
    "updated",
    "updated code",
    "fixed",
    "fixed code",
    "corrected",
    "corrected code",
    "change to",
    "to",
];

/// `line` as a label: lower case, without emphasis, heading marks, a list marker and the
/// colon after it; `None` unless it is written as a label (it ends with a colon, or it is a
/// heading or bold) and is short.
fn label(line: &str) -> Option<String> {
    let t = line.trim();
    let marked = t.ends_with(':') || t.starts_with('#') || t.starts_with("**");
    if !marked || t.len() > 80 {
        return None;
    }
    let t = t
        .trim_start_matches(|c: char| c == '#' || c == '-' || c.is_ascii_digit() || c == '.')
        .replace(['*', '_', '`'], "");
    let t = t.trim().trim_end_matches(':').trim().to_ascii_lowercase();
    (!t.is_empty()).then_some(t)
}

/// Whether `label` is one of `words`, or ends with one after a comma or a space ("In
/// `a.py`, search for").
fn names(label: &str, words: &[&str]) -> bool {
    words.iter().any(|w| {
        label == *w
            || label
                .strip_suffix(*w)
                .is_some_and(|head| head.ends_with(' ') || head.ends_with(','))
    })
}

/// The nearest non-empty line above line `at` that is not a fence, within three lines.
fn label_above<'t>(lines: &[&'t str], at: usize) -> Option<(usize, &'t str)> {
    (at.saturating_sub(3)..at)
        .rev()
        .map(|i| (i, lines[i]))
        .find(|(_, l)| !l.trim().is_empty())
        .filter(|(_, l)| !l.trim_start().starts_with("```"))
}

/// The file named on the label line or on one of the three lines above it.
fn path_near(lines: &[&str], label_line: usize) -> Option<String> {
    (label_line.saturating_sub(3)..=label_line)
        .rev()
        .find_map(|i| path_in(lines[i]))
}

/// `body` joined, without blank lines at either end.
fn joined(body: &[&str]) -> String {
    let (start, end) = trim_blank_ends(body);
    body[start..end].join("\n")
}

/// Two consecutive fences labelled old then new.
fn pairs(lines: &[&str], fences: &[Fenced<'_>]) -> Vec<Block> {
    let mut out = Vec::new();
    let mut i = 0;
    while i + 1 < fences.len() {
        let (a, b) = (&fences[i], &fences[i + 1]);
        let old = label_above(lines, a.open).and_then(|(at, l)| Some((at, label(l)?)));
        let new = label_above(lines, b.open).and_then(|(_, l)| label(l));
        match (old, new) {
            (Some((at, old)), Some(new))
                if names(&old, OLD) && names(&new, NEW) && old != new && !a.body.is_empty() =>
            {
                out.push(Block {
                    path: path_near(lines, at),
                    search: joined(&a.body),
                    replace: joined(&b.body),
                });
                i += 2;
            }
            _ => i += 1,
        }
    }
    out
}

/// A comment line's words, lower case, when `line` is a comment (`#`, `//`, `--`).
fn comment(line: &str) -> Option<String> {
    let t = line.trim();
    let words = t
        .strip_prefix("//")
        .or_else(|| t.strip_prefix('#'))
        .or_else(|| t.strip_prefix("--"))?;
    Some(
        words
            .trim()
            .trim_end_matches(':')
            .trim()
            .to_ascii_lowercase(),
    )
}

/// Comments that label the old part inside one fence (the whole comment, so an ordinary
/// comment such as `# before the loop` is not taken for a label).
const OLD_COMMENT: &[&str] = &[
    "original",
    "original code",
    "before",
    "old code",
    "current code",
];

/// Comments that label the new part inside one fence.
const NEW_COMMENT: &[&str] = &[
    "modified",
    "modified code",
    "after",
    "new code",
    "fixed code",
    "updated code",
    "corrected code",
];

/// One fence whose comments label its old and new parts.
fn commented(lines: &[&str], fence: &Fenced<'_>) -> Option<Block> {
    let body = &fence.body;
    let is =
        |words: &[&str], line: &str| comment(line).is_some_and(|c| words.contains(&c.as_str()));
    let old = body.iter().position(|l| is(OLD_COMMENT, l))?;
    let new = (old + 1..body.len()).find(|&j| is(NEW_COMMENT, body[j]))?;
    let search = joined(&body[old + 1..new]);
    if search.is_empty() {
        return None;
    }
    Some(Block {
        path: path_near(lines, fence.open.saturating_sub(1)),
        search,
        replace: joined(&body[new + 1..]),
    })
}

/// The edits of an answer written without markers (none when it has no such form).
pub(super) fn parse(text: &str) -> Vec<Block> {
    let lines: Vec<&str> = text.lines().collect();
    let fences = fenced(&lines);
    let paired = pairs(&lines, &fences);
    if !paired.is_empty() {
        return paired;
    }
    fences.iter().filter_map(|f| commented(&lines, f)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn block(path: Option<&str>, search: &str, replace: &str) -> Block {
        Block {
            path: path.map(str::to_owned),
            search: search.into(),
            replace: replace.into(),
        }
    }

    #[test]
    fn two_fences_labelled_search_and_replace_are_a_block() {
        let t = "Compare case-insensitively.\n\nSearch for:\n```python\nif v == 'AS':\n    x = 1\n```\n\nReplace with:\n```python\nif v.upper() == 'AS':\n    x = 1\n```\nDone.";
        assert_eq!(
            parse(t),
            vec![block(
                None,
                "if v == 'AS':\n    x = 1",
                "if v.upper() == 'AS':\n    x = 1"
            )]
        );
    }

    #[test]
    fn bold_labels_and_a_file_named_above_them() {
        let t = "In `src/click/core.py`:\n**SEARCH**:\n```py\na = 1\n```\n**REPLACE**:\n```py\na = 2\n```";
        assert_eq!(
            parse(t),
            vec![block(Some("src/click/core.py"), "a = 1", "a = 2")]
        );
        let t = "### Original code\n```\nold()\n```\n### Modified code\n```\nnew()\n```";
        assert_eq!(parse(t), vec![block(None, "old()", "new()")]);
    }

    #[test]
    fn one_fence_with_original_and_modified_comments_is_a_block() {
        let t = "Change:\n```python\n# Original code:\ndef f(x):\n    return x\n\n# Modified code:\ndef f(x):\n    return x + 1\n```";
        assert_eq!(
            parse(t),
            vec![block(
                None,
                "def f(x):\n    return x",
                "def f(x):\n    return x + 1"
            )]
        );
    }

    #[test]
    fn ordinary_fences_and_reversed_or_open_forms_are_no_edit() {
        // Two pieces of code, not labelled as an edit.
        let t = "Here is the function:\n```\nf()\n```\nAnd its test:\n```\ntest_f()\n```";
        assert!(parse(t).is_empty());
        // The new code first: which one replaces which is not said the usual way.
        let t = "Change to:\n```\nnew()\n```\nReplace:\n```\nold()\n```";
        assert!(parse(t).is_empty());
        // The second fence is cut (the answer ran out of tokens).
        let t = "Search for:\n```\nold()\n```\nReplace with:\n```\nnew(";
        assert!(parse(t).is_empty());
        // A label inside a sentence is not a label.
        let t = "We search for the line below and replace it with the fixed one\n```\na\n```\nthen\n```\nb\n```";
        assert!(parse(t).is_empty());
    }
}
