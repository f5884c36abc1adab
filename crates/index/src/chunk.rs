//! The unit of retrieval: a chunk of a file (a symbol, a document section or a window of text)
//! with its attribution.

use serde::ser::SerializeStruct;
use serde::{Deserialize, Serialize, Serializer};

/// What a chunk is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ChunkKind {
    /// A function or free-standing procedure.
    Function,
    /// A method (a function inside a class, impl, interface or struct).
    Method,
    /// A class, struct, union or record.
    Class,
    /// An enum.
    Enum,
    /// A trait, interface or protocol.
    Interface,
    /// A type alias or typedef.
    Type,
    /// A module, namespace or impl block.
    Module,
    /// A constant, static or macro.
    Constant,
    /// The head of a source file (module docs, imports) and its outline.
    File,
    /// A heading-scoped document section.
    Section,
    /// A window of a text file without a parser.
    Text,
}

impl ChunkKind {
    /// The stable lower-case name used on disk and in JSON.
    pub fn as_str(self) -> &'static str {
        match self {
            ChunkKind::Function => "function",
            ChunkKind::Method => "method",
            ChunkKind::Class => "class",
            ChunkKind::Enum => "enum",
            ChunkKind::Interface => "interface",
            ChunkKind::Type => "type",
            ChunkKind::Module => "module",
            ChunkKind::Constant => "constant",
            ChunkKind::File => "file",
            ChunkKind::Section => "section",
            ChunkKind::Text => "text",
        }
    }

    /// Parses [`ChunkKind::as_str`] output.
    pub fn parse(s: &str) -> Option<Self> {
        Some(match s {
            "function" => ChunkKind::Function,
            "method" => ChunkKind::Method,
            "class" => ChunkKind::Class,
            "enum" => ChunkKind::Enum,
            "interface" => ChunkKind::Interface,
            "type" => ChunkKind::Type,
            "module" => ChunkKind::Module,
            "constant" => ChunkKind::Constant,
            "file" => ChunkKind::File,
            "section" => ChunkKind::Section,
            "text" => ChunkKind::Text,
            _ => return None,
        })
    }

    /// Whether this kind comes from the symbol (AST) index.
    pub fn is_symbol(self) -> bool {
        !matches!(self, ChunkKind::File | ChunkKind::Section | ChunkKind::Text)
    }
}

/// Which corpus a chunk belongs to; strategies search one or more of them.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Category {
    /// Source code parsed into symbols.
    Code,
    /// Prose documentation (Markdown, reStructuredText, plain text).
    Doc,
    /// Architecture decision records and decision logs.
    Decision,
    /// Specifications, RFCs and design documents.
    Spec,
    /// Other text files (configuration, scripts in languages without a parser).
    Other,
}

impl Category {
    /// The stable lower-case name used on disk and in JSON.
    pub fn as_str(self) -> &'static str {
        match self {
            Category::Code => "code",
            Category::Doc => "doc",
            Category::Decision => "decision",
            Category::Spec => "spec",
            Category::Other => "other",
        }
    }

    /// Parses [`Category::as_str`] output.
    pub fn parse(s: &str) -> Option<Self> {
        Some(match s {
            "code" => Category::Code,
            "doc" => Category::Doc,
            "decision" => Category::Decision,
            "spec" => Category::Spec,
            "other" => Category::Other,
            _ => return None,
        })
    }

    /// Whether chunks of this category are documents (sections).
    pub fn is_document(self) -> bool {
        matches!(self, Category::Doc | Category::Decision | Category::Spec)
    }
}

/// A stable chunk identifier (a 63-bit hash of path, kind, qualified name and position).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(transparent)]
pub struct ChunkId(pub i64);

/// What a symbol or a chunk declares: its kind, names, declaration, doc comment and lines.
///
/// [`Symbol`](crate::symbols::Symbol) and [`Chunk`] both embed it. A chunk is not a symbol
/// (a section, a window of text or a file's head is a chunk too, and a long symbol is split
/// into several), so it holds these fields, not a `Symbol`: a symbol's `container` flag says
/// how the symbol is cut into chunks and is not a property of any one of them.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Declaration {
    /// What it is.
    pub kind: ChunkKind,
    /// Short name (symbol name or section heading).
    pub name: String,
    /// Symbol id: enclosing symbols and the name, joined by the language's separator
    /// (`module::Type::method`), or for sections the section path (`doc > section >
    /// subsection`).
    pub qualified_name: String,
    /// The enclosing symbol's qualified name or the parent section path, empty at top level.
    pub parent: String,
    /// The declaration without its body, whitespace collapsed.
    pub signature: String,
    /// The parameter list as written (functions and methods).
    pub params: String,
    /// The return type as written (functions and methods).
    pub returns: String,
    /// The doc comment or docstring, markers stripped.
    pub doc: String,
    /// First line, 1-based (a symbol's includes its doc comment).
    pub start_line: u32,
    /// Last line, 1-based, inclusive.
    pub end_line: u32,
}

impl Declaration {
    /// A declaration of `kind` over lines `start_line..=end_line`, without names, signature
    /// or doc.
    pub fn new(kind: ChunkKind, start_line: u32, end_line: u32) -> Self {
        Declaration {
            kind,
            name: String::new(),
            qualified_name: String::new(),
            parent: String::new(),
            signature: String::new(),
            params: String::new(),
            returns: String::new(),
            doc: String::new(),
            start_line,
            end_line,
        }
    }
}

/// One retrievable piece of a file, with everything needed to attribute and ground it.
///
/// Serialised as one flat object, in the order `id`, `path`, `kind`, `category`, `lang`, the
/// other fields of [`Declaration`], `text` (see the `Serialize` impl).
#[derive(Clone, Debug, PartialEq, Deserialize)]
pub struct Chunk {
    /// Stable id.
    pub id: ChunkId,
    /// Path relative to the workspace root, `/`-separated.
    pub path: String,
    /// Which corpus it belongs to.
    pub category: Category,
    /// Language (`rust`, `python`, …, `markdown`, `text`).
    pub lang: String,
    /// What the chunk is and which lines of the file it holds: for a symbol, its declaration
    /// with the lines of this part (a body over [`MAX_SYMBOL_LINES`](crate::analyze::MAX_SYMBOL_LINES)
    /// is split, and only the first part has the doc comment); for a section, its heading and
    /// path; for a file's head, the file's name and path, its outline of top-level symbols as
    /// `doc` and its imports as `signature`; for a window of text, only its lines.
    #[serde(flatten)]
    pub decl: Declaration,
    /// The exact text of lines `start_line..=end_line` as indexed.
    pub text: String,
}

impl Serialize for Chunk {
    /// The fields in the order they had before the chunk embedded its [`Declaration`]
    /// (`kind` between `path` and `category`), so that a chunk's JSON is unchanged; a
    /// derived `#[serde(flatten)]` would move `kind` after `lang`.
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let d = &self.decl;
        let mut s = serializer.serialize_struct("Chunk", 15)?;
        s.serialize_field("id", &self.id)?;
        s.serialize_field("path", &self.path)?;
        s.serialize_field("kind", &d.kind)?;
        s.serialize_field("category", &self.category)?;
        s.serialize_field("lang", &self.lang)?;
        s.serialize_field("name", &d.name)?;
        s.serialize_field("qualified_name", &d.qualified_name)?;
        s.serialize_field("parent", &d.parent)?;
        s.serialize_field("signature", &d.signature)?;
        s.serialize_field("params", &d.params)?;
        s.serialize_field("returns", &d.returns)?;
        s.serialize_field("doc", &d.doc)?;
        s.serialize_field("start_line", &d.start_line)?;
        s.serialize_field("end_line", &d.end_line)?;
        s.serialize_field("text", &self.text)?;
        s.end()
    }
}

impl Chunk {
    /// A 64-bit hash of the chunk text (what the grounding check and deduplication use).
    pub fn text_hash(&self) -> i64 {
        text_hash(&self.text)
    }

    /// The pieces of [`Chunk::embedding_text`], in order.
    fn embedding_parts(&self) -> impl Iterator<Item = &str> {
        let d = &self.decl;
        let name = (!d.qualified_name.is_empty()).then_some([d.qualified_name.as_str(), "\n"]);
        let doc = (!d.doc.is_empty() && !self.text.contains(d.doc.as_str()))
            .then_some([d.doc.as_str(), "\n"]);
        [self.path.as_str(), "\n"]
            .into_iter()
            .chain(name.into_iter().flatten())
            .chain(doc.into_iter().flatten())
            .chain(std::iter::once(self.text.as_str()))
    }

    /// The text handed to an embedding model: where the chunk is, what it is, then the text.
    pub fn embedding_text(&self) -> String {
        let mut s = String::with_capacity(self.text.len() + 128);
        s.extend(self.embedding_parts());
        s
    }

    /// A 64-bit hash of exactly [`Chunk::embedding_text`] (without building it): the key of the
    /// embedding cache, so that a chunk that moved, was renamed or had its doc comment changed
    /// gets a new vector while an unchanged one keeps its vector.
    pub fn embedding_hash(&self) -> i64 {
        let mut h = xxhash_rust::xxh3::Xxh3::new();
        for part in self.embedding_parts() {
            h.update(part.as_bytes());
        }
        h.digest() as i64
    }
}

/// Hashes chunk text (xxh3, as i64 so that it fits SQLite integers).
pub fn text_hash(text: &str) -> i64 {
    xxhash_rust::xxh3::xxh3_64(text.as_bytes()) as i64
}

/// Builds a stable chunk id from its identity.
pub fn chunk_id(path: &str, kind: ChunkKind, qualified_name: &str, start_line: u32) -> ChunkId {
    let mut h = xxhash_rust::xxh3::Xxh3::new();
    h.update(path.as_bytes());
    h.update(&[0]);
    h.update(kind.as_str().as_bytes());
    h.update(&[0]);
    h.update(qualified_name.as_bytes());
    h.update(&start_line.to_le_bytes());
    ChunkId((h.digest() >> 1) as i64)
}

/// Rough token count used for budgets: one token per four bytes of text, rounded up, which is
/// close to what BPE tokenizers produce for English and code (see docs/retrieval.md).
pub fn estimate_tokens(text: &str) -> usize {
    text.len().div_ceil(4)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn chunk(qualified_name: &str, doc: &str) -> Chunk {
        Chunk {
            id: ChunkId(1),
            path: "src/a.rs".into(),
            category: Category::Code,
            lang: "rust".into(),
            decl: Declaration {
                name: "f".into(),
                qualified_name: qualified_name.into(),
                doc: doc.into(),
                ..Declaration::new(ChunkKind::Function, 1, 1)
            },
            text: "fn f() {}".into(),
        }
    }

    #[test]
    fn a_chunk_is_one_flat_json_object_in_its_field_order() {
        let c = chunk("a::f", "Does f.");
        let json = serde_json::to_string(&c).unwrap();
        assert_eq!(
            json,
            r#"{"id":1,"path":"src/a.rs","kind":"function","category":"code","lang":"rust","name":"f","qualified_name":"a::f","parent":"","signature":"","params":"","returns":"","doc":"Does f.","start_line":1,"end_line":1,"text":"fn f() {}"}"#
        );
        assert_eq!(serde_json::from_str::<Chunk>(&json).unwrap(), c);
    }

    #[test]
    fn the_embedding_hash_is_the_hash_of_the_embedded_text() {
        for c in [
            chunk("", ""),
            chunk("a::f", ""),
            chunk("a::f", "Does f."),
            chunk("", "Does f."),
        ] {
            assert_eq!(c.embedding_hash(), text_hash(&c.embedding_text()), "{c:?}");
        }
        assert_eq!(
            chunk("a::f", "Does f.").embedding_text(),
            "src/a.rs\na::f\nDoes f.\nfn f() {}"
        );
        // Same text, other place or name or doc: another key.
        let base = chunk("a::f", "");
        let mut moved = base.clone();
        moved.path = "src/b.rs".into();
        assert_ne!(base.embedding_hash(), moved.embedding_hash());
        assert_ne!(base.embedding_hash(), chunk("b::f", "").embedding_hash());
        assert_ne!(
            base.embedding_hash(),
            chunk("a::f", "Does f.").embedding_hash()
        );
        assert_eq!(base.text_hash(), moved.text_hash());
    }
}
