//! The handlers of the stage kinds beyond agent stages (`docs/workflows.md`,
//! "Stage kinds"): `gate` (an artifact awaits the user's approval), `review` (an agent's
//! verdict APPROVED / NEEDS_REVISION / HUMAN_REVIEW_REQUESTED), `deterministic` (built-in
//! functions). Routing is the compiled graph's: a handler only reports success, failure with
//! `feedback` (handed to the producer / the reviewed stage) or an interrupt.

use std::sync::Arc;

use serde_json::{Value, json};
use trellis_graph::{NodeContext, NodeError, NodeOutput};
use trellis_protocol::{Artifact, ArtifactStatus, InputMode, Interrupt, WorkspaceEvent};
use trellis_workflow::{AgentSpec, Kind, StageContext};

use crate::handlers::RunContext;
use crate::stage_tools::{
    Announce, Caller, REVIEW_KIND, StageRole, StageSignal, StageSink, StageTools, StoreSink,
    Verdict,
};
use crate::testcmd;
use crate::text::clip;
use trellis_workflow::artifacts::{ArtifactError, ArtifactKind};

/// How often a gate sends its producer back for an artifact it never submitted.
pub const MISSING_ARTIFACT_ROUNDS: u32 = 3;

fn node_error(e: impl std::fmt::Display) -> NodeError {
    NodeError::new(e.to_string())
}

impl RunContext {
    /// The latest version of artifact `kind` of this run.
    pub(crate) fn latest_artifact(&self, kind: &str) -> Result<Option<Artifact>, NodeError> {
        Ok(self
            .runtime
            .store
            .artifacts(&self.run)
            .map_err(node_error)?
            .into_iter()
            .filter(|a| a.kind == kind)
            .max_by_key(|a| a.version))
    }

    /// Sets an artifact's status (unless it has it already) and announces the change.
    pub(crate) fn set_artifact_status(
        &self,
        a: &Artifact,
        status: ArtifactStatus,
        feedback: Option<&str>,
    ) -> Result<(), NodeError> {
        if a.status == status {
            return Ok(());
        }
        let changed = self
            .runtime
            .store
            .set_artifact_status(a.id, status, feedback)
            .map_err(node_error)?;
        self.announce_artifact(&changed);
        Ok(())
    }

    /// `workflow:approval_needed` / `workflow:artifact_changed` on the workspace stream.
    pub(crate) fn announce_artifact(&self, a: &Artifact) {
        if let Some(hub) = &self.options.sessions {
            hub.workspace(
                self.options.cause.clone(),
                WorkspaceEvent::ArtifactChanged {
                    artifact: a.id,
                    run: a.run.clone(),
                    status: a.status,
                },
            );
        }
    }

    /// A `gate` stage: approved artifact → success; waiting → an approval interrupt carrying
    /// the artifact's id (so approving the artifact answers it); changes requested → failure
    /// with the feedback; a rejection without feedback → failure without it (the run ends).
    pub(crate) async fn run_gate(
        self: Arc<Self>,
        stage: StageContext,
        ctx: NodeContext,
    ) -> Result<NodeOutput, NodeError> {
        let Kind::Gate { artifact, producer } = &stage.kind else {
            return Err(NodeError::new("not a gate stage"));
        };
        let Some(a) = self.latest_artifact(artifact)? else {
            // The producer gets MISSING_ARTIFACT_ROUNDS chances; then the run ends (a failure
            // without feedback routes to ABORT).
            let error = ctx
                .state
                .get_in("stage_results", producer)
                .and_then(|r| r.pointer("/output/artifact_error"))
                .and_then(Value::as_str)
                .map(str::to_owned);
            let feedback = (ctx.attempt < MISSING_ARTIFACT_ROUNDS).then(|| {
                error.unwrap_or_else(|| {
                    format!(
                        "No `{artifact}` was submitted. Submit it (the stage's submit tool) \
                         before ending the stage."
                    )
                })
            });
            return Ok(NodeOutput::failure(format!(
                "gate `{}`: stage `{producer}` submitted no `{artifact}`",
                stage.stage_name
            ))
            .result(json!({ "reason": "no artifact", "feedback": feedback })));
        };
        let seen = json!({ "artifact": a.id, "kind": a.kind, "version": a.version });
        if let Some(r) = &ctx.resume {
            let comment = feedback_of(&r.answer);
            let id = r.scratch.get("artifact").and_then(Value::as_i64);
            let a = match id {
                Some(id) if id != a.id => self.runtime.store.artifact(id).map_err(node_error)?,
                _ => a,
            };
            return if r.answer.is_approval() {
                self.set_artifact_status(&a, ArtifactStatus::Approved, comment.as_deref())?;
                Ok(NodeOutput::success().result(json!({
                    "artifact": a.id, "kind": a.kind, "version": a.version,
                    "status": "approved", "comment": comment,
                })))
            } else {
                self.set_artifact_status(&a, ArtifactStatus::ChangesRequested, comment.as_deref())?;
                Ok(NodeOutput::failure("changes requested").result(json!({
                    "reason": "changes requested", "artifact": a.id, "kind": a.kind,
                    "version": a.version, "feedback": comment,
                })))
            };
        }
        match (a.status, self.options.input) {
            (ArtifactStatus::Approved, _) => {
                Ok(NodeOutput::success().result(json!({ "status": "approved", "artifact": seen })))
            }
            (ArtifactStatus::ChangesRequested, _) => Ok(NodeOutput::failure("changes requested")
                .result(json!({
                    "reason": "changes requested", "artifact": seen, "feedback": a.feedback,
                }))),
            (_, InputMode::Approve) => {
                self.set_artifact_status(
                    &a,
                    ArtifactStatus::Approved,
                    Some("approved by the run's input mode"),
                )?;
                Ok(NodeOutput::success()
                    .result(json!({ "status": "approved", "auto": true, "artifact": seen })))
            }
            (_, InputMode::Deny) => Ok(NodeOutput::failure(format!(
                "`{artifact}` needs an approval and the run's input mode denies"
            ))
            .result(
                json!({ "reason": "approval denied by the run's input mode", "artifact": seen }),
            )),
            (_, InputMode::Interrupts) => {
                if a.status == ArtifactStatus::Draft {
                    self.set_artifact_status(&a, ArtifactStatus::AwaitingApproval, None)?;
                }
                let mut interrupt = Interrupt::approval(format!(
                    "Approve the {} (version {}) from `{producer}`? Approve to continue, or \
                     request changes with feedback.",
                    artifact.replace('_', " "),
                    a.version
                ));
                interrupt.data = json!({
                    "artifact": a.id, "kind": a.kind, "version": a.version,
                    "content": a.content, "stage": stage.stage_name,
                });
                Ok(NodeOutput::interrupt_with(
                    interrupt,
                    json!({ "artifact": a.id }),
                ))
            }
        }
    }

    /// A `review` stage: the review agent runs (unless this is the answer to its human-review
    /// request), then its verdict decides.
    pub(crate) async fn run_review(
        self: Arc<Self>,
        stage: StageContext,
        agent: AgentSpec,
        ctx: NodeContext,
    ) -> Result<NodeOutput, NodeError> {
        let Kind::Review { reviews } = &stage.kind else {
            return Err(NodeError::new("not a review stage"));
        };
        let reviews = reviews.clone();
        // The answer to our own HUMAN_REVIEW_REQUESTED (not to one of the agent's tools).
        if let Some(r) = &ctx.resume
            && let Some(summary) = r.scratch.get("human_review")
        {
            let comment = feedback_of(&r.answer);
            let by = json!({ "by": "user", "comment": comment, "review": summary });
            return Ok(if r.answer.is_approval() {
                NodeOutput::success().result(json!({ "verdict": "APPROVED", "human": by }))
            } else {
                let feedback = comment.unwrap_or_else(|| "revise (no comment given)".into());
                NodeOutput::failure("changes requested by the user").result(json!({
                    "verdict": "NEEDS_REVISION", "human": by, "feedback": feedback,
                    "reason": "changes requested by the user", "revise": reviews,
                }))
            });
        }
        let node = ctx.node.to_string();
        // The work of a fan-out's item (`<stage>/<key>`): the reviewer reads that node's
        // worktree and is shown its diff against the run branch.
        let mut ctx = ctx;
        let workdir = if reviews.contains('/') {
            let (nodes, of) = (self.nodes.clone(), reviews.clone());
            let seen = tokio::task::spawn_blocking(move || nodes.work_of(&of))
                .await
                .map_err(node_error)?
                .map_err(NodeError::new)?;
            seen.map(|(path, diff)| {
                if let Value::Object(m) = &mut ctx.input {
                    m.insert("work_diff".into(), json!(diff));
                }
                path
            })
        } else {
            None
        };
        let (out, sink) = self
            .clone()
            .run_stage_agent(stage.clone(), agent, ctx, workdir)
            .await?;
        if out.is_interrupt() {
            return Ok(out);
        }
        let mut result = out.recorded().clone();
        let sink: Option<&dyn StageSink> = sink.as_deref().map(|s| s as &dyn StageSink);
        let (verdict, summary_text) = self.verdict_of(&node, sink, &result)?;
        if let Value::Object(m) = &mut result {
            m.insert("verdict".into(), json!(verdict.as_str()));
            m.insert("summary".into(), json!(summary_text));
        }
        Ok(match verdict {
            Verdict::Approved => NodeOutput::success().result(result),
            Verdict::NeedsRevision => {
                // The stored review was decided by its reviewer: changes requested.
                if let Some(a) = self.latest_artifact(REVIEW_KIND)?
                    && a.node.as_ref().is_some_and(|n| n.as_str() == node)
                    && a.status == ArtifactStatus::AwaitingApproval
                {
                    self.set_artifact_status(
                        &a,
                        ArtifactStatus::ChangesRequested,
                        Some(&summary_text),
                    )?;
                }
                if let Value::Object(m) = &mut result {
                    m.insert("feedback".into(), json!(summary_text));
                    m.insert("revise".into(), json!(reviews));
                }
                NodeOutput::failure("NEEDS_REVISION").result(result)
            }
            Verdict::HumanReviewRequested => match self.options.input {
                InputMode::Interrupts => {
                    let mut interrupt = Interrupt::review(format!(
                        "The reviewer asks for a human review of `{reviews}`: {}",
                        clip(&summary_text, 400)
                    ));
                    interrupt.data = json!({ "verdict": verdict.as_str(), "summary": summary_text,
                                             "reviews": reviews });
                    NodeOutput::interrupt_with(interrupt, json!({ "human_review": summary_text }))
                }
                InputMode::Approve => NodeOutput::success().result(result),
                InputMode::Deny => NodeOutput::failure("human review denied by the input mode")
                    .result(
                        json!({ "verdict": verdict.as_str(), "reason": "human review denied" }),
                    ),
            },
        })
    }

    /// The review's verdict and summary: what `complete_review` recorded in this activation
    /// (its signal, or after a crash the `review` artifact this node stored that nobody has
    /// decided yet), else the first word of the agent's answer when it is a verdict, else
    /// APPROVED on success and NEEDS_REVISION on failure.
    fn verdict_of(
        &self,
        node: &str,
        sink: Option<&dyn StageSink>,
        result: &Value,
    ) -> Result<(Verdict, String), NodeError> {
        let signalled = sink.and_then(|s| {
            s.signals().into_iter().rev().find_map(|sig| match sig {
                StageSignal::Verdict { verdict, .. } => Some((verdict.verdict, verdict.summary)),
                _ => None,
            })
        });
        if let Some(v) = signalled {
            return Ok(v);
        }
        if let Some(a) = self.latest_artifact(REVIEW_KIND)?
            && a.node.as_ref().is_some_and(|n| n.as_str() == node)
            && a.status == ArtifactStatus::AwaitingApproval
            && let Ok(v) = serde_json::from_str::<Value>(&a.content)
            && let Some(verdict) = v["verdict"].as_str().and_then(|t| Verdict::parse(t).ok())
        {
            return Ok((
                verdict,
                v["summary"].as_str().unwrap_or_default().to_owned(),
            ));
        }
        let output = crate::handlers::output_text(result);
        let named = output
            .split(|c: char| c.is_whitespace() || c == ':' || c == '.' || c == ',')
            .find(|w| !w.is_empty())
            .and_then(|w| Verdict::parse(w).ok());
        let failed = result.get("failure").and_then(Value::as_bool) == Some(true);
        let verdict = named.unwrap_or(if failed {
            Verdict::NeedsRevision
        } else {
            Verdict::Approved
        });
        Ok((verdict, output))
    }

    /// A `deterministic` stage: `run_tests` (the project's test command in the worktree) or
    /// `validate_artifact` (the latest `args.artifact` exists).
    pub(crate) async fn run_deterministic(
        self: Arc<Self>,
        stage: StageContext,
        ctx: NodeContext,
    ) -> Result<NodeOutput, NodeError> {
        let Kind::Deterministic { function, args } = &stage.kind else {
            return Err(NodeError::new("not a deterministic stage"));
        };
        match function.as_str() {
            "run_tests" => {
                let Some(cmd) = &self.test_command else {
                    return Ok(NodeOutput::failure(
                        "no test command found (set agents.test_command)",
                    ));
                };
                let mut env = self.env(
                    ctx.node.as_str(),
                    Arc::new(trellis_tools::NonInteractive { approve: true }),
                )?;
                env.node = Some(ctx.node.to_string());
                let run = testcmd::run(
                    &self.registry(),
                    &env,
                    cmd,
                    self.runtime.agents.test_timeout().as_secs(),
                    ctx.cancel.clone(),
                )
                .await;
                let result = serde_json::to_value(&run).unwrap_or(Value::Null);
                Ok(if run.passed {
                    NodeOutput::success().result(result)
                } else {
                    let mut result = result;
                    if let Value::Object(m) = &mut result {
                        m.insert(
                            "reason".into(),
                            json!(format!(
                                "`{}` failed: {}",
                                cmd.command,
                                clip(&run.output, 1500)
                            )),
                        );
                    }
                    NodeOutput::failure(format!("`{}` failed", cmd.command)).result(result)
                })
            }
            "validate_artifact" => {
                let kind = args
                    .get("artifact")
                    .and_then(Value::as_str)
                    .unwrap_or_default();
                let Some(a) = self.latest_artifact(kind)? else {
                    return Ok(NodeOutput::failure(format!(
                        "no `{kind}` artifact was submitted"
                    )));
                };
                let seen = json!({ "artifact": a.id, "kind": a.kind, "version": a.version });
                // `review` and the pulse summary are the runtime's own records, not validated.
                match trellis_workflow::artifacts::validate(kind, &a.content) {
                    Ok(_) | Err(ArtifactError::UnknownKind { .. }) => {
                        Ok(NodeOutput::success().result(seen))
                    }
                    Err(e) => Ok(NodeOutput::failure(format!("`{kind}` is invalid"))
                        .result(json!({ "artifact": seen, "reason": e.to_string() }))),
                }
            }
            "prioritize" => self.run_prioritize(&ctx),
            "validate_task" => self.run_validate_task(&ctx),
            other => Ok(NodeOutput::failure(format!("unknown function `{other}`"))),
        }
    }
}

/// The feedback in an answer: its `comment`, or the answer itself when it is text that is
/// not an approval (`trellis runs resume RUN --answer approve_plan="split pulse 2"`).
fn feedback_of(answer: &trellis_protocol::Answer) -> Option<String> {
    let text = match &answer.0 {
        Value::String(t) if !answer.is_approval() => Some(t.as_str()),
        v => v.get("comment").and_then(Value::as_str),
    };
    text.map(str::trim)
        .filter(|c| !c.is_empty())
        .map(str::to_owned)
}

impl RunContext {
    /// The sink of a stage role's tools for `node`: artifacts in the store and in the run's
    /// artifacts directory, announced on the workspace stream.
    fn stage_sink(&self, role: &str) -> Arc<StoreSink> {
        let mut sink = StoreSink::new(
            self.runtime.store.clone(),
            &self.runtime.repo,
            self.run.clone(),
        )
        .with_author(role);
        if let Some(hub) = self.options.sessions.clone() {
            let cause = self.options.cause.clone();
            let announce: Announce = Arc::new(move |a: &Artifact| {
                hub.workspace(
                    cause.clone(),
                    WorkspaceEvent::ArtifactChanged {
                        artifact: a.id,
                        run: a.run.clone(),
                        status: a.status,
                    },
                );
            });
            sink = sink.with_announce(announce);
        }
        Arc::new(sink)
    }

    /// An agent activation. A stage role (`scoping`, `research`, `planning`, `pulsing`,
    /// `review`) gets the stage tools (`crate::stage_tools`) over a sink of its own; a stage
    /// that `produces` an artifact is checked afterwards: when the agent submitted none, its
    /// final answer is taken as the artifact if it validates, else the validation error is
    /// recorded (`artifact_error`) for the gate to send back.
    pub(crate) async fn run_stage_agent(
        self: Arc<Self>,
        stage: StageContext,
        agent: AgentSpec,
        ctx: NodeContext,
        workdir: Option<std::path::PathBuf>,
    ) -> Result<(NodeOutput, Option<Arc<StoreSink>>), NodeError> {
        let role = StageRole::parse(&agent.agent);
        let node = ctx.node.clone();
        let sink =
            (role.is_some() || stage.produces.is_some()).then(|| self.stage_sink(&agent.agent));
        let registry = match (role, &sink) {
            (Some(role), Some(sink)) => {
                let mut r = (*self.registry()).clone();
                let dyn_sink: Arc<dyn StageSink> = sink.clone();
                for tool in StageTools::new(dyn_sink).tools(role) {
                    r.register(tool);
                }
                r.allow(role.as_str(), role.tool_names().iter().copied());
                Arc::new(r)
            }
            _ => self.registry(),
        };
        let out = self
            .clone()
            .agent_activation(stage.clone(), agent, ctx, registry, workdir)
            .await?;
        let (Some(kind), Some(sink)) = (&stage.produces, &sink) else {
            return Ok((out, sink));
        };
        if out.is_failure() || out.is_interrupt() || kind == REVIEW_KIND {
            return Ok((out, Some(sink.clone())));
        }
        let kinds: Vec<&String> = std::iter::once(kind).chain(&stage.also_produces).collect();
        let mut result = out.recorded().clone();
        let answer = crate::handlers::output_text(&result);
        // An answer holding several artifacts has a `# <Title>` section per artifact.
        let sections = if kinds.len() > 1 {
            let parsed: Vec<ArtifactKind> = kinds.iter().filter_map(|k| k.parse().ok()).collect();
            trellis_workflow::artifacts::split_sections(&answer, &parsed)
        } else {
            Vec::new()
        };
        let mut stored = Vec::new();
        let mut errors = Vec::new();
        for kind in kinds {
            let submitted = sink
                .signals()
                .iter()
                .any(|s| matches!(s, StageSignal::Submitted(a) if a.kind == *kind))
                || self.latest_artifact(kind)?.is_some_and(|a| {
                    a.node.as_ref() == Some(&node)
                        && matches!(
                            a.status,
                            ArtifactStatus::AwaitingApproval | ArtifactStatus::Draft
                        )
                });
            if submitted {
                continue;
            }
            let text = if sections.is_empty() {
                Some(answer.clone())
            } else {
                sections
                    .iter()
                    .find(|(k, _)| k.as_str() == kind.as_str())
                    .map(|(_, t)| t.clone())
            };
            let Some(text) = text else {
                let title = kind
                    .parse::<ArtifactKind>()
                    .map_or(kind.as_str(), |k| k.title());
                errors.push(format!(
                    "The stage must submit `{kind}` and did not; its final answer has no \
                     `# {title}` section holding it."
                ));
                continue;
            };
            let caller = Caller {
                run: Some(self.run.clone()),
                node: Some(node.clone()),
            };
            match trellis_workflow::artifacts::validate(kind, &text) {
                Ok(valid) => {
                    let sink = sink.clone();
                    let submitted =
                        tokio::task::spawn_blocking(move || sink.submit(&caller, &valid))
                            .await
                            .map_err(node_error)?;
                    match submitted {
                        Ok(a) => stored.push(json!(a)),
                        Err(e) => errors.push(e.to_string()),
                    }
                }
                Err(e) => errors.push(format!(
                    "The stage must submit a `{kind}` and did not; its final answer is not \
                     one either: {e}"
                )),
            }
        }
        if let Value::Object(m) = &mut result {
            match stored.len() {
                0 => {}
                1 => {
                    m.insert("artifact".into(), stored.remove(0));
                }
                _ => {
                    m.insert("artifacts".into(), json!(stored));
                }
            }
            if !errors.is_empty() {
                m.insert("artifact_error".into(), json!(errors.join("\n")));
            }
        }
        // A collector's artifacts are checked here (no gate follows to send them back): an
        // invalid one fails the activation with the errors as its feedback.
        if matches!(stage.kind, Kind::Collector { .. }) && !errors.is_empty() {
            let feedback = errors.join("\n");
            if let Value::Object(m) = &mut result {
                m.insert("feedback".into(), json!(feedback));
                m.insert("failure".into(), json!(true));
            }
            return Ok((
                NodeOutput::failure(clip(&feedback, 400)).result(result),
                Some(sink.clone()),
            ));
        }
        Ok((out.result(result), Some(sink.clone())))
    }
}
