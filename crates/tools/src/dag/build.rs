//! The DAG builder (docs/tools.md, "Tool DAGs"): from a list of tool invocations and the tools'
//! JSON Schemas, the data dependencies between them, the order they must keep, and the
//! layers they run in.
//!
//! Where an edge comes from:
//! - **References**: an argument string `${step}` or `${step.path.to.field}` (the whole
//!   string: the value itself; inside a longer string: its text) makes the step depend on
//!   the one it names. References may point anywhere in the plan; a cycle among them is
//!   refused, naming it.
//! - **Schemas**: a *required* parameter the invocation does not give is filled from an
//!   earlier step's output property of the same name (compared without case, `_` and `-`)
//!   and a compatible type; else, when an earlier step was *given* an argument of that name
//!   and type (`repo_path`, `path`), it is carried over (no dependency: the value is known);
//!   else from an output of a compatible type (`string → string`, `object → object`, an
//!   integer for a number). Ambiguous matches are conservative: every earlier step that
//!   could provide the value becomes a dependency; the value is bound from a name match,
//!   else from the nearest earlier candidate, and the binding says it was ambiguous (so does
//!   a step with several fitting outputs). Inferred edges always point from an earlier step
//!   to a later one (the plan's order says which way data flows), so schema inference alone
//!   never makes a cycle.
//! - **Explicit** `depends_on` lists.
//! - **Order**: a step whose tool is not parallel-safe (it changes things, or may ask the
//!   user) keeps its place: it depends on every earlier step and every later step depends
//!   on it, so it runs alone in its layer.

use std::collections::{BTreeMap, BTreeSet};

use petgraph::algo::{tarjan_scc, toposort};
use petgraph::graph::{DiGraph, NodeIndex};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::refs;
use super::schema::{self, JsonType, Port, TEXT_OUTPUT};
use crate::spec::ToolSpec;

/// One tool invocation of a plan.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Step {
    /// A name for the step, unique in the plan (`read`, `parse`); references use it.
    pub id: String,
    /// The tool to call.
    pub tool: String,
    /// Its arguments. A string `${other}` or `${other.field}` is replaced by that step's
    /// output (or one of its fields) before the call; a required parameter left out is
    /// filled from an earlier step's output of the same name or type.
    #[serde(default)]
    pub args: Value,
    /// Steps this one must run after, besides those its arguments refer to.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub depends_on: Vec<String>,
}

/// What the builder knows about tools.
pub trait Catalog {
    /// The tool's description and schemas, if it exists.
    fn spec(&self, tool: &str) -> Option<ToolSpec>;
    /// Whether calls of the tool may run at the same time as others: it only reads and
    /// never needs the user.
    fn parallel_safe(&self, tool: &str) -> bool;
}

/// Why an edge exists.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum EdgeKind {
    /// An argument refers to the step (`${step.field}`).
    Reference,
    /// A required parameter is filled from the step's output (schema matching).
    Schema,
    /// The plan lists it in `depends_on`.
    Explicit,
    /// One of the two steps is not parallel-safe, so they keep the plan's order.
    Order,
}

/// A dependency: `to` runs after `from`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct DagEdge {
    /// The step that runs first.
    pub from: String,
    /// The step that waits for it.
    pub to: String,
    /// Why.
    pub kind: EdgeKind,
    /// For data edges, the flow: `output.content → input.jsonString`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub data_path: Option<String>,
}

/// A parameter filled from another step's output.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Binding {
    /// The parameter.
    pub param: String,
    /// The step whose output fills it.
    pub from: String,
    /// The output property.
    pub output: String,
    /// Whether other outputs or steps could have filled it too.
    pub ambiguous: bool,
}

/// One step of a built DAG.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct DagNode {
    /// The step's id.
    pub id: String,
    /// The tool.
    pub tool: String,
    /// The arguments as given (references are resolved when it runs).
    pub args: Value,
    /// The steps it waits for, in plan order.
    pub dependencies: Vec<String>,
    /// Parameters filled from other steps' outputs by schema matching.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub bindings: Vec<Binding>,
    /// Parameters carried over from an earlier step's arguments (`repo_path from status`);
    /// they are already in `args`.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub carried: Vec<String>,
    /// Its layer (0 = no dependencies).
    pub layer: usize,
    /// Whether it may run beside other steps of its layer.
    pub parallel: bool,
}

/// A plan's DAG: nodes in plan order, edges, and the layers (node indices) in run order.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Dag {
    /// The steps.
    pub nodes: Vec<DagNode>,
    /// The dependencies.
    pub edges: Vec<DagEdge>,
    /// Node indices per layer; the steps of a layer only depend on earlier layers.
    pub layers: Vec<Vec<usize>>,
}

/// Why a plan has no DAG.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum DagError {
    /// The plan has no steps.
    #[error("the plan has no steps; give at least one {{\"id\", \"tool\", \"args\"}}")]
    Empty,
    /// Two steps share an id.
    #[error("two steps are called `{0}`; give every step its own id")]
    DuplicateId(String),
    /// A step refers to, or depends on, a step the plan does not have.
    #[error(
        "step `{step}` refers to `{missing}`, which is not a step of the plan (steps: {known})"
    )]
    UnknownStep {
        /// The step that refers.
        step: String,
        /// The id it names.
        missing: String,
        /// The plan's step ids.
        known: String,
    },
    /// The dependencies go round in a circle.
    #[error("the steps depend on each other in a cycle: {}; break it by removing one of these references", .0.join(" → "))]
    Cycle(Vec<String>),
}

/// Builds the DAG of `steps`.
pub fn build(steps: &[Step], catalog: &dyn Catalog) -> Result<Dag, DagError> {
    let index = index_steps(steps)?;
    let mut builder = Builder::new(steps, catalog, index);
    for to in 0..steps.len() {
        builder.add_references(to)?;
        builder.add_explicit(to)?;
        builder.infer_from_schemas(to);
    }
    builder.keep_order();
    let layer = builder.layer_of_each()?;
    Ok(builder.into_dag(layer))
}

/// Each step's position by id; refuses an empty plan and a repeated id.
fn index_steps(steps: &[Step]) -> Result<BTreeMap<&str, usize>, DagError> {
    if steps.is_empty() {
        return Err(DagError::Empty);
    }
    let mut index = BTreeMap::new();
    for (i, s) in steps.iter().enumerate() {
        if index.insert(s.id.as_str(), i).is_some() {
            return Err(DagError::DuplicateId(s.id.clone()));
        }
    }
    Ok(index)
}

/// A DAG under construction: the plan, what the catalog says of its tools, and the edges,
/// bindings and arguments found so far (all indexed by step).
struct Builder<'a> {
    steps: &'a [Step],
    index: BTreeMap<&'a str, usize>,
    specs: Vec<Option<ToolSpec>>,
    parallel: Vec<bool>,
    edges: Vec<(usize, usize, DagEdge)>,
    bindings: Vec<Vec<Binding>>,
    args: Vec<Value>,
    carried: Vec<Vec<String>>,
}

impl<'a> Builder<'a> {
    /// Looks up every step's tool; no edges yet.
    fn new(steps: &'a [Step], catalog: &dyn Catalog, index: BTreeMap<&'a str, usize>) -> Self {
        Self {
            steps,
            index,
            specs: steps.iter().map(|s| catalog.spec(&s.tool)).collect(),
            parallel: steps
                .iter()
                .map(|s| catalog.parallel_safe(&s.tool))
                .collect(),
            edges: Vec::new(),
            bindings: vec![Vec::new(); steps.len()],
            args: steps.iter().map(|s| s.args.clone()).collect(),
            carried: vec![Vec::new(); steps.len()],
        }
    }

    /// The plan's step ids, for an error message.
    fn known(&self) -> String {
        self.steps
            .iter()
            .map(|s| s.id.as_str())
            .collect::<Vec<_>>()
            .join(", ")
    }

    /// Adds an edge unless the same one is already there.
    fn add(&mut self, from: usize, to: usize, kind: EdgeKind, data_path: Option<String>) {
        if !self
            .edges
            .iter()
            .any(|(f, t, e)| *f == from && *t == to && e.kind == kind && e.data_path == data_path)
        {
            self.edges.push((
                from,
                to,
                DagEdge {
                    from: self.steps[from].id.clone(),
                    to: self.steps[to].id.clone(),
                    kind,
                    data_path,
                },
            ));
        }
    }

    /// The step that step `to` names as `missing`; refuses an unknown id and a step that
    /// names itself.
    fn named_step(&self, to: usize, missing: String) -> Result<usize, DagError> {
        let step = &self.steps[to];
        let Some(&from) = self.index.get(missing.as_str()) else {
            return Err(DagError::UnknownStep {
                step: step.id.clone(),
                missing,
                known: self.known(),
            });
        };
        if from == to {
            return Err(DagError::Cycle(vec![step.id.clone(), step.id.clone()]));
        }
        Ok(from)
    }

    /// The edges of step `to`'s `${step.field}` references.
    fn add_references(&mut self, to: usize) -> Result<(), DagError> {
        for r in refs::references(&self.steps[to].args) {
            let path = format!("output.{} → input.{}", r.display_path(), r.param);
            let from = self.named_step(to, r.step)?;
            self.add(from, to, EdgeKind::Reference, Some(path));
        }
        Ok(())
    }

    /// The edges of step `to`'s `depends_on` list.
    fn add_explicit(&mut self, to: usize) -> Result<(), DagError> {
        let steps = self.steps;
        for dep in &steps[to].depends_on {
            let from = self.named_step(to, dep.clone())?;
            self.add(from, to, EdgeKind::Explicit, None);
        }
        Ok(())
    }

    /// Fills each required parameter step `to` does not give from earlier steps (when its
    /// tool is known).
    fn infer_from_schemas(&mut self, to: usize) {
        let Some(spec) = &self.specs[to] else { return };
        for param in schema::inputs(&spec.input_schema) {
            if !param.required || given(&self.steps[to].args, &param.name) {
                continue;
            }
            self.fill_param(to, &param);
        }
    }

    /// Fills one missing parameter of step `to`: bound from an earlier output of its name,
    /// else carried over from an earlier step's arguments, else bound from an earlier output
    /// of its type; every candidate provider becomes a dependency.
    fn fill_param(&mut self, to: usize, param: &Port) {
        let mut candidates = providers(param, &self.specs[..to], true);
        if candidates.is_empty() {
            if let Some((from, value)) = given_earlier(param, &self.args[..to]) {
                self.carry_over(to, param, from, value);
                return;
            }
            candidates = providers(param, &self.specs[..to], false);
        }
        let Some(chosen) = choose(&candidates) else {
            return;
        };
        let ambiguous = candidates.len() > 1 || chosen.several;
        for c in &candidates {
            self.add(
                c.step,
                to,
                EdgeKind::Schema,
                Some(format!("output.{} → input.{}", c.output, param.name)),
            );
        }
        self.bindings[to].push(Binding {
            param: param.name.clone(),
            from: self.steps[chosen.step].id.clone(),
            output: chosen.output.clone(),
            ambiguous,
        });
    }

    /// Puts `value`, given to step `from`, into step `to`'s arguments as `param`.
    fn carry_over(&mut self, to: usize, param: &Port, from: usize, value: Value) {
        let args = &mut self.args[to];
        if let Value::Object(m) = args {
            m.insert(param.name.clone(), value);
        } else if args.is_null() {
            *args = Value::Object([(param.name.clone(), value)].into_iter().collect());
        }
        self.carried[to].push(format!("{} from {}", param.name, self.steps[from].id));
    }

    /// Makes every step that is not parallel-safe keep its place in the plan's order.
    fn keep_order(&mut self) {
        for i in 0..self.steps.len() {
            if self.parallel[i] {
                continue;
            }
            for j in 0..self.steps.len() {
                match j.cmp(&i) {
                    std::cmp::Ordering::Less => self.add(j, i, EdgeKind::Order, None),
                    std::cmp::Ordering::Greater => self.add(i, j, EdgeKind::Order, None),
                    std::cmp::Ordering::Equal => {}
                }
            }
        }
    }

    /// Each step's layer: one past its deepest dependency's; refuses a cycle, naming it.
    fn layer_of_each(&self) -> Result<Vec<usize>, DagError> {
        let mut graph: DiGraph<usize, ()> = DiGraph::new();
        let nodes: Vec<NodeIndex> = (0..self.steps.len()).map(|i| graph.add_node(i)).collect();
        for (from, to, _) in &self.edges {
            graph.update_edge(nodes[*from], nodes[*to], ());
        }
        let order =
            toposort(&graph, None).map_err(|_| DagError::Cycle(cycle(&graph, self.steps)))?;
        let mut layer = vec![0usize; self.steps.len()];
        for n in order {
            let i = graph[n];
            layer[i] = graph
                .neighbors_directed(n, petgraph::Direction::Incoming)
                .map(|p| layer[graph[p]] + 1)
                .max()
                .unwrap_or(0);
        }
        Ok(layer)
    }

    /// The finished DAG, given each step's layer.
    fn into_dag(mut self, layer: Vec<usize>) -> Dag {
        let depth = layer.iter().max().map_or(0, |m| m + 1);
        let mut layers = vec![Vec::new(); depth];
        for (i, l) in layer.iter().enumerate() {
            layers[*l].push(i);
        }
        let steps = self.steps;
        let dag_nodes = steps
            .iter()
            .enumerate()
            .map(|(i, s)| {
                let deps: BTreeSet<usize> = self
                    .edges
                    .iter()
                    .filter(|(_, t, _)| *t == i)
                    .map(|(f, _, _)| *f)
                    .collect();
                DagNode {
                    id: s.id.clone(),
                    tool: s.tool.clone(),
                    args: self.args[i].clone(),
                    carried: std::mem::take(&mut self.carried[i]),
                    dependencies: deps.iter().map(|d| steps[*d].id.clone()).collect(),
                    bindings: std::mem::take(&mut self.bindings[i]),
                    layer: layer[i],
                    parallel: self.parallel[i],
                }
            })
            .collect();
        Dag {
            nodes: dag_nodes,
            edges: self.edges.into_iter().map(|(_, _, e)| e).collect(),
            layers,
        }
    }
}

/// The nearest earlier step given an argument named like `param` (without case, `_`, `-`)
/// whose value fits its type: (step index, value).
pub fn given_earlier<'a, I>(param: &Port, earlier: I) -> Option<(usize, Value)>
where
    I: IntoIterator<Item = &'a Value>,
    I::IntoIter: DoubleEndedIterator + ExactSizeIterator,
{
    let want = schema::normalize(&param.name);
    earlier.into_iter().enumerate().rev().find_map(|(i, args)| {
        let m = args.as_object()?;
        let mut keys: Vec<&String> = m.keys().collect();
        keys.sort_unstable();
        keys.into_iter()
            .filter(|k| schema::normalize(k) == want)
            .map(|k| &m[k])
            .find(|v| !v.is_null() && type_of(v).fits(param.ty))
            .map(|v| (i, v.clone()))
    })
}

/// A JSON value's type.
fn type_of(v: &Value) -> JsonType {
    match v {
        Value::String(_) => JsonType::String,
        Value::Number(n) if n.is_i64() || n.is_u64() => JsonType::Integer,
        Value::Number(_) => JsonType::Number,
        Value::Bool(_) => JsonType::Boolean,
        Value::Object(_) => JsonType::Object,
        Value::Array(_) => JsonType::Array,
        Value::Null => JsonType::Any,
    }
}

/// Whether `args` gives `param` (a JSON `null` does not count).
fn given(args: &Value, param: &str) -> bool {
    args.get(param).is_some_and(|v| !v.is_null())
}

/// An earlier step's output that could fill a parameter.
struct Candidate {
    step: usize,
    output: String,
    by_name: bool,
    /// The step had several outputs of a fitting type.
    several: bool,
}

/// Outputs preferred when a step has several of a fitting type.
const PREFERRED_OUTPUTS: &[&str] = &["content", TEXT_OUTPUT, "result", "data", "output"];

/// The earlier steps (`earlier`, in plan order) whose outputs fit `param`: per step, its
/// output of the same name (`by_name`), else its best output of a fitting type.
fn providers(param: &Port, earlier: &[Option<ToolSpec>], by_name: bool) -> Vec<Candidate> {
    let want = schema::normalize(&param.name);
    let named: Vec<Candidate> = earlier
        .iter()
        .enumerate()
        .filter_map(|(i, spec)| {
            let spec = spec.as_ref()?;
            schema::outputs(spec)
                .into_iter()
                .find(|o| schema::normalize(&o.name) == want && o.ty.fits(param.ty))
                .map(|o| Candidate {
                    step: i,
                    output: o.name,
                    by_name: true,
                    several: false,
                })
        })
        .collect();
    if by_name || param.ty == JsonType::Any {
        return named;
    }
    earlier
        .iter()
        .enumerate()
        .filter_map(|(i, spec)| {
            let spec = spec.as_ref()?;
            let declared = spec.output_schema.is_some();
            let fitting: Vec<Port> = schema::outputs(spec)
                .into_iter()
                // A declared schema's properties speak for the tool; its text only counts
                // when it declares nothing.
                .filter(|o| !(declared && o.name == TEXT_OUTPUT))
                .filter(|o| o.ty != JsonType::Any && o.ty.fits(param.ty))
                .collect();
            let best = PREFERRED_OUTPUTS
                .iter()
                .find_map(|p| fitting.iter().find(|o| o.name == *p))
                .or_else(|| fitting.first())?;
            Some(Candidate {
                step: i,
                output: best.name.clone(),
                by_name: false,
                several: fitting.len() > 1,
            })
        })
        .collect()
}

/// The candidate a parameter is bound from: the nearest earlier name match, else the
/// nearest earlier step.
fn choose(candidates: &[Candidate]) -> Option<&Candidate> {
    candidates
        .iter()
        .rev()
        .find(|c| c.by_name)
        .or_else(|| candidates.last())
}

/// One cycle of `graph`, as step ids, the first repeated at the end.
fn cycle(graph: &DiGraph<usize, ()>, steps: &[Step]) -> Vec<String> {
    let Some(scc) = tarjan_scc(graph).into_iter().find(|c| c.len() > 1) else {
        return Vec::new();
    };
    let members: BTreeSet<NodeIndex> = scc.iter().copied().collect();
    let start = scc
        .iter()
        .copied()
        .min_by_key(|n| graph[*n])
        .unwrap_or(scc[0]);
    // Walk inside the component until a node repeats; the part from its first visit is a
    // cycle.
    let mut path = vec![start];
    let mut at = start;
    loop {
        let next = graph
            .neighbors(at)
            .filter(|n| members.contains(n))
            .min_by_key(|n| graph[*n]);
        let Some(next) = next else { break };
        if let Some(pos) = path.iter().position(|n| *n == next) {
            let mut ids: Vec<String> = path[pos..]
                .iter()
                .map(|n| steps[graph[*n]].id.clone())
                .collect();
            ids.push(steps[graph[next]].id.clone());
            return ids;
        }
        path.push(next);
        at = next;
    }
    path.iter().map(|n| steps[graph[*n]].id.clone()).collect()
}
