//! The rules of `discovery.md`, `plan.md` and `spec.md`, kept minimal on purpose: the text is
//! not empty and has at least one ATX heading (`#` … `######` followed by a space) outside
//! fenced code blocks. Anything else is the reviewer's business, not the validator's.

use super::{ArtifactError, ArtifactKind, ArtifactProblem, Document};

/// The text of an ATX heading on `line` (`## Goals` → `Goals`), if it is one.
pub(crate) fn heading(line: &str) -> Option<(usize, &str)> {
    let t = line.trim_start();
    if line.len() - t.len() > 3 {
        return None;
    }
    let level = t.bytes().take_while(|b| *b == b'#').count();
    if !(1..=6).contains(&level) {
        return None;
    }
    let rest = &t[level..];
    if !rest.is_empty() && !rest.starts_with([' ', '\t']) {
        return None;
    }
    Some((level, rest.trim().trim_end_matches('#').trim()))
}

/// Whether `line` opens or closes a fenced code block.
pub(crate) fn is_fence(line: &str) -> bool {
    let t = line.trim_start();
    t.starts_with("```") || t.starts_with("~~~")
}

/// What each document is for, in messages.
fn purpose(kind: ArtifactKind) -> &'static str {
    match kind {
        ArtifactKind::Discovery => "the consolidated understanding of the codebase",
        ArtifactKind::PlanMd => "the goals and the strategy",
        ArtifactKind::Spec => "the requirements",
        _ => "the content",
    }
}

pub(crate) fn validate(kind: ArtifactKind, markdown: &str) -> Result<Document, ArtifactError> {
    if markdown.trim().is_empty() {
        return Err(ArtifactError::invalid(
            kind,
            vec![ArtifactProblem::new(format!(
                "is empty; write {} as markdown with at least one `#` heading",
                purpose(kind)
            ))],
        ));
    }
    let mut fenced = false;
    let mut headings = Vec::new();
    for line in markdown.lines() {
        if is_fence(line) {
            fenced = !fenced;
        } else if !fenced && let Some((_, text)) = heading(line) {
            headings.push(text.to_owned());
        }
    }
    if headings.is_empty() {
        return Err(ArtifactError::invalid(
            kind,
            vec![ArtifactProblem::new(format!(
                "has no heading; organise {} in sections that start with `# ` or `## ` lines \
                 (e.g. `# Overview`)",
                purpose(kind)
            ))],
        ));
    }
    Ok(Document {
        kind,
        markdown: markdown.to_owned(),
        headings,
    })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::super::validate as check;
    use super::*;

    #[test]
    fn headings() {
        assert_eq!(heading("## Goals ##"), Some((2, "Goals")));
        assert_eq!(heading("#"), Some((1, "")));
        assert_eq!(heading("#hashtag"), None);
        assert_eq!(heading("    # code"), None);
        assert_eq!(heading("####### seven"), None);
    }

    #[test]
    fn document_problems() {
        let table = [
            (
                "discovery",
                " \n",
                "discovery.md: is empty; write the consolidated understanding of the codebase \
                 as markdown with at least one `#` heading",
            ),
            (
                "plan.md",
                "Just text.\n```\n# not a heading in a fence\n```\n",
                "plan.md: has no heading; organise the goals and the strategy in sections that \
                 start with `# ` or `## ` lines (e.g. `# Overview`)",
            ),
            (
                "spec",
                "#Requirements\n",
                "spec.md: has no heading; organise the requirements in sections that start \
                 with `# ` or `## ` lines (e.g. `# Overview`)",
            ),
        ];
        for (kind, text, want) in table {
            assert_eq!(check(kind, text).unwrap_err().to_string(), want, "{kind}");
        }
    }

    #[test]
    fn a_document_with_a_heading_passes() {
        let v = check("spec", "# Spec\n\n## R1\nMust parse.\n").unwrap();
        let super::super::Validated::Document(d) = v else {
            panic!("not a document")
        };
        assert_eq!(d.headings, vec!["Spec", "R1"]);
        assert_eq!(d.kind, ArtifactKind::Spec);
    }
}
