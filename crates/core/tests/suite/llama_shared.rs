//! The index's embedding model and the embedded chat model share one process-wide llama.cpp
//! backend (`trellis_llm::embedded::backend`): whichever starts first, the other must still
//! work (llama.cpp refuses a second initialisation). Each test runs in its
//! own process (nextest), so each order is tested from a fresh backend.

use std::sync::Arc;

use tokio_util::sync::CancellationToken;
use trellis_config::Config;
use trellis_index::config::EmbeddingConfig;
use trellis_index::embed::Embedder;
use trellis_index::embed::fetch::{MINILM, model_dir};
use trellis_index::embed::local::LocalEmbedder;
use trellis_llm::{ChatRequest, Message, ModelProvider, ModelRegistry};

fn embedder() -> LocalEmbedder {
    let dir = model_dir(&MINILM, None);
    assert!(
        MINILM.is_cached(&dir),
        "model missing at {}: run scripts/setup",
        dir.display()
    );
    LocalEmbedder::load(&dir, &EmbeddingConfig::default()).unwrap()
}

fn embed_ok(e: &LocalEmbedder) {
    let v = e.embed(&["fn parse_config(path: &Path)"]).unwrap();
    assert_eq!(v[0].len(), 384);
    let norm: f32 = v[0].iter().map(|x| x * x).sum();
    assert!((norm - 1.0).abs() < 1e-3, "unit vector, got |v|^2 = {norm}");
}

async fn chat_ok() {
    // The 2.8 MB random-weights fixture: fast, and enough to prove the runtime works.
    let p: Arc<dyn ModelProvider> = ModelRegistry::from_config(&Config::default())
        .unwrap()
        .provider("tiny")
        .unwrap();
    let req = ChatRequest {
        max_tokens: Some(8),
        temperature: Some(0.0),
        ..ChatRequest::new(vec![Message::user("hello")])
    };
    let c = p.complete(req, CancellationToken::new()).await.unwrap();
    assert!(c.usage.completion_tokens > 0, "{c:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn embeddings_first_then_the_chat_model() {
    let e = embedder();
    embed_ok(&e);
    chat_ok().await;
    embed_ok(&e);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn chat_model_first_then_embeddings() {
    chat_ok().await;
    let e = embedder();
    embed_ok(&e);
    chat_ok().await;
}
