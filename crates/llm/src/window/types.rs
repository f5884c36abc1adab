//! What a context window is: its size in tokens ([`ContextWindow`]) and where the number
//! comes from ([`WindowSource`]). The provider seam states windows in these terms; finding
//! out a remote server's is the parent module's work.

use std::fmt;

use serde::Serialize;

/// A model's context window and where the number comes from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct ContextWindow {
    /// Tokens of prompt and answer together.
    pub tokens: u32,
    /// Where the number comes from.
    pub source: WindowSource,
}

/// Where a [`ContextWindow`] comes from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum WindowSource {
    /// The provider states it itself (the embedded model's context size, a test double's).
    Provider,
    /// The profile's `context` key.
    Configured,
    /// llama.cpp's `llama-server`: `GET /props`, `default_generation_settings.n_ctx` (the
    /// window of one slot, which is what one request gets).
    LlamaServer,
    /// Ollama: `GET /api/ps`, the `context_length` the loaded model runs with.
    OllamaLoaded,
    /// Ollama: `POST /api/show`, the model's `num_ctx` parameter (at most its trained
    /// `<arch>.context_length`).
    OllamaModelfile,
    /// Ollama with a model neither loaded nor given a `num_ctx`: its default below 24 GiB of
    /// VRAM ([`OLLAMA_DEFAULT_NUM_CTX`](super::OLLAMA_DEFAULT_NUM_CTX)), at most the model's
    /// trained length — an assumption.
    OllamaDefault,
    /// Ollama's native API (`provider = "ollama"`) with a configured `context` above the
    /// model's trained length (`POST /api/show`, `model_info["<arch>.context_length"]`), to
    /// which Ollama would lower it: the trained length, sent as `options.num_ctx`.
    OllamaTrained,
    /// Ollama's native API with no `context` configured and a model neither loaded nor given
    /// a `num_ctx`: [`OLLAMA_DEFAULT_NUM_CTX`](super::OLLAMA_DEFAULT_NUM_CTX), at most the
    /// trained length, sent as `options.num_ctx` — so it is the window the model runs with,
    /// not an assumption.
    OllamaSentDefault,
    /// `GET {base_url}/models`: a field of the model's entry (`max_model_len` from vLLM and
    /// `trellis models serve`, `meta.n_ctx` from llama-server, `context_length`, …).
    ModelList {
        /// The field read.
        field: &'static str,
    },
    /// The table of OpenAI and Anthropic models ([`known_window`](super::known_window)).
    KnownModel,
    /// Nothing said: [`DEFAULT_WINDOW`](super::DEFAULT_WINDOW) — an assumption.
    Default,
}

impl WindowSource {
    /// Whether the server itself reported the number (so it caps a configured `context`).
    pub fn is_reported(self) -> bool {
        matches!(
            self,
            Self::LlamaServer
                | Self::OllamaLoaded
                | Self::OllamaModelfile
                | Self::OllamaTrained
                | Self::ModelList { .. }
        )
    }

    /// Whether the number is a guess that deserves a warning.
    pub fn is_assumed(self) -> bool {
        matches!(self, Self::OllamaDefault | Self::Default)
    }
}

impl fmt::Display for WindowSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Provider => f.write_str("stated by the provider"),
            Self::Configured => f.write_str("the profile's `context`"),
            Self::LlamaServer => {
                f.write_str("llama-server GET /props default_generation_settings.n_ctx")
            }
            Self::OllamaLoaded => f.write_str("Ollama GET /api/ps context_length (loaded model)"),
            Self::OllamaModelfile => f.write_str("Ollama POST /api/show num_ctx parameter"),
            Self::OllamaDefault => f.write_str(
                "assumed: Ollama's default for a model without num_ctx that is not loaded",
            ),
            Self::OllamaTrained => f.write_str(
                "Ollama POST /api/show <arch>.context_length (the trained length, below the \
                 configured `context`), sent as options.num_ctx",
            ),
            Self::OllamaSentDefault => {
                f.write_str("Ollama's default for a model without num_ctx, sent as options.num_ctx")
            }
            Self::ModelList { field } => write!(f, "GET /models {field}"),
            Self::KnownModel => f.write_str("the table of OpenAI and Anthropic models"),
            Self::Default => f.write_str("assumed: no server or table reported it"),
        }
    }
}

impl ContextWindow {
    /// The warning for a window that is only assumed, a small default chosen for want of a
    /// configured one, or less than the configured one, naming the key concerned.
    pub fn warning(&self, profile: &str) -> Option<String> {
        let ollama = match self.source {
            WindowSource::OllamaTrained => {
                return Some(format!(
                    "profile `{profile}`: `models.profiles.{profile}.context` is more than the \
                     {} tokens the model was trained on (Ollama POST /api/show), which Ollama \
                     would lower it to; using {}.",
                    self.tokens, self.tokens
                ));
            }
            WindowSource::OllamaSentDefault => {
                return Some(format!(
                    "profile `{profile}`: no `context` is configured and the model has no \
                     `num_ctx`; each request sets Ollama's window to {} tokens \
                     (`options.num_ctx`). Set `models.profiles.{profile}.context` for a larger \
                     window.",
                    self.tokens
                ));
            }
            WindowSource::OllamaDefault => {
                " Ollama runs such a model with OLLAMA_CONTEXT_LENGTH (which no endpoint \
                 reports) or its VRAM-based default; a `PARAMETER num_ctx` in the model's \
                 Modelfile is read instead."
            }
            WindowSource::Default => "",
            _ => return None,
        };
        Some(format!(
            "profile `{profile}`: the model's context window is not known; assuming {} \
             tokens. Set `models.profiles.{profile}.context` to the server's window.{ollama}",
            self.tokens
        ))
    }
}
