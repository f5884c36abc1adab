//! The window under iced_test's simulator (tiny-skia, headless) against the scripted agent:
//! clicks and typing become messages, the app's update sends them to the agent, and the
//! agent's events come back into the app — as the real window runs, without a display.

use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use futures::channel::mpsc::UnboundedReceiver;
use iced::keyboard::{Key, Modifiers, key::Named};
use iced::{Task, Theme};
use iced_test::{Simulator, selector, simulator};
use trellis_desktop::acp::review::ReviewReply;
use trellis_desktop::acp::{Event, Update};
use trellis_desktop::app::{App, Message, PROMPT_ID, Status};

use super::agent::{self, Script, Shared, next};

struct Ui {
    rt: tokio::runtime::Runtime,
    app: App,
    events: UnboundedReceiver<Event>,
    log: Shared,
    agent: tokio::task::JoinHandle<()>,
    _dir: tempfile::TempDir,
}

impl Ui {
    /// A window over a small workspace, connected to a scripted agent.
    fn start(script: Script) -> Self {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("src")).unwrap();
        std::fs::write(
            dir.path().join("src/lib.rs"),
            "//! Stock.\npub fn stock() -> u32 {\n    42\n}\n",
        )
        .unwrap();
        std::fs::write(dir.path().join("a.md"), "# Title\nold one\n").unwrap();
        let rt = agent::runtime();
        let (handle, events, log, agent) =
            agent::start_serving(&rt, script, Some(dir.path().to_owned()));
        let app = App::new(handle, dir.path().to_owned());
        let mut ui = Self {
            rt,
            app,
            events,
            log,
            agent,
            _dir: dir,
        };
        ui.pump(|e| matches!(e, Event::Connected(_)));
        ui
    }

    /// Feeds the agent's events to the app until `stop` accepts one.
    fn pump(&mut self, stop: impl Fn(&Event) -> bool) {
        loop {
            let e = next(&self.rt, &mut self.events);
            let done = stop(&e);
            let _ = self.app.update(Message::Acp(e));
            if done {
                return;
            }
        }
    }

    /// Runs `f` on a simulator of the current view, then updates the app with the messages
    /// the interaction produced.
    fn interact(&mut self, f: impl FnOnce(&mut Simulator<'_, Message>)) {
        let messages: Vec<Message> = {
            let mut ui = simulator(self.app.view());
            f(&mut ui);
            ui.into_messages().collect()
        };
        for m in messages {
            let _ = self.app.update(m);
        }
    }

    /// Whether the view shows exactly `text` somewhere.
    fn shows(&self, text: &str) -> bool {
        let mut ui = simulator(self.app.view());
        ui.find(text).is_ok()
    }

    /// Sends `prompt` and waits for the scripted turn's permission request.
    fn prompt_until_permission(&mut self, prompt: &str) {
        let _ = self.app.update(Message::PromptChanged(prompt.into()));
        let _ = self.app.update(Message::Send);
        self.pump(|e| matches!(e, Event::Permission(_)));
    }

    fn new_session(&mut self) {
        self.interact(|ui| {
            ui.click("New session").unwrap();
        });
        self.pump(|e| matches!(e, Event::SessionOpened(_)));
    }
}

#[test]
fn a_prompt_streams_into_the_panel_and_a_permission_is_granted() {
    let mut ui = Ui::start(Script::default());
    assert!(ui.shows("Scripted Trellis 9.9.9"));
    ui.new_session();
    ui.interact(|ui| {
        ui.click(selector::id(PROMPT_ID)).unwrap();
        ui.typewrite("Where does the stock live?");
        ui.tap_key(Key::Named(Named::Enter));
    });
    assert_eq!(ui.app.prompt, "", "the prompt was sent and the box cleared");
    ui.pump(|e| matches!(e, Event::Permission(_)));
    assert_eq!(
        ui.log.lock().unwrap().prompts,
        ["Where does the stock live?"]
    );
    // The streamed chunks are one text, the plan and tool call are shown with their states.
    assert!(ui.shows("Stock lives in memory."));
    assert!(ui.shows("Choosing a workflow…"));
    assert!(ui.shows("Research the stock"));
    assert!(ui.shows("Write the answer"));
    assert!(ui.shows("read src/lib.rs"));
    assert!(ui.shows("Context: 1234 / 8192 tokens"));
    assert!(ui.shows("Permission: Apply the changes to your files: a.md, b.md"));
    assert!(
        ui.shows("Where does the stock live?"),
        "the title and the user's entry"
    );

    ui.interact(|ui| {
        ui.click("1. Apply to my files").unwrap();
    });
    ui.pump(|e| matches!(e, Event::TurnEnded { .. }));
    assert_eq!(ui.log.lock().unwrap().answers, ["allow_once"]);
    assert!(ui.shows("Applied the run's changes."));
    assert!(!ui.shows("Permission: Apply the changes to your files: a.md, b.md"));

    // A tool call's location opens the file at its line.
    ui.interact(|ui| {
        ui.click("src/lib.rs:2").unwrap();
    });
    let open = ui.app.files.open.as_ref().expect("the file is open");
    assert!(open.path.ends_with("src/lib.rs"));
    assert_eq!(open.line, Some(2));
    assert_eq!(
        open.content.cursor().position.line,
        1,
        "the cursor is on line 2"
    );
}

#[test]
fn a_listed_session_loads_with_its_conversation_replayed() {
    let mut ui = Ui::start(Script::default());
    ui.pump(|e| matches!(e, Event::Sessions(_)));
    assert!(ui.shows("Persist the stock"));
    ui.interact(|ui| {
        ui.click("Persist the stock").unwrap();
    });
    ui.pump(|e| matches!(e, Event::SessionOpened(o) if o.how == "load"));
    let s = ui.app.session().expect("the loaded session is shown");
    assert_eq!(s.id.to_string(), super::agent::EARLIER);
    assert!(ui.shows("Recorded ADR 0002."));
    assert!(ui.shows("Autonomy:"));
}

#[test]
fn a_hunk_is_rejected_and_the_rest_applied_then_undone() {
    let mut ui = Ui::start(Script::default());
    ui.new_session();
    let _ = ui.app.update(Message::PromptChanged("Document it".into()));
    let _ = ui.app.update(Message::Send);
    ui.pump(|e| matches!(e, Event::Permission(_)));
    ui.interact(|ui| {
        ui.click("Review hunks…").unwrap();
    });
    let mut shown = false;
    let mut ended = false;
    while !(shown && ended) {
        let e = next(&ui.rt, &mut ui.events);
        shown |= matches!(
            e,
            Event::Review {
                reply: ReviewReply::Shown { .. },
                ..
            }
        );
        ended |= matches!(e, Event::TurnEnded { .. });
        let _ = ui.app.update(Message::Acp(e));
    }
    assert_eq!(
        ui.log.lock().unwrap().answers,
        ["reject_once"],
        "kept in the worktree"
    );
    assert!(ui.shows("a.md (modified, +2 −2)"));
    assert!(ui.shows("Change set of run run-0001 — open · 3 of 3 hunks accepted"));

    ui.interact(|ui| {
        ui.click(selector::id("reject-0-1")).unwrap();
    });
    assert!(ui.shows("Change set of run run-0001 — open · 2 of 3 hunks accepted"));
    ui.interact(|ui| {
        ui.click("Apply accepted").unwrap();
    });
    ui.pump(|e| matches!(e, Event::Review { .. }));
    {
        let log = ui.log.lock().unwrap();
        assert_eq!(log.reviews[0]["action"], "show");
        assert_eq!(log.reviews[0]["run"], "run-0001");
        assert_eq!(log.reviews[1]["action"], "apply");
        assert_eq!(
            log.reviews[1]["accept"],
            serde_json::json!([{"file": "a.md", "hunks": [0]}, {"file": "b.md"}])
        );
    }
    assert!(ui.shows("Applied to a.md, b.md; Undo reverses it."));

    ui.interact(|ui| {
        ui.click("Undo").unwrap();
    });
    ui.pump(|e| matches!(e, Event::Review { .. }));
    assert_eq!(ui.log.lock().unwrap().reviews[2]["action"], "undo");
    assert!(ui.shows("Undone: a.md, b.md restored; Undo again re-applies."));
}

#[test]
fn the_open_file_goes_with_the_prompt_and_the_agent_reads_it_through_the_client() {
    let mut ui = Ui::start(Script::default());
    ui.new_session();
    ui.interact(|ui| {
        ui.click("▸ src/").unwrap();
    });
    ui.interact(|ui| {
        ui.click("    lib.rs").unwrap();
    });
    assert!(ui.shows("Attach src/lib.rs"));
    let _ = ui
        .app
        .update(Message::PromptChanged("Explain this file".into()));
    let _ = ui.app.update(Message::Send);
    ui.pump(|e| matches!(e, Event::Permission(_)));
    let reads = ui.log.lock().unwrap().reads.clone();
    assert_eq!(reads.len(), 1, "{reads:?}");
    assert!(reads[0].ends_with("src/lib.rs: //! Stock."), "{reads:?}");
    let ask = ui.app.asks[0].id;
    let _ = ui.app.update(Message::Answer { ask, option: None });
    ui.pump(|e| matches!(e, Event::TurnEnded { .. }));
    // Without an open file the prompt carries no link.
    ui.app.files.open = None;
    let _ = ui.app.update(Message::PromptChanged("again".into()));
    let _ = ui.app.update(Message::Send);
    ui.pump(|e| matches!(e, Event::Permission(_)));
    assert_eq!(ui.log.lock().unwrap().reads.len(), 1);
}

#[test]
fn the_autonomy_is_chosen_from_the_session_options() {
    let mut ui = Ui::start(Script::default());
    ui.new_session();
    // The pick list draws its values itself (no text widgets to find): choose as it would.
    let option = ui.app.session().unwrap().options[0].clone();
    assert_eq!(
        (option.id.as_str(), option.current.as_str()),
        ("autonomy", "ask")
    );
    let value = option.choices[1].clone();
    let _ = ui.app.update(Message::SetOption {
        option: option.id,
        value,
    });
    ui.pump(|e| {
        matches!(
            e,
            Event::Update {
                update: Update::ConfigOptions(_),
                ..
            }
        )
    });
    assert_eq!(
        ui.log.lock().unwrap().config,
        [("autonomy".to_owned(), "auto-edit".to_owned())]
    );
    assert_eq!(ui.app.session().unwrap().options[0].current, "auto-edit");
}

#[test]
fn hunks_are_reviewed_from_the_keyboard() {
    let mut ui = Ui::start(Script::default());
    ui.new_session();
    let _ = ui.app.update(Message::OpenReview);
    ui.pump(|e| matches!(e, Event::Review { .. }));
    let key = |c: &str, m| Message::Key(Key::Character(c.into()), m);
    // Down to the second hunk, reject it (the cursor moves on), reject b.md's, apply.
    let _ = ui
        .app
        .update(Message::Key(Key::Named(Named::ArrowDown), Modifiers::ALT));
    let _ = ui.app.update(key("x", Modifiers::ALT));
    let _ = ui.app.update(key("x", Modifiers::ALT));
    let _ = ui.app.update(key("a", Modifiers::CTRL | Modifiers::SHIFT));
    ui.pump(|e| matches!(e, Event::Review { .. }));
    assert_eq!(
        ui.log.lock().unwrap().reviews[1]["accept"],
        serde_json::json!([{"file": "a.md", "hunks": [0]}])
    );
    assert!(matches!(
        trellis_desktop::app::shortcut(&ui.app, &Key::Character("c".into()), Modifiers::ALT),
        Some(Message::FocusComment)
    ));
    assert!(matches!(
        trellis_desktop::app::shortcut(
            &ui.app,
            &Key::Character("C".into()),
            Modifiers::CTRL | Modifiers::SHIFT
        ),
        Some(Message::RequestChanges)
    ));
    let dark = ui.app.dark;
    let _ = ui.app.update(key("t", Modifiers::CTRL));
    assert_ne!(ui.app.dark, dark, "Ctrl+T toggles the theme");
}

#[test]
fn the_agent_dying_mid_turn_shows_why_and_reconnecting_resumes_the_session() {
    let script = Script {
        stall: true,
        ..Script::default()
    };
    let mut ui = Ui::start(script);
    ui.new_session();
    let _ = ui.app.update(Message::PromptChanged("go".into()));
    let _ = ui.app.update(Message::Send);
    ui.pump(|e| {
        matches!(
            e,
            Event::Update {
                update: Update::MessageText(_),
                ..
            }
        )
    });
    let _ = ui
        .app
        .update(Message::PromptChanged("my next question".into()));
    ui.agent.abort();
    ui.pump(|e| matches!(e, Event::Disconnected(_)));
    assert!(ui.shows("The agent is not running."));
    assert!(!ui.app.session().unwrap().running);
    assert_eq!(ui.app.prompt, "my next question", "nothing typed is lost");

    // Reconnect starts a new agent; the open session is resumed, its transcript kept.
    type Reconnected = Option<(UnboundedReceiver<Event>, Shared)>;
    let slot: Arc<Mutex<Reconnected>> = Arc::default();
    let s = slot.clone();
    let second = Arc::new(agent::runtime());
    let keep = second.clone();
    let connector = move || {
        let (h, events, log, _task) = agent::start(&keep, Script::default());
        *s.lock().unwrap() = Some((events, log));
        (h, Task::none())
    };
    ui.app = std::mem::replace(
        &mut ui.app,
        App::new(trellis_desktop::acp::Handle::detached().0, PathBuf::new()),
    )
    .with_connector(Box::new(connector));
    ui.interact(|ui| {
        ui.click(selector::id("reconnect")).unwrap();
    });
    let (events, log) = slot.lock().unwrap().take().expect("reconnected");
    ui.events = events;
    ui.pump(|e| matches!(e, Event::SessionOpened(o) if o.how == "resume"));
    assert!(matches!(ui.app.status, Status::Connected(_)));
    assert!(ui.shows("Stock lives"), "the transcript survived");
    let _ = ui.app.update(Message::Send);
    ui.pump(|e| matches!(e, Event::Permission(_)));
    assert_eq!(
        log.lock().unwrap().prompts,
        ["my next question"],
        "the kept prompt went to the new agent"
    );
}

#[test]
fn the_review_view_matches_its_snapshot() {
    let mut ui = Ui::start(Script::default());
    ui.new_session();
    let _ = ui.app.update(Message::OpenReview);
    ui.pump(|e| matches!(e, Event::Review { .. }));
    let _ = ui.app.update(Message::SetHunk {
        file: 0,
        hunk: 1,
        accept: false,
    });
    let mut sim = simulator(ui.app.view());
    let snap = sim.snapshot(&Theme::Dark).unwrap();
    assert!(snap.matches_hash("tests/snapshots/review").unwrap());
}

/// Writes the documentation's screenshots (`docs/ui/desktop-*.png`) from the simulator
/// (tiny-skia): `cargo test -p trellis-desktop --test all screenshots -- --ignored`.
#[test]
#[ignore = "writes docs/ui/desktop-*.png"]
fn screenshots() {
    let docs = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../docs/ui");
    let shot = |app: &App, name: &str, theme: Theme| {
        let path = docs.join(format!("{name}.png"));
        // `matches_image` writes the file when it is missing (and names it by renderer).
        let written = docs.join(format!("{name}-tiny-skia.png"));
        let _ = std::fs::remove_file(&written);
        let mut sim = Simulator::with_size(iced::Settings::default(), (1400.0, 860.0), app.view());
        let snap = sim.snapshot(&theme).unwrap();
        assert!(snap.matches_image(&path).unwrap());
        std::fs::rename(&written, &path).unwrap();
    };
    let mut ui = Ui::start(Script::default());
    ui.new_session();
    ui.prompt_until_permission("Where does the stock live?");
    let _ = ui
        .app
        .update(Message::OpenFile("src/lib.rs".into(), Some(2)));
    shot(&ui.app, "desktop-agent", Theme::Dark);
    ui.interact(|ui| {
        ui.click("Review hunks…").unwrap();
    });
    ui.pump(|e| matches!(e, Event::Review { .. }));
    let _ = ui.app.update(Message::SetHunk {
        file: 0,
        hunk: 1,
        accept: false,
    });
    shot(&ui.app, "desktop-review", Theme::Dark);
    ui.app.dark = false;
    shot(&ui.app, "desktop-review-light", Theme::Light);
}

#[test]
fn a_long_diff_builds_only_the_hunks_near_the_view() {
    use trellis_desktop::acp::review::{ChangeSet, FileChange, Hunk, HunkLine, LineKind};
    use trellis_desktop::app::Review;
    let line = |kind| HunkLine {
        kind,
        text: "x".into(),
    };
    let files = (0..100)
        .map(|f| FileChange {
            path: format!("f{f}.rs"),
            status: "modified".into(),
            additions: 10,
            deletions: 10,
            hunks: (0..10)
                .map(|index| Hunk {
                    index,
                    old_start: 1,
                    new_start: 1,
                    lines: vec![
                        line(LineKind::Context),
                        line(LineKind::Removed),
                        line(LineKind::Added),
                    ],
                })
                .collect(),
        })
        .collect();
    let (handle, _commands) = trellis_desktop::acp::Handle::detached();
    let mut app = App::new(handle, PathBuf::from("/nonexistent"));
    app.review = Some(Review::new(
        trellis_desktop::acp::SessionId::new("s"),
        "r".into(),
        "open".into(),
        ChangeSet {
            run: "r".into(),
            files,
        },
    ));
    let built = |app: &App, id: &str| {
        simulator(app.view())
            .find(selector::id(id.to_owned()))
            .is_ok()
    };
    assert!(built(&app, "reject-0-0"));
    assert!(!built(&app, "reject-90-0"), "far below the view: not built");
    // A file is its title and ten hunks of three lines and a comment box:
    // 24 + 10 + 10 × (16 + 34 + 8 + 54 + 32 + 10) pixels.
    let _ = app.update(Message::ReviewScrolled(90.0 * 1574.0, 800.0));
    assert!(built(&app, "reject-90-0"));
    assert!(!built(&app, "reject-0-0"), "far above the view: not built");
}

#[test]
fn line_comments_become_a_request_for_changes_of_the_run() {
    let mut ui = Ui::start(Script::default());
    ui.new_session();
    let _ = ui.app.update(Message::OpenReview);
    ui.pump(|e| matches!(e, Event::Review { .. }));
    // A click on the second hunk's added line (a.md:12) chooses it; the comment goes to it.
    ui.interact(|ui| {
        ui.click(selector::id("line-0-1-2")).unwrap();
    });
    let r = ui.app.review.as_ref().unwrap();
    assert_eq!((r.cursor, r.comment_line(0, 1)), ((0, 1), 2));
    ui.interact(|ui| {
        ui.click(selector::id("comment-0-1")).unwrap();
        ui.typewrite("keep the old wording here");
    });
    // From the keyboard: the cursor's line moves up to the removed line (old a.md:12).
    let _ = ui.app.update(Message::Key(
        Key::Named(Named::ArrowUp),
        Modifiers::ALT | Modifiers::SHIFT,
    ));
    let _ = ui.app.update(Message::FocusComment);
    let _ = ui.app.update(Message::Comment {
        file: 0,
        hunk: 1,
        text: "why was this removed?".into(),
    });
    let r = ui.app.review.as_ref().unwrap();
    assert_eq!(
        r.line_label(0, 1, 2),
        "*+ new two",
        "a commented line is marked"
    );
    assert_eq!(r.line_label(0, 1, 1), "*- old two");
    assert_eq!(
        r.line_label(0, 0, 2),
        " + new one",
        "the other lines are not"
    );
    ui.interact(|ui| {
        ui.click("Request changes").unwrap();
    });
    // The revision is a turn of the session: it streams and offers its change set again.
    ui.pump(|e| matches!(e, Event::Permission(_)));
    assert!(ui.app.session().unwrap().running);
    {
        let log = ui.log.lock().unwrap();
        assert!(log.prompts.is_empty(), "no new prompt: {:?}", log.prompts);
        assert_eq!(log.reviews.len(), 1, "no reject: {:?}", log.reviews);
        assert_eq!(log.changes.len(), 1);
        let c = &log.changes[0];
        assert_eq!(c.run.as_deref(), Some("run-0001"));
        assert_eq!(
            c.feedback,
            "Review comments on the change set of run run-0001:\n\
             - a.md:12 (old) `- old two`: why was this removed?\n\
             - a.md:12 `+ new two`: keep the old wording here\n"
        );
    }
    assert!(ui.shows("Change set of run run-0001 — revising · 3 of 3 hunks accepted"));
    let ask = ui.app.asks[0].id;
    let _ = ui.app.update(Message::Answer {
        ask,
        option: Some("reject_once".into()),
    });
    ui.pump(|e| matches!(e, Event::TurnEnded { .. }));
    assert!(!ui.app.session().unwrap().running, "the revision ended");
}

#[test]
fn a_workflow_question_is_answered_in_the_panel() {
    let mut ui = Ui::start(Script {
        question: true,
        ..Script::default()
    });
    assert_eq!(
        ui.log.lock().unwrap().client_methods,
        ["_trellis/question"],
        "the client takes questions"
    );
    ui.new_session();
    let _ = ui
        .app
        .update(Message::PromptChanged("Record the decision".into()));
    let _ = ui.app.update(Message::Send);
    ui.pump(|e| matches!(e, Event::Permission(_)));
    assert!(ui.shows("Question: write asks: Which status does the ADR get? [Proposed / Accepted]"));
    assert!(ui.shows("Let it decide"));
    // Alt+Q puts the keyboard in the answer box; typed, Enter sends it.
    assert!(matches!(
        trellis_desktop::app::shortcut(&ui.app, &Key::Character("q".into()), Modifiers::ALT),
        Some(Message::FocusAnswer)
    ));
    let id = ui.app.asks[0].id;
    let answer_box = || selector::id(trellis_desktop::app::answer_id(id));
    ui.interact(|ui| {
        ui.click(answer_box()).unwrap();
        ui.typewrite("Accepted");
    });
    ui.interact(|ui| {
        ui.click(answer_box()).unwrap();
        ui.tap_key(Key::Named(Named::Enter));
    });
    assert!(ui.app.asks.is_empty(), "answered");
    // The turn goes on to the change set.
    ui.pump(|e| matches!(e, Event::Permission(_)));
    assert_eq!(
        ui.log.lock().unwrap().questions,
        [serde_json::json!({"outcome": "answered", "answer": "Accepted"})]
    );
    assert!(ui.shows("Permission: Apply the changes to your files: a.md, b.md"));
}

#[test]
fn feedback_typed_with_a_rejection_goes_with_the_answer() {
    let mut ui = Ui::start(Script::default());
    ui.new_session();
    ui.prompt_until_permission("Where does the stock live?");
    let id = ui.app.asks[0].id;
    let feedback = || selector::id(trellis_desktop::app::feedback_id(id));
    ui.interact(|ui| {
        ui.click(feedback()).unwrap();
        ui.typewrite("keep the old title");
    });
    ui.interact(|ui| {
        ui.click("2. Keep them in the run's worktree").unwrap();
    });
    ui.pump(|e| matches!(e, Event::TurnEnded { .. }));
    let log = ui.log.lock().unwrap();
    assert_eq!(log.answers, ["reject_once"]);
    assert_eq!(log.feedback, [Some("keep the old title".to_owned())]);
}
