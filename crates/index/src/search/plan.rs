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
#[derive(Clone, Debug, Default)]
pub struct QueryPlan {
    /// What the query names (with `files` resolved).
    pub analysis: QueryAnalysis,
    /// Chunks of the named files, best first (long queries).
    pub(crate) path_chunks: Vec<ChunkId>,
    /// The indexed files the query's paths and stack frames name, with how they name them:
    /// the learned ranker's path and frame features (`rank::features`).
    pub named: Vec<NamedFile>,
}

/// An indexed file the query names by a path or a stack frame.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct NamedFile {
    /// The indexed path.
    pub path: String,
    /// 1 / the number of indexed files the most specific path naming it resolved to (1: the
    /// query names this file alone; `fields.py` matching three files gives each 1/3).
    pub specificity: f32,
    /// Its rank (0-based) among the files stack frames name, the innermost frame's first.
    pub frame_rank: Option<usize>,
    /// The lines stack frames point at in it.
    pub lines: Vec<u32>,
    /// The functions of the frames in it (last segment: `total` of `Invoice.total`).
    pub functions: Vec<String>,
}

impl QueryPlan {
    /// Whether the query is searched as a long one.
    pub fn is_long(&self) -> bool {
        self.analysis.long
    }

    /// What the embedder reads for this query.
    pub fn embedding_text<'a>(&'a self, query: &'a str, how: QueryEmbedding) -> &'a str {
        let text = match how {
            QueryEmbedding::Condensed => &self.analysis.condensed,
            QueryEmbedding::Lead => &self.analysis.lead,
            QueryEmbedding::Whole => query,
        };
        if self.is_long() && !text.is_empty() {
            text
        } else {
            query
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
        let mut analysis = analyze(query, cfg.long_words);
        if !cfg.analyze {
            analysis.long = false;
            analysis.focused.clear();
            analysis.condensed.clear();
            analysis.lead.clear();
        }
        let mut plan = QueryPlan {
            analysis,
            ..QueryPlan::default()
        };
        // Paths are resolved for short queries too (the ranker's path features read them);
        // only a long query adds the paths ranking to the fusion.
        if !cfg.analyze || plan.analysis.paths.is_empty() {
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
        plan.named = named_files(&plan.analysis, &files, &file_of);
        plan.analysis.files = files;
        if !plan.is_long() {
            return Ok(plan);
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
                    let name = function_name(func);
                    for c in chunks
                        .iter()
                        .filter(|c| c.kind.is_symbol() && c.name == name)
                    {
                        push(c.id);
                    }
                }
            }
        }
        for file in &plan.analysis.files {
            let chunks = match chunks_by_file.get(file) {
                Some(c) => c,
                None => chunks_by_file
                    .entry(file.clone())
                    .or_insert(self.chunks_of(file)?),
            };
            if let Some(c) = chunks
                .iter()
                .find(|c| c.kind == ChunkKind::File)
                .or(chunks.first())
            {
                push(c.id);
            }
        }
        plan.path_chunks = out;
        Ok(plan)
    }
}

/// The last segment of a frame's function (`total` of `shop.Invoice.total`, `f` of `a::f`).
fn function_name(function: &str) -> &str {
    function.rsplit(['.', ':']).next().unwrap_or(function)
}

/// What the query says of each of `files` (resolved from its paths by `file_of`).
fn named_files(
    analysis: &QueryAnalysis,
    files: &[String],
    file_of: &HashMap<String, Vec<String>>,
) -> Vec<NamedFile> {
    let mut named: Vec<NamedFile> = files
        .iter()
        .map(|f| NamedFile {
            path: f.clone(),
            ..NamedFile::default()
        })
        .collect();
    for found in file_of.values() {
        let specificity = 1.0 / found.len().max(1) as f32;
        for n in named.iter_mut().filter(|n| found.contains(&n.path)) {
            n.specificity = n.specificity.max(specificity);
        }
    }
    let mut frame_files = 0;
    for f in innermost_first(&analysis.frames) {
        for file in file_of.get(&f.path).into_iter().flatten() {
            let Some(n) = named.iter_mut().find(|n| n.path == *file) else {
                continue;
            };
            if n.frame_rank.is_none() {
                n.frame_rank = Some(frame_files);
                frame_files += 1;
            }
            n.lines.extend(f.line);
            if let Some(func) = &f.function {
                n.functions.push(function_name(func).to_owned());
            }
        }
    }
    named
}

/// The smallest symbol or section of `chunks` (one file's) containing `line`, else the
/// smallest chunk containing it.
fn innermost(chunks: &[Chunk], line: u32) -> Option<&Chunk> {
    let containing = chunks
        .iter()
        .filter(|c| c.start_line <= line && line <= c.end_line);
    let symbol = containing
        .clone()
        .filter(|c| c.kind.is_symbol() || c.kind == ChunkKind::Section)
        .min_by_key(|c| c.end_line - c.start_line);
    symbol.or_else(|| containing.min_by_key(|c| c.end_line - c.start_line))
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
        .map(function_name)
        .collect();
    let strong = |ident: &str| is_distinctive(ident) || frame_names.contains(&ident);
    let mut ranked: Vec<(usize, usize, ChunkId)> = Vec::new();
    for (pos, id) in order.iter().enumerate() {
        let Some(c) = chunks.get(id) else { continue };
        if !c.kind.is_symbol() {
            continue;
        }
        let hit = analysis.identifiers.iter().position(|ident| {
            strong(ident)
                && (c.name == *ident
                    || c.qualified_name == *ident
                    || qualified_tail_matches(&c.qualified_name, ident))
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
    fn named_files_rank_frames_innermost_first() {
        let report = "Saving fails\n\nTraceback (most recent call last):\n  \
            File \"/srv/app/views.py\", line 3, in render\n  \
            File \"/srv/app/fields.py\", line 10, in Invoice.total\n\
            KeyError: 'x'\nSee also fields.py.\n";
        let analysis = analyze(report, 24);
        let t = table();
        let mut files: Vec<String> = Vec::new();
        let mut file_of: HashMap<String, Vec<String>> = HashMap::new();
        for p in &analysis.paths {
            let found = t.resolve(p);
            for f in &found {
                if !files.contains(f) {
                    files.push(f.clone());
                }
            }
            file_of.insert(p.clone(), found);
        }
        let named = named_files(&analysis, &files, &file_of);
        let fields = named
            .iter()
            .find(|n| n.path == "src/app/fields.py")
            .unwrap();
        // The innermost frame (printed last in a Python traceback) ranks first; the frame's
        // path names it alone even though `fields.py` also matches another file.
        assert_eq!(fields.frame_rank, Some(0));
        assert_eq!(fields.specificity, 1.0);
        assert_eq!(fields.lines, [10]);
        assert_eq!(fields.functions, ["total"]);
        let other = named
            .iter()
            .find(|n| n.path == "src/other/fields.py")
            .unwrap();
        assert_eq!(other.frame_rank, None);
        assert_eq!(other.specificity, 0.5);
    }

    #[test]
    fn qualified_tails() {
        assert!(qualified_tail_matches("store::Cart::total", "Cart.total"));
        assert!(!qualified_tail_matches("store::Bag::total", "Cart.total"));
    }
}
