//! How a long query is searched: its analysis ([`crate::query`]), the indexed files its paths
//! and stack frames resolve to, and the extra rankings fused with the whole-text ones — the
//! focused sub-query's BM25 ranking, the chunks of the named files (a frame's line first),
//! and the candidates whose symbol name the query names.

use std::collections::HashMap;

use crate::chunk::{Chunk, ChunkId, ChunkKind};
use crate::config::QueryEmbedding;
use crate::error::Result;
use crate::index::Index;
use crate::query::frames::innermost_first;
use crate::query::{QueryAnalysis, analyze, is_distinctive};

/// A path of the query matching more indexed files than this says nothing.
const MAX_MATCHES: usize = 3;
/// Names are compared without these wrappers.
const INDEX_STEMS: &[&str] = &["__init__", "mod", "index", "package-info"];

/// A query prepared for search.
#[derive(Clone, Debug)]
pub struct QueryPlan {
    /// The query as searched: without an issue's markup that names no code
    /// ([`crate::query::markup::strip`]).
    pub text: String,
    /// What the query names (with `files` resolved).
    pub analysis: QueryAnalysis,
    /// Chunks of the named files, best first (long queries).
    pub(crate) path_chunks: Vec<ChunkId>,
}

impl QueryPlan {
    /// Whether the query is searched as a long one.
    pub fn is_long(&self) -> bool {
        self.analysis.long
    }

    /// What the embedder reads for this query.
    pub fn embedding_text(&self, how: QueryEmbedding) -> &str {
        let text = match how {
            QueryEmbedding::Condensed => &self.analysis.condensed,
            QueryEmbedding::Lead => &self.analysis.lead,
            QueryEmbedding::Whole => &self.text,
        };
        if self.is_long() && !text.is_empty() {
            text
        } else {
            &self.text
        }
    }
}

/// The file name of a `/`-separated path without its extension.
fn stem(path: &str) -> &str {
    let file = path.rsplit('/').next().unwrap_or(path);
    file.split_once('.').map_or(file, |(s, _)| s)
}

/// `path` without its extension and without a trailing package file (`a/b/__init__.py` →
/// `a/b`).
fn module_of(path: &str) -> &str {
    let no_ext = match path.rsplit_once('.') {
        Some((a, b)) if !b.contains('/') => a,
        _ => path,
    };
    match no_ext.rsplit_once('/') {
        Some((dir, last)) if INDEX_STEMS.contains(&last) => dir,
        _ => no_ext,
    }
}

/// Indexed paths by file stem (and by directory name for package files).
struct PathTable(HashMap<String, Vec<String>>);

impl PathTable {
    fn new(paths: impl Iterator<Item = String>) -> Self {
        let mut by: HashMap<String, Vec<String>> = HashMap::new();
        for p in paths {
            let module = module_of(&p);
            let key = module.rsplit('/').next().unwrap_or(module).to_owned();
            let s = stem(&p).to_owned();
            if key != s {
                by.entry(key).or_default().push(p.clone());
            }
            by.entry(s).or_default().push(p);
        }
        PathTable(by)
    }

    /// The indexed files `path` (as written in a query) names: the longest suffix of its
    /// components (at least two when it has two) that ends at most [`MAX_MATCHES`] paths.
    /// A path with an extension matches files; one without matches modules (`a/b/c` →
    /// `a/b/c.py`, `a/b/c/__init__.py`, `a/b/c/mod.rs`), or, failing that, its parent
    /// module (`a.b.Class` written with dots).
    fn resolve(&self, path: &str) -> Vec<String> {
        let trimmed = path.trim_start_matches('/');
        let comps: Vec<&str> = trimmed.split('/').filter(|c| !c.is_empty()).collect();
        let Some(last) = comps.last() else {
            return Vec::new();
        };
        let has_ext = last.contains('.');
        if has_ext {
            return self.by_suffix(&comps, |p| p);
        }
        // Module paths: `a/b/c`, then `a/b` (the last segment may be a class or function).
        for end in (2..=comps.len()).rev() {
            let found = self.by_suffix(&comps[..end], module_of);
            if !found.is_empty() {
                return found;
            }
        }
        Vec::new()
    }

    fn by_suffix(&self, comps: &[&str], key: fn(&str) -> &str) -> Vec<String> {
        let Some(last) = comps.last() else {
            return Vec::new();
        };
        let Some(candidates) = self.0.get(stem(last)) else {
            return Vec::new();
        };
        let min = comps.len().min(2);
        for start in 0..=comps.len() - min {
            let suffix = comps[start..].join("/");
            let found: Vec<String> = candidates
                .iter()
                .filter(|c| {
                    let k = key(c);
                    k == suffix || k.ends_with(&format!("/{suffix}"))
                })
                .cloned()
                .collect();
            if !found.is_empty() {
                return if found.len() <= MAX_MATCHES {
                    found
                } else {
                    Vec::new()
                };
            }
        }
        Vec::new()
    }
}

impl Index {
    /// Analyses `query` ([`crate::query::analyze`]) with the configured threshold and
    /// resolves the paths and stack frames it names to indexed files.
    pub fn analyze_query(&self, query: &str) -> Result<QueryAnalysis> {
        Ok(self.plan(query)?.analysis)
    }

    /// Prepares `query` for search. A short query (or any, with `search.query.analyze`
    /// off) gets a plan that searches it as written.
    pub fn plan(&self, query: &str) -> Result<QueryPlan> {
        let cfg = &self.config().search.query;
        let text = crate::query::markup::strip(query).into_owned();
        let mut analysis = analyze(&text, cfg.long_words);
        if !cfg.analyze {
            analysis.long = false;
            analysis.focused.clear();
            analysis.condensed.clear();
            analysis.lead.clear();
        }
        let mut plan = QueryPlan {
            text,
            analysis,
            path_chunks: Vec::new(),
        };
        if !plan.is_long() || plan.analysis.paths.is_empty() {
            return Ok(plan);
        }
        let table = PathTable::new(self.meta.file_states()?.into_keys());
        let mut files: Vec<String> = Vec::new();
        let mut file_of: HashMap<String, Vec<String>> = HashMap::new();
        for p in &plan.analysis.paths {
            let found = table.resolve(p);
            for f in &found {
                if !files.contains(f) {
                    files.push(f.clone());
                }
            }
            file_of.insert(p.clone(), found);
        }
        // A frame's line first (the innermost symbol there), then the symbol its function
        // names, then each file's head.
        let mut out: Vec<ChunkId> = Vec::new();
        let mut push = |id: ChunkId| {
            if !out.contains(&id) {
                out.push(id);
            }
        };
        let mut chunks_by_file: HashMap<String, Vec<Chunk>> = HashMap::new();
        for f in innermost_first(&plan.analysis.frames) {
            for file in file_of.get(&f.path).into_iter().flatten() {
                let chunks = match chunks_by_file.get(file) {
                    Some(c) => c,
                    None => chunks_by_file
                        .entry(file.clone())
                        .or_insert(self.chunks_of(file)?),
                };
                if let Some(line) = f.line
                    && let Some(c) = innermost(chunks, line)
                {
                    push(c.id);
                }
                if let Some(func) = &f.function {
                    let name = func.rsplit(['.', ':']).next().unwrap_or(func);
                    for c in chunks
                        .iter()
                        .filter(|c| c.decl.kind.is_symbol() && c.decl.name == name)
                    {
                        push(c.id);
                    }
                }
            }
        }
        for file in &files {
            let chunks = match chunks_by_file.get(file) {
                Some(c) => c,
                None => chunks_by_file
                    .entry(file.clone())
                    .or_insert(self.chunks_of(file)?),
            };
            if let Some(c) = chunks
                .iter()
                .find(|c| c.decl.kind == ChunkKind::File)
                .or(chunks.first())
            {
                push(c.id);
            }
        }
        plan.path_chunks = out;
        plan.analysis.files = files;
        Ok(plan)
    }
}

/// The smallest symbol or section of `chunks` (one file's) containing `line`, else the
/// smallest chunk containing it.
fn innermost(chunks: &[Chunk], line: u32) -> Option<&Chunk> {
    let containing = chunks
        .iter()
        .filter(|c| c.decl.start_line <= line && line <= c.decl.end_line);
    let symbol = containing
        .clone()
        .filter(|c| c.decl.kind.is_symbol() || c.decl.kind == ChunkKind::Section)
        .min_by_key(|c| c.decl.end_line - c.decl.start_line);
    symbol.or_else(|| containing.min_by_key(|c| c.decl.end_line - c.decl.start_line))
}

/// The candidates whose symbol name (short, or the last segments of the qualified name)
/// is a distinctive identifier of the query ([`is_distinctive`]) or a stack frame's
/// function, earlier identifiers first, then in `order`.
pub(crate) fn name_matches(
    analysis: &QueryAnalysis,
    order: &[ChunkId],
    chunks: &HashMap<ChunkId, Chunk>,
) -> Vec<ChunkId> {
    // Stack frames' functions count whatever their shape (`total` in a traceback).
    let frame_names: Vec<&str> = analysis
        .frames
        .iter()
        .filter_map(|f| f.function.as_deref())
        .map(|f| f.rsplit(['.', ':']).next().unwrap_or(f))
        .collect();
    let strong = |ident: &str| is_distinctive(ident) || frame_names.contains(&ident);
    let mut ranked: Vec<(usize, usize, ChunkId)> = Vec::new();
    for (pos, id) in order.iter().enumerate() {
        let Some(c) = chunks.get(id) else { continue };
        if !c.decl.kind.is_symbol() {
            continue;
        }
        let hit = analysis.identifiers.iter().position(|ident| {
            strong(ident)
                && (c.decl.name == *ident
                    || c.decl.qualified_name == *ident
                    || qualified_tail_matches(&c.decl.qualified_name, ident))
        });
        if let Some(i) = hit {
            ranked.push((i, pos, *id));
        }
    }
    ranked.sort();
    ranked.into_iter().map(|(_, _, id)| id).collect()
}

/// Whether the qualified names agree on their last two segments (`Cart.total` and
/// `store::Cart::total`), whatever separators each uses.
fn qualified_tail_matches(a: &str, b: &str) -> bool {
    let tail = |s: &str| -> Vec<String> {
        s.split(['.', ':', '#'])
            .filter(|x| !x.is_empty())
            .rev()
            .take(2)
            .map(str::to_owned)
            .collect()
    };
    let (ta, tb) = (tail(a), tail(b));
    ta.len() == 2 && ta == tb
}

#[cfg(test)]
mod tests {
    use super::*;

    fn table() -> PathTable {
        PathTable::new(
            [
                "src/app/fields.py",
                "src/app/models/__init__.py",
                "src/other/fields.py",
                "crates/x/src/lib.rs",
                "crates/y/src/lib.rs",
                "com/acme/store/Cart.java",
                "web/src/csv/parse.js",
            ]
            .into_iter()
            .map(String::from),
        )
    }

    #[test]
    fn paths_resolve_by_their_longest_suffix() {
        let t = table();
        assert_eq!(t.resolve("/venv/lib/app/fields.py"), ["src/app/fields.py"]);
        assert_eq!(t.resolve("/app/src/csv/parse.js"), ["web/src/csv/parse.js"]);
        assert_eq!(
            t.resolve("com/acme/store/Cart.java"),
            ["com/acme/store/Cart.java"]
        );
        // Two files of that name and nothing more specific: both.
        assert_eq!(
            t.resolve("fields.py"),
            ["src/app/fields.py", "src/other/fields.py"]
        );
        assert!(t.resolve("src/missing.py").is_empty());
        // Modules written with dots.
        assert_eq!(t.resolve("app/fields"), ["src/app/fields.py"]);
        assert_eq!(t.resolve("app/models"), ["src/app/models/__init__.py"]);
        assert_eq!(t.resolve("app/fields/ColorField"), ["src/app/fields.py"]);
        assert!(t.resolve("lib").is_empty());
    }

    #[test]
    fn qualified_tails() {
        assert!(qualified_tail_matches("store::Cart::total", "Cart.total"));
        assert!(!qualified_tail_matches("store::Bag::total", "Cart.total"));
    }
}
