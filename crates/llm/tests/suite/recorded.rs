//! Streams recorded from real servers of each wire format (`scripts/record-streams`; what
//! produced each file is in `tests/fixtures/recorded/README.md` and every `*.meta.json`),
//! replayed by the loopback server to the real provider code, configured as a user would.
//!
//! Each case's request is the one Trellis sends: `write_request_files` (ignored; the
//! recording script runs it) writes what the providers put on the wire to
//! `<case>.request.json`, the script sends exactly that to the real server, and the replay
//! tests check that Trellis still sends it.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;
use trellis_llm::{
    ChatRequest, Completion, FinishReason, Message, ModelProvider, StructuredOptions, ToolCall,
    ToolSpec, complete_structured,
};

use super::mock::{MockServer, Recorded, Reply, profile};

/// The wire formats recorded, by directory and provider name.
pub const FORMATS: [&str; 2] = ["openai", "anthropic"];

/// The variable whose value (`trellis-llm`) is the key the recording server was started with.
pub const KEY_ENV: &str = "CARGO_PKG_NAME";
/// A variable holding some other value: a wrong key.
pub const WRONG_KEY_ENV: &str = "CARGO_PKG_VERSION";

/// A country and its capital city (the structured-output case).
#[derive(Debug, Deserialize, JsonSchema, PartialEq)]
pub struct CapitalAnswer {
    pub city: String,
    pub country: String,
}

/// One recorded exchange: what was sent, what came back, and the recording's notes.
pub struct Recording {
    /// `{"method", "path", "headers", "body"}` as Trellis sent them.
    pub request: Value,
    /// Status, headers, server, model, date, and the expectations the recording script
    /// derived from the body on its own (`expect`).
    pub meta: Value,
    /// The response body, byte for byte.
    pub body: Vec<u8>,
}

fn dir(format: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/recorded")
        .join(format)
}

fn read(path: &Path) -> Vec<u8> {
    std::fs::read(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// Loads `<format>/<case>`.
pub fn recording(format: &str, case: &str) -> Recording {
    let d = dir(format);
    let meta: Value = serde_json::from_slice(&read(&d.join(format!("{case}.meta.json")))).unwrap();
    let request_file = meta["request_file"].as_str().unwrap();
    let request = serde_json::from_slice(&read(&d.join(request_file))).unwrap();
    let body = read(&d.join(format!("{case}.response")));
    Recording {
        request,
        meta,
        body,
    }
}

impl Recording {
    /// The response as the mock server replays it.
    pub fn reply(&self) -> Reply {
        let headers = self.meta["response_headers"]
            .as_object()
            .unwrap()
            .iter()
            .map(|(k, v)| (k.clone(), v.as_str().unwrap().to_string()))
            .collect();
        Reply::Replay {
            code: u16::try_from(self.meta["status"].as_u64().unwrap()).unwrap(),
            headers,
            body: self.body.clone(),
            cut: self.meta.get("cut").map(|c| {
                let n = |k: &str| usize::try_from(c[k].as_u64().unwrap()).unwrap();
                n("of_bytes") - n("at_byte")
            }),
        }
    }

    /// What the recording script read in the body: `expect.<key>`.
    pub fn expect(&self, key: &str) -> &Value {
        &self.meta["expect"][key]
    }

    /// Asserts that `sent` is the recorded request: method, path, the recorded headers and
    /// the whole JSON body.
    pub fn assert_sent(&self, sent: &Recorded) {
        assert_eq!(sent.method, self.request["method"]);
        assert_eq!(sent.path, self.request["path"]);
        for (name, value) in self.request["headers"].as_object().unwrap() {
            assert_eq!(
                sent.header(name),
                value.as_str(),
                "header {name} differs from the recorded request"
            );
        }
        assert_eq!(
            sent.body, self.request["body"],
            "the request body differs from the one the recording was made with"
        );
    }
}

/// The recorded response of `format`/`case`, as the mock server replays it.
pub fn replay(format: &str, case: &str) -> Reply {
    recording(format, case).reply()
}

/// The text the recorded stream of `format`/`case` carries.
pub fn recorded_text(format: &str, case: &str) -> String {
    recording(format, case)
        .expect("text")
        .as_str()
        .unwrap()
        .to_string()
}

/// The provider of `format` against `server`, configured as a user would.
pub fn provider(format: &str, server: &MockServer, key_env: &str) -> Arc<dyn ModelProvider> {
    let toml = format!(
        r#"
[models.profiles.recorded]
provider = "{format}"
model = "SmolLM2-135M-Instruct"
base_url = "{}"
api_key_env = "{key_env}"
max_retries = 1
"#,
        server.base_url
    );
    profile(&toml, "recorded")
}

fn request(system: &str, user: &str, max_tokens: u32) -> ChatRequest {
    let mut r = ChatRequest::new(vec![Message::system(system), Message::user(user)]);
    r.max_tokens = Some(max_tokens);
    r.temperature = Some(0.0);
    r
}

/// The `get_weather` tool of the tool-call cases.
pub fn weather_tool() -> ToolSpec {
    ToolSpec {
        name: "get_weather".into(),
        description: "Get the current weather in a city".into(),
        parameters: json!({
            "type": "object",
            "properties": {"city": {"type": "string", "description": "The city name"}},
            "required": ["city"],
        }),
    }
}

/// Earlier turns in which the assistant called `tool` for each `(question, arguments)`:
/// SmolLM2-135M does not call a tool from the tool list alone, but copies the pattern (the
/// server's grammar then holds the call to the tool's schema).
fn earlier_calls(r: &mut ChatRequest, tool: &str, turns: &[(&str, &str)]) {
    let question = r.messages.pop().unwrap();
    for (i, (q, arguments)) in turns.iter().enumerate() {
        r.messages.push(Message::user(*q));
        let mut call = Message::assistant("");
        call.tool_calls = vec![ToolCall {
            id: format!("call_{i}"),
            name: tool.into(),
            arguments: (*arguments).into(),
        }];
        r.messages.push(call);
    }
    r.messages.push(question);
}

/// The request of each recorded case, and the variable holding the key it is sent with.
pub fn case_request(format: &str, case: &str) -> (ChatRequest, &'static str) {
    match case {
        "text" | "loading" => (
            request("Be brief.", "Name three colours of the rainbow.", 40),
            KEY_ENV,
        ),
        "unauthorized" => (
            request("Be brief.", "Name three colours of the rainbow.", 40),
            WRONG_KEY_ENV,
        ),
        "tool_call" => {
            let mut r = request(
                "You are a helpful assistant. Use the tools when they help.",
                "What is the weather like in Paris right now?",
                100,
            );
            earlier_calls(
                &mut r,
                "get_weather",
                &[
                    (
                        "What is the weather like in London right now?",
                        r#"{"city": "London"}"#,
                    ),
                    (
                        "What is the weather like in Berlin right now?",
                        r#"{"city": "Berlin"}"#,
                    ),
                ],
            );
            r.tools = vec![weather_tool()];
            (r, KEY_ENV)
        }
        // `complete_structured` adds the response format (OpenAI) or the forced answer tool
        // (Anthropic), which the model answers through after earlier answers the same way.
        "structured" => {
            let mut r = request("Be brief.", "What is the capital of France?", 60);
            if format == "anthropic" {
                earlier_calls(
                    &mut r,
                    "CapitalAnswer",
                    &[
                        (
                            "What is the capital of Germany?",
                            r#"{"city": "Berlin", "country": "Germany"}"#,
                        ),
                        (
                            "What is the capital of Italy?",
                            r#"{"city": "Rome", "country": "Italy"}"#,
                        ),
                    ],
                );
            }
            (r, KEY_ENV)
        }
        "context_exceeded" => (
            request("Be brief.", &"Summarise this. ".repeat(1200), 40),
            KEY_ENV,
        ),
        other => panic!("no recorded case {other}"),
    }
}

/// The cases whose request is sent as is (the cut case replays a truncated `text`).
pub const CASES: [&str; 6] = [
    "text",
    "tool_call",
    "structured",
    "context_exceeded",
    "unauthorized",
    "loading",
];

/// Runs `case` through `p` the way the replay tests do.
pub async fn run_case(
    format: &str,
    p: &dyn ModelProvider,
    case: &str,
) -> trellis_llm::Result<Completion> {
    let (req, _) = case_request(format, case);
    if case == "structured" {
        let options = StructuredOptions {
            reask: false,
            ..StructuredOptions::default()
        };
        complete_structured::<CapitalAnswer>(p, req, options, CancellationToken::new())
            .await
            .map(|a| a.completions.into_iter().next().unwrap())
    } else {
        p.complete(req, CancellationToken::new()).await
    }
}

/// Writes `<format>/<case>.request.json`: what the providers send for each case. Run by
/// `scripts/record-streams` before it records; not a test.
#[tokio::test]
#[ignore = "writes the recording script's requests; run by scripts/record-streams"]
async fn write_request_files() {
    for format in FORMATS {
        std::fs::create_dir_all(dir(format)).unwrap();
        for case in CASES {
            let server = MockServer::start(vec![Reply::status(400, &[], "{}")]).await;
            let (_, key_env) = case_request(format, case);
            let p = provider(format, &server, key_env);
            let _ = run_case(format, p.as_ref(), case).await;
            let sent = server.requests().remove(0);
            let mut headers = serde_json::Map::new();
            for name in [
                "content-type",
                "authorization",
                "x-api-key",
                "anthropic-version",
            ] {
                if let Some(v) = sent.header(name) {
                    headers.insert(name.into(), json!(v));
                }
            }
            let file = json!({
                "method": sent.method,
                "path": sent.path,
                "headers": headers,
                "body": sent.body,
            });
            let path = dir(format).join(format!("{case}.request.json"));
            let text = serde_json::to_string_pretty(&file).unwrap() + "\n";
            std::fs::write(&path, text).unwrap();
            println!("wrote {}", path.display());
        }
    }
}

/// The recorded usage expectation as (prompt, completion, cached prompt) tokens.
pub fn expected_usage(r: &Recording) -> (u64, u64, u64) {
    let u = r.expect("usage");
    let n = |k: &str| u[k].as_u64().unwrap();
    (
        n("prompt_tokens"),
        n("completion_tokens"),
        n("cached_prompt_tokens"),
    )
}

/// `usage` in the shape of [`expected_usage`].
pub fn usage_tuple(u: &trellis_llm::Usage) -> (u64, u64, u64) {
    (u.prompt_tokens, u.completion_tokens, u.cached_prompt_tokens)
}

/// The recorded finish reason in Trellis's terms.
pub fn expected_finish(r: &Recording) -> FinishReason {
    match r.expect("finish").as_str().unwrap() {
        "stop" | "end_turn" | "stop_sequence" => FinishReason::Stop,
        "length" | "max_tokens" => FinishReason::Length,
        "tool_calls" | "tool_use" => FinishReason::ToolCalls,
        other => FinishReason::Other(other.into()),
    }
}
