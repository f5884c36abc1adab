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

/// The issue's "done when": with no configuration at all, `trellis models test` makes a real
/// call to the embedded default model (offline once the weights are cached) and succeeds.
#[test]
fn test_with_no_configuration_uses_the_default_model() {
    let dir = tempfile::tempdir().unwrap();
    let mut c = isolated(dir.path());
    c.args(["models", "test"]);
    let text = ok(c);
    assert!(
        text.contains("profile   local (embedded qwen2.5-coder-1.5b-instruct-q4_k_m.gguf)"),
        "{text}"
    );
    assert!(text.contains("ok: structured answer parsed"), "{text}");
}

/// Serves one canned SSE response (a recorded stream) to the model call on 127.0.0.1 until
/// dropped; `GET /props` gets `props` when given (llama-server says its window there),
/// anything else 404 (a server that does not say).
fn one_shot_server(fixture: &str, props: Option<serde_json::Value>) -> Server {
    let body = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../llm/tests/fixtures")
            .join(fixture),
    )
    .unwrap();
    let mut answered = false;
    Server::start(move |r| {
        if r.method == "POST" && !r.target.starts_with("/api/") && !answered {
            answered = true;
            Response::sse(body.clone())
        } else if let (true, Some(props)) = (r.target == "/props", &props) {
            Response::json(props.to_string())
        } else {
            Response::json_status(404, r#"{"error":"not found"}"#)
        }
    })
}

/// The model call among the requests a server received.
fn model_call(server: &Server) -> trellis_test_http::Request {
    server
        .requests()
        .into_iter()
        .find(|r| r.method == "POST" && !r.target.starts_with("/api/"))
        .expect("a model call")
}

/// `trellis models test` shows the window the server reports and where it comes from; with a
/// server that says nothing it warns, naming the key to set, and assumes 4096 tokens.
#[test]
fn test_shows_the_context_window_and_its_source() {
    // llama-server's `GET /props` (tools/server/README.md), trimmed.
    let props = serde_json::json!({
        "default_generation_settings": {"id": 0, "id_task": -1, "n_ctx": 8192, "params": {"n_predict": -1}},
        "total_slots": 1,
        "model_path": "../models/SmolLM2-135M-Instruct.Q4_1.gguf",
        "build_info": "b11434"
    });
    for (props, expect_out, expect_err) in [
        (
            Some(props),
            "window    8192 tokens (llama-server GET /props default_generation_settings.n_ctx)",
            None,
        ),
        (
            None,
            "window    4096 tokens (assumed: no server or table reported it)",
            Some(
                "warning: profile `remote`: the model's context window is not known; assuming 4096 tokens. Set `models.profiles.remote.context`",
            ),
        ),
    ] {
        let dir = tempfile::tempdir().unwrap();
        let server = one_shot_server("recorded/openai/structured.response", props);
        std::fs::create_dir_all(dir.path().join(".trellis")).unwrap();
        std::fs::write(
            dir.path().join(".trellis/config.toml"),
            format!(
                "[models]\ndefault = \"remote\"\n[models.profiles.remote]\nprovider = \"openai\"\nbase_url = \"{}/v1\"\nmodel = \"served-model\"\nmax_retries = 0\n",
                server.url()
            ),
        )
        .unwrap();
        let out = isolated(dir.path())
            .args(["models", "test"])
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{stdout}\n{stderr}");
        assert!(stdout.contains(expect_out), "{stdout}");
        match expect_err {
            Some(warning) => assert!(stderr.contains(warning), "{stderr}"),
            None => assert!(!stderr.contains("warning:"), "{stderr}"),
        }
        // The call itself went out once, after the window was asked for.
        let posts: Vec<_> = server
            .requests()
            .into_iter()
            .filter(|r| r.target == "/v1/chat/completions")
            .collect();
        assert_eq!(posts.len(), 1);
    }
}

/// `trellis models list` shows a configured window, and that a remote one is found out
/// otherwise (listing sends no request).
#[test]
fn list_shows_configured_windows() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join(".trellis")).unwrap();
    std::fs::write(
        dir.path().join(".trellis/config.toml"),
        "[models.profiles.big]\nprovider = \"openai\"\nbase_url = \"http://127.0.0.1:9/v1\"\nmodel = \"m\"\ncontext = 32768\n\
         [models.profiles.ask]\nprovider = \"openai\"\nbase_url = \"http://127.0.0.1:9/v1\"\nmodel = \"m\"\n",
    )
    .unwrap();
    let mut c = isolated(dir.path());
    c.args(["models", "list", "--json"]);
    let v = json(c);
    let of = |name: &str| {
        v.as_array()
            .unwrap()
            .iter()
            .find(|p| p["name"] == name)
            .unwrap()
            .clone()
    };
    assert_eq!(of("big")["context"], 32768);
    assert!(of("ask").get("context").is_none());
    let mut c = isolated(dir.path());
    c.args(["models", "list"]);
    let text = ok(c);
    assert!(
        text.contains("http://127.0.0.1:9/v1  (context 32768)"),
        "{text}"
    );
    assert!(
        text.contains("http://127.0.0.1:9/v1  (context found on first use)"),
        "{text}"
    );
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
        let server = one_shot_server(fixture, None);
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
        let request = model_call(&server);
        assert!(request.head.starts_with(path), "{}", request.head);
        let body = request.json();
        assert_eq!(body["model"], "served-model");
        assert_eq!(body["stream"], true);
    }
}

/// Stops a server however the test ends.
struct Kill(std::process::Child);

impl Drop for Kill {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// `trellis models serve --profile tiny --port 0` in `dir` (stderr to `dir/serve.stderr`,
/// its token in `token_file`): the process and its stdout's lines.
fn serve_tiny(
    dir: &Path,
    token_file: &Path,
) -> (
    Kill,
    std::io::Lines<std::io::BufReader<std::process::ChildStdout>>,
) {
    use std::io::BufRead;
    use std::process::Stdio;
    let mut c = isolated(dir);
    c.args([
        "models",
        "serve",
        "--profile",
        "tiny",
        "--port",
        "0",
        "--token-file",
    ])
    .arg(token_file)
    .stdin(Stdio::null())
    .stdout(Stdio::piped())
    .stderr(std::fs::File::create(dir.join("serve.stderr")).unwrap());
    let mut child = Kill(c.spawn().unwrap());
    let out = child.0.stdout.take().unwrap();
    (child, std::io::BufReader::new(out).lines())
}

/// `trellis models serve` as a real process with the random-weights model: the banner names
/// the address and the token file, a streamed request is answered in OpenAI's chunk format
/// and logged on stderr, a request without the token is refused, SIGTERM stops it.
#[test]
fn serve_answers_a_streamed_request_with_the_tiny_model() {
    use std::io::{Read, Write};
    use std::net::TcpStream;

    let dir = tempfile::tempdir().unwrap();
    let token_file = dir.path().join("models-token");
    let stderr = dir.path().join("serve.stderr");
    let (mut child, mut lines) = serve_tiny(dir.path(), &token_file);
    let banner = lines.next().unwrap().unwrap();
    assert!(banner.starts_with("serving `tiny`"), "{banner}");
    let base = banner.rsplit(' ').next().unwrap().to_string();
    let addr = base
        .strip_prefix("http://")
        .and_then(|a| a.strip_suffix("/v1"))
        .unwrap()
        .to_string();
    let token = std::fs::read_to_string(&token_file).unwrap();
    let token = token.trim();
    let shown = lines.next().unwrap().unwrap();
    assert!(shown.contains(token), "a new token is shown once: {shown}");

    let post = |auth: &str, body: &str| {
        let mut s = TcpStream::connect(&addr).unwrap();
        write!(
            s,
            "POST /v1/chat/completions HTTP/1.1\r\nHost: {addr}\r\n{auth}Content-Type: application/json\r\n\
             Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
            body.len()
        )
        .unwrap();
        let mut out = String::new();
        s.read_to_string(&mut out).unwrap();
        out
    };
    let body = r#"{"model":"tiny","stream":true,"max_tokens":12,"stream_options":{"include_usage":true},"messages":[{"role":"user","content":"hello"}]}"#;
    let refused = post("", body);
    assert!(refused.starts_with("HTTP/1.1 401"), "{refused}");
    assert!(refused.contains("invalid_api_key"), "{refused}");
    let answer = post(&format!("Authorization: Bearer {token}\r\n"), body);
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    assert!(answer.contains("text/event-stream"), "{answer}");
    assert!(
        answer.contains("\"object\":\"chat.completion.chunk\""),
        "{answer}"
    );
    assert!(answer.contains("\"finish_reason\":\""), "{answer}");
    assert!(answer.contains("\"completion_tokens\":"), "{answer}");
    assert!(answer.contains("data: [DONE]"), "{answer}");

    let pid = child.0.id().to_string();
    let term = std::process::Command::new("kill")
        .args(["-TERM", &pid])
        .status()
        .unwrap();
    assert!(term.success());
    let status = child.0.wait().unwrap();
    assert!(status.success(), "{status}");
    let log = std::fs::read_to_string(&stderr).unwrap();
    assert!(
        log.contains("POST /v1/chat/completions 200 tiny stream"),
        "{log}"
    );
    assert!(log.contains("POST /v1/chat/completions 401"), "{log}");
}

/// `trellis models test` against `trellis models serve` (both real processes): the client
/// profile sets no `context` and reads the served model's window from `GET /v1/models`
/// (`max_model_len`), the number the server's banner names.
#[test]
fn test_reads_the_window_that_models_serve_reports() {
    let dir = tempfile::tempdir().unwrap();
    let token_file = dir.path().join("models-token");
    let (server, mut lines) = serve_tiny(dir.path(), &token_file);
    // Only the first line is read and the pipe closed at once: the server must go on
    // serving when its stdout reader has gone (it died on the broken pipe once).
    let banner = lines.next().unwrap().unwrap();
    drop(lines);
    // "serving `tiny` (FILE, context N tokens) at http://127.0.0.1:PORT/v1"
    let base = banner.rsplit(' ').next().unwrap().to_string();
    let served: u32 = banner
        .split(", context ")
        .nth(1)
        .and_then(|rest| rest.split(' ').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no window in the banner: {banner}"));
    let token = std::fs::read_to_string(&token_file).unwrap();

    let client = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(client.path().join(".trellis")).unwrap();
    std::fs::write(
        client.path().join(".trellis/config.toml"),
        format!(
            "[models.profiles.served]\nprovider = \"openai\"\nbase_url = \"{base}\"\nmodel = \"tiny\"\napi_key_env = \"TRELLIS_MODELS_TOKEN\"\nmax_retries = 0\n"
        ),
    )
    .unwrap();
    let mut c = isolated(client.path());
    c.env("TRELLIS_MODELS_TOKEN", token.trim())
        .args(["models", "test", "served", "--json"]);
    let v = json(c);
    assert_eq!(v["context_window"]["tokens"], served, "{v}");
    assert_eq!(
        v["context_window"]["source"],
        serde_json::json!({"kind": "model_list", "field": "max_model_len"}),
        "{v}"
    );
    drop(server);
    let log = std::fs::read_to_string(dir.path().join("serve.stderr")).unwrap();
    assert!(log.contains("GET /v1/models 200"), "{log}");
}
