//! The verdict: the task's hidden tests applied over the agent's change, then run.

use std::path::Path;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use crate::task::{Task, quote};
use crate::workdir::{ENV_VAR, must, sh, sh_sandboxed, tail};
use crate::{Error, Result};

/// One test command's outcome.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct TestRun {
    /// Its exit code (`None`: killed).
    pub exit_code: Option<i32>,
    /// Whether the time limit killed it.
    pub timed_out: bool,
    /// Wall time.
    pub seconds: f64,
    /// The end of its output.
    pub tail: String,
}

impl TestRun {
    /// Whether every test it ran passed.
    pub fn passed(&self) -> bool {
        self.exit_code == Some(0)
    }
}

/// How a task's hidden tests went.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Verdict {
    /// FAIL_TO_PASS and PASS_TO_PASS all pass.
    pub resolved: bool,
    /// The FAIL_TO_PASS run.
    pub fail_to_pass: Option<TestRun>,
    /// The PASS_TO_PASS run (none when the task lists none).
    pub pass_to_pass: Option<TestRun>,
    /// Why the tests could not run (the test patch did not apply, …).
    pub error: Option<String>,
}

/// The files a unified diff touches (`+++ b/…`, and `--- a/…` for deletions).
pub fn patched_files(patch: &str) -> Vec<String> {
    let mut files: Vec<String> = Vec::new();
    for line in patch.lines() {
        let path = line
            .strip_prefix("+++ b/")
            .or_else(|| line.strip_prefix("--- a/"));
        if let Some(p) = path {
            let p = p.trim_end().to_owned();
            if !files.contains(&p) {
                files.push(p);
            }
        }
    }
    files
}

/// Applies `patch` (a unified diff) to the checkout `dir`.
pub async fn apply(patch: &str, dir: &Path, what: &str) -> Result<()> {
    let file = dir.join(format!(".trellis-eval-{what}.diff"));
    std::fs::write(&file, patch).map_err(|e| Error::Io {
        what: format!("writing {}", file.display()),
        source: e,
    })?;
    let name = quote(&file.to_string_lossy());
    let out = must(
        &format!("git apply --whitespace=nowarn {name}"),
        dir,
        &[],
        Duration::from_secs(120),
    )
    .await;
    let _ = std::fs::remove_file(&file);
    out.map(|_| ())
        .map_err(|e| Error::Failed(format!("the {what} does not apply: {e}")))
}

/// Scores the checkout `dir` (the agent's change applied): the test files of the task's
/// `test_patch` go back to the base commit (as SWE-bench does: an agent's edits of them do
/// not count), the test patch is applied, FAIL_TO_PASS then PASS_TO_PASS run with the task's
/// test command in its environment `env`.
pub async fn score(task: &Task, dir: &Path, env: &Path, timeout: Duration) -> Verdict {
    match run(task, dir, env, timeout).await {
        Ok(v) => v,
        Err(e) => Verdict {
            error: Some(e.to_string()),
            ..Verdict::default()
        },
    }
}

async fn run(task: &Task, dir: &Path, env: &Path, timeout: Duration) -> Result<Verdict> {
    let minute = Duration::from_secs(60);
    let base = quote(&task.base_commit);
    for file in patched_files(&task.test_patch) {
        let f = quote(&file);
        let at_base = sh(&format!("git cat-file -e {base}:{f}"), dir, &[], minute).await?;
        let restore = if at_base.exit_code == Some(0) {
            format!("git checkout --quiet {base} -- {f}")
        } else {
            format!("rm -f -- {f}")
        };
        must(&restore, dir, &[], minute).await?;
    }
    apply(&task.test_patch, dir, "test patch").await?;
    let var = [(ENV_VAR, env.to_string_lossy().into_owned())];
    let tests = |ids: &[String]| {
        let command = task.test_command(ids);
        let var = var.clone();
        async move {
            let started = Instant::now();
            // The task's tests run model-written code: inside the sandbox.
            let out = sh_sandboxed(&command, dir, env, &var, timeout).await?;
            Ok::<_, Error>(TestRun {
                exit_code: out.exit_code,
                timed_out: out.timed_out,
                seconds: started.elapsed().as_secs_f64(),
                tail: tail(&format!("{}{}", out.stdout, out.stderr), 1500),
            })
        }
    };
    let f2p = tests(&task.fail_to_pass).await?;
    let p2p = if task.pass_to_pass.is_empty() {
        None
    } else {
        Some(tests(&task.pass_to_pass).await?)
    };
    Ok(Verdict {
        resolved: f2p.passed() && p2p.as_ref().is_none_or(TestRun::passed),
        fail_to_pass: Some(f2p),
        pass_to_pass: p2p,
        error: None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_files_of_a_patch() {
        let patch = "diff --git a/t/a.py b/t/a.py\n--- a/t/a.py\n+++ b/t/a.py\n@@ -1 +1 @@\n-x\n+y\n\
                     diff --git a/t/new.py b/t/new.py\nnew file mode 100644\n--- /dev/null\n+++ b/t/new.py\n@@ -0,0 +1 @@\n+z\n";
        assert_eq!(patched_files(patch), ["t/a.py", "t/new.py"]);
    }
}
