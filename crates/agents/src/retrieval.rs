//! The retrieval agent (`docs/retrieval.md`): upfront context per stage and adaptive
//! enrichment after a failure.
//!
//! The workflow's `retrieval_strategy_config` is followed, not inferred (TART): it says
//! whether code is parsed into symbols, which sources to search and with which priority,
//! what to favour and avoid, and each stage's token budget.
//!
//! - [`RetrievalAgent::prepare`] brings the workspace index up to date for the strategy
//!   (documents only, no AST work, for a document strategy).
//! - [`RetrievalAgent::upfront`] asks the model for queries per planned stage (the task is
//!   always the first query), runs every source of the strategy in parallel with a timeout
//!   per source, fuses the results per stage and packs them into the stage's budget.
//! - [`RetrievalAgent::adaptive`] reads a stage failure, pulls in the regions it names from
//!   the run's worktree, asks for failure-specific queries and packs for the retry.
//!
//! A failing model call falls back to deterministic queries and a failing or slow source is
//! reported in the pack; neither fails the retrieval.

mod context;
mod failure;
mod judge;
mod maps;
mod pack;
mod pool;
mod prompts;
mod queries;
mod source;
pub mod strategy;
mod types;

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

use futures::StreamExt;
use serde_json::Value;
use tokio_util::sync::CancellationToken;
use trellis_index::strategy::{ContextSource, source_categories};
use trellis_index::{Embedder, IndexConfig, Progress, Scope, UpdateOptions, UpdateStats};
use trellis_llm::ModelProvider;
use trellis_workflow::{Plan, StageContext};

pub use failure::{FailureAnalysis, FailureRef, analyse_failure};
pub use pool::IndexPool;
pub use queries::identifiers;
pub use source::{Source, SourceError, SourceRequest};
pub use strategy::RetrievalStrategyConfig;
pub use types::{
    PackedItem, ProgressFn, Result, RetrievalError, RetrievalMode, RetrievalOptions, SourceReport,
    StageMaps, StagePack,
};

use pack::RankedList;
pub(crate) use pack::fence_lang;
use pool::Back;
use prompts::{
    adaptive_fallback, adaptive_prompt, identifier_query, upfront_fallback, upfront_prompt,
};
use queries::Generated;
use source::{IndexSource, STAGE_AWARE_AVOID};
use strategy::IndexLevel;

/// The source name of regions read from the worktree because a failure names them.
pub const FAILURE_SOURCE: &str = "failure_location";

/// At most this many code files named by a document workflow's sections are outlined.
const NAMED_CODE_FILES: usize = 8;

/// The strategy of a plan: its `retrieval_strategy_config`, or when the workflow has none,
/// the code preset for code workflows and the document preset otherwise.
pub fn strategy_of(plan: &Plan) -> Result<RetrievalStrategyConfig> {
    match &plan.retrieval_strategy_config {
        Some(v) => serde_json::from_value(v.clone()).map_err(|e| RetrievalError::Strategy {
            workflow: plan.workflow.clone(),
            message: e.to_string(),
        }),
        None if plan
            .workflow_type
            .as_deref()
            .is_some_and(|t| t.contains("code")) =>
        {
            Ok(RetrievalStrategyConfig::code())
        }
        None => Ok(RetrievalStrategyConfig::docs()),
    }
}

/// A source of the strategy and what serves it (`None`: nothing here does).
struct Route {
    spec: ContextSource,
    source: Option<Arc<dyn Source>>,
}

impl Route {
    fn applies(&self, stage: &StageContext) -> bool {
        self.spec.applies_in(Some(&stage.stage_name)) || self.spec.applies_in(Some(&stage.stage_id))
    }
}

/// What one source returned for the retrieval.
struct SourceRun {
    lists: HashMap<String, Vec<PackedItem>>,
    elapsed_ms: u64,
    timed_out: bool,
    error: Option<String>,
    skipped: Option<String>,
}

/// The retrieval agent of one workspace.
pub struct RetrievalAgent {
    repo: PathBuf,
    pool: Arc<IndexPool>,
    provider: Arc<dyn ModelProvider>,
    options: RetrievalOptions,
    plugins: Vec<Arc<dyn Source>>,
}

impl std::fmt::Debug for RetrievalAgent {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RetrievalAgent")
            .field("repo", &self.repo)
            .field("options", &self.options)
            .field(
                "plugins",
                &self.plugins.iter().map(|p| p.name()).collect::<Vec<_>>(),
            )
            .finish_non_exhaustive()
    }
}

impl RetrievalAgent {
    /// The embedder the agent's index handles share (`None`: BM25-only retrieval).
    pub fn embedder(&self) -> Option<Arc<dyn Embedder>> {
        self.pool.embedder()
    }

    /// An agent for the repository at `repo` (its index under `<repo>/.trellis/index` unless
    /// `options.index_dir` says otherwise). `embedder` is shared by every index handle; with
    /// `None`, retrieval is BM25-only.
    pub fn new(
        repo: &Path,
        index_config: IndexConfig,
        embedder: Option<Arc<dyn Embedder>>,
        provider: Arc<dyn ModelProvider>,
        options: RetrievalOptions,
    ) -> Self {
        let pool = IndexPool::new(
            repo.to_path_buf(),
            options.index_dir.clone(),
            index_config,
            embedder,
        );
        Self::with_pool(repo, Arc::new(pool), provider, options)
    }

    /// An agent for the repository at `repo` whose index handles come from `pool` (shared
    /// with other agents of the same repository, e.g. every run of a workspace).
    pub fn with_pool(
        repo: &Path,
        pool: Arc<IndexPool>,
        provider: Arc<dyn ModelProvider>,
        options: RetrievalOptions,
    ) -> Self {
        RetrievalAgent {
            repo: repo.to_path_buf(),
            pool,
            provider,
            options,
            plugins: Vec::new(),
        }
    }

    /// Adds a source under its [`Source::name`]; it serves that name in every strategy that
    /// lists it, taking precedence over the index (web search, a CVE database, test doubles).
    pub fn with_source(mut self, source: Arc<dyn Source>) -> Self {
        self.plugins.retain(|p| p.name() != source.name());
        self.plugins.push(source);
        self
    }

    /// The index's own source of that name (`doc_retrieval`, `codebase_semantic_search`, …),
    /// e.g. for a plug-in that extends it rather than replacing it; `None` for names the
    /// index does not serve.
    pub fn index_source(&self, name: &str) -> Option<Arc<dyn Source>> {
        let spec = ContextSource {
            source: name.to_owned(),
            ..ContextSource::default()
        };
        source_categories(&spec, true).map(|_| {
            Arc::new(IndexSource {
                name: name.to_owned(),
                pool: self.pool.clone(),
            }) as Arc<dyn Source>
        })
    }

    /// The options.
    pub fn options(&self) -> &RetrievalOptions {
        &self.options
    }

    /// Brings the workspace index up to date for `strategy`, incrementally: a code strategy
    /// indexes everything (symbols included); a document strategy (`ast_parsing` off or
    /// `index_level: section`) indexes documents only and does no AST work. Embeddings are
    /// computed when an embedder is attached and `options.embed` is set.
    pub async fn prepare(
        &self,
        strategy: &RetrievalStrategyConfig,
        progress: Option<ProgressFn>,
        cancel: CancellationToken,
    ) -> Result<UpdateStats> {
        check(&cancel)?;
        if !strategy.enabled {
            return Ok(UpdateStats::default());
        }
        let scope = if strategy.ast_enabled() && strategy.index_level() != IndexLevel::Section {
            Scope::All
        } else {
            Scope::Documents
        };
        let embed = self.options.embed && self.pool.has_embedder();
        let pool = self.pool.clone();
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let task = tokio::task::spawn_blocking(move || {
            let progress = progress.as_deref().map(|p| p as &(dyn Fn(Progress) + Sync));
            let (result, closed) = pool.with(|ix| {
                let result = ix.update(&UpdateOptions {
                    scope,
                    embed,
                    progress,
                    cancel: Some(&flag),
                    ..UpdateOptions::default()
                });
                let closed = ix.close_writer();
                // The pool serves every run of the workspace: an update that changed
                // nothing leaves the other handles as they are.
                let wrote = result.as_ref().map_or(true, |s| {
                    s.files_indexed + s.files_removed + s.chunks_written > 0 || s.embedded > 0
                });
                let back = if wrote { Back::Fresh } else { Back::Kept };
                ((result, closed), back)
            })?;
            let stats = result?;
            closed?;
            Ok::<_, trellis_index::Error>(stats)
        });
        tokio::pin!(task);
        let stats = tokio::select! {
            r = &mut task => r,
            () = cancel.cancelled() => {
                // The update stops at its next batch boundary (the index stays consistent);
                // waiting for it releases the index writer before returning.
                stop.store(true, Ordering::Relaxed);
                let _ = task.await;
                return Err(RetrievalError::Cancelled);
            }
        };
        match stats {
            Ok(Ok(s)) => Ok(s),
            Ok(Err(trellis_index::Error::Cancelled)) => Err(RetrievalError::Cancelled),
            Ok(Err(e)) => Err(e.into()),
            Err(e) => Err(RetrievalError::Task(e.to_string())),
        }
    }

    /// Upfront mode: queries per stage from the model (the task first, then queries shaped
    /// by the strategy's hints and the stage's `retrieval_guidance`), every source of the
    /// strategy searched in parallel with a timeout per source, results fused and packed per
    /// stage within its budget. Returns one pack per stage, by stage name.
    pub async fn upfront(
        &self,
        task: &str,
        strategy: &RetrievalStrategyConfig,
        stages: &[StageContext],
        cancel: CancellationToken,
    ) -> Result<BTreeMap<String, StagePack>> {
        let t0 = Instant::now();
        check(&cancel)?;
        let mut packs = BTreeMap::new();
        if !strategy.enabled {
            for st in stages {
                let mut p = self.empty_pack(strategy, st, RetrievalMode::Upfront, 0);
                p.notes
                    .push("retrieval is disabled by the workflow's strategy".to_owned());
                packs.insert(st.stage_name.clone(), p);
            }
            return Ok(packs);
        }
        let routes = self.routes(strategy);
        let deadline = tokio::time::Instant::now() + self.options.query_timeout;
        // The futures are collected first: a stream mapping over `stages.iter()` directly
        // is not `Send` for every lifetime, which a node handler's future must be.
        let calls: Vec<_> = stages
            .iter()
            .map(|st| {
                queries::generate(
                    &*self.provider,
                    upfront_prompt(task, strategy, st, &routes, self.options.max_queries),
                    task,
                    upfront_fallback(task, st),
                    &self.options,
                    deadline,
                    &cancel,
                )
            })
            .collect();
        let generated: Vec<Generated> = futures::stream::iter(calls)
            .buffered(queries::concurrency(&*self.provider))
            .collect()
            .await;
        check(&cancel)?;
        let wanted: Vec<Vec<String>> = routes
            .iter()
            .map(|r| {
                let mut qs: Vec<String> = Vec::new();
                // On-demand sources (`lsp_tools`) answer failures, in adaptive mode.
                if r.spec.on_demand() {
                    return qs;
                }
                for (st, g) in stages.iter().zip(&generated) {
                    if r.applies(st) {
                        for q in &g.queries {
                            if !qs.contains(q) {
                                qs.push(q.clone());
                            }
                        }
                    }
                }
                qs
            })
            .collect();
        let runs = self.run_sources(strategy, &routes, wanted, &cancel).await?;
        for (st, g) in stages.iter().zip(generated) {
            let mut p = self.empty_pack(strategy, st, RetrievalMode::Upfront, 0);
            self.fill(&mut p, strategy, st, g, &routes, &runs, Vec::new(), None);
            if self.options.judge {
                judge::judge(&*self.provider, &self.options, task, &mut p, &cancel).await;
            }
            packs.insert(st.stage_name.clone(), p);
        }
        self.add_maps(strategy, task, packs.values_mut().collect())
            .await;
        for p in packs.values_mut() {
            p.elapsed_ms = t0.elapsed().as_millis() as u64;
        }
        Ok(packs)
    }

    /// Adaptive mode: reads `failure` (the failed stage's recorded result: test output,
    /// compiler errors, stack frames, failing test names), pulls the regions it names from
    /// `worktree` (the run's checkout, which agents have edited), asks the model for
    /// failure-specific queries, searches, re-checks every result against the worktree and
    /// packs for `retry_stage` within its budget, failure regions first.
    #[allow(clippy::too_many_arguments)]
    pub async fn adaptive(
        &self,
        task: &str,
        strategy: &RetrievalStrategyConfig,
        retry_stage: &StageContext,
        failure: &Value,
        round: i64,
        worktree: &Path,
        cancel: CancellationToken,
    ) -> Result<StagePack> {
        let t0 = Instant::now();
        check(&cancel)?;
        let mut roots = vec![worktree.to_path_buf(), self.repo.clone()];
        roots.extend(worktree.canonicalize().ok());
        roots.extend(self.repo.canonicalize().ok());
        let analysis = analyse_failure(failure, worktree, &roots);
        let pinned = failure::regions(
            worktree,
            &analysis.refs,
            strategy.ast_enabled(),
            self.options.region_context_lines,
            self.options.max_failure_regions,
        );
        let mut p = self.empty_pack(strategy, retry_stage, RetrievalMode::Adaptive, round);
        if analysis.refs.is_empty() {
            p.notes
                .push("the failure names no file:line inside the worktree".to_owned());
        }
        if !strategy.enabled {
            p.notes.push(
                "retrieval is disabled by the workflow's strategy; failure regions only".to_owned(),
            );
            let packing = pack::pack(pinned, Vec::new(), p.budget_tokens, false);
            p.used_tokens = packing.used;
            p.items = packing.items;
            p.elapsed_ms = t0.elapsed().as_millis() as u64;
            return Ok(p);
        }
        let routes = self.routes(strategy);
        let mut g = queries::generate(
            &*self.provider,
            adaptive_prompt(
                task,
                retry_stage,
                &analysis,
                &pinned,
                round,
                self.options.max_queries,
            ),
            task,
            adaptive_fallback(&analysis),
            &self.options,
            tokio::time::Instant::now() + self.options.query_timeout,
            &cancel,
        )
        .await;
        check(&cancel)?;
        // The names in the failure are searched verbatim whatever the model wrote.
        if let Some(q) = identifier_query(&analysis, &pinned)
            && !g.queries.iter().any(|x| x.eq_ignore_ascii_case(&q))
        {
            g.queries.push(q);
        }
        let wanted: Vec<Vec<String>> = routes
            .iter()
            .map(|r| {
                if r.applies(retry_stage) {
                    g.queries.clone()
                } else {
                    Vec::new()
                }
            })
            .collect();
        let runs = self.run_sources(strategy, &routes, wanted, &cancel).await?;
        self.fill(
            &mut p,
            strategy,
            retry_stage,
            g,
            &routes,
            &runs,
            pinned,
            Some(worktree),
        );
        if self.options.judge {
            judge::judge(&*self.provider, &self.options, task, &mut p, &cancel).await;
        }
        self.add_maps(strategy, task, vec![&mut p]).await;
        p.elapsed_ms = t0.elapsed().as_millis() as u64;
        Ok(p)
    }

    fn budget(&self, strategy: &RetrievalStrategyConfig, stage: &StageContext) -> usize {
        let b = strategy
            .budget_for(Some(&stage.stage_name))
            .or_else(|| strategy.budget_for(Some(&stage.stage_id)))
            .or_else(|| budget_by_words(strategy, &stage.stage_name))
            .or(stage.token_budget)
            .map_or(self.options.default_budget, |b| b as usize);
        self.options.max_budget.map_or(b, |m| b.min(m))
    }

    fn empty_pack(
        &self,
        strategy: &RetrievalStrategyConfig,
        stage: &StageContext,
        mode: RetrievalMode,
        round: i64,
    ) -> StagePack {
        StagePack {
            stage: stage.stage_name.clone(),
            mode,
            round,
            budget_tokens: self.budget(strategy, stage),
            ..StagePack::default()
        }
    }

    /// The strategy's sources (its presets when it names none), each with what serves it.
    fn routes(&self, strategy: &RetrievalStrategyConfig) -> Vec<Route> {
        let ast = strategy.ast_enabled();
        let mut specs = strategy.sources();
        if specs.is_empty() {
            specs = if ast {
                RetrievalStrategyConfig::code().sources()
            } else {
                RetrievalStrategyConfig::docs().sources()
            };
        }
        let mut routes: Vec<Route> = Vec::new();
        for spec in specs {
            if routes.iter().any(|r| r.spec.source == spec.source) {
                continue;
            }
            let plugin = self
                .plugins
                .iter()
                .find(|p| p.name() == spec.source)
                .cloned();
            let source = plugin.or_else(|| {
                source_categories(&spec, ast).map(|_| {
                    Arc::new(IndexSource {
                        name: spec.source.clone(),
                        pool: self.pool.clone(),
                    }) as Arc<dyn Source>
                })
            });
            routes.push(Route { spec, source });
        }
        routes
    }

    /// Runs every served source that has queries, in parallel, each under its timeout.
    async fn run_sources(
        &self,
        strategy: &RetrievalStrategyConfig,
        routes: &[Route],
        wanted: Vec<Vec<String>>,
        cancel: &CancellationToken,
    ) -> Result<HashMap<String, SourceRun>> {
        let scope = Arc::new(strategy.scope());
        let timeout = self.options.source_timeout;
        let futs = routes.iter().zip(wanted).filter_map(|(route, queries)| {
            let source = route.source.clone()?;
            if queries.is_empty() {
                return None;
            }
            let request = SourceRequest {
                spec: route.spec.clone(),
                scope: scope.clone(),
                queries: queries.clone(),
                limit: self.options.candidates,
            };
            let token = cancel.child_token();
            let name = route.spec.source.clone();
            let skipped = source.unavailable().or_else(|| {
                (source.code_only() && !strategy.ast_enabled()).then(|| {
                    "it serves code workflows only (this strategy has `ast_parsing` off)".to_owned()
                })
            });
            let timeout = source.timeout().unwrap_or(timeout);
            Some(async move {
                if let Some(reason) = skipped {
                    let run = SourceRun {
                        lists: HashMap::new(),
                        elapsed_ms: 0,
                        timed_out: false,
                        error: None,
                        skipped: Some(reason),
                    };
                    return (name, run);
                }
                let t = Instant::now();
                let result =
                    tokio::time::timeout(timeout, source.search(request, token.clone())).await;
                // Stops leftover work of a source that ran out of time.
                token.cancel();
                let elapsed_ms = t.elapsed().as_millis() as u64;
                let run = match result {
                    Ok(Ok(lists)) => SourceRun {
                        lists: queries.into_iter().zip(lists).collect(),
                        elapsed_ms,
                        timed_out: false,
                        error: None,
                        skipped: None,
                    },
                    Ok(Err(e)) => SourceRun {
                        lists: HashMap::new(),
                        elapsed_ms,
                        timed_out: false,
                        error: Some(e.to_string()),
                        skipped: None,
                    },
                    Err(_) => SourceRun {
                        lists: HashMap::new(),
                        elapsed_ms,
                        timed_out: true,
                        error: Some(format!("no answer within {} ms", timeout.as_millis())),
                        skipped: None,
                    },
                };
                (name, run)
            })
        });
        let all = futures::future::join_all(futs);
        tokio::select! {
            runs = all => Ok(runs.into_iter().collect()),
            () = cancel.cancelled() => Err(RetrievalError::Cancelled),
        }
    }

    /// Fuses the stage's lists and packs them (after the pinned failure regions) into `p`.
    #[allow(clippy::too_many_arguments)]
    fn fill(
        &self,
        p: &mut StagePack,
        strategy: &RetrievalStrategyConfig,
        stage: &StageContext,
        generated: Generated,
        routes: &[Route],
        runs: &HashMap<String, SourceRun>,
        pinned: Vec<PackedItem>,
        worktree: Option<&Path>,
    ) {
        p.queries = generated.queries;
        p.queries_from_model = generated.from_model;
        p.notes.extend(generated.note);
        let mut lists: Vec<RankedList<'_>> = Vec::new();
        for route in routes.iter().filter(|r| r.applies(stage)) {
            let name = &route.spec.source;
            let (priority, _) = route.spec.priority();
            let Some(run) = runs.get(name) else {
                if route.source.is_none() {
                    p.external_sources.push(name.clone());
                } else if route.spec.on_demand() && p.mode == RetrievalMode::Upfront {
                    p.notes.push(format!(
                        "source `{name}` runs on demand: it is searched when a failure asks for more context"
                    ));
                }
                continue;
            };
            let mut items = 0;
            for q in &p.queries {
                if let Some(l) = run.lists.get(q) {
                    items += l.len();
                    lists.push(RankedList {
                        weight: priority.weight(),
                        items: l,
                    });
                }
            }
            if let Some(reason) = &run.skipped {
                p.notes
                    .push(format!("source `{name}` not searched: {reason}"));
            } else if run.timed_out {
                p.notes.push(format!(
                    "source `{name}` timed out after {} ms",
                    run.elapsed_ms
                ));
            } else if let Some(e) = &run.error {
                p.notes.push(format!("source `{name}` failed: {e}"));
            }
            p.sources.push(SourceReport {
                name: name.clone(),
                priority: format!("{priority:?}").to_ascii_uppercase(),
                items,
                packed: 0,
                elapsed_ms: run.elapsed_ms,
                timed_out: run.timed_out,
                error: run.error.clone(),
                skipped: run.skipped.clone(),
            });
        }
        let mut ranked = pack::fuse(&lists);
        if let Some(wt) = worktree.filter(|wt| !same_dir(wt, &self.repo)) {
            let ast = strategy.ast_enabled();
            let mut files = HashMap::new();
            let before = ranked.len();
            ranked = ranked
                .into_iter()
                .filter_map(|it| failure::reground(it, wt, ast, &mut files))
                .collect();
            let stale = before - ranked.len();
            if stale > 0 {
                p.notes.push(format!(
                    "{stale} results no longer match the worktree and were left out"
                ));
            }
        }
        let drop_tests = strategy
            .retrieval_hints
            .avoid
            .iter()
            .any(|a| a == STAGE_AWARE_AVOID)
            && !is_test_stage(stage);
        let item_budget = p.budget_tokens - self.map_reserve(strategy, p.budget_tokens);
        let packing = pack::pack(pinned, ranked, item_budget, drop_tests);
        if packing.over_budget > 0 {
            p.notes.push(format!(
                "{} results did not fit the budget of {} tokens",
                packing.over_budget, p.budget_tokens
            ));
        }
        if packing.tests_avoided > 0 {
            p.notes.push(format!(
                "{} results in test files left out (`avoid: test_code`)",
                packing.tests_avoided
            ));
        }
        for s in &mut p.sources {
            s.packed = packing.items.iter().filter(|i| i.source == s.name).count();
        }
        p.used_tokens = packing.used;
        p.items = packing.items;
    }
}

/// A budget whose key's words each begin a word of the stage name, in order
/// (`analysis` → `architectural_analysis`, `test_gen` → `test_generation_and_execution`).
fn budget_by_words(strategy: &RetrievalStrategyConfig, stage: &str) -> Option<u64> {
    let words: Vec<&str> = stage.split(['_', '-', ' ']).collect();
    let matches = |key: &str| {
        let mut rest = words.iter();
        key.split(['_', '-', ' '])
            .all(|k| !k.is_empty() && rest.any(|w| w.starts_with(k)))
    };
    [
        &strategy.retrieval_hints.token_budget,
        &strategy.token_budget,
    ]
    .into_iter()
    .flat_map(|m| m.iter())
    .find(|(k, _)| matches(&k.0))
    .map(|(_, v)| *v)
}

fn note_all(packs: Vec<&mut StagePack>, note: &str) {
    for p in packs {
        p.notes.push(note.to_owned());
    }
}

fn check(cancel: &CancellationToken) -> Result<()> {
    if cancel.is_cancelled() {
        Err(RetrievalError::Cancelled)
    } else {
        Ok(())
    }
}

fn same_dir(a: &Path, b: &Path) -> bool {
    a == b || matches!((a.canonicalize(), b.canonicalize()), (Ok(x), Ok(y)) if x == y)
}

/// A stage that writes or runs tests needs test code even when the strategy avoids it.
fn is_test_stage(stage: &StageContext) -> bool {
    let mentions = |s: &str| s.to_ascii_lowercase().contains("test");
    mentions(&stage.stage_name)
        || stage.stage_type.as_deref().is_some_and(mentions)
        || stage.agents.iter().any(|a| mentions(&a.agent))
}
