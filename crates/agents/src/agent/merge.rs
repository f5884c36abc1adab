//! A block whose SEARCH part is not quite the file's lines, merged into them.
//!
//! A small model copying twenty lines drops a blank line or retypes a comment, and its REPLACE
//! part repeats the slip: the block is found nowhere and its change is lost (the most common
//! refusal in the fixer's answers, docs/eval.md). Here the block's first and last lines
//! (whitespace aside) bound a region of the file of about its length whose lines mostly agree
//! with it, and the change the block makes — SEARCH to REPLACE — is merged into that region
//! three-way (`diffy::merge`, the SEARCH part as the common ancestor): a line the model
//! miscopied but did not change keeps the file's text, and a change to a line it miscopied is a
//! conflict, so the block is refused as before.

use similar::{Algorithm, DiffTag, capture_diff_slices};

use super::indent::{indent, reindent};

/// Fewest lines a SEARCH part needs to be merged; a shorter one must be found as written.
const MIN_LINES: usize = 3;
/// Share of lines (whitespace aside, in order) a region must have in common with the SEARCH
/// part, of the longer of the two.
const MIN_AGREEMENT: f32 = 0.7;
/// Most (first line, last line) pairs of the file tried: a block bounded by lines that occur
/// everywhere (`}`, `return x`) is not merged.
const MAX_PAIRS: usize = 256;

/// Where a block's change goes and what the region becomes.
#[derive(Debug)]
pub(super) struct Merged {
    /// The region's first line (0-based).
    pub start: usize,
    /// One past its last line.
    pub end: usize,
    /// The region's lines with the block's change merged in.
    pub new: String,
}

/// Merges the change `wanted` → `replace` into the one region of `file` that `wanted` (the
/// SEARCH part's lines, blank ends trimmed) was most likely copied from; `None` when there is
/// no such region, more than one, or the change conflicts with the differences.
pub(super) fn merge(file: &[&str], wanted: &[&str], replace: &str) -> Option<Merged> {
    let (first, last) = (wanted.first()?.trim(), wanted.last()?.trim());
    if wanted.len() < MIN_LINES || first.is_empty() || last.is_empty() {
        return None;
    }
    let starts: Vec<usize> = (0..file.len())
        .filter(|&i| file[i].trim() == first)
        .collect();
    let ends: Vec<usize> = (0..file.len())
        .filter(|&j| file[j].trim() == last)
        .collect();
    if starts.len() * ends.len() > MAX_PAIRS {
        return None;
    }
    let shape: Vec<&str> = wanted.iter().map(|l| l.trim()).collect();
    let longest = wanted.len() * 3 / 2 + 3;
    let mut best: Option<(f32, usize, usize)> = None;
    let mut tied = false;
    for &i in &starts {
        for &j in ends.iter().filter(|&&j| j > i && j - i < longest) {
            let region: Vec<&str> = file[i..=j].iter().map(|l| l.trim()).collect();
            if region.len() * 2 < wanted.len() {
                continue;
            }
            let same: usize = capture_diff_slices(Algorithm::Myers, &shape, &region)
                .iter()
                .filter(|op| op.tag() == DiffTag::Equal)
                .map(|op| op.old_range().len())
                .sum();
            let agreement = same as f32 / wanted.len().max(region.len()) as f32;
            match best {
                Some((b, _, _)) if agreement < b => {}
                Some((b, _, _)) if agreement == b => tied = true,
                _ => {
                    best = Some((agreement, i, j));
                    tied = false;
                }
            }
        }
    }
    let (agreement, start, last) = best?;
    if tied || agreement < MIN_AGREEMENT {
        return None;
    }
    // The model's indentation, moved to the file's (as for a block found whitespace aside).
    let (from, to) = (indent(wanted[0]), indent(file[start]));
    let ancestor = reindent(&wanted.join("\n"), from, to);
    let theirs = reindent(replace.trim_end_matches('\n'), from, to);
    let ours = file[start..=last].join("\n");
    let merged = diffy::merge(
        &format!("{ancestor}\n"),
        &format!("{ours}\n"),
        &format!("{theirs}\n"),
    )
    .ok()?;
    let new = merged.strip_suffix('\n').unwrap_or(&merged).to_owned();
    (new != ours).then_some(Merged {
        start,
        end: last + 1,
        new,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const FILE: &str = "import os\n\ndef total(items):\n    # Sum the prices of the items.\n    \
                        s = 0\n\n    for it in items:\n        s += it.price\n    return s\n\n\
                        def other():\n    return 1\n";

    fn run(search: &str, replace: &str) -> Option<String> {
        let file: Vec<&str> = FILE.split('\n').collect();
        let wanted: Vec<&str> = search.split('\n').collect();
        let m = merge(&file, &wanted, replace)?;
        let mut out: Vec<String> = file[..m.start].iter().map(|l| l.to_string()).collect();
        out.push(m.new);
        out.extend(file[m.end..].iter().map(|l| l.to_string()));
        Some(out.join("\n"))
    }

    #[test]
    fn a_miscopied_line_the_block_does_not_change_keeps_the_file_text() {
        // The comment is retyped and the blank line dropped, in SEARCH and REPLACE alike.
        let search = "def total(items):\n    # Sum the item prices.\n    s = 0\n    \
                      for it in items:\n        s += it.price\n    return s";
        let replace = "def total(items):\n    # Sum the item prices.\n    s = 0\n    \
                       for it in items:\n        s += it.price * it.count\n    return s";
        let out = run(search, replace).expect("merged");
        assert!(out.contains("    # Sum the prices of the items.\n    s = 0\n\n    for"));
        assert!(out.contains("s += it.price * it.count\n    return s\n\ndef other"));
    }

    #[test]
    fn a_change_to_a_miscopied_line_is_a_conflict() {
        let search = "def total(items):\n    # Sum the item prices.\n    s = 0\n    \
                      for it in items:\n        s += it.price\n    return s";
        let replace = "def total(items):\n    # Sum the prices, with counts.\n    s = 0\n    \
                       for it in items:\n        s += it.price\n    return s";
        assert_eq!(run(search, replace), None);
    }

    #[test]
    fn a_region_that_mostly_differs_is_not_merged() {
        let search = "def total(items):\n    x = 1\n    y = 2\n    z = 3\n    return s";
        let replace = "def total(items):\n    return 0";
        assert_eq!(run(search, replace), None);
    }

    #[test]
    fn a_block_written_at_another_indentation_is_moved_to_the_file() {
        // Dedented by four spaces, and the blank line left out.
        let search = "s = 0\nfor it in items:\n    s += it.price\nreturn s";
        let replace = "s = 0\nfor it in items:\n    s += it.price\nreturn s or None";
        let out = run(search, replace).expect("merged");
        assert!(out.contains("    # Sum the prices of the items.\n    s = 0\n\n    for"));
        assert!(out.contains("        s += it.price\n    return s or None\n"));
        // Indented differently line by line: every line differs, the change conflicts.
        let search = "def total(items):\n  s = 0\n  for it in items:\n      s += it.price\n  \
                      return s";
        let replace = "def total(items):\n  s = 0\n  for it in items:\n      s += it.price\n  \
                       return s or None";
        assert_eq!(run(search, replace), None);
    }

    #[test]
    fn short_or_unbounded_blocks_are_left_to_the_exact_match() {
        assert_eq!(run("def total(items):\n    return s", "x"), None);
        assert_eq!(run("def nothing():\n    a\n    return s", "x"), None);
    }
}
