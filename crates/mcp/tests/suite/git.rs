//! The client against PyPI `mcp-server-git` (pinned, installed in a venv by
//! scripts/setup.d/73-mcp-git.sh; SKIPPED with a message when it is missing): `git_status` and
//! `git_log` on a temporary repository with known answers, and a repository outside its
//! `--repository` reported as a failed tool call.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use serde_json::json;
use trellis_mcp::{ServerConfig, ServerState};

use super::support::{Agent, hub, status};

/// The venv's `mcp-server-git`, if installed.
fn mcp_server_git() -> Option<PathBuf> {
    let cache = std::env::var_os("XDG_CACHE_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")))?;
    let bin = cache.join("trellis/mcp-git-venv/bin/mcp-server-git");
    bin.is_file().then_some(bin)
}

/// `git ARGS` in `dir` with a fixed identity and dates, no user or system configuration.
fn git(dir: &Path, args: &[&str]) -> String {
    let out = Command::new("git")
        .args(args)
        .current_dir(dir)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("GIT_AUTHOR_NAME", "Ada Tester")
        .env("GIT_AUTHOR_EMAIL", "ada@example.com")
        .env("GIT_COMMITTER_NAME", "Ada Tester")
        .env("GIT_COMMITTER_EMAIL", "ada@example.com")
        .env("GIT_AUTHOR_DATE", "2026-01-02T03:04:05Z")
        .env("GIT_COMMITTER_DATE", "2026-01-02T03:04:05Z")
        .output()
        .unwrap();
    assert!(out.status.success(), "git {args:?}: {out:?}");
    String::from_utf8(out.stdout).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mcp_server_git_answers_status_and_log_of_a_known_repository() {
    let Some(bin) = mcp_server_git() else {
        eprintln!("SKIPPED: mcp-server-git is not installed (run scripts/setup.d/73-mcp-git.sh)");
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let repo = dir.path().canonicalize().unwrap().join("repo");
    let other = dir.path().canonicalize().unwrap().join("other");
    std::fs::create_dir_all(&repo).unwrap();
    std::fs::create_dir_all(&other).unwrap();
    git(&repo, &["init", "-q", "-b", "main"]);
    std::fs::write(repo.join("a.txt"), "one\n").unwrap();
    git(&repo, &["add", "a.txt"]);
    git(&repo, &["commit", "-q", "-m", "first: add a.txt"]);
    std::fs::write(repo.join("a.txt"), "one\ntwo\n").unwrap();
    git(&repo, &["commit", "-q", "-am", "second: extend a.txt"]);
    let head = git(&repo, &["rev-parse", "HEAD"]).trim().to_owned();
    let first = git(&repo, &["rev-parse", "HEAD~1"]).trim().to_owned();
    // Work in progress: a modified tracked file and an untracked one.
    std::fs::write(repo.join("a.txt"), "one\ntwo\nthree\n").unwrap();
    std::fs::write(repo.join("new.txt"), "new\n").unwrap();

    let server = ServerConfig {
        command: Some(bin.display().to_string()),
        args: vec!["--repository".into(), repo.display().to_string()],
        ..ServerConfig::default()
    };
    let hub = hub(dir.path(), vec![("git", server)]);
    hub.start();
    let all = hub.settled(Duration::from_secs(60)).await;
    let s = status(&all, "git");
    assert_eq!(s.state, ServerState::Ready, "{s:?}");
    let tools: Vec<&str> = s.tools.iter().map(|t| t.remote.as_str()).collect();
    for t in ["git_status", "git_log", "git_diff_unstaged", "git_commit"] {
        assert!(tools.contains(&t), "{t} missing from {tools:?}");
    }
    let agent = Agent::new(dir.path(), &hub);
    let repo_path = repo.display().to_string();

    let r = agent
        .call("git__git_status", json!({"repo_path": repo_path}))
        .await;
    assert!(!r.is_error, "{r:?}");
    assert!(r.content.contains("On branch main"), "{r:?}");
    assert!(r.content.contains("modified:   a.txt"), "{r:?}");
    assert!(r.content.contains("Untracked files"), "{r:?}");
    assert!(r.content.contains("new.txt"), "{r:?}");

    let r = agent
        .call(
            "git__git_log",
            json!({"repo_path": repo_path, "max_count": 1}),
        )
        .await;
    assert!(!r.is_error, "{r:?}");
    assert!(r.content.contains(&head), "{r:?}");
    assert!(r.content.contains("second: extend a.txt"), "{r:?}");
    assert!(!r.content.contains(&first), "max_count 1: {r:?}");
    let r = agent
        .call("git__git_log", json!({"repo_path": repo_path}))
        .await;
    assert!(!r.is_error, "{r:?}");
    let (at_head, at_first) = (
        r.content.find(&head).unwrap(),
        r.content.find(&first).unwrap(),
    );
    assert!(at_head < at_first, "newest first: {r:?}");
    assert!(r.content.contains("Ada Tester"), "{r:?}");

    // Outside its --repository: the server's refusal, as a failed call.
    git(&other, &["init", "-q"]);
    let r = agent
        .call(
            "git__git_status",
            json!({"repo_path": other.display().to_string()}),
        )
        .await;
    assert!(r.is_error, "{r:?}");
    assert!(
        r.content.contains("outside the allowed repository"),
        "{r:?}"
    );
    // A wrong argument type: refused by the server's schema check, a failed call too.
    let r = agent
        .call(
            "git__git_log",
            json!({"repo_path": repo_path, "max_count": "many"}),
        )
        .await;
    assert!(r.is_error, "{r:?}");

    // Nothing was changed by the read-only calls.
    assert!(git(&repo, &["status", "--porcelain"]).contains(" M a.txt"));
    let stopped = hub.stop(Duration::from_secs(10)).await;
    assert_eq!(status(&stopped, "git").state, ServerState::Stopped);
}
