//! Asking a server for its window. Each server kind has its own request; all are sent at
//! once, each given [`PROBE_TIMEOUT`], and the most specific answer wins: llama-server's
//! `/props`, then Ollama's `/api/show` + `/api/ps`, then the OpenAI-style `/models` list.
//! A server that is not of a kind answers its request with 404 (or not at all), which only
//! means "not this kind". The response shapes are the servers' own:
//!
//! - llama.cpp `tools/server` (README, "GET /props"): `{"default_generation_settings":
//!   {"n_ctx": N, …}, "total_slots": S, …}` — `n_ctx` is one slot's window;
//! - Ollama `api/types.go` (`ShowResponse`, `ProcessModelResponse`) and `docs/api.md`:
//!   `/api/show` → `{"parameters": "num_ctx 8192\n…", "model_info": {"general.architecture":
//!   "llama", "llama.context_length": 131072, …}}`, `/api/ps` → `{"models": [{"name", "model",
//!   "context_length", …}]}`;
//! - vLLM `ModelCard` (`{"id", "max_model_len", …}`), llama-server's `/v1/models` entries
//!   (`"meta": {"n_ctx", "n_ctx_train", …}`) and the `context_length`/`context_window` that
//!   hosted OpenAI-compatible APIs (OpenRouter, Groq, Together) put in their model lists.

use reqwest::header::HeaderMap;
use serde_json::{Value, json};

use super::{ContextWindow, OLLAMA_DEFAULT_NUM_CTX, PROBE_TIMEOUT, WindowSource};
use crate::http::{Endpoint, KeyHeader};

/// Fields of a `/models` entry read as the window, most specific first. `meta.n_ctx_train`
/// (llama-server) is deliberately absent: it is the length the model was trained on, not
/// the window the server allocated, which may be smaller.
const MODEL_LIST_FIELDS: &[(&str, &str)] = &[
    ("max_model_len", "/max_model_len"),
    ("meta.n_ctx", "/meta/n_ctx"),
    ("context_length", "/context_length"),
    ("context_window", "/context_window"),
    ("max_context_length", "/max_context_length"),
];

/// The profile's headers with the API key. Without the key variable set the call itself
/// fails later with the clear error; the probes go out unauthenticated meanwhile (local
/// servers rarely need one).
fn probe_headers(endpoint: &Endpoint, key: KeyHeader) -> HeaderMap {
    endpoint
        .headers_with_key(key)
        .unwrap_or_else(|_| endpoint.headers.clone())
}

/// What the server at `endpoint` says `model`'s window is, if it is a kind that says.
pub(super) async fn ask(endpoint: &Endpoint, key: KeyHeader, model: &str) -> Option<ContextWindow> {
    let headers = probe_headers(endpoint, key);
    let http = Http {
        client: &endpoint.client,
        headers: &headers,
    };
    let root = server_root(&endpoint.base_url);
    let (props_url, models_url) = (format!("{root}/props"), endpoint.url("models"));
    let (props, ollama, models) = tokio::join!(
        http.get(&props_url),
        ask_ollama(&http, root, model),
        http.get(&models_url),
    );
    let ollama = ollama.map(|o| o.window);
    let llama = props
        .as_ref()
        .and_then(llama_server_n_ctx)
        .map(|tokens| ContextWindow {
            tokens,
            source: WindowSource::LlamaServer,
        });
    let listed = models
        .as_ref()
        .and_then(|v| model_list_window(v, model))
        .map(|(tokens, field)| ContextWindow {
            tokens,
            source: WindowSource::ModelList { field },
        });
    llama.or(ollama).or(listed)
}

/// What Ollama's native API (`provider = "ollama"`) says of `model` behind `endpoint`.
pub(super) async fn ask_ollama_native(
    endpoint: &Endpoint,
    key: KeyHeader,
    model: &str,
) -> Option<OllamaReport> {
    let headers = probe_headers(endpoint, key);
    let http = Http {
        client: &endpoint.client,
        headers: &headers,
    };
    ask_ollama(&http, ollama_root(&endpoint.base_url), model).await
}

/// The server's address without the API version segment (`http://host:11434/v1` →
/// `http://host:11434`), where llama-server and Ollama serve their own endpoints.
fn server_root(base_url: &str) -> &str {
    let base = base_url.trim_end_matches('/');
    base.strip_suffix("/v1").unwrap_or(base)
}

/// An Ollama server's address from a configured `base_url`, which may name its
/// OpenAI-compatible `/v1` or its native `/api` (`http://host:11434/api/` →
/// `http://host:11434`); the native endpoints are `<root>/api/…`.
pub(crate) fn ollama_root(base_url: &str) -> &str {
    let base = base_url.trim_end_matches('/');
    ["/v1", "/api"]
        .iter()
        .find_map(|suffix| base.strip_suffix(suffix))
        .unwrap_or(base)
}

struct Http<'a> {
    client: &'a reqwest::Client,
    headers: &'a HeaderMap,
}

impl Http<'_> {
    async fn get(&self, url: &str) -> Option<Value> {
        self.json(self.client.get(url)).await
    }

    async fn post(&self, url: &str, body: &Value) -> Option<Value> {
        let request = self
            .client
            .post(url)
            .header(reqwest::header::CONTENT_TYPE, "application/json")
            .body(body.to_string());
        self.json(request).await
    }

    /// The JSON body of a successful answer within [`PROBE_TIMEOUT`]; anything else is
    /// `None` (this server does not say).
    async fn json(&self, request: reqwest::RequestBuilder) -> Option<Value> {
        let answer = async {
            let response = request.headers(self.headers.clone()).send().await.ok()?;
            if !response.status().is_success() {
                return None;
            }
            let bytes = response.bytes().await.ok()?;
            serde_json::from_slice(&bytes).ok()
        };
        tokio::time::timeout(PROBE_TIMEOUT, answer)
            .await
            .ok()
            .flatten()
    }
}

/// What Ollama says of a model's window.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(super) struct OllamaReport {
    /// The window a request that sets no `num_ctx` gets.
    pub(super) window: ContextWindow,
    /// The trained length, `model_info["<arch>.context_length"]` of `/api/show` (Ollama's
    /// `llm/server.go` lowers a larger `num_ctx` to it).
    pub(super) trained: Option<u32>,
}

/// Ollama's window for `model`: the loaded model's (`/api/ps`), else its `num_ctx`
/// parameter, else Ollama's default — each at most the trained length from `/api/show`.
/// Requests through Ollama's OpenAI-compatible endpoint cannot set `num_ctx` (its
/// `ChatCompletionRequest` has no `options`), so these are the windows such requests get.
/// `None` when `/api/show` does not answer (not Ollama, or a model it does not have).
async fn ask_ollama(http: &Http<'_>, root: &str, model: &str) -> Option<OllamaReport> {
    let show = http
        .post(&format!("{root}/api/show"), &json!({ "model": model }))
        .await?;
    let shown = ollama_show(&show)?;
    let loaded = http
        .get(&format!("{root}/api/ps"))
        .await
        .and_then(|ps| ollama_loaded(&ps, model));
    let at_most = |n: u32| shown.trained.map_or(n, |t| n.min(t));
    let window = match (loaded, shown.num_ctx) {
        (Some(tokens), _) => ContextWindow {
            tokens,
            source: WindowSource::OllamaLoaded,
        },
        (None, Some(n)) => ContextWindow {
            tokens: at_most(n),
            source: WindowSource::OllamaModelfile,
        },
        (None, None) => ContextWindow {
            tokens: at_most(OLLAMA_DEFAULT_NUM_CTX),
            source: WindowSource::OllamaDefault,
        },
    };
    Some(OllamaReport {
        window,
        trained: shown.trained,
    })
}

/// What `/api/show` says of a model.
#[derive(Debug, PartialEq)]
struct Shown {
    /// `model_info["<arch>.context_length"]`.
    trained: Option<u32>,
    /// The `num_ctx` line of `parameters`.
    num_ctx: Option<u32>,
}

/// Reads an `/api/show` answer; `None` when it is not one (no `model_info` object).
fn ollama_show(v: &Value) -> Option<Shown> {
    let info = v.get("model_info")?.as_object()?;
    let arch = info.get("general.architecture").and_then(Value::as_str);
    let trained = arch
        .and_then(|a| info.get(&format!("{a}.context_length")))
        .or_else(|| {
            info.iter()
                .find(|(k, _)| k.ends_with(".context_length"))
                .map(|(_, v)| v)
        })
        .and_then(tokens);
    // `parameters` is one `name value` per line, names padded with spaces; a number may be
    // printed as a float.
    let num_ctx = v
        .get("parameters")
        .and_then(Value::as_str)
        .and_then(|text| {
            text.lines().find_map(|line| {
                let mut words = line.split_whitespace();
                (words.next() == Some("num_ctx"))
                    .then(|| words.next())
                    .flatten()
                    .and_then(|n| n.parse::<f64>().ok())
            })
        })
        .and_then(|n| tokens(&json!(n)));
    Some(Shown { trained, num_ctx })
}

/// The `context_length` of `model` in an `/api/ps` answer, when it is loaded.
fn ollama_loaded(v: &Value, model: &str) -> Option<u32> {
    v.get("models")?.as_array()?.iter().find_map(|m| {
        let named = ["name", "model"]
            .iter()
            .filter_map(|k| m.get(*k).and_then(Value::as_str))
            .any(|n| same_ollama_model(n, model));
        named
            .then(|| m.get("context_length").and_then(tokens))
            .flatten()
    })
}

/// Ollama names match with or without the implied `:latest` tag, in any case.
fn same_ollama_model(a: &str, b: &str) -> bool {
    let strip = |s: &str| {
        let lower = s.trim().to_ascii_lowercase();
        match lower.strip_suffix(":latest") {
            Some(base) => base.to_owned(),
            None => lower,
        }
    };
    strip(a) == strip(b)
}

/// `default_generation_settings.n_ctx` of a llama-server `/props` answer.
fn llama_server_n_ctx(v: &Value) -> Option<u32> {
    v.pointer("/default_generation_settings/n_ctx")
        .and_then(tokens)
}

/// The window in `model`'s entry of a `/models` list (the only entry when none has its id:
/// llama-server lists its one model under its file name or alias, whatever the request's
/// `model`), with the field it came from.
fn model_list_window(v: &Value, model: &str) -> Option<(u32, &'static str)> {
    let data = v.get("data")?.as_array()?;
    let entry = data
        .iter()
        .find(|e| e.get("id").and_then(Value::as_str) == Some(model))
        .or(match data.as_slice() {
            [only] => Some(only),
            _ => None,
        })?;
    MODEL_LIST_FIELDS
        .iter()
        .find_map(|(field, pointer)| entry.pointer(pointer).and_then(tokens).map(|t| (t, *field)))
}

/// A positive token count (an integer, or a float some servers print).
fn tokens(v: &Value) -> Option<u32> {
    let n = v.as_u64().or_else(|| {
        v.as_f64()
            .filter(|f| f.is_finite() && *f >= 1.0)
            .map(|f| f as u64)
    })?;
    (n > 0).then(|| u32::try_from(n).unwrap_or(u32::MAX))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_root_drops_the_version_segment_only() {
        assert_eq!(
            server_root("http://localhost:11434/v1"),
            "http://localhost:11434"
        );
        assert_eq!(server_root("http://h:8080/v1/"), "http://h:8080");
        assert_eq!(
            server_root("https://openrouter.ai/api/v1"),
            "https://openrouter.ai/api"
        );
        assert_eq!(server_root("http://h:8080"), "http://h:8080");
    }

    #[test]
    fn the_ollama_root_drops_v1_or_api() {
        for base in [
            "http://localhost:11434",
            "http://localhost:11434/",
            "http://localhost:11434/v1",
            "http://localhost:11434/api/",
        ] {
            assert_eq!(ollama_root(base), "http://localhost:11434", "{base}");
        }
        // Behind a reverse proxy's path.
        assert_eq!(
            ollama_root("https://gpu.example/ollama/api"),
            "https://gpu.example/ollama"
        );
    }

    #[test]
    fn ollama_parameters_and_model_info() {
        // `parameters` as Ollama prints it (`%-30s %#v`), here with a Modelfile num_ctx.
        let show = json!({
            "parameters": "num_keep                       24\nnum_ctx                        8192\nstop                           \"<|eot_id|>\"",
            "model_info": {"general.architecture": "llama", "llama.context_length": 131072},
        });
        assert_eq!(
            ollama_show(&show),
            Some(Shown {
                trained: Some(131_072),
                num_ctx: Some(8192)
            })
        );
        let bare = json!({"model_info": {"qwen2.context_length": 32768.0}});
        assert_eq!(
            ollama_show(&bare),
            Some(Shown {
                trained: Some(32_768),
                num_ctx: None
            })
        );
        // Not an /api/show answer at all.
        assert_eq!(ollama_show(&json!({"error": "not found"})), None);
    }

    #[test]
    fn ollama_names_match_without_latest() {
        let ps = json!({"models": [
            {"name": "other:7b", "model": "other:7b", "context_length": 2048},
            {"name": "qwen2.5-coder:latest", "model": "qwen2.5-coder:latest", "context_length": 4096},
        ]});
        assert_eq!(ollama_loaded(&ps, "qwen2.5-coder"), Some(4096));
        assert_eq!(ollama_loaded(&ps, "Qwen2.5-Coder:latest"), Some(4096));
        assert_eq!(ollama_loaded(&ps, "qwen2.5-coder:14b"), None);
        // Versions before `context_length` existed report none.
        let old = json!({"models": [{"name": "qwen2.5-coder:latest", "size": 1}]});
        assert_eq!(ollama_loaded(&old, "qwen2.5-coder"), None);
    }

    #[test]
    fn model_lists_prefer_the_entry_of_the_model() {
        let list = json!({"object": "list", "data": [
            {"id": "a", "max_model_len": 4096},
            {"id": "b", "max_model_len": 32768},
        ]});
        assert_eq!(
            model_list_window(&list, "b"),
            Some((32768, "max_model_len"))
        );
        assert_eq!(model_list_window(&list, "c"), None);
        let one = json!({"data": [{"id": "/models/x.gguf", "meta": {"n_ctx": 8192, "n_ctx_train": 131072}}]});
        assert_eq!(model_list_window(&one, "local"), Some((8192, "meta.n_ctx")));
        let trained_only = json!({"data": [{"id": "m", "meta": {"n_ctx_train": 131072}}]});
        assert_eq!(model_list_window(&trained_only, "m"), None);
    }

    #[test]
    fn token_counts_are_positive_integers() {
        assert_eq!(tokens(&json!(8192)), Some(8192));
        assert_eq!(tokens(&json!(8192.0)), Some(8192));
        assert_eq!(tokens(&json!(0)), None);
        assert_eq!(tokens(&json!(-1)), None);
        assert_eq!(tokens(&json!("8192")), None);
        assert_eq!(tokens(&json!(u64::MAX)), Some(u32::MAX));
    }
}
