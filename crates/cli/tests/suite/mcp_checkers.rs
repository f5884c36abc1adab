//! `trellis mcp` checked by the official tools (installed by scripts/setup.d/71-mcp-checkers.sh
//! with the Node.js 22 they need): the MCP inspector's CLI in `--strict` mode over stdio, and
//! the conformance suite over Streamable HTTP against a baseline of the scenarios that need
//! its fixture tools (`crates/mcp-server/tests/peers/conformance-baseline.yml`).

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

fn peers() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../mcp-server/tests/peers")
}

fn node22() -> Command {
    let node = peers().join("node_modules/.bin/node");
    assert!(
        node.exists(),
        "{} is missing: run scripts/setup.d/71-mcp-checkers.sh",
        node.display()
    );
    Command::new(node)
}

fn bin(name: &str) -> PathBuf {
    peers().join("node_modules/.bin").join(name)
}

/// The inspector's CLI with `args` against `trellis --repo WS COMMAND…` on stdio: its exit
/// code and stdout.
fn inspect(ws: &Path, command: &[&str], args: &[&str]) -> (Option<i32>, String) {
    let out = node22()
        .arg(bin("mcp-inspector"))
        .arg("--cli")
        .args(args)
        .arg("--")
        .arg(env!("CARGO_BIN_EXE_trellis"))
        .arg("--repo")
        .arg(ws)
        .args(command)
        .env("XDG_CONFIG_HOME", ws.join(".xdg"))
        .output()
        .unwrap();
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
    )
}

/// Kills the child when dropped.
struct Running(Child);

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Starts `cmd` and returns it with the first `http://` URL it prints on stdout.
fn started(mut cmd: Command) -> (Running, String) {
    let mut child = cmd
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let out = child.stdout.take().unwrap();
    let running = Running(child);
    let mut lines = BufReader::new(out).lines();
    let url = loop {
        let line = lines
            .next()
            .expect("exited before printing its address")
            .unwrap();
        if let Some(at) = line.find("http://") {
            break line[at..].trim().to_owned();
        }
    };
    (running, url)
}

#[test]
fn the_inspector_finds_the_tools_strictly_valid_and_calls_them() {
    let ws = trellis_test_support::example_repo("inventory", "").unwrap();
    let inspect = |args: &[&str]| inspect(ws.path(), &["mcp"], args);
    let (code, out) = inspect(&["--strict", "--method", "tools/list"]);
    assert_eq!(code, Some(0), "{out}");
    for tool in [
        "search",
        "doc_sections",
        "symbols",
        "symbol_at",
        "repo_map",
        "ast_context_map",
        "definition",
        "references",
        "hover",
        "signature",
        "diagnostics",
    ] {
        assert!(
            out.contains(&format!("\"name\": \"{tool}\"")),
            "{tool}: {out}"
        );
    }
    let symbol_at = |path: &str, line: &str| {
        inspect(&[
            "--method",
            "tools/call",
            "--tool-name",
            "symbol_at",
            "--tool-arg",
            &format!("path={path}"),
            &format!("line={line}"),
        ])
    };
    let (code, out) = symbol_at("inventory.py", "27");
    assert_eq!(code, Some(0), "{out}");
    assert!(out.contains("Inventory.reserve"), "{out}");
    // A refused path: the inspector's exit code for a tool error.
    let (code, out) = symbol_at("../outside", "1");
    assert_eq!(code, Some(5), "{out}");
    assert!(out.contains("outside the workspace"), "{out}");
}

/// The official TypeScript SDK's client lists the tools of `trellis mcp` and of
/// `trellis mcp --gateway` without a warning: their schemas use only formats JSON Schema
/// defines (schemars' `uint32` made it print one line per field).
#[test]
fn the_typescript_sdk_lists_the_tools_without_a_schema_warning() {
    // The gateway needs a server behind it: server-everything, whose tools have schemas too.
    let everything = super::mcp::everything();
    let config = format!(
        "[mcp.servers.everything]\ncommand = \"node\"\nargs = [{:?}, \"stdio\"]\n",
        everything.display().to_string()
    );
    let ws = trellis_test_support::example_repo("inventory", &config).unwrap();
    for command in [&["mcp"][..], &["mcp", "--gateway"]] {
        let out = node22()
            .arg(peers().join("list-tools.mjs"))
            .arg(env!("CARGO_BIN_EXE_trellis"))
            .arg("--repo")
            .arg(ws.path())
            .args(command)
            .env("XDG_CONFIG_HOME", ws.path().join(".xdg"))
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{command:?}: {stdout}\n{stderr}");
        let listed: usize = stdout.trim().parse().unwrap();
        assert!(listed >= 2, "{command:?}: {stdout}");
        assert!(!stderr.contains("unknown format"), "{command:?}: {stderr}");
    }
}

#[test]
fn the_conformance_suite_passes_over_http_apart_from_its_fixture_scenarios() {
    let ws = trellis_test_support::example_repo("inventory", "").unwrap();
    let token = ws.path().join(".xdg/token");
    let mut serve = Command::new(env!("CARGO_BIN_EXE_trellis"));
    serve
        .args(["--repo"])
        .arg(ws.path())
        .args(["mcp", "--http", "127.0.0.1:0", "--token-file"])
        .arg(&token);
    let (_server, url) = started(serve);
    // The suite cannot send the token: a loopback proxy adds it.
    let mut proxy = node22();
    proxy
        .arg(peers().join("auth-proxy.mjs"))
        .arg(&url)
        .arg(&token);
    let (_proxy, proxied) = started(proxy);
    let out = node22()
        .arg(bin("conformance"))
        .args([
            "server",
            "--url",
            &format!("{proxied}/mcp"),
            "--expected-failures",
        ])
        .arg(peers().join("conformance-baseline.yml"))
        .current_dir(ws.path())
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{text}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    for passes in [
        "server-initialize: 1 passed, 0 failed",
        "ping: 1 passed, 0 failed",
        "tools-list: 1 passed, 0 failed",
        "dns-rebinding-protection: 2 passed, 0 failed",
    ] {
        assert!(text.contains(passes), "{passes}: {text}");
    }
}

/// `trellis mcp --gateway` (server-everything behind it) passes the inspector's strict
/// `tools/list`, and its `search_tools` and a forwarded call answer through it.
#[test]
fn the_inspector_finds_the_gateways_tools_strictly_valid_and_calls_them() {
    let everything = super::mcp::everything();
    let config = format!(
        "[mcp.servers.everything]\ncommand = \"node\"\nargs = [{:?}, \"stdio\"]\n",
        everything.display().to_string()
    );
    let ws = trellis_test_support::example_repo("inventory", &config).unwrap();
    let inspect = |args: &[&str]| inspect(ws.path(), &["mcp", "--gateway"], args);
    let (code, out) = inspect(&["--strict", "--method", "tools/list"]);
    assert_eq!(code, Some(0), "{out}");
    for tool in ["search_tools", "execute_dag", "everything__echo"] {
        assert!(
            out.contains(&format!("\"name\": \"{tool}\"")),
            "{tool}: {out}"
        );
    }
    let call = |tool: &str, arg: &str| {
        inspect(&[
            "--method",
            "tools/call",
            "--tool-name",
            tool,
            "--tool-arg",
            arg,
        ])
    };
    let (code, out) = call("search_tools", "query=sum of two numbers");
    assert_eq!(code, Some(0), "{out}");
    assert!(out.contains("everything__get-sum"), "{out}");
    let (code, out) = call("everything__echo", "message=through the gateway");
    assert_eq!(code, Some(0), "{out}");
    assert!(out.contains("Echo: through the gateway"), "{out}");
}
