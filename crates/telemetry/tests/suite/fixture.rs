//! A scripted run's stored events: a planning node, then an agent stage `code` whose agent
//! makes two model calls and one tool call between them, then a `review` stage that fails
//! once and passes on its second activation.

use serde_json::json;
use trellis_protocol::records::ModelCallRecord;
use trellis_protocol::{
    EventKind, NodeId, NodeState, RunId, RunStatus, ServiceEvent, ServiceEventBody, SessionEvent,
    SessionId, SessionOwner, StreamId, ToolStatus, TurnUsage,
};
use trellis_telemetry::StoredRun;

pub const RUN: &str = "0191f0c4a2b37c5e8d9a0b1c2d3e4f50";
pub const T0: i64 = 1_763_759_045_000;
pub const SECRET_PROMPT: &str = "the system prompt that must not leak";
pub const SECRET_ARGS: &str = "src/secret.rs";
/// The names of the spans the live pipeline exports for the scripted run, sorted (live, a
/// turn's model is the one its `turnStarted` names).
pub const LIVE_SPAN_NAMES: [&str; 9] = [
    "chat coder-model",
    "chat coder-model",
    "execute_tool read_file",
    "invoke_agent coder",
    "invoke_workflow feature",
    "node code",
    "node plan",
    "node review",
    "node review",
];

pub fn run_id() -> RunId {
    RunId::from_string(RUN)
}

fn ev(stream: &StreamId, seq: u64, ts: i64, event: ServiceEventBody) -> ServiceEvent {
    ServiceEvent {
        stream: stream.clone(),
        seq,
        ts: T0 + ts,
        submission: None,
        event,
    }
}

fn transition(node: &str, attempt: u32, from: Option<NodeState>, to: NodeState) -> EventKind {
    EventKind::NodeTransition {
        node: NodeId::new(node),
        attempt,
        from,
        to,
        reason: None,
    }
}

/// The run's graph log.
pub fn run_stream(end: Option<RunStatus>) -> Vec<ServiceEvent> {
    use NodeState::*;
    let s = StreamId::Run(run_id());
    let mut kinds: Vec<(i64, EventKind)> = vec![
        (
            0,
            EventKind::RunStarted {
                graph: "planning".into(),
                fingerprint: "f".into(),
                params: json!(null),
                input: json!(null),
                fork: None,
            },
        ),
        (1, transition("plan", 1, None, Ready)),
        (2, transition("plan", 1, Some(Ready), Running)),
        (50, transition("plan", 1, Some(Running), Completed)),
        (
            51,
            EventKind::RunContinued {
                graph: "feature".into(),
                fingerprint: "g".into(),
                params: json!(null),
                input: json!(null),
            },
        ),
        (60, transition("code", 1, None, Ready)),
        (61, transition("code", 1, Some(Ready), Running)),
        (900, transition("code", 1, Some(Running), Completed)),
        (901, transition("review", 1, None, Ready)),
        (902, transition("review", 1, Some(Ready), Running)),
        (
            950,
            EventKind::NodeOutput {
                node: NodeId::new("review"),
                attempt: 1,
                failure: true,
                result: Default::default(),
                error: Some("tests failed".into()),
                writes: vec![],
                counters: vec![],
                spawns: std::sync::Arc::from(vec![]),
                spawn_after: Default::default(),
                revise: vec![],
            },
        ),
        (951, transition("review", 1, Some(Running), Failed)),
        (952, transition("review", 2, None, Ready)),
        (953, transition("review", 2, Some(Ready), Running)),
        (990, transition("review", 2, Some(Running), Completed)),
    ];
    if let Some(status) = end {
        kinds.push((
            1000,
            EventKind::RunStatusChanged {
                status,
                terminal: None,
                error: None,
            },
        ));
    }
    kinds
        .into_iter()
        .enumerate()
        .map(|(i, (ts, k))| ev(&s, i as u64 + 1, ts, ServiceEventBody::Run(k)))
        .collect()
}

/// The `code` agent's session.
pub fn code_session() -> Vec<ServiceEvent> {
    let id = SessionId::for_node(&run_id(), &NodeId::new("code"));
    let s = StreamId::Session(id);
    let events = vec![
        (
            61,
            SessionEvent::SessionStarted {
                owner: SessionOwner::Agent {
                    run: run_id(),
                    node: NodeId::new("code"),
                    role: "coder".into(),
                },
            },
        ),
        (
            62,
            SessionEvent::PromptSet {
                attempt: 1,
                messages: vec![json!({"role": "system", "content": SECRET_PROMPT})],
            },
        ),
        (
            63,
            SessionEvent::TurnStarted {
                turn: 1,
                attempt: 1,
                model: Some("coder-model".into()),
            },
        ),
        (
            64,
            SessionEvent::MessageDelta {
                turn: 1,
                text: "reading".into(),
            },
        ),
        (
            300,
            SessionEvent::TurnCompleted {
                turn: 1,
                message: json!({"role": "assistant", "content": "reading"}),
                usage: TurnUsage {
                    prompt_tokens: 1200,
                    completion_tokens: 40,
                },
            },
        ),
        (
            301,
            SessionEvent::ToolStarted {
                turn: 1,
                call_id: "call-1".into(),
                name: "read_file".into(),
                input: json!({"path": SECRET_ARGS}),
            },
        ),
        (
            340,
            SessionEvent::ToolCompleted {
                turn: 1,
                call_id: "call-1".into(),
                name: "read_file".into(),
                output: "fn main() {}".into(),
                status: ToolStatus::Ok,
                duration_ms: 39,
            },
        ),
        (
            341,
            SessionEvent::TurnStarted {
                turn: 2,
                attempt: 1,
                model: Some("coder-model".into()),
            },
        ),
        (
            800,
            SessionEvent::TurnCompleted {
                turn: 2,
                message: json!({"role": "assistant", "content": "done"}),
                usage: TurnUsage {
                    prompt_tokens: 1500,
                    completion_tokens: 300,
                },
            },
        ),
        (
            801,
            SessionEvent::SessionCompleted {
                output: json!("ok"),
            },
        ),
    ];
    events
        .into_iter()
        .enumerate()
        .map(|(i, (ts, e))| ev(&s, i as u64 + 1, ts, ServiceEventBody::Session(e)))
        .collect()
}

fn call(id: i64, stage: &str, at: i64, model: &str, prompt: u64) -> ModelCallRecord {
    ModelCallRecord {
        id,
        run_id: Some(run_id()),
        stage: Some(stage.into()),
        agent: Some("coder".into()),
        profile: "remote".into(),
        model: model.into(),
        prompt_tokens: prompt,
        completion_tokens: 10,
        cached_tokens: 0,
        reported: true,
        cost_usd: Some(0.01),
        outcome: "ok".into(),
        at: T0 + at,
    }
}

/// The model calls the run's ledger recorded: the orchestrator's (no turn), then the two
/// turns of `code` (each booked just after its turn ended).
pub fn model_calls() -> Vec<ModelCallRecord> {
    vec![
        call(1, "plan", 40, "planner-model", 500),
        call(2, "code", 301, "coder-model", 1200),
        call(3, "code", 801, "coder-model", 1500),
    ]
}

pub fn stored(end: Option<RunStatus>) -> StoredRun {
    StoredRun {
        streams: vec![run_stream(end), code_session()],
        model_calls: model_calls(),
    }
}
