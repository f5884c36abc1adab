//! The 3-way check of an apply: the user's file may have moved on since the run's base;
//! the approved change goes on top of it unless both touched the same lines.

use similar::{Algorithm, DiffOp, capture_diff_slices};

use super::diff::split_lines;
use crate::fsutil::is_binary;

/// One replacement of base lines `start..end` by `lines`.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Edit<'a> {
    start: usize,
    end: usize,
    lines: Vec<&'a [u8]>,
}

fn edits<'a>(base: &[&'a [u8]], other: &[&'a [u8]]) -> Vec<Edit<'a>> {
    capture_diff_slices(Algorithm::Myers, base, other)
        .into_iter()
        .filter(|op| !matches!(op, DiffOp::Equal { .. }))
        .map(|op| Edit {
            start: op.old_range().start,
            end: op.old_range().end,
            lines: op
                .new_range()
                .filter_map(|i| other.get(i).copied())
                .collect(),
        })
        .collect()
}

/// A region where the user and the approved change both edited.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Overlap {
    /// Base lines the user changed (1-based, inclusive; an insertion is `n..n-1`).
    pub user: (usize, usize),
    /// Base lines the approved change edits.
    pub ours: (usize, usize),
}

/// The merge of three versions of a file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Merged {
    /// The merged contents.
    Clean(Vec<u8>),
    /// Delete the file (the user had not changed it).
    Delete,
    /// The user's version already equals the target.
    AlreadyThere,
    /// Both sides edited the same lines.
    Conflict(Vec<Overlap>),
    /// A binary file (or a file created/deleted on one side) changed on both sides.
    Incompatible,
}

/// Merges `target` (the base with the approved change) into `current` (the user's file
/// now), both descending from `base`. `None` means the file does not exist.
pub fn merge(base: Option<&[u8]>, current: Option<&[u8]>, target: Option<&[u8]>) -> Merged {
    if current == target {
        return Merged::AlreadyThere;
    }
    if current == base {
        return match target {
            Some(t) => Merged::Clean(t.to_vec()),
            None => Merged::Delete,
        };
    }
    let (Some(base), Some(current), Some(target)) = (base, current, target) else {
        return Merged::Incompatible;
    };
    if is_binary(base) || is_binary(current) || is_binary(target) {
        return Merged::Incompatible;
    }
    let b = split_lines(base);
    let c = split_lines(current);
    let t = split_lines(target);
    let theirs = edits(&b, &c);
    let ours = edits(&b, &t);
    let mut overlaps = Vec::new();
    for o in &ours {
        for u in &theirs {
            // Touching or overlapping regions conflict (as in git), unless identical.
            let touches = o.start <= u.end && u.start <= o.end;
            if touches && o != u {
                overlaps.push(Overlap {
                    user: (u.start + 1, u.end),
                    ours: (o.start + 1, o.end),
                });
            }
        }
    }
    if !overlaps.is_empty() {
        return Merged::Conflict(overlaps);
    }
    let mut all: Vec<&Edit<'_>> = ours.iter().chain(theirs.iter()).collect();
    all.sort_by_key(|e| (e.start, e.end));
    all.dedup();
    let mut out = Vec::with_capacity(current.len() + target.len());
    let mut at = 0;
    for e in all {
        for l in b.get(at..e.start).unwrap_or_default() {
            out.extend_from_slice(l);
        }
        for l in &e.lines {
            out.extend_from_slice(l);
        }
        at = e.end;
    }
    for l in b.get(at..).unwrap_or_default() {
        out.extend_from_slice(l);
    }
    Merged::Clean(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn disjoint_edits_merge_and_overlaps_conflict() {
        let base = b"1\n2\n3\n4\n5\n6\n7\n8\n9\n";
        let user = b"1\nTWO\n3\n4\n5\n6\n7\n8\n9\n";
        let ours = b"1\n2\n3\n4\n5\n6\n7\nEIGHT\n9\n";
        assert_eq!(
            merge(Some(base), Some(user), Some(ours)),
            Merged::Clean(b"1\nTWO\n3\n4\n5\n6\n7\nEIGHT\n9\n".to_vec())
        );
        let ours2 = b"1\n2x\n3\n4\n5\n6\n7\n8\n9\n";
        assert!(matches!(
            merge(Some(base), Some(user), Some(ours2)),
            Merged::Conflict(_)
        ));
        assert_eq!(
            merge(Some(base), Some(ours), Some(ours)),
            Merged::AlreadyThere
        );
        assert_eq!(merge(Some(base), None, Some(ours)), Merged::Incompatible);
    }
}
