//! Whole definitions instead of edit blocks. Asked for SEARCH/REPLACE blocks, a small model
//! often writes the changed function whole in a code fence instead (iterate-b on `80a5713`:
//! in one drawing 4 of 5 answers did, docs/eval.md). An answer without any block is read as
//! replacing definitions when a fence holds complete definitions — parsed without an error by
//! the grammar of a file the conversation shows, no elided parts (`...`, "rest of the code") —
//! each named like exactly one definition of those files: that definition is replaced from its
//! declaration line to its end (comments and decorators above it stay), the new text
//! re-indented to the old one's indentation.

use trellis_index::chunk::ChunkKind;
use trellis_index::lang::Lang;
use trellis_index::symbols::{self, Symbol};

use super::indent::{indent, reindent};

/// One definition to replace: the file, the exact old text, the new text.
pub(super) type Replacement = (String, String, String);

/// The contents of the answer's fenced code blocks (```` ``` ```` or `~~~`, any language tag):
/// a fence line opens a block and the next one closes it; a block left open is not one.
pub(super) fn fences(text: &str) -> Vec<String> {
    let lines: Vec<&str> = text.lines().collect();
    fenced(&lines)
        .into_iter()
        .map(|f| f.body.join("\n"))
        .collect()
}

/// A closed fence of an answer: the index of its opening line and its lines.
pub(super) struct Fenced<'t> {
    pub(super) open: usize,
    pub(super) body: Vec<&'t str>,
}

/// Whether `line` opens or closes a fence (```` ``` ```` or `~~~`, any language tag).
pub(super) fn is_fence(line: &str) -> bool {
    let t = line.trim_start();
    t.starts_with("```") || t.starts_with("~~~")
}

/// The closed fences of `lines` (any tag; an unclosed one is left out: its code is not
/// whole).
pub(super) fn fenced<'t>(lines: &[&'t str]) -> Vec<Fenced<'t>> {
    let mut out = Vec::new();
    let mut open: Option<Fenced<'t>> = None;
    for (i, line) in lines.iter().enumerate() {
        let fence = is_fence(line);
        match (open.as_mut(), fence) {
            (None, true) => {
                open = Some(Fenced {
                    open: i,
                    body: Vec::new(),
                })
            }
            (Some(_), true) => out.extend(open.take()),
            (Some(f), false) => f.body.push(line),
            (None, false) => {}
        }
    }
    out
}

/// Lines that stand for code left out.
pub(super) fn elides(code: &str) -> bool {
    code.lines().any(|l| {
        let t = l.trim().to_ascii_lowercase();
        t == "..."
            || t == "…"
            || ((t.starts_with('#') || t.starts_with("//"))
                && [
                    "...",
                    "…",
                    "rest of",
                    "existing code",
                    "unchanged",
                    "same as",
                ]
                .iter()
                .any(|w| t.contains(w)))
    })
}

/// The 0-based line of `s`'s declaration: its first line (from `start_line`) that is not a
/// comment, a decorator or blank.
fn declaration(lines: &[&str], s: &Symbol) -> usize {
    let start = s.decl.start_line.saturating_sub(1) as usize;
    let end = (s.decl.end_line as usize).min(lines.len());
    (start..end)
        .find(|&i| {
            let t = lines[i].trim_start();
            !(t.is_empty()
                || t.starts_with('#')
                || t.starts_with("//")
                || t.starts_with("/*")
                || t.starts_with('*')
                || t.starts_with('@'))
        })
        .unwrap_or(start)
}

/// The same kind of definition; a method written alone in a fence parses as a function.
fn same_kind(a: &Symbol, b: &Symbol) -> bool {
    let callable = |k: ChunkKind| matches!(k, ChunkKind::Function | ChunkKind::Method);
    a.decl.kind == b.decl.kind || (callable(a.decl.kind) && callable(b.decl.kind))
}

/// The definitions of `fence` that replace one definition each of `files` (path, text: the
/// files the conversation shows). Empty when the fence is not complete code of their language
/// or names no definition of theirs once.
pub(super) fn replacements(fence: &str, files: &[(String, String)]) -> Vec<Replacement> {
    if elides(fence) || fence.trim().is_empty() {
        return Vec::new();
    }
    let fence_lines: Vec<&str> = fence.lines().collect();
    let mut out = Vec::new();
    let mut langs: Vec<Lang> = Vec::new();
    for lang in files.iter().map(|(p, _)| Lang::detect(p)) {
        if lang.grammar().is_some() && !langs.contains(&lang) {
            langs.push(lang);
        }
    }
    for lang in langs {
        let clean = symbols::parse_tree(lang, fence).is_some_and(|t| !t.root_node().has_error());
        let Some(parsed) = clean.then(|| symbols::extract(lang, fence)).flatten() else {
            continue;
        };
        // The shown files of this language with their definitions, parsed once.
        let shown: Vec<(&String, &String, Vec<Symbol>)> = files
            .iter()
            .filter(|(p, _)| Lang::detect(p) == lang)
            .filter_map(|(p, t)| Some((p, t, symbols::extract(lang, t)?.symbols)))
            .collect();
        // The fence's outermost definitions (a class written whole replaces the class).
        for def in parsed.symbols.iter().filter(|s| s.decl.parent.is_empty()) {
            let found: Vec<(&String, &String, &Symbol)> = shown
                .iter()
                .flat_map(|(p, t, syms)| {
                    syms.iter()
                        .filter(|s| s.decl.name == def.decl.name && same_kind(s, def))
                        .map(move |s| (*p, *t, s))
                })
                .collect();
            let [(path, text, old)] = found.as_slice() else {
                continue;
            };
            let lines: Vec<&str> = text.lines().collect();
            let (from, to) = (declaration(&lines, old), old.decl.end_line as usize);
            let (nfrom, nto) = (
                declaration(&fence_lines, def),
                (def.decl.end_line as usize).min(fence_lines.len()),
            );
            if from >= to || nfrom >= nto || to > lines.len() {
                continue;
            }
            let old_text = lines[from..to].join("\n");
            let new_text = reindent(
                &fence_lines[nfrom..nto].join("\n"),
                indent(fence_lines[nfrom]),
                indent(lines[from]),
            );
            let same = old_text
                .lines()
                .map(str::trim_end)
                .eq(new_text.lines().map(str::trim_end));
            if !same {
                out.push(((*path).clone(), old_text, new_text));
            }
        }
        if !out.is_empty() {
            break;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const FILE: &str = "import re\n\n\nclass Parser:\n    \"\"\"Parses.\"\"\"\n\n    # Hours.\n    def hour(self, s):\n        return int(s[:2])\n\n    def minute(self, s):\n        return int(s[3:5])\n\n\ndef helper(x):\n    return x\n";

    fn files() -> Vec<(String, String)> {
        vec![
            ("pkg/parse.py".into(), FILE.into()),
            ("README.md".into(), "# r\n".into()),
        ]
    }

    #[test]
    fn a_fenced_method_replaces_the_one_of_its_name_reindented() {
        let answer = "The hour 24 is midnight.\n\n```python\ndef hour(self, s):\n    h = int(s[:2])\n    return 0 if h == 24 else h\n```\nDone.";
        let fs = fences(answer);
        assert_eq!(fs.len(), 1);
        let r = replacements(&fs[0], &files());
        assert_eq!(r.len(), 1, "{r:?}");
        let (path, old, new) = &r[0];
        assert_eq!(path, "pkg/parse.py");
        assert_eq!(old, "    def hour(self, s):\n        return int(s[:2])");
        assert_eq!(
            new,
            "    def hour(self, s):\n        h = int(s[:2])\n        return 0 if h == 24 else h"
        );
        // The comment above it stays: the old text starts at the declaration.
        assert!(
            FILE.replacen(old, new, 1)
                .contains("    # Hours.\n    def hour")
        );
    }

    #[test]
    fn elided_unknown_unchanged_or_broken_fences_replace_nothing() {
        let none = |code: &str| replacements(code, &files()).is_empty();
        assert!(none("def hour(self, s):\n    ...\n"));
        assert!(none(
            "def hour(self, s):\n    # rest of the code\n    return 1\n"
        ));
        assert!(none("def unknown(self):\n    return 1\n"));
        assert!(none("def helper(x):\n    return x\n"));
        assert!(none("def hour(self, s:\n    return 1\n"));
        assert!(none(">>> isoparse('2023-04-30T24:00:00')"));
        // A name defined twice in the files shown is ambiguous.
        let twice = vec![
            ("a.py".to_owned(), "def f():\n    return 1\n".to_owned()),
            ("b.py".to_owned(), "def f():\n    return 2\n".to_owned()),
        ];
        assert!(replacements("def f():\n    return 3\n", &twice).is_empty());
        assert_eq!(
            replacements("def f():\n    return 3\n", &twice[..1]).len(),
            1
        );
    }

    #[test]
    fn fences_are_read_with_any_tag_and_an_unclosed_one_is_not() {
        let t = "a\n```py\nx = 1\n```\n~~~\ny = 2\n~~~\n```\nopen";
        assert_eq!(fences(t), vec!["x = 1".to_owned(), "y = 2".to_owned()]);
    }
}
