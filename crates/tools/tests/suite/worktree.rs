//! Run worktrees never touch the user's checkout.

use serde_json::json;
use trellis_protocol::RunId;
use trellis_tools::ToolsConfig;
use trellis_tools::worktree::RunWorktree;

use super::support::{Tools, auto, git, git_state, repo, snapshot};

/// A repository with staged, unstaged, deleted, untracked and ignored changes.
pub fn dirty_repo() -> tempfile::TempDir {
    let dir = repo(&[
        ("src/lib.rs", "pub fn a() {}\n"),
        ("README.md", "hello\n"),
        ("gone.txt", "bye\n"),
        (".gitignore", "target/\n"),
    ]);
    let p = dir.path();
    std::fs::write(p.join("src/lib.rs"), "pub fn a() {}\npub fn b() {}\n").unwrap();
    std::fs::write(p.join("README.md"), "hello\nstaged\n").unwrap();
    git(p, &["add", "README.md"]);
    std::fs::write(p.join("README.md"), "hello\nstaged\nunstaged\n").unwrap();
    std::fs::remove_file(p.join("gone.txt")).unwrap();
    std::fs::write(p.join("notes.txt"), "untracked\n").unwrap();
    std::fs::create_dir_all(p.join("target")).unwrap();
    std::fs::write(p.join("target/out"), "ignored\n").unwrap();
    dir
}

#[tokio::test]
async fn worktree_starts_from_the_working_state_and_never_alters_the_user_repo() {
    let dir = dirty_repo();
    let p = dir.path();
    let status = git(p, &["status", "--porcelain", "--untracked-files=all"]);
    let files = snapshot(p);
    let state = git_state(p);
    let branches = git(p, &["branch", "--list"]);

    let run = RunId::new();
    let wt = RunWorktree::create(p, &run).unwrap();
    assert!(
        wt.path
            .starts_with(p.canonicalize().unwrap().join(".trellis/worktrees"))
    );
    let w = &wt.path;
    assert_eq!(
        std::fs::read_to_string(w.join("src/lib.rs")).unwrap(),
        "pub fn a() {}\npub fn b() {}\n"
    );
    assert_eq!(
        std::fs::read_to_string(w.join("README.md")).unwrap(),
        "hello\nstaged\nunstaged\n"
    );
    assert_eq!(
        std::fs::read_to_string(w.join("notes.txt")).unwrap(),
        "untracked\n"
    );
    assert!(!w.join("gone.txt").exists());
    assert!(!w.join("target").exists(), "ignored files stay out");
    assert!(!w.join(".trellis").exists());
    // The base's parent is the user's HEAD.
    assert_eq!(
        git(p, &["rev-parse", &format!("{}^", wt.base)]),
        git(p, &["rev-parse", "HEAD"])
    );

    // The agent edits through the tools and commits.
    let t = Tools::new(w, ToolsConfig::default(), auto());
    let r = t.call("edit_file", json!({"path": "src/lib.rs", "old_string": "pub fn b() {}", "new_string": "pub fn b() -> u8 { 1 }"})).await;
    assert!(!r.is_error, "{}", r.content);
    let r = t
        .call(
            "shell",
            json!({"command": "echo new > added.txt && rm notes.txt"}),
        )
        .await;
    assert!(!r.is_error, "{}", r.content);
    let commit = wt.commit("implement", "edit lib").unwrap().unwrap();
    let msg = git(w, &["log", "-1", "--format=%B", &commit]);
    assert!(
        msg.contains(&format!("Trellis-Run: {run}")) && msg.contains("stage implement"),
        "{msg}"
    );
    assert_eq!(wt.commit("implement", "again").unwrap(), None);

    // The user's checkout is exactly as it was: files, status, index, config, HEAD.
    assert_eq!(snapshot(p), files);
    assert_eq!(
        git(p, &["status", "--porcelain", "--untracked-files=all"]),
        status
    );
    assert_eq!(git_state(p), state);
    let after = git(p, &["branch", "--list"]);
    assert_eq!(after.replace(&format!("+ {}\n", wt.branch), ""), branches);

    // Cleanup removes the worktree, then the branch.
    wt.remove().unwrap();
    assert!(!w.exists());
    assert!(wt.head().is_ok());
    wt.prune().unwrap();
    assert!(wt.head().is_err());
    assert_eq!(git(p, &["branch", "--list"]), branches);
    assert_eq!(
        git(p, &["status", "--porcelain", "--untracked-files=all"]),
        status
    );
}

#[test]
fn a_clean_repo_uses_head_as_base_and_an_unborn_repo_works() {
    let dir = repo(&[("a.txt", "a\n")]);
    let wt = RunWorktree::create(dir.path(), &RunId::new()).unwrap();
    assert_eq!(wt.base, git(dir.path(), &["rev-parse", "HEAD"]).trim());

    let empty = tempfile::tempdir().unwrap();
    git(empty.path(), &["init", "-q"]);
    std::fs::write(empty.path().join("x.txt"), "x\n").unwrap();
    let wt = RunWorktree::create(empty.path(), &RunId::new()).unwrap();
    assert_eq!(
        std::fs::read_to_string(wt.path.join("x.txt")).unwrap(),
        "x\n"
    );
    assert_eq!(git(empty.path(), &["status", "--porcelain"]), "?? x.txt\n");
}

/// Run branches through a remote: a second clone adopts the run at the remote's tip and
/// pushes on from it; the first clone, whose knowledge of the remote is now stale (it lost
/// the run), is refused and the remote keeps the second clone's work.
#[test]
fn a_run_branch_travels_through_the_remote_and_a_stale_clone_cannot_overwrite_it() {
    use trellis_tools::git::Git;
    use trellis_tools::worktree::remote::RepositoryConfig;

    let origin = repo(&[("a.txt", "one\n")]);
    let root = tempfile::tempdir().unwrap();
    let bare = root.path().join("remote.git");
    git(
        root.path(),
        &[
            "clone",
            "--quiet",
            "--bare",
            origin.path().to_str().unwrap(),
            "remote.git",
        ],
    );
    for name in ["b", "c"] {
        git(
            root.path(),
            &["clone", "--quiet", bare.to_str().unwrap(), name],
        );
    }
    let (b, c) = (root.path().join("b"), root.path().join("c"));
    let remote = RepositoryConfig {
        remote: Some(bare.to_string_lossy().into_owned()),
    }
    .remote()
    .unwrap();
    let run = RunId::new();
    let branch = RunWorktree::branch_for(&run);

    // Clone b creates and publishes the run's branch; the remote must not have had it.
    let wb = RunWorktree::create(&b, &run).unwrap();
    let first = remote.publish(&Git::new(&b), &run, None).unwrap();
    std::fs::write(wb.path.join("a.txt"), "two\n").unwrap();
    wb.commit("s1", "two").unwrap();
    // Expecting no branch on the remote where there is one: refused.
    assert!(remote.publish(&Git::new(&b), &run, None).is_err());

    // Clone c takes the run over from the remote's tip and pushes its own commit.
    let tip = remote.fetch(&Git::new(&c), &run).unwrap().unwrap();
    assert_eq!(tip, first);
    assert_eq!(remote.fetch(&Git::new(&c), &RunId::new()).unwrap(), None);
    let wc = RunWorktree::adopt(&c, &run, &wb.base, &tip).unwrap();
    std::fs::write(wc.path.join("a.txt"), "three\n").unwrap();
    let ours = wc.commit("s1", "three").unwrap().unwrap();
    assert_eq!(
        remote.publish(&Git::new(&c), &run, Some(&tip)).unwrap(),
        ours
    );

    // Clone b still thinks the remote is at `first`: refused, the remote keeps c's commit.
    let err = remote
        .publish(&Git::new(&b), &run, Some(&first))
        .unwrap_err()
        .to_string();
    assert!(err.contains("another process moved it"), "{err}");
    assert_eq!(git(&bare, &["rev-parse", &branch]).trim(), ours);

    // Adopting again where a stale worktree of the run exists resets it to the tip.
    std::fs::write(wb.path.join("junk.txt"), "left over\n").unwrap();
    assert_eq!(remote.fetch(&Git::new(&b), &run).unwrap().unwrap(), ours);
    let again = RunWorktree::adopt(&b, &run, &wb.base, &ours).unwrap();
    assert_eq!(
        std::fs::read_to_string(again.path.join("a.txt")).unwrap(),
        "three\n"
    );
    assert!(!again.path.join("junk.txt").exists());
}
