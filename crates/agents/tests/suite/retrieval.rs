//! Retrieval agent, upfront mode: a fixture repository (Python and Rust code, a test file,
//! a guide and an ADR), the built-in workflows, the scripted model.

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::future::BoxFuture;
use serde_json::json;
use tokio_util::sync::CancellationToken;
use trellis_agents::retrieval::{
    RetrievalAgent, RetrievalError, RetrievalOptions, RetrievalStrategyConfig, Source, SourceError,
    SourceRequest, strategy_of,
};
use trellis_agents::{PackedItem, StagePack};
use trellis_index::IndexConfig;
use trellis_llm::Role;
use trellis_test_support::TempWorkspace;
use trellis_test_support::scripted::{ScriptedProvider, Turn};
use trellis_workflow::{BUILTINS, Decision, Decisions, Plan, assemble, load_str};

pub const CALC_PY: &str = r#""""Shopping cart arithmetic."""


def add(a, b):
    """Adds two prices."""
    return a + b


def total(items):
    """Sums the prices of the items in a cart."""
    result = 0
    for item in items[1:]:
        result = add(result, item.price)
    return result


def average(items):
    """Average price of the items in a cart."""
    return total(items) / len(items)
"#;

const TEST_CALC_PY: &str = r#"from src.calc import total


class Item:
    def __init__(self, price):
        self.price = price


def test_total():
    assert total([Item(1), Item(2), Item(3)]) == 6
"#;

const CONFIG_RS: &str = r#"//! Configuration loading.

/// The application configuration.
pub struct Config {
    pub currency: String,
    pub tax_rate: f64,
}

/// Parses `key = value` lines into a [`Config`].
pub fn parse_config(text: &str) -> Config {
    let mut c = Config { currency: "EUR".into(), tax_rate: 0.0 };
    for line in text.lines() {
        if let Some((k, v)) = line.split_once('=') {
            match k.trim() {
                "currency" => c.currency = v.trim().into(),
                "tax_rate" => c.tax_rate = v.trim().parse().unwrap_or(0.0),
                _ => {}
            }
        }
    }
    c
}
"#;

const ADR: &str = "# ADR 0001: Store prices as integer cents

## Status

Accepted

## Context

Floating point prices caused rounding errors in cart totals.

## Decision

All prices are stored as integer cents; conversion to currency happens at the edges.

## Consequences

Totals are exact; the display layer formats cents as currency.
";

const GUIDE: &str = "# Developer guide

## Computing totals

The total function sums the price of every item in the cart.

## Configuration

Settings are `key = value` lines: currency and tax_rate.
";

/// Writes the fixture repository into `root`.
pub fn write_fixture(root: &Path) {
    let files = [
        ("src/calc.py", CALC_PY),
        ("tests/test_calc.py", TEST_CALC_PY),
        ("src/config.rs", CONFIG_RS),
        ("docs/adr/0001-store-prices-in-cents.md", ADR),
        ("docs/guide.md", GUIDE),
    ];
    for (path, text) in files {
        let p = root.join(path);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, text).unwrap();
    }
}

pub const TASK: &str =
    "Make `total` in src/calc.py count every item price and apply the configured tax_rate";

/// The plan of a built-in workflow with every optional stage in `include`.
pub fn plan(workflow: &str, include: &[&str], task: &str) -> Plan {
    let (file, text) = BUILTINS
        .iter()
        .find(|(f, _)| f.starts_with(workflow))
        .unwrap();
    let wf = load_str(file, text, None).unwrap();
    let mut d = Decisions::default();
    for s in include {
        d.set(*s, Decision::Include, None);
    }
    assemble(&wf, &d, task).unwrap()
}

pub fn agent(
    root: &Path,
    provider: &ScriptedProvider,
    options: RetrievalOptions,
) -> RetrievalAgent {
    RetrievalAgent::new(
        root,
        IndexConfig::default(),
        None,
        Arc::new(provider.clone()),
        options,
    )
}

pub fn queries(qs: &[&str]) -> Turn {
    Turn::Json(json!({ "queries": qs }))
}

/// Every item's text is what the file holds at its lines under `root`.
pub fn assert_grounded(pack: &StagePack, root: &Path) {
    for it in &pack.items {
        let text = std::fs::read_to_string(root.join(&it.path)).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        let at = lines[it.start_line as usize - 1..it.end_line as usize].join("\n");
        assert_eq!(at, it.text, "{}:{}-{}", it.path, it.start_line, it.end_line);
    }
}

fn user_text(p: &ScriptedProvider, i: usize) -> String {
    let r = &p.requests()[i];
    assert!(
        r.response_format.is_some(),
        "query generation is structured"
    );
    r.messages
        .iter()
        .filter(|m| m.role == Role::User)
        .map(|m| m.content.clone())
        .collect()
}

#[tokio::test]
async fn upfront_packs_per_stage_with_budgets_attribution_and_stage_guidance() {
    let ws = TempWorkspace::new("retr-upfront").unwrap();
    write_fixture(ws.path());
    let plan = plan("feature_with_iterative_testing", &["security_review"], TASK);
    let mut strategy = strategy_of(&plan).unwrap();
    assert!(strategy.ast_enabled());
    // A tight budget for code generation; the others keep the workflow's.
    strategy.retrieval_hints.token_budget.insert(
        trellis_index::strategy::StageKey("code_generation".into()),
        200,
    );
    let stages: Vec<_> = plan.planned.iter().map(|p| p.context.clone()).collect();
    assert_eq!(stages.len(), 3);
    let provider = ScriptedProvider::new([
        queries(&["total function item price", "tax_rate configuration"]),
        queries(&["test_total cart test"]),
        queries(&["price rounding"]),
    ]);
    let agent = agent(ws.path(), &provider, RetrievalOptions::default());
    let stats = agent
        .prepare(&strategy, None, CancellationToken::new())
        .await
        .unwrap();
    assert_eq!(stats.files, 5);
    assert!(stats.symbols >= 5, "{stats:?}");

    let packs = agent
        .upfront(TASK, &strategy, &stages, CancellationToken::new())
        .await
        .unwrap();

    // One model call per stage, each with the task and that stage's guidance.
    assert_eq!(provider.requests().len(), 3);
    let first = user_text(&provider, 0);
    assert!(first.contains(TASK), "{first}");
    assert!(first.contains("code_generation"), "{first}");
    assert!(
        first.contains("This stage generates implementation code."),
        "{first}"
    );
    assert!(first.contains("Focus on: existing_patterns"), "{first}");
    assert!(first.contains("Avoid: test_code"), "{first}");
    assert!(user_text(&provider, 1).contains("Existing test functions (from AST)"));
    assert!(user_text(&provider, 2).contains("Known vulnerabilities (CVE database)"));

    let names: Vec<&str> = packs.keys().map(String::as_str).collect();
    assert_eq!(
        names,
        [
            "code_generation",
            "security_review",
            "test_generation_and_execution"
        ]
    );
    let code = &packs["code_generation"];
    assert_eq!(code.queries[0], TASK);
    // The model's queries, then the identifiers of the task.
    assert_eq!(
        &code.queries[1..],
        [
            "total function item price",
            "tax_rate configuration",
            "total calc.py tax_rate"
        ]
    );
    assert!(code.queries_from_model);
    assert_eq!(code.budget_tokens, 200);
    assert!(code.used_tokens <= 200 && code.used_tokens > 0, "{code:?}");
    // The items and the code maps share the budget.
    assert_eq!(
        code.used_tokens,
        code.items.iter().map(|i| i.tokens).sum::<usize>()
            + code.maps.as_ref().map_or(0, |m| m.tokens)
    );
    assert!(
        code.notes
            .iter()
            .any(|n| n.contains("did not fit the budget")),
        "{:?}",
        code.notes
    );
    assert!(code.external_sources.contains(&"lsp_tools".to_owned()));
    assert!(code.external_sources.contains(&"web_search".to_owned()));
    assert!(!code.external_sources.contains(&"cve_database".to_owned()));
    // The budget comes from the workflow where not overridden.
    assert_eq!(packs["test_generation_and_execution"].budget_tokens, 25_000);
    assert_eq!(packs["security_review"].budget_tokens, 20_000);
    assert!(
        packs["security_review"]
            .external_sources
            .contains(&"cve_database".to_owned())
    );

    for pack in packs.values() {
        assert!(!pack.items.is_empty(), "{pack:?}");
        assert!(pack.used_tokens <= pack.budget_tokens);
        assert_grounded(pack, ws.path());
        for it in &pack.items {
            assert!(it.start_line >= 1 && it.end_line >= it.start_line);
            assert!(it.tokens > 0);
            assert!(
                ["codebase_semantic_search", "doc_retrieval"].contains(&it.source.as_str()),
                "{it:?}"
            );
            if it.path.ends_with(".py") || it.path.ends_with(".rs") {
                assert!(it.symbol.is_some() || it.kind == "file", "{it:?}");
            } else {
                assert!(it.section.is_some(), "{it:?}");
            }
        }
        let reports: Vec<&str> = pack.sources.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(reports, ["codebase_semantic_search", "doc_retrieval"]);
        assert!(
            pack.sources
                .iter()
                .all(|s| !s.timed_out && s.error.is_none())
        );
    }
    // `avoid: test_code` holds except for the stage that writes and runs tests.
    let has_test = |p: &StagePack| p.items.iter().any(|i| i.path.starts_with("tests/"));
    assert!(!has_test(&packs["security_review"]));
    assert!(has_test(&packs["test_generation_and_execution"]));
    // The function the task names is in the code generation pack.
    assert!(
        code.items
            .iter()
            .any(|i| i.symbol.as_deref() == Some("total")),
        "{code:?}"
    );

    let md = code.render();
    assert!(
        md.contains("## Retrieved context for stage `code_generation`"),
        "{md}"
    );
    let total = code
        .items
        .iter()
        .find(|i| i.symbol.as_deref() == Some("total"))
        .unwrap();
    let header = format!(
        "### src/calc.py:{}-{} (total) — codebase_semantic_search",
        total.start_line, total.end_line
    );
    assert!(md.contains(&header), "{md}");
    assert!(md.contains("```python\n"), "{md}");
    assert!(md.contains("Not searched here (use your tools if you need them): lsp_tools"));

    // Packs round-trip through JSON (they are stored per stage).
    let json = serde_json::to_string(&packs).unwrap();
    let back: std::collections::BTreeMap<String, StagePack> = serde_json::from_str(&json).unwrap();
    assert_eq!(&back, &packs);
}

#[tokio::test]
async fn document_strategy_indexes_no_symbols_and_finds_decisions() {
    let ws = TempWorkspace::new("retr-docs").unwrap();
    write_fixture(ws.path());
    // The ADR names the code it is about (and a file that does not exist).
    std::fs::write(
        ws.path().join("docs/adr/0001-store-prices-in-cents.md"),
        ADR.replace(
            "at the edges.",
            "at the edges (`total` in ../../src/calc.py sums cents; src/gone.py was removed).",
        ),
    )
    .unwrap();
    let task = "Discuss the architecture decision on how prices are stored";
    let plan = plan("architecture_discussion", &[], task);
    let strategy = strategy_of(&plan).unwrap();
    assert!(!strategy.ast_enabled());
    let stages: Vec<_> = plan.planned.iter().map(|p| p.context.clone()).collect();
    let provider = ScriptedProvider::new([queries(&["integer cents decision"])]);
    let agent = agent(ws.path(), &provider, RetrievalOptions::default());
    let seen = Arc::new(std::sync::Mutex::new(Vec::new()));
    let log = seen.clone();
    let stats = agent
        .prepare(
            &strategy,
            Some(Arc::new(move |p| log.lock().unwrap().push(p))),
            CancellationToken::new(),
        )
        .await
        .unwrap();
    // Documents only: no code file read, no symbol extracted.
    assert_eq!((stats.files, stats.symbols), (2, 0), "{stats:?}");
    assert!(stats.sections >= 6, "{stats:?}");
    assert!(!seen.lock().unwrap().is_empty(), "progress is reported");
    let index = trellis_index::Index::open(ws.path(), IndexConfig::default()).unwrap();
    assert_eq!(index.counts().unwrap().symbols, 0);
    drop(index);

    let packs = agent
        .upfront(task, &strategy, &stages, CancellationToken::new())
        .await
        .unwrap();
    let pack = &packs["architectural_analysis"];
    assert!(user_text(&provider, 0).contains("This stage analyzes architectural decisions."));
    assert!(!pack.items.is_empty());
    assert!(
        pack.items
            .iter()
            .all(|i| i.path.starts_with("docs/") && i.section.is_some())
    );
    assert!(
        pack.items.iter().any(|i| i.path.contains("adr/")),
        "the ADR is found: {pack:#?}"
    );
    let decisions = pack
        .sources
        .iter()
        .find(|s| s.name == "decision_log_search")
        .unwrap();
    assert!(decisions.items > 0, "{decisions:?}");
    assert_eq!(pack.budget_tokens, 15_000, "analysis budget by prefix");
    assert!(pack.external_sources.contains(&"web_search".to_owned()));
    assert_grounded(pack, ws.path());
    // The code the ADR names is outlined beside it (parsed from disk: the index has none).
    let maps = pack.maps.as_ref().expect("the named code is outlined");
    assert!(maps.named_by_documents);
    assert_eq!(maps.files, vec!["src/calc.py"]);
    assert!(
        maps.ast_text.contains("def total(items)"),
        "{}",
        maps.ast_text
    );
    assert!(maps.repo_map.is_empty());
    assert!(pack.used_tokens >= maps.tokens && maps.tokens > 0);
    assert!(
        pack.notes.iter().any(|n| n.contains("src/calc.py")),
        "{:?}",
        pack.notes
    );
    let text = pack.render();
    assert!(
        text.contains("### Outline of the code files the documents above name"),
        "{text}"
    );
    assert!(!text.contains("AST context map"), "{text}");
}

/// A source that answers after `delay`, or fails.
struct Fake {
    name: &'static str,
    delay: Duration,
    fail: bool,
    code_only: bool,
}

impl Source for Fake {
    fn name(&self) -> &str {
        self.name
    }

    fn code_only(&self) -> bool {
        self.code_only
    }

    fn search(
        &self,
        request: SourceRequest,
        _cancel: CancellationToken,
    ) -> BoxFuture<'static, Result<Vec<Vec<PackedItem>>, SourceError>> {
        let (delay, fail, name) = (self.delay, self.fail, self.name);
        Box::pin(async move {
            tokio::time::sleep(delay).await;
            if fail {
                return Err("connection refused".into());
            }
            Ok(request
                .queries
                .iter()
                .map(|q| {
                    vec![PackedItem {
                        source: name.into(),
                        path: format!("https://example.org/search?q={}", q.len()),
                        start_line: 0,
                        end_line: 0,
                        symbol: None,
                        section: Some(format!("result for {q}")),
                        kind: "web".into(),
                        text: format!("An article about {q}."),
                        tokens: 0,
                        score: 0.0,
                        note: None,
                    }]
                })
                .collect())
        })
    }
}

#[tokio::test]
async fn slow_and_failing_sources_are_reported_not_fatal() {
    let ws = TempWorkspace::new("retr-sources").unwrap();
    write_fixture(ws.path());
    let plan = plan("feature_with_iterative_testing", &[], TASK);
    let strategy = strategy_of(&plan).unwrap();
    let stages: Vec<_> = plan.planned.iter().map(|p| p.context.clone()).collect();
    let provider = ScriptedProvider::new([
        queries(&["cart total"]),
        queries(&["total tests"]),
        queries(&["cart total wrong"]),
    ]);
    let options = RetrievalOptions {
        source_timeout: Duration::from_millis(500),
        ..RetrievalOptions::default()
    };
    let agent = agent(ws.path(), &provider, options)
        .with_source(Arc::new(Fake {
            name: "web_search",
            delay: Duration::from_secs(30),
            fail: false,
            code_only: false,
        }))
        .with_source(Arc::new(Fake {
            name: "doc_retrieval",
            delay: Duration::ZERO,
            fail: true,
            code_only: false,
        }))
        .with_source(Arc::new(Fake {
            name: "lsp_tools",
            delay: Duration::ZERO,
            fail: false,
            code_only: false,
        }));
    agent
        .prepare(&strategy, None, CancellationToken::new())
        .await
        .unwrap();
    let t = Instant::now();
    let packs = agent
        .upfront(TASK, &strategy, &stages, CancellationToken::new())
        .await
        .unwrap();
    assert!(t.elapsed() < Duration::from_secs(10), "{:?}", t.elapsed());
    let pack = &packs["code_generation"];
    let report = |n: &str| pack.sources.iter().find(|s| s.name == n).unwrap().clone();
    let web = report("web_search");
    assert!(web.timed_out && web.items == 0, "{web:?}");
    let docs = report("doc_retrieval");
    assert!(!docs.timed_out);
    assert!(
        docs.error
            .as_deref()
            .unwrap()
            .contains("connection refused")
    );
    assert!(
        pack.notes
            .iter()
            .any(|n| n.contains("`web_search` timed out"))
    );
    assert!(
        pack.notes
            .iter()
            .any(|n| n.contains("`doc_retrieval` failed"))
    );
    // The plugged-in source serves its name, on demand only (not upfront); the index still
    // serves the code.
    assert!(
        !pack.sources.iter().any(|s| s.name == "lsp_tools"),
        "{:?}",
        pack.sources
    );
    assert!(
        pack.notes
            .iter()
            .any(|n| n.contains("`lsp_tools` runs on demand")),
        "{:?}",
        pack.notes
    );
    assert!(!pack.external_sources.contains(&"lsp_tools".to_owned()));
    assert!(report("codebase_semantic_search").packed > 0);
    assert!(!pack.render().contains("An article about"));

    // A failure asks for more: the on-demand source is searched and packed.
    let failure = serde_json::json!({ "output": "AssertionError: cart total is wrong" });
    let pack = agent
        .adaptive(
            TASK,
            &strategy,
            &stages[0],
            &failure,
            1,
            ws.path(),
            CancellationToken::new(),
        )
        .await
        .unwrap();
    let lsp = pack.sources.iter().find(|s| s.name == "lsp_tools").unwrap();
    assert_eq!(lsp.items, pack.queries.len(), "{lsp:?}");
    assert!(lsp.packed > 0, "{lsp:?}");
    assert!(pack.render().contains("An article about"));
}

#[tokio::test]
async fn cancelled_and_disabled_retrievals() {
    let ws = TempWorkspace::new("retr-cancel").unwrap();
    write_fixture(ws.path());
    let plan = plan("feature_with_iterative_testing", &[], TASK);
    let mut strategy = strategy_of(&plan).unwrap();
    let stages: Vec<_> = plan.planned.iter().map(|p| p.context.clone()).collect();
    let provider = ScriptedProvider::new([]);
    let agent = agent(ws.path(), &provider, RetrievalOptions::default());
    let cancel = CancellationToken::new();
    cancel.cancel();
    let err = agent
        .upfront(TASK, &strategy, &stages, cancel.clone())
        .await
        .unwrap_err();
    assert!(matches!(err, RetrievalError::Cancelled), "{err}");
    assert!(matches!(
        agent.prepare(&strategy, None, cancel).await,
        Err(RetrievalError::Cancelled)
    ));
    strategy.enabled = false;
    let packs = agent
        .upfront(TASK, &strategy, &stages, CancellationToken::new())
        .await
        .unwrap();
    assert_eq!(packs.len(), 2);
    assert!(
        packs
            .values()
            .all(|p| p.items.is_empty() && !p.notes.is_empty())
    );
    assert!(
        provider.requests().is_empty(),
        "no model call when disabled"
    );
    // A workflow without a strategy gets the preset for its type.
    let mut bare = plan.clone();
    bare.retrieval_strategy_config = None;
    assert_eq!(strategy_of(&bare).unwrap(), RetrievalStrategyConfig::code());
}

#[tokio::test]
async fn a_code_only_source_serves_code_workflows_and_is_skipped_in_document_ones() {
    let ws = TempWorkspace::new("retr-code-only").unwrap();
    write_fixture(ws.path());
    let lsp = || {
        Arc::new(Fake {
            name: "lsp_tools",
            delay: Duration::ZERO,
            fail: false,
            code_only: true,
        })
    };
    let listed = trellis_index::strategy::ContextSource {
        source: "lsp_tools".into(),
        priority: Some("HIGH".into()),
        ..Default::default()
    };
    // A document workflow that lists the language servers anyway.
    let task = "Discuss the architecture decision on how prices are stored";
    let docs_plan = plan("architecture_discussion", &[], task);
    let mut docs = strategy_of(&docs_plan).unwrap();
    assert!(!docs.ast_enabled());
    let mut sources = docs.sources();
    sources.push(listed.clone());
    docs.context_sources = sources;
    docs.rag_strategy = None;
    let stages: Vec<_> = docs_plan
        .planned
        .iter()
        .map(|p| p.context.clone())
        .collect();
    let provider = ScriptedProvider::new([queries(&["integer cents decision"])]);
    let agent_docs = agent(ws.path(), &provider, RetrievalOptions::default()).with_source(lsp());
    let packs = agent_docs
        .upfront(task, &docs, &stages[..1], CancellationToken::new())
        .await
        .unwrap();
    let p = packs.values().next().unwrap();
    let report = p.sources.iter().find(|r| r.name == "lsp_tools").unwrap();
    assert!(
        report
            .skipped
            .as_deref()
            .unwrap()
            .contains("code workflows only"),
        "{report:?}"
    );
    assert!(p.items.iter().all(|i| i.source != "lsp_tools"), "{p:?}");
    assert!(
        p.render()
            .contains("Unavailable sources: lsp_tools (it serves code workflows only")
    );

    // The same source in a code workflow is searched.
    let code_plan = plan("feature_with_iterative_testing", &[], TASK);
    let mut code = strategy_of(&code_plan).unwrap();
    let mut sources = code.sources();
    sources.retain(|s| s.source != "lsp_tools");
    sources.push(listed);
    code.context_sources = sources;
    code.rag_strategy = None;
    let stages: Vec<_> = code_plan
        .planned
        .iter()
        .map(|p| p.context.clone())
        .collect();
    let provider = ScriptedProvider::new([queries(&["cart total"])]);
    let agent_code = agent(ws.path(), &provider, RetrievalOptions::default()).with_source(lsp());
    let packs = agent_code
        .upfront(TASK, &code, &stages[..1], CancellationToken::new())
        .await
        .unwrap();
    let p = packs.values().next().unwrap();
    let report = p.sources.iter().find(|r| r.name == "lsp_tools").unwrap();
    assert!(report.skipped.is_none() && report.items > 0, "{report:?}");
}
