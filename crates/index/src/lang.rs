//! Language detection by file name and the tree-sitter grammars.

use serde::{Deserialize, Serialize};

/// A language the index understands.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Lang {
    /// Rust.
    Rust,
    /// Python.
    Python,
    /// JavaScript (including JSX).
    JavaScript,
    /// TypeScript.
    TypeScript,
    /// TSX.
    Tsx,
    /// Go.
    Go,
    /// Java.
    Java,
    /// C.
    C,
    /// C++.
    Cpp,
    /// Markdown.
    Markdown,
    /// reStructuredText.
    Rst,
    /// Plain text and everything else that is text.
    Text,
}

impl Lang {
    /// Detects the language from a path's extension (or name).
    pub fn detect(path: &str) -> Lang {
        let name = path.rsplit('/').next().unwrap_or(path);
        let ext = match name.rsplit_once('.') {
            Some((_, e)) => e.to_ascii_lowercase(),
            None => return Lang::Text,
        };
        match ext.as_str() {
            "rs" => Lang::Rust,
            "py" | "pyi" => Lang::Python,
            "js" | "jsx" | "mjs" | "cjs" => Lang::JavaScript,
            "ts" | "mts" | "cts" => Lang::TypeScript,
            "tsx" => Lang::Tsx,
            "go" => Lang::Go,
            "java" => Lang::Java,
            "c" | "h" => Lang::C,
            "cc" | "cpp" | "cxx" | "c++" | "hpp" | "hh" | "hxx" | "h++" | "ipp" | "inl" => {
                Lang::Cpp
            }
            "md" | "markdown" | "mdx" => Lang::Markdown,
            "rst" => Lang::Rst,
            _ => Lang::Text,
        }
    }

    /// The stable name used on disk and in JSON.
    pub fn as_str(self) -> &'static str {
        match self {
            Lang::Rust => "rust",
            Lang::Python => "python",
            Lang::JavaScript => "javascript",
            Lang::TypeScript => "typescript",
            Lang::Tsx => "tsx",
            Lang::Go => "go",
            Lang::Java => "java",
            Lang::C => "c",
            Lang::Cpp => "cpp",
            Lang::Markdown => "markdown",
            Lang::Rst => "rst",
            Lang::Text => "text",
        }
    }

    /// Whether files of this language are parsed into symbols.
    pub fn is_code(self) -> bool {
        self.grammar().is_some()
    }

    /// Whether files of this language are split into heading-scoped sections.
    pub fn is_document(self) -> bool {
        matches!(self, Lang::Markdown | Lang::Rst)
    }

    /// The tree-sitter grammar, for code languages.
    pub fn grammar(self) -> Option<tree_sitter::Language> {
        Some(match self {
            Lang::Rust => tree_sitter_rust::LANGUAGE.into(),
            Lang::Python => tree_sitter_python::LANGUAGE.into(),
            Lang::JavaScript => tree_sitter_javascript::LANGUAGE.into(),
            Lang::TypeScript => tree_sitter_typescript::LANGUAGE_TYPESCRIPT.into(),
            Lang::Tsx => tree_sitter_typescript::LANGUAGE_TSX.into(),
            Lang::Go => tree_sitter_go::LANGUAGE.into(),
            Lang::Java => tree_sitter_java::LANGUAGE.into(),
            Lang::C => tree_sitter_c::LANGUAGE.into(),
            Lang::Cpp => tree_sitter_cpp::LANGUAGE.into(),
            Lang::Markdown | Lang::Rst | Lang::Text => return None,
        })
    }

    /// The separator used in qualified names.
    pub fn path_separator(self) -> &'static str {
        match self {
            Lang::Rust | Lang::Cpp => "::",
            _ => ".",
        }
    }
}
