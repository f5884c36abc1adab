//! `shell`: one command line in the workspace, under the policy, inside the OS sandbox
//! (trellis-sandbox: `[sandbox]`), with a timeout, an output cap and a scrubbed environment;
//! the whole process group dies on timeout or cancel.

use std::collections::VecDeque;
use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use tokio::io::{AsyncRead, AsyncReadExt};
use tokio_util::sync::CancellationToken;

use crate::config::ShellConfig;
use crate::context::ToolContext;
use crate::error::{Error, Result};
use crate::policy::{self, CommandClass};
use crate::tool::TypedTool;
use trellis_sandbox::{CommandSpec, Sandbox, SandboxPolicy};

/// Environment variables passed to commands unless configured otherwise.
pub const ENV_ALLOW: &[&str] = &[
    "PATH",
    "HOME",
    "USER",
    "LOGNAME",
    "SHELL",
    "LANG",
    "LANGUAGE",
    "TERM",
    "TZ",
    "TMPDIR",
    "TEMP",
    "TMP",
    "CARGO_HOME",
    "RUSTUP_HOME",
    "RUSTUP_TOOLCHAIN",
    "CARGO_TARGET_DIR",
    "GOPATH",
    "GOROOT",
    "GOCACHE",
    "GOMODCACHE",
    "JAVA_HOME",
    "VIRTUAL_ENV",
    "CONDA_PREFIX",
    "PYTHONPATH",
    "NODE_PATH",
    "NVM_DIR",
    "PNPM_HOME",
    "SSL_CERT_FILE",
    "SSL_CERT_DIR",
    "XDG_CACHE_HOME",
    "XDG_CONFIG_HOME",
    "XDG_DATA_HOME",
    "XDG_RUNTIME_DIR",
];

/// Name fragments that mark a variable as secret; such variables are never passed, even
/// when allow-listed.
pub const SECRET_NAME_PARTS: &[&str] = &[
    "KEY",
    "TOKEN",
    "SECRET",
    "PASSWORD",
    "PASSWD",
    "PASSPHRASE",
    "CREDENTIAL",
    "AUTH",
    "COOKIE",
    "SESSION",
    "PRIVATE",
];

/// The environment a command gets: the allow list (built-in plus configured, `LC_*`
/// included) from `from`, minus anything whose name looks secret, plus non-interactive
/// settings for pagers and git prompts.
pub fn scrubbed_env(
    config: &ShellConfig,
    from: impl IntoIterator<Item = (String, String)>,
) -> Vec<(String, String)> {
    let mut env: Vec<(String, String)> = from
        .into_iter()
        .filter(|(k, _)| {
            ENV_ALLOW.contains(&k.as_str())
                || k.starts_with("LC_")
                || config.env_allow.iter().any(|a| a == k)
        })
        .filter(|(k, _)| {
            let upper = k.to_ascii_uppercase();
            !SECRET_NAME_PARTS.iter().any(|p| upper.contains(p))
        })
        .collect();
    for (k, v) in [
        ("PAGER", "cat"),
        ("GIT_PAGER", "cat"),
        ("GIT_TERMINAL_PROMPT", "0"),
    ] {
        env.push((k.to_owned(), v.to_owned()));
    }
    env
}

/// What a command did.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ShellOutcome {
    /// Exit code (`None` if killed by a signal).
    pub exit_code: Option<i32>,
    /// Standard output (head and tail kept when over the cap).
    pub stdout: String,
    /// Standard error (likewise).
    pub stderr: String,
    /// Whether the timeout expired (the process group was killed).
    pub timed_out: bool,
    /// Wall time.
    pub duration_ms: u64,
    /// The command's class under the policy.
    pub class: Option<CommandClass>,
    /// The sandbox it ran in (`bwrap`, `landlock`, or `off`: unsandboxed).
    pub sandbox: String,
}

/// Kills a process group when dropped (or asked), so no exit path leaves it running.
struct GroupGuard(Option<i32>);

impl GroupGuard {
    fn kill(&mut self) {
        if let Some(pgid) = self.0.take()
            // Never signal init or our own group.
            && pgid > 1
            && let Some(pid) = rustix::process::Pid::from_raw(pgid)
        {
            let _ = rustix::process::kill_process_group(pid, rustix::process::Signal::KILL);
        }
    }
}

impl Drop for GroupGuard {
    fn drop(&mut self) {
        self.kill();
    }
}

/// Bytes kept from a stream: all of it up to `max`, then the first two thirds and the
/// last third of the cap.
struct Capped {
    max: usize,
    head: Vec<u8>,
    tail: VecDeque<u8>,
    total: usize,
}

impl Capped {
    fn new(max: usize) -> Self {
        Self {
            max,
            head: Vec::new(),
            tail: VecDeque::new(),
            total: 0,
        }
    }

    fn push(&mut self, chunk: &[u8]) {
        self.total += chunk.len();
        for b in chunk {
            if self.head.len() < self.max {
                self.head.push(*b);
            } else {
                self.tail.push_back(*b);
                if self.tail.len() > self.max / 3 {
                    self.tail.pop_front();
                }
            }
        }
    }

    fn finish(mut self) -> String {
        if self.total <= self.max {
            return String::from_utf8_lossy(&self.head).into_owned();
        }
        let keep = self.max * 2 / 3;
        self.head.truncate(keep);
        let tail: Vec<u8> = self.tail.into_iter().collect();
        let omitted = self.total - keep - tail.len();
        format!(
            "{}\n… [{omitted} bytes omitted] …\n{}",
            String::from_utf8_lossy(&self.head),
            String::from_utf8_lossy(&tail)
        )
    }
}

async fn read_capped(mut r: impl AsyncRead + Unpin, max: usize) -> String {
    let mut c = Capped::new(max);
    let mut buf = vec![0u8; 8192];
    loop {
        match r.read(&mut buf).await {
            Ok(0) | Err(_) => break,
            Ok(n) => c.push(buf.get(..n).unwrap_or_default()),
        }
    }
    c.finish()
}

/// Runs `command` with `config.shell -c` in `cwd`, with exactly the environment `env`, in
/// its own process group, unsandboxed (the harness's own setup steps); see
/// [`run_shell_sandboxed`].
pub async fn run_shell(
    command: &str,
    cwd: &Path,
    env: Vec<(String, String)>,
    config: &ShellConfig,
    timeout: Duration,
    cancel: &CancellationToken,
) -> Result<ShellOutcome> {
    let off = Sandbox::off();
    run_shell_sandboxed(
        command,
        cwd,
        env,
        config,
        timeout,
        cancel,
        (&off, &SandboxPolicy::default()),
    )
    .await
}

/// Runs `command` with `config.shell -c` in `cwd` inside `sandbox` under its policy, with
/// exactly the environment `env`, in a new session (its own process group); kills the
/// group on timeout, on cancellation, and after the command exits (so background children
/// do not outlive the call). A command the sandbox cannot wrap is an error naming why.
pub async fn run_shell_sandboxed(
    command: &str,
    cwd: &Path,
    env: Vec<(String, String)>,
    config: &ShellConfig,
    timeout: Duration,
    cancel: &CancellationToken,
    sandboxed: (&Sandbox, &SandboxPolicy),
) -> Result<ShellOutcome> {
    run_shell_fed(
        command,
        cwd,
        env,
        config,
        (timeout, cancel),
        sandboxed,
        None,
    )
    .await
}

/// [`run_shell_sandboxed`] with `stdin` written to the command's standard input (then
/// closed; a command that does not read it is not waited for) — hooks get their event so.
pub async fn run_shell_fed(
    command: &str,
    cwd: &Path,
    env: Vec<(String, String)>,
    config: &ShellConfig,
    (timeout, cancel): (Duration, &CancellationToken),
    (sandbox, policy): (&Sandbox, &SandboxPolicy),
    stdin: Option<Vec<u8>>,
) -> Result<ShellOutcome> {
    let started = Instant::now();
    let spec = CommandSpec {
        program: config.shell.clone().into(),
        args: vec!["-c".into(), command.into()],
        cwd: cwd.to_path_buf(),
        env: env.into_iter().map(|(k, v)| (k.into(), v.into())).collect(),
    };
    let wrapped = sandbox
        .wrap(&spec, policy)
        .map_err(|e| Error::Failed(e.to_string()))?;
    let backend = wrapped.backend;
    let _guard = wrapped.guard;
    let mut child = tokio::process::Command::from(wrapped.command)
        .stdin(if stdin.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .map_err(|e| {
            Error::Failed(format!(
                "cannot start `{}` ({backend} sandbox): {e}",
                config.shell
            ))
        })?;
    let mut guard = GroupGuard(child.id().and_then(|id| i32::try_from(id).ok()));
    if let (Some(bytes), Some(mut pipe)) = (stdin, child.stdin.take()) {
        // Written beside the wait: a large input to a command that reads it late (or not
        // at all: a broken pipe is fine) never blocks the timeout.
        tokio::spawn(async move {
            let _ = tokio::io::AsyncWriteExt::write_all(&mut pipe, &bytes).await;
        });
    }
    let max = config.max_output_bytes;
    let out = child
        .stdout
        .take()
        .map(|s| tokio::spawn(read_capped(s, max)));
    let err = child
        .stderr
        .take()
        .map(|s| tokio::spawn(read_capped(s, max)));
    let mut timed_out = false;
    let status = tokio::select! {
        s = child.wait() => Some(s),
        () = tokio::time::sleep(timeout) => { timed_out = true; None }
        () = cancel.cancelled() => None,
    };
    guard.kill();
    let status = match status {
        Some(s) => s,
        None => child.wait().await,
    }
    .map_err(|e| Error::Failed(format!("waiting for the command: {e}")))?;
    if cancel.is_cancelled() && !timed_out && status.code().is_none() {
        return Err(Error::Cancelled);
    }
    // A process that left the group (setsid) may still hold the pipes: do not wait forever.
    let collect = |h: Option<tokio::task::JoinHandle<String>>| async move {
        match h {
            Some(h) => tokio::time::timeout(Duration::from_secs(2), h)
                .await
                .ok()
                .and_then(|r| r.ok())
                .unwrap_or_default(),
            None => String::new(),
        }
    };
    let stdout = collect(out).await;
    let stderr = collect(err).await;
    Ok(ShellOutcome {
        exit_code: status.code(),
        stdout,
        stderr,
        timed_out,
        duration_ms: u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX),
        class: None,
        sandbox: backend.to_owned(),
    })
}

/// `shell` arguments.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ShellInput {
    /// The command line (run with `bash -c`).
    pub command: String,
    /// Timeout in seconds (default from the configuration, 120).
    #[serde(default)]
    pub timeout_secs: Option<u64>,
    /// Working directory relative to the workspace root (default: the root).
    #[serde(default)]
    pub workdir: Option<String>,
}

/// Runs a shell command.
pub struct Shell;

impl TypedTool for Shell {
    type Input = ShellInput;
    type Output = ShellOutcome;

    fn name(&self) -> &'static str {
        "shell"
    }

    fn description(&self) -> &'static str {
        "Run a shell command line in the workspace (bash -c). Commands are classified \
         (read-only, writes-workspace, network, destructive) and the workspace policy may \
         allow, ask the user, or deny. Secrets are not in the environment; there is no stdin; \
         output is capped; the command and all its children are killed at the timeout."
    }

    async fn run(&self, ctx: &ToolContext, input: ShellInput) -> Result<ShellOutcome> {
        let cfg = &ctx.config().shell;
        let mut verdict = policy::evaluate(&input.command, &ctx.config().policy, ctx.workspace());
        // Inside the sandbox an unrecognised command (a local script, an interpreter) can
        // write only what the sandbox lets it: the worktree. It is decided as a write to the
        // workspace; network and destructive commands still ask or are denied.
        if ctx.config().sandbox.mode != trellis_sandbox::Mode::Off
            && verdict.class == CommandClass::Unknown
        {
            verdict.action =
                policy::class_action(&ctx.config().policy, CommandClass::WritesWorkspace);
        }
        let reason = if verdict.reasons.is_empty() {
            format!("`{}` is {}", input.command, verdict.class)
        } else {
            verdict.reasons.join("; ")
        };
        ctx.gate(verdict.action, reason, Some(verdict.class))
            .await?;
        let cwd = ctx
            .workspace()
            .resolve(input.workdir.as_deref().unwrap_or("."))?;
        let secs = input
            .timeout_secs
            .unwrap_or(cfg.timeout_secs)
            .clamp(1, cfg.max_timeout_secs.max(1));
        let (sandbox, policy) = command_sandbox(ctx)?;
        let env = scrubbed_env(cfg, std::env::vars());
        let mut out = run_shell_sandboxed(
            &input.command,
            &cwd.abs,
            env,
            cfg,
            Duration::from_secs(secs),
            &ctx.cancel,
            (&sandbox, &policy),
        )
        .await?;
        out.class = Some(verdict.class);
        Ok(out)
    }

    fn render(&self, o: &ShellOutcome) -> String {
        let mut s = String::new();
        if o.sandbox == "off" {
            s.push_str("warning: ");
            s.push_str(trellis_sandbox::OFF_WARNING);
            s.push('\n');
        }
        s.push_str(&match (o.timed_out, o.exit_code) {
            (true, _) => format!(
                "timed out after {} ms; the command and its children were killed\n",
                o.duration_ms
            ),
            (false, Some(c)) => format!("exit code {c}\n"),
            (false, None) => "killed by a signal\n".to_owned(),
        });
        if !o.stdout.is_empty() {
            s.push_str("--- stdout ---\n");
            s.push_str(&o.stdout);
            if !o.stdout.ends_with('\n') {
                s.push('\n');
            }
        }
        if !o.stderr.is_empty() {
            s.push_str("--- stderr ---\n");
            s.push_str(&o.stderr);
        }
        s
    }
}

/// The sandbox and policy of a command run by this call: `[sandbox] mode`, the preset of
/// the call's workflow and role, the workspace writable, the home directory and Trellis's
/// configuration hidden. Refused (an error naming the cause and the setting) when the
/// sandbox cannot be set up.
fn command_sandbox(ctx: &ToolContext) -> Result<(Sandbox, SandboxPolicy)> {
    let cfg = &ctx.config().sandbox;
    let sandbox = Sandbox::new(cfg.mode).map_err(|e| Error::Failed(e.to_string()))?;
    if sandbox.is_off() {
        tracing::warn!("{}", trellis_sandbox::OFF_WARNING);
    }
    let preset = cfg.preset_for(ctx.env.workflow.as_deref(), ctx.role.as_deref());
    let policy = SandboxPolicy::for_worktree(
        ctx.workspace().root(),
        preset,
        cfg,
        trellis_sandbox::home_dir().as_deref(),
        trellis_sandbox::trellis_config_dir().as_deref(),
    );
    Ok((sandbox, policy))
}
