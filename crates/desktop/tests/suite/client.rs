//! The ACP client layer alone (no window): a turn, permissions, review, cancel, and what
//! happens when the agent misbehaves or dies.

use std::time::Duration;

use trellis_desktop::acp::review::{FileHunks, ReviewAction, ReviewReply};
use trellis_desktop::acp::{
    AgentCommand, Command, Event, SessionId, ToolCallStatus, Transport, Update, connect,
};

use super::agent::{self, RUN, SESSION, Script, next};

fn session() -> SessionId {
    SessionId::new(SESSION)
}

/// Events until one `stop` accepts (included), all of them.
fn until(
    rt: &tokio::runtime::Runtime,
    events: &mut futures::channel::mpsc::UnboundedReceiver<Event>,
    stop: impl Fn(&Event) -> bool,
) -> Vec<Event> {
    let mut seen = Vec::new();
    loop {
        let e = next(rt, events);
        let done = stop(&e);
        seen.push(e);
        if done {
            return seen;
        }
    }
}

#[test]
fn a_turn_streams_and_a_permission_is_answered() {
    let rt = agent::runtime();
    let (h, mut ev, log, _agent) = agent::start(&rt, Script::default());
    let Event::Connected(info) = next(&rt, &mut ev) else {
        panic!("not connected first");
    };
    assert_eq!(info.name, "Scripted Trellis");
    assert!(info.extensions.iter().any(|m| m == "_trellis/review"));
    assert!(info.load_session && info.list_sessions);

    h.send(Command::NewSession {
        cwd: "/repo".into(),
    })
    .unwrap();
    let Event::SessionOpened(o) = next(&rt, &mut ev) else {
        panic!("no session");
    };
    assert_eq!(o.id, session());
    assert_eq!(o.options[0].id, "autonomy");
    assert_eq!(o.options[0].current, "ask");
    assert_eq!(o.options[0].choices.len(), 2);

    h.send(Command::Prompt {
        session: session(),
        text: "Where does the stock live?".into(),
        links: Vec::new(),
    })
    .unwrap();
    let seen = until(&rt, &mut ev, |e| matches!(e, Event::Permission(_)));
    let updates: Vec<&Update> = seen
        .iter()
        .filter_map(|e| match e {
            Event::Update { update, .. } => Some(update),
            _ => None,
        })
        .collect();
    assert_eq!(
        updates[0],
        &Update::ThoughtText("Choosing a workflow…".into())
    );
    assert!(
        matches!(updates[1], Update::Plan(p) if p.len() == 2 && p[0].content == "Research the stock")
    );
    assert_eq!(updates[2], &Update::MessageText("Stock lives".into()));
    assert_eq!(updates[3], &Update::MessageText(" in memory.".into()));
    let Update::ToolCall(t) = updates[4] else {
        panic!("no tool call: {updates:?}");
    };
    assert_eq!(t.locations, [("src/lib.rs".into(), Some(2))]);
    assert!(matches!(
        updates[5],
        Update::ToolCallUpdate {
            status: Some(ToolCallStatus::Completed),
            ..
        }
    ));
    assert_eq!(
        updates[6],
        &Update::Usage {
            used: 1234,
            size: 8192
        }
    );
    let Some(Event::Permission(ask)) = seen.last() else {
        unreachable!()
    };
    assert_eq!(ask.change_set_run(), Some(RUN));
    assert_eq!(ask.options[0].kind, "allow_once");
    assert_eq!(ask.diffs[0].new, "new one\n");

    h.send(Command::Answer {
        ask: ask.id,
        option: Some("allow_once".into()),
        feedback: None,
    })
    .unwrap();
    let seen = until(&rt, &mut ev, |e| matches!(e, Event::TurnEnded { .. }));
    assert!(seen.iter().any(|e| matches!(e, Event::Update { update: Update::MessageText(t), .. } if t.contains("Applied"))));
    assert!(matches!(seen.last(), Some(Event::TurnEnded { stop, .. }) if stop == "end_turn"));
    assert_eq!(log.lock().unwrap().prompts, ["Where does the stock live?"]);
    assert_eq!(log.lock().unwrap().answers, ["allow_once"]);
}

#[test]
fn a_refused_prompt_ends_the_turn_and_says_why() {
    let rt = agent::runtime();
    let (h, mut ev, _log, _agent) = agent::start(&rt, Script::default());
    assert!(matches!(next(&rt, &mut ev), Event::Connected(_)));
    h.send(Command::Prompt {
        session: SessionId::new("nope"),
        text: "hello".into(),
        links: Vec::new(),
    })
    .unwrap();
    let Event::TurnEnded { session, stop } = next(&rt, &mut ev) else {
        panic!("the turn did not end");
    };
    assert_eq!(
        (session.to_string().as_str(), stop.as_str()),
        ("nope", "failed")
    );
    let Event::Failed { context, message } = next(&rt, &mut ev) else {
        panic!("no failure");
    };
    assert_eq!(context, "session/prompt");
    assert!(message.contains("no session nope"), "{message}");
}

#[test]
fn review_show_apply_and_undo_go_through_the_extension_method() {
    let rt = agent::runtime();
    let (h, mut ev, log, _agent) = agent::start(&rt, Script::default());
    assert!(matches!(next(&rt, &mut ev), Event::Connected(_)));
    let review = |action| Command::Review {
        session: session(),
        run: Some(RUN.into()),
        action,
    };
    h.send(review(ReviewAction::Show)).unwrap();
    let Event::Review {
        reply: ReviewReply::Shown {
            change_set, state, ..
        },
        ..
    } = next(&rt, &mut ev)
    else {
        panic!("not shown");
    };
    assert_eq!(state, "open");
    assert_eq!(change_set.files.len(), 2);
    assert_eq!(change_set.files[0].hunks.len(), 2);
    assert_eq!(change_set.files[0].hunks[1].lines[2].text, "new two");

    let accept = vec![FileHunks {
        file: "a.md".into(),
        hunks: Some(vec![0]),
    }];
    h.send(review(ReviewAction::Apply {
        accept: Some(accept),
    }))
    .unwrap();
    let Event::Review {
        reply: ReviewReply::Applied { outcome, files },
        ..
    } = next(&rt, &mut ev)
    else {
        panic!("not applied");
    };
    assert_eq!(
        (outcome.as_str(), files),
        ("applied", vec!["a.md".to_owned()])
    );
    h.send(review(ReviewAction::Undo)).unwrap();
    let Event::Review {
        reply: ReviewReply::Undone { files },
        ..
    } = next(&rt, &mut ev)
    else {
        panic!("not undone");
    };
    assert_eq!(files, ["a.md", "b.md"]);
    let sent = &log.lock().unwrap().reviews;
    assert_eq!(sent[0]["action"], "show");
    assert_eq!(sent[0]["sessionId"], SESSION);
    assert_eq!(sent[1]["action"], "apply");
    assert_eq!(
        sent[1]["accept"],
        serde_json::json!([{"file": "a.md", "hunks": [0]}])
    );
    assert_eq!(sent[2]["action"], "undo");
}

/// An agent that streams the start of its answer and then stalls, the prompt sent and that
/// start seen.
fn stalled_turn(rt: &tokio::runtime::Runtime) -> agent::Started {
    let script = Script {
        stall: true,
        ..Script::default()
    };
    let (h, mut ev, log, agent) = agent::start(rt, script);
    assert!(matches!(next(rt, &mut ev), Event::Connected(_)));
    h.send(Command::Prompt {
        session: session(),
        text: "go".into(),
        links: Vec::new(),
    })
    .unwrap();
    until(rt, &mut ev, |e| {
        matches!(
            e,
            Event::Update {
                update: Update::MessageText(_),
                ..
            }
        )
    });
    (h, ev, log, agent)
}

#[test]
fn cancel_reaches_the_agent() {
    let rt = agent::runtime();
    let (h, _ev, log, _agent) = stalled_turn(&rt);
    h.send(Command::Cancel { session: session() }).unwrap();
    for _ in 0..100 {
        if log.lock().unwrap().cancels == 1 {
            return;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    panic!("the agent never got session/cancel");
}

#[test]
fn a_line_that_is_not_json_is_reported_and_the_connection_goes_on() {
    let rt = agent::runtime();
    let script = Script {
        garbage_first: true,
        ..Script::default()
    };
    let (_h, mut ev, _log, _agent) = agent::start(&rt, script);
    let Event::Malformed(m) = next(&rt, &mut ev) else {
        panic!("the garbage was not reported");
    };
    assert!(
        m.contains("not JSON") && m.contains("this is {not json"),
        "{m}"
    );
    assert!(matches!(next(&rt, &mut ev), Event::Connected(_)));
}

#[test]
fn an_agent_that_dies_mid_turn_is_a_disconnect() {
    let rt = agent::runtime();
    let (h, mut ev, _log, agent) = stalled_turn(&rt);
    agent.abort();
    let seen = until(&rt, &mut ev, |e| matches!(e, Event::Disconnected(_)));
    let Some(Event::Disconnected(why)) = seen.last() else {
        unreachable!()
    };
    assert!(why.contains("scripted agent"), "{why}");
    // The handle says so instead of panicking.
    std::thread::sleep(Duration::from_millis(50));
    assert!(h.send(Command::ListSessions).is_err());
}

#[test]
fn a_real_agent_process_that_exits_is_explained_with_its_stderr() {
    let dir = tempfile::tempdir().unwrap();
    let script = dir.path().join("fake-trellis");
    std::fs::write(
        &script,
        "#!/bin/sh\nread -r request\necho 'garbage out'\necho 'boom: no workspace here' >&2\nexit 3\n",
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
    let rt = agent::runtime();
    let cmd = AgentCommand {
        program: script,
        ..AgentCommand::trellis()
    };
    let transport = {
        let _g = rt.enter();
        Transport::spawn(&cmd).unwrap()
    };
    let (_h, mut ev) = connect(rt.handle(), transport);
    let seen = until(&rt, &mut ev, |e| matches!(e, Event::Disconnected(_)));
    assert!(
        seen.iter()
            .any(|e| matches!(e, Event::Malformed(m) if m.contains("garbage out"))),
        "{seen:?}"
    );
    let Some(Event::Disconnected(why)) = seen.last() else {
        unreachable!()
    };
    assert!(why.contains("exit status: 3"), "{why}");
    assert!(why.contains("boom: no workspace here"), "{why}");
}

#[test]
fn a_missing_agent_binary_is_a_clear_error() {
    let rt = agent::runtime();
    let _g = rt.enter();
    let cmd = AgentCommand {
        program: "/nonexistent/trellis".into(),
        ..AgentCommand::trellis()
    };
    let e = Transport::spawn(&cmd).unwrap_err().to_string();
    assert!(
        e.contains("could not start the agent `/nonexistent/trellis`") && e.contains("--agent"),
        "{e}"
    );
}
