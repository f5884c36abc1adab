//! The Trellis runtime: a request goes to the orchestrator, which picks a workflow and its
//! optional stages; the plan is assembled and compiled into an engine graph whose stage
//! nodes run agents in git worktrees of the run (one per editing agent, merged into the
//! run's branch; [`nodes`]); everything is persisted in the workspace store, so a run
//! survives a crash and resumes (`trellis runs resume`).
//!
//! ```text
//! request ─▶ orchestrate ─▶ Plan ─▶ compile(handlers) ─▶ Engine::start_as(run) ─▶ review
//!                                      │ stage nodes: AgentRun in its own worktree, commit + merge
//!                                      │ upfront / adaptive retrieval nodes
//!                                      └ interrupts: approvals, questions, budgets
//! ```
//!
//! The runtime service (`trellis-core`) owns a [`Runtime`] per workspace and starts, resumes
//! and inspects runs through it; front-ends never see it. The agents' turns are recorded
//! through [`sessions::Sessions`] (the service's session hub) or, without one, handed to
//! [`RunOptions::events`].

pub mod code_intel;
mod error;
mod fork;
pub mod gateway;
mod handlers;
pub mod instructions;
pub mod merge;
pub mod nodes;
pub mod planning;
pub mod sessions;
mod space;
pub mod stage_tools;
pub mod stages;
pub mod starter;
mod task_tools;
pub mod tasktree;
pub mod testcmd;
mod text;
pub mod toolknow;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;
use trellis_agents::{
    AgentsConfig, Orchestration, Overrides, ProjectContext, RoleCatalog, SinkFactory, orchestrate,
};
use trellis_config::{Config, LoadOptions};
use trellis_graph::{Engine, RunHandle};
use trellis_index::IndexConfig;
use trellis_llm::ModelRegistry;
pub use trellis_protocol::InputMode;
use trellis_protocol::{Budgets, Command, RunId, SubmissionId};
use trellis_store::Store;
use trellis_tools::worktree::RunWorktree;
use trellis_tools::{Registry, ToolsConfig};
use trellis_workflow::{Catalog, Plan, assemble, compile};

pub use error::{Error, Result};
pub use handlers::RunContext;
use sessions::Sessions;
pub use space::RunSpace;

/// Options of a run.
#[derive(Clone, Default)]
pub struct RunOptions {
    /// How interrupts are answered.
    pub input: InputMode,
    /// Where the session events of agent and retrieval nodes go when there is no session
    /// hub: called with the node's id once per activation, the sink it returns gets that
    /// activation's events (not recorded).
    pub events: Option<SinkFactory>,
    /// Limits for this run, over the configured budget.
    pub budgets: Option<Budgets>,
    /// The submission that started or resumed the run (every event it causes names it).
    pub cause: Option<SubmissionId>,
    /// Records every agent turn (the runtime service's sessions).
    pub sessions: Option<Arc<dyn Sessions>>,
}

/// The loaded configuration, catalogs and stores of one workspace.
pub struct Runtime {
    /// The repository's top-level directory.
    pub(crate) repo: PathBuf,
    /// Model profiles.
    pub(crate) models: Arc<ModelRegistry>,
    /// The `[tools]` section.
    pub(crate) tools: Arc<ToolsConfig>,
    /// The `[agents]` section.
    pub(crate) agents: AgentsConfig,
    /// The `[context]` section: input caps, summarisation, tool-output handles.
    pub(crate) context: trellis_agents::ContextConfig,
    /// The `[index]` section.
    pub(crate) index: IndexConfig,
    /// The `[sources]` section: web search, documentation sites, OSV advisories.
    pub(crate) sources: trellis_sources::SourcesConfig,
    /// Roles (built-in, `.trellis/agents`, configured directories).
    pub(crate) roles: RoleCatalog,
    /// Workflows (built-in, `.trellis/workflows`, `--workflows-dir`).
    pub(crate) catalog: Catalog,
    /// The workspace store.
    pub(crate) store: Arc<Store>,
    /// The MCP servers of `[mcp.servers]` (started on a run's first use).
    pub(crate) mcp: trellis_mcp::McpHub,
    /// The repository's language servers (`[lsp]`; each started on first use).
    pub(crate) lsp: Arc<trellis_lsp::LspPool>,
    /// The workspace's tool knowledge graph (`[tools.graph]`).
    pub(crate) tool_knowledge: Arc<toolknow::ToolKnowledge>,
    /// Tools registered in every run after the others, replacing any of the same name
    /// (embedders' own tools; tests wrap built-in ones to observe or interrupt their calls).
    pub(crate) extra_tools: Vec<Arc<dyn trellis_tools::Tool>>,
    /// The git remote runs' branches travel through (`[repository] remote`).
    pub(crate) remote: Option<trellis_tools::worktree::remote::Remote>,
    /// The tools and allow lists every run starts from ([`Runtime::registry_for`]), made at
    /// the first run: rebuilding them was ~2 % of `trellis serve`'s CPU per G1 run.
    pub(crate) base_registry: std::sync::OnceLock<Registry>,
    /// The index handles (and the embedding model) every run's retrieval shares, made at
    /// the first retrieval.
    pub(crate) index_pool: tokio::sync::OnceCell<Arc<trellis_agents::retrieval::IndexPool>>,
    /// The project's instructions (`AGENTS.md` …, `[instructions]`), re-read when changed.
    pub(crate) instructions: instructions::InstructionsCache,
    /// The user's hooks (`[[hooks]]`), each run recorded with the run's tool calls.
    pub(crate) hooks: Arc<trellis_tools::Hooks>,
}

/// The workflows of `repo` (built-in, `.trellis/workflows`, `dirs`), each
/// `retrieval_strategy_config` checked by the retrieval agent's parser.
pub fn discover_workflows(repo: Option<&Path>, dirs: &[PathBuf]) -> Catalog {
    Catalog::discover(
        repo,
        dirs,
        Some(&trellis_agents::retrieval::RetrievalStrategyConfig::check),
    )
}

/// The `[tools]` section of `config`, with the top-level `[sandbox]` section the tools run
/// their commands under.
pub fn tools_config(config: &Config) -> Result<ToolsConfig> {
    let mut tools: ToolsConfig = config.section_serde("tools")?;
    tools.sandbox = config.section(trellis_sandbox::SECTION)?;
    Ok(tools)
}

/// The `[mcp]` section with `[sandbox] mode` applied to the servers that opt into the
/// sandbox: the one reading for the runtime, the gateway and `trellis mcp list`.
pub fn mcp_config(config: &Config) -> Result<trellis_mcp::McpConfig> {
    let sandbox: trellis_sandbox::SandboxConfig = config.section(trellis_sandbox::SECTION)?;
    let mut mcp: trellis_mcp::McpConfig = config.section_serde("mcp")?;
    mcp.set_sandbox_mode(sandbox.mode);
    Ok(mcp)
}

/// The input of a workflow run: the task and the orchestrator's decisions.
pub fn run_input(plan: &Plan, orchestration: &Orchestration) -> Value {
    json!({
        "task": plan.task,
        "orchestrator": orchestration,
    })
}

impl Runtime {
    /// The repository's top-level directory.
    pub fn repo(&self) -> &Path {
        &self.repo
    }

    /// The workspace store.
    pub fn store(&self) -> &Arc<Store> {
        &self.store
    }

    /// Model profiles; an embedder installs its own providers here
    /// (`models().install(profile, provider)`).
    pub fn models(&self) -> &Arc<ModelRegistry> {
        &self.models
    }

    /// The `[index]` section.
    pub fn index_config(&self) -> &IndexConfig {
        &self.index
    }

    /// The MCP servers of `[mcp.servers]` (started on a run's first use).
    pub fn mcp(&self) -> &trellis_mcp::McpHub {
        &self.mcp
    }

    /// The git remote runs' branches travel through (`[repository] remote`), if any.
    pub fn remote(&self) -> Option<&trellis_tools::worktree::remote::Remote> {
        self.remote.as_ref()
    }

    /// The `[tools]` section.
    pub fn tools(&self) -> &Arc<ToolsConfig> {
        &self.tools
    }

    /// The user's hooks (`[[hooks]]`); a run's are [`RunContext::hooks`] (with its
    /// workflow's). Settling these settles every run's.
    pub fn hooks(&self) -> &Arc<trellis_tools::Hooks> {
        &self.hooks
    }

    /// The `[context]` section: input caps, summarisation, tool-output handles.
    pub fn context_config(&self) -> &trellis_agents::ContextConfig {
        &self.context
    }

    /// Workflows (built-in, `.trellis/workflows`, `--workflows-dir`).
    pub fn catalog(&self) -> &Catalog {
        &self.catalog
    }

    /// Roles (built-in, `.trellis/agents`, configured directories).
    pub fn roles(&self) -> &RoleCatalog {
        &self.roles
    }

    /// Registers `tool` in every run after the others, replacing any of the same name
    /// (an embedder's own tools; tests wrap built-in ones to observe or interrupt calls).
    pub fn add_tool(&mut self, tool: Arc<dyn trellis_tools::Tool>) {
        self.extra_tools.push(tool);
    }

    /// Loads everything for the repository at `repo` (configuration overrides as with
    /// `-c key=value`; extra workflow directories).
    pub fn open(
        repo: &Path,
        overrides: &[String],
        workflow_dirs: &[PathBuf],
        store: Arc<Store>,
    ) -> Result<Self> {
        let repo = trellis_tools::worktree::repo_root(repo)?;
        let config = Config::load(&LoadOptions::discover(&repo, overrides.to_vec()))?;
        let models = Arc::new(ModelRegistry::from_config(&config)?);
        let tools = tools_config(&config)?;
        if tools.sandbox.mode == trellis_sandbox::Mode::Off {
            // Printed on every run (and recorded with every command's result).
            eprintln!("warning: {}", trellis_sandbox::OFF_WARNING);
            tracing::warn!("{}", trellis_sandbox::OFF_WARNING);
        }
        let agents: AgentsConfig = config.section("agents")?;
        let context: trellis_agents::ContextConfig = config.section("context")?;
        context.validate()?;
        let hooks = Arc::new(trellis_tools::Hooks::new(
            config.list(trellis_tools::hooks::SECTION)?,
            &repo,
            tools.shell.clone(),
            tools.sandbox.clone(),
            Some(Arc::new(trellis_tools::StoreSink(store.clone()))),
        ));
        let instructions = instructions::InstructionsCache::new(
            &repo,
            config.section(instructions::SECTION)?,
            trellis_config::user_config_file().and_then(|f| f.parent().map(Path::to_path_buf)),
        );
        let index: IndexConfig = config.section_serde("index")?;
        let sources: trellis_sources::SourcesConfig = config.section(trellis_sources::SECTION)?;
        let repository: trellis_tools::worktree::remote::RepositoryConfig =
            config.section_serde("repository")?;
        let mcp = trellis_mcp::McpHub::new(&repo, &mcp_config(&config)?)?;
        let lsp: trellis_lsp::LspConfig = config.section_serde("lsp")?;
        let lsp = Arc::new(trellis_lsp::LspPool::new(&repo, &lsp));
        let mut role_dirs = vec![repo.join(".trellis").join("agents")];
        role_dirs.extend(agents.roles_dirs.iter().map(|d| repo.join(d)));
        let roles = RoleCatalog::discover(&role_dirs)?;
        let catalog = discover_workflows(Some(&repo), workflow_dirs);
        let tool_knowledge = Arc::new(toolknow::ToolKnowledge::new(
            store.clone(),
            tools.graph.learn,
        ));
        Ok(Self {
            repo,
            models,
            tools: Arc::new(tools),
            agents,
            context,
            index,
            sources,
            roles,
            catalog,
            store,
            mcp,
            lsp,
            tool_knowledge,
            extra_tools: Vec::new(),
            base_registry: std::sync::OnceLock::new(),
            index_pool: tokio::sync::OnceCell::new(),
            remote: repository.remote(),
            instructions,
            hooks,
        })
    }

    /// Asks the orchestrator for the workflow and its optional stages, and assembles the
    /// plan.
    pub async fn plan(
        &self,
        request: &str,
        overrides: &Overrides,
        cancel: CancellationToken,
    ) -> Result<(Orchestration, Plan)> {
        let provider = self.models.for_role("orchestrator")?;
        self.plan_with(provider.as_ref(), request, overrides, cancel)
            .await
    }

    /// [`Runtime::plan`] with the orchestrator's model `provider` (a run's planning node
    /// books the call to the run).
    pub(crate) async fn plan_with(
        &self,
        provider: &dyn trellis_llm::ModelProvider,
        request: &str,
        overrides: &Overrides,
        cancel: CancellationToken,
    ) -> Result<(Orchestration, Plan)> {
        let workflows: Vec<&trellis_workflow::Workflow> =
            self.catalog.entries().iter().map(|e| &e.workflow).collect();
        let mut project = ProjectContext::detect(&self.repo, request);
        let found = self.instructions.get();
        let files = found.applicable(&[]);
        if !files.is_empty() {
            let window = provider.context_window().await.map(|w| w.tokens);
            let limit = self.context.policy_for("orchestrator").limits(window).limit;
            let budget = self.instructions.config().budget(Some(limit));
            project.instructions = instructions::Instructions::render(&files, budget);
        }
        let orchestration =
            orchestrate(provider, &workflows, request, project, overrides, cancel).await?;
        let workflow = &self.catalog.get(&orchestration.workflow)?.workflow;
        let plan = assemble(workflow, &orchestration.decisions(), request)?;
        Ok((orchestration, plan))
    }

    /// Creates the run's worktree and starts a new run whose first node plans `request`
    /// (the orchestrator's call), then runs the plan's workflow ([`planning`]).
    pub fn start_planning(
        self: &Arc<Self>,
        request: &str,
        overrides: &Overrides,
        options: RunOptions,
    ) -> Result<(RunHandle, Arc<RunContext>)> {
        let params = planning::PlanningParams {
            request: request.to_owned(),
            overrides: overrides.clone(),
            budgets: options.budgets.clone(),
        };
        let (run, ctx) = self.new_run(options, None)?;
        let graph = Arc::new(planning::planning_graph(&params, Some(&ctx))?);
        let cause = ctx.options.cause.clone();
        let handle = Engine::new(self.store.clone()).start_as_by(run, graph, Value::Null, cause)?;
        Ok((handle, ctx))
    }

    /// Like [`Runtime::start_planning`], without executing the run: the run is recorded
    /// ([`Engine::create_as_by`], attributed to `cause`) for a `trellis worker` to resume —
    /// with no run context (ledger, agent worktrees, tools) and no worktree: the worker
    /// builds them. Answers its id and the commit of its first batch.
    pub fn create_planning(
        self: &Arc<Self>,
        request: &str,
        overrides: &Overrides,
        budgets: Option<Budgets>,
        cause: Option<trellis_protocol::SubmissionId>,
    ) -> Result<(RunId, trellis_graph::Commit)> {
        let run = RunId::new();
        let params = planning::PlanningParams {
            request: request.to_owned(),
            overrides: overrides.clone(),
            budgets,
        };
        // The same graph as the worker's but for its handlers (not part of the fingerprint).
        let graph = Arc::new(planning::planning_graph(&params, None)?);
        let commit =
            Engine::new(self.store.clone()).create_as_by(run.clone(), graph, Value::Null, cause)?;
        Ok((run, commit))
    }

    /// Creates the run's worktree and starts `plan` as a new run (the plan decided
    /// beforehand: no planning node).
    pub fn start(
        self: &Arc<Self>,
        plan: &Plan,
        orchestration: &Orchestration,
        options: RunOptions,
    ) -> Result<(RunHandle, Arc<RunContext>)> {
        let (run, ctx) = self.new_run(options, Some(plan))?;
        let graph = Arc::new(compile(plan, ctx.as_ref())?);
        let cause = ctx.options.cause.clone();
        let handle = Engine::new(self.store.clone()).start_as_by(
            run,
            graph,
            run_input(plan, orchestration),
            cause,
        )?;
        Ok((handle, ctx))
    }

    /// A new run's id and its context (its worktree created when first needed: [`space`]).
    fn new_run(
        self: &Arc<Self>,
        options: RunOptions,
        plan: Option<&Plan>,
    ) -> Result<(RunId, Arc<RunContext>)> {
        let run = RunId::new();
        let space = self.space(&run, None);
        let ctx = self.context(run.clone(), space, options, plan)?;
        Ok((run, ctx))
    }

    /// Run `run`'s worktree, not created yet.
    fn space(&self, run: &RunId, fork: Option<space::ForkPoint>) -> RunSpace {
        RunSpace::lazy(
            self.repo.clone(),
            run.clone(),
            self.store.clone(),
            fork,
            self.remote.clone(),
        )
    }

    /// Resumes a stored workflow run (after a crash, Ctrl-C, or to answer its interrupts).
    pub fn resume(
        self: &Arc<Self>,
        run: &RunId,
        commands: Vec<Command>,
        mut options: RunOptions,
    ) -> Result<(RunHandle, Arc<RunContext>)> {
        let graphs = self.store.graphs(run)?;
        let stage = planning::Stage::of(run, &graphs)?;
        // The budgets the run was started with, wherever it started.
        if options.budgets.is_none() {
            options.budgets =
                planning::PlanningParams::from_params(&graphs.params).and_then(|p| p.budgets);
        }
        // A run that has not written yet has no worktree (and no change set) to go back to.
        let space = match self.store.change_set_of(run)? {
            // Perhaps written in another clone: its worktree here at the remote's tip.
            Some(_) if self.remote.is_some() => {
                let space = self.space(run, None);
                space.ensure()?;
                space
            }
            Some(record) => {
                let worktree = RunWorktree::from_record(&record);
                if !worktree.path.exists() {
                    return Err(Error::Resume(format!(
                        "the worktree of run {run} ({}) is gone; the run cannot continue",
                        worktree.path.display()
                    )));
                }
                RunSpace::made(self.repo.clone(), self.store.clone(), worktree)
            }
            None => self.space(run, None),
        };
        let plan = match &stage {
            planning::Stage::Planned { plan, .. } => Some(plan),
            planning::Stage::Planning(_) => None,
        };
        let ctx = self.context(run.clone(), space, options, plan)?;
        let graph = Arc::new(planning::workflow_graph(&stage, ctx.as_ref(), Some(&ctx))?);
        let cause = ctx.options.cause.clone();
        let handle = Engine::new(self.store.clone()).resume_by(graph, run, commands, cause)?;
        Ok((handle, ctx))
    }

    /// A stored workflow run's current state, replayed from the store (nothing runs).
    pub fn inspect(&self, run: &RunId) -> Result<trellis_graph::RunOutcome> {
        planning::stored_outcome(&self.store, run)
    }

    /// Where a stored workflow run stands in its graphs: planning, or running its plan.
    pub fn stage(&self, run: &RunId) -> Result<planning::Stage> {
        planning::Stage::read(&*self.store, run)
    }

    /// The plan a workflow run follows (its graph parameters); an error while it plans.
    pub fn stored_plan(&self, run: &RunId) -> Result<Plan> {
        self.stage(run)?.into_plan(run)
    }

    fn context(
        self: &Arc<Self>,
        run: RunId,
        space: RunSpace,
        options: RunOptions,
        plan: Option<&Plan>,
    ) -> Result<Arc<RunContext>> {
        let registry = self.registry_for(plan);
        // Every model call is persisted (`model_calls`, `trellis runs usage`), and a resumed
        // run's ledger starts from what the run spent before.
        let mut budget = self.models.budget().clone();
        if let Some(b) = &options.budgets {
            if b.tokens.is_some() {
                budget.run.tokens = b.tokens;
            }
            if b.cost_usd.is_some() {
                budget.run.cost_usd = b.cost_usd;
            }
        }
        let ledger = trellis_agents::usage::run_ledger(self.store.clone(), &run, budget)?;
        let nodes = nodes::NodeSpaces::open(&self.repo, &run, &space.branch())?;
        let ctx = RunContext::new(self.clone(), run, space, nodes, registry, ledger, options);
        ctx.set_workflow(plan.map(|p| p.workflow.clone()));
        ctx.record_instructions()?;
        Ok(ctx)
    }

    /// The tools of a run of `plan` (before planning: those no plan grants), every role's
    /// allow list set, calls recorded in the store.
    pub(crate) fn registry_for(&self, plan: Option<&Plan>) -> Arc<Registry> {
        let mut registry = self
            .base_registry
            .get_or_init(|| {
                let mut registry = Registry::builtin(&self.tools.roles);
                for (role, _) in self.roles.iter() {
                    if !self.tools.roles.contains_key(&role.name) {
                        registry.allow(&role.name, role.tools.iter().map(String::as_str));
                    }
                }
                registry.allow(testcmd::TEST_RUNNER, ["shell"]);
                // The task tools `rag_search` and `write_todos`: roles that list them get them.
                for tool in task_tools::tools(self.repo.clone(), self.index.clone()) {
                    registry.register(tool);
                }
                registry
            })
            .clone();
        if let Some(plan) = plan {
            self.grant_lsp_tools(&mut registry, plan);
        }
        for tool in &self.extra_tools {
            registry.register(tool.clone());
        }
        if !self.mcp.is_empty() {
            if let Some(plan) = plan {
                self.grant_mcp_tools(&mut registry, plan);
            }
            registry = registry.with_source(Arc::new(self.mcp.clone()));
        }
        let registry = registry.with_sink(Arc::new(trellis_tools::StoreSink(self.store.clone())));
        Arc::new(registry.with_hooks(self.hooks_for(plan)))
    }

    /// The hooks of a run of `plan`: the configuration's `[[hooks]]`, then its workflow's
    /// own (`hooks:` in the workflow file), sharing the runtime's record and tasks.
    fn hooks_for(&self, plan: Option<&Plan>) -> Arc<trellis_tools::Hooks> {
        match plan {
            Some(plan) if !plan.hooks.is_empty() => Arc::new(
                self.hooks.with_workflow(
                    plan.hooks
                        .iter()
                        .map(|h| (h.hook.clone(), h.source.clone())),
                ),
            ),
            _ => self.hooks.clone(),
        }
    }
}

impl Runtime {
    /// The repository's index and language servers, for agent tools and retrieval.
    pub fn code_intel(&self) -> code_intel::CodeIntel {
        code_intel::CodeIntel::new(&self.repo, self.index.clone(), self.lsp.clone())
    }

    /// The language-server tools for the plan's agents when its retrieval strategy turns
    /// `lsp_integration` on: those its `tools` list names (all of them when it names none).
    fn grant_lsp_tools(&self, registry: &mut Registry, plan: &Plan) {
        let Some(lsp) = handlers::retrieval::strategy(plan).map(|s| s.lsp_integration) else {
            return;
        };
        if !lsp.enabled() {
            return;
        }
        let named: Vec<String> = match &lsp {
            trellis_agents::retrieval::strategy::Toggle::Block(b) if !b.tools.is_empty() => {
                b.tools.clone()
            }
            _ => code_intel::LSP_TOOLS
                .iter()
                .map(|t| (*t).to_owned())
                .collect(),
        };
        let granted: Vec<&str> = code_intel::LSP_TOOLS
            .iter()
            .copied()
            .filter(|t| named.iter().any(|n| n == t))
            .collect();
        if granted.is_empty() {
            return;
        }
        for tool in self.code_intel().tools() {
            if granted.contains(&tool.spec().name.as_str()) {
                registry.register(tool);
            }
        }
        for stage in &plan.planned {
            for agent in &stage.context.agents {
                registry.allow(&agent.agent, granted.iter().copied());
            }
        }
    }

    /// MCP servers' tools for the agents: a server's `roles` grant all its tools to those
    /// roles (`"*"`: every role); a stage's `mcp_tools` give that stage's agents an allow list
    /// of their own (their role's tools plus those).
    fn grant_mcp_tools(&self, registry: &mut Registry, plan: &Plan) {
        for (role, grant) in self.mcp.role_grants() {
            if role == "*" {
                let mut all: Vec<String> = registry.roles();
                all.extend(self.roles.iter().map(|(r, _)| r.name.clone()));
                for r in all {
                    registry.allow(&r, [grant.as_str()]);
                }
            } else {
                registry.allow(&role, [grant.as_str()]);
            }
        }
        for stage in &plan.planned {
            for agent in &stage.context.agents {
                if agent.mcp_tools.is_empty() {
                    continue;
                }
                let entries: Vec<String> = agent
                    .mcp_tools
                    .iter()
                    .map(|t| trellis_mcp::allow_entry(t))
                    .collect();
                registry.derive(
                    &handlers::tool_scope(&stage.context.stage_name, &agent.agent),
                    &agent.agent,
                    entries.iter().map(String::as_str),
                );
            }
        }
    }
}

/// Handlers for a plan that is compiled but never run (`--plan-only`, inspecting a stored
/// workflow run): every node fails if it is ever executed.
pub struct PlanOnly;

impl trellis_workflow::StageHandlers for PlanOnly {
    fn agent(
        &self,
        _stage: &trellis_workflow::StageContext,
        _agent: &trellis_workflow::AgentSpec,
    ) -> Arc<dyn trellis_graph::NodeHandler> {
        Arc::new(not_runnable)
    }

    fn adaptive_retrieval(&self, _plan: &Plan) -> Arc<dyn trellis_graph::NodeHandler> {
        Arc::new(not_runnable)
    }

    fn upfront_retrieval(&self, _plan: &Plan) -> Option<Arc<dyn trellis_graph::NodeHandler>> {
        Some(Arc::new(not_runnable))
    }
}

async fn not_runnable(
    _ctx: trellis_graph::NodeContext,
) -> Result<trellis_graph::NodeOutput, trellis_graph::NodeError> {
    Err(trellis_graph::NodeError::new(
        "this graph was compiled for inspection only",
    ))
}

/// The files a run's agents reported changing (`files_changed` of their stage reports),
/// sorted, each once.
pub fn changed_files(o: &trellis_graph::RunOutcome) -> Vec<String> {
    trellis_protocol::records::files_changed(&o.nodes)
}

/// Milliseconds since the Unix epoch.
pub fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}
