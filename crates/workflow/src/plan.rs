//! Deterministic plan assembly (docs/workflows.md, "Plan assembly"): no model, the same input
//! gives the same plan. Required stages are planned; optional stages are planned when the
//! decisions include them and skipped otherwise.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::Value;
use trellis_graph::{Scheduling, nearest};

use crate::error::{Error, Result};
use crate::schema::{AgentSpec, Aggregation, Stage, StageKind, Target, Workflow, WorkflowHook};

/// Enrichments per stage before a failure follows `next_stage_on_failure`.
pub const MAX_ENRICHMENTS: i64 = 2;

/// Include or skip an optional stage.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum Decision {
    /// Run it.
    Include,
    /// Skip it.
    Skip,
}

/// Decisions about optional stages, keyed by stage id or name, each with an optional reason
/// (the orchestrator's reasoning, or "--include on the command line").
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Decisions(pub BTreeMap<String, (Decision, Option<String>)>);

impl Decisions {
    /// Records a decision.
    pub fn set(&mut self, stage: impl Into<String>, decision: Decision, reason: Option<String>) {
        self.0.insert(stage.into(), (decision, reason));
    }
}

/// Everything an agent of a stage is told (the task context, plus the stage's guidance).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct StageContext {
    /// `stage_id`.
    pub stage_id: String,
    /// `name`; also the stage's node id in the graph.
    pub stage_name: String,
    /// `description`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stage_description: Option<String>,
    /// `type`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stage_type: Option<String>,
    /// The user's request.
    pub task: String,
    /// The agents, run in parallel.
    pub agents: Vec<AgentSpec>,
    /// Every MCP tool of the stage's agents, sorted, deduplicated.
    pub tools: Vec<String>,
    /// `reasoning_guidance`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reasoning_guidance: Option<String>,
    /// `retrieval_guidance`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub retrieval_guidance: Option<String>,
    /// `failure_criteria`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub failure_criteria: Option<Value>,
    /// `retrieval_strategy_config.retrieval_hints.token_budget.<stage name>`, if set.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub token_budget: Option<u64>,
    /// What the stage's node does (absent: an agent stage).
    #[serde(default, skip_serializing_if = "Kind::is_agent")]
    pub kind: Kind,
    /// The artifact the stage submits (`produces`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub produces: Option<String>,
    /// The further artifacts it submits (`produces: [a, b, …]` after the first).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub also_produces: Vec<String>,
    /// A fan-out's work node whose work reaches the run branch through its own merge node
    /// (`fan_out.merge`): it commits on its branch and does not merge.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub merge_later: bool,
    /// Set at run time: what a person or a reviewer asked to change (a gate's request for
    /// changes, a review's NEEDS_REVISION).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub feedback: Option<String>,
    /// Its task tree step (`step:`), for workflows with `state: [task_tree]`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub step: Option<String>,
    /// Set at run time for a fan-out's work node: the orchestrator's item it works on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub item: Option<Value>,
}

/// What a planned stage's node does, with references as node ids (stage names).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Kind {
    /// The stage's agents, run in parallel.
    #[default]
    Agent,
    /// Awaits the approval of the latest `artifact`; changes requested → `producer`.
    Gate {
        /// The artifact kind.
        artifact: String,
        /// The producing stage's node.
        producer: String,
    },
    /// Reviews the work of `reviews`.
    Review {
        /// The reviewed stage's node.
        reviews: String,
    },
    /// The orchestrator's items become work nodes of `template`.
    FanOut {
        /// The work nodes' agent.
        template: AgentSpec,
        /// The most work nodes per activation.
        max_items: u32,
        /// The items are the entries of this artifact (no orchestrator agent).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        items_from: Option<String>,
        /// Each item's work is reviewed by this agent in a node of its own.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        review: Option<AgentSpec>,
        /// Each item's work is merged by a node of its own; this agent resolves conflicts.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        merge: Option<AgentSpec>,
    },
    /// Collects the work nodes of `collects`.
    Collector {
        /// The fan-out stage's node.
        collects: String,
    },
    /// Merges the work of `merges` into the run branch.
    Merge {
        /// The merged stage's node.
        merges: String,
    },
    /// A built-in function.
    Deterministic {
        /// Its name.
        function: String,
        /// Its arguments.
        #[serde(default)]
        args: Value,
    },
}

impl Kind {
    /// Whether this is the default kind.
    pub fn is_agent(&self) -> bool {
        *self == Kind::Agent
    }

    /// The `kind:` name.
    pub fn name(&self) -> &'static str {
        match self {
            Kind::Agent => "agent",
            Kind::Gate { .. } => "gate",
            Kind::Review { .. } => "review",
            Kind::FanOut { .. } => "fan_out",
            Kind::Collector { .. } => "collector",
            Kind::Merge { .. } => "merge",
            Kind::Deterministic { .. } => "deterministic",
        }
    }

    /// The stage this kind depends on (skipped with it).
    pub fn depends_on(&self) -> Option<&str> {
        match self {
            Kind::Gate { producer, .. } => Some(producer),
            Kind::Review { reviews } => Some(reviews),
            Kind::Collector { collects } => Some(collects),
            Kind::Merge { merges } => Some(merges),
            _ => None,
        }
    }
}

/// One row of the routing table, in graph node ids (stage names, DONE, ABORT).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Route {
    /// The stage's node.
    pub stage: String,
    /// After success.
    pub next_on_success: String,
    /// After failure: DONE or ABORT at once; a stage through adaptive retrieval while it
    /// lasts.
    pub next_on_failure: String,
    /// How often a failure may be routed back to a stage (through `next_on_failure` or an
    /// outcome) before the next one goes to ABORT (`None`: unlimited).
    pub max_attempts: Option<u32>,
    /// How parallel agents' failures combine.
    pub failure_aggregation: Aggregation,
    /// Where a result's `outcome` leads, before success / failure routing.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub outcomes: BTreeMap<String, String>,
}

/// A stage the plan leaves out, and why.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Skipped {
    /// `stage_id`.
    pub stage_id: String,
    /// `name`.
    pub stage_name: String,
    /// Why it is skipped.
    pub reason: String,
}

/// A planned stage and why it runs.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Planned {
    /// The stage's context.
    pub context: StageContext,
    /// Why it runs.
    pub reason: String,
}

/// The execution plan: fixed once assembled; storable as JSON.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Plan {
    /// The workflow's name.
    pub workflow: String,
    /// `metadata.workflow_type`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub workflow_type: Option<String>,
    /// The user's request.
    pub task: String,
    /// The entry node (the first stage in the file; bypassed if skipped).
    pub entry: String,
    /// Whether failed stages go through adaptive retrieval.
    pub adaptive_retrieval: bool,
    /// The retrieval strategy, as written.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub retrieval_strategy_config: Option<Value>,
    /// Planned stages in file order.
    pub planned: Vec<Planned>,
    /// Skipped stages in file order.
    pub skipped: Vec<Skipped>,
    /// Routing of every stage (skipped stages route on as after a success).
    pub routing: Vec<Route>,
    /// The workflow's `state` (`task_tree`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub state: Vec<String>,
    /// The workflow's `scheduling` (absent: lock-step).
    #[serde(default, skip_serializing_if = "crate::schema::is_steps")]
    pub scheduling: Scheduling,
    /// The workflow's own hooks, run in the run after the configuration's `[[hooks]]`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub hooks: Vec<WorkflowHook>,
}

impl Plan {
    /// Whether `stage` (a node id) is planned.
    pub fn is_planned(&self, stage: &str) -> bool {
        self.planned.iter().any(|p| p.context.stage_name == stage)
    }

    /// Where a failure of `route`'s stage leads, in words, as the compiled graph routes it:
    /// DONE or ABORT at once; a stage at most `max_attempts` times — the first ones through
    /// adaptive retrieval when it is on — then ABORT.
    pub fn failure_path(&self, route: &Route) -> String {
        let to = route.next_on_failure.as_str();
        if matches!(to, "DONE" | "ABORT") {
            return to.to_owned();
        }
        let enriches = self.adaptive_retrieval
            && self
                .planned
                .iter()
                .any(|p| p.context.stage_name == route.stage && p.context.kind.is_agent());
        let via = if enriches {
            let n = MAX_ENRICHMENTS;
            let first = match route.max_attempts {
                Some(m) if i64::from(m) <= n => String::new(),
                _ => format!("the first {n} "),
            };
            // Adaptive retrieval retries a planned stage; a skipped one is bypassed, so it
            // retries the failed stage instead.
            let retry = if self.is_planned(to) {
                String::new()
            } else {
                format!(", which retries {}", route.stage)
            };
            format!(" ({first}through adaptive_retrieval{retry})")
        } else {
            String::new()
        };
        match route.max_attempts {
            Some(1) => format!("{to} once{via}, then ABORT"),
            Some(n) => format!("{to} up to {n} times{via}, then ABORT"),
            None => format!("{to}{via}"),
        }
    }

    /// Whether the compiled graph starts with an upfront-retrieval node: the workflow has a
    /// `retrieval_strategy_config` that is not `enabled: false`, and stages to run. (The
    /// graph's shape depends on the plan alone, so a stored run's graph can be rebuilt.)
    pub fn has_upfront_retrieval(&self) -> bool {
        !self.planned.is_empty()
            && self
                .retrieval_strategy_config
                .as_ref()
                .is_some_and(|c| c.get("enabled").and_then(Value::as_bool) != Some(false))
    }
}

/// Assembles the plan of `workflow` for `task` with the given decisions.
pub fn assemble(workflow: &Workflow, decisions: &Decisions, task: &str) -> Result<Plan> {
    check_decisions(workflow, decisions)?;
    let budgets = workflow
        .retrieval_strategy_config
        .as_ref()
        .and_then(|c| c.value.pointer("/retrieval_hints/token_budget"));
    let node = |t: &Target| node_id(workflow, t);
    let mut planned = Vec::new();
    let mut skipped = Vec::new();
    let mut routing = Vec::new();
    for s in &workflow.stages {
        let decision = decisions
            .0
            .get(s.stage_id.value.as_str())
            .or_else(|| decisions.0.get(&s.name.value));
        routing.push(route_row(s, &node));
        let kind = plan_kind(&s.kind.value, &node);
        match inclusion(s, decision, &kind, &skipped) {
            Inclusion::Planned(reason) => planned.push(Planned {
                context: stage_context(s, task, budgets, kind),
                reason,
            }),
            Inclusion::Skipped(reason) => skipped.push(Skipped {
                stage_id: s.stage_id.value.to_string(),
                stage_name: s.name.value.clone(),
                reason,
            }),
        }
    }
    mark_merged_later(&mut planned);
    Ok(Plan {
        workflow: workflow.name().to_owned(),
        workflow_type: workflow.metadata.workflow_type.clone(),
        task: task.to_owned(),
        entry: workflow
            .stages
            .first()
            .map(|s| s.name.value.clone())
            .unwrap_or_else(|| "DONE".into()),
        adaptive_retrieval: workflow.allows_enrichment(),
        retrieval_strategy_config: workflow
            .retrieval_strategy_config
            .as_ref()
            .map(|c| c.value.clone()),
        planned,
        skipped,
        routing,
        scheduling: workflow.scheduling,
        state: workflow.state.clone(),
        hooks: workflow.hooks.clone(),
    })
}

/// Every decision names a stage of the workflow (by id or name), and none skips a required
/// stage.
fn check_decisions(workflow: &Workflow, decisions: &Decisions) -> Result<()> {
    let err = |message: String| Error::Decision {
        workflow: workflow.name().to_owned(),
        message,
    };
    for key in decisions.0.keys() {
        match workflow.stage(key) {
            None => {
                let names = workflow.stages.iter().map(|s| s.name.value.as_str());
                return Err(err(format!(
                    "no stage `{key}`{}; stages: {}",
                    nearest(key, names)
                        .map(|n| format!(" (did you mean `{n}`?)"))
                        .unwrap_or_default(),
                    workflow
                        .stages
                        .iter()
                        .map(|s| format!("{} {}", s.stage_id.value, s.name.value))
                        .collect::<Vec<_>>()
                        .join(", ")
                )));
            }
            Some(s) if s.required && decisions.0[key].0 == Decision::Skip => {
                return Err(err(format!(
                    "stage `{}` is required and cannot be skipped",
                    s.name.value
                )));
            }
            Some(_) => {}
        }
    }
    Ok(())
}

/// A routing target as a graph node id: the stage's name (its id when no stage has it),
/// DONE or ABORT.
fn node_id(workflow: &Workflow, t: &Target) -> String {
    match t {
        Target::Stage(id) => workflow
            .stages
            .iter()
            .find(|s| s.stage_id.value == *id)
            .map_or_else(|| id.to_string(), |s| s.name.value.clone()),
        other => other.to_string(),
    }
}

/// The stage's row of the routing table, in node ids.
fn route_row(s: &Stage, node: &dyn Fn(&Target) -> String) -> Route {
    Route {
        stage: s.name.value.clone(),
        next_on_success: node(&s.routing.next_stage_on_success.value),
        next_on_failure: node(&s.routing.next_stage_on_failure.value),
        max_attempts: s.routing.max_attempts,
        failure_aggregation: s.failure_aggregation.value,
        outcomes: s
            .routing
            .outcomes
            .iter()
            .map(|(k, t)| (k.clone(), node(&t.value)))
            .collect(),
    }
}

/// Whether a stage runs, and why.
enum Inclusion {
    /// It runs, for this reason.
    Planned(String),
    /// It is skipped, for this reason.
    Skipped(String),
}

/// Decides stage `s`: required stages run, optional ones as `decision` says (skipped when
/// there is none), and a stage that depends on a skipped one (a gate on its artifact, a
/// review of its work, a collector of its work nodes) is skipped with it.
fn inclusion(
    s: &Stage,
    decision: Option<&(Decision, Option<String>)>,
    kind: &Kind,
    skipped: &[Skipped],
) -> Inclusion {
    let reason = |default: &str| {
        decision
            .and_then(|(_, r)| r.clone())
            .unwrap_or_else(|| default.to_owned())
    };
    let include = match decision {
        _ if s.required => Some("required".to_owned()),
        Some((Decision::Include, _)) => Some(reason("included")),
        Some((Decision::Skip, _)) => None,
        None => None,
    };
    match (include, kind.depends_on()) {
        (Some(_), Some(dep)) if skipped.iter().any(|k| k.stage_name == dep) => {
            Inclusion::Skipped(format!("stage `{dep}`, which it depends on, is skipped"))
        }
        (Some(why), _) => Inclusion::Planned(why),
        (None, _) => Inclusion::Skipped(reason("optional stage not included")),
    }
}

/// What the agents of planned stage `s` are told.
fn stage_context(s: &Stage, task: &str, budgets: Option<&Value>, kind: Kind) -> StageContext {
    let name = s.name.value.clone();
    let mut tools: Vec<String> = s
        .parallel_agents
        .iter()
        .flat_map(|a| a.mcp_tools.iter().cloned())
        .collect();
    tools.sort();
    tools.dedup();
    StageContext {
        stage_id: s.stage_id.value.to_string(),
        stage_description: s.description.clone(),
        stage_type: s.stage_type.clone(),
        task: task.to_owned(),
        agents: s.parallel_agents.clone(),
        tools,
        reasoning_guidance: s.reasoning_guidance.clone(),
        retrieval_guidance: s.retrieval_guidance.clone(),
        failure_criteria: s.failure_criteria.clone(),
        token_budget: budgets.and_then(|b| b.get(&name)).and_then(Value::as_u64),
        kind,
        produces: s.produces.as_ref().map(|p| p.value.clone()),
        also_produces: s.also_produces.iter().map(|p| p.value.clone()).collect(),
        merge_later: false,
        step: s.step.as_ref().map(|x| x.value.clone()),
        feedback: None,
        item: None,
        stage_name: name,
    }
}

/// A stage that a `merge` stage merges only commits on its agents' branches: the merge
/// stage brings its work to the run branch.
fn mark_merged_later(planned: &mut [Planned]) {
    let merged: Vec<String> = planned
        .iter()
        .filter_map(|p| match &p.context.kind {
            Kind::Merge { merges } => Some(merges.clone()),
            _ => None,
        })
        .collect();
    for p in planned {
        if merged.contains(&p.context.stage_name) {
            p.context.merge_later = true;
        }
    }
}

/// The plan's form of a stage kind: references become node ids.
fn plan_kind(kind: &StageKind, node: &dyn Fn(&Target) -> String) -> Kind {
    let stage = |id: &crate::schema::StageId| node(&Target::Stage(id.clone()));
    match kind {
        StageKind::Agent => Kind::Agent,
        StageKind::Gate { artifact, producer } => Kind::Gate {
            artifact: artifact.value.clone(),
            producer: producer
                .as_ref()
                .map(|p| stage(&p.value))
                .unwrap_or_default(),
        },
        StageKind::Review { reviews } => Kind::Review {
            reviews: stage(&reviews.value),
        },
        StageKind::FanOut {
            template,
            max_items,
            items_from,
            review,
            merge,
        } => Kind::FanOut {
            template: template.clone(),
            max_items: *max_items,
            items_from: items_from.as_ref().map(|f| f.value.clone()),
            review: review.clone(),
            merge: merge.clone(),
        },
        StageKind::Collector { collects } => Kind::Collector {
            collects: stage(&collects.value),
        },
        StageKind::Merge { merges } => Kind::Merge {
            merges: stage(&merges.value),
        },
        StageKind::Deterministic { function, args } => Kind::Deterministic {
            function: function.value.clone(),
            args: args.clone(),
        },
    }
}
