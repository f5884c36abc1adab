//! The retrieval source seam: anything that answers a retrieval's queries with packed pieces
//! of context — the workspace index's own sources, web search, documentation sites, a CVE
//! database (crate `trellis-sources`), language servers. The retrieval agent
//! (`trellis_agents::retrieval`) runs every source of a strategy as its own task and fuses
//! their lists; sources only depend on this seam, not on the agent.

use std::sync::Arc;
use std::time::Duration;

use futures::future::BoxFuture;
use serde::{Deserialize, Serialize};
use tokio_util::sync::CancellationToken;

use crate::strategy::{ContextSource, RetrievalScope};

/// What a source failed with (any error; it is reported in the pack, never fatal).
pub type SourceError = Box<dyn std::error::Error + Send + Sync>;

/// One call of a source: every query of the retrieval at once.
#[derive(Clone, Debug)]
pub struct SourceRequest {
    /// The strategy's entry for this source (name, strategy, priority, …).
    pub spec: ContextSource,
    /// What the retrieval searches: the strategy's sources, AST on or off, its hints.
    pub scope: Arc<RetrievalScope>,
    /// The queries, in order.
    pub queries: Vec<String>,
    /// Results wanted per query.
    pub limit: usize,
}

/// A retrieval source.
pub trait Source: Send + Sync {
    /// The name strategies use for it (`web_search`).
    fn name(&self) -> &str;

    /// Runs every query; returns one ranked list per query, in the order of
    /// `request.queries`. `source`, `tokens` and `score` of the items may be left empty:
    /// the agent fills in the source name and token counts, and ranks by position.
    /// Stop early when `cancel` fires (the source's time is up).
    fn search(
        &self,
        request: SourceRequest,
        cancel: CancellationToken,
    ) -> BoxFuture<'static, Result<Vec<Vec<PackedItem>>, SourceError>>;

    /// Why the source cannot be searched now (`not configured: set …`, `network denied by
    /// tools.policy.network`), or `None` when it can. An unavailable source is reported in
    /// the pack (`sources[].skipped` and a note), never called and never an error.
    fn unavailable(&self) -> Option<String> {
        None
    }

    /// The time this source gets for all its queries, when it differs from the agent's
    /// `source_timeout` (a source with its own configured timeout).
    fn timeout(&self) -> Option<Duration> {
        None
    }

    /// Whether the source only serves code workflows (strategies with AST parsing on);
    /// in a document workflow it is skipped with that reason (language servers).
    fn code_only(&self) -> bool {
        false
    }
}

/// One piece of context with its attribution.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PackedItem {
    /// The source that found it (`codebase_semantic_search`, `failure`, `web_search`, …).
    pub source: String,
    /// Path relative to the workspace root (or a URL for web sources).
    pub path: String,
    /// First line, 1-based (0 when not a file).
    pub start_line: u32,
    /// Last line, inclusive.
    pub end_line: u32,
    /// Qualified symbol name, for code.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub symbol: Option<String>,
    /// Section path (`doc > section`), for documents.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub section: Option<String>,
    /// What it is (`function`, `section`, `window`, …).
    #[serde(default)]
    pub kind: String,
    /// The text, verified against the repository (upfront) or the worktree (adaptive).
    pub text: String,
    /// Estimated prompt tokens (text, path, framing).
    pub tokens: usize,
    /// Fused score (higher is better; failure regions are 0 and always come first).
    pub score: f32,
    /// Why it is here beyond matching a query (`named by the failure at line 12`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}
