//! A rerank endpoint client: the common `/rerank` API of Cohere, Jina, vLLM and Infinity
//! (`{"model", "query", "documents", "top_n"}` → `{"results": [{"index",
//! "relevance_score"}]}`) and Hugging Face text-embeddings-inference (`{"query", "texts"}` →
//! `[{"index", "score"}]`), configured under `[index.rerank]`.

use std::time::Duration;

use serde::{Deserialize, Serialize};
use trellis_fetch::Blocking;

use crate::config::{RerankApi, RerankConfig};
use crate::error::{Error, Result};

/// Calls a rerank endpoint.
pub struct RemoteReranker {
    api: RerankApi,
    url: String,
    model: Option<String>,
    api_key: Option<String>,
    timeout: Duration,
    max_documents: usize,
    max_document_chars: usize,
    client: reqwest::Client,
    runtime: Blocking,
}

impl std::fmt::Debug for RemoteReranker {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never the key.
        f.debug_struct("RemoteReranker")
            .field("api", &self.api)
            .field("url", &self.url)
            .field("model", &self.model)
            .finish_non_exhaustive()
    }
}

/// What a retrieval's rerank step did, for the pack.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct RerankReport {
    /// The endpoint called (`cohere:<model>@<url>`, `tei@<url>`).
    pub endpoint: String,
    /// Candidates sent.
    pub documents: usize,
    /// Time the call took.
    pub elapsed_ms: u64,
    /// Why the local ranking was kept, if it was.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// The outcome of [`crate::Index::rerank_documents`].
#[derive(Clone, Debug)]
pub struct Reranked {
    /// What happened.
    pub report: RerankReport,
    /// `(index into the documents, score)`, best first; `None` when the call failed.
    pub scores: Option<Vec<(usize, f32)>>,
}

#[derive(Deserialize)]
struct CohereResponse {
    results: Vec<CohereResult>,
}

#[derive(Deserialize)]
struct CohereResult {
    index: usize,
    relevance_score: f32,
}

#[derive(Deserialize)]
struct TeiRank {
    index: usize,
    score: f32,
}

impl RemoteReranker {
    /// The client of `config`; `None` when reranking is off (`api` unset). Errors name the
    /// missing field or environment variable.
    pub fn from_config(config: &RerankConfig) -> Result<Option<Self>> {
        let Some(api) = config.api else {
            return Ok(None);
        };
        let base = config.base_url.as_deref().ok_or_else(|| {
            Error::Config("index.rerank.base_url is required when index.rerank.api is set".into())
        })?;
        if api == RerankApi::Cohere && config.model.is_none() {
            return Err(Error::Config(
                "index.rerank.model is required for api = \"cohere\" (e.g. \"rerank-v3.5\", \"BAAI/bge-reranker-base\")"
                    .into(),
            ));
        }
        let api_key =
            crate::http::api_key("index.rerank.api_key_env", config.api_key_env.as_deref())?;
        let url = format!("{}/rerank", base.trim_end_matches('/'));
        let setup = |e: trellis_fetch::Error| Error::Rerank {
            url: url.clone(),
            message: e.to_string(),
        };
        let timeout = Duration::from_millis(config.timeout_ms.max(1));
        let client = trellis_fetch::client(timeout, None).map_err(setup)?;
        let runtime = Blocking::new().map_err(setup)?;
        Ok(Some(RemoteReranker {
            api,
            url,
            model: config.model.clone(),
            api_key,
            timeout,
            max_documents: config.max_documents.max(1),
            max_document_chars: config.max_document_chars.max(16),
            client,
            runtime,
        }))
    }

    /// How the endpoint is named in packs and logs.
    pub fn endpoint(&self) -> String {
        match (self.api, &self.model) {
            (RerankApi::Cohere, Some(m)) => format!("cohere:{m}@{}", self.url),
            (RerankApi::Cohere, None) => format!("cohere@{}", self.url),
            (RerankApi::Tei, _) => format!("tei@{}", self.url),
        }
    }

    /// Candidates sent per call, at most.
    pub fn max_documents(&self) -> usize {
        self.max_documents
    }

    /// Scores `documents` against `query`: `(index into documents, score)`, best first.
    /// Only the first [`RemoteReranker::max_documents`] are sent, each cut at
    /// `max_document_chars`. An index out of range, or an answer that does not parse, is an
    /// error.
    pub fn rerank(&self, query: &str, documents: &[&str]) -> Result<Vec<(usize, f32)>> {
        let docs: Vec<&str> = documents
            .iter()
            .take(self.max_documents)
            .map(|d| cut(d, self.max_document_chars))
            .collect();
        if docs.is_empty() {
            return Ok(Vec::new());
        }
        let err = |message: String| Error::Rerank {
            url: self.url.clone(),
            message,
        };
        let body = match self.api {
            RerankApi::Cohere => serde_json::json!({
                "model": self.model,
                "query": query,
                "documents": docs,
                "top_n": docs.len(),
            }),
            RerankApi::Tei => serde_json::json!({
                "query": query,
                "texts": docs,
                "truncate": true,
            }),
        };
        let text = crate::http::post_json(
            &self.client,
            &self.runtime,
            &self.url,
            self.api_key.as_deref(),
            &body,
            self.timeout,
        )
        .map_err(err)?;
        let mut scored: Vec<(usize, f32)> = match self.api {
            RerankApi::Cohere => serde_json::from_str::<CohereResponse>(&text)
                .map_err(|e| err(format!("unexpected body: {e}")))?
                .results
                .into_iter()
                .map(|r| (r.index, r.relevance_score))
                .collect(),
            RerankApi::Tei => serde_json::from_str::<Vec<TeiRank>>(&text)
                .map_err(|e| err(format!("unexpected body: {e}")))?
                .into_iter()
                .map(|r| (r.index, r.score))
                .collect(),
        };
        if let Some((i, _)) = scored.iter().find(|(i, _)| *i >= docs.len()) {
            return Err(err(format!(
                "answered index {i} for {} documents",
                docs.len()
            )));
        }
        scored.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
        scored.dedup_by_key(|x| x.0);
        Ok(scored)
    }
}

/// `s` cut at `n` characters (on a character boundary).
fn cut(s: &str, n: usize) -> &str {
    match s.char_indices().nth(n) {
        Some((i, _)) => &s[..i],
        None => s,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn configuration_errors_name_the_field() {
        assert!(
            RemoteReranker::from_config(&RerankConfig::default())
                .unwrap()
                .is_none()
        );
        let no_url = RerankConfig {
            api: Some(RerankApi::Tei),
            ..RerankConfig::default()
        };
        let e = RemoteReranker::from_config(&no_url)
            .unwrap_err()
            .to_string();
        assert!(e.contains("index.rerank.base_url"), "{e}");
        let no_model = RerankConfig {
            api: Some(RerankApi::Cohere),
            base_url: Some("http://127.0.0.1:9".into()),
            ..RerankConfig::default()
        };
        let e = RemoteReranker::from_config(&no_model)
            .unwrap_err()
            .to_string();
        assert!(e.contains("index.rerank.model"), "{e}");
        let no_key = RerankConfig {
            api: Some(RerankApi::Tei),
            base_url: Some("http://127.0.0.1:9".into()),
            api_key_env: Some("TRELLIS_TEST_RERANK_KEY_THAT_IS_NOT_SET".into()),
            ..RerankConfig::default()
        };
        let e = RemoteReranker::from_config(&no_key)
            .unwrap_err()
            .to_string();
        assert!(e.contains("TRELLIS_TEST_RERANK_KEY_THAT_IS_NOT_SET"), "{e}");
    }

    #[test]
    fn documents_are_cut_on_character_boundaries() {
        assert_eq!(cut("héllo", 2), "hé");
        assert_eq!(cut("ab", 5), "ab");
    }
}
