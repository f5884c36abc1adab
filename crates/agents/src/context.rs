//! Context management (`docs/context.md`): what keeps an agent's prompt inside
//! its input cap and its model's context window, however long the task runs.
//!
//! - **Input caps** ([`ContextConfig::cap_for`]): a token cap per agent role, a default table
//!   ([`DEFAULT_CAPS`]) as defaults, configurable in `[context]`; the model's context window
//!   minus the reply reserve caps every prompt in any case ([`ContextPolicy::limits`]).
//! - **Summarisation middleware** (`compact`): before every model call the loop counts the
//!   prompt with the model's token counter; above the threshold (`summarize_at`, or the cap)
//!   every message but the system prompt, the TASK message and the last `keep_last` is
//!   summarised into one message by the summary model, tool calls and their results kept or
//!   summarised together. When that call fails a deterministic digest replaces them; what
//!   still does not fit is cut (`fit`). Every compaction is a
//!   [`SessionEvent::ContextCompacted`](trellis_protocol::SessionEvent::ContextCompacted).
//! - **Tool-output handles** ([`outputs`]): an output above `tool_output_max_bytes` is stored
//!   and the model gets its head and tail and a handle to read the rest with
//!   [`READ_TOOL_OUTPUT`].
//!
//! Compression of typed handoff fields to their limits is [`crate::compress`].

mod compact;
mod fit;
pub mod outputs;
mod steps;

use std::collections::BTreeMap;
use std::sync::Arc;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use trellis_llm::{ChatRequest, ModelProvider};

use crate::error::{Error, Result};

pub(crate) use compact::Compactor;
pub use outputs::{DirOutputs, MemoryOutputs, OutputStore, READ_TOOL_OUTPUT};

/// The default input caps (tokens) by agent role name (a task tree's agents within ~40k).
pub const DEFAULT_CAPS: &[(&str, u64)] = &[
    ("intent", 15_000),
    ("milestone", 10_000),
    ("expander", 10_000),
    ("researcher", 12_000),
    ("planner", 15_000),
    ("implementor", 15_000),
    ("validator", 5_000),
    ("qa", 10_000),
    ("assessor", 8_000),
];

/// Summarise above this many prompt tokens unless configured (the default trigger); a lower
/// `window − reserve` wins.
pub const DEFAULT_SUMMARIZE_AT: u64 = 30_000;

/// Messages kept verbatim at the end of the conversation.
pub const DEFAULT_KEEP_LAST: usize = 10;

/// The model role that summarises (the planning model).
pub const DEFAULT_SUMMARY_ROLE: &str = "planner";

/// Tool outputs above this many bytes are stored behind a handle (or a quarter of the limit
/// in tokens as bytes, when that is less).
pub const DEFAULT_TOOL_OUTPUT_MAX_BYTES: usize = 16 * 1024;

/// Tokens kept free for the model's answer (at most a quarter of the window).
pub const DEFAULT_REPLY_RESERVE: u64 = 1024;

/// A token count that is an estimate (not the model's own tokenizer) is raised by this
/// many percent before it is compared with a limit.
pub const INEXACT_MARGIN_PERCENT: u64 = 10;

/// `[context]`: input caps, summarisation and tool-output handles (`docs/context.md`).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ContextConfig {
    /// Input caps in tokens by agent role name (`caps.implementor = 15000`), over the
    /// default table ([`DEFAULT_CAPS`]).
    #[serde(default)]
    pub caps: BTreeMap<String, u64>,
    /// The cap of roles with none in `caps` or the table (default: the model's context
    /// window minus the reply reserve).
    pub default_cap: Option<u64>,
    /// Summarise when the prompt exceeds this many tokens (default 30000, or the window
    /// minus the reply reserve when lower); exceeding the cap summarises too.
    pub summarize_at: Option<u64>,
    /// Messages kept verbatim at the end when summarising (default 10).
    pub keep_last: Option<usize>,
    /// The model role (`[roles]`) whose model summarises (default `planner`).
    pub summary_role: Option<String>,
    /// Tool outputs above this many bytes are stored and replaced by their head and tail
    /// and a handle (default 16384, or the limit in tokens when lower).
    pub tool_output_max_bytes: Option<usize>,
    /// Tokens kept free for the answer (default 1024, at most a quarter of the window).
    pub reply_reserve: Option<u64>,
}

impl ContextConfig {
    /// Checks the values: a known summary role, caps and thresholds above zero.
    pub fn validate(&self) -> Result<()> {
        let roles = trellis_llm::config::ROLES;
        if let Some(role) = &self.summary_role
            && !roles.contains(&role.as_str())
        {
            return Err(Error::Config(format!(
                "`context.summary_role`: unknown model role `{role}`{}; model roles: {}",
                trellis_graph::nearest(role, roles.iter().copied())
                    .map(|s| format!(" (did you mean `{s}`?)"))
                    .unwrap_or_default(),
                roles.join(", ")
            )));
        }
        let zero = |key: &str| Err(Error::Config(format!("`context.{key}` must be above 0")));
        if let Some((role, _)) = self.caps.iter().find(|(_, cap)| **cap == 0) {
            return zero(&format!("caps.{role}"));
        }
        for (key, value) in [
            ("default_cap", self.default_cap),
            ("summarize_at", self.summarize_at),
            (
                "tool_output_max_bytes",
                self.tool_output_max_bytes.map(|b| b as u64),
            ),
        ] {
            if value == Some(0) {
                return zero(key);
            }
        }
        Ok(())
    }

    /// The input cap of agent role `role`: `caps.<role>`, else the default table, else
    /// `default_cap`; `None` leaves only the model's window.
    pub fn cap_for(&self, role: &str) -> Option<u64> {
        self.caps
            .get(role)
            .copied()
            .or_else(|| {
                DEFAULT_CAPS
                    .iter()
                    .find(|(name, _)| *name == role)
                    .map(|(_, cap)| *cap)
            })
            .or(self.default_cap)
    }

    /// The model role that summarises.
    pub fn summary_role(&self) -> &str {
        self.summary_role.as_deref().unwrap_or(DEFAULT_SUMMARY_ROLE)
    }

    /// The policy of an activation of agent role `role`, without its summary model and
    /// output store (the runtime adds them).
    pub fn policy_for(&self, role: &str) -> ContextPolicy {
        ContextPolicy {
            cap: self.cap_for(role),
            summarize_at: self.summarize_at,
            keep_last: self.keep_last.unwrap_or(DEFAULT_KEEP_LAST),
            reply_reserve: self.reply_reserve,
            tool_output_max_bytes: self.tool_output_max_bytes,
            summarizer: None,
            outputs: None,
            tool_embedder: None,
            path_notes: None,
        }
    }
}

/// How one activation keeps its prompt within bounds ([`crate::AgentRun::context`]).
#[derive(Clone)]
pub struct ContextPolicy {
    /// The input cap in tokens (`None`: the model's window minus the reply reserve).
    pub cap: Option<u64>,
    /// The summarisation threshold (`None`: 30000 or the window minus the reserve, lower).
    pub summarize_at: Option<u64>,
    /// Messages kept verbatim when summarising.
    pub keep_last: usize,
    /// Tokens kept free for the answer (`None`: 1024, at most a quarter of the window).
    pub reply_reserve: Option<u64>,
    /// Tool outputs above this many bytes go behind a handle (`None`: the default).
    pub tool_output_max_bytes: Option<usize>,
    /// The summary model; without one a deterministic digest replaces summarised messages.
    /// Its usage should be booked to the agent's ledger (the runtime passes a budgeted
    /// provider of the same scope).
    pub summarizer: Option<Arc<dyn ModelProvider>>,
    /// Where stored tool outputs go (`None`: in memory, for this activation).
    pub outputs: Option<Arc<dyn OutputStore>>,
    /// Embeds MCP tools and the task for the tool-schema budget's semantic ranking (fused
    /// with BM25 and the tool knowledge graph's PageRank); `None`: lexical only.
    pub tool_embedder: Option<Arc<dyn trellis_index::Embedder>>,
    /// Notes given with a path the first time a tool touches it (the instructions of a
    /// nested directory: `AGENTS.md` below the root).
    pub path_notes: Option<Arc<dyn crate::agent::PathNotes>>,
}

impl Default for ContextPolicy {
    fn default() -> Self {
        Self {
            cap: None,
            summarize_at: None,
            keep_last: DEFAULT_KEEP_LAST,
            reply_reserve: None,
            tool_output_max_bytes: None,
            summarizer: None,
            outputs: None,
            tool_embedder: None,
            path_notes: None,
        }
    }
}

impl std::fmt::Debug for ContextPolicy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ContextPolicy")
            .field("cap", &self.cap)
            .field("summarize_at", &self.summarize_at)
            .field("keep_last", &self.keep_last)
            .field("reply_reserve", &self.reply_reserve)
            .field("tool_output_max_bytes", &self.tool_output_max_bytes)
            .field(
                "summarizer",
                &self.summarizer.as_ref().map(|p| p.info().profile.clone()),
            )
            .finish_non_exhaustive()
    }
}

/// A policy resolved against a model's context window.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    /// The prompt must not exceed this many tokens: the cap, or the window minus the reply
    /// reserve (the lower), else the threshold.
    pub limit: u64,
    /// Compaction starts above this many tokens (at most `limit`).
    pub threshold: u64,
    /// Tokens kept free for the answer.
    pub reserve: u64,
    /// Tool outputs above this many bytes go behind a handle.
    pub tool_output_max_bytes: usize,
}

impl ContextPolicy {
    /// The limits for a model with context window `window` (when known).
    pub fn limits(&self, window: Option<u32>) -> Limits {
        let window = window.map(u64::from);
        let reserve = match window {
            Some(w) => self
                .reply_reserve
                .unwrap_or(DEFAULT_REPLY_RESERVE)
                .min(w / 4),
            None => self.reply_reserve.unwrap_or(DEFAULT_REPLY_RESERVE),
        };
        let room = window.map(|w| w.saturating_sub(reserve).max(1));
        let cap = match (self.cap, room) {
            (Some(c), Some(r)) => Some(c.min(r)),
            (c, r) => c.or(r),
        };
        let trigger = self
            .summarize_at
            .unwrap_or_else(|| room.map_or(DEFAULT_SUMMARIZE_AT, |r| r.min(DEFAULT_SUMMARIZE_AT)));
        let threshold = cap.map_or(trigger, |c| trigger.min(c)).max(1);
        let limit = cap.unwrap_or(threshold);
        let by_limit = usize::try_from(limit).unwrap_or(usize::MAX).max(512);
        Limits {
            limit,
            threshold,
            reserve,
            tool_output_max_bytes: self
                .tool_output_max_bytes
                .unwrap_or(DEFAULT_TOOL_OUTPUT_MAX_BYTES.min(by_limit)),
        }
    }
}

/// The prompt tokens of `request` as `provider` counts them, raised by
/// [`INEXACT_MARGIN_PERCENT`] when the count is an estimate (the documented estimate when
/// the provider cannot count).
pub fn measure(provider: &dyn ModelProvider, request: &ChatRequest) -> u64 {
    let count = provider
        .count_tokens(request)
        .unwrap_or_else(|_| trellis_llm::tokens::estimate_request(request));
    if count.exact {
        count.tokens
    } else {
        count.tokens + (count.tokens * INEXACT_MARGIN_PERCENT).div_ceil(100)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn caps_come_from_the_config_then_the_seed_table_then_the_default() {
        let mut c = ContextConfig::default();
        assert_eq!(c.cap_for("implementor"), Some(15_000));
        assert_eq!(c.cap_for("validator"), Some(5_000));
        assert_eq!(c.cap_for("code_agent"), None);
        c.caps.insert("implementor".into(), 9_000);
        c.default_cap = Some(20_000);
        assert_eq!(c.cap_for("implementor"), Some(9_000));
        assert_eq!(c.cap_for("code_agent"), Some(20_000));
        assert_eq!(c.cap_for("qa"), Some(10_000));
    }

    #[test]
    fn limits_take_the_lowest_of_cap_window_and_trigger() {
        let p = ContextPolicy {
            cap: Some(15_000),
            ..ContextPolicy::default()
        };
        // A 40k model: the cap wins, and it is below the 30k trigger.
        let l = p.limits(Some(40_000));
        assert_eq!((l.limit, l.threshold, l.reserve), (15_000, 15_000, 1024));
        // An 8k model: the window minus the reserve wins.
        let l = p.limits(Some(8_192));
        assert_eq!((l.limit, l.threshold), (8_192 - 1024, 8_192 - 1024));
        // No cap, a 128k window: summarise at 30k, never exceed the window.
        let l = ContextPolicy::default().limits(Some(128_000));
        assert_eq!((l.limit, l.threshold), (128_000 - 1024, 30_000));
        assert_eq!(l.tool_output_max_bytes, DEFAULT_TOOL_OUTPUT_MAX_BYTES);
        // Nothing known: the trigger is the limit too.
        let l = ContextPolicy::default().limits(None);
        assert_eq!((l.limit, l.threshold), (30_000, 30_000));
        // A tiny window: the reserve is at most a quarter of it, outputs scale down.
        let l = ContextPolicy::default().limits(Some(2_000));
        assert_eq!(
            (l.limit, l.reserve, l.tool_output_max_bytes),
            (1_500, 500, 1_500)
        );
    }

    #[test]
    fn validation_names_the_key() {
        let c = ContextConfig {
            summary_role: Some("planer".into()),
            ..ContextConfig::default()
        };
        let e = c
            .validate()
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(e.contains("did you mean `planner`"), "{e}");
        let c = ContextConfig {
            keep_last: Some(0),
            caps: BTreeMap::from([("qa".into(), 0)]),
            ..ContextConfig::default()
        };
        let e = c
            .validate()
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(e.contains("context.caps.qa"), "{e}");
    }
}
