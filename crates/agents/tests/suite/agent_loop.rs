//! The agent loop's session events, live messages, and resuming from recorded events.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use serde_json::{Value, json};
use tokio::sync::mpsc::{UnboundedSender, unbounded_channel};
use tokio_util::sync::CancellationToken;
use trellis_agents::{
    AgentOutcome, AgentReport, AgentRun, GraphInteraction, INTERRUPTED_TOOL, Resume, RoleSpec,
    SessionSink,
};
use trellis_llm::{
    ChatRequest, ChatStream, FinishReason, Message, ModelProvider, ProviderInfo, Role, StreamEvent,
    Usage,
};
use trellis_protocol::{Answer, SessionEvent, ToolStatus};
use trellis_test_support::TempWorkspace;
use trellis_test_support::scripted::{ScriptedProvider, Turn};
use trellis_tools::tool::BoxFuture;
use trellis_tools::{
    Action, Interaction, NonInteractive, Registry, Tool, ToolContext, ToolEnv, ToolOutput,
    ToolSpec, ToolsConfig, Workspace,
};

const ROLE: &str = "counter";

/// What a test tool does besides answering.
#[derive(Clone, Copy)]
enum Kind {
    /// Answers `counted N`.
    Count,
    /// Sends a message to the agent's inbox, then answers.
    Send,
    /// Asks the user's approval first (the policy's `ask`).
    Guarded,
}

struct TestTool {
    spec: ToolSpec,
    kind: Kind,
    runs: Arc<AtomicUsize>,
    inbox: Option<UnboundedSender<trellis_protocol::Message>>,
}

impl Tool for TestTool {
    fn spec(&self) -> &ToolSpec {
        &self.spec
    }

    fn call<'a>(
        &'a self,
        ctx: &'a ToolContext,
        args: Value,
    ) -> BoxFuture<'a, trellis_tools::Result<ToolOutput>> {
        Box::pin(async move {
            if let Kind::Guarded = self.kind {
                ctx.gate(Action::Ask, "it touches the files".into(), None)
                    .await?;
            }
            self.runs.fetch_add(1, Ordering::SeqCst);
            if let (Kind::Send, Some(tx)) = (self.kind, &self.inbox) {
                tx.send(trellis_protocol::Message::user("use the blue one"))
                    .unwrap();
            }
            Ok(ToolOutput::text(format!("counted {}", args["n"])))
        })
    }
}

/// A workspace, the tools and what they did.
struct Fixture {
    _ws: TempWorkspace,
    registry: Arc<Registry>,
    runs: Arc<AtomicUsize>,
    workspace: Workspace,
}

fn fixture(inbox: Option<UnboundedSender<trellis_protocol::Message>>) -> Fixture {
    let ws = TempWorkspace::new("agent-loop").unwrap();
    let runs = Arc::new(AtomicUsize::new(0));
    let mut registry = Registry::new();
    for (name, kind) in [
        ("count", Kind::Count),
        ("send", Kind::Send),
        ("guarded", Kind::Guarded),
    ] {
        registry.register(Arc::new(TestTool {
            spec: ToolSpec {
                name: name.into(),
                description: format!("The {name} tool."),
                input_schema: json!({ "type": "object" }),
                output_schema: None,
            },
            kind,
            runs: runs.clone(),
            inbox: inbox.clone(),
        }));
    }
    registry.allow(ROLE, ["count", "send", "guarded"]);
    let workspace = Workspace::new(ws.path(), &Default::default()).unwrap();
    Fixture {
        _ws: ws,
        registry: Arc::new(registry),
        runs,
        workspace,
    }
}

fn role() -> RoleSpec {
    RoleSpec {
        name: ROLE.into(),
        role: "You count.".into(),
        objective: "Count to three.".into(),
        max_turns: 8,
        ..Default::default()
    }
}

/// Collects the events of a sink.
#[derive(Clone, Default)]
struct Recorder(Arc<Mutex<Vec<SessionEvent>>>);

impl Recorder {
    fn sink(&self) -> SessionSink {
        let events = self.0.clone();
        Arc::new(move |e| events.lock().unwrap().push(e))
    }

    fn events(&self) -> Vec<SessionEvent> {
        self.0.lock().unwrap().clone()
    }
}

struct Setup<'a> {
    fx: &'a Fixture,
    provider: Arc<dyn ModelProvider>,
    recorder: &'a Recorder,
    inbox: Option<tokio::sync::mpsc::UnboundedReceiver<trellis_protocol::Message>>,
    gate: Option<Arc<GraphInteraction>>,
    first_turn: u32,
}

fn agent(s: Setup<'_>) -> AgentRun {
    let interaction: Arc<dyn Interaction> = match &s.gate {
        Some(g) => g.clone(),
        None => Arc::new(NonInteractive { approve: true }),
    };
    AgentRun {
        gate: s.gate,
        max_turns: 8,
        events: Some(s.recorder.sink()),
        inbox: s
            .inbox
            .map(|r| Box::new(r) as Box<dyn trellis_agents::Inbox>),
        first_turn: s.first_turn,
        ..AgentRun::new(
            "count_stage",
            role(),
            s.provider,
            s.fx.registry.clone(),
            ToolEnv::new(
                s.fx.workspace.clone(),
                Arc::new(ToolsConfig::default()),
                interaction,
            ),
            vec![
                Message::system("## ROLE\nYou count."),
                Message::user("## TASK\nCount to three."),
            ],
        )
    }
}

/// A model turn calling `tool` with id `id` and `{"n": n}` (fixed ids, so a resumed run's
/// requests can be compared with an uninterrupted one's).
fn call(id: &str, tool: &str, n: u32) -> Turn {
    Turn::Events(vec![
        StreamEvent::ToolCallDelta {
            index: 0,
            id: Some(id.into()),
            name: Some(tool.into()),
            arguments: json!({ "n": n }).to_string(),
        },
        StreamEvent::Usage {
            usage: Usage {
                prompt_tokens: 100 * u64::from(n),
                completion_tokens: 10,
                cached_prompt_tokens: 0,
            },
        },
        StreamEvent::Finish {
            reason: FinishReason::ToolCalls,
        },
    ])
}

fn report_json() -> Value {
    json!({ "failure": false, "output": "counted to three", "files_changed": [], "findings": [] })
}

/// Four turns: a thinking turn with text calling `count` 1, `count` 2, `count` 3, the report.
fn script() -> Vec<Turn> {
    vec![
        Turn::Events(vec![
            StreamEvent::ThinkingDelta {
                text: "Three calls. ".into(),
            },
            StreamEvent::TextDelta {
                text: "Counting ".into(),
            },
            StreamEvent::TextDelta {
                text: "now.".into(),
            },
            StreamEvent::ToolCallDelta {
                index: 0,
                id: Some("t1".into()),
                name: Some("count".into()),
                arguments: json!({ "n": 1 }).to_string(),
            },
            StreamEvent::Usage {
                usage: Usage {
                    prompt_tokens: 50,
                    completion_tokens: 5,
                    cached_prompt_tokens: 0,
                },
            },
            StreamEvent::Finish {
                reason: FinishReason::ToolCalls,
            },
        ]),
        call("t2", "count", 2),
        call("t3", "count", 3),
        Turn::Json(report_json()),
    ]
}

fn done(outcome: AgentOutcome) -> AgentReport {
    match outcome {
        AgentOutcome::Done(r) => r,
        AgentOutcome::Interrupted { interrupt, .. } => panic!("interrupted: {interrupt:?}"),
    }
}

/// An agent on `scripted` with no inbox and no gate, from turn 1.
fn fresh(fx: &Fixture, scripted: &ScriptedProvider, recorder: &Recorder) -> AgentRun {
    agent(Setup {
        fx,
        provider: Arc::new(scripted.clone()),
        recorder,
        inbox: None,
        gate: None,
        first_turn: 1,
    })
}

/// The uninterrupted run: its events, requests and report.
async fn uninterrupted() -> (Vec<SessionEvent>, Vec<ChatRequest>, AgentReport) {
    let fx = fixture(None);
    let scripted = ScriptedProvider::new(script());
    let recorder = Recorder::default();
    let out = fresh(&fx, &scripted, &recorder).run(Resume::Fresh);
    // Node handlers run agents on the multi-threaded runtime.
    fn assert_send<T: Send>(t: T) -> T {
        t
    }
    let out = assert_send(out).await.unwrap();
    assert_eq!(fx.runs.load(Ordering::SeqCst), 3);
    (recorder.events(), scripted.requests(), done(out))
}

/// Events without deltas, with durations zeroed (for comparing records).
fn stable(events: &[SessionEvent]) -> Vec<SessionEvent> {
    events
        .iter()
        .filter(|e| !e.is_delta())
        .cloned()
        .map(|e| match e {
            SessionEvent::ToolCompleted {
                turn,
                call_id,
                name,
                output,
                status,
                ..
            } => SessionEvent::ToolCompleted {
                turn,
                call_id,
                name,
                output,
                status,
                duration_ms: 0,
            },
            other => other,
        })
        .collect()
}

/// The position of the first event matching `f`.
fn at(events: &[SessionEvent], f: impl Fn(&SessionEvent) -> bool) -> usize {
    events.iter().position(f).unwrap()
}

#[tokio::test]
async fn a_run_speaks_session_events() {
    let (events, requests, report) = uninterrupted().await;
    assert_eq!(requests.len(), 4);
    assert_eq!(report.report.output, "counted to three");
    assert_eq!((report.turns, report.tool_calls), (4, 3));
    let names: Vec<&str> = stable(&events).iter().map(SessionEvent::name).collect();
    assert_eq!(
        names,
        [
            "promptSet",
            "turnStarted",
            "turnCompleted",
            "toolStarted",
            "toolCompleted",
            "turnStarted",
            "turnCompleted",
            "toolStarted",
            "toolCompleted",
            "turnStarted",
            "turnCompleted",
            "toolStarted",
            "toolCompleted",
            "turnStarted",
            "turnCompleted",
        ]
    );
    // The prompt is the first request's messages.
    let SessionEvent::PromptSet { attempt, messages } = &events[0] else {
        panic!("{:?}", events[0]);
    };
    assert_eq!(*attempt, 1);
    let prompt: Vec<Message> = messages
        .iter()
        .map(|m| serde_json::from_value(m.clone()).unwrap())
        .collect();
    assert_eq!(prompt, requests[0].messages);
    // Deltas of turn 1: thinking and text.
    assert!(events.contains(&SessionEvent::ThoughtDelta {
        turn: 1,
        text: "Three calls. ".into()
    }));
    assert!(events.contains(&SessionEvent::MessageDelta {
        turn: 1,
        text: "now.".into()
    }));
    // The assistant message as the second request holds it (thinking and tool call included).
    let completed = events
        .iter()
        .find_map(|e| match e {
            SessionEvent::TurnCompleted {
                turn: 1,
                message,
                usage,
            } => Some((message.clone(), *usage)),
            _ => None,
        })
        .unwrap();
    let assistant: Message = serde_json::from_value(completed.0).unwrap();
    assert_eq!(assistant, requests[1].messages[2]);
    assert_eq!(
        assistant.thinking.map(|t| t.text),
        Some("Three calls. ".into())
    );
    assert_eq!(assistant.content, "Counting now.");
    assert_eq!(completed.1.prompt_tokens, 50);
    // Tool calls: the input and the output that went back to the model.
    assert!(events.contains(&SessionEvent::ToolStarted {
        turn: 2,
        call_id: "t2".into(),
        name: "count".into(),
        input: json!({ "n": 2 }),
    }));
    let output = events.iter().find_map(|e| match e {
        SessionEvent::ToolCompleted {
            turn: 3,
            call_id,
            output,
            status: ToolStatus::Ok,
            ..
        } if call_id == "t3" => Some(output.clone()),
        _ => None,
    });
    assert_eq!(output.as_deref(), Some("counted 3"));
    assert_eq!(
        requests[3].messages.last().map(|m| m.content.as_str()),
        Some("counted 3")
    );
}

/// Resumes the record cut after `cut` events; returns the resumed events, requests, tool
/// runs and report.
async fn resume_after(
    events: &[SessionEvent],
    cut: usize,
    remaining: Vec<Turn>,
) -> (Vec<SessionEvent>, Vec<ChatRequest>, usize, AgentReport) {
    let fx = fixture(None);
    let scripted = ScriptedProvider::new(remaining);
    let recorder = Recorder::default();
    let out = fresh(&fx, &scripted, &recorder)
        .run(Resume::Recorded(events[..cut].to_vec()))
        .await
        .unwrap();
    assert_eq!(scripted.remaining(), 0, "unused model turns");
    (
        recorder.events(),
        scripted.requests(),
        fx.runs.load(Ordering::SeqCst),
        done(out),
    )
}

#[tokio::test]
async fn a_recorded_run_continues_without_repeating_completed_calls() {
    let (events, requests, report) = uninterrupted().await;
    let script = script();
    // Cut after turn 2's tool call completed: turns 3 and 4 remain, one tool run.
    let cut = at(
        &events,
        |e| matches!(e, SessionEvent::ToolCompleted { call_id, .. } if call_id == "t2"),
    ) + 1;
    let (resumed, asked, runs, rep) = resume_after(&events, cut, script[2..].to_vec()).await;
    assert_eq!(asked, requests[2..]);
    assert_eq!(runs, 1);
    assert_eq!(rep.report, report.report);
    assert_eq!((rep.turns, rep.tool_calls, rep.usage), (4, 3, report.usage));
    assert_eq!(
        resumed.first(),
        Some(&SessionEvent::TurnStarted {
            turn: 3,
            attempt: 1,
            model: Some("scripted".into()),
        })
    );
    // The record of the two processes is the record of the uninterrupted run.
    let mut joined = events[..cut].to_vec();
    joined.extend(resumed);
    assert_eq!(stable(&joined), stable(&events));

    // Cut inside turn 3 (started, never completed): it is asked again.
    let cut = at(&events, |e| {
        matches!(e, SessionEvent::TurnStarted { turn: 3, .. })
    }) + 1;
    let (_, asked, runs, _) = resume_after(&events, cut, script[2..].to_vec()).await;
    assert_eq!((asked.as_slice(), runs), (&requests[2..], 1));

    // Cut after turn 2 completed, before its tool call started: the call runs now.
    let cut = at(&events, |e| {
        matches!(e, SessionEvent::TurnCompleted { turn: 2, .. })
    }) + 1;
    let (resumed, asked, runs, _) = resume_after(&events, cut, script[2..].to_vec()).await;
    assert_eq!((asked.as_slice(), runs), (&requests[2..], 2));
    let mut joined = events[..cut].to_vec();
    joined.extend(resumed);
    assert_eq!(stable(&joined), stable(&events));

    // Cut after the final answer: no model call, no tool call, the same report.
    let (resumed, asked, runs, rep) = resume_after(&events, events.len(), vec![]).await;
    assert_eq!((asked.len(), runs), (0, 0));
    assert_eq!(
        (rep.report, rep.turns, rep.tool_calls),
        (report.report, 4, 3)
    );
    assert!(resumed.is_empty(), "{resumed:?}");
}

#[tokio::test]
async fn a_tool_call_cut_mid_flight_is_reported_interrupted() {
    let (events, requests, _) = uninterrupted().await;
    let cut = at(
        &events,
        |e| matches!(e, SessionEvent::ToolStarted { call_id, .. } if call_id == "t2"),
    ) + 1;
    let (resumed, asked, runs, rep) = resume_after(&events, cut, script()[2..].to_vec()).await;
    // Only turn 3's call runs; turn 2's is not repeated.
    assert_eq!(runs, 1);
    assert_eq!(rep.tool_calls, 3);
    // Its record is closed first.
    assert_eq!(
        stable(&resumed[..1]),
        [SessionEvent::ToolCompleted {
            turn: 2,
            call_id: "t2".into(),
            name: "count".into(),
            output: INTERRUPTED_TOOL.into(),
            status: ToolStatus::Interrupted,
            duration_ms: 0,
        }]
    );
    // The requests are the uninterrupted ones, but for the interrupted call's result.
    let note = |mut r: ChatRequest| {
        for m in &mut r.messages {
            if m.role == Role::Tool && m.tool_call_id.as_deref() == Some("t2") {
                assert_eq!(m.content, "counted 2");
                m.content = INTERRUPTED_TOOL.into();
            }
        }
        r
    };
    let expected: Vec<ChatRequest> = requests[2..].iter().cloned().map(note).collect();
    assert_eq!(asked, expected);
}

/// A provider that sends a message to the agent's inbox when it receives request `when`
/// (as if the user wrote while the model was answering).
struct Chatty {
    inner: ScriptedProvider,
    when: usize,
    tx: UnboundedSender<trellis_protocol::Message>,
}

impl ModelProvider for Chatty {
    fn info(&self) -> &ProviderInfo {
        self.inner.info()
    }

    fn stream(&self, request: ChatRequest, cancel: CancellationToken) -> ChatStream {
        if self.inner.requests().len() + 1 == self.when {
            self.tx
                .send(trellis_protocol::Message {
                    text: "also count to four".into(),
                    from: None,
                })
                .unwrap();
        }
        self.inner.stream(request, cancel)
    }
}

fn mentions_messages(r: &ChatRequest) -> bool {
    r.messages
        .iter()
        .any(|m| m.content.contains("while you were working"))
}

#[tokio::test]
async fn messages_sent_while_running_reach_the_next_model_call() {
    let (tx, rx) = unbounded_channel();
    let fx = fixture(Some(tx.clone()));
    let scripted = ScriptedProvider::new([call("s1", "send", 1), Turn::Json(report_json())]);
    let recorder = Recorder::default();
    let out = agent(Setup {
        fx: &fx,
        provider: Arc::new(scripted.clone()),
        recorder: &recorder,
        inbox: Some(rx),
        gate: None,
        first_turn: 7,
    })
    .run(Resume::Fresh)
    .await
    .unwrap();
    done(out);
    let requests = scripted.requests();
    assert_eq!(requests.len(), 2);
    // Sent from inside turn 1's tool call: not in turn 1's request, in turn 2's.
    assert!(!mentions_messages(&requests[0]));
    let last = requests[1].messages.last().unwrap();
    assert_eq!(last.role, Role::User);
    assert_eq!(
        last.content,
        "Message from the user while you were working:\nuser: use the blue one"
    );
    // Turns continue the session's numbering; the messages are recorded before the turn
    // whose request first holds them.
    let events = stable(&recorder.events());
    let received = at(&events, |e| {
        matches!(e, SessionEvent::MessagesReceived { .. })
    });
    assert_eq!(
        events[received],
        SessionEvent::MessagesReceived {
            turn: 8,
            texts: vec!["user: use the blue one".into()]
        }
    );
    assert_eq!(
        events[received + 1],
        SessionEvent::TurnStarted {
            turn: 8,
            attempt: 1,
            model: Some("scripted".into()),
        }
    );
    assert!(matches!(
        events[1],
        SessionEvent::TurnStarted { turn: 7, .. }
    ));

    // A resumed run rebuilds the message as it was.
    let cut = received + 1;
    let (_, asked, runs, _) = resume_after(&events, cut, vec![Turn::Json(report_json())]).await;
    assert_eq!((asked.as_slice(), runs), (&requests[1..], 0));
}

#[tokio::test]
async fn messages_sent_during_the_final_answer_send_the_agent_back_to_work() {
    let (tx, rx) = unbounded_channel();
    let fx = fixture(None);
    let scripted = ScriptedProvider::new([
        Turn::Json(report_json()),
        call("c1", "count", 4),
        Turn::Json(json!({ "failure": false, "output": "counted to four" })),
    ]);
    let provider = Chatty {
        inner: scripted.clone(),
        when: 1,
        tx,
    };
    let recorder = Recorder::default();
    let out = agent(Setup {
        fx: &fx,
        provider: Arc::new(provider),
        recorder: &recorder,
        inbox: Some(rx),
        gate: None,
        first_turn: 1,
    })
    .run(Resume::Fresh)
    .await
    .unwrap();
    assert_eq!(done(out).report.output, "counted to four");
    let requests = scripted.requests();
    assert_eq!(requests.len(), 3);
    assert!(!mentions_messages(&requests[0]));
    let tail: Vec<(Role, String)> = requests[1].messages[2..]
        .iter()
        .map(|m| (m.role, m.content.clone()))
        .collect();
    assert_eq!(
        tail,
        [
            (Role::Assistant, report_json().to_string()),
            (
                Role::User,
                "Message from the user while you were working:\nalso count to four".into()
            ),
        ]
    );
    // Resumed after the message was recorded: the answer and the message are rebuilt, the
    // model is asked again (not the first answer parsed).
    let events = recorder.events();
    let cut = at(&events, |e| {
        matches!(e, SessionEvent::MessagesReceived { .. })
    }) + 1;
    let (_, asked, _, rep) = resume_after(
        &events,
        cut,
        vec![
            call("c1", "count", 4),
            Turn::Json(json!({ "failure": false, "output": "counted to four" })),
        ],
    )
    .await;
    assert_eq!(asked, requests[1..]);
    assert_eq!(rep.report.output, "counted to four");
}

#[tokio::test]
async fn interrupts_round_trip_and_choose_how_to_resume() {
    let fx = fixture(None);
    let scripted = ScriptedProvider::new([call("g1", "guarded", 1), Turn::Json(report_json())]);
    let recorder = Recorder::default();
    let setup = |gate: &Arc<GraphInteraction>| Setup {
        fx: &fx,
        provider: Arc::new(scripted.clone()),
        recorder: &recorder,
        inbox: None,
        gate: Some(gate.clone()),
        first_turn: 1,
    };
    let gate = Arc::new(GraphInteraction::new());
    let out = agent(setup(&gate)).run(Resume::Fresh).await.unwrap();
    let AgentOutcome::Interrupted { interrupt, scratch } = out else {
        panic!("not interrupted: {out:?}");
    };
    assert!(
        interrupt.prompt.contains("allow `guarded`"),
        "{interrupt:?}"
    );
    assert_eq!(fx.runs.load(Ordering::SeqCst), 0);
    let before = recorder.events();
    assert!(matches!(
        before.last(),
        Some(SessionEvent::ToolStarted { call_id, .. }) if call_id == "g1"
    ));

    // Nothing recorded after the interrupt: the answer goes to the waiting call.
    let resume = Resume::choose(
        1,
        Some((scratch.clone(), Answer::approve())),
        before.clone(),
    );
    assert!(matches!(resume, Resume::Interrupt { .. }), "{resume:?}");
    let gate = Arc::new(GraphInteraction::new());
    let rep = done(agent(setup(&gate)).run(resume).await.unwrap());
    assert_eq!(rep.report.output, "counted to three");
    assert_eq!((rep.turns, rep.tool_calls), (2, 1));
    assert_eq!(fx.runs.load(Ordering::SeqCst), 1);
    assert_eq!(scripted.requests().len(), 2);
    let all = recorder.events();
    assert!(matches!(
        &all[before.len()],
        SessionEvent::ToolStarted { call_id, turn: 1, .. } if call_id == "g1"
    ));
    assert!(matches!(
        &all[before.len() + 1],
        SessionEvent::ToolCompleted {
            status: ToolStatus::Ok,
            ..
        }
    ));
    assert!(matches!(
        &all[before.len() + 2],
        SessionEvent::TurnStarted { turn: 2, .. }
    ));

    // The process stopped after the answered call completed: the record is ahead of the
    // scratch, so the activation continues from the record.
    let resume = Resume::choose(
        1,
        Some((scratch.clone(), Answer::approve())),
        all[..before.len() + 2].to_vec(),
    );
    let Resume::Recorded(events) = &resume else {
        panic!("{resume:?}");
    };
    assert_eq!(events.len(), before.len() + 2);
    // No interrupt and nothing recorded: fresh; another attempt's record is not this one's.
    assert!(matches!(Resume::choose(1, None, vec![]), Resume::Fresh));
    assert!(matches!(
        Resume::choose(2, None, all.clone()),
        Resume::Fresh
    ));

    // A denial is recorded as one.
    let scripted = ScriptedProvider::new([call("g2", "guarded", 2), Turn::Json(report_json())]);
    let recorder = Recorder::default();
    let gate = Arc::new(GraphInteraction::new());
    gate.preset(Answer::reject("not now"));
    let run = agent(Setup {
        fx: &fx,
        provider: Arc::new(scripted.clone()),
        recorder: &recorder,
        inbox: None,
        gate: Some(gate),
        first_turn: 1,
    });
    done(run.run(Resume::Fresh).await.unwrap());
    let denied = recorder.events().into_iter().find_map(|e| match e {
        SessionEvent::ToolCompleted { status, output, .. } => Some((status, output)),
        _ => None,
    });
    let (status, output) = denied.unwrap();
    assert_eq!(status, ToolStatus::Denied);
    assert!(
        output.starts_with("error: denied: the user declined"),
        "{output}"
    );
}

/// A model that asks for the same call with the same result turn after turn (a small model's
/// loop) is stopped after three such turns and asked for its report, with the reason, instead
/// of spending the turn limit (8 here) on more of the same.
#[tokio::test]
async fn the_same_call_three_times_in_a_row_ends_in_the_report() {
    let fx = fixture(None);
    let scripted = ScriptedProvider::new(vec![
        call("t1", "count", 1),
        call("t2", "count", 7),
        call("t3", "count", 7),
        call("t4", "count", 7),
        Turn::Json(report_json()),
    ]);
    let recorder = Recorder::default();
    let out = fresh(&fx, &scripted, &recorder)
        .run(Resume::Fresh)
        .await
        .unwrap();
    let report = done(out);
    assert_eq!(report.report.output, "counted to three");
    assert_eq!(fx.runs.load(Ordering::SeqCst), 4);
    let requests = scripted.requests();
    assert_eq!(requests.len(), 5);
    // The last request offers no tools, asks for the report and says why.
    let last = requests.last().unwrap();
    assert!(last.tools.is_empty());
    assert!(last.response_format.is_some());
    let asked = &last.messages.last().unwrap().content;
    assert!(
        asked.starts_with("You made the same tool calls with the same results several times"),
        "{asked}"
    );
    let notes: Vec<String> = recorder
        .events()
        .into_iter()
        .filter_map(|e| match e {
            SessionEvent::Note { text } => Some(text),
            _ => None,
        })
        .collect();
    assert!(
        notes
            .iter()
            .any(|n| n.contains(r#"turn after turn (count {"n":7})"#)),
        "{notes:?}"
    );
}

/// A role whose job is to change files (`changes_files`) that reports success without any
/// change is asked once to make it or say why none is needed; its second report stands.
#[tokio::test]
async fn a_success_without_a_change_is_questioned_once() {
    let fx = fixture(None);
    let scripted =
        ScriptedProvider::new(vec![Turn::Json(report_json()), Turn::Json(report_json())]);
    let recorder = Recorder::default();
    let mut run = fresh(&fx, &scripted, &recorder);
    run.role.changes_files = true;
    let report = done(run.run(Resume::Fresh).await.unwrap());
    assert_eq!(report.report.output, "counted to three");
    let requests = scripted.requests();
    assert_eq!(requests.len(), 2, "asked once, not twice");
    let asked = &requests[1].messages.last().unwrap().content;
    assert!(
        asked.starts_with("You reported success, but no call that changes files"),
        "{asked}"
    );
    assert!(recorder.events().iter().any(|e| matches!(e,
        SessionEvent::Note { text } if text.starts_with("reported success without changing a file"))));
}

/// A `force_edit` role answers the question about an unbacked success with an edit: that
/// request may only call an editing tool (`tool_choice`), and says so; the ones before and
/// after it are free. Without the key the question leaves the choice to the model.
#[tokio::test]
async fn a_force_edit_role_answers_an_unbacked_success_with_an_edit() {
    use trellis_llm::ToolChoice;
    for force_edit in [true, false] {
        let fx = fixture(None);
        let scripted = ScriptedProvider::new(vec![
            Turn::Json(report_json()),
            call("c1", "count", 1),
            Turn::Json(report_json()),
        ]);
        let recorder = Recorder::default();
        let mut run = fresh(&fx, &scripted, &recorder);
        run.role.changes_files = true;
        run.role.force_edit = force_edit;
        done(run.run(Resume::Fresh).await.unwrap());
        let requests = scripted.requests();
        let choices: Vec<ToolChoice> = requests.iter().map(|r| r.tool_choice.clone()).collect();
        let asked = if force_edit {
            ToolChoice::OneOf(
                ["edit_file", "multi_edit", "write_file", "apply_patch"]
                    .map(String::from)
                    .to_vec(),
            )
        } else {
            ToolChoice::Auto
        };
        assert_eq!(
            choices,
            [ToolChoice::Auto, asked, ToolChoice::Auto],
            "force_edit {force_edit}"
        );
        let question = &requests[1].messages.last().unwrap().content;
        assert_eq!(
            question.contains("answer with a call of an editing tool"),
            force_edit,
            "{question}"
        );
    }
}

/// A `tool_first` role must call a tool before it may report: its first request requires a
/// call (`tool_choice`), the ones after its first call do not. Other roles are never
/// required to.
#[tokio::test]
async fn a_tool_first_role_must_call_a_tool_before_it_reports() {
    use trellis_llm::ToolChoice;
    for tool_first in [true, false] {
        let fx = fixture(None);
        let scripted = ScriptedProvider::new(vec![
            call("c1", "count", 1),
            call("c2", "count", 2),
            Turn::Json(report_json()),
        ]);
        let recorder = Recorder::default();
        let mut run = fresh(&fx, &scripted, &recorder);
        run.role.tool_first = tool_first;
        done(run.run(Resume::Fresh).await.unwrap());
        let choices: Vec<ToolChoice> = scripted
            .requests()
            .iter()
            .map(|r| r.tool_choice.clone())
            .collect();
        let first = if tool_first {
            ToolChoice::Required
        } else {
            ToolChoice::Auto
        };
        assert_eq!(
            choices,
            [first, ToolChoice::Auto, ToolChoice::Auto],
            "tool_first {tool_first}"
        );
    }
}
