//! The retrieval nodes of a workflow run, driving the retrieval agent
//! ([`trellis_agents::RetrievalAgent`]) from the workflow's `retrieval_strategy_config`:
//!
//! - `upfront_retrieval` (first node): brings the workspace index up to date for the
//!   strategy (documents only when AST work is off), generates queries, and stores a packed,
//!   attributed context per planned stage in `retrieval_context[stage]`;
//! - `adaptive_retrieval` (after a failure): reads the failure, pulls the regions it names
//!   from the run's worktree, retrieves more, and stores it — with the failure report — in
//!   `enriched_context[retry_stage]`.
//!
//! Retrieval never fails a run: an error becomes a note and the stages run with less
//! context.

use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};
use trellis_agents::retrieval::{IndexPool, RetrievalStrategyConfig, strategy_of};
use trellis_agents::{RetrievalAgent, RetrievalOptions, SessionSink, StagePack};
use trellis_graph::{NodeContext, NodeError, NodeHandler, NodeOutput};
use trellis_llm::CallScope;
use trellis_protocol::{NodeId, SessionEvent};
use trellis_workflow::{Plan, StageContext};

use super::RunContext;
use crate::Runtime;
use crate::code_intel::LspSource;
use crate::text::clip;

/// The failure report of a `stage_results` entry as prompt text.
pub(crate) fn failure_text(failed_stage: &str, failure: &Value) -> String {
    let out = failure.get("output").cloned().unwrap_or(Value::Null);
    let mut s = format!("`{failed_stage}` failed");
    if let Some(a) = failure.get("attempt").and_then(Value::as_u64) {
        s.push_str(&format!(" (attempt {a})"));
    }
    s.push_str(":\n");
    if let Some(t) = out
        .get("output")
        .or_else(|| out.get("reason"))
        .and_then(Value::as_str)
    {
        s.push_str(&clip(t, 4000));
        s.push('\n');
    }
    if let Some(Value::Array(f)) = out.get("findings") {
        for item in f.iter().filter_map(Value::as_str).take(30) {
            s.push_str(&format!("- {item}\n"));
        }
    }
    s
}

/// A pack as stored in the run state: the rendered text and a summary.
fn stored(pack: &StagePack) -> Value {
    json!({
        "rendered": pack.render(),
        "queries": pack.queries,
        "items": pack.items.len(),
        "used_tokens": pack.used_tokens,
        "budget_tokens": pack.budget_tokens,
        "notes": pack.notes,
        // The stage's `ast_context_map` (code workflows).
        "ast_context_map": pack.maps.as_ref().map(|m| &m.ast_context_map),
    })
}

impl RunContext {
    /// The session sink of retrieval node `node`'s activation: its recorded session when
    /// the run has a session hub (the service), else the caller's sink, if any.
    async fn sink(&self, node: &NodeId, attempt: u32) -> Option<SessionSink> {
        match &self.options.sessions {
            Some(hub) => hub
                .open_agent(
                    &self.run,
                    node,
                    "retrieval_agent",
                    attempt,
                    self.options.cause.clone(),
                )
                .await
                .map(|o| o.sink)
                .ok(),
            None => self.options.events.as_ref().map(|sinks| sinks(node)),
        }
    }

    /// The run's retrieval agent (built on first use).
    pub(crate) async fn retrieval_agent(&self) -> Result<Arc<RetrievalAgent>, String> {
        self.retrieval
            .get_or_try_init(|| async {
                let rt = &self.runtime;
                let provider = rt
                    .models
                    .budgeted(
                        "retrieval",
                        self.ledger.clone(),
                        CallScope {
                            stage: Some("retrieval".into()),
                            agent: Some("retrieval_agent".into()),
                        },
                    )
                    .map_err(|e| e.to_string())?;
                let cfg = &rt.agents.retrieval;
                let mut options = RetrievalOptions::default();
                if let Some(n) = cfg.max_queries {
                    options.max_queries = n.max(1);
                }
                if let Some(ms) = cfg.source_timeout_ms {
                    options.source_timeout = Duration::from_millis(ms.max(1));
                }
                if let Some(ms) = cfg.query_timeout_ms {
                    options.query_timeout = Duration::from_millis(ms.max(1));
                }
                if let Some(share) = cfg.map_share {
                    options.map_share = share.clamp(0.0, 0.9);
                }
                options.judge = cfg.judge;
                if let Some(n) = cfg.judge_candidates {
                    options.judge_candidates = n.max(2);
                }
                // A stage's context must leave room for the prompt and the answer: at most a
                // quarter of the smallest context window among the agents' models.
                // (A remote model's window is asked of its server here, once.)
                options.max_budget = match rt.models.for_role("default") {
                    Ok(p) => p.context_window().await.map(|w| w.tokens as usize / 4),
                    Err(_) => None,
                };
                let pool = rt.index_pool().await?;
                let agent = RetrievalAgent::with_pool(&rt.repo, pool, provider, options)
                    .with_source(Arc::new(LspSource::new(rt.code_intel())));
                // Web search, documentation sites, OSV advisories (`[sources]`); those not
                // configured are reported as such by the packs.
                let local_docs = agent.index_source(trellis_sources::DOCS_SOURCE);
                let agent = trellis_sources::sources(
                    &rt.sources,
                    &rt.repo,
                    rt.tools.policy.network,
                    local_docs,
                )
                .into_iter()
                .fold(agent, RetrievalAgent::with_source);
                Ok(Arc::new(agent))
            })
            .await
            .cloned()
    }
}

pub(crate) fn strategy(plan: &Plan) -> Option<RetrievalStrategyConfig> {
    strategy_of(plan).ok().filter(|s| s.enabled)
}

/// The upfront-retrieval node, when the workflow has an enabled strategy and retrieval is
/// not disabled in `[agents.retrieval]`.
pub(crate) fn upfront(me: Option<Arc<RunContext>>, plan: &Plan) -> Option<Arc<dyn NodeHandler>> {
    // The node exists whenever the plan says so (the graph's shape is the plan's); what it
    // does depends on the strategy and the configuration.
    let strategy = strategy_of(plan).map_err(|e| e.to_string());
    let stages: Vec<StageContext> = plan.planned.iter().map(|p| p.context.clone()).collect();
    let task = plan.task.clone();
    Some(Arc::new(move |ctx: NodeContext| {
        let me = me.clone();
        let (strategy, stages, task) = (strategy.clone(), stages.clone(), task.clone());
        async move {
            let Some(me) = me else {
                return Err(NodeError::new("the run's context is gone"));
            };
            let sink = me.sink(&ctx.node, ctx.attempt).await;
            let note = |text: String| {
                if let Some(sink) = &sink {
                    sink(SessionEvent::Note { text });
                }
            };
            if me.runtime.agents.retrieval.disabled {
                note("retrieval is disabled ([agents.retrieval] disabled)".into());
                return Ok(NodeOutput::success().result(json!({ "disabled": true })));
            }
            let strategy = match strategy {
                Ok(s) if s.enabled => s,
                Ok(_) => return Ok(NodeOutput::success().result(json!({ "disabled": true }))),
                Err(e) => {
                    note(format!("invalid retrieval strategy: {e}"));
                    return Ok(NodeOutput::success().result(json!({ "error": e })));
                }
            };
            let agent = match me.retrieval_agent().await {
                Ok(a) => a,
                Err(e) => {
                    note(format!("retrieval unavailable: {e}"));
                    return Ok(NodeOutput::success().result(json!({ "error": e })));
                }
            };
            let progress_sink = sink.clone();
            let progress: trellis_agents::retrieval::ProgressFn =
                Arc::new(move |p: trellis_index::Progress| {
                    if let (Some(sink), trellis_index::Progress::Scanned { files, stale }) =
                        (&progress_sink, &p)
                    {
                        sink(SessionEvent::Note {
                            text: format!(
                                "indexing: {files} files, {stale} changed since last time"
                            ),
                        });
                    }
                });
            match agent
                .prepare(&strategy, Some(progress), ctx.cancel.clone())
                .await
            {
                Ok(stats) => note(format!(
                    "index up to date: {} files ({} re-indexed), {} symbols, {} sections",
                    stats.files, stats.files_indexed, stats.symbols, stats.sections
                )),
                Err(e) => note(format!("index update failed: {e}")),
            }
            match agent
                .upfront(&task, &strategy, &stages, ctx.cancel.clone())
                .await
            {
                Ok(packs) => {
                    let mut context = serde_json::Map::new();
                    let mut summary = serde_json::Map::new();
                    for (stage, pack) in &packs {
                        note(format!(
                            "{stage}: {} items, {}/{} tokens",
                            pack.items.len(),
                            pack.used_tokens,
                            pack.budget_tokens
                        ));
                        context.insert(stage.clone(), stored(pack));
                        summary.insert(
                            stage.clone(),
                            json!({ "queries": pack.queries, "items": pack.items.len(), "used_tokens": pack.used_tokens, "notes": pack.notes }),
                        );
                    }
                    Ok(NodeOutput::success()
                        .write("retrieval_context", Value::Object(context))
                        .result(Value::Object(summary)))
                }
                Err(trellis_agents::RetrievalError::Cancelled) => Err(NodeError::new("cancelled")),
                Err(e) => {
                    note(format!("upfront retrieval failed: {e}"));
                    Ok(NodeOutput::success().result(json!({ "error": e.to_string() })))
                }
            }
        }
    }))
}

/// The adaptive-retrieval node.
pub(crate) fn adaptive(me: Option<Arc<RunContext>>, plan: &Plan) -> Arc<dyn NodeHandler> {
    let strategy = strategy(plan);
    let stages: Vec<StageContext> = plan.planned.iter().map(|p| p.context.clone()).collect();
    let task = plan.task.clone();
    Arc::new(move |ctx: NodeContext| {
        let me = me.clone();
        let (strategy, stages, task) = (strategy.clone(), stages.clone(), task.clone());
        async move {
            let Some(me) = me else {
                return Err(NodeError::new("the run's context is gone"));
            };
            let sink = me.sink(&ctx.node, ctx.attempt).await;
            let note = |text: String| {
                if let Some(sink) = &sink {
                    sink(SessionEvent::Note { text });
                }
            };
            let failed = ctx.input["failed_stage"]
                .as_str()
                .unwrap_or_default()
                .to_owned();
            let retry = ctx.input["retry_stage"]
                .as_str()
                .unwrap_or_default()
                .to_owned();
            let round = ctx.input["round"].as_i64().unwrap_or(1);
            let failure = ctx.input["failure"].clone();
            let mut text = format!(
                "Round {round} of enrichment.\n{}",
                failure_text(&failed, &failure)
            );
            let mut result =
                json!({ "failed_stage": failed, "retry_stage": retry, "round": round });
            let retry_ctx = stages.iter().find(|s| s.stage_name == retry);
            let disabled = me.runtime.agents.retrieval.disabled;
            if let (Some(strategy), Some(retry_ctx), false) = (&strategy, retry_ctx, disabled) {
                let pack = match me.retrieval_agent().await {
                    Ok(agent) => agent
                        .adaptive(
                            &task,
                            strategy,
                            retry_ctx,
                            &failure,
                            round,
                            &me.space.read_root(),
                            ctx.cancel.clone(),
                        )
                        .await
                        .map_err(|e| e.to_string()),
                    Err(e) => Err(e),
                };
                match pack {
                    Ok(pack) => {
                        note(format!(
                            "{} items for {retry} ({} tokens) from queries {:?}",
                            pack.items.len(),
                            pack.used_tokens,
                            pack.queries
                        ));
                        text.push('\n');
                        text.push_str(&pack.render());
                        result["queries"] = json!(pack.queries);
                        result["items"] = json!(pack.items.len());
                        result["notes"] = json!(pack.notes);
                    }
                    Err(e) if ctx.cancel.is_cancelled() => {
                        return Err(NodeError::new(format!("cancelled ({e})")));
                    }
                    Err(e) => {
                        note(format!("adaptive retrieval failed: {e}"));
                        result["error"] = json!(e);
                    }
                }
            }
            Ok(NodeOutput::success()
                .write("enriched_context", json!({ retry: text }))
                .result(result))
        }
    })
}

impl Runtime {
    /// The index handles every run's retrieval shares, with the embedding model of `[index]`
    /// loaded once (BM25 only when it cannot be: a warning says why).
    pub(crate) async fn index_pool(&self) -> Result<Arc<IndexPool>, String> {
        self.index_pool
            .get_or_try_init(|| async {
                let embedder = match tokio::task::spawn_blocking({
                    let config = self.index.embedding.clone();
                    move || trellis_index::embed::from_config(&config, true)
                })
                .await
                {
                    Ok(Ok(e)) => e.map(Arc::from),
                    Ok(Err(e)) => {
                        tracing::warn!("embeddings unavailable, BM25 only: {e}");
                        None
                    }
                    Err(e) => return Err(e.to_string()),
                };
                Ok(Arc::new(IndexPool::new(
                    self.repo.clone(),
                    None,
                    self.index.clone(),
                    embedder,
                )))
            })
            .await
            .cloned()
    }
}
