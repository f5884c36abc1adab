//! `trellis review` / `trellis undo` end to end through the binary, including SIGKILL
//! during an apply.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use rand::Rng;

use super::common::{args, json, ok, trellis};

use trellis_test_support::git;

fn repo(files: &[(String, String)]) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    git(dir.path(), &["init", "-q", "-b", "main"]);
    for (p, c) in files {
        std::fs::write(dir.path().join(p), c).unwrap();
    }
    git(dir.path(), &["add", "-A"]);
    git(dir.path(), &["commit", "-q", "-m", "init"]);
    dir
}

/// The working tree's files (without `.git` and `.trellis`).
fn files(root: &Path) -> BTreeMap<String, Vec<u8>> {
    std::fs::read_dir(root)
        .unwrap()
        .map(|e| e.unwrap())
        .filter(|e| e.file_type().unwrap().is_file())
        .map(|e| {
            (
                e.file_name().to_string_lossy().into_owned(),
                std::fs::read(e.path()).unwrap(),
            )
        })
        .collect()
}

/// Asserts two trees are equal, naming only the files that differ.
fn same(got: &BTreeMap<String, Vec<u8>>, want: &BTreeMap<String, Vec<u8>>, what: &str) {
    let differ: Vec<&String> = got
        .keys()
        .chain(want.keys())
        .filter(|k| got.get(*k) != want.get(*k))
        .collect();
    assert!(differ.is_empty(), "{what}: these files differ: {differ:?}");
}

fn new_run(repo: &Path) -> (String, std::path::PathBuf) {
    let v = json(args(trellis(repo), &["sandbox", "new", "--json"]));
    (
        v["run"].as_str().unwrap().to_owned(),
        v["worktree"].as_str().unwrap().into(),
    )
}

/// The interactive per-hunk prompts, answered through a pseudo-terminal (`script` from
/// util-linux gives the review a terminal; our answers go to it as typed lines).
#[test]
fn interactive_review_applies_exactly_the_hunks_answered_yes() {
    let lines: String = (1..=20).map(|i| format!("line {i}\n")).collect();
    let dir = repo(&[
        ("a.txt".into(), lines.clone()),
        ("b.txt".into(), "b\n".into()),
    ]);
    let p = dir.path();
    let (run, wt) = new_run(p);
    std::fs::write(
        wt.join("a.txt"),
        lines
            .replace("line 2\n", "line two\n")
            .replace("line 19\n", "line nineteen\n"),
    )
    .unwrap();
    std::fs::write(wt.join("b.txt"), "B\n").unwrap();
    ok(args(trellis(p), &["sandbox", "commit", &run]));

    let exe = env!("CARGO_BIN_EXE_trellis");
    let command = format!("{exe} -C {} review {run}", p.display());
    let mut child = Command::new("script")
        .args(["-qec", &command, "/dev/null"])
        .env("NO_COLOR", "1")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    {
        use std::io::Write;
        // a.txt: first hunk yes, second hunk no; b.txt: yes.
        let mut stdin = child.stdin.take().unwrap();
        stdin.write_all(b"y\nn\ny\n").unwrap();
    }
    let out = child.wait_with_output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text}");
    assert!(text.contains("Apply this hunk (1/2)"), "{text}");
    assert!(text.contains("applied run"), "{text}");
    let after = files(p);
    assert_eq!(
        String::from_utf8_lossy(&after["a.txt"]),
        lines.replace("line 2\n", "line two\n")
    );
    assert_eq!(after["b.txt"], b"B\n");
}

#[test]
fn review_select_undo_and_redo_through_the_cli() {
    let dir = repo(&[
        ("a.txt".into(), "1\n2\n3\n".into()),
        ("b.txt".into(), "b\n".into()),
    ]);
    let p = dir.path();
    std::fs::write(p.join("wip.txt"), "user's untracked work\n").unwrap();
    let before = files(p);
    let (run, _) = new_run(p);
    let tool = |name: &str, a: &str| ok(args(trellis(p), &["sandbox", "tool", &run, name, a]));
    assert!(
        tool(
            "edit_file",
            r#"{"path":"a.txt","old_string":"2\n","new_string":"two\n"}"#
        )
        .contains("edited")
    );
    tool("write_file", r#"{"path":"b.txt","content":"B\n"}"#);
    tool("shell", r#"{"command":"cat wip.txt > copy.txt"}"#);
    ok(args(
        trellis(p),
        &["sandbox", "commit", &run, "--stage", "implement"],
    ));
    assert_eq!(files(p), before, "nothing reaches the user before approval");

    let set = json(args(trellis(p), &["review", &run, "--json"]));
    let paths: Vec<&str> = set["files"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["path"].as_str().unwrap())
        .collect();
    assert_eq!(paths, ["a.txt", "b.txt", "copy.txt"]);

    let out = ok(args(
        trellis(p),
        &[
            "review", &run, "--select", "a.txt:0", "--select", "copy.txt",
        ],
    ));
    assert!(out.contains("applied run"), "{out}");
    let after = files(p);
    assert_eq!(after["a.txt"], b"1\ntwo\n3\n");
    assert_eq!(after["b.txt"], b"b\n");
    assert_eq!(after["copy.txt"], b"user's untracked work\n");

    ok(args(trellis(p), &["undo", &run]));
    assert_eq!(files(p), before);
    let redo = json(args(trellis(p), &["undo", &run, "--json"]));
    assert_eq!(redo["kind"], "redo");
    assert_eq!(files(p), after);

    // The store recorded the tool calls and the review.
    let db = p.join(".trellis/trellis.db");
    let store = trellis_store::Store::open(&db, Default::default()).unwrap();
    let rec = store.change_set(&run).unwrap();
    assert_eq!(rec.state, "applied");
    assert!(rec.review.unwrap().contains("\"partial\":true"));
    assert_eq!(store.tool_calls(&rec.run_id).unwrap().len(), 3);
    assert_eq!(store.change_ops(&rec.run_id).unwrap().len(), 3);
}

#[test]
fn sigkill_during_apply_leaves_before_or_after_and_a_rerun_completes() {
    const FILES: usize = 100;
    let originals: Vec<(String, String)> = (0..FILES)
        .map(|i| (format!("f{i:03}.txt"), format!("file {i}\n").repeat(200)))
        .collect();
    let mut rng = rand::rng();
    let mut full_ms = 0u64;
    let mut outcomes: BTreeMap<&str, usize> = BTreeMap::new();
    for iteration in 0..9 {
        let dir = repo(&originals);
        let p = dir.path();
        let (run, wt) = new_run(p);
        for (name, content) in &originals {
            std::fs::write(wt.join(name), content.replace("file", "FILE")).unwrap();
        }
        std::fs::remove_file(wt.join("f000.txt")).unwrap();
        std::fs::write(wt.join("zz-new.txt"), "new\n").unwrap();
        ok(args(trellis(p), &["sandbox", "commit", &run]));
        let before = files(p);
        let mut after = before.clone();
        for (name, content) in &originals {
            after.insert(name.clone(), content.replace("file", "FILE").into_bytes());
        }
        after.remove("f000.txt");
        after.insert("zz-new.txt".into(), b"new\n".to_vec());

        let mut child = args(trellis(p), &["review", &run, "--approve-all"])
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        let started = Instant::now();
        if iteration == 0 {
            // The reference: an uninterrupted apply, to time the kill window.
            assert!(child.wait().unwrap().success());
            full_ms = started.elapsed().as_millis() as u64;
            same(&files(p), &after, "uninterrupted apply");
            continue;
        }
        // Half the kills anywhere, half late, where the files are being replaced (most
        // of the command's time goes to reading the change set first).
        let delay = if iteration % 2 == 0 {
            rng.random_range(0..full_ms.max(2))
        } else {
            rng.random_range(full_ms * 6 / 10..full_ms.max(2) * 11 / 10)
        };
        std::thread::sleep(Duration::from_millis(delay));
        let _ = child.kill();
        let status = child.wait().unwrap();

        let mid = files(p);
        // No file is ever torn: each is exactly its before or its after version.
        for name in before.keys().chain(after.keys()) {
            let m = mid.get(name);
            assert!(
                m == before.get(name) || m == after.get(name),
                "iteration {iteration}: {name} is neither before nor after"
            );
        }
        let pending = std::fs::read_dir(p.join(".trellis/changes"))
            .map(|rd| {
                rd.flatten().any(|run_dir| {
                    std::fs::read_dir(run_dir.path())
                        .unwrap()
                        .flatten()
                        .any(|op| {
                            op.path().join("manifest.json").exists()
                                && !op.path().join("done").exists()
                        })
                })
            })
            .unwrap_or(false);
        let kind = if mid == before {
            "before"
        } else if mid == after {
            "after"
        } else {
            assert!(
                pending,
                "iteration {iteration}: a mixed tree without a committed journal"
            );
            "mixed, journal committed"
        };
        *outcomes
            .entry(if status.success() { "completed" } else { kind })
            .or_default() += 1;

        // Rerunning completes it (or finds it already applied after recovery).
        let out = trellis(p)
            .args(["review", &run, "--approve-all"])
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            out.status.success() || stderr.contains("already applied"),
            "{stderr}"
        );
        same(
            &files(p),
            &after,
            &format!("iteration {iteration}: after the rerun"),
        );
        // And undo restores the original tree exactly.
        ok(args(trellis(p), &["undo", &run]));
        same(
            &files(p),
            &before,
            &format!("iteration {iteration}: after undo"),
        );
    }
    eprintln!("apply of {FILES} files took {full_ms} ms; kill outcomes: {outcomes:?}");
}
