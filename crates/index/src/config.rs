//! Index configuration (`[index]` in the layered Trellis configuration). Every field is
//! optional; [`IndexConfig::default`] is what the CLI uses when nothing is configured.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

/// Directories and files never indexed, in addition to `.gitignore` rules: dependency trees,
/// version-control metadata, build outputs, caches and lockfiles.
pub const DEFAULT_EXCLUDES: &[&str] = &[
    "**/node_modules/**",
    "**/.git/**",
    "**/.hg/**",
    "**/.svn/**",
    "**/.trellis/**",
    "**/target/**",
    "**/build/**",
    "**/dist/**",
    "**/out/**",
    "**/.next/**",
    "**/.nuxt/**",
    "**/__pycache__/**",
    "**/.venv/**",
    "**/venv/**",
    "**/.tox/**",
    "**/.mypy_cache/**",
    "**/.pytest_cache/**",
    "**/.gradle/**",
    "**/.idea/**",
    "**/coverage/**",
    "**/*.min.js",
    "**/*.min.css",
    "**/*.map",
    "**/*.lock",
    "**/package-lock.json",
    "**/pnpm-lock.yaml",
    "**/go.sum",
];

/// Configuration of the workspace index.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct IndexConfig {
    /// Extra globs (gitignore-style `**` allowed, relative to the workspace root) to exclude.
    pub exclude: Vec<String>,
    /// Files larger than this many bytes are not indexed.
    pub max_file_bytes: u64,
    /// Dense embeddings.
    pub embedding: EmbeddingConfig,
    /// Hybrid search weights.
    pub search: SearchConfig,
    /// A reranking endpoint (`[index.rerank]`; off unless `api` is set).
    pub rerank: RerankConfig,
}

impl Default for IndexConfig {
    fn default() -> Self {
        IndexConfig {
            exclude: Vec::new(),
            max_file_bytes: 1_000_000,
            embedding: EmbeddingConfig::default(),
            search: SearchConfig::default(),
            rerank: RerankConfig::default(),
        }
    }
}

/// Which embedding backend computes vectors.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EmbeddingBackend {
    /// all-MiniLM-L6-v2 run in-process (fetched once into the model cache).
    #[default]
    Local,
    /// An OpenAI-compatible `/v1/embeddings` endpoint (Ollama, vLLM, llama.cpp server, OpenAI).
    Openai,
    /// No embeddings: BM25 only.
    None,
}

/// Which engine runs the local model's forward pass.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LocalEngine {
    /// The encoder written in Rust over the shipped f32 weights: every linear layer runs
    /// over all tokens of a batch of texts at once, attention per text, with run-time
    /// AVX-512/AVX2/NEON kernels (the faster one here, see docs/benchmarks.md).
    #[default]
    Native,
    /// llama.cpp (the chat model's runtime) over the model converted to GGUF, one text per
    /// llama.cpp batch.
    LlamaCpp,
}

/// Embedding configuration.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct EmbeddingConfig {
    /// The backend.
    pub backend: EmbeddingBackend,
    /// The engine of the `local` backend (`native` or `llama_cpp`); both produce the same
    /// vectors (cosine 1.00000 to sentence-transformers), so switching keeps stored vectors.
    pub engine: LocalEngine,
    /// Endpoint base URL including `/v1` (for `openai`), e.g. `http://127.0.0.1:11434/v1`.
    pub base_url: Option<String>,
    /// Model name sent to the endpoint (for `openai`), e.g. `nomic-embed-text`.
    pub model: Option<String>,
    /// Name of the environment variable holding the endpoint's API key (never the key itself).
    pub api_key_env: Option<String>,
    /// Texts per embedding call.
    pub batch_size: usize,
    /// Where downloaded models are cached (default `~/.cache/trellis/models`).
    pub cache_dir: Option<PathBuf>,
    /// Threads for the local model (default: all cores).
    pub threads: Option<usize>,
    /// Word pieces per text the local model reads; longer texts are truncated. 256 is
    /// sentence-transformers' setting for all-MiniLM-L6-v2; the packaged tokenizer (and the
    /// model's training) use 128, which embeds long chunks about twice as fast.
    pub max_tokens: usize,
}

impl Default for EmbeddingConfig {
    fn default() -> Self {
        EmbeddingConfig {
            backend: EmbeddingBackend::Local,
            engine: LocalEngine::Native,
            base_url: None,
            model: None,
            api_key_env: None,
            batch_size: 32,
            cache_dir: None,
            threads: None,
            max_tokens: 256,
        }
    }
}

/// What a retrieval does with test files ([`is_test_path`](crate::filter::is_test_path)).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TestFiles {
    /// Tests are returned like any other file.
    #[default]
    Include,
    /// Tests are left out.
    Exclude,
    /// Only tests are returned.
    Only,
}

/// Hybrid search configuration.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct SearchConfig {
    /// Weight of the BM25 ranking in reciprocal rank fusion.
    pub bm25_weight: f32,
    /// Weight of the vector ranking in reciprocal rank fusion.
    pub vector_weight: f32,
    /// The RRF constant `k` in `weight / (k + rank)`.
    pub rrf_k: f32,
    /// Candidates taken from each ranking before fusion.
    pub candidates: usize,
    /// Cosine similarity above which two chunks count as duplicates.
    pub dedup_cosine: f32,
    /// Ranked chunks each source of a retrieval contributes (before deduplication and the
    /// token budget): the result count of `trellis search` (`--limit`). Each ranking then
    /// takes at least this many candidates.
    pub limit: usize,
    /// Test files in retrievals: `include`, `exclude` or `only` (`--tests`).
    pub tests: TestFiles,
    /// Whether retrievals return generated and vendored files (`vendor/`, `third_party/`,
    /// `generated/`, `*.pb.go`, `*_pb2.py`, …; `--generated`).
    pub generated: bool,
    /// Whether code retrievals return non-code text files: stylesheets, translations,
    /// licences, certificates, data and configuration formats (`--non-code`).
    pub non_code: bool,
    /// Only chunks in these languages (`rust`, `python`, `javascript`, `typescript`, `tsx`,
    /// `go`, `java`, `c`, `cpp`, `markdown`, `rst`, and `text` for files without a parser);
    /// all when empty (`--lang`).
    pub languages: Vec<String>,
    /// Only files whose path (relative to the workspace root) matches one of these globs;
    /// all when empty (`--path`).
    pub paths: Vec<String>,
    /// Never files whose path matches one of these globs (`--exclude-path`).
    pub exclude_paths: Vec<String>,
    /// How retrieval reranks the hybrid candidates: `learned` (the shipped learned ranker,
    /// docs/retrieval.md "Learned ranking") or `blend` (the earlier hand-weighted blend of the
    /// fused rank and the embedding cosine).
    pub rerank: Rerank,
    /// Long natural-language queries (`[index.search.query]`).
    pub query: QueryConfig,
}

/// The reranker of retrievals (`index.search.rerank`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Rerank {
    /// The learned ranker compiled into the binary.
    #[default]
    Learned,
    /// `0.5 × fused score (normalised) + 0.5 × cosine`, the cosine term only with embeddings.
    Blend,
}

/// What the embedder reads of a long query.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum QueryEmbedding {
    /// The whole text (the embedder truncates it at `embedding.max_tokens` word pieces): the
    /// best of the three on the localisation dev set (docs/retrieval.md, "Long queries").
    #[default]
    Whole,
    /// The title, the first error line and the identifiers (at most 96 words).
    Condensed,
    /// The title, the first error line, the opening prose after the title (at most 48 words,
    /// without stack frames or code) and the identifiers (at most 96 words).
    Lead,
}

/// Handling of long queries (whole bug reports with stack traces and code; see
/// [`crate::query`]). Short queries are searched as written whatever is set here.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct QueryConfig {
    /// Whether long queries are analysed at all (false: every query as written).
    pub analyze: bool,
    /// Queries of more words than this are long (a stack frame or fenced code makes any
    /// query long).
    pub long_words: usize,
    /// RRF weight of the BM25 ranking of the focused sub-query (title, identifiers, paths).
    pub focused_weight: f32,
    /// RRF weight of the ranking of chunks in the files the query's paths and stack frames
    /// name (the chunk at a frame's line first, then each file's head).
    pub path_weight: f32,
    /// RRF weight of the ranking of candidates whose symbol name is an identifier of the
    /// query.
    pub name_weight: f32,
    /// What the embedder reads of a long query.
    pub embed: QueryEmbedding,
}

impl Default for QueryConfig {
    fn default() -> Self {
        QueryConfig {
            analyze: true,
            long_words: 24,
            focused_weight: 1.0,
            path_weight: 2.0,
            name_weight: 1.0,
            embed: QueryEmbedding::Whole,
        }
    }
}

impl Default for SearchConfig {
    fn default() -> Self {
        SearchConfig {
            bm25_weight: 1.0,
            vector_weight: 1.0,
            rrf_k: 60.0,
            candidates: 100,
            dedup_cosine: 0.95,
            limit: 50,
            tests: TestFiles::Include,
            generated: false,
            non_code: false,
            languages: Vec::new(),
            paths: Vec::new(),
            exclude_paths: Vec::new(),
            rerank: Rerank::Learned,
            query: QueryConfig::default(),
        }
    }
}

/// The request and response shape of a rerank endpoint.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RerankApi {
    /// `POST {base_url}/rerank` with `{"model", "query", "documents", "top_n"}`, answered
    /// `{"results": [{"index", "relevance_score"}]}`: Cohere (`https://api.cohere.com/v2`),
    /// Jina (`https://api.jina.ai/v1`), vLLM (`http://host:8000/v1`), Infinity, LiteLLM.
    Cohere,
    /// Hugging Face text-embeddings-inference: `POST {base_url}/rerank` with
    /// `{"query", "texts"}`, answered `[{"index", "score"}]`.
    Tei,
}

/// A cross-encoder behind an HTTP endpoint that reorders the best candidates of a
/// retrieval (step 3 of `Index::retrieve`). Any failure falls back to the local ranking.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct RerankConfig {
    /// The endpoint's shape; reranking is off when unset.
    pub api: Option<RerankApi>,
    /// Base URL; `/rerank` is appended (e.g. `http://127.0.0.1:8080` for TEI,
    /// `http://127.0.0.1:8000/v1` for vLLM, `https://api.cohere.com/v2`).
    pub base_url: Option<String>,
    /// Model name sent to the endpoint (required for `cohere`; TEI serves one model).
    pub model: Option<String>,
    /// Name of the environment variable holding the API key (never the key itself); sent as
    /// `Authorization: Bearer`.
    pub api_key_env: Option<String>,
    /// Time one rerank call may take before the local ranking is used (milliseconds).
    pub timeout_ms: u64,
    /// Candidates sent (the best of the local ranking); the rest keep their local order
    /// after them.
    pub max_documents: usize,
    /// Characters of each candidate sent (its path, symbol and text, cut there).
    pub max_document_chars: usize,
}

impl Default for RerankConfig {
    fn default() -> Self {
        RerankConfig {
            api: None,
            base_url: None,
            model: None,
            api_key_env: None,
            timeout_ms: 5000,
            max_documents: 40,
            max_document_chars: 2000,
        }
    }
}
