//! Name the code, then write it again (role setting `focus`).
//!
//! Measured on the dev set's drawings (docs/eval.md), a small model mostly knows what a fix
//! is about and still changes nothing: its answer is prose, a fence copying a whole table,
//! a block cut before its `=======`, or a SEARCH part miscopied. A focused role does not
//! copy anything. Before its first answer it names one of the retrieved code excerpts the
//! task is about — a short answer, held to the excerpts' headings where the model can be
//! constrained ([`naming_grammar`]) — and is shown that excerpt again with the request to
//! write it whole with the change made. The answer's fence that is most like the excerpt
//! replaces the excerpt's lines ([`AgentRun::rewrite`]); blocks it writes instead still
//! apply as blocks.

use std::fmt::Write as _;

use trellis_llm::{ChatRequest, Message, Role, Usage};

use super::super::defs::{elides, fenced, is_fence};
use super::super::indent::{indent, reindent};
use super::super::sample::normal;
use super::grammar::{headings, literal};
use super::{AgentRun, check_syntax};
use crate::roles::EditFormat;

/// An excerpt longer than this is not offered: written whole it would not fit an answer
/// (the embedded model answers in at most 1,024 tokens).
const MAX_LINES: usize = 60;

/// The excerpts offered to name, at most.
const MAX_OFFERED: usize = 12;

/// The naming answer's length cap, in tokens: one heading.
const NAMING_TOKENS: u32 = 48;

/// How the message that shows the excerpt to rewrite starts: how it is found again.
const HEAD: &str = "The code to change is ";

/// A retrieved excerpt of a code file: its lines as the heading gives them and its label.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Excerpt {
    pub path: String,
    pub start: usize,
    pub end: usize,
    pub label: String,
}

impl Excerpt {
    /// `path:start-end`, as the heading writes it and the naming answer gives it.
    pub fn heading(&self) -> String {
        format!("{}:{}-{}", self.path, self.start, self.end)
    }
}

/// The code excerpts the user messages show that can be written whole: each once, in order,
/// at most [`MAX_LINES`] lines, and at most [`MAX_OFFERED`].
pub(crate) fn excerpts(messages: &[Message]) -> Vec<Excerpt> {
    let mut out: Vec<Excerpt> = Vec::new();
    for (path, start, end, label) in headings(messages) {
        let e = Excerpt {
            path,
            start,
            end,
            label,
        };
        if end - start < MAX_LINES
            && trellis_index::lang::Lang::detect(&e.path).is_code()
            && !out.iter().any(|o| o.heading() == e.heading())
        {
            out.push(e);
        }
    }
    out.truncate(MAX_OFFERED);
    out
}

/// The grammar of the naming answer: one of `excerpts`' headings.
pub(crate) fn naming_grammar(excerpts: &[Excerpt]) -> String {
    let names: Vec<String> = excerpts.iter().map(|e| literal(&e.heading())).collect();
    format!("root ::= {}\n", names.join(" | "))
}

/// The question that asks for the excerpt.
fn question(excerpts: &[Excerpt]) -> String {
    let mut s = String::from(
        "Before you change anything: which one of the code excerpts above must change to do \
         the task? Answer with its heading only, as `path:start-end`. The excerpts:\n",
    );
    for e in excerpts {
        let _ = writeln!(s, "- {} {}", e.heading(), e.label);
    }
    s
}

/// The index of the excerpt `text` names: the first heading it writes whole (`a.py:1-2` is
/// not written by `a.py:1-20`), else the one excerpt of the one file it names.
pub(crate) fn named(text: &str, excerpts: &[Excerpt]) -> Option<usize> {
    let written = excerpts
        .iter()
        .enumerate()
        .filter_map(|(i, e)| {
            let h = e.heading();
            text.match_indices(&h)
                .find(|(at, _)| !text[at + h.len()..].starts_with(|c: char| c.is_ascii_digit()))
                .map(|(at, _)| (at, i))
        })
        .min_by_key(|(at, _)| *at)
        .map(|(_, i)| i);
    written.or_else(|| {
        let mut of = (0..excerpts.len()).filter(|&i| text.contains(&excerpts[i].path));
        match (of.next(), of.next()) {
            (Some(one), None) => Some(one),
            _ => None,
        }
    })
}

/// The message that shows `code` (lines `e.start`-`e.end` of `e.path`) and asks for it
/// written whole with the change made.
fn rewrite_request(e: &Excerpt, code: &str) -> String {
    format!(
        "{HEAD}`{}` lines {}-{}:\n```{}\n{code}\n```\nWrite these lines again, whole, with the \
         change made, in one code fence: every line, changed or not, in order, nothing left \
         out. Then say in one sentence what you changed.",
        e.path,
        e.start,
        e.end,
        crate::retrieval::fence_lang(&e.path),
    )
}

/// The excerpt the conversation asked to rewrite: its path and the lines shown.
pub(crate) fn focused(messages: &[Message]) -> Option<(String, String)> {
    let m = messages
        .iter()
        .rev()
        .find(|m| m.role == Role::User && m.content.starts_with(HEAD))?;
    let path = m.content[HEAD.len()..]
        .strip_prefix('`')?
        .split('`')
        .next()?
        .to_owned();
    let lines: Vec<&str> = m.content.lines().collect();
    let code = fenced(&lines).into_iter().next()?.body.join("\n");
    Some((path, code))
}

/// The replacements an answer without code states in words, in order: "replace `a` with
/// `b`", "change `a` to `b`", "`a` was changed to `b`" — two inline code spans joined by
/// `with`, `to`, `by` or `into`, after a verb of replacing or changing in the same sentence.
/// A small model asked to rewrite an excerpt often says what it would change instead of
/// writing it (measured: docs/eval.md, "Naming the excerpt").
pub(crate) fn stated(text: &str) -> Vec<(String, String)> {
    // Inline code spans (one backtick each side, on one line) and where they are.
    let mut spans: Vec<(usize, usize, &str)> = Vec::new();
    let mut at = 0;
    while let Some(open) = text[at..].find('`').map(|i| at + i) {
        if text[open..].starts_with("``") {
            at = open + text[open..].len() - text[open..].trim_start_matches('`').len();
            continue;
        }
        let Some(close) = text[open + 1..].find(['`', '\n']).map(|i| open + 1 + i) else {
            break;
        };
        if text[close..].starts_with('\n') {
            at = close;
            continue;
        }
        spans.push((open, close + 1, &text[open + 1..close]));
        at = close + 1;
    }
    let mut out = Vec::new();
    for pair in spans.windows(2) {
        let ((a_start, a_end, a), (b_start, _, b)) = (pair[0], pair[1]);
        let between = text[a_end..b_start].trim().to_ascii_lowercase();
        let joined = ["with", "to", "by", "into", "with the new", "to the new"]
            .iter()
            .any(|w| between == *w || between.ends_with(&format!(" {w}")) && between.len() < 40);
        let sentence = text[..a_start]
            .rsplit(['.', '\n'])
            .next()
            .unwrap_or_default()
            .to_ascii_lowercase();
        let said = text[a_end..b_start].to_ascii_lowercase();
        let verb = ["replac", "chang", "turn", "modif", "updat"]
            .iter()
            .any(|v| sentence.contains(v) || said.contains(v));
        if joined && verb && !a.trim().is_empty() && a != b {
            out.push((a.to_owned(), b.to_owned()));
        }
    }
    out
}

/// `code` with each stated replacement made whose old text it holds exactly once; `None`
/// when none can be made.
fn apply_stated(code: &str, stated: &[(String, String)]) -> Option<String> {
    let mut new = code.to_owned();
    let mut made = 0;
    for (a, b) in stated {
        if new.matches(a.as_str()).count() == 1 {
            new = new.replacen(a.as_str(), b, 1);
            made += 1;
        }
    }
    (made > 0).then_some(new)
}

/// `text` without its fenced code: what the model said about its rewrite.
pub(super) fn outside_fences(text: &str) -> String {
    let mut inside = false;
    let mut kept = Vec::new();
    for line in text.lines() {
        if is_fence(line) {
            inside = !inside;
        } else if !inside {
            kept.push(line);
        }
    }
    kept.join("\n").trim().to_owned()
}

/// What naming the excerpt came to, for the fresh activation's prompt and record.
#[derive(Debug, Default)]
pub(in crate::agent) struct Focus {
    /// The message showing the excerpt to rewrite.
    pub message: Option<String>,
    /// What happened, for the session's notes.
    pub note: Option<String>,
    /// The naming call's usage.
    pub usage: Usage,
}

/// The indentation of `text`'s first line that is not blank.
fn first_indent(text: &str) -> Option<&str> {
    text.lines().find(|l| !l.trim().is_empty()).map(indent)
}

impl AgentRun {
    /// For a `focus` role's fresh activation: has the model name the excerpt to change and
    /// returns the message that shows it. The excerpt is named without a call when only one
    /// can be; nothing is added when none can be, or the answer names none.
    pub(in crate::agent) async fn focus(&self, messages: &[Message]) -> Focus {
        if !self.role.focus || self.role.edit_format != EditFormat::Blocks {
            return Focus::default();
        }
        let offered: Vec<(Excerpt, String)> = excerpts(messages)
            .into_iter()
            .filter_map(|e| {
                let text = self.file(&e.path).ok()?;
                let lines: Vec<&str> = text.split('\n').collect();
                let code = lines.get(e.start - 1..e.end)?.join("\n");
                // A fence inside the code would end the fence that shows it.
                let fence = code.lines().any(is_fence);
                (!fence && !code.trim().is_empty()).then_some((e, code))
            })
            .collect();
        let excerpts: Vec<Excerpt> = offered.iter().map(|(e, _)| e.clone()).collect();
        let (chosen, usage, said) = match excerpts.len() {
            0 => {
                return Focus {
                    note: Some("focus: no code excerpt short enough to write whole".into()),
                    ..Focus::default()
                };
            }
            1 => (Some(0), Usage::default(), String::new()),
            _ => {
                let mut asked = messages.to_vec();
                asked.push(Message::user(question(&excerpts)));
                let request = ChatRequest {
                    grammar: Some(naming_grammar(&excerpts)),
                    max_tokens: Some(NAMING_TOKENS),
                    temperature: Some(0.0),
                    ..ChatRequest::new(asked)
                };
                match self.turn(request, self.first_turn.max(1), false).await {
                    Ok(c) => (named(&c.text, &excerpts), c.usage, c.text),
                    Err(e) => {
                        return Focus {
                            note: Some(format!("focus: naming the excerpt failed: {e}")),
                            ..Focus::default()
                        };
                    }
                }
            }
        };
        let Some((e, code)) = chosen.and_then(|i| offered.get(i)) else {
            let said: String = said.chars().take(200).collect();
            return Focus {
                note: Some(format!(
                    "focus: the answer names none of the {} excerpts offered (`{said}`)",
                    excerpts.len()
                )),
                usage,
                ..Focus::default()
            };
        };
        Focus {
            message: Some(rewrite_request(e, code)),
            note: Some(format!(
                "focus: {} {} named, of {} excerpts offered; asked to write it whole",
                e.heading(),
                e.label,
                excerpts.len()
            )),
            usage,
        }
    }

    /// An answer's rewrite of the excerpt the conversation shows to rewrite, as `(path, old,
    /// new)`, or why it cannot be made: the answer's fence most like the excerpt, or without
    /// a fence the replacements it states in words ([`stated`]); `None` when there is no
    /// such excerpt, or the answer has no fence and states no replacement the excerpt holds.
    pub(super) fn rewrite(
        &self,
        messages: &[Message],
        text: &str,
    ) -> Option<Result<(String, String, String), String>> {
        let (path, old) = focused(messages)?;
        let lines: Vec<&str> = text.lines().collect();
        let fences = fenced(&lines);
        if fences.is_empty() {
            // No code: the change as the answer states it in words.
            let new = apply_stated(&old, &stated(text))?;
            return Some(self.rewritten(&path, &old, &new, 1.0));
        }
        let want = normal(&old);
        let (likeness, new) = fences
            .iter()
            .map(|f| {
                let body = f.body.join("\n");
                (strsim::normalized_levenshtein(&normal(&body), &want), body)
            })
            .max_by(|a, b| a.0.total_cmp(&b.0))?;
        Some(self.rewritten(&path, &old, &new, likeness))
    }

    /// The edit that puts `new` in place of `old` in `path`, or why not.
    fn rewritten(
        &self,
        path: &str,
        old: &str,
        new: &str,
        likeness: f64,
    ) -> Result<(String, String, String), String> {
        if elides(new) {
            return Err(format!(
                "the rewrite of `{path}` leaves lines out (`...`, \"rest of the code\"): write \
                 every line"
            ));
        }
        if likeness < 0.5 {
            return Err(format!(
                "the answer's code is not the lines of `{path}` shown to rewrite: write those \
                 lines again whole, with the change made"
            ));
        }
        if normal(new) == normal(old) {
            return Err(format!(
                "the rewrite of `{path}` changes nothing: write the lines as they must become"
            ));
        }
        let text = self.file(path)?;
        if text.matches(old).count() != 1 {
            return Err(format!(
                "the lines of `{path}` shown to rewrite are no longer in the file as shown"
            ));
        }
        let new = new.trim_end_matches(['\n', ' ', '\t']);
        let new = match (first_indent(new), first_indent(old)) {
            (Some(from), Some(to)) if from != to => reindent(new, from, to),
            _ => new.to_owned(),
        };
        // The excerpt's blank last lines stay.
        let tail = &old[old.trim_end_matches(['\n', ' ', '\t']).len()..];
        let new = format!("{new}{tail}");
        check_syntax(path, &text, old, &new)?;
        Ok((path.to_owned(), old.to_owned(), new))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pack() -> Vec<Message> {
        vec![
            Message::system("rules"),
            Message::user(
                "task\n### a/b.py:3-9 (juxt) — vector\n```py\ncode\n```\n\
                 ### a/b.py:30-31 (x) — lexical\n```py\nx\n```\n\
                 ### a/b.py:3-90 (big) — vector\n```py\ncode\n```\n\
                 ### README.md:1-5 (intro) — docs\n```md\nhi\n```\n\
                 ### a/b.py:3-9 (juxt) — lexical\n",
            ),
        ]
    }

    #[test]
    fn short_code_excerpts_are_offered_once_and_named_by_heading() {
        let ex = excerpts(&pack());
        let heads: Vec<String> = ex.iter().map(Excerpt::heading).collect();
        assert_eq!(heads, ["a/b.py:3-9", "a/b.py:30-31"]);
        assert_eq!(ex[0].label, "(juxt)");
        assert_eq!(
            naming_grammar(&ex),
            "root ::= \"a/b.py:3-9\" | \"a/b.py:30-31\"\n"
        );
        assert_eq!(named("a/b.py:30-31", &ex), Some(1));
        assert_eq!(named("It is `a/b.py:3-9`.", &ex), Some(0));
        // A longer range is not the shorter one; two excerpts of the named file: none.
        assert_eq!(named("a/b.py:3-90", &ex), None);
        assert_eq!(named("nothing", &ex), None);
        let one = vec![ex[0].clone()];
        assert_eq!(named("in a/b.py", &one), Some(0));
    }

    #[test]
    fn replacements_stated_in_words_are_read_and_made_where_they_match_once() {
        let said = "The change made is to replace the `return (f(x) for f in fs)` line with \
                    `return tuple(f(x) for f in fs)`. This ensures `juxt` returns a tuple.";
        assert_eq!(
            stated(said),
            [(
                "return (f(x) for f in fs)".to_owned(),
                "return tuple(f(x) for f in fs)".to_owned()
            )]
        );
        assert_eq!(
            stated("I changed `a > b` to `a >= b`, and `x` into `y`."),
            [
                ("a > b".to_owned(), "a >= b".to_owned()),
                ("x".to_owned(), "y".to_owned())
            ]
        );
        // Two spans without a verb of changing, or not joined, are not a replacement.
        assert!(stated("The `juxt` function with `funcs` is called.").is_empty());
        assert!(stated("Replace `a`, then `b`.").is_empty());
        assert!(stated("```python\nx\n```").is_empty());
        let code = "def f(fs, x):\n    return (f(x) for f in fs)\n";
        assert_eq!(
            apply_stated(code, &stated(said)).as_deref(),
            Some("def f(fs, x):\n    return tuple(f(x) for f in fs)\n")
        );
        // Old text found nowhere, or twice: not made.
        assert_eq!(apply_stated(code, &[("nothere".into(), "y".into())]), None);
        assert_eq!(apply_stated("x\nx", &[("x".into(), "y".into())]), None);
    }

    #[test]
    fn the_rewrite_request_is_found_again_with_its_code() {
        let e = &excerpts(&pack())[0];
        let mut messages = pack();
        messages.push(Message::user(rewrite_request(e, "def f():\n    return 1")));
        assert_eq!(
            focused(&messages),
            Some(("a/b.py".to_owned(), "def f():\n    return 1".to_owned()))
        );
        assert_eq!(focused(&pack()), None);
    }
}
