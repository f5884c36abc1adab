//! The event log: every transition, state delta, message and command of a run.

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::sync::Arc;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::{Answer, Command, EdgeSpec, Interrupt, NodeId, NodeState, RunId, SubmissionId};

/// One entry of a run's event log. `seq` starts at 1 and increases by one per event of the
/// run; `ts` is milliseconds since the Unix epoch; `cause` names the service submission it
/// came from, when there is one.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Event {
    /// The run.
    pub run: RunId,
    /// Position in the run's log.
    pub seq: u64,
    /// Wall-clock time, ms since the epoch.
    pub ts: i64,
    /// The submission (service [`Op`](crate::Op)) that caused this event: the one that
    /// started or resumed the run for the events its driver records on its own, the one that
    /// sent the command for the events a command records. Metadata: replay ignores it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cause: Option<SubmissionId>,
    /// What happened.
    #[serde(flatten)]
    pub kind: EventKind,
}

/// Where a forked run branched off.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ForkRef {
    /// The run forked from.
    pub run: RunId,
    /// The checkpoint (a `stepCompleted` or `runStarted` event's seq) it continues from.
    pub seq: u64,
}

/// The lifecycle status of a run.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub enum RunStatus {
    /// Nodes are ready or running.
    Running,
    /// Nothing can run until an interrupt is answered.
    WaitingInput,
    /// Reached a success terminal (or every branch ended without failure).
    Succeeded,
    /// Reached a failure terminal, or stopped on an error.
    Failed,
    /// Cancelled by a command.
    Cancelled,
}

impl RunStatus {
    /// Whether the run can never continue.
    pub fn is_final(self) -> bool {
        matches!(
            self,
            RunStatus::Succeeded | RunStatus::Failed | RunStatus::Cancelled
        )
    }

    /// The wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            RunStatus::Running => "running",
            RunStatus::WaitingInput => "waitingInput",
            RunStatus::Succeeded => "succeeded",
            RunStatus::Failed => "failed",
            RunStatus::Cancelled => "cancelled",
        }
    }

    /// Parses the wire name.
    pub fn parse(s: &str) -> Option<Self> {
        Some(match s {
            "running" => RunStatus::Running,
            "waitingInput" => RunStatus::WaitingInput,
            "succeeded" => RunStatus::Succeeded,
            "failed" => RunStatus::Failed,
            "cancelled" => RunStatus::Cancelled,
            _ => return None,
        })
    }
}

impl std::fmt::Display for RunStatus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Whether reaching a terminal node means success or failure.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub enum TerminalKind {
    /// Like DONE.
    Success,
    /// Like ABORT.
    Failure,
}

/// What happened. Replaying a run's events in order, against the same graph definition,
/// rebuilds its exact state.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(
    tag = "type",
    rename_all = "camelCase",
    rename_all_fields = "camelCase"
)]
pub enum EventKind {
    /// The run was created.
    RunStarted {
        /// Graph name (resolved through a registry when resuming).
        graph: String,
        /// Structural fingerprint of the graph; resuming with a different one is refused.
        fingerprint: String,
        /// Parameters the graph was built with.
        #[serde(default, skip_serializing_if = "Value::is_null")]
        params: Value,
        /// Initial channel values.
        #[serde(default, skip_serializing_if = "Value::is_null")]
        input: Value,
        /// Set when this run was forked from another run's checkpoint.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        fork: Option<ForkRef>,
    },
    /// The run continues with another graph: the nodes of the one it ran so far were done
    /// and that graph named what comes next (a workflow run's `plan` node, once the
    /// orchestrator decided, hands over to the planned workflow's graph). The new graph
    /// holds every node of the old one, which keep their state; its entry is activated next.
    RunContinued {
        /// The new graph's name.
        graph: String,
        /// Its structural fingerprint.
        fingerprint: String,
        /// Parameters it was built with (the run is rebuilt from these from now on).
        #[serde(default, skip_serializing_if = "Value::is_null")]
        params: Value,
        /// Channel values written as it starts.
        #[serde(default, skip_serializing_if = "Value::is_null")]
        input: Value,
    },
    /// A process resumed the run from the store (after a crash, a pause or a restart).
    RunResumed {
        /// Activations that were RUNNING when the previous process stopped; they run again.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        requeued: Vec<NodeId>,
    },
    /// A node created at run time (spawned by fan-out or injected by a command).
    NodeAdded {
        /// Its id.
        node: NodeId,
        /// The template providing its handler.
        template: String,
        /// Its parent in the spawn tree.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        parent: Option<NodeId>,
        /// Input handed to its handler.
        #[serde(default, skip_serializing_if = "Value::is_null")]
        input: Value,
        /// Siblings (children of the same parent) it waits for: it is held, with no
        /// activation, until the latest activation of each is COMPLETED, and skipped if one of
        /// them ends otherwise for good. Absent when it waits for nothing.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        after: Vec<NodeId>,
    },
    /// An edge added by a command.
    EdgeAdded {
        /// The edge.
        edge: EdgeSpec,
    },
    /// A node activation changed state (`from` is absent when the activation is created).
    NodeTransition {
        /// Node.
        node: NodeId,
        /// Activation number.
        attempt: u32,
        /// Previous state.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        from: Option<NodeState>,
        /// New state.
        to: NodeState,
        /// Why (routing, pruning, recovery…).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        reason: Option<String>,
    },
    /// A handler finished: its result and the writes it asked for. Writes are applied to the
    /// state at the end of the step, in node order (see `stepCompleted`).
    NodeOutput {
        /// Node.
        node: NodeId,
        /// Activation number.
        attempt: u32,
        /// Whether the outcome is a failure.
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        failure: bool,
        /// The recorded result (routers and collectors read it; shared with the run state).
        #[serde(default, skip_serializing_if = "is_null")]
        result: Arc<Value>,
        /// Error text when the handler returned an error.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        error: Option<String>,
        /// Channel writes, in the order the handler made them. Values are shared with the
        /// run state (a `replace` channel holds the written value itself, not a copy).
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        writes: Vec<(String, Arc<Value>)>,
        /// Named counter increments.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        counters: Vec<(String, i64)>,
        /// Children to spawn, as (key, template, input).
        #[serde(default, skip_serializing_if = "is_empty")]
        spawns: Arc<[(String, String, Value)]>,
        /// Dependencies of the spawned children: spawn key → keys of the siblings it waits
        /// for (see `nodeAdded.after`). Absent when no spawn waits for another.
        #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
        spawn_after: BTreeMap<String, Vec<String>>,
        /// Dependencies of this node that the handler asked to run again (revisions, applied
        /// at the end of the step with the reason `revision requested`), in order.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        revise: Vec<NodeId>,
    },
    /// A node stopped to ask something; it is now WAITING_INPUT.
    InterruptRaised {
        /// Node.
        node: NodeId,
        /// Activation number.
        attempt: u32,
        /// The question.
        interrupt: Interrupt,
        /// Data the handler keeps for when it runs again.
        #[serde(default, skip_serializing_if = "Value::is_null")]
        scratch: Value,
    },
    /// An answer arrived for a waiting node.
    InputReceived {
        /// Node.
        node: NodeId,
        /// Activation number.
        attempt: u32,
        /// The answer.
        answer: Answer,
    },
    /// Routing decided where to go after an activation.
    Routed {
        /// Source node.
        from: NodeId,
        /// Its activation number.
        attempt: u32,
        /// Targets (empty when the branch ends).
        to: Vec<NodeId>,
        /// Which rule decided (success, failure, max_attempts, router…).
        reason: Cow<'static, str>,
    },
    /// A step started: the READY activations at this point run in it. Everything between a
    /// `stepCompleted` and the next `stepStarted` is routing and commands.
    StepStarted {
        /// Step number, from 1.
        step: u64,
    },
    /// A step ended: the pending writes of the step's finished activations were applied to the
    /// state in node order, and counters updated. This is a checkpoint: a fork or resume
    /// starts from one.
    StepCompleted {
        /// Step number, from 1.
        step: u64,
        /// Channels whose value changed.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        changed: Vec<String>,
    },
    /// A command arrived.
    CommandReceived {
        /// Per-run command number.
        id: u64,
        /// The command.
        command: Command,
    },
    /// A command could not apply.
    CommandRefused {
        /// The command number.
        id: u64,
        /// Why.
        reason: String,
    },
    /// A message was buffered for a node or delivered to its running handler.
    MessageQueued {
        /// The command number that carried it.
        id: u64,
        /// Node.
        node: NodeId,
        /// Activation number that will see it.
        attempt: u32,
        /// Delivered to a running handler (otherwise buffered).
        delivered: bool,
    },
    /// The run's status changed.
    RunStatusChanged {
        /// New status.
        status: RunStatus,
        /// The terminal node reached, if any.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        terminal: Option<NodeId>,
        /// Error text for failures.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        error: Option<String>,
    },
}

impl EventKind {
    /// The wire name of the variant (`nodeTransition`, …).
    pub fn name(&self) -> &'static str {
        match self {
            EventKind::RunStarted { .. } => "runStarted",
            EventKind::RunContinued { .. } => "runContinued",
            EventKind::RunResumed { .. } => "runResumed",
            EventKind::NodeAdded { .. } => "nodeAdded",
            EventKind::EdgeAdded { .. } => "edgeAdded",
            EventKind::NodeTransition { .. } => "nodeTransition",
            EventKind::NodeOutput { .. } => "nodeOutput",
            EventKind::InterruptRaised { .. } => "interruptRaised",
            EventKind::InputReceived { .. } => "inputReceived",
            EventKind::Routed { .. } => "routed",
            EventKind::StepStarted { .. } => "stepStarted",
            EventKind::StepCompleted { .. } => "stepCompleted",
            EventKind::CommandReceived { .. } => "commandReceived",
            EventKind::CommandRefused { .. } => "commandRefused",
            EventKind::MessageQueued { .. } => "messageQueued",
            EventKind::RunStatusChanged { .. } => "runStatusChanged",
        }
    }

    /// Whether a run may be forked at this event. A fork at a `stepCompleted` continues from
    /// the state after that step, including the routing decided right after it (everything up
    /// to the next `stepStarted`); a fork at `runStarted` starts over with the same input.
    pub fn is_checkpoint(&self) -> bool {
        matches!(
            self,
            EventKind::RunStarted { .. } | EventKind::StepCompleted { .. }
        )
    }
}

fn is_empty<T>(v: &Arc<[T]>) -> bool {
    v.is_empty()
}

fn is_null(v: &Arc<Value>) -> bool {
    v.is_null()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn event_round_trips_with_camel_case_tag() {
        let ev = Event {
            run: RunId::from_string("r1"),
            seq: 3,
            ts: 1,
            cause: None,
            kind: EventKind::NodeTransition {
                node: NodeId::new("a"),
                attempt: 1,
                from: Some(NodeState::Ready),
                to: NodeState::Running,
                reason: None,
            },
        };
        let s = serde_json::to_string(&ev).unwrap();
        assert_eq!(
            s,
            r#"{"run":"r1","seq":3,"ts":1,"type":"nodeTransition","node":"a","attempt":1,"from":"READY","to":"RUNNING"}"#
        );
        let back: Event = serde_json::from_str(&s).unwrap();
        assert_eq!(back, ev);
    }

    #[test]
    fn the_cause_is_written_only_when_known() {
        let ev = Event {
            run: RunId::from_string("r1"),
            seq: 1,
            ts: 2,
            cause: Some(SubmissionId::from_string("sub-9")),
            kind: EventKind::StepStarted { step: 1 },
        };
        let s = serde_json::to_string(&ev).unwrap();
        assert_eq!(
            s,
            r#"{"run":"r1","seq":1,"ts":2,"cause":"sub-9","type":"stepStarted","step":1}"#
        );
        assert_eq!(serde_json::from_str::<Event>(&s).unwrap(), ev);
    }

    #[test]
    fn spawn_dependencies_and_revisions_are_optional_on_the_wire() {
        // Logs written before dependencies existed load with none.
        let added: Event = serde_json::from_str(
            r#"{"run":"r1","seq":4,"ts":1,"type":"nodeAdded","node":"t/a","template":"w","parent":"t"}"#,
        )
        .unwrap();
        assert!(matches!(&added.kind, EventKind::NodeAdded { after, .. } if after.is_empty()));
        let output: Event = serde_json::from_str(
            r#"{"run":"r1","seq":5,"ts":1,"type":"nodeOutput","node":"t","attempt":1,"spawns":[["a","w",null]]}"#,
        )
        .unwrap();
        let EventKind::NodeOutput {
            spawns,
            spawn_after,
            revise,
            ..
        } = &output.kind
        else {
            panic!("not an output: {output:?}");
        };
        assert_eq!(spawns.len(), 1);
        assert!(spawn_after.is_empty() && revise.is_empty());
        // Without dependencies nothing new is written.
        assert!(!serde_json::to_string(&added).unwrap().contains("after"));
        let s = serde_json::to_string(&output).unwrap();
        assert!(!s.contains("spawnAfter") && !s.contains("revise"), "{s}");
        // With them, they round-trip.
        let ev = Event {
            run: RunId::from_string("r1"),
            seq: 6,
            ts: 1,
            cause: None,
            kind: EventKind::NodeOutput {
                node: NodeId::new("t/b.review"),
                attempt: 1,
                failure: true,
                result: Arc::default(),
                error: None,
                writes: Vec::new(),
                counters: Vec::new(),
                spawns: Arc::from(vec![("c".to_owned(), "w".to_owned(), Value::Null)]),
                spawn_after: BTreeMap::from([("c".to_owned(), vec!["a".to_owned()])]),
                revise: vec![NodeId::new("t/b")],
            },
        };
        let s = serde_json::to_string(&ev).unwrap();
        assert!(
            s.contains(r#""spawnAfter":{"c":["a"]},"revise":["t/b"]"#),
            "{s}"
        );
        assert_eq!(serde_json::from_str::<Event>(&s).unwrap(), ev);
    }
}
