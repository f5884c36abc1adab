//! The workspace's files: a tree (directories read when expanded) and a read-only code view
//! with syntax highlighting (`iced::highlighter`, syntect's grammars through two-face).

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use iced::widget::text_editor::{Action, Content, Motion};
use iced::widget::{Column, button, column, scrollable, text};
use iced::{Element, Fill, Font};

use super::Message;
use crate::error::{Error, Result};

/// Directories never shown.
const HIDDEN: [&str; 4] = [".git", "target", "node_modules", ".trellis"];
/// Files larger than this are not opened.
const MAX_FILE: u64 = 2 * 1024 * 1024;

/// The open file.
#[derive(Debug)]
pub struct OpenFile {
    /// Its path.
    pub path: PathBuf,
    /// Its text.
    pub content: Content,
    /// The line asked for (1-based).
    pub line: Option<u32>,
}

/// The file tree and the open file.
#[derive(Debug)]
pub struct Files {
    root: PathBuf,
    expanded: BTreeSet<PathBuf>,
    listing: BTreeMap<PathBuf, Result<Vec<(String, bool)>, String>>,
    /// The file in the code view.
    pub open: Option<OpenFile>,
}

fn read_dir(dir: &Path) -> Result<Vec<(String, bool)>, String> {
    let rd = std::fs::read_dir(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let mut v: Vec<(String, bool)> = rd
        .filter_map(std::result::Result::ok)
        .map(|e| {
            let dir = e.file_type().is_ok_and(|t| t.is_dir());
            (e.file_name().to_string_lossy().into_owned(), dir)
        })
        .filter(|(n, d)| !(*d && HIDDEN.contains(&n.as_str())))
        .collect();
    // Directories first, then by name.
    v.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
    Ok(v)
}

impl Files {
    /// The tree of `root`, its top level read.
    pub fn new(root: PathBuf) -> Self {
        let mut f = Self {
            expanded: BTreeSet::from([root.clone()]),
            listing: BTreeMap::new(),
            root,
            open: None,
        };
        f.reload();
        f
    }

    /// Reads the expanded directories and the open file again (after an apply or undo).
    pub fn reload(&mut self) {
        self.listing = self
            .expanded
            .iter()
            .map(|d| (d.clone(), read_dir(d)))
            .collect();
        if let Some(o) = &self.open {
            let (path, line) = (o.path.clone(), o.line);
            if self.open(&path, line).is_err() {
                self.open = None;
            }
        }
    }

    /// Expands or collapses `dir`.
    pub fn toggle(&mut self, dir: &Path) {
        if !self.expanded.remove(dir) {
            self.expanded.insert(dir.to_owned());
            self.listing.insert(dir.to_owned(), read_dir(dir));
        } else {
            self.listing.remove(dir);
        }
    }

    /// Opens `path` (relative paths are the workspace's) at `line`.
    pub fn open(&mut self, path: &Path, line: Option<u32>) -> Result<()> {
        let path = if path.is_absolute() {
            path.to_owned()
        } else {
            self.root.join(path)
        };
        let file = |source| Error::File {
            path: path.clone(),
            source,
        };
        let len = std::fs::metadata(&path).map_err(file)?.len();
        if len > MAX_FILE {
            return Err(file(std::io::Error::other(format!(
                "{len} bytes: too large to show"
            ))));
        }
        let bytes = std::fs::read(&path).map_err(file)?;
        let mut content = Content::with_text(&String::from_utf8_lossy(&bytes));
        if let Some(n) = line {
            for _ in 1..n {
                content.perform(Action::Move(Motion::Down));
            }
        }
        self.open = Some(OpenFile {
            path,
            content,
            line,
        });
        Ok(())
    }

    /// Selection and scrolling in the code view; edits are dropped (it is read-only).
    pub fn act(&mut self, action: Action) {
        if let Some(o) = &mut self.open
            && !action.is_edit()
        {
            o.content.perform(action);
        }
    }

    /// The tree.
    pub fn tree_view(&self) -> Element<'_, Message> {
        let mut rows = Vec::new();
        self.push_dir(&mut rows, &self.root, 0);
        scrollable(Column::with_children(rows).spacing(1).width(Fill))
            .height(Fill)
            .into()
    }

    fn push_dir<'a>(&'a self, rows: &mut Vec<Element<'a, Message>>, dir: &Path, depth: usize) {
        match self.listing.get(dir) {
            Some(Ok(entries)) => {
                for (name, is_dir) in entries {
                    let path = dir.join(name);
                    let indent = "  ".repeat(depth);
                    let open = self.expanded.contains(&path);
                    let label = if *is_dir {
                        format!("{indent}{} {name}/", if open { "▾" } else { "▸" })
                    } else {
                        format!("{indent}  {name}")
                    };
                    let msg = if *is_dir {
                        Message::ToggleDir(path.clone())
                    } else {
                        Message::OpenFile(path.clone(), None)
                    };
                    rows.push(
                        button(text(label).size(13).font(Font::MONOSPACE))
                            .on_press(msg)
                            .padding([1, 4])
                            .width(Fill)
                            .style(button::text)
                            .into(),
                    );
                    if *is_dir && open {
                        self.push_dir(rows, &path, depth + 1);
                    }
                }
            }
            Some(Err(e)) => {
                rows.push(text(format!("(cannot read: {e})")).size(13).into());
            }
            None => {}
        }
    }

    /// The code view.
    pub fn code_view(&self, dark: bool) -> Element<'_, Message> {
        let Some(o) = &self.open else {
            return text("Open a file from the tree, or a file:line from a tool call.")
                .size(13)
                .into();
        };
        let ext = o
            .path
            .extension()
            .and_then(|e| e.to_str())
            .unwrap_or("txt")
            .to_owned();
        let theme = if dark {
            iced::highlighter::Theme::Base16Mocha
        } else {
            iced::highlighter::Theme::InspiredGitHub
        };
        let rel = o.path.strip_prefix(&self.root).unwrap_or(&o.path);
        let title = match o.line {
            Some(l) => format!("{}:{l}", rel.display()),
            None => rel.display().to_string(),
        };
        column![
            text(title).size(13).font(Font::MONOSPACE),
            iced::widget::text_editor(&o.content)
                .on_action(Message::Editor)
                .font(Font::MONOSPACE)
                .size(13)
                .height(Fill)
                .highlight(&ext, theme),
        ]
        .spacing(4)
        .into()
    }
}
