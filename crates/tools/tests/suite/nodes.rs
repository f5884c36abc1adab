//! Node worktrees: a worktree and branch per agent node, merges, conflicts, pruning,
//! forks, cleanup and the sweep, on real repositories.

use std::path::Path;

use trellis_protocol::RunId;
use trellis_tools::Error;
use trellis_tools::worktree::RunWorktree;
use trellis_tools::worktree::nodes::{
    MergeKind, MergeOutcome, MergeRecord, NodeWorktree, NodeWorktrees, PendingMerge, Undo, sweep,
};

use super::support::{git, repo};

/// A repository, a run worktree and the run's node worktrees.
fn run() -> (tempfile::TempDir, RunWorktree, NodeWorktrees) {
    let dir = repo(&[
        ("shared.txt", "one\ntwo\nthree\n"),
        ("src/lib.rs", "pub fn a() {}\n"),
    ]);
    let wt = RunWorktree::create(dir.path(), &RunId::new()).unwrap();
    let nodes = NodeWorktrees::open(dir.path(), &wt.run).unwrap();
    (dir, wt, nodes)
}

/// Writes `text` to `file` in the node's worktree and commits it.
fn edit(node: &NodeWorktree, file: &str, text: &str) -> String {
    let path = node.path.join(file);
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, text).unwrap();
    node.commit(&format!("edit {file}")).unwrap().unwrap()
}

/// `file` at the tip of `branch`, or `None` when it is not there.
fn show(repo: &Path, branch: &str, file: &str) -> Option<String> {
    let out = std::process::Command::new("git")
        .current_dir(repo)
        .args(["show", &format!("refs/heads/{branch}:{file}")])
        .output()
        .unwrap();
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).into_owned())
}

fn tip(repo: &Path, branch: &str) -> String {
    git(repo, &["rev-parse", &format!("refs/heads/{branch}")])
        .trim()
        .to_owned()
}

fn branch_exists(repo: &Path, branch: &str) -> bool {
    !git(repo, &["for-each-ref", &format!("refs/heads/{branch}")])
        .trim()
        .is_empty()
}

/// The worktrees git knows of.
fn worktree_list(repo: &Path) -> String {
    git(repo, &["worktree", "list", "--porcelain"])
}

fn merged(outcome: MergeOutcome) -> MergeRecord {
    match outcome {
        MergeOutcome::Merged(rec) => rec,
        other => panic!("expected a merge, got {other:?}"),
    }
}

/// Two nodes changing different files (T1 `a.txt` and a line of `shared.txt`, T2
/// `b.txt`), both merged into `target`: T1 fast-forwarded, T2 by a merge commit.
fn both_merged(
    nodes: &NodeWorktrees,
    target: &str,
) -> (NodeWorktree, NodeWorktree, MergeRecord, MergeRecord) {
    let t1 = nodes.create("tickets/T1", target).unwrap();
    let t2 = nodes.create("tickets/T2", target).unwrap();
    edit(&t1, "a.txt", "T1\n");
    edit(&t1, "shared.txt", "one\ntwo by T1\nthree\n");
    edit(&t2, "b.txt", "T2\n");
    let m1 = merged(nodes.merge("tickets/T1", target, "m").unwrap());
    assert_eq!(m1.kind, MergeKind::FastForward);
    let m2 = merged(nodes.merge("tickets/T2", target, "m").unwrap());
    assert_eq!(m2.kind, MergeKind::MergeCommit);
    (t1, t2, m1, m2)
}

/// Two nodes changing the same line of `shared.txt`, T1 merged into `target`, T2 not.
fn rivals(nodes: &NodeWorktrees, target: &str) -> (NodeWorktree, NodeWorktree) {
    let t1 = nodes.create("tickets/T1", target).unwrap();
    let t2 = nodes.create("tickets/T2", target).unwrap();
    edit(&t1, "shared.txt", "one\nT1\nthree\n");
    edit(&t2, "shared.txt", "one\nT2\nthree\n");
    merged(nodes.merge("tickets/T1", target, "m").unwrap());
    (t1, t2)
}

/// The merge of `node` into `target`, which must conflict.
fn conflict(nodes: &NodeWorktrees, node: &str, target: &str, strategy: &str) -> PendingMerge {
    match nodes.merge(node, target, strategy).unwrap() {
        MergeOutcome::Conflict(pending) => pending,
        other => panic!("expected a conflict, got {other:?}"),
    }
}

#[test]
fn parallel_nodes_editing_different_files_both_merge() {
    let (dir, wt, nodes) = run();
    let repo = nodes.repo().to_owned();
    let t1 = nodes.create("tickets/T1", &wt.branch).unwrap();
    let t2 = nodes.create("tickets/T2", &wt.branch).unwrap();
    assert_ne!(t1.path, t2.path);
    assert_eq!(t1.base, wt.base);
    assert!(t1.path.starts_with(repo.join(".trellis/nodes")));
    edit(&t1, "a.txt", "from T1\n");
    edit(&t2, "b.txt", "from T2\n");
    // Each node sees only its own work.
    assert!(!t1.path.join("b.txt").exists());
    assert!(!t2.path.join("a.txt").exists());

    let first = merged(
        nodes
            .merge("tickets/T1", &wt.branch, "ticket merge")
            .unwrap(),
    );
    assert_eq!(first.kind, MergeKind::FastForward);
    assert_eq!(first.before, wt.base);
    assert_eq!(first.after, t1.head().unwrap());
    let second = merged(
        nodes
            .merge("tickets/T2", &wt.branch, "ticket merge")
            .unwrap(),
    );
    assert_eq!(second.kind, MergeKind::MergeCommit);
    assert_eq!(second.before, first.after);
    assert_eq!(tip(&repo, &wt.branch), second.after);
    let message = git(&repo, &["log", "-1", "--format=%B", &second.after]);
    assert!(message.contains("Trellis-Node: tickets/T2"), "{message}");
    assert!(
        message.contains("Trellis-Merge-Strategy: ticket merge"),
        "{message}"
    );
    let parents = git(&repo, &["rev-list", "--parents", "-n1", &second.after]);
    assert_eq!(parents.split_whitespace().count(), 3, "a merge commit");

    assert_eq!(show(&repo, &wt.branch, "a.txt").unwrap(), "from T1\n");
    assert_eq!(show(&repo, &wt.branch, "b.txt").unwrap(), "from T2\n");
    // The run's worktree (where the run branch is checked out) follows, and is clean.
    assert_eq!(
        std::fs::read_to_string(wt.path.join("b.txt")).unwrap(),
        "from T2\n"
    );
    assert_eq!(git(&wt.path, &["status", "--porcelain"]), "");
    // Merging again changes nothing.
    assert_eq!(
        nodes.merge("tickets/T2", &wt.branch, "again").unwrap(),
        MergeOutcome::UpToDate
    );
    assert_eq!(nodes.merges("tickets/T2").unwrap(), vec![second]);
    // The user's checkout never changed.
    assert_eq!(git(dir.path(), &["status", "--porcelain"]), "");
}

#[test]
fn children_merge_into_their_stage_then_the_stage_into_the_run() {
    let (_dir, wt, nodes) = run();
    let repo = nodes.repo().to_owned();
    let stage = nodes.create("stage:implement", &wt.branch).unwrap();
    let a = nodes.create("stage:implement/a", &stage.branch).unwrap();
    let b = nodes.create("stage:implement/b", &stage.branch).unwrap();
    assert_eq!(a.parent, stage.branch);
    edit(&a, "a.txt", "a\n");
    edit(&b, "b.txt", "b\n");
    merged(
        nodes
            .merge("stage:implement/a", &stage.branch, "stage")
            .unwrap(),
    );
    merged(
        nodes
            .merge("stage:implement/b", &stage.branch, "stage")
            .unwrap(),
    );
    // The stage's branch is checked out in the stage's worktree: its files follow.
    assert_eq!(
        std::fs::read_to_string(stage.path.join("b.txt")).unwrap(),
        "b\n"
    );
    assert_eq!(git(&stage.path, &["status", "--porcelain"]), "");
    let rec = merged(nodes.merge("stage:implement", &wt.branch, "run").unwrap());
    assert_eq!(rec.kind, MergeKind::FastForward);
    assert_eq!(show(&repo, &wt.branch, "a.txt").unwrap(), "a\n");
    assert_eq!(show(&repo, &wt.branch, "b.txt").unwrap(), "b\n");
}

#[test]
fn conflicting_nodes_report_the_files_and_a_resolution_completes_the_merge() {
    let (_dir, wt, nodes) = run();
    let repo = nodes.repo().to_owned();
    let (_t1, t2) = rivals(&nodes, &wt.branch);
    edit(&t2, "src/extra.rs", "// T2 only\n");
    let target = tip(&repo, &wt.branch);

    let pending = conflict(&nodes, "tickets/T2", &wt.branch, "ours");
    assert_eq!(pending.files, vec!["shared.txt".to_owned()]);
    assert_eq!(pending.before, target);
    // The target is untouched: branch, run worktree files, status.
    assert_eq!(tip(&repo, &wt.branch), target);
    assert_eq!(
        std::fs::read_to_string(wt.path.join("shared.txt")).unwrap(),
        "one\nT1\nthree\n"
    );
    assert_eq!(git(&wt.path, &["status", "--porcelain"]), "");
    // The merge worktree holds the markers for a merge agent.
    let marked = std::fs::read_to_string(pending.path.join("shared.txt")).unwrap();
    assert!(
        marked.contains("<<<<<<<") && marked.contains("T2"),
        "{marked}"
    );
    assert_eq!(nodes.pending("tickets/T2").unwrap(), Some(pending.clone()));
    // A second merge of the node is refused while this one waits.
    assert!(nodes.merge("tickets/T2", &wt.branch, "again").is_err());

    // Markers left: refused, nothing changes.
    let err = nodes.complete_merge("tickets/T2", "kept both").unwrap_err();
    assert!(
        matches!(&err, Error::Conflict(m) if m.contains("shared.txt")),
        "{err}"
    );
    assert_eq!(tip(&repo, &wt.branch), target);

    std::fs::write(pending.path.join("shared.txt"), "one\nT1 and T2\nthree\n").unwrap();
    let rec = nodes.complete_merge("tickets/T2", "kept both").unwrap();
    assert_eq!(rec.kind, MergeKind::MergeCommit);
    assert_eq!(rec.before, target);
    assert_eq!(tip(&repo, &wt.branch), rec.after);
    assert_eq!(
        show(&repo, &wt.branch, "shared.txt").unwrap(),
        "one\nT1 and T2\nthree\n"
    );
    assert_eq!(
        show(&repo, &wt.branch, "src/extra.rs").unwrap(),
        "// T2 only\n"
    );
    let message = git(&repo, &["log", "-1", "--format=%B", &rec.after]);
    assert!(
        message.contains("Trellis-Merge-Strategy: ours")
            && message.contains("Trellis-Conflicts: shared.txt")
            && message.contains("Trellis-Resolution: kept both"),
        "{message}"
    );
    let parents = git(&repo, &["rev-list", "--parents", "-n1", &rec.after]);
    assert!(parents.contains(&t2.head().unwrap()), "{parents}");
    assert_eq!(
        std::fs::read_to_string(wt.path.join("shared.txt")).unwrap(),
        "one\nT1 and T2\nthree\n"
    );
    assert!(!pending.path.exists());
    assert!(!worktree_list(&repo).contains(&*pending.path.to_string_lossy()));
    assert_eq!(nodes.pending("tickets/T2").unwrap(), None);
    assert_eq!(nodes.merges("tickets/T2").unwrap(), vec![rec]);
}

#[test]
fn aborting_a_conflicted_merge_restores_everything() {
    let (_dir, wt, nodes) = run();
    let repo = nodes.repo().to_owned();
    let (_t1, t2) = rivals(&nodes, &wt.branch);
    let target = tip(&repo, &wt.branch);
    let journal =
        std::fs::read(repo.join(format!(".trellis/nodes/{}/journal.json", wt.run))).unwrap();
    let pending = conflict(&nodes, "tickets/T2", &wt.branch, "m");
    assert!(nodes.abort_merge("tickets/T2").unwrap());
    assert!(!nodes.abort_merge("tickets/T2").unwrap(), "nothing left");
    assert!(!pending.path.exists());
    assert!(!worktree_list(&repo).contains(&*pending.path.to_string_lossy()));
    assert_eq!(tip(&repo, &wt.branch), target);
    assert_eq!(git(&wt.path, &["status", "--porcelain"]), "");
    assert_eq!(
        std::fs::read(repo.join(format!(".trellis/nodes/{}/journal.json", wt.run))).unwrap(),
        journal,
        "the journal is as before the merge"
    );
    assert!(nodes.merges("tickets/T2").unwrap().is_empty());
    // The node can merge again later (after it fixed its work, say).
    edit(&t2, "shared.txt", "one\nT1\nthree\nT2 after\n");
    let rec = merged(nodes.merge("tickets/T2", &wt.branch, "m").unwrap());
    assert_eq!(
        show(&repo, &wt.branch, "shared.txt").unwrap(),
        "one\nT1\nthree\nT2 after\n"
    );
    assert_eq!(rec.before, target);
}

#[test]
fn prune_before_merge_leaves_no_branch_or_worktree() {
    let (_dir, wt, nodes) = run();
    let repo = nodes.repo().to_owned();
    let t1 = nodes.create("tickets/T1", &wt.branch).unwrap();
    let t2 = nodes.create("tickets/T2", &wt.branch).unwrap();
    edit(&t1, "a.txt", "T1\n");
    std::fs::write(t1.path.join("uncommitted.txt"), "half-done\n").unwrap();
    let before = tip(&repo, &wt.branch);

    let report = nodes.prune("tickets/T1").unwrap();
    assert!(report.known);
    assert!(report.undone.is_empty());
    assert!(!t1.path.exists());
    assert!(!branch_exists(&repo, &t1.branch));
    assert!(!worktree_list(&repo).contains(&*t1.path.to_string_lossy()));
    assert_eq!(tip(&repo, &wt.branch), before);
    assert_eq!(nodes.get("tickets/T1").unwrap(), None);
    assert_eq!(nodes.list().unwrap(), vec![t2.clone()]);
    assert!(t2.path.exists() && branch_exists(&repo, &t2.branch));
    // Pruning again is harmless.
    assert!(!nodes.prune("tickets/T1").unwrap().known);
}

#[test]
fn prune_after_merge_reverts_exactly_that_nodes_change() {
    let (_dir, wt, nodes) = run();
    let repo = nodes.repo().to_owned();
    let (t1, t2, m1, m2) = both_merged(&nodes, &wt.branch);

    // T2's merge was built on T1's: T1's commits are reverted, T2's change stays.
    let report = nodes.prune("tickets/T1").unwrap();
    let [(rec, Undo::Revert(revert))] = report.undone.as_slice() else {
        panic!("expected one revert: {report:?}");
    };
    assert_eq!(rec, &m1);
    assert_eq!(tip(&repo, &wt.branch), *revert);
    let parent = git(&repo, &["rev-parse", &format!("{revert}^")]);
    assert_eq!(parent.trim(), m2.after, "a commit on top, history kept");
    assert_eq!(show(&repo, &wt.branch, "a.txt"), None);
    assert_eq!(
        show(&repo, &wt.branch, "shared.txt").unwrap(),
        "one\ntwo\nthree\n"
    );
    assert_eq!(show(&repo, &wt.branch, "b.txt").unwrap(), "T2\n");
    let diff = git(&repo, &["diff", "--name-only", &wt.base, &wt.branch]);
    assert_eq!(diff.trim(), "b.txt", "only T2's change is left");
    assert!(!wt.path.join("a.txt").exists(), "the run worktree follows");
    assert_eq!(git(&wt.path, &["status", "--porcelain"]), "");
    assert!(!branch_exists(&repo, &t1.branch) && !t1.path.exists());
    let message = git(&repo, &["log", "-1", "--format=%B", revert]);
    assert!(message.contains("Trellis-Node: tickets/T1"), "{message}");
    // T2 is untouched and still recorded.
    assert_eq!(nodes.merges("tickets/T2").unwrap(), vec![m2]);
    assert!(t2.path.exists());
}

#[test]
fn prune_of_the_last_merge_resets_the_target() {
    let (_dir, wt, nodes) = run();
    let repo = nodes.repo().to_owned();
    let (_t1, t2, m1, m2) = both_merged(&nodes, &wt.branch);

    let report = nodes.prune("tickets/T2").unwrap();
    assert_eq!(report.undone, vec![(m2, Undo::Reset)]);
    assert_eq!(tip(&repo, &wt.branch), m1.after, "nothing was built on it");
    assert_eq!(show(&repo, &wt.branch, "b.txt"), None);
    assert_eq!(show(&repo, &wt.branch, "a.txt").unwrap(), "T1\n");
    assert!(!wt.path.join("b.txt").exists());
    assert_eq!(git(&wt.path, &["status", "--porcelain"]), "");
    assert!(!branch_exists(&repo, &t2.branch));
}

#[test]
fn a_revert_that_conflicts_with_later_work_changes_nothing() {
    let (_dir, wt, nodes) = run();
    let repo = nodes.repo().to_owned();
    let t1 = nodes.create("tickets/T1", &wt.branch).unwrap();
    edit(&t1, "shared.txt", "one\nT1\nthree\n");
    merged(nodes.merge("tickets/T1", &wt.branch, "m").unwrap());
    // A later node, created after the merge, rewrites T1's line.
    let t2 = nodes.create("tickets/T2", &wt.branch).unwrap();
    edit(&t2, "shared.txt", "one\nT2 on top of T1\nthree\n");
    merged(nodes.merge("tickets/T2", &wt.branch, "m").unwrap());
    let target = tip(&repo, &wt.branch);

    let err = nodes.prune("tickets/T1").unwrap_err();
    assert!(
        matches!(&err, Error::Conflict(m) if m.contains("shared.txt")),
        "{err}"
    );
    assert_eq!(tip(&repo, &wt.branch), target);
    assert!(
        t1.path.exists() && branch_exists(&repo, &t1.branch),
        "retry possible"
    );
    assert_eq!(nodes.merges("tickets/T1").unwrap().len(), 1);
    // Once the later node is pruned, the prune goes through.
    nodes.prune("tickets/T2").unwrap();
    let report = nodes.prune("tickets/T1").unwrap();
    assert_eq!(report.undone.len(), 1);
    assert_eq!(tip(&repo, &wt.branch), wt.base);
}

#[test]
fn node_ids_with_slashes_and_colons_get_distinct_safe_names() {
    let (_dir, wt, nodes) = run();
    let repo = nodes.repo().to_owned();
    let ids = [
        "tickets",
        "tickets/T1",
        "tickets:T1",
        "tickets/T1/rev:2",
        "stage:collect",
        "../escape",
        "a.lock",
    ];
    let mut made = Vec::new();
    for (i, id) in ids.iter().enumerate() {
        let node = nodes.create(id, &wt.branch).unwrap();
        assert!(!node.branch.contains(':'), "{}", node.branch);
        assert!(
            node.path
                .starts_with(repo.join(format!(".trellis/nodes/{}/work", wt.run))),
            "{}",
            node.path.display()
        );
        assert_eq!(node.path.parent().unwrap().file_name().unwrap(), "work");
        edit(&node, &format!("f{i}.txt"), id);
        made.push(node);
    }
    let mut branches: Vec<&str> = made.iter().map(|n| n.branch.as_str()).collect();
    branches.sort();
    branches.dedup();
    assert_eq!(branches.len(), ids.len());
    for id in ids {
        assert_eq!(nodes.get(id).unwrap().unwrap().node, id);
        merged(nodes.merge(id, &wt.branch, "m").unwrap());
    }
    for (i, id) in ids.iter().enumerate() {
        assert_eq!(show(&repo, &wt.branch, &format!("f{i}.txt")).unwrap(), *id);
    }
    assert!(nodes.create("tickets/T1", &wt.branch).is_err(), "exists");
    nodes.prune("tickets/T1").unwrap();
    assert_eq!(show(&repo, &wt.branch, "f1.txt"), None);
    assert_eq!(show(&repo, &wt.branch, "f2.txt").unwrap(), "tickets:T1");
}

#[test]
fn eight_node_worktrees_created_concurrently() {
    let (_dir, wt, nodes) = run();
    let repo = nodes.repo().to_owned();
    let handles: Vec<_> = (0..8)
        .map(|i| {
            let nodes = nodes.clone();
            let parent = wt.branch.clone();
            std::thread::spawn(move || nodes.create(&format!("tickets/T{i}"), &parent))
        })
        .collect();
    let made: Vec<NodeWorktree> = handles
        .into_iter()
        .map(|h| h.join().unwrap().unwrap())
        .collect();
    assert_eq!(nodes.list().unwrap().len(), 8, "every creation journaled");
    for node in &made {
        assert_eq!(
            std::fs::read_to_string(node.path.join("shared.txt")).unwrap(),
            "one\ntwo\nthree\n"
        );
        assert_eq!(git(&node.path, &["status", "--porcelain"]), "");
    }
    // Git's bookkeeping is intact: every worktree listed, none broken.
    let list = worktree_list(&repo);
    assert_eq!(list.matches("worktree ").count(), 10, "{list}");
    assert!(!list.contains("prunable"), "{list}");
    git(&repo, &["worktree", "prune"]);
    assert_eq!(worktree_list(&repo), list);
    // And concurrent work in them merges.
    let handles: Vec<_> = made
        .into_iter()
        .enumerate()
        .map(|(i, node)| {
            let nodes = nodes.clone();
            let target = wt.branch.clone();
            std::thread::spawn(move || {
                edit(&node, &format!("t{i}.txt"), "x\n");
                nodes.merge(&node.node, &target, "parallel").unwrap()
            })
        })
        .collect();
    for h in handles {
        merged(h.join().unwrap());
    }
    for i in 0..8 {
        assert!(show(&repo, &wt.branch, &format!("t{i}.txt")).is_some());
    }
}

#[test]
fn a_fork_gets_its_own_branches_at_the_given_commits() {
    let (_dir, wt, nodes) = run();
    let repo = nodes.repo().to_owned();
    let t1 = nodes.create("tickets/T1", &wt.branch).unwrap();
    let first = edit(&t1, "a.txt", "first\n");
    let m = merged(nodes.merge("tickets/T1", &wt.branch, "m").unwrap());
    edit(&t1, "a.txt", "second\n");
    let checkpoint = tip(&repo, &wt.branch);

    let fork_run = RunId::new();
    let fork_wt = RunWorktree::create_at(&repo, &fork_run, &checkpoint).unwrap();
    let fork = nodes
        .fork(&fork_run, &[("tickets/T1".to_owned(), first.clone())])
        .unwrap();
    let f1 = fork.get("tickets/T1").unwrap().unwrap();
    assert_ne!(f1.branch, t1.branch);
    assert_ne!(f1.path, t1.path);
    assert_eq!(f1.parent, fork_wt.branch);
    assert_eq!(f1.head().unwrap(), first);
    assert_eq!(
        std::fs::read_to_string(f1.path.join("a.txt")).unwrap(),
        "first\n"
    );
    let copied = fork.merges("tickets/T1").unwrap();
    assert_eq!(copied.len(), 1);
    assert_eq!(copied[0].target, fork_wt.branch);
    assert_eq!(copied[0].after, m.after);

    // Pruning in the fork undoes the merge there only.
    fork.prune("tickets/T1").unwrap();
    assert_eq!(tip(&repo, &fork_wt.branch), m.before);
    assert_eq!(tip(&repo, &wt.branch), checkpoint);
    assert!(t1.path.exists() && branch_exists(&repo, &t1.branch));
    assert_eq!(t1.head().unwrap(), tip(&repo, &t1.branch));
}

#[test]
fn cleanup_removes_every_node_worktree_and_branch_of_the_run() {
    let (_dir, wt, nodes) = run();
    let repo = nodes.repo().to_owned();
    rivals(&nodes, &wt.branch);
    let pending = conflict(&nodes, "tickets/T2", &wt.branch, "m");
    let result = tip(&repo, &wt.branch);
    nodes.cleanup().unwrap();
    assert!(!repo.join(format!(".trellis/nodes/{}", wt.run)).exists());
    assert!(!pending.path.exists());
    let list = worktree_list(&repo);
    assert_eq!(list.matches("worktree ").count(), 2, "{list}");
    let left = git(&repo, &["for-each-ref", "refs/heads/trellis/nodes"]);
    assert_eq!(left, "");
    assert_eq!(tip(&repo, &wt.branch), result, "merged work stays");
    assert!(nodes.list().unwrap().is_empty());
}

#[test]
fn sweep_removes_a_crashed_runs_leftovers_and_keeps_live_ones() {
    let (dir, crashed_wt, crashed) = run();
    let repo = crashed.repo().to_owned();
    let live_wt = RunWorktree::create(dir.path(), &RunId::new()).unwrap();
    let live = NodeWorktrees::open(dir.path(), &live_wt.run).unwrap();
    let keep = live.create("tickets/T1", &live_wt.branch).unwrap();

    let (a, _) = rivals(&crashed, &crashed_wt.branch);
    conflict(&crashed, "tickets/T2", &crashed_wt.branch, "m");
    // The crash: a worktree directory vanished (git's bookkeeping stale), and a branch was
    // created without its journal entry.
    std::fs::remove_dir_all(&a.path).unwrap();
    git(
        &repo,
        &[
            "branch",
            &format!("trellis/nodes/{}/orphan-0000000000", crashed_wt.run),
            &crashed_wt.base,
        ],
    );
    // And a run that left only a branch behind.
    git(
        &repo,
        &[
            "branch",
            "trellis/nodes/0gone/x-0000000000",
            &crashed_wt.base,
        ],
    );

    let report = sweep(&repo, std::slice::from_ref(&live_wt.run)).unwrap();
    let mut expected = vec![crashed_wt.run.to_string(), "0gone".to_owned()];
    expected.sort();
    assert_eq!(report.runs, expected);
    let branches = git(
        &repo,
        &[
            "for-each-ref",
            "--format=%(refname)",
            "refs/heads/trellis/nodes",
        ],
    );
    assert_eq!(branches.trim(), format!("refs/heads/{}", keep.branch));
    let list = worktree_list(&repo);
    assert_eq!(list.matches("worktree ").count(), 4, "{list}");
    assert!(list.contains(&*keep.path.to_string_lossy()), "{list}");
    assert!(!list.contains("prunable"), "{list}");
    assert!(
        !repo
            .join(format!(".trellis/nodes/{}", crashed_wt.run))
            .exists()
    );
    // Run branches and worktrees carry results for review: kept.
    assert!(branch_exists(&repo, &crashed_wt.branch) && crashed_wt.path.exists());
    assert_eq!(live.list().unwrap(), vec![keep.clone()]);
    // Sweeping again finds nothing.
    assert!(
        sweep(&repo, std::slice::from_ref(&live_wt.run))
            .unwrap()
            .runs
            .is_empty()
    );
}

#[test]
fn a_node_branch_left_by_a_crash_before_journaling_is_replaced() {
    let (_dir, wt, nodes) = run();
    let repo = nodes.repo().to_owned();
    let branch = nodes.branch_of("tickets/T1");
    git(&repo, &["branch", &branch, &wt.base]);
    let node = nodes.create("tickets/T1", &wt.branch).unwrap();
    assert_eq!(node.branch, branch);
    assert!(node.path.join("shared.txt").exists());
}
