//! Long natural-language queries: a bug report with a traceback finds the file and function
//! its frames name; short queries are searched exactly as before.

use trellis_index::config::QueryConfig;
use trellis_index::{
    Index, IndexConfig, RetrievalRequest, RetrievalScope, SearchConfig, SearchMode, SearchRequest,
};

use super::common::{update, write};

/// Twelve modules whose prose matches the report's words, and the one its traceback names.
fn workspace() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    for i in 0..12 {
        write(
            root,
            &format!("shop/views/page_{i}.py"),
            &format!(
                "def render_order_page_{i}(request, user):\n    \"\"\"Render the order page when the user saves the cart; errors show a message.\"\"\"\n    order = request.user.orders.last()\n    message = 'order saved for user'\n    return render(request, 'order.html', {{'order': order, 'message': message}})\n"
            ),
        );
    }
    write(
        root,
        "shop/billing/invoice.py",
        "import decimal\n\n\nclass Invoice:\n    def __init__(self, lines):\n        self.lines = lines\n\n    def total(self):\n        amount = sum(l.price * l.qty for l in self.lines)\n        return amount.quantize(decimal.Decimal('0.01'))\n\n\ndef tax_rate(country):\n    return {'de': 19, 'fr': 20}[country]\n",
    );
    dir
}

const REPORT: &str = "Saving an order page crashes for some users\n\n\
When a user saves the cart and the order page is rendered, the request fails and the user \
sees an error message instead of the order. It happens for every order with a discount line, \
the page worked in the previous release and the message says nothing useful.\n\n\
Traceback (most recent call last):\n\
  File \"/srv/venv/lib/python3.12/site-packages/shop/views/page_3.py\", line 3, in render_order_page_3\n\
  File \"/srv/venv/lib/python3.12/site-packages/shop/billing/invoice.py\", line 10, in total\n\
AttributeError: 'float' object has no attribute 'quantize'\n";

fn index(root: &std::path::Path, analyze: bool) -> Index {
    let config = IndexConfig {
        search: SearchConfig {
            query: QueryConfig {
                analyze,
                ..QueryConfig::default()
            },
            ..SearchConfig::default()
        },
        ..IndexConfig::default()
    };
    let mut ix = Index::open(root, config).unwrap();
    update(&mut ix);
    // Both configurations open the same index in turn.
    ix.close_writer().unwrap();
    ix
}

fn bm25(ix: &Index, query: &str) -> Vec<(String, String, f32)> {
    ix.search(&SearchRequest {
        query: query.into(),
        categories: Vec::new(),
        limit: 10,
        mode: SearchMode::Bm25,
    })
    .unwrap()
    .into_iter()
    .map(|h| (h.chunk.path, h.chunk.decl.qualified_name, h.score))
    .collect()
}

#[test]
fn a_traceback_finds_the_frame_its_error_is_raised_in() {
    let dir = workspace();
    let analysed = index(dir.path(), true);
    let hits = bm25(&analysed, REPORT);
    assert_eq!(
        (hits[0].0.as_str(), hits[0].1.as_str()),
        ("shop/billing/invoice.py", "Invoice.total"),
        "{hits:?}"
    );
    // As written, the report's prose outweighs the frame (the case the analysis is for).
    let plain = index(dir.path(), false);
    let before = bm25(&plain, REPORT);
    assert_ne!(before[0].0, "shop/billing/invoice.py", "{before:?}");
}

#[test]
fn the_pack_says_what_the_query_named() {
    let dir = workspace();
    let ix = index(dir.path(), true);
    let scope = RetrievalScope::code();
    let retrieve = |ix: &Index| {
        ix.retrieve(&RetrievalRequest {
            query: REPORT.into(),
            scope: &scope,
            stage: None,
            budget_tokens: Some(2000),
            candidates: None,
        })
        .unwrap()
    };
    let pack = retrieve(&ix);
    let q = &pack.query;
    assert!(q.long);
    assert_eq!(q.title, "Saving an order page crashes for some users");
    assert_eq!(q.files, ["shop/views/page_3.py", "shop/billing/invoice.py"]);
    assert_eq!(q.frames.len(), 2);
    assert!(q.identifiers.iter().any(|i| i == "render_order_page_3"));
    assert_eq!(
        q.errors,
        ["AttributeError: 'float' object has no attribute 'quantize'"]
    );
    // The shipped learned ranker was trained on commit messages, which carry no stack
    // traces: it keeps the innermost frame's file among the first two files, not first
    // (docs/retrieval.md, "Long queries").
    let files = |p: &trellis_index::ContextPack| {
        let mut v: Vec<String> = Vec::new();
        for it in &p.items {
            if !v.contains(&it.attribution.path) {
                v.push(it.attribution.path.clone());
            }
        }
        v
    };
    let learned = files(&pack);
    assert!(
        learned[..2].contains(&"shop/billing/invoice.py".to_owned()),
        "{learned:?}"
    );
    let json = serde_json::to_value(&pack).unwrap();
    assert_eq!(json["query"]["files"][1], "shop/billing/invoice.py");
    // With the hand-weighted rerank the fused order stands: the innermost frame first.
    let mut ix = ix;
    ix.set_rerank(trellis_index::config::Rerank::Blend);
    let blend = retrieve(&ix);
    assert_eq!(
        files(&blend)[0],
        "shop/billing/invoice.py",
        "{:?}",
        files(&blend)
    );
}

#[test]
fn short_queries_search_as_written() {
    let dir = workspace();
    let analysed = index(dir.path(), true);
    let plain = index(dir.path(), false);
    for q in [
        "order page message",
        "Invoice total quantize",
        "shop/billing/invoice.py tax_rate",
    ] {
        assert_eq!(bm25(&analysed, q), bm25(&plain, q), "{q}");
        assert!(!analysed.analyze_query(q).unwrap().long);
    }
}
