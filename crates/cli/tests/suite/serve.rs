//! `trellis serve` as a real process: a workflow run over HTTP, followed on the WebSocket,
//! survives a SIGKILL of the server (the next server resumes it, and a client reconnecting
//! with `since` gets every event exactly once); the bind, token and `Host` checks; SIGTERM.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use tokio_tungstenite::tungstenite::{self, Message, client::IntoClientRequest};

use super::common::{args, trellis};
use super::mock::*;

/// How long anything may take on a loaded machine before the test gives up.
pub(super) const PATIENCE: Duration = Duration::from_secs(120);
/// Every model response is this late, so that the run lasts a few seconds.
const PACE: Duration = Duration::from_millis(250);
/// Files the analysis agent reads, one per turn, before it answers.
const AGENT_READS: usize = 10;

/// `trellis serve` on a free loopback port; killed (SIGKILL) and reaped when dropped.
pub(super) struct Server {
    child: Child,
    pub(super) port: u16,
    lines: mpsc::Receiver<String>,
    printed: String,
    stderr: PathBuf,
}

impl Server {
    pub(super) fn start(repo: &Path, home: &Path, token_file: &Path, extra: &[&str]) -> Self {
        static N: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let stderr = home.join(format!("serve-{n}.stderr"));
        let mut c = env(trellis(repo), home);
        c.args(["serve", "--bind", "127.0.0.1:0", "--token-file"])
            .arg(token_file)
            .args(extra)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(std::fs::File::create(&stderr).unwrap());
        let mut child = c.spawn().expect("spawn trellis serve");
        let out = child.stdout.take().unwrap();
        let (tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(out).lines() {
                let Ok(line) = line else { return };
                if tx.send(line).is_err() {
                    return;
                }
            }
        });
        let mut s = Self {
            child,
            port: 0,
            lines,
            printed: String::new(),
            stderr,
        };
        let first = s.wait_line(|_| true);
        let port = first
            .strip_prefix("listening on http://127.0.0.1:")
            .unwrap_or_else(|| panic!("first line: {first}"));
        s.port = port.trim().parse().unwrap();
        s
    }

    /// The next line printed that satisfies `until` (earlier lines are kept in `printed`).
    pub(super) fn wait_line(&mut self, until: impl Fn(&str) -> bool) -> String {
        let deadline = Instant::now() + PATIENCE;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.lines.recv_timeout(left) {
                Ok(line) => {
                    self.printed.push_str(&line);
                    self.printed.push('\n');
                    if until(&line) {
                        return line;
                    }
                }
                Err(e) => panic!(
                    "trellis serve: no expected line ({e:?}); stdout:\n{}\nstderr:\n{}",
                    self.printed,
                    self.stderr_text()
                ),
            }
        }
    }

    pub(super) fn pid(&self) -> u32 {
        self.child.id()
    }

    pub(super) fn stderr_text(&self) -> String {
        std::fs::read_to_string(&self.stderr).unwrap_or_default()
    }

    fn host(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    /// `method path` with the right `Host` and `token`.
    pub(super) fn http(
        &self,
        method: &str,
        path: &str,
        token: Option<&str>,
        body: Option<&Value>,
    ) -> Reply {
        http(self.port, &self.host(), method, path, token, body)
    }

    /// Starts the discussion run (without its documentation stage, approvals granted) over
    /// the API; its id.
    pub(super) fn start_discussion(&self, token: &str) -> String {
        let created = self.http(
            "POST",
            "/api/workflows",
            Some(token),
            Some(&json!({
                "request": "Let's discuss the decision to keep stock in memory",
                "workflow": "architecture_discussion",
                "skip": ["decision_documentation"],
                "input": "approve",
            })),
        );
        assert_eq!(created.status, 201, "{}", created.body);
        created.body["run"].as_str().unwrap().to_owned()
    }

    /// SIGKILL, and reap.
    pub(super) fn kill(&mut self) {
        self.child.kill().unwrap();
        self.child.wait().unwrap();
    }

    /// SIGTERM: a graceful stop, within a few seconds, with exit status 0.
    fn terminate(&mut self) {
        let stopping = Instant::now();
        let status = Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status()
            .unwrap();
        assert!(status.success());
        let status = self.wait_exit();
        assert!(
            status.success(),
            "{status}; stderr:\n{}",
            self.stderr_text()
        );
        let took = stopping.elapsed();
        assert!(took < Duration::from_secs(10), "stopping took {took:?}");
        assert!(
            self.stderr_text()
                .contains("stopped; live runs are resumable"),
            "{}",
            self.stderr_text()
        );
    }

    /// Waits (up to [`PATIENCE`]) for the process to exit.
    fn wait_exit(&mut self) -> std::process::ExitStatus {
        let deadline = Instant::now() + PATIENCE;
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                return status;
            }
            assert!(
                Instant::now() < deadline,
                "trellis serve did not exit; stderr:\n{}",
                self.stderr_text()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The access token `trellis serve` saved to `token_file`.
pub(super) fn read_token(token_file: &Path) -> String {
    std::fs::read_to_string(token_file)
        .unwrap()
        .trim()
        .to_owned()
}

/// No user configuration, home or git identity from the machine running the tests.
fn env(mut c: Command, home: &Path) -> Command {
    c.env("HOME", home)
        .env("XDG_CONFIG_HOME", home.join(".config"))
        .env("XDG_DATA_HOME", home.join(".local/share"))
        .env("XDG_CACHE_HOME", home.join(".cache"))
        .env("GIT_AUTHOR_NAME", "User")
        .env("GIT_AUTHOR_EMAIL", "user@example.com")
        .env("GIT_COMMITTER_NAME", "User")
        .env("GIT_COMMITTER_EMAIL", "user@example.com");
    c
}

pub(super) struct Reply {
    pub(super) status: u16,
    pub(super) body: Value,
}

/// One HTTP/1.1 request on its own connection (`Connection: close`).
fn http(
    port: u16,
    host: &str,
    method: &str,
    path: &str,
    token: Option<&str>,
    body: Option<&Value>,
) -> Reply {
    let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.set_read_timeout(Some(PATIENCE)).unwrap();
    let mut req = format!("{method} {path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n");
    if let Some(t) = token {
        req.push_str(&format!("Authorization: Bearer {t}\r\n"));
    }
    let body = body.map(Value::to_string).unwrap_or_default();
    if !body.is_empty() {
        req.push_str("Content-Type: application/json\r\n");
    }
    req.push_str(&format!("Content-Length: {}\r\n\r\n{body}", body.len()));
    s.write_all(req.as_bytes()).unwrap();
    let mut raw = Vec::new();
    s.read_to_end(&mut raw).unwrap();
    let text = String::from_utf8(raw).unwrap();
    let (head, rest) = text.split_once("\r\n\r\n").expect("an HTTP response");
    let status = head.split(' ').nth(1).unwrap().parse().unwrap();
    let chunked = head
        .to_ascii_lowercase()
        .contains("transfer-encoding: chunked");
    let body = if chunked {
        unchunk(rest)
    } else {
        rest.to_owned()
    };
    let body = serde_json::from_str(&body).unwrap_or(Value::String(body));
    Reply { status, body }
}

fn unchunk(mut rest: &str) -> String {
    let mut out = String::new();
    while let Some((size, after)) = rest.split_once("\r\n") {
        let size = usize::from_str_radix(size.trim(), 16).unwrap();
        if size == 0 {
            break;
        }
        out.push_str(&after[..size]);
        rest = &after[size + 2..];
    }
    out
}

/// Follows `stream` from `since` on the event socket, sending every frame it receives to
/// `tx`; the thread ends (dropping `tx`) when the connection does.
fn follow(
    port: u16,
    token: &str,
    stream: &str,
    since: u64,
    tx: mpsc::Sender<Value>,
) -> std::thread::JoinHandle<()> {
    try_follow(port, token, stream, since, tx).unwrap_or_else(|e| panic!("{e}"))
}

/// [`follow`], answering why when the server cannot be reached or refuses the upgrade.
pub(super) fn try_follow(
    port: u16,
    token: &str,
    stream: &str,
    since: u64,
    tx: mpsc::Sender<Value>,
) -> Result<std::thread::JoinHandle<()>, String> {
    let tcp = TcpStream::connect(("127.0.0.1", port)).map_err(|e| format!("connect: {e}"))?;
    tcp.set_read_timeout(Some(PATIENCE)).unwrap();
    let mut req = format!("ws://127.0.0.1:{port}/api/events?stream={stream}&since={since}")
        .into_client_request()
        .unwrap();
    req.headers_mut()
        .insert("authorization", format!("Bearer {token}").parse().unwrap());
    let (mut ws, _) = match tungstenite::client(req, tcp) {
        Ok(c) => c,
        Err(tungstenite::HandshakeError::Failure(tungstenite::Error::Http(res))) => {
            return Err(format!(
                "upgrade refused: {} {}",
                res.status(),
                String::from_utf8_lossy(res.body().as_deref().unwrap_or_default())
            ));
        }
        Err(e) => return Err(format!("upgrade: {e}")),
    };
    Ok(std::thread::spawn(move || {
        loop {
            match ws.read() {
                Ok(Message::Text(t)) => {
                    let frame: Value = serde_json::from_str(&t).unwrap();
                    if tx.send(frame).is_err() {
                        return;
                    }
                }
                Ok(Message::Close(_)) | Err(_) => return,
                Ok(_) => {}
            }
        }
    }))
}

pub(super) fn seqs(frames: &[Value]) -> Vec<u64> {
    frames.iter().map(|f| f["seq"].as_u64().unwrap()).collect()
}

/// An agent request of the analysis agent (it may read files).
fn is_agent(body: &Value) -> bool {
    body["response_format"].is_null()
        && body["tools"]
            .as_array()
            .is_some_and(|t| t.iter().any(|t| t["function"]["name"] == "read_file"))
}

/// Every answer [`PACE`] late; the agent reads [`AGENT_READS`] files, one a turn, then answers.
fn paced(body: &Value) -> String {
    std::thread::sleep(PACE);
    let reads = tool_results(body);
    if is_agent(body) && reads < AGENT_READS {
        let path = if reads.is_multiple_of(2) {
            "inventory.py"
        } else {
            "README.md"
        };
        tool_sse(
            &format!("call_{reads}"),
            "read_file",
            &json!({ "path": path }).to_string(),
        )
    } else {
        sse(&answer(body))
    }
}

pub(super) fn is_end(frame: &Value) -> bool {
    matches!(
        frame["name"].as_str(),
        Some("workflow:completed" | "workflow:error" | "workflow:cancelled")
    )
}

#[test]
fn a_run_survives_a_sigkilled_server_and_its_events_arrive_exactly_once() {
    let began = Instant::now();
    let (url, seen) = serve(paced);
    let ws = trellis_test_support::example_repo("inventory", &mock_config(&url)).unwrap();
    let home = tempfile::tempdir().unwrap();
    let token_file = home.path().join("cfg/serve-token");

    let mut first = Server::start(ws.path(), home.path(), &token_file, &[]);
    first.wait_line(|l| l.starts_with("new access token saved to"));
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&token_file).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
    }
    let token = read_token(&token_file);
    let run = first.start_discussion(&token);
    let stream = format!("run:{run}");

    // Follow the run from the start; kill the server once events have arrived and the
    // analysis agent is a few turns in.
    let (tx, rx) = mpsc::channel();
    let reader = follow(first.port, &token, &stream, 0, tx);
    let mut before: Vec<Value> = Vec::new();
    let agent_turns = || seen.lock().unwrap().iter().filter(|b| is_agent(b)).count();
    let deadline = Instant::now() + PATIENCE;
    loop {
        match rx.recv_timeout(Duration::from_millis(20)) {
            Ok(f) => before.push(f),
            Err(mpsc::RecvTimeoutError::Timeout) => {}
            Err(e) => panic!("the socket closed early ({e:?}): {before:#?}"),
        }
        let events = before.iter().filter(|f| f["type"] == "event").count();
        if events > 0 && agent_turns() >= 2 {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "no agent turn yet: {before:#?}\n{}",
            first.stderr_text()
        );
    }
    assert!(
        !before.iter().any(is_end),
        "the run ended before the kill: {before:#?}"
    );
    first.kill();
    // The socket ends with the process; keep what arrived before.
    loop {
        match rx.recv_timeout(PATIENCE) {
            Ok(f) => before.push(f),
            Err(mpsc::RecvTimeoutError::Disconnected) => break,
            Err(e) => panic!("the socket outlived the server: {e:?}"),
        }
    }
    reader.join().unwrap();
    assert_eq!(before[0]["type"], "subscribed", "{}", before[0]);
    let before: Vec<Value> = before
        .into_iter()
        .filter(|f| f["type"] == "event")
        .collect();
    assert!(!before.iter().any(is_end), "{before:#?}");
    // In order from 1, each once.
    let last = before.len() as u64;
    assert_eq!(seqs(&before), (1..=last).collect::<Vec<_>>());
    let turns_at_kill = agent_turns();

    // The next server resumes the run; a client reconnecting with `since` gets the rest.
    let mut second = Server::start(ws.path(), home.path(), &token_file, &[]);
    second.wait_line(|l| l.starts_with("resumed run ") && l.contains(&run));
    let (tx, rx) = mpsc::channel();
    let reader = follow(second.port, &token, &stream, last, tx);
    let mut after: Vec<Value> = Vec::new();
    let deadline = Instant::now() + PATIENCE;
    while !after.last().is_some_and(is_end) {
        let left = deadline.saturating_duration_since(Instant::now());
        match rx.recv_timeout(left) {
            Ok(f) => after.push(f),
            Err(e) => panic!(
                "the run did not end ({e:?}): {after:#?}\nstdout:\n{}\nstderr:\n{}",
                second.printed,
                second.stderr_text()
            ),
        }
    }
    assert_eq!(after[0]["type"], "subscribed", "{}", after[0]);
    assert_eq!(after[0]["since"], last);
    let after: Vec<Value> = after.into_iter().filter(|f| f["type"] == "event").collect();
    let end = after.last().unwrap();
    assert_eq!(end["name"], "workflow:completed", "{end}");
    assert_eq!(end["event"]["status"], "succeeded", "{end}");
    let total = last + after.len() as u64;
    assert_eq!(seqs(&after), (last + 1..=total).collect::<Vec<_>>());
    assert!(
        after.iter().any(|f| f["name"] == "graph:run_resumed"),
        "{after:#?}"
    );
    assert!(
        agent_turns() > turns_at_kill,
        "the agent ran on after the resume"
    );

    // The union is the run's stream as stored: seqs 1..=total, each once, same events.
    let frames: Vec<Value> = before.into_iter().chain(after).collect();
    for f in &frames {
        assert_eq!(f["stream"], stream.as_str(), "{f}");
    }
    let mut union = seqs(&frames);
    union.sort_unstable();
    union.dedup();
    assert_eq!(union.len(), frames.len(), "a seq arrived twice");
    assert_eq!(union, (1..=total).collect::<Vec<_>>(), "a seq is missing");
    let stored = second.http(
        "GET",
        &format!("/api/workflows/{run}/events?limit=10000"),
        Some(&token),
        None,
    );
    assert_eq!(stored.status, 200, "{}", stored.body);
    let stored = stored.body.as_array().unwrap();
    assert!(stored.len() as u64 >= total);
    for (got, want) in frames.iter().zip(stored) {
        assert_eq!(
            (&got["seq"], &got["name"], &got["event"]),
            (&want["seq"], &want["name"], &want["event"])
        );
    }

    // The run record says so too (polled: the record may trail the event by a moment).
    let deadline = Instant::now() + PATIENCE;
    loop {
        let shown = second.http("GET", &format!("/api/workflows/{run}"), Some(&token), None);
        assert_eq!(shown.status, 200, "{}", shown.body);
        if shown.body["status"] == "succeeded" {
            assert_eq!(shown.body["workflow"], "architecture_discussion");
            break;
        }
        assert!(Instant::now() < deadline, "{}", shown.body);
        std::thread::sleep(Duration::from_millis(50));
    }
    // A graceful stop with a client connected: the socket is closed, the exit status is 0.
    second.terminate();
    reader.join().unwrap();
    eprintln!(
        "serve kill/resume: {} events ({last} before the kill), {:.1} s",
        total,
        began.elapsed().as_secs_f64()
    );
}

#[test]
fn serve_refuses_a_remote_bind_without_allow_remote() {
    let dir = tempfile::tempdir().unwrap();
    let token_file = dir.path().join("serve-token");
    let out = env(
        args(
            trellis(dir.path()),
            &["serve", "--bind", "0.0.0.0:0", "--token-file"],
        ),
        dir.path(),
    )
    .arg(&token_file)
    .output()
    .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("--allow-remote"), "{err}");
    assert!(!token_file.exists());
}

#[cfg(unix)]
#[test]
fn serve_checks_token_and_host_and_stops_on_sigterm() {
    // No model is called: any address will do.
    let ws = trellis_test_support::example_repo("inventory", &mock_config("http://127.0.0.1:9/v1"))
        .unwrap();
    let home = tempfile::tempdir().unwrap();
    let token_file = home.path().join("serve-token");
    let token = "0123456789abcdef".repeat(4);
    {
        use std::os::unix::fs::OpenOptionsExt;
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&token_file)
            .unwrap();
        writeln!(f, "{token}").unwrap();
    }
    let mut server = Server::start(ws.path(), home.path(), &token_file, &["--no-resume"]);
    server.wait_line(|l| l.starts_with("access token: in "));

    assert_eq!(server.http("GET", "/api/health", None, None).status, 200);
    let ok = server.http("GET", "/api/workflows", Some(&token), None);
    assert_eq!(ok.status, 200, "{}", ok.body);
    assert_eq!(ok.body, json!([]));
    for bad in [None, Some("wrong"), Some(&token[1..])] {
        let r = server.http("GET", "/api/workflows", bad, None);
        assert_eq!(r.status, 401, "{bad:?}: {}", r.body);
    }
    let r = http(
        server.port,
        "evil.example",
        "GET",
        "/api/workflows",
        Some(&token),
        None,
    );
    assert_eq!(r.status, 403, "{}", r.body);
    // The WebSocket upgrade is checked the same way.
    let tcp = TcpStream::connect(("127.0.0.1", server.port)).unwrap();
    let mut req = format!("ws://127.0.0.1:{}/api/events", server.port)
        .into_client_request()
        .unwrap();
    req.headers_mut()
        .insert("authorization", "Bearer wrong".parse().unwrap());
    match tungstenite::client(req, tcp) {
        Err(tungstenite::HandshakeError::Failure(tungstenite::Error::Http(res))) => {
            assert_eq!(res.status(), 401);
        }
        Err(e) => panic!("{e}"),
        Ok(_) => panic!("upgraded with a wrong token"),
    }

    // SIGTERM: a graceful stop, exit status 0.
    server.terminate();
}
