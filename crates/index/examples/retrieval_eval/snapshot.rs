//! Writes a commit's tree out of a bare mirror (`git archive | tar -x`).

use std::path::Path;
use std::process::{Command, Stdio};

use anyhow::{Context, bail};

/// Replaces `dir` with the tree of `commit` in the bare repository `git_dir`.
pub fn write_tree(git_dir: &Path, commit: &str, dir: &Path) -> anyhow::Result<()> {
    if dir.exists() {
        std::fs::remove_dir_all(dir).with_context(|| format!("removing {}", dir.display()))?;
    }
    std::fs::create_dir_all(dir)?;
    let mut archive = Command::new("git")
        .arg(format!("--git-dir={}", git_dir.display()))
        .args(["archive", "--format=tar", commit])
        .stdout(Stdio::piped())
        .spawn()
        .context("running git archive")?;
    let stdout = archive.stdout.take().context("git archive stdout")?;
    let tar = Command::new("tar")
        .args(["-x", "-C"])
        .arg(dir)
        .stdin(stdout)
        .status()
        .context("running tar")?;
    let git = archive.wait()?;
    if !git.success() || !tar.success() {
        bail!(
            "git archive {commit} | tar -x into {} failed",
            dir.display()
        );
    }
    Ok(())
}
