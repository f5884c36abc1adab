//! What a tool call can see: the workspace, the configuration, the user (through
//! [`Interaction`]), the cancellation token and the run it belongs to.

use std::sync::{Arc, Mutex};

use serde::Serialize;
use serde_json::Value;
use tokio_util::sync::CancellationToken;
use trellis_protocol::RunId;

use crate::config::{Action, ToolsConfig};
use crate::error::{Error, Result};
use crate::interaction::{ApprovalDecision, ApprovalRequest, Interaction};
use crate::policy::CommandClass;
use crate::workspace::Workspace;

/// Shared, long-lived state of the tools of one agent (or one run): cloned cheaply.
#[derive(Clone)]
pub struct ToolEnv {
    /// The workspace (the run's worktree).
    pub workspace: Workspace,
    /// The tools configuration.
    pub config: Arc<ToolsConfig>,
    /// How to ask the user.
    pub interaction: Arc<dyn Interaction>,
    /// The run the calls belong to, if any.
    pub run: Option<RunId>,
    /// The graph node making the calls, if any.
    pub node: Option<String>,
    /// The base commit of the run's worktree, for `git_diff` against the run's start.
    pub base_commit: Option<String>,
    /// The workflow of the run, if any (the sandbox's per-workflow preset).
    pub workflow: Option<String>,
    /// Notes taken with `take_note`.
    pub notes: Arc<Mutex<Vec<Note>>>,
    /// The tool knowledge graph's advice (speculation), if the runtime has one.
    pub advisor: Option<Arc<dyn crate::advice::ToolAdvisor>>,
    /// Where paused tool DAG executions are kept (in memory unless the runtime gives the
    /// workspace store's).
    pub checkpoints: Arc<dyn crate::dag::Checkpoints>,
}

impl std::fmt::Debug for ToolEnv {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ToolEnv")
            .field("workspace", &self.workspace.root())
            .field("run", &self.run)
            .field("node", &self.node)
            .finish_non_exhaustive()
    }
}

impl ToolEnv {
    /// An environment over `workspace` with `config` and `interaction`, not tied to a run.
    pub fn new(
        workspace: Workspace,
        config: Arc<ToolsConfig>,
        interaction: Arc<dyn Interaction>,
    ) -> Self {
        Self {
            workspace,
            config,
            interaction,
            run: None,
            node: None,
            base_commit: None,
            workflow: None,
            notes: Arc::default(),
            advisor: None,
            checkpoints: Arc::new(crate::dag::MemoryCheckpoints::default()),
        }
    }

    /// The notes taken so far.
    pub fn notes(&self) -> Vec<Note> {
        self.notes.lock().map(|n| n.clone()).unwrap_or_default()
    }
}

/// A note taken by an agent.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Note {
    /// The note.
    pub text: String,
    /// Tags.
    pub tags: Vec<String>,
}

/// How a call was authorised; recorded with every call.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Decision {
    /// Nothing needed approval.
    #[default]
    Auto,
    /// The policy allowed it (a gated action whose class is set to `allow`).
    Allowed,
    /// The user approved it.
    Approved,
    /// The user denied it.
    Denied,
    /// The policy denied it.
    PolicyDenied,
}

impl Decision {
    /// The name used in records.
    pub fn as_str(self) -> &'static str {
        match self {
            Decision::Auto => "auto",
            Decision::Allowed => "allowed",
            Decision::Approved => "approved",
            Decision::Denied => "denied",
            Decision::PolicyDenied => "policy_denied",
        }
    }
}

/// How far a long tool call has got (an MCP server's `notifications/progress`).
#[derive(Clone, Debug, PartialEq)]
pub struct ToolProgress {
    /// Work done so far; increases with every report.
    pub progress: f64,
    /// Total work, when known.
    pub total: Option<f64>,
    /// What the tool is doing now.
    pub message: Option<String>,
}

/// Where a call's progress reports go (the agent turns them into session events).
pub type ProgressFn = Arc<dyn Fn(ToolProgress) + Send + Sync>;

/// One call's view: the environment, its cancellation token and its decision slot.
pub struct ToolContext {
    /// The shared environment.
    pub env: ToolEnv,
    /// Cancels this call.
    pub cancel: CancellationToken,
    /// The tool being called.
    pub tool: String,
    /// The call's arguments (for approval requests).
    pub args: Value,
    /// The role making the call, when the registry knows it (the sandbox's per-role preset).
    pub role: Option<String>,
    decision: Mutex<Decision>,
    progress: Option<ProgressFn>,
}

impl ToolContext {
    /// A context for one call of `tool`.
    pub fn new(env: ToolEnv, tool: &str, args: Value, cancel: CancellationToken) -> Self {
        Self {
            env,
            cancel,
            tool: tool.to_owned(),
            args,
            role: None,
            decision: Mutex::new(Decision::Auto),
            progress: None,
        }
    }

    /// Names the role making the call.
    #[must_use]
    pub fn with_role(mut self, role: &str) -> Self {
        self.role = Some(role.to_owned());
        self
    }

    /// Sends this call's progress reports to `progress`.
    #[must_use]
    pub fn with_progress(mut self, progress: Option<ProgressFn>) -> Self {
        self.progress = progress;
        self
    }

    /// Whether anyone listens to this call's progress (a tool may skip asking for it).
    pub fn wants_progress(&self) -> bool {
        self.progress.is_some()
    }

    /// Reports how far the call has got (nothing happens when nobody listens).
    pub fn report_progress(&self, progress: ToolProgress) {
        if let Some(f) = &self.progress {
            f(progress);
        }
    }

    /// The workspace.
    pub fn workspace(&self) -> &Workspace {
        &self.env.workspace
    }

    /// The configuration.
    pub fn config(&self) -> &ToolsConfig {
        &self.env.config
    }

    /// How the call was authorised so far.
    pub fn decision(&self) -> Decision {
        self.decision.lock().map(|d| *d).unwrap_or_default()
    }

    fn set_decision(&self, d: Decision) {
        if let Ok(mut slot) = self.decision.lock() {
            *slot = d;
        }
    }

    /// Applies the policy `action` to a gated operation: returns `Ok` to proceed, or
    /// [`Error::Denied`]. `ask` goes to the user through [`Interaction::approve`].
    pub async fn gate(
        &self,
        action: Action,
        reason: String,
        class: Option<CommandClass>,
    ) -> Result<()> {
        match action {
            Action::Allow => {
                self.set_decision(Decision::Allowed);
                Ok(())
            }
            Action::Deny => {
                self.set_decision(Decision::PolicyDenied);
                Err(Error::Denied(format!(
                    "{reason}; the workspace policy forbids this, so do not retry it — find \
                     another way or explain what you need to the user"
                )))
            }
            Action::Ask => {
                let request = ApprovalRequest {
                    tool: self.tool.clone(),
                    args: self.args.clone(),
                    reason: reason.clone(),
                    class,
                };
                let answer = tokio::select! {
                    biased;
                    () = self.cancel.cancelled() => return Err(Error::Cancelled),
                    a = self.env.interaction.approve(request) => a?,
                };
                match answer {
                    ApprovalDecision::Approve => {
                        self.set_decision(Decision::Approved);
                        Ok(())
                    }
                    ApprovalDecision::Deny { reason: why } => {
                        self.set_decision(Decision::Denied);
                        Err(Error::Denied(match why {
                            Some(why) => format!("the user declined ({reason}): {why}"),
                            None => format!("the user declined ({reason})"),
                        }))
                    }
                }
            }
        }
    }
}
