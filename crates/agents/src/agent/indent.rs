//! Indentation of edited lines: a line's leading whitespace and re-indenting replacement
//! text to the file's indentation, shared by SEARCH/REPLACE blocks ([`super::blocks`]), the
//! merge of a drifted block ([`super::merge`]) and whole-definition fences ([`super::defs`]).

/// The leading whitespace of `line`.
pub(super) fn indent(line: &str) -> &str {
    &line[..line.len() - line.trim_start().len()]
}

/// `replace`'s lines re-indented from `from` to `to` (the indentation of the SEARCH part's
/// first line and of the file's matching line).
pub(super) fn reindent(replace: &str, from: &str, to: &str) -> String {
    replace
        .split('\n')
        .map(|l| {
            if l.trim().is_empty() {
                String::new()
            } else if let Some(rest) = l.strip_prefix(from) {
                format!("{to}{rest}")
            } else {
                l.to_owned()
            }
        })
        .collect::<Vec<_>>()
        .join("\n")
}
