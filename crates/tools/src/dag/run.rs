//! Running a DAG: layer by layer, the parallel-safe steps of a layer at the same time, each
//! step's arguments completed from its dependencies' outputs before it starts; a step whose
//! dependency failed is skipped with the reason.
//!
//! A DAG's steps never block on the user: their interaction is [`Deferring`], which refuses
//! and marks the call (status [`StepStatus::NeedsInput`]: the model calls that tool on its
//! own, where it may ask). [`call_parallel`] does the same for calls that run beside others
//! and reports them as `deferred`, so the agent loop runs them again on their own.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

use futures::future::join_all;
use serde::Serialize;
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use super::build::{Dag, DagNode};
use super::refs::{self, StepOutput};
use crate::context::ToolEnv;
use crate::error::{Error, Result};
use crate::interaction::{Answer, ApprovalDecision, ApprovalRequest, Interaction, Question};
use crate::registry::{Registry, ToolResult};
use crate::spec::BoxFuture;

pub use super::exec::{StepResult, StepStatus};

/// What the runner reports while a DAG runs.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(tag = "type", rename_all = "camelCase")]
pub enum DagEvent {
    /// A step started (with its resolved arguments).
    Started {
        /// The step.
        id: String,
        /// Its layer.
        layer: usize,
        /// The arguments it was called with.
        args: Value,
    },
    /// A step finished.
    Completed {
        /// The step.
        id: String,
        /// Whether it succeeded.
        ok: bool,
        /// How long it took.
        duration_ms: u64,
    },
    /// A step did not run.
    Skipped {
        /// The step.
        id: String,
        /// Why.
        reason: String,
    },
}

/// Everything a DAG's steps need to run.
pub struct Runner<'a> {
    /// The tools.
    pub registry: &'a Registry,
    /// Their environment.
    pub env: &'a ToolEnv,
    /// The allow list the calls are checked against.
    pub role: &'a str,
    /// Stops the run.
    pub cancel: CancellationToken,
    /// Receives the run's events.
    pub events: Option<&'a (dyn Fn(DagEvent) + Send + Sync)>,
}

impl Runner<'_> {
    fn emit(&self, event: DagEvent) {
        if let Some(f) = self.events {
            f(event);
        }
    }

    /// Runs `dag`; the results come back in the plan's order.
    pub async fn run(&self, dag: &Dag) -> Vec<StepResult> {
        self.resume(dag, BTreeMap::new(), &[], false)
            .await
            .results
            .into_values()
            .collect()
    }

    /// Runs the steps of `dag` that have no result in `done` (node index → result: what
    /// ran before a pause), layer by layer, and stops early:
    /// - after a layer in which a step listed in `decide_after` completed, while other
    ///   steps have yet to run ([`Stop::Decision`]: the caller decides how to go on);
    /// - with `hold_for_user`, after a layer in which a step needed the user: that step gets
    ///   no result ([`Stop::NeedsUser`]: the caller runs it where the user can answer, then
    ///   resumes); without it such a step ends [`StepStatus::NeedsInput`].
    pub async fn resume(
        &self,
        dag: &Dag,
        done: BTreeMap<usize, StepResult>,
        decide_after: &[String],
        hold_for_user: bool,
    ) -> Progress {
        self.resume_saving(dag, done, decide_after, hold_for_user, &|_| {})
            .await
    }

    /// [`Runner::resume`], calling `save` with the results so far after every layer (a
    /// checkpoint: the process may stop before the run ends).
    pub async fn resume_saving(
        &self,
        dag: &Dag,
        done: BTreeMap<usize, StepResult>,
        decide_after: &[String],
        hold_for_user: bool,
        save: &(dyn Fn(&BTreeMap<usize, StepResult>) + Sync),
    ) -> Progress {
        let mut results = done;
        for (layer, members) in dag.layers.iter().enumerate() {
            let ready = self.ready_steps(dag, members, &mut results);
            if self.cancel.is_cancelled() {
                for (i, _) in ready {
                    let r = skipped(&dag.nodes[i], StepStatus::Cancelled, "cancelled".into());
                    results.insert(i, r);
                }
                continue;
            }
            let calls = self.call_layer(dag, layer, &ready).await;
            let end =
                self.record_layer(dag, ready, calls, decide_after, hold_for_user, &mut results);
            save(&results);
            if let Some(stop) = end.stop(results.len() < dag.nodes.len()) {
                return Progress { results, stop };
            }
        }
        Progress {
            results,
            stop: Stop::Finished,
        }
    }

    /// The steps of a layer (`members`) that have yet to run and can, with their completed
    /// arguments; a step that cannot run gets its result in `results` instead.
    fn ready_steps(
        &self,
        dag: &Dag,
        members: &[usize],
        results: &mut BTreeMap<usize, StepResult>,
    ) -> Vec<(usize, Value)> {
        let mut ready = Vec::new();
        for &i in members {
            if results.contains_key(&i) {
                continue;
            }
            if let Some(args) = self.prepare_step(dag, i, results) {
                ready.push((i, args));
            }
        }
        ready
    }

    /// Step `i`'s arguments, completed from its dependencies' results; `None` when it
    /// cannot run, reported as skipped, with its result put in `results`: skipped when a
    /// dependency did not succeed, an error when its arguments cannot be completed.
    fn prepare_step(
        &self,
        dag: &Dag,
        i: usize,
        results: &mut BTreeMap<usize, StepResult>,
    ) -> Option<Value> {
        let node = &dag.nodes[i];
        let failed = node.dependencies.iter().find(|d| {
            dag.nodes
                .iter()
                .position(|n| &n.id == *d)
                .and_then(|j| results.get(&j))
                .is_none_or(|r| r.status != StepStatus::Ok)
        });
        if let Some(dep) = failed {
            let reason = format!("skipped: step `{dep}` did not succeed");
            self.emit(DagEvent::Skipped {
                id: node.id.clone(),
                reason: reason.clone(),
            });
            results.insert(i, skipped(node, StepStatus::Skipped, reason));
            return None;
        }
        let outputs = |id: &str| step_output(dag, results, id);
        match complete_args(node, &outputs) {
            Ok(args) => Some(args),
            Err(e) => {
                self.emit(DagEvent::Skipped {
                    id: node.id.clone(),
                    reason: e.clone(),
                });
                results.insert(i, skipped(node, StepStatus::Error, e));
                None
            }
        }
    }

    /// Starts the ready steps of layer `layer` at the same time, reporting each, and
    /// waits for them all.
    async fn call_layer(
        &self,
        dag: &Dag,
        layer: usize,
        ready: &[(usize, Value)],
    ) -> Vec<ParallelCall> {
        for (i, args) in ready {
            self.emit(DagEvent::Started {
                id: dag.nodes[*i].id.clone(),
                layer,
                args: args.clone(),
            });
        }
        let calls = ready
            .iter()
            .map(|(i, args)| (dag.nodes[*i].tool.clone(), args.clone()))
            .collect();
        call_parallel(
            self.registry,
            self.env,
            self.role,
            calls,
            self.cancel.clone(),
            true,
        )
        .await
    }

    /// Records the layer's calls in `results` and notes what stops the run after it: the
    /// first step held for the user (with `hold_for_user`), and the steps of `decide_after`
    /// that completed.
    fn record_layer(
        &self,
        dag: &Dag,
        ready: Vec<(usize, Value)>,
        calls: Vec<ParallelCall>,
        decide_after: &[String],
        hold_for_user: bool,
        results: &mut BTreeMap<usize, StepResult>,
    ) -> LayerEnd {
        let mut end = LayerEnd::default();
        for ((i, args), call) in ready.into_iter().zip(calls) {
            let node = &dag.nodes[i];
            if call.deferred && hold_for_user {
                end.held.get_or_insert_with(|| node.id.clone());
                continue;
            }
            if !call.deferred && !call.result.is_error && decide_after.contains(&node.id) {
                end.decide.push(node.id.clone());
            }
            results.insert(i, self.step_result(node, args, call));
        }
        end
    }

    /// A step's result from its call, reported as completed.
    fn step_result(&self, node: &DagNode, args: Value, call: ParallelCall) -> StepResult {
        let status = if call.deferred {
            StepStatus::NeedsInput
        } else if call.result.cancelled {
            StepStatus::Cancelled
        } else if call.result.is_error {
            StepStatus::Error
        } else {
            StepStatus::Ok
        };
        self.emit(DagEvent::Completed {
            id: node.id.clone(),
            ok: status == StepStatus::Ok,
            duration_ms: call.duration_ms,
        });
        let text = if call.deferred {
            format!(
                "`{}` needs the user's approval or answers, which a step of a plan does \
                 not ask for; call the tool on its own",
                node.tool
            )
        } else {
            call.result.content
        };
        StepResult {
            id: node.id.clone(),
            tool: node.tool.clone(),
            status,
            args: Some(args),
            text,
            data: call.result.data,
            duration_ms: call.duration_ms,
        }
    }
}

/// What a layer's calls say about going on.
#[derive(Default)]
struct LayerEnd {
    /// The first step that needs the user (held: it has no result).
    held: Option<String>,
    /// The completed steps the caller asked to decide after.
    decide: Vec<String>,
}

impl LayerEnd {
    /// Why the run stops after the layer, if it does; `unfinished`: steps have yet to run.
    fn stop(self, unfinished: bool) -> Option<Stop> {
        if let Some(step) = self.held {
            return Some(Stop::NeedsUser { step });
        }
        if !self.decide.is_empty() && unfinished {
            return Some(Stop::Decision { after: self.decide });
        }
        None
    }
}

/// The output of the step called `id`, if it has a result in `results`.
fn step_output(dag: &Dag, results: &BTreeMap<usize, StepResult>, id: &str) -> Option<StepOutput> {
    let j = dag.nodes.iter().position(|n| n.id == id)?;
    results.get(&j).map(|r| StepOutput {
        text: r.text.clone(),
        data: r.data.clone(),
    })
}

impl Runner<'_> {
    /// Runs step `i` of `dag` on its own with the runner's interaction (where the user can
    /// answer: a step [`Runner::resume`] held), its arguments completed from `done`.
    pub async fn run_alone(
        &self,
        dag: &Dag,
        i: usize,
        done: &BTreeMap<usize, StepResult>,
    ) -> StepResult {
        let node = &dag.nodes[i];
        let outputs = |id: &str| step_output(dag, done, id);
        let args = match complete_args(node, &outputs) {
            Ok(a) => a,
            Err(e) => return skipped(node, StepStatus::Error, e),
        };
        let clock = Instant::now();
        let result = self
            .registry
            .call(
                self.env,
                self.role,
                &node.tool,
                args.clone(),
                self.cancel.clone(),
            )
            .await;
        let status = if result.cancelled {
            StepStatus::Cancelled
        } else if result.is_error {
            StepStatus::Error
        } else {
            StepStatus::Ok
        };
        StepResult {
            id: node.id.clone(),
            tool: node.tool.clone(),
            status,
            args: Some(args),
            text: result.content,
            data: result.data,
            duration_ms: u64::try_from(clock.elapsed().as_millis()).unwrap_or(u64::MAX),
        }
    }
}

/// Where [`Runner::resume`] stopped.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Stop {
    /// Every step has a result.
    Finished,
    /// Steps the caller asked to decide after completed; others have yet to run.
    Decision {
        /// Those steps.
        after: Vec<String>,
    },
    /// This step needs the user's approval or answers (it has no result yet).
    NeedsUser {
        /// The step.
        step: String,
    },
}

/// What [`Runner::resume`] did.
#[derive(Clone, Debug)]
pub struct Progress {
    /// Results by node index: the ones given and the ones that ran.
    pub results: BTreeMap<usize, StepResult>,
    /// Why it stopped.
    pub stop: Stop,
}

fn skipped(node: &super::build::DagNode, status: StepStatus, text: String) -> StepResult {
    StepResult {
        id: node.id.clone(),
        tool: node.tool.clone(),
        status,
        args: None,
        text,
        data: None,
        duration_ms: 0,
    }
}

/// A node's arguments with its schema bindings filled in and its references resolved.
fn complete_args(
    node: &super::build::DagNode,
    outputs: &dyn Fn(&str) -> Option<StepOutput>,
) -> std::result::Result<Value, String> {
    let mut args = match &node.args {
        Value::Null => Value::Object(Default::default()),
        other => other.clone(),
    };
    for b in &node.bindings {
        let out = outputs(&b.from).ok_or_else(|| format!("step `{}` has no output", b.from))?;
        let value = out.at(std::slice::from_ref(&b.output)).ok_or_else(|| {
            format!(
                "step `{}` returned no `{}` for `{}`",
                b.from, b.output, b.param
            )
        })?;
        if let Value::Object(m) = &mut args {
            m.insert(b.param.clone(), value);
        }
    }
    refs::resolve(&args, outputs)
}

/// One call of [`call_parallel`].
#[derive(Clone, Debug)]
pub struct ParallelCall {
    /// What the registry returned.
    pub result: ToolResult,
    /// The call needed the user and was refused without asking: run it again on its own.
    pub deferred: bool,
    /// How long it took.
    pub duration_ms: u64,
}

/// Runs `calls` (tool, arguments) at the same time through the registry and returns their
/// results in order. Every call gets a [`Deferring`] interaction — none waits for the user —
/// when there are several or `always_defer` is set.
pub async fn call_parallel(
    registry: &Registry,
    env: &ToolEnv,
    role: &str,
    calls: Vec<(String, Value)>,
    cancel: CancellationToken,
    always_defer: bool,
) -> Vec<ParallelCall> {
    let alone = calls.len() == 1 && !always_defer;
    join_all(calls.into_iter().map(|(tool, args)| {
        let cancel = cancel.clone();
        async move {
            let deferring = Arc::new(Deferring::default());
            let mut env = env.clone();
            if !alone {
                env.interaction = deferring.clone();
            }
            let clock = Instant::now();
            let result = registry.call(&env, role, &tool, args, cancel).await;
            ParallelCall {
                deferred: deferring.asked(),
                result,
                duration_ms: u64::try_from(clock.elapsed().as_millis()).unwrap_or(u64::MAX),
            }
        }
    }))
    .await
}

/// An [`Interaction`] that never asks: it refuses and remembers that it was asked.
#[derive(Debug, Default)]
pub struct Deferring {
    asked: AtomicBool,
}

impl Deferring {
    /// Whether a call asked for approval or answers.
    pub fn asked(&self) -> bool {
        self.asked.load(Ordering::SeqCst)
    }

    fn refuse(&self) -> Error {
        self.asked.store(true, Ordering::SeqCst);
        Error::Failed("this call needs the user; it runs again on its own".into())
    }
}

impl Interaction for Deferring {
    fn approve(&self, _request: ApprovalRequest) -> BoxFuture<'_, Result<ApprovalDecision>> {
        Box::pin(async move { Err(self.refuse()) })
    }

    fn ask(&self, _questions: Vec<Question>) -> BoxFuture<'_, Result<Vec<Answer>>> {
        Box::pin(async move { Err(self.refuse()) })
    }
}
