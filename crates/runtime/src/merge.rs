//! The `merge` stage kind and a fan-out's item sources (`docs/workflows.md`, "Stage kinds"):
//! a merge node brings a node's branch into the run branch — cleanly when git can, else a
//! merge agent resolves the conflicts in the merge's own worktree, and when it cannot, a
//! person is asked to (the run waits). The strategy is recorded in the merge commit
//! (`Trellis-Merge-Strategy:`, and `Trellis-Resolution:` for a resolved conflict) and in the
//! node's result.

use std::sync::Arc;

use serde_json::{Value, json};
use trellis_graph::{NodeContext, NodeError, NodeOutput};
use trellis_protocol::{InputMode, Interrupt};
use trellis_tools::worktree::nodes::{MergeOutcome, MergeRecord, PendingMerge};
use trellis_workflow::artifacts::tickets::parse_tickets;
use trellis_workflow::{AgentSpec, Kind, StageContext};

use crate::handlers::RunContext;

/// The strategy a merge node records for a clean merge.
pub const NODE_MERGE: &str = "merge node";
/// The strategy recorded when the merge agent resolved the conflicts.
pub const AGENT_RESOLVED: &str = "conflicts resolved by the merge agent";
/// The strategy recorded when a person resolved the conflicts.
pub const USER_RESOLVED: &str = "conflicts resolved by the user";

fn node_error(e: impl std::fmt::Display) -> NodeError {
    NodeError::new(e.to_string())
}

fn record(rec: &MergeRecord, how: &str, resolution: Option<&str>) -> Value {
    json!({
        "node": rec.node, "kind": rec.kind, "strategy": how, "before": rec.before,
        "after": rec.after, "resolution": resolution,
    })
}

impl RunContext {
    async fn blocking<T: Send + 'static>(
        &self,
        f: impl FnOnce(&crate::nodes::NodeSpaces) -> Result<T, String> + Send + 'static,
    ) -> Result<T, NodeError> {
        let nodes = self.nodes.clone();
        let out = tokio::task::spawn_blocking(move || f(&nodes))
            .await
            .map_err(node_error)?
            .map_err(NodeError::new)?;
        // A merge moved the run branch: the remote follows (`[repository] remote`).
        self.publish().await?;
        Ok(out)
    }

    /// A `merge` node: merges the branch of the node it `merges` (a fan-out item's work
    /// node, or a stage: its node, else its agents' nodes `<stage>/<key>`, in order) into the
    /// run branch. Merging again what is merged already changes nothing, so a merge that was
    /// interrupted (a person resolving a conflict, a crash) simply runs again.
    pub(crate) async fn run_merge(
        self: Arc<Self>,
        stage: StageContext,
        agent: Option<AgentSpec>,
        ctx: NodeContext,
    ) -> Result<NodeOutput, NodeError> {
        let Kind::Merge { merges } = &stage.kind else {
            return Err(NodeError::new("not a merge stage"));
        };
        let merges = merges.clone();
        let mut merged = Vec::new();
        let mut conflicts: Vec<String> = Vec::new();
        // The answer to our own question about a conflict nobody could resolve.
        if let Some(r) = &ctx.resume
            && let Some(node) = r.scratch.get("merge_conflict").and_then(Value::as_str)
        {
            match self.after_person(node, r.answer.is_approval()).await? {
                Ok(Some((rec, files))) => {
                    merged.push(rec);
                    conflicts.extend(files);
                }
                // Nothing waits any more (committed before a crash): merged again below.
                Ok(None) => {}
                Err(out) => return Ok(out),
            }
        }
        let of = merges.clone();
        let nodes = self.blocking(move |n| n.nodes_of(&of)).await?;
        let mut activation = Some(ctx);
        for node in nodes {
            let target = node.clone();
            let outcome = self
                .blocking(move |n| n.merge_node(&target, NODE_MERGE))
                .await?;
            let pending = match outcome {
                None | Some(MergeOutcome::UpToDate) => continue,
                Some(MergeOutcome::Merged(rec)) => {
                    merged.push(record(&rec, NODE_MERGE, None));
                    continue;
                }
                Some(MergeOutcome::Conflict(p)) => p,
            };
            // The merge agent runs as this activation (once: a second conflict in the same
            // merge goes to a person).
            let resolution = match (&agent, activation.take()) {
                (Some(agent), Some(mut ctx)) => {
                    ctx.resume = None;
                    self.clone()
                        .resolve_with_agent(&stage, agent.clone(), ctx, &pending)
                        .await?
                }
                (Some(_), None) => {
                    Err("the merge agent already resolved another conflict of this merge".into())
                }
                (None, _) => Err("this merge stage has no merge agent".to_owned()),
            };
            let tried = match resolution {
                Ok(summary) => {
                    let (n, why) = (node.clone(), summary.clone());
                    match self
                        .blocking(move |s| Ok(s.complete_merge(&n, &why)))
                        .await?
                    {
                        Ok(rec) => {
                            merged.push(record(&rec, AGENT_RESOLVED, Some(&summary)));
                            conflicts.extend(pending.files.iter().cloned());
                            continue;
                        }
                        Err(e) => e,
                    }
                }
                Err(e) => e,
            };
            return self.ask_person(&node, &pending, &tried).await;
        }
        let note = merged
            .is_empty()
            .then(|| format!("`{merges}` has nothing to merge"));
        Ok(NodeOutput::success().result(json!({
            "merged": merged, "conflicts": conflicts, "note": note,
        })))
    }

    /// Runs the merge agent in the merge's worktree; its report's first line is the
    /// resolution (`Err` when the agent failed or was interrupted).
    async fn resolve_with_agent(
        self: Arc<Self>,
        stage: &StageContext,
        agent: AgentSpec,
        mut ctx: NodeContext,
        pending: &PendingMerge,
    ) -> Result<Result<String, String>, NodeError> {
        if let Value::Object(m) = &mut ctx.input {
            m.insert(
                "conflict".into(),
                json!({ "node": pending.node, "target": pending.target, "files": pending.files }),
            );
        }
        let out = self
            .clone()
            .run_stage_agent(stage.clone(), agent, ctx, Some(pending.path.clone()))
            .await?
            .0;
        let result = out.recorded();
        if out.is_interrupt() || out.is_failure() {
            let why = result
                .get("reason")
                .and_then(Value::as_str)
                .unwrap_or("the merge agent did not resolve the conflicts");
            return Ok(Err(format!("the merge agent failed: {why}")));
        }
        let summary = result
            .get("output")
            .and_then(Value::as_str)
            .and_then(|o| o.lines().find(|l| !l.trim().is_empty()))
            .unwrap_or("resolved")
            .trim()
            .to_owned();
        Ok(Ok(summary))
    }

    /// Nobody resolved the conflict: ask a person to (the run waits), or fail when no one
    /// can be asked.
    async fn ask_person(
        &self,
        merges: &str,
        pending: &PendingMerge,
        tried: &str,
    ) -> Result<NodeOutput, NodeError> {
        let result = json!({
            "conflicts": pending.files, "worktree": pending.path, "reason": tried,
        });
        match self.options.input {
            InputMode::Interrupts => {
                let mut q = Interrupt::question(format!(
                    "Merging `{merges}` into {} conflicts in {} ({tried}). Resolve the files in \
                     {} (remove every conflict marker), then answer yes; answer no to give up \
                     this merge.",
                    pending.target,
                    pending.files.join(", "),
                    pending.path.display()
                ));
                q.data = result;
                Ok(NodeOutput::interrupt_with(
                    q,
                    json!({ "merge_conflict": merges }),
                ))
            }
            InputMode::Approve | InputMode::Deny => {
                let node = merges.to_owned();
                self.blocking(move |n| n.abort_merge(&node)).await?;
                Ok(NodeOutput::failure(format!(
                    "merge conflict in {} could not be resolved: {tried}",
                    pending.files.join(", ")
                ))
                .result(result))
            }
        }
    }

    /// A person answered the conflict question about `node`: yes → commit what they
    /// resolved (asking again while markers remain); no → drop the merge and fail. `Ok` with
    /// the merge's record and its conflicted files (none when nothing waits any more), or the
    /// node's output when it ends here.
    async fn after_person(
        &self,
        node: &str,
        approved: bool,
    ) -> Result<Result<Option<(Value, Vec<String>)>, NodeOutput>, NodeError> {
        let owned = node.to_owned();
        if !approved {
            self.blocking(move |n| n.abort_merge(&owned)).await?;
            return Ok(Err(NodeOutput::failure(format!(
                "the merge of `{node}` was given up by the user"
            ))));
        }
        let pending = {
            let owned = owned.clone();
            self.blocking(move |n| n.pending_merge(&owned)).await?
        };
        let Some(pending) = pending else {
            return Ok(Ok(None));
        };
        match self
            .blocking(move |n| Ok(n.complete_merge(&owned, "resolved by the user")))
            .await?
        {
            Ok(rec) => Ok(Ok(Some((
                record(&rec, USER_RESOLVED, Some("resolved by the user")),
                pending.files,
            )))),
            Err(e) => Ok(Err(self.ask_person(node, &pending, &e).await?)),
        }
    }

    /// The items of a fan-out with `items_from: tickets`: the latest `tickets.md`'s tickets.
    pub(crate) async fn run_items(
        self: Arc<Self>,
        stage: StageContext,
        _ctx: NodeContext,
    ) -> Result<NodeOutput, NodeError> {
        let Kind::FanOut {
            items_from: Some(kind),
            ..
        } = &stage.kind
        else {
            return Err(NodeError::new("not a fan-out with items_from"));
        };
        let Some(a) = self.latest_artifact(kind)? else {
            return Ok(NodeOutput::failure(format!(
                "no `{kind}` artifact was submitted, so there is nothing to fan out"
            )));
        };
        let tickets = match parse_tickets(&a.content) {
            Ok(t) => t,
            Err(e) => {
                return Ok(NodeOutput::failure(format!(
                    "`{kind}` v{} is invalid: {e}",
                    a.version
                )));
            }
        };
        let items: Vec<Value> = tickets
            .tickets
            .iter()
            .map(|t| {
                json!({
                    "id": t.id, "title": t.title, "description": t.description,
                    "depends_on": t.depends_on, "acceptance_criteria": t.acceptance_criteria,
                    "files": t.files,
                })
            })
            .collect();
        Ok(NodeOutput::success().result(json!({
            "items": items, "artifact": { "id": a.id, "kind": a.kind, "version": a.version },
        })))
    }
}
