//! Frame cost, headless: the CPU time the window spends per frame — `update`, `view`, layout,
//! draw and tiny-skia rasterisation at 1400×860 — while a turn streams (one `session/update`
//! a frame) and while a 10,000-line diff is scrolled. It leaves out presenting the frame to a
//! window (softbuffer on X11), so a real frame costs at least this much.
//!
//! `cargo run -p trellis-desktop --example frames [--release]`

#![allow(
    clippy::print_stdout,
    clippy::unwrap_used,
    clippy::expect_used,
    missing_docs
)]

use std::time::{Duration, Instant};

use iced::advanced::renderer::Headless;
use iced::{Font, Pixels, Point, Size, Theme, mouse};
use iced_test::core::Event;
use iced_test::core::clipboard;
use iced_test::core::theme::Base;
use iced_test::runtime::user_interface::{Cache, UserInterface};
use trellis_desktop::acp::review::{ChangeSet, FileChange, Hunk, HunkLine, LineKind};
use trellis_desktop::acp::{self, Event as AcpEvent, SessionId, Update};
use trellis_desktop::app::{App, Message, Review};

const SIZE: Size = Size::new(1400.0, 860.0);

struct Frames {
    renderer: iced::Renderer,
    cache: Cache,
    times: Vec<Duration>,
}

impl Frames {
    fn new() -> Self {
        let renderer = iced_test::futures::futures::executor::block_on(
            <iced::Renderer as Headless>::new(Font::DEFAULT, Pixels(16.0), Some("tiny-skia")),
        )
        .expect("a tiny-skia renderer");
        Self {
            renderer,
            cache: Cache::default(),
            times: Vec::new(),
        }
    }

    /// One frame of `app` with `events` delivered first; returns the messages they made.
    fn frame(&mut self, app: &App, events: &[Event], started: Instant) -> Vec<Message> {
        let cache = std::mem::take(&mut self.cache);
        let mut ui = UserInterface::build(app.view(), SIZE, cache, &mut self.renderer);
        let mut messages = Vec::new();
        let cursor = mouse::Cursor::Available(Point::new(700.0, 400.0));
        let _ = ui.update(
            events,
            cursor,
            &mut self.renderer,
            &mut clipboard::Null,
            &mut messages,
        );
        let theme = Theme::Dark;
        let base = theme.base();
        ui.draw(
            &mut self.renderer,
            &theme,
            &iced::advanced::renderer::Style {
                text_color: base.text_color,
            },
            cursor,
        );
        self.cache = ui.into_cache();
        let _ = self.renderer.screenshot(
            Size::new(SIZE.width as u32, SIZE.height as u32),
            1.0,
            base.background_color,
        );
        self.times.push(started.elapsed());
        messages
    }

    fn report(&mut self, what: &str) {
        let mut t = std::mem::take(&mut self.times);
        t.sort();
        let p = |q: f64| t[((t.len() - 1) as f64 * q).round() as usize].as_secs_f64() * 1000.0;
        println!(
            "{what}: {} frames, p50 {:.1} ms, p99 {:.1} ms, max {:.1} ms",
            t.len(),
            p(0.5),
            p(0.99),
            p(1.0)
        );
    }
}

fn streaming(frames: &mut Frames) {
    let (handle, _commands) = acp::Handle::detached();
    let mut app = App::new(handle, std::env::temp_dir());
    let id = SessionId::new("bench");
    let _ = app.update(Message::Acp(AcpEvent::SessionOpened(acp::SessionOpened {
        id: id.clone(),
        cwd: std::env::temp_dir(),
        options: Vec::new(),
        how: "new",
    })));
    for i in 0..300 {
        let started = Instant::now();
        let update = if i % 10 == 0 {
            Update::ThoughtText(format!("thinking {i} "))
        } else {
            Update::MessageText(format!("word{i} "))
        };
        let _ = app.update(Message::Acp(AcpEvent::Update {
            session: id.clone(),
            update,
        }));
        frames.frame(&app, &[], started);
    }
    frames.report("streaming (one session/update a frame, 300 frames)");
}

fn big_diff() -> ChangeSet {
    // 100 files × 10 hunks × 10 lines = 10,000 lines.
    let files = (0..100)
        .map(|f| FileChange {
            path: format!("src/module_{f}.rs"),
            status: "modified".into(),
            additions: 40,
            deletions: 20,
            hunks: (0..10)
                .map(|h| Hunk {
                    index: h,
                    old_start: h * 20 + 1,
                    new_start: h * 20 + 1,
                    lines: (0..10)
                        .map(|l| HunkLine {
                            kind: match l % 5 {
                                0 => LineKind::Removed,
                                1 | 2 => LineKind::Added,
                                _ => LineKind::Context,
                            },
                            text: format!(
                                "    let value_{l} = compute({f}, {h}, {l}); // line {l}"
                            ),
                        })
                        .collect(),
                })
                .collect(),
        })
        .collect();
    ChangeSet {
        run: "bench".into(),
        files,
    }
}

fn scrolling(frames: &mut Frames) {
    let (handle, _commands) = acp::Handle::detached();
    let mut app = App::new(handle, std::env::temp_dir());
    app.review = Some(Review::new(
        SessionId::new("bench"),
        "bench".into(),
        "open".into(),
        big_diff(),
    ));
    let wheel = Event::Mouse(mouse::Event::WheelScrolled {
        delta: mouse::ScrollDelta::Lines { x: 0.0, y: -3.0 },
    });
    for _ in 0..100 {
        let started = Instant::now();
        let messages = frames.frame(&app, std::slice::from_ref(&wheel), started);
        for m in messages {
            let _ = app.update(m);
        }
    }
    frames.report("scrolling a 10,000-line diff (3 lines a frame, 100 frames)");
}

fn main() {
    let mut frames = Frames::new();
    streaming(&mut frames);
    scrolling(&mut frames);
}
