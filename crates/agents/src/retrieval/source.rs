//! Retrieval sources: the [`Source`] seam, and the workspace index behind it.
//!
//! Every source of a strategy (`codebase_semantic_search`, `decision_log_search`, …) runs as
//! its own task with its own timeout, so one slow or failing source never holds up or fails a
//! retrieval. The index serves the sources it knows ([`source_categories`]); other sources
//! (web search, a CVE database: crate `trellis-sources`) are plugged in with
//! [`RetrievalAgent::with_source`](crate::retrieval::RetrievalAgent::with_source). A plugged-in
//! source that cannot be searched now (not configured, network denied) says why in
//! [`Source::unavailable`]; the agent reports the reason and does not call it.

use std::sync::Arc;

use futures::future::BoxFuture;
use tokio_util::sync::CancellationToken;
use trellis_index::RetrievalRequest;
use trellis_index::retrieve::is_test_path;
use trellis_index::strategy::{ContextSource, RetrievalScope};

use super::PackedItem;
use super::pool::{Back, IndexPool};

pub use trellis_index::source::{Source, SourceError, SourceRequest};

/// A source served by the workspace index ([`Index::retrieve`] with a one-source scope:
/// hybrid search, hint weighting, `avoid` filtering, dedup and grounding against the repo).
pub(crate) struct IndexSource {
    pub(crate) name: String,
    pub(crate) pool: Arc<IndexPool>,
}

/// Whether `avoid: [test_code]` is applied per stage by the agent (test stages need tests)
/// rather than by the index for every stage.
pub(crate) const STAGE_AWARE_AVOID: &str = "test_code";

/// The scope reduced to one unconditional source (the agent decides per stage whether a
/// source applies), without the stage-aware `avoid` hints.
fn one_source(scope: &RetrievalScope, spec: &ContextSource) -> RetrievalScope {
    let (priority, _) = spec.priority();
    let mut hints = scope.hints.clone();
    hints.avoid.retain(|a| a != STAGE_AWARE_AVOID);
    RetrievalScope {
        ast: scope.ast,
        sources: vec![ContextSource {
            priority: Some(format!("{priority:?}").to_ascii_uppercase()),
            trigger_stages: Vec::new(),
            ..spec.clone()
        }],
        hints,
    }
}

/// The first `limit` of `items` that are not tests and the first `limit` that are, in their
/// order. The search runs once for every stage of a workflow, and a stage that avoids test
/// code (`avoid: [test_code]`) drops the tests after it: counted together, the tests a
/// request's words match best (`test_invalid_n` for "invalid size in windowed()") would take
/// the places of the code it is about.
fn per_kind<T>(items: Vec<T>, limit: usize, is_test: impl Fn(&T) -> bool) -> Vec<T> {
    let (mut tests, mut code) = (0, 0);
    items
        .into_iter()
        .filter(|it| {
            let n = if is_test(it) { &mut tests } else { &mut code };
            *n += 1;
            *n <= limit
        })
        .collect()
}

impl Source for IndexSource {
    fn name(&self) -> &str {
        &self.name
    }

    fn search(
        &self,
        request: SourceRequest,
        cancel: CancellationToken,
    ) -> BoxFuture<'static, Result<Vec<Vec<PackedItem>>, SourceError>> {
        let pool = self.pool.clone();
        let name = self.name.clone();
        Box::pin(async move {
            let task = tokio::task::spawn_blocking(move || {
                let scope = one_source(&request.scope, &request.spec);
                pool.with(|ix| {
                    let mut out = Vec::with_capacity(request.queries.len());
                    let mut result = Ok(());
                    for q in &request.queries {
                        if cancel.is_cancelled() {
                            break;
                        }
                        let pack = ix.retrieve(&RetrievalRequest {
                            query: q.clone(),
                            scope: &scope,
                            stage: None,
                            // Everything found; the agent packs per stage. Twice the limit:
                            // test files and the rest are counted apart ([`per_kind`]).
                            budget_tokens: Some(usize::MAX / 4),
                            candidates: Some(request.limit * 2),
                        });
                        match pack {
                            Ok(p) => out.push(
                                per_kind(p.items, request.limit, |it| {
                                    is_test_path(&it.attribution.path)
                                })
                                .into_iter()
                                .map(|it| PackedItem {
                                    source: name.clone(),
                                    path: it.attribution.path,
                                    start_line: it.attribution.start_line,
                                    end_line: it.attribution.end_line,
                                    symbol: it.attribution.symbol,
                                    section: it.attribution.section,
                                    kind: it.kind.as_str().to_owned(),
                                    text: it.text,
                                    tokens: it.tokens,
                                    score: it.score,
                                    note: None,
                                })
                                .collect(),
                            ),
                            Err(e) => {
                                result = Err(e);
                                break;
                            }
                        }
                    }
                    (result.map(|()| out), Back::Kept)
                })?
            });
            match task.await {
                Ok(r) => r.map_err(|e| Box::new(e) as SourceError),
                Err(e) => Err(Box::new(e) as SourceError),
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::per_kind;

    #[test]
    fn tests_and_code_are_counted_apart() {
        let items = ["t1", "t2", "t3", "c1", "t4", "c2", "c3", "c4"];
        let kept = per_kind(items.to_vec(), 2, |s| s.starts_with('t'));
        assert_eq!(kept, ["t1", "t2", "c1", "c2"]);
    }
}
