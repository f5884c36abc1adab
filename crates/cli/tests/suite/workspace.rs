//! What commands do where nothing has run yet, in directories that do not exist, and in
//! directories that are not git repositories: clear messages, and nothing created.

use std::path::Path;
use std::process::{Command, Output};

use super::common::{args, trellis};

/// `trellis` in `dir` that cannot find a repository above it.
fn cmd(dir: &Path) -> Command {
    let mut c = trellis(dir);
    c.env("GIT_CEILING_DIRECTORIES", dir.parent().unwrap())
        .env("XDG_CONFIG_HOME", dir.join("no-xdg-config"));
    c
}

fn run(c: Command) -> (Output, String, String) {
    let mut c = c;
    let out = c.output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    (out, stdout, stderr)
}

fn entries(dir: &Path) -> Vec<String> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect()
}

#[test]
fn a_missing_dash_c_directory_is_an_error_and_is_not_created() {
    let tmp = tempfile::tempdir().unwrap();
    let missing = tmp.path().join("nonexistent");
    for a in [&["runs", "list"][..], &["demo", "chain"], &["search", "x"]] {
        let (out, _, stderr) = run(args(cmd(&missing), a));
        assert_eq!(out.status.code(), Some(1), "{a:?}: {stderr}");
        assert!(
            stderr.contains(&format!("-C {}: no such directory", missing.display())),
            "{a:?}: {stderr}"
        );
        assert!(!missing.exists(), "{a:?} created {}", missing.display());
    }
    let file = tmp.path().join("file");
    std::fs::write(&file, "").unwrap();
    let (out, _, stderr) = run(args(cmd(&file), &["runs", "list"]));
    assert_eq!(out.status.code(), Some(1));
    assert!(stderr.contains("not a directory"), "{stderr}");
}

#[test]
fn read_only_commands_in_an_empty_directory_create_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("empty");
    std::fs::create_dir(&dir).unwrap();
    let canonical = dir.canonicalize().unwrap();

    let (out, stdout, stderr) = run(args(cmd(&dir), &["runs", "list"]));
    assert!(out.status.success(), "{stderr}");
    assert_eq!(
        stdout.trim(),
        format!(
            "no Trellis store in {} (nothing has run here yet)",
            canonical.display()
        )
    );
    let (out, stdout, _) = run(args(cmd(&dir), &["runs", "list", "--json"]));
    assert!(out.status.success());
    assert_eq!(stdout.trim(), "[]");

    for a in [
        &["runs", "show", "0199"][..],
        &["runs", "events", "0199"],
        &["runs", "usage", "0199"],
        &["review", "0199", "--json"],
        &["undo", "0199"],
    ] {
        let (out, _, stderr) = run(args(cmd(&dir), a));
        assert_eq!(out.status.code(), Some(1), "{a:?}: {stderr}");
        assert!(
            stderr.contains("no Trellis store in") && stderr.contains("nothing has run here yet"),
            "{a:?}: {stderr}"
        );
    }
    for a in [&["search", "stock"][..], &["map"]] {
        let (out, _, stderr) = run(args(cmd(&dir), a));
        assert_eq!(out.status.code(), Some(1), "{a:?}: {stderr}");
        assert!(
            stderr.contains("is not indexed yet; run `trellis index`"),
            "{a:?}: {stderr}"
        );
    }
    let (out, stdout, _) = run(args(cmd(&dir), &["workflows", "list"]));
    assert!(out.status.success() && stdout.contains("architecture_discussion"));
    assert_eq!(entries(&dir), Vec::<String>::new(), "nothing was created");
}

#[test]
fn run_outside_a_git_repository_says_what_trellis_needs() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("plain");
    std::fs::create_dir(&dir).unwrap();
    std::fs::write(dir.join("main.py"), "print('hi')\n").unwrap();
    let canonical = dir.canonicalize().unwrap();
    for a in [
        &["run", "Fix it", "--no-input"][..],
        &["run", "Fix it", "--plan-only"],
    ] {
        let (out, _, stderr) = run(args(cmd(&dir), a));
        assert_eq!(out.status.code(), Some(1), "{a:?}: {stderr}");
        assert!(
            stderr.contains(&format!(
                "{} is not inside a git repository",
                canonical.display()
            )) && stderr.contains("git init && git add -A && git commit -m init")
                && stderr.contains("-C REPO"),
            "{a:?}: {stderr}"
        );
    }
    assert_eq!(entries(&dir), ["main.py"], "nothing was created");
}
