use std::path::Path;
use std::process::{Command, Output};

use serde_json::Value;

pub fn trellis(repo: &Path) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_trellis"));
    c.arg("--repo").arg(repo).env_remove("RUST_LOG");
    c
}

pub fn ok(mut c: Command) -> String {
    let out: Output = c.output().expect("spawn trellis");
    assert!(
        out.status.success(),
        "{c:?} failed ({}):\nstdout: {}\nstderr: {}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).expect("utf-8 output")
}

pub fn json(c: Command) -> Value {
    let s = ok(c);
    serde_json::from_str(&s).unwrap_or_else(|e| panic!("not JSON ({e}): {s}"))
}

pub fn args(mut c: Command, a: &[&str]) -> Command {
    c.args(a);
    c
}
