//! Where a symbol of the index is declared, as a position a language server takes: the line
//! of its declaration (a chunk may begin with doc comments, attributes or decorators that
//! mention the name too) and the column of the name on it.

use std::path::Path;

use crate::chunk::Chunk;
use crate::error::Result;
use crate::index::{Index, SymbolQuery};

/// A place in the workspace: 1-based line, 1-based column in UTF-16 code units (how the
/// Language Server Protocol counts).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Site {
    /// Path relative to the workspace root.
    pub path: String,
    /// 1-based line.
    pub line: u32,
    /// 1-based column, UTF-16 code units.
    pub column: u32,
}

impl Index {
    /// Where the symbol named `name` (a short or qualified name, matched exactly) is
    /// declared, read from the file as it is now; `None` when the index has no such symbol.
    pub fn locate_symbol(&self, name: &str) -> Result<Option<Site>> {
        let found = self.find_symbols(&SymbolQuery {
            name: name.to_owned(),
            exact: true,
            kinds: Vec::new(),
            path_prefix: None,
            limit: 1,
        })?;
        let Some(chunk) = found.into_iter().next() else {
            return Ok(None);
        };
        // The file as it is now (the chunk's text is what was indexed).
        let text = std::fs::read_to_string(self.root().join(&chunk.path))
            .unwrap_or_else(|_| chunk.text.clone());
        let (line, column) = declaration_site(&chunk, &text);
        Ok(Some(Site {
            path: chunk.path,
            line,
            column,
        }))
    }
}

/// The place a caller names by `path` (relative to `root`), 1-based `line` and `column`; a
/// `column` of 0 means the line's first non-blank character (read from the file). The
/// message of an error says what to give instead.
pub fn site_at(root: &Path, path: &str, line: u32, column: u32) -> Result<Site, String> {
    let path = path.trim().trim_start_matches("./");
    if path.is_empty() || line == 0 {
        return Err("give `symbol`, or `path` and a 1-based `line` (and `column`)".into());
    }
    let column = if column > 0 {
        column
    } else {
        let text = std::fs::read_to_string(root.join(path)).map_err(|e| format!("{path}: {e}"))?;
        let at = text.lines().nth(line as usize - 1).ok_or_else(|| {
            format!(
                "{path} has {} lines; line {line} is past its end",
                text.lines().count()
            )
        })?;
        first_column(at)
    };
    Ok(Site {
        path: path.to_owned(),
        line,
        column,
    })
}

/// The 1-based line and UTF-16 column of `chunk`'s name in `file` (the text of its file):
/// the first line of the chunk's range that is not a comment, attribute or decorator and has
/// the name as a whole word; the chunk's first line and column 1 when none has.
pub fn declaration_site(chunk: &Chunk, file: &str) -> (u32, u32) {
    let short = chunk
        .decl
        .name
        .rsplit(['.', ':'])
        .next()
        .unwrap_or(&chunk.decl.name);
    let found = file
        .lines()
        .enumerate()
        .skip(chunk.decl.start_line.saturating_sub(1) as usize)
        .take((chunk.decl.end_line + 1).saturating_sub(chunk.decl.start_line) as usize)
        .filter(|(_, l)| !is_comment_or_attribute(l))
        .find_map(|(n, l)| word_at(l, short).map(|i| (n, l, i)));
    match found {
        Some((n, l, i)) => (
            u32::try_from(n + 1).unwrap_or(chunk.decl.start_line),
            utf16_len(&l[..i]) + 1,
        ),
        None => (chunk.decl.start_line, 1),
    }
}

/// The UTF-16 column (1-based) of the first non-blank character of `line`.
pub fn first_column(line: &str) -> u32 {
    let blank = line.len() - line.trim_start().len();
    utf16_len(&line[..blank]) + 1
}

/// Whether a line is a comment, a doc comment or an attribute/decorator.
fn is_comment_or_attribute(line: &str) -> bool {
    let t = line.trim_start();
    ["//", "/*", "*", "#", "@", "\"\"\"", "'''"]
        .iter()
        .any(|p| t.starts_with(p))
}

/// Byte offset of `word` in `line` as a whole identifier.
fn word_at(line: &str, word: &str) -> Option<usize> {
    let ident = |c: char| c.is_alphanumeric() || c == '_';
    line.match_indices(word).map(|(i, _)| i).find(|&i| {
        !line[..i].chars().next_back().is_some_and(ident)
            && !line[i + word.len()..].chars().next().is_some_and(ident)
    })
}

/// Length of `s` in UTF-16 code units (how LSP counts columns).
pub fn utf16_len(s: &str) -> u32 {
    u32::try_from(s.encode_utf16().count()).unwrap_or(u32::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn words_are_whole_identifiers_and_columns_count_utf16() {
        assert_eq!(word_at("fn reserve_all(reserve)", "reserve"), Some(15));
        assert_eq!(word_at("reserved", "reserve"), None);
        assert_eq!(utf16_len("é𝄞"), 3);
        assert_eq!(first_column("    x = 1"), 5);
        assert_eq!(first_column(""), 1);
        assert!(is_comment_or_attribute("  #[derive(Debug)]"));
        assert!(is_comment_or_attribute("    @property"));
        assert!(!is_comment_or_attribute("def reserve(self):"));
    }
}
