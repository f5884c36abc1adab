//! Deciding a task tree step: the tree operations and the outcome each step's answer
//! becomes, with the retry limits of the task tree (`docs/workflows.md` "task_tree").

use serde_json::{Value, json};
use trellis_workflow::tasktree::{NewTask, TaskTree, TreeOp, clip_chars};

use super::answer::{boolean, new_task, strings, text};
use super::{Decided, Limits};

/// The agent's answer text and the user's request (the remit's fallback).
pub(super) struct Answer<'a> {
    pub(super) text: &'a str,
    pub(super) request: &'a str,
}

/// The tree operations and outcome of `step` from the agent's answer (`parsed` when it held
/// a JSON object), within the retry limits.
pub(super) fn decide(
    tree: &TaskTree,
    limits: Limits,
    step: &str,
    parsed: &Value,
    answer: Answer<'_>,
    result: &Value,
    failed: bool,
) -> Decided {
    let decider = Decider {
        tree,
        limits,
        parsed,
        answer: answer.text,
        request: answer.request,
        result,
        failed,
        task: tree.current_task.clone().unwrap_or_default(),
    };
    // A researcher, planner or QA agent that could not do its work fails the task (the
    // others fall back to what the tree allows).
    if failed && matches!(step, "research" | "plan" | "qa") {
        return decider.agent_failed(step);
    }
    match step {
        "intent" => decider.intent(),
        "milestones" => decider.milestones(),
        "expand" => decider.expand(),
        "research" => decider.research(),
        "plan" => decider.plan(),
        "implement" => decider.implement(),
        "qa" => decider.qa(),
        _ => decider.assess(),
    }
}

/// What one step's decision is made from: the tree, the limits, the agent's answer and the
/// task being executed.
struct Decider<'a> {
    tree: &'a TaskTree,
    limits: Limits,
    parsed: &'a Value,
    answer: &'a str,
    request: &'a str,
    result: &'a Value,
    failed: bool,
    task: String,
}

impl Decider<'_> {
    /// The runs of `stage` so far for the current task.
    fn runs(&self, stage: &str) -> u32 {
        self.tree
            .task(&self.task)
            .and_then(|t| t.attempts.get(stage))
            .copied()
            .unwrap_or(0)
    }

    /// The op counting a run of `stage` for the current task.
    fn attempt(&self, stage: &str) -> TreeOp {
        TreeOp::Attempt {
            task: self.task.clone(),
            stage: stage.into(),
        }
    }

    /// The op failing the current task at `stage` for `reason`.
    fn fail(&self, stage: &str, reason: String) -> TreeOp {
        TreeOp::Fail {
            task: self.task.clone(),
            reason,
            stage: stage.into(),
        }
    }

    /// The op setting `field` of the current task to `value`.
    fn set_field(&self, field: &str, value: Value) -> TreeOp {
        TreeOp::SetField {
            task: self.task.clone(),
            field: field.into(),
            value,
        }
    }

    /// A researcher, planner or QA agent that failed: the task fails with its reason.
    fn agent_failed(&self, step: &str) -> Decided {
        let why = self
            .result
            .get("reason")
            .and_then(Value::as_str)
            .filter(|r| !r.is_empty())
            .unwrap_or(self.answer)
            .to_owned();
        let stage = match step {
            "research" => "researcher",
            "plan" => "planner",
            _ => "qa",
        };
        Decided::new(
            vec![
                self.attempt(stage),
                self.fail(stage, clip_chars(why.trim(), 300)),
            ],
            Some("task_failed"),
        )
    }

    /// `intent`: the remit and the needs; the request is the remit when the answer has none.
    fn intent(&self) -> Decided {
        let mut remit = text(self.parsed, "remit");
        let note = remit.is_empty().then(|| {
            remit = clip_chars(self.request.trim(), 1000);
            "no JSON remit in the answer: the request is the remit".to_owned()
        });
        let mut d = Decided::new(
            vec![TreeOp::SetIntent {
                remit,
                explicit_needs: strings(self.parsed, "explicit_needs"),
                implied_needs: strings(self.parsed, "implied_needs"),
            }],
            None,
        );
        d.note = note;
        d
    }

    /// `milestones`: the milestones of the answer, or one milestone, the remit.
    fn milestones(&self) -> Decided {
        let mut milestones = strings(self.parsed, "milestones");
        let note = milestones.is_empty().then(|| {
            milestones = vec![clip_chars(&format!("Done: {}", self.tree.remit), 200)];
            "no milestones in the answer: one milestone, the remit".to_owned()
        });
        let mut d = Decided::new(vec![TreeOp::SetMilestones { milestones }], None);
        d.note = note;
        d
    }

    /// `expand`: the answer's tasks added to the active milestone (the milestone itself
    /// when an empty milestone got none); complete when no milestone is active.
    fn expand(&self) -> Decided {
        let tree = self.tree;
        let Some(milestone) = tree.active_milestone.clone() else {
            return Decided::new(Vec::new(), Some("complete"));
        };
        let mut tasks = self.proposed_tasks();
        let mut note = None;
        if tasks.is_empty() && tree.tasks_of(&milestone).next().is_none() {
            let description = tree
                .milestones
                .iter()
                .find(|m| m.id == milestone)
                .map(|m| m.description.clone())
                .unwrap_or_default();
            tasks.push(NewTask {
                description: description.clone(),
                measurable_outcome: description,
                ..NewTask::default()
            });
            note = Some("no tasks in the answer: the milestone itself is the task".into());
        }
        let mut d = if tasks.is_empty() {
            Decided::new(Vec::new(), None)
        } else {
            let by = if tree.iteration == 0 || tree.tasks_of(&milestone).next().is_none() {
                "expander"
            } else {
                "assessor"
            };
            Decided::new(
                vec![TreeOp::AddTasks {
                    milestone,
                    created_by: by.into(),
                    tasks,
                }],
                None,
            )
        };
        d.note = note;
        d
    }

    /// The tasks the expander's answer proposes (`tasks` or `new_tasks`), those readable.
    fn proposed_tasks(&self) -> Vec<NewTask> {
        match self.parsed.get("tasks").or(self.parsed.get("new_tasks")) {
            Some(v) => serde_json::from_value::<Vec<Value>>(v.clone())
                .unwrap_or_default()
                .into_iter()
                .filter_map(|t| new_task(&t))
                .collect(),
            None => Vec::new(),
        }
    }

    /// `research`: the gap analysis; no gap completes the task.
    fn research(&self) -> Decided {
        let parsed = self.parsed;
        let gap = boolean(parsed, "gap_exists").unwrap_or(true);
        let analysis = json!({
            "gap_exists": gap,
            "current_state_summary": text(parsed, "current_state_summary"),
            "desired_state_summary": text(parsed, "desired_state_summary"),
            "gap_description": match text(parsed, "gap_description") {
                d if d.is_empty() => self.answer.trim().to_owned(),
                d => d,
            },
            "relevant_files": strings(parsed, "relevant_files"),
        });
        let mut ops = vec![
            self.attempt("researcher"),
            self.set_field("gap_analysis", analysis),
        ];
        if gap {
            Decided::new(ops, Some("gap"))
        } else {
            ops.push(TreeOp::Complete {
                task: self.task.clone(),
            });
            Decided::new(ops, Some("no_gap"))
        }
    }

    /// `plan`: the answer is the task's plan summary.
    fn plan(&self) -> Decided {
        Decided::new(
            vec![
                self.attempt("planner"),
                self.set_field("implementation_plan_summary", json!(self.answer.trim())),
            ],
            None,
        )
    }

    /// `implement`: the agent's output is the task's result summary.
    fn implement(&self) -> Decided {
        let summary = self
            .result
            .get("output")
            .and_then(Value::as_str)
            .unwrap_or_default();
        // A failed implementation is the validator's to judge (it sends it back).
        Decided::new(
            vec![
                self.attempt("implementor"),
                self.set_field("result_summary", json!(summary.trim())),
            ],
            None,
        )
    }

    /// `qa`: a pass completes the task; a failure goes back to the stage its kind names,
    /// or fails the task once that stage has used its runs.
    fn qa(&self) -> Decided {
        let parsed = self.parsed;
        let passed = boolean(parsed, "passed").unwrap_or(!self.failed && parsed.is_object());
        let feedback = match text(parsed, "feedback") {
            f if f.is_empty() => self.answer.trim().to_owned(),
            f => f,
        };
        let mut ops = vec![
            self.attempt("qa"),
            self.set_field("qa_feedback", json!(feedback)),
        ];
        if passed {
            ops.push(TreeOp::Complete {
                task: self.task.clone(),
            });
            return Decided::new(ops, Some("passed"));
        }
        let kind = match text(parsed, "failure_type").to_ascii_lowercase().as_str() {
            "wrong_approach" => "wrong_approach",
            "plan_issue" => "plan_issue",
            _ => "incomplete",
        };
        let (stage, limit, back) = match kind {
            "wrong_approach" => ("researcher", self.limits.researcher, "research"),
            "plan_issue" => ("planner", self.limits.planner, "plan"),
            _ => ("implementor", self.limits.implementor, "implement"),
        };
        if self.runs(stage) >= limit {
            ops.push(self.fail(
                "qa",
                format!(
                    "{kind} after {} {stage} runs: {}",
                    self.runs(stage),
                    clip_chars(&feedback, 300)
                ),
            ));
            return Decided::new(ops, Some("task_failed"));
        }
        let mut d = Decided::new(ops, Some(kind));
        d.feedback = Some((back, clip_chars(&feedback, 500)));
        d
    }

    /// `assess`: the tree decides completion; the agent's gaps may add work.
    fn assess(&self) -> Decided {
        let tree = self.tree;
        let gaps = strings(self.parsed, "uncovered_gaps");
        let Some(active) = tree.active_milestone.clone() else {
            return Decided::new(Vec::new(), Some("complete"));
        };
        if !gaps.is_empty() && tree.iteration < self.limits.expansions {
            let mut d = Decided::new(Vec::new(), Some("gaps"));
            d.feedback = Some((
                "expand",
                format!("Uncovered gaps to add as tasks: {}", gaps.join("; ")),
            ));
            return d;
        }
        if !tree.ready_tasks(&active).is_empty()
            || tree.tasks_of(&active).any(|t| !t.status.is_final())
        {
            return Decided::new(Vec::new(), Some("tasks_remain"));
        }
        if tree.next_milestone(&active).is_some() {
            Decided::new(vec![TreeOp::AdvanceMilestone], Some("milestone_complete"))
        } else {
            Decided::new(vec![TreeOp::AdvanceMilestone], Some("complete"))
        }
    }
}
