//! The shell tool: timeout kills the whole process group, policy, environment, caps.

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::json;
use tokio_util::sync::CancellationToken;
use trellis_tools::builtin::{run_shell, scrubbed_env};
use trellis_tools::{ApprovalDecision, ScriptedInteraction, ShellConfig, ToolsConfig};

use super::support::{Tools, auto};

/// Whether `pid` is still a live (non-zombie) process.
fn alive(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => {
            // The state follows the parenthesised command name.
            let state = stat
                .rsplit(')')
                .next()
                .unwrap_or("")
                .trim_start()
                .chars()
                .next();
            state != Some('Z')
        }
        Err(_) => false,
    }
}

fn pids(file: &Path) -> Vec<u32> {
    std::fs::read_to_string(file)
        .unwrap_or_default()
        .split_whitespace()
        .map(|p| p.parse().unwrap())
        .collect()
}

#[tokio::test]
async fn timeout_kills_children_and_grandchildren() {
    let dir = tempfile::tempdir().unwrap();
    let mut cfg = ToolsConfig::default();
    // Allow everything: this test is about the process group, not the policy.
    cfg.policy.unknown = trellis_tools::Action::Allow;
    let t = Tools::new(dir.path(), cfg, auto());
    // Process ids inside the sandbox are its PID namespace's: the survivors are told by
    // the files they would write after the call ended.
    let script = "(sleep 2; touch child) & \
                  bash -c '(sleep 2; touch grandchild) & wait' & \
                  sleep 0.3; echo started; wait";
    let started = Instant::now();
    let r = t
        .call("shell", json!({"command": script, "timeout_secs": 1}))
        .await;
    assert!(!r.is_error, "{}", r.content);
    assert!(r.content.contains("timed out"), "{}", r.content);
    assert!(r.content.contains("started"), "{}", r.content);
    assert!(started.elapsed() < Duration::from_secs(10));
    tokio::time::sleep(Duration::from_secs(3)).await;
    for survivor in ["child", "grandchild"] {
        assert!(
            !dir.path().join(survivor).exists(),
            "{survivor} outlived the call"
        );
    }
}

#[tokio::test]
async fn cancel_kills_the_group_too() {
    let dir = tempfile::tempdir().unwrap();
    let cancel = CancellationToken::new();
    let c2 = cancel.clone();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(500)).await;
        c2.cancel();
    });
    let cfg = ShellConfig::default();
    let r = run_shell(
        "sleep 300 & echo $! > pid; wait",
        dir.path(),
        scrubbed_env(&cfg, std::env::vars()),
        &cfg,
        Duration::from_secs(60),
        &cancel,
    )
    .await;
    assert!(r.is_err_and(|e| e.is_cancelled()));
    let ids = pids(&dir.path().join("pid"));
    assert_eq!(ids.len(), 1);
    let deadline = Instant::now() + Duration::from_secs(5);
    while alive(ids[0]) && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(!alive(ids[0]));
}

#[tokio::test]
async fn environment_is_scrubbed_of_secrets() {
    let cfg = ShellConfig {
        env_allow: vec!["MY_SETTING".into(), "GITHUB_TOKEN".into()],
        ..ShellConfig::default()
    };
    let from = [
        ("PATH", "/usr/bin:/bin"),
        ("HOME", "/home/u"),
        ("MY_SETTING", "1"),
        ("GITHUB_TOKEN", "ghp_x"),
        ("OPENAI_API_KEY", "sk-x"),
        ("AWS_SECRET_ACCESS_KEY", "y"),
        ("DATABASE_PASSWORD", "z"),
        ("RANDOM_OTHER", "w"),
    ]
    .map(|(k, v)| (k.to_owned(), v.to_owned()));
    let env = scrubbed_env(&cfg, from);
    let dir = tempfile::tempdir().unwrap();
    let out = run_shell(
        "env",
        dir.path(),
        env,
        &cfg,
        Duration::from_secs(10),
        &CancellationToken::new(),
    )
    .await
    .unwrap();
    assert!(out.stdout.contains("MY_SETTING=1"));
    assert!(out.stdout.contains("HOME=/home/u"));
    for secret in [
        "ghp_x",
        "sk-x",
        "AWS_SECRET",
        "DATABASE_PASSWORD",
        "RANDOM_OTHER",
    ] {
        assert!(
            !out.stdout.contains(secret),
            "{secret} leaked:\n{}",
            out.stdout
        );
    }
}

#[tokio::test]
async fn output_is_capped_and_runs_in_the_workspace() {
    let dir = tempfile::tempdir().unwrap();
    let mut cfg = ToolsConfig::default();
    cfg.shell.max_output_bytes = 1000;
    let t = Tools::new(dir.path(), cfg, auto());
    let r = t
        .call("shell", json!({"command": "seq 1 100000; pwd"}))
        .await;
    assert!(r.content.contains("bytes omitted"), "{}", r.content);
    assert!(r.content.len() < 1500);
    let root = dir.path().canonicalize().unwrap();
    assert!(r.content.contains(&root.to_string_lossy().to_string()));
    assert!(r.content.contains("\n1\n"));
}

#[tokio::test]
async fn policy_asks_and_denies_before_running() {
    let dir = tempfile::tempdir().unwrap();
    let scripted = Arc::new(ScriptedInteraction::new(
        [
            ApprovalDecision::Deny { reason: None },
            ApprovalDecision::Approve,
        ],
        [],
    ));
    let t = Tools::new(dir.path(), ToolsConfig::default(), scripted.clone());
    // Destructive: asks; denied, so the file is not created.
    let r = t
        .call("shell", json!({"command": "touch marker && rm -rf build"}))
        .await;
    assert!(r.is_error, "{}", r.content);
    assert!(!dir.path().join("marker").exists());
    let req = &scripted.approval_requests()[0];
    assert_eq!(
        req.class,
        Some(trellis_tools::policy::CommandClass::Destructive)
    );
    // Approved the second time.
    let r = t
        .call("shell", json!({"command": "touch marker && rm -rf build"}))
        .await;
    assert!(!r.is_error, "{}", r.content);
    assert!(dir.path().join("marker").exists());
    // Read-only commands never ask (the script is exhausted and would fail).
    let r = t.call("shell", json!({"command": "ls -la | wc -l"})).await;
    assert!(!r.is_error, "{}", r.content);

    let mut cfg = ToolsConfig::default();
    cfg.policy.rules.push(trellis_tools::CommandRule {
        command: "git push".into(),
        action: trellis_tools::Action::Deny,
    });
    let t = Tools::new(dir.path(), cfg, auto());
    let r = t
        .call("shell", json!({"command": "echo hi; git push origin main"}))
        .await;
    assert!(
        r.is_error && r.content.contains("policy forbids"),
        "{}",
        r.content
    );
}
