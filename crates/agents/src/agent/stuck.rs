//! A model stuck in a loop: the same tool calls with the same arguments, answered with the
//! same results, turn after turn. Small models do this (a mistyped path asked for again and
//! again until the turn limit, each turn costing a full answer's decode); nothing new can
//! come of another identical turn, so the agent stops calling tools and reports.
//! (OpenHands' stuck detector watches for the same action and observation repeated; this is
//! its first case.)

use trellis_llm::{Message, Role};

/// Identical turns in a row that count as stuck.
pub(super) const REPEATS: usize = 3;

/// When the conversation ends with [`REPEATS`] turns that made the same tool calls (names
/// and arguments) and got the same results, the calls as one line (`read_file
/// {"path":"x"}`); `None` otherwise. A message of the user or another agent between the
/// turns breaks the repetition (it may have changed the situation).
pub(super) fn repeated_calls(messages: &[Message]) -> Option<String> {
    let mut turns: Vec<(Vec<(String, String)>, Vec<&str>)> = Vec::new();
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
                if turns.len() == REPEATS {
                    break;
                }
            }
            _ => break,
        }
    }
    let first = turns.first()?;
    if turns.len() < REPEATS || turns.iter().any(|t| t != first) || !results.is_empty() {
        return None;
    }
    Some(
        first
            .0
            .iter()
            .map(|(name, args)| format!("{name} {args}"))
            .collect::<Vec<_>>()
            .join("; "),
    )
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

    #[test]
    fn three_identical_turns_are_stuck() {
        assert_eq!(
            repeated_calls(&turns(&["a", "x", "x", "x"])).as_deref(),
            Some(r#"read_file {"path":"x"}"#)
        );
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
