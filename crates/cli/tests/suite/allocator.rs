//! The `trellis` binary's allocator settings (crates/cli/src/main.rs), as the kernel sees
//! them in a running process.

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// The `THP_enabled` line of a process's status (`None`: no such process or kernel field).
fn thp_enabled(pid: u32) -> Option<String> {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()?
        .lines()
        .find_map(|l| l.strip_prefix("THP_enabled:").map(|v| v.trim().to_owned()))
}

/// mimalloc's heap must not grow in transparent huge pages (each faulted in 2 MiB zeroed
/// whole): the binary turns them off before mimalloc starts, for its whole process.
#[test]
fn the_binary_runs_without_transparent_huge_pages() {
    if thp_enabled(std::process::id()).is_none() {
        eprintln!("skipped: this kernel shows no THP_enabled in /proc/PID/status");
        return;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    // `trellis acp` waits for its client on stdin: a process that stays up to be looked at.
    let mut child = Command::new(env!("CARGO_BIN_EXE_trellis"))
        .arg("acp")
        .current_dir(dir.path())
        .env_remove("MIMALLOC_ALLOW_THP")
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn trellis acp");
    let deadline = Instant::now() + Duration::from_secs(20);
    let mut seen = None;
    while Instant::now() < deadline {
        // Right after the spawn the process may not have exec'd the binary yet.
        let exe = std::fs::read_link(format!("/proc/{}/exe", child.id())).ok();
        if exe.is_some_and(|e| e.ends_with("trellis")) {
            // …nor have run its constructors (mimalloc's start among them).
            seen = thp_enabled(child.id());
            if seen.as_deref() == Some("0") {
                break;
            }
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let _ = child.kill();
    let _ = child.wait();
    assert_eq!(
        seen.as_deref(),
        Some("0"),
        "THP_enabled of a running trellis"
    );
}
