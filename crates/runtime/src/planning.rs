//! Planning as the run's first node. A workflow run starts as the one-node graph
//! [`PLANNING_GRAPH`]: its [`ORCHESTRATE`] node asks the orchestrator for the workflow and
//! its optional stages (the call booked to the run's budget and usage like every agent's).
//! When it is done, the graph's continuation assembles the plan, grants the plan's tools to
//! the run and hands over to the planned workflow's graph, built [`Graph::after`] the
//! planning graph, so the same run — id, log, worktree — goes on with it (`runContinued`).
//!
//! A run started this way is visible, streamed, cancellable and resumable while it plans:
//! it is an ordinary run whose first node happens to be the orchestrator. Runs recorded
//! before planning was a node (their `runStarted` names the workflow) rebuild their graph
//! without it ([`stored_graph`] and resume pick by the recorded fingerprint).

use std::sync::{Arc, Weak};

use futures::future::BoxFuture;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use trellis_agents::{Orchestration, Overrides};
use trellis_graph::{
    Continuation, Engine, Graph, GraphBuilder, Next, NodeContext, NodeError, NodeOutput, RunOutcome,
};
use trellis_llm::CallScope;
use trellis_protocol::RunId;
use trellis_store::{RunGraphs, Store};
use trellis_workflow::{Plan, StageHandlers, compile};

use crate::{Error, Result, RunContext, run_input};

/// The name of the graph a workflow run starts with.
pub const PLANNING_GRAPH: &str = "planning";

/// The planning graph's one node: the orchestrator deciding the workflow (a reserved stage
/// name).
pub use trellis_workflow::ORCHESTRATE;

/// What the planning node decides from: the request and what the user fixed. Recorded as
/// the planning graph's parameters (`{"planning": {…}}`).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct PlanningParams {
    /// The user's request.
    pub request: String,
    /// `--workflow`, `--include`, `--skip`.
    #[serde(flatten)]
    pub overrides: Overrides,
    /// The run's own budgets (the start op's `budgets`), if any: whichever process executes
    /// the run — a worker, a resume after a crash — applies them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub budgets: Option<trellis_protocol::Budgets>,
}

impl PlanningParams {
    /// The graph parameters these are recorded as.
    pub fn to_params(&self) -> Value {
        json!({ "planning": self })
    }

    /// The planning parameters recorded in a planning graph's `params`, if they are that.
    pub fn from_params(params: &Value) -> Option<Self> {
        serde_json::from_value(params.get("planning")?.clone()).ok()
    }
}

/// What the planning node recorded as its result.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct PlanningOutput {
    /// The orchestrator's decisions.
    pub orchestration: Orchestration,
    /// The assembled plan.
    pub plan: Plan,
}

impl PlanningOutput {
    /// The planning node's result in `at`, once it is done.
    pub fn of(at: &RunOutcome) -> Option<Self> {
        let node = at.node(ORCHESTRATE)?;
        serde_json::from_value(node.result.clone()).ok()
    }
}

/// Where a stored workflow run stands in its graphs.
pub enum Stage {
    /// It is planning (or failed or was cancelled while it planned).
    Planning(PlanningParams),
    /// It runs its plan.
    Planned {
        /// The plan.
        plan: Plan,
        /// The fingerprint its `runStarted` recorded: the workflow graph's own when it
        /// started with its plan (recorded before planning was a node), else that of the
        /// planning graph or of a graph continuing it (a fork).
        started: String,
    },
}

impl Stage {
    /// Reads the stage from a run's graphs.
    pub fn of(run: &RunId, graphs: &RunGraphs) -> Result<Self> {
        let (_, params) = graphs.current();
        if let Some(p) = PlanningParams::from_params(params) {
            return Ok(Stage::Planning(p));
        }
        let plan: Plan = serde_json::from_value(params.clone())
            .map_err(|e| Error::Resume(format!("run {run} is not a workflow run ({e})")))?;
        Ok(Stage::Planned {
            plan,
            started: graphs.fingerprint.clone(),
        })
    }

    /// Reads the stage of stored run `run`.
    pub fn read(store: &Store, run: &RunId) -> Result<Self> {
        Self::of(run, &store.graphs(run)?)
    }

    /// The plan a run in this stage follows; an error while it plans.
    pub fn into_plan(self, run: &RunId) -> Result<Plan> {
        match self {
            Stage::Planned { plan, .. } => Ok(plan),
            Stage::Planning(_) => Err(Error::Resume(format!(
                "run {run} has no plan yet: its orchestrator is still deciding (or stopped \
                 before it decided)"
            ))),
        }
    }
}

/// The planning graph for `params`. With `ctx` its node asks the orchestrator and its
/// continuation hands over to the plan's workflow; without, it only describes the graph
/// (inspection, the prelude of a workflow graph): its node refuses to run.
pub(crate) fn planning_graph(
    params: &PlanningParams,
    ctx: Option<&Arc<RunContext>>,
) -> Result<Graph> {
    let b = GraphBuilder::new(PLANNING_GRAPH).params(params.to_params());
    let b = match ctx {
        Some(ctx) => {
            let node = OrchestrateNode {
                ctx: Arc::downgrade(ctx),
                params: params.clone(),
            };
            b.node(ORCHESTRATE, move |c: NodeContext| node.clone().run(c))
                .then(Arc::new(ToWorkflow {
                    ctx: Arc::downgrade(ctx),
                }))
        }
        None => b.node(ORCHESTRATE, planning_done),
    };
    Ok(b.entry(ORCHESTRATE).build()?)
}

async fn planning_done(_ctx: NodeContext) -> std::result::Result<NodeOutput, NodeError> {
    Err(NodeError::new(
        "planning is done: the run follows its plan; start a new run to plan again",
    ))
}

/// The orchestrator's call, as the planning node.
#[derive(Clone)]
struct OrchestrateNode {
    ctx: Weak<RunContext>,
    params: PlanningParams,
}

impl OrchestrateNode {
    async fn run(self, node: NodeContext) -> std::result::Result<NodeOutput, NodeError> {
        let ctx = self
            .ctx
            .upgrade()
            .ok_or_else(|| NodeError::new("the run's context is gone"))?;
        let rt = ctx.runtime.clone();
        let provider = rt
            .models
            .budgeted(
                "orchestrator",
                ctx.ledger.clone(),
                CallScope {
                    stage: Some(ORCHESTRATE.to_owned()),
                    agent: Some("orchestrator".to_owned()),
                },
            )
            .map_err(|e| NodeError::new(e.to_string()))?;
        let (orchestration, plan) = rt
            .plan_with(
                provider.as_ref(),
                &self.params.request,
                &self.params.overrides,
                node.cancel.clone(),
            )
            .await
            .map_err(|e| NodeError::new(e.to_string()))?;
        let planned = PlanningOutput {
            orchestration,
            plan,
        };
        let result = serde_json::to_value(&planned).map_err(|e| NodeError::new(e.to_string()))?;
        Ok(NodeOutput::success().result(result))
    }
}

/// The planning graph's continuation: the planned workflow's graph, with the plan's tools
/// granted to the run.
struct ToWorkflow {
    ctx: Weak<RunContext>,
}

impl Continuation for ToWorkflow {
    fn next(
        &self,
        at: RunOutcome,
    ) -> BoxFuture<'static, std::result::Result<Option<Next>, String>> {
        let ctx = self.ctx.clone();
        Box::pin(async move {
            let ctx = ctx.upgrade().ok_or("the run's context is gone")?;
            let planned = PlanningOutput::of(&at)
                .ok_or("the planning node recorded no plan; the run cannot go on")?;
            // Building the tool registry and compiling the workflow are blocking work.
            tokio::task::spawn_blocking(move || {
                ctx.set_registry(ctx.runtime.registry_for(Some(&planned.plan)));
                ctx.set_workflow(Some(planned.plan.workflow.clone()));
                let graph = after_planning(compile(&planned.plan, ctx.as_ref())?)?;
                Ok::<_, Error>(Some((
                    Arc::new(graph),
                    run_input(&planned.plan, &planned.orchestration),
                )))
            })
            .await
            .map_err(|e| format!("internal error: {e}"))?
            .map_err(|e| e.to_string())
        })
    }
}

/// A workflow's graph continuing the planning graph. The planning parameters are not part
/// of a graph's structure, so any will do for the prelude (its node never runs again).
fn after_planning(workflow: Graph) -> Result<Graph> {
    let prelude = planning_graph(&PlanningParams::default(), None)?;
    Ok(workflow.after(&prelude)?)
}

/// The graph stored workflow run `run` is replayed with, for inspection only (its nodes
/// refuse to run): the planning graph while it plans, else its workflow's (after the
/// planning graph when it started planning). Needs the store alone.
pub fn stored_graph(store: &Store, run: &RunId) -> Result<Graph> {
    let stage = Stage::read(store, run)?;
    workflow_graph(&stage, &crate::PlanOnly, None)
}

/// Where stored workflow run `run` stands, replayed from the store (nothing runs). A run
/// that continued with its workflow between reading its graphs and its log (it only moves
/// on) is read again.
pub fn stored_outcome(store: &Arc<Store>, run: &RunId) -> Result<RunOutcome> {
    let engine = Engine::new(store.clone());
    let stage = Stage::read(store.as_ref(), run)?;
    match engine.inspect(
        Arc::new(workflow_graph(&stage, &crate::PlanOnly, None)?),
        run,
    ) {
        Err(trellis_graph::Error::Replay { .. }) if matches!(stage, Stage::Planning(_)) => {
            Ok(engine.inspect(Arc::new(stored_graph(store.as_ref(), run)?), run)?)
        }
        other => Ok(other?),
    }
}

/// The graph a stored run in `stage` is rebuilt with, its stage nodes run by `handlers`
/// (`ctx` for a run that executes: its planning node then asks the orchestrator).
pub(crate) fn workflow_graph(
    stage: &Stage,
    handlers: &dyn StageHandlers,
    ctx: Option<&Arc<RunContext>>,
) -> Result<Graph> {
    match stage {
        Stage::Planning(params) => planning_graph(params, ctx),
        Stage::Planned { plan, started } => {
            let graph = compile(plan, handlers)?;
            if graph.fingerprint() == started {
                return Ok(graph);
            }
            after_planning(graph)
        }
    }
}
