//! Tool search (lexical, semantic, prior) and selection within a token budget.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use trellis_index::Embedder;
use trellis_toolgraph::{ToolCatalog, ToolEntry, ToolGraph};

use super::fixtures::{catalog, entries, learn, run, store};

fn names(hits: &[(String, f64)]) -> Vec<&str> {
    hits.iter().map(|(n, _)| n.as_str()).collect()
}

#[test]
fn lexical_search_reads_names_descriptions_and_schemas() {
    let c = catalog();
    assert_eq!(
        names(&c.search("parse some JSON", 3).unwrap())[0],
        "parse_json"
    );
    // camelCase in the query meets snake_case in the name.
    assert_eq!(names(&c.search("readFile", 3).unwrap())[0], "read_file");
    // A schema property ("subject") finds its tool.
    assert_eq!(names(&c.search("subject line", 3).unwrap()), ["send_email"]);
    let hits = c.search("delete the file", 10).unwrap();
    assert_eq!(hits[0].0, "delete_file");
    assert!(hits.iter().all(|(_, s)| *s > 0.0 && *s <= 1.0));
    assert!(hits.windows(2).all(|w| w[0].1 >= w[1].1));
    assert!(c.search("quantum chromodynamics", 5).unwrap().is_empty());
    assert_eq!(c.search("file", 2).unwrap().len(), 2);
}

#[test]
fn the_pagerank_prior_orders_equally_matching_tools() {
    let (_dir, store) = store();
    let twin = |name: &str| ToolEntry {
        name: name.into(),
        server: None,
        description: "Convert a document".into(),
        input_schema: serde_json::json!({"type": "object"}),
    };
    let mut c = ToolCatalog::new(vec![twin("alpha"), twin("beta"), twin("gamma")]);
    let order = |c: &ToolCatalog| -> Vec<String> {
        c.search("convert the document", 5)
            .unwrap()
            .into_iter()
            .map(|(n, _)| n)
            .collect()
    };
    // Equal matches: by name.
    assert_eq!(order(&c), ["alpha", "beta", "gamma"]);
    let mut graph = ToolGraph::new();
    learn(&mut graph, &store, &run(&["read_file", "gamma"], &[]), 10);
    learn(&mut graph, &store, &run(&["fetch_url", "gamma"], &[]), 10);
    learn(&mut graph, &store, &run(&["read_file", "beta"], &[]), 2);
    c.set_graph_prior(&graph).unwrap();
    assert_eq!(order(&c), ["gamma", "beta", "alpha"]);
    // The prior brings in no tool that does not match.
    assert!(c.search("read", 5).unwrap().is_empty());
}

/// An embedder that maps words to concept axes (read/load/open are one concept), counting
/// the texts it embeds.
struct Concepts {
    embedded: AtomicUsize,
}

const AXES: [&[&str]; 4] = [
    &["read", "load", "open", "contents"],
    &["json", "parse", "decode"],
    &["issue", "ticket", "bug"],
    &["email", "mail", "message"],
];

impl Embedder for Concepts {
    fn id(&self) -> String {
        "concepts-4".into()
    }
    fn dim(&self) -> usize {
        AXES.len() + 1
    }
    fn embed(&self, texts: &[&str]) -> trellis_index::Result<Vec<Vec<f32>>> {
        self.embedded.fetch_add(texts.len(), Ordering::SeqCst);
        Ok(texts
            .iter()
            .map(|t| {
                let t = t.to_lowercase();
                let mut v: Vec<f32> = AXES
                    .iter()
                    .map(|words| words.iter().filter(|w| t.contains(*w)).count() as f32)
                    .collect();
                v.push(0.1);
                let norm = v.iter().map(|x| x * x).sum::<f32>().sqrt();
                v.iter().map(|x| x / norm).collect()
            })
            .collect())
    }
}

#[test]
fn embeddings_find_synonyms_and_are_cached_in_the_store() {
    let (_dir, store) = store();
    let embedder = Arc::new(Concepts {
        embedded: AtomicUsize::new(0),
    });
    let c = ToolCatalog::new(entries())
        .with_embedder(embedder.clone(), Some(&store))
        .unwrap();
    assert_eq!(embedder.embedded.load(Ordering::SeqCst), entries().len());
    // "load" and "ticket" appear in no tool's text; the concepts find them.
    assert!(catalog().search("load a ticket", 5).unwrap().is_empty());
    let hits = c.search("load a ticket", 5).unwrap();
    let mut found = names(&hits);
    found.sort();
    assert_eq!(found, ["create_issue", "read_file"]);

    // A second catalog over the same store embeds nothing but the queries.
    let before = embedder.embedded.load(Ordering::SeqCst);
    let again = ToolCatalog::new(entries())
        .with_embedder(embedder.clone(), Some(&store))
        .unwrap();
    assert_eq!(embedder.embedded.load(Ordering::SeqCst), before);
    assert_eq!(
        again.search("load a ticket", 5).unwrap(),
        c.search("load a ticket", 5).unwrap()
    );

    // A changed description is embedded again.
    let mut changed = entries();
    changed[0].description = "Open a file and load it".into();
    let before = embedder.embedded.load(Ordering::SeqCst);
    let _ = ToolCatalog::new(changed)
        .with_embedder(embedder.clone(), Some(&store))
        .unwrap();
    assert_eq!(embedder.embedded.load(Ordering::SeqCst), before + 1);
}

fn cost(e: &ToolEntry) -> usize {
    // A rough token count: a quarter of the JSON's length.
    (e.description.len() + e.input_schema.to_string().len() + e.name.len()) / 4
}

#[test]
fn budget_selection_pins_tools_and_never_exceeds_the_budget() {
    let c = catalog();
    let total: usize = entries().iter().map(cost).sum();
    let query = "read a file and parse the JSON";
    let top = c.search(query, 1).unwrap()[0].0.clone();
    let pinned = cost(c.get("search_tools").unwrap());
    let budget = pinned + cost(c.get(&top).unwrap());
    let sel = c
        .select_within_budget(query, budget, &cost, &["search_tools"])
        .unwrap();
    assert_eq!(sel.chosen, ["search_tools".to_owned(), top]);
    assert_eq!(sel.used_tokens, budget);
    assert_eq!(sel.total_tokens_all_tools, total);
    assert_eq!(sel.left_out, entries().len() - 2);
    // One token more does not fit a third tool: every other is larger than that.
    let sel = c
        .select_within_budget(query, budget + 1, &cost, &["search_tools"])
        .unwrap();
    assert_eq!(sel.chosen.len(), 2);
    // Tools unrelated to the query are not offered, however much room is left.
    let roomy = c
        .select_within_budget("read a file", 100_000, &cost, &["search_tools"])
        .unwrap();
    assert!(!roomy.chosen.contains(&"send_email".to_owned()));

    for budget in 0..=total + 10 {
        let sel = c
            .select_within_budget(
                "file json issue email",
                budget,
                &cost,
                &["search_tools", "nope"],
            )
            .unwrap();
        assert!(sel.used_tokens <= budget, "budget {budget}: {sel:?}");
        let search_cost = cost(c.get("search_tools").unwrap());
        assert_eq!(
            sel.chosen.first().map(String::as_str) == Some("search_tools"),
            budget >= search_cost,
            "budget {budget}"
        );
    }
}
