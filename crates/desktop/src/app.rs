//! The window's state and its update: sessions and their transcripts, the permission
//! prompts, the review of a change set, the workspace's files. Side effects go out through
//! the ACP [`Handle`] (never a `Task` the tests would have to run); what the agent says comes
//! back as [`Message::Acp`].

mod files;
mod keys;
mod panel;
mod review;
mod session;
mod view;

use std::path::PathBuf;

use iced::{Task, Theme, keyboard};

pub use self::files::Files;
pub use self::keys::{SHORTCUTS, shortcut};
pub use self::panel::{LET_IT_DECIDE, answer_id, feedback_id};
pub use self::review::Review;
pub use self::session::{Entry, Session};
use crate::acp::review::{REQUEST_CHANGES_METHOD, ReviewAction, ReviewReply};
use crate::acp::{
    AgentInfo, Command, ConfigChoice, Event, Handle, PermissionAsk, SessionId, SessionSummary,
};

/// Widget id of the prompt box.
pub const PROMPT_ID: &str = "prompt";

/// What the window can be told.
#[derive(Clone, Debug)]
pub enum Message {
    /// The agent said something.
    Acp(Event),
    /// The prompt box changed.
    PromptChanged(String),
    /// Send the prompt.
    Send,
    /// Cancel the current session's turn.
    Cancel,
    /// Start a new session in the workspace.
    NewSession,
    /// Ask the agent for its sessions.
    RefreshSessions,
    /// Load a listed session (replaying it).
    LoadSession(SessionId),
    /// Show an open session.
    SelectSession(SessionId),
    /// Close the current session.
    CloseSession,
    /// Answer a permission request with an option (`None`: dismiss as cancelled).
    Answer {
        /// The request.
        ask: u64,
        /// The option id.
        option: Option<String>,
    },
    /// The answer typed for a question (or the feedback for a permission) changed.
    Draft {
        /// The question or permission request.
        ask: u64,
        /// The text.
        text: String,
    },
    /// Put the keyboard in the answer box of the oldest question (none: the feedback box of
    /// the oldest permission request).
    FocusAnswer,
    /// Answer a change-set request "keep it" and review it hunk by hunk instead.
    ReviewHunks {
        /// The request.
        ask: u64,
    },
    /// Show the current session's latest change set.
    OpenReview,
    /// Accept or reject one hunk.
    SetHunk {
        /// File index in the change set.
        file: usize,
        /// Hunk index in the file.
        hunk: usize,
        /// Accepted.
        accept: bool,
    },
    /// Move the review cursor by this many hunks.
    MoveHunk(i32),
    /// The diff was scrolled: its offset and visible height.
    ReviewScrolled(f32, f32),
    /// A diff line was chosen (clicked): comments go to it.
    SelectLine {
        /// File index in the change set.
        file: usize,
        /// Hunk index in the file.
        hunk: usize,
        /// Line index in the hunk.
        line: usize,
    },
    /// Move the review's line cursor by this many lines.
    MoveLine(i32),
    /// The comment on a hunk's chosen line changed.
    Comment {
        /// File index in the change set.
        file: usize,
        /// Hunk index in the file.
        hunk: usize,
        /// The comment.
        text: String,
    },
    /// Request changes with the comments (`_trellis/requestChanges`): the stage that made
    /// the change set runs again with them.
    RequestChanges,
    /// Put the keyboard in the comment box of the line under the review cursor.
    FocusComment,
    /// Accept (true) or reject the hunk under the review cursor.
    MarkHunk(bool),
    /// Apply the accepted hunks.
    ApplyReview,
    /// Undo the last apply (again: redo).
    UndoReview,
    /// Leave the review.
    CloseReview,
    /// Choose a config option's value (workflow, autonomy).
    SetOption {
        /// The option id.
        option: String,
        /// The value.
        value: ConfigChoice,
    },
    /// Light ↔ dark.
    ToggleTheme,
    /// Attach the open file to prompts, or not.
    ToggleAttach(bool),
    /// Text scale up (+1) or down (-1) by 10 %.
    Scale(i32),
    /// Expand or collapse a directory of the file tree.
    ToggleDir(PathBuf),
    /// Open a file in the code view (a line to show, 1-based).
    OpenFile(PathBuf, Option<u32>),
    /// The code view's editor did something (selection, scrolling; edits are dropped).
    Editor(iced::widget::text_editor::Action),
    /// A key was pressed that no widget took.
    Key(keyboard::Key, keyboard::Modifiers),
    /// Hide the notices.
    DismissNotices,
    /// Start the agent again after it died.
    Reconnect,
}

/// The connection as the window sees it.
#[derive(Clone, Debug)]
pub enum Status {
    /// Started, `initialize` not answered yet.
    Connecting,
    /// Ready.
    Connected(AgentInfo),
    /// Gone; why.
    Disconnected(String),
}

/// Starts a new connection (the real app restarts the agent; tests have none).
pub type Connector = Box<dyn Fn() -> (Handle, Task<Message>) + Send>;

/// The window.
pub struct App {
    /// The connection.
    pub handle: Handle,
    /// Its state.
    pub status: Status,
    /// The workspace (sessions' `cwd`).
    pub root: PathBuf,
    /// Sessions the agent listed.
    pub listed: Vec<SessionSummary>,
    /// Open sessions, in opening order.
    pub sessions: Vec<Session>,
    /// The one shown.
    pub current: Option<SessionId>,
    /// The prompt box.
    pub prompt: String,
    /// Permission requests and questions waiting for an answer.
    pub asks: Vec<PermissionAsk>,
    /// The answers typed for questions (and feedback for permissions), by request.
    pub drafts: std::collections::BTreeMap<u64, String>,
    /// The change set under review.
    pub review: Option<Review>,
    /// The file tree and the open file.
    pub files: Files,
    /// Errors and warnings to show.
    pub notices: Vec<String>,
    /// Dark theme.
    pub dark: bool,
    /// Text scale (1.0 = 100 %).
    pub scale: f32,
    /// Prompts carry a link to the open file (the agent reads it through the client).
    pub attach_open: bool,
    connector: Option<Connector>,
}

impl App {
    /// A window over workspace `root`, connected through `handle`.
    pub fn new(handle: Handle, root: PathBuf) -> Self {
        Self {
            handle,
            status: Status::Connecting,
            files: Files::new(root.clone()),
            root,
            listed: Vec::new(),
            sessions: Vec::new(),
            current: None,
            prompt: String::new(),
            asks: Vec::new(),
            drafts: std::collections::BTreeMap::new(),
            review: None,
            notices: Vec::new(),
            dark: true,
            scale: 1.0,
            attach_open: true,
            connector: None,
        }
    }

    /// How to reconnect after the agent died.
    pub fn with_connector(mut self, connector: Connector) -> Self {
        self.connector = Some(connector);
        self
    }

    /// The window's title.
    pub fn title(&self) -> String {
        match self.session() {
            Some(s) => format!("{} — Trellis", s.title),
            None => "Trellis".into(),
        }
    }

    /// The theme.
    pub fn theme(&self) -> Theme {
        if self.dark { Theme::Dark } else { Theme::Light }
    }

    /// The shown session.
    pub fn session(&self) -> Option<&Session> {
        let id = self.current.as_ref()?;
        self.sessions.iter().find(|s| &s.id == id)
    }

    fn session_mut(&mut self, id: &SessionId) -> Option<&mut Session> {
        self.sessions.iter_mut().find(|s| &s.id == id)
    }

    fn send(&mut self, command: Command) {
        let method = command.method();
        if self.handle.send(command).is_err() {
            self.notices
                .push(format!("{method}: not connected to the agent (Reconnect)"));
        }
    }

    /// Handles a message.
    pub fn update(&mut self, message: Message) -> Task<Message> {
        match message {
            Message::Acp(event) => return self.on_event(event),
            Message::PromptChanged(p) => self.prompt = p,
            Message::Send => self.send_prompt(),
            Message::Cancel => {
                if let Some(s) = self.session().filter(|s| s.running) {
                    let session = s.id.clone();
                    self.send(Command::Cancel { session });
                }
            }
            Message::NewSession => {
                let cwd = self.root.clone();
                self.send(Command::NewSession { cwd });
            }
            Message::RefreshSessions => self.send(Command::ListSessions),
            Message::LoadSession(id) => {
                if self.sessions.iter().any(|s| s.id == id) {
                    self.current = Some(id);
                } else {
                    let cwd = self
                        .listed
                        .iter()
                        .find(|s| s.id == id)
                        .map_or_else(|| self.root.clone(), |s| s.cwd.clone());
                    let title = self
                        .listed
                        .iter()
                        .find(|s| s.id == id)
                        .map(|s| s.title.clone());
                    let mut s = Session::new(id.clone(), cwd.clone());
                    if let Some(t) = title {
                        s.title = t;
                    }
                    self.sessions.push(s);
                    self.current = Some(id.clone());
                    self.send(Command::LoadSession { id, cwd });
                }
            }
            Message::SelectSession(id) => self.current = Some(id),
            Message::CloseSession => {
                if let Some(id) = self.current.take() {
                    self.sessions.retain(|s| s.id != id);
                    self.current = self.sessions.last().map(|s| s.id.clone());
                    self.send(Command::CloseSession { id });
                }
            }
            Message::Answer { ask, option } => self.answer(ask, option),
            Message::Draft { ask, text } => {
                self.drafts.insert(ask, text);
            }
            Message::FocusAnswer => {
                // The oldest question's answer box, else the oldest permission's feedback box.
                if let Some(a) = self.asks.iter().find(|a| a.question) {
                    return iced::widget::operation::focus(panel::answer_id(a.id));
                }
                if let Some(a) = self.asks.first() {
                    return iced::widget::operation::focus(panel::feedback_id(a.id));
                }
            }
            m @ (Message::ReviewHunks { .. }
            | Message::OpenReview
            | Message::SetHunk { .. }
            | Message::Comment { .. }
            | Message::SelectLine { .. }
            | Message::MoveLine(_)
            | Message::RequestChanges
            | Message::FocusComment
            | Message::ReviewScrolled(..)
            | Message::MoveHunk(_)
            | Message::MarkHunk(_)
            | Message::ApplyReview
            | Message::UndoReview
            | Message::CloseReview) => return self.update_review(m),
            Message::SetOption { option, value } => {
                if let Some(id) = self.current.clone() {
                    self.send(Command::SetConfig {
                        session: id,
                        option,
                        value: value.value,
                    });
                }
            }
            Message::ToggleTheme => self.dark = !self.dark,
            Message::ToggleAttach(on) => self.attach_open = on,
            Message::Scale(by) => {
                self.scale = (self.scale + 0.1 * by as f32).clamp(0.5, 3.0);
            }
            Message::ToggleDir(dir) => self.files.toggle(&dir),
            Message::OpenFile(path, line) => {
                if let Err(e) = self.files.open(&path, line) {
                    self.notices.push(e.to_string());
                }
            }
            Message::Editor(action) => self.files.act(action),
            Message::Key(key, modifiers) => {
                if let Some(m) = keys::shortcut(self, &key, modifiers) {
                    return self.update(m);
                }
            }
            Message::DismissNotices => self.notices.clear(),
            Message::Reconnect => return self.reconnect(),
        }
        Task::none()
    }

    /// The review's messages.
    fn update_review(&mut self, message: Message) -> Task<Message> {
        match message {
            Message::ReviewHunks { ask } => self.review_hunks(ask),
            Message::OpenReview => {
                if let Some(id) = self.current.clone() {
                    self.request_review(id, None, ReviewAction::Show);
                }
            }
            Message::SetHunk { file, hunk, accept } => {
                if let Some(r) = &mut self.review {
                    r.set(file, hunk, accept);
                }
            }
            Message::Comment { file, hunk, text } => {
                if let Some(r) = &mut self.review {
                    r.comment(file, hunk, text);
                }
            }
            Message::SelectLine { file, hunk, line } => {
                if let Some(r) = &mut self.review {
                    r.select_line(file, hunk, line);
                }
            }
            Message::MoveLine(by) => {
                if let Some(r) = &mut self.review {
                    r.move_line(by);
                }
            }
            Message::RequestChanges => self.request_changes(),
            Message::FocusComment => {
                if let Some(r) = &self.review {
                    let (f, h) = r.cursor;
                    return iced::widget::operation::focus(review::comment_id(f, h));
                }
            }
            Message::ReviewScrolled(top, height) => {
                if let Some(r) = &mut self.review {
                    r.scroll = (top, height);
                }
            }
            Message::MoveHunk(by) => {
                if let Some(r) = &mut self.review {
                    r.move_cursor(by);
                }
            }
            Message::MarkHunk(accept) => {
                if let Some(r) = &mut self.review {
                    r.mark(accept);
                }
            }
            Message::ApplyReview => self.apply_review(),
            Message::UndoReview => {
                if let Some(r) = &self.review {
                    let (session, run) = (r.session.clone(), Some(r.run.clone()));
                    self.request_review(session, run, ReviewAction::Undo);
                }
            }
            Message::CloseReview => self.review = None,
            _ => {}
        }
        Task::none()
    }

    fn send_prompt(&mut self) {
        let text = self.prompt.trim().to_owned();
        if text.is_empty() || !matches!(self.status, Status::Connected(_)) {
            return;
        }
        let Some(session) = self.current.clone() else {
            self.notices
                .push("No session: start one (Ctrl+N) or load one from the list.".into());
            return;
        };
        let Some(s) = self.session_mut(&session) else {
            return;
        };
        if s.running {
            return;
        }
        s.begin_turn(&text);
        self.prompt.clear();
        let links = match (&self.files.open, self.attach_open) {
            (Some(o), true) => vec![o.path.clone()],
            _ => Vec::new(),
        };
        self.send(Command::Prompt {
            session,
            text,
            links,
        });
    }

    fn request_review(&mut self, session: SessionId, run: Option<String>, action: ReviewAction) {
        self.send(Command::Review {
            session,
            run,
            action,
        });
    }

    /// Answers permission request (or question) `ask`; feedback typed for a permission goes
    /// with a reject option.
    fn answer(&mut self, ask: u64, option: Option<String>) {
        // Text typed in a permission's feedback box goes with a reject option.
        let rejects = self.asks.iter().any(|a| {
            a.id == ask
                && !a.question
                && a.options
                    .iter()
                    .any(|o| Some(&o.id) == option.as_ref() && o.kind.starts_with("reject"))
        });
        self.asks.retain(|a| a.id != ask);
        let feedback = self
            .drafts
            .remove(&ask)
            .map(|t| t.trim().to_owned())
            .filter(|t| rejects && !t.is_empty());
        self.send(Command::Answer {
            ask,
            option,
            feedback,
        });
    }

    /// "Review hunks…" on a change-set permission: keep the change set in the run's worktree
    /// (the agent's `reject_once`), then show it hunk by hunk.
    fn review_hunks(&mut self, ask: u64) {
        let Some(a) = self.asks.iter().find(|a| a.id == ask).cloned() else {
            return;
        };
        let keep = a
            .options
            .iter()
            .find(|o| o.kind == "reject_once")
            .map(|o| o.id.clone());
        self.asks.retain(|x| x.id != ask);
        self.send(Command::Answer {
            ask,
            option: keep,
            feedback: None,
        });
        let run = a.change_set_run().map(str::to_owned);
        self.request_review(a.session, run, ReviewAction::Show);
    }

    fn apply_review(&mut self) {
        let Some(r) = &self.review else {
            return;
        };
        let (session, run, accept) = (r.session.clone(), r.run.clone(), r.accepted());
        self.request_review(
            session,
            Some(run),
            ReviewAction::Apply {
                accept: Some(accept),
            },
        );
    }

    /// Whether the agent advertised extension method `method`.
    fn offers(&self, method: &str) -> bool {
        matches!(&self.status, Status::Connected(i) if i.extensions.iter().any(|m| m == method))
    }

    /// "Request changes": the runtime service's `requestChanges` op through
    /// `_trellis/requestChanges` — the stage that made the change set runs again with the
    /// line comments as feedback, streamed in the session like a prompt turn.
    fn request_changes(&mut self) {
        let Some(r) = &self.review else {
            return;
        };
        if !r.has_comments() || !self.offers(REQUEST_CHANGES_METHOD) {
            return;
        }
        let (session, run, feedback) = (r.session.clone(), r.run.clone(), r.feedback());
        let Some(s) = self.session_mut(&session) else {
            return;
        };
        if s.running {
            self.notices.push(
                "A turn is running in this session: cancel it or wait, then request changes."
                    .into(),
            );
            return;
        }
        s.begin_turn(&feedback);
        self.send(Command::RequestChanges {
            session: session.clone(),
            run: Some(run),
            feedback,
        });
        if let Some(r) = &mut self.review {
            r.state = "revising".into();
            r.note = "Changes requested: the stage runs again with the comments (in the agent \
                      panel); its new change set comes as a permission request."
                .into();
            r.comments.clear();
        }
        self.current = Some(session);
    }

    fn reconnect(&mut self) -> Task<Message> {
        let Some(connect) = &self.connector else {
            return Task::none();
        };
        let (handle, events) = connect();
        self.handle = handle;
        self.status = Status::Connecting;
        events
    }

    fn on_event(&mut self, event: Event) -> Task<Message> {
        match event {
            Event::Connected(info) => {
                let list = info.list_sessions;
                self.status = Status::Connected(info);
                if list {
                    self.send(Command::ListSessions);
                }
                // After a restart: bring the open sessions back (their turns are recorded).
                for s in &mut self.sessions {
                    s.running = false;
                }
                let reopen: Vec<(SessionId, PathBuf)> = self
                    .sessions
                    .iter()
                    .map(|s| (s.id.clone(), s.cwd.clone()))
                    .collect();
                for (id, cwd) in reopen {
                    self.send(Command::ResumeSession { id, cwd });
                }
            }
            Event::Sessions(list) => self.listed = list,
            Event::SessionOpened(o) => {
                if let Some(s) = self.session_mut(&o.id) {
                    s.options = o.options;
                } else {
                    let mut s = Session::new(o.id.clone(), o.cwd);
                    s.options = o.options;
                    self.sessions.push(s);
                }
                self.current = Some(o.id);
            }
            Event::Update { session, update } => {
                if let Some(s) = self.session_mut(&session) {
                    s.apply(update);
                }
            }
            Event::Permission(ask) => self.asks.push(ask),
            Event::PermissionGone(id) => {
                self.asks.retain(|a| a.id != id);
                self.drafts.remove(&id);
            }
            Event::TurnEnded { session, stop } => {
                if let Some(s) = self.session_mut(&session) {
                    s.end_turn(&stop);
                }
            }
            Event::Review { session, reply } => self.on_review(session, reply),
            Event::Failed { message, .. } => self.notices.push(message),
            Event::Malformed(m) => self.notices.push(m),
            Event::Disconnected(why) => {
                for s in &mut self.sessions {
                    s.running = false;
                }
                self.asks.clear();
                self.status = Status::Disconnected(why);
            }
        }
        Task::none()
    }

    fn on_review(&mut self, session: SessionId, reply: ReviewReply) {
        match reply {
            ReviewReply::Shown {
                run,
                state,
                change_set,
            } => {
                let mut r = Review::new(session, run, state, change_set);
                r.can_request = self.offers(REQUEST_CHANGES_METHOD);
                self.review = Some(r);
            }
            ReviewReply::Applied { outcome, files } => {
                if let Some(r) = &mut self.review {
                    r.state = outcome.clone();
                    r.note = if outcome == "applied" {
                        format!("Applied to {}; Undo reverses it.", files.join(", "))
                    } else {
                        "Nothing was applied (no hunk accepted).".into()
                    };
                }
                self.files.reload();
            }
            ReviewReply::Undone { files } => {
                if let Some(r) = &mut self.review {
                    r.state = if r.state == "undone" {
                        "applied"
                    } else {
                        "undone"
                    }
                    .into();
                    r.note = format!(
                        "Undone: {} restored; Undo again re-applies.",
                        files.join(", ")
                    );
                }
                self.files.reload();
            }
            ReviewReply::Other(v) => self.notices.push(format!("review: {v}")),
        }
    }

    /// The view.
    pub fn view(&self) -> iced::Element<'_, Message> {
        view::view(self)
    }

    /// Key presses no widget took become shortcuts.
    pub fn subscription(&self) -> iced::Subscription<Message> {
        keyboard::listen().filter_map(|e| match e {
            keyboard::Event::KeyPressed { key, modifiers, .. } => {
                Some(Message::Key(key, modifiers))
            }
            _ => None,
        })
    }
}
