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
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::Value;
use tokio_util::sync::CancellationToken;
use trellis_protocol::RunId;
pub use trellis_protocol::hooks::{HookConfig, HookEvent};
use trellis_sandbox::{Preset, Sandbox, SandboxConfig, SandboxPolicy};
use trellis_store::ToolCallRecord;

use crate::builtin::{run_shell_fed, scrubbed_env};
use crate::config::ShellConfig;
use crate::record::{ToolCallSink, now_ms, summarize};

/// The configuration list section (`[[hooks]]`).
pub const SECTION: &str = "hooks";

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

/// A hook and where it was declared, for problems: `before_tool #1 of [[hooks]]`, or
/// `workflow my_flow.yaml, hooks[0]`.
#[derive(Clone, Debug)]
struct Declared {
    hook: HookConfig,
    source: String,
}

/// What every [`Hooks`] of a workspace shares: where and how hooks run, the record, the
/// breakages already said and the hooks started beside runs.
struct Shared {
    repo: std::path::PathBuf,
    shell: ShellConfig,
    sandbox: SandboxConfig,
    sink: Option<Arc<dyn ToolCallSink>>,
    /// (hook source, run) pairs whose breakage was reported.
    reported: Mutex<HashSet<(String, Option<RunId>)>>,
    /// Hooks started with [`Hooks::spawn`], waited for by [`Hooks::settle`].
    tasks: tokio_util::task::TaskTracker,
    /// The longest `timeout_secs` of any hook that may have been started.
    longest: AtomicU64,
}

/// The hooks of a workspace (`[[hooks]]`), or of one run: the workspace's followed by its
/// workflow's ([`Hooks::with_workflow`]), sharing the workspace's record and tasks.
pub struct Hooks {
    hooks: Vec<Declared>,
    shared: Arc<Shared>,
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
        let hooks: Vec<Declared> = hooks
            .into_iter()
            .enumerate()
            .map(|(i, hook)| Declared {
                source: format!("{} #{i} of [[hooks]]", hook.event.as_str()),
                hook,
            })
            .collect();
        let longest = hooks.iter().map(|h| h.hook.timeout_secs).max();
        Self {
            hooks,
            shared: Arc::new(Shared {
                repo: repo.to_path_buf(),
                shell,
                sandbox,
                sink,
                reported: Mutex::new(HashSet::new()),
                tasks: tokio_util::task::TaskTracker::new(),
                longest: AtomicU64::new(longest.unwrap_or(0)),
            }),
        }
    }

    /// These hooks followed by a workflow's, each with where it was declared (`workflow
    /// my_flow.yaml, hooks[0]`): the hooks of a run of that workflow. They share this
    /// value's record, reported breakages and tasks ([`Hooks::settle`] waits for theirs).
    pub fn with_workflow(&self, workflow: impl IntoIterator<Item = (HookConfig, String)>) -> Self {
        let mut hooks = self.hooks.clone();
        for (hook, source) in workflow {
            self.shared
                .longest
                .fetch_max(hook.timeout_secs, Ordering::Relaxed);
            hooks.push(Declared { hook, source });
        }
        Self {
            hooks,
            shared: self.shared.clone(),
        }
    }

    /// Runs `hooks` (a [`Hooks::run`]) in a task of its own: the caller does not wait;
    /// [`Hooks::settle`] does.
    pub fn spawn(&self, hooks: impl std::future::Future<Output = ()> + Send + 'static) {
        self.shared.tasks.spawn(hooks);
    }

    /// Waits for the hooks started with [`Hooks::spawn`] (of this value and of every one
    /// made from it with [`Hooks::with_workflow`]) — at most the longest hook's timeout and
    /// 2 s more (a process about to exit lets its last hooks finish).
    pub async fn settle(&self) {
        let longest = self.shared.longest.load(Ordering::Relaxed);
        let tasks = &self.shared.tasks;
        tasks.close();
        let _ = tokio::time::timeout(Duration::from_secs(longest + 2), tasks.wait()).await;
        tasks.reopen();
    }

    /// Whether any hook is configured for `event`.
    pub fn any(&self, event: HookEvent) -> bool {
        self.hooks.iter().any(|h| h.hook.event == event)
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
        for declared in &self.hooks {
            let Declared { hook, source } = declared;
            if !hook.applies(event, scope.tool, scope.workflow) {
                continue;
            }
            let verdict = self.run_one(declared, &scope, input.clone()).await;
            match verdict {
                HookVerdict::Passed => {}
                HookVerdict::Objected(message) => {
                    objections.push(format!("`{}`: {message}", hook.label()));
                    if stop_at_objection {
                        break;
                    }
                }
                HookVerdict::Broken(why) => self.report_once(source, scope.run, hook, &why),
            }
        }
        objections
    }

    fn report_once(&self, source: &str, run: Option<&RunId>, hook: &HookConfig, why: &str) {
        let first = self
            .shared
            .reported
            .lock()
            .map(|mut r| r.insert((source.to_owned(), run.cloned())))
            .unwrap_or(true);
        if first {
            let message = format!(
                "hook `{}` ({source}): {why}; it was skipped (fix its `command` or raise its \
                 `timeout_secs`)",
                hook.label(),
            );
            eprintln!("warning: {message}");
            tracing::warn!("{message}");
        }
    }

    async fn run_one(
        &self,
        declared: &Declared,
        scope: &HookScope<'_>,
        input: Vec<u8>,
    ) -> HookVerdict {
        let hook = &declared.hook;
        let started_at = now_ms();
        let clock = Instant::now();
        let shared = &*self.shared;
        let mut env = scrubbed_env(&shared.shell, std::env::vars());
        env.push(("TRELLIS_HOOK_EVENT".into(), hook.event.as_str().into()));
        env.push(("TRELLIS_REPO".into(), shared.repo.display().to_string()));
        if let Some(run) = scope.run {
            env.push(("TRELLIS_RUN_ID".into(), run.as_str().to_owned()));
        }
        let outcome = match Sandbox::new(shared.sandbox.mode) {
            Err(e) => Err(e.to_string()),
            Ok(sandbox) => {
                let preset = hook.preset.unwrap_or(Preset::WorkspaceWrite);
                let policy = SandboxPolicy::for_worktree(
                    scope.cwd,
                    preset,
                    &shared.sandbox,
                    trellis_sandbox::home_dir().as_deref(),
                    trellis_sandbox::trellis_config_dir().as_deref(),
                );
                run_shell_fed(
                    &hook.command,
                    scope.cwd,
                    env,
                    &shared.shell,
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
        if let Some(sink) = &shared.sink {
            sink.record(ToolCallRecord {
                id: 0,
                run_id: scope.run.cloned(),
                node_id: scope.node.map(str::to_owned),
                tool: format!("hook:{}", hook.event.as_str()),
                args: serde_json::json!({
                    "hook": hook.label(),
                    "tool": scope.tool,
                    "source": declared.source,
                })
                .to_string(),
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
