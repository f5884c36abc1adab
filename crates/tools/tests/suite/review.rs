//! Review, partial apply, 3-way checks, undo and redo.

use std::collections::{BTreeMap, BTreeSet};
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use trellis_protocol::RunId;
use trellis_store::SqliteStore;
use trellis_store::prelude::*;
use trellis_tools::git::Git;
use trellis_tools::review::{self, ChangeSet, FileSelection, Selection};
use trellis_tools::worktree::RunWorktree;

use super::support::{git, git_state, repo, snapshot};

const LONG: &str = "l1\nl2\nl3\nl4\nl5\nl6\nl7\nl8\nl9\nl10\nl11\nl12\nl13\nl14\nl15\nl16\n";

struct Fixture {
    dir: tempfile::TempDir,
    store: SqliteStore,
    wt: RunWorktree,
}

impl Fixture {
    /// A repository, a run worktree on it, and the store holding its change set.
    fn new(files: &[(&str, &str)]) -> Self {
        let dir = repo(files);
        let wt = RunWorktree::create(dir.path(), &RunId::new()).unwrap();
        let store = SqliteStore::open_workspace(dir.path(), Default::default()).unwrap();
        store.put_change_set(wt.record(0)).unwrap();
        Self { dir, store, wt }
    }

    fn p(&self) -> &Path {
        self.dir.path()
    }

    fn write(&self, path: &str, content: &[u8]) {
        let p = self.wt.path.join(path);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, content).unwrap();
    }

    fn load(&self) -> ChangeSet {
        self.wt.commit("implement", "test").unwrap();
        review::load(
            &Git::new(self.p()),
            &self.wt.run,
            &self.wt.base,
            &self.wt.head().unwrap(),
        )
        .unwrap()
    }

    fn rec(&self) -> trellis_store::ChangeSetRecord {
        self.store.change_set(self.wt.run.as_str()).unwrap()
    }
}

#[test]
fn partial_approval_yields_exactly_the_expected_tree_and_undo_restores_it() {
    let f = Fixture::new(&[
        ("long.txt", LONG),
        ("keep.txt", "keep\n"),
        ("other.txt", "o\n"),
    ]);
    // Two distant changes in long.txt (two hunks), a new file, a changed file.
    f.write(
        "long.txt",
        LONG.replace("l2\n", "L2\n")
            .replace("l15\n", "L15\n")
            .as_bytes(),
    );
    f.write("new/dir/added.txt", b"added\n");
    f.write("other.txt", b"O\n");
    let set = f.load();
    let paths: Vec<&str> = set.files.iter().map(|x| x.path.as_str()).collect();
    assert_eq!(paths, ["long.txt", "new/dir/added.txt", "other.txt"]);
    assert_eq!(set.files[0].hunks.len(), 2);

    let before = snapshot(f.p());
    let selection = Selection {
        files: BTreeMap::from([
            (
                "long.txt".to_owned(),
                FileSelection::Hunks(BTreeSet::from([1])),
            ),
            ("new/dir/added.txt".to_owned(), FileSelection::All),
            ("other.txt".to_owned(), FileSelection::None),
        ]),
    };
    let report = review::apply(&f.store, &f.rec(), &set, &selection).unwrap();
    assert_eq!(report.files.len(), 2);

    let mut expected = before.clone();
    expected.get_mut("long.txt").unwrap().0 = LONG.replace("l15\n", "L15\n").into_bytes();
    let after = snapshot(f.p());
    assert_eq!(after["long.txt"].0, expected["long.txt"].0);
    assert_eq!(after["new/dir/added.txt"].0, b"added\n");
    assert_eq!(after["other.txt"], before["other.txt"]);
    let changed: Vec<&String> = after
        .keys()
        .filter(|k| before.get(*k) != after.get(*k))
        .collect();
    assert_eq!(
        changed,
        ["long.txt", "new/", "new/dir/", "new/dir/added.txt"]
    );
    assert_eq!(f.rec().state, "applied");

    // Applying twice is refused.
    assert!(review::apply(&f.store, &f.rec(), &set, &selection).is_err());

    // Undo restores byte for byte (created directories included), redo re-applies.
    let u = review::undo(&f.store, &f.rec()).unwrap();
    assert_eq!(u.kind, "undo");
    assert_eq!(snapshot(f.p()), before);
    assert_eq!(f.rec().state, "undone");
    let r = review::undo(&f.store, &f.rec()).unwrap();
    assert_eq!(r.kind, "redo");
    assert_eq!(snapshot(f.p()), after);
    let ops = f.store.change_ops(&f.wt.run).unwrap();
    let kinds: Vec<(&str, &str)> = ops
        .iter()
        .map(|o| (o.kind.as_str(), o.state.as_str()))
        .collect();
    assert_eq!(
        kinds,
        [("apply", "done"), ("undo", "done"), ("redo", "done")]
    );
}

#[test]
fn undo_is_byte_exact_for_crlf_binary_modes_and_deletions() {
    let f = Fixture::new(&[
        ("crlf.txt", "a\r\nb\r\nc"),
        ("bin.dat", "\0\x01\x02"),
        ("script.sh", "echo hi\n"),
        ("doomed.txt", "doomed\n"),
    ]);
    // The user's copy of script.sh has unusual permissions that must survive.
    std::fs::set_permissions(
        f.p().join("script.sh"),
        std::fs::Permissions::from_mode(0o640),
    )
    .unwrap();
    f.write("crlf.txt", b"a\r\nB\r\nc");
    f.write("bin.dat", b"\0\xff\xfe");
    std::fs::set_permissions(
        f.wt.path.join("script.sh"),
        std::fs::Permissions::from_mode(0o755),
    )
    .unwrap();
    std::fs::remove_file(f.wt.path.join("doomed.txt")).unwrap();
    let set = f.load();
    assert_eq!(
        set.files.len(),
        4,
        "{:?}",
        set.files.iter().map(|x| &x.path).collect::<Vec<_>>()
    );
    let before = snapshot(f.p());
    review::apply(&f.store, &f.rec(), &set, &Selection::all(&set)).unwrap();
    let after = snapshot(f.p());
    assert_eq!(after["crlf.txt"].0, b"a\r\nB\r\nc");
    assert_eq!(after["bin.dat"].0, b"\0\xff\xfe");
    assert_eq!(
        after["script.sh"].1 & 0o111,
        0o010 | 0o100,
        "exec bits follow read bits"
    );
    assert!(!after.contains_key("doomed.txt"));
    review::undo(&f.store, &f.rec()).unwrap();
    assert_eq!(snapshot(f.p()), before);
}

#[test]
fn user_edits_elsewhere_merge_and_same_line_edits_refuse() {
    let f = Fixture::new(&[("long.txt", LONG)]);
    f.write("long.txt", LONG.replace("l3\n", "AGENT3\n").as_bytes());
    let set = f.load();

    // The user changes the same line meanwhile: refused, nothing touched.
    std::fs::write(f.p().join("long.txt"), LONG.replace("l3\n", "USER3\n")).unwrap();
    let before = snapshot(f.p());
    let state = git_state(f.p());
    let err = review::apply(&f.store, &f.rec(), &set, &Selection::all(&set)).unwrap_err();
    let msg = err.to_string();
    assert!(
        msg.contains("long.txt") && msg.contains("nothing was applied"),
        "{msg}"
    );
    assert_eq!(snapshot(f.p()), before);
    assert_eq!(git_state(f.p()), state);

    // The user changes a distant line instead: both changes end up in the file.
    std::fs::write(f.p().join("long.txt"), LONG.replace("l14\n", "USER14\n")).unwrap();
    let report = review::apply(&f.store, &f.rec(), &set, &Selection::all(&set)).unwrap();
    assert_eq!(report.files, [("long.txt".to_owned(), "merged".to_owned())]);
    assert_eq!(
        std::fs::read_to_string(f.p().join("long.txt")).unwrap(),
        LONG.replace("l3\n", "AGENT3\n")
            .replace("l14\n", "USER14\n")
    );

    // Undo refuses once the user edits the applied file again, then works after revert.
    let applied = std::fs::read(f.p().join("long.txt")).unwrap();
    std::fs::write(f.p().join("long.txt"), "something else\n").unwrap();
    assert!(
        review::undo(&f.store, &f.rec())
            .unwrap_err()
            .to_string()
            .contains("changed since")
    );
    std::fs::write(f.p().join("long.txt"), &applied).unwrap();
    review::undo(&f.store, &f.rec()).unwrap();
    assert_eq!(
        std::fs::read_to_string(f.p().join("long.txt")).unwrap(),
        LONG.replace("l14\n", "USER14\n")
    );
    let _ = git(f.p(), &["status", "--porcelain"]);
}

#[test]
fn an_interrupted_apply_is_completed_by_recovery() {
    let f = Fixture::new(&[("a.txt", "a\n"), ("b.txt", "b\n")]);
    f.write("a.txt", b"A\n");
    f.write("b.txt", b"B\n");
    let set = f.load();
    // Simulate a crash right after the commit point: manifest written, files untouched.
    let op = review::journal::prepare(
        f.p(),
        &f.wt.run,
        1,
        review::journal::OpKind::Apply,
        vec![
            (
                "a.txt".into(),
                Some((b"a\n".to_vec(), 0o644)),
                Some((b"A\n".to_vec(), 0o644)),
            ),
            (
                "b.txt".into(),
                Some((b"b\n".to_vec(), 0o644)),
                Some((b"B\n".to_vec(), 0o644)),
            ),
        ],
        Vec::new(),
        Vec::new(),
    )
    .unwrap();
    // And one that never reached its commit point.
    let junk = op.with_file_name("0002-apply");
    std::fs::create_dir_all(junk.join("blobs")).unwrap();
    assert_eq!(std::fs::read(f.p().join("a.txt")).unwrap(), b"a\n");
    let done = review::recover(&f.store, f.p()).unwrap();
    assert_eq!(done.len(), 1);
    assert_eq!(std::fs::read(f.p().join("a.txt")).unwrap(), b"A\n");
    assert_eq!(std::fs::read(f.p().join("b.txt")).unwrap(), b"B\n");
    assert!(!junk.exists());
    assert_eq!(f.rec().state, "applied");
    let _ = set;
}
