//! Batched review of a run's change set: every hunk accepted or rejected, then apply the
//! accepted ones in one `_trellis/review apply`; undo (and redo) the apply; comments on
//! single lines, sent as `file:line` feedback with `_trellis/requestChanges`.

use std::collections::BTreeMap;

use iced::widget::text::LineHeight;
use iced::widget::{
    Column, button, column, container, mouse_area, rich_text, row, rule, scrollable, space, span,
    text, text_input,
};
use iced::{Color, Element, Fill, Font, Length, Padding};

use super::Message;
use crate::acp::SessionId;
use crate::acp::review::{ChangeSet, FileHunks, Hunk, LineKind};

/// The change set under review and the choice per hunk.
#[derive(Clone, Debug)]
pub struct Review {
    /// The session it belongs to.
    pub session: SessionId,
    /// The run.
    pub run: String,
    /// Its state (`open`, `applied`, `undone`, `rejected`, …).
    pub state: String,
    /// The change set.
    pub change_set: ChangeSet,
    /// Per file, per hunk: accepted.
    pub accepted: Vec<Vec<bool>>,
    /// The hunk under the keyboard cursor: (file, hunk).
    pub cursor: (usize, usize),
    /// The line under the cursor, in the cursor's hunk (what a comment attaches to).
    pub line: usize,
    /// What the last action did.
    pub note: String,
    /// The diff's scroll position and visible height (from the scrollable), to build only
    /// the hunks near the view.
    pub scroll: (f32, f32),
    /// Comments per line, (file, hunk, line in the hunk) → text: a request for changes.
    pub comments: BTreeMap<(usize, usize, usize), String>,
    /// The agent takes requests for changes (`_trellis/requestChanges`).
    pub can_request: bool,
}

/// Where line `at` of hunk `h` is: its line number in the new file (in the old one for a
/// removed line), and whether it was removed.
pub fn line_number(h: &Hunk, at: usize) -> (usize, bool) {
    let (mut old, mut new) = (h.old_start, h.new_start);
    for l in h.lines.iter().take(at) {
        match l.kind {
            LineKind::Context => {
                old += 1;
                new += 1;
            }
            LineKind::Removed => old += 1,
            LineKind::Added => new += 1,
        }
    }
    match h.lines.get(at).map(|l| l.kind) {
        Some(LineKind::Removed) => (old, true),
        _ => (new, false),
    }
}

/// A diff line's sign: `+`, `-` or a space.
fn sign(kind: LineKind) -> char {
    match kind {
        LineKind::Added => '+',
        LineKind::Removed => '-',
        LineKind::Context => ' ',
    }
}

/// The first changed line of a hunk (where a comment goes when no line was chosen).
fn first_change(h: &Hunk) -> usize {
    h.lines
        .iter()
        .position(|l| l.kind != LineKind::Context)
        .unwrap_or(0)
}

/// A diff line, as the link of its text: a click chooses it.
#[derive(Clone, Copy, Debug, PartialEq)]
struct LineAt {
    file: usize,
    hunk: usize,
    line: usize,
}

impl LineAt {
    fn select(self) -> Message {
        Message::SelectLine {
            file: self.file,
            hunk: self.hunk,
            line: self.line,
        }
    }
}

/// The widget id of a diff line (a click chooses it for a comment).
pub fn line_id(file: usize, hunk: usize, line: usize) -> String {
    format!("line-{file}-{hunk}-{line}")
}

/// The widget id of a hunk's comment box.
pub fn comment_id(file: usize, hunk: usize) -> String {
    format!("comment-{file}-{hunk}")
}

/// Fixed heights (logical pixels) of the diff's parts, so hunks out of view can stand in as
/// empty space of the same height: a file's title, a hunk's header, one diff line.
const TITLE_H: f32 = 24.0;
const HEADER_H: f32 = 34.0;
const LINE_H: f32 = 18.0;
const COMMENT_H: f32 = 32.0;
/// Spacing between the diff's items, and inside a hunk; a hunk's padding.
const GAP: f32 = 10.0;
const INNER_GAP: f32 = 4.0;
const PAD: f32 = 8.0;
/// The width of the diff lines' gutter (a click there chooses the line).
const GUTTER_W: f32 = 14.0;
/// Hunks this far outside the visible part are still built (smooth scrolling).
const MARGIN: f32 = 400.0;

/// The height of a hunk of `lines` lines (with its comment box).
fn hunk_height(lines: usize) -> f32 {
    2.0 * PAD + HEADER_H + 2.0 * INNER_GAP + LINE_H * lines as f32 + COMMENT_H
}

/// The widget id of a hunk's accept (`accept`) or reject (`reject`) button's container.
pub fn hunk_button_id(what: &str, file: usize, hunk: usize) -> String {
    format!("{what}-{file}-{hunk}")
}

impl Review {
    /// Every hunk accepted to begin with.
    pub fn new(session: SessionId, run: String, state: String, change_set: ChangeSet) -> Self {
        let accepted = change_set
            .files
            .iter()
            .map(|f| vec![true; f.hunks.len()])
            .collect();
        Self {
            session,
            run,
            state,
            change_set,
            accepted,
            line: 0,
            cursor: (0, 0),
            note: String::new(),
            scroll: (0.0, 2000.0),
            comments: BTreeMap::new(),
            can_request: false,
        }
        .with_line_at_first_change()
    }

    fn hunk(&self, file: usize, hunk: usize) -> Option<&Hunk> {
        self.change_set.files.get(file)?.hunks.get(hunk)
    }

    fn with_line_at_first_change(mut self) -> Self {
        let (f, h) = self.cursor;
        self.line = self.hunk(f, h).map_or(0, first_change);
        self
    }

    /// The line a comment on hunk (`file`, `hunk`) attaches to: the chosen one in the
    /// cursor's hunk, else the hunk's first change.
    pub fn comment_line(&self, file: usize, hunk: usize) -> usize {
        if self.cursor == (file, hunk) {
            self.line
        } else {
            self.hunk(file, hunk).map_or(0, first_change)
        }
    }

    /// Chooses line `line` of hunk (`file`, `hunk`) (the cursor moves there).
    pub fn select_line(&mut self, file: usize, hunk: usize, line: usize) {
        if self.hunk(file, hunk).is_some_and(|h| line < h.lines.len()) {
            self.cursor = (file, hunk);
            self.line = line;
        }
    }

    /// Sets the comment on the line a comment on hunk (`file`, `hunk`) attaches to (empty:
    /// no comment); the cursor moves there.
    pub fn comment(&mut self, file: usize, hunk: usize, text: String) {
        let line = self.comment_line(file, hunk);
        self.select_line(file, hunk, line);
        if text.trim().is_empty() {
            self.comments.remove(&(file, hunk, line));
        } else {
            self.comments.insert((file, hunk, line), text);
        }
    }

    /// Moves the line cursor `by` lines, within the hunk and on into the next or previous.
    pub fn move_line(&mut self, by: i32) {
        let (f, h) = self.cursor;
        let len = self.hunk(f, h).map_or(0, |h| h.lines.len());
        let to = self.line as i64 + i64::from(by);
        if to >= 0 && (to as usize) < len {
            self.line = to as usize;
            return;
        }
        let before = self.cursor;
        self.move_cursor(by.signum());
        if self.cursor != before {
            let (f, h) = self.cursor;
            let len = self.hunk(f, h).map_or(0, |h| h.lines.len());
            self.line = if by > 0 { 0 } else { len.saturating_sub(1) };
        }
    }

    /// Accepts or rejects one hunk.
    pub fn set(&mut self, file: usize, hunk: usize, accept: bool) {
        if let Some(h) = self.accepted.get_mut(file).and_then(|f| f.get_mut(hunk)) {
            *h = accept;
            self.put_cursor((file, hunk));
        }
    }

    /// Puts the cursor on a hunk (its first change) unless it is there.
    fn put_cursor(&mut self, at: (usize, usize)) {
        if self.cursor != at {
            self.cursor = at;
            self.line = self.hunk(at.0, at.1).map_or(0, first_change);
        }
    }

    /// All hunks in order, as (file, hunk).
    fn positions(&self) -> Vec<(usize, usize)> {
        self.accepted
            .iter()
            .enumerate()
            .flat_map(|(f, hs)| (0..hs.len()).map(move |h| (f, h)))
            .collect()
    }

    /// Moves the cursor `by` hunks (clamped).
    pub fn move_cursor(&mut self, by: i32) {
        let all = self.positions();
        let Some(at) = all.iter().position(|p| *p == self.cursor) else {
            if let Some(first) = all.first() {
                self.put_cursor(*first);
            }
            return;
        };
        let to = (at as i64 + i64::from(by)).clamp(0, all.len() as i64 - 1);
        if let Some(p) = all.get(to as usize) {
            self.put_cursor(*p);
        }
    }

    /// Accepts or rejects the hunk under the cursor and moves on.
    pub fn mark(&mut self, accept: bool) {
        let (f, h) = self.cursor;
        self.set(f, h, accept);
        self.move_cursor(1);
    }

    /// The accepted hunks, as `apply`'s `accept`: a file with every hunk accepted whole,
    /// one with none left out (rejected).
    pub fn accepted(&self) -> Vec<FileHunks> {
        self.change_set
            .files
            .iter()
            .zip(&self.accepted)
            .filter_map(|(f, acc)| {
                let chosen: Vec<usize> = f
                    .hunks
                    .iter()
                    .zip(acc)
                    .filter(|(_, a)| **a)
                    .map(|(h, _)| h.index)
                    .collect();
                if acc.iter().all(|a| *a) {
                    Some(FileHunks {
                        file: f.path.clone(),
                        hunks: None,
                    })
                } else if chosen.is_empty() {
                    None
                } else {
                    Some(FileHunks {
                        file: f.path.clone(),
                        hunks: Some(chosen),
                    })
                }
            })
            .collect()
    }

    /// Counts: (accepted, all).
    pub fn counts(&self) -> (usize, usize) {
        let all = self.accepted.iter().map(Vec::len).sum();
        let yes = self.accepted.iter().flatten().filter(|a| **a).count();
        (yes, all)
    }

    /// Whether any hunk has a comment.
    pub fn has_comments(&self) -> bool {
        self.comments.values().any(|c| !c.trim().is_empty())
    }

    /// The comments as a request for changes: one line each, `file:line` (`file:line
    /// (old)` for a removed line), the line's text, the comment.
    pub fn feedback(&self) -> String {
        let mut out = format!("Review comments on the change set of run {}:\n", self.run);
        for ((fi, hi, li), comment) in &self.comments {
            let comment = comment.trim();
            let Some(f) = self.change_set.files.get(*fi) else {
                continue;
            };
            let Some((h, l)) = f.hunks.get(*hi).and_then(|h| Some((h, h.lines.get(*li)?))) else {
                continue;
            };
            if comment.is_empty() {
                continue;
            }
            let (n, removed) = line_number(h, *li);
            let sign = sign(l.kind);
            let old = if removed { " (old)" } else { "" };
            out.push_str(&format!(
                "- {}:{n}{old} `{sign} {}`: {comment}\n",
                f.path,
                l.text.trim_end()
            ));
        }
        out
    }

    /// How line `line` of hunk (`file`, `hunk`) is shown: a gutter (`*` when it has a
    /// comment), its sign (`+`, `-` or a space) and its text.
    pub fn line_label(&self, file: usize, hunk: usize, line: usize) -> String {
        let Some(l) = self.hunk(file, hunk).and_then(|h| h.lines.get(line)) else {
            return String::new();
        };
        let sign = sign(l.kind);
        let gutter = if self.comments.contains_key(&(file, hunk, line)) {
            '*'
        } else {
            ' '
        };
        format!("{gutter}{sign} {}", l.text)
    }

    /// The review view.
    pub fn view(&self, dark: bool) -> Element<'_, Message> {
        let (yes, all) = self.counts();
        // `open` (or `changes_requested`) until applied, rejected or undone.
        let pending = !matches!(
            self.state.as_str(),
            "applied" | "undone" | "rejected" | "unchanged" | "revising"
        );
        let head = row![
            text(format!(
                "Change set of run {} — {} · {yes} of {all} hunks accepted",
                super::session::short(&self.run),
                self.state
            ))
            .width(Fill),
            button("Apply accepted")
                .on_press_maybe(pending.then_some(Message::ApplyReview))
                .style(button::success),
            button("Undo").on_press_maybe(
                matches!(self.state.as_str(), "applied" | "undone").then_some(Message::UndoReview)
            ),
            button("Request changes").on_press_maybe(
                (pending && self.can_request && self.has_comments())
                    .then_some(Message::RequestChanges)
            ),
            button("Close")
                .on_press(Message::CloseReview)
                .style(button::secondary),
        ]
        .spacing(8);
        // Only what is near the visible part is built; the rest is space of its height.
        let (top, height) = self.scroll;
        let (from, to) = (top - MARGIN, top + height + MARGIN);
        let mut body = Column::new().spacing(GAP);
        let mut y = 0.0;
        let mut near = |h: f32| {
            let seen = y + h >= from && y <= to;
            y += h + GAP;
            seen
        };
        for (fi, f) in self.change_set.files.iter().enumerate() {
            body = body.push(if near(TITLE_H) {
                container(
                    text(format!(
                        "{} ({}, +{} −{})",
                        f.path, f.status, f.additions, f.deletions
                    ))
                    .font(Font::MONOSPACE)
                    .size(15),
                )
                .height(TITLE_H)
                .into()
            } else {
                Element::from(space().height(TITLE_H))
            });
            for (hi, h) in f.hunks.iter().enumerate() {
                let size = hunk_height(h.lines.len());
                if !near(size) {
                    body = body.push(space().height(size));
                    continue;
                }
                let accepted = self
                    .accepted
                    .get(fi)
                    .and_then(|a| a.get(hi))
                    .copied()
                    .unwrap_or(true);
                body = body.push(self.hunk_view(fi, hi, h, accepted, pending, dark));
            }
        }
        column![
            head,
            (!self.note.is_empty()).then(|| text(&self.note)),
            rule::horizontal(1),
            scrollable(body.padding([0, 12]))
                .on_scroll(|v| Message::ReviewScrolled(v.absolute_offset().y, v.bounds().height))
                .height(Fill),
        ]
        .spacing(8)
        .into()
    }

    fn hunk_view<'a>(
        &self,
        fi: usize,
        hi: usize,
        h: &'a Hunk,
        accepted: bool,
        pending: bool,
        dark: bool,
    ) -> Element<'a, Message> {
        let lines = self.hunk_lines(fi, hi, h, dark);
        let mark = |what: &str, label: &'static str, accept: bool| {
            let b = button(label).on_press_maybe(pending.then_some(Message::SetHunk {
                file: fi,
                hunk: hi,
                accept,
            }));
            let b = if accept == accepted {
                b.style(if accept {
                    button::success
                } else {
                    button::danger
                })
            } else {
                b.style(button::secondary)
            };
            container(b).id(hunk_button_id(what, fi, hi))
        };
        let cursor = if self.cursor == (fi, hi) { "▶ " } else { "" };
        let header = row![
            text(format!(
                "{cursor}hunk {} · @@ -{} +{} @@ · {}",
                hi + 1,
                h.old_start,
                h.new_start,
                if accepted { "accepted" } else { "rejected" }
            ))
            .width(Fill),
            mark("accept", "Accept", true),
            mark("reject", "Reject", false),
        ]
        .spacing(6)
        .height(HEADER_H)
        .align_y(iced::Center);
        let comment = self.comment_box(fi, hi, h);
        // A rule above each hunk instead of a bordered box: a box is one anti-aliased quad
        // of the hunk's size, filled again on every frame the diff scrolls.
        column![
            rule::horizontal(1),
            container(column![header, lines, comment].spacing(INNER_GAP)).padding(Padding {
                top: PAD - 1.0,
                ..Padding::new(PAD)
            }),
        ]
        .width(Fill)
        .height(Length::Fixed(hunk_height(h.lines.len())))
        .into()
    }

    /// A hunk's lines: one paragraph with a span per line and a gutter of click targets.
    fn hunk_lines<'a>(
        &self,
        fi: usize,
        hi: usize,
        h: &'a Hunk,
        dark: bool,
    ) -> Element<'a, Message> {
        let (add, del) = if dark {
            (
                Color::from_rgb(0.45, 0.85, 0.5),
                Color::from_rgb(0.95, 0.45, 0.45),
            )
        } else {
            (
                Color::from_rgb(0.1, 0.5, 0.15),
                Color::from_rgb(0.7, 0.1, 0.1),
            )
        };
        let chosen = self.comment_line(fi, hi);
        let here = self.cursor == (fi, hi);
        // The lines are one paragraph (a span per line): laying out and drawing one text per
        // hunk instead of one per line is what keeps scrolling a long diff within a frame
        // (tiny-skia prepares the font's hinting once per paragraph, and each widget layer
        // clears a window-sized clip mask, so no stacking either). A click on a line's text
        // (a link) or on its gutter chooses it; the chosen line is highlighted in both.
        let highlight = |t: &iced::Theme| t.extended_palette().background.strong.color;
        let strong = highlight(&if dark {
            iced::Theme::Dark
        } else {
            iced::Theme::Light
        });
        let mut spans = Vec::with_capacity(h.lines.len());
        let mut gutter = Column::new().width(GUTTER_W);
        for (li, l) in h.lines.iter().enumerate() {
            let color = match l.kind {
                LineKind::Added => Some(add),
                LineKind::Removed => Some(del),
                LineKind::Context => None,
            };
            let chosen_here = here && li == chosen;
            let mut label = self.line_label(fi, hi, li);
            if li + 1 < h.lines.len() {
                label.push('\n');
            }
            let at = LineAt {
                file: fi,
                hunk: hi,
                line: li,
            };
            spans.push(
                span(label)
                    .color_maybe(color)
                    .link(at)
                    .background_maybe(chosen_here.then_some(strong)),
            );
            let mut target = container(space())
                .height(LINE_H)
                .width(Fill)
                .id(line_id(fi, hi, li));
            if chosen_here {
                target = target.style(move |t: &iced::Theme| {
                    container::Style::default().background(highlight(t))
                });
            }
            gutter = gutter.push(mouse_area(target).on_press(at.select()));
        }
        row![
            gutter,
            rich_text(spans)
                .on_link_click(LineAt::select)
                .font(Font::MONOSPACE)
                .size(13)
                .line_height(LineHeight::Absolute(LINE_H.into()))
                .width(Fill),
        ]
        .height(LINE_H * h.lines.len() as f32)
        .into()
    }

    /// The comment box of the cursor's hunk; in the other hunks, the count of comments.
    fn comment_box<'a>(&self, fi: usize, hi: usize, h: &'a Hunk) -> Element<'a, Message> {
        let here = self.cursor == (fi, hi);
        let chosen = self.comment_line(fi, hi);
        if here {
            let (n, removed) = line_number(h, chosen);
            let place = format!(
                "Comment on {}:{n}{} (click a line to choose it; Request changes sends the comments)",
                self.change_set
                    .files
                    .get(fi)
                    .map_or("", |f| f.path.as_str()),
                if removed { " (old)" } else { "" }
            );
            text_input(
                &place,
                self.comments
                    .get(&(fi, hi, chosen))
                    .map_or("", String::as_str),
            )
            .id(comment_id(fi, hi))
            .on_input(move |text| Message::Comment {
                file: fi,
                hunk: hi,
                text,
            })
            .size(13)
            .padding(6)
            .into()
        } else {
            // Only the cursor's hunk has a comment box (a click on a line moves the cursor
            // there): a box and its hint in every hunk would be drawn again on each frame
            // of a scroll.
            let n = self
                .comments
                .range((fi, hi, 0)..=(fi, hi, usize::MAX))
                .count();
            container((n > 0).then(|| {
                text(format!("{n} line comment(s) — click a line to see or edit")).size(13)
            }))
            .height(COMMENT_H)
            .into()
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;
    use crate::acp::review::{FileChange, Hunk};

    fn set() -> ChangeSet {
        let hunk = |index| Hunk {
            index,
            old_start: 1,
            new_start: 1,
            lines: Vec::new(),
        };
        let file = |path: &str, n| FileChange {
            path: path.into(),
            status: "modified".into(),
            additions: 1,
            deletions: 1,
            hunks: (0..n).map(hunk).collect(),
        };
        ChangeSet {
            run: "r".into(),
            files: vec![file("a.md", 2), file("b.md", 1), file("c.md", 1)],
        }
    }

    #[test]
    fn accepted_hunks_become_the_apply_selection() {
        let mut r = Review::new(SessionId::new("s"), "r".into(), "open".into(), set());
        assert_eq!(r.counts(), (4, 4));
        r.set(0, 1, false);
        r.set(2, 0, false);
        let a = r.accepted();
        assert_eq!(a.len(), 2, "{a:?}");
        assert_eq!(a[0].file, "a.md");
        assert_eq!(a[0].hunks, Some(vec![0]));
        assert_eq!(a[1].file, "b.md");
        assert_eq!(a[1].hunks, None);
        // The keyboard cursor walks the hunks across files.
        r.cursor = (0, 0);
        r.move_cursor(2);
        assert_eq!(r.cursor, (1, 0));
        r.mark(false);
        assert_eq!(r.cursor, (2, 0));
        r.move_cursor(10);
        assert_eq!(r.cursor, (2, 0));
        assert_eq!(r.counts(), (1, 4));
    }
}
