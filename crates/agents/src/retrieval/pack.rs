//! Fusion and packing per stage: the ranked lists of every (source, query) pair that applies
//! to the stage fused with weighted reciprocal rank fusion, deduplicated, filtered by the
//! stage-aware hints, and packed greedily into the stage's token budget; and the pack's
//! rendering for a prompt.

use std::collections::{HashMap, HashSet};
use std::fmt::Write as _;

use trellis_index::chunk::{estimate_tokens, text_hash};
use trellis_index::retrieve::is_test_path;

use super::{PackedItem, StageMaps, StagePack};

/// Characters of a query shown in the rendered pack.
const SHOWN_QUERY_CHARS: usize = 160;

/// The RRF constant (as in the index's hybrid search).
const RRF_K: f32 = 60.0;
/// Below this many tokens left, packing stops.
const MIN_ITEM_TOKENS: usize = 16;

/// One ranked list and its weight (the source's priority weight).
pub(crate) struct RankedList<'a> {
    pub(crate) weight: f32,
    pub(crate) items: &'a [PackedItem],
}

/// Fuses ranked lists: `score = Σ weight / (k + rank)` per item (same path and lines), the
/// item attributed to the source that ranked it best. Best first.
pub(crate) fn fuse(lists: &[RankedList<'_>]) -> Vec<PackedItem> {
    let mut by_key: HashMap<(String, u32, u32), (PackedItem, f32, f32)> = HashMap::new();
    for list in lists {
        for (rank, it) in list.items.iter().enumerate() {
            let c = list.weight / (RRF_K + rank as f32 + 1.0);
            let key = (it.path.clone(), it.start_line, it.end_line);
            match by_key.get_mut(&key) {
                Some((item, total, best)) => {
                    *total += c;
                    if c > *best {
                        *best = c;
                        item.source.clone_from(&it.source);
                    }
                }
                None => {
                    by_key.insert(key, (it.clone(), c, c));
                }
            }
        }
    }
    let mut out: Vec<PackedItem> = by_key
        .into_values()
        .map(|(mut item, total, _)| {
            item.score = total;
            item
        })
        .collect();
    out.sort_by(|a, b| {
        b.score
            .total_cmp(&a.score)
            .then_with(|| a.path.cmp(&b.path))
            .then(a.start_line.cmp(&b.start_line))
    });
    out
}

/// The token cost of an item in a prompt (text, path and framing), as the index counts it.
pub(crate) fn item_tokens(item: &PackedItem) -> usize {
    estimate_tokens(&item.text) + estimate_tokens(&item.path) + 4
}

/// What packing left out.
#[derive(Debug, Default)]
pub(crate) struct Packing {
    pub(crate) items: Vec<PackedItem>,
    pub(crate) used: usize,
    pub(crate) duplicates: usize,
    pub(crate) tests_avoided: usize,
    pub(crate) over_budget: usize,
}

/// Packs `pinned` items (failure regions; always first) then `ranked` ones into `budget`.
/// Dropped: the same text twice, an item inside (or, for pinned regions, overlapping) a kept
/// item of the same file, test files when `drop_tests`, whatever does not fit.
pub(crate) fn pack(
    pinned: Vec<PackedItem>,
    ranked: Vec<PackedItem>,
    budget: usize,
    drop_tests: bool,
) -> Packing {
    let mut p = Packing::default();
    let mut texts: HashSet<i64> = HashSet::new();
    let mut pinned_ranges: Vec<(String, u32, u32)> = Vec::new();
    let mut kept_ranges: Vec<(String, u32, u32)> = Vec::new();
    let mut remaining = budget;
    let n_pinned = pinned.len();
    for (i, mut item) in pinned.into_iter().chain(ranked).enumerate() {
        let is_pinned = i < n_pinned;
        if !is_pinned && drop_tests && is_test_path(&item.path) {
            p.tests_avoided += 1;
            continue;
        }
        // Items without lines (web pages, advisories, language-server signatures) are not
        // regions of a file: only their text can repeat.
        let lined = item.start_line > 0;
        let inside = lined
            && kept_ranges
                .iter()
                .any(|(f, s, e)| *f == item.path && *s <= item.start_line && item.end_line <= *e);
        let overlaps_pinned = lined
            && pinned_ranges
                .iter()
                .any(|(f, s, e)| *f == item.path && item.start_line <= *e && *s <= item.end_line);
        if inside || overlaps_pinned || !texts.insert(text_hash(&item.text)) {
            p.duplicates += 1;
            continue;
        }
        item.tokens = item_tokens(&item);
        if remaining < MIN_ITEM_TOKENS || item.tokens > remaining {
            p.over_budget += 1;
            continue;
        }
        remaining -= item.tokens;
        let range = (item.path.clone(), item.start_line, item.end_line);
        if is_pinned {
            pinned_ranges.push(range.clone());
        }
        kept_ranges.push(range);
        p.items.push(item);
    }
    p.used = budget - remaining;
    p
}

/// The language tag of a fence showing `path`'s code.
pub(crate) fn fence_lang(path: &str) -> &'static str {
    let ext = path.rsplit_once('.').map_or("", |(_, e)| e);
    match ext {
        "rs" => "rust",
        "py" => "python",
        "js" | "mjs" | "cjs" | "jsx" => "javascript",
        "ts" | "tsx" => "typescript",
        "go" => "go",
        "java" => "java",
        "kt" => "kotlin",
        "c" | "h" => "c",
        "cc" | "cpp" | "hpp" | "cxx" => "cpp",
        "cs" => "csharp",
        "rb" => "ruby",
        "php" => "php",
        "swift" => "swift",
        "sh" | "bash" => "bash",
        "md" | "markdown" => "markdown",
        "rst" => "rst",
        "toml" => "toml",
        "yaml" | "yml" => "yaml",
        "json" => "json",
        _ => "",
    }
}

impl StagePack {
    /// Markdown for a prompt: a heading with the budget, the queries, sources not searched,
    /// then one fenced block per item headed `path:start-end (symbol|section) — source`.
    pub fn render(&self) -> String {
        render(self)
    }
}

/// Markdown for a prompt (see [`StagePack::render`]).
pub(crate) fn render(pack: &StagePack) -> String {
    let mut s = String::new();
    let mode = if pack.mode == super::RetrievalMode::Adaptive {
        format!("enriched after failure, round {}", pack.round)
    } else {
        "prepared before the stage".to_owned()
    };
    let _ = writeln!(
        s,
        "## Retrieved context for stage `{}` ({mode}; {} items, {}/{} tokens)",
        pack.stage,
        pack.items.len(),
        pack.used_tokens,
        pack.budget_tokens
    );
    if !pack.queries.is_empty() {
        // The first query is the whole task, which the prompt carries already: each query
        // is shown on one line and cut.
        let q: Vec<String> = pack
            .queries
            .iter()
            .map(|q| {
                let line = q.split_whitespace().collect::<Vec<_>>().join(" ");
                let cut = super::queries::truncate_chars(&line, SHOWN_QUERY_CHARS);
                let more = if cut.len() < line.len() { "…" } else { "" };
                format!("\"{cut}{more}\"")
            })
            .collect();
        let _ = writeln!(s, "Searched for: {}", q.join("; "));
    }
    if !pack.external_sources.is_empty() {
        let _ = writeln!(
            s,
            "Not searched here (use your tools if you need them): {}",
            pack.external_sources.join(", ")
        );
    }
    let skipped: Vec<String> = pack
        .sources
        .iter()
        .filter_map(|r| Some(format!("{} ({})", r.name, r.skipped.as_deref()?)))
        .collect();
    if !skipped.is_empty() {
        let _ = writeln!(s, "Unavailable sources: {}", skipped.join("; "));
    }
    if pack.items.is_empty() {
        s.push_str("\nNothing relevant was found.\n");
    }
    for it in &pack.items {
        let what = it
            .symbol
            .as_deref()
            .or(it.section.as_deref())
            .unwrap_or(it.kind.as_str());
        // Web pages and advisories are URLs without lines.
        let _ = if it.start_line == 0 && it.end_line == 0 {
            write!(s, "\n### {} ({what}) — {}", it.path, it.source)
        } else {
            write!(
                s,
                "\n### {}:{}-{} ({what}) — {}",
                it.path, it.start_line, it.end_line, it.source
            )
        };
        if let Some(n) = &it.note {
            let _ = write!(s, "; {n}");
        }
        // A fence longer than any backtick run inside the text.
        let longest = it.text.split(|c| c != '`').map(str::len).max().unwrap_or(0);
        let fence = "`".repeat(longest.max(2) + 1);
        let _ = write!(
            s,
            "\n{fence}{}\n{}\n{fence}\n",
            fence_lang(&it.path),
            it.text
        );
    }
    if let Some(m) = &pack.maps {
        render_maps(&mut s, m);
    }
    s
}

/// The code maps after the items: the outline of the items' files, then the repo map.
fn render_maps(s: &mut String, m: &StageMaps) {
    if !m.ast_text.is_empty() {
        let more = if m.ast_left_out > 0 {
            format!("; {} more entries left out for the budget", m.ast_left_out)
        } else {
            String::new()
        };
        let what = if m.named_by_documents {
            "Outline of the code files the documents above name"
        } else {
            "AST context map of the files above"
        };
        let _ = write!(
            s,
            "\n### {what} (functions, types, imports; [lines]{more})\n```text\n{}```\n",
            m.ast_text
        );
    }
    if !m.repo_map.is_empty() {
        let _ = write!(
            s,
            "\n### Repository map (definitions elsewhere that these files and the task refer to, most relevant first)\n```text\n{}```\n",
            m.repo_map
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn item(path: &str, start: u32, end: u32, text: &str) -> PackedItem {
        PackedItem {
            source: "s".into(),
            path: path.into(),
            start_line: start,
            end_line: end,
            symbol: None,
            section: None,
            kind: "function".into(),
            text: text.into(),
            tokens: 0,
            score: 0.0,
            note: None,
        }
    }

    #[test]
    fn fusion_rewards_agreement_and_weight() {
        let a = [item("a.rs", 1, 2, "a"), item("b.rs", 1, 2, "b")];
        let b = [item("b.rs", 1, 2, "b")];
        let fused = fuse(&[
            RankedList {
                weight: 1.0,
                items: &a,
            },
            RankedList {
                weight: 0.4,
                items: &b,
            },
        ]);
        assert_eq!(fused[0].path, "b.rs");
        let low = fuse(&[RankedList {
            weight: 0.4,
            items: &a,
        }]);
        assert!(low[0].score < fused[1].score);
    }

    #[test]
    fn packing_respects_budget_dedup_and_tests() {
        let pinned = vec![item("src/x.rs", 10, 20, &"x".repeat(40))];
        let ranked = vec![
            item("src/x.rs", 12, 14, "inside the pinned region"),
            item("tests/x_test.rs", 1, 3, "a test"),
            item("src/y.rs", 1, 3, &"y".repeat(400)),
            item("src/z.rs", 1, 3, "small"),
        ];
        let p = pack(pinned, ranked, 60, true);
        let paths: Vec<&str> = p.items.iter().map(|i| i.path.as_str()).collect();
        assert_eq!(paths, ["src/x.rs", "src/z.rs"]);
        assert_eq!((p.duplicates, p.tests_avoided, p.over_budget), (1, 1, 1));
        assert!(p.used <= 60);
        assert_eq!(p.used, p.items.iter().map(|i| i.tokens).sum::<usize>());
    }
}
