//! The client against npm server-everything (stdio and Streamable HTTP, installed by
//! scripts/setup.d/70-mcp-peers.sh), a server whose tool list changes, and deliberately broken
//! servers next to a good one.

use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::json;
use tokio_util::sync::CancellationToken;
use trellis_mcp::{McpConfig, McpHub, ServerConfig, ServerState};

use super::support::{Agent, assert_steps, everything, hub, peers, sh, status};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn server_everything_over_stdio_lists_and_calls_tools_and_reports_failures_as_tool_errors() {
    let dir = tempfile::tempdir().unwrap();
    let hub = hub(dir.path(), vec![("everything", everything())]);
    hub.start();
    let all = hub.settled(Duration::from_secs(60)).await;
    let s = status(&all, "everything");
    assert_eq!(s.state, ServerState::Ready, "{s:?}");
    assert!(s.protocol.is_some(), "{s:?}");
    let names: Vec<&str> = s.tools.iter().map(|t| t.name.as_str()).collect();
    assert!(names.contains(&"everything__echo"), "{names:?}");

    let agent = Agent::new(dir.path(), &hub);
    let specs = agent.registry.specs_for("agent");
    let echo = specs.iter().find(|t| t.name == "everything__echo").unwrap();
    assert_eq!(echo.input_schema["type"], "object", "{echo:?}");
    assert!(
        echo.description.contains("MCP server everything"),
        "{echo:?}"
    );

    let r = agent
        .call("everything__echo", json!({"message": "hello from trellis"}))
        .await;
    assert!(!r.is_error, "{r:?}");
    assert!(r.content.contains("hello from trellis"), "{r:?}");

    // Wrong argument types: the server's refusal reaches the model as a failed tool call.
    let r = agent.call("everything__echo", json!({"message": 42})).await;
    assert!(r.is_error, "{r:?}");
    assert!(r.content.contains("everything"), "names the server: {r:?}");
    let r = agent.call("everything__echo", json!("not an object")).await;
    assert!(r.is_error && r.content.contains("JSON object"), "{r:?}");
    // A tool the server does not have.
    let r = agent.call("everything__no_such_tool", json!({})).await;
    assert!(r.is_error, "{r:?}");

    let stopped = hub.stop(Duration::from_secs(10)).await;
    assert_eq!(status(&stopped, "everything").state, ServerState::Stopped);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn broken_servers_fail_alone_with_their_reason_while_a_good_one_works() {
    let dir = tempfile::tempdir().unwrap();
    let once = |mut s: ServerConfig| {
        s.max_restarts = 1;
        s.startup_timeout_secs = 3.0;
        s
    };
    let hub = hub(
        dir.path(),
        vec![
            ("good", everything()),
            (
                "exits",
                once(sh("echo 'cannot open the database' >&2; exit 3")),
            ),
            ("hangs", once(sh("sleep 600"))),
            (
                "garbage",
                once(sh(
                    "while true; do echo 'this is not JSON-RPC'; sleep 0.2; done",
                )),
            ),
            (
                "missing",
                once(ServerConfig {
                    command: Some("/nonexistent/mcp-server".into()),
                    ..ServerConfig::default()
                }),
            ),
        ],
    );
    let started = Instant::now();
    hub.start();
    // The good server is usable while the others still fail and retry.
    let agent = Agent::new(dir.path(), &hub);
    loop {
        let s = hub.status();
        if status(&s, "good").state == ServerState::Ready {
            break;
        }
        assert!(started.elapsed() < Duration::from_secs(60), "{s:?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let r = agent
        .call("good__echo", json!({"message": "still here"}))
        .await;
    assert!(!r.is_error && r.content.contains("still here"), "{r:?}");

    let all = hub.settled(Duration::from_secs(60)).await;
    for (name, says) in [
        ("exits", "cannot open the database"),
        ("hangs", "startup_timeout_secs"),
        ("garbage", "garbage"),
        ("missing", "/nonexistent/mcp-server"),
    ] {
        let s = status(&all, name);
        assert_eq!(s.state, ServerState::Failed, "{s:?}");
        assert_eq!(s.restarts, 1, "{s:?}");
        let err = s.last_error.as_deref().unwrap_or_default();
        assert!(
            err.contains(says) || (name == "garbage" && !err.is_empty()),
            "{name}: {err}"
        );
    }
    assert_eq!(status(&all, "good").state, ServerState::Ready);
    // A failed server's tools are not offered; the good one's still are.
    let offered: Vec<String> = agent
        .registry
        .specs_for("agent")
        .into_iter()
        .map(|t| t.name)
        .collect();
    assert!(
        offered.iter().all(|n| n.starts_with("good__")),
        "{offered:?}"
    );
    hub.shutdown();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_call_times_out_and_is_cancelled_and_the_server_goes_on() {
    let dir = tempfile::tempdir().unwrap();
    let mut slow = everything();
    slow.tool_timeout_secs = 1.0;
    let hub = hub(dir.path(), vec![("everything", slow)]);
    hub.start();
    let all = hub.settled(Duration::from_secs(60)).await;
    let tools: Vec<&str> = status(&all, "everything")
        .tools
        .iter()
        .map(|t| t.remote.as_str())
        .collect();
    let long = tools
        .iter()
        .find(|t| t.contains("long"))
        .unwrap_or_else(|| panic!("no long-running tool in {tools:?}"));
    let agent = Agent::new(dir.path(), &hub);
    let t0 = Instant::now();
    let r = agent
        .call(
            &format!("everything__{long}"),
            json!({"duration": 30, "steps": 30}),
        )
        .await;
    assert!(r.is_error, "{r:?}");
    assert!(r.content.contains("tool_timeout_secs"), "{r:?}");
    assert!(t0.elapsed() < Duration::from_secs(10), "{:?}", t0.elapsed());

    // Cancelled by the agent: ends at once as cancelled.
    let cancel = CancellationToken::new();
    let c2 = cancel.clone();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(300)).await;
        c2.cancel();
    });
    let r = agent
        .registry
        .call(
            &agent.env,
            "agent",
            &format!("everything__{long}"),
            json!({"duration": 30, "steps": 30}),
            cancel,
        )
        .await;
    assert!(r.cancelled, "{r:?}");

    let r = agent
        .call("everything__echo", json!({"message": "after"}))
        .await;
    assert!(!r.is_error && r.content.contains("after"), "{r:?}");
    hub.shutdown();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn progress_notifications_reach_the_caller_in_order_while_the_call_runs() {
    let dir = tempfile::tempdir().unwrap();
    let hub = hub(dir.path(), vec![("everything", everything())]);
    hub.start();
    hub.settled(Duration::from_secs(60)).await;
    let agent = Agent::new(dir.path(), &hub);
    let t0 = Instant::now();
    let (r, seen) = agent
        .call_with_progress(
            "everything__trigger-long-running-operation",
            json!({"duration": 1.5, "steps": 5}),
        )
        .await;
    assert!(!r.is_error, "{r:?}");
    assert!(r.content.contains("Steps: 5"), "{r:?}");
    assert!(t0.elapsed() >= Duration::from_millis(1500));
    // Five reports 300 ms apart: each reaches the caller (one racing the result may not).
    assert_steps(&seen, 5.0, 4);
    // A plain call asks for nothing and gets the same answer.
    let r = agent
        .call(
            "everything__trigger-long-running-operation",
            json!({"duration": 0.2, "steps": 2}),
        )
        .await;
    assert!(!r.is_error, "{r:?}");
    hub.shutdown();
}

#[test]
fn configuration_errors_name_the_server_and_field() {
    let bad = |s: ServerConfig| {
        let config = McpConfig {
            servers: [("x".to_owned(), s)].into(),
            startup_wait_secs: 0.0,
        };
        McpHub::new(Path::new("."), &config)
            .unwrap_err()
            .to_string()
    };
    assert!(bad(ServerConfig::default()).contains("give `command`"));
    let both = ServerConfig {
        command: Some("a".into()),
        url: Some("http://127.0.0.1/mcp".into()),
        ..ServerConfig::default()
    };
    assert!(bad(both).contains("mcp.servers.x.command and mcp.servers.x.url"));
    let url = ServerConfig {
        url: Some("ftp://x".into()),
        ..ServerConfig::default()
    };
    assert!(bad(url).contains("mcp.servers.x.url"));
    let timeout = ServerConfig {
        command: Some("a".into()),
        tool_timeout_secs: 0.0,
        ..ServerConfig::default()
    };
    assert!(bad(timeout).contains("mcp.servers.x.tool_timeout_secs"));
    let config = McpConfig {
        servers: [("a__b".to_owned(), everything())].into(),
        startup_wait_secs: 0.0,
    };
    assert!(
        McpHub::new(Path::new("."), &config)
            .unwrap_err()
            .to_string()
            .contains("no `__`")
    );
}

/// server-everything's Streamable HTTP transport on a free loopback port (killed on drop).
struct HttpEverything {
    child: std::process::Child,
    url: String,
}

impl Drop for HttpEverything {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn http_everything() -> HttpEverything {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let shim = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/peers/loopback.cjs");
    let child = std::process::Command::new("node")
        .arg("-r")
        .arg(shim)
        .arg(peers().join("server-everything/dist/index.js"))
        .arg("streamableHttp")
        .env("PORT", port.to_string())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let started = Instant::now();
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "server-everything did not listen"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    HttpEverything {
        child,
        url: format!("http://127.0.0.1:{port}/mcp"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn server_everything_over_streamable_http() {
    let server = http_everything();
    let dir = tempfile::tempdir().unwrap();
    let http = ServerConfig {
        url: Some(server.url.clone()),
        headers: [("X-Trellis-Test".to_owned(), "1".to_owned())].into(),
        ..ServerConfig::default()
    };
    let hub = hub(dir.path(), vec![("web", http)]);
    hub.start();
    let all = hub.settled(Duration::from_secs(60)).await;
    let s = status(&all, "web");
    assert_eq!(s.state, ServerState::Ready, "{s:?}");
    assert!(s.transport.starts_with("http: http://127.0.0.1:"), "{s:?}");
    let agent = Agent::new(dir.path(), &hub);
    let r = agent.call("web__get-sum", json!({"a": 20, "b": 22})).await;
    assert!(!r.is_error && r.content.contains("42"), "{r:?}");
    let r = agent.call("web__get-sum", json!({"a": "x"})).await;
    assert!(r.is_error, "{r:?}");
    // Progress comes over the call's event stream.
    let (r, seen) = agent
        .call_with_progress(
            "web__trigger-long-running-operation",
            json!({"duration": 0.9, "steps": 3}),
        )
        .await;
    assert!(!r.is_error, "{r:?}");
    assert_steps(&seen, 3.0, 2);

    // The server goes away: calls fail with the reason, and the hub notices.
    drop(server);
    let r = agent.call("web__get-sum", json!({"a": 1, "b": 2})).await;
    assert!(r.is_error, "{r:?}");
    hub.stop(Duration::from_secs(10)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_changed_tool_list_is_listed_again_and_is_error_results_are_tool_failures() {
    let dir = tempfile::tempdir().unwrap();
    let dynamic = ServerConfig {
        command: Some("node".into()),
        args: vec![
            Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("tests/peers/dynamic.mjs")
                .display()
                .to_string(),
        ],
        ..ServerConfig::default()
    };
    let hub = hub(dir.path(), vec![("dyn", dynamic)]);
    hub.start();
    let all = hub.settled(Duration::from_secs(60)).await;
    assert_eq!(status(&all, "dyn").state, ServerState::Ready, "{all:?}");
    let agent = Agent::new(dir.path(), &hub);
    let names = || -> Vec<String> {
        agent
            .registry
            .specs_for("agent")
            .into_iter()
            .map(|t| t.name)
            .collect()
    };
    assert_eq!(names(), ["dyn__fail", "dyn__grow"]);

    let r = agent.call("dyn__fail", json!({})).await;
    assert!(r.is_error, "{r:?}");
    assert!(r.content.contains("the disk is full"), "{r:?}");

    let r = agent.call("dyn__grow", json!({})).await;
    assert!(!r.is_error, "{r:?}");
    let started = Instant::now();
    while !names().contains(&"dyn__extra".to_owned()) {
        assert!(started.elapsed() < Duration::from_secs(10), "{:?}", names());
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let r = agent.call("dyn__extra", json!({})).await;
    assert!(!r.is_error && r.content.contains("extra works"), "{r:?}");
    hub.stop(Duration::from_secs(10)).await;
}
