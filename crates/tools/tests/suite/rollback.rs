//! Worktree snapshots and rollback (pruning a running agent).

use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use trellis_protocol::RunId;
use trellis_tools::worktree::RunWorktree;

use super::support::{git, repo, snapshot};

/// A run worktree with tracked, untracked, executable, symlinked, CRLF-under-`text=auto`
/// and ignored files, plus uncommitted edits of the agents before this one.
fn worktree() -> (tempfile::TempDir, RunWorktree) {
    let dir = repo(&[
        ("src/lib.rs", "pub fn a() {}\n"),
        ("run.sh", "#!/bin/sh\necho hi\n"),
        ("plain.sh", "echo plain\n"),
        ("docs/guide.md", "# Guide\n"),
        ("crlf.txt", "one\ntwo\n"),
        (".gitattributes", "* text=auto\n"),
        (".gitignore", "target/\n*.log\n"),
    ]);
    let wt = RunWorktree::create(dir.path(), &RunId::new()).unwrap();
    let w = &wt.path;
    chmod(&w.join("run.sh"), 0o755);
    // Bytes that `text=auto` would convert if anything applied attributes.
    std::fs::write(w.join("crlf.txt"), "one\r\ntwo\r\n").unwrap();
    std::fs::write(w.join("src/lib.rs"), "pub fn a() {}\npub fn earlier() {}\n").unwrap();
    std::fs::write(w.join("untracked.txt"), "from an earlier stage\n").unwrap();
    std::os::unix::fs::symlink("docs/guide.md", w.join("guide-link")).unwrap();
    std::fs::create_dir_all(w.join("target")).unwrap();
    std::fs::write(w.join("target/build.out"), "ignored before\n").unwrap();
    (dir, wt)
}

fn chmod(path: &Path, mode: u32) {
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
}

/// What an agent might do: edit, create (also in new directories), delete, chmod both
/// ways, retarget a symlink, replace a file by a directory, touch ignored files, commit.
fn agent_works(w: &Path) {
    std::fs::write(w.join("src/lib.rs"), "pub fn rewritten() {}\n").unwrap();
    std::fs::write(w.join("crlf.txt"), "one\ntwo\nthree\n").unwrap();
    std::fs::create_dir_all(w.join("new/deeper")).unwrap();
    std::fs::write(w.join("new/deeper/file.rs"), "// new\n").unwrap();
    std::fs::write(w.join("created.txt"), "created\n").unwrap();
    std::fs::remove_file(w.join("docs/guide.md")).unwrap();
    std::fs::remove_file(w.join("untracked.txt")).unwrap();
    chmod(&w.join("run.sh"), 0o644);
    chmod(&w.join("plain.sh"), 0o755);
    std::fs::remove_file(w.join("guide-link")).unwrap();
    std::os::unix::fs::symlink("src/lib.rs", w.join("guide-link")).unwrap();
    std::fs::write(w.join("target/build.out"), "ignored after\n").unwrap();
    std::fs::write(w.join("agent.log"), "ignored log\n").unwrap();
}

fn status_without_crlf_text(status: &str) -> String {
    status
        .lines()
        .filter(|l| !l.ends_with(" crlf.txt"))
        .collect::<Vec<_>>()
        .join("\n")
}

fn status_without_crlf(w: &Path) -> String {
    status_without_crlf_text(&git(w, &["status", "--porcelain", "--untracked-files=all"]))
}

#[test]
fn restore_brings_back_the_worktree_byte_for_byte_and_undoes_commits() {
    let (_dir, wt) = worktree();
    let w = wt.path.clone();
    let before = snapshot(&w);
    let status = git(&w, &["status", "--porcelain", "--untracked-files=all"]);
    assert!(status.contains(" M run.sh") && status.contains("?? untracked.txt"));
    let index_file = git(
        &w,
        &["rev-parse", "--path-format=absolute", "--git-path", "index"],
    );
    let index_file = Path::new(index_file.trim());
    let index = std::fs::read(index_file).unwrap();

    let snap = wt.snapshot().unwrap();
    // Taking a snapshot changed nothing: files, status (so the index too).
    assert_eq!(snapshot(&w), before);
    assert_eq!(
        git(&w, &["status", "--porcelain", "--untracked-files=all"]),
        status
    );
    assert_eq!(std::fs::read(index_file).unwrap(), index);

    agent_works(&w);
    let commit = wt.commit("implement", "agent work").unwrap().unwrap();
    std::fs::write(w.join("after-commit.txt"), "more\n").unwrap();
    assert_eq!(wt.head().unwrap(), commit);
    assert_ne!(snapshot(&w), before);

    let restored = wt.restore(&snap, None).unwrap();
    assert_eq!(
        restored,
        [
            "after-commit.txt",
            "created.txt",
            "crlf.txt",
            "docs/guide.md",
            "guide-link",
            "new/deeper/file.rs",
            "plain.sh",
            "run.sh",
            "src/lib.rs",
            "untracked.txt",
        ]
    );
    // The branch is back, the commit is off it, and the files are as they were, except the
    // ignored ones, which rollback never touches.
    assert_eq!(wt.head().unwrap(), snap.head);
    let mut after = snapshot(&w);
    assert_eq!(
        after.remove("target/build.out").unwrap().0,
        b"ignored after\n"
    );
    assert_eq!(after.remove("agent.log").unwrap().0, b"ignored log\n");
    let mut expected = before.clone();
    expected.remove("target/build.out");
    assert_eq!(after, expected);
    assert_eq!(
        std::fs::read(w.join("crlf.txt")).unwrap(),
        b"one\r\ntwo\r\n",
        "no end-of-line conversion"
    );
    // The index is back too. (crlf.txt aside: whether git's status lists a CRLF file under
    // `text=auto` depends on its stat cache's timing, not on the file.)
    assert_eq!(status_without_crlf(&w), status_without_crlf_text(&status));
    // Restoring again finds nothing to do.
    assert!(wt.restore(&snap, None).unwrap().is_empty());
    // Trellis's private snapshot index goes with the worktree; nothing else is left behind.
    let scratch = wt.repo.join(".trellis/tmp");
    let names = || -> Vec<String> {
        std::fs::read_dir(&scratch)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect()
    };
    assert_eq!(names(), [format!("snapshot-index-{}", wt.run)]);
    wt.remove().unwrap();
    assert!(names().is_empty(), "{:?}", names());
}

#[test]
fn restore_of_some_paths_leaves_the_others_alone() {
    let (_dir, wt) = worktree();
    let w = wt.path.clone();
    let before = snapshot(&w);
    let snap = wt.snapshot().unwrap();
    agent_works(&w);
    let sibling = snapshot(&w);

    let restored = wt
        .restore(
            &snap,
            Some(&[
                "src/lib.rs".to_owned(),
                "new/".to_owned(),
                "run.sh".to_owned(),
            ]),
        )
        .unwrap();
    assert_eq!(restored, ["new/deeper/file.rs", "run.sh", "src/lib.rs"]);
    let after = snapshot(&w);
    for path in ["src/lib.rs", "run.sh"] {
        assert_eq!(after[path], before[path], "{path} restored");
    }
    assert!(!w.join("new").exists(), "directories it created are gone");
    for (path, value) in &sibling {
        if !path.starts_with("src/") && !path.starts_with("new/") && path != "run.sh" {
            assert_eq!(after.get(path), Some(value), "{path} untouched");
        }
    }
}

#[test]
fn restore_refuses_when_the_branch_no_longer_contains_the_snapshot() {
    let (_dir, wt) = worktree();
    let w = wt.path.clone();
    std::fs::write(w.join("x.txt"), "x\n").unwrap();
    wt.commit("a", "x").unwrap().unwrap();
    let snap = wt.snapshot().unwrap();
    // History rewritten below the snapshot: its commit is no longer on the branch.
    git(&w, &["reset", "-q", "--hard", "HEAD~1"]);
    std::fs::write(w.join("y.txt"), "y\n").unwrap();
    let moved = wt.commit("b", "y").unwrap().unwrap();
    let before = snapshot(&w);

    let err = wt.restore(&snap, None).unwrap_err().to_string();
    assert!(
        err.contains("does not contain the snapshot's commit") && err.contains(&wt.branch),
        "{err}"
    );
    assert_eq!(wt.head().unwrap(), moved);
    assert_eq!(snapshot(&w), before, "nothing changed");
}
