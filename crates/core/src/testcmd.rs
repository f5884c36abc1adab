//! The project's test command: configured (`agents.test_command`) or detected from the
//! repository, run by the runtime after the test role's agent so that the stage's verdict
//! is the real exit status, not the model's claim.

use std::path::Path;
use std::process::Stdio;

use serde::Serialize;
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;
use trellis_tools::{Registry, ToolEnv};

/// The registry role the runtime runs the test command as (allowed `shell` only).
pub const TEST_RUNNER: &str = "test_runner";

/// A test command and why it was chosen.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct TestCommand {
    /// The shell command.
    pub command: String,
    /// Where it came from (`agents.test_command`, `Cargo.toml`, …).
    pub source: String,
}

fn python_has_pytest() -> bool {
    std::process::Command::new("python3")
        .args(["-c", "import pytest"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// The configured command, else one detected from the files at the top of `dir`.
pub fn detect(dir: &Path, configured: Option<&str>) -> Option<TestCommand> {
    if let Some(c) = configured.filter(|c| !c.trim().is_empty()) {
        return Some(TestCommand {
            command: c.trim().to_owned(),
            source: "agents.test_command".into(),
        });
    }
    let has = |f: &str| dir.join(f).exists();
    let found = |command: &str, source: &str| {
        Some(TestCommand {
            command: command.into(),
            source: source.into(),
        })
    };
    if has("Cargo.toml") {
        return found("cargo test --quiet", "Cargo.toml");
    }
    if has("go.mod") {
        return found("go test ./...", "go.mod");
    }
    if has("package.json")
        && std::fs::read_to_string(dir.join("package.json"))
            .ok()
            .and_then(|t| serde_json::from_str::<Value>(&t).ok())
            .is_some_and(|v| v["scripts"]["test"].is_string())
    {
        return found("npm test --silent", "package.json scripts.test");
    }
    let python = [
        "pyproject.toml",
        "setup.py",
        "setup.cfg",
        "pytest.ini",
        "tox.ini",
    ]
    .iter()
    .any(|f| has(f))
        || std::fs::read_dir(dir).is_ok_and(|entries| {
            entries.flatten().any(|e| {
                let n = e.file_name().to_string_lossy().into_owned();
                (n.starts_with("test_") && n.ends_with(".py")) || n == "tests"
            })
        });
    // `-B`: no bytecode files. Agents edit fast: a same-size edit within the second of the
    // previous run would otherwise be served from a stale `.pyc`.
    if python {
        return if python_has_pytest() {
            found(
                "python3 -B -m pytest -q -p no:cacheprovider",
                "Python project (pytest)",
            )
        } else {
            found(
                "python3 -B -m unittest discover -v",
                "Python project (unittest)",
            )
        };
    }
    if std::fs::read_to_string(dir.join("Makefile"))
        .is_ok_and(|m| m.lines().any(|l| l.starts_with("test:")))
    {
        return found("make test", "Makefile test target");
    }
    None
}

/// The result of running the test command.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct TestRun {
    /// The command.
    pub command: TestCommand,
    /// Whether it passed (exit 0, no timeout).
    pub passed: bool,
    /// The exit code (`None` if killed or refused).
    pub exit_code: Option<i32>,
    /// The end of its output (stdout and stderr).
    pub output: String,
    /// Lines that look like failures (`FAILED`, `FAIL:`, `Error`, `panicked`, `assert`).
    pub failures: Vec<String>,
}

/// Runs `command` through the registry's `shell` tool (recorded and policy-checked like an
/// agent's call) in the environment's workspace.
pub async fn run(
    registry: &Registry,
    env: &ToolEnv,
    command: &TestCommand,
    timeout_secs: u64,
    cancel: CancellationToken,
) -> TestRun {
    let result = registry
        .call(
            env,
            TEST_RUNNER,
            "shell",
            json!({ "command": command.command, "timeout_secs": timeout_secs }),
            cancel,
        )
        .await;
    let data = result.data.clone().unwrap_or(Value::Null);
    let exit_code = data
        .get("exitCode")
        .and_then(Value::as_i64)
        .map(|c| c as i32);
    let timed_out = data
        .get("timedOut")
        .and_then(Value::as_bool)
        .unwrap_or(false);
    let mut output = String::new();
    for k in ["stdout", "stderr"] {
        if let Some(t) = data.get(k).and_then(Value::as_str)
            && !t.trim().is_empty()
        {
            output.push_str(t.trim_end());
            output.push('\n');
        }
    }
    if output.is_empty() {
        output = result.content.clone();
    }
    let failures = output
        .lines()
        .filter(|l| {
            let t = l.trim_start();
            t.starts_with("FAIL")
                || t.starts_with("ERROR")
                || t.contains("panicked at")
                || t.starts_with("AssertionError")
                || t.contains("Error:")
                || t.starts_with("test result: FAILED")
        })
        .take(30)
        .map(|l| crate::handlers::clip(l.trim(), 300))
        .collect();
    TestRun {
        command: command.clone(),
        passed: !result.is_error && exit_code == Some(0) && !timed_out,
        exit_code,
        output: tail(&output, 6000),
        failures,
    }
}

/// The last `max` bytes of `text` (on a char boundary).
fn tail(text: &str, max: usize) -> String {
    if text.len() <= max {
        return text.to_owned();
    }
    let mut start = text.len() - max;
    while !text.is_char_boundary(start) {
        start += 1;
    }
    format!("[… {} bytes cut]\n{}", start, &text[start..])
}
