//! The two real clients: the official `openai` packages from PyPI and npm run their script
//! (tests/python, tests/node) against the server on a free loopback port — models,
//! whole and streamed answers, tool calls, structured output, errors. Installed by
//! `scripts/setup.d/74-openai-clients.sh`; a missing client fails the test with that
//! command.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use trellis_llm_server::Limits;

use super::common::*;

const SETUP: &str = "scripts/setup.d/74-openai-clients.sh";

const CHECKS: [&str; 7] = [
    "models",
    "whole",
    "stream",
    "tools",
    "stream tools",
    "structured",
    "errors",
];

fn tests_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests")
}

/// Where the setup step puts the Python client (`trellis_fetch`'s cache convention).
fn python() -> PathBuf {
    let cache = std::env::var_os("XDG_CACHE_HOME")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")))
        .expect("HOME is set");
    cache.join("trellis/openai-py-venv/bin/python")
}

/// Runs `program args… BASE TOKEN MODEL` against a served scripted model and checks every
/// `ok` line.
async fn drive(program: &Path, args: &[PathBuf]) {
    let server = start(Arc::new(scripted()), Limits::default()).await;
    let mut cmd = tokio::process::Command::new(program);
    cmd.args(args)
        .arg(server.base_url())
        .arg(TOKEN)
        .arg("scripted")
        // A proxy from the environment must not take loopback requests elsewhere.
        .env("NO_PROXY", "127.0.0.1,localhost")
        .env("no_proxy", "127.0.0.1,localhost")
        .kill_on_drop(true);
    let out = tokio::time::timeout(Duration::from_secs(120), cmd.output())
        .await
        .expect("the client finished within 120 s")
        .expect("the client started");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "{} failed ({}):\n{stdout}\n{stderr}",
        program.display(),
        out.status
    );
    for check in CHECKS.iter().chain(&["stream error"]) {
        assert!(
            stdout.lines().any(|l| l == format!("ok {check}")),
            "no `ok {check}` in:\n{stdout}\n{stderr}"
        );
    }
    // Each request of the script was reported once; none as a server failure but the
    // scripted one.
    let records = server.records.lock().unwrap().clone();
    assert!(records.len() >= 12, "{records:#?}");
    let failed: Vec<_> = records.iter().filter(|r| r.status >= 500).collect();
    assert!(
        failed.iter().all(|r| r.to_string().contains("exploded")),
        "{failed:#?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_openai_python_package() {
    let python = python();
    assert!(
        python.exists(),
        "the `openai` Python package is not installed ({} is missing): run {SETUP}",
        python.display()
    );
    drive(&python, &[tests_dir().join("python/openai_client.py")]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_openai_npm_package() {
    let dir = tests_dir().join("node");
    assert!(
        dir.join("node_modules/openai/package.json").exists(),
        "the `openai` npm package is not installed in {}: run {SETUP}",
        dir.display()
    );
    drive(Path::new("node"), &[dir.join("openai_client.mjs")]).await;
}
