//! From a positioned YAML tree to a [`Workflow`], collecting every problem instead of stopping
//! at the first.

use std::collections::BTreeMap;

use trellis_graph::{Scheduling, nearest};

use crate::error::Problem;
use crate::schema::{
    AgentSpec, Aggregation, Metadata, Routing, SelectionCriteria, Spanned, Stage, StageId,
    StageKind, TASK_STEPS, Target, Workflow,
};
use crate::yaml::{Node, Pos, Yaml};

mod hooks;

const TOP: &[&str] = &[
    "hooks",
    "metadata",
    "retrieval_strategy_config",
    "scheduling",
    "state",
    "stages",
];
const METADATA: &[&str] = &[
    "name",
    "description",
    "version",
    "workflow_type",
    "selection_criteria",
];
const SELECTION: &[&str] = &["applicable_patterns", "agents_required", "agents_optional"];
const STAGE: &[&str] = &[
    "stage_id",
    "name",
    "description",
    "type",
    "required",
    "parallel_agents",
    "parallel_config",
    "reasoning_guidance",
    "retrieval_guidance",
    "routing",
    "failure_criteria",
    "kind",
    "step",
    "produces",
    "artifact",
    "producer",
    "reviews",
    "template",
    "max_items",
    "items_from",
    "review",
    "merge",
    "collects",
    "merges",
    "function",
    "args",
];
/// The keys each kind adds to a stage (any other kind's keys are refused).
const KIND_KEYS: &[(&str, &[&str])] = &[
    ("agent", &[]),
    ("gate", &["artifact", "producer"]),
    ("review", &["reviews"]),
    (
        "fan_out",
        &["template", "max_items", "items_from", "review", "merge"],
    ),
    ("collector", &["collects"]),
    ("merge", &["merges"]),
    ("deterministic", &["function", "args"]),
];
/// Work nodes one fan-out activation may create unless `max_items` says otherwise.
pub const DEFAULT_MAX_ITEMS: u32 = 16;
const AGENT: &[&str] = &["agent", "mcp_tools"];
const PARALLEL: &[&str] = &["failure_aggregation"];
const ROUTING: &[&str] = &[
    "next_stage_on_success",
    "next_stage_on_failure",
    "max_attempts",
    "outcomes",
];
/// State a workflow may keep beyond the compiled graph's standard channels
/// (`state: [task_tree]`).
pub const STATE_KINDS: [&str; 1] = ["task_tree"];

/// Collects problems of one file.
pub(crate) struct Decoder<'a> {
    pub(crate) file: &'a str,
    pub(crate) problems: Vec<Problem>,
}

/// A mapping whose keys were checked.
struct Map<'n>(&'n [(Node, Node)]);

impl<'n> Map<'n> {
    fn get(&self, key: &str) -> Option<&'n Node> {
        self.0.iter().find(|(k, _)| k.text == key).map(|(_, v)| v)
    }

    /// Where `key` itself is written (problems about a block point at its key).
    fn key_pos(&self, key: &str) -> Option<Pos> {
        self.0
            .iter()
            .find(|(k, _)| k.text == key)
            .map(|(k, _)| k.pos)
    }
}

impl<'a> Decoder<'a> {
    pub(crate) fn new(file: &'a str) -> Self {
        Self {
            file,
            problems: Vec::new(),
        }
    }

    pub(crate) fn problem(&mut self, pos: Pos, message: impl Into<String>, fix: Option<String>) {
        self.problems.push(Problem {
            file: self.file.to_owned(),
            line: pos.line,
            column: pos.column,
            message: message.into(),
            fix,
        });
    }

    /// A mapping with only `allowed` keys (unknown keys and duplicates are reported).
    fn map<'n>(&mut self, node: &'n Node, what: &str, allowed: &[&str]) -> Option<Map<'n>> {
        let Some(entries) = node.as_map() else {
            self.problem(
                node.pos,
                format!("{what} must be a mapping, found {}", node.kind()),
                Some(format!("write {what} as `key: value` lines")),
            );
            return None;
        };
        for (i, (k, _)) in entries.iter().enumerate() {
            if !allowed.contains(&k.text.as_str()) {
                let fix = match nearest(&k.text, allowed.iter().copied()) {
                    Some(n) => format!("did you mean `{n}`?"),
                    None => format!("valid keys here: {}", allowed.join(", ")),
                };
                self.problem(
                    k.pos,
                    format!("unknown key `{}` in {what}", k.text),
                    Some(fix),
                );
            } else if let Some((first, _)) = entries[..i].iter().find(|(f, _)| f.text == k.text) {
                self.problem(
                    k.pos,
                    format!(
                        "key `{}` appears twice in {what} (first at line {})",
                        k.text, first.pos.line
                    ),
                    Some("keep one of them".into()),
                );
            }
        }
        Some(Map(entries))
    }

    fn required<'n>(&mut self, map: &Map<'n>, at: Pos, key: &str, what: &str) -> Option<&'n Node> {
        let found = map.get(key);
        if found.is_none() {
            self.problem(
                at,
                format!("{what} has no `{key}`"),
                Some(format!("add `{key}:`")),
            );
        }
        found
    }

    fn string(&mut self, node: &Node, what: &str) -> Option<String> {
        match &node.value {
            Yaml::Str(s) => Some(s.clone()),
            Yaml::Int(_) | Yaml::Float(_) | Yaml::Bool(_) => Some(node.text.clone()),
            _ => {
                self.problem(
                    node.pos,
                    format!("{what} must be text, found {}", node.kind()),
                    None,
                );
                None
            }
        }
    }

    fn opt_string(&mut self, map: &Map<'_>, key: &str, what: &str) -> Option<String> {
        let node = map.get(key)?;
        if node.value == Yaml::Null {
            return None;
        }
        self.string(node, &format!("{what}.{key}"))
    }

    fn strings(&mut self, map: &Map<'_>, key: &str, what: &str) -> Vec<String> {
        let Some(node) = map.get(key) else {
            return Vec::new();
        };
        match &node.value {
            Yaml::Null => Vec::new(),
            Yaml::Seq(items) => items
                .iter()
                .filter_map(|i| self.string(i, &format!("an item of {what}.{key}")))
                .collect(),
            _ => {
                self.problem(
                    node.pos,
                    format!("{what}.{key} must be a list, found {}", node.kind()),
                    Some(format!("write `{key}: [a, b]`")),
                );
                Vec::new()
            }
        }
    }

    /// Decodes a whole document.
    pub(crate) fn workflow(&mut self, root: &Node) -> Option<Workflow> {
        let top = self.map(root, "the workflow", TOP)?;
        let metadata = self
            .required(&top, root.pos, "metadata", "the workflow")
            .and_then(|m| self.metadata(m));
        let retrieval_strategy_config = top.get("retrieval_strategy_config").map(|n| {
            if n.as_map().is_none() && n.value != Yaml::Null {
                self.problem(
                    n.pos,
                    format!(
                        "retrieval_strategy_config must be a mapping, found {}",
                        n.kind()
                    ),
                    None,
                );
            }
            Spanned {
                value: n.to_json(),
                pos: top.key_pos("retrieval_strategy_config").unwrap_or(n.pos),
            }
        });
        let scheduling = top
            .get("scheduling")
            .map_or(Scheduling::Steps, |n| self.scheduling(n));
        let state = self.strings(&top, "state", "the workflow");
        if let Some(n) = top.get("state") {
            for name in &state {
                if !STATE_KINDS.contains(&name.as_str()) {
                    let fix = match nearest(name, STATE_KINDS.into_iter()) {
                        Some(k) => format!("did you mean `{k}`? ({})", STATE_KINDS.join(", ")),
                        None => format!("state kinds: {}", STATE_KINDS.join(", ")),
                    };
                    self.problem(n.pos, format!("unknown state `{name}`"), Some(fix));
                }
            }
        }
        let hooks = top.get("hooks").map(|n| self.hooks(n)).unwrap_or_default();
        let stages = match self.required(&top, root.pos, "stages", "the workflow") {
            Some(Node {
                value: Yaml::Seq(items),
                pos,
                ..
            }) => {
                if items.is_empty() {
                    self.problem(
                        *pos,
                        "`stages` is empty",
                        Some("add at least one stage".into()),
                    );
                }
                let ids = default_ids(items);
                (0..items.len())
                    .filter_map(|i| self.stage(&items[i], &ids, i))
                    .collect()
            }
            Some(other) => {
                self.problem(
                    other.pos,
                    format!("`stages` must be a list, found {}", other.kind()),
                    Some("write each stage as a `- stage_id: …` item".into()),
                );
                Vec::new()
            }
            None => Vec::new(),
        };
        Some(Workflow {
            metadata: metadata?,
            retrieval_strategy_config,
            scheduling,
            state,
            hooks,
            stages,
        })
    }

    /// `scheduling: steps | free`.
    fn scheduling(&mut self, n: &Node) -> Scheduling {
        let Some(text) = self.string(n, "scheduling") else {
            return Scheduling::Steps;
        };
        match text.trim() {
            "steps" => Scheduling::Steps,
            "free" => Scheduling::Free,
            other => {
                let fix = match nearest(other, ["steps", "free"].into_iter()) {
                    Some(s) => format!("did you mean `{s}`? (steps, free)"),
                    None => "use `steps` (lock-step, the default) or `free`".into(),
                };
                self.problem(n.pos, format!("unknown scheduling `{other}`"), Some(fix));
                Scheduling::Steps
            }
        }
    }

    fn metadata(&mut self, node: &Node) -> Option<Metadata> {
        let m = self.map(node, "metadata", METADATA)?;
        let name = self
            .required(&m, node.pos, "name", "metadata")
            .and_then(|n| self.string(n, "metadata.name"));
        if let Some(n) = &name
            && (n.is_empty() || n.contains(char::is_whitespace))
            && let Some(at) = m.get("name")
        {
            self.problem(
                at.pos,
                format!("workflow name `{n}` must be one word"),
                Some("use letters, digits and underscores".into()),
            );
        }
        let selection_criteria = m.get("selection_criteria").and_then(|s| {
            let c = self.map(s, "metadata.selection_criteria", SELECTION)?;
            let what = "selection_criteria";
            Some(SelectionCriteria {
                applicable_patterns: self.strings(&c, "applicable_patterns", what),
                agents_required: self.strings(&c, "agents_required", what),
                agents_optional: self.strings(&c, "agents_optional", what),
            })
        });
        Some(Metadata {
            description: self.opt_string(&m, "description", "metadata"),
            version: self.opt_string(&m, "version", "metadata"),
            workflow_type: self.opt_string(&m, "workflow_type", "metadata"),
            selection_criteria,
            name: name?,
        })
    }

    fn stage(&mut self, node: &Node, ids: &[Option<StageId>], index: usize) -> Option<Stage> {
        let what = format!("stage #{}", index + 1);
        let m = self.map(node, &what, STAGE)?;
        let stage_id = self
            .required(&m, node.pos, "stage_id", &what)
            .and_then(|n| {
                let id = self.string(n, "stage_id")?;
                Some(Spanned {
                    value: StageId(id),
                    pos: n.pos,
                })
            });
        let name = self.required(&m, node.pos, "name", &what).and_then(|n| {
            Some(Spanned {
                value: self.string(n, "name")?,
                pos: n.pos,
            })
        });
        let required = self.required_flag(&m);
        let (kind, kind_name) = self.kind(&m, node.pos, &what);
        let parallel_agents = self.parallel_agents(&m, node.pos, &what, &kind_name);
        let failure_aggregation = self.aggregation(m.get("parallel_config"), node.pos);
        let next = ids
            .get(index + 1)
            .map(|id| id.clone().map_or(Target::Done, Target::Stage))
            .unwrap_or(Target::Done);
        let routing_at = m.key_pos("routing").unwrap_or(node.pos);
        let routing = self.routing(m.get("routing"), routing_at, next);
        let (produces, also_produces) = self.produces(&m);
        let step = self.step(&m);
        Some(Stage {
            step,
            description: self.opt_string(&m, "description", &what),
            stage_type: self.opt_string(&m, "type", &what),
            kind,
            produces,
            also_produces,
            required,
            parallel_agents,
            failure_aggregation,
            reasoning_guidance: self.opt_string(&m, "reasoning_guidance", &what),
            retrieval_guidance: self.opt_string(&m, "retrieval_guidance", &what),
            routing,
            failure_criteria: m.get("failure_criteria").map(Node::to_json),
            pos: node.pos,
            stage_id: stage_id?,
            name: name?,
        })
    }

    /// `required` (default: true).
    fn required_flag(&mut self, m: &Map<'_>) -> bool {
        match m.get("required").map(|n| (n, &n.value)) {
            None => true,
            Some((_, Yaml::Bool(b))) => *b,
            Some((n, _)) => {
                self.problem(
                    n.pos,
                    format!("`required` must be true or false, found {}", n.kind()),
                    None,
                );
                true
            }
        }
    }

    /// `parallel_agents`, which the kind as written requires, allows or refuses.
    fn parallel_agents(
        &mut self,
        m: &Map<'_>,
        stage: Pos,
        what: &str,
        kind_name: &str,
    ) -> Vec<AgentSpec> {
        // Decided by the kind as written, so a kind missing a key reports only that.
        // A fan-out whose items come from an artifact (`items_from`) has no orchestrator.
        let needs_agents = matches!(kind_name, "agent" | "review")
            || (kind_name == "fan_out" && m.get("items_from").is_none());
        let takes_agents = !matches!(kind_name, "gate" | "deterministic");
        if !takes_agents && let Some(at) = m.key_pos("parallel_agents") {
            self.problem(
                at,
                format!("a `{kind_name}` stage runs no agent, so it takes no `parallel_agents`"),
                Some("remove `parallel_agents`".into()),
            );
        }
        let agents_node = if needs_agents {
            self.required(m, stage, "parallel_agents", what)
        } else {
            m.get("parallel_agents").filter(|_| takes_agents)
        };
        match agents_node {
            Some(Node {
                value: Yaml::Seq(items),
                pos,
                ..
            }) => {
                if items.is_empty() {
                    self.problem(
                        *pos,
                        "`parallel_agents` is empty",
                        Some("add `- agent: <role>`".into()),
                    );
                }
                items.iter().filter_map(|a| self.agent(a)).collect()
            }
            Some(other) => {
                self.problem(
                    other.pos,
                    format!("`parallel_agents` must be a list, found {}", other.kind()),
                    Some("write `- agent: <role>` items".into()),
                );
                Vec::new()
            }
            None => Vec::new(),
        }
    }

    /// `produces: kind` or `produces: [kind, …]`: the stage's main artifact (the first) and
    /// the others.
    fn produces(&mut self, m: &Map<'_>) -> (Option<Spanned<String>>, Vec<Spanned<String>>) {
        let mut produced: Vec<Spanned<String>> = match m.get("produces") {
            Some(Node {
                value: Yaml::Seq(items),
                ..
            }) => items
                .iter()
                .filter_map(|n| {
                    let value = self.string(n, "an item of produces")?;
                    Some(Spanned { value, pos: n.pos })
                })
                .collect(),
            Some(n) => self
                .string(n, "produces")
                .map(|value| Spanned { value, pos: n.pos })
                .into_iter()
                .collect(),
            None => Vec::new(),
        };
        let produces = (!produced.is_empty()).then(|| produced.remove(0));
        (produces, produced)
    }

    /// `step`: the stage's task tree step, one of [`TASK_STEPS`].
    fn step(&mut self, m: &Map<'_>) -> Option<Spanned<String>> {
        m.get("step").and_then(|n| {
            let value = self.string(n, "step")?;
            if !TASK_STEPS.contains(&value.as_str()) {
                let fix = match nearest(&value, TASK_STEPS.into_iter()) {
                    Some(k) => format!("did you mean `{k}`? ({})", TASK_STEPS.join(", ")),
                    None => format!("steps: {}", TASK_STEPS.join(", ")),
                };
                self.problem(
                    n.pos,
                    format!("unknown task tree step `{value}`"),
                    Some(fix),
                );
            }
            Some(Spanned { value, pos: n.pos })
        })
    }

    /// `kind` and the keys that go with it.
    fn kind(&mut self, m: &Map<'_>, stage: Pos, what: &str) -> (Spanned<StageKind>, String) {
        let (name, pos) = match m.get("kind") {
            None => ("agent".to_owned(), stage),
            Some(n) => match self.string(n, "kind") {
                Some(text) if StageKind::NAMES.contains(&text.as_str()) => (text, n.pos),
                Some(text) => {
                    let fix = match nearest(&text, StageKind::NAMES.iter().copied()) {
                        Some(k) => format!("did you mean `{k}`? ({})", StageKind::NAMES.join(", ")),
                        None => format!("use one of {}", StageKind::NAMES.join(", ")),
                    };
                    self.problem(n.pos, format!("unknown stage kind `{text}`"), Some(fix));
                    let unknown = Spanned {
                        value: StageKind::Agent,
                        pos: n.pos,
                    };
                    return (unknown, text);
                }
                None => ("agent".to_owned(), n.pos),
            },
        };
        for (kind, keys) in KIND_KEYS {
            if *kind == name {
                continue;
            }
            for key in *keys {
                if let Some(at) = m.key_pos(key) {
                    self.problem(
                        at,
                        format!("`{key}` belongs to `{kind}` stages; this stage is `{name}`"),
                        Some(format!("remove `{key}`, or write `kind: {kind}`")),
                    );
                }
            }
        }
        let reference = |d: &mut Self, key: &str| -> Option<Spanned<StageId>> {
            let n = d.required(m, stage, key, what)?;
            let id = d.string(n, key)?;
            Some(Spanned {
                value: StageId(id),
                pos: n.pos,
            })
        };
        let text = |d: &mut Self, key: &str| -> Option<Spanned<String>> {
            let n = d.required(m, stage, key, what)?;
            let value = d.string(n, key)?;
            Some(Spanned { value, pos: n.pos })
        };
        let value = match name.as_str() {
            "gate" => {
                let producer = m.get("producer").and_then(|n| {
                    let id = self.string(n, "producer")?;
                    Some(Spanned {
                        value: StageId(id),
                        pos: n.pos,
                    })
                });
                match text(self, "artifact") {
                    Some(artifact) => StageKind::Gate { artifact, producer },
                    None => StageKind::Agent,
                }
            }
            "review" => match reference(self, "reviews") {
                Some(reviews) => StageKind::Review { reviews },
                None => StageKind::Agent,
            },
            "fan_out" => {
                let template = self
                    .required(m, stage, "template", what)
                    .and_then(|n| self.agent(n));
                let items_from = m.get("items_from").and_then(|n| {
                    let value = self.string(n, "items_from")?;
                    Some(Spanned { value, pos: n.pos })
                });
                let review = m.get("review").and_then(|n| self.agent(n));
                let merge = m.get("merge").and_then(|n| self.agent(n));
                let max_items = match m.get("max_items") {
                    None => DEFAULT_MAX_ITEMS,
                    Some(n) => match n.value {
                        Yaml::Int(i) if (1..=1000).contains(&i) => i as u32,
                        _ => {
                            self.problem(
                                n.pos,
                                format!(
                                    "max_items must be a whole number from 1 to 1000, found `{}`",
                                    n.text
                                ),
                                Some("e.g. `max_items: 8`".into()),
                            );
                            DEFAULT_MAX_ITEMS
                        }
                    },
                };
                match template {
                    Some(template) => StageKind::FanOut {
                        template,
                        max_items,
                        items_from,
                        review,
                        merge,
                    },
                    None => StageKind::Agent,
                }
            }
            "collector" => match reference(self, "collects") {
                Some(collects) => StageKind::Collector { collects },
                None => StageKind::Agent,
            },
            "merge" => match reference(self, "merges") {
                Some(merges) => StageKind::Merge { merges },
                None => StageKind::Agent,
            },
            "deterministic" => match text(self, "function") {
                Some(function) => StageKind::Deterministic {
                    function,
                    args: m.get("args").map_or(serde_json::Value::Null, Node::to_json),
                },
                None => StageKind::Agent,
            },
            _ => StageKind::Agent,
        };
        (Spanned { value, pos }, name)
    }

    fn agent(&mut self, node: &Node) -> Option<AgentSpec> {
        let m = self.map(node, "a parallel agent", AGENT)?;
        let agent = self
            .required(&m, node.pos, "agent", "a parallel agent")
            .and_then(|n| self.string(n, "agent"))?;
        Some(AgentSpec {
            mcp_tools: self.strings(&m, "mcp_tools", "a parallel agent"),
            agent,
        })
    }

    fn aggregation(&mut self, node: Option<&Node>, stage: Pos) -> Spanned<Aggregation> {
        let default = Spanned {
            value: Aggregation::AnyFails,
            pos: node.map_or(stage, |n| n.pos),
        };
        let Some(node) = node else { return default };
        let Some(m) = self.map(node, "parallel_config", PARALLEL) else {
            return default;
        };
        let Some(n) = m.get("failure_aggregation") else {
            return default;
        };
        let Some(text) = self.string(n, "failure_aggregation") else {
            return default;
        };
        match Aggregation::parse(&text) {
            Some(value) => Spanned { value, pos: n.pos },
            None => {
                let names = Aggregation::NAMES.iter().map(|(n, _)| *n);
                let fix = match nearest(&text, names) {
                    Some(s) => format!(
                        "did you mean `{s}`? (any_fails, all_fail, majority_fail, quorum(k))"
                    ),
                    None => "use any_fails, all_fail, majority_fail or quorum(k) with k ≥ 1".into(),
                };
                self.problem(
                    n.pos,
                    format!("unknown failure_aggregation `{text}`"),
                    Some(fix),
                );
                default
            }
        }
    }

    /// `at` is the `routing:` key (or the stage, when absent).
    fn routing(&mut self, node: Option<&Node>, at: Pos, next: Target) -> Routing {
        let mut routing = Routing {
            next_stage_on_success: Spanned {
                value: next,
                pos: at,
            },
            next_stage_on_failure: Spanned {
                value: Target::Abort,
                pos: at,
            },
            max_attempts: None,
            outcomes: BTreeMap::new(),
            pos: at,
            given: Vec::new(),
        };
        let Some(m) = node.and_then(|n| self.map(n, "routing", ROUTING)) else {
            return routing;
        };
        if let Some(n) = m.get("next_stage_on_success")
            && let Some(t) = self.target(n)
        {
            routing.next_stage_on_success = t;
            routing.given.push("next_stage_on_success");
        }
        if let Some(n) = m.get("next_stage_on_failure")
            && let Some(t) = self.target(n)
        {
            routing.next_stage_on_failure = t;
            routing.given.push("next_stage_on_failure");
        }
        if let Some(n) = m.get("outcomes") {
            match n.as_map() {
                Some(entries) => {
                    for (key, value) in entries {
                        if let Some(t) = self.target(value) {
                            routing.outcomes.insert(key.text.clone(), t);
                        }
                    }
                }
                None => self.problem(
                    n.pos,
                    format!("routing.outcomes must be a map, found {}", n.kind()),
                    Some("write `outcomes: {gap: planning, no_gap: assess}`".into()),
                ),
            }
        }
        if let Some(n) = m.get("max_attempts") {
            match n.value {
                Yaml::Int(i) if i >= 1 && i <= i64::from(u32::MAX) => {
                    routing.max_attempts = Some(i as u32);
                }
                _ => self.problem(
                    n.pos,
                    format!(
                        "max_attempts must be a whole number ≥ 1, found `{}`",
                        n.text
                    ),
                    Some("e.g. `max_attempts: 3`".into()),
                ),
            }
        }
        routing
    }

    fn target(&mut self, node: &Node) -> Option<Spanned<Target>> {
        let text = self.string(node, "a routing target")?;
        let value = match text.as_str() {
            "DONE" => Target::Done,
            "ABORT" => Target::Abort,
            _ => Target::Stage(StageId(text)),
        };
        Some(Spanned {
            value,
            pos: node.pos,
        })
    }
}

/// The id of each stage as written (for the default success route to the next stage).
fn default_ids(items: &[Node]) -> Vec<Option<StageId>> {
    items
        .iter()
        .map(|s| {
            let m = s.as_map()?;
            let (_, v) = m.iter().find(|(k, _)| k.text == "stage_id")?;
            v.is_scalar().then(|| StageId(v.text.clone()))
        })
        .collect()
}
