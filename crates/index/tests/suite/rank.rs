//! The learned ranker inside `Index::retrieve` (BM25 only here; the shipped model is trained
//! on both BM25-only and hybrid candidate lists, see docs/retrieval.md "Learned ranking").

use trellis_index::{Index, IndexConfig, Rerank, RetrievalRequest, RetrievalScope};

use super::common::{update, write};

/// A workspace where the query's plain words fill one file and only its identifier names the
/// function that the change is about, in another.
fn workspace() -> (tempfile::TempDir, Index) {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    write(
        root,
        "src/retry.rs",
        "/// Seconds to wait, from a Retry-After value.\n\
         pub fn parse_retry_after(value: &str) -> Option<u64> {\n    value.trim().parse().ok()\n}\n",
    );
    let mut client = String::from("//! The HTTP client: requests, retries and waiting.\n\n");
    for (name, words) in [
        (
            "send_request",
            "send the request; when the server answers busy the client retries the request after waiting",
        ),
        (
            "retry_delay",
            "the delay before the client retries: waiting grows with each retry of the request",
        ),
        (
            "wait_for_server",
            "waiting for the server before a retry; the client retries immediately when no delay is known",
        ),
        (
            "header_value",
            "read a header value of the response; a missing header value means no delay",
        ),
    ] {
        client.push_str(&format!(
            "/// {words}.\npub fn {name}(request: &str, header: &str) -> u64 {{\n    \
             // {words}\n    let delay = request.len() + header.len();\n    delay as u64\n}}\n\n"
        ));
    }
    write(root, "src/client.rs", &client);
    let mut index = Index::open(root, IndexConfig::default()).unwrap();
    update(&mut index);
    (dir, index)
}

/// The packed files in order, and the best score of `path`'s items.
fn ranked(index: &Index, query: &str, path: &str) -> (Vec<String>, f32) {
    let scope = RetrievalScope::code();
    let pack = index
        .retrieve(&RetrievalRequest {
            query: query.into(),
            scope: &scope,
            stage: None,
            budget_tokens: Some(100_000),
            candidates: None,
        })
        .unwrap();
    let mut files: Vec<String> = Vec::new();
    for it in &pack.items {
        if !files.contains(&it.attribution.path) {
            files.push(it.attribution.path.clone());
        }
    }
    let best = pack
        .items
        .iter()
        .filter(|it| it.attribution.path == path)
        .map(|it| it.score)
        .fold(0.0, f32::max);
    (files, best)
}

#[test]
fn naming_a_function_in_the_query_lifts_its_file_to_the_top() {
    let (_d, mut index) = workspace();
    index.set_rerank(Rerank::Learned);
    // The symptom alone: the file full of the query's words comes first.
    let plain = "a date in the header value is ignored, so the client retries the request \
                 immediately instead of waiting for the delay";
    let (files, before) = ranked(&index, plain, "src/retry.rs");
    assert_eq!(files[0], "src/client.rs", "{files:?}");
    // The same report naming the function: the ranker reads the name, path and identifier
    // matches and puts its file first, with a higher relevance than before.
    let named = format!("parse_retry_after: {plain}");
    let (files, after) = ranked(&index, &named, "src/retry.rs");
    assert_eq!(files[0], "src/retry.rs", "{files:?}");
    assert!(after > before, "{before} -> {after}");
}
