//! Symbol extraction with tree-sitter: definitions (functions, methods, classes, structs, enums,
//! traits, interfaces, types, constants), imports and identifier references, per file.

mod rules;

use std::collections::HashMap;

use serde::{Deserialize, Serialize};
use tree_sitter::{Node, Parser, Tree};

use crate::chunk::{ChunkKind, Declaration};
use crate::lang::Lang;

/// A definition found in a source file.
///
/// Stored as one flat JSON object (the index's `files.symbols` column): the fields of
/// [`Declaration`], then `container`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Symbol {
    /// What it is, its names, declaration, doc comment and lines (the first line includes
    /// the doc comment).
    #[serde(flatten)]
    pub decl: Declaration,
    /// Whether the symbol contains other definitions (class, impl, trait, module).
    pub container: bool,
}

/// An import, include or use declaration.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Import {
    /// The declaration text, whitespace collapsed.
    pub text: String,
    /// Its line (1-based).
    pub line: u32,
}

/// Everything extracted from one source file.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct FileSymbols {
    /// Definitions in document order.
    pub symbols: Vec<Symbol>,
    /// Imports in document order.
    pub imports: Vec<Import>,
    /// Identifier occurrences that are not the name of a definition in this file, by name.
    pub refs: HashMap<String, u32>,
}

thread_local! {
    static PARSERS: std::cell::RefCell<HashMap<Lang, Parser>> = std::cell::RefCell::new(HashMap::new());
}

/// Parses `source` as `lang` with tree-sitter (a per-thread parser is reused); `None` when the
/// language has no grammar or the parser gives up.
pub fn parse_tree(lang: Lang, source: &str) -> Option<Tree> {
    parse(lang, source)
}

/// Routes tree-sitter's C allocations to mimalloc (once, before the first parser exists).
///
/// Parsing allocates and frees a subtree per syntax node; with glibc's malloc that was a
/// tenth of a cold index's CPU time (docs/benchmarks.md, "Retrieval").
#[allow(unsafe_code)]
fn use_mimalloc_for_tree_sitter() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        let allocator = tree_sitter::Allocator {
            malloc: libmimalloc_sys::mi_malloc,
            calloc: libmimalloc_sys::mi_calloc,
            realloc: libmimalloc_sys::mi_realloc,
            free: libmimalloc_sys::mi_free,
        };
        // SAFETY: the four functions are one allocator family (mimalloc's malloc, calloc,
        // realloc and free, with malloc's alignment). `set_allocator` must run before any
        // other tree-sitter call and while no tree-sitter object is alive: this crate is the
        // only user of tree-sitter in Trellis, every parser and tree it makes comes from
        // `parse` below, which calls this first, and `Once` runs it exactly once while other
        // threads wait.
        unsafe { tree_sitter::set_allocator(Some(allocator)) };
    });
}

/// Parses `source` as `lang`, reusing a per-thread parser.
fn parse(lang: Lang, source: &str) -> Option<Tree> {
    use_mimalloc_for_tree_sitter();
    let grammar = lang.grammar()?;
    PARSERS.with(|cell| {
        let mut parsers = cell.borrow_mut();
        let parser = match parsers.entry(lang) {
            std::collections::hash_map::Entry::Occupied(e) => e.into_mut(),
            std::collections::hash_map::Entry::Vacant(v) => {
                let mut p = Parser::new();
                p.set_language(&grammar).ok()?;
                v.insert(p)
            }
        };
        parser.parse(source, None)
    })
}

/// Extracts definitions, imports and references from a source file. Returns `None` when the
/// language has no grammar or the parser gives up.
pub fn extract(lang: Lang, source: &str) -> Option<FileSymbols> {
    let tree = parse(lang, source)?;
    let mut out = FileSymbols::default();
    let mut refs: HashMap<&str, u32> = HashMap::new();
    let src = source.as_bytes();
    let sep = lang.path_separator();
    // (node id, qualified name, is a type container) for the definitions enclosing the
    // cursor. Namespaces and modules qualify names but do not make functions methods.
    let mut scopes: Vec<(usize, String, bool)> = Vec::new();
    let mut cursor = tree.walk();
    // The path from the root to the cursor and the comment runs before each node on it
    // (see `rules::Siblings`): runs.len() == ancestors.len() + 1.
    let mut ancestors: Vec<Node<'_>> = Vec::new();
    let mut runs: Vec<Vec<Node<'_>>> = vec![Vec::new()];
    loop {
        let node = cursor.node();
        let in_container = scopes.last().is_some_and(|s| s.2);
        let mut entered = false;
        if node.is_named() {
            if let Some(def) = rules::classify(lang, node, src, in_container) {
                let parent_q = match (&def.explicit_parent, scopes.last()) {
                    (Some(p), Some(s)) => format!("{}{sep}{p}", s.1),
                    (Some(p), None) => p.clone(),
                    (None, Some(s)) => s.1.clone(),
                    (None, None) => String::new(),
                };
                let qualified = if parent_q.is_empty() {
                    def.name.clone()
                } else {
                    format!("{parent_q}{sep}{}", def.name)
                };
                let at = rules::Siblings {
                    ancestors: &ancestors,
                    runs: &runs,
                };
                let (doc, doc_start) = rules::doc_comment(lang, node, src, &at);
                let start_line = doc_start.unwrap_or(node.start_position().row) as u32 + 1;
                out.symbols.push(Symbol {
                    decl: Declaration {
                        kind: def.kind,
                        name: def.name,
                        qualified_name: qualified.clone(),
                        parent: parent_q,
                        signature: rules::signature(node, src),
                        params: def.params,
                        returns: def.returns,
                        doc,
                        start_line,
                        end_line: node.end_position().row as u32 + 1,
                    },
                    container: def.container,
                });
                let is_type =
                    def.container && (def.kind != ChunkKind::Module || node.kind() == "impl_item");
                scopes.push((node.id(), qualified, is_type));
                entered = true;
            } else if let Some(text) = rules::import(lang, node, src) {
                out.imports.push(Import {
                    text,
                    line: node.start_position().row as u32 + 1,
                });
            }
        }
        if node.child_count() == 0
            && rules::is_identifier(node.kind())
            && let Ok(t) = node.utf8_text(src)
            && t.len() >= 2
        {
            *refs.entry(t).or_insert(0) += 1;
        }
        if cursor.goto_first_child() {
            ancestors.push(node);
            runs.push(Vec::new());
            continue;
        }
        if entered {
            scopes.pop();
        }
        // Climb until a sibling exists, closing scopes of the nodes we leave.
        let mut leaving = node;
        loop {
            if let Some(run) = runs.last_mut() {
                if rules::is_comment_or_skippable(leaving.kind()) {
                    run.push(leaving);
                } else {
                    run.clear();
                }
            }
            if cursor.goto_next_sibling() {
                break;
            }
            if !cursor.goto_parent() {
                finish(&mut out, refs);
                return Some(out);
            }
            runs.pop();
            ancestors.pop();
            leaving = cursor.node();
            if scopes.last().is_some_and(|s| s.0 == leaving.id()) {
                scopes.pop();
            }
        }
    }
}

/// Removes one occurrence per definition name from the reference counts (the name at the
/// definition site is not a reference) and stores them owned.
fn finish(out: &mut FileSymbols, mut refs: HashMap<&str, u32>) {
    for s in &out.symbols {
        if let Some(c) = refs.get_mut(s.decl.name.as_str()) {
            *c = c.saturating_sub(1);
        }
    }
    out.refs = refs
        .into_iter()
        .filter(|(_, c)| *c > 0)
        .map(|(k, v)| (k.to_string(), v))
        .collect();
}

/// The text of `node`, or an empty string when it is not valid UTF-8.
pub(crate) fn text<'a>(node: Node<'_>, src: &'a [u8]) -> &'a str {
    std::str::from_utf8(&src[node.byte_range()]).unwrap_or("")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_symbol_is_stored_as_one_flat_json_object() {
        let s = Symbol {
            decl: Declaration {
                name: "f".into(),
                qualified_name: "a::f".into(),
                parent: "a".into(),
                signature: "fn f()".into(),
                params: "()".into(),
                doc: "Does f.".into(),
                ..Declaration::new(ChunkKind::Function, 2, 3)
            },
            container: false,
        };
        let json = serde_json::to_string(&s).unwrap();
        assert_eq!(
            json,
            r#"{"kind":"function","name":"f","qualified_name":"a::f","parent":"a","signature":"fn f()","params":"()","returns":"","doc":"Does f.","start_line":2,"end_line":3,"container":false}"#
        );
        assert_eq!(serde_json::from_str::<Symbol>(&json).unwrap(), s);
    }
}
