//! What stage kinds imply and require, checked once the whole file is decoded: a gate's
//! producer (default: the nearest earlier stage that `produces` its artifact), the failure
//! routes of gates and reviews (back to the producer / the reviewed stage unless written),
//! references to other stages, one collector per fan-out, known artifacts and functions.

use trellis_graph::nearest;

use crate::decode::Decoder;
use crate::schema::{
    ARTIFACT_KINDS, DETERMINISTIC_FUNCTIONS, Spanned, StageId, StageKind, Target, Workflow,
};
use crate::yaml::Pos;

/// The index of the collector stage of fan-out `id`, if exactly one collects it.
pub(crate) fn collector_of(w: &Workflow, id: &StageId) -> Option<usize> {
    let mut found = w.stages.iter().enumerate().filter(|(_, s)| {
        matches!(&s.kind.value, StageKind::Collector { collects } if collects.value == *id)
    });
    match (found.next(), found.next()) {
        (Some((i, _)), None) => Some(i),
        _ => None,
    }
}

/// Fills in what kinds imply and reports what they lack.
pub(crate) fn resolve(d: &mut Decoder<'_>, w: &mut Workflow) {
    let ids = StageIds::of(w);
    for i in 0..w.stages.len() {
        check_produced(d, w, i);
        check_reference(d, w, i, &ids);
        let kind = w.stages[i].kind.value.clone();
        match kind {
            StageKind::Gate { artifact, producer } => resolve_gate(d, w, i, artifact, producer),
            StageKind::Review { reviews } => default_failure(w, i, &reviews.value),
            StageKind::Collector { collects } => check_collected(d, w, i, &collects),
            StageKind::FanOut { items_from, .. } => {
                check_fan_out(d, w, i, items_from.as_ref(), &ids);
            }
            StageKind::Deterministic { function, args } => {
                check_function(d, w, i, &function, &args);
            }
            StageKind::Agent | StageKind::Merge { .. } => {}
        }
    }
}

/// The workflow's stage ids, in file order, and their list for messages.
struct StageIds {
    ids: Vec<StageId>,
    /// The ids joined with commas.
    known: String,
}

impl StageIds {
    /// The stage ids of `w`.
    fn of(w: &Workflow) -> Self {
        let ids: Vec<StageId> = w.stages.iter().map(|s| s.stage_id.value.clone()).collect();
        let known = ids
            .iter()
            .map(StageId::as_str)
            .collect::<Vec<_>>()
            .join(", ");
        Self { ids, known }
    }
}

/// Every artifact stage `i` produces must be a known kind.
fn check_produced(d: &mut Decoder<'_>, w: &Workflow, i: usize) {
    let stage = &w.stages[i];
    for p in stage.produces.iter().chain(&stage.also_produces) {
        check_artifact(d, &p.value, p.pos, "produces");
    }
}

/// A reference to another stage (`producer`, `reviews`, `collects`, `merges`): it must exist
/// and not be the stage itself.
fn check_reference(d: &mut Decoder<'_>, w: &Workflow, i: usize, ids: &StageIds) {
    let name = &w.stages[i].name.value;
    let known = &ids.known;
    let Some((key, r)) = w.stages[i].kind.value.reference() else {
        return;
    };
    if !ids.ids.contains(&r.value) {
        let fix = match nearest(r.value.as_str(), ids.ids.iter().map(StageId::as_str)) {
            Some(n) => format!("did you mean `{n}`? (stage ids: {known})"),
            None => format!("use one of the stage ids: {known}"),
        };
        d.problem(
            r.pos,
            format!(
                "stage `{name}`: `{key}` names stage `{}`, which does not exist",
                r.value
            ),
            Some(fix),
        );
    } else if r.value == ids.ids[i] {
        d.problem(
            r.pos,
            format!("stage `{name}`: `{key}` names the stage itself"),
            Some(format!("name another stage ({known})")),
        );
    }
}

/// A gate's producer: the one written (which must produce the artifact), else the nearest
/// stage that produces it; changes requested go back to it unless the failure route is written.
fn resolve_gate(
    d: &mut Decoder<'_>,
    w: &mut Workflow,
    i: usize,
    artifact: Spanned<String>,
    producer: Option<Spanned<StageId>>,
) {
    let name = w.stages[i].name.value.clone();
    check_artifact(d, &artifact.value, artifact.pos, "artifact");
    let producer = match producer {
        Some(p) => {
            let produces = w
                .stages
                .iter()
                .find(|s| s.stage_id.value == p.value)
                .map(|s| s.produces_kinds().any(|x| x == artifact.value));
            if produces == Some(false) {
                d.problem(
                    p.pos,
                    format!(
                        "gate `{name}` awaits `{}`, but its producer `{}` does not \
                         produce it",
                        artifact.value, p.value
                    ),
                    Some(format!(
                        "add `produces: {}` to stage `{}`",
                        artifact.value, p.value
                    )),
                );
            }
            Some(p)
        }
        None => default_producer(w, i, &artifact.value),
    };
    let Some(producer) = producer else {
        d.problem(
            artifact.pos,
            format!(
                "gate `{name}` awaits `{}`, which no stage produces",
                artifact.value
            ),
            Some(format!(
                "add `produces: {}` to the stage that writes it, or `producer: \
                 <stage_id>`",
                artifact.value
            )),
        );
        return;
    };
    default_failure(w, i, &producer.value);
    w.stages[i].kind.value = StageKind::Gate {
        artifact,
        producer: Some(producer),
    };
}

/// A collector collects a fan-out's work nodes, so the stage it names must be a fan-out.
fn check_collected(d: &mut Decoder<'_>, w: &Workflow, i: usize, collects: &Spanned<StageId>) {
    let name = &w.stages[i].name.value;
    let target = w.stages.iter().find(|s| s.stage_id.value == collects.value);
    if let Some(t) = target
        && !matches!(t.kind.value, StageKind::FanOut { .. })
    {
        d.problem(
            collects.pos,
            format!(
                "collector `{name}` collects stage `{}`, a `{}` stage, which has no \
                 work nodes",
                collects.value,
                t.kind.value.name()
            ),
            Some("a collector collects the work nodes of a `kind: fan_out` stage".into()),
        );
    }
}

/// A fan-out: its item source (an artifact, or its orchestrator agents, not both), exactly
/// one collector, and no success route of its own.
fn check_fan_out(
    d: &mut Decoder<'_>,
    w: &Workflow,
    i: usize,
    items_from: Option<&Spanned<String>>,
    ids: &StageIds,
) {
    let name = &w.stages[i].name.value;
    let id = &ids.ids[i];
    if let Some(from) = items_from {
        check_items_from(d, w, i, from);
        if !w.stages[i].parallel_agents.is_empty() {
            d.problem(
                from.pos,
                format!(
                    "fan-out `{name}` takes its items from `{}`, so it runs no \
                     orchestrator agent",
                    from.value
                ),
                Some("remove `parallel_agents`, or `items_from`".into()),
            );
        }
    }
    let collectors = w
        .stages
        .iter()
        .filter(|s| {
            matches!(&s.kind.value, StageKind::Collector { collects }
                if collects.value == *id)
        })
        .count();
    let s = &w.stages[i];
    if collectors != 1 {
        d.problem(
            s.kind.pos,
            if collectors == 0 {
                format!("fan-out `{name}` has no collector, so its work is never collected")
            } else {
                format!("fan-out `{name}` has {collectors} collectors")
            },
            Some(format!(
                "keep exactly one stage with `kind: collector` and `collects: {id}`"
            )),
        );
    }
    if s.routing.given.contains(&"next_stage_on_success") {
        d.problem(
            s.routing.next_stage_on_success.pos,
            format!(
                "fan-out `{name}`: its work continues at its collector, so it takes \
                 no next_stage_on_success"
            ),
            Some("route from the collector stage instead".into()),
        );
    }
}

/// A deterministic stage names a known function; `validate_artifact` names a known artifact.
fn check_function(
    d: &mut Decoder<'_>,
    w: &Workflow,
    i: usize,
    function: &Spanned<String>,
    args: &serde_json::Value,
) {
    let name = &w.stages[i].name.value;
    if !DETERMINISTIC_FUNCTIONS.contains(&function.value.as_str()) {
        let fix = match nearest(&function.value, DETERMINISTIC_FUNCTIONS.into_iter()) {
            Some(f) => format!(
                "did you mean `{f}`? ({})",
                DETERMINISTIC_FUNCTIONS.join(", ")
            ),
            None => format!("use one of {}", DETERMINISTIC_FUNCTIONS.join(", ")),
        };
        d.problem(
            function.pos,
            format!("unknown function `{}`", function.value),
            Some(fix),
        );
    } else if function.value == "validate_artifact" {
        match args.get("artifact").and_then(|a| a.as_str()) {
            Some(a) => check_artifact(d, a, function.pos, "args.artifact"),
            None => d.problem(
                function.pos,
                format!("stage `{name}`: validate_artifact needs `args: {{artifact: <kind>}}`"),
                Some(format!("artifact kinds: {}", ARTIFACT_KINDS.join(", "))),
            ),
        }
    }
}

/// Artifacts whose entries can be a fan-out's items (`items_from`).
pub const ITEM_ARTIFACTS: [&str; 1] = ["tickets"];

/// `items_from` must name an itemisable artifact that an earlier stage produces.
fn check_items_from(d: &mut Decoder<'_>, w: &Workflow, i: usize, from: &Spanned<String>) {
    let name = &w.stages[i].name.value;
    if !ITEM_ARTIFACTS.contains(&from.value.as_str()) {
        d.problem(
            from.pos,
            format!(
                "fan-out `{name}`: items_from `{}` is not an artifact with items",
                from.value
            ),
            Some(format!("use one of {}", ITEM_ARTIFACTS.join(", "))),
        );
        return;
    }
    let produced = w.stages[..i]
        .iter()
        .any(|s| s.produces_kinds().any(|p| p == from.value));
    if !produced {
        d.problem(
            from.pos,
            format!(
                "fan-out `{name}` takes its items from `{}`, which no earlier stage produces",
                from.value
            ),
            Some(format!(
                "add `produces: {}` to the stage before it that writes it",
                from.value
            )),
        );
    }
}

/// The nearest earlier stage (else any stage) that produces `artifact`.
fn default_producer(w: &Workflow, gate: usize, artifact: &str) -> Option<Spanned<StageId>> {
    let produces = |i: &usize| w.stages[*i].produces_kinds().any(|p| p == artifact);
    let i = (0..gate)
        .rev()
        .find(produces)
        .or_else(|| (gate + 1..w.stages.len()).find(produces))?;
    Some(Spanned {
        value: w.stages[i].stage_id.value.clone(),
        pos: w.stages[gate].kind.pos,
    })
}

/// Sends the failure route of stage `i` to `to` unless the file says where it goes.
fn default_failure(w: &mut Workflow, i: usize, to: &StageId) {
    let r = &mut w.stages[i].routing;
    if !r.given.contains(&"next_stage_on_failure") {
        r.next_stage_on_failure.value = Target::Stage(to.clone());
    }
}

fn check_artifact(d: &mut Decoder<'_>, kind: &str, pos: Pos, key: &str) {
    if ARTIFACT_KINDS.contains(&kind) {
        return;
    }
    let fix = match nearest(kind, ARTIFACT_KINDS.into_iter()) {
        Some(k) => format!("did you mean `{k}`? ({})", ARTIFACT_KINDS.join(", ")),
        None => format!("artifact kinds: {}", ARTIFACT_KINDS.join(", ")),
    };
    d.problem(pos, format!("{key}: unknown artifact `{kind}`"), Some(fix));
}
