//! `trellis index` and `trellis search`: the result count, filters, and refusals.

use std::collections::BTreeSet;
use std::path::Path;
use std::process::{Command, Output};

use serde_json::Value;

use super::common::{args, ok, trellis};

/// `trellis` in `dir`, with no user configuration and BM25 only.
fn cmd(dir: &Path, a: &[&str]) -> Command {
    let mut c = trellis(dir);
    c.env("XDG_CONFIG_HOME", dir.join("no-xdg-config"))
        .args(["-c", "index.embedding.backend=\"none\""]);
    args(c, a)
}

fn run(mut c: Command) -> (Output, String) {
    let out = c.output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    (out, stderr)
}

fn write(root: &Path, rel: &str, text: &str) {
    let p = root.join(rel);
    std::fs::create_dir_all(p.parent().unwrap()).unwrap();
    std::fs::write(p, text).unwrap();
}

fn index(root: &Path) {
    ok(cmd(root, &["index", "--no-embed"]));
}

/// The paths of `trellis search QUERY --json EXTRA…`.
fn paths(root: &Path, query: &str, extra: &[&str]) -> Vec<String> {
    let mut a = vec!["search", query, "--json", "--budget", "1000000"];
    a.extend_from_slice(extra);
    let pack: Value = serde_json::from_str(&ok(cmd(root, &a))).unwrap();
    pack["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["attribution"]["path"].as_str().unwrap().to_string())
        .collect()
}

#[test]
fn the_result_count_is_an_option() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path();
    for i in 0..80 {
        write(
            root,
            &format!("src/m{i:02}.rs"),
            &format!("pub fn frobnicate_widget_{i}(w: u32) -> u32 {{\n    w + {i}\n}}\n"),
        );
    }
    index(root);
    // The default (50) whatever the budget.
    assert_eq!(paths(root, "frobnicate widget", &[]).len(), 50);
    // More with --limit, and with the configuration key.
    let many = paths(root, "frobnicate widget", &["--limit", "200"]);
    let files: BTreeSet<&String> = many.iter().collect();
    assert!(files.len() >= 70, "{} files: {many:?}", files.len());
    let by_config = paths(root, "frobnicate widget", &["-c", "index.search.limit=120"]);
    assert!(by_config.len() > 50, "{}", by_config.len());
    assert_eq!(paths(root, "frobnicate widget", &["--limit", "3"]).len(), 3);
    let (out, stderr) = run(cmd(root, &["search", "x", "--limit", "0"]));
    assert_eq!(out.status.code(), Some(2), "{stderr}");
}

#[test]
fn code_searches_filter_tests_generated_and_non_code_files() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path();
    // Different texts (identical ones would be dropped as duplicates).
    let code = |name: &str| format!("pub fn quokka_{name}() -> u32 {{\n    7\n}}\n");
    write(root, "src/lib.rs", &code("handler"));
    write(root, "tests/quokka_test.rs", &code("roundtrip"));
    write(root, "vendor/dep/lib.rs", &code("vendored"));
    write(root, "web/quokka.css", ".quokka { color: red; }\n");
    write(root, "LICENSE", "quokka license text\n");
    write(root, "ci/quokka.yml", "quokka: true\n");
    write(root, "scripts/quokka.sh", "#!/bin/sh\necho quokka\n");
    write(
        root,
        "app/quokka.py",
        "def quokka_handler():\n    return 7\n",
    );
    index(root);
    let set =
        |extra: &[&str]| -> BTreeSet<String> { paths(root, "quokka", extra).into_iter().collect() };
    let all = [
        "src/lib.rs",
        "tests/quokka_test.rs",
        "vendor/dep/lib.rs",
        "web/quokka.css",
        "LICENSE",
        "ci/quokka.yml",
        "scripts/quokka.sh",
        "app/quokka.py",
    ];
    let want = |p: &[&str]| -> BTreeSet<String> { p.iter().map(|s| s.to_string()).collect() };
    // Defaults: no generated/vendored or non-code files; tests and scripts stay.
    assert_eq!(
        set(&[]),
        want(&[
            "src/lib.rs",
            "tests/quokka_test.rs",
            "scripts/quokka.sh",
            "app/quokka.py"
        ])
    );
    assert_eq!(set(&["--generated", "--non-code"]), want(&all));
    assert_eq!(
        set(&["--tests", "exclude"]),
        want(&["src/lib.rs", "scripts/quokka.sh", "app/quokka.py"])
    );
    assert_eq!(set(&["--tests", "only"]), want(&["tests/quokka_test.rs"]));
    assert_eq!(
        set(&["-c", "index.search.tests=\"exclude\"", "--lang", "rust"]),
        want(&["src/lib.rs"])
    );
    assert_eq!(
        set(&["--path", "app/**", "--path", "src/**"]),
        want(&["src/lib.rs", "app/quokka.py"])
    );
    assert_eq!(
        set(&["--exclude-path", "src/**", "--exclude-path", "**/*.sh"]),
        want(&["tests/quokka_test.rs", "app/quokka.py"])
    );
    // Bad filters are named.
    let (out, stderr) = run(cmd(root, &["search", "quokka", "--path", "src/["]));
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr.contains("search.paths: invalid glob `src/[`"),
        "{stderr}"
    );
    let (out, stderr) = run(cmd(root, &["search", "quokka", "--lang", "cobol"]));
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr.contains("search.languages: unknown language `cobol`"),
        "{stderr}"
    );
}

#[test]
fn an_empty_query_is_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path();
    write(root, "src/lib.rs", "pub fn anything() {}\n");
    index(root);
    for q in ["", "   ", "\t\n"] {
        let (out, stderr) = run(cmd(root, &["search", q]));
        assert_eq!(out.status.code(), Some(1), "{q:?}: {stderr}");
        assert!(out.stdout.is_empty(), "{q:?}");
        assert!(
            stderr.contains("the search query is empty; say what to look for"),
            "{q:?}: {stderr}"
        );
    }
}

#[test]
fn unindexed_and_missing_workspaces_say_so_once_and_create_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    let repo = tmp.path().join("repo");
    std::fs::create_dir_all(repo.join("sub")).unwrap();
    let git = Command::new("git")
        .args(["init", "-q"])
        .current_dir(&repo)
        .status()
        .unwrap();
    assert!(git.success());
    write(&repo, "src/lib.rs", "pub fn anything() {}\n");
    for dir in [repo.clone(), repo.join("sub")] {
        let before: BTreeSet<_> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        let (out, stderr) = run(cmd(&dir, &["search", "anything"]));
        assert_eq!(out.status.code(), Some(1), "{stderr}");
        assert_eq!(
            stderr
                .matches("is not indexed yet; run `trellis index`")
                .count(),
            1,
            "{stderr}"
        );
        let after: BTreeSet<_> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(before, after, "{} gained entries", dir.display());
    }
    let missing = tmp.path().join("nonexistent");
    for a in [
        &["index"][..],
        &["index", "--no-embed"],
        &["search", "x"],
        &["map"],
    ] {
        let (out, stderr) = run(cmd(&missing, a));
        assert_eq!(out.status.code(), Some(1), "{a:?}: {stderr}");
        let message = format!("-C {}: no such directory", missing.display());
        assert_eq!(stderr.matches(&message).count(), 1, "{a:?}: {stderr}");
        assert_eq!(stderr.lines().count(), 1, "{a:?}: {stderr}");
        assert!(!missing.exists());
    }
}
