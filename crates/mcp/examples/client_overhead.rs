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
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
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
    let entry = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/peers/node_modules/@modelcontextprotocol/server-everything/dist/index.js");
    anyhow::ensure!(
        entry.is_file(),
        "{} is missing: run scripts/setup.d/70-mcp-peers.sh",
        entry.display()
    );
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;

    // The raw client.
    let mut child = Command::new("node")
        .arg(&entry)
        .arg("stdio")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()?;
    let mut stdin = child.stdin.take().ok_or_else(|| anyhow::anyhow!("stdin"))?;
    let mut stdout = BufReader::new(
        child
            .stdout
            .take()
            .ok_or_else(|| anyhow::anyhow!("stdout"))?,
    );
    let mut line = String::new();
    let mut rpc = |msg: Value, wait: bool| -> anyhow::Result<Value> {
        writeln!(stdin, "{msg}")?;
        stdin.flush()?;
        if !wait {
            return Ok(Value::Null);
        }
        let id = msg["id"].clone();
        loop {
            line.clear();
            anyhow::ensure!(stdout.read_line(&mut line)? > 0, "server closed");
            let v: Value = serde_json::from_str(&line)?;
            if v["id"] == id {
                return Ok(v);
            }
        }
    };
    rpc(
        json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": {},
            "clientInfo": {"name": "raw", "version": "0"}}}),
        true,
    )?;
    rpc(
        json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
        false,
    )?;

    // Trellis's client.
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

    let mut raw = Vec::with_capacity(calls);
    let mut ours = Vec::with_capacity(calls);
    for i in 0..calls + 100 {
        let t = Instant::now();
        let r = rpc(
            json!({"jsonrpc": "2.0", "id": i + 1, "method": "tools/call",
                   "params": {"name": "echo", "arguments": {"message": format!("m{i}")}}}),
            true,
        )?;
        let raw_time = t.elapsed();
        anyhow::ensure!(r["result"]["content"][0]["text"].is_string(), "{r}");
        let t = Instant::now();
        let r = rt.block_on(registry.call(
            &env,
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
    rt.block_on(hub.stop(Duration::from_secs(5)));
    let _ = child.kill();

    let ms = |d: Duration| d.as_secs_f64() * 1000.0;
    let pct = |v: &mut Vec<Duration>, p: f64| {
        v.sort();
        ms(v[((v.len() - 1) as f64 * p) as usize])
    };
    let mean = |v: &[Duration]| v.iter().map(|d| ms(*d)).sum::<f64>() / v.len() as f64;
    let (raw_mean, our_mean) = (mean(&raw), mean(&ours));
    println!("{calls} echo calls each, alternating (after 100 warm-up calls each)");
    println!(
        "raw JSON-RPC client:  mean {raw_mean:.3} ms  p50 {:.3}  p95 {:.3}  p99 {:.3}",
        pct(&mut raw, 0.5),
        pct(&mut raw, 0.95),
        pct(&mut raw, 0.99)
    );
    println!(
        "trellis Registry+MCP: mean {our_mean:.3} ms  p50 {:.3}  p95 {:.3}  p99 {:.3}",
        pct(&mut ours, 0.5),
        pct(&mut ours, 0.95),
        pct(&mut ours, 0.99)
    );
    println!(
        "client overhead: mean {:.3} ms, p50 {:.3} ms (goal <= 1 ms)",
        our_mean - raw_mean,
        pct(&mut ours, 0.5) - pct(&mut raw, 0.5)
    );
    Ok(())
}
