//! The agent panel: the session's options, plan, transcript (streamed text, thoughts, tool
//! calls), usage, the permission prompts and the prompt box.

use iced::widget::{
    Column, button, checkbox, column, container, pick_list, row, rule, scrollable, text, text_input,
};
use iced::{Color, Element, Fill, Font, font};

use super::session::{Entry, Session};
use super::{App, Message, PROMPT_ID, Status};
use crate::acp::review::REVIEW_METHOD;
use crate::acp::{PermissionAsk, PlanEntryStatus, ToolCallStatus, ToolCallView};

const BOLD: Font = Font {
    weight: font::Weight::Bold,
    ..Font::DEFAULT
};

fn dim(dark: bool) -> Color {
    if dark {
        Color::from_rgb(0.6, 0.6, 0.65)
    } else {
        Color::from_rgb(0.4, 0.4, 0.45)
    }
}

/// The widget id of question `ask`'s answer box.
pub fn answer_id(ask: u64) -> String {
    format!("answer-{ask}")
}

/// The widget id of permission request `ask`'s feedback box.
pub fn feedback_id(ask: u64) -> String {
    format!("feedback-{ask}")
}

/// The answer "Let it decide" gives a question.
pub const LET_IT_DECIDE: &str =
    "(no answer from the user: decide yourself and state the assumption you made)";

/// The widget id of the container around permission option `i` of request `ask`.
pub fn option_id(ask: u64, i: usize) -> String {
    format!("ask-{ask}-{i}")
}

/// The panel.
pub fn view(app: &App) -> Element<'_, Message> {
    let Some(s) = app.session() else {
        return column![
            text("No session open.").size(16),
            text("Start one with New session (Ctrl+N), or load one from the list (Ctrl+L)."),
            prompt_box(app, None),
        ]
        .spacing(10)
        .into();
    };
    let mut top = Column::new().spacing(6);
    top = top.push(text(&s.title).size(17).font(BOLD));
    if !s.options.is_empty() {
        let mut opts = row![].spacing(8);
        for o in &s.options {
            let selected = o.choices.iter().find(|c| c.value == o.current).cloned();
            let id = o.id.clone();
            opts = opts.push(
                row![
                    text(format!("{}:", o.name)).size(13),
                    pick_list(o.choices.clone(), selected, move |value| {
                        Message::SetOption {
                            option: id.clone(),
                            value,
                        }
                    })
                    .text_size(13),
                ]
                .spacing(4)
                .align_y(iced::Center),
            );
        }
        top = top.push(opts);
    }
    if !s.plan.is_empty() {
        top = top.push(plan(s, app.dark));
    }
    let mut body = Column::new().spacing(8).padding([0, 10]);
    for e in &s.transcript {
        body = body.push(entry(e, app.dark));
    }
    if s.running {
        body = body.push(text("…").color(dim(app.dark)));
    }
    let mut asks = Column::new().spacing(8);
    let review = matches!(&app.status, Status::Connected(i) if i.extensions.iter().any(|m| m == REVIEW_METHOD));
    for a in app.asks.iter().filter(|a| a.session == s.id) {
        asks = asks.push(if a.question {
            question(a, app.drafts.get(&a.id).map_or("", String::as_str))
        } else {
            ask(a, review, app.drafts.get(&a.id).map_or("", String::as_str))
        });
    }
    let usage = match s.usage {
        Some((used, size)) => format!("Context: {used} / {size} tokens"),
        None => "Context: —".into(),
    };
    column![
        top,
        rule::horizontal(1),
        scrollable(body).anchor_bottom().height(Fill).width(Fill),
        asks,
        text(usage).size(12).color(dim(app.dark)),
        prompt_box(app, Some(s)),
    ]
    .spacing(8)
    .into()
}

fn plan(s: &Session, dark: bool) -> Element<'_, Message> {
    let mut col = Column::new().spacing(2);
    for p in &s.plan {
        let (mark, color) = match p.status {
            PlanEntryStatus::Pending => ("○", dim(dark)),
            PlanEntryStatus::InProgress => ("◐", Color::from_rgb(0.95, 0.7, 0.2)),
            PlanEntryStatus::Completed => ("●", Color::from_rgb(0.3, 0.75, 0.4)),
            _ => ("?", dim(dark)),
        };
        col = col.push(
            row![text(mark).color(color), text(&p.content).size(13)]
                .spacing(6)
                .align_y(iced::Center),
        );
    }
    container(col)
        .padding(6)
        .style(container::bordered_box)
        .width(Fill)
        .into()
}

fn entry(e: &Entry, dark: bool) -> Element<'_, Message> {
    match e {
        Entry::User(t) => container(column![text("You").size(12).font(BOLD), text(t)])
            .padding(6)
            .width(Fill)
            .style(container::rounded_box)
            .into(),
        Entry::Message(t) => text(t).into(),
        Entry::Thought(t) => text(t).size(13).color(dim(dark)).into(),
        Entry::Tool(t) => tool(t, dark),
        Entry::Stop(why) => text(format!("(turn ended: {why})"))
            .size(13)
            .color(dim(dark))
            .into(),
    }
}

fn status_mark(s: &ToolCallStatus) -> (&'static str, Color) {
    match s {
        ToolCallStatus::Pending => ("…", Color::from_rgb(0.6, 0.6, 0.6)),
        ToolCallStatus::InProgress => ("◐", Color::from_rgb(0.95, 0.7, 0.2)),
        ToolCallStatus::Completed => ("✓", Color::from_rgb(0.3, 0.75, 0.4)),
        ToolCallStatus::Failed => ("✗", Color::from_rgb(0.9, 0.3, 0.3)),
        _ => ("?", Color::from_rgb(0.6, 0.6, 0.6)),
    }
}

fn tool(t: &ToolCallView, dark: bool) -> Element<'_, Message> {
    let (mark, color) = status_mark(&t.status);
    let kind = serde_json::to_value(t.kind)
        .ok()
        .and_then(|v| v.as_str().map(str::to_owned))
        .unwrap_or_default();
    let mut col = column![
        row![
            text(mark).color(color),
            text(&t.title).size(13),
            text(kind).size(11).color(dim(dark)),
        ]
        .spacing(6)
        .align_y(iced::Center)
    ]
    .spacing(2);
    for (path, line) in &t.locations {
        let label = match line {
            Some(l) => format!("{}:{l}", path.display()),
            None => path.display().to_string(),
        };
        col = col.push(
            button(text(label).size(12).font(Font::MONOSPACE))
                .on_press(Message::OpenFile(path.clone(), *line))
                .padding([0, 4])
                .style(button::text),
        );
    }
    if !t.text.is_empty() {
        col = col.push(
            text(&t.text)
                .size(12)
                .font(Font::MONOSPACE)
                .color(dim(dark)),
        );
    }
    container(col)
        .padding(4)
        .width(Fill)
        .style(container::bordered_box)
        .into()
}

fn ask<'a>(a: &'a PermissionAsk, review: bool, draft: &'a str) -> Element<'a, Message> {
    // One option a line: the agent's labels are long ("Apply, and from now on without asking").
    let mut buttons = Column::new().spacing(4);
    for (i, o) in a.options.iter().enumerate() {
        let style = if o.kind.starts_with("allow") {
            button::success
        } else {
            button::danger
        };
        buttons = buttons.push(
            container(
                button(text(format!("{}. {}", i + 1, o.name)).size(13))
                    .on_press(Message::Answer {
                        ask: a.id,
                        option: Some(o.id.clone()),
                    })
                    .style(style),
            )
            .id(option_id(a.id, i)),
        );
    }
    if review && a.change_set_run().is_some() {
        buttons = buttons.push(
            button(text("Review hunks…").size(13))
                .on_press(Message::ReviewHunks { ask: a.id })
                .style(button::primary),
        );
    }
    let files: Vec<String> = a
        .diffs
        .iter()
        .map(|d| d.path.display().to_string())
        .collect();
    let mut col = column![text(format!("Permission: {}", a.title)).font(BOLD)].spacing(6);
    if !files.is_empty() {
        col = col.push(text(files.join("\n")).size(12).font(Font::MONOSPACE));
    }
    // What a rejection says (for a human-review gate: what to revise), typed before choosing
    // a reject option.
    if a.options.iter().any(|o| o.kind.starts_with("reject")) {
        let id = a.id;
        col = col.push(
            text_input(
                "Feedback sent with a reject option (for a review gate: what to revise)",
                draft,
            )
            .id(feedback_id(id))
            .on_input(move |text| Message::Draft { ask: id, text })
            .size(13)
            .padding(6),
        );
    }
    container(col.push(buttons))
        .padding(8)
        .width(Fill)
        .style(container::rounded_box)
        .into()
}

/// A workflow's question: an answer box (Enter sends), Answer, and Let it decide.
fn question<'a>(a: &'a PermissionAsk, draft: &'a str) -> Element<'a, Message> {
    let id = a.id;
    let send = (!draft.trim().is_empty()).then(|| Message::Answer {
        ask: id,
        option: Some(draft.trim().to_owned()),
    });
    let mut input = text_input("Your answer (Enter sends)", draft)
        .id(answer_id(id))
        .on_input(move |text| Message::Draft { ask: id, text })
        .size(13)
        .padding(6);
    if let Some(m) = send.clone() {
        input = input.on_submit(m);
    }
    let buttons = row![
        button(text("Answer").size(13))
            .on_press_maybe(send)
            .style(button::success),
        button(text("Let it decide").size(13))
            .on_press(Message::Answer {
                ask: id,
                option: Some(LET_IT_DECIDE.into()),
            })
            .style(button::secondary),
    ]
    .spacing(6);
    container(
        column![
            text(format!("Question: {}", a.title)).font(BOLD),
            input,
            buttons
        ]
        .spacing(6),
    )
    .padding(8)
    .width(Fill)
    .style(container::rounded_box)
    .into()
}

fn prompt_box<'a>(app: &'a App, s: Option<&'a Session>) -> Element<'a, Message> {
    let connected = matches!(app.status, Status::Connected(_));
    let running = s.is_some_and(|s| s.running);
    let can_send = connected && s.is_some() && !running;
    let mut input = text_input("Ask Trellis… (Enter sends)", &app.prompt)
        .id(PROMPT_ID)
        .on_input(Message::PromptChanged)
        .padding(8);
    if can_send {
        input = input.on_submit(Message::Send);
    }
    let action = if running {
        button("Cancel")
            .on_press(Message::Cancel)
            .style(button::danger)
    } else {
        button("Send").on_press_maybe(can_send.then_some(Message::Send))
    };
    let prompt = row![input, action].spacing(6).align_y(iced::Center);
    match &app.files.open {
        Some(o) => {
            let rel = o.path.strip_prefix(&app.root).unwrap_or(&o.path);
            column![
                checkbox(app.attach_open)
                    .label(format!("Attach {}", rel.display()))
                    .on_toggle(Message::ToggleAttach)
                    .text_size(12)
                    .size(14),
                prompt
            ]
            .spacing(4)
            .into()
        }
        None => prompt.into(),
    }
}
