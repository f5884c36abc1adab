//! Keyboard shortcuts: every action of the window has one (listed in docs/desktop.md and
//! in the window's help line).

use iced::keyboard::key::Named;
use iced::keyboard::{Key, Modifiers};

use super::{App, Message};

/// The shortcuts, as shown to the user: (keys, action).
pub const SHORTCUTS: &[(&str, &str)] = &[
    ("Enter / Ctrl+Enter", "send the prompt"),
    ("Escape", "cancel the running turn"),
    ("Ctrl+N", "new session"),
    ("Ctrl+L", "refresh the session list"),
    (
        "Ctrl+PageDown / Ctrl+PageUp",
        "next / previous open session",
    ),
    ("Ctrl+W", "close the session"),
    (
        "Ctrl+1 … Ctrl+4",
        "answer the oldest permission request with option 1 … 4",
    ),
    ("Ctrl+R", "review the session's latest change set"),
    (
        "Alt+Q",
        "answer the oldest question (the keyboard goes to its box; Enter sends); with none, type feedback for the oldest permission request",
    ),
    ("Alt+Down / Alt+Up", "next / previous hunk"),
    ("Alt+A / Alt+X", "accept / reject the hunk under the cursor"),
    (
        "Alt+Shift+Down / Alt+Shift+Up",
        "next / previous diff line (the one a comment goes to)",
    ),
    (
        "Alt+C",
        "comment on the line under the cursor (type, then Request changes: Ctrl+Shift+C)",
    ),
    ("Ctrl+Shift+C", "request changes with the comments"),
    ("Ctrl+Shift+A", "apply the accepted hunks"),
    ("Ctrl+Z", "undo the last apply (again: redo)"),
    ("Ctrl+T", "light / dark theme"),
    ("Ctrl+= / Ctrl+-", "larger / smaller text"),
    ("Ctrl+Shift+R", "restart the agent after it died"),
];

/// The message a key press means, if any.
pub fn shortcut(app: &App, key: &Key, m: Modifiers) -> Option<Message> {
    let ch = match key.as_ref() {
        Key::Character(c) => Some(c.to_lowercase()),
        _ => None,
    };
    let ch = ch.as_deref();
    if m.command() && m.shift() {
        return match ch {
            Some("a") => Some(Message::ApplyReview),
            Some("c") => Some(Message::RequestChanges),
            Some("r") => Some(Message::Reconnect),
            _ => None,
        };
    }
    if m.command() {
        if let Key::Named(n) = key.as_ref() {
            return match n {
                Named::Enter => Some(Message::Send),
                Named::PageDown => cycle(app, 1),
                Named::PageUp => cycle(app, -1),
                _ => None,
            };
        }
        return match ch {
            Some("n") => Some(Message::NewSession),
            Some("l") => Some(Message::RefreshSessions),
            Some("w") => Some(Message::CloseSession),
            Some("r") => Some(Message::OpenReview),
            Some("z") => Some(Message::UndoReview),
            Some("t") => Some(Message::ToggleTheme),
            Some("=" | "+") => Some(Message::Scale(1)),
            Some("-") => Some(Message::Scale(-1)),
            Some(d @ ("1" | "2" | "3" | "4")) => {
                let i: usize = d.parse().ok()?;
                let ask = app.asks.first()?;
                let option = ask.options.get(i - 1)?;
                Some(Message::Answer {
                    ask: ask.id,
                    option: Some(option.id.clone()),
                })
            }
            _ => None,
        };
    }
    if m.alt() && m.shift() {
        return match key.as_ref() {
            Key::Named(Named::ArrowDown) => Some(Message::MoveLine(1)),
            Key::Named(Named::ArrowUp) => Some(Message::MoveLine(-1)),
            _ => None,
        };
    }
    if m.alt() {
        if let Key::Named(n) = key.as_ref() {
            return match n {
                Named::ArrowDown => Some(Message::MoveHunk(1)),
                Named::ArrowUp => Some(Message::MoveHunk(-1)),
                _ => None,
            };
        }
        return match ch {
            Some("a") => Some(Message::MarkHunk(true)),
            Some("x") => Some(Message::MarkHunk(false)),
            Some("c") => Some(Message::FocusComment),
            Some("q") => Some(Message::FocusAnswer),
            _ => None,
        };
    }
    match key.as_ref() {
        Key::Named(Named::Escape) => Some(Message::Cancel),
        _ => None,
    }
}

/// The open session `by` places from the current one.
fn cycle(app: &App, by: i64) -> Option<Message> {
    let n = app.sessions.len() as i64;
    if n == 0 {
        return None;
    }
    let at = app
        .current
        .as_ref()
        .and_then(|c| app.sessions.iter().position(|s| &s.id == c))
        .unwrap_or(0) as i64;
    let to = (at + by).rem_euclid(n) as usize;
    app.sessions
        .get(to)
        .map(|s| Message::SelectSession(s.id.clone()))
}
