//! The published JSON Schemas: `docs/events.schema.json` is up to date, and real serialised
//! events, ops and other wire values validate against the schemas derived from their types.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::too_many_lines)]

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::sync::Arc;

use serde::Serialize;
use serde_json::{Value, json};
use trellis_protocol::schema::{
    ComponentSchemas, Direction, event_schema, op_schema, schema_for, serialized_schema_for,
};
use trellis_protocol::{
    Answer, Artifact, ArtifactStatus, Budgets, Command, CompactionMethod, EdgeSpec, Event,
    EventFrame, EventKind, FileHunks, ForkRef, InjectNode, InputMode, Interrupt, Message,
    NodeAnswer, NodeId, NodeMessage, NodeState, Op, OpErrorKind, ReviewAction, RunId, RunStatus,
    ServiceEvent, ServiceEventBody, SessionEvent, SessionId, SessionOwner, StreamId, SubmissionId,
    TOPICS, ToolStatus, TurnUsage, WorkspaceEvent,
};

fn docs_path() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../docs/events.schema.json")
}

/// `docs/events.schema.json` is [`event_schema`], pretty-printed. When the wire types change,
/// regenerate it with
///
/// ```text
/// UPDATE_SCHEMAS=1 cargo test -p trellis-protocol --test schemas
/// ```
///
/// and commit the result (this test fails until then). The file is compared as JSON, not as
/// text: the order of an object's keys depends on serde_json's `preserve_order` feature,
/// which any crate built with this one may turn on.
#[test]
fn the_published_event_schema_is_up_to_date() {
    let schema = event_schema();
    let path = docs_path();
    if std::env::var_os("UPDATE_SCHEMAS").is_some_and(|v| v == "1") {
        let text = format!("{}\n", serde_json::to_string_pretty(&schema).unwrap());
        std::fs::write(&path, text).unwrap();
        return;
    }
    let published: Option<Value> = std::fs::read_to_string(&path)
        .ok()
        .and_then(|text| serde_json::from_str(&text).ok());
    assert!(
        published.as_ref() == Some(&schema),
        "{} is out of date: run `UPDATE_SCHEMAS=1 cargo test -p trellis-protocol --test schemas` \
         and commit it",
        path.display()
    );
}

/// `docs/events.md` describes every topic (as `` `topic` `` in a table row).
#[test]
fn the_events_page_lists_every_topic() {
    let page = std::fs::read_to_string(
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../docs/events.md"),
    )
    .unwrap();
    let missing: Vec<_> = TOPICS
        .iter()
        .filter(|t| !page.contains(&format!("| `{t}` |")))
        .collect();
    assert!(
        missing.is_empty(),
        "docs/events.md does not describe {missing:?}"
    );
}

#[test]
fn the_schemas_are_valid_draft_2020_12() {
    for schema in [
        event_schema(),
        op_schema(),
        serialized_schema_for::<Event>(),
        serialized_schema_for::<Artifact>(),
    ] {
        assert_eq!(
            schema["$schema"],
            "https://json-schema.org/draft/2020-12/schema"
        );
        jsonschema::meta::validate(&schema).unwrap();
    }
}

fn validator(schema: &Value) -> jsonschema::Validator {
    jsonschema::draft202012::new(schema).unwrap()
}

/// Validates `value` (serialised) against `v`, with every error in the message.
fn assert_valid(v: &jsonschema::Validator, value: &impl Serialize) {
    let json = serde_json::to_value(value).unwrap();
    let errors: Vec<String> = v
        .iter_errors(&json)
        .map(|e| format!("{} at {}", e, e.instance_path()))
        .collect();
    assert!(errors.is_empty(), "{json}\ndoes not validate:\n{errors:#?}");
}

fn run() -> RunId {
    RunId::from_string("0191f0c4a2b37c5e8d9a0b1c2d3e4f50")
}

fn node(name: &str) -> NodeId {
    NodeId::new(name)
}

/// One of each [`EventKind`] variant, plus the states and interrupt kinds that change the
/// topic.
fn graph_events() -> Vec<EventKind> {
    vec![
        EventKind::RunStarted {
            graph: "staged_review".into(),
            fingerprint: "9f2c".into(),
            params: json!({ "request": "add a flag" }),
            input: Value::Null,
            fork: Some(ForkRef { run: run(), seq: 7 }),
        },
        EventKind::RunStarted {
            graph: "g".into(),
            fingerprint: "f".into(),
            params: Value::Null,
            input: json!({ "x": 1 }),
            fork: None,
        },
        EventKind::RunResumed {
            requeued: vec![node("code")],
        },
        EventKind::RunResumed { requeued: vec![] },
        EventKind::RunContinued {
            graph: "bug_fix".into(),
            fingerprint: "f2".into(),
            params: json!({ "workflow": "bug_fix" }),
            input: json!({ "task": "fix it" }),
        },
        EventKind::NodeAdded {
            node: node("review/security"),
            template: "reviewer".into(),
            parent: Some(node("review")),
            input: json!({ "focus": "security" }),
            after: vec![],
        },
        EventKind::NodeAdded {
            node: node("tickets/T2"),
            template: "ticket".into(),
            parent: Some(node("tickets")),
            input: Value::Null,
            after: vec![node("tickets/T1.merge")],
        },
        EventKind::EdgeAdded {
            edge: EdgeSpec {
                from: node("a"),
                to: node("b"),
            },
        },
        EventKind::NodeTransition {
            node: node("plan"),
            attempt: 1,
            from: Some(NodeState::Ready),
            to: NodeState::Running,
            reason: None,
        },
        EventKind::NodeTransition {
            node: node("plan"),
            attempt: 2,
            from: None,
            to: NodeState::Ready,
            reason: Some("revision".into()),
        },
        EventKind::NodeTransition {
            node: node("plan"),
            attempt: 1,
            from: Some(NodeState::Running),
            to: NodeState::Pruned,
            reason: Some("user".into()),
        },
        EventKind::NodeOutput {
            node: node("plan"),
            attempt: 1,
            failure: true,
            result: Arc::new(json!({ "ok": false })),
            error: Some("tests failed".into()),
            writes: vec![("plan".into(), Arc::new(json!("…")))],
            counters: vec![("retries".into(), -1)],
            spawns: Arc::from(vec![(
                "security".to_owned(),
                "reviewer".to_owned(),
                json!(null),
            )]),
            spawn_after: Default::default(),
            revise: vec![],
        },
        EventKind::NodeOutput {
            node: node("tickets"),
            attempt: 1,
            failure: false,
            result: Arc::new(Value::Null),
            error: None,
            writes: vec![],
            counters: vec![],
            spawns: Arc::from(vec![
                ("T1".to_owned(), "ticket".to_owned(), json!(null)),
                ("T1.review".to_owned(), "review".to_owned(), json!(null)),
            ]),
            spawn_after: [("T1.review".to_owned(), vec!["T1".to_owned()])].into(),
            revise: vec![],
        },
        EventKind::NodeOutput {
            node: node("plan"),
            attempt: 1,
            failure: false,
            result: Arc::new(Value::Null),
            error: None,
            writes: vec![],
            counters: vec![],
            spawns: Arc::from(Vec::new()),
            spawn_after: Default::default(),
            revise: vec![node("tickets/T1")],
        },
        EventKind::InterruptRaised {
            node: node("ask"),
            attempt: 1,
            interrupt: Interrupt::question("Which database?"),
            scratch: json!([1, 2]),
        },
        EventKind::InterruptRaised {
            node: node("gate"),
            attempt: 1,
            interrupt: Interrupt {
                data: json!({ "diff": "+1 -0" }),
                ..Interrupt::approval("Apply?")
            },
            scratch: Value::Null,
        },
        EventKind::InputReceived {
            node: node("gate"),
            attempt: 1,
            answer: Answer::reject("not yet"),
        },
        EventKind::Routed {
            from: node("plan"),
            attempt: 1,
            to: vec![node("code"), node("docs")],
            reason: "success".into(),
        },
        EventKind::StepStarted { step: 3 },
        EventKind::StepCompleted {
            step: 3,
            changed: vec!["plan".into()],
        },
        EventKind::CommandReceived {
            id: 1,
            command: Command::Inject {
                nodes: vec![InjectNode {
                    id: node("extra"),
                    template: "coder".into(),
                    input: json!({ "task": "x" }),
                    parent: None,
                    activate: true,
                }],
                edges: vec![EdgeSpec {
                    from: node("extra"),
                    to: node("DONE"),
                }],
            },
        },
        EventKind::CommandReceived {
            id: 2,
            command: Command::SendMessage {
                node: node("code"),
                message: Message::user("use tabs"),
            },
        },
        EventKind::CommandReceived {
            id: 3,
            command: Command::Prune {
                node: node("docs"),
                reason: None,
            },
        },
        EventKind::CommandReceived {
            id: 4,
            command: Command::Answer {
                node: node("ask"),
                answer: Answer::text("postgres"),
            },
        },
        EventKind::CommandReceived {
            id: 5,
            command: Command::Revise {
                node: node("code"),
                message: Message {
                    text: "again".into(),
                    from: None,
                },
            },
        },
        EventKind::CommandReceived {
            id: 6,
            command: Command::Cancel {
                reason: Some("enough".into()),
            },
        },
        EventKind::CommandRefused {
            id: 6,
            reason: "the run is finished".into(),
        },
        EventKind::MessageQueued {
            id: 2,
            node: node("code"),
            attempt: 1,
            delivered: true,
        },
    ]
    .into_iter()
    .chain(
        [
            RunStatus::Running,
            RunStatus::WaitingInput,
            RunStatus::Succeeded,
            RunStatus::Failed,
            RunStatus::Cancelled,
        ]
        .map(|status| EventKind::RunStatusChanged {
            status,
            terminal: (status == RunStatus::Succeeded).then(|| node("DONE")),
            error: (status == RunStatus::Failed).then(|| "boom".to_owned()),
        }),
    )
    .collect()
}

/// One of each [`SessionEvent`] variant.
fn session_events() -> Vec<SessionEvent> {
    vec![
        SessionEvent::SessionStarted {
            owner: SessionOwner::Agent {
                run: run(),
                node: node("code"),
                role: "coder".into(),
            },
        },
        SessionEvent::SessionStarted {
            owner: SessionOwner::Channel {
                channel: "general".into(),
            },
        },
        SessionEvent::PromptSet {
            attempt: 1,
            messages: vec![json!({ "role": "system", "content": "You are…" })],
        },
        SessionEvent::UserMessage {
            text: "why?".into(),
        },
        SessionEvent::MessagesReceived {
            turn: 3,
            texts: vec!["hurry".into()],
        },
        SessionEvent::TurnStarted {
            turn: 1,
            attempt: 0,
            model: Some("gpt-4o-mini".into()),
        },
        SessionEvent::MessageDelta {
            turn: 1,
            text: "Hel".into(),
        },
        SessionEvent::ThoughtDelta {
            turn: 1,
            text: "hmm".into(),
        },
        SessionEvent::TurnProgress {
            turn: 1,
            prompt_tokens: 4100,
            prompt_done: 1536,
            generated: 0,
        },
        SessionEvent::TurnCompleted {
            turn: 1,
            message: json!({ "role": "assistant", "content": "Hello" }),
            usage: TurnUsage {
                prompt_tokens: 120,
                completion_tokens: 8,
            },
        },
        SessionEvent::TurnFailed {
            turn: 2,
            error: "endpoint down".into(),
        },
        SessionEvent::ToolStarted {
            turn: 2,
            call_id: "call_1".into(),
            name: "read_file".into(),
            input: json!({ "path": "src/lib.rs" }),
        },
        SessionEvent::ToolProgress {
            turn: 2,
            call_id: "call_1".into(),
            progress: 2.0,
            total: Some(5.0),
            message: Some("indexing".into()),
        },
        SessionEvent::ToolProgress {
            turn: 2,
            call_id: "call_1".into(),
            progress: 0.5,
            total: None,
            message: None,
        },
        SessionEvent::ToolCompleted {
            turn: 2,
            call_id: "call_1".into(),
            name: "read_file".into(),
            output: "fn main() {}".into(),
            status: ToolStatus::Ok,
            duration_ms: 4,
        },
        SessionEvent::ToolCompleted {
            turn: 2,
            call_id: "call_2".into(),
            name: "bash".into(),
            output: "denied".into(),
            status: ToolStatus::Denied,
            duration_ms: 0,
        },
        SessionEvent::ContextCompacted {
            turn: 7,
            method: CompactionMethod::Summary,
            before_tokens: 2400,
            after_tokens: 900,
            limit: 1500,
            summarized: 12,
            cuts: 0,
            tools_dropped: false,
            fallback: None,
            usage: TurnUsage {
                prompt_tokens: 1800,
                completion_tokens: 120,
            },
            messages: vec![json!({ "role": "user", "content": "## SUMMARY OF EARLIER WORK\n…" })],
        },
        SessionEvent::ContextCompacted {
            turn: 8,
            method: CompactionMethod::Digest,
            before_tokens: 2400,
            after_tokens: 1400,
            limit: 1500,
            summarized: 12,
            cuts: 2,
            tools_dropped: true,
            fallback: Some("the summary call failed: HTTP 500".into()),
            usage: TurnUsage::default(),
            messages: vec![],
        },
        SessionEvent::Note {
            text: "repaired a JSON answer".into(),
        },
        SessionEvent::SessionCompleted {
            output: json!({ "summary": "done" }),
        },
        SessionEvent::SessionCompleted {
            output: Value::Null,
        },
        SessionEvent::SessionError {
            error: "cancelled".into(),
        },
    ]
}

/// One of each [`WorkspaceEvent`] variant, and every artifact status.
fn workspace_events() -> Vec<WorkspaceEvent> {
    let mut events = vec![
        WorkspaceEvent::OpCompleted {
            op: "startRun".into(),
            result: json!({ "run": run().as_str(), "workflow": "staged_review" }),
        },
        WorkspaceEvent::OpCompleted {
            op: "cancel".into(),
            result: Value::Null,
        },
        WorkspaceEvent::OpFailed {
            op: "prune".into(),
            error: "`x` is finished".into(),
            kind: Some(OpErrorKind::Conflict),
        },
        WorkspaceEvent::OpFailed {
            op: "prune".into(),
            error: "old".into(),
            kind: None,
        },
        WorkspaceEvent::RunCreated {
            run: run(),
            workflow: "staged_review".into(),
            request: "add a flag".into(),
        },
        WorkspaceEvent::StageChanged {
            run: run(),
            stage: node("research"),
            attempt: 2,
        },
        WorkspaceEvent::RunStopped {
            run: run(),
            status: RunStatus::Failed,
            error: Some("budget".into()),
        },
        WorkspaceEvent::SessionCreated {
            session: SessionId::for_node(&run(), &node("code")),
            owner: SessionOwner::Channel {
                channel: "general".into(),
            },
        },
        WorkspaceEvent::ReviewChanged {
            run: run(),
            state: "applied".into(),
        },
    ];
    for status in [
        ArtifactStatus::Draft,
        ArtifactStatus::AwaitingApproval,
        ArtifactStatus::Approved,
        ArtifactStatus::ChangesRequested,
    ] {
        events.push(WorkspaceEvent::ArtifactChanged {
            artifact: 3,
            run: run(),
            status,
        });
    }
    events
}

/// The index of `e`'s variant (an exhaustive match: adding a variant breaks the build here,
/// so the samples above get one).
fn graph_variant(e: &EventKind) -> usize {
    match e {
        EventKind::RunStarted { .. } => 0,
        EventKind::RunResumed { .. } => 1,
        EventKind::NodeAdded { .. } => 2,
        EventKind::EdgeAdded { .. } => 3,
        EventKind::NodeTransition { .. } => 4,
        EventKind::NodeOutput { .. } => 5,
        EventKind::InterruptRaised { .. } => 6,
        EventKind::InputReceived { .. } => 7,
        EventKind::Routed { .. } => 8,
        EventKind::StepStarted { .. } => 9,
        EventKind::StepCompleted { .. } => 10,
        EventKind::CommandReceived { .. } => 11,
        EventKind::CommandRefused { .. } => 12,
        EventKind::MessageQueued { .. } => 13,
        EventKind::RunStatusChanged { .. } => 14,
        EventKind::RunContinued { .. } => 15,
    }
}

/// See [`graph_variant`].
fn session_variant(e: &SessionEvent) -> usize {
    match e {
        SessionEvent::SessionStarted { .. } => 0,
        SessionEvent::PromptSet { .. } => 1,
        SessionEvent::UserMessage { .. } => 2,
        SessionEvent::MessagesReceived { .. } => 3,
        SessionEvent::TurnStarted { .. } => 4,
        SessionEvent::MessageDelta { .. } => 5,
        SessionEvent::ThoughtDelta { .. } => 6,
        SessionEvent::TurnCompleted { .. } => 7,
        SessionEvent::TurnFailed { .. } => 8,
        SessionEvent::ToolStarted { .. } => 9,
        SessionEvent::ToolCompleted { .. } => 10,
        SessionEvent::Note { .. } => 11,
        SessionEvent::SessionCompleted { .. } => 12,
        SessionEvent::SessionError { .. } => 13,
        SessionEvent::ToolProgress { .. } => 14,
        SessionEvent::ContextCompacted { .. } => 15,
        SessionEvent::TurnProgress { .. } => 16,
    }
}

/// See [`graph_variant`].
fn workspace_variant(e: &WorkspaceEvent) -> usize {
    match e {
        WorkspaceEvent::OpCompleted { .. } => 0,
        WorkspaceEvent::OpFailed { .. } => 1,
        WorkspaceEvent::RunCreated { .. } => 2,
        WorkspaceEvent::StageChanged { .. } => 3,
        WorkspaceEvent::RunStopped { .. } => 4,
        WorkspaceEvent::SessionCreated { .. } => 5,
        WorkspaceEvent::ReviewChanged { .. } => 6,
        WorkspaceEvent::ArtifactChanged { .. } => 7,
    }
}

/// Every sample event, on its stream, as the service delivers it.
fn service_events() -> Vec<ServiceEvent> {
    let run_stream = StreamId::Run(run());
    let session_stream = StreamId::Session(SessionId::for_node(&run(), &node("code")));
    let bodies = graph_events()
        .into_iter()
        .map(|e| (run_stream.clone(), ServiceEventBody::Run(e)))
        .chain(
            session_events()
                .into_iter()
                .map(|e| (session_stream.clone(), ServiceEventBody::Session(e))),
        )
        .chain(
            workspace_events()
                .into_iter()
                .map(|e| (StreamId::Workspace, ServiceEventBody::Workspace(e))),
        );
    bodies
        .enumerate()
        .map(|(i, (stream, event))| ServiceEvent {
            stream,
            seq: i as u64 + 1,
            ts: 1_763_759_045_123 + i as i64,
            submission: (i % 2 == 0).then(|| SubmissionId::from_string(format!("sub-{i}"))),
            event,
        })
        .collect()
}

#[test]
fn every_event_validates_as_a_frame() {
    let v = validator(&event_schema());
    let events = service_events();

    let mut graph = BTreeSet::new();
    let mut session = BTreeSet::new();
    let mut workspace = BTreeSet::new();
    let mut topics = BTreeSet::new();
    for ev in &events {
        match &ev.event {
            ServiceEventBody::Run(e) => graph.insert(graph_variant(e)),
            ServiceEventBody::Session(e) => session.insert(session_variant(e)),
            ServiceEventBody::Workspace(e) => workspace.insert(workspace_variant(e)),
        };
        topics.insert(ev.topic());

        let frame = EventFrame::new("/src/app", ev);
        assert_valid(&v, &frame);

        // The wire form: `type` first, the topic in `name`, and it reads back.
        let text = serde_json::to_string(&frame).unwrap();
        assert!(text.starts_with(r#"{"type":"event","name":""#), "{text}");
        let back: EventFrame<'static> = serde_json::from_str(&text).unwrap();
        assert_eq!(back.name, ev.topic());
        assert_eq!(back.to_service_event(), *ev);
        assert_eq!(back, frame.clone().into_owned());
    }
    assert_eq!(graph.len(), 16, "an EventKind variant has no sample");
    assert_eq!(session.len(), 17, "a SessionEvent variant has no sample");
    assert_eq!(workspace.len(), 8, "a WorkspaceEvent variant has no sample");
    let missing: Vec<_> = TOPICS.iter().filter(|t| !topics.contains(*t)).collect();
    assert!(missing.is_empty(), "topics without a sample: {missing:?}");
}

#[test]
fn a_turn_started_names_its_model_and_one_recorded_without_it_still_reads() {
    let named = SessionEvent::TurnStarted {
        turn: 2,
        attempt: 1,
        model: Some("gpt-4o-mini".into()),
    };
    let text = serde_json::to_string(&named).unwrap();
    assert_eq!(
        text,
        r#"{"type":"turnStarted","turn":2,"attempt":1,"model":"gpt-4o-mini"}"#
    );
    let old: SessionEvent =
        serde_json::from_str(r#"{"type":"turnStarted","turn":2,"attempt":1}"#).unwrap();
    assert_eq!(
        old,
        SessionEvent::TurnStarted {
            turn: 2,
            attempt: 1,
            model: None
        }
    );
    assert_eq!(
        serde_json::to_string(&old).unwrap(),
        r#"{"type":"turnStarted","turn":2,"attempt":1}"#,
        "no model, no field"
    );
}

#[test]
fn a_wrong_frame_fails_validation() {
    let v = validator(&event_schema());
    let ev = &service_events()[0];
    let good = serde_json::to_value(EventFrame::new("/src/app", ev)).unwrap();
    assert!(v.is_valid(&good));

    let broken = |f: &dyn Fn(&mut Value)| {
        let mut frame = good.clone();
        f(&mut frame);
        frame
    };
    let wrong = [
        // A field of the wrong type.
        broken(&|f| f["seq"] = json!("12")),
        broken(&|f| f["ts"] = json!(1.5)),
        broken(&|f| f["seq"] = json!(-1)),
        // A missing field.
        broken(&|f| {
            f.as_object_mut().unwrap().remove("stream");
        }),
        // Not an event frame, an unknown topic, a malformed stream.
        broken(&|f| f["type"] = json!("error")),
        broken(&|f| f["name"] = json!("graph:nope")),
        broken(&|f| f["stream"] = json!("runs/1")),
        // A payload that matches no event.
        broken(&|f| f["event"]["type"] = json!("nodeExploded")),
        broken(&|f| f["event"]["graph"] = json!(7)),
        broken(&|f| f["event"] = json!({ "type": "stepStarted" })),
        broken(&|f| f["event"] = json!({ "type": "messageDelta", "turn": -1, "text": "" })),
        broken(&|f| f["event"] = json!({ "type": "turnCompleted", "turn": 1, "message": {} })),
        broken(&|f| {
            f["event"] =
                json!({ "type": "nodeTransition", "node": "a", "attempt": 1, "to": "DONE" })
        }),
    ];
    for frame in wrong {
        assert!(!v.is_valid(&frame), "{frame} should not validate");
    }
}

#[test]
fn the_event_log_validates() {
    let v = validator(&serialized_schema_for::<Event>());
    for (i, kind) in graph_events().into_iter().enumerate() {
        assert_valid(
            &v,
            &Event {
                run: run(),
                seq: i as u64 + 1,
                ts: 5,
                cause: Some(SubmissionId::from_string("sub-1")),
                kind,
            },
        );
    }
    assert!(!v.is_valid(&json!({ "run": "r", "seq": 1, "ts": 1, "type": "stepStarted" })));
}

/// One of each [`Op`] variant (and [`ReviewAction`]), in the form a client sends: fields with a
/// default left out.
fn ops() -> Vec<Value> {
    let full = [
        Op::StartRun {
            request: "add a --json flag".into(),
            repo: Some("/src/app".into()),
            workflow: Some("staged_review".into()),
            include: vec!["research".into()],
            skip: vec!["docs".into()],
            input: InputMode::Approve,
            budgets: Some(Budgets {
                tokens: Some(100_000),
                cost_usd: Some(1.5),
            }),
            plan_only: true,
        },
        Op::ResumeRun {
            run: "0191".into(),
            answers: vec![NodeAnswer {
                node: node("gate"),
                answer: Answer::approve(),
            }],
            messages: vec![NodeMessage {
                node: node("code"),
                text: "hi".into(),
            }],
            input: InputMode::Deny,
        },
        Op::Answer {
            run: "0191".into(),
            node: node("ask"),
            answer: Answer::text("postgres"),
        },
        Op::Approve {
            run: "0191".into(),
            node: None,
            artifact: Some(3),
            comment: Some("ok".into()),
        },
        Op::RequestChanges {
            run: "0191".into(),
            node: Some(node("plan")),
            artifact: None,
            feedback: "smaller steps".into(),
        },
        Op::SendMessage {
            run: "0191".into(),
            node: node("code"),
            text: "use tabs".into(),
        },
        Op::Prune {
            run: "0191".into(),
            node: node("docs"),
            subtree: true,
            reason: None,
        },
        Op::Inject {
            run: "0191".into(),
            nodes: vec![InjectNode {
                id: node("extra"),
                template: "coder".into(),
                input: Value::Null,
                parent: Some(node("code")),
                activate: false,
            }],
            edges: vec![],
        },
        Op::Cancel {
            run: "0191".into(),
            reason: Some("enough".into()),
        },
        Op::StartChannel {
            channel: "general".into(),
            message: Some("how does routing work?".into()),
        },
        Op::SessionMessage {
            session: SessionId::from_string("ses-1"),
            text: "and retries?".into(),
        },
        Op::CancelSession {
            session: SessionId::from_string("ses-1"),
        },
        Op::RecordClientSession {
            session: trellis_protocol::records::ClientSession {
                id: "acp-1".into(),
                client: "acp".into(),
                cwd: "/src/app".into(),
                title: Some("fix the build".into()),
                config: "{}".into(),
                created_ms: 0,
                updated_ms: 0,
            },
        },
        Op::RecordClientTurn {
            turn: trellis_protocol::records::ClientTurn {
                session: "acp-1".into(),
                turn: 0,
                run: RunId::from_string("0191"),
                request: "fix the build".into(),
                workflow: Some("bug_fix".into()),
                plan: "[]".into(),
                created_ms: 0,
            },
        },
    ];
    let reviews = [
        ReviewAction::Show,
        ReviewAction::Select {
            file: "src/lib.rs".into(),
            hunks: Some(vec![0, 2]),
            accept: true,
        },
        ReviewAction::Apply {
            accept: Some(vec![FileHunks {
                file: "src/lib.rs".into(),
                hunks: None,
            }]),
        },
        ReviewAction::Reject { comment: None },
        ReviewAction::Undo,
    ]
    .map(|action| Op::Review {
        run: "0191".into(),
        action,
    });
    let mut ops: Vec<Value> = full
        .iter()
        .chain(&reviews)
        .map(|op| serde_json::to_value(op).unwrap())
        .collect();
    // What a client may send: only the required fields.
    ops.extend([
        json!({ "op": "startRun", "request": "fix the build" }),
        json!({ "op": "resumeRun", "run": "0191" }),
        json!({ "op": "inject", "run": "0191" }),
        json!({ "op": "inject", "run": "0191", "nodes": [{ "id": "x", "template": "coder" }] }),
    ]);
    ops
}

#[test]
fn ops_validate_and_wrong_ones_do_not() {
    let v = validator(&op_schema());
    for op in ops() {
        let errors: Vec<String> = v.iter_errors(&op).map(|e| e.to_string()).collect();
        assert!(errors.is_empty(), "{op} does not validate: {errors:#?}");
        // What validates deserialises.
        serde_json::from_value::<Op>(op).unwrap();
    }
    for wrong in [
        json!({ "op": "startRun" }),
        json!({ "op": "launch", "request": "x" }),
        json!({ "op": "prune", "run": "r", "node": "n", "subtree": "yes" }),
        json!({ "op": "startRun", "request": "x", "input": "ask" }),
        json!({ "op": "review", "run": "r", "action": { "action": "merge" } }),
    ] {
        assert!(!v.is_valid(&wrong), "{wrong} should not validate");
        assert!(serde_json::from_value::<Op>(wrong).is_err());
    }
}

#[test]
fn other_wire_types_validate() {
    let artifact = Artifact {
        id: 3,
        run: run(),
        node: Some(node("plan")),
        kind: "plan".into(),
        version: 2,
        content: "# Plan".into(),
        rendered: None,
        status: ArtifactStatus::ChangesRequested,
        feedback: Some("smaller".into()),
        created_ms: 1,
        updated_ms: 2,
    };
    assert_valid(&validator(&serialized_schema_for::<Artifact>()), &artifact);
    let v = validator(&schema_for::<StreamId>());
    for ok in ["run:0191", "session:0191:code", "workspace"] {
        assert!(v.is_valid(&json!(ok)), "{ok}");
    }
    for bad in ["run:", "session", "workspace:1", "job:1"] {
        assert!(!v.is_valid(&json!(bad)), "{bad}");
        assert!(bad.parse::<StreamId>().is_err());
    }
    // An answer is any JSON value.
    let v = validator(&schema_for::<Answer>());
    assert!(v.is_valid(&json!({ "approved": true })) && v.is_valid(&json!("yes")));
}

#[test]
fn component_schemas_refer_to_the_components() {
    let mut requests = ComponentSchemas::new(Direction::Request);
    assert_eq!(
        requests.schema_for::<Op>(),
        json!({ "$ref": "#/components/schemas/Op" })
    );
    let request_components = requests.into_components();
    assert!(request_components.contains_key("InjectNode"));

    let mut responses = ComponentSchemas::with_suffix(Direction::Response, "Response");
    assert_eq!(
        responses.schema_for::<EventFrame<'static>>(),
        json!({ "$ref": "#/components/schemas/EventFrameResponse" })
    );
    let components = responses.into_components();
    assert!(components.contains_key("EventKindResponse"));

    // Every reference resolves inside the components, and a document built from them
    // validates a frame.
    let mut all = request_components;
    all.extend(components);
    let text = serde_json::to_string(&all).unwrap();
    for target in text.split("\"$ref\":\"#/components/schemas/").skip(1) {
        let name = &target[..target.find('"').unwrap()];
        assert!(all.contains_key(name), "dangling $ref to {name}");
    }
    let doc = json!({
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$ref": "#/components/schemas/EventFrameResponse",
        "components": { "schemas": all },
    });
    let v = validator(&doc);
    for ev in service_events().iter().take(5) {
        assert_valid(&v, &EventFrame::new("/w", ev));
    }
}
