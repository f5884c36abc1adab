//! The unit of retrieval: a chunk of a file (a symbol, a document section or a window of text)
//! with its attribution.

use serde::{Deserialize, Serialize};

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

/// One retrievable piece of a file, with everything needed to attribute and ground it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Chunk {
    /// Stable id.
    pub id: ChunkId,
    /// Path relative to the workspace root, `/`-separated.
    pub path: String,
    /// What the chunk is.
    pub kind: ChunkKind,
    /// Which corpus it belongs to.
    pub category: Category,
    /// Language (`rust`, `python`, …, `markdown`, `text`).
    pub lang: String,
    /// Short name (symbol name or section heading).
    pub name: String,
    /// Symbol id: the qualified name (`module::Type::method`), or for sections the section path
    /// (`doc > section > subsection`).
    pub qualified_name: String,
    /// The enclosing symbol's qualified name or the parent section path, empty at top level.
    pub parent: String,
    /// The declaration line(s) without the body.
    pub signature: String,
    /// The parameter list as written (functions and methods).
    pub params: String,
    /// The return type as written (functions and methods).
    pub returns: String,
    /// The doc comment or docstring.
    pub doc: String,
    /// First line of `text`, 1-based.
    pub start_line: u32,
    /// Last line of `text`, 1-based, inclusive.
    pub end_line: u32,
    /// The exact text of lines `start_line..=end_line` as indexed.
    pub text: String,
}

impl Chunk {
    /// A 64-bit hash of the chunk text (what the grounding check and deduplication use).
    pub fn text_hash(&self) -> i64 {
        text_hash(&self.text)
    }

    /// The pieces of [`Chunk::embedding_text`], in order.
    fn embedding_parts(&self) -> impl Iterator<Item = &str> {
        let name =
            (!self.qualified_name.is_empty()).then_some([self.qualified_name.as_str(), "\n"]);
        let doc = (!self.doc.is_empty() && !self.text.contains(self.doc.as_str()))
            .then_some([self.doc.as_str(), "\n"]);
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
            kind: ChunkKind::Function,
            category: Category::Code,
            lang: "rust".into(),
            name: "f".into(),
            qualified_name: qualified_name.into(),
            parent: String::new(),
            signature: String::new(),
            params: String::new(),
            returns: String::new(),
            doc: doc.into(),
            start_line: 1,
            end_line: 1,
            text: "fn f() {}".into(),
        }
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
