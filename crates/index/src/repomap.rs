//! The repo map: which definitions matter most to the files in play, rendered as a
//! token-budgeted outline. Files are nodes of a reference graph (an edge from each file that
//! mentions an identifier to each file defining it); PageRank, personalised towards the files
//! in play, ranks the files, and each file's rank flows along its edges to the definitions it
//! references — the approach Aider describes for its repository map.

use std::collections::{HashMap, HashSet};

use serde::Serialize;

use crate::chunk::estimate_tokens;
use crate::error::Result;
use crate::index::Index;
use crate::meta::FileOutline;

/// A repo-map request.
#[derive(Clone, Debug, Default)]
pub struct RepoMapRequest {
    /// Files being edited or discussed (relative paths); ranking is personalised to them and
    /// they are left out of the map.
    pub files_in_play: Vec<String>,
    /// Identifiers mentioned in the task; their definitions are favoured.
    pub mentioned: Vec<String>,
    /// Token budget for the rendered map.
    pub budget_tokens: usize,
}

/// A ranked definition.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct RankedDef {
    /// File.
    pub path: String,
    /// Identifier.
    pub name: String,
    /// Rank (sums to at most 1 over all definitions).
    pub rank: f64,
}

/// The rendered map.
#[derive(Clone, Debug, Default, Serialize)]
pub struct RepoMap {
    /// The outline text.
    pub text: String,
    /// Estimated tokens of `text`.
    pub tokens: usize,
    /// Files by PageRank, best first.
    pub file_ranks: Vec<(String, f64)>,
    /// Definitions included, best first.
    pub definitions: Vec<RankedDef>,
}

/// Weighted PageRank with a personalisation vector (teleport distribution); dangling mass
/// also goes to the personalisation. `edges[i]` lists (target, weight) of node `i`.
pub fn pagerank(
    edges: &[Vec<(usize, f64)>],
    personalization: &[f64],
    damping: f64,
    iterations: usize,
) -> Vec<f64> {
    let n = edges.len();
    if n == 0 {
        return Vec::new();
    }
    let psum: f64 = personalization.iter().sum();
    let p: Vec<f64> = if psum > 0.0 {
        personalization.iter().map(|x| x / psum).collect()
    } else {
        vec![1.0 / n as f64; n]
    };
    let out_w: Vec<f64> = edges.iter().map(|e| e.iter().map(|x| x.1).sum()).collect();
    let mut r = p.clone();
    for _ in 0..iterations {
        let mut next = vec![0.0; n];
        let mut dangling = 0.0;
        for i in 0..n {
            if out_w[i] <= 0.0 {
                dangling += r[i];
                continue;
            }
            for (j, w) in &edges[i] {
                next[*j] += damping * r[i] * w / out_w[i];
            }
        }
        for j in 0..n {
            next[j] += (1.0 - damping + damping * dangling) * p[j];
        }
        let delta: f64 = next.iter().zip(&r).map(|(a, b)| (a - b).abs()).sum();
        r = next;
        if delta < 1e-9 {
            break;
        }
    }
    r
}

fn is_distinctive(name: &str) -> bool {
    name.len() >= 8 && (name.contains('_') || name.chars().skip(1).any(|c| c.is_uppercase()))
}

/// Ranks definitions from file outlines.
pub fn rank(
    outlines: &[FileOutline],
    req: &RepoMapRequest,
) -> (Vec<(String, f64)>, Vec<RankedDef>) {
    let n = outlines.len();
    let index: HashMap<&str, usize> = outlines
        .iter()
        .enumerate()
        .map(|(i, o)| (o.path.as_str(), i))
        .collect();
    let mut defines: HashMap<&str, Vec<usize>> = HashMap::new();
    for (i, o) in outlines.iter().enumerate() {
        let mut names: HashSet<&str> = HashSet::new();
        for s in &o.symbols {
            names.insert(s.decl.name.as_str());
        }
        for name in names {
            defines.entry(name).or_default().push(i);
        }
    }
    let mentioned: HashSet<&str> = req.mentioned.iter().map(String::as_str).collect();
    let in_play: HashSet<usize> = req
        .files_in_play
        .iter()
        .filter_map(|p| index.get(p.as_str()).copied())
        .collect();
    // (referencing file, defining file, identifier) -> weight
    let mut edge_w: HashMap<(usize, usize), f64> = HashMap::new();
    let mut def_edges: Vec<(usize, usize, &str, f64)> = Vec::new();
    for (r, o) in outlines.iter().enumerate() {
        for (ident, count) in &o.refs {
            let Some(definers) = defines.get(ident.as_str()) else {
                continue;
            };
            let mut mul = 1.0;
            if mentioned.contains(ident.as_str()) {
                mul *= 10.0;
            }
            if is_distinctive(ident) {
                mul *= 10.0;
            }
            if ident.starts_with('_') {
                mul *= 0.1;
            }
            if definers.len() > 5 {
                mul *= 0.1;
            }
            if in_play.contains(&r) {
                mul *= 50.0;
            }
            let w = mul * (*count as f64).sqrt();
            for &d in definers {
                if d == r {
                    continue;
                }
                *edge_w.entry((r, d)).or_insert(0.0) += w;
                def_edges.push((r, d, ident.as_str(), w));
            }
        }
    }
    let mut edges: Vec<Vec<(usize, f64)>> = vec![Vec::new(); n];
    for ((r, d), w) in &edge_w {
        edges[*r].push((*d, *w));
    }
    for e in &mut edges {
        e.sort_by_key(|x| x.0);
    }
    let mut pers = vec![0.0; n];
    for &i in &in_play {
        pers[i] = 1.0;
    }
    // Files whose path mentions an identifier of the task get some teleport mass too.
    for (i, o) in outlines.iter().enumerate() {
        let lower = o.path.to_ascii_lowercase();
        if req
            .mentioned
            .iter()
            .any(|m| m.len() >= 4 && lower.contains(&m.to_ascii_lowercase()))
        {
            pers[i] += 0.5;
        }
    }
    let pr = pagerank(&edges, &pers, 0.85, 50);
    let out_w: Vec<f64> = edges.iter().map(|e| e.iter().map(|x| x.1).sum()).collect();
    let mut def_rank: HashMap<(usize, &str), f64> = HashMap::new();
    for (r, d, ident, w) in def_edges {
        if out_w[r] > 0.0 {
            *def_rank.entry((d, ident)).or_insert(0.0) += pr[r] * w / out_w[r];
        }
    }
    let mut defs: Vec<RankedDef> = def_rank
        .into_iter()
        .filter(|((d, _), _)| !in_play.contains(d))
        .map(|((d, name), rank)| RankedDef {
            path: outlines[d].path.clone(),
            name: name.to_string(),
            rank,
        })
        .collect();
    defs.sort_by(|a, b| {
        b.rank
            .total_cmp(&a.rank)
            .then_with(|| a.path.cmp(&b.path))
            .then_with(|| a.name.cmp(&b.name))
    });
    let mut files: Vec<(String, f64)> = outlines
        .iter()
        .enumerate()
        .map(|(i, o)| (o.path.clone(), pr[i]))
        .collect();
    files.sort_by(|a, b| b.1.total_cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
    (files, defs)
}

/// Renders the first `k` definitions grouped by file, each with its signature lines.
fn render(outlines: &[FileOutline], defs: &[RankedDef], k: usize) -> String {
    let by_path: HashMap<&str, &FileOutline> =
        outlines.iter().map(|o| (o.path.as_str(), o)).collect();
    let mut order: Vec<&str> = Vec::new();
    let mut wanted: HashMap<&str, HashSet<&str>> = HashMap::new();
    for d in defs.iter().take(k) {
        if !wanted.contains_key(d.path.as_str()) {
            order.push(d.path.as_str());
        }
        wanted
            .entry(d.path.as_str())
            .or_default()
            .insert(d.name.as_str());
    }
    let mut out = String::new();
    for path in order {
        let Some(o) = by_path.get(path) else { continue };
        let names = &wanted[path];
        out.push_str(path);
        out.push_str(":\n");
        for s in &o.symbols {
            // Show the wanted symbols and the containers that hold them.
            let holds_wanted = s.container
                && o.symbols.iter().any(|c| {
                    c.decl.parent == s.decl.qualified_name && names.contains(c.decl.name.as_str())
                });
            if names.contains(s.decl.name.as_str()) || holds_wanted {
                let depth = s.decl.qualified_name.matches("::").count()
                    + if o.lang == "rust" || o.lang == "cpp" {
                        0
                    } else {
                        s.decl.qualified_name.matches('.').count()
                    };
                out.push_str(&format!(
                    "{:>5}│{}{}\n",
                    s.decl.start_line,
                    "  ".repeat(depth),
                    if s.decl.signature.is_empty() {
                        &s.decl.name
                    } else {
                        &s.decl.signature
                    }
                ));
            }
        }
    }
    out
}

/// Builds the map: the largest prefix of ranked definitions whose rendering fits the budget.
pub fn build(outlines: &[FileOutline], req: &RepoMapRequest) -> RepoMap {
    let (file_ranks, defs) = rank(outlines, req);
    let budget = req.budget_tokens.max(1);
    let (mut lo, mut hi) = (0usize, defs.len());
    // Binary search on the number of definitions.
    while lo < hi {
        let mid = (lo + hi).div_ceil(2);
        if estimate_tokens(&render(outlines, &defs, mid)) <= budget {
            lo = mid;
        } else {
            hi = mid - 1;
        }
    }
    let text = render(outlines, &defs, lo);
    RepoMap {
        tokens: estimate_tokens(&text),
        text,
        file_ranks,
        definitions: defs.into_iter().take(lo).collect(),
    }
}

impl Index {
    /// The repo map for a request.
    pub fn repo_map(&self, req: &RepoMapRequest) -> Result<RepoMap> {
        let outlines = self.meta.outlines()?;
        Ok(build(&outlines, req))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pagerank_follows_weights_and_personalisation() {
        // 0 -> 1 (heavy), 0 -> 2 (light); personalised on 0.
        let edges = vec![vec![(1, 9.0), (2, 1.0)], vec![], vec![]];
        let r = pagerank(&edges, &[1.0, 0.0, 0.0], 0.85, 100);
        assert!(r[1] > r[2] * 3.0, "{r:?}");
        let sum: f64 = r.iter().sum();
        assert!((sum - 1.0).abs() < 1e-6);
        // Personalised on 2 instead: 2 outranks 1.
        let r2 = pagerank(&edges, &[0.0, 0.0, 1.0], 0.85, 100);
        assert!(r2[2] > r2[1]);
    }
}
