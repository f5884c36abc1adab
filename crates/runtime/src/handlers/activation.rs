//! One activation of a stage agent: its model, tools, prompt, session, workspace and context
//! policy, its [`AgentRun`], and its report as the node's result.

use std::path::PathBuf;
use std::sync::Arc;

use serde_json::Value;
use trellis_agents::prompt::{
    ContextKind, context_messages, earlier_stages, system_prompt, task_text,
};
use trellis_agents::{AgentOutcome, AgentRun, GraphInteraction, Resume, RoleSpec, SessionSink};
use trellis_graph::{NodeContext, NodeError, NodeOutput};
use trellis_llm::{CallScope, Message};
use trellis_protocol::SessionEvent;
use trellis_tools::worktree::nodes::NodeWorktree;
use trellis_tools::{Interaction, NonInteractive, Registry, ToolEnv};
use trellis_workflow::{AgentSpec, StageContext};

use super::{RunContext, node_error, tool_scope};
use crate::InputMode;
use crate::toolknow::CallLog;

/// The tools an activation is granted: its stage's allow list when the stage grants it MCP
/// tools (`scope`), else its role's, with each tool's name and description.
struct GrantedTools {
    scope: Option<String>,
    tools: Vec<(String, String)>,
}

impl GrantedTools {
    /// The tools of `agent` in `stage`: an agent its stage grants MCP tools has an allow list
    /// of its own.
    fn of(registry: &Registry, stage: &str, agent: &str, role: &RoleSpec) -> Self {
        let scope = tool_scope(stage, agent);
        let scope = registry.has_role(&scope).then_some(scope);
        let tools = registry
            .specs_for(scope.as_deref().unwrap_or(&role.name))
            .into_iter()
            .map(|t| (t.name, t.description))
            .collect();
        Self { scope, tools }
    }

    /// The registry allow list in force: the stage's, else the role's.
    fn allow<'a>(&'a self, role: &'a RoleSpec) -> &'a str {
        self.scope.as_deref().unwrap_or(&role.name)
    }

    /// Whether the tools can change files (a write tool, or the shell).
    fn can_write(&self) -> bool {
        self.tools.iter().any(|(name, _)| {
            name == "shell" || trellis_tools::registry::WRITE_TOOLS.contains(&name.as_str())
        })
    }

    /// Whether the activation needs the run's worktree ([`crate::RunSpace`]): its tools can
    /// change files, or one of them is not known to only read, or looks at the run's
    /// changes (git). Agents that only read files read the repository until the run writes.
    fn needs_run_worktree(&self, registry: &Registry) -> bool {
        self.can_write()
            || self
                .tools
                .iter()
                .any(|(name, _)| !registry.read_only(name) || name.starts_with("git_"))
    }
}

impl RunContext {
    /// An agent activation (see [`RunContext::run_stage_agent`]): the agent runs with its
    /// prompt and tools, in a worktree of its own when it edits, and its report becomes the
    /// node's result; the calls it made are learned by the tool knowledge graph.
    pub(crate) async fn agent_activation(
        self: Arc<Self>,
        stage: StageContext,
        agent: AgentSpec,
        ctx: NodeContext,
        registry: Arc<Registry>,
        workdir: Option<PathBuf>,
    ) -> Result<NodeOutput, NodeError> {
        let role: RoleSpec = self
            .runtime
            .roles
            .get(&agent.agent)
            .map_err(node_error)?
            .clone();
        let node = ctx.node.to_string();
        let stage_name = stage.stage_name.clone();
        let provider = self
            .runtime
            .models
            .budgeted(
                &role.model_role,
                self.ledger.clone(),
                CallScope {
                    stage: Some(stage_name.clone()),
                    agent: Some(agent.agent.clone()),
                },
            )
            .map_err(node_error)?;
        let granted = GrantedTools::of(&registry, &stage_name, &agent.agent, &role);
        if granted.needs_run_worktree(&registry) || role.run_tests {
            self.ensure_worktree().await?;
        }
        let (interaction, gate) = self.interaction();
        let env = self.env(&node, interaction)?;
        let mut context = self
            .activation_context(&role, &node, &stage_name, &agent.agent, &registry, &granted)
            .await;
        let budget = self
            .give_instructions(&mut context, provider.as_ref())
            .await;
        let messages = self.activation_messages(&role, &granted.tools, &stage, &ctx, budget);
        let max_turns = role
            .max_turns
            .min(self.runtime.agents.max_turns.unwrap_or(u32::MAX))
            .max(1);
        let opened = self
            .open_session(&ctx.node, &role.name, ctx.attempt)
            .await?;
        // The activation's calls, learned by the tool knowledge graph when it ends.
        let calls = CallLog::default();
        let sink = logged_sink(opened.sink, &calls);
        let (env, node_wt, fresh) = self
            .activation_workspace(env, workdir, granted.can_write(), &node)
            .await?;
        let run = AgentRun {
            node: node.clone(),
            role: role.clone(),
            provider,
            tools: registry,
            tool_scope: granted.scope,
            env: env.clone(),
            gate,
            ledger: Some(self.ledger.clone()),
            messages,
            max_turns,
            events: sink.clone(),
            inbox: Some(Box::new(ctx.mailbox)),
            first_turn: opened.first_turn,
            attempt: ctx.attempt,
            free_text: false,
            context,
            cancel: ctx.cancel.clone(),
            probe: self.probe(&role, &env),
        };
        let mut resume = Resume::choose(
            ctx.attempt,
            ctx.resume
                .as_ref()
                .map(|r| (r.scratch.clone(), r.answer.clone())),
            opened.recorded,
        );
        if fresh {
            resume = started_over(resume, sink.as_ref());
        }
        let outcome = run.run(resume).await;
        self.learn_calls(&stage_name, &role.name, &calls).await;
        match outcome {
            Ok(AgentOutcome::Interrupted { interrupt, scratch }) => {
                Ok(NodeOutput::interrupt_with(interrupt, scratch))
            }
            Ok(AgentOutcome::Done(report)) => {
                let out = self
                    .finish(
                        &agent.agent,
                        &role,
                        report,
                        &env,
                        node_wt.as_ref().map(|wt| (wt, !stage.merge_later)),
                        &ctx.cancel,
                    )
                    .await;
                emit_session_end(sink.as_ref(), &out);
                out
            }
            // Pruned or the run cancelled: the engine has dropped this activation already;
            // the service prunes its worktree (`RunContext::roll_back`), or drops it with the
            // run's others when the run ends.
            Err(trellis_agents::Error::Cancelled) => Err(NodeError::new("cancelled")),
            Err(e) => {
                emit(
                    sink.as_ref(),
                    SessionEvent::SessionError {
                        error: e.to_string(),
                    },
                );
                Ok(NodeOutput::failure(format!("{}: {e}", agent.agent)))
            }
        }
    }

    /// How the agent's questions are answered in the run's input mode: interrupts through a
    /// gate of the graph, or approved or denied at once.
    fn interaction(&self) -> (Arc<dyn Interaction>, Option<Arc<GraphInteraction>>) {
        match self.options.input {
            InputMode::Interrupts => {
                let g = Arc::new(GraphInteraction::new());
                (g.clone(), Some(g))
            }
            InputMode::Approve => (Arc::new(NonInteractive { approve: true }), None),
            InputMode::Deny => (Arc::new(NonInteractive { approve: false }), None),
        }
    }

    /// The activation's prompt: the role's system prompt with its tools, then the context
    /// messages by kind (project — with the project's instructions in at most
    /// `instructions_budget` characters —, codebase, enriched context, earlier stages, the
    /// user's messages, the task).
    fn activation_messages(
        &self,
        role: &RoleSpec,
        tools: &[(String, String)],
        stage: &StageContext,
        ctx: &NodeContext,
        instructions_budget: usize,
    ) -> Vec<Message> {
        let stage_name = &stage.stage_name;
        let task = ctx
            .state
            .get("task")
            .and_then(Value::as_str)
            .unwrap_or(&stage.task)
            .to_owned();
        // Messages buffered before the node started are context; those that arrive while it
        // runs reach the agent through its inbox (the node's mailbox) before its next call.
        let user_messages: Vec<String> = ctx.messages.iter().map(|m| m.text.clone()).collect();
        let parts = vec![
            (ContextKind::Project, self.project_text(instructions_budget)),
            (
                ContextKind::Codebase,
                rendered_text(ctx.state.get_in("retrieval_context", stage_name)),
            ),
            (
                ContextKind::Enriched,
                rendered_text(ctx.state.get_in("enriched_context", stage_name)),
            ),
            (
                ContextKind::EarlierStages,
                // A step that gets exactly what it needs in its work item (the task tree's
                // typed handoffs) says so with `"earlier_stages": false`.
                if ctx.input.get("earlier_stages") == Some(&Value::Bool(false)) {
                    String::new()
                } else {
                    earlier_stages(ctx.state.get("stage_results"), stage_name)
                },
            ),
            (ContextKind::UserMessages, user_messages.join("\n")),
            (
                ContextKind::Task,
                task_text(role, &task, &ctx.input, ctx.attempt, ctx.previous.as_ref()),
            ),
        ];
        let mut messages = vec![Message::system(system_prompt(role, tools))];
        messages.extend(context_messages(&parts));
        messages
    }

    /// Where the agent works: a merge agent in the merge's worktree and a reviewer of a
    /// node's work in that node's worktree (`workdir`; nothing of theirs is committed by the
    /// activation); an agent whose tools can change files in a worktree of its own, merged
    /// into the run branch when it is done; the others in the run's worktree.
    async fn activation_workspace(
        &self,
        env: ToolEnv,
        workdir: Option<PathBuf>,
        can_write: bool,
        node: &str,
    ) -> Result<(ToolEnv, Option<NodeWorktree>, bool), NodeError> {
        Ok(match workdir {
            Some(dir) => (self.env_in(&env, &dir)?, None, false),
            None if can_write => {
                let (wt, fresh) = self.node_worktree(node).await?;
                (self.env_in(&env, &wt.path)?, Some(wt), fresh)
            }
            None => (env, None, false),
        })
    }

    /// The activation's context policy; when MCP tools compete for the schema budget, the
    /// index's embeddings rank them too.
    async fn activation_context(
        &self,
        role: &RoleSpec,
        node: &str,
        stage: &str,
        agent: &str,
        registry: &Registry,
        granted: &GrantedTools,
    ) -> trellis_agents::ContextPolicy {
        let mut context = self.context_policy(&role.name, node, stage, agent).await;
        if registry
            .specs_for(granted.allow(role))
            .iter()
            .any(|s| registry.sourced(&s.name))
        {
            context.tool_embedder = self.tool_embedder().await;
        }
        context
    }

    /// The characters of project instructions the activation's prompt carries (a quarter
    /// of its input limit, at most `[instructions] max_chars`); its nested instructions go
    /// into `context` to come with the paths they apply to.
    async fn give_instructions(
        &self,
        context: &mut trellis_agents::ContextPolicy,
        provider: &dyn trellis_llm::ModelProvider,
    ) -> usize {
        let window = provider.context_window().await.map(|w| w.tokens);
        let budget = self
            .runtime
            .instructions
            .config()
            .budget(Some(context.limits(window).limit));
        context.path_notes = crate::instructions::NestedNotes::of(&self.instructions, budget);
        budget
    }

    /// Teaches the tool knowledge graph the activation's calls, under `stage/role`.
    async fn learn_calls(&self, stage: &str, role: &str, calls: &CallLog) {
        let learned = calls.take();
        if learned.is_empty() {
            // Nothing to learn (ToolKnowledge::learn would return at once): no thread hop.
            return;
        }
        let knowledge = self.runtime.tool_knowledge.clone();
        let context = format!("{stage}/{role}");
        // Learning writes to the store: off the async workers.
        let _ = tokio::task::spawn_blocking(move || knowledge.learn(&context, learned)).await;
    }
}

/// The text of a context part in the run's state: a string, or an object's `rendered`.
fn rendered_text(v: Option<&Value>) -> String {
    match v {
        Some(Value::String(s)) => s.clone(),
        Some(v) => v
            .get("rendered")
            .and_then(Value::as_str)
            .map(str::to_owned)
            .unwrap_or_default(),
        None => String::new(),
    }
}

/// `resume` for an agent whose worktree was just made here: an attempt that ran before
/// in a worktree this clone does not have (the run moved from another worker's clone,
/// `[repository] remote`) starts over — replaying its tool calls would claim edits that are
/// not here — with a note saying so.
fn started_over(resume: Resume, sink: Option<&SessionSink>) -> Resume {
    let ran_elsewhere = match &resume {
        Resume::Recorded(events) => events
            .iter()
            .any(|e| matches!(e, SessionEvent::ToolCompleted { .. })),
        Resume::Interrupt { .. } => true,
        Resume::Fresh => false,
    };
    if !ran_elsewhere {
        return resume;
    }
    emit(
        sink,
        SessionEvent::Note {
            text: "this agent's earlier work in this attempt was done in another clone and \
                   is not here: the attempt starts over"
                .into(),
        },
    );
    Resume::Fresh
}

/// The session's sink with every event also noted in the activation's call log.
fn logged_sink(inner: Option<SessionSink>, calls: &CallLog) -> Option<SessionSink> {
    let calls = calls.clone();
    Some(Arc::new(move |e: SessionEvent| {
        calls.note(&e);
        if let Some(inner) = &inner {
            inner(e);
        }
    }))
}

/// Sends `e` to the session's sink, if any.
fn emit(sink: Option<&SessionSink>, e: SessionEvent) {
    if let Some(sink) = sink {
        sink(e);
    }
}

/// Ends the session with the node's result, or with the error finishing it raised.
fn emit_session_end(sink: Option<&SessionSink>, out: &Result<NodeOutput, NodeError>) {
    match out {
        Ok(o) => emit(
            sink,
            SessionEvent::SessionCompleted {
                output: o.recorded().clone(),
            },
        ),
        Err(e) => emit(
            sink,
            SessionEvent::SessionError {
                error: e.to_string(),
            },
        ),
    }
}
