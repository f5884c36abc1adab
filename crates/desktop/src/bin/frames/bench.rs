//! The benchmark (tiny-skia's renderer; see `frames.rs`).

use std::time::{Duration, Instant};

use iced::advanced::renderer::Headless;
use iced::{Color, Font, Pixels, Point, Rectangle, Size, Theme, mouse};
use iced_test::core::Event;
use iced_test::core::clipboard;
use iced_test::core::theme::Base;
use iced_test::runtime::user_interface::{Cache, UserInterface};
use iced_tiny_skia::Layer;
use iced_tiny_skia::graphics::{Viewport, damage};
use trellis_desktop::acp::review::{ChangeSet, FileChange, Hunk, HunkLine, LineKind};
use trellis_desktop::acp::{self, Event as AcpEvent, SessionId, Update};
use trellis_desktop::app::{App, Message, Review};

const SIZE: Size = Size::new(1400.0, 860.0);

/// How a frame's pixels are made.
#[derive(Clone, Copy, PartialEq)]
enum Raster {
    /// Only what changed since the last frame (the window's compositor).
    Damage,
    /// The whole window.
    Full,
}

struct Frames {
    renderer: iced::Renderer,
    cache: Cache,
    raster: Raster,
    /// The kept buffer and clip mask, and the last frame's layers (`Damage`).
    pixmap: tiny_skia::Pixmap,
    clip: tiny_skia::Mask,
    last: Option<Vec<Layer>>,
    times: Vec<Duration>,
    /// Per frame, the share of the window rasterised.
    area: Vec<f32>,
}

impl Frames {
    fn new(raster: Raster) -> Self {
        let renderer = iced_test::futures::futures::executor::block_on(
            <iced::Renderer as Headless>::new(Font::DEFAULT, Pixels(16.0), Some("tiny-skia")),
        )
        .expect("a tiny-skia renderer");
        let (w, h) = (SIZE.width as u32, SIZE.height as u32);
        Self {
            renderer,
            cache: Cache::default(),
            raster,
            pixmap: tiny_skia::Pixmap::new(w, h).expect("a pixmap"),
            clip: tiny_skia::Mask::new(w, h).expect("a mask"),
            last: None,
            times: Vec::new(),
            area: Vec::new(),
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
        match self.raster {
            Raster::Full => {
                let _ = self.renderer.screenshot(
                    Size::new(SIZE.width as u32, SIZE.height as u32),
                    1.0,
                    base.background_color,
                );
                self.area.push(1.0);
            }
            Raster::Damage => self.present(base.background_color),
        }
        self.times.push(started.elapsed());
        messages
    }

    /// What `iced_tiny_skia::window::compositor::present` does with a buffer of age 1.
    fn present(&mut self, background: Color) {
        let window = Rectangle::with_size(SIZE);
        let layers = self.renderer.layers();
        let damage = match &self.last {
            Some(last) => damage::diff(last, layers, |l| vec![l.bounds], Layer::damage),
            None => vec![window],
        };
        if damage.is_empty() {
            self.area.push(0.0);
            return;
        }
        self.last = Some(layers.to_vec());
        let damage = damage::group(damage, window);
        self.area.push(
            damage
                .iter()
                .filter_map(|d| d.intersection(&window))
                .map(|d| d.width * d.height)
                .sum::<f32>()
                / (SIZE.width * SIZE.height),
        );
        let viewport =
            Viewport::with_physical_size(Size::new(SIZE.width as u32, SIZE.height as u32), 1.0);
        self.renderer.draw(
            &mut self.pixmap.as_mut(),
            &mut self.clip,
            &viewport,
            &damage,
            background,
        );
    }

    fn report(&mut self, what: &str) {
        let mut t = std::mem::take(&mut self.times);
        let area = std::mem::take(&mut self.area);
        t.sort();
        let p = |q: f64| t[((t.len() - 1) as f64 * q).round() as usize].as_secs_f64() * 1000.0;
        let raster = match self.raster {
            Raster::Damage => "window",
            Raster::Full => "full",
        };
        println!(
            "{what} [{raster}]: {} frames, p50 {:.1} ms, p99 {:.1} ms, max {:.1} ms; {:.0} % of the window rasterised on average",
            t.len(),
            p(0.5),
            p(0.99),
            p(1.0),
            100.0 * area.iter().sum::<f32>() / area.len().max(1) as f32
        );
        self.last = None;
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

/// Arguments choose what runs (all by default): `window`, `full`, `streaming`, `scrolling`.
pub fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let wanted = |what: &str, among: &[&str]| {
        !args.iter().any(|a| among.contains(&a.as_str())) || args.iter().any(|a| a == what)
    };
    let modes = ["window", "full"];
    let runs = ["streaming", "scrolling"];
    for (raster, name) in [(Raster::Damage, "window"), (Raster::Full, "full")] {
        if !wanted(name, &modes) {
            continue;
        }
        let mut frames = Frames::new(raster);
        if wanted("streaming", &runs) {
            streaming(&mut frames);
        }
        if wanted("scrolling", &runs) {
            scrolling(&mut frames);
        }
    }
}
