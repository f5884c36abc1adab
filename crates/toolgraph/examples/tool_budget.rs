//! Measures the tool-schema budget (docs/tools.md, "Tool-schema budget": tool schemas under 5%
//! of the model's window with 15+ servers) on the real MCP catalogue in `fixtures/mcp-catalogue`:
//! 43 servers, 717 tools, and 84 one-sentence user tasks each needing one tool.
//!
//! ```text
//! cargo run --release -p trellis-toolgraph --example tool_budget [-- --smoke]
//! ```
//!
//! Every tool is exposed the way `trellis-mcp` exposes it to agents (`crates/mcp/src/tool.rs`):
//! named `<server>__<tool>`, described as `[MCP server <server>] <description>`, with the
//! server's input schema. A tool's cost is what `trellis-llm` counts for a tool definition
//! sent to an OpenAI model (`crates/llm/src/tokens.rs`): the tiktoken `o200k_base` tokens of
//! `"<name> <description> <input schema as compact JSON, keys sorted>"`. The bytes / 4
//! estimate that `trellis-llm` uses for other providers is printed beside the total.
//!
//! For each budget (5% of a 128k and of a 200k window, and 2k, 4k, 8k tokens) every task runs
//! `ToolCatalog::select_within_budget(task, budget, cost, &["search_tools"])` — the pinned
//! `search_tools` is not in the catalogue, so nothing is pinned — and the table reports the
//! tokens used against all 717 tools' and the recall (the share of tasks whose expected tool
//! was chosen). Plain `ToolCatalog::search(task, k)` gives recall@1, @5 and @10. The catalog
//! is searched lexically (BM25 over names, descriptions and schema properties); no embedder
//! and no learned prior are used. Every task whose expected tool search does not rank first, or
//! that some budget misses, is listed with its rank, what ranked first instead, and those
//! budgets.
//!
//! `--smoke` runs the first 10 tasks (seconds in a debug build) to check the example works.

#![allow(clippy::print_stdout, clippy::print_stderr)]

use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;

use anyhow::{Context, Result, bail};
use serde::Deserialize;
use serde_json::Value;
use trellis_toolgraph::{ToolCatalog, ToolEntry};

/// The budgets measured: a label and the tokens.
const BUDGETS: [(&str, usize); 5] = [
    ("2k", 2_000),
    ("4k", 4_000),
    ("5% of 128k", 6_400),
    ("8k", 8_000),
    ("5% of 200k", 10_000),
];
/// The `k`s of plain search's recall@k.
const KS: [usize; 3] = [1, 5, 10];
/// The pinned tool: Trellis's search over the tools left out. It is not in the catalogue.
const ALWAYS: [&str; 1] = ["search_tools"];

/// `catalogue.json`, only what this measurement reads.
#[derive(Deserialize)]
struct Catalogue {
    captured: String,
    servers: Vec<Server>,
}

#[derive(Deserialize)]
struct Server {
    server: String,
    tools: Vec<RemoteTool>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct RemoteTool {
    name: String,
    #[serde(default)]
    title: Option<String>,
    #[serde(default)]
    description: Option<String>,
    input_schema: Value,
}

/// One line of `tasks.json`.
#[derive(Deserialize)]
struct Task {
    task: String,
    expected_tool: String,
}

/// What one task gave at one budget.
struct Outcome {
    found: bool,
    used: usize,
    chosen: usize,
}

/// Every tool's cost in tokens, and the totals.
struct Costs {
    /// By exposed tool name: tiktoken `o200k_base` tokens of its definition.
    by_name: HashMap<String, usize>,
    /// All tools' tokens.
    total: usize,
    /// All tools by the bytes / 4 estimate.
    estimate_total: usize,
}

impl Costs {
    /// Counts every tool's definition.
    fn count(entries: &[ToolEntry]) -> Result<Self> {
        let bpe = tiktoken_rs::o200k_base().context("loading the o200k_base tokenizer")?;
        let mut by_name = HashMap::with_capacity(entries.len());
        let mut estimate_total = 0usize;
        for e in entries {
            let text = definition_text(e)?;
            estimate_total += text.len().div_ceil(4);
            by_name.insert(e.name.clone(), bpe.encode_with_special_tokens(&text).len());
        }
        let total = by_name.values().sum();
        Ok(Self {
            by_name,
            total,
            estimate_total,
        })
    }

    /// One tool's tokens (0 when unknown).
    fn of(&self, name: &str) -> usize {
        self.by_name.get(name).copied().unwrap_or(0)
    }
}

/// What plain search gives each task over the whole catalogue.
struct SearchRanks {
    /// The 0-based rank of the expected tool, `None` without a lexical match.
    ranks: Vec<Option<usize>>,
    /// The tool ranked first.
    firsts: Vec<String>,
}

fn main() -> Result<()> {
    let smoke = std::env::args().any(|a| a == "--smoke");
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/mcp-catalogue");
    let catalogue: Catalogue = read_json(&dir.join("catalogue.json"))?;
    let mut tasks: Vec<Task> = read_json(&dir.join("tasks.json"))?;
    if smoke {
        tasks.truncate(10);
    }

    let entries = entries(&catalogue);
    let listed = entries.len();
    let costs = Costs::count(&entries)?;
    let catalog = ToolCatalog::new(entries);
    check_catalog(&catalog, listed, &tasks)?;
    let cost = |e: &ToolEntry| costs.of(&e.name);

    print_overview(&catalogue, &costs, &tasks, smoke);
    print_heaviest(&catalogue, &costs.by_name, costs.total);

    // Search once per task for the ranks; select per budget.
    let search = search_ranks(&catalog, &tasks)?;
    let by_budget = select_per_budget(&catalog, &tasks, &cost)?;

    print_selection(&by_budget, costs.total);
    print_plain_search(&search.ranks, tasks.len());
    print_misses(&tasks, &search, &by_budget, &costs);
    Ok(())
}

/// Fails when the catalogue repeats a tool name or a task expects a tool it does not have.
fn check_catalog(catalog: &ToolCatalog, listed: usize, tasks: &[Task]) -> Result<()> {
    if catalog.entries().len() != listed {
        bail!("the catalogue repeats a tool name");
    }
    for t in tasks {
        if catalog.get(&t.expected_tool).is_none() {
            bail!(
                "tasks.json: {:?} expects {}, which is not in the catalogue",
                t.task,
                t.expected_tool
            );
        }
    }
    Ok(())
}

/// The title, what was measured, and the total of all tools against 128k and 200k windows.
fn print_overview(catalogue: &Catalogue, costs: &Costs, tasks: &[Task], smoke: bool) {
    let task_servers: std::collections::BTreeSet<&str> = tasks
        .iter()
        .filter_map(|t| t.expected_tool.split_once("__").map(|(s, _)| s))
        .collect();
    let (total, estimate_total) = (costs.total, costs.estimate_total);
    println!("# Tool schemas within a token budget\n");
    println!(
        "Catalogue captured {}: {} servers, {} tools. Tasks: {} over {} servers{}.\n",
        catalogue.captured,
        catalogue.servers.len(),
        costs.by_name.len(),
        tasks.len(),
        task_servers.len(),
        if smoke { " (--smoke: first 10)" } else { "" },
    );
    println!(
        "All tools: {total} tokens (tiktoken o200k_base), {estimate_total} by the bytes/4 \
         estimate; {:.1}% of a 128k window, {:.1}% of a 200k window.\n",
        pct(total, 128_000),
        pct(total, 200_000),
    );
}

/// Searches the whole catalogue once per task.
fn search_ranks(catalog: &ToolCatalog, tasks: &[Task]) -> Result<SearchRanks> {
    let mut ranks = Vec::with_capacity(tasks.len());
    let mut firsts = Vec::with_capacity(tasks.len());
    for t in tasks {
        let hits = catalog.search(&t.task, catalog.entries().len())?;
        ranks.push(hits.iter().position(|(n, _)| *n == t.expected_tool));
        firsts.push(hits.first().map(|(n, _)| n.clone()).unwrap_or_default());
    }
    Ok(SearchRanks { ranks, firsts })
}

/// Selects within every budget for every task (`search_tools` pinned).
fn select_per_budget(
    catalog: &ToolCatalog,
    tasks: &[Task],
    cost: &dyn Fn(&ToolEntry) -> usize,
) -> Result<Vec<Vec<Outcome>>> {
    let mut by_budget: Vec<Vec<Outcome>> = Vec::with_capacity(BUDGETS.len());
    for (_, budget) in BUDGETS {
        let mut outcomes = Vec::with_capacity(tasks.len());
        for t in tasks {
            let s = catalog.select_within_budget(&t.task, budget, cost, &ALWAYS)?;
            outcomes.push(Outcome {
                found: s.chosen.contains(&t.expected_tool),
                used: s.used_tokens,
                chosen: s.chosen.len(),
            });
        }
        by_budget.push(outcomes);
    }
    Ok(by_budget)
}

/// The table per budget: tools chosen, tokens used, share of all tools, recall.
fn print_selection(by_budget: &[Vec<Outcome>], total: usize) {
    println!("## Selection within a budget\n");
    println!(
        "| budget | tokens | tools chosen (mean) | tokens used (mean / max) | used / all tools | recall |"
    );
    println!("|---|---:|---:|---:|---:|---:|");
    for ((label, budget), outcomes) in BUDGETS.iter().zip(by_budget) {
        let n = outcomes.len().max(1);
        let used: usize = outcomes.iter().map(|o| o.used).sum();
        let max = outcomes.iter().map(|o| o.used).max().unwrap_or(0);
        let chosen: usize = outcomes.iter().map(|o| o.chosen).sum();
        let found = outcomes.iter().filter(|o| o.found).count();
        println!(
            "| {label} | {budget} | {:.1} | {:.0} / {max} | {:.2}% | {found}/{} = {:.1}% |",
            chosen as f64 / n as f64,
            used as f64 / n as f64,
            100.0 * used as f64 / n as f64 / total.max(1) as f64,
            outcomes.len(),
            pct(found, outcomes.len()),
        );
    }
}

/// Plain search's recall@k, and how many tasks had no lexical match.
fn print_plain_search(ranks: &[Option<usize>], tasks: usize) {
    println!("\n## Plain search\n");
    println!("| k | recall@k |");
    println!("|---:|---:|");
    for k in KS {
        let found = ranks.iter().filter(|r| r.is_some_and(|r| r < k)).count();
        println!("| {k} | {found}/{tasks} = {:.1}% |", pct(found, tasks));
    }
    let unmatched = ranks.iter().filter(|r| r.is_none()).count();
    println!("\nTasks whose expected tool has no lexical match at all: {unmatched}.\n");
}

/// Every task that search does not rank first or some budget misses, with its rank, what
/// ranked first and those budgets.
fn print_misses(tasks: &[Task], search: &SearchRanks, by_budget: &[Vec<Outcome>], costs: &Costs) {
    let (ranks, firsts) = (&search.ranks, &search.firsts);
    println!("## Tasks not ranked first by search, or missed at some budget\n");
    println!(
        "| task | expected tool (tokens) | search rank | ranked first instead | missed at budgets |"
    );
    println!("|---|---|---:|---|---|");
    for (i, t) in tasks.iter().enumerate() {
        if ranks[i] == Some(0) && by_budget.iter().all(|o| o[i].found) {
            continue;
        }
        let rank = ranks[i].map_or_else(|| "no match".to_owned(), |r| (r + 1).to_string());
        let missed: Vec<&str> = BUDGETS
            .iter()
            .zip(by_budget)
            .filter(|(_, o)| !o[i].found)
            .map(|((label, _), _)| *label)
            .collect();
        println!(
            "| {} | `{}` ({}) | {rank} | `{}` | {} |",
            t.task,
            t.expected_tool,
            costs.of(&t.expected_tool),
            firsts[i],
            if missed.is_empty() {
                "none".to_owned()
            } else {
                missed.join(", ")
            },
        );
    }
}

/// The catalogue's tools as `trellis-mcp` exposes them (see `exposed_name` and `McpTool::new`
/// in `crates/mcp/src/tool.rs`; every name in this catalogue is already within 64 characters
/// of `[A-Za-z0-9_-]`, so the name is `<server>__<tool>` unchanged).
fn entries(catalogue: &Catalogue) -> Vec<ToolEntry> {
    catalogue
        .servers
        .iter()
        .flat_map(|s| {
            s.tools.iter().map(|t| {
                let mut description = t.description.as_deref().unwrap_or_default().trim();
                if description.is_empty() {
                    description = t.title.as_deref().unwrap_or_default();
                }
                ToolEntry {
                    name: format!("{}__{}", s.server, t.name),
                    server: Some(s.server.clone()),
                    description: format!("[MCP server {}] {description}", s.server),
                    input_schema: t.input_schema.clone(),
                }
            })
        })
        .collect()
}

/// The text `trellis-llm` counts for a tool definition: name, description and the input
/// schema as compact JSON with sorted keys (`trellis_protocol::canonical`).
fn definition_text(e: &ToolEntry) -> Result<String> {
    let mut schema = e.input_schema.clone();
    schema.sort_all_objects();
    Ok(format!(
        "{} {} {}",
        e.name,
        e.description,
        serde_json::to_string(&schema)?
    ))
}

/// The servers taking most of the total, and the single largest tools.
fn print_heaviest(catalogue: &Catalogue, costs: &HashMap<String, usize>, total: usize) {
    let mut per_server: BTreeMap<&str, (usize, usize)> = BTreeMap::new();
    for s in &catalogue.servers {
        for t in &s.tools {
            let c = costs
                .get(&format!("{}__{}", s.server, t.name))
                .copied()
                .unwrap_or(0);
            let e = per_server.entry(&s.server).or_default();
            e.0 += 1;
            e.1 += c;
        }
    }
    let mut servers: Vec<_> = per_server.into_iter().collect();
    servers.sort_by(|a, b| b.1.1.cmp(&a.1.1).then(a.0.cmp(b.0)));
    println!("Heaviest servers:\n");
    println!("| server | tools | tokens | share |");
    println!("|---|---:|---:|---:|");
    for (s, (n, c)) in servers.iter().take(8) {
        println!("| {s} | {n} | {c} | {:.1}% |", pct(*c, total));
    }
    let mut tools: Vec<(&String, &usize)> = costs.iter().collect();
    tools.sort_by(|a, b| b.1.cmp(a.1).then(a.0.cmp(b.0)));
    let median = {
        let mut v: Vec<usize> = costs.values().copied().collect();
        v.sort_unstable();
        v.get(v.len() / 2).copied().unwrap_or(0)
    };
    println!("\nMedian tool: {median} tokens. Largest tools:\n");
    println!("| tool | tokens |");
    println!("|---|---:|");
    for (name, c) in tools.iter().take(5) {
        println!("| `{name}` | {c} |");
    }
    let over = |b: usize| costs.values().filter(|c| **c > b).count();
    println!(
        "\nTools larger than 2,000 tokens on their own: {}; larger than 4,000: {}.\n",
        over(2_000),
        over(4_000)
    );
}

fn read_json<T: serde::de::DeserializeOwned>(path: &std::path::Path) -> Result<T> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    serde_json::from_str(&text).with_context(|| format!("parsing {}", path.display()))
}

fn pct(part: usize, whole: usize) -> f64 {
    if whole == 0 {
        0.0
    } else {
        100.0 * part as f64 / whole as f64
    }
}
