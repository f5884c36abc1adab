//! The iterative task tree as run state: the remit, sequential milestones, and per milestone a DAG
//! of tasks with their statuses, compressed handoff fields and retry counts.
//!
//! The tree lives in the run's `task_tree` state channel, changed only through [`TreeOp`]s
//! that nodes write and the channel's reducer ([`reducer`]) applies in order — so the engine's
//! log holds every change, and resume, replay and fork restore the tree exactly.
//!
//! Rules of its operations:
//! - a task's dependencies are tasks of the same milestone; adding a task that would close a
//!   cycle is refused with the path (`T1 → T2 → T1`);
//! - a task is READY when every dependency is COMPLETE, PENDING otherwise;
//! - completing a task readies its dependents; failing one BLOCKS every task that depends on
//!   it, transitively, while other branches go on;
//! - a milestone is complete when all its tasks are COMPLETE, FAILED, BLOCKED or DEFERRED;
//! - the prioritizer picks, among the active milestone's READY tasks, the one that unblocks
//!   the most tasks, then the earliest created, then the simplest, then by id.

mod ops;

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};
use serde_json::Value;

pub use ops::{FIELD_LIMITS, NewTask, TreeError, TreeOp, reducer};

/// The state channel holding the tree.
pub const CHANNEL: &str = "task_tree";

/// A milestone's status.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum MilestoneStatus {
    /// Not yet active.
    #[default]
    Pending,
    /// Being worked on.
    Active,
    /// Every task is in a final state.
    Complete,
}

/// A sequential phase: an interim state users can observe.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Milestone {
    /// `m1`, `m2`, …
    pub id: String,
    /// What is true once it is done (max 200 chars).
    pub description: String,
    /// Its status.
    #[serde(default)]
    pub status: MilestoneStatus,
}

/// A task's status.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum TaskStatus {
    /// A dependency is not complete yet.
    #[default]
    Pending,
    /// Every dependency is complete: it can be picked.
    Ready,
    /// Being executed.
    InProgress,
    /// Done.
    Complete,
    /// Failed after its retries.
    Failed,
    /// A dependency failed.
    Blocked,
    /// Needs a person.
    Deferred,
}

impl TaskStatus {
    /// COMPLETE, FAILED, BLOCKED or DEFERRED: nothing more happens to it on its own.
    pub fn is_final(self) -> bool {
        matches!(
            self,
            TaskStatus::Complete | TaskStatus::Failed | TaskStatus::Blocked | TaskStatus::Deferred
        )
    }

    /// The upper-case name (`IN_PROGRESS`).
    pub fn name(self) -> &'static str {
        match self {
            TaskStatus::Pending => "PENDING",
            TaskStatus::Ready => "READY",
            TaskStatus::InProgress => "IN_PROGRESS",
            TaskStatus::Complete => "COMPLETE",
            TaskStatus::Failed => "FAILED",
            TaskStatus::Blocked => "BLOCKED",
            TaskStatus::Deferred => "DEFERRED",
        }
    }
}

/// The fundamental unit of work.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Task {
    /// `t1`, `t2`, … (unique in the tree).
    pub id: String,
    /// What needs to be done.
    pub description: String,
    /// How we know it is done.
    #[serde(default)]
    pub measurable_outcome: String,
    /// Its milestone.
    pub milestone: String,
    /// Tasks of the same milestone it depends on.
    #[serde(default)]
    pub depends_on: Vec<String>,
    /// Its status.
    #[serde(default)]
    pub status: TaskStatus,
    /// Who created it (`expander`, `assessor`).
    #[serde(default)]
    pub created_by: String,
    /// The expansion iteration that created it.
    #[serde(default)]
    pub created_at_iteration: u32,
    /// `simple`, `moderate` or `complex`, if known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub estimated_complexity: Option<String>,
    /// The researcher's gap analysis (compressed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gap_analysis: Option<Value>,
    /// The plan, compressed (max 500 chars).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub implementation_plan_summary: Option<String>,
    /// What the implementor did (max 1000 chars).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub result_summary: Option<String>,
    /// The QA verdict's feedback (max 500 chars).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub qa_feedback: Option<String>,
    /// Attempts per stage (`researcher`, `planner`, `implementor`, …).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub attempts: BTreeMap<String, u32>,
    /// Why it last failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_failure_reason: Option<String>,
    /// Where it last failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_failure_stage: Option<String>,
}

/// The whole tree (the durable part of the workflow's state).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct TaskTree {
    /// What the user really wants (max 1000 chars).
    #[serde(default)]
    pub remit: String,
    /// Needs stated in the request.
    #[serde(default)]
    pub explicit_needs: Vec<String>,
    /// Needs the request implies.
    #[serde(default)]
    pub implied_needs: Vec<String>,
    /// Milestones in order.
    #[serde(default)]
    pub milestones: Vec<Milestone>,
    /// The milestone being worked on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub active_milestone: Option<String>,
    /// Tasks by id.
    #[serde(default)]
    pub tasks: BTreeMap<String, Task>,
    /// Task ids in creation order.
    #[serde(default)]
    pub order: Vec<String>,
    /// The task being executed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub current_task: Option<String>,
    /// Expansion iterations so far.
    #[serde(default)]
    pub iteration: u32,
    /// Tasks created by the latest expansion.
    #[serde(default)]
    pub tasks_created_this_iteration: u32,
}

/// Counts by status.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Statistics {
    /// Every task.
    pub total: usize,
    /// Per status name.
    pub by_status: BTreeMap<&'static str, usize>,
    /// Milestones complete / all.
    pub milestones_complete: usize,
    /// All milestones.
    pub milestones: usize,
}

impl TaskTree {
    /// The tree in a channel value (`null` → an empty tree).
    pub fn from_value(v: Option<&Value>) -> Result<Self, TreeError> {
        match v {
            None | Some(Value::Null) => Ok(Self::default()),
            Some(v) => serde_json::from_value(v.clone())
                .map_err(|e| TreeError::new(format!("the task tree does not parse: {e}"))),
        }
    }

    /// The channel value.
    pub fn to_value(&self) -> Value {
        serde_json::to_value(self).unwrap_or(Value::Null)
    }

    /// A task.
    pub fn task(&self, id: &str) -> Option<&Task> {
        self.tasks.get(id)
    }

    /// Tasks of `milestone`, in creation order.
    pub fn tasks_of<'a>(&'a self, milestone: &'a str) -> impl Iterator<Item = &'a Task> + 'a {
        self.order
            .iter()
            .filter_map(|id| self.tasks.get(id))
            .filter(move |t| t.milestone == milestone)
    }

    /// READY tasks of `milestone`, in creation order.
    pub fn ready_tasks<'a>(&'a self, milestone: &'a str) -> Vec<&'a Task> {
        self.tasks_of(milestone)
            .filter(|t| t.status == TaskStatus::Ready)
            .collect()
    }

    /// Whether every task of `milestone` is final (an empty milestone is not complete: it
    /// has not been expanded).
    pub fn is_milestone_complete(&self, milestone: &str) -> bool {
        let mut any = false;
        for t in self.tasks_of(milestone) {
            any = true;
            if !t.status.is_final() {
                return false;
            }
        }
        any
    }

    /// The next milestone after `milestone`, in order.
    pub fn next_milestone(&self, milestone: &str) -> Option<&Milestone> {
        let i = self.milestones.iter().position(|m| m.id == milestone)?;
        self.milestones.get(i + 1)
    }

    /// How many tasks depend on `id`, directly or not.
    pub fn blocks_count(&self, id: &str) -> usize {
        let mut seen = BTreeSet::new();
        let mut stack = vec![id.to_owned()];
        while let Some(cur) = stack.pop() {
            for t in self.tasks.values() {
                if t.depends_on.contains(&cur) && seen.insert(t.id.clone()) {
                    stack.push(t.id.clone());
                }
            }
        }
        seen.len()
    }

    /// The prioritizer (deterministic): among the active milestone's READY tasks,
    /// the one blocking the most tasks, then created earliest, then the simplest, then by id.
    pub fn prioritize(&self) -> Option<&Task> {
        let m = self.active_milestone.as_deref()?;
        let complexity = |t: &Task| match t.estimated_complexity.as_deref() {
            Some("simple") => 0,
            Some("moderate") => 1,
            Some("complex") => 2,
            _ => 1,
        };
        self.ready_tasks(m).into_iter().min_by(|a, b| {
            self.blocks_count(&b.id)
                .cmp(&self.blocks_count(&a.id))
                .then(a.created_at_iteration.cmp(&b.created_at_iteration))
                .then(complexity(a).cmp(&complexity(b)))
                .then(self.position(&a.id).cmp(&self.position(&b.id)))
        })
    }

    fn position(&self, id: &str) -> usize {
        self.order
            .iter()
            .position(|x| x == id)
            .unwrap_or(usize::MAX)
    }

    /// A compressed one-line summary of a task for other agents (at most `max_chars`).
    pub fn summary(&self, id: &str, max_chars: usize) -> String {
        let Some(t) = self.tasks.get(id) else {
            return String::new();
        };
        let mut s = format!("{} [{}] {}", t.id, t.status.name(), t.description);
        if let Some(r) = t.result_summary.as_deref().or(t.qa_feedback.as_deref()) {
            s.push_str(" — ");
            s.push_str(r);
        }
        clip_chars(&s, max_chars)
    }

    /// Counts by status and milestone progress.
    pub fn statistics(&self) -> Statistics {
        let mut by_status = BTreeMap::new();
        for t in self.tasks.values() {
            *by_status.entry(t.status.name()).or_insert(0) += 1;
        }
        Statistics {
            total: self.tasks.len(),
            by_status,
            milestones_complete: self
                .milestones
                .iter()
                .filter(|m| m.status == MilestoneStatus::Complete)
                .count(),
            milestones: self.milestones.len(),
        }
    }

    /// The final report for human review: completed, failed and blocked tasks with reasons.
    pub fn report(&self) -> String {
        let mut s = String::new();
        for (title, status) in [
            ("Completed", TaskStatus::Complete),
            ("Failed", TaskStatus::Failed),
            ("Blocked", TaskStatus::Blocked),
            ("Deferred", TaskStatus::Deferred),
            ("Not done", TaskStatus::Pending),
            ("Not done", TaskStatus::Ready),
            ("Not done", TaskStatus::InProgress),
        ] {
            let tasks: Vec<&Task> = self
                .order
                .iter()
                .filter_map(|id| self.tasks.get(id))
                .filter(|t| t.status == status)
                .collect();
            if tasks.is_empty() {
                continue;
            }
            s.push_str(&format!("{title} ({}):\n", tasks.len()));
            for t in tasks {
                s.push_str(&format!("- {}: {}", t.id, t.description));
                match status {
                    TaskStatus::Failed => s.push_str(&format!(
                        " — failed at {}: {}",
                        t.last_failure_stage.as_deref().unwrap_or("?"),
                        t.last_failure_reason
                            .as_deref()
                            .unwrap_or("no reason given")
                    )),
                    TaskStatus::Blocked => s.push_str(&format!(
                        " — {}",
                        t.last_failure_reason
                            .as_deref()
                            .unwrap_or("a dependency failed")
                    )),
                    _ => {}
                }
                s.push('\n');
            }
        }
        s
    }
}

/// `text` cut to at most `max` chars (not bytes), marked with `…` when cut.
pub fn clip_chars(text: &str, max: usize) -> String {
    if text.chars().count() <= max {
        return text.to_owned();
    }
    let mut out: String = text.chars().take(max.saturating_sub(1)).collect();
    out.push('…');
    out
}
