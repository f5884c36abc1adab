//! The orchestrator's choice of a workflow: the model's, unless it chose a workflow whose
//! selection patterns do not match the request while another of the same kind has patterns
//! that do.

use tokio_util::sync::CancellationToken;
use trellis_agents::orchestrator::{DecidedBy, Overrides, ProjectContext, orchestrate};
use trellis_test_support::scripted::{ScriptedProvider, Turn};
use trellis_workflow::Catalog;

async fn choose(request: &str, model_says: &str) -> trellis_agents::orchestrator::Orchestration {
    let catalog = Catalog::discover(None, &[], None);
    let workflows: Vec<_> = catalog.entries().iter().map(|e| &e.workflow).collect();
    let answer = format!(r#"{{"reasoning": "r", "workflow": "{model_says}", "stages": []}}"#);
    let model = ScriptedProvider::new(vec![Turn::Text(answer)]);
    orchestrate(
        &model,
        &workflows,
        request,
        ProjectContext::default(),
        &Overrides::default(),
        CancellationToken::new(),
    )
    .await
    .unwrap()
}

#[tokio::test]
async fn a_fix_request_goes_to_the_workflow_whose_patterns_match_it() {
    let o = choose(
        "Fix the crash in parse() on empty input",
        "feature_with_iterative_testing",
    )
    .await;
    assert_eq!(
        (o.workflow.as_str(), o.workflow_by),
        ("bug_fix", DecidedBy::Patterns)
    );
    assert!(
        o.notes
            .iter()
            .any(|n| n.contains("whose selection patterns do not match")),
        "{:?}",
        o.notes
    );
}

#[tokio::test]
async fn the_model_decides_when_no_pattern_or_another_kind_is_involved() {
    // No workflow's patterns match: the model's choice.
    let o = choose(
        "Add a CSV export of the stock levels",
        "feature_with_iterative_testing",
    )
    .await;
    assert_eq!(o.workflow, "feature_with_iterative_testing");
    assert_eq!(o.workflow_by, DecidedBy::Model);
    // A question about a crash is a discussion: another kind than the fix workflow.
    let o = choose(
        "Why does parse() crash on empty input?",
        "architecture_discussion",
    )
    .await;
    assert_eq!(o.workflow, "architecture_discussion");
    assert_eq!(o.workflow_by, DecidedBy::Model);
    // The model's choice matches patterns of its own: it stands.
    let o = choose(
        "Implement the export feature and fix its error handling",
        "feature_with_iterative_testing",
    )
    .await;
    assert_eq!(o.workflow_by, DecidedBy::Model);
}
