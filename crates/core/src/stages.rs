//! The handlers of the stage kinds beyond seed 000's agent stages (`docs/workflows.md`,
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
use crate::testcmd;

/// How often a gate sends its producer back for an artifact it never submitted.
pub const MISSING_ARTIFACT_ROUNDS: u32 = 3;

fn node_error(e: impl std::fmt::Display) -> NodeError {
    NodeError::new(e.to_string())
}

/// A review verdict (seed 004).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// Proceed.
    Approved,
    /// The reviewed stage runs again with the feedback.
    NeedsRevision,
    /// A person decides.
    HumanReviewRequested,
}

impl Verdict {
    /// The seed's names.
    pub const NAMES: [&'static str; 3] = ["APPROVED", "NEEDS_REVISION", "HUMAN_REVIEW_REQUESTED"];

    /// The seed's name.
    pub fn as_str(self) -> &'static str {
        match self {
            Verdict::Approved => "APPROVED",
            Verdict::NeedsRevision => "NEEDS_REVISION",
            Verdict::HumanReviewRequested => "HUMAN_REVIEW_REQUESTED",
        }
    }

    /// Parses a name (case and `-`/space insensitive).
    pub fn parse(text: &str) -> Option<Self> {
        let t = text.trim().to_ascii_uppercase().replace(['-', ' '], "_");
        Some(match t.as_str() {
            "APPROVED" | "APPROVE" => Verdict::Approved,
            "NEEDS_REVISION" | "REVISE" | "CHANGES_REQUESTED" => Verdict::NeedsRevision,
            "HUMAN_REVIEW_REQUESTED" | "HUMAN_REVIEW" => Verdict::HumanReviewRequested,
            _ => return None,
        })
    }
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
            let feedback = (ctx.attempt < MISSING_ARTIFACT_ROUNDS).then(|| {
                format!(
                    "No `{artifact}` was submitted. Submit it (the stage's submit tool) before \
                     ending the stage."
                )
            });
            return Ok(NodeOutput::failure(format!(
                "gate `{}`: stage `{producer}` submitted no `{artifact}`",
                stage.stage_name
            ))
            .result(json!({ "reason": "no artifact", "feedback": feedback })));
        };
        let seen = json!({ "artifact": a.id, "kind": a.kind, "version": a.version });
        if let Some(r) = &ctx.resume {
            let comment = r
                .answer
                .0
                .get("comment")
                .and_then(Value::as_str)
                .map(str::trim)
                .filter(|c| !c.is_empty())
                .map(str::to_owned);
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
            let comment = r
                .answer
                .0
                .get("comment")
                .and_then(Value::as_str)
                .map(str::trim)
                .filter(|c| !c.is_empty())
                .map(str::to_owned);
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
        let out = self.clone().run_agent(stage.clone(), agent, ctx).await?;
        if out.is_interrupt() {
            return Ok(out);
        }
        let result = out.recorded().clone();
        let (verdict, summary) = self.verdict_of(&result);
        let summary_text = summary.clone();
        let mut result = result;
        if let Value::Object(m) = &mut result {
            m.insert("verdict".into(), json!(verdict.as_str()));
        }
        Ok(match verdict {
            Verdict::Approved => NodeOutput::success().result(result),
            Verdict::NeedsRevision => {
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

    /// The review's verdict and summary: the `verdict` the agent's report names (its first
    /// word of output when it is a verdict name), else APPROVED on success and NEEDS_REVISION
    /// on failure.
    fn verdict_of(&self, result: &Value) -> (Verdict, String) {
        let output = result
            .get("output")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned();
        let named = result
            .get("verdict")
            .and_then(Value::as_str)
            .and_then(Verdict::parse)
            .or_else(|| {
                output
                    .split(|c: char| c.is_whitespace() || c == ':' || c == '.')
                    .find(|w| !w.is_empty())
                    .and_then(Verdict::parse)
            });
        let failed = result.get("failure").and_then(Value::as_bool) == Some(true);
        let verdict = named.unwrap_or(if failed {
            Verdict::NeedsRevision
        } else {
            Verdict::Approved
        });
        (verdict, output)
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
                    &self.registry,
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
                match self.latest_artifact(kind)? {
                    Some(a) => Ok(NodeOutput::success()
                        .result(json!({ "artifact": a.id, "kind": a.kind, "version": a.version }))),
                    None => Ok(NodeOutput::failure(format!(
                        "no `{kind}` artifact was submitted"
                    ))),
                }
            }
            other => Ok(NodeOutput::failure(format!("unknown function `{other}`"))),
        }
    }
}

fn clip(text: &str, max: usize) -> String {
    crate::handlers::clip(text, max)
}
