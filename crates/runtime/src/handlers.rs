//! The node handlers of a workflow run: each stage agent runs an [`AgentRun`] — one that
//! can edit in a worktree of its own whose work is committed there and merged into the
//! run's branch ([`crate::nodes`]), the others in the run's worktree — and its typed report
//! becomes the node's result (what routing, later stages and the user see).

mod activation;
pub(crate) mod retrieval;
mod worktrees;

use std::sync::{Arc, Weak};

use serde_json::{Value, json};
use trellis_agents::{AgentReport, RoleSpec, SessionSink};
use trellis_graph::{NodeContext, NodeError, NodeHandler, NodeOutput};
use trellis_llm::CallScope;
use trellis_protocol::{RunId, SessionEvent};
use trellis_tools::{Interaction, NonInteractive, Registry, ToolEnv, Workspace};
use trellis_workflow::{AgentSpec, Plan, StageContext, StageHandlers};

use crate::testcmd::{self, TestCommand};
use crate::text::clip;
use crate::{RunOptions, Runtime};

/// Everything the handlers of one run share.
pub struct RunContext {
    /// The workspace runtime.
    pub runtime: Arc<Runtime>,
    /// The run.
    pub run: RunId,
    /// Its worktree and branch, created when the run first needs them.
    pub space: crate::RunSpace,
    /// Tools, with every role's allow list; calls are recorded in the store. Replaced once
    /// when a run that started planning continues with its workflow (the plan grants tools).
    registry: std::sync::RwLock<Arc<Registry>>,
    /// The run's workflow once planned (the sandbox's per-workflow preset).
    workflow: std::sync::RwLock<Option<String>>,
    /// Budgets of the run.
    pub ledger: Arc<trellis_llm::BudgetLedger>,
    /// Input mode and progress sink.
    pub options: RunOptions,
    /// The project's test command, if any.
    pub test_command: Option<TestCommand>,
    /// The project's instructions as read when the run (or this process's part of it)
    /// started: every agent of the run is given the same.
    pub instructions: Arc<crate::instructions::Instructions>,
    /// The worktrees of the agents that edit.
    pub(crate) nodes: Arc<crate::nodes::NodeSpaces>,
    /// The retrieval agent, built on first use.
    pub(crate) retrieval: tokio::sync::OnceCell<Arc<trellis_agents::RetrievalAgent>>,
    /// The index's embedder with a vector cache, for the tool-schema budget (first use).
    tool_embedder: tokio::sync::OnceCell<Option<Arc<dyn trellis_index::Embedder>>>,
    me: Weak<RunContext>,
}

/// An activation's session: where its events go, its next turn number, and what it
/// recorded before a crash.
struct Opened {
    sink: Option<SessionSink>,
    first_turn: u32,
    recorded: Vec<SessionEvent>,
}

/// The registry allow list of `agent` in `stage` when the stage grants it MCP tools.
pub(crate) fn tool_scope(stage: &str, agent: &str) -> String {
    format!("{agent}@{stage}")
}

/// The smallest context window (tokens) of a model that summarises agents' conversations;
/// with a smaller one, compaction uses deterministic digests (`docs/context.md`).
pub const MIN_SUMMARY_WINDOW: u32 = 8192;

/// The `output` text of a stage agent's recorded result (empty when it has none).
pub(crate) fn output_text(result: &Value) -> String {
    result
        .get("output")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned()
}

fn node_error(e: impl std::fmt::Display) -> NodeError {
    NodeError::new(e.to_string())
}

impl RunContext {
    pub(crate) fn new(
        runtime: Arc<Runtime>,
        run: RunId,
        space: crate::RunSpace,
        nodes: crate::nodes::NodeSpaces,
        registry: Arc<Registry>,
        ledger: Arc<trellis_llm::BudgetLedger>,
        options: RunOptions,
    ) -> Arc<Self> {
        let instructions = runtime.instructions.get();
        let test_command = testcmd::detect(
            &space.read_root(),
            runtime.agents.test_command.as_deref(),
            &instructions,
        );
        Arc::new_cyclic(|me| Self {
            runtime,
            run,
            space,
            registry: std::sync::RwLock::new(registry),
            workflow: std::sync::RwLock::new(None),
            ledger,
            options,
            test_command,
            instructions,
            nodes: Arc::new(nodes),
            retrieval: tokio::sync::OnceCell::new(),
            tool_embedder: tokio::sync::OnceCell::new(),
            me: me.clone(),
        })
    }

    /// Stores the run's instructions as its `instructions` artifact (which files, their
    /// hashes, what could not be read) unless the latest stored version says the same: a
    /// resumed run whose files changed gets a new version.
    pub(crate) fn record_instructions(&self) -> crate::Result<()> {
        use trellis_protocol::records::{INSTRUCTIONS_ARTIFACT, InstructionsUsed};
        if self.instructions.is_empty() {
            return Ok(());
        }
        let used = self.instructions.record();
        let store = &self.runtime.store;
        let latest = store
            .artifacts(&self.run)?
            .into_iter()
            .filter(|a| a.kind == INSTRUCTIONS_ARTIFACT)
            .max_by_key(|a| a.version);
        if latest.is_some_and(|a| {
            serde_json::from_str::<InstructionsUsed>(&a.content)
                .ok()
                .as_ref()
                == Some(&used)
        }) {
            return Ok(());
        }
        // Said once per run (and again only when the files change): the run goes on
        // without what could not be read.
        for problem in &used.problems {
            eprintln!("warning: instructions: {problem}");
            tracing::warn!("instructions: {problem}");
        }
        let artifact = store.put_artifact(trellis_store::NewArtifact {
            run: self.run.clone(),
            node: None,
            kind: INSTRUCTIONS_ARTIFACT.into(),
            content: serde_json::to_string_pretty(&used).unwrap_or_default(),
            status: trellis_protocol::ArtifactStatus::Approved,
        })?;
        self.announce_artifact(&artifact);
        Ok(())
    }

    /// The run's tools, with every role's allow list.
    pub fn registry(&self) -> Arc<Registry> {
        self.registry
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// The run's hooks: the configuration's `[[hooks]]`, then its workflow's once planned
    /// (those its tools run around every call).
    pub fn hooks(&self) -> Arc<trellis_tools::Hooks> {
        self.registry()
            .hooks()
            .cloned()
            .unwrap_or_else(|| self.runtime.hooks.clone())
    }

    /// Replaces the run's tools (the run continued with its planned workflow).
    pub(crate) fn set_registry(&self, registry: Arc<Registry>) {
        *self.registry.write().unwrap_or_else(|p| p.into_inner()) = registry;
    }

    /// The run's workflow, once planned.
    pub fn workflow(&self) -> Option<String> {
        self.workflow
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// Names the run's workflow (its commands' sandbox preset may depend on it).
    pub(crate) fn set_workflow(&self, workflow: Option<String>) {
        *self.workflow.write().unwrap_or_else(|p| p.into_inner()) = workflow;
    }

    pub(crate) fn env(
        &self,
        node: &str,
        interaction: Arc<dyn Interaction>,
    ) -> Result<ToolEnv, NodeError> {
        let workspace = Workspace::new(self.space.read_root(), &self.runtime.tools.secrets)
            .map_err(node_error)?;
        let mut env = ToolEnv::new(workspace, self.runtime.tools.clone(), interaction);
        env.run = Some(self.run.clone());
        env.node = Some(node.to_owned());
        env.base_commit = self.space.get().map(|wt| wt.base);
        env.workflow = self
            .workflow
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .clone();
        if self.runtime.tools.speculation.enabled {
            env.advisor = Some(self.runtime.tool_knowledge.clone());
        }
        env.checkpoints = Arc::new(trellis_tools::dag::StoreCheckpoints(
            self.runtime.store.clone(),
        ));
        Ok(env)
    }

    /// The project's tests for a role that tests its drawn answers (`test_samples`) or checks
    /// them against scripts that show the problem (`reproduce`), when the project has a test
    /// command.
    fn probe(&self, role: &RoleSpec, env: &ToolEnv) -> Option<Arc<dyn trellis_agents::TestProbe>> {
        let command = self
            .test_command
            .clone()
            .filter(|_| role.test_samples || role.reproduce)?;
        Some(Arc::new(testcmd::ScratchProbe {
            registry: self.registry(),
            env: env.clone(),
            command,
            timeout_secs: self
                .runtime
                .agents
                .test_timeout()
                .min(testcmd::PROBE_TIMEOUT)
                .as_secs(),
            secrets: self.runtime.tools.secrets.clone(),
            scripts: role
                .reproduce
                .then(|| testcmd::script_language(env.workspace.root()))
                .flatten(),
        }))
    }

    /// The PROJECT CONTEXT message: where the agent works, the test command, and the
    /// project's instructions (the user's and the root's; nested ones come with the paths
    /// they apply to) in at most `budget` characters.
    fn project_text(&self, budget: usize) -> String {
        // Nothing of the run's identity (its branch is named after the run id): two runs of
        // one request send the model the same prompt.
        let mut s = String::from(
            "You work in a git worktree of the repository (a copy of it on a branch of its \
             own); tool paths are relative to its root. The user reviews your changes before \
             they reach their branch.\n",
        );
        match &self.test_command {
            Some(t) => s.push_str(&format!(
                "Test command: `{}` (from {}).\n",
                t.command, t.source
            )),
            None => s.push_str("No test command was found for this project.\n"),
        }
        let files = self.instructions.applicable(&[]);
        if !files.is_empty() {
            s.push_str(crate::instructions::LEAD);
            s.push_str(&crate::instructions::Instructions::render(&files, budget));
        }
        s
    }

    /// An agent activation (see [`RunContext::run_stage_agent`]).
    pub(crate) async fn run_agent(
        self: Arc<Self>,
        stage: StageContext,
        agent: AgentSpec,
        ctx: NodeContext,
    ) -> Result<NodeOutput, NodeError> {
        Ok(self.run_stage_agent(stage, agent, ctx, None).await?.0)
    }

    /// The index's embedder (the retrieval agent's) behind a vector cache: tool descriptions
    /// are embedded once per run, not before every model call. `None` without embeddings.
    async fn tool_embedder(&self) -> Option<Arc<dyn trellis_index::Embedder>> {
        self.tool_embedder
            .get_or_init(|| async {
                let agent = self.retrieval_agent().await.ok()?;
                let inner = agent.embedder()?;
                Some(Arc::new(trellis_index::CachedEmbedder::new(inner, 4096))
                    as Arc<dyn trellis_index::Embedder>)
            })
            .await
            .clone()
    }

    /// The context policy of an activation of `role` at `node`: the configured caps, the
    /// summary model booked to the run's ledger under the agent's scope, and its large tool
    /// outputs stored in `.trellis/runs/<run>/tool-outputs/<node>/`.
    async fn context_policy(
        &self,
        role: &str,
        node: &str,
        stage: &str,
        agent: &str,
    ) -> trellis_agents::ContextPolicy {
        let config = &self.runtime.context;
        let mut policy = config.policy_for(role);
        policy.summarizer = match self.runtime.models.budgeted(
            config.summary_role(),
            self.ledger.clone(),
            CallScope {
                stage: Some(stage.to_owned()),
                agent: Some(agent.to_owned()),
            },
        ) {
            // A model with a small window (the embedded SmolLM2: 4096) writes poor summaries
            // slowly — on CPU a summary per turn made one activation take minutes: digests.
            // (A remote model's window is asked of its server here, once.)
            Ok(p) => {
                let small = p
                    .context_window()
                    .await
                    .is_some_and(|w| w.tokens < MIN_SUMMARY_WINDOW);
                (!small).then_some(p)
            }
            Err(e) => {
                tracing::warn!(error = %e, "no summary model; compaction falls back to digests");
                None
            }
        };
        policy.outputs = Some(Arc::new(trellis_agents::context::DirOutputs::new(
            self.runtime
                .repo
                .join(".trellis")
                .join("runs")
                .join(self.run.as_str())
                .join("tool-outputs")
                .join(trellis_agents::context::outputs::slug(node)),
        )));
        policy
    }

    /// The session of an agent activation: recorded through the service when there is
    /// one (continuing its turn numbering and, after a crash, its conversation), else the
    /// caller's sink.
    async fn open_session(
        &self,
        node: &trellis_protocol::NodeId,
        role: &str,
        attempt: u32,
    ) -> Result<Opened, NodeError> {
        match &self.options.sessions {
            Some(hub) => {
                let o = hub
                    .open_agent(&self.run, node, role, attempt, self.options.cause.clone())
                    .await
                    .map_err(node_error)?;
                Ok(Opened {
                    sink: Some(o.sink),
                    first_turn: o.first_turn,
                    recorded: o.recorded,
                })
            }
            None => Ok(Opened {
                sink: self.options.events.as_ref().map(|f| f(node)),
                first_turn: 1,
                recorded: Vec::new(),
            }),
        }
    }

    /// Runs the tests (test role), commits the agent's worktree and merges it into the run
    /// branch (`wt`, an agent that edits; only commits when a merge node of its own merges it
    /// later: `merge_later`), and builds the node's result.
    async fn finish(
        &self,
        agent: &str,
        role: &RoleSpec,
        rep: AgentReport,
        env: &ToolEnv,
        // The agent's worktree, and whether its work is merged now (else by a merge node).
        landing: Option<(&trellis_tools::worktree::NodeWorktree, bool)>,
        cancel: &tokio_util::sync::CancellationToken,
    ) -> Result<NodeOutput, NodeError> {
        let wt = landing.map(|(wt, _)| wt);
        let mut report = rep.report;
        let mut notes = rep.notes;
        let mut tests = Value::Null;
        if role.run_tests {
            match &self.test_command {
                Some(cmd) => {
                    // The command is the project's own (configured or detected): `ask` is
                    // taken as approved; `deny` still applies.
                    let mut env = env.clone();
                    env.interaction = Arc::new(NonInteractive { approve: true });
                    let run = testcmd::run(
                        &self.registry(),
                        &env,
                        cmd,
                        self.runtime.agents.test_timeout().as_secs(),
                        cancel.clone(),
                    )
                    .await;
                    if report.failure == run.passed {
                        notes.push(format!(
                            "the agent reported failure={} but `{}` {}; the test result decides",
                            report.failure,
                            cmd.command,
                            if run.passed { "passed" } else { "failed" }
                        ));
                    }
                    report.failure = !run.passed;
                    if !run.passed {
                        report.findings.extend(run.failures.iter().cloned());
                        report.output = format!(
                            "{}\n\n`{}` failed (exit {:?}):\n{}",
                            report.output.trim(),
                            cmd.command,
                            run.exit_code,
                            clip(&run.output, 3000)
                        );
                    }
                    tests = serde_json::to_value(&run).unwrap_or(Value::Null);
                }
                None => notes.push(
                    "no test command found (set agents.test_command); the agent's verdict stands unverified"
                        .into(),
                ),
            }
        }
        let summary = clip(report.output.lines().next().unwrap_or("changes").trim(), 72);
        let landed = match landing {
            Some((wt, merge)) => self.land(wt, &summary, merge, cancel).await?,
            None => crate::nodes::Landed::ReadOnly,
        };
        let (commit, files, run_head, conflict) = match landed {
            crate::nodes::Landed::ReadOnly => (None, Vec::new(), None, None),
            crate::nodes::Landed::Committed { commit, files } => (commit, files, None, None),
            crate::nodes::Landed::Merged {
                commit,
                files,
                run_head,
            } => (commit, files, Some(run_head), None),
            crate::nodes::Landed::Conflict {
                commit,
                files,
                conflict,
            } => (commit, files, None, Some(conflict)),
            crate::nodes::Landed::Cancelled => return Err(NodeError::new("cancelled")),
        };
        if !report.files_changed.is_empty() && report.files_changed != files {
            notes.push(format!(
                "the agent listed files_changed {:?}; git sees {:?}",
                report.files_changed, files
            ));
        }
        report.files_changed = files;
        if let Some(c) = &conflict {
            report.failure = true;
            report.output = format!(
                "{}\n\n{}",
                c.message(&self.space.branch()),
                report.output.trim()
            );
        }
        let result = json!({
            "agent": agent,
            "failure": report.failure,
            "output": report.output,
            "files_changed": report.files_changed,
            "findings": report.findings,
            "commit": commit,
            "branch": wt.map(|w| w.branch.clone()),
            "run_head": run_head,
            "merge_conflict": conflict,
            "turns": rep.turns,
            "tool_calls": rep.tool_calls,
            "usage": rep.usage,
            "tests": tests,
            "notes": notes,
            "reason": if report.failure { clip(&report.output, 400) } else { String::new() },
        });
        Ok(if report.failure {
            NodeOutput::failure(clip(&report.output, 400)).result(result)
        } else {
            NodeOutput::success().result(result)
        })
    }
}

impl StageHandlers for RunContext {
    // Handlers hold the context strongly (the graph does not reach back to it, so there is
    // no cycle): a run keeps working however the caller holds its context.
    fn agent(&self, stage: &StageContext, agent: &AgentSpec) -> Arc<dyn NodeHandler> {
        let me = self.me.upgrade();
        let (stage, agent) = (stage.clone(), agent.clone());
        Arc::new(move |ctx: NodeContext| {
            let me = me.clone();
            let (stage, agent) = (stage.clone(), agent.clone());
            async move {
                match me {
                    Some(me) => me.run_agent(stage, agent, ctx).await,
                    None => Err(NodeError::new("the run's context is gone")),
                }
            }
        })
    }

    fn adaptive_retrieval(&self, plan: &Plan) -> Arc<dyn NodeHandler> {
        retrieval::adaptive(self.me.upgrade(), plan)
    }

    fn upfront_retrieval(&self, plan: &Plan) -> Option<Arc<dyn NodeHandler>> {
        retrieval::upfront(self.me.upgrade(), plan)
    }

    fn gate(&self, stage: &StageContext) -> Arc<dyn NodeHandler> {
        self.handler(stage, None, |me, stage, _agent, ctx| {
            Box::pin(me.run_gate(stage, ctx))
        })
    }

    fn review(&self, stage: &StageContext, agent: &AgentSpec) -> Arc<dyn NodeHandler> {
        self.handler(stage, Some(agent), |me, stage, agent, ctx| match agent {
            Some(agent) => Box::pin(me.run_review(stage, agent, ctx)),
            None => Box::pin(async { Err(NodeError::new("a review stage needs an agent")) }),
        })
    }

    fn deterministic(&self, stage: &StageContext) -> Arc<dyn NodeHandler> {
        self.handler(stage, None, |me, stage, _agent, ctx| {
            Box::pin(me.run_deterministic(stage, ctx))
        })
    }

    fn merge(&self, stage: &StageContext, agent: Option<&AgentSpec>) -> Arc<dyn NodeHandler> {
        self.handler(stage, agent, |me, stage, agent, ctx| {
            Box::pin(me.run_merge(stage, agent, ctx))
        })
    }

    fn task_step(&self, stage: &StageContext, agent: &AgentSpec) -> Arc<dyn NodeHandler> {
        self.handler(stage, Some(agent), |me, stage, agent, ctx| match agent {
            Some(agent) => Box::pin(me.run_task_step(stage, agent, ctx)),
            None => Box::pin(async { Err(NodeError::new("a task tree step needs an agent")) }),
        })
    }

    fn items(&self, stage: &StageContext, _artifact: &str) -> Arc<dyn NodeHandler> {
        self.handler(stage, None, |me, stage, _agent, ctx| {
            Box::pin(me.run_items(stage, ctx))
        })
    }
}

/// What [`RunContext::handler`] calls per activation.
type Activate = fn(
    Arc<RunContext>,
    StageContext,
    Option<AgentSpec>,
    NodeContext,
) -> futures::future::BoxFuture<'static, Result<NodeOutput, NodeError>>;

impl RunContext {
    /// A node handler calling `f` with this context (held strongly, see `agent`).
    fn handler(
        &self,
        stage: &StageContext,
        agent: Option<&AgentSpec>,
        f: Activate,
    ) -> Arc<dyn NodeHandler> {
        let me = self.me.upgrade();
        let (stage, agent) = (stage.clone(), agent.cloned());
        Arc::new(move |ctx: NodeContext| {
            let me = me.clone();
            // The node's input is its stage context as it runs (a fan-out's review or merge
            // node names the work node it concerns there); the compiled one otherwise.
            let stage = serde_json::from_value::<StageContext>(ctx.input.clone())
                .unwrap_or_else(|_| stage.clone());
            let agent = agent.clone();
            async move {
                match me {
                    Some(me) => f(me, stage, agent, ctx).await,
                    None => Err(NodeError::new("the run's context is gone")),
                }
            }
        })
    }
}
