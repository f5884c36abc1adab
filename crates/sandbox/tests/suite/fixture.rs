//! A fake user: a home with an SSH key and a `trellis serve` token, a repository with a
//! linked worktree (as a run's), a directory outside it, and a way to run a command line
//! in the sandbox as the `shell` tool would.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use trellis_sandbox::{CommandSpec, Mode, Preset, Sandbox, SandboxConfig, SandboxPolicy};

pub const SECRET: &str = "-----BEGIN OPENSSH PRIVATE KEY----- not-a-real-key";
pub const TOKEN: &str = "serve-token-0123456789";

pub struct Fixture {
    _dir: tempfile::TempDir,
    pub home: PathBuf,
    pub repo: PathBuf,
    pub worktree: PathBuf,
    pub outside: PathBuf,
    pub config_dir: PathBuf,
}

fn git(dir: &Path, args: &[&str]) {
    let ok = Command::new("git")
        .args([
            "-c",
            "user.name=t",
            "-c",
            "user.email=t@t",
            "-c",
            "init.defaultBranch=main",
        ])
        .args(args)
        .current_dir(dir)
        .stdout(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    assert!(ok, "git {args:?}");
}

impl Fixture {
    /// Outside /tmp (the sandbox's /tmp is private, which would hide the files for another
    /// reason than the one tested).
    pub fn new() -> Self {
        Self::make(false)
    }

    /// The repository under the (hidden) home directory, its branches packed: where most
    /// users keep theirs.
    pub fn under_home() -> Self {
        Self::make(true)
    }

    fn make(repo_under_home: bool) -> Self {
        let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
        let root = dir.path().canonicalize().unwrap();
        let home = root.join("home");
        std::fs::create_dir_all(home.join(".ssh")).unwrap();
        std::fs::write(home.join(".ssh/id_rsa"), SECRET).unwrap();
        let config_dir = home.join(".config/trellis");
        std::fs::create_dir_all(&config_dir).unwrap();
        std::fs::write(config_dir.join("serve-token"), TOKEN).unwrap();
        let repo = if repo_under_home {
            home.join("src/repo")
        } else {
            root.join("repo")
        };
        std::fs::create_dir_all(&repo).unwrap();
        git(&repo, &["init", "-q"]);
        std::fs::write(repo.join("a.txt"), "a\n").unwrap();
        git(&repo, &["add", "."]);
        git(&repo, &["commit", "-qm", "init"]);
        let worktree = repo.join(".trellis/worktrees/run-1");
        git(
            &repo,
            &[
                "worktree",
                "add",
                "-q",
                "-b",
                "trellis/run-1",
                worktree.to_str().unwrap(),
            ],
        );
        if repo_under_home {
            git(&repo, &["pack-refs", "--all"]);
        }
        let outside = root.join("outside");
        std::fs::create_dir_all(&outside).unwrap();
        std::fs::write(outside.join("victim"), "original\n").unwrap();
        Self {
            _dir: dir,
            home,
            repo,
            worktree,
            outside,
            config_dir,
        }
    }

    pub fn policy(&self, preset: Preset) -> SandboxPolicy {
        let config = SandboxConfig::default();
        SandboxPolicy::for_worktree(
            &self.worktree,
            preset,
            &config,
            Some(&self.home),
            Some(&self.config_dir),
        )
    }

    /// The backends under test, and the unsandboxed run that shows each escape is real.
    pub fn sandboxes() -> Vec<Sandbox> {
        [Mode::Bwrap, Mode::Landlock]
            .into_iter()
            .map(|m| Sandbox::new(m).unwrap_or_else(|e| panic!("{e}")))
            .collect()
    }
}

/// What a command did.
#[derive(Debug)]
pub struct Ran {
    pub code: Option<i32>,
    pub out: String,
}

/// The environment the shell tool passes (a scrubbed copy of this process's), with
/// `HOME` pointing at `home`.
pub fn env(home: &Path) -> Vec<(OsString, OsString)> {
    let mut env: Vec<(OsString, OsString)> = std::env::vars_os()
        .filter(|(k, _)| {
            [
                "PATH",
                "LANG",
                "RUSTUP_HOME",
                "CARGO_HOME",
                "RUSTUP_TOOLCHAIN",
                "PYENV_ROOT",
            ]
            .iter()
            .any(|a| k == a)
        })
        .collect();
    env.push(("HOME".into(), home.into()));
    env
}

/// `line` with `bash -c` in `cwd` inside `sandbox` under `policy`, with `home` as `HOME`.
pub fn run(sandbox: &Sandbox, policy: &SandboxPolicy, cwd: &Path, home: &Path, line: &str) -> Ran {
    let spec = CommandSpec {
        program: "bash".into(),
        args: vec!["-c".into(), line.into()],
        cwd: cwd.to_path_buf(),
        env: env(home),
    };
    let mut w = sandbox
        .wrap(&spec, policy)
        .unwrap_or_else(|e| panic!("{e}"));
    let out = w
        .command
        .stdin(Stdio::null())
        .output()
        .unwrap_or_else(|e| panic!("spawn: {e}"));
    Ran {
        code: out.status.code(),
        out: format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ),
    }
}

/// A command line that tries to start `n` children sleeping 3 s and prints `started K`: the
/// ones the kernel allowed (Python's fork fails at once where bash retries for seconds).
pub fn fork_children(n: u32) -> String {
    format!(
        "python3 -c \"import os, time\nk = 0\nfor _ in range({n}):\n    try:\n        pid = os.fork()\n    \
         except OSError:\n        continue\n    if pid == 0:\n        time.sleep(3)\n        os._exit(0)\n    \
         k += 1\nprint('started', k)\""
    )
}

/// The `K` of a [`fork_children`] run's `started K`.
pub fn started(ran: &Ran) -> Option<u32> {
    ran.out
        .split("started ")
        .nth(1)?
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}
