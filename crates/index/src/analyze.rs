//! Turns one file into chunks: symbols for code, sections for documents, windows for other
//! text; plus the definitions, references and imports the repo map and AST context map use.

use std::collections::HashMap;

use crate::chunk::{Category, Chunk, ChunkKind, Declaration, chunk_id};
use crate::docs;
use crate::lang::Lang;
use crate::symbols::{self, Import, Symbol};

/// Longest symbol kept in one chunk; longer bodies are split into windows of this many lines.
pub const MAX_SYMBOL_LINES: usize = 150;
/// Longest container header (class/impl/trait up to its first member) kept as one chunk.
const MAX_HEADER_LINES: usize = 80;
/// Lines of a source file's head (module docs, imports) in its file chunk.
const FILE_HEAD_LINES: usize = 40;

/// Everything the index stores for one file.
#[derive(Clone, Debug, Default)]
pub struct FileAnalysis {
    /// Retrievable chunks.
    pub chunks: Vec<Chunk>,
    /// Symbols (code files with AST parsing on).
    pub symbols: Vec<Symbol>,
    /// Imports (code files).
    pub imports: Vec<Import>,
    /// Identifier references by name (code files).
    pub refs: HashMap<String, u32>,
}

/// Analyses `source` at `path` (relative, `/`-separated). With `ast` off, code files are
/// indexed as text windows instead of symbols.
pub fn analyze(path: &str, source: &str, ast: bool) -> FileAnalysis {
    let lang = Lang::detect(path);
    let lines: Vec<&str> = source.lines().collect();
    if lang.is_code()
        && ast
        && let Some(fs) = symbols::extract(lang, source)
    {
        let chunks = code_chunks(path, lang, &lines, &fs.symbols, &fs.imports);
        return FileAnalysis {
            chunks,
            symbols: fs.symbols,
            imports: fs.imports,
            refs: fs.refs,
        };
    }
    if looks_generated(&lines) {
        return FileAnalysis::default();
    }
    let sections = docs::sections(lang, path, source);
    let category = if lang.is_document() || is_prose(path) {
        let heads: Vec<&str> = sections.iter().map(|s| s.heading.as_str()).collect();
        docs::classify(path, &heads)
    } else if lang.is_code() {
        Category::Code
    } else {
        Category::Other
    };
    let kind = if lang.is_document() {
        ChunkKind::Section
    } else {
        ChunkKind::Text
    };
    let chunks = sections
        .into_iter()
        .map(|s| {
            let text = join(&lines, s.start_line, s.end_line);
            Chunk {
                id: chunk_id(path, kind, &s.path, s.start_line),
                path: path.to_string(),
                category,
                lang: lang.as_str().to_string(),
                decl: Declaration {
                    name: s.heading,
                    qualified_name: s.path,
                    parent: s.parent,
                    ..Declaration::new(kind, s.start_line, s.end_line)
                },
                text,
            }
        })
        .filter(|c| !c.text.trim().is_empty())
        .collect();
    FileAnalysis {
        chunks,
        ..FileAnalysis::default()
    }
}

fn is_prose(path: &str) -> bool {
    let lower = path.to_ascii_lowercase();
    lower.ends_with(".txt") || lower.ends_with(".adoc") || lower.ends_with(".org")
}

/// Minified or data-like files: very long lines carry no retrievable structure.
fn looks_generated(lines: &[&str]) -> bool {
    let total: usize = lines.iter().map(|l| l.len()).sum();
    !lines.is_empty() && (total / lines.len() > 300 || lines.iter().any(|l| l.len() > 5000))
}

/// Lines `start..=end` (1-based) joined by `\n`.
pub fn join(lines: &[&str], start: u32, end: u32) -> String {
    let s = (start as usize).saturating_sub(1).min(lines.len());
    let e = (end as usize).min(lines.len()).max(s);
    lines[s..e].join("\n")
}

fn code_chunks(
    path: &str,
    lang: Lang,
    lines: &[&str],
    symbols: &[Symbol],
    imports: &[Import],
) -> Vec<Chunk> {
    let mut out = Vec::with_capacity(symbols.len() + 1);
    let base = |kind: ChunkKind| Chunk {
        id: chunk_id(path, kind, "", 0),
        path: path.to_string(),
        category: Category::Code,
        lang: lang.as_str().to_string(),
        decl: Declaration::new(kind, 1, 1),
        text: String::new(),
    };
    // The file chunk: head of the file plus an outline of its top-level symbols.
    if !lines.is_empty() {
        let first_sym = symbols
            .first()
            .map_or(lines.len() + 1, |s| s.decl.start_line as usize);
        let head_end = if first_sym > 3 {
            (first_sym - 1).min(FILE_HEAD_LINES)
        } else {
            lines.len().min(10)
        };
        let outline: Vec<String> = symbols
            .iter()
            .filter(|s| s.decl.parent.is_empty())
            .map(|s| format!("{} {}", s.decl.kind.as_str(), s.decl.name))
            .collect();
        let mut c = base(ChunkKind::File);
        c.decl.name = path.rsplit('/').next().unwrap_or(path).to_string();
        c.decl.qualified_name = path.to_string();
        c.decl.doc = outline.join("\n");
        c.decl.signature = imports
            .iter()
            .map(|i| i.text.as_str())
            .take(50)
            .collect::<Vec<_>>()
            .join("\n");
        c.decl.end_line = head_end as u32;
        c.text = join(lines, 1, head_end as u32);
        c.id = chunk_id(path, ChunkKind::File, path, 1);
        if !c.text.trim().is_empty() || !c.decl.doc.is_empty() {
            out.push(c);
        }
    }
    for (i, sym) in symbols.iter().enumerate() {
        let s = &sym.decl;
        let mut end = s.end_line;
        if sym.container {
            // The header of a container: up to its first member.
            if let Some(child) = symbols[i + 1..]
                .iter()
                .find(|c| c.decl.start_line > s.start_line && c.decl.start_line <= s.end_line)
            {
                end = child.decl.start_line.saturating_sub(1).max(s.start_line);
            }
            end = end.min(s.start_line + MAX_HEADER_LINES as u32 - 1);
        }
        let mut start = s.start_line;
        let mut part = 0;
        while start <= end {
            let e = end.min(start + MAX_SYMBOL_LINES as u32 - 1);
            let mut c = base(s.kind);
            c.decl = Declaration {
                start_line: start,
                end_line: e,
                ..s.clone()
            };
            if part > 0 {
                // The doc comment goes with the first part only.
                c.decl.doc.clear();
            }
            c.text = join(lines, start, e);
            c.id = chunk_id(path, s.kind, &s.qualified_name, start);
            out.push(c);
            part += 1;
            start = e + 1;
        }
    }
    out
}
