//! Two ways a small model's activation goes nowhere, recognised from its conversation (so a
//! resumed activation sees them too).
//!
//! A model stuck in a loop: the same tool calls with the same arguments, answered with the
//! same results, turn after turn. Small models do this (a mistyped path asked for again and
//! again until the turn limit, each turn costing a full answer's decode); nothing new can
//! come of another identical turn, so the agent stops calling tools and reports.
//! (OpenHands' stuck detector watches for the same action and observation repeated, and for
//! alternating pairs; these are its first two cases.)

use trellis_llm::{Message, Role};

/// Identical turns in a row that count as stuck.
pub(super) const REPEATS: usize = 3;

/// One turn's calls (name, arguments) and the results they got.
type Turn<'a> = (Vec<(String, String)>, Vec<&'a str>);

/// Turns of a two-turn cycle (A, B, A, B) that count as stuck.
pub(super) const CYCLE: usize = 4;

fn line(turn: &Turn<'_>) -> String {
    turn.0
        .iter()
        .map(|(name, args)| format!("{name} {args}"))
        .collect::<Vec<_>>()
        .join("; ")
}

/// When the conversation ends with [`REPEATS`] turns that made the same tool calls (names
/// and arguments) and got the same results, or with a cycle of two such turns repeated
/// ([`CYCLE`] turns: a failing edit and the same read, again and again), the calls as one
/// line (`read_file {"path":"x"}`); `None` otherwise. A message of the user or another
/// agent between the turns breaks the repetition (it may have changed the situation).
pub(super) fn repeated_calls(messages: &[Message]) -> Option<String> {
    let mut turns: Vec<Turn<'_>> = Vec::new();
    let mut results: Vec<&str> = Vec::new();
    for m in messages.iter().rev() {
        match m.role {
            Role::Tool => results.push(&m.content),
            Role::Assistant if !m.tool_calls.is_empty() => {
                let calls = m
                    .tool_calls
                    .iter()
                    .map(|c| {
                        let args = c
                            .arguments_json()
                            .map_or_else(|_| c.arguments.clone(), |v| v.to_string());
                        (c.name.clone(), args)
                    })
                    .collect();
                results.reverse();
                turns.push((calls, std::mem::take(&mut results)));
                if turns.len() == CYCLE {
                    break;
                }
            }
            _ => break,
        }
    }
    if !results.is_empty() {
        return None;
    }
    // `turns[0]` is the latest.
    if turns.len() >= REPEATS && turns[..REPEATS].iter().all(|t| *t == turns[0]) {
        return Some(line(&turns[0]));
    }
    (turns.len() == CYCLE && turns[0] == turns[2] && turns[1] == turns[3])
        .then(|| format!("{}, then {}", line(&turns[1]), line(&turns[0])))
}

impl super::AgentRun {
    /// Whether the activation is stuck in a loop ([`repeated_calls`]): then a note for the
    /// session and what the request for the report says about it.
    pub(super) fn stuck(&self, st: &mut super::Saved) -> Option<&'static str> {
        let calls = repeated_calls(&st.messages)?;
        self.note(
            st,
            format!(
                "the model made the same tool calls with the same results turn after turn \
                 ({}); asking for the report",
                crate::compress::truncate_chars(&calls, 200)
            ),
        );
        Some(
            "You made the same tool calls with the same results several times; calling them \
             again cannot help. ",
        )
    }
}

/// What a role that changes files is told when it reports success without having changed
/// anything (asked once per activation).
pub(super) const UNBACKED: &str = "You reported success, but no call that changes files \
succeeded in this activation: nothing has changed yet. If the task needs a change, make it \
now with the editing tools; if it truly needs none, report again and say why in output.";

/// [`UNBACKED`] for a `force_edit` role, whose next answer must be an edit.
pub(super) const UNBACKED_EDIT: &str = "You reported success, but no call that changes \
files succeeded in this activation: nothing has changed yet. Make the change now: answer \
with a call of an editing tool, using the code you have been shown.";

/// [`UNBACKED`] for an `edit_format: blocks` role, which edits with blocks in its answer.
pub(super) const UNBACKED_BLOCKS: &str = "You reported success, but no edit block has been \
applied: nothing has changed yet. If the task needs a change, answer now with edit blocks \
(the file's path, then <<<<<<< SEARCH, the lines copied exactly from the code you were shown, \
=======, the new lines, >>>>>>> REPLACE); if it truly needs none, say why in one sentence.";

/// The question an unbacked success gets: [`UNBACKED_EDIT`] for a `force_edit` role,
/// [`UNBACKED_BLOCKS`] for a `blocks` role.
pub(super) fn question(role: &crate::roles::RoleSpec) -> &'static str {
    if role.force_edit {
        UNBACKED_EDIT
    } else if role.edit_format == crate::roles::EditFormat::Blocks {
        UNBACKED_BLOCKS
    } else {
        UNBACKED
    }
}

/// Whether `m` is the question [`unbacked_success`] leads to.
pub(super) fn is_unbacked_question(m: &Message) -> bool {
    m.role == Role::User && [UNBACKED, UNBACKED_EDIT, UNBACKED_BLOCKS].contains(&m.content.as_str())
}

/// Whether `answer` (a final answer) claims success without anything to show for it: the
/// answer is not a report of failure, no call of a tool that is not `read_only` succeeded in
/// `messages`, and the model has not been asked about it already.
pub(super) fn unbacked_success(
    messages: &[Message],
    answer: &str,
    read_only: impl Fn(&str) -> bool,
) -> bool {
    let failed = serde_json::from_str::<serde_json::Value>(answer.trim())
        .ok()
        .and_then(|v| v.get("failure").and_then(serde_json::Value::as_bool))
        == Some(true);
    if failed || messages.iter().any(is_unbacked_question) {
        return false;
    }
    let ok_results: std::collections::HashSet<&str> = messages
        .iter()
        .filter(|m| m.role == Role::Tool && !m.content.starts_with("error: "))
        .filter_map(|m| m.tool_call_id.as_deref())
        .collect();
    !messages
        .iter()
        .flat_map(|m| &m.tool_calls)
        .any(|c| !read_only(&c.name) && ok_results.contains(c.id.as_str()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use trellis_llm::ToolCall;

    fn call(id: &str, path: &str) -> Message {
        Message {
            tool_calls: vec![ToolCall {
                id: id.into(),
                name: "read_file".into(),
                arguments: format!("{{\"path\": \"{path}\"}}"),
            }],
            ..Message::assistant("")
        }
    }

    fn result(id: &str, text: &str) -> Message {
        Message::tool_result(id, text)
    }

    fn turns(paths: &[&str]) -> Vec<Message> {
        let mut m = vec![Message::system("s"), Message::user("u")];
        for (i, p) in paths.iter().enumerate() {
            let id = format!("c{i}");
            m.push(call(&id, p));
            m.push(result(&id, &format!("error: no file `{p}`")));
        }
        m
    }

    fn edit(id: &str) -> Message {
        Message {
            tool_calls: vec![ToolCall {
                id: id.into(),
                name: "edit_file".into(),
                arguments: "{}".into(),
            }],
            ..Message::assistant("")
        }
    }

    #[test]
    fn success_without_a_change_is_unbacked_once() {
        let read_only = |t: &str| t == "read_file";
        let ok = r#"{"failure": false, "output": "fixed"}"#;
        // Only reads: unbacked.
        let mut m = turns(&["x"]);
        assert!(unbacked_success(&m, ok, read_only));
        // A failure report, or prose, decide: failure is never questioned; prose is.
        assert!(!unbacked_success(
            &m,
            r#"{"failure": true, "output": "no"}"#,
            read_only
        ));
        assert!(unbacked_success(&m, "Done, I fixed it.", read_only));
        // A failed edit changes nothing; a successful one does.
        m.push(edit("e1"));
        m.push(result("e1", "error: old_string not found"));
        assert!(unbacked_success(&m, ok, read_only));
        m.push(edit("e2"));
        m.push(result("e2", "edited inventory.py"));
        assert!(!unbacked_success(&m, ok, read_only));
        // Asked once already: not again.
        let mut m = turns(&["x"]);
        m.push(Message::user(UNBACKED));
        assert!(!unbacked_success(&m, ok, read_only));
    }

    #[test]
    fn three_identical_turns_are_stuck() {
        assert_eq!(
            repeated_calls(&turns(&["a", "x", "x", "x"])).as_deref(),
            Some(r#"read_file {"path":"x"}"#)
        );
    }

    #[test]
    fn a_two_turn_cycle_is_stuck() {
        assert_eq!(
            repeated_calls(&turns(&["a", "x", "y", "x", "y"])).as_deref(),
            Some(r#"read_file {"path":"x"}, then read_file {"path":"y"}"#)
        );
        assert_eq!(repeated_calls(&turns(&["x", "y", "x"])), None);
        assert_eq!(repeated_calls(&turns(&["x", "y", "z", "y"])), None);
    }

    #[test]
    fn fewer_or_different_turns_are_not() {
        assert_eq!(repeated_calls(&turns(&["x", "x"])), None);
        assert_eq!(repeated_calls(&turns(&["x", "y", "x"])), None);
        assert_eq!(repeated_calls(&turns(&[])), None);
    }

    #[test]
    fn a_different_result_or_a_message_between_breaks_the_repetition() {
        let mut m = turns(&["x", "x", "x"]);
        // The second turn's result differs (the file appeared meanwhile).
        m[5] = result("c1", "contents");
        assert_eq!(repeated_calls(&m), None);
        let mut m = turns(&["x", "x"]);
        m.push(Message::user("try y"));
        m.push(call("c9", "x"));
        m.push(result("c9", "error: no file `x`"));
        assert_eq!(repeated_calls(&m), None);
    }
}
