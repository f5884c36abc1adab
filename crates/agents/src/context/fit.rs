//! The deterministic fallback: shrinks a request until it fits a token limit, in this order
//! (each step only while the request is still over the limit):
//!
//! 1. the longest message that is not the system prompt, the TASK or the last message (a
//!    tool result may be the last) is cut to three fifths, down to 600 bytes — a long tool
//!    call's string arguments are cut the same way, and stay valid JSON;
//! 2. the oldest step (a message, or an assistant message with its tool results) other
//!    than the last goes, replaced by one marker message;
//! 3. the tool descriptions go;
//! 4. any message, the system prompt and the task included, is cut, down to 200 bytes.
//!
//! Tool calls and their results are dropped together, never one without the other.

use serde_json::Value;
use trellis_llm::{ChatRequest, Message, Role};

use super::steps::{is_protected, units};
use crate::prompt::truncate;

/// What [`fit`] changed.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Fitted {
    /// Messages cut or dropped.
    pub cuts: u32,
    /// Whether the tool descriptions were dropped.
    pub tools_dropped: bool,
    /// The tokens after.
    pub tokens: u64,
}

/// The text of the marker that stands for dropped messages.
fn marker(dropped: u32) -> String {
    format!(
        "[{dropped} earlier message(s) were dropped to fit the context window; re-read what \
         you still need]"
    )
}

const MARKER_PREFIX: &str = "[";
const MARKER_TAIL: &str = "earlier message(s) were dropped to fit the context window";

fn is_marker(m: &Message) -> bool {
    m.role == Role::User && m.content.starts_with(MARKER_PREFIX) && m.content.contains(MARKER_TAIL)
}

/// The bytes of `m` that cutting can shrink.
fn size(m: &Message) -> usize {
    m.content.len()
        + m.tool_calls
            .iter()
            .map(|c| c.arguments.len())
            .sum::<usize>()
}

/// Cuts every string in `v` longer than `keep` bytes to `keep`.
fn cut_strings(v: &mut Value, keep: usize) {
    match v {
        Value::String(s) if s.len() > keep + 32 => *s = truncate(s, keep),
        Value::Array(items) => items.iter_mut().for_each(|i| cut_strings(i, keep)),
        Value::Object(m) => m.values_mut().for_each(|i| cut_strings(i, keep)),
        _ => {}
    }
}

/// Cuts `m` to about three fifths of its size, not below `floor` bytes per part; false when
/// nothing could be cut.
fn cut(m: &mut Message, floor: usize) -> bool {
    let mut changed = false;
    if m.content.len() > floor + 32 {
        let keep = (m.content.len() * 3 / 5).max(floor);
        let text = truncate(&m.content, keep);
        if text.len() + 16 < m.content.len() {
            m.content = text;
            changed = true;
        }
    }
    for call in &mut m.tool_calls {
        if call.arguments.len() <= floor {
            continue;
        }
        // Keep the arguments valid JSON: the wire formats send them back as they were.
        if let Ok(mut v) = serde_json::from_str::<Value>(&call.arguments) {
            let keep = (call.arguments.len() * 3 / 5).max(floor) / 2;
            cut_strings(&mut v, keep.max(64));
            let text = trellis_protocol::canonical::to_canonical_string(&v)
                .unwrap_or_else(|_| v.to_string());
            if text.len() < call.arguments.len() {
                call.arguments = text;
                changed = true;
            }
        }
    }
    changed
}

/// Shrinks `request` until `measure(request) <= limit` or nothing is left to shrink.
pub(crate) fn fit(
    request: &mut ChatRequest,
    limit: u64,
    measure: impl Fn(&ChatRequest) -> u64,
) -> Fitted {
    let mut f = Fitted::default();
    let mut dropped = 0;
    for _ in 0..256 {
        f.tokens = measure(request);
        if f.tokens <= limit {
            break;
        }
        let messages = &mut request.messages;
        let last = messages.len().saturating_sub(1);
        // 1. The longest cuttable message.
        let mut order: Vec<usize> = (0..messages.len())
            .filter(|&i| {
                let m = &messages[i];
                !is_protected(m) && !is_marker(m) && (i < last || m.role == Role::Tool)
            })
            .collect();
        order.sort_by_key(|&i| std::cmp::Reverse(size(&messages[i])));
        if order.into_iter().any(|i| cut(&mut messages[i], 600)) {
            f.cuts += 1;
            continue;
        }
        // 2. The oldest step but the last.
        let steps = units(messages);
        if steps.len() > 1
            && let Some(first) = steps.iter().find(|u| !is_marker(&messages[u.start]))
            && first.start != steps[steps.len() - 1].start
        {
            let first = first.clone();
            let n = (first.end - first.start) as u32;
            dropped += n;
            f.cuts += n;
            let at = first.start;
            messages.drain(first);
            match messages.iter().position(is_marker) {
                Some(m) => messages[m].content = marker(dropped),
                None => messages.insert(at, Message::user(marker(dropped))),
            }
            continue;
        }
        // 3. The tool descriptions.
        if !request.tools.is_empty() {
            request.tools.clear();
            f.tools_dropped = true;
            continue;
        }
        // 4. Anything, down to 200 bytes.
        let messages = &mut request.messages;
        let mut order: Vec<usize> = (0..messages.len()).collect();
        order.sort_by_key(|&i| std::cmp::Reverse(size(&messages[i])));
        if order.into_iter().any(|i| cut(&mut messages[i], 200)) {
            f.cuts += 1;
        } else {
            break;
        }
    }
    f
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;
    use trellis_llm::ToolCall;
    use trellis_llm::tokens::estimate_request;

    fn call(id: &str, args: &str) -> Message {
        let mut m = Message::assistant("");
        m.tool_calls.push(ToolCall {
            id: id.into(),
            name: "write_file".into(),
            arguments: args.into(),
        });
        m
    }

    fn conversation() -> Vec<Message> {
        let mut v = vec![
            Message::system("## ROLE\nYou write.".repeat(20)),
            Message::user("## TASK\nWrite it."),
        ];
        for i in 0..12 {
            let big = "x".repeat(3000);
            v.push(call(
                &format!("c{i}"),
                &serde_json::json!({"path": "a.rs", "content": big}).to_string(),
            ));
            v.push(Message::tool_result(format!("c{i}"), "ok ".repeat(400)));
        }
        v
    }

    fn consistent(messages: &[Message]) -> bool {
        let mut open: Vec<String> = Vec::new();
        for m in messages {
            match m.role {
                Role::Tool => {
                    let id = m.tool_call_id.clone().unwrap_or_default();
                    match open.iter().position(|o| *o == id) {
                        Some(i) => {
                            open.remove(i);
                        }
                        None => return false,
                    }
                }
                _ if !open.is_empty() => return false,
                _ => open = m.tool_calls.iter().map(|c| c.id.clone()).collect(),
            }
        }
        true
    }

    #[test]
    fn fits_keeps_pairs_together_and_json_valid() {
        let mut r = ChatRequest::new(conversation());
        let before = estimate_request(&r).tokens;
        let f = fit(&mut r, 2_000, |r| estimate_request(r).tokens);
        assert!(f.tokens <= 2_000, "{f:?} (from {before})");
        assert_eq!(f.tokens, estimate_request(&r).tokens);
        assert!(consistent(&r.messages), "{:#?}", r.messages);
        for m in &r.messages {
            for c in &m.tool_calls {
                serde_json::from_str::<Value>(&c.arguments).unwrap();
            }
        }
        // The task and the system prompt are untouched; old steps went behind a marker.
        assert!(r.messages[1].content.starts_with("## TASK"));
        assert!(r.messages.iter().any(is_marker));
        assert!(!f.tools_dropped);
    }

    #[test]
    fn a_tiny_limit_cuts_everything_down() {
        let mut r = ChatRequest::new(conversation());
        let f = fit(&mut r, 250, |r| estimate_request(r).tokens);
        assert!(f.tokens <= 250, "{f:?}");
        assert!(consistent(&r.messages));
    }
}
