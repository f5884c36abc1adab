//! Per-language rules: which nodes are definitions, imports and identifiers, and how to read
//! their names, signatures, parameters, return types and doc comments.

use tree_sitter::Node;

use super::text;
use crate::chunk::ChunkKind;
use crate::lang::Lang;

/// A recognised definition node.
pub(super) struct Def {
    pub kind: ChunkKind,
    pub name: String,
    pub container: bool,
    pub params: String,
    pub returns: String,
    /// A parent named by the definition itself (Go receivers, C++ `Type::method`).
    pub explicit_parent: Option<String>,
}

impl Def {
    fn new(kind: ChunkKind, name: &str, container: bool) -> Self {
        Def {
            kind,
            name: name.to_string(),
            container,
            params: String::new(),
            returns: String::new(),
            explicit_parent: None,
        }
    }

    fn with_io(mut self, node: Node<'_>, src: &[u8], returns_field: &str) -> Self {
        if let Some(p) = node.child_by_field_name("parameters") {
            self.params = collapse(text(p, src));
        }
        if let Some(r) = node.child_by_field_name(returns_field) {
            self.returns = collapse(text(r, src));
        }
        self
    }
}

fn function_kind(in_container: bool) -> ChunkKind {
    if in_container {
        ChunkKind::Method
    } else {
        ChunkKind::Function
    }
}

fn field_text<'a>(node: Node<'_>, field: &str, src: &'a [u8]) -> Option<&'a str> {
    node.child_by_field_name(field)
        .map(|n| text(n, src))
        .filter(|t| !t.is_empty())
}

/// Classifies `node` as a definition, if it is one.
pub(super) fn classify(lang: Lang, node: Node<'_>, src: &[u8], in_container: bool) -> Option<Def> {
    match lang {
        Lang::Rust => rust(node, src, in_container),
        Lang::Python => python(node, src, in_container),
        Lang::JavaScript | Lang::TypeScript | Lang::Tsx => js(node, src, in_container),
        Lang::Go => go(node, src),
        Lang::Java => java(node, src),
        Lang::C | Lang::Cpp => c_family(node, src, in_container),
        Lang::Markdown | Lang::Rst | Lang::Text => None,
    }
}

fn rust(node: Node<'_>, src: &[u8], in_container: bool) -> Option<Def> {
    let name = || field_text(node, "name", src);
    Some(match node.kind() {
        "function_item" | "function_signature_item" => {
            Def::new(function_kind(in_container), name()?, false).with_io(node, src, "return_type")
        }
        "struct_item" | "union_item" => Def::new(ChunkKind::Class, name()?, false),
        "enum_item" => Def::new(ChunkKind::Enum, name()?, false),
        "trait_item" => Def::new(ChunkKind::Interface, name()?, true),
        "impl_item" => {
            let ty = field_text(node, "type", src)?;
            // Strip generics so `impl<T> Foo<T>` and `impl Foo` share a parent name.
            let base = ty.split('<').next().unwrap_or(ty).trim();
            Def::new(ChunkKind::Module, base, true)
        }
        "mod_item" if node.child_by_field_name("body").is_some() => {
            Def::new(ChunkKind::Module, name()?, true)
        }
        "const_item" | "static_item" | "macro_definition" => {
            Def::new(ChunkKind::Constant, name()?, false)
        }
        "type_item" => Def::new(ChunkKind::Type, name()?, false),
        _ => return None,
    })
}

fn python(node: Node<'_>, src: &[u8], in_container: bool) -> Option<Def> {
    let name = field_text(node, "name", src);
    Some(match node.kind() {
        "function_definition" => {
            Def::new(function_kind(in_container), name?, false).with_io(node, src, "return_type")
        }
        "class_definition" => Def::new(ChunkKind::Class, name?, true),
        // A module's own names (`NOT_STRONG_RE = r'…'`, `KEYWORDS = {…}`, `__all__ = […]`):
        // tables and patterns that fixes change as often as functions.
        "assignment" if module_level(node) => {
            let left = node.child_by_field_name("left")?;
            if left.kind() != "identifier" {
                return None;
            }
            Def::new(ChunkKind::Constant, text(left, src), false)
        }
        _ => return None,
    })
}

/// Whether `node` is a statement of the module itself: its parent is an
/// `expression_statement` of the `module` (not one in a function or class).
fn module_level(node: Node<'_>) -> bool {
    node.parent().is_some_and(|p| {
        p.kind() == "expression_statement" && p.parent().is_some_and(|r| r.kind() == "module")
    })
}

fn js(node: Node<'_>, src: &[u8], in_container: bool) -> Option<Def> {
    let name = || field_text(node, "name", src);
    Some(match node.kind() {
        "function_declaration" | "generator_function_declaration" | "function_signature" => {
            Def::new(function_kind(in_container), name()?, false).with_io(node, src, "return_type")
        }
        "method_definition" | "method_signature" | "abstract_method_signature" => {
            Def::new(ChunkKind::Method, name()?, false).with_io(node, src, "return_type")
        }
        "class_declaration" | "abstract_class_declaration" => {
            Def::new(ChunkKind::Class, name()?, true)
        }
        "interface_declaration" => Def::new(ChunkKind::Interface, name()?, true),
        "type_alias_declaration" => Def::new(ChunkKind::Type, name()?, false),
        "enum_declaration" => Def::new(ChunkKind::Enum, name()?, false),
        "internal_module" | "module" => Def::new(ChunkKind::Module, name()?, true),
        "variable_declarator" | "public_field_definition" | "field_definition" => {
            let value = node.child_by_field_name("value")?;
            if !matches!(
                value.kind(),
                "arrow_function" | "function_expression" | "function" | "generator_function"
            ) {
                // A file's own constants and tables (`var PATTERN = /…/;`, `export const
                // TABLE = {…}`), as in Python; not destructuring (`const { a } = …`).
                let top = node.kind() == "variable_declarator"
                    && node.parent().is_some_and(|d| {
                        matches!(d.kind(), "lexical_declaration" | "variable_declaration")
                            && d.parent().is_some_and(|p| {
                                p.kind() == "program"
                                    || (p.kind() == "export_statement"
                                        && p.parent().is_some_and(|r| r.kind() == "program"))
                            })
                    });
                let target = node.child_by_field_name("name")?;
                if !top || target.kind() != "identifier" {
                    return None;
                }
                return Some(Def::new(ChunkKind::Constant, text(target, src), false));
            }
            let n = name().or_else(|| field_text(node, "property", src))?;
            let kind = if node.kind() == "variable_declarator" {
                function_kind(in_container)
            } else {
                ChunkKind::Method
            };
            Def::new(kind, n, false).with_io(value, src, "return_type")
        }
        _ => return None,
    })
}

fn go(node: Node<'_>, src: &[u8]) -> Option<Def> {
    Some(match node.kind() {
        "function_declaration" => {
            Def::new(ChunkKind::Function, field_text(node, "name", src)?, false)
                .with_io(node, src, "result")
        }
        "method_declaration" => {
            let mut d = Def::new(ChunkKind::Method, field_text(node, "name", src)?, false)
                .with_io(node, src, "result");
            d.explicit_parent = node
                .child_by_field_name("receiver")
                .and_then(|r| go_receiver_type(r, src));
            d
        }
        "type_spec" | "type_alias" => {
            let kind = match node.child_by_field_name("type").map(|t| t.kind()) {
                Some("struct_type") => ChunkKind::Class,
                Some("interface_type") => ChunkKind::Interface,
                _ => ChunkKind::Type,
            };
            Def::new(kind, field_text(node, "name", src)?, false)
        }
        _ => return None,
    })
}

/// The type name in a Go receiver like `(s *Server)` or `(s Server[T])`.
fn go_receiver_type(receiver: Node<'_>, src: &[u8]) -> Option<String> {
    let mut stack = vec![receiver];
    while let Some(n) = stack.pop() {
        if n.kind() == "type_identifier" {
            return Some(text(n, src).to_string());
        }
        for i in (0..n.named_child_count()).rev() {
            if let Some(c) = n.named_child(i as u32) {
                stack.push(c);
            }
        }
    }
    None
}

fn java(node: Node<'_>, src: &[u8]) -> Option<Def> {
    let name = field_text(node, "name", src);
    Some(match node.kind() {
        "class_declaration" | "record_declaration" => Def::new(ChunkKind::Class, name?, true),
        "interface_declaration" | "annotation_type_declaration" => {
            Def::new(ChunkKind::Interface, name?, true)
        }
        "enum_declaration" => Def::new(ChunkKind::Enum, name?, true),
        "method_declaration" | "constructor_declaration" | "compact_constructor_declaration" => {
            Def::new(ChunkKind::Method, name?, false).with_io(node, src, "type")
        }
        _ => return None,
    })
}

fn c_family(node: Node<'_>, src: &[u8], in_container: bool) -> Option<Def> {
    Some(match node.kind() {
        "function_definition" => c_function(node, src, in_container)?,
        "declaration" | "field_declaration" => {
            // Prototypes: a declaration whose declarator is a function declarator.
            let decl = node.child_by_field_name("declarator")?;
            find_function_declarator(decl)?;
            c_function(node, src, in_container)?
        }
        "struct_specifier" | "union_specifier" | "class_specifier"
            if node.child_by_field_name("body").is_some() =>
        {
            let container = node.kind() != "union_specifier";
            Def::new(ChunkKind::Class, field_text(node, "name", src)?, container)
        }
        "enum_specifier" if node.child_by_field_name("body").is_some() => {
            Def::new(ChunkKind::Enum, field_text(node, "name", src)?, false)
        }
        "namespace_definition" => Def::new(ChunkKind::Module, field_text(node, "name", src)?, true),
        "type_definition" | "alias_declaration" => {
            let d = node
                .child_by_field_name("declarator")
                .or_else(|| node.child_by_field_name("name"))?;
            Def::new(ChunkKind::Type, &declarator_name(d, src)?, false)
        }
        "preproc_def" | "preproc_function_def" => {
            Def::new(ChunkKind::Constant, field_text(node, "name", src)?, false)
        }
        _ => return None,
    })
}

fn c_function(node: Node<'_>, src: &[u8], in_container: bool) -> Option<Def> {
    let decl = node.child_by_field_name("declarator")?;
    let fdecl = find_function_declarator(decl)?;
    let full = declarator_name(fdecl.child_by_field_name("declarator")?, src)?;
    let (parent, name) = match full.rsplit_once("::") {
        Some((p, n)) => (Some(p.to_string()), n.to_string()),
        None => (None, full),
    };
    let kind = if in_container || parent.is_some() {
        ChunkKind::Method
    } else {
        ChunkKind::Function
    };
    let mut d = Def::new(kind, &name, false);
    d.explicit_parent = parent;
    if let Some(p) = fdecl.child_by_field_name("parameters") {
        d.params = collapse(text(p, src));
    }
    if let Some(t) = node.child_by_field_name("type") {
        d.returns = collapse(text(t, src));
    }
    Some(d)
}

/// Descends pointer/reference/parenthesised declarators to the function declarator.
fn find_function_declarator(mut n: Node<'_>) -> Option<Node<'_>> {
    for _ in 0..8 {
        if n.kind() == "function_declarator" {
            return Some(n);
        }
        n = n.child_by_field_name("declarator").or_else(|| {
            n.named_child(0)
                .filter(|c| c.kind().ends_with("declarator"))
        })?;
    }
    None
}

/// The declared name inside a (possibly nested) C/C++ declarator.
fn declarator_name(mut n: Node<'_>, src: &[u8]) -> Option<String> {
    for _ in 0..8 {
        match n.kind() {
            "identifier"
            | "field_identifier"
            | "type_identifier"
            | "qualified_identifier"
            | "destructor_name"
            | "operator_name"
            | "primitive_type" => {
                return Some(text(n, src).to_string());
            }
            _ => {
                n = n
                    .child_by_field_name("declarator")
                    .or_else(|| n.child_by_field_name("name"))
                    .or_else(|| n.named_child(0))?;
            }
        }
    }
    None
}

/// The import text, if `node` is an import/include/use declaration.
pub(super) fn import(lang: Lang, node: Node<'_>, src: &[u8]) -> Option<String> {
    let is_import = match lang {
        Lang::Rust => matches!(node.kind(), "use_declaration" | "extern_crate_declaration"),
        Lang::Python => matches!(
            node.kind(),
            "import_statement" | "import_from_statement" | "future_import_statement"
        ),
        Lang::JavaScript | Lang::TypeScript | Lang::Tsx => {
            matches!(node.kind(), "import_statement" | "import_alias")
        }
        Lang::Go => node.kind() == "import_declaration",
        Lang::Java => node.kind() == "import_declaration",
        Lang::C | Lang::Cpp => matches!(node.kind(), "preproc_include" | "using_declaration"),
        Lang::Markdown | Lang::Rst | Lang::Text => false,
    };
    is_import.then(|| collapse(text(node, src)))
}

/// Leaf node kinds that name something (counted as references for the repo map).
pub(super) fn is_identifier(kind: &str) -> bool {
    matches!(
        kind,
        "identifier"
            | "type_identifier"
            | "field_identifier"
            | "property_identifier"
            | "shorthand_property_identifier"
            | "namespace_identifier"
            | "package_identifier"
    )
}

const COMMENT_KINDS: &[&str] = &["comment", "line_comment", "block_comment"];
const SKIPPABLE_KINDS: &[&str] = &["attribute_item", "decorator", "inner_attribute_item"];

/// Whether a sibling of this kind may sit between a doc comment and its definition (comments
/// themselves and attributes/decorators): the walk keeps runs of them (see [`Siblings`]).
pub(super) fn is_comment_or_skippable(kind: &str) -> bool {
    COMMENT_KINDS.contains(&kind) || SKIPPABLE_KINDS.contains(&kind)
}

/// Where a node sits, as the tree walk knows it: its ancestors (root first) and, for it and
/// each ancestor, the comments and attributes immediately before it among its siblings.
///
/// tree-sitter's `parent()` and `prev_sibling()` search from the root and from the first
/// sibling, which made doc comments quadratic in files with thousands of definitions side by
/// side (generated bindings); the walk has this information already.
pub(super) struct Siblings<'a, 't> {
    /// Ancestors of the node, root first.
    pub ancestors: &'a [Node<'t>],
    /// `runs[k]`: the comment/attribute siblings (in order) right before the node at depth
    /// `k` of the path (depth `ancestors.len()` is the node itself).
    pub runs: &'a [Vec<Node<'t>>],
}

/// The doc comment above `node` (or a Python docstring), and the row where it starts.
pub(super) fn doc_comment(
    lang: Lang,
    node: Node<'_>,
    src: &[u8],
    at: &Siblings<'_, '_>,
) -> (String, Option<usize>) {
    if lang == Lang::Python {
        return (python_docstring(node, src).unwrap_or_default(), None);
    }
    // Comments may sit above a wrapper (`export`, `template<…>`, decorated definitions).
    let mut anchor = node;
    let mut depth = at.ancestors.len();
    while let Some(p) = depth.checked_sub(1).and_then(|d| at.ancestors.get(d)) {
        let single_spec = p.kind() == "type_declaration" && p.named_child_count() == 1;
        if single_spec
            || matches!(
                p.kind(),
                "export_statement" | "template_declaration" | "decorated_definition"
            )
        {
            anchor = *p;
            depth -= 1;
        } else {
            break;
        }
    }
    let mut lines: Vec<&str> = Vec::new();
    let mut start = None;
    let mut expected_row = anchor.start_position().row;
    let before = at.runs.get(depth).map_or(&[][..], Vec::as_slice);
    for p in before.iter().rev() {
        if SKIPPABLE_KINDS.contains(&p.kind()) {
            expected_row = p.start_position().row;
            continue;
        }
        if p.end_position().row + 1 < expected_row {
            break;
        }
        let t = text(*p, src);
        // Rust `//!` comments document the enclosing module, not what follows.
        if t.starts_with("//!") || t.starts_with("/*!") {
            break;
        }
        lines.push(t.trim_end());
        start = Some(p.start_position().row);
        expected_row = p.start_position().row;
    }
    lines.reverse();
    (strip_comment_markers(&lines.join("\n")), start)
}

fn python_docstring(node: Node<'_>, src: &[u8]) -> Option<String> {
    let body = node.child_by_field_name("body")?;
    let first = body.named_child(0)?;
    if first.kind() != "expression_statement" {
        return None;
    }
    let s = first.named_child(0)?;
    if s.kind() != "string" {
        return None;
    }
    let t = text(s, src);
    let t = t.trim_start_matches(['r', 'R', 'u', 'U', 'b', 'B']);
    let t = t
        .trim_start_matches("\"\"\"")
        .trim_start_matches("'''")
        .trim_end_matches("\"\"\"")
        .trim_end_matches("'''")
        .trim_matches(['"', '\'']);
    Some(dedent(t))
}

fn dedent(t: &str) -> String {
    t.lines()
        .map(str::trim)
        .collect::<Vec<_>>()
        .join("\n")
        .trim()
        .to_string()
}

fn strip_comment_markers(t: &str) -> String {
    let mut out = Vec::new();
    for line in t.lines() {
        let l = line.trim();
        let l = l
            .trim_start_matches("///")
            .trim_start_matches("//")
            .trim_start_matches("/**")
            .trim_start_matches("/*")
            .trim_end_matches("*/")
            .trim_start_matches('*')
            .trim_start_matches('#');
        out.push(l.trim());
    }
    out.join("\n").trim().to_string()
}

/// The declaration text of `node` up to its body, whitespace collapsed, at most 400 bytes.
pub(super) fn signature(node: Node<'_>, src: &[u8]) -> String {
    let start = node.start_byte();
    let end = match node.child_by_field_name("body") {
        Some(b) => b.start_byte(),
        None => {
            let full = &src[node.byte_range()];
            let cut = full
                .iter()
                .position(|&b| b == b'{' || b == b'\n')
                .unwrap_or(full.len());
            start + cut
        }
    };
    let s = std::str::from_utf8(&src[start..end.max(start)]).unwrap_or("");
    let mut c = collapse(s);
    let c_trim = c.trim_end_matches([':', '{', ' ']).len();
    c.truncate(c_trim);
    if c.len() > 400 {
        let mut cut = 400;
        while !c.is_char_boundary(cut) {
            cut -= 1;
        }
        c.truncate(cut);
        c.push('…');
    }
    c
}

/// Collapses runs of whitespace into single spaces.
pub(crate) fn collapse(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for w in s.split_whitespace() {
        if !out.is_empty() {
            out.push(' ');
        }
        out.push_str(w);
    }
    out
}
