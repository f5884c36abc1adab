//! Loading a workflow: parse, decode, then the checks that need the whole file (routing
//! targets, reachability, loops, duplicates). Every problem is reported at once, sorted by
//! position.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::Value;
use trellis_graph::nearest;

use crate::decode::Decoder;
use crate::error::{Error, Problems, Result};
use crate::schema::{StageKind, Target, Workflow};
use crate::yaml;

/// Node ids the compiled graph uses itself; stage names must differ from them.
pub const RESERVED_NAMES: [&str; 4] = [
    "DONE",
    "ABORT",
    crate::compile::ADAPTIVE_RETRIEVAL,
    crate::compile::ORCHESTRATE,
];

/// Checks a `retrieval_strategy_config` block (the index crate's parser plugs in here).
pub type ConfigCheck<'a> = &'a dyn Fn(&Value) -> std::result::Result<(), String>;

/// Parses and validates workflow `text`; `file` names it in problems.
pub fn load_str(file: &str, text: &str, check: Option<ConfigCheck<'_>>) -> Result<Workflow> {
    let mut d = Decoder::new(file);
    let root = match yaml::parse(text) {
        Ok(root) => root,
        Err(e) => {
            d.problem(
                e.pos,
                format!("YAML syntax: {}", e.message),
                Some("fix the YAML syntax (indentation, quotes, brackets)".into()),
            );
            return Err(invalid(d));
        }
    };
    let mut workflow = d.workflow(&root);
    if let Some(w) = &mut workflow {
        crate::kinds::resolve(&mut d, w);
    }
    if let Some(w) = &workflow {
        check_stages(&mut d, w);
        if let (Some(check), Some(config)) = (check, &w.retrieval_strategy_config)
            && let Err(message) = check(&config.value)
        {
            d.problem(
                config.pos,
                format!("retrieval_strategy_config: {message}"),
                None,
            );
        }
    }
    match workflow {
        Some(w) if d.problems.is_empty() => Ok(w),
        _ => Err(invalid(d)),
    }
}

fn invalid(mut d: Decoder<'_>) -> Error {
    d.problems.sort_by_key(|p| (p.line, p.column));
    Error::Invalid {
        file: d.file.to_owned(),
        problems: Problems(d.problems),
    }
}

fn check_stages(d: &mut Decoder<'_>, w: &Workflow) {
    let mut ids: BTreeMap<&str, usize> = BTreeMap::new();
    let mut names: BTreeMap<&str, usize> = BTreeMap::new();
    for s in &w.stages {
        let id = s.stage_id.value.as_str();
        if let Some(line) = ids.insert(id, s.stage_id.pos.line) {
            d.problem(
                s.stage_id.pos,
                format!("duplicate stage_id `{id}` (first at line {line})"),
                Some("give every stage its own stage_id".into()),
            );
        }
        let name = s.name.value.as_str();
        if let Some(line) = names.insert(name, s.name.pos.line) {
            d.problem(
                s.name.pos,
                format!("duplicate stage name `{name}` (first at line {line})"),
                Some("give every stage its own name".into()),
            );
        }
        if RESERVED_NAMES.contains(&name) || name.is_empty() || name.contains(['/', ':']) {
            d.problem(
                s.name.pos,
                format!("stage name `{name}` is reserved or contains `/` or `:`"),
                Some(format!(
                    "rename the stage (reserved: {})",
                    RESERVED_NAMES.join(", ")
                )),
            );
        }
    }
    let known: Vec<&str> = w.stages.iter().map(|s| s.stage_id.value.as_str()).collect();
    let tree = w.state.iter().any(|s| s == "task_tree");
    for s in &w.stages {
        if let Some(step) = &s.step
            && !tree
        {
            d.problem(
                step.pos,
                format!(
                    "stage `{}` is a task tree step, but the workflow keeps no task tree",
                    s.name.value
                ),
                Some("add `state: [task_tree]` at the top of the workflow".into()),
            );
        }
        let outcome_keys: Vec<String> = s
            .routing
            .outcomes
            .keys()
            .map(|k| format!("outcomes.{k}"))
            .collect();
        let fixed = [
            ("next_stage_on_success", &s.routing.next_stage_on_success),
            ("next_stage_on_failure", &s.routing.next_stage_on_failure),
        ];
        let targets = fixed.into_iter().chain(
            outcome_keys
                .iter()
                .map(String::as_str)
                .zip(s.routing.outcomes.values()),
        );
        for (key, t) in targets {
            if let Target::Stage(id) = &t.value
                && !ids.contains_key(id.as_str())
            {
                let candidates = known.iter().copied().chain(["DONE", "ABORT"]);
                let fix = match nearest(id.as_str(), candidates) {
                    Some(n) => format!(
                        "did you mean `{n}`? (stage ids: {}; or DONE / ABORT)",
                        known.join(", ")
                    ),
                    None => format!("use a stage id ({}) or DONE / ABORT", known.join(", ")),
                };
                d.problem(
                    t.pos,
                    format!(
                        "stage `{}`: {key} routes to stage `{id}`, which does not exist",
                        s.name.value
                    ),
                    Some(fix),
                );
            }
        }
    }
    check_reachable(d, w);
    check_loops(d, w);
}

/// Stage index → the indexes its outcome routes lead to.
fn outcome_edges(w: &Workflow) -> Vec<Vec<usize>> {
    w.stages
        .iter()
        .map(|s| {
            s.routing
                .outcomes
                .values()
                .filter_map(|t| match &t.value {
                    Target::Stage(id) => w.stages.iter().position(|x| x.stage_id.value == *id),
                    _ => None,
                })
                .collect()
        })
        .collect()
}

/// Stage index → (success target index, failure target index). A fan-out's work continues
/// at its collector.
fn edges(w: &Workflow) -> Vec<[Option<usize>; 2]> {
    let index = |t: &Target| match t {
        Target::Stage(id) => w.stages.iter().position(|s| s.stage_id.value == *id),
        _ => None,
    };
    w.stages
        .iter()
        .map(|s| {
            let success = match &s.kind.value {
                StageKind::FanOut { .. } => crate::kinds::collector_of(w, &s.stage_id.value),
                _ => index(&s.routing.next_stage_on_success.value),
            };
            [success, index(&s.routing.next_stage_on_failure.value)]
        })
        .collect()
}

fn check_reachable(d: &mut Decoder<'_>, w: &Workflow) {
    let edges = edges(w);
    let outcomes = outcome_edges(w);
    let mut seen = BTreeSet::new();
    let mut todo = vec![0usize];
    while let Some(i) = todo.pop() {
        if i < edges.len() && seen.insert(i) {
            todo.extend(edges[i].iter().flatten());
            todo.extend(outcomes[i].iter().copied());
        }
    }
    for (i, s) in w.stages.iter().enumerate() {
        if s.required && !seen.contains(&i) {
            d.problem(
                s.pos,
                format!(
                    "required stage `{}` can never be reached from the first stage `{}`",
                    s.name.value, w.stages[0].name.value
                ),
                Some(format!(
                    "route an earlier stage's next_stage_on_success to {}, or mark it `required: false`",
                    s.stage_id.value
                )),
            );
        }
    }
}

/// A failure edge out of a stage with `max_attempts` is taken at most that many times, so it
/// cannot loop forever; any cycle left once those edges are removed is unbounded. Outcome
/// routes count like failure routes: bounded by the stage's `max_attempts`.
fn check_loops(d: &mut Decoder<'_>, w: &Workflow) {
    let edges = edges(w);
    let outcomes = outcome_edges(w);
    let succ = |i: usize| -> Vec<(usize, bool)> {
        // A gate goes back to its producer only when a person asks for changes.
        let bounded = w.stages[i].routing.max_attempts.is_some()
            || matches!(w.stages[i].kind.value, StageKind::Gate { .. });
        let mut out = Vec::new();
        if let Some(t) = edges[i][0] {
            out.push((t, false));
        }
        if let (Some(t), false) = (edges[i][1], bounded) {
            out.push((t, true));
        }
        if !bounded {
            out.extend(outcomes[i].iter().map(|t| (*t, true)));
        }
        out
    };
    let mut reported: BTreeSet<usize> = BTreeSet::new();
    for start in 0..w.stages.len() {
        if reported.contains(&start) {
            continue;
        }
        // Depth-first search for a path from `start` back to itself.
        let mut path: Vec<(usize, bool)> = Vec::new();
        let mut visited = BTreeSet::new();
        if !find_cycle(start, start, &succ, &mut visited, &mut path) {
            continue;
        }
        let mut members: Vec<usize> = vec![start];
        members.extend(path.iter().map(|(i, _)| *i).filter(|i| *i != start));
        reported.extend(members.iter().copied());
        let names: Vec<&str> = std::iter::once(start)
            .chain(path.iter().map(|(i, _)| *i))
            .map(|i| w.stages[i].name.value.as_str())
            .collect();
        // Edge k goes from the k-th source to path[k].
        let failing = std::iter::once(start)
            .chain(path.iter().map(|(i, _)| *i))
            .zip(path.iter())
            .find(|(_, (_, via_failure))| *via_failure)
            .map(|(from, _)| from);
        let s = &w.stages[start];
        let fix = match failing {
            Some(f) => format!(
                "add `max_attempts: 3` under routing of stage `{}`",
                w.stages[f].name.value
            ),
            None => "these stages route to each other on success; send one of them forward (to a later stage or DONE)".into(),
        };
        d.problem(
            s.routing.pos,
            format!("routing loop without max_attempts: {}", names.join(" → ")),
            Some(fix),
        );
    }
}

fn find_cycle(
    at: usize,
    goal: usize,
    succ: &dyn Fn(usize) -> Vec<(usize, bool)>,
    visited: &mut BTreeSet<usize>,
    path: &mut Vec<(usize, bool)>,
) -> bool {
    for (next, via_failure) in succ(at) {
        path.push((next, via_failure));
        if next == goal {
            return true;
        }
        if visited.insert(next) && find_cycle(next, goal, succ, visited, path) {
            return true;
        }
        path.pop();
    }
    false
}
