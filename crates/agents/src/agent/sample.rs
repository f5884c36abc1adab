//! Several answers for one turn of a `blocks` role, and the one it keeps (`samples`).
//!
//! A small model's greedy answer is often not its best: it describes the change without
//! writing it, or copies a line wrongly. The turn draws `samples - 1` more answers to the
//! same request at the role's `sample_temperature`, each with its own seed, and keeps one:
//! an answer whose blocks all apply before one with a refused block, and among those the
//! change most answers make (majority voting over candidate patches, as Agentless does),
//! the earliest on a tie — so the greedy answer wins unless others agree on something
//! better. A local model reads the prompt once: every answer shares it (prefix reuse).
//!
//! With `test_samples` and a [`TestProbe`](super::TestProbe) (the runtime's, when the project has a test
//! command), each different change whose blocks all apply is also run against the project's
//! tests in a scratch copy — as Agentless filters its candidates by the regression tests — and
//! a change that breaks tests the files as they are pass ranks after one that breaks none.

use trellis_llm::{ChatRequest, Completion, Message, Usage};

use super::{AgentRun, Saved};
use crate::error::{Error, Result};
use crate::roles::EditFormat;

/// How many turns of an activation are drawn again ([`AgentRun::redraw`]) before the model is
/// told what went wrong instead.
pub(crate) const MAX_REDRAWS: u32 = 2;

/// How many more drawings a turn makes when no answer passes a kept script.
pub(super) const MORE_DRAWINGS: u32 = 1;

/// How much of an answer not kept its note shows.
const NOT_KEPT_CHARS: usize = 2_000;

/// What one answer's blocks come to, for choosing between answers.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Candidate {
    /// The change its applicable blocks make: `(path, old, new)` per block, whitespace at
    /// line ends and blank lines aside, sorted.
    pub change: Vec<(String, String, String)>,
    /// Why each block that cannot be applied is not.
    pub problems: Vec<String>,
    /// The applicable blocks' exact `(path, old, new)`, in the answer's order.
    pub edits: Vec<(String, String, String)>,
    /// Test failures the change adds (`test_samples`; `None` when not tested).
    pub broken: Option<usize>,
    /// Failing tests the change makes pass (`test_samples`).
    pub fixed: usize,
    /// How many of the scripts that show the problem pass with the change (`reproduce`;
    /// `None` when not run).
    pub reproduced: Option<usize>,
    /// The change replaces whole definitions the answer wrote without blocks
    /// ([`super::defs`]): it ranks after a change written as the blocks asked for.
    pub whole: bool,
}

impl Candidate {
    pub(super) fn clean(&self) -> bool {
        !self.change.is_empty() && self.problems.is_empty()
    }

    /// What became of the answer, in a few words (the note of the drawing).
    fn summary(&self) -> String {
        let first = |p: &str| p.chars().take(120).collect::<String>();
        match (self.change.len(), self.problems.first()) {
            (0, None) => "no block".into(),
            (n, None) if self.whole => format!("{n} whole definition(s) replace"),
            (n, None) => format!("{n} block(s) apply"),
            (n, Some(p)) => format!(
                "{n} block(s) apply, {} refused ({}…)",
                self.problems.len(),
                first(p)
            ),
        }
    }
}

/// The index of the candidate to keep: a clean one (every block applies) before others,
/// then the fewest test failures added, the most scripts that show the problem passed
/// (`reproduce`) and the most failing tests made to pass (when tested), then the change most
/// candidates make, then one written as blocks over whole
/// definitions written without them, then the most applicable blocks, then the earliest.
pub(crate) fn choose(candidates: &[Candidate]) -> usize {
    let votes = |c: &Candidate| {
        candidates
            .iter()
            .filter(|o| !c.change.is_empty() && o.change == c.change)
            .count()
    };
    candidates
        .iter()
        .enumerate()
        .max_by_key(|(i, c)| {
            (
                c.clean(),
                std::cmp::Reverse(c.broken.unwrap_or(0)),
                c.reproduced.unwrap_or(0),
                c.fixed,
                votes(c),
                !c.whole,
                c.change.len() as i64 - c.problems.len() as i64,
                std::cmp::Reverse(*i),
            )
        })
        .map_or(0, |(i, _)| i)
}

/// `text` without trailing whitespace and blank lines: two answers writing the same lines
/// make the same change.
pub(super) fn normal(text: &str) -> String {
    text.lines()
        .map(str::trim_end)
        .filter(|l| !l.is_empty())
        .collect::<Vec<_>>()
        .join("\n")
}

impl AgentRun {
    /// Whether this turn draws several answers: a `blocks` role with `samples` above 1.
    pub(super) fn samples(&self) -> bool {
        self.role.edit_format == EditFormat::Blocks && self.role.samples > 1
    }

    /// For a drawing role whose kept answer changed nothing — its blocks were all refused, or
    /// it wrote none and claimed success — whether the next turn draws again from the same
    /// conversation (at most [`MAX_REDRAWS`] times an activation) instead of telling the model
    /// what went wrong. Told that its blocks were refused, a small model mostly repeats the
    /// refusal back, and asked to make the change after a claim it mostly claims again
    /// (measured: docs/eval.md); drawn afresh, some answers write blocks. Nothing was applied,
    /// so the files the conversation shows are still the files.
    pub(super) fn redraw(&self, st: &mut Saved) -> bool {
        if !self.samples() || st.redraws >= MAX_REDRAWS {
            return false;
        }
        st.redraws += 1;
        st.redraw = true;
        self.note(
            st,
            format!(
                "no drawn answer has a block that applies: the next turn draws again from the \
                 same conversation, without this answer ({} of {MAX_REDRAWS})",
                st.redraws
            ),
        );
        true
    }

    /// `request` for a turn drawn again ([`Self::redraw`]): sampled with a seed of its own,
    /// since a greedy answer to the same conversation would be the one refused.
    pub(super) fn redrawn(&self, request: ChatRequest, turn: u32) -> ChatRequest {
        ChatRequest {
            temperature: Some(self.role.sample_temperature),
            seed: Some(turn.wrapping_mul(1_000)),
            ..request
        }
    }

    /// What `text`'s blocks come to against the files now.
    fn candidate(&self, messages: &[Message], text: &str, turn: u32) -> Candidate {
        let found = self.edits(messages, text, turn);
        let edits: Vec<(String, String, String)> = found
            .calls
            .iter()
            .filter_map(|c| c.arguments_json().ok())
            .map(|a| {
                let s = |k: &str| a[k].as_str().unwrap_or_default().to_owned();
                (s("path"), s("old_string"), s("new_string"))
            })
            .collect();
        let mut change: Vec<(String, String, String)> = edits
            .iter()
            .map(|(p, o, n)| (p.clone(), normal(o), normal(n)))
            .collect();
        change.sort();
        Candidate {
            change,
            problems: found.problems,
            edits,
            broken: None,
            fixed: 0,
            reproduced: None,
            whole: found.whole,
        }
    }

    /// For a turn whose answer `first` (to `request`) called no tool: draws the role's other
    /// samples and returns the answer kept, its usage that of all the answers. A sample the
    /// model cannot give (a budget, an error) ends the drawing with the answers at hand.
    pub(super) async fn sample(
        &self,
        st: &mut Saved,
        request: ChatRequest,
        first: Completion,
        turn: u32,
    ) -> Result<Completion> {
        if !first.tool_calls.is_empty() {
            return Ok(first);
        }
        let mut usage = Usage::default();
        let mut answers = vec![first];
        self.draw(st, &request, turn, 1..self.role.samples, &mut answers)
            .await?;
        let mut candidates: Vec<Candidate> = answers
            .iter()
            .map(|a| self.candidate(&st.messages, &a.text, turn))
            .collect();
        let scripts = self.reproductions(st, &request, turn, &mut usage).await?;
        if !scripts.is_empty() {
            self.reproduce(st, &scripts, &mut candidates).await?;
            let n = self.role.samples;
            for more in 1..=MORE_DRAWINGS {
                if candidates.iter().any(|c| c.reproduced.unwrap_or(0) > 0) {
                    break;
                }
                self.note(
                    st,
                    "no drawn answer passes a script that shows the problem: drawing again",
                );
                let from = answers.len();
                self.draw(st, &request, turn, more * n..(more + 1) * n, &mut answers)
                    .await?;
                for a in &answers[from..] {
                    candidates.push(self.candidate(&st.messages, &a.text, turn));
                }
                self.reproduce(st, &scripts, &mut candidates).await?;
            }
        }
        self.test_candidates(st, &mut candidates).await?;
        let kept = choose(&candidates);
        let clean = candidates.iter().filter(|c| c.clean()).count();
        let agree = candidates
            .iter()
            .filter(|c| !c.change.is_empty() && c.change == candidates[kept].change)
            .count();
        let each: Vec<String> = candidates
            .iter()
            .enumerate()
            .map(|(i, c)| format!("{}: {}", i + 1, c.summary()))
            .collect();
        self.note(
            st,
            format!(
                "drew {} answers: {clean} with blocks that all apply; kept answer {} (its \
                 change made by {agree} of them). Answers {}",
                answers.len(),
                kept + 1,
                each.join("; ")
            ),
        );
        // The answers not kept, as they were written: what `runs show` explains the choice by.
        for (i, a) in answers.iter().enumerate().filter(|(i, _)| *i != kept) {
            let text: String = a.text.chars().take(NOT_KEPT_CHARS).collect();
            let cut = if a.text.chars().count() > NOT_KEPT_CHARS {
                " […]"
            } else {
                ""
            };
            self.note(st, format!("answer {} (not kept):\n{text}{cut}", i + 1));
        }
        for a in &answers {
            usage.add(&a.usage);
        }
        let mut chosen = answers.swap_remove(kept);
        chosen.usage = usage;
        Ok(chosen)
    }

    /// Draws the answers of seeds `seeds` (sample numbers of this turn: the first drawing's
    /// are `1..samples`, its greedy answer being 0) at the role's sample temperature onto
    /// `answers`. An answer the model cannot give (a budget, an error) ends the drawing with
    /// the answers at hand.
    async fn draw(
        &self,
        st: &mut Saved,
        request: &ChatRequest,
        turn: u32,
        seeds: std::ops::Range<u32>,
        answers: &mut Vec<Completion>,
    ) -> Result<()> {
        for k in seeds {
            let request = ChatRequest {
                temperature: Some(self.role.sample_temperature),
                seed: Some(turn.wrapping_mul(1_000).wrapping_add(k)),
                ..request.clone()
            };
            match self.turn(request, turn, false).await {
                Ok(c) => answers.push(c),
                Err(trellis_llm::Error::Cancelled) => return Err(Error::Cancelled),
                Err(e) => {
                    self.note(st, format!("sample {}: {e}", k + 1));
                    break;
                }
            }
        }
        Ok(())
    }

    /// With `test_samples` and a probe: each different change whose blocks all apply, run
    /// against the tests (the files as they are first), its added failures in `broken`.
    async fn test_candidates(&self, st: &mut Saved, candidates: &mut [Candidate]) -> Result<()> {
        let Some(probe) = self.probe.as_ref().filter(|_| self.role.test_samples) else {
            return Ok(());
        };
        if st.untestable || !candidates.iter().any(Candidate::clean) {
            return Ok(());
        }
        let Some(before) = probe.run(Vec::new(), self.cancel.clone()).await else {
            st.untestable = true;
            self.note(
                st,
                format!(
                    "could not run `{}` (it did not finish): the answers of this activation \
                     are not tested",
                    probe.command()
                ),
            );
            return Ok(());
        };
        let mut said = vec![format!(
            "as they are: {}",
            if before.passed {
                "pass".to_owned()
            } else {
                format!("fail ({} failures)", before.failures.len())
            }
        )];
        for i in 0..candidates.len() {
            if !candidates[i].clean() || candidates[i].broken.is_some() {
                continue;
            }
            if self.cancel.is_cancelled() {
                return Err(Error::Cancelled);
            }
            let files = self.changed_files(&candidates[i].edits);
            let (broken, fixed) = match probe.run(files, self.cancel.clone()).await {
                Some(after) => (after.new_failures(&before), after.fixed(&before)),
                // Not runnable with the change (a timeout, a crash): as bad as can be told.
                None => (usize::MAX, 0),
            };
            let change = candidates[i].change.clone();
            for c in candidates.iter_mut().filter(|c| c.change == change) {
                (c.broken, c.fixed) = (Some(broken), fixed);
            }
            said.push(match (broken, fixed) {
                (usize::MAX, _) => format!("answer {}: did not run", i + 1),
                (0, 0) => format!("answer {}: no new failure", i + 1),
                (0, f) => format!("answer {}: no new failure, {f} fixed", i + 1),
                (n, _) => format!("answer {}: {n} new failure(s)", i + 1),
            });
        }
        if self.cancel.is_cancelled() {
            return Err(Error::Cancelled);
        }
        self.note(
            st,
            format!(
                "tested the answers with `{}`: {}",
                probe.command(),
                said.join("; ")
            ),
        );
        Ok(())
    }

    /// The workspace files `edits` change, with the edits made (each `old` replaced once, in
    /// order); a file that cannot be read is left out.
    pub(super) fn changed_files(
        &self,
        edits: &[(String, String, String)],
    ) -> Vec<(String, String)> {
        let mut files: Vec<(String, String)> = Vec::new();
        for (path, old, new) in edits {
            let at = files.iter().position(|(p, _)| p == path);
            let text = match at {
                Some(i) => files[i].1.clone(),
                None => match self.file(path) {
                    Ok(t) => t,
                    Err(_) => continue,
                },
            };
            let text = text.replacen(old.as_str(), new, 1);
            match at {
                Some(i) => files[i].1 = text,
                None => files.push((path.clone(), text)),
            }
        }
        files
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::agent::probe::TestOutcome;

    fn change(new: &str) -> Candidate {
        Candidate {
            change: vec![("a.py".into(), "x = 1".into(), new.into())],
            ..Candidate::default()
        }
    }

    #[test]
    fn a_clean_answer_beats_a_refused_one_and_the_majority_beats_the_first() {
        let refused = Candidate {
            problems: vec!["not found".into()],
            ..change("x = 2")
        };
        assert_eq!(
            refused.summary(),
            "1 block(s) apply, 1 refused (not found…)"
        );
        let nothing = Candidate::default();
        assert_eq!(
            choose(&[nothing.clone(), refused.clone(), change("x = 3")]),
            2
        );
        assert_eq!(
            choose(&[change("x = 2"), change("x = 3"), change("x = 3")]),
            1
        );
        // A tie keeps the earliest: the greedy answer.
        assert_eq!(choose(&[change("x = 2"), change("x = 3")]), 0);
        // ... unless it replaced whole definitions and a later one wrote blocks.
        let whole = Candidate {
            whole: true,
            ..change("x = 2")
        };
        assert_eq!(whole.summary(), "1 whole definition(s) replace");
        assert_eq!(choose(&[whole.clone(), change("x = 3")]), 1);
        assert_eq!(
            choose(&[whole.clone(), whole, change("x = 3")]),
            0,
            "votes first"
        );
        // Nothing applies anywhere: the answer with the most applicable blocks, else the first.
        assert_eq!(choose(&[nothing.clone(), refused]), 1);
        assert_eq!(choose(&[nothing.clone(), nothing]), 0);
    }

    #[test]
    fn a_change_that_breaks_tests_ranks_after_one_that_does_not_whatever_the_votes() {
        let broken = |new: &str, n| Candidate {
            broken: Some(n),
            ..change(new)
        };
        let picked = choose(&[broken("x = 2", 3), broken("x = 2", 3), broken("x = 4", 0)]);
        assert_eq!(picked, 2);
        // Fewer added failures first, when every change breaks something.
        assert_eq!(choose(&[broken("x = 2", 3), broken("x = 4", 1)]), 1);
        // A change that makes a failing test pass, over the majority that does not.
        let fixing = Candidate {
            fixed: 1,
            ..broken("x = 5", 0)
        };
        let kept = choose(&[broken("x = 2", 0), broken("x = 2", 0), fixing]);
        assert_eq!(kept, 2);
    }

    #[test]
    fn new_failures_count_against_the_files_as_they_were() {
        let out = |passed, f: &[&str]| TestOutcome {
            passed,
            failures: f.iter().map(|s| (*s).to_owned()).collect(),
        };
        assert_eq!(out(true, &[]).new_failures(&out(false, &["a"])), 0);
        assert_eq!(out(false, &["a"]).new_failures(&out(false, &["a", "b"])), 0);
        assert_eq!(out(false, &["a", "c"]).new_failures(&out(false, &["a"])), 1);
        // Failing without a failure line where everything passed: still one.
        assert_eq!(out(false, &[]).new_failures(&out(true, &[])), 1);
        assert_eq!(out(true, &[]).fixed(&out(false, &["a", "b"])), 2);
        assert_eq!(out(false, &["b"]).fixed(&out(false, &["a", "b"])), 1);
        assert_eq!(out(true, &[]).fixed(&out(true, &[])), 0);
    }

    #[test]
    fn answers_that_differ_in_blank_lines_and_line_ends_make_one_change() {
        assert_eq!(normal("a = 1  \n\n    b = 2\n"), normal("a = 1\n    b = 2"));
        assert_ne!(normal("a = 1\n  b = 2"), normal("a = 1\n    b = 2"));
    }
}
