//! Edits written as SEARCH/REPLACE blocks in an answer's text (`edit_format: blocks`).
//!
//! A small model copies code into a block of plain lines more faithfully than into a JSON
//! string, and answers in free text without a tool grammar. Each block —
//!
//! ```text
//! path/to/file.py
//! <<<<<<< SEARCH
//! the lines to replace
//! =======
//! the lines that replace them
//! >>>>>>> REPLACE
//! ```
//!
//! — is matched against the file and becomes an ordinary `edit_file` call of the assistant
//! message (recorded, approved, shown in the review and resumed like any other call). The
//! SEARCH part is matched exactly, then line by line ignoring trailing whitespace, then
//! ignoring indentation (the replacement re-indented by the difference). A replacement that
//! breaks the file's syntax (tree-sitter finds an error the file did not have) is refused. A block that
//! matches nowhere, or more than once, is not applied: the model is told why, with the
//! file's closest lines to copy from.
//!
//! An answer without markers may still say the same thing in two labelled fences
//! ("Search for:" / "Replace with:") or in one fence with `# Original code` / `# Modified code`
//! parts: [`labelled`] reads those as blocks.

use std::path::Path;

use serde_json::json;
use trellis_llm::{Completion, Message, ToolCall, ToolSpec};

use super::indent::{indent, reindent};
use super::{AgentOutcome, AgentReport, AgentRun, Saved};

mod focus;
pub mod grammar;
mod labelled;
use crate::output::StageReport;
use crate::roles::{BLOCKS_TOOL, EditFormat};

/// One block as written.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Block {
    /// The file it names (the previous block's when it names none).
    pub path: Option<String>,
    /// The lines to replace.
    pub search: String,
    /// The lines that replace them.
    pub replace: String,
}

/// What an answer's blocks came to: the calls to make and the blocks that cannot be made.
#[derive(Debug, Default)]
pub(super) struct Edits {
    /// One `edit_file` call per block that matched its file once.
    pub calls: Vec<ToolCall>,
    /// Why each other block was not applied.
    pub problems: Vec<String>,
    /// The calls replace whole definitions written without blocks ([`super::defs`]).
    pub whole: bool,
    /// The answer rewrote the excerpt it was shown ([`focus`]).
    pub rewrite: bool,
}

fn marker(line: &str, c: char) -> bool {
    let t = line.trim();
    let n = t.chars().take_while(|&x| x == c).count();
    n >= 5
        && t[n..]
            .trim()
            .chars()
            .all(|x| x.is_ascii_alphabetic() || x == ' ')
}

fn is_search(line: &str) -> bool {
    marker(line, '<')
}

fn is_divider(line: &str) -> bool {
    let t = line.trim();
    t.len() >= 5 && t.chars().all(|c| c == '=')
}

fn is_replace(line: &str) -> bool {
    marker(line, '>')
}

/// The file a line before a block names, if it looks like a path: `path.py`, `` `path.py` ``,
/// `**path.py**`, `File: path.py`, `# path.py:`, `<path.py>`, and `path.py:10-20` as the
/// retrieved code's headings write it; in a line that is not one path as a whole
/// (`<a.py, lines 10-20>`, `In a/b.py:`), its first word that looks like a file's path.
fn path_in(line: &str) -> Option<String> {
    let mut t = line.trim();
    for prefix in ["#", "File:", "file:", "Path:", "path:"] {
        t = t.trim_start_matches(prefix).trim();
    }
    clean_path(t).or_else(|| {
        t.split(|c: char| c.is_whitespace() || c == ',')
            .filter_map(clean_path)
            .find(|p| p.contains('/') || p.rsplit_once('.').is_some_and(|(_, ext)| is_ext(ext)))
    })
}

/// A file extension as paths have them: 1 to 5 letters or digits, a letter first.
fn is_ext(ext: &str) -> bool {
    (1..=5).contains(&ext.len())
        && ext.starts_with(|c: char| c.is_ascii_alphabetic())
        && ext.chars().all(|c| c.is_ascii_alphanumeric())
}

/// `t` as a path, without the quotes, emphasis and brackets around it and a line range after
/// it, if it is one word with a `.` or a `/`.
fn clean_path(t: &str) -> Option<String> {
    let t = t
        .trim_matches(|c| matches!(c, '`' | '*' | '"' | '\'' | ':' | '<' | '>' | '(' | ')'))
        .trim();
    // A line range after the path (`a.py:10-20`, `a.py:10`).
    let t = match t.rsplit_once(':') {
        Some((p, lines)) if lines.chars().all(|c| c.is_ascii_digit() || c == '-') => p,
        _ => t,
    };
    let plausible = !t.is_empty()
        && !t.contains(char::is_whitespace)
        && (t.contains('.') || t.contains('/'))
        && !t.starts_with("```");
    plausible.then(|| t.trim_start_matches("./").to_owned())
}

/// The blocks of `text`, and a problem for each block left open.
pub(crate) fn parse(text: &str) -> (Vec<Block>, Vec<String>) {
    let lines: Vec<&str> = text.lines().collect();
    let mut blocks: Vec<Block> = Vec::new();
    let mut problems = Vec::new();
    let mut i = 0;
    while i < lines.len() {
        if !is_search(lines[i]) {
            i += 1;
            continue;
        }
        let named = lines[..i]
            .iter()
            .rev()
            .take(3)
            .map(|l| l.trim())
            .find(|l| !l.is_empty() && !l.starts_with("```"))
            .and_then(path_in);
        let path = named.or_else(|| blocks.last().and_then(|b| b.path.clone()));
        let Some(div) = (i + 1..lines.len()).find(|&j| is_divider(lines[j])) else {
            problems.push("an edit block has no `=======` line after its SEARCH part".into());
            break;
        };
        let Some(end) = (div + 1..lines.len()).find(|&j| is_replace(lines[j])) else {
            problems.push("an edit block has no `>>>>>>> REPLACE` line to end it".into());
            break;
        };
        blocks.push(Block {
            path,
            search: lines[i + 1..div].join("\n"),
            replace: lines[div + 1..end].join("\n"),
        });
        i = end + 1;
    }
    (blocks, problems)
}

/// `text` without its blocks (and the file names and fences around them): what the model
/// said about its change.
pub(crate) fn prose(text: &str) -> String {
    let lines: Vec<&str> = text.lines().collect();
    let mut keep = vec![true; lines.len()];
    let mut i = 0;
    while i < lines.len() {
        if is_search(lines[i]) {
            let end = (i..lines.len())
                .find(|&j| is_replace(lines[j]))
                .unwrap_or(lines.len() - 1);
            let mut start = i;
            while start > 0 && {
                let l = lines[start - 1].trim();
                l.starts_with("```") || path_in(l).is_some()
            } {
                start -= 1;
            }
            let mut stop = end;
            while stop + 1 < lines.len() && lines[stop + 1].trim().starts_with("```") {
                stop += 1;
            }
            keep[start..=stop].iter_mut().for_each(|k| *k = false);
            i = stop + 1;
        } else {
            i += 1;
        }
    }
    let kept: Vec<&str> = lines
        .iter()
        .zip(keep)
        .filter_map(|(l, k)| k.then_some(*l))
        .collect();
    kept.join("\n").trim().to_owned()
}

fn trim_blank_ends(lines: &[&str]) -> (usize, usize) {
    let start = lines.iter().position(|l| !l.trim().is_empty()).unwrap_or(0);
    let end = lines
        .iter()
        .rposition(|l| !l.trim().is_empty())
        .map_or(start, |e| e + 1);
    (start, end)
}

/// Where `search` (lines) occurs in `file` (lines) under `same`: the start of each match.
fn matches(file: &[&str], search: &[&str], same: impl Fn(&str, &str) -> bool) -> Vec<usize> {
    if search.is_empty() || search.len() > file.len() {
        return Vec::new();
    }
    (0..=file.len() - search.len())
        .filter(|&s| search.iter().zip(&file[s..]).all(|(a, b)| same(a, b)))
        .collect()
}

/// The exact `(old_string, new_string)` for a block's `search` and `replace` in `file`, or
/// why there is none (`path` names the file in the message): the SEARCH part as written, else
/// whitespace at line ends aside, else indentation aside, else merged into the region it was
/// most likely copied from ([`super::merge`]).
pub(crate) fn resolve(
    file: &str,
    path: &str,
    search: &str,
    replace: &str,
) -> Result<(String, String), String> {
    if search.trim().is_empty() {
        return Err(format!(
            "the block for `{path}` has an empty SEARCH part: copy the lines to replace from \
             the file into it"
        ));
    }
    if search.trim_end() == replace.trim_end() {
        return Err(format!(
            "the block for `{path}` changes nothing (its REPLACE part is its SEARCH part): \
             write the lines as they must become"
        ));
    }
    let several = |n: usize| {
        format!(
            "the SEARCH part of the block for `{path}` matches {n} places: add lines around \
             it so that it matches one"
        )
    };
    match file.matches(search).count() {
        1 => return Ok((search.to_owned(), replace.to_owned())),
        0 => {}
        n => return Err(several(n)),
    }
    let file_lines: Vec<&str> = file.split('\n').collect();
    let all: Vec<&str> = search.split('\n').collect();
    let (a, b) = trim_blank_ends(&all);
    let wanted = &all[a..b];
    let exact_ends = matches(&file_lines, wanted, |x, y| x.trim_end() == y.trim_end());
    let loose = matches(&file_lines, wanted, |x, y| x.trim() == y.trim());
    let (start, reindented) = match (exact_ends.as_slice(), loose.as_slice()) {
        ([s], _) => (*s, replace.to_owned()),
        ([], [s]) => {
            let from = indent(wanted[0]);
            let to = indent(file_lines[*s]);
            (*s, reindent(replace, from, to))
        }
        ([], []) => {
            // Not found as written: merged into the lines it was most likely copied from.
            if let Some(m) = super::merge::merge(&file_lines, wanted, replace) {
                let old = file_lines[m.start..m.end].join("\n");
                if file.matches(old.as_str()).count() == 1 {
                    return Ok((old, m.new));
                }
            }
            return Err(not_found(&file_lines, path, wanted));
        }
        ([], m) | (m, _) => return Err(several(m.len())),
    };
    let old = file_lines[start..start + wanted.len()].join("\n");
    Ok((old, reindented))
}

/// The message for a SEARCH part found nowhere: the file's lines around the line most like
/// its first line, numbered, to copy from.
fn not_found(file: &[&str], path: &str, wanted: &[&str]) -> String {
    let first = wanted.first().map_or("", |l| l.trim());
    let best = file
        .iter()
        .enumerate()
        .map(|(i, l)| (i, strsim::normalized_levenshtein(l.trim(), first)))
        .max_by(|x, y| x.1.total_cmp(&y.1));
    let mut msg = format!(
        "the SEARCH part of the block for `{path}` is not in the file: its lines must be \
         copied exactly from the file"
    );
    if let Some((i, score)) = best.filter(|b| b.1 >= 0.5) {
        let from = i.saturating_sub(2);
        let to = (i + wanted.len() + 3).min(file.len());
        msg.push_str(&format!(
            ". The closest lines ({}% like its first line), lines {}-{}:\n",
            (score * 100.0).round(),
            from + 1,
            to
        ));
        for (n, l) in file.iter().enumerate().take(to).skip(from) {
            msg.push_str(&format!("{:>5}\t{l}\n", n + 1));
        }
    }
    msg
}

/// The blocks an answer wrote: how many became calls, why the others did not, its text.
#[derive(Debug)]
pub(super) struct Written {
    calls: usize,
    problems: Vec<String>,
    text: String,
    /// The answer rewrote the excerpt it was shown ([`focus`]).
    rewrite: bool,
}

impl AgentRun {
    /// For a `blocks` role, the blocks of an answer without tool calls become its
    /// `edit_file` calls (in `completion`); `None` when the answer wrote no block.
    pub(super) fn take_blocks(
        &self,
        st: &Saved,
        completion: &mut Completion,
        turn: u32,
    ) -> Option<Written> {
        if self.role.edit_format != EditFormat::Blocks || !completion.tool_calls.is_empty() {
            return None;
        }
        let edits = self.edits(&st.messages, &completion.text, turn);
        if edits.calls.is_empty() && edits.problems.is_empty() {
            return None;
        }
        completion.tool_calls = edits.calls;
        Some(Written {
            calls: completion.tool_calls.len(),
            problems: edits.problems,
            text: completion.text.clone(),
            rewrite: edits.rewrite,
        })
    }

    /// The grammar this turn's answer is held to ([`grammar`]; role setting
    /// `block_grammar`): for a `blocks` role offered no tool whose activation has not yet
    /// made a change — once one applied, the next answer is its account, in free text.
    pub(super) fn block_grammar(&self, st: &Saved, tools: &[ToolSpec]) -> Option<String> {
        if self.role.edit_format != EditFormat::Blocks
            || !self.role.block_grammar
            || self.free_text
            || !tools.is_empty()
            || st.messages.iter().any(|m| !m.tool_calls.is_empty())
        {
            return None;
        }
        let files: Vec<(String, Vec<Vec<String>>)> = grammar::shown(&st.messages)
            .into_iter()
            .filter_map(|(path, ranges)| {
                let text = self.file(&path).ok()?;
                let lines: Vec<&str> = text.lines().collect();
                let runs: Vec<Vec<String>> = ranges
                    .iter()
                    .filter_map(|&(a, b)| {
                        let b = b.min(lines.len());
                        (a <= b).then(|| lines[a - 1..b].iter().map(|l| (*l).to_owned()).collect())
                    })
                    .collect();
                (!runs.is_empty()).then_some((path, runs))
            })
            .collect();
        grammar::grammar(&files)
    }

    /// The text of workspace file `path`.
    pub(super) fn file(&self, path: &str) -> Result<String, String> {
        self.env
            .workspace
            .resolve(path)
            .map_err(|e| e.to_string())
            .and_then(|r| read(&r.abs, path))
    }

    /// A block whose file is not named, or not a file of the workspace, belongs to the one
    /// file of those the conversation shows (`messages`) where its SEARCH part is found.
    fn locate(&self, messages: &[Message], b: &Block) -> Result<(String, String, String), String> {
        if let Some(path) = &b.path
            && let Ok(text) = self.file(path)
        {
            let (old, new) = resolve(&text, path, &b.search, &b.replace)?;
            check_syntax(path, &text, &old, &new)?;
            return Ok((path.clone(), old, new));
        }
        let mut found = Vec::new();
        for path in shown_paths(messages) {
            if let Ok(text) = self.file(&path)
                && let Ok((old, new)) = resolve(&text, &path, &b.search, &b.replace)
            {
                found.push((path, old, new, text));
            }
        }
        if let [(path, old, new, text)] = found.as_slice() {
            check_syntax(path, text, old, new)?;
        }
        match (found.len(), &b.path) {
            (1, _) => {
                let (path, old, new, _) = found.remove(0);
                Ok((path, old, new))
            }
            (0, Some(path)) => Err(format!(
                "the block names `{path}`, which is not a file of the workspace, and its \
                 SEARCH part is in none of the files shown: use the path shown with the code"
            )),
            (0, None) => Err(
                "an edit block names no file, and its SEARCH part is in none \
                              of the files shown: write the file's path on the line before \
                              `<<<<<<< SEARCH`"
                    .into(),
            ),
            (_, _) => Err(format!(
                "an edit block's SEARCH part is in several files ({}): name the file on the \
                 line before `<<<<<<< SEARCH`",
                found
                    .iter()
                    .map(|f| f.0.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            )),
        }
    }

    pub(super) fn edits(&self, messages: &[Message], text: &str, turn: u32) -> Edits {
        let (mut blocks, mut problems) = parse(text);
        // A block written twice is applied once.
        let mut seen = Vec::new();
        blocks.retain(|b| {
            let new = !seen.contains(b);
            seen.push(b.clone());
            new
        });
        let unmarked = blocks.is_empty() && problems.is_empty();
        // A focused role's answer: its fence rewrites the excerpt it was shown ([`focus`]).
        if unmarked && let Some(rewrite) = self.rewrite(messages, text) {
            let (calls, problems) = match rewrite {
                Ok((path, old, new)) => (
                    vec![ToolCall {
                        id: format!("focus-{turn}"),
                        name: BLOCKS_TOOL.into(),
                        arguments: json!({"path": path, "old_string": old, "new_string": new})
                            .to_string(),
                    }],
                    Vec::new(),
                ),
                Err(p) => (Vec::new(), vec![p]),
            };
            return Edits {
                whole: false,
                rewrite: true,
                calls,
                problems,
            };
        }
        let mut calls = if unmarked {
            self.definitions(messages, text, turn)
        } else {
            Vec::new()
        };
        let whole = !calls.is_empty();
        if unmarked && !whole {
            // "Search for:" / "Replace with:" fences, or `# Original` / `# Modified` parts.
            blocks = labelled::parse(text);
        }
        for (i, b) in blocks.into_iter().enumerate() {
            match self.locate(messages, &b) {
                Ok((path, old, new)) => calls.push(ToolCall {
                    id: format!("block-{turn}-{i}"),
                    name: BLOCKS_TOOL.into(),
                    arguments: json!({"path": path, "old_string": old, "new_string": new})
                        .to_string(),
                }),
                Err(p) => problems.push(p),
            }
        }
        Edits {
            whole,
            rewrite: false,
            calls,
            problems,
        }
    }

    /// An answer without blocks: the whole definitions its fences replace in the files the
    /// conversation shows ([`super::defs`]), as `edit_file` calls; a replacement that breaks
    /// its file's syntax is left out.
    fn definitions(&self, messages: &[Message], text: &str, turn: u32) -> Vec<ToolCall> {
        let fences = super::defs::fences(text);
        if fences.is_empty() {
            return Vec::new();
        }
        let files: Vec<(String, String)> = shown_paths(messages)
            .into_iter()
            .filter(|p| trellis_index::lang::Lang::detect(p).is_code())
            .filter_map(|p| self.file(&p).ok().map(|t| (p, t)))
            .collect();
        let mut calls: Vec<ToolCall> = Vec::new();
        // A definition written in two fences is replaced once.
        let mut replaced: Vec<(String, String)> = Vec::new();
        for fence in &fences {
            for (path, old, new) in super::defs::replacements(fence, &files) {
                let Some((_, text)) = files.iter().find(|(p, _)| *p == path) else {
                    continue;
                };
                let key = (path.clone(), old.clone());
                if !replaced.contains(&key) && check_syntax(&path, text, &old, &new).is_ok() {
                    replaced.push(key);
                    calls.push(ToolCall {
                        id: format!("def-{turn}-{}", calls.len()),
                        name: BLOCKS_TOOL.into(),
                        arguments: json!({"path": path, "old_string": old, "new_string": new})
                            .to_string(),
                    });
                }
            }
        }
        calls
    }

    /// After the calls of `written` ran (the last messages hold their results): what tells
    /// the model which blocks were not applied, or `None` when every block was.
    pub(super) fn blocks_outcome(&self, st: &Saved, written: &Written) -> Option<Message> {
        let failed: Vec<&str> = st
            .messages
            .iter()
            .rev()
            .take(written.calls)
            .filter(|m| m.content.starts_with("error: "))
            .map(|m| m.content.trim_start_matches("error: "))
            .collect();
        if written.problems.is_empty() && failed.is_empty() {
            return None;
        }
        let (head, ask) = if written.rewrite {
            (
                "Your rewrite was not applied:",
                "Write the lines shown to change again, whole, with the change made, in one code \
                 fence, or say in one sentence why the change cannot be made.",
            )
        } else {
            (
                "These edit blocks were not applied:",
                "Answer with corrected blocks for them (the other blocks are applied: the files \
                 have them now), or say in one sentence why the change cannot be made.",
            )
        };
        let mut text = format!("{head}\n");
        for p in written.problems.iter().map(String::as_str).chain(failed) {
            text.push_str(&format!("- {}\n", p.trim()));
        }
        text.push_str(ask);
        Some(Message::user(text))
    }

    /// The report of an activation whose blocks were all applied: a success, in the
    /// model's words around its blocks (the runtime fills `files_changed` from git).
    pub(super) fn edited(&self, mut st: Saved, written: &Written) -> AgentOutcome {
        self.waste_speculations(&mut st);
        let said = if written.rewrite {
            focus::outside_fences(&written.text)
        } else {
            prose(&written.text)
        };
        let output = if said.is_empty() {
            format!("Applied {} edit block(s).", written.calls)
        } else {
            said
        };
        AgentOutcome::Done(AgentReport {
            report: StageReport {
                failure: false,
                output,
                ..StageReport::default()
            },
            turns: st.turns,
            tool_calls: st.tool_calls,
            usage: st.usage,
            notes: Vec::new(),
        })
    }
}

/// Refuses a replacement that breaks the file's syntax: when tree-sitter parses `text`
/// without an error and finds one once `old` is replaced by `new` (a language without a
/// grammar is not checked).
fn check_syntax(path: &str, text: &str, old: &str, new: &str) -> Result<(), String> {
    let lang = trellis_index::lang::Lang::detect(path);
    let parse = |t: &str| trellis_index::symbols::parse_tree(lang, t);
    let Some(before) = parse(text) else {
        return Ok(());
    };
    if before.root_node().has_error() {
        return Ok(());
    }
    let after = text.replacen(old, new, 1);
    let Some(tree) = parse(&after) else {
        return Ok(());
    };
    let mut node = tree.root_node();
    if !node.has_error() {
        return Ok(());
    }
    // Down to the first node that is an error or misses a token.
    while !node.is_error() && !node.is_missing() {
        let mut cursor = node.walk();
        let Some(child) = node.children(&mut cursor).find(|c| c.has_error()) else {
            break;
        };
        node = child;
    }
    let line = node.start_position().row + 1;
    let shown = after.lines().nth(line - 1).unwrap_or_default().trim();
    Err(format!(
        "the block for `{path}` would leave the file with a syntax error at line {line} \
         (`{shown}`): write the replacement as complete, valid code"
    ))
}

/// The file paths the conversation's user messages mention (`pkg/mod.py`, `lib/a.js:10-20`),
/// in order of first mention.
fn shown_paths(messages: &[Message]) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for m in messages
        .iter()
        .filter(|m| m.role == trellis_llm::Role::User)
    {
        for word in m
            .content
            .split(|c: char| c.is_whitespace() || "`'\"()[]<>,;".contains(c))
        {
            let word = word.split(':').next().unwrap_or_default();
            let word = word.trim_start_matches("./").trim_end_matches('.');
            let plausible = word.contains('.')
                && !word.starts_with('.')
                && word
                    .chars()
                    .all(|c| c.is_alphanumeric() || "._/-".contains(c));
            if plausible && out.len() < 256 && !out.iter().any(|p| p == word) {
                out.push(word.to_owned());
            }
        }
    }
    out
}

fn read(abs: &Path, path: &str) -> Result<String, String> {
    std::fs::read_to_string(abs).map_err(|e| match e.kind() {
        std::io::ErrorKind::NotFound => format!(
            "the block names `{path}`, which is not a file of the workspace: use the path \
             shown with the code"
        ),
        _ => format!("`{path}` could not be read: {e}"),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const FILE: &str = "def f(x):\n    if x > 2:\n        return 1\n    return 0\n";

    #[test]
    fn blocks_are_parsed_with_their_file_names() {
        let text = "The bound is off by one.\n\n```python\nmathutils.py\n<<<<<<< SEARCH\n    \
                    if x > 2:\n=======\n    if x >= 2:\n>>>>>>> REPLACE\n```\n\n<<<<<<< \
                    SEARCH\nreturn 0\n=======\nreturn -1\n>>>>>>> REPLACE\n";
        let (blocks, problems) = parse(text);
        assert!(problems.is_empty(), "{problems:?}");
        assert_eq!(
            blocks,
            vec![
                Block {
                    path: Some("mathutils.py".into()),
                    search: "    if x > 2:".into(),
                    replace: "    if x >= 2:".into(),
                },
                Block {
                    path: Some("mathutils.py".into()),
                    search: "return 0".into(),
                    replace: "return -1".into(),
                },
            ]
        );
        assert_eq!(prose(text), "The bound is off by one.");
        for named in [
            "`a/b.py`",
            "**a/b.py**",
            "File: a/b.py",
            "# a/b.py:",
            "./a/b.py",
        ] {
            assert_eq!(path_in(named).as_deref(), Some("a/b.py"), "{named}");
        }
        assert_eq!(path_in("Here is the fix:"), None);
        // A heading with more than the path: its first word that is a file's path.
        for named in [
            "<a/b.py, lines 535-563>",
            "In `a/b.py`:",
            "x.py (lines 3-9)",
        ] {
            let want = if named.starts_with('x') {
                "x.py"
            } else {
                "a/b.py"
            };
            assert_eq!(path_in(named).as_deref(), Some(want), "{named}");
        }
        assert_eq!(path_in("Change it, then return 0.5 instead."), None);
    }

    #[test]
    fn an_open_block_is_a_problem() {
        let (blocks, problems) = parse("a.py\n<<<<<<< SEARCH\nx\n=======\ny\n");
        assert!(blocks.is_empty());
        assert_eq!(problems.len(), 1, "{problems:?}");
        let (_, problems) = parse("a.py\n<<<<<<< SEARCH\nx\n");
        assert!(problems[0].contains("======="), "{problems:?}");
    }

    #[test]
    fn search_matches_exactly_then_ignoring_trailing_space_then_indentation() {
        let exact = resolve(FILE, "f.py", "    if x > 2:", "    if x >= 2:");
        assert_eq!(exact, Ok(("    if x > 2:".into(), "    if x >= 2:".into())));
        // Trailing spaces and blank edges do not matter; the file's own text is replaced.
        let ends = resolve(FILE, "f.py", "\n    if x > 2:  \n", "    if x >= 2:");
        assert_eq!(ends, Ok(("    if x > 2:".into(), "    if x >= 2:".into())));
        // Indentation written differently: the replacement takes the file's.
        let loose = resolve(
            FILE,
            "f.py",
            "if x > 2:\n    return 1",
            "if x >= 2:\n    return 1",
        );
        assert_eq!(
            loose,
            Ok((
                "    if x > 2:\n        return 1".into(),
                "    if x >= 2:\n        return 1".into()
            ))
        );
    }

    #[test]
    fn a_search_found_nowhere_or_twice_says_why_and_shows_the_closest_lines() {
        let missing = resolve(FILE, "f.py", "    if (x > 3):", "    if x >= 2:").unwrap_err();
        assert!(missing.contains("not in the file"), "{missing}");
        assert!(missing.contains("    2\t    if x > 2:"), "{missing}");
        let twice = resolve("a = 1\na = 1\n", "f.py", "a = 1", "a = 2").unwrap_err();
        assert!(twice.contains("matches 2 places"), "{twice}");
        let same = resolve(FILE, "f.py", "    return 0", "    return 0\n").unwrap_err();
        assert!(same.contains("changes nothing"), "{same}");
        let empty = resolve(FILE, "f.py", "  \n", "x").unwrap_err();
        assert!(empty.contains("empty SEARCH"), "{empty}");
    }

    #[test]
    fn a_replacement_that_breaks_the_syntax_is_refused() {
        let ok = check_syntax("f.py", FILE, "    if x > 2:", "    if x >= 2:");
        assert_eq!(ok, Ok(()));
        let broken = check_syntax("f.py", FILE, "    if x > 2:", "    if (x >= 2:").unwrap_err();
        assert!(broken.contains("syntax error at line 2"), "{broken}");
        // No grammar, no check; a file already broken is not held against the block.
        assert_eq!(check_syntax("f.txt", "a(", "a(", "b(("), Ok(()));
        assert_eq!(check_syntax("f.py", "def (:\n", "def", "def (("), Ok(()));
    }
}
