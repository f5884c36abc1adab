//! Benchmark of `trellis acp` (docs/benchmarks.md): the real binary over stdio, with an
//! instant loopback model (OpenAI wire, answers at once). Measures, per prompt turn, the
//! time from `session/prompt` to the first `session/update` and to the response
//! (`end_turn`), and the agent process's resident memory with one idle session (nothing
//! opened yet), after the first turn (which opens the workspace) and after the rest.
//!
//! ```text
//! cargo build -p trellis && cargo run -p trellis-acp --example bench -- [--turns N] [TRELLIS]
//! ```
//!
//! `TRELLIS` defaults to `$CARGO_TARGET_DIR/debug/trellis`. Prints one JSON object.

#![allow(clippy::print_stdout, clippy::print_stderr)]

use std::io::{BufRead, BufReader, Write};
use std::path::PathBuf;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

type Res<T> = Result<T, Box<dyn std::error::Error>>;

/// An SSE body streaming `text` as one chunk, then usage.
fn sse(text: &str) -> String {
    let chunk = |delta: Value, finish: Value| {
        json!({"id": "b", "object": "chat.completion.chunk", "created": 0, "model": "m",
               "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]})
    };
    format!(
        "data: {}\n\ndata: {}\n\ndata: {}\n\ndata: [DONE]\n\n",
        chunk(json!({"role": "assistant", "content": text}), Value::Null),
        chunk(json!({}), json!("stop")),
        json!({"id": "b", "object": "chat.completion.chunk", "created": 0, "model": "m", "choices": [],
               "usage": {"prompt_tokens": 100, "completion_tokens": 20, "total_tokens": 120}})
    )
}

/// What the instant model answers: the orchestrator, retrieval queries, or a stage report.
fn answer(body: &Value) -> String {
    let props = &body["response_format"]["json_schema"]["schema"]["properties"];
    let v = if props.get("workflow").is_some() {
        json!({"reasoning": "discuss", "workflow": "architecture_discussion",
               "stages": [{"stage": "decision_documentation", "include": false, "reason": "no"}]})
    } else if props.get("queries").is_some() {
        json!({"queries": ["stock kept in memory"]})
    } else {
        json!({"failure": false, "output": "Stock lives in memory (ADR 0001).",
               "files_changed": [], "findings": []})
    };
    sse(&v.to_string())
}

/// A response and when things arrived.
struct Waited {
    result: Value,
    first: Option<Instant>,
    plan: Option<Instant>,
    done: Instant,
}

/// The agent process and its stdout lines (read on a thread, stamped on arrival).
struct Agent {
    child: Child,
    stdin: ChildStdin,
    lines: mpsc::Receiver<(Instant, Value)>,
    next_id: u64,
}

impl Agent {
    fn start(bin: &PathBuf, repo: &std::path::Path) -> Res<Self> {
        let home = repo.join(".trellis/bench-home");
        std::fs::create_dir_all(&home)?;
        let mut child = Command::new(bin)
            .args(["acp", "--workflow", "architecture_discussion"])
            .current_dir(repo)
            .env("HOME", &home)
            .env("XDG_CONFIG_HOME", home.join(".config"))
            .env("RUST_LOG", "warn")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()?;
        let stdin = child.stdin.take().ok_or("no stdin")?;
        let stdout = child.stdout.take().ok_or("no stdout")?;
        let (tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if let Ok(v) = serde_json::from_str::<Value>(&line)
                    && tx.send((Instant::now(), v)).is_err()
                {
                    break;
                }
            }
        });
        Ok(Self {
            child,
            stdin,
            lines,
            next_id: 0,
        })
    }

    fn send(&mut self, method: &str, params: Value) -> Res<u64> {
        self.next_id += 1;
        let msg = json!({"jsonrpc": "2.0", "id": self.next_id, "method": method, "params": params});
        writeln!(self.stdin, "{msg}")?;
        self.stdin.flush()?;
        Ok(self.next_id)
    }

    /// Waits for the response to `id`; returns it with the times the first notification,
    /// the first `plan` and the response arrived.
    fn wait(&mut self, id: u64) -> Res<Waited> {
        let (mut first, mut plan) = (None, None);
        loop {
            let (at, v) = self.lines.recv_timeout(Duration::from_secs(120))?;
            if v.get("id").and_then(Value::as_u64) == Some(id) && v.get("method").is_none() {
                if let Some(e) = v.get("error") {
                    return Err(format!("{e}").into());
                }
                return Ok(Waited {
                    result: v["result"].clone(),
                    first,
                    plan,
                    done: at,
                });
            }
            if v["method"] == "session/update" {
                first.get_or_insert(at);
                if v["params"]["update"]["sessionUpdate"] == "plan" {
                    plan.get_or_insert(at);
                }
            }
        }
    }

    fn call(&mut self, method: &str, params: Value) -> Res<Value> {
        let id = self.send(method, params)?;
        Ok(self.wait(id)?.result)
    }

    /// Resident set size in KiB (`VmRSS`).
    fn rss_kib(&self) -> Res<u64> {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.child.id()))?;
        let line = status
            .lines()
            .find(|l| l.starts_with("VmRSS:"))
            .ok_or("no VmRSS")?;
        Ok(line.split_whitespace().nth(1).ok_or("VmRSS")?.parse()?)
    }
}

impl Drop for Agent {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn pct(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i.min(sorted.len() - 1)]
}

fn main() -> Res<()> {
    let mut turns = 20usize;
    let mut bin = None;
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        match a.as_str() {
            "--turns" => turns = args.next().ok_or("--turns N")?.parse()?,
            other => bin = Some(PathBuf::from(other)),
        }
    }
    let bin = bin.unwrap_or_else(|| {
        let target = std::env::var("CARGO_TARGET_DIR").unwrap_or_else(|_| "target".into());
        PathBuf::from(target).join("debug/trellis")
    });
    // The instant model on 127.0.0.1 (a free port), a thread per connection, until the end.
    let model = trellis_test_http::Server::concurrent(|r| {
        trellis_test_http::Response::sse(answer(&r.json()))
    });
    let url = format!("{}/v1", model.url());
    let config = format!(
        "[models]\ndefault = \"mock\"\n\n[models.profiles.mock]\nprovider = \"openai\"\nbase_url = \"{url}\"\nmodel = \"m\"\ncontext = 8192\n\n[index.embedding]\nbackend = \"none\"\n"
    );
    let ws = trellis_test_support::example_repo("inventory", &config)?;
    let repo = ws.path().canonicalize()?;
    let mut agent = Agent::start(&bin, &repo)?;
    let started = Instant::now();
    agent.call(
        "initialize",
        json!({"protocolVersion": 1, "clientCapabilities": {}}),
    )?;
    let init_ms = started.elapsed().as_secs_f64() * 1e3;
    let rss_started = agent.rss_kib()?;
    let s = agent.call("session/new", json!({"cwd": repo, "mcpServers": []}))?;
    let session = s["sessionId"].as_str().ok_or("no sessionId")?.to_owned();
    std::thread::sleep(Duration::from_millis(500));
    let rss_idle_session = agent.rss_kib()?;
    // session/new's own notifications (the slash commands) are not the first turn's.
    while agent.lines.try_recv().is_ok() {}

    let (mut first, mut plans, mut end) = (Vec::new(), Vec::new(), Vec::new());
    let mut first_turn = Value::Null;
    let mut rss_after_first = 0;
    // The first turn opens the workspace and indexes it: reported on its own, not counted.
    for i in 0..=turns {
        let t0 = Instant::now();
        let id = agent.send(
            "session/prompt",
            json!({"sessionId": session, "prompt": [{"type": "text", "text": "Why is stock kept in memory?"}]}),
        )?;
        let w = agent.wait(id)?;
        if w.result["stopReason"] != "end_turn" {
            return Err(format!("turn {i}: {}", w.result).into());
        }
        let since = |t: Option<Instant>| t.map_or(f64::NAN, |t| (t - t0).as_secs_f64() * 1e3);
        if i == 0 {
            let ms = |v: f64| (v * 10.0).round() / 10.0;
            first_turn = json!({"first_update_ms": ms(since(w.first)),
                                "first_plan_ms": ms(since(w.plan)),
                                "end_turn_ms": ms(since(Some(w.done)))});
            std::thread::sleep(Duration::from_millis(500));
            rss_after_first = agent.rss_kib()?;
        } else {
            first.push(since(w.first));
            plans.push(since(w.plan));
            end.push(since(Some(w.done)));
        }
    }
    std::thread::sleep(Duration::from_millis(500));
    let rss_after = agent.rss_kib()?;
    first.sort_by(f64::total_cmp);
    plans.sort_by(f64::total_cmp);
    end.sort_by(f64::total_cmp);
    let ms = |v: f64| (v * 10.0).round() / 10.0;
    let out = json!({
        "binary": bin,
        "turns": turns,
        "initialize_ms": ms(init_ms),
        "first_turn": first_turn,
        "first_update_ms": {"p50": ms(pct(&first, 0.5)), "p95": ms(pct(&first, 0.95)), "max": ms(pct(&first, 1.0))},
        "first_plan_ms": {"p50": ms(pct(&plans, 0.5)), "p95": ms(pct(&plans, 0.95)), "max": ms(pct(&plans, 1.0))},
        "end_turn_ms": {"p50": ms(pct(&end, 0.5)), "p95": ms(pct(&end, 0.95)), "max": ms(pct(&end, 1.0))},
        "rss_mib": {
            "after_initialize": ms(rss_started as f64 / 1024.0),
            "idle_session": ms(rss_idle_session as f64 / 1024.0),
            "after_first_turn": ms(rss_after_first as f64 / 1024.0),
            "after_turns": ms(rss_after as f64 / 1024.0),
        },
    });
    println!("{}", serde_json::to_string_pretty(&out)?);
    Ok(())
}
