//! The window's layout: a top bar (connection, actions), notices, then three columns —
//! sessions and files, the code or review view, the agent panel.

use iced::widget::{Column, button, column, container, row, rule, scrollable, text};
use iced::{Color, Element, Fill, Font, Length};

use super::{App, Message, Status, keys, panel};

/// Widget id of the container around the Reconnect button.
pub const RECONNECT_ID: &str = "reconnect";

/// The whole window.
pub fn view(app: &App) -> Element<'_, Message> {
    let status = match &app.status {
        Status::Connecting => "Connecting to the agent…".to_owned(),
        Status::Connected(i) => format!("{} {}", i.name, i.version),
        Status::Disconnected(_) => "Disconnected".to_owned(),
    };
    let bar = row![
        text("Trellis").size(18),
        text(status).size(13).width(Fill),
        button("New session").on_press(Message::NewSession),
        button("Review").on_press_maybe(app.current.is_some().then_some(Message::OpenReview)),
        button(if app.dark { "Light" } else { "Dark" })
            .on_press(Message::ToggleTheme)
            .style(button::secondary),
    ]
    .spacing(8)
    .align_y(iced::Center);
    let mut page = Column::new().spacing(8).padding(10).push(bar);
    if let Status::Disconnected(why) = &app.status {
        page = page.push(
            container(
                column![
                    text("The agent is not running.").size(15),
                    text(why).size(12).font(Font::MONOSPACE),
                    row![
                        container(
                            button("Reconnect")
                                .on_press(Message::Reconnect)
                                .style(button::primary)
                        )
                        .id(RECONNECT_ID),
                        text("Your prompt and open sessions are kept; reconnecting resumes them.")
                            .size(12),
                    ]
                    .spacing(8)
                    .align_y(iced::Center),
                ]
                .spacing(6),
            )
            .padding(10)
            .width(Fill)
            .style(container::danger),
        );
    }
    if !app.notices.is_empty() {
        let mut list = Column::new().spacing(2);
        for n in &app.notices {
            list = list.push(text(n).size(12).color(Color::from_rgb(0.95, 0.55, 0.3)));
        }
        page = page.push(
            row![
                list.width(Fill),
                button("Dismiss").on_press(Message::DismissNotices)
            ]
            .spacing(8),
        );
    }
    let center: Element<'_, Message> = match &app.review {
        Some(r) => r.view(app.dark),
        None => app.files.code_view(app.dark),
    };
    page.push(
        row![
            column![sessions(app), rule::horizontal(1), app.files.tree_view()]
                .spacing(6)
                .width(Length::Fixed(230.0)),
            rule::vertical(1),
            container(center).width(Fill).height(Fill),
            rule::vertical(1),
            container(panel::view(app))
                .width(Length::Fixed(470.0))
                .height(Fill),
        ]
        .spacing(8)
        .height(Fill),
    )
    .push(help())
    .into()
}

fn sessions(app: &App) -> Element<'_, Message> {
    let mut col = Column::new().spacing(2);
    col = col.push(
        row![
            text("Sessions").size(15).width(Fill),
            button(text("↻").size(13))
                .on_press(Message::RefreshSessions)
                .style(button::text),
        ]
        .align_y(iced::Center),
    );
    for s in &app.sessions {
        let current = app.current.as_ref() == Some(&s.id);
        let label = format!("{}{}", if s.running { "◐ " } else { "" }, s.title);
        col = col.push(
            button(text(label).size(13))
                .on_press(Message::SelectSession(s.id.clone()))
                .width(Fill)
                .style(if current {
                    button::primary
                } else {
                    button::secondary
                }),
        );
    }
    for s in app
        .listed
        .iter()
        .filter(|l| !app.sessions.iter().any(|s| s.id == l.id))
    {
        col = col.push(
            button(text(&s.title).size(13))
                .on_press(Message::LoadSession(s.id.clone()))
                .width(Fill)
                .style(button::text),
        );
    }
    scrollable(col).height(Length::Fixed(180.0)).into()
}

fn help() -> Element<'static, Message> {
    let line = keys::SHORTCUTS
        .iter()
        .take(8)
        .map(|(k, what)| format!("{k}: {what}"))
        .collect::<Vec<_>>()
        .join(" · ");
    text(line).size(11).into()
}
