//! `trellis models list | test` as a real process, with an isolated user config directory.

use std::path::Path;
use std::process::Command;

use super::common::{json, ok, trellis};
use trellis_test_http::{Response, Server};

fn isolated(repo: &Path) -> Command {
    let mut c = trellis(repo);
    // No user configuration: the child gets an empty config home (the test's own env is untouched).
    c.env("XDG_CONFIG_HOME", repo.join("xdg-config"));
    c
}

#[test]
fn list_shows_the_embedded_default_and_overrides_apply() {
    let dir = tempfile::tempdir().unwrap();
    let mut c = isolated(dir.path());
    c.args(["models", "list", "--json"]);
    let v = json(c);
    let profiles = v.as_array().unwrap();
    let local = profiles.iter().find(|p| p["name"] == "local").unwrap();
    assert_eq!(local["provider"], "embedded");
    assert_eq!(local["default"], true);
    assert_eq!(local["roles"].as_array().unwrap().len(), 9);

    let mut c = isolated(dir.path());
    c.args(["-c", "models.default=tiny", "models", "list", "--json"]);
    let v = json(c);
    let tiny = v
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["name"] == "tiny")
        .unwrap()
        .clone();
    assert_eq!(tiny["default"], true);

    let mut c = isolated(dir.path());
    c.args(["models", "list"]);
    let text = ok(c);
    assert!(text.contains("* local"), "{text}");
    assert!(text.contains("default profile (local)"), "{text}");
}

#[test]
fn a_typo_in_the_project_config_names_file_line_and_fix() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join(".trellis")).unwrap();
    std::fs::write(
        dir.path().join(".trellis/config.toml"),
        "[models.profiles.ollama]\nprovider = \"openai\"\nbase_url = \"http://localhost:11434/v1\"\nmodle = \"qwen3\"\n",
    )
    .unwrap();
    let mut c = isolated(dir.path());
    c.args(["models", "list"]);
    let out = c.output().unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains(".trellis/config.toml:4"), "{err}");
    assert!(
        err.contains("did you mean `models.profiles.ollama.model`"),
        "{err}"
    );
}

#[test]
fn test_round_trips_with_the_tiny_fixture() {
    let dir = tempfile::tempdir().unwrap();
    let mut c = isolated(dir.path());
    c.args(["models", "test", "tiny", "--json"]);
    let v = json(c);
    assert_eq!(v["profile"], "tiny");
    assert!(v["answer"]["city"].is_string(), "{v}");
    assert!(v["answer"]["country"].is_string(), "{v}");
    assert!(v["prompt_tokens"].as_u64().unwrap() > 10);
}

/// The "done when": with no configuration at all, `trellis models test` makes a real
/// call to the embedded default model (offline once the weights are cached) and succeeds.
#[test]
fn test_with_no_configuration_uses_the_default_model() {
    let dir = tempfile::tempdir().unwrap();
    let mut c = isolated(dir.path());
    c.args(["models", "test"]);
    let text = ok(c);
    assert!(
        text.contains("profile   local (embedded SmolLM2-135M-Instruct.Q4_1.gguf)"),
        "{text}"
    );
    assert!(text.contains("ok: structured answer parsed"), "{text}");
}

/// Serves one canned SSE response (a recorded stream) on 127.0.0.1 until dropped.
fn one_shot_server(fixture: &str) -> Server {
    let body = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../llm/tests/fixtures")
            .join(fixture),
    )
    .unwrap();
    Server::scripted(vec![Response::sse(body)])
}

/// The same command reaches an OpenAI-compatible or an Anthropic endpoint by configuration
/// alone (here loopback servers replaying each format's recorded stream).
#[test]
fn test_reaches_remote_endpoints_by_configuration_alone() {
    // Streams recorded from a real llama-server (crates/llm/tests/fixtures/recorded/README.md).
    for (provider, fixture, path) in [
        (
            "openai",
            "recorded/openai/structured.response",
            "POST /v1/chat/completions",
        ),
        (
            "anthropic",
            "recorded/anthropic/structured.response",
            "POST /v1/messages",
        ),
    ] {
        let dir = tempfile::tempdir().unwrap();
        let server = one_shot_server(fixture);
        let url = format!("{}/v1", server.url());
        std::fs::create_dir_all(dir.path().join(".trellis")).unwrap();
        std::fs::write(
            dir.path().join(".trellis/config.toml"),
            format!(
                "[models]\ndefault = \"remote\"\n[models.profiles.remote]\nprovider = \"{provider}\"\nbase_url = \"{url}\"\nmodel = \"served-model\"\nmax_retries = 0\n"
            ),
        )
        .unwrap();
        let mut c = isolated(dir.path());
        c.args(["models", "test", "--json"]);
        let v = json(c);
        assert_eq!(v["provider"], provider);
        assert_eq!(v["answer"]["city"], "Paris", "{v}");
        let request = &server.requests()[0];
        assert!(request.head.starts_with(path), "{}", request.head);
        let body = request.json();
        assert_eq!(body["model"], "served-model");
        assert_eq!(body["stream"], true);
    }
}
