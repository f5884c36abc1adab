//! What the binary prints regardless of the command: its help, and nothing on a closed pipe.

use std::process::{Command, Stdio};

use super::common::trellis;

#[test]
fn help_says_what_trellis_is() {
    let out = Command::new(env!("CARGO_BIN_EXE_trellis"))
        .arg("--help")
        .output()
        .unwrap();
    assert!(out.status.success());
    let help = String::from_utf8(out.stdout).unwrap();
    assert!(
        help.starts_with("Trellis: a self-hosted multi-agent coding system."),
        "{help}"
    );
    assert!(!help.contains("parse and dispatch"), "{help}");
}

/// `trellis workflows list | head -0`: the reader has gone before the first line is written
/// (its end of the pipe is closed before the process starts, so the write always fails).
#[test]
fn a_closed_pipe_ends_the_command_quietly() {
    let tmp = tempfile::tempdir().unwrap();
    let (reader, writer) = std::io::pipe().unwrap();
    drop(reader);
    let out = trellis(tmp.path())
        .args(["workflows", "list"])
        .env("XDG_CONFIG_HOME", tmp.path().join("no-xdg-config"))
        .stdout(Stdio::from(writer))
        .stderr(Stdio::piped())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{}: {stderr}", out.status);
    assert!(!stderr.contains("panicked"), "{stderr}");
}
