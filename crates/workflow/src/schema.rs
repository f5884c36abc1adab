//! The workflow schema (docs/workflows.md, "Format"): `metadata`,
//! `retrieval_strategy_config`, `hooks`, `stages`.

use std::collections::BTreeMap;
use std::fmt;

use serde::{Deserialize, Serialize, Serializer};
use serde_json::Value;
use trellis_graph::{FailurePolicy, Scheduling};
use trellis_protocol::HookConfig;

use crate::yaml::Pos;

/// A value and where it was written.
#[derive(Clone, Debug, PartialEq)]
pub struct Spanned<T> {
    /// The value.
    pub value: T,
    /// Its position in the file.
    pub pos: Pos,
}

impl<T: Serialize> Serialize for Spanned<T> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.value.serialize(s)
    }
}

/// A validated workflow.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Workflow {
    /// Name, description, type, selection criteria.
    pub metadata: Metadata,
    /// The retrieval strategy, kept as data: the index crate interprets it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub retrieval_strategy_config: Option<Spanned<Value>>,
    /// When a stage's successors may start (`scheduling: steps | free`; default lock-step).
    #[serde(skip_serializing_if = "is_steps")]
    pub scheduling: Scheduling,
    /// `state`: run state beyond the standard channels (`task_tree`: the iterative task tree).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub state: Vec<String>,
    /// `hooks`: the workflow's own hooks, run in its runs after the configuration's
    /// `[[hooks]]` (docs/conventions.md, "Hooks").
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub hooks: Vec<WorkflowHook>,
    /// Stages in file order; the first one is the entry.
    pub stages: Vec<Stage>,
}

/// An item of a workflow's `hooks:` list: a hook with the keys of a `[[hooks]]` entry of
/// the configuration (but `workflows`), and where it was declared.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct WorkflowHook {
    /// Where it is declared, as problems with it name it: `workflow FILE, hooks[N]`.
    pub source: String,
    /// The hook.
    pub hook: HookConfig,
}

/// Whether `s` is the default, lock-step scheduling (left out of serialised workflows and
/// plans, so a plan stored before the key existed compiles to the same graph).
pub(crate) fn is_steps(s: &Scheduling) -> bool {
    *s == Scheduling::Steps
}

impl Workflow {
    /// The workflow's name.
    pub fn name(&self) -> &str {
        &self.metadata.name
    }

    /// A stage by id or by name.
    pub fn stage(&self, key: &str) -> Option<&Stage> {
        self.stages
            .iter()
            .find(|s| s.stage_id.value.as_str() == key || s.name.value == key)
    }

    /// Whether failed stages go through adaptive retrieval: a `retrieval_strategy_config`
    /// is present and not `enabled: false`.
    pub fn allows_enrichment(&self) -> bool {
        self.retrieval_strategy_config
            .as_ref()
            .is_some_and(|c| c.value.get("enabled").and_then(Value::as_bool) != Some(false))
    }
}

/// `metadata`.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Metadata {
    /// Unique name (what `--workflow` takes).
    pub name: String,
    /// One line for humans and for the orchestrator.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// Free-form version text.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
    /// E.g. `code_implementation`, `text_analysis`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub workflow_type: Option<String>,
    /// What the orchestrator uses as a prior.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub selection_criteria: Option<SelectionCriteria>,
}

/// `metadata.selection_criteria`.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct SelectionCriteria {
    /// Regular expressions matched against the request.
    pub applicable_patterns: Vec<String>,
    /// Agents the workflow always uses.
    pub agents_required: Vec<String>,
    /// Agents of optional stages.
    pub agents_optional: Vec<String>,
}

/// A stage id: an integer or a string in the file, compared as text.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(transparent)]
pub struct StageId(pub String);

impl StageId {
    /// The id's text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for StageId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// Where routing goes.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Target {
    /// Another stage.
    Stage(StageId),
    /// The success terminal.
    Done,
    /// The failure terminal.
    Abort,
}

impl fmt::Display for Target {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Target::Stage(s) => write!(f, "{s}"),
            Target::Done => f.write_str("DONE"),
            Target::Abort => f.write_str("ABORT"),
        }
    }
}

impl Serialize for Target {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

/// `stages[]`.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Stage {
    /// `stage_id` (what routing refers to).
    pub stage_id: Spanned<StageId>,
    /// `name` (also the engine node's id).
    pub name: Spanned<String>,
    /// Optional `description`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// Optional `type` (code_generation, test, security, …).
    #[serde(rename = "type", skip_serializing_if = "Option::is_none")]
    pub stage_type: Option<String>,
    /// `kind` and its keys: what the stage's node does (default: an agent stage).
    #[serde(skip_serializing_if = "StageKind::is_agent")]
    pub kind: Spanned<StageKind>,
    /// `step`: the stage's part in the task tree (`intent`, `milestones`, `expand`,
    /// `research`, `plan`, `implement`, `qa`, `assess`), for workflows with `state:
    /// [task_tree]`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub step: Option<Spanned<String>>,
    /// `produces`: the artifact the stage submits (validated; a gate can await it).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub produces: Option<Spanned<String>>,
    /// The further artifacts of a `produces: [a, b, …]` list.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub also_produces: Vec<Spanned<String>>,
    /// Required stages always run; optional ones run when the orchestrator includes them.
    pub required: bool,
    /// The agents run in parallel in this stage (at least one for agent, review and fan-out
    /// stages: a fan-out's agent is its orchestrator; a collector's or merge's agent merges).
    pub parallel_agents: Vec<AgentSpec>,
    /// How the agents' failures combine.
    pub failure_aggregation: Spanned<Aggregation>,
    /// Tells the orchestrator when to include an optional stage.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reasoning_guidance: Option<String>,
    /// Tells the retrieval agent what context the stage needs.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub retrieval_guidance: Option<String>,
    /// Success/failure routing.
    pub routing: Routing,
    /// `failure_criteria`, kept as data (e.g. `agent_defined: true`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub failure_criteria: Option<Value>,
    /// Where the stage starts in the file.
    #[serde(skip)]
    pub pos: Pos,
}

impl Stage {
    /// Every artifact kind the stage produces (`produces`, as one or a list).
    pub fn produces_kinds(&self) -> impl Iterator<Item = &str> {
        self.produces
            .iter()
            .chain(&self.also_produces)
            .map(|p| p.value.as_str())
    }
}

/// `kind`: what a stage's node does. References to other stages are stage ids as written.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum StageKind {
    /// The stage's agents run in parallel (the default).
    #[default]
    Agent,
    /// An artifact awaits the user's approval: approve → `next_stage_on_success`; request
    /// changes → `producer` again with the feedback.
    Gate {
        /// `artifact`: the kind awaited.
        artifact: Spanned<String>,
        /// `producer`: the stage that writes it (default: the nearest earlier stage that
        /// `produces` it); filled in by validation.
        producer: Option<Spanned<StageId>>,
    },
    /// An agent reviews another stage's work: APPROVED → next; NEEDS_REVISION → `reviews`
    /// again with the feedback; HUMAN_REVIEW_REQUESTED → waits for a person.
    Review {
        /// `reviews`: the stage whose work is reviewed.
        reviews: Spanned<StageId>,
    },
    /// An orchestrator agent's items become work nodes made from `template`.
    FanOut {
        /// `template`: the agent of each work node.
        template: AgentSpec,
        /// `max_items`: the most work nodes one activation may create.
        max_items: u32,
        /// `items_from`: the items are the entries of this artifact's latest version (the
        /// `tickets` of `tickets.md`) instead of an orchestrator agent's result.
        items_from: Option<Spanned<String>>,
        /// `review`: each item's work is then reviewed by this agent (its own node).
        review: Option<AgentSpec>,
        /// `merge`: each item's work reaches the run branch only through a merge node of its
        /// own after the work (and its review); this agent resolves conflicts.
        merge: Option<AgentSpec>,
    },
    /// Runs once every non-pruned work node of `collects` is final, applying the stage's
    /// `parallel_config.failure_aggregation`; its agent (if any) merges their results.
    Collector {
        /// `collects`: the fan-out stage.
        collects: Spanned<StageId>,
    },
    /// The work (branches) of `merges` reaches the run branch; conflicts go to the stage's
    /// agent (the merge agent).
    Merge {
        /// `merges`: the stage whose work is merged.
        merges: Spanned<StageId>,
    },
    /// A built-in function ([`DETERMINISTIC_FUNCTIONS`]) with `args`.
    Deterministic {
        /// `function`.
        function: Spanned<String>,
        /// `args`, as written.
        args: Value,
    },
}

impl StageKind {
    /// The `kind:` names.
    pub const NAMES: [&'static str; 7] = [
        "agent",
        "gate",
        "review",
        "fan_out",
        "collector",
        "merge",
        "deterministic",
    ];

    /// The `kind:` name.
    pub fn name(&self) -> &'static str {
        match self {
            StageKind::Agent => "agent",
            StageKind::Gate { .. } => "gate",
            StageKind::Review { .. } => "review",
            StageKind::FanOut { .. } => "fan_out",
            StageKind::Collector { .. } => "collector",
            StageKind::Merge { .. } => "merge",
            StageKind::Deterministic { .. } => "deterministic",
        }
    }

    /// Whether this is the default kind (left out of serialised workflows).
    pub fn is_agent(kind: &Spanned<StageKind>) -> bool {
        kind.value == StageKind::Agent
    }

    /// The other stage this kind refers to, if any, and the key naming it.
    pub fn reference(&self) -> Option<(&'static str, &Spanned<StageId>)> {
        match self {
            StageKind::Gate {
                producer: Some(p), ..
            } => Some(("producer", p)),
            StageKind::Review { reviews } => Some(("reviews", reviews)),
            StageKind::Collector { collects } => Some(("collects", collects)),
            StageKind::Merge { merges } => Some(("merges", merges)),
            _ => None,
        }
    }
}

/// The functions a `deterministic` stage can run.
pub const DETERMINISTIC_FUNCTIONS: [&str; 4] = [
    "run_tests",
    "validate_artifact",
    "prioritize",
    "validate_task",
];

/// The steps of the task tree an agent stage may take (`step:`).
pub const TASK_STEPS: [&str; 8] = [
    "intent",
    "milestones",
    "expand",
    "research",
    "plan",
    "implement",
    "qa",
    "assess",
];

/// The artifact kinds stages can produce and gates can await (`staged_review`'s cards and
/// plan, `three_phase`'s markdown files, and a review's summary).
pub const ARTIFACT_KINDS: [&str; 8] = [
    "scope_card",
    "research_card",
    "plan",
    "review",
    "discovery",
    "plan_md",
    "spec",
    "tickets",
];

/// `parallel_agents[]`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct AgentSpec {
    /// The agent role, e.g. `code_agent`.
    pub agent: String,
    /// MCP tools the agent may call.
    pub mcp_tools: Vec<String>,
}

/// `parallel_config.failure_aggregation` (also spelled any-fails, all-fail, majority-fail).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Aggregation {
    /// The stage fails if any agent failed (the default).
    AnyFails,
    /// The stage fails only if every agent failed.
    AllFail,
    /// The stage fails if more than half of the agents failed.
    MajorityFail,
    /// The stage succeeds if at least `k` agents succeeded (`quorum(k)`).
    Quorum(u32),
}

impl Aggregation {
    /// Accepted spellings, canonical first for each policy.
    pub const NAMES: [(&'static str, Aggregation); 9] = [
        ("any_fails", Aggregation::AnyFails),
        ("any-fails", Aggregation::AnyFails),
        ("any", Aggregation::AnyFails),
        ("all_fail", Aggregation::AllFail),
        ("all-fail", Aggregation::AllFail),
        ("all", Aggregation::AllFail),
        ("majority_fail", Aggregation::MajorityFail),
        ("majority-fail", Aggregation::MajorityFail),
        ("majority", Aggregation::MajorityFail),
    ];

    /// The canonical name (`quorum(k)` for a quorum).
    pub fn name(self) -> String {
        match self {
            Aggregation::AnyFails => "any_fails".into(),
            Aggregation::AllFail => "all_fail".into(),
            Aggregation::MajorityFail => "majority_fail".into(),
            Aggregation::Quorum(k) => format!("quorum({k})"),
        }
    }

    /// Parses one of [`Aggregation::NAMES`] or `quorum(k)` with `k ≥ 1`.
    pub fn parse(text: &str) -> Option<Self> {
        if let Some(k) = text
            .strip_prefix("quorum(")
            .and_then(|r| r.strip_suffix(')'))
        {
            return k
                .trim()
                .parse()
                .ok()
                .filter(|k| *k >= 1)
                .map(Aggregation::Quorum);
        }
        Self::NAMES
            .iter()
            .find(|(n, _)| *n == text)
            .map(|(_, a)| *a)
    }

    /// The engine's collector policy.
    pub fn policy(self) -> FailurePolicy {
        match self {
            Aggregation::AnyFails => FailurePolicy::AnyFails,
            Aggregation::AllFail => FailurePolicy::AllFail,
            Aggregation::MajorityFail => FailurePolicy::MajorityFail,
            Aggregation::Quorum(k) => FailurePolicy::Quorum(k),
        }
    }
}

/// `routing`.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Routing {
    /// After a success (default: the next stage in the file, or DONE after the last).
    pub next_stage_on_success: Spanned<Target>,
    /// After a failure (default: ABORT). DONE and ABORT are taken at once; a stage is
    /// reached through adaptive retrieval while the stage's enrichments last.
    pub next_stage_on_failure: Spanned<Target>,
    /// How many times a failure may be routed back to a stage, after which the next failure
    /// goes to ABORT; absent means unlimited, which validation refuses for stages in a loop.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_attempts: Option<u32>,
    /// `outcomes`: where a result's `outcome` leads (`{gap: planning, no_gap: assess}`),
    /// before success / failure routing applies.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub outcomes: BTreeMap<String, Spanned<Target>>,
    /// Where `routing` is (or the stage, when it is absent).
    #[serde(skip)]
    pub pos: Pos,
    /// The keys written in the file (the others are defaults, which some kinds change).
    #[serde(skip)]
    pub given: Vec<&'static str>,
}
