//! The AST context map (`ast_context_map`): per file, functions with parameters and
//! return types, classes with their methods, and imports — exportable as JSON.

use serde::{Deserialize, Serialize};

use crate::chunk::ChunkKind;
use crate::error::Result;
use crate::index::Index;
use crate::meta::FileOutline;
use crate::repomap::{self, RepoMap, RepoMapRequest};
use crate::symbols::Symbol;

/// A function or method.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct FunctionEntry {
    /// Name.
    pub name: String,
    /// Qualified name (symbol id within the file).
    pub qualified_name: String,
    /// Parameter list as written.
    pub params: String,
    /// Return type as written (empty when none is declared).
    pub returns: String,
    /// Declaration.
    pub signature: String,
    /// Doc comment.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub doc: String,
    /// Lines (1-based, inclusive).
    pub lines: [u32; 2],
}

/// A class, struct, enum, trait, interface or impl block with its methods.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ClassEntry {
    /// Name.
    pub name: String,
    /// Qualified name.
    pub qualified_name: String,
    /// `class`, `enum`, `interface`, `module`, `type`.
    pub kind: ChunkKind,
    /// Declaration.
    pub signature: String,
    /// Doc comment.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub doc: String,
    /// Lines.
    pub lines: [u32; 2],
    /// Methods defined inside.
    pub methods: Vec<FunctionEntry>,
}

/// One file of the map.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct FileEntry {
    /// Relative path.
    pub path: String,
    /// Language.
    pub lang: String,
    /// Import declarations.
    pub imports: Vec<String>,
    /// Free functions.
    pub functions: Vec<FunctionEntry>,
    /// Types with their methods.
    pub classes: Vec<ClassEntry>,
}

/// The AST context map.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct AstContextMap {
    /// Files with at least one symbol or import.
    pub files: Vec<FileEntry>,
}

fn function(s: &Symbol) -> FunctionEntry {
    let s = &s.decl;
    FunctionEntry {
        name: s.name.clone(),
        qualified_name: s.qualified_name.clone(),
        params: s.params.clone(),
        returns: s.returns.clone(),
        signature: s.signature.clone(),
        doc: s.doc.clone(),
        lines: [s.start_line, s.end_line],
    }
}

/// Builds the map from outlines.
pub fn build(outlines: &[FileOutline]) -> AstContextMap {
    let mut files = Vec::new();
    for o in outlines {
        if o.symbols.is_empty() && o.imports.is_empty() {
            continue;
        }
        let mut classes: Vec<ClassEntry> = Vec::new();
        let mut functions = Vec::new();
        for s in &o.symbols {
            match s.decl.kind {
                ChunkKind::Function => functions.push(function(s)),
                ChunkKind::Method => {
                    match classes
                        .iter_mut()
                        .rev()
                        .find(|c| c.qualified_name == s.decl.parent)
                    {
                        Some(c) => c.methods.push(function(s)),
                        None => functions.push(function(s)),
                    }
                }
                ChunkKind::Class
                | ChunkKind::Enum
                | ChunkKind::Interface
                | ChunkKind::Module
                | ChunkKind::Type => classes.push(ClassEntry {
                    name: s.decl.name.clone(),
                    qualified_name: s.decl.qualified_name.clone(),
                    kind: s.decl.kind,
                    signature: s.decl.signature.clone(),
                    doc: s.decl.doc.clone(),
                    lines: [s.decl.start_line, s.decl.end_line],
                    methods: Vec::new(),
                }),
                _ => {}
            }
        }
        files.push(FileEntry {
            path: o.path.clone(),
            lang: o.lang.clone(),
            imports: o.imports.iter().map(|i| i.text.clone()).collect(),
            functions,
            classes,
        });
    }
    AstContextMap { files }
}

impl Index {
    /// The AST context map of the given files (all indexed code files when empty).
    pub fn ast_context_map(&self, paths: &[String]) -> Result<AstContextMap> {
        let mut outlines = self.meta.outlines()?;
        if !paths.is_empty() {
            outlines.retain(|o| paths.contains(&o.path));
        }
        Ok(build(&outlines))
    }

    /// Every file's outline, read once, to build several maps from (a code workflow's stages
    /// each get a repo map and an AST context map).
    pub fn outlines(&self) -> Result<Outlines> {
        Ok(Outlines(self.meta.outlines()?))
    }
}

/// The outlines of every indexed file ([`Index::outlines`]).
#[derive(Clone, Debug, Default)]
pub struct Outlines(Vec<FileOutline>);

impl From<Vec<FileOutline>> for Outlines {
    fn from(outlines: Vec<FileOutline>) -> Self {
        Outlines(outlines)
    }
}

impl Outlines {
    /// The files outlined, in order.
    pub fn paths(&self) -> Vec<String> {
        self.0.iter().map(|o| o.path.clone()).collect()
    }

    /// The repo map for a request.
    pub fn repo_map(&self, req: &RepoMapRequest) -> RepoMap {
        repomap::build(&self.0, req)
    }

    /// The AST context map of these files, in this order (files not indexed are skipped).
    pub fn ast_context_map(&self, paths: &[String]) -> AstContextMap {
        let picked: Vec<FileOutline> = paths
            .iter()
            .filter_map(|p| self.0.iter().find(|o| &o.path == p).cloned())
            .collect();
        build(&picked)
    }
}
