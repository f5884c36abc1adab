//! An OpenAI-compatible `/v1/embeddings` endpoint (OpenAI, Ollama, vLLM, llama.cpp server).

use std::sync::OnceLock;
use std::time::Duration;

use trellis_fetch::Blocking;

use serde::Deserialize;

use super::{Embedder, check_shape};
use crate::config::EmbeddingConfig;
use crate::error::{Error, Result};
use crate::vectors::normalize;

/// Calls `POST {base_url}/embeddings` with `{"model", "input": [...]}`.
pub struct RemoteEmbedder {
    url: String,
    model: String,
    api_key: Option<String>,
    client: reqwest::Client,
    runtime: Blocking,
    dim: OnceLock<usize>,
}

impl std::fmt::Debug for RemoteEmbedder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RemoteEmbedder")
            .field("url", &self.url)
            .field("model", &self.model)
            .finish_non_exhaustive()
    }
}

#[derive(Deserialize)]
struct Response {
    data: Vec<Item>,
}

#[derive(Deserialize)]
struct Item {
    #[serde(default)]
    index: Option<usize>,
    embedding: Vec<f32>,
}

impl RemoteEmbedder {
    /// Builds the client from configuration (`base_url` and `model` are required; the API key
    /// is read from the environment variable named by `api_key_env`, if set).
    pub fn new(config: &EmbeddingConfig) -> Result<Self> {
        let base = config.base_url.as_deref().ok_or_else(|| {
            Error::Config("embedding.base_url is required for backend \"openai\"".into())
        })?;
        let model = config.model.clone().ok_or_else(|| {
            Error::Config("embedding.model is required for backend \"openai\"".into())
        })?;
        let api_key = crate::http::api_key("embedding.api_key_env", config.api_key_env.as_deref())?;
        let url = format!("{}/embeddings", base.trim_end_matches('/'));
        let setup = |e: trellis_fetch::Error| Error::Endpoint {
            url: url.clone(),
            message: e.to_string(),
        };
        let client = trellis_fetch::client(Duration::from_secs(30), None).map_err(setup)?;
        let runtime = Blocking::new().map_err(setup)?;
        Ok(RemoteEmbedder {
            url,
            model,
            api_key,
            client,
            runtime,
            dim: OnceLock::new(),
        })
    }

    fn call(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>> {
        let err = |message: String| Error::Endpoint {
            url: self.url.clone(),
            message,
        };
        let text = crate::http::post_json(
            &self.client,
            &self.runtime,
            &self.url,
            self.api_key.as_deref(),
            &serde_json::json!({ "model": self.model, "input": texts }),
            Duration::from_secs(120),
        )
        .map_err(err)?;
        let parsed: Response =
            serde_json::from_str(&text).map_err(|e| err(format!("unexpected body: {e}")))?;
        let mut items = parsed.data;
        if items.iter().all(|i| i.index.is_some()) {
            items.sort_by_key(|i| i.index);
        }
        let mut out: Vec<Vec<f32>> = items.into_iter().map(|i| i.embedding).collect();
        check_shape(&out, texts.len(), &self.url)?;
        for v in &mut out {
            normalize(v);
        }
        Ok(out)
    }
}

impl Embedder for RemoteEmbedder {
    fn id(&self) -> String {
        format!("openai:{}:{}", self.url, self.model)
    }

    fn dim(&self) -> usize {
        if let Some(d) = self.dim.get() {
            return *d;
        }
        // Probe once: the dimension is whatever the endpoint returns.
        match self.call(&["dimension probe"]) {
            Ok(v) => *self.dim.get_or_init(|| v.first().map_or(0, Vec::len)),
            Err(e) => {
                tracing::warn!("embedding endpoint probe failed: {e}");
                0
            }
        }
    }

    fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>> {
        if texts.is_empty() {
            return Ok(Vec::new());
        }
        let out = self.call(texts)?;
        if let Some(d) = out.first().map(Vec::len) {
            let _ = self.dim.set(d);
        }
        Ok(out)
    }
}
