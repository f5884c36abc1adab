//! The rerank endpoint client and its use in `Index::retrieve`, against a loopback fake of
//! the Cohere/Jina/vLLM shape and of text-embeddings-inference: request bodies, the bearer
//! key, reordering, and the fallback to the local ranking on errors and timeouts.

use std::time::Duration;

use trellis_index::config::{RerankApi, RerankConfig};
use trellis_index::rerank::RemoteReranker;
use trellis_index::{Index, IndexConfig, RetrievalRequest, RetrievalScope};
use trellis_test_http::{Response, Server};

use super::common::{update, write};

/// One canned answer of the fake: a status, a body made from the request's body, a delay.
struct Answer {
    status: u16,
    body: Box<dyn FnOnce(&serde_json::Value) -> String + Send>,
    delay: Duration,
}

fn ok(body: &str) -> Answer {
    let body = body.to_owned();
    Answer {
        status: 200,
        body: Box::new(move |_| body),
        delay: Duration::ZERO,
    }
}

fn failing(status: u16, body: &str) -> Answer {
    Answer { status, ..ok(body) }
}

/// Scores the request's documents by their first line (the path), last in alphabetical
/// order first, equal paths in the order sent (Cohere shape).
fn by_path_descending() -> Answer {
    Answer {
        body: Box::new(|req| {
            let docs = req["documents"].as_array().unwrap();
            let mut order: Vec<(usize, &str)> = docs
                .iter()
                .enumerate()
                .map(|(i, d)| (i, d.as_str().unwrap().lines().next().unwrap()))
                .collect();
            order.sort_by(|a, b| b.1.cmp(a.1).then(a.0.cmp(&b.0)));
            let n = order.len() as f32;
            let results: Vec<serde_json::Value> = order
                .iter()
                .enumerate()
                .map(|(rank, (index, _))| {
                    serde_json::json!({"index": index, "relevance_score": 1.0 - rank as f32 / n})
                })
                .collect();
            serde_json::json!({ "results": results }).to_string()
        }),
        ..ok("")
    }
}

/// A loopback server answering the n-th request with the n-th canned answer (stops when
/// dropped).
fn serve(answers: Vec<Answer>) -> Server {
    let mut answers = answers.into_iter();
    Server::start(move |request| match answers.next() {
        Some(a) => Response::json_status(a.status, (a.body)(&request.json())).after(a.delay),
        None => Response::json_status(500, "no canned answer left"),
    })
}

/// The head and JSON body of the server's `n`-th request.
fn sent(server: &Server, n: usize) -> (String, serde_json::Value) {
    let request = &server.requests()[n];
    (request.head.clone(), request.json())
}

fn config(api: RerankApi, base: &str) -> RerankConfig {
    RerankConfig {
        api: Some(api),
        base_url: Some(format!("{base}/v1")),
        model: Some("bge-reranker".into()),
        ..RerankConfig::default()
    }
}

#[test]
fn cohere_shape_with_a_bearer_key() {
    let server = serve(vec![ok(
        r#"{"id":"x","results":[{"index":2,"relevance_score":0.9},{"index":0,"relevance_score":0.4},{"index":1,"relevance_score":0.1}],"meta":{}}"#,
    )]);
    // The key comes from the variable the configuration names; the test runner sets
    // CARGO_PKG_NAME, so no test mutates the environment.
    let cfg = RerankConfig {
        api_key_env: Some("CARGO_PKG_NAME".into()),
        max_document_chars: 16,
        ..config(RerankApi::Cohere, &server.url())
    };
    let r = RemoteReranker::from_config(&cfg).unwrap().unwrap();
    assert!(
        !format!("{r:?}").contains(env!("CARGO_PKG_NAME")),
        "the key is never printed"
    );
    let got = r
        .rerank("retry", &["alpha beta gamma delta", "b", "c"])
        .unwrap();
    assert_eq!(got, [(2, 0.9), (0, 0.4), (1, 0.1)]);
    let (head, body) = sent(&server, 0);
    assert!(head.starts_with("POST /v1/rerank "), "{head}");
    assert!(
        head.to_ascii_lowercase()
            .contains(&format!("authorization: bearer {}", env!("CARGO_PKG_NAME"))),
        "{head}"
    );
    assert_eq!(
        body,
        serde_json::json!({"model": "bge-reranker", "query": "retry",
                           "documents": ["alpha beta gamma", "b", "c"], "top_n": 3})
    );
}

#[test]
fn tei_shape() {
    let server = serve(vec![ok(
        r#"[{"index":1,"score":0.8},{"index":0,"score":0.2}]"#,
    )]);
    let r = RemoteReranker::from_config(&config(RerankApi::Tei, &server.url()))
        .unwrap()
        .unwrap();
    assert_eq!(r.rerank("q", &["a", "b"]).unwrap(), [(1, 0.8), (0, 0.2)]);
    let (head, body) = sent(&server, 0);
    assert!(
        !head.to_ascii_lowercase().contains("authorization"),
        "{head}"
    );
    assert_eq!(
        body,
        serde_json::json!({"query": "q", "texts": ["a", "b"], "truncate": true})
    );
}

#[test]
fn errors_bad_bodies_and_timeouts_are_errors() {
    let server = serve(vec![
        failing(500, r#"{"error":"model overloaded"}"#),
        ok(r#"{"results":[{"index":7,"relevance_score":1.0}]}"#),
        ok(r#"{"data":[]}"#),
        Answer {
            delay: Duration::from_millis(1500),
            ..ok(r#"{"results":[]}"#)
        },
    ]);
    let cfg = RerankConfig {
        timeout_ms: 300,
        ..config(RerankApi::Cohere, &server.url())
    };
    let r = RemoteReranker::from_config(&cfg).unwrap().unwrap();
    let e = r.rerank("q", &["a"]).unwrap_err().to_string();
    assert!(
        e.contains("HTTP 500") && e.contains("model overloaded"),
        "{e}"
    );
    let e = r.rerank("q", &["a"]).unwrap_err().to_string();
    assert!(e.contains("index 7 for 1 documents"), "{e}");
    let e = r.rerank("q", &["a"]).unwrap_err().to_string();
    assert!(e.contains("unexpected body"), "{e}");
    let t = std::time::Instant::now();
    let e = r.rerank("q", &["a"]).unwrap_err().to_string();
    assert!(e.contains("no answer within 300 ms"), "{e}");
    assert!(t.elapsed() < Duration::from_millis(1400));
}

fn workspace(rerank: RerankConfig) -> (tempfile::TempDir, Index) {
    let dir = tempfile::tempdir().unwrap();
    for (name, n) in [("alpha", 3), ("beta", 2), ("gamma", 1)] {
        let body = "    retry_backoff();\n".repeat(n);
        write(
            dir.path(),
            &format!("src/{name}.rs"),
            &format!("pub fn {name}_retry() {{\n{body}}}\n"),
        );
    }
    let mut ix = Index::open(
        dir.path(),
        IndexConfig {
            rerank,
            ..IndexConfig::default()
        },
    )
    .unwrap();
    update(&mut ix);
    (dir, ix)
}

fn retrieve(ix: &Index) -> trellis_index::ContextPack {
    let scope = RetrievalScope::code();
    ix.retrieve(&RetrievalRequest {
        query: "retry backoff".into(),
        scope: &scope,
        stage: None,
        budget_tokens: Some(4000),
        candidates: None,
    })
    .unwrap()
}

/// The files of the pack's items, in order, each once.
fn files(pack: &trellis_index::ContextPack) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for i in &pack.items {
        if !out.contains(&i.attribution.path) {
            out.push(i.attribution.path.clone());
        }
    }
    out
}

#[test]
fn retrieval_takes_the_endpoints_order_and_falls_back_on_failure() {
    let (_d, local) = workspace(RerankConfig::default());
    let local_pack = retrieve(&local);
    assert!(local_pack.rerank.is_none());
    let local_order = files(&local_pack);
    assert_eq!(local_order, ["src/alpha.rs", "src/beta.rs", "src/gamma.rs"]);
    drop(local);

    let server = serve(vec![by_path_descending(), failing(503, "unavailable")]);
    let base = server.url();
    let (_d2, ix) = workspace(config(RerankApi::Cohere, &base));
    let pack = retrieve(&ix);
    assert_eq!(
        files(&pack),
        ["src/gamma.rs", "src/beta.rs", "src/alpha.rs"]
    );
    let report = pack.rerank.as_ref().unwrap();
    assert_eq!(report.error, None);
    assert_eq!(
        report.endpoint,
        format!("cohere:bge-reranker@{base}/v1/rerank")
    );
    assert!(pack.items.iter().all(|i| i.rerank_score.is_some()));
    let (_, sent) = sent(&server, 0);
    assert_eq!(sent["query"], "retry backoff");
    assert_eq!(sent["top_n"], report.documents);

    // The endpoint fails: the local order, and the pack says why.
    let pack = retrieve(&ix);
    assert_eq!(files(&pack), local_order);
    let error = pack.rerank.unwrap().error.unwrap();
    assert!(
        error.contains("HTTP 503") && error.contains("local ranking kept"),
        "{error}"
    );
    assert!(pack.items.iter().all(|i| i.rerank_score.is_none()));
}

#[test]
fn an_unusable_configuration_keeps_the_local_ranking() {
    let cfg = RerankConfig {
        api: Some(RerankApi::Cohere),
        base_url: Some("http://127.0.0.1:9".into()),
        ..RerankConfig::default()
    };
    let (_d, ix) = workspace(cfg);
    let pack = retrieve(&ix);
    assert_eq!(pack.items.len(), 3);
    let error = pack.rerank.unwrap().error.unwrap();
    assert!(error.contains("index.rerank.model"), "{error}");
}
