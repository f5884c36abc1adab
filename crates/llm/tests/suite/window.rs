//! Context-window discovery against loopback fakes of each server kind, answering with the
//! servers' own response shapes: llama.cpp's `tools/server/README.md` ("GET /props") and
//! its `/v1/models` entries (`meta`), Ollama's `docs/api.md` and `api/types.go`
//! (`ShowResponse`, `ProcessModelResponse` with `context_length`), and vLLM's `ModelCard`
//! (`vllm/entrypoints/openai/protocol.py`, `max_model_len`).

use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use trellis_config::Config;
use trellis_llm::window::{DEFAULT_WINDOW, PROBE_TIMEOUT};
use trellis_llm::{ContextWindow, ModelRegistry, WindowSource};
use trellis_test_http::{Request, Response, Server};

/// A fake server answering `routes` (method, path, JSON body) and 404 otherwise, as each
/// real server does for the others' endpoints.
fn fake(routes: Vec<(&'static str, &'static str, Value)>) -> Server {
    Server::start(move |r: &Request| {
        let path = r.target.split('?').next().unwrap_or_default();
        routes
            .iter()
            .find(|(m, p, _)| *m == r.method && *p == path)
            .map_or_else(
                // FastAPI's (vLLM's) and Go's (Ollama's) 404 bodies differ; neither matters.
                || Response::json_status(404, r#"{"detail":"Not Found"}"#),
                |(_, _, body)| Response::json(body.to_string()),
            )
    })
}

/// The window of profile `p` (`provider`, `model`, more `extra` keys) on `server`, and the
/// provider's `info().context_window` before and after asking.
async fn window_of(
    server: &Server,
    provider: &str,
    model: &str,
    extra: &str,
) -> (Option<u32>, ContextWindow, Option<u32>) {
    let toml = format!(
        "[models.profiles.p]\nprovider = \"{provider}\"\nbase_url = \"{}/v1\"\nmodel = \"{model}\"\n{extra}",
        server.url()
    );
    let config = Config::from_toml(Path::new("config.toml"), &toml).unwrap();
    let p = ModelRegistry::from_config(&config)
        .unwrap()
        .provider("p")
        .unwrap();
    let before = p.info().context_window;
    let window = p.context_window().await.unwrap();
    (before, window, p.info().context_window)
}

/// `GET /props` of llama-server (README, trimmed of sampling parameters): `n_ctx` is the
/// window of one slot.
fn llama_props(n_ctx: u32) -> Value {
    json!({
        "default_generation_settings": {
            "id": 0, "id_task": -1, "n_ctx": n_ctx, "speculative": false, "is_processing": false,
            "params": {"n_predict": -1, "seed": 4294967295u64, "temperature": 0.8, "top_k": 40,
                       "max_tokens": -1, "n_keep": 0, "stream": true},
            "prompt": "",
            "next_token": {"has_next_token": true, "has_new_line": false, "n_remain": -1,
                           "n_decoded": 0, "stopping_word": ""}
        },
        "total_slots": 2,
        "model_path": "../models/Meta-Llama-3.1-8B-Instruct-Q4_K_M.gguf",
        "chat_template": "...",
        "modalities": {"vision": false},
        "build_info": "b6000-0123abcd"
    })
}

/// llama-server's `/v1/models`: both the Ollama-style `models` and the OpenAI-style `data`,
/// whose `meta` carries the slot's `n_ctx` and the trained `n_ctx_train`.
fn llama_models(n_ctx: u32) -> Value {
    json!({
        "models": [{"name": "Meta-Llama-3.1-8B-Instruct-Q4_K_M.gguf", "model": "Meta-Llama-3.1-8B-Instruct-Q4_K_M.gguf",
                    "modified_at": "", "size": "", "digest": "", "type": "model", "capabilities": ["completion"]}],
        "object": "list",
        "data": [{"id": "Meta-Llama-3.1-8B-Instruct-Q4_K_M.gguf", "aliases": [], "tags": [], "object": "model",
                  "created": 1767225600, "owned_by": "llamacpp",
                  "meta": {"vocab_type": 2, "n_vocab": 128256, "n_ctx": n_ctx, "n_ctx_train": 131072,
                           "n_embd": 4096, "n_params": 8030261248u64, "size": 4912898304u64}}]
    })
}

#[tokio::test]
async fn llama_server_reports_the_window_of_one_slot_in_props() {
    let server = fake(vec![
        ("GET", "/props", llama_props(8192)),
        ("GET", "/v1/models", llama_models(8192)),
    ]);
    // llama-server speaks both wire formats; the Anthropic provider asks the same way.
    for provider in ["openai", "anthropic"] {
        let (before, window, after) = window_of(&server, provider, "local", "").await;
        assert_eq!(before, None, "{provider}");
        assert_eq!(
            window,
            ContextWindow {
                tokens: 8192,
                source: WindowSource::LlamaServer
            }
        );
        assert_eq!(after, Some(8192));
    }
}

#[tokio::test]
async fn a_llama_server_model_list_without_props_gives_meta_n_ctx_never_n_ctx_train() {
    let server = fake(vec![("GET", "/v1/models", llama_models(16384))]);
    let (_, window, _) = window_of(&server, "openai", "local", "").await;
    assert_eq!(
        window,
        ContextWindow {
            tokens: 16384,
            source: WindowSource::ModelList {
                field: "meta.n_ctx"
            }
        }
    );
    let mut trained_only = llama_models(1);
    trained_only["data"][0]["meta"]
        .as_object_mut()
        .unwrap()
        .remove("n_ctx");
    let server = fake(vec![("GET", "/v1/models", trained_only)]);
    let (_, window, _) = window_of(&server, "openai", "local", "").await;
    assert_eq!(window.source, WindowSource::Default);
}

/// `POST /api/show` as in Ollama's docs/api.md (llama 3.1 8B), with `parameters` as the
/// server prints them (`%-30s %#v`) and, when `num_ctx` is given, a Modelfile `num_ctx`.
fn ollama_show(num_ctx: Option<u32>) -> Value {
    let mut parameters = "num_keep                       24\nstop                           \"<|start_header_id|>\"\nstop                           \"<|eot_id|>\"".to_owned();
    if let Some(n) = num_ctx {
        parameters.push_str(&format!("\nnum_ctx                        {n}"));
    }
    json!({
        "modelfile": "# Modelfile generated by \"ollama show\"\nFROM /root/.ollama/models/blobs/sha256-00",
        "parameters": parameters,
        "template": "{{ if .System }}<|start_header_id|>system<|end_header_id|>...",
        "details": {"parent_model": "", "format": "gguf", "family": "llama", "families": ["llama"],
                    "parameter_size": "8.0B", "quantization_level": "Q4_0"},
        "model_info": {
            "general.architecture": "llama", "general.file_type": 2,
            "general.parameter_count": 8030261248u64, "general.quantization_version": 2,
            "llama.attention.head_count": 32, "llama.block_count": 32,
            "llama.context_length": 131072, "llama.embedding_length": 4096,
            "tokenizer.ggml.model": "gpt2"
        },
        "capabilities": ["completion", "tools"],
        "modified_at": "2026-11-20T10:00:00.000000000Z"
    })
}

/// `GET /api/ps`: `context_length` is the window the loaded model runs with (api/types.go;
/// versions before the field existed omit it, as in docs/api.md's example).
fn ollama_ps(loaded: &[(&str, Option<u32>)]) -> Value {
    let models: Vec<Value> = loaded
        .iter()
        .map(|(name, ctx)| {
            let mut m = json!({
                "name": name, "model": name, "size": 5137025024u64,
                "digest": "2ae6f6dd7a3dd734790bbbf58b8909a606e0e7e97e94b7604e0aa7ae4490e6d8",
                "details": {"parent_model": "", "format": "gguf", "family": "llama",
                            "families": ["llama"], "parameter_size": "8.0B", "quantization_level": "Q4_0"},
                "expires_at": "2026-11-20T10:05:00.000Z", "size_vram": 5137025024u64
            });
            if let Some(c) = ctx {
                m["context_length"] = json!(c);
            }
            m
        })
        .collect();
    json!({ "models": models })
}

/// Ollama's OpenAI-compatible model list: no window in it.
fn ollama_v1_models() -> Value {
    json!({"object": "list", "data": [
        {"id": "llama3.1:8b", "object": "model", "created": 1767225600, "owned_by": "library"}
    ]})
}

#[tokio::test]
async fn ollama_gives_the_loaded_window_then_the_modelfile_num_ctx_then_its_default() {
    let cases = [
        // Loaded (under its `:latest`-less name), whatever the Modelfile says.
        (
            Some(8192),
            vec![("llama3.1:latest", Some(4096))],
            "llama3.1",
            4096,
            WindowSource::OllamaLoaded,
        ),
        // Not loaded: the Modelfile's num_ctx, at most the trained 131072.
        (
            Some(32768),
            vec![("other:7b", Some(2048))],
            "llama3.1:8b",
            32768,
            WindowSource::OllamaModelfile,
        ),
        (
            Some(1_000_000),
            vec![],
            "llama3.1:8b",
            131_072,
            WindowSource::OllamaModelfile,
        ),
        // Loaded by an Ollama too old to say how: as not loaded, no num_ctx — the default.
        (
            None,
            vec![("llama3.1:8b", None)],
            "llama3.1:8b",
            4096,
            WindowSource::OllamaDefault,
        ),
    ];
    for (num_ctx, loaded, model, tokens, source) in cases {
        let server = fake(vec![
            ("POST", "/api/show", ollama_show(num_ctx)),
            ("GET", "/api/ps", ollama_ps(&loaded)),
            ("GET", "/v1/models", ollama_v1_models()),
        ]);
        let (_, window, after) = window_of(&server, "openai", model, "").await;
        assert_eq!(
            window,
            ContextWindow { tokens, source },
            "{num_ctx:?} {loaded:?}"
        );
        assert_eq!(after, Some(tokens));
        let show = server
            .requests()
            .into_iter()
            .find(|r| r.target == "/api/show")
            .unwrap();
        assert_eq!(show.method, "POST");
        assert_eq!(show.json()["model"], model);
    }
}

#[tokio::test]
async fn a_configured_context_is_capped_by_what_the_server_reports_not_by_a_guess() {
    let server = fake(vec![
        ("POST", "/api/show", ollama_show(Some(8192))),
        ("GET", "/api/ps", ollama_ps(&[])),
    ]);
    let (before, window, after) =
        window_of(&server, "openai", "llama3.1", "context = 32768\n").await;
    assert_eq!(before, Some(32768));
    assert_eq!(
        window,
        ContextWindow {
            tokens: 8192,
            source: WindowSource::OllamaModelfile
        }
    );
    assert_eq!(after, Some(8192));

    // Ollama's default is only an assumption (OLLAMA_CONTEXT_LENGTH is not reported): the
    // configured value stands.
    let server = fake(vec![
        ("POST", "/api/show", ollama_show(None)),
        ("GET", "/api/ps", ollama_ps(&[])),
    ]);
    let (_, window, _) = window_of(&server, "openai", "llama3.1", "context = 32768\n").await;
    assert_eq!(
        window,
        ContextWindow {
            tokens: 32768,
            source: WindowSource::Configured
        }
    );
}

/// vLLM's `GET /v1/models`: a `ModelCard` per served model (and LoRA adapter).
fn vllm_models() -> Value {
    let card = |id: &str, root: &str, parent: Value, len: u32| {
        json!({
            "id": id, "object": "model", "created": 1767225600, "owned_by": "vllm",
            "root": root, "parent": parent, "max_model_len": len,
            "permission": [{"id": "modelperm-0a1b2c", "object": "model_permission", "created": 1767225600,
                            "allow_create_engine": false, "allow_sampling": true, "allow_logprobs": true,
                            "allow_search_indices": false, "allow_view": true, "allow_fine_tuning": false,
                            "organization": "*", "group": null, "is_blocking": false}]
        })
    };
    json!({"object": "list", "data": [
        card("Qwen/Qwen3-8B", "Qwen/Qwen3-8B", Value::Null, 32768),
        card("sql-lora", "/adapters/sql", json!("Qwen/Qwen3-8B"), 16384),
    ]})
}

#[tokio::test]
async fn vllm_reports_max_model_len_of_the_served_model() {
    let server = fake(vec![("GET", "/v1/models", vllm_models())]);
    let (_, window, _) = window_of(&server, "openai", "Qwen/Qwen3-8B", "").await;
    assert_eq!(
        window,
        ContextWindow {
            tokens: 32768,
            source: WindowSource::ModelList {
                field: "max_model_len"
            }
        }
    );
    let (_, window, _) = window_of(&server, "openai", "sql-lora", "context = 65536\n").await;
    assert_eq!(window.tokens, 16384);
    // A smaller configured window is a choice, and stands.
    let (_, window, _) = window_of(&server, "openai", "Qwen/Qwen3-8B", "context = 8192\n").await;
    assert_eq!(window.source, WindowSource::Configured);
}

#[tokio::test]
async fn a_server_that_says_nothing_gets_the_table_or_the_conservative_default() {
    let server = fake(vec![]);
    let (_, window, after) = window_of(&server, "openai", "some-local-model", "").await;
    assert_eq!(
        window,
        ContextWindow {
            tokens: DEFAULT_WINDOW,
            source: WindowSource::Default
        }
    );
    assert_eq!(after, Some(DEFAULT_WINDOW));
    assert!(
        window
            .warning("p")
            .unwrap()
            .contains("`models.profiles.p.context`")
    );
    // A proxy in front of OpenAI's models.
    let (_, window, _) = window_of(&server, "openai", "gpt-4o-mini", "").await;
    assert_eq!(
        window,
        ContextWindow {
            tokens: 128_000,
            source: WindowSource::KnownModel
        }
    );
}

#[tokio::test]
async fn the_server_is_asked_once_with_the_profiles_headers() {
    let server = fake(vec![("GET", "/props", llama_props(4096))]);
    let toml = format!(
        "[models.profiles.p]\nprovider = \"openai\"\nbase_url = \"{}/v1\"\nmodel = \"m\"\nheaders = {{ \"X-Probe\" = \"yes\" }}\napi_key_env = \"TRELLIS_TEST_NO_SUCH_VARIABLE\"\n",
        server.url()
    );
    let config = Config::from_toml(Path::new("config.toml"), &toml).unwrap();
    let p = ModelRegistry::from_config(&config)
        .unwrap()
        .provider("p")
        .unwrap();
    let (first, second) = tokio::join!(p.context_window(), p.context_window());
    assert_eq!(first, second);
    assert_eq!(p.context_window().await.unwrap().tokens, 4096);
    let requests = server.requests();
    // /props, /api/show and /v1/models: one round, although asked three times.
    assert_eq!(requests.len(), 3, "{requests:?}");
    let props = requests.iter().find(|r| r.target == "/props").unwrap();
    assert_eq!(props.header("x-probe"), Some("yes"));
    // The key variable is unset: the probes go out without one, the call would fail.
    assert_eq!(props.header("authorization"), None);
}

#[tokio::test]
async fn a_server_that_never_answers_costs_one_timeout_not_forever() {
    let server = Server::concurrent(|_| {
        Response::json(llama_props(8192).to_string()).after(Duration::from_secs(30))
    });
    let started = Instant::now();
    let (_, window, _) = window_of(&server, "openai", "m", "").await;
    let took = started.elapsed();
    assert_eq!(window.source, WindowSource::Default);
    assert!(took >= PROBE_TIMEOUT, "{took:?}");
    assert!(took < PROBE_TIMEOUT + Duration::from_secs(3), "{took:?}");
}
