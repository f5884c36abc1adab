//! Trellis model providers.
//!
//! One seam, [`ModelProvider`]: a single required streaming method yielding text, thinking
//! and tool-call deltas, usage and a finish reason; [`ModelProvider::complete`] collects it.
//! Calls take a [`CancellationToken`](tokio_util::sync::CancellationToken); errors say
//! whether a retry may help ([`Error::is_retryable`]) and [`Retrying`] retries with
//! jittered backoff honouring `Retry-After`.
//!
//! Providers, chosen by configuration ([`ModelRegistry`]):
//! - the embedded default (module `embedded`, cargo feature `embedded`): SmolLM2-135M-Instruct
//!   in-process through llama.cpp, fetched once into `~/.cache/trellis/models`, with
//!   grammar-constrained structured output — works offline with no configuration;
//! - [`OpenAiProvider`]: any OpenAI-compatible chat-completions endpoint (OpenAI, Ollama,
//!   vLLM, llama.cpp server, TabbyAPI, LM Studio, OpenRouter) as configuration data;
//! - [`OllamaProvider`]: Ollama's native chat API, which takes the context window
//!   (`options.num_ctx`) with each request;
//! - [`AnthropicProvider`]: the Anthropic Messages API.
//!
//! The wire formats are implemented here over reqwest and small SSE and JSON-lines decoders
//! rather than
//! through a multi-provider client crate: the stream events map one-to-one onto
//! [`StreamEvent`] (tool-call argument deltas and thinking signatures stay exact), the
//! mock-server tests can assert on the exact bytes sent, and the dependency tree stays small.
//!
//! Around the providers: [`structured`] output and the [`normalise`]r, [`tokens`] counting,
//! hard [`budget`]s checked before each call, and each model's context [`window`] (asked of
//! the server where it can say).

pub mod anthropic;
pub mod budget;
pub mod config;
pub mod download;
#[cfg(feature = "embedded")]
pub mod embedded;
mod error;
pub mod http;
mod ndjson;
pub mod normalise;
pub mod ollama;
pub mod openai;
pub mod openai_wire;
pub mod provider;
pub mod registry;
pub mod retry;
pub mod sse;
pub mod structured;
pub mod tokens;
pub mod types;
pub mod window;

pub use anthropic::AnthropicProvider;
pub use budget::{
    Budget, BudgetExceeded, BudgetLedger, Budgeted, CallOutcome, CallScope, Limit, MemoryUsageSink,
    Price, Scope, UsageRecord, UsageSink,
};
pub use error::{Error, Result};
pub use ollama::OllamaProvider;
pub use openai::OpenAiProvider;
pub use provider::{
    ChatStream, ModelProvider, ProviderInfo, ProviderKind, collect, collect_named, collect_with,
};
pub use registry::{DEFAULT_PROFILE, ModelRegistry, ProfileSummary};
pub use retry::{RetryPolicy, Retrying};
pub use structured::{
    StructuredAnswer, StructuredMode, StructuredOptions, complete_structured,
    complete_structured_as,
};
pub use types::{
    ChatRequest, Completion, FinishReason, Message, ResponseFormat, Role, StreamEvent, Thinking,
    ToolCall, ToolChoice, ToolSpec, Usage,
};
pub use window::{ContextWindow, WindowSource};
