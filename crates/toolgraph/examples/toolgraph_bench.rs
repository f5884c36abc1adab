//! Benchmark of the tool knowledge graph against its performance targets (docs/benchmarks.md,
//! "Tool knowledge graph"): a store holding 1,000 tools and 100,000 observed executions, then
//! the median time of
//!
//! | operation | target |
//! |---|---|
//! | graph sync from the store (`ToolGraph::load`) | < 50 ms |
//! | weighted PageRank | < 100 ms |
//! | shortest dependency path | < 1 ms |
//! | `suggest_dag` | < 200 ms |
//!
//! plus Louvain communities and catalog search for reference.
//!
//! ```text
//! cargo run --release -p trellis-toolgraph --example toolgraph_bench [-- --smoke]
//! ```
//!
//! `--smoke` runs a tiny size (50 tools, 1,000 executions) to check the example works.
//! The executions follow 200 workflow templates over 50 servers of 20 tools, picked with a
//! skew (a few templates are common), a step swapped for a random tool of the same server
//! 10% of the time, and 5% of calls failing; the random generator is seeded. The intents
//! suggested for are the 50 first templates, naming their tools.

#![allow(clippy::print_stdout, clippy::print_stderr)]

use std::time::{Duration, Instant};

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde_json::json;
use trellis_store::prelude::*;
use trellis_store::{SqliteStore, StoreOptions, Synchronous};
use trellis_toolgraph::{
    ExecutedCall, Execution, Mode, ToolCatalog, ToolEntry, ToolGraph, suggest_dag,
};

type Res<T> = Result<T, Box<dyn std::error::Error>>;

const VERBS: [&str; 12] = [
    "read", "write", "list", "parse", "create", "delete", "search", "fetch", "send", "update",
    "run", "build",
];
const NOUNS: [&str; 20] = [
    "file", "issue", "email", "json", "record", "user", "page", "branch", "commit", "test",
    "image", "table", "report", "invoice", "ticket", "note", "event", "task", "message", "log",
];

/// How big a graph to build.
struct Size {
    tools: usize,
    per_server: usize,
    templates: usize,
    executions: usize,
}

impl Size {
    /// The benchmark's size, or the tiny one of `--smoke`.
    fn new(smoke: bool) -> Self {
        if smoke {
            Self {
                tools: 50,
                per_server: 10,
                templates: 20,
                executions: 1_000,
            }
        } else {
            Self {
                tools: 1_000,
                per_server: 20,
                templates: 200,
                executions: 100_000,
            }
        }
    }
}

/// The medians measured, and what the rows say about them.
struct Timings {
    load: Duration,
    pagerank: Duration,
    communities: Duration,
    /// Shortest path queries.
    path: Duration,
    path_queries: usize,
    paths_found: usize,
    suggest: Suggestions,
    search: Duration,
}

/// What `suggest_dag` did over the intents.
struct Suggestions {
    intents: usize,
    /// The first call, which computes PageRank.
    cold: Duration,
    /// Whether the first intent matched a tool.
    first_matched: bool,
    median: Duration,
    /// Suggestions per mode: explicit, suggestion, speculative.
    modes: [usize; 3],
    /// Tools over all suggestions.
    tools: usize,
}

fn main() -> Res<()> {
    let smoke = std::env::args().any(|a| a == "--smoke");
    let size = Size::new(smoke);
    let mut rng = StdRng::seed_from_u64(2002);
    let tools = catalog_tools(&size);
    let templates = workflow_templates(&size, &mut rng);

    let dir = tempfile::tempdir()?;
    let store = SqliteStore::open(
        dir.path().join("bench.db"),
        StoreOptions {
            synchronous: Synchronous::Normal,
            ..StoreOptions::default()
        },
    )?;
    let catalog = ToolCatalog::new(tools.clone());
    catalog.sync_to_store(&store)?;
    let setup = record_executions(&store, &tools, &templates, &size, &mut rng)?;

    let mut graph = ToolGraph::load(&store)?;
    println!(
        "toolgraph_bench: {} tools, {} executions, {} learned edges (recorded in {:.1} s)\n",
        graph.node_count(),
        size.executions,
        graph.edge_count(),
        setup.as_secs_f64()
    );

    let runs = if smoke { 3 } else { 20 };
    let load = median(runs, || {
        let g = ToolGraph::load(&store)?;
        std::hint::black_box(g.edge_count());
        Ok(())
    })?;
    let pagerank = median(runs, || {
        graph.clear_cache();
        std::hint::black_box(graph.pagerank()?.len());
        Ok(())
    })?;
    let communities = median(runs.min(5), || {
        std::hint::black_box(graph.communities()?.len());
        Ok(())
    })?;

    // By catalog index, so that `i / per_server` is the tool's server.
    let names: Vec<&str> = tools.iter().map(|t| t.name.as_str()).collect();
    let pairs = path_queries(&names, &size, &mut rng);
    let (path, paths_found) = time_paths(&graph, &names, &pairs);

    let intents = intents(&templates, &tools);
    let mut catalog = catalog;
    catalog.set_graph_prior(&graph)?;
    graph.clear_cache();
    let suggest = time_suggestions(&intents, &catalog, &graph)?;
    let search = time_search(&intents, &catalog)?;
    print_table(&Timings {
        load,
        pagerank,
        communities,
        path,
        path_queries: pairs.len(),
        paths_found,
        suggest,
        search,
    });
    Ok(())
}

/// `size.tools` tools named `<verb>_<noun>_<i>`, `size.per_server` to a server.
fn catalog_tools(size: &Size) -> Vec<ToolEntry> {
    (0..size.tools)
        .map(|i| {
            let (verb, noun) = (
                VERBS[i % VERBS.len()],
                NOUNS[(i / VERBS.len()) % NOUNS.len()],
            );
            let server = format!("server{}", i / size.per_server);
            ToolEntry {
                name: format!("{verb}_{noun}_{i}"),
                description: format!("{verb} a {noun} on {server}"),
                server: Some(server),
                input_schema: json!({"type": "object", "properties": {
                    noun: {"type": "string", "description": format!("the {noun} to {verb}")}
                }}),
            }
        })
        .collect()
}

/// The workflow templates: 3 to 6 tools (by catalog index) of one random server each.
fn workflow_templates(size: &Size, rng: &mut StdRng) -> Vec<Vec<usize>> {
    let servers = size.tools / size.per_server;
    (0..size.templates)
        .map(|_| {
            let server = rng.random_range(0..servers);
            let len = rng.random_range(3..=6);
            (0..len)
                .map(|_| server * size.per_server + rng.random_range(0..size.per_server))
                .collect()
        })
        .collect()
}

/// Records `size.executions` executions of skewed template picks (a step swapped 10% of the
/// time, 5% of calls failing) in batches of 2,000; returns how long that took.
fn record_executions(
    store: &SqliteStore,
    tools: &[ToolEntry],
    templates: &[Vec<usize>],
    size: &Size,
    rng: &mut StdRng,
) -> Res<Duration> {
    let started = Instant::now();
    let mut batch = Vec::with_capacity(2_000);
    for _ in 0..size.executions {
        // Skewed choice: the square of a uniform draw favours low template numbers.
        let u: f64 = rng.random();
        let t = &templates[((u * u) * size.templates as f64) as usize % size.templates];
        let calls: Vec<ExecutedCall> = t
            .iter()
            .map(|&i| {
                let i = if rng.random_bool(0.1) {
                    (i / size.per_server) * size.per_server + rng.random_range(0..size.per_server)
                } else {
                    i
                };
                ExecutedCall::new(tools[i].name.clone(), !rng.random_bool(0.05))
            })
            .collect();
        let exec = Execution {
            context: "bench".into(),
            data_edges: (1..calls.len()).map(|i| (i - 1, i)).collect(),
            calls,
        };
        batch.push(ToolGraph::observe(&exec)?);
        if batch.len() == batch.capacity() {
            store.record_tool_executions(std::mem::take(&mut batch))?;
        }
    }
    store.record_tool_executions(batch)?;
    Ok(started.elapsed())
}

/// 1,000 shortest-path queries (catalog indices): half within a server (often connected),
/// half anywhere.
fn path_queries(names: &[&str], size: &Size, rng: &mut StdRng) -> Vec<(usize, usize)> {
    (0..1_000)
        .map(|_| {
            let a = rng.random_range(0..names.len());
            let b = if rng.random_bool(0.5) {
                let server = a / size.per_server;
                (server * size.per_server + rng.random_range(0..size.per_server))
                    .min(names.len() - 1)
            } else {
                rng.random_range(0..names.len())
            };
            (a, b)
        })
        .collect()
}

/// The median time of a shortest-path query, and how many found a path.
fn time_paths(graph: &ToolGraph, names: &[&str], pairs: &[(usize, usize)]) -> (Duration, usize) {
    let mut found = 0;
    let mut times = Vec::with_capacity(pairs.len());
    for (a, b) in pairs {
        let t = Instant::now();
        let p = graph.path(names[*a], names[*b]);
        times.push(t.elapsed());
        found += usize::from(p.is_some());
    }
    (middle(&mut times), found)
}

/// The intents suggested for: the 50 first templates, naming their tools.
fn intents(templates: &[Vec<usize>], tools: &[ToolEntry]) -> Vec<String> {
    templates
        .iter()
        .take(50)
        .map(|t| {
            t.iter()
                .map(|&i| format!("{} ({})", tools[i].name, tools[i].description))
                .collect::<Vec<_>>()
                .join(", then ")
        })
        .collect()
}

/// Times `suggest_dag`: the first call (PageRank not cached yet), then every intent.
fn time_suggestions(
    intents: &[String],
    catalog: &ToolCatalog,
    graph: &ToolGraph,
) -> Res<Suggestions> {
    let t = Instant::now();
    let first = suggest_dag(&intents[0], catalog, graph)?;
    let cold = t.elapsed();
    let mut times = Vec::new();
    let mut modes = [0usize; 3];
    let mut sizes = 0;
    for intent in intents {
        let t = Instant::now();
        let s = suggest_dag(intent, catalog, graph)?;
        times.push(t.elapsed());
        if let Some(s) = s {
            sizes += s.tools.len();
            modes[match s.mode {
                Mode::Explicit => 0,
                Mode::Suggestion => 1,
                Mode::Speculative => 2,
            }] += 1;
        }
    }
    Ok(Suggestions {
        intents: intents.len(),
        cold,
        first_matched: first.is_some(),
        median: middle(&mut times),
        modes,
        tools: sizes,
    })
}

/// The median time of a catalog search (k = 10) per intent.
fn time_search(intents: &[String], catalog: &ToolCatalog) -> Res<Duration> {
    let mut times = Vec::new();
    for intent in intents {
        let t = Instant::now();
        std::hint::black_box(catalog.search(intent, 10)?);
        times.push(t.elapsed());
    }
    Ok(middle(&mut times))
}

/// The results table (and a note when the first intent matched no tool).
fn print_table(m: &Timings) {
    let s = &m.suggest;
    println!("| operation | median | target |");
    println!("|---|---:|---:|");
    row("graph sync from the store (load)", m.load, "< 50 ms");
    row("weighted PageRank (uncached)", m.pagerank, "< 100 ms");
    row(
        &format!(
            "shortest path ({} queries, {} connected)",
            m.path_queries, m.paths_found
        ),
        m.path,
        "< 1 ms",
    );
    row(
        &format!(
            "suggest_dag ({} intents; explicit/suggestion/speculative {}/{}/{}, {:.1} tools each)",
            s.intents,
            s.modes[0],
            s.modes[1],
            s.modes[2],
            s.tools as f64 / s.intents.max(1) as f64
        ),
        s.median,
        "< 200 ms",
    );
    row(
        "suggest_dag, first call (computes PageRank)",
        s.cold,
        "< 200 ms",
    );
    row("Louvain communities", m.communities, "—");
    row("catalog search (k = 10)", m.search, "—");
    if !s.first_matched {
        eprintln!("note: the first intent matched no tool");
    }
}

fn row(what: &str, d: Duration, target: &str) {
    println!("| {what} | {:.3} ms | {target} |", d.as_secs_f64() * 1e3);
}

/// The median of `runs` timings of `f`.
fn median(runs: usize, mut f: impl FnMut() -> Res<()>) -> Res<Duration> {
    let mut times = Vec::with_capacity(runs);
    for _ in 0..runs {
        let t = Instant::now();
        f()?;
        times.push(t.elapsed());
    }
    Ok(middle(&mut times))
}

fn middle(times: &mut [Duration]) -> Duration {
    times.sort();
    times.get(times.len() / 2).copied().unwrap_or_default()
}
