//! Foresight: three modes at the start of an activation (`docs/tools.md`). Before the first model
//! call the tool knowledge graph is asked for the task's workflow
//! ([`ToolAdvisor::suggest`](trellis_tools::ToolAdvisor::suggest)):
//!
//! - **explicit** (confidence below 0.70): nothing is added; the model plans.
//! - **suggestion** (0.70 up to the speculation threshold): the workflow, its confidence and
//!   why are shown to the model after the task.
//! - **speculative execution** (at or above the threshold): the workflow's steps that are
//!   safe to run ahead — read-only, allowed to the agent, not on the dangerous list, every
//!   required argument bound by name from an earlier step's output, never asking the user,
//!   within `tools.speculation.max_ms` — run as a DAG now, and their results are part of
//!   the prompt, each cut to `max_result_tokens` and all to `max_total_tokens` (the cost of
//!   a speculation is the prompt it adds). The model answers from them instead of asking
//!   for the calls one turn at a time. The steps that could not run ahead are shown as the
//!   rest of the suggestion; a speculation that fails or times out falls back to the
//!   suggestion.
//!
//! A shown result counts as used, unless the model calls the same tool again with other
//! arguments (it wanted something else: wasted); the model asking for exactly a speculated
//! call is answered from the kept result (used). The calls run ahead are not tool calls of
//! the activation: the graph does not learn from its own speculation.

use std::collections::BTreeSet;
use std::fmt::Write as _;
use std::time::Instant;

use serde_json::Value;
use trellis_llm::{Message, Role};
use trellis_tools::dag::{self, Catalog, Dag, Runner, Step, StepStatus, schema};
use trellis_tools::{AdviceMode, SpeculationOutcome, Suggested, ToolAdvisor};

use super::AgentRun;
use trellis_tools::speculate::{Done, Speculated};

/// What foresight adds to a fresh activation.
#[derive(Debug, Default)]
pub(super) struct Foresight {
    /// Text added to the prompt after the task (a suggestion, or speculated results).
    pub message: Option<String>,
    /// Results run ahead (shown in `message` or only kept).
    pub speculated: Vec<Speculated>,
    /// The calls whose results were shown, as completed calls.
    pub history: Vec<Done>,
    /// Notes for the session.
    pub notes: Vec<String>,
}

/// What the task is about: `messages`' user messages before the first answer.
pub(super) fn task_text(messages: &[Message]) -> String {
    messages
        .iter()
        .take_while(|m| m.role != Role::Assistant)
        .filter(|m| m.role == Role::User)
        .map(|m| m.content.as_str())
        .collect::<Vec<_>>()
        .join("\n")
}

/// The suggested workflow as a numbered list with each step's predecessors.
fn steps_text(s: &Suggested, only: Option<&BTreeSet<usize>>) -> String {
    let mut out = String::new();
    for (i, tool) in s.tools.iter().enumerate() {
        if only.is_some_and(|o| !o.contains(&i)) {
            continue;
        }
        let after: Vec<&str> = s
            .edges
            .iter()
            .filter(|&&(_, j)| j == i)
            .map(|&(p, _)| s.tools[p].as_str())
            .collect();
        let _ = write!(out, "\n{}. {tool}", i + 1);
        if !after.is_empty() {
            let _ = write!(out, " (after {})", after.join(", "));
        }
    }
    out
}

fn suggestion_text(s: &Suggested, why_not_run: Option<&str>) -> String {
    let mut text = format!(
        "The tool knowledge graph of this workspace suggests a workflow for this task \
         (confidence {:.2}; a suggestion, not a certainty — {}):{}",
        s.confidence,
        if s.explanation.is_empty() {
            "no explanation"
        } else {
            &s.explanation
        },
        steps_text(s, None)
    );
    if let Some(why) = why_not_run {
        let _ = write!(text, "\nIt was not run ahead: {why}.");
    }
    text.push_str("\nFollow it where it fits the task; plan differently where it does not.");
    text
}

/// `text` within about `max` tokens (cut at a character boundary, saying so).
fn within_tokens(text: &str, max: usize) -> (String, bool) {
    let tokens = usize::try_from(trellis_llm::tokens::estimate_text(text)).unwrap_or(usize::MAX);
    if tokens <= max {
        return (text.to_owned(), false);
    }
    let mut end = (text.len() * max / tokens.max(1)).min(text.len());
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    (
        format!(
            "{}\n… (cut to the speculation's {max}-token limit; call the tool for all of it)",
            &text[..end]
        ),
        true,
    )
}

impl AgentRun {
    /// Asks the tool knowledge graph about the task in `messages` and acts on its mode.
    pub(super) async fn foresee(&self, messages: &[Message]) -> Foresight {
        let config = &self.env.config.speculation;
        let Some(advisor) = self.env.advisor.clone() else {
            return Foresight::default();
        };
        if !config.enabled || !config.from_task {
            return Foresight::default();
        }
        // No tools, nothing to foresee (and no catalog to build for it).
        let tools = self.tools.specs_for(self.allow_list());
        if tools.is_empty() {
            return Foresight::default();
        }
        let intent = task_text(messages);
        if intent.trim().is_empty() {
            return Foresight::default();
        }
        let Some(s) = advisor.suggest(&intent, &tools) else {
            return Foresight::default();
        };
        match s.mode {
            AdviceMode::Explicit => Foresight::default(),
            AdviceMode::Suggestion => Foresight {
                message: Some(suggestion_text(&s, None)),
                notes: vec![format!(
                    "suggested workflow {} (confidence {:.2})",
                    s.tools.join(" → "),
                    s.confidence
                )],
                ..Foresight::default()
            },
            AdviceMode::Speculative => self.run_ahead(&s, advisor.as_ref()).await,
        }
    }

    /// The steps of `s` to run ahead: safe ones whose predecessors all run ahead too, as a
    /// DAG in which every required argument is bound by name; `Err` says why none can.
    fn speculable(&self, s: &Suggested) -> Result<(Dag, BTreeSet<usize>), String> {
        let mut keep: BTreeSet<usize> = BTreeSet::new();
        for (i, tool) in s.tools.iter().enumerate() {
            let preds_kept = s
                .edges
                .iter()
                .filter(|&&(_, j)| j == i)
                .all(|(p, _)| keep.contains(p));
            if preds_kept && self.safe_to_speculate(tool) {
                keep.insert(i);
            }
        }
        // Dropping a step whose arguments cannot be bound changes the later ones' bindings:
        // rebuild until every kept step is fully bound.
        loop {
            if keep.is_empty() {
                return Err(
                    "none of its first steps is safe to run ahead with arguments \
                            the workflow itself provides"
                        .into(),
                );
            }
            let steps: Vec<Step> = keep
                .iter()
                .map(|&i| Step {
                    id: s.tools[i].clone(),
                    tool: s.tools[i].clone(),
                    args: Value::Object(Default::default()),
                    depends_on: s
                        .edges
                        .iter()
                        .filter(|&&(p, j)| j == i && keep.contains(&p))
                        .map(|&(p, _)| s.tools[p].clone())
                        .collect(),
                })
                .collect();
            let built = dag::build(&steps, self.tools.as_ref()).map_err(|e| e.to_string())?;
            let unbound: Vec<usize> = keep
                .iter()
                .zip(&built.nodes)
                .filter(|(_, node)| !self.fully_bound(node))
                .map(|(&i, _)| i)
                .collect();
            if unbound.is_empty() {
                return Ok((built, keep));
            }
            for i in unbound {
                keep.remove(&i);
            }
            // Their dependents go too.
            for (i, _) in s.tools.iter().enumerate() {
                let lost = s.edges.iter().any(|&(p, j)| j == i && !keep.contains(&p));
                if lost {
                    keep.remove(&i);
                }
            }
        }
    }

    /// Whether every required parameter of `node`'s tool is given or bound by name (not
    /// by type alone, and not ambiguously) from another step's output.
    fn fully_bound(&self, node: &dag::DagNode) -> bool {
        let Some(spec) = self.tools.spec(&node.tool) else {
            return false;
        };
        schema::inputs(&spec.input_schema)
            .into_iter()
            .filter(|p| p.required)
            .all(|p| {
                node.args.get(&p.name).is_some()
                    || node.bindings.iter().any(|b| {
                        b.param == p.name
                            && !b.ambiguous
                            && schema::normalize(&b.output) == schema::normalize(&b.param)
                    })
            })
    }

    /// Runs the safe steps of a confident suggestion now (speculative execution mode).
    async fn run_ahead(&self, s: &Suggested, advisor: &dyn ToolAdvisor) -> Foresight {
        let config = &self.env.config.speculation;
        let (built, kept) = match self.speculable(s) {
            Ok(x) => x,
            Err(why) => return fallback(s, &why),
        };
        let runner = Runner {
            registry: &self.tools,
            env: &self.env,
            role: self.allow_list(),
            cancel: self.cancel.child_token(),
            events: None,
        };
        let clock = Instant::now();
        let limit = std::time::Duration::from_millis(config.max_ms);
        let Ok(results) = tokio::time::timeout(limit, runner.run(&built)).await else {
            for node in &built.nodes {
                advisor.speculated(&node.tool, s.confidence, SpeculationOutcome::Failed);
            }
            return fallback(
                s,
                &format!("its steps took longer than {} ms", config.max_ms),
            );
        };
        let elapsed = clock.elapsed().as_millis();
        let mut out = Foresight::default();
        let mut shown = String::new();
        let mut total = 0usize;
        let mut ran = Vec::new();
        for r in results {
            let Some(args) = r.args.clone().filter(|_| r.status == StepStatus::Ok) else {
                if matches!(r.status, StepStatus::Error | StepStatus::NeedsInput) {
                    advisor.speculated(&r.tool, s.confidence, SpeculationOutcome::Failed);
                }
                continue;
            };
            let (text, _) = within_tokens(&r.text, config.max_result_tokens);
            let cost =
                usize::try_from(trellis_llm::tokens::estimate_text(&text)).unwrap_or(usize::MAX);
            let show = total.saturating_add(cost) <= config.max_total_tokens;
            if show {
                total += cost;
                let args_text =
                    trellis_protocol::canonical::to_canonical_string(&args).unwrap_or_default();
                let _ = write!(shown, "\n\n### {} {args_text}\n{text}", r.tool);
                ran.push(r.tool.clone());
            }
            let done = Done {
                tool: r.tool,
                args,
                data: r.data,
            };
            if show {
                out.history.push(done.clone());
            }
            out.speculated.push(Speculated {
                tool: done.tool,
                args: done.args,
                content: r.text,
                data: done.data,
                confidence: s.confidence,
                shown: show,
            });
        }
        if ran.is_empty() {
            return fallback(s, "its first steps failed when run ahead");
        }
        let rest: BTreeSet<usize> = (0..s.tools.len())
            .filter(|i| !kept.contains(i) || !ran.contains(&s.tools[*i]))
            .collect();
        let mut message = format!(
            "The tool knowledge graph of this workspace recognised this task's workflow \
             (confidence {:.2}; {}) and ran its read-only steps ahead of you. Their results \
             follow: use them instead of calling these tools again with the same arguments \
             (a call with other arguments runs as usual).",
            s.confidence, s.explanation
        );
        message.push_str(&shown);
        if !rest.is_empty() {
            let _ = write!(
                message,
                "\n\nThe workflow's other steps were not run ahead (they may change things, \
                 need arguments only you know, or failed):{}",
                steps_text(s, Some(&rest))
            );
        }
        out.notes.push(format!(
            "ran the task's usual workflow ahead of the model (confidence {:.2}): {} in {elapsed} ms",
            s.confidence,
            ran.join(", ")
        ));
        out.message = Some(message);
        out
    }
}

/// The suggestion, saying why it was not run ahead.
fn fallback(s: &Suggested, why: &str) -> Foresight {
    Foresight {
        message: Some(suggestion_text(s, Some(why))),
        notes: vec![format!(
            "suggested workflow {} (confidence {:.2}); not run ahead: {why}",
            s.tools.join(" → "),
            s.confidence
        )],
        ..Foresight::default()
    }
}
