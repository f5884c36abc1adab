//! The summarisation middleware: before a model call, a prompt above the threshold is
//! compacted.
//!
//! The conversation is read as steps: a message, or an assistant message with the tool
//! results that answer it (they stay together — an OpenAI-wire server rejects a tool result
//! whose call is gone, and a call without its results). The system prompt and the TASK
//! message are never summarised. The last steps holding at most `keep_last` messages are
//! kept (at least the last step; fewer when they would leave less than a quarter of the
//! threshold free); every other message is replaced by one summary message, written by the
//! summary model from a transcript (in several calls, each folding into the summary so
//! far, when the transcript is larger than the summary model's window). When the call
//! fails, or no summary model is configured, a deterministic digest (one line per step)
//! takes its place. A prompt that still exceeds the limit is cut ([`super::fit`]).

use std::collections::HashMap;
use std::ops::Range;

use tokio_util::sync::CancellationToken;
use trellis_llm::{ChatRequest, Message, ModelProvider, Role, Usage};
use trellis_protocol::CompactionMethod;

use super::fit::fit;
use super::steps::{is_protected, units};
use super::{Limits, measure};
use crate::error::{Error, Result};
use crate::prompt::{ContextKind, truncate};

/// The heading of a model-written summary message.
pub(crate) const SUMMARY_HEADING: &str = "## SUMMARY OF EARLIER WORK";

/// The heading of a deterministic digest message.
pub(crate) const DIGEST_HEADING: &str = "## EARLIER WORK (condensed)";

/// The instruction of the summary model.
const INSTRUCTION: &str = "You maintain the working memory of a coding agent whose conversation \
has outgrown its context window. Summarise the transcript you are given so the agent can carry \
on with its task without it: what it has learned (files, functions, facts, numbers, error \
messages), what it has done and changed (with file paths), what it decided and why, what \
remains to do, and open questions. Keep identifiers, paths and numbers exact. When the \
transcript starts with an earlier summary, or you are given the summary so far, fold it in. \
Write plain text, no preamble.";

fn is_summary(m: &Message) -> bool {
    m.role == Role::User
        && (m.content.starts_with(SUMMARY_HEADING) || m.content.starts_with(DIGEST_HEADING))
}

/// A compacted request and what it took.
#[derive(Clone, Debug)]
pub(crate) struct Compaction {
    /// The request to send.
    pub request: ChatRequest,
    /// How the earlier messages were replaced.
    pub method: CompactionMethod,
    /// Tokens before and after (with the estimate margin).
    pub before: u64,
    /// See `before`.
    pub after: u64,
    /// The limit it had to fit.
    pub limit: u64,
    /// Messages summarised.
    pub summarized: u32,
    /// Messages cut or dropped by the deterministic fit.
    pub cuts: u32,
    /// Whether the tool descriptions were dropped.
    pub tools_dropped: bool,
    /// Why the model summary was not used or did not suffice.
    pub fallback: Option<String>,
    /// Usage of the summary calls.
    pub usage: Usage,
}

/// Compacts requests of one activation.
pub(crate) struct Compactor<'a> {
    /// Counts the agent's prompts (the agent's model).
    pub counter: &'a dyn ModelProvider,
    /// Writes summaries.
    pub summarizer: Option<&'a dyn ModelProvider>,
    /// The threshold and the limit.
    pub limits: Limits,
    /// Messages kept verbatim at the end.
    pub keep_last: usize,
    /// Stops summary calls.
    pub cancel: &'a CancellationToken,
}

/// Why a summary was not written.
enum Failure {
    Cancelled,
    Failed(String),
}

/// What the summary calls produced.
struct Summarised {
    text: std::result::Result<String, Failure>,
    usage: Usage,
}

/// `text` cut to about `max` bytes, keeping its head and its tail.
fn clip_middle(text: &str, max: usize) -> String {
    if text.len() <= max {
        return text.to_owned();
    }
    let head = truncate(text, max / 2);
    let mut start = text.len() - max / 2;
    while !text.is_char_boundary(start) {
        start += 1;
    }
    format!("{head}\n…\n{}", &text[start..])
}

fn first_line(text: &str, max: usize) -> String {
    let line = text
        .lines()
        .map(str::trim)
        .find(|l| !l.is_empty())
        .unwrap_or("");
    truncate(line, max)
}

/// Tool names by call id.
fn call_names<'m>(messages: impl Iterator<Item = &'m Message>) -> HashMap<String, String> {
    messages
        .flat_map(|m| m.tool_calls.iter())
        .map(|c| (c.id.clone(), c.name.clone()))
        .collect()
}

/// One message as transcript text.
fn render(m: &Message, names: &HashMap<String, String>) -> String {
    match m.role {
        Role::User if is_summary(m) => format!("[earlier summary]\n{}", m.content),
        Role::User => format!("[user]\n{}", m.content),
        Role::System => format!("[system]\n{}", m.content),
        Role::Assistant => {
            let mut s = format!("[assistant]\n{}", m.content.trim());
            for c in &m.tool_calls {
                s.push_str(&format!(
                    "\n→ called {}({})",
                    c.name,
                    truncate(&c.arguments, 1500)
                ));
            }
            s
        }
        Role::Tool => {
            let id = m.tool_call_id.as_deref().unwrap_or_default();
            let name = names.get(id).map_or("a tool", String::as_str);
            format!("[result of {name} ({id})]\n{}", m.content)
        }
    }
}

/// The deterministic stand-in for a summary: an earlier summary as it was, then one line
/// per step, within about `max` bytes (the most recent kept when it is longer).
fn digest(messages: &[&Message], names: &HashMap<String, String>, max: usize) -> String {
    let mut lines = Vec::new();
    for m in messages {
        match m.role {
            Role::User if is_summary(m) => {
                let body = m.content.split_once('\n').map_or("", |(_, b)| b);
                lines.push(format!("Earlier: {}", clip_middle(body.trim(), max / 2)));
            }
            Role::User if m.content.starts_with("## ") => lines.push(format!(
                "- context `{}` ({} bytes)",
                first_line(&m.content, 80),
                m.content.len()
            )),
            Role::User | Role::System => {
                lines.push(format!("- user: {}", first_line(&m.content, 200)));
            }
            Role::Assistant => {
                if !m.content.trim().is_empty() {
                    lines.push(format!("- assistant: {}", first_line(&m.content, 160)));
                }
                for c in &m.tool_calls {
                    lines.push(format!(
                        "- called {}({})",
                        c.name,
                        truncate(&c.arguments, 120)
                    ));
                }
            }
            Role::Tool => {
                let id = m.tool_call_id.as_deref().unwrap_or_default();
                lines.push(format!(
                    "  → {}: {} ({} bytes)",
                    names.get(id).map_or("result", String::as_str),
                    first_line(&m.content, 160),
                    m.content.len()
                ));
            }
        }
    }
    let text = lines.join("\n");
    if text.len() <= max {
        return text;
    }
    // The most recent steps matter most: keep a third of the head, two thirds of the tail.
    let head = truncate(&text, max / 3);
    let mut start = text.len() - max * 2 / 3;
    while !text.is_char_boundary(start) {
        start += 1;
    }
    format!("{head}\n…\n{}", &text[start..])
}

impl Compactor<'_> {
    fn measure(&self, request: &ChatRequest) -> u64 {
        measure(self.counter, request)
    }

    /// The compacted request, or `None` when `request` is within the threshold. Fails only
    /// when cancelled.
    pub async fn compact(&self, request: &ChatRequest) -> Result<Option<Compaction>> {
        let before = self.measure(request);
        if before <= self.limits.threshold {
            return Ok(None);
        }
        let limit = self.limits.limit;
        let messages = &request.messages;
        let steps = units(messages);
        let summary_tokens = (self.limits.threshold / 5).clamp(64, 2048);
        let k = self.kept_steps(request, &steps, summary_tokens);
        let summarised: Vec<Range<usize>> = steps[..steps.len() - k].to_vec();
        let mut out = Compaction {
            request: request.clone(),
            method: CompactionMethod::Truncation,
            before,
            after: before,
            limit,
            summarized: 0,
            cuts: 0,
            tools_dropped: false,
            fallback: None,
            usage: Usage::default(),
        };
        if !summarised.is_empty() {
            let mut gone = vec![false; messages.len()];
            for r in &summarised {
                gone[r.clone()].iter_mut().for_each(|g| *g = true);
            }
            let old: Vec<&Message> = (0..messages.len())
                .filter(|&i| gone[i])
                .map(|i| &messages[i])
                .collect();
            let names = call_names(messages.iter());
            let task = messages
                .iter()
                .find(|m| m.content.starts_with(ContextKind::Task.heading()))
                .map(|m| truncate(&m.content, 1500));
            let note = |how: &str| {
                format!(
                    "(the earlier {} messages of this conversation, {how} to fit your context \
                     window; re-read files and stored tool outputs you need again)",
                    old.len()
                )
            };
            // A model summary pays only when what it replaces is larger than it: when the
            // conversation's fixed part (system prompt, context, tools) is what fills the
            // window, the old steps are a few hundred tokens and a digest does as well —
            // without a model call every turn (seconds each for a small local model).
            let without_old = ChatRequest {
                messages: (0..messages.len())
                    .filter(|&i| !gone[i])
                    .map(|i| messages[i].clone())
                    .collect(),
                ..request.clone()
            };
            let old_tokens = before.saturating_sub(self.measure(&without_old));
            let worth_a_model = old_tokens > summary_tokens * 2;
            let summary = match self.summarizer {
                Some(_) if !worth_a_model => Err(Failure::Failed(format!(
                    "the {old_tokens} tokens to condense are too few for a model summary"
                ))),
                Some(s) => {
                    let r = self
                        .summarize(s, &old, &names, task.as_deref(), summary_tokens)
                        .await;
                    out.usage = r.usage;
                    r.text
                }
                None => Err(Failure::Failed("no summary model is configured".into())),
            };
            let text = match summary {
                Ok(text) => {
                    out.method = CompactionMethod::Summary;
                    format!("{SUMMARY_HEADING}\n{}\n{text}", note("summarised"))
                }
                Err(Failure::Cancelled) => return Err(Error::Cancelled),
                Err(Failure::Failed(why)) => {
                    out.method = CompactionMethod::Digest;
                    out.fallback = Some(why);
                    let body = digest(&old, &names, (summary_tokens * 3) as usize);
                    format!("{DIGEST_HEADING}\n{}\n{body}", note("condensed"))
                }
            };
            let mut kept = Vec::with_capacity(messages.len());
            let mut placed = false;
            for (i, m) in messages.iter().enumerate() {
                if !gone[i] {
                    kept.push(m.clone());
                } else if !placed {
                    kept.push(Message::user(text.clone()));
                    placed = true;
                }
            }
            out.summarized = old.len() as u32;
            out.request.messages = kept;
            out.after = self.measure(&out.request);
        }
        if out.after > limit {
            let f = fit(&mut out.request, limit, |r| self.measure(r));
            out.after = f.tokens;
            out.cuts = f.cuts;
            out.tools_dropped = f.tools_dropped;
            if out.method == CompactionMethod::Summary {
                out.fallback = Some("the summarised prompt still exceeded the limit: cut".into());
            }
        }
        tracing::info!(
            method = out.method.as_str(),
            before = out.before,
            after = out.after,
            limit,
            summarized = out.summarized,
            cuts = out.cuts,
            fallback = out.fallback.as_deref().unwrap_or(""),
            "context compacted"
        );
        Ok(Some(out))
    }

    /// How many of the last steps stay verbatim: those holding at most `keep_last`
    /// messages (at least the newest step, when it is the last message), fewer while they
    /// and a summary would leave less than a quarter of the threshold free.
    fn kept_steps(&self, request: &ChatRequest, steps: &[Range<usize>], summary: u64) -> usize {
        // The newest message (a tool result, a message that just arrived) is always kept,
        // unless it is the TASK itself (a fresh prompt, only context before it).
        let newest = steps
            .last()
            .is_some_and(|s| s.end == request.messages.len());
        let keep_one = usize::from(newest);
        let mut k = 0;
        let mut count = 0;
        for s in steps.iter().rev() {
            let n = s.end - s.start;
            if k >= keep_one && count + n > self.keep_last {
                break;
            }
            k += 1;
            count += n;
        }
        let target = self.limits.threshold * 3 / 4;
        let protected: Vec<Message> = request
            .messages
            .iter()
            .filter(|m| is_protected(m))
            .cloned()
            .collect();
        while k > keep_one {
            let from = steps[steps.len() - k].start;
            let mut messages = protected.clone();
            messages.extend(
                request.messages[from..]
                    .iter()
                    .filter(|m| !is_protected(m))
                    .cloned(),
            );
            let candidate = ChatRequest {
                messages,
                ..request.clone()
            };
            if self.measure(&candidate) + summary <= target {
                break;
            }
            k -= 1;
        }
        k
    }

    /// Summarises `old` with `model` into at most `max_tokens` tokens, in as many calls as
    /// the model's window needs (each folding the next part into the summary so far).
    async fn summarize(
        &self,
        model: &dyn ModelProvider,
        old: &[&Message],
        names: &HashMap<String, String>,
        task: Option<&str>,
        max_tokens: u64,
    ) -> Summarised {
        let mut usage = Usage::default();
        let window = model.context_window().await.map(|w| u64::from(w.tokens));
        // Like an agent's model, a summary model of unknown window gets the default limit.
        let budget = window
            .map_or(super::DEFAULT_SUMMARIZE_AT, |w| {
                w.saturating_sub(max_tokens + 64)
            })
            .max(256);
        // Transcript parts of about a third of a token per byte, with room for the
        // instruction, the task and the summary so far.
        let part_bytes =
            usize::try_from(budget.saturating_sub(max_tokens + 500).max(128) * 3).unwrap_or(4096);
        let mut blocks: Vec<String> = old.iter().map(|m| render(m, names)).collect();
        let total: usize = blocks.iter().map(String::len).sum();
        const MAX_PARTS: usize = 6;
        if total > part_bytes * MAX_PARTS {
            // Too long for a few calls: every block gives up the same share of its middle.
            let ratio = (part_bytes * MAX_PARTS) as f64 / total as f64;
            for b in &mut blocks {
                let keep = ((b.len() as f64 * ratio) as usize).max(200);
                *b = clip_middle(b, keep);
            }
        }
        let mut parts: Vec<String> = Vec::new();
        for b in blocks {
            let b = clip_middle(&b, part_bytes);
            match parts.last_mut() {
                Some(p) if p.len() + b.len() + 2 <= part_bytes => {
                    p.push_str("\n\n");
                    p.push_str(&b);
                }
                _ => parts.push(b),
            }
        }
        let words = max_tokens * 2 / 3;
        let mut so_far: Option<String> = None;
        for (i, part) in parts.iter().enumerate() {
            let mut part = part.clone();
            let request = loop {
                let mut user = String::new();
                if let Some(task) = task {
                    user.push_str(&format!("The agent's task, for reference:\n{task}\n\n"));
                }
                if let Some(prev) = &so_far {
                    user.push_str(&format!("## SUMMARY SO FAR\n{prev}\n\n"));
                }
                user.push_str(&format!(
                    "## TRANSCRIPT{}\n{part}\n\nWrite the summary now, at most {words} words.",
                    if parts.len() > 1 {
                        format!(" (part {} of {})", i + 1, parts.len())
                    } else {
                        String::new()
                    }
                ));
                let request = ChatRequest {
                    max_tokens: u32::try_from(max_tokens).ok(),
                    ..ChatRequest::new(vec![Message::system(INSTRUCTION), Message::user(user)])
                };
                if measure(model, &request) <= budget || part.len() < 400 {
                    break request;
                }
                part = clip_middle(&part, part.len() * 7 / 10);
            };
            let completion = match model.complete(request, self.cancel.clone()).await {
                Ok(c) => c,
                Err(trellis_llm::Error::Cancelled) => {
                    return Summarised {
                        text: Err(Failure::Cancelled),
                        usage,
                    };
                }
                Err(e) => {
                    return Summarised {
                        text: Err(Failure::Failed(format!("the summary call failed: {e}"))),
                        usage,
                    };
                }
            };
            usage.add(&completion.usage);
            let text = completion.text.trim();
            if text.is_empty() {
                return Summarised {
                    text: Err(Failure::Failed("the summary model answered nothing".into())),
                    usage,
                };
            }
            so_far = Some(text.to_owned());
        }
        Summarised {
            text: so_far.ok_or_else(|| Failure::Failed("nothing to summarise".into())),
            usage,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::steps::tests::call;
    use super::*;

    #[test]
    fn a_digest_keeps_the_earlier_summary_and_one_line_per_step() {
        let earlier = Message::user(format!("{SUMMARY_HEADING}\n(note)\nread src/a.rs"));
        let c = call("a");
        let r = Message::tool_result("a", "src/a.rs:3: fn main\nmore");
        let names = call_names([&c].into_iter());
        let d = digest(&[&earlier, &c, &r], &names, 1000);
        assert!(d.contains("Earlier: (note)\nread src/a.rs"), "{d}");
        assert!(d.contains("- called grep({})"), "{d}");
        assert!(d.contains("→ grep: src/a.rs:3: fn main (24 bytes)"), "{d}");
        let long = digest(&[&earlier, &c, &r].repeat(50), &names, 300);
        assert!(long.len() < 400, "{}", long.len());
    }
}
