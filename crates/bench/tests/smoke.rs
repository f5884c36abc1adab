//! The benchmark's smoke run (`trellis-bench --quick`): every Trellis area runs at scale 0.01
//! and the report is written.
//!
//! Being an integration test makes `cargo nextest run --workspace` build the `trellis-bench`
//! binary together with every other test target, with the workspace's unified feature set;
//! a separate `cargo run -p trellis-bench` resolves features for this package alone and
//! rebuilds bindgen and llama.cpp (see `scripts/check`).
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    missing_docs,
    clippy::too_many_lines
)]

use std::path::Path;
use std::process::Command;

#[test]
fn quick_run_writes_the_report() {
    let work =
        Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("bench-smoke-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&work);
    let report = work.join("bench-smoke.md");
    let out = Command::new(env!("CARGO_BIN_EXE_trellis-bench"))
        .args(["--quick", "--work-dir"])
        .arg(&work)
        .arg("--out")
        .arg(&report)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    let doc = std::fs::read_to_string(&report).unwrap();
    assert!(
        doc.starts_with("# Benchmarks: Trellis graph engine vs the LangGraph anchor"),
        "{doc}"
    );
    assert!(doc.contains("| scale | 0.01"), "{doc}");
    assert!(stderr.contains("wrote "), "{stderr}");
    let _ = std::fs::remove_dir_all(&work);
}
