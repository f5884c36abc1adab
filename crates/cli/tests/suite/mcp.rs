//! MCP servers' tools in a real `trellis run` (the loopback OpenAI-wire mock decides to call
//! one), next to a broken server, and `trellis mcp list`.

use std::path::{Path, PathBuf};

use serde_json::{Value, json};
use trellis_test_support::TempWorkspace;

use super::common::*;
use super::mock::*;

pub(super) fn everything() -> PathBuf {
    let p = Path::new(env!("CARGO_MANIFEST_DIR")).join(
        "../mcp/tests/peers/node_modules/@modelcontextprotocol/server-everything/dist/index.js",
    );
    assert!(
        p.is_file(),
        "{} is missing: run scripts/setup.d/70-mcp-peers.sh",
        p.display()
    );
    p
}

/// The example repository with the mock model, server-everything twice (one granted to the
/// analysis stage by the workflow, one granted to nobody) and a server that cannot start.
fn workspace(url: &str) -> TempWorkspace {
    let entry = everything().display().to_string();
    let config = format!(
        "{}\n[mcp.servers.everything]\ncommand = \"node\"\nargs = [{entry:?}, \"stdio\"]\n\n\
         [mcp.servers.idle]\ncommand = \"node\"\nargs = [{entry:?}, \"stdio\"]\n\n\
         [mcp.servers.broken]\ncommand = \"sh\"\nargs = [\"-c\", \"echo 'no licence key' >&2; exit 1\"]\nmax_restarts = 0\n",
        mock_config(url)
    );
    let ws = trellis_test_support::example_repo("inventory", &config).unwrap();
    // The discussion workflow, its analysis agent granted one tool of `everything`.
    grant_analysis(&ws, "everything.get-sum");
    ws
}

/// Overrides the built-in discussion workflow in `ws`: its analysis agent gets `tool`.
fn grant_analysis(ws: &TempWorkspace, tool: &str) {
    let builtin = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../workflows/architecture_discussion.yaml"),
    )
    .unwrap();
    let granted = builtin.replace(
        "mcp_tools: []  # No MCP tools for document analysis",
        &format!("mcp_tools: [{tool:?}]"),
    );
    assert_ne!(granted, builtin);
    let dir = ws.path().join(".trellis/workflows");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("architecture_discussion.yaml"), granted).unwrap();
}

fn offered(body: &Value) -> Vec<String> {
    body["tools"]
        .as_array()
        .map(|t| {
            t.iter()
                .filter_map(|t| t["function"]["name"].as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default()
}

/// The mock model: an agent offered `tool` calls it once (`id`, `arguments`), then answers.
fn calling(tool: &'static str, id: &'static str, arguments: Value) -> (Wire, Seen) {
    serve(move |body| {
        if offered(body).iter().any(|t| t == tool) && tool_results(body) == 0 {
            tool_sse(id, tool, &arguments.to_string())
        } else {
            sse(&answer(body))
        }
    })
}

#[test]
fn an_agent_calls_an_mcp_tool_its_stage_grants_while_a_broken_server_fails_alone() {
    let (url, seen) = calling("everything__get-sum", "call_sum", json!({"a": 2, "b": 40}));
    let ws = workspace(&url);
    let out = discuss(
        &ws,
        "Let's discuss the decision to keep stock in memory",
        &[
            "--skip",
            "decision_documentation",
            "--no-input",
            "--no-review",
        ],
    );
    assert!(out.contains("succeeded at DONE"), "{out}");
    let bodies = seen.lock().unwrap().clone();
    let agent: Vec<&Value> = bodies
        .iter()
        .filter(|b| offered(b).iter().any(|t| t == "read_file"))
        .collect();
    assert!(agent.len() >= 2, "{bodies:?}");
    // The stage's grant: that one tool, not the rest of its server, nothing of the others.
    let tools = offered(agent[0]);
    assert!(
        tools.contains(&"everything__get-sum".to_owned()),
        "{tools:?}"
    );
    assert!(
        !tools.iter().any(|t| t == "everything__echo"
            || t.starts_with("idle__")
            || t.starts_with("broken__")),
        "{tools:?}"
    );
    // The server's answer reached the model as the tool result.
    let result = agent[1]["messages"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["role"] == "tool" && m["tool_call_id"] == "call_sum")
        .unwrap_or_else(|| panic!("no tool result in {}", agent[1]));
    assert!(result["content"].to_string().contains("42"), "{result}");

    // The call is recorded like a built-in tool's.
    let run = run_id(&out);
    let shown = ok(args(
        isolated(ws.path()),
        &["runs", "show", &run, "--turns"],
    ));
    assert!(shown.contains("everything__get-sum"), "{shown}");
}

#[test]
fn mcp_list_shows_each_servers_state_tools_and_last_error() {
    let ws = workspace("http://127.0.0.1:9/v1");
    let out = args(isolated(ws.path()), &["mcp", "list", "--json"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "a server failed: exit 1");
    let list: Value = serde_json::from_slice(&out.stdout).unwrap();
    let by = |name: &str| {
        list.as_array()
            .unwrap()
            .iter()
            .find(|s| s["name"] == name)
            .cloned()
            .unwrap()
    };
    assert_eq!(by("everything")["state"], "ready", "{list}");
    assert!(
        by("everything")["tools"]
            .as_array()
            .unwrap()
            .iter()
            .any(|t| t["name"] == "everything__get-sum" && t["read_only"] == true),
        "{list}"
    );
    assert_eq!(by("broken")["state"], "failed", "{list}");
    assert!(
        by("broken")["last_error"]
            .as_str()
            .unwrap()
            .contains("no licence key"),
        "{list}"
    );
    let text = ok(args(
        isolated(ws.path()),
        &["-c", "mcp.servers.broken.enabled=false", "mcp", "list"],
    ));
    assert!(text.contains("broken           disabled"), "{text}");
    assert!(text.contains("everything       ready"), "{text}");
}

#[test]
fn trellis_mcp_serves_code_intelligence_that_an_agent_uses_through_the_mcp_client() {
    // The workspace's own `trellis mcp` is its MCP server `code`; the analysis stage may call
    // its `symbols` tool.
    let (url, seen) = calling(
        "code__symbols",
        "call_sym",
        json!({"name": "reserve", "exact": true}),
    );
    let bin = env!("CARGO_BIN_EXE_trellis");
    let config = format!(
        "{}\n[mcp.servers.code]\ncommand = {bin:?}\nargs = [\"mcp\"]\nenv = {{ XDG_CONFIG_HOME = \"/nonexistent\" }}\n",
        mock_config(&url)
    );
    let ws = trellis_test_support::example_repo("inventory", &config).unwrap();
    grant_analysis(&ws, "code.symbols");

    let list = json(args(isolated(ws.path()), &["mcp", "list", "--json"]));
    let code = &list[0];
    assert_eq!(code["state"], "ready", "{list}");
    for tool in [
        "code__search",
        "code__symbols",
        "code__symbol_at",
        "code__repo_map",
    ] {
        assert!(
            code["tools"]
                .as_array()
                .unwrap()
                .iter()
                .any(|t| t["name"] == tool && t["read_only"] == true),
            "{tool}: {list}"
        );
    }

    let out = discuss(
        &ws,
        "Where are reservations made?",
        &[
            "--skip",
            "decision_documentation",
            "--no-input",
            "--no-review",
        ],
    );
    assert!(out.contains("succeeded at DONE"), "{out}");
    let bodies = seen.lock().unwrap().clone();
    let result = bodies
        .iter()
        .flat_map(|b| b["messages"].as_array().cloned().unwrap_or_default())
        .find(|m| m["role"] == "tool" && m["tool_call_id"] == "call_sym")
        .unwrap_or_else(|| panic!("no symbols result in {bodies:?}"));
    let text = result["content"].to_string();
    assert!(
        text.contains("inventory.py") && text.contains("\\\"start_line\\\":25"),
        "{text}"
    );
}

/// `trellis mcp --gateway` on stdio: it answers initialize (with `tools.listChanged`) and
/// tools/list (server-everything's tools within the budget, `search_tools`, `execute_dag`)
/// while the broken server shows as failed on stderr.
#[test]
fn mcp_gateway_answers_initialize_and_tools_list_on_stdio() {
    use std::io::{BufRead, BufReader, Write};
    use std::process::Stdio;

    let ws = workspace("http://127.0.0.1:9/v1");
    let mut child = args(isolated(ws.path()), &["mcp", "--gateway"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    for m in [
        json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": {},
            "clientInfo": {"name": "cli-test", "version": "1"}}}),
        json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
        json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"}),
    ] {
        writeln!(stdin, "{m}").unwrap();
    }
    stdin.flush().unwrap();
    let mut answers = std::collections::BTreeMap::new();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    while answers.len() < 2 {
        let line = lines.next().expect("an answer").unwrap();
        let v: Value = serde_json::from_str(&line).unwrap();
        if let Some(id) = v["id"].as_i64() {
            answers.insert(id, v);
        }
    }
    drop(stdin);
    let status = child.wait().unwrap();
    let mut stderr = String::new();
    std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut stderr).unwrap();
    assert!(status.success(), "{status}: {stderr}");

    let init = &answers[&1]["result"];
    assert_eq!(init["serverInfo"]["name"], "trellis-gateway", "{init}");
    assert_eq!(init["capabilities"]["tools"]["listChanged"], true, "{init}");
    let tools: Vec<String> = answers[&2]["result"]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|t| t["name"].as_str().map(str::to_owned))
        .collect();
    for t in ["search_tools", "execute_dag", "everything__echo"] {
        assert!(tools.contains(&t.to_owned()), "{t}: {tools:?}");
    }
    assert!(
        !tools.iter().any(|t| t.starts_with("broken__")),
        "{tools:?}"
    );
    assert!(
        stderr.contains("broken: failed") && stderr.contains("everything: ready"),
        "{stderr}"
    );
}

/// Without `[mcp.servers]` the gateway says how to add one, and exits 1.
#[test]
fn mcp_gateway_without_servers_says_how_to_add_one() {
    let ws = trellis_test_support::example_repo("inventory", "").unwrap();
    let out = args(isolated(ws.path()), &["mcp", "--gateway"])
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("no MCP servers are configured") && stderr.contains("[mcp.servers"),
        "{stderr}"
    );
    assert!(out.stdout.is_empty(), "stdout carries only MCP");
    assert!(
        !ws.path().join(".trellis/trellis.db").exists(),
        "no store is created for nothing"
    );
}

#[test]
fn mcp_list_starts_sandboxed_servers_under_the_configured_sandbox_mode() {
    // A server that opts into the read-only sandbox and writes a file in the repository
    // when it starts: refused under the sandbox (the default mode), written with
    // `[sandbox] mode = "off"` — so `trellis mcp list` reads the mode as runs do.
    let config = format!(
        "{}\n[mcp.servers.writer]\ncommand = \"sh\"\nargs = [\"-c\", \"touch started-unsandboxed; exit 1\"]\n\
         sandbox = \"read-only\"\nmax_restarts = 0\n",
        mock_config("http://127.0.0.1:9/v1")
    );
    let ws = trellis_test_support::example_repo("inventory", &config).unwrap();
    let marker = ws.path().join("started-unsandboxed");
    let out = args(isolated(ws.path()), &["mcp", "list", "--wait", "20"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    assert!(
        !marker.exists(),
        "the sandboxed server wrote the repository"
    );
    let out = args(
        isolated(ws.path()),
        &["-c", "sandbox.mode=off", "mcp", "list", "--wait", "20"],
    )
    .output()
    .unwrap();
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    assert!(
        marker.exists(),
        "with mode off the server ran unsandboxed: {out:?}"
    );
}
