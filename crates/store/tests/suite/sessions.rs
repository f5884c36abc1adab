//! Session events are materialised into sessions and turns as they are appended.

use serde_json::json;
use trellis_protocol::{
    NodeId, RunId, SessionEvent, SessionId, SessionOwner, ToolStatus, TurnUsage,
};
use trellis_store::prelude::*;
use trellis_store::{Error, SessionFilter, SessionStatus, TurnRecord, TurnStatus, TurnToolRecord};

use super::fixtures::{T0, block_on, session_batch};

/// What the session tests need of a store: appending session events and reading the
/// sessions back.
pub trait Sessions: StreamStore + SessionStore {}
impl<S: StreamStore + SessionStore + ?Sized> Sessions for S {}

/// Appends `events` to `session` as one batch after its last seq.
pub fn push(store: &(impl Sessions + ?Sized), session: &SessionId, events: Vec<SessionEvent>) {
    let next = store
        .stream_last_seq(&trellis_protocol::StreamId::Session(session.clone()))
        .unwrap()
        + 1;
    block_on(store.append_stream(session_batch(session, next, events))).unwrap();
}

/// The timestamp [`session_batch`] gives the event with this seq.
fn ts(seq: u64) -> i64 {
    T0 + seq as i64 * 37
}

fn agent(run: &str, node: &str) -> SessionOwner {
    SessionOwner::Agent {
        run: RunId::from_string(run),
        node: NodeId::new(node),
        role: "coder".into(),
    }
}

fn delta(turn: u32, text: &str) -> SessionEvent {
    SessionEvent::MessageDelta {
        turn,
        text: text.into(),
    }
}

fn thought(turn: u32, text: &str) -> SessionEvent {
    SessionEvent::ThoughtDelta {
        turn,
        text: text.into(),
    }
}

fn tool_started(turn: u32, call: &str) -> SessionEvent {
    SessionEvent::ToolStarted {
        turn,
        call_id: call.into(),
        name: "read_file".into(),
        input: json!({"path": format!("src/{call}.rs")}),
    }
}

fn an_agent_session_with_two_turns_reads_back_as_it_streamed(store: &(impl Sessions + ?Sized)) {
    let id = SessionId::from_string("run-1:code");
    let message1 = json!({"role": "assistant", "content": "Let me look.", "tool_calls": []});
    // seq 1..=6
    push(
        store,
        &id,
        vec![
            SessionEvent::SessionStarted {
                owner: agent("run-1", "code"),
            },
            SessionEvent::PromptSet {
                attempt: 1,
                messages: vec![json!({"role": "system", "content": "You code."})],
            },
            SessionEvent::TurnStarted {
                turn: 1,
                attempt: 1,
                model: None,
            },
            thought(1, "The user wants"),
            thought(1, " a fix."),
            delta(1, "Let me"),
        ],
    );
    // seq 7..=12: deltas across batches append to the same rows.
    push(
        store,
        &id,
        vec![
            delta(1, " look."),
            SessionEvent::TurnCompleted {
                turn: 1,
                message: message1.clone(),
                usage: TurnUsage {
                    prompt_tokens: 120,
                    completion_tokens: 9,
                },
            },
            tool_started(1, "a"),
            tool_started(1, "b"),
            SessionEvent::ToolCompleted {
                turn: 1,
                call_id: "a".into(),
                name: "read_file".into(),
                output: "fn main() {}".into(),
                status: ToolStatus::Ok,
                duration_ms: 12,
            },
            SessionEvent::MessagesReceived {
                turn: 2,
                texts: vec!["also add a test".into(), "thanks".into()],
            },
        ],
    );
    // seq 13..=16: turn 2 fails; tool b never completes (its process died).
    push(
        store,
        &id,
        vec![
            SessionEvent::TurnStarted {
                turn: 2,
                attempt: 1,
                model: None,
            },
            delta(2, "Sure"),
            SessionEvent::TurnFailed {
                turn: 2,
                error: "HTTP 500".into(),
            },
            SessionEvent::Note {
                text: "retrying".into(),
            },
        ],
    );

    let turns = store.turns(&id).unwrap();
    let expected = vec![
        TurnRecord {
            turn: 1,
            attempt: 1,
            status: TurnStatus::Completed,
            started_ms: Some(ts(3)),
            finished_ms: Some(ts(8)),
            usage: TurnUsage {
                prompt_tokens: 120,
                completion_tokens: 9,
            },
            text: "Let me look.".into(),
            user_texts: vec![],
            thoughts: "The user wants a fix.".into(),
            tools: vec![
                TurnToolRecord {
                    call_id: "a".into(),
                    name: "read_file".into(),
                    input: json!({"path": "src/a.rs"}),
                    output: Some("fn main() {}".into()),
                    status: Some(ToolStatus::Ok),
                    started_ms: ts(9),
                    duration_ms: Some(12),
                },
                TurnToolRecord {
                    call_id: "b".into(),
                    name: "read_file".into(),
                    input: json!({"path": "src/b.rs"}),
                    output: None,
                    status: None,
                    started_ms: ts(10),
                    duration_ms: None,
                },
            ],
            message: Some(message1),
            error: None,
        },
        TurnRecord {
            turn: 2,
            attempt: 1,
            status: TurnStatus::Failed,
            started_ms: Some(ts(13)),
            finished_ms: Some(ts(15)),
            usage: TurnUsage::default(),
            text: "Sure".into(),
            user_texts: vec!["also add a test".into(), "thanks".into()],
            thoughts: String::new(),
            tools: vec![],
            message: None,
            error: Some("HTTP 500".into()),
        },
    ];
    assert_eq!(turns, expected);

    let session = store.session(&id).unwrap();
    assert_eq!(session.owner, agent("run-1", "code"));
    assert_eq!(session.status, SessionStatus::Running);
    assert_eq!((session.created_ms, session.updated_ms), (ts(1), ts(16)));
    assert_eq!(session.last_seq, 16);

    push(
        store,
        &id,
        vec![SessionEvent::SessionError {
            error: "budget exhausted".into(),
        }],
    );
    let session = store.session(&id).unwrap();
    assert_eq!(session.status, SessionStatus::Error);
    assert_eq!(session.error.as_deref(), Some("budget exhausted"));
    assert_eq!(session.last_seq, 17);

    // The JSON the HTTP API returns.
    let json = serde_json::to_value(&turns[0]).unwrap();
    assert_eq!(json["startedMs"], ts(3));
    assert_eq!(json["usage"]["promptTokens"], 120);
    assert_eq!(json["tools"][0]["status"], "ok");
    assert_eq!(json["tools"][1]["status"], "running");
    assert_eq!(json["tools"][0]["callId"], "a");
    let back: TurnRecord = serde_json::from_value(json).unwrap();
    assert_eq!(back, turns[0]);
    let json = serde_json::to_value(&session).unwrap();
    assert_eq!(json["owner"]["kind"], "agent");
    assert_eq!(json["lastSeq"], 17);
}
both!(an_agent_session_with_two_turns_reads_back_as_it_streamed);

fn a_channel_session_attaches_user_messages_to_the_next_turn(store: &(impl Sessions + ?Sized)) {
    let id = SessionId::from_string("ses-chat");
    push(
        store,
        &id,
        vec![
            SessionEvent::SessionStarted {
                owner: SessionOwner::Channel {
                    channel: "general".into(),
                },
            },
            SessionEvent::UserMessage {
                text: "what does the store do?".into(),
            },
        ],
    );
    let turns = store.turns(&id).unwrap();
    assert_eq!(turns.len(), 1);
    assert_eq!(turns[0].status, TurnStatus::Pending);
    assert_eq!(turns[0].started_ms, None);
    assert_eq!(turns[0].user_texts, ["what does the store do?"]);

    push(
        store,
        &id,
        vec![
            SessionEvent::TurnStarted {
                turn: 1,
                attempt: 0,
                model: None,
            },
            delta(1, "It persists runs."),
            SessionEvent::TurnCompleted {
                turn: 1,
                message: json!({"role": "assistant", "content": "It persists runs."}),
                usage: TurnUsage::default(),
            },
            SessionEvent::UserMessage {
                text: "and sessions?".into(),
            },
            SessionEvent::UserMessage {
                text: "briefly".into(),
            },
            SessionEvent::SessionCompleted {
                output: json!("It persists runs."),
            },
        ],
    );
    let turns = store.turns(&id).unwrap();
    assert_eq!(turns.len(), 2);
    assert_eq!(turns[0].status, TurnStatus::Completed);
    assert_eq!(turns[0].user_texts, ["what does the store do?"]);
    assert_eq!(turns[0].text, "It persists runs.");
    assert_eq!(turns[1].status, TurnStatus::Pending);
    assert_eq!(turns[1].user_texts, ["and sessions?", "briefly"]);
    let session = store.session(&id).unwrap();
    assert_eq!(session.status, SessionStatus::Completed);
    assert_eq!(session.error, None);
}
both!(a_channel_session_attaches_user_messages_to_the_next_turn);

fn a_restarted_turn_and_a_restarted_session_start_clean(store: &(impl Sessions + ?Sized)) {
    let id = SessionId::from_string("run-1:plan");
    push(
        store,
        &id,
        vec![
            SessionEvent::SessionStarted {
                owner: agent("run-1", "plan"),
            },
            SessionEvent::MessagesReceived {
                turn: 1,
                texts: vec!["focus on tests".into()],
            },
            SessionEvent::TurnStarted {
                turn: 1,
                attempt: 1,
                model: None,
            },
            delta(1, "half an ans"),
            thought(1, "hmm"),
            tool_started(1, "x"),
            SessionEvent::SessionError {
                error: "process killed".into(),
            },
        ],
    );
    // The run is resumed: the session starts again and the model call is made again.
    push(
        store,
        &id,
        vec![
            SessionEvent::SessionStarted {
                owner: agent("run-1", "plan"),
            },
            SessionEvent::TurnStarted {
                turn: 1,
                attempt: 2,
                model: None,
            },
            delta(1, "A whole answer."),
        ],
    );
    let turns = store.turns(&id).unwrap();
    assert_eq!(turns.len(), 1);
    let t = &turns[0];
    assert_eq!((t.attempt, t.status), (2, TurnStatus::Running));
    assert_eq!(t.text, "A whole answer.");
    assert_eq!(t.thoughts, "");
    assert!(t.tools.is_empty());
    assert_eq!(t.user_texts, ["focus on tests"], "user messages are kept");
    let session = store.session(&id).unwrap();
    assert_eq!(
        (session.status, session.error),
        (SessionStatus::Running, None)
    );
    assert_eq!(session.created_ms, ts(1), "created once");
    assert_eq!(session.last_seq, 10);
}
both!(a_restarted_turn_and_a_restarted_session_start_clean);

fn completions_without_a_start_are_recorded(store: &(impl Sessions + ?Sized)) {
    let id = SessionId::from_string("ses-x");
    push(
        store,
        &id,
        vec![
            SessionEvent::SessionStarted {
                owner: agent("r", "n"),
            },
            SessionEvent::TurnStarted {
                turn: 1,
                attempt: 3,
                model: None,
            },
            SessionEvent::ToolCompleted {
                turn: 2,
                call_id: "c".into(),
                name: "shell".into(),
                output: "denied by policy".into(),
                status: ToolStatus::Denied,
                duration_ms: 0,
            },
            SessionEvent::TurnCompleted {
                turn: 2,
                message: json!({"role": "assistant"}),
                usage: TurnUsage {
                    prompt_tokens: 5,
                    completion_tokens: 1,
                },
            },
        ],
    );
    let turns = store.turns(&id).unwrap();
    assert_eq!(turns.len(), 2);
    let t = &turns[1];
    assert_eq!((t.turn, t.attempt, t.status), (2, 3, TurnStatus::Completed));
    assert_eq!(t.tools.len(), 1);
    assert_eq!(t.tools[0].status, Some(ToolStatus::Denied));
    assert_eq!(t.tools[0].input, serde_json::Value::Null);
    assert_eq!(t.usage.prompt_tokens, 5);
}
both!(completions_without_a_start_are_recorded);

fn sessions_filter_by_run_and_channel_newest_first(store: &(impl Sessions + ?Sized)) {
    let start = |id: &str, owner: SessionOwner| {
        let id = SessionId::from_string(id);
        push(store, &id, vec![SessionEvent::SessionStarted { owner }]);
    };
    // Each session's first event has seq 1, so equal timestamps; ids break ties.
    start("r1:a", agent("r1", "a"));
    start("r1:b", agent("r1", "b"));
    start("r2:a", agent("r2", "a"));
    start(
        "ses-1",
        SessionOwner::Channel {
            channel: "general".into(),
        },
    );
    start(
        "ses-2",
        SessionOwner::Channel {
            channel: "ops".into(),
        },
    );
    let ids = |filter: SessionFilter| -> Vec<String> {
        store
            .sessions(&filter)
            .unwrap()
            .into_iter()
            .map(|s| s.id.to_string())
            .collect()
    };
    assert_eq!(
        ids(SessionFilter::default()),
        ["ses-2", "ses-1", "r2:a", "r1:b", "r1:a"]
    );
    let run = |r: &str| SessionFilter {
        run: Some(RunId::from_string(r)),
        ..Default::default()
    };
    assert_eq!(ids(run("r1")), ["r1:b", "r1:a"]);
    assert_eq!(ids(run("r2")), ["r2:a"]);
    assert!(ids(run("r3")).is_empty());
    let channel = SessionFilter {
        channel: Some("general".into()),
        ..Default::default()
    };
    assert_eq!(ids(channel), ["ses-1"]);
    let limited = SessionFilter {
        limit: Some(2),
        ..Default::default()
    };
    assert_eq!(ids(limited), ["ses-2", "ses-1"]);
    let both = SessionFilter {
        run: Some(RunId::from_string("r1")),
        channel: Some("general".into()),
        limit: None,
    };
    assert!(ids(both).is_empty());

    // Newest first by creation time.
    let late = SessionId::from_string("a-late");
    block_on(store.append_stream(vec![trellis_protocol::ServiceEvent {
        ts: T0 + 1_000_000,
        ..session_batch(
            &late,
            1,
            vec![SessionEvent::SessionStarted {
                owner: agent("r1", "c"),
            }],
        )
        .remove(0)
    }]))
    .unwrap();
    assert_eq!(ids(run("r1")), ["a-late", "r1:b", "r1:a"]);
}
both!(sessions_filter_by_run_and_channel_newest_first);

fn unknown_sessions_are_not_found_by_name(store: &(impl Sessions + ?Sized)) {
    let id = SessionId::from_string("ses-missing");
    let err = store.session(&id).unwrap_err();
    assert!(
        matches!(
            &err,
            Error::NotFound {
                what: "session",
                ..
            }
        ),
        "{err}"
    );
    assert!(err.to_string().contains("ses-missing"), "{err}");
    assert!(store.turns(&id).unwrap().is_empty());
}
both!(unknown_sessions_are_not_found_by_name);

/// Appends a session whose texts hold NUL characters and checks what is read back: the
/// stream as appended, the session tables with each text as `kept` keeps it.
pub fn nul_characters(store: &(impl Sessions + ?Sized), kept: fn(&str) -> String) {
    let id = SessionId::from_string("ses-nul");
    let events = vec![
        SessionEvent::SessionStarted {
            owner: agent("r\0un", "node"),
        },
        SessionEvent::UserMessage {
            text: "a\0b".into(),
        },
        SessionEvent::TurnStarted {
            turn: 1,
            attempt: 1,
            model: None,
        },
        delta(1, "x\0"),
        delta(1, "\0y"),
        thought(1, "\0t"),
        SessionEvent::ToolStarted {
            turn: 1,
            call_id: "c\0".into(),
            name: "sh\0".into(),
            input: json!({"cmd": "cat \0"}),
        },
        SessionEvent::ToolCompleted {
            turn: 1,
            call_id: "c\0".into(),
            name: "sh\0".into(),
            output: "bin\0ary".into(),
            status: ToolStatus::Ok,
            duration_ms: 1,
        },
        SessionEvent::TurnFailed {
            turn: 1,
            error: "e\0".into(),
        },
        SessionEvent::SessionError {
            error: "s\0".into(),
        },
    ];
    let appended = session_batch(&id, 1, events);
    block_on(store.append_stream(appended.clone())).unwrap();
    let stream = trellis_protocol::StreamId::Session(id.clone());
    assert_eq!(store.stream_events(&stream, 0, None).unwrap(), appended);

    let session = store.session(&id).unwrap();
    assert_eq!(session.owner, agent(&kept("r\0un"), "node"));
    assert_eq!(session.error, Some(kept("s\0")));
    let turns = store.turns(&id).unwrap();
    assert_eq!(turns.len(), 1);
    let t = &turns[0];
    assert_eq!(t.user_texts, [kept("a\0b")]);
    assert_eq!(t.text, kept("x\0\0y"));
    assert_eq!(t.thoughts, kept("\0t"));
    assert_eq!(t.error, Some(kept("e\0")));
    assert_eq!(t.tools.len(), 1);
    let tool = &t.tools[0];
    assert_eq!((&tool.call_id, &tool.name), (&kept("c\0"), &kept("sh\0")));
    assert_eq!(tool.input, json!({"cmd": "cat \0"}), "JSON escapes it");
    assert_eq!(tool.output, Some(kept("bin\0ary")));
}

#[test]
fn sqlite_keeps_nul_characters_everywhere() {
    let (_dir, store) = super::backends::sqlite();
    nul_characters(&store, str::to_owned);
}
