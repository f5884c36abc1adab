//! Normal work still passes inside the sandbox: Python's unittest, `cargo test --offline` of
//! a small crate, `npm test` of a small package, git in the worktree.

use trellis_sandbox::Preset;

use super::fixture::{Fixture, run};

/// The real home: toolchains (rustup, pyenv) live there and are readable by default.
fn real_home() -> std::path::PathBuf {
    trellis_sandbox::home_dir().unwrap()
}

/// Runs `line` in the fixture's worktree under `preset`, with the real home directory in
/// the environment (where the toolchains are).
fn work(
    f: &Fixture,
    sandbox: &trellis_sandbox::Sandbox,
    preset: Preset,
    line: &str,
) -> super::fixture::Ran {
    run(sandbox, &f.policy(preset), &f.worktree, &real_home(), line)
}

#[test]
fn python_unittest_passes() {
    let f = Fixture::new();
    std::fs::write(
        f.worktree.join("test_a.py"),
        "import unittest, tempfile\nclass T(unittest.TestCase):\n    def test_x(self):\n        \
         with tempfile.NamedTemporaryFile() as t: t.write(b'x')\n        self.assertEqual(1, 1)\n",
    )
    .unwrap();
    for sandbox in Fixture::sandboxes() {
        let ran = work(
            &f,
            &sandbox,
            Preset::WorkspaceWrite,
            "python3 -m unittest discover -v 2>&1",
        );
        assert_eq!(ran.code, Some(0), "{}: {ran:?}", sandbox.backend().name());
        assert!(ran.out.contains("OK"), "{ran:?}");
    }
}

#[test]
fn cargo_test_offline_passes() {
    let f = Fixture::new();
    let krate = f.worktree.join("tiny");
    std::fs::create_dir_all(krate.join("src")).unwrap();
    std::fs::write(
        krate.join("Cargo.toml"),
        "[package]\nname = \"tiny\"\nversion = \"0.1.0\"\nedition = \"2021\"\n\n[workspace]\n",
    )
    .unwrap();
    std::fs::write(
        krate.join("src/lib.rs"),
        "pub fn two() -> u32 { 2 }\n#[test]\nfn it() { assert_eq!(two(), 2); }\n",
    )
    .unwrap();
    for sandbox in Fixture::sandboxes() {
        let ran = run(
            &sandbox,
            &f.policy(Preset::WorkspaceWrite),
            &krate,
            &real_home(),
            "cargo test --offline -q 2>&1",
        );
        assert_eq!(ran.code, Some(0), "{}: {ran:?}", sandbox.backend().name());
        assert!(ran.out.contains("1 passed"), "{ran:?}");
    }
}

#[test]
fn npm_test_passes() {
    let f = Fixture::new();
    std::fs::write(
        f.worktree.join("package.json"),
        r#"{"name":"tiny","version":"1.0.0","scripts":{"test":"node test.js"}}"#,
    )
    .unwrap();
    std::fs::write(
        f.worktree.join("test.js"),
        "const assert = require('assert'); assert.strictEqual(1 + 1, 2); console.log('npm ok');\n",
    )
    .unwrap();
    for sandbox in Fixture::sandboxes() {
        let ran = work(&f, &sandbox, Preset::WorkspaceWrite, "npm test 2>&1");
        assert_eq!(ran.code, Some(0), "{}: {ran:?}", sandbox.backend().name());
        assert!(ran.out.contains("npm ok"), "{ran:?}");
    }
}

#[test]
fn git_works_in_the_worktree() {
    let f = Fixture::new();
    for (i, sandbox) in Fixture::sandboxes().into_iter().enumerate() {
        let ran = work(
            &f,
            &sandbox,
            Preset::WorkspaceWrite,
            &format!(
                "echo {i} > f{i}.txt && git status --short && git add -A && \
                      git -c user.name=a -c user.email=a@a commit -qm c{i} && git log --oneline | head -1"
            ),
        );
        assert_eq!(ran.code, Some(0), "{}: {ran:?}", sandbox.backend().name());
        assert!(ran.out.contains(&format!("c{i}")), "{ran:?}");
    }
}

#[test]
fn the_read_only_preset_writes_only_tmp() {
    let f = Fixture::new();
    for sandbox in Fixture::sandboxes() {
        let ran = run(
            &sandbox,
            &f.policy(Preset::ReadOnly),
            &f.worktree,
            &f.home,
            "cat a.txt && echo t > $TMPDIR/t && cat $TMPDIR/t && echo x > b.txt",
        );
        assert!(
            ran.out.starts_with("a\nt\n"),
            "{}: {ran:?}",
            sandbox.backend().name()
        );
        assert!(!f.worktree.join("b.txt").exists(), "{ran:?}");
    }
}

#[test]
fn a_repository_under_the_home_directory_works_under_every_preset() {
    // The home directory is hidden, but the worktree and the repository's git dir (packed
    // branches included) are there: git reads and, with a writing preset, commits.
    let f = Fixture::under_home();
    for sandbox in Fixture::sandboxes() {
        let name = sandbox.backend().name();
        let ran = work(
            &f,
            &sandbox,
            Preset::ReadOnly,
            "cat a.txt && git status --short && git branch --list main && echo x > b.txt",
        );
        assert!(ran.out.starts_with("a\n"), "{name}: {ran:?}");
        assert!(ran.out.contains("main"), "{name}: {ran:?}");
        assert!(!f.worktree.join("b.txt").exists(), "{name}: {ran:?}");
        let ran = work(
            &f,
            &sandbox,
            Preset::WorkspaceWrite,
            &format!(
                "echo {name} > {name}.txt && git add -A && \
                 git -c user.name=a -c user.email=a@a commit -qm c-{name} && \
                 git log --oneline | head -1 && git branch --list main"
            ),
        );
        assert_eq!(ran.code, Some(0), "{name}: {ran:?}");
        assert!(ran.out.contains(&format!("c-{name}")), "{name}: {ran:?}");
        assert!(ran.out.contains("main"), "{name}: {ran:?}");
    }
}
