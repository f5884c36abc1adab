//! The steps of a conversation: which messages are never summarised or cut, and how the
//! rest divide into steps (a message, or an assistant message with its tool results), shared
//! by the summarisation middleware ([`super::compact`]) and the deterministic fit
//! ([`super::fit`]).

use std::ops::Range;

use trellis_llm::{Message, Role};

use crate::prompt::ContextKind;

/// Whether `m` is never summarised: a system message, the TASK message, or what the user
/// said — the MESSAGES FROM THE USER block (review feedback of a revision) and messages that
/// reached the agent while it worked. The user's words are instructions, not history: a
/// digest kept only their headings, and the model redid the work without the feedback.
pub(crate) fn is_protected(m: &Message) -> bool {
    m.role == Role::System
        || m.content.starts_with(ContextKind::Task.heading())
        || (m.role == Role::User
            && (m.content.starts_with(ContextKind::UserMessages.heading())
                || crate::agent::inbox::is_received(&m.content)))
}

/// The steps of a conversation, oldest first: an assistant message with tool calls and the
/// tool results right after it, or any other message alone. Protected messages belong to
/// none.
pub(crate) fn units(messages: &[Message]) -> Vec<Range<usize>> {
    let mut out = Vec::new();
    let mut i = 0;
    while i < messages.len() {
        if is_protected(&messages[i]) {
            i += 1;
            continue;
        }
        let mut end = i + 1;
        if !messages[i].tool_calls.is_empty() {
            while end < messages.len()
                && messages[end].role == Role::Tool
                && !is_protected(&messages[end])
            {
                end += 1;
            }
        }
        out.push(i..end);
        i = end;
    }
    out
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;
    use trellis_llm::ToolCall;

    /// An assistant message calling `grep` with call id `id` (shared with `compact`'s tests).
    pub(in crate::context) fn call(id: &str) -> Message {
        let mut m = Message::assistant("");
        m.tool_calls.push(ToolCall {
            id: id.into(),
            name: "grep".into(),
            arguments: "{}".into(),
        });
        m
    }

    #[test]
    fn steps_group_calls_with_their_results_and_skip_the_protected() {
        let m = vec![
            Message::system("s"),
            Message::user("## PROJECT CONTEXT\np"),
            Message::user("## TASK\nt"),
            call("a"),
            Message::tool_result("a", "1"),
            Message::tool_result("a", "2"),
            Message::assistant("thinking"),
            call("b"),
            Message::tool_result("b", "3"),
            Message::user("Message from the user while you were working:\nhurry"),
            Message::user("## MESSAGES FROM THE USER\nuse SQLite"),
        ];
        assert_eq!(units(&m), vec![1..2, 3..6, 6..7, 7..9]);
    }
}
