//! The shape a `blocks` role's answer is held to (`block_grammar`): a sentence or three,
//! then edit blocks whose file is one the conversation shows and whose SEARCH part is a run
//! of that file's shown lines, copied exactly — as a llama.cpp GBNF grammar
//! ([`trellis_llm::ChatRequest::grammar`]), which the embedded model cannot step out of.
//!
//! Measured on the dev set's drawings (docs/eval.md), most of a small model's answers that
//! changed nothing were no block at all (prose, a fence of code), a block cut before its
//! `=======`, a SEARCH part miscopied, or a block naming the instructions' example file.
//! Under the grammar each of those is impossible: the answer is blocks, a SEARCH part is
//! lines the model was shown in their order (it ends where the model writes `=======`, at
//! the latest at the end of the excerpt or after [`MAX_SEARCH_LINES`]), and a path is one of
//! the files shown. Measured on iterate-b it resolved 0 of 8 (docs/eval.md, "The block
//! grammar"), so no built-in role turns it on.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use trellis_llm::{Message, Role};

use super::{is_divider, is_replace, is_search};

/// At most this many blocks in one answer.
const MAX_BLOCKS: usize = 4;

/// At most this many lines in a SEARCH part: the few lines a fix changes, with a line or
/// two around them. A small model otherwise copies a whole function before its change and
/// runs out of tokens before the REPLACE part (docs/eval.md).
const MAX_SEARCH_LINES: usize = 16;

/// A REPLACE part writes at most this many lines more than its SEARCH part copied.
const MORE_REPLACE_LINES: usize = 8;

/// At most this many characters in a line of the sentence before the blocks (up to three
/// lines) and in a line a REPLACE part writes: an answer ends even from a model that never
/// writes a newline.
const MAX_LINE: usize = 200;

/// A file's lines the conversation shows: `(first, last)` line ranges, 1-based, inclusive.
pub type Shown = BTreeMap<String, Vec<(usize, usize)>>;

/// The retrieved items the user messages show, by their headings (`### path:start-end (…)`,
/// as the retrieved context writes them): `(path, start, end, label)` — lines 1-based and
/// inclusive, the label what follows the range up to the source (`(juxt)`) — in order of
/// appearance.
pub(crate) fn headings(messages: &[Message]) -> Vec<(String, usize, usize, String)> {
    let mut out = Vec::new();
    for m in messages.iter().filter(|m| m.role == Role::User) {
        for line in m.content.lines() {
            let Some(head) = line.strip_prefix("### ") else {
                continue;
            };
            let Some((path, range)) = head.split(' ').next().and_then(|w| w.rsplit_once(':'))
            else {
                continue;
            };
            let Some((a, b)) = range.split_once('-') else {
                continue;
            };
            if let (Ok(a), Ok(b)) = (a.parse::<usize>(), b.parse::<usize>())
                && a >= 1
                && a <= b
                && !path.is_empty()
            {
                let rest = head.split_once(' ').map_or("", |(_, r)| r);
                let label = rest.split(" — ").next().unwrap_or_default().trim();
                out.push((path.to_owned(), a, b, label.to_owned()));
            }
        }
    }
    out
}

/// The retrieved items a user message shows, by their headings (`headings`), overlapping
/// ranges of a file merged.
pub fn shown(messages: &[Message]) -> Shown {
    let mut out: Shown = BTreeMap::new();
    for (path, a, b, _) in headings(messages) {
        out.entry(path).or_default().push((a, b));
    }
    for ranges in out.values_mut() {
        ranges.sort_unstable();
        let mut merged: Vec<(usize, usize)> = Vec::with_capacity(ranges.len());
        for &(a, b) in ranges.iter() {
            match merged.last_mut() {
                Some(last) if a <= last.1 + 1 => last.1 = last.1.max(b),
                _ => merged.push((a, b)),
            }
        }
        *ranges = merged;
    }
    out
}

/// The grammar of an answer whose blocks edit `files` — `(path, runs)`, each run the shown
/// lines of the file in order — or `None` when no file has a line to copy.
///
/// A SEARCH part's rule knows how many lines it has copied (`l{file}-{run}-{line}-{count}`):
/// after 16 lines (`MAX_SEARCH_LINES`) it must end, and its REPLACE part may write at most
/// 8 lines (`MORE_REPLACE_LINES`) more than it copied (`rep{count}`).
pub fn grammar(files: &[(String, Vec<Vec<String>>)]) -> Option<String> {
    let mut rules = String::new();
    let mut blocks = Vec::new();
    for (f, (path, runs)) in files.iter().enumerate() {
        let mut starts = Vec::new();
        for (r, run) in runs.iter().enumerate() {
            let lines: Vec<&str> = run.iter().map(|l| l.trim_end()).collect();
            // A line the block parser would read as a marker cannot be copied: it ends the
            // piece of the run a SEARCH part can take.
            let copyable = |i: usize| {
                lines
                    .get(i)
                    .is_some_and(|l| !(is_search(l) || is_divider(l) || is_replace(l)))
            };
            // How many copyable lines end at each line: the most a SEARCH part ending there
            // can have copied.
            let mut depth = 0;
            for (i, line) in lines.iter().enumerate() {
                if !copyable(i) {
                    depth = 0;
                    continue;
                }
                depth += 1;
                let _ = writeln!(rules, "t{f}-{r}-{i} ::= {}", literal(&format!("{line}\n")));
                for k in 1..=depth.min(MAX_SEARCH_LINES) {
                    let end = format!("\"=======\\n\" rep{k}");
                    let body = if copyable(i + 1) && k < MAX_SEARCH_LINES {
                        format!("(l{f}-{r}-{}-{} | {end})", i + 1, k + 1)
                    } else {
                        end
                    };
                    let _ = writeln!(rules, "l{f}-{r}-{i}-{k} ::= t{f}-{r}-{i} {body}");
                }
                starts.push(format!("l{f}-{r}-{i}-1"));
            }
        }
        if starts.is_empty() {
            continue;
        }
        let _ = writeln!(rules, "s{f} ::= {}", starts.join(" | "));
        blocks.push(format!(
            "{} s{f}",
            literal(&format!("{path}\n<<<<<<< SEARCH\n"))
        ));
    }
    if blocks.is_empty() {
        return None;
    }
    let more = MAX_BLOCKS - 1;
    let tail = MAX_LINE - 1;
    let mut g = String::new();
    let _ = writeln!(g, r#"root ::= say "\n"? block ("\n"? block){{0,{more}}}"#);
    let _ = writeln!(g, "say ::= sayline sayline? sayline?");
    let _ = writeln!(g, r#"sayline ::= [^\n<>=`] [^\n]{{0,{tail}}} "\n""#);
    let _ = writeln!(g, "block ::= {}", blocks.join(" | "));
    for k in 1..=MAX_SEARCH_LINES {
        let _ = writeln!(
            g,
            r#"rep{k} ::= repline{{0,{}}} ">>>>>>> REPLACE\n""#,
            k + MORE_REPLACE_LINES
        );
    }
    // No line of a REPLACE part starts with the five `>` that would end it.
    let _ = writeln!(
        g,
        r#"repline ::= "\n" | [^>\n] [^\n]{{0,{tail}}} "\n" | ">" rest | ">>" rest | ">>>" rest | ">>>>" rest"#
    );
    let _ = writeln!(g, r#"rest ::= ([^>\n] [^\n]{{0,{tail}}})? "\n""#);
    g.push_str(&rules);
    Some(g)
}

/// `text` as a GBNF string literal.
pub(super) fn literal(text: &str) -> String {
    let mut s = String::with_capacity(text.len() + 2);
    s.push('"');
    for c in text.chars() {
        match c {
            '"' => s.push_str("\\\""),
            '\\' => s.push_str("\\\\"),
            '\n' => s.push_str("\\n"),
            '\t' => s.push_str("\\t"),
            '\r' => s.push_str("\\r"),
            c if (c as u32) < 0x20 || c == '\u{7f}' => {
                let _ = write!(s, "\\x{:02X}", c as u32);
            }
            c => s.push(c),
        }
    }
    s.push('"');
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lines(text: &str) -> Vec<String> {
        text.lines().map(str::to_owned).collect()
    }

    #[test]
    fn the_shown_lines_are_the_headings_ranges_merged_per_file() {
        let pack = "## Retrieved context\n\
                    ### a.py:10-20 (f) — index\n```python\nx\n```\n\
                    ### a.py:15-30 (g) — index\n\
                    ### b/c.py:3-4 (h) — lsp; note\n\
                    ### a.py:40-41 (k) — index\n\
                    ### https://example.com (page) — web\n\
                    ### not a heading:x-y\n";
        let got = shown(&[Message::system("### s.py:1-2 (x)"), Message::user(pack)]);
        let want: Shown = [
            ("a.py".to_owned(), vec![(10, 30), (40, 41)]),
            ("b/c.py".to_owned(), vec![(3, 4)]),
        ]
        .into_iter()
        .collect();
        assert_eq!(got, want);
    }

    #[test]
    fn a_search_part_is_a_run_of_shown_lines_in_order() {
        let g = grammar(&[(
            "src/m.py".to_owned(),
            vec![lines("def f(x):\n    return \"a\\b\"\t \n"), lines("y = 1")],
        )])
        .unwrap();
        // The path and the markers are written as the block parser reads them.
        assert!(
            g.contains(r#"block ::= "src/m.py\n<<<<<<< SEARCH\n" s0"#),
            "{g}"
        );
        assert!(
            g.contains(r#"rep1 ::= repline{0,9} ">>>>>>> REPLACE\n""#),
            "{g}"
        );
        // Trailing whitespace goes; quotes and backslashes are escaped.
        assert!(g.contains(r#"t0-0-0 ::= "def f(x):\n""#), "{g}");
        assert!(g.contains(r#"t0-0-1 ::= "    return \"a\\b\"\n""#), "{g}");
        assert!(g.contains(r#"t0-1-0 ::= "y = 1\n""#), "{g}");
        // Each line is followed by the next one of its run or by the end of the part.
        assert!(
            g.contains(r#"l0-0-0-1 ::= t0-0-0 (l0-0-1-2 | "=======\n" rep1)"#),
            "{g}"
        );
        assert!(g.contains(r#"l0-0-1-2 ::= t0-0-1 "=======\n" rep2"#), "{g}");
        assert!(g.contains(r#"l0-0-1-1 ::= t0-0-1 "=======\n" rep1"#), "{g}");
        assert!(g.contains(r#"l0-1-0-1 ::= t0-1-0 "=======\n" rep1"#), "{g}");
        assert!(g.contains("s0 ::= l0-0-0-1 | l0-0-1-1 | l0-1-0-1"), "{g}");
    }

    #[test]
    fn a_search_part_ends_after_its_most_lines() {
        let run: Vec<String> = (0..40).map(|i| format!("x{i} = {i}")).collect();
        let g = grammar(&[("a.py".to_owned(), vec![run])]).unwrap();
        let last = MAX_SEARCH_LINES;
        assert!(
            g.contains(&format!(
                r#"l0-0-20-{last} ::= t0-0-20 "=======\n" rep{last}"#
            )),
            "{g}"
        );
        assert!(!g.contains(&format!("-{} ::= t", last + 1)), "{g}");
        assert!(
            g.contains(&format!(
                r#"rep{last} ::= repline{{0,{}}} ">>>>>>> REPLACE\n""#,
                last + MORE_REPLACE_LINES
            )),
            "{g}"
        );
    }

    #[test]
    fn a_line_the_parser_reads_as_a_marker_splits_the_run() {
        let g = grammar(&[(
            "README.rst".to_owned(),
            vec![lines("Title\n=======\ntext\n>>>>>>> REPLACE")],
        )])
        .unwrap();
        assert!(g.contains(r#"l0-0-0-1 ::= t0-0-0 "=======\n" rep1"#), "{g}");
        assert!(!g.contains("t0-0-1 "), "{g}");
        assert!(g.contains(r#"l0-0-2-1 ::= t0-0-2 "=======\n" rep1"#), "{g}");
        assert!(!g.contains("t0-0-3 "), "{g}");
    }

    #[test]
    fn no_shown_line_no_grammar() {
        assert_eq!(grammar(&[]), None);
        assert_eq!(grammar(&[("a.py".to_owned(), vec![lines("=====")])]), None);
    }
}
