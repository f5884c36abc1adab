//! Hooks: the user's own commands around agent actions (`[[hooks]]`, docs/conventions.md).
//! A hook gets its event as JSON on standard input and runs with `shell -c` inside the OS
//! sandbox (its `preset`, default workspace-write) in the worktree, with the scrubbed
//! environment of agent commands plus `TRELLIS_HOOK_EVENT`, `TRELLIS_RUN_ID` and
//! `TRELLIS_REPO`.
//!
//! - `before_tool`: a non-zero exit denies the call; the hook's message (stderr, else
//!   stdout) goes back to the agent as the call's result.
//! - `after_tool`: runs after the call (a formatter after a write); a non-zero exit's
//!   message is added to the result the agent sees.
//! - `needs_input`, `run_end`, `stage_failed`: told, never waited for by the run.
//!
//! A hook that cannot start or outlives its `timeout_secs` (killed with its children)
//! changes nothing — the call goes ahead, the run goes on — and is reported once per run;
//! every hook run is recorded with the run's tool calls as `hook:<event>`.

use std::collections::HashSet;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use tokio_util::sync::CancellationToken;
use trellis_protocol::RunId;
use trellis_sandbox::{Preset, Sandbox, SandboxConfig, SandboxPolicy};
use trellis_store::ToolCallRecord;

use crate::builtin::{run_shell_fed, scrubbed_env};
use crate::config::ShellConfig;
use crate::record::{ToolCallSink, now_ms, summarize};

/// The configuration list section (`[[hooks]]`).
pub const SECTION: &str = "hooks";

/// When a hook runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum HookEvent {
    /// Before a tool call; a non-zero exit denies it.
    BeforeTool,
    /// After a tool call.
    AfterTool,
    /// A run waits for the user (an approval, a question, a gate).
    NeedsInput,
    /// A run ended (succeeded, failed or cancelled).
    RunEnd,
    /// A stage (workflow node) failed.
    StageFailed,
}

impl HookEvent {
    /// The configuration name.
    pub fn as_str(self) -> &'static str {
        match self {
            HookEvent::BeforeTool => "before_tool",
            HookEvent::AfterTool => "after_tool",
            HookEvent::NeedsInput => "needs_input",
            HookEvent::RunEnd => "run_end",
            HookEvent::StageFailed => "stage_failed",
        }
    }
}

fn default_timeout() -> u64 {
    30
}

/// One `[[hooks]]` entry.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct HookConfig {
    /// When it runs.
    pub event: HookEvent,
    /// The command line (`shell -c`), run in the run's worktree (the repository before the
    /// run has one).
    pub command: String,
    /// A name for records and messages (default: the command).
    #[serde(default)]
    pub name: Option<String>,
    /// `before_tool` / `after_tool`: only calls of these tools (`prefix*` allowed); all when
    /// empty.
    #[serde(default)]
    pub tools: Vec<String>,
    /// Only runs of these workflows; all when empty.
    #[serde(default)]
    pub workflows: Vec<String>,
    /// Seconds before the hook and its children are killed.
    #[serde(default = "default_timeout")]
    pub timeout_secs: u64,
    /// The sandbox preset it runs under (default `workspace-write`; a hook that posts to a
    /// chat needs `workspace-write-network`).
    #[serde(default)]
    pub preset: Option<Preset>,
}

impl HookConfig {
    /// Its name in records and messages.
    pub fn label(&self) -> &str {
        self.name.as_deref().unwrap_or(&self.command)
    }

    fn applies(&self, event: HookEvent, tool: Option<&str>, workflow: Option<&str>) -> bool {
        let listed = |list: &[String], name: Option<&str>| {
            list.is_empty()
                || name.is_some_and(|n| {
                    list.iter().any(|l| match l.strip_suffix('*') {
                        Some(prefix) => n.starts_with(prefix),
                        None => l == n,
                    })
                })
        };
        self.event == event && listed(&self.tools, tool) && listed(&self.workflows, workflow)
    }
}

/// What one hook run did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum HookVerdict {
    /// Exit 0.
    Passed,
    /// A non-zero exit, with its message.
    Objected(String),
    /// It could not start or was killed at its timeout: it counts for nothing.
    Broken(String),
}

/// Where and for what a hook runs.
#[derive(Clone, Copy, Debug)]
pub struct HookScope<'a> {
    /// The run.
    pub run: Option<&'a RunId>,
    /// The graph node (stage) for the record.
    pub node: Option<&'a str>,
    /// The run's workflow.
    pub workflow: Option<&'a str>,
    /// The tool, for tool events.
    pub tool: Option<&'a str>,
    /// The directory it runs in (and may write under its preset).
    pub cwd: &'a Path,
}

/// The configured hooks of a workspace.
pub struct Hooks {
    hooks: Vec<HookConfig>,
    repo: std::path::PathBuf,
    shell: ShellConfig,
    sandbox: SandboxConfig,
    sink: Option<Arc<dyn ToolCallSink>>,
    /// (hook index, run) pairs whose breakage was reported.
    reported: Mutex<HashSet<(usize, Option<RunId>)>>,
    /// Hooks started with [`Hooks::spawn`], waited for by [`Hooks::settle`].
    tasks: tokio_util::task::TaskTracker,
}

impl std::fmt::Debug for Hooks {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Hooks")
            .field("hooks", &self.hooks)
            .finish_non_exhaustive()
    }
}

impl Hooks {
    /// The hooks of the repository at `repo`, running with `shell`'s settings under
    /// `sandbox`; every run recorded into `sink`.
    pub fn new(
        hooks: Vec<HookConfig>,
        repo: &Path,
        shell: ShellConfig,
        sandbox: SandboxConfig,
        sink: Option<Arc<dyn ToolCallSink>>,
    ) -> Self {
        Self {
            hooks,
            repo: repo.to_path_buf(),
            shell,
            sandbox,
            sink,
            reported: Mutex::new(HashSet::new()),
            tasks: tokio_util::task::TaskTracker::new(),
        }
    }

    /// Runs `hooks` (a [`Hooks::run`]) in a task of its own: the caller does not wait;
    /// [`Hooks::settle`] does.
    pub fn spawn(&self, hooks: impl std::future::Future<Output = ()> + Send + 'static) {
        self.tasks.spawn(hooks);
    }

    /// Waits for the hooks started with [`Hooks::spawn`] — at most the longest hook's
    /// timeout and 2 s more (a process about to exit lets its last hooks finish).
    pub async fn settle(&self) {
        let longest = self.hooks.iter().map(|h| h.timeout_secs).max().unwrap_or(0);
        self.tasks.close();
        let _ = tokio::time::timeout(Duration::from_secs(longest + 2), self.tasks.wait()).await;
        self.tasks.reopen();
    }

    /// Whether any hook is configured for `event`.
    pub fn any(&self, event: HookEvent) -> bool {
        self.hooks.iter().any(|h| h.event == event)
    }

    /// Runs every hook of `event` that applies to `scope`, in configuration order, with
    /// `payload` (the event's JSON; `event` and `run` are added) on stdin; stops at the
    /// first objection when `stop_at_objection`. The objections, each as "`label`: message".
    pub async fn run(
        &self,
        event: HookEvent,
        scope: HookScope<'_>,
        mut payload: Value,
        stop_at_objection: bool,
    ) -> Vec<String> {
        let mut objections = Vec::new();
        if let Value::Object(m) = &mut payload {
            m.insert("event".into(), Value::from(event.as_str()));
            if let Some(run) = scope.run {
                m.insert("run".into(), Value::from(run.as_str()));
            }
            if let Some(w) = scope.workflow {
                m.insert("workflow".into(), Value::from(w));
            }
        }
        let input = payload.to_string().into_bytes();
        for (i, hook) in self.hooks.iter().enumerate() {
            if !hook.applies(event, scope.tool, scope.workflow) {
                continue;
            }
            let verdict = self.run_one(hook, &scope, input.clone()).await;
            match verdict {
                HookVerdict::Passed => {}
                HookVerdict::Objected(message) => {
                    objections.push(format!("`{}`: {message}", hook.label()));
                    if stop_at_objection {
                        break;
                    }
                }
                HookVerdict::Broken(why) => self.report_once(i, scope.run, hook, &why),
            }
        }
        objections
    }

    fn report_once(&self, index: usize, run: Option<&RunId>, hook: &HookConfig, why: &str) {
        let first = self
            .reported
            .lock()
            .map(|mut r| r.insert((index, run.cloned())))
            .unwrap_or(true);
        if first {
            let message = format!(
                "hook `{}` ({} #{index} of [[hooks]]): {why}; it was skipped (fix its `command` or \
                 raise its `timeout_secs`)",
                hook.label(),
                hook.event.as_str()
            );
            eprintln!("warning: {message}");
            tracing::warn!("{message}");
        }
    }

    async fn run_one(
        &self,
        hook: &HookConfig,
        scope: &HookScope<'_>,
        input: Vec<u8>,
    ) -> HookVerdict {
        let started_at = now_ms();
        let clock = Instant::now();
        let mut env = scrubbed_env(&self.shell, std::env::vars());
        env.push(("TRELLIS_HOOK_EVENT".into(), hook.event.as_str().into()));
        env.push(("TRELLIS_REPO".into(), self.repo.display().to_string()));
        if let Some(run) = scope.run {
            env.push(("TRELLIS_RUN_ID".into(), run.as_str().to_owned()));
        }
        let outcome = match Sandbox::new(self.sandbox.mode) {
            Err(e) => Err(e.to_string()),
            Ok(sandbox) => {
                let preset = hook.preset.unwrap_or(Preset::WorkspaceWrite);
                let policy = SandboxPolicy::for_worktree(
                    scope.cwd,
                    preset,
                    &self.sandbox,
                    trellis_sandbox::home_dir().as_deref(),
                    trellis_sandbox::trellis_config_dir().as_deref(),
                );
                run_shell_fed(
                    &hook.command,
                    scope.cwd,
                    env,
                    &self.shell,
                    (
                        Duration::from_secs(hook.timeout_secs.max(1)),
                        &CancellationToken::new(),
                    ),
                    (&sandbox, &policy),
                    Some(input),
                )
                .await
                .map_err(|e| e.to_string())
            }
        };
        let (verdict, output) = match outcome {
            Err(why) => (HookVerdict::Broken(format!("could not run: {why}")), why),
            Ok(o) => {
                let output = match (o.stdout.trim(), o.stderr.trim()) {
                    ("", e) => e.to_owned(),
                    (out, "") => out.to_owned(),
                    (out, e) => format!("{out}\n{e}"),
                };
                let verdict = match (o.timed_out, o.exit_code) {
                    (true, _) => HookVerdict::Broken(format!(
                        "did not finish within {} s and was killed",
                        hook.timeout_secs
                    )),
                    (false, Some(0)) => HookVerdict::Passed,
                    (false, Some(code)) => {
                        let message = if o.stderr.trim().is_empty() {
                            o.stdout.trim()
                        } else {
                            o.stderr.trim()
                        };
                        HookVerdict::Objected(if message.is_empty() {
                            format!("exit code {code}")
                        } else {
                            message.to_owned()
                        })
                    }
                    (false, None) => HookVerdict::Broken("was killed by a signal".into()),
                };
                (verdict, output)
            }
        };
        if let Some(sink) = &self.sink {
            sink.record(ToolCallRecord {
                id: 0,
                run_id: scope.run.cloned(),
                node_id: scope.node.map(str::to_owned),
                tool: format!("hook:{}", hook.event.as_str()),
                args: serde_json::json!({ "hook": hook.label(), "tool": scope.tool }).to_string(),
                decision: match &verdict {
                    HookVerdict::Passed => "passed",
                    HookVerdict::Objected(_) => "objected",
                    HookVerdict::Broken(_) => "broken",
                }
                .into(),
                is_error: verdict != HookVerdict::Passed,
                summary: summarize(&output, 200),
                duration_ms: i64::try_from(clock.elapsed().as_millis()).unwrap_or(i64::MAX),
                started_at,
            });
        }
        verdict
    }
}
