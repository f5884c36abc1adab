//! The changes a task tree takes ([`TreeOp`]), and the channel reducer applying them.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::{Milestone, MilestoneStatus, Task, TaskStatus, TaskTree, clip_chars};

/// A task tree operation that cannot apply (the tree is left unchanged).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct TreeError {
    /// What is wrong, naming the task, milestone or cycle.
    pub message: String,
}

impl TreeError {
    pub(crate) fn new(message: impl Into<String>) -> Self {
        Self {
            message: message.into(),
        }
    }
}

/// A new task as an agent proposes it.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct NewTask {
    /// Its id; a fresh `t<n>` when absent or taken.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    /// What needs to be done.
    pub description: String,
    /// How we know it is done.
    #[serde(default)]
    pub measurable_outcome: String,
    /// Ids of tasks of the same milestone (existing, or earlier in the same batch).
    #[serde(default)]
    pub depends_on: Vec<String>,
    /// `simple`, `moderate`, `complex`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub estimated_complexity: Option<String>,
}

/// One change of the tree. Nodes write lists of them to the `task_tree` channel.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case")]
pub enum TreeOp {
    /// The intent agent's remit and needs.
    SetIntent {
        /// The remit (max 1000 chars).
        remit: String,
        /// Explicit needs.
        #[serde(default)]
        explicit_needs: Vec<String>,
        /// Implied needs.
        #[serde(default)]
        implied_needs: Vec<String>,
    },
    /// The milestone agent's milestones, in order; the first becomes active.
    SetMilestones {
        /// Their descriptions (max 200 chars each).
        milestones: Vec<String>,
    },
    /// New tasks in a milestone (the expander's, or the assessor's uncovered gaps).
    AddTasks {
        /// The milestone.
        milestone: String,
        /// `expander`, `assessor`.
        created_by: String,
        /// The tasks.
        tasks: Vec<NewTask>,
    },
    /// The prioritizer picked a task: IN_PROGRESS.
    Select {
        /// The task.
        task: String,
    },
    /// A stage worked on the task once more.
    Attempt {
        /// The task.
        task: String,
        /// `researcher`, `planner`, `implementor`, `validator`, `qa`.
        stage: String,
    },
    /// Sets a handoff field of a task (`gap_analysis`, `implementation_plan_summary`,
    /// `result_summary`, `qa_feedback`).
    SetField {
        /// The task.
        task: String,
        /// The field.
        field: String,
        /// Its value.
        value: Value,
    },
    /// The task is done: its dependents whose dependencies are all done become READY.
    Complete {
        /// The task.
        task: String,
    },
    /// The task failed: every task depending on it, transitively, is BLOCKED.
    Fail {
        /// The task.
        task: String,
        /// Why.
        reason: String,
        /// Where.
        stage: String,
    },
    /// The task needs a person.
    Defer {
        /// The task.
        task: String,
        /// Why.
        reason: String,
    },
    /// The active milestone is complete; the next one (if any) becomes active.
    AdvanceMilestone,
}

/// The handoff fields [`TreeOp::SetField`] may set, with their limits (chars; the
/// gap analysis is an object whose text fields are limited when it is made).
pub const FIELD_LIMITS: [(&str, usize); 4] = [
    ("gap_analysis", 2000),
    ("implementation_plan_summary", 500),
    ("result_summary", 1000),
    ("qa_feedback", 500),
];

impl TaskTree {
    /// Applies `op`, or changes nothing and says why.
    pub fn apply(&mut self, op: &TreeOp) -> Result<(), TreeError> {
        let mut next = self.clone();
        next.apply_in_place(op)?;
        *self = next;
        Ok(())
    }

    /// Applies every op in order, all or nothing.
    pub fn apply_all(&mut self, ops: &[TreeOp]) -> Result<(), TreeError> {
        let mut next = self.clone();
        for op in ops {
            next.apply_in_place(op)?;
        }
        *self = next;
        Ok(())
    }

    fn task_mut(&mut self, id: &str) -> Result<&mut Task, TreeError> {
        let known = self.order.join(", ");
        self.tasks
            .get_mut(id)
            .ok_or_else(|| TreeError::new(format!("no task `{id}` (tasks: {known})")))
    }

    fn apply_in_place(&mut self, op: &TreeOp) -> Result<(), TreeError> {
        match op {
            TreeOp::SetIntent {
                remit,
                explicit_needs,
                implied_needs,
            } => {
                self.remit = clip_chars(remit, 1000);
                self.explicit_needs = explicit_needs.clone();
                self.implied_needs = implied_needs.clone();
            }
            TreeOp::SetMilestones { milestones } => {
                if milestones.is_empty() {
                    return Err(TreeError::new("a remit needs at least one milestone"));
                }
                self.milestones = milestones
                    .iter()
                    .enumerate()
                    .map(|(i, d)| Milestone {
                        id: format!("m{}", i + 1),
                        description: clip_chars(d, 200),
                        status: if i == 0 {
                            MilestoneStatus::Active
                        } else {
                            MilestoneStatus::Pending
                        },
                    })
                    .collect();
                self.active_milestone = Some("m1".into());
            }
            TreeOp::AddTasks {
                milestone,
                created_by,
                tasks,
            } => self.add_tasks(milestone, created_by, tasks)?,
            TreeOp::Select { task } => {
                let t = self.task_mut(task)?;
                if t.status != TaskStatus::Ready {
                    return Err(TreeError::new(format!(
                        "task `{task}` is {}, not READY",
                        t.status.name()
                    )));
                }
                t.status = TaskStatus::InProgress;
                self.current_task = Some(task.clone());
            }
            TreeOp::Attempt { task, stage } => {
                *self
                    .task_mut(task)?
                    .attempts
                    .entry(stage.clone())
                    .or_insert(0) += 1;
            }
            TreeOp::SetField { task, field, value } => {
                if !FIELD_LIMITS.iter().any(|(f, _)| f == field) {
                    let names: Vec<&str> = FIELD_LIMITS.iter().map(|(f, _)| *f).collect();
                    return Err(TreeError::new(format!(
                        "unknown task field `{field}` (fields: {})",
                        names.join(", ")
                    )));
                };
                // The limits are the writers' to keep (`compress_handoffs`); the tree stores
                // what it is given.
                let t = self.task_mut(task)?;
                let text = |v: &Value| v.as_str().unwrap_or_default().to_owned();
                match field.as_str() {
                    "gap_analysis" => t.gap_analysis = Some(value.clone()),
                    "implementation_plan_summary" => {
                        t.implementation_plan_summary = Some(text(value))
                    }
                    "result_summary" => t.result_summary = Some(text(value)),
                    _ => t.qa_feedback = Some(text(value)),
                }
            }
            TreeOp::Complete { task } => {
                self.task_mut(task)?.status = TaskStatus::Complete;
                self.release(task);
                self.clear_current(task);
            }
            TreeOp::Fail {
                task,
                reason,
                stage,
            } => {
                let t = self.task_mut(task)?;
                t.status = TaskStatus::Failed;
                t.last_failure_reason = Some(clip_chars(reason, 500));
                t.last_failure_stage = Some(stage.clone());
                self.block_dependents(task);
                self.clear_current(task);
            }
            TreeOp::Defer { task, reason } => {
                let t = self.task_mut(task)?;
                t.status = TaskStatus::Deferred;
                t.last_failure_reason = Some(clip_chars(reason, 500));
                self.clear_current(task);
            }
            TreeOp::AdvanceMilestone => {
                let Some(active) = self.active_milestone.clone() else {
                    return Err(TreeError::new("no milestone is active"));
                };
                let next = self.next_milestone(&active).map(|m| m.id.clone());
                for m in &mut self.milestones {
                    if m.id == active {
                        m.status = MilestoneStatus::Complete;
                    } else if Some(&m.id) == next.as_ref() {
                        m.status = MilestoneStatus::Active;
                    }
                }
                self.active_milestone = next;
            }
        }
        Ok(())
    }

    fn clear_current(&mut self, task: &str) {
        if self.current_task.as_deref() == Some(task) {
            self.current_task = None;
        }
    }

    fn add_tasks(
        &mut self,
        milestone: &str,
        created_by: &str,
        tasks: &[NewTask],
    ) -> Result<(), TreeError> {
        if !self.milestones.iter().any(|m| m.id == milestone) {
            let ids: Vec<&str> = self.milestones.iter().map(|m| m.id.as_str()).collect();
            return Err(TreeError::new(format!(
                "no milestone `{milestone}` (milestones: {})",
                ids.join(", ")
            )));
        }
        self.iteration += 1;
        // Ids first (the agent's when free, else t<n>), so dependencies may name them.
        let mut renamed: BTreeMap<String, String> = BTreeMap::new();
        let mut ids = Vec::with_capacity(tasks.len());
        let mut next = self.tasks.len() + 1;
        for t in tasks {
            let wanted = t.id.as_deref().map(str::trim).filter(|i| {
                !i.is_empty() && !self.tasks.contains_key(*i) && !ids.contains(&i.to_string())
            });
            let id = match wanted {
                Some(i) => i.to_owned(),
                None => loop {
                    let candidate = format!("t{next}");
                    next += 1;
                    if !self.tasks.contains_key(&candidate) && !ids.contains(&candidate) {
                        break candidate;
                    }
                },
            };
            if let Some(old) = &t.id {
                renamed.insert(old.clone(), id.clone());
            }
            ids.push(id);
        }
        for (t, id) in tasks.iter().zip(&ids) {
            let mut deps = Vec::new();
            for d in &t.depends_on {
                let d = renamed.get(d).cloned().unwrap_or_else(|| d.clone());
                let same = self
                    .tasks
                    .get(&d)
                    .map(|x| x.milestone == milestone)
                    .unwrap_or_else(|| ids.contains(&d));
                if !same {
                    return Err(TreeError::new(format!(
                        "task `{id}` depends on `{d}`, which is not a task of milestone `{milestone}`"
                    )));
                }
                if d == *id {
                    return Err(TreeError::new(format!("task `{id}` depends on itself")));
                }
                if !deps.contains(&d) {
                    deps.push(d);
                }
            }
            self.tasks.insert(
                id.clone(),
                Task {
                    id: id.clone(),
                    description: t.description.trim().to_owned(),
                    measurable_outcome: t.measurable_outcome.trim().to_owned(),
                    milestone: milestone.to_owned(),
                    depends_on: deps,
                    status: TaskStatus::Pending,
                    created_by: created_by.to_owned(),
                    created_at_iteration: self.iteration,
                    estimated_complexity: t.estimated_complexity.clone(),
                    ..Task::default()
                },
            );
            self.order.push(id.clone());
        }
        if let Some(path) = self.cycle() {
            return Err(TreeError::new(format!(
                "these dependencies form a cycle: {}",
                path.join(" → ")
            )));
        }
        self.tasks_created_this_iteration = u32::try_from(ids.len()).unwrap_or(u32::MAX);
        for id in &ids {
            self.refresh(id);
        }
        Ok(())
    }

    /// A dependency cycle, as a path that returns to its start, if there is one.
    fn cycle(&self) -> Option<Vec<String>> {
        // Iterative DFS with colours: 1 = on the stack, 2 = done.
        let mut colour: BTreeMap<&str, u8> = BTreeMap::new();
        for start in &self.order {
            if colour.contains_key(start.as_str()) {
                continue;
            }
            let mut stack: Vec<(&str, usize)> = vec![(start, 0)];
            colour.insert(start, 1);
            while let Some((node, i)) = stack.last().copied() {
                let deps = self
                    .tasks
                    .get(node)
                    .map(|t| &t.depends_on[..])
                    .unwrap_or(&[]);
                if let Some(d) = deps.get(i) {
                    if let Some(top) = stack.last_mut() {
                        top.1 += 1;
                    }
                    match colour.get(d.as_str()) {
                        Some(1) => {
                            let from = stack.iter().position(|(n, _)| *n == d).unwrap_or(0);
                            let mut path: Vec<String> =
                                stack[from..].iter().map(|(n, _)| (*n).to_owned()).collect();
                            path.push(d.clone());
                            return Some(path);
                        }
                        Some(_) => {}
                        None if self.tasks.contains_key(d) => {
                            colour.insert(d, 1);
                            stack.push((d, 0));
                        }
                        None => {}
                    }
                } else {
                    colour.insert(node, 2);
                    stack.pop();
                }
            }
        }
        None
    }

    /// Sets a not-yet-started task READY, PENDING or BLOCKED from its dependencies.
    fn refresh(&mut self, id: &str) {
        let Some(t) = self.tasks.get(id) else { return };
        if !matches!(t.status, TaskStatus::Pending | TaskStatus::Ready) {
            return;
        }
        let failed = t.depends_on.iter().find(|d| {
            self.tasks
                .get(*d)
                .is_some_and(|x| matches!(x.status, TaskStatus::Failed | TaskStatus::Blocked))
        });
        let (status, reason) = match failed {
            Some(d) => (TaskStatus::Blocked, Some(format!("blocked: `{d}` failed"))),
            None if t.depends_on.iter().all(|d| {
                self.tasks
                    .get(d)
                    .is_some_and(|x| x.status == TaskStatus::Complete)
            }) =>
            {
                (TaskStatus::Ready, None)
            }
            None => (TaskStatus::Pending, None),
        };
        if let Some(t) = self.tasks.get_mut(id) {
            t.status = status;
            if reason.is_some() {
                t.last_failure_reason = reason;
            }
        }
    }

    /// Dependents of a completed task become READY when all their dependencies are done.
    fn release(&mut self, done: &str) {
        let dependents: Vec<String> = self
            .tasks
            .values()
            .filter(|t| t.depends_on.iter().any(|d| d == done))
            .map(|t| t.id.clone())
            .collect();
        for d in dependents {
            self.refresh(&d);
        }
    }

    /// Every task depending on `failed`, transitively, is BLOCKED (unless already final).
    fn block_dependents(&mut self, failed: &str) {
        let mut seen = BTreeSet::new();
        let mut stack = vec![(failed.to_owned(), failed.to_owned())];
        while let Some((cur, root)) = stack.pop() {
            let dependents: Vec<String> = self
                .tasks
                .values()
                .filter(|t| t.depends_on.contains(&cur))
                .map(|t| t.id.clone())
                .collect();
            for d in dependents {
                if !seen.insert(d.clone()) {
                    continue;
                }
                if let Some(t) = self.tasks.get_mut(&d)
                    && !t.status.is_final()
                {
                    t.status = TaskStatus::Blocked;
                    t.last_failure_reason = Some(format!("blocked: `{root}` failed"));
                }
                stack.push((d, root.clone()));
            }
        }
    }
}

/// The `task_tree` channel's reducer: a write is one op, a list of ops, or `{"ops": [...]}`,
/// applied in order to the current tree (all or nothing).
pub fn reducer(current: Option<&Value>, write: Value) -> Result<Value, String> {
    let mut tree = TaskTree::from_value(current).map_err(|e| e.to_string())?;
    let ops = match write {
        Value::Object(mut m) if m.contains_key("ops") => m.remove("ops").unwrap_or(Value::Null),
        other => other,
    };
    let ops: Vec<TreeOp> = match ops {
        Value::Array(_) => serde_json::from_value(ops),
        one => serde_json::from_value(one).map(|op| vec![op]),
    }
    .map_err(|e| format!("not a task tree operation: {e}"))?;
    tree.apply_all(&ops).map_err(|e| e.to_string())?;
    Ok(tree.to_value())
}
