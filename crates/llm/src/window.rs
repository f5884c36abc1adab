//! Context windows: how many tokens a model takes, and how that was found out.
//!
//! Every prompt is kept within its model's window (`docs/context.md`), so the window must be
//! the one the server really uses: Ollama, for one, silently cuts a prompt at its own
//! `num_ctx`, whatever a client assumes. A remote provider therefore asks its server, once,
//! on the first [`ModelProvider::context_window`](crate::ModelProvider::context_window) call
//! (llama-server's `/props`, Ollama's `/api/show` and `/api/ps`, the `/models` list, each
//! with a short timeout — see `docs/models.md`, "Context windows"); the
//! official OpenAI and Anthropic APIs report nothing and are looked up in a table instead.
//! What the server reports caps the profile's `context`; when nothing is known, a
//! conservative [`DEFAULT_WINDOW`] is used and a warning names the key to set.
//!
//! Ollama's native API (`provider = "ollama"`) is different: each request sends the window as
//! `options.num_ctx`, which makes it the window the server uses, so only Ollama is asked and
//! a configured `context` stands, at most the model's trained length.

mod known;
mod probe;
mod types;

use std::time::Duration;

use tokio::sync::OnceCell;

use crate::http::{Endpoint, KeyHeader};
use crate::provider::ProviderInfo;

pub use known::known_window;
pub(crate) use probe::ollama_root;
pub use types::{ContextWindow, WindowSource};

/// The window assumed when nothing reports one: the smallest default of the common local
/// servers (Ollama below 24 GiB of VRAM, LM Studio, TabbyAPI, llama-server's `-c` in older
/// builds). Too small costs summaries; too large silently loses the start of a prompt.
pub const DEFAULT_WINDOW: u32 = 4096;

/// The window Ollama gives a model that has no `num_ctx` on a machine with less than 24 GiB
/// of VRAM (its `server/routes.go`: 4096, 32768 from 24 GiB, 262144 from 48 GiB), unless the
/// server was started with `OLLAMA_CONTEXT_LENGTH` — which no endpoint reports.
pub const OLLAMA_DEFAULT_NUM_CTX: u32 = 4096;

/// How long each request asking for the window may take before it counts as unanswered.
pub const PROBE_TIMEOUT: Duration = Duration::from_secs(5);

/// Which servers a remote provider's window is asked of, and how their answer and a
/// configured `context` combine.
#[derive(Clone, Copy, Debug)]
enum Asks {
    /// Any OpenAI-compatible or Anthropic endpoint: every kind of server is asked, and a
    /// reported window caps the configured one ([`decide`]).
    Any,
    /// Ollama's native API, which is sent the window with each request: only Ollama is
    /// asked, and the configured window stands, at most the trained length
    /// ([`decide_ollama`]).
    OllamaNative,
}

/// A remote provider's window: found out on first use and kept, with the provider's info
/// updated to hold it.
pub(crate) struct Window {
    endpoint: Endpoint,
    key: KeyHeader,
    asks: Asks,
    model: String,
    configured: Option<u32>,
    found: OnceCell<(ContextWindow, ProviderInfo)>,
}

impl Window {
    /// The window of `info.model` behind `endpoint` (`info.context_window` is the profile's
    /// `context`).
    pub(crate) fn new(endpoint: Endpoint, key: KeyHeader, info: &ProviderInfo) -> Self {
        Self {
            endpoint,
            key,
            asks: Asks::Any,
            model: info.model.clone(),
            configured: info.context_window,
            found: OnceCell::new(),
        }
    }

    /// The window of `info.model` on the Ollama server behind `endpoint`, for its native API
    /// (which sends it as `num_ctx`).
    pub(crate) fn ollama_native(endpoint: Endpoint, key: KeyHeader, info: &ProviderInfo) -> Self {
        Self {
            asks: Asks::OllamaNative,
            ..Self::new(endpoint, key, info)
        }
    }

    /// `base` with the window found, once it was.
    pub(crate) fn info(&self) -> Option<&ProviderInfo> {
        self.found.get().map(|(_, info)| info)
    }

    /// The window, found out on the first call (concurrent first calls wait for one answer).
    pub(crate) async fn get(&self, base: &ProviderInfo) -> ContextWindow {
        let (window, _) = self
            .found
            .get_or_init(|| async {
                let window = self.find().await;
                let info = ProviderInfo {
                    context_window: Some(window.tokens),
                    ..base.clone()
                };
                (window, info)
            })
            .await;
        *window
    }

    async fn find(&self) -> ContextWindow {
        let profile = &self.endpoint.profile;
        let window = match self.asks {
            Asks::Any => {
                // The official APIs answer none of the probes: do not send them requests in
                // vain.
                let reported = if is_official(&self.endpoint.base_url) {
                    None
                } else {
                    probe::ask(&self.endpoint, self.key, &self.model).await
                };
                decide(
                    profile,
                    self.configured,
                    reported,
                    known_window(&self.model),
                )
            }
            Asks::OllamaNative => {
                let report = probe::ask_ollama_native(&self.endpoint, self.key, &self.model).await;
                decide_ollama(profile, self.configured, report)
            }
        };
        tracing::info!(
            profile = %self.endpoint.profile,
            tokens = window.tokens,
            source = %window.source,
            "context window"
        );
        window
    }
}

/// Chooses among the configured, the reported and the table's window: the configured one
/// unless the server reports less; else what the server reports; else the table; else
/// [`DEFAULT_WINDOW`]. Warns when the result is assumed or a configured value was lowered.
pub(crate) fn decide(
    profile: &str,
    configured: Option<u32>,
    reported: Option<ContextWindow>,
    known: Option<u32>,
) -> ContextWindow {
    let window = match (configured, reported) {
        (Some(c), Some(r)) if r.source.is_reported() && r.tokens < c => {
            tracing::warn!(
                "profile `{profile}`: `models.profiles.{profile}.context` is {c} but the server \
                 reports {} tokens ({}); using {}",
                r.tokens,
                r.source,
                r.tokens
            );
            r
        }
        (Some(tokens), _) => ContextWindow {
            tokens,
            source: WindowSource::Configured,
        },
        (None, Some(r)) => r,
        (None, None) => match known {
            Some(tokens) => ContextWindow {
                tokens,
                source: WindowSource::KnownModel,
            },
            None => ContextWindow {
                tokens: DEFAULT_WINDOW,
                source: WindowSource::Default,
            },
        },
    };
    warn_if_unsure(profile, &window);
    window
}

/// Logs the window's [`ContextWindow::warning`], if it has one.
fn warn_if_unsure(profile: &str, window: &ContextWindow) {
    if let Some(warning) = window.warning(profile) {
        tracing::warn!("{warning}");
    }
}

/// The window of Ollama's native API, which each request sends as `num_ctx` (making it
/// the server's): the configured one, lowered with a warning to the trained length Ollama
/// would lower it to; else the window the model would get without a `num_ctx` (loaded,
/// Modelfile, or [`WindowSource::OllamaSentDefault`]); else, when Ollama did not answer,
/// [`DEFAULT_WINDOW`] with a warning.
fn decide_ollama(
    profile: &str,
    configured: Option<u32>,
    report: Option<probe::OllamaReport>,
) -> ContextWindow {
    let window = match (configured, report) {
        (
            Some(c),
            Some(probe::OllamaReport {
                trained: Some(t), ..
            }),
        ) if c > t => ContextWindow {
            tokens: t,
            source: WindowSource::OllamaTrained,
        },
        (Some(tokens), _) => ContextWindow {
            tokens,
            source: WindowSource::Configured,
        },
        (None, Some(r)) if r.window.source == WindowSource::OllamaDefault => ContextWindow {
            tokens: r.window.tokens,
            source: WindowSource::OllamaSentDefault,
        },
        (None, Some(r)) => r.window,
        // The table of OpenAI and Anthropic models does not name Ollama's.
        (None, None) => return decide(profile, None, None, None),
    };
    warn_if_unsure(profile, &window);
    window
}

/// Whether `base_url` is OpenAI's or Anthropic's own API.
fn is_official(base_url: &str) -> bool {
    reqwest::Url::parse(base_url)
        .ok()
        .and_then(|u| u.host_str().map(str::to_ascii_lowercase))
        .is_some_and(|h| h == "api.openai.com" || h == "api.anthropic.com")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn w(tokens: u32, source: WindowSource) -> Option<ContextWindow> {
        Some(ContextWindow { tokens, source })
    }

    #[test]
    fn a_reported_window_caps_the_configured_one_but_an_assumed_one_does_not() {
        let loaded = w(4096, WindowSource::OllamaLoaded);
        assert_eq!(decide("p", Some(32768), loaded, None), loaded.unwrap());
        let assumed = w(4096, WindowSource::OllamaDefault);
        assert_eq!(
            decide("p", Some(32768), assumed, None).source,
            WindowSource::Configured
        );
        // A larger reported window leaves a deliberately smaller configuration alone.
        let big = w(
            131_072,
            WindowSource::ModelList {
                field: "max_model_len",
            },
        );
        assert_eq!(
            decide("p", Some(8192), big, None),
            ContextWindow {
                tokens: 8192,
                source: WindowSource::Configured
            }
        );
    }

    #[test]
    fn without_configuration_the_server_then_the_table_then_the_default() {
        let props = w(8192, WindowSource::LlamaServer);
        assert_eq!(decide("p", None, props, Some(128_000)), props.unwrap());
        assert_eq!(
            decide("p", None, None, Some(128_000)).source,
            WindowSource::KnownModel
        );
        assert_eq!(
            decide("p", None, None, None),
            ContextWindow {
                tokens: DEFAULT_WINDOW,
                source: WindowSource::Default
            }
        );
    }

    #[test]
    fn only_assumed_windows_warn_and_the_warning_names_the_key() {
        let assumed = ContextWindow {
            tokens: 4096,
            source: WindowSource::Default,
        };
        let text = assumed.warning("ollama").unwrap();
        assert!(text.contains("`models.profiles.ollama.context`"), "{text}");
        assert!(text.contains("assuming 4096 tokens"), "{text}");
        let ollama = ContextWindow {
            source: WindowSource::OllamaDefault,
            ..assumed
        };
        assert!(ollama.warning("o").unwrap().contains("num_ctx"));
        let known = ContextWindow {
            source: WindowSource::KnownModel,
            ..assumed
        };
        assert_eq!(known.warning("o"), None);
    }

    fn report(
        tokens: u32,
        source: WindowSource,
        trained: Option<u32>,
    ) -> Option<probe::OllamaReport> {
        Some(probe::OllamaReport {
            window: ContextWindow { tokens, source },
            trained,
        })
    }

    #[test]
    fn with_ollamas_native_api_the_configured_window_stands_up_to_the_trained_length() {
        // A smaller loaded or Modelfile window does not lower it: the request sets num_ctx.
        for source in [WindowSource::OllamaLoaded, WindowSource::OllamaModelfile] {
            assert_eq!(
                decide_ollama("p", Some(32768), report(4096, source, Some(131_072))),
                ContextWindow {
                    tokens: 32768,
                    source: WindowSource::Configured
                }
            );
        }
        assert_eq!(
            decide_ollama(
                "p",
                Some(65536),
                report(4096, WindowSource::OllamaDefault, Some(32768))
            ),
            ContextWindow {
                tokens: 32768,
                source: WindowSource::OllamaTrained
            }
        );
        let text = ContextWindow {
            tokens: 32768,
            source: WindowSource::OllamaTrained,
        }
        .warning("o")
        .unwrap();
        assert!(
            text.contains("`models.profiles.o.context` is more than the 32768 tokens"),
            "{text}"
        );
        // Ollama did not answer, or did not say the trained length: the configured value.
        for r in [None, report(4096, WindowSource::OllamaDefault, None)] {
            assert_eq!(
                decide_ollama("p", Some(65536), r).source,
                WindowSource::Configured
            );
        }
    }

    #[test]
    fn with_ollamas_native_api_and_no_context_the_window_ollama_would_use_is_sent() {
        let loaded = report(8192, WindowSource::OllamaLoaded, Some(131_072));
        assert_eq!(decide_ollama("p", None, loaded), loaded.unwrap().window);
        let sent = decide_ollama(
            "p",
            None,
            report(2048, WindowSource::OllamaDefault, Some(2048)),
        );
        assert_eq!(
            sent,
            ContextWindow {
                tokens: 2048,
                source: WindowSource::OllamaSentDefault
            }
        );
        assert!(!sent.source.is_assumed());
        let text = sent.warning("o").unwrap();
        assert!(text.contains("`models.profiles.o.context`"), "{text}");
        assert!(text.contains("2048 tokens"), "{text}");
        assert_eq!(
            decide_ollama("p", None, None),
            ContextWindow {
                tokens: DEFAULT_WINDOW,
                source: WindowSource::Default
            }
        );
    }

    #[test]
    fn only_the_official_hosts_skip_the_probes() {
        assert!(is_official("https://api.openai.com/v1"));
        assert!(is_official("https://API.anthropic.com/v1/"));
        assert!(!is_official("http://localhost:11434/v1"));
        assert!(!is_official("https://openrouter.ai/api/v1"));
        assert!(!is_official("not a url"));
    }
}
