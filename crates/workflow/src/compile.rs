//! Compiling a [`Plan`] into an engine [`Graph`] (docs/workflows.md, "Compiled graph").
//!
//! - one node per stage, named after the stage; skipped stages are SKIPPED nodes the engine
//!   bypasses along their success route;
//! - a stage with several agents is a fan-out node (one child per agent) plus a collector
//!   `<stage>:collect` applying the stage's failure aggregation and recording the stage's
//!   result (its agents' reports combined); routing leaves from the collector;
//! - after a failure (once a stage has used up its `max_attempts`, a conditional edge routes
//!   to the failure path): a `next_stage_on_failure` of DONE or ABORT is taken as written, at once;
//!   one to a stage is taken at most `max_attempts` times per stage in a run (the engine counts
//!   them, [`trellis_graph::RouteContext::failure_routes`]), after which the run ends at ABORT.
//!   While the failed stage's enrichment counter is below [`MAX_ENRICHMENTS`], the way back
//!   goes through `adaptive_retrieval`, which enriches the context of the *retry stage* and
//!   routes to it — the failure route's stage when it is planned (in
//!   `feature_with_iterative_testing`, failing tests enrich and re-run `code_generation`),
//!   otherwise the failed stage itself;
//! - `DONE` and `ABORT` terminals.
//!
//! Channels: `task` (replace; the run's input `{"task": "…"}`), `orchestrator` (replace; the
//! orchestrator's decisions, stored with the run), `current_stage` (replace; the stage node
//! that ran last), `stage_results` (merge; `{stage: {failure, attempt, output}}` where
//! `output` is the stage handler's recorded result, or a multi-agent stage's combined
//! `{output, findings, files_changed}`), `retrieval_context` (merge; upfront
//! context per stage), `enriched_context` (merge; adaptive context per retry stage),
//! `retry_stage` (replace; where adaptive retrieval routes), `outcome` (replace; `DONE` or
//! `ABORT`).

pub(crate) mod fanout;

use std::collections::BTreeMap;
use std::sync::Arc;

use serde_json::{Value, json};
use trellis_graph::{
    Graph, GraphBuilder, NodeContext, NodeError, NodeHandler, NodeOutput, Reducer, RouteContext,
    Router,
};
use trellis_protocol::{NodeId, NodeState, TerminalKind};

use self::fanout::{Pipeline, fan_out_node, merge_node, review_node, work_node, work_template};
use crate::error::Result;
use crate::plan::{Kind, MAX_ENRICHMENTS, Plan, Route, StageContext};
use crate::schema::AgentSpec;

/// The adaptive-retrieval node's id.
pub const ADAPTIVE_RETRIEVAL: &str = "adaptive_retrieval";
/// The upfront-retrieval node's id (context per stage, gathered before the first stage runs).
pub const UPFRONT_RETRIEVAL: &str = "upfront_retrieval";
/// The id of a workflow run's first node, the orchestrator deciding the workflow (the run's
/// planning graph, which the workflow's graph continues; see `trellis-runtime`).
pub const ORCHESTRATE: &str = "orchestrate";

/// The counter of enrichments of `stage`.
pub fn enrichment_counter(stage: &str) -> String {
    format!("enrichment_attempts:{stage}")
}

/// The collector node of a stage with several agents.
pub fn collector_id(stage: &str) -> String {
    format!("{stage}:collect")
}

/// Supplies the handlers of a compiled plan, so agents plug in without this crate knowing
/// them. A handler of a stage agent receives the stage's [`StageContext`] as JSON in
/// `ctx.input`; the adaptive-retrieval handler receives `{failed_stage, retry_stage, round,
/// failure}` (`failure` is the failed stage's `stage_results` entry).
pub trait StageHandlers: Send + Sync {
    /// The handler of `agent` in `stage`.
    fn agent(&self, stage: &StageContext, agent: &AgentSpec) -> Arc<dyn NodeHandler>;
    /// The handler of the adaptive-retrieval node.
    fn adaptive_retrieval(&self, plan: &Plan) -> Arc<dyn NodeHandler>;
    /// The handler of the upfront-retrieval node ([`UPFRONT_RETRIEVAL`]), which then runs
    /// first and routes to the plan's entry stage when [`Plan::has_upfront_retrieval`];
    /// `None` (the default) compiles without it.
    fn upfront_retrieval(&self, _plan: &Plan) -> Option<Arc<dyn NodeHandler>> {
        None
    }
    /// The handler of a `gate` stage: succeeds once the latest artifact of its kind is
    /// approved, interrupts for approval otherwise, and fails with `{"feedback": …}` in its
    /// result when changes are requested (the feedback goes to the producer).
    fn gate(&self, stage: &StageContext) -> Arc<dyn NodeHandler> {
        unsupported(stage)
    }
    /// The handler of a `review` stage's agent: succeeds on APPROVED; fails with
    /// `{"feedback": …}` on NEEDS_REVISION (the reviewed stage runs again with it); interrupts
    /// on HUMAN_REVIEW_REQUESTED. Default: an agent stage.
    fn review(&self, stage: &StageContext, agent: &AgentSpec) -> Arc<dyn NodeHandler> {
        self.agent(stage, agent)
    }
    /// The handler of a `fan_out` stage's orchestrator: its result's `items` (a list of
    /// objects, each with an optional `id`) become work nodes. Default: an agent stage.
    fn fan_out(&self, stage: &StageContext, orchestrator: &AgentSpec) -> Arc<dyn NodeHandler> {
        self.agent(stage, orchestrator)
    }
    /// The handler of a `collector` stage (`ctx.children` holds the work nodes' outcomes);
    /// `None` records the aggregate. Default: the stage's agent, if it has one.
    fn collector(
        &self,
        stage: &StageContext,
        agent: Option<&AgentSpec>,
    ) -> Option<Arc<dyn NodeHandler>> {
        agent.map(|a| self.agent(stage, a))
    }
    /// The handler of a `merge` stage.
    fn merge(&self, stage: &StageContext, _agent: Option<&AgentSpec>) -> Arc<dyn NodeHandler> {
        unsupported(stage)
    }
    /// The item source of a `fan_out` stage with `items_from: <artifact>`: its result's
    /// `items` are the entries of the artifact's latest version (the tickets of `tickets.md`,
    /// each `{id, title, description, depends_on, acceptance_criteria, files}`).
    fn items(&self, stage: &StageContext, _artifact: &str) -> Arc<dyn NodeHandler> {
        unsupported(stage)
    }
    /// The handler of a task tree step (`step:` on an agent stage): the agent runs, and its
    /// answer becomes task tree operations and the result's `outcome`. Default: the agent.
    fn task_step(&self, stage: &StageContext, agent: &AgentSpec) -> Arc<dyn NodeHandler> {
        self.agent(stage, agent)
    }
    /// The handler of a `deterministic` stage.
    fn deterministic(&self, stage: &StageContext) -> Arc<dyn NodeHandler> {
        unsupported(stage)
    }
}

/// A handler that fails, naming the kind this runtime cannot run.
fn unsupported(stage: &StageContext) -> Arc<dyn NodeHandler> {
    let message = format!(
        "stage `{}`: this runtime cannot run `{}` stages",
        stage.stage_name,
        stage.kind.name()
    );
    Arc::new(move |_ctx: NodeContext| {
        let message = message.clone();
        async move { Ok::<_, NodeError>(NodeOutput::failure(message)) }
    })
}

/// A handler's error becomes a failure outcome, so the writes that routing relies on
/// (`current_stage`, the enrichment counter) still apply.
pub(crate) async fn call(inner: &Arc<dyn NodeHandler>, ctx: NodeContext) -> NodeOutput {
    match inner.call(ctx).await {
        Ok(out) => out,
        Err(NodeError { message }) => NodeOutput::failure(message),
    }
}

/// A stage's node: its context as input (with the feedback waiting for it), its result in
/// `stage_results`; a failure carrying `feedback` hands it to `feedback_to` (a gate's
/// producer, a review's reviewed stage).
fn stage_node(
    stage: String,
    input: Value,
    inner: Arc<dyn NodeHandler>,
    feedback_to: Option<String>,
) -> impl NodeHandler {
    move |mut ctx: NodeContext| {
        let (stage, inner, feedback_to) = (stage.clone(), inner.clone(), feedback_to.clone());
        ctx.input = input.clone();
        let feedback = ctx
            .state
            .get_in("feedback", &stage)
            .filter(|f| !f.is_null())
            .cloned();
        if let (Some(f), Value::Object(m)) = (&feedback, &mut ctx.input) {
            m.insert("feedback".into(), f.clone());
        }
        // A collector's agent is shown the work of the nodes it collects.
        if let (Some((children, _)), Value::Object(m)) = (&ctx.children, &mut ctx.input) {
            let shown: Vec<Value> = children
                .iter()
                .filter(|c| c.state != trellis_protocol::NodeState::Pruned)
                .map(|c| {
                    let output = c
                        .result
                        .get("output")
                        .or_else(|| c.result.get("reason"))
                        .cloned()
                        .unwrap_or(Value::Null);
                    json!({ "key": c.key, "state": c.state, "output": output })
                })
                .collect();
            m.insert("children".into(), Value::Array(shown));
        }
        async move {
            let attempt = ctx.attempt;
            let mut out = call(&inner, ctx).await;
            let failure = out.is_failure();
            let output = out.recorded().clone();
            if failure
                && let Some(to) = &feedback_to
                && let Some(f) = output.get("feedback").filter(|f| !f.is_null())
            {
                out = out.write("feedback", json!({ to.as_str(): f }));
            }
            if !failure && feedback.is_some() {
                out = out.write("feedback", json!({ stage.as_str(): Value::Null }));
            }
            Ok(out.write("current_stage", json!(stage)).write(
                "stage_results",
                json!({ stage: { "failure": failure, "attempt": attempt, "output": output } }),
            ))
        }
    }
}

fn fan_out(stage: String, input: Value, children: Vec<(String, String)>) -> impl NodeHandler {
    move |_ctx: NodeContext| {
        let mut out = NodeOutput::success().write("current_stage", json!(stage));
        for (key, template) in &children {
            out = out.spawn(key.clone(), template.clone(), input.clone());
        }
        async move { Ok(out) }
    }
}

fn child(inner: Arc<dyn NodeHandler>) -> impl NodeHandler {
    move |ctx: NodeContext| {
        let inner = inner.clone();
        async move { Ok(call(&inner, ctx).await) }
    }
}

/// The collector of a stage with several agents: the failure aggregation's verdict, recorded
/// as the engine records it for a collector without a handler (`{aggregate, children}`), and
/// the stage's `stage_results` entry, its agents' reports combined. So such a stage reports
/// like a single agent's: in the run's summary, to later stages and to adaptive retrieval —
/// and `feature_with_iterative_testing`'s `lint_and_format`, failing to DONE, leaves its
/// report in the result.
fn parallel_result(stage: String) -> impl NodeHandler {
    move |ctx: NodeContext| {
        let stage = stage.clone();
        async move {
            let Some((children, aggregate)) = ctx.children else {
                return Err(NodeError::new(format!(
                    "the collector of `{stage}` ran without its agents' outcomes"
                )));
            };
            let (mut text, mut findings, mut files) = (Vec::new(), Vec::new(), Vec::new());
            for c in children.iter().filter(|c| c.state != NodeState::Pruned) {
                let said = c
                    .result
                    .get("output")
                    .or_else(|| c.result.get("reason"))
                    .and_then(Value::as_str)
                    .unwrap_or_default();
                let how = if c.state == NodeState::Failed {
                    "failed"
                } else {
                    "succeeded"
                };
                text.push(if said.trim().is_empty() {
                    format!("{} ({how})", c.key)
                } else {
                    format!("{} ({how}): {said}", c.key)
                });
                let strings = |key: &str| {
                    c.result
                        .get(key)
                        .and_then(Value::as_array)
                        .into_iter()
                        .flatten()
                        .filter_map(Value::as_str)
                        .map(str::to_owned)
                        .collect::<Vec<_>>()
                };
                findings.extend(
                    strings("findings")
                        .into_iter()
                        .map(|f| format!("{}: {f}", c.key)),
                );
                files.extend(strings("files_changed"));
            }
            files.sort();
            files.dedup();
            let failure = aggregate.failed;
            let entry = json!({ stage.as_str(): {
                "failure": failure,
                "attempt": ctx.attempt,
                "output": { "output": text.join("\n\n"), "findings": findings, "files_changed": files },
            }});
            let result = json!({ "aggregate": aggregate, "children": children });
            let out = if failure {
                NodeOutput::failure("failure policy").result(result)
            } else {
                NodeOutput::success().result(result)
            };
            Ok(out.write("stage_results", entry))
        }
    }
}

fn retrieval(
    inner: Arc<dyn NodeHandler>,
    retry_targets: BTreeMap<String, String>,
) -> impl NodeHandler {
    move |mut ctx: NodeContext| {
        let inner = inner.clone();
        let stage = ctx
            .state
            .get("current_stage")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned();
        let retry = retry_targets
            .get(&stage)
            .cloned()
            .unwrap_or_else(|| stage.clone());
        let counter = enrichment_counter(&stage);
        ctx.input = json!({
            "failed_stage": stage,
            "retry_stage": retry,
            "round": ctx.counter(&counter) + 1,
            "failure": ctx.state.get_in("stage_results", &stage).cloned().unwrap_or(Value::Null),
        });
        async move {
            Ok(call(&inner, ctx)
                .await
                .count(counter, 1)
                .write("retry_stage", json!(retry)))
        }
    }
}

/// Whether a routing target is one of the plan's terminals rather than a stage.
fn is_terminal(target: &str) -> bool {
    matches!(target, "DONE" | "ABORT")
}

fn terminal(name: &'static str) -> Arc<dyn NodeHandler> {
    Arc::new(move |_ctx: NodeContext| async move {
        Ok::<_, NodeError>(NodeOutput::success().write("outcome", json!(name)))
    })
}

/// Compiles `plan` into a graph named after the workflow (the plan is its params, so a
/// registry can rebuild it on resume).
pub fn compile(plan: &Plan, handlers: &dyn StageHandlers) -> Result<Graph> {
    let b = declare_channels(plan);
    let mut b = add_entry(b, plan, handlers);
    let adaptive = plan.adaptive_retrieval && !plan.planned.is_empty();
    for route in &plan.routing {
        b = StageCompiler::new(plan, route, handlers, adaptive).compile(b);
    }
    if adaptive {
        b = add_adaptive_retrieval(b, plan, handlers);
    }
    b = b
        .terminal("DONE", TerminalKind::Success, Some(terminal("DONE")))
        .terminal("ABORT", TerminalKind::Failure, Some(terminal("ABORT")));
    Ok(b.build()?)
}

/// A builder for the plan's graph with its channels declared (see the module docs).
fn declare_channels(plan: &Plan) -> GraphBuilder {
    let mut b: GraphBuilder = GraphBuilder::new(plan.workflow.clone())
        .params(serde_json::to_value(plan).unwrap_or(Value::Null))
        .scheduling(plan.scheduling)
        .channel("task", Reducer::Replace)
        .channel("orchestrator", Reducer::Replace)
        .channel("current_stage", Reducer::Replace)
        .channel("stage_results", Reducer::Merge)
        .channel("retrieval_context", Reducer::Merge)
        .channel("enriched_context", Reducer::Merge)
        .channel("retry_stage", Reducer::Replace)
        .channel("feedback", Reducer::Merge)
        .channel("outcome", Reducer::Replace);
    // Only workflows that keep a task tree get its channel, so the others' graphs (and
    // fingerprints) stay as they were.
    if plan.state.iter().any(|s| s == "task_tree") {
        b = b.channel(
            crate::tasktree::CHANNEL,
            Reducer::custom("task_tree", crate::tasktree::reducer),
        );
    }
    b
}

/// The graph's entry: the upfront-retrieval node (routing to the plan's entry stage) when the
/// plan has one and the handlers supply it, else the entry stage itself.
fn add_entry(b: GraphBuilder, plan: &Plan, handlers: &dyn StageHandlers) -> GraphBuilder {
    let upfront = if plan.has_upfront_retrieval() {
        handlers.upfront_retrieval(plan)
    } else {
        None
    };
    match upfront {
        Some(h) => b
            .node(UPFRONT_RETRIEVAL, move |ctx: NodeContext| {
                let h = h.clone();
                async move { Ok(call(&h, ctx).await) }
            })
            .edge(UPFRONT_RETRIEVAL, plan.entry.clone())
            .entry(UPFRONT_RETRIEVAL),
        _ => b.entry(plan.entry.clone()),
    }
}

/// The adaptive-retrieval node, routing to the stage its handler chose to retry.
fn add_adaptive_retrieval(
    b: GraphBuilder,
    plan: &Plan,
    handlers: &dyn StageHandlers,
) -> GraphBuilder {
    let stages: Vec<String> = plan
        .planned
        .iter()
        .map(|p| p.context.stage_name.clone())
        .collect();
    let retry_targets: BTreeMap<String, String> = plan
        .routing
        .iter()
        .filter(|r| plan.is_planned(&r.next_on_failure))
        .map(|r| (r.stage.clone(), r.next_on_failure.clone()))
        .collect();
    b.node(
        ADAPTIVE_RETRIEVAL,
        retrieval(handlers.adaptive_retrieval(plan), retry_targets),
    )
    .conditional_edge(ADAPTIVE_RETRIEVAL, stages, |r: &RouteContext<'_>| {
        match r.state.get("retry_stage").and_then(Value::as_str) {
            Some(stage) => Ok(vec![NodeId::from(stage)]),
            None => Err("adaptive retrieval ran before any stage".to_owned()),
        }
    })
}

/// Compiles one stage (a row of the plan's routing table) into its nodes and its router.
struct StageCompiler<'a> {
    route: &'a Route,
    /// The stage's context when it is planned (`None`: it is skipped).
    planned: Option<&'a StageContext>,
    handlers: &'a dyn StageHandlers,
    /// Whether its failures go through adaptive retrieval.
    enriches: bool,
}

/// Where a compiled stage's router leaves from.
struct Exit {
    /// The stage's node, or the collector that ends it.
    from: String,
    /// The stage's `max_attempts` when `from` is a collector: the engine bounds a task node's
    /// failure routes, a collector's router applies the bound itself.
    collector_max: Option<u32>,
}

impl<'a> StageCompiler<'a> {
    /// The compiler of `route`'s stage, with its context when `plan` runs it.
    fn new(
        plan: &'a Plan,
        route: &'a Route,
        handlers: &'a dyn StageHandlers,
        adaptive: bool,
    ) -> Self {
        let planned = plan
            .planned
            .iter()
            .find(|p| p.context.stage_name == route.stage)
            .map(|p| &p.context);
        // Adaptive retrieval enriches failed agent stages only.
        let enriches = adaptive && planned.is_some_and(|c| c.kind.is_agent());
        Self {
            route,
            planned,
            handlers,
            enriches,
        }
    }

    /// The stage's nodes, then its router (a fan-out has none: its work continues at its
    /// collector).
    fn compile(&self, b: GraphBuilder) -> GraphBuilder {
        match self.nodes(b) {
            (b, Some(exit)) => self.router(b, exit),
            (b, None) => b,
        }
    }

    /// Routing leaves from the stage's own node.
    fn at_stage(&self, collector_max: Option<u32>) -> Option<Exit> {
        Some(Exit {
            from: self.route.stage.clone(),
            collector_max,
        })
    }

    /// The stage's nodes, as its plan says: a SKIPPED node, a node of its kind, a single
    /// agent, or parallel agents; with where its router leaves from.
    fn nodes(&self, b: GraphBuilder) -> (GraphBuilder, Option<Exit>) {
        let stage = self.route.stage.as_str();
        match self.planned {
            None => {
                let noop = |_ctx: NodeContext| async { Ok::<_, NodeError>(NodeOutput::success()) };
                (
                    b.node_with(stage, noop, |o| o.skipped()),
                    self.at_stage(None),
                )
            }
            Some(ctx) if !ctx.kind.is_agent() => self.kind_nodes(b, ctx),
            Some(ctx) if ctx.agents.len() == 1 => {
                let h = match &ctx.step {
                    Some(_) => self.handlers.task_step(ctx, &ctx.agents[0]),
                    None => self.handlers.agent(ctx, &ctx.agents[0]),
                };
                (self.single(b, h, None), self.at_stage(None))
            }
            Some(ctx) => self.parallel_agents(b, ctx),
        }
    }

    /// A stage node running `h` (see [`stage_node`]), bounded by the stage's `max_attempts`.
    fn single(
        &self,
        b: GraphBuilder,
        h: Arc<dyn NodeHandler>,
        feedback_to: Option<String>,
    ) -> GraphBuilder {
        let stage = &self.route.stage;
        let input = self.planned.map_or(Value::Null, |c| {
            serde_json::to_value(c).unwrap_or(Value::Null)
        });
        let h = stage_node(stage.clone(), input, h, feedback_to);
        match self.route.max_attempts {
            Some(n) => b.node_with(stage.as_str(), h, |o| o.max_attempts(n, "ABORT")),
            None => b.node(stage.as_str(), h),
        }
    }

    /// The nodes of a stage whose `kind` is not `agent`.
    fn kind_nodes(&self, b: GraphBuilder, ctx: &StageContext) -> (GraphBuilder, Option<Exit>) {
        let agent = ctx.agents.first();
        let handlers = self.handlers;
        let b = match &ctx.kind {
            Kind::Agent => b,
            Kind::Gate { producer, .. } => {
                self.single(b, handlers.gate(ctx), Some(producer.clone()))
            }
            Kind::Review { reviews } => {
                let h = match agent {
                    Some(a) => handlers.review(ctx, a),
                    None => unsupported(ctx),
                };
                self.single(b, h, Some(reviews.clone()))
            }
            Kind::Deterministic { .. } => self.single(b, handlers.deterministic(ctx), None),
            Kind::Merge { .. } => self.single(b, handlers.merge(ctx, agent), None),
            Kind::FanOut {
                template,
                max_items,
                items_from,
                review,
                merge,
            } => {
                let pipeline = Pipeline {
                    review: review.is_some(),
                    merge: merge.is_some(),
                };
                let b =
                    self.fan_out_orchestrator(b, ctx, *max_items, items_from.as_deref(), pipeline);
                let b = self.fan_out_templates(b, ctx, template, review.as_ref(), merge.as_ref());
                return (self.fan_out_failure_route(b), None);
            }
            Kind::Collector { collects } => {
                let stage = &self.route.stage;
                let input = serde_json::to_value(ctx).unwrap_or(Value::Null);
                // A collector that produces artifacts gets its own validation
                // errors back as feedback when it runs again.
                let back = ctx.produces.as_ref().map(|_| stage.clone());
                let h = handlers.collector(ctx, agent).map(|h| {
                    Arc::new(stage_node(stage.clone(), input, h, back)) as Arc<dyn NodeHandler>
                });
                let b = b.collector(
                    stage.as_str(),
                    collects.as_str(),
                    self.route.failure_aggregation.policy(),
                    h,
                );
                return (b, self.at_stage(self.route.max_attempts));
            }
        };
        (b, self.at_stage(None))
    }

    /// A fan-out's node: its item source (the artifact's entries, else the orchestrator
    /// agent) spawning up to `max_items` work pipelines.
    fn fan_out_orchestrator(
        &self,
        b: GraphBuilder,
        ctx: &StageContext,
        max_items: u32,
        items_from: Option<&str>,
        pipeline: Pipeline,
    ) -> GraphBuilder {
        let stage = &self.route.stage;
        let input = serde_json::to_value(ctx).unwrap_or(Value::Null);
        let source = match (items_from, ctx.agents.first()) {
            (Some(artifact), _) => self.handlers.items(ctx, artifact),
            (None, Some(a)) => self.handlers.fan_out(ctx, a),
            (None, None) => unsupported(ctx),
        };
        let h = stage_node(stage.clone(), input, source, None);
        let node = fan_out_node(stage.clone(), max_items, pipeline, h);
        match self.route.max_attempts {
            Some(n) => b.node_with(stage.as_str(), node, |o| o.max_attempts(n, "ABORT")),
            None => b.node(stage.as_str(), node),
        }
    }

    /// The templates of a fan-out's work pipeline: the work, and its review and merge when
    /// the stage has them.
    fn fan_out_templates(
        &self,
        mut b: GraphBuilder,
        ctx: &StageContext,
        template: &AgentSpec,
        review: Option<&AgentSpec>,
        merge: Option<&AgentSpec>,
    ) -> GraphBuilder {
        let stage = &self.route.stage;
        let (work, review_ctx, merge_ctx) = fanout::contexts(ctx, template, review, merge);
        let json = |c: &StageContext| serde_json::to_value(c).unwrap_or(Value::Null);
        b = b.template(
            work_template(stage),
            work_node(
                json(&work),
                self.handlers.agent(&work, template),
                review.is_some(),
            ),
        );
        if let (Some(c), Some(a)) = (&review_ctx, review) {
            let max_work = self
                .route
                .max_attempts
                .unwrap_or(fanout::DEFAULT_WORK_ATTEMPTS);
            b = b.template(
                fanout::review_template(stage),
                review_node(json(c), self.handlers.review(c, a), max_work),
            );
        }
        if let (Some(c), Some(a)) = (&merge_ctx, merge) {
            b = b.template(
                fanout::merge_template(stage),
                merge_node(json(c), self.handlers.merge(c, Some(a))),
            );
        }
        b
    }

    /// A fan-out's own route: the work continues at the collector; a failed orchestrator
    /// follows the failure route.
    fn fan_out_failure_route(&self, b: GraphBuilder) -> GraphBuilder {
        let failure = self.route.next_on_failure.clone();
        b.conditional_edge(
            self.route.stage.as_str(),
            vec![failure.clone()],
            move |r: &RouteContext<'_>| {
                Ok(if r.failed {
                    vec![NodeId::from(failure.as_str())]
                } else {
                    Vec::new()
                })
            },
        )
    }

    /// A stage with several agents: a fan-out node with one child per agent, and the
    /// collector that combines their reports, which routing leaves from.
    fn parallel_agents(
        &self,
        mut b: GraphBuilder,
        ctx: &StageContext,
    ) -> (GraphBuilder, Option<Exit>) {
        let stage = &self.route.stage;
        let input = serde_json::to_value(ctx).unwrap_or(Value::Null);
        let mut children = Vec::new();
        for (i, agent) in ctx.agents.iter().enumerate() {
            let dup = ctx.agents.iter().filter(|a| a.agent == agent.agent).count() > 1;
            let key = if dup {
                format!("{}_{}", agent.agent, i + 1)
            } else {
                agent.agent.clone()
            };
            let template = format!("{stage}:{key}");
            b = b.template(template.clone(), child(self.handlers.agent(ctx, agent)));
            children.push((key, template));
        }
        let from = collector_id(stage);
        let b = b
            .node(stage.as_str(), fan_out(stage.clone(), input, children))
            .collector(
                from.as_str(),
                stage.as_str(),
                self.route.failure_aggregation.policy(),
                Some(Arc::new(parallel_result(stage.clone()))),
            );
        let exit = Exit {
            from,
            collector_max: self.route.max_attempts,
        };
        (b, Some(exit))
    }

    /// The stage's router, leaving from `exit.from`.
    fn router(&self, b: GraphBuilder, exit: Exit) -> GraphBuilder {
        let route = self.route;
        let router = StageRouter {
            success: route.next_on_success.clone(),
            failure: route.next_on_failure.clone(),
            outcomes: route.outcomes.clone(),
            enriches: self.enriches,
            // A gate rejected without feedback ends the run (there is nothing to revise).
            gate: self
                .planned
                .is_some_and(|c| matches!(c.kind, Kind::Gate { .. })),
            collector_max: exit.collector_max,
            counter: enrichment_counter(&route.stage),
        };
        let targets = router.targets();
        b.conditional_edge(exit.from.as_str(), targets, router)
    }
}

/// Where a stage goes after an activation: the stage the result's `outcome` names, the
/// success route, or the failure path.
struct StageRouter {
    success: String,
    failure: String,
    outcomes: BTreeMap<String, String>,
    /// Failures go through adaptive retrieval while the stage's enrichments last.
    enriches: bool,
    /// The stage is a gate: a rejection without feedback goes to ABORT.
    gate: bool,
    /// The collector's bound on failure routes (see [`Exit::collector_max`]).
    collector_max: Option<u32>,
    /// The stage's enrichment counter.
    counter: String,
}

impl StageRouter {
    /// Every node the router may choose, each once.
    fn targets(&self) -> Vec<String> {
        let mut targets = vec![self.success.clone(), self.failure.clone()];
        targets.extend(self.outcomes.values().cloned());
        if self.enriches {
            targets.push(ADAPTIVE_RETRIEVAL.to_owned());
        }
        if self.collector_max.is_some() || self.gate {
            targets.push("ABORT".to_owned());
        }
        let mut seen = std::collections::BTreeSet::new();
        targets.retain(|t| seen.insert(t.clone()));
        targets
    }
}

impl Router for StageRouter {
    fn route(&self, r: &RouteContext<'_>) -> std::result::Result<Vec<NodeId>, String> {
        let outcome = r
            .result
            .get("outcome")
            .and_then(Value::as_str)
            .and_then(|o| self.outcomes.get(o));
        let to = if let Some(to) = outcome {
            to.as_str()
        } else if !r.failed {
            self.success.as_str()
        } else if self.gate && r.result.get("feedback").is_none_or(Value::is_null) {
            "ABORT"
        } else if is_terminal(&self.failure) {
            // Taken as written: enriching a stage that will not run again is wasted.
            self.failure.as_str()
        } else if self.enriches && r.counter(&self.counter) < MAX_ENRICHMENTS {
            ADAPTIVE_RETRIEVAL
        } else {
            self.failure.as_str()
        };
        // The engine bounds a task node's failure routes (`max_attempts(n, "ABORT")`);
        // a collector has no such bound in the graph, so its router applies the same one.
        let exhausted = self.collector_max.is_some_and(|m| r.failure_routes >= m);
        Ok(vec![NodeId::from(
            if r.failed && exhausted && !is_terminal(to) {
                "ABORT"
            } else {
                to
            },
        )])
    }
}
