//! `fan_out` stages: the orchestrator's items (or an artifact's entries, `items_from`) become
//! work nodes `<stage>/<key>`, in dependency order, each optionally followed by a review node
//! `<stage>/<key>.review` and a merge node `<stage>/<key>.merge` of its own (`three_phase`'s
//! ticket pipeline: ticket agent → review → merger).
//!
//! Dependencies between items (`depends_on`, or `dependencies`: ids of other items) become
//! engine dependencies: an item's first node waits until the last node of every item it
//! depends on (its merge, else its review, else its work) completed, and is skipped when one of
//! them cannot complete. Independent items run freely. A review that asks for a revision (or
//! finds the work's tests failing) runs the work again with the feedback — a new activation of
//! the same work node — and is itself run again once that completes; the merge waits for an
//! approving review.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use serde_json::{Value, json};
use trellis_graph::{NodeContext, NodeHandler, NodeOutput};

use super::call;
use crate::plan::{Kind, StageContext};
use crate::schema::AgentSpec;

/// The template of a fan-out's work nodes.
pub fn work_template(stage: &str) -> String {
    format!("{stage}:item")
}

/// The template of a fan-out's review nodes.
pub fn review_template(stage: &str) -> String {
    format!("{stage}:review")
}

/// The template of a fan-out's merge nodes.
pub fn merge_template(stage: &str) -> String {
    format!("{stage}:merge")
}

/// Suffix of an item's review node key.
pub const REVIEW_SUFFIX: &str = ".review";
/// Suffix of an item's merge node key.
pub const MERGE_SUFFIX: &str = ".merge";
/// Activations of an item's work before its review gives up asking for revisions, when the
/// fan-out stage sets no `max_attempts`.
pub const DEFAULT_WORK_ATTEMPTS: u32 = 3;

/// What follows each item's work.
#[derive(Clone, Copy, Debug, Default)]
pub struct Pipeline {
    /// A review node per item.
    pub review: bool,
    /// A merge node per item.
    pub merge: bool,
}

/// A fan-out's node: runs `inner` (the orchestrator, or the artifact's item source), then
/// spawns the items' nodes.
pub fn fan_out_node(
    stage: String,
    max_items: u32,
    pipeline: Pipeline,
    inner: impl NodeHandler,
) -> impl NodeHandler {
    let inner: Arc<dyn NodeHandler> = Arc::new(inner);
    move |ctx: NodeContext| {
        let (stage, inner) = (stage.clone(), inner.clone());
        async move {
            let out = inner.call(ctx).await?;
            if out.is_failure() || out.is_interrupt() {
                return Ok(out);
            }
            let recorded = out.recorded();
            let items = match recorded
                .pointer("/output/items")
                .or_else(|| recorded.get("items"))
            {
                Some(Value::Array(items)) => Some(items.clone()),
                _ => recorded
                    .get("output")
                    .and_then(Value::as_str)
                    .and_then(items_from_answer),
            };
            let Some(items) = items else {
                return Ok(NodeOutput::failure(format!(
                    "fan-out `{stage}`: the orchestrator's result has no `items` list (a JSON \
                     `{{\"items\": [...]}}` or one `- ` line per item in its answer)"
                )));
            };
            if items.len() > max_items as usize {
                return Ok(NodeOutput::failure(format!(
                    "fan-out `{stage}`: the orchestrator made {} items; max_items is {max_items}",
                    items.len()
                )));
            }
            let ordered = match order(&items) {
                Ok(o) => o,
                Err(e) => return Ok(NodeOutput::failure(format!("fan-out `{stage}`: {e}"))),
            };
            let mut out = out;
            for p in ordered {
                let key = p.key.clone();
                out = out.spawn_after(
                    key.clone(),
                    work_template(&stage),
                    p.item.clone(),
                    p.after(pipeline),
                );
                let mut last = key.clone();
                if pipeline.review {
                    let review = format!("{key}{REVIEW_SUFFIX}");
                    out = out.spawn_after(
                        review.clone(),
                        review_template(&stage),
                        p.item.clone(),
                        [last],
                    );
                    last = review;
                }
                if pipeline.merge {
                    out = out.spawn_after(
                        format!("{key}{MERGE_SUFFIX}"),
                        merge_template(&stage),
                        p.item.clone(),
                        [last],
                    );
                }
            }
            Ok(out)
        }
    }
}

/// The items of an orchestrator's text answer: a JSON object with an `items` list or a JSON
/// list (raw or in a code fence), else one item per `- `, `* ` or `1. ` line, as
/// `{"id": "<n>", "focus": "<line>"}` (a leading `id:` or `**id**:` names the item).
pub fn items_from_answer(answer: &str) -> Option<Vec<Value>> {
    let json_of = |text: &str| -> Option<Vec<Value>> {
        match serde_json::from_str::<Value>(text.trim()).ok()? {
            Value::Array(a) => Some(a),
            Value::Object(mut o) => match o.remove("items") {
                Some(Value::Array(a)) => Some(a),
                _ => None,
            },
            _ => None,
        }
    };
    if let Some(items) = json_of(answer) {
        return Some(items);
    }
    // A fenced block holding the JSON.
    let mut rest = answer;
    while let Some(start) = rest.find("```") {
        let after = &rest[start + 3..];
        let body_start = after.find('\n').map_or(after.len(), |i| i + 1);
        let Some(end) = after[body_start..].find("```") else {
            break;
        };
        if let Some(items) = json_of(&after[body_start..body_start + end]) {
            return Some(items);
        }
        rest = &after[body_start + end + 3..];
    }
    let mut items = Vec::new();
    for line in answer.lines() {
        let t = line.trim_start();
        let body = if let Some(b) = t.strip_prefix("- ").or_else(|| t.strip_prefix("* ")) {
            b
        } else {
            let digits = t.bytes().take_while(u8::is_ascii_digit).count();
            match t[digits..]
                .strip_prefix(". ")
                .or_else(|| t[digits..].strip_prefix(") "))
            {
                Some(b) if digits > 0 => b,
                _ => continue,
            }
        };
        let body = body.trim();
        if body.is_empty() {
            continue;
        }
        let n = items.len() + 1;
        let named = body.split_once(':').and_then(|(head, _)| {
            let head = head.trim().trim_matches('*').trim_matches('`').trim();
            let ok = !head.is_empty()
                && head.len() <= 40
                && head
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | ' ' | '.'));
            ok.then(|| head.replace(' ', "_"))
        });
        items.push(json!({ "id": named.unwrap_or_else(|| n.to_string()), "focus": body }));
    }
    (!items.is_empty()).then_some(items)
}

/// An item placed for spawning: its key and the keys of the items it depends on.
struct Placed {
    key: String,
    item: Value,
    deps: Vec<String>,
}

impl Placed {
    /// The node keys its work waits for: the last node of each item it depends on.
    fn after(&self, pipeline: Pipeline) -> Vec<String> {
        let suffix = if pipeline.merge {
            MERGE_SUFFIX
        } else if pipeline.review {
            REVIEW_SUFFIX
        } else {
            ""
        };
        self.deps.iter().map(|d| format!("{d}{suffix}")).collect()
    }
}

/// The items keyed (unique) and ordered so that every item comes after those it depends on
/// (stable: otherwise in the given order). Unknown dependencies and cycles are errors.
fn order(items: &[Value]) -> Result<Vec<Placed>, String> {
    let mut keys = BTreeSet::new();
    let mut by_id: BTreeMap<String, usize> = BTreeMap::new();
    let mut placed: Vec<Placed> = Vec::with_capacity(items.len());
    for (i, item) in items.iter().enumerate() {
        let mut key = item_key(item, i);
        if !keys.insert(key.clone()) {
            key = format!("{key}_{}", i + 1);
            keys.insert(key.clone());
        }
        if let Some(id) = raw_id(item) {
            by_id.entry(id).or_insert(i);
        }
        placed.push(Placed {
            key,
            item: item.clone(),
            deps: Vec::new(),
        });
    }
    let mut edges: Vec<Vec<usize>> = vec![Vec::new(); items.len()];
    for (i, item) in items.iter().enumerate() {
        for dep in dependencies(item) {
            let Some(&d) = by_id.get(&dep) else {
                let known: Vec<&str> = by_id.keys().map(String::as_str).collect();
                return Err(format!(
                    "item `{}` depends on `{dep}`, which is not an item (items: {})",
                    placed[i].key,
                    known.join(", ")
                ));
            };
            if d == i {
                return Err(format!("item `{}` depends on itself", placed[i].key));
            }
            if !edges[i].contains(&d) {
                edges[i].push(d);
            }
        }
    }
    // Kahn's algorithm, always taking the first ready item in the given order.
    let mut done = vec![false; items.len()];
    let mut out_order = Vec::with_capacity(items.len());
    while out_order.len() < items.len() {
        let next = (0..items.len()).find(|&i| !done[i] && edges[i].iter().all(|&d| done[d]));
        let Some(i) = next else {
            let left: Vec<&str> = (0..items.len())
                .filter(|&i| !done[i])
                .map(|i| placed[i].key.as_str())
                .collect();
            return Err(format!(
                "the dependencies of items {} form a cycle",
                left.join(", ")
            ));
        };
        done[i] = true;
        out_order.push(i);
    }
    let deps: Vec<Vec<String>> = edges
        .iter()
        .map(|e| e.iter().map(|&d| placed[d].key.clone()).collect())
        .collect();
    let mut slots: Vec<Option<Placed>> = placed.into_iter().map(Some).collect();
    Ok(out_order
        .into_iter()
        .filter_map(|i| {
            let mut p = slots[i].take()?;
            p.deps = deps[i].clone();
            Some(p)
        })
        .collect())
}

fn raw_id(item: &Value) -> Option<String> {
    item.get("id")
        .or_else(|| item.get("key"))
        .and_then(|v| match v {
            Value::String(s) => Some(s.clone()),
            Value::Number(n) => Some(n.to_string()),
            _ => None,
        })
}

/// The ids an item depends on (`depends_on`, or `dependencies`; a list or one id).
fn dependencies(item: &Value) -> Vec<String> {
    let v = item
        .get("depends_on")
        .or_else(|| item.get("dependencies"))
        .unwrap_or(&Value::Null);
    let one = |v: &Value| match v {
        Value::String(s) => Some(s.trim().to_owned()),
        Value::Number(n) => Some(n.to_string()),
        _ => None,
    };
    match v {
        Value::Array(a) => a.iter().filter_map(one).filter(|s| !s.is_empty()).collect(),
        other => one(other)
            .filter(|s| !s.is_empty() && !s.eq_ignore_ascii_case("none"))
            .into_iter()
            .collect(),
    }
}

/// A work node's key: the item's `id` (or `key`), made safe for node ids, else `item_<n>`.
fn item_key(item: &Value, index: usize) -> String {
    let raw = raw_id(item).unwrap_or_default();
    let key: String = raw
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                c
            } else {
                '_'
            }
        })
        .take(48)
        .collect();
    if key.is_empty() {
        format!("item_{}", index + 1)
    } else {
        key
    }
}

/// The stage contexts of a fan-out's templates: the work (the template agent; it commits
/// without merging when a merge node follows), the review and the merge.
pub fn contexts(
    fan_out: &StageContext,
    template: &AgentSpec,
    review: Option<&AgentSpec>,
    merge: Option<&AgentSpec>,
) -> (StageContext, Option<StageContext>, Option<StageContext>) {
    let mut work = fan_out.clone();
    work.kind = Kind::Agent;
    work.agents = vec![template.clone()];
    work.tools = template.mcp_tools.clone();
    work.produces = None;
    work.also_produces = Vec::new();
    work.merge_later = merge.is_some();
    let step = |kind: Kind, agent: &AgentSpec| {
        let mut c = work.clone();
        c.kind = kind;
        c.agents = vec![agent.clone()];
        c.tools = agent.mcp_tools.clone();
        c.merge_later = false;
        c
    };
    let review = review.map(|a| {
        step(
            Kind::Review {
                reviews: String::new(),
            },
            a,
        )
    });
    let merge = merge.map(|a| {
        step(
            Kind::Merge {
                merges: String::new(),
            },
            a,
        )
    });
    (work, review, merge)
}

/// The work node an item's review or merge node belongs to (`<stage>/<key>`).
fn work_of(node: &str, suffix: &str) -> String {
    node.strip_suffix(suffix).unwrap_or(node).to_owned()
}

/// The stage context (as JSON) of an item's node: `input` with the item and, for a review or
/// merge, the work node it concerns.
fn with_item(input: &Value, item: Value, kind: Option<Value>) -> Value {
    let mut full = input.clone();
    if let Value::Object(m) = &mut full {
        m.insert("item".into(), item);
        if let Some(k) = kind {
            m.insert("kind".into(), k);
        }
    }
    full
}

/// A fan-out's work node: the template stage's context with the item and the feedback a
/// review left for this node; its result is recorded in `stage_results` under its node id
/// (for its review), and a success clears the feedback. When a review follows (`reviewed`),
/// work whose only failure is its tests completes with the failing tests recorded: the review
/// sends it back with their output (a revision), so it never reaches a merge.
pub fn work_node(input: Value, inner: Arc<dyn NodeHandler>, reviewed: bool) -> impl NodeHandler {
    move |mut ctx: NodeContext| {
        let inner = inner.clone();
        let node = ctx.node.to_string();
        let mut full = with_item(&input, std::mem::take(&mut ctx.input), None);
        let feedback = ctx
            .state
            .get_in("feedback", &node)
            .filter(|f| !f.is_null())
            .cloned();
        if let (Some(f), Value::Object(m)) = (&feedback, &mut full) {
            m.insert("feedback".into(), f.clone());
        }
        ctx.input = full;
        async move {
            let attempt = ctx.attempt;
            let mut out = call(&inner, ctx).await;
            if out.is_interrupt() {
                return Ok(out);
            }
            let output = out.recorded().clone();
            let tests_failed = output["tests"].get("passed") == Some(&Value::Bool(false));
            if reviewed
                && out.is_failure()
                && tests_failed
                && output.get("merge_conflict").is_none_or(Value::is_null)
            {
                out = NodeOutput::success().result(output.clone());
            }
            let failure = out.is_failure();
            if !failure && feedback.is_some() && !tests_failed {
                out = out.write("feedback", json!({ node.as_str(): Value::Null }));
            }
            Ok(out.write(
                "stage_results",
                json!({ node: { "failure": failure, "attempt": attempt, "output": output } }),
            ))
        }
    }
}

/// An item's review node: reviews the work node's latest result. Failing tests of the work
/// send it back without asking the reviewer; NEEDS_REVISION (the reviewer's, or a person's
/// at a human review) runs the work again with the feedback, up to `max_work` activations of
/// the work, after which the review fails.
pub fn review_node(input: Value, inner: Arc<dyn NodeHandler>, max_work: u32) -> impl NodeHandler {
    move |mut ctx: NodeContext| {
        let inner = inner.clone();
        let node = ctx.node.to_string();
        let work = work_of(&node, REVIEW_SUFFIX);
        let work_result = ctx
            .state
            .get_in("stage_results", &work)
            .cloned()
            .unwrap_or(Value::Null);
        let kind = json!({ "review": { "reviews": work } });
        let mut full = with_item(&input, std::mem::take(&mut ctx.input), Some(kind));
        if let Value::Object(m) = &mut full {
            m.insert("work".into(), work_result["output"].clone());
        }
        ctx.input = full;
        let work_attempts = ctx
            .attempts
            .get(&trellis_protocol::NodeId::new(work.as_str()))
            .copied()
            .unwrap_or(0);
        async move {
            let tests = &work_result["output"]["tests"];
            let mut out = if tests.get("passed") == Some(&Value::Bool(false)) {
                let output = tests["output"].as_str().unwrap_or_default();
                let feedback = format!(
                    "The project's tests fail in your worktree; fix them before review:\n{}",
                    clip(output, 3000)
                );
                NodeOutput::failure("the work's tests fail").result(json!({
                    "verdict": "NEEDS_REVISION", "feedback": feedback, "revise": work,
                    "reason": "the work's tests fail", "tests": tests,
                }))
            } else {
                call(&inner, ctx).await
            };
            let revise = out.is_failure()
                && out.recorded().get("verdict").and_then(Value::as_str) == Some("NEEDS_REVISION");
            if !revise {
                return Ok(out);
            }
            if work_attempts >= max_work {
                let mut result = out.recorded().clone();
                let why = format!(
                    "the work still needs revision after {work_attempts} attempts; giving up"
                );
                if let Value::Object(m) = &mut result {
                    m.insert("reason".into(), json!(why));
                }
                return Ok(NodeOutput::failure(why).result(result));
            }
            let feedback = out
                .recorded()
                .get("feedback")
                .cloned()
                .unwrap_or_else(|| json!("revise your work"));
            out = out
                .write("feedback", json!({ work.as_str(): feedback }))
                .revise(work.as_str());
            Ok(out)
        }
    }
}

/// An item's merge node: merges the work node's branch into the run branch.
pub fn merge_node(input: Value, inner: Arc<dyn NodeHandler>) -> impl NodeHandler {
    move |mut ctx: NodeContext| {
        let inner = inner.clone();
        let work = work_of(ctx.node.as_str(), MERGE_SUFFIX);
        let kind = json!({ "merge": { "merges": work } });
        ctx.input = with_item(&input, std::mem::take(&mut ctx.input), Some(kind));
        async move { Ok(call(&inner, ctx).await) }
    }
}

fn clip(text: &str, max: usize) -> String {
    if text.len() <= max {
        return text.to_owned();
    }
    let mut start = text.len() - max;
    while !text.is_char_boundary(start) {
        start += 1;
    }
    format!("… {}", &text[start..])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn items_are_ordered_after_their_dependencies_stably() {
        let items = vec![
            json!({"id": "T2", "depends_on": ["T1"]}),
            json!({"id": "T1"}),
            json!({"id": "T3", "dependencies": "none"}),
        ];
        let placed = order(&items).unwrap_or_else(|e| panic!("{e}"));
        let keys: Vec<&str> = placed.iter().map(|p| p.key.as_str()).collect();
        assert_eq!(keys, ["T1", "T2", "T3"]);
        assert_eq!(placed[1].deps, ["T1"]);
        let full = Pipeline {
            review: true,
            merge: true,
        };
        assert_eq!(placed[1].after(full), ["T1.merge"]);
    }

    #[test]
    fn an_answer_gives_items_as_json_or_as_a_list() {
        let json = items_from_answer("Here:\n```json\n{\"items\": [{\"id\": \"a\"}]}\n```\n");
        assert_eq!(json, Some(vec![json!({"id": "a"})]));
        let list = items_from_answer("Areas:\n- storage: the db layer\n- the web handlers\n")
            .unwrap_or_default();
        assert_eq!(list.len(), 2);
        assert_eq!(list[0]["id"], "storage");
        assert_eq!(list[1]["id"], "2");
        assert_eq!(list[1]["focus"], "the web handlers");
        assert_eq!(items_from_answer("nothing here"), None);
    }

    #[test]
    fn unknown_dependencies_and_cycles_are_named() {
        let unknown = order(&[json!({"id": "A", "depends_on": ["B"]})]).err();
        assert!(unknown.is_some_and(|e| e.contains("`B`") && e.contains("items: A")));
        let cycle = order(&[
            json!({"id": "A", "depends_on": ["B"]}),
            json!({"id": "B", "depends_on": ["A"]}),
            json!({"id": "C"}),
        ])
        .err();
        assert!(
            cycle
                .as_ref()
                .is_some_and(|e| e.contains("A, B form a cycle")),
            "{cycle:?}"
        );
    }
}
