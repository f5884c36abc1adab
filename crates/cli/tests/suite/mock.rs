//! A loopback server speaking the OpenAI chat-completions wire format (SSE), answering each
//! request with what a responder decides, and the answers the tests' agents give.

use serde_json::{Value, json};

/// The answer a model would give to `body`, by what it asks for.
pub fn answer(body: &Value) -> String {
    let schema = &body["response_format"]["json_schema"]["schema"]["properties"];
    if schema.get("workflow").is_some() {
        json!({
            "reasoning": "A question about a past decision: discuss it; no record needed.",
            "workflow": "architecture_discussion",
            "stages": [{ "stage": "decision_documentation", "include": false, "reason": "nothing to record" }]
        })
        .to_string()
    } else if schema.get("queries").is_some() {
        json!({ "queries": ["stock kept in memory", "reservations"] }).to_string()
    } else {
        json!({
            "failure": false,
            "output": "MOCK-ANALYSIS: stock lives in memory per ADR 0001; persistence is the next step.\n\n## Options\n- keep it in memory\n- persist to SQLite",
            "files_changed": [],
            "findings": ["MOCK-FINDING: a restart loses every reservation"]
        })
        .to_string()
    }
}

use trellis_test_support::wire::{self, Reply};
pub use trellis_test_support::wire::{Seen, Wire, text_sse as sse, tool_sse};

/// Serves chat completions on 127.0.0.1 (a free port) until the returned server is dropped, answering
/// each request with `respond(body)` (an SSE body); records the request bodies.
pub fn serve(respond: impl Fn(&Value) -> String + Send + 'static) -> (wire::Wire, Seen) {
    wire::serve(move |body| Reply::sse(respond(body)))
}

/// The configuration of a workspace whose every model role uses the mock at `url`.
pub fn mock_config(url: &str) -> String {
    format!(
        "[models]\ndefault = \"mock\"\n\n[models.profiles.mock]\nprovider = \"openai\"\nbase_url = \"{url}\"\nmodel = \"mock-model\"\n# The loopback mock answers no window probe: a window as a real server would report.\ncontext = 32768\n\n[index.embedding]\nbackend = \"none\"\n"
    )
}

/// `trellis` with no user configuration (an empty config home for the child).
pub fn isolated(repo: &std::path::Path) -> std::process::Command {
    let mut c = super::common::trellis(repo);
    c.env("XDG_CONFIG_HOME", repo.join(".trellis/xdg-config"));
    c
}

/// The number of tool results in a request.
pub fn tool_results(body: &Value) -> usize {
    body["messages"]
        .as_array()
        .map_or(0, |m| m.iter().filter(|m| m["role"] == "tool").count())
}

/// `trellis run REQUEST --workflow architecture_discussion FLAGS…` to its end; its output.
pub fn discuss(ws: &trellis_test_support::TempWorkspace, request: &str, flags: &[&str]) -> String {
    let mut a = vec!["run", request, "--workflow", "architecture_discussion"];
    a.extend_from_slice(flags);
    super::common::ok(super::common::args(isolated(ws.path()), &a))
}

/// The run id `trellis run` printed (`run <id> …`).
pub fn run_id(printed: &str) -> String {
    printed
        .lines()
        .find_map(|l| l.strip_prefix("run "))
        .and_then(|l| l.split_whitespace().next())
        .expect("no run line")
        .to_owned()
}

/// The system prompt of a request body (which role is asking).
pub fn system(body: &Value) -> String {
    body["messages"][0]["content"]
        .as_str()
        .unwrap_or_default()
        .to_owned()
}
