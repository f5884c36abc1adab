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

/// The command `trellis run "Let's discuss the decision to keep stock in memory" --workflow
/// architecture_discussion FLAGS…` in `repo`, without the user's configuration.
pub fn discussion_run(repo: &std::path::Path, flags: &[&str]) -> std::process::Command {
    let mut a = vec![
        "run",
        "Let's discuss the decision to keep stock in memory",
        "--workflow",
        "architecture_discussion",
    ];
    a.extend_from_slice(flags);
    super::common::args(isolated(repo), &a)
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

/// Whether a request is an agent's turn (not a structured answer: the orchestrator's
/// choice, retrieval queries).
pub fn is_agent(body: &Value) -> bool {
    body["response_format"].is_null()
}

/// A responder: an agent that makes `calls` — `(call id, tool, arguments)` — one a turn,
/// then answers; every other request is answered as [`answer`] does.
pub fn scripted_agent(
    calls: Vec<(&'static str, &'static str, Value)>,
) -> impl Fn(&Value) -> String + Send + 'static {
    move |body| {
        if !is_agent(body) {
            return sse(&answer(body));
        }
        match calls.get(tool_results(body)) {
            Some((id, tool, args)) => tool_sse(id, tool, &args.to_string()),
            None => sse(&answer(body)),
        }
    }
}

/// The agents' request bodies seen so far.
pub fn agent_bodies(seen: &Seen) -> Vec<Value> {
    seen.lock()
        .unwrap()
        .iter()
        .filter(|b| is_agent(b))
        .cloned()
        .collect()
}

/// The content of tool result `id` in a request body ("" when there is none).
pub fn tool_result(body: &Value, id: &str) -> String {
    body["messages"]
        .as_array()
        .and_then(|m| {
            m.iter()
                .find(|m| m["role"] == "tool" && m["tool_call_id"] == id)
        })
        .and_then(|m| m["content"].as_str())
        .unwrap_or_default()
        .to_owned()
}

/// A responder: an agent whose first turn takes 3 s (a test acts meanwhile) and reads a
/// file, then answers; every other request is answered as [`answer`] does.
pub fn slow_first_turn() -> impl Fn(&Value) -> String + Send + 'static {
    let agent = scripted_agent(vec![(
        "call_read",
        "read_file",
        json!({ "path": "inventory.py" }),
    )]);
    move |body| {
        if is_agent(body) && tool_results(body) == 0 {
            std::thread::sleep(std::time::Duration::from_secs(3));
        }
        agent(body)
    }
}

/// After a process died while the agent's second turn ran `call_sleep` (its first read a
/// file as `call_read`), and the run was resumed to its end: one more model call was made,
/// not three — the completed turns were not asked again — and its conversation, rebuilt
/// from the record, holds the file read and the shell call reported as interrupted. The
/// agents' request bodies.
pub fn assert_resumed_from_recorded_turns(seen: &Seen) -> Vec<Value> {
    let bodies = agent_bodies(seen);
    assert_eq!(bodies.len(), 3, "{bodies:#?}");
    let last = &bodies[2];
    assert!(
        tool_result(last, "call_read").contains("class Inventory"),
        "{last:#?}"
    );
    assert!(
        tool_result(last, "call_sleep").starts_with("interrupted:"),
        "{last:#?}"
    );
    bodies
}
