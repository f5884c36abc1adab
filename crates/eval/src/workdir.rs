//! Fresh checkouts at a task's base commit, and environments set up once per `env_key`.

use std::path::{Path, PathBuf};
use std::time::Duration;

use tokio_util::sync::CancellationToken;
use trellis_tools::ShellConfig;
use trellis_tools::builtin::{ShellOutcome, run_shell};

use crate::task::{Task, quote};
use crate::{Error, Result};

/// The branch a checkout is on (the agents' runs start from it).
pub const BRANCH: &str = "trellis-eval";

/// The variable naming an environment's directory in setup and test commands.
pub const ENV_VAR: &str = "TRELLIS_EVAL_ENV";

/// Marks a finished environment setup.
const READY: &str = ".trellis-eval-ready";

/// Runs `command` with bash in `cwd` with this process's environment plus `extra`; kills it
/// (and its process group) after `timeout`. Output kept: the head and tail of 64 KiB.
pub async fn sh(
    command: &str,
    cwd: &Path,
    extra: &[(&str, String)],
    timeout: Duration,
) -> Result<ShellOutcome> {
    let mut env: Vec<(String, String)> = std::env::vars().collect();
    env.extend(extra.iter().map(|(k, v)| ((*k).to_owned(), v.clone())));
    let config = ShellConfig {
        max_output_bytes: 64 * 1024,
        ..ShellConfig::default()
    };
    run_shell(
        command,
        cwd,
        env,
        &config,
        timeout,
        &CancellationToken::new(),
    )
    .await
    .map_err(|e| Error::Failed(format!("`{command}`: {e}")))
}

/// Runs a task's test command (model-written code and the task's tests) like [`sh`], but
/// inside the OS sandbox (trellis-sandbox, `[sandbox] mode = "auto"`): the checkout `cwd`
/// writable, the task's environment `env_dir` readable, the home directory hidden, no
/// network, the environment scrubbed of secrets (plus `extra`). Refused with the cause when
/// no sandbox can be set up.
pub async fn sh_sandboxed(
    command: &str,
    cwd: &Path,
    env_dir: &Path,
    extra: &[(&str, String)],
    timeout: Duration,
) -> Result<ShellOutcome> {
    let config = ShellConfig {
        max_output_bytes: 64 * 1024,
        ..ShellConfig::default()
    };
    let mut env = trellis_tools::builtin::scrubbed_env(&config, std::env::vars());
    env.extend(extra.iter().map(|(k, v)| ((*k).to_owned(), v.clone())));
    let sandbox = trellis_sandbox::Sandbox::new(trellis_sandbox::Mode::Auto)
        .map_err(|e| Error::Failed(format!("`{command}`: {e}")))?;
    let mut policy = trellis_sandbox::SandboxPolicy::for_worktree(
        cwd,
        trellis_sandbox::Preset::WorkspaceWrite,
        &trellis_sandbox::SandboxConfig::default(),
        trellis_sandbox::home_dir().as_deref(),
        trellis_sandbox::trellis_config_dir().as_deref(),
    );
    policy.home_read.push(env_dir.to_path_buf());
    trellis_tools::builtin::run_shell_sandboxed(
        command,
        cwd,
        env,
        &config,
        timeout,
        &CancellationToken::new(),
        (&sandbox, &policy),
    )
    .await
    .map_err(|e| Error::Failed(format!("`{command}`: {e}")))
}

/// [`sh`] that must exit 0; the error names the command and shows its output's end.
pub async fn must(
    command: &str,
    cwd: &Path,
    extra: &[(&str, String)],
    timeout: Duration,
) -> Result<ShellOutcome> {
    let out = sh(command, cwd, extra, timeout).await?;
    if out.exit_code == Some(0) {
        return Ok(out);
    }
    let why = if out.timed_out {
        format!("timed out after {} s", timeout.as_secs())
    } else {
        format!("exit {:?}", out.exit_code)
    };
    Err(Error::Failed(format!(
        "`{command}` in {} failed ({why}):\n{}",
        cwd.display(),
        tail(&format!("{}{}", out.stdout, out.stderr), 2000)
    )))
}

/// The last `n` characters of `s`.
pub fn tail(s: &str, n: usize) -> String {
    let count = s.chars().count();
    s.chars().skip(count.saturating_sub(n)).collect()
}

/// Makes `dest` a fresh clone of the task's repository on branch [`BRANCH`] at its base
/// commit, with a committer identity (the agents commit in their worktrees).
pub async fn checkout(task: &Task, tasks_dir: &Path, dest: &Path) -> Result<()> {
    if dest.exists() {
        std::fs::remove_dir_all(dest).map_err(|e| Error::Io {
            what: format!("removing the old checkout {}", dest.display()),
            source: e,
        })?;
    }
    let parent = dest.parent().unwrap_or(Path::new("."));
    std::fs::create_dir_all(parent).map_err(|e| Error::Io {
        what: format!("creating {}", parent.display()),
        source: e,
    })?;
    let limit = Duration::from_secs(600);
    let source = task.repo_source(tasks_dir);
    must(
        &format!(
            "git clone --quiet --no-checkout {} {}",
            quote(&source),
            quote(&dest.to_string_lossy())
        ),
        parent,
        &[],
        limit,
    )
    .await?;
    let commit = quote(&task.base_commit);
    let found = sh(
        &format!("git cat-file -e {commit}^{{commit}}"),
        dest,
        &[],
        limit,
    )
    .await?;
    if found.exit_code != Some(0) {
        return Err(Error::Failed(format!(
            "{}: base_commit {} is not in the repository {source}",
            task.instance_id, task.base_commit
        )));
    }
    must(
        &format!(
            "git checkout --quiet -B {BRANCH} {commit} && git config user.name trellis-eval \
             && git config user.email eval@trellis.invalid && git config commit.gpgsign false"
        ),
        dest,
        &[],
        limit,
    )
    .await?;
    Ok(())
}

/// The set-up environment of `task` under `envs`: set up by the task's `setup` commands in
/// a checkout of its own the first time its `env_key` is asked for, and reused afterwards.
/// A failed setup leaves nothing marked ready (the next call tries again).
pub async fn environment(
    task: &Task,
    tasks_dir: &Path,
    envs: &Path,
    timeout: Duration,
) -> Result<PathBuf> {
    let key: String = task
        .environment
        .env_key
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || "-_.".contains(c) {
                c
            } else {
                '_'
            }
        })
        .collect();
    let dir = envs.join(&key);
    if dir.join(READY).is_file() {
        return Ok(dir);
    }
    if dir.exists() {
        std::fs::remove_dir_all(&dir).map_err(|e| Error::Io {
            what: format!("removing the unfinished environment {}", dir.display()),
            source: e,
        })?;
    }
    std::fs::create_dir_all(&dir).map_err(|e| Error::Io {
        what: format!("creating {}", dir.display()),
        source: e,
    })?;
    let work = envs.join(format!(".setup-{key}"));
    checkout(task, tasks_dir, &work).await?;
    let var = [(ENV_VAR, dir.to_string_lossy().into_owned())];
    for command in &task.environment.setup {
        must(command, &work, &var, timeout).await.map_err(|e| {
            Error::Failed(format!(
                "setting up the environment `{}` (task {}): {e}",
                task.environment.env_key, task.instance_id
            ))
        })?;
    }
    std::fs::write(dir.join(READY), &task.base_commit).map_err(|e| Error::Io {
        what: format!("marking {} ready", dir.display()),
        source: e,
    })?;
    let _ = std::fs::remove_dir_all(&work);
    Ok(dir)
}
