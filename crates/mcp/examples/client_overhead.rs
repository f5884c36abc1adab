//! What Trellis's MCP client adds to a tool call over stdio (issue 17: ≤ 1 ms above the
//! server's own time).
//!
//! Against npm server-everything's `echo` (scripts/setup.d/70-mcp-peers.sh), in one process:
//! 1. **raw**: a minimal JSON-RPC client — one line written to the server's stdin, one line
//!    read from its stdout, nothing else — the server's own time plus the pipe;
//! 2. **trellis**: the same call through `Registry::call` → `McpTool` → rmcp (policy check,
//!    recording-free registry, timeout, cancellation, content rendering).
//!
//! Calls alternate between the two in rounds so load changes hit both alike.
//!
//! ```sh
//! cargo run --release -p trellis-mcp --example client_overhead -- [CALLS]
//! ```

#![allow(clippy::print_stdout)]

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use tempfile::TempDir;
use tokio::runtime::Runtime;
use tokio_util::sync::CancellationToken;
use trellis_mcp::{McpConfig, McpHub, ServerConfig};
use trellis_tools::interaction::NonInteractive;
use trellis_tools::{Registry, ToolEnv, ToolsConfig, Workspace};

fn main() -> anyhow::Result<()> {
    let calls: usize = std::env::args()
        .nth(1)
        .map(|a| a.parse())
        .transpose()?
        .unwrap_or(2000);
    let entry = server_entry()?;
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    let mut raw_client = RawClient::start(&entry)?;
    let trellis = TrellisClient::start(&rt, &entry)?;
    let (mut raw, mut ours) = alternate_calls(calls, &mut raw_client, &trellis, &rt)?;
    rt.block_on(trellis.hub.stop(Duration::from_secs(5)));
    let _ = raw_client.child.kill();
    print_results(calls, &mut raw, &mut ours);
    Ok(())
}

/// server-everything's entry point, installed by scripts/setup.d/70-mcp-peers.sh.
fn server_entry() -> anyhow::Result<PathBuf> {
    let entry = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/peers/node_modules/@modelcontextprotocol/server-everything/dist/index.js");
    anyhow::ensure!(
        entry.is_file(),
        "{} is missing: run scripts/setup.d/70-mcp-peers.sh",
        entry.display()
    );
    Ok(entry)
}

/// The minimal JSON-RPC client: one line written to the server's stdin, one line read from
/// its stdout, nothing else.
struct RawClient {
    child: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
    /// The line buffer, reused.
    line: String,
}

impl RawClient {
    /// Spawns its own server and initialises the session.
    fn start(entry: &Path) -> anyhow::Result<Self> {
        let mut child = Command::new("node")
            .arg(entry)
            .arg("stdio")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()?;
        let stdin = child.stdin.take().ok_or_else(|| anyhow::anyhow!("stdin"))?;
        let stdout = BufReader::new(
            child
                .stdout
                .take()
                .ok_or_else(|| anyhow::anyhow!("stdout"))?,
        );
        let mut client = Self {
            child,
            stdin,
            stdout,
            line: String::new(),
        };
        client.rpc(
            json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
                "protocolVersion": "2025-11-25", "capabilities": {},
                "clientInfo": {"name": "raw", "version": "0"}}}),
            true,
        )?;
        client.rpc(
            json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
            false,
        )?;
        Ok(client)
    }

    /// Sends `msg`; with `wait`, reads lines until the response with its id.
    fn rpc(&mut self, msg: Value, wait: bool) -> anyhow::Result<Value> {
        writeln!(self.stdin, "{msg}")?;
        self.stdin.flush()?;
        if !wait {
            return Ok(Value::Null);
        }
        let id = msg["id"].clone();
        loop {
            self.line.clear();
            anyhow::ensure!(self.stdout.read_line(&mut self.line)? > 0, "server closed");
            let v: Value = serde_json::from_str(&self.line)?;
            if v["id"] == id {
                return Ok(v);
            }
        }
    }
}

/// Trellis's client: `Registry::call` → `McpTool` → rmcp, over its own server.
/// (Fields drop in order: the registry, then the hub, then the workspace.)
struct TrellisClient {
    registry: Registry,
    env: ToolEnv,
    hub: McpHub,
    /// The workspace (deleted on drop).
    _dir: TempDir,
}

impl TrellisClient {
    /// Starts the hub with server-everything as `everything` and waits until it settled.
    fn start(rt: &Runtime, entry: &Path) -> anyhow::Result<Self> {
        let dir = tempfile::tempdir()?;
        let hub = McpHub::new(
            dir.path(),
            &McpConfig {
                servers: [(
                    "everything".to_owned(),
                    ServerConfig {
                        command: Some("node".into()),
                        args: vec![entry.display().to_string(), "stdio".into()],
                        ..ServerConfig::default()
                    },
                )]
                .into(),
                startup_wait_secs: 0.0,
            },
        )?;
        let tools = Arc::new(ToolsConfig::default());
        let env = ToolEnv::new(
            Workspace::new(dir.path(), &tools.secrets)?,
            tools,
            Arc::new(NonInteractive { approve: true }),
        );
        let mut registry = Registry::new().with_source(Arc::new(hub.clone()));
        registry.allow("agent", ["everything__echo"]);
        rt.block_on(async {
            hub.start();
            hub.settled(Duration::from_secs(60)).await;
        });
        Ok(Self {
            registry,
            env,
            hub,
            _dir: dir,
        })
    }
}

/// `calls` echo calls through each client, alternating, after 100 warm-up calls each; returns
/// the raw client's times and Trellis's.
fn alternate_calls(
    calls: usize,
    raw_client: &mut RawClient,
    trellis: &TrellisClient,
    rt: &Runtime,
) -> anyhow::Result<(Vec<Duration>, Vec<Duration>)> {
    let mut raw = Vec::with_capacity(calls);
    let mut ours = Vec::with_capacity(calls);
    for i in 0..calls + 100 {
        let t = Instant::now();
        let r = raw_client.rpc(
            json!({"jsonrpc": "2.0", "id": i + 1, "method": "tools/call",
                   "params": {"name": "echo", "arguments": {"message": format!("m{i}")}}}),
            true,
        )?;
        let raw_time = t.elapsed();
        anyhow::ensure!(r["result"]["content"][0]["text"].is_string(), "{r}");
        let t = Instant::now();
        let r = rt.block_on(trellis.registry.call(
            &trellis.env,
            "agent",
            "everything__echo",
            json!({"message": format!("m{i}")}),
            CancellationToken::new(),
        ));
        let our_time = t.elapsed();
        anyhow::ensure!(!r.is_error, "{r:?}");
        if i >= 100 {
            // The first 100 of each warm up.
            raw.push(raw_time);
            ours.push(our_time);
        }
    }
    Ok((raw, ours))
}

/// Mean and percentiles of both clients, and the difference: Trellis's overhead.
fn print_results(calls: usize, raw: &mut Vec<Duration>, ours: &mut Vec<Duration>) {
    let ms = |d: Duration| d.as_secs_f64() * 1000.0;
    let pct = |v: &mut Vec<Duration>, p: f64| {
        v.sort();
        ms(v[((v.len() - 1) as f64 * p) as usize])
    };
    let mean = |v: &[Duration]| v.iter().map(|d| ms(*d)).sum::<f64>() / v.len() as f64;
    let (raw_mean, our_mean) = (mean(raw), mean(ours));
    println!("{calls} echo calls each, alternating (after 100 warm-up calls each)");
    println!(
        "raw JSON-RPC client:  mean {raw_mean:.3} ms  p50 {:.3}  p95 {:.3}  p99 {:.3}",
        pct(raw, 0.5),
        pct(raw, 0.95),
        pct(raw, 0.99)
    );
    println!(
        "trellis Registry+MCP: mean {our_mean:.3} ms  p50 {:.3}  p95 {:.3}  p99 {:.3}",
        pct(ours, 0.5),
        pct(ours, 0.95),
        pct(ours, 0.99)
    );
    println!(
        "client overhead: mean {:.3} ms, p50 {:.3} ms (goal <= 1 ms)",
        our_mean - raw_mean,
        pct(ours, 0.5) - pct(raw, 0.5)
    );
}
