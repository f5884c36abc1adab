//! A thin wrapper over the `git` command line, used for worktrees and reviews.
//!
//! Why the CLI rather than libgit2: the user's own git decides what "the working tree"
//! means (ignore rules, attributes, filters, sparse checkouts, index extensions, new
//! repository formats) and it is already installed wherever a repository is; it also costs
//! nothing to build. Measured against libgit2 for a run's worktree (`bench/git-inprocess`,
//! docs/benchmarks.md): faster only on repositories of a few files, where starting processes
//! is the cost. Every call disables hooks, signing and line-ending conversion (so
//! blobs hold the exact bytes of the files), never prompts, and drops `GIT_DIR`-style
//! variables inherited from a surrounding git process.

use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use crate::error::{Error, Result};

/// The identity of commits Trellis makes.
pub const AUTHOR_NAME: &str = "Trellis";
/// The e-mail of commits Trellis makes.
pub const AUTHOR_EMAIL: &str = "trellis@localhost";

/// Options prepended to every invocation.
const FIXED_CONFIG: &[&str] = &[
    "-c",
    "core.hooksPath=/dev/null",
    "-c",
    "commit.gpgSign=false",
    "-c",
    "core.autocrlf=false",
    "-c",
    "core.safecrlf=false",
    "-c",
    "advice.detachedHead=false",
    "-c",
    "color.ui=never",
];

/// Runs git in one directory, optionally with a separate index file.
#[derive(Clone, Debug)]
pub struct Git {
    dir: PathBuf,
    index: Option<PathBuf>,
    envs: Vec<(String, String)>,
}

impl Git {
    /// Git in `dir`.
    pub fn new(dir: impl Into<PathBuf>) -> Self {
        Self {
            dir: dir.into(),
            index: None,
            envs: Vec::new(),
        }
    }

    /// The same, using `index` as the index file (`GIT_INDEX_FILE`).
    pub fn with_index(&self, index: impl Into<PathBuf>) -> Self {
        Self {
            dir: self.dir.clone(),
            index: Some(index.into()),
            envs: self.envs.clone(),
        }
    }

    /// The same, with the environment variable `key` set to `value` for every call.
    pub fn with_env(&self, key: &str, value: &str) -> Self {
        let mut git = self.clone();
        git.envs.push((key.to_owned(), value.to_owned()));
        git
    }

    /// The directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    fn command<S: AsRef<OsStr>>(&self, args: &[S]) -> Command {
        let mut c = Command::new("git");
        c.current_dir(&self.dir)
            .args(FIXED_CONFIG)
            .args(args)
            .stdin(Stdio::null())
            .env("GIT_TERMINAL_PROMPT", "0")
            .env("LC_ALL", "C")
            .env("GIT_AUTHOR_NAME", AUTHOR_NAME)
            .env("GIT_AUTHOR_EMAIL", AUTHOR_EMAIL)
            .env("GIT_COMMITTER_NAME", AUTHOR_NAME)
            .env("GIT_COMMITTER_EMAIL", AUTHOR_EMAIL);
        for v in [
            "GIT_DIR",
            "GIT_WORK_TREE",
            "GIT_INDEX_FILE",
            "GIT_OBJECT_DIRECTORY",
            "GIT_COMMON_DIR",
            "GIT_PREFIX",
        ] {
            c.env_remove(v);
        }
        if let Some(index) = &self.index {
            c.env("GIT_INDEX_FILE", index);
        }
        for (k, v) in &self.envs {
            c.env(k, v);
        }
        c
    }

    fn error<S: AsRef<OsStr>>(&self, args: &[S], message: String) -> Error {
        Error::Git {
            args: args
                .iter()
                .map(|a| a.as_ref().to_string_lossy().into_owned())
                .collect::<Vec<_>>()
                .join(" "),
            dir: self.dir.clone(),
            message,
        }
    }

    /// Runs git; its stdout on success, an error with its stderr otherwise.
    pub fn run<S: AsRef<OsStr>>(&self, args: &[S]) -> Result<Vec<u8>> {
        match self.try_run(args)? {
            Ok(out) => Ok(out),
            Err(stderr) => Err(self.error(args, stderr)),
        }
    }

    /// Runs git; stdout on success, stderr (as text) on a non-zero exit.
    pub fn try_run<S: AsRef<OsStr>>(&self, args: &[S]) -> Result<Result<Vec<u8>, String>> {
        let out = self
            .command(args)
            .output()
            .map_err(|e| self.error(args, format!("cannot run git: {e}; is git installed?")))?;
        Ok(if out.status.success() {
            Ok(out.stdout)
        } else {
            Err(String::from_utf8_lossy(&out.stderr).trim().to_owned())
        })
    }

    /// Runs a git command whose exit code 1 is a result, not a failure (`merge-tree`: the
    /// merge conflicts): whether it exited 0, and its stdout either way; an error with its
    /// stderr for any other code.
    pub fn run_or_1<S: AsRef<OsStr>>(&self, args: &[S]) -> Result<(bool, Vec<u8>)> {
        let out = self
            .command(args)
            .output()
            .map_err(|e| self.error(args, format!("cannot run git: {e}; is git installed?")))?;
        match out.status.code() {
            Some(0) => Ok((true, out.stdout)),
            Some(1) => Ok((false, out.stdout)),
            _ => Err(self.error(args, String::from_utf8_lossy(&out.stderr).trim().to_owned())),
        }
    }

    /// Runs git and returns stdout as trimmed text.
    pub fn text<S: AsRef<OsStr>>(&self, args: &[S]) -> Result<String> {
        Ok(String::from_utf8_lossy(&self.run(args)?).trim().to_owned())
    }

    /// The object id `rev` names, or `None` when it does not exist.
    pub fn resolve(&self, rev: &str) -> Result<Option<String>> {
        Ok(self
            .try_run(&[
                "rev-parse",
                "--verify",
                "--quiet",
                &format!("{rev}^{{commit}}"),
            ])?
            .ok()
            .map(|o| String::from_utf8_lossy(&o).trim().to_owned()))
    }

    /// The contents of blob `oid`.
    pub fn blob(&self, oid: &str) -> Result<Vec<u8>> {
        self.run(&["cat-file", "blob", oid])
    }
}
