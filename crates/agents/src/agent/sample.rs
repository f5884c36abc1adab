//! Several answers for one turn of a `blocks` role, and the one it keeps (`samples`).
//!
//! A small model's greedy answer is often not its best: it describes the change without
//! writing it, or copies a line wrongly. The turn draws `samples - 1` more answers to the
//! same request at the role's `sample_temperature`, each with its own seed, and keeps one:
//! an answer whose blocks all apply before one with a refused block, and among those the
//! change most answers make (majority voting over candidate patches, as Agentless does),
//! the earliest on a tie — so the greedy answer wins unless others agree on something
//! better. A local model reads the prompt once: every answer shares it (prefix reuse).

use trellis_llm::{ChatRequest, Completion, Message, StreamEvent, Usage, collect_named};

use super::{AgentRun, Saved};
use crate::error::{Error, Result};
use crate::roles::EditFormat;

/// What one answer's blocks come to, for choosing between answers.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Candidate {
    /// The change its applicable blocks make: `(path, old, new)` per block, whitespace at
    /// line ends and blank lines aside, sorted.
    pub change: Vec<(String, String, String)>,
    /// Why each block that cannot be applied is not.
    pub problems: Vec<String>,
}

impl Candidate {
    fn clean(&self) -> bool {
        !self.change.is_empty() && self.problems.is_empty()
    }

    /// What became of the answer, in a few words (the note of the drawing).
    fn summary(&self) -> String {
        let first = |p: &str| p.chars().take(120).collect::<String>();
        match (self.change.len(), self.problems.first()) {
            (0, None) => "no block".into(),
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
/// then the change most candidates make, then the most applicable blocks, then the earliest.
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
                votes(c),
                c.change.len() as i64 - c.problems.len() as i64,
                std::cmp::Reverse(*i),
            )
        })
        .map_or(0, |(i, _)| i)
}

/// `text` without trailing whitespace and blank lines: two answers writing the same lines
/// make the same change.
fn normal(text: &str) -> String {
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

    /// What `text`'s blocks come to against the files now.
    fn candidate(&self, messages: &[Message], text: &str, turn: u32) -> Candidate {
        let edits = self.edits(messages, text, turn);
        let mut change: Vec<(String, String, String)> = edits
            .calls
            .iter()
            .filter_map(|c| c.arguments_json().ok())
            .map(|a| {
                let s = |k: &str| a[k].as_str().unwrap_or_default().to_owned();
                (
                    s("path"),
                    normal(&s("old_string")),
                    normal(&s("new_string")),
                )
            })
            .collect();
        change.sort();
        Candidate {
            change,
            problems: edits.problems,
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
        let mut answers = vec![first];
        for k in 1..self.role.samples {
            let request = ChatRequest {
                temperature: Some(self.role.sample_temperature),
                seed: Some(turn.wrapping_mul(1_000).wrapping_add(k)),
                ..request.clone()
            };
            match self.quiet_turn(request, turn).await {
                Ok(c) => answers.push(c),
                Err(trellis_llm::Error::Cancelled) => return Err(Error::Cancelled),
                Err(e) => {
                    self.note(
                        st,
                        format!("sample {} of {}: {e}", k + 1, self.role.samples),
                    );
                    break;
                }
            }
        }
        let candidates: Vec<Candidate> = answers
            .iter()
            .map(|a| self.candidate(&st.messages, &a.text, turn))
            .collect();
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
        let mut usage = Usage::default();
        for a in &answers {
            usage.add(&a.usage);
        }
        let mut chosen = answers.swap_remove(kept);
        chosen.usage = usage;
        Ok(chosen)
    }

    /// A model call whose text is not streamed to the session (a sample beside the answer
    /// that was); its progress is.
    async fn quiet_turn(&self, request: ChatRequest, turn: u32) -> trellis_llm::Result<Completion> {
        let stream = self.provider.stream(request, self.cancel.clone());
        collect_named(&self.provider.info().profile, stream, |event| {
            if let StreamEvent::Progress {
                prompt_tokens,
                prompt_done,
                generated,
            } = event
            {
                self.send(trellis_protocol::SessionEvent::TurnProgress {
                    turn,
                    prompt_tokens: *prompt_tokens,
                    prompt_done: *prompt_done,
                    generated: *generated,
                });
            }
        })
        .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn change(new: &str) -> Candidate {
        Candidate {
            change: vec![("a.py".into(), "x = 1".into(), new.into())],
            problems: Vec::new(),
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
        // Nothing applies anywhere: the answer with the most applicable blocks, else the first.
        assert_eq!(choose(&[nothing.clone(), refused]), 1);
        assert_eq!(choose(&[nothing.clone(), nothing]), 0);
    }

    #[test]
    fn answers_that_differ_in_blank_lines_and_line_ends_make_one_change() {
        assert_eq!(normal("a = 1  \n\n    b = 2\n"), normal("a = 1\n    b = 2"));
        assert_ne!(normal("a = 1\n  b = 2"), normal("a = 1\n    b = 2"));
    }
}
