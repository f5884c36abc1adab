//! The reference `retrieval_strategy_config` blocks (`tests/fixtures/seed000_*.yaml`, both
//! spellings) parse as written.

use std::collections::BTreeMap;

use trellis_agents::retrieval::RetrievalStrategyConfig;
use trellis_agents::retrieval::strategy::IndexLevel;
use trellis_index::Category;
use trellis_index::strategy::{Priority, RetrievalScope, source_categories};

fn load(name: &str, key: &str) -> RetrievalStrategyConfig {
    let path = format!("{}/tests/fixtures/{name}", env!("CARGO_MANIFEST_DIR"));
    let text = std::fs::read_to_string(path).unwrap();
    let text = text.trim().trim_end_matches(',');
    let mut map: BTreeMap<String, RetrievalStrategyConfig> = yaml_serde::from_str(text).unwrap();
    map.remove(key).unwrap()
}

#[test]
fn workflow_file_form_code() {
    let s = load("seed000_feature_strategy.yaml", "retrieval_strategy_config");
    assert!(s.enabled);
    assert!(s.ast_enabled());
    assert_eq!(s.index_level(), IndexLevel::Function);
    assert!(s.lsp_integration.enabled());
    let sources = s.sources();
    assert_eq!(sources.len(), 5);
    assert_eq!(sources[0].source, "codebase_semantic_search");
    assert_eq!(sources[0].priority(), (Priority::High, false));
    assert_eq!(
        source_categories(&sources[0], true),
        Some(vec![Category::Code, Category::Other])
    );
    // LSP and web are not served by the index.
    assert_eq!(source_categories(&sources[1], true), None);
    // The CVE source only runs in its trigger stage.
    assert!(!sources[4].applies_in(Some("code_generation")));
    assert!(sources[4].applies_in(Some("security_review")));
    assert_eq!(s.budget_for(Some("code_generation")), Some(30000));
    assert_eq!(s.budget_for(Some("lint_and_format")), Some(10000));
    assert_eq!(
        s.retrieval_hints.avoid,
        ["test_code", "deprecated_patterns"]
    );
}

#[test]
fn workflow_file_form_documents() {
    let s = load(
        "seed000_architecture_strategy.yaml",
        "retrieval_strategy_config",
    );
    assert!(!s.ast_enabled());
    assert_eq!(s.index_level(), IndexLevel::Section);
    assert!(!s.lsp_integration.enabled());
    let sources = s.sources();
    assert_eq!(
        source_categories(&sources[1], false),
        Some(vec![Category::Decision])
    );
    assert_eq!(sources[2].priority(), (Priority::Medium, false));
    assert_eq!(s.budget_for(Some("planning")), Some(20000));
}

#[test]
fn orchestrator_forms() {
    let s = load("seed000_orchestrator_code.yaml", "strategy_config");
    assert!(s.ast_enabled());
    assert_eq!(s.index_level, Some(IndexLevel::Function));
    assert_eq!(s.rag_chunk_strategy.as_deref(), Some("semantic_functions"));
    assert_eq!(s.context_sources.len(), 5);
    // `code_gen` is the budget of a stage called `code_generation`.
    assert_eq!(s.budget_for(Some("code_generation")), Some(30000));
    // A conditional source applies in a stage named after its condition.
    assert!(s.context_sources[4].applies_in(Some("security_review")));
    assert!(!s.context_sources[4].applies_in(Some("code_generation")));

    let p = load(
        "seed000_orchestrator_plan.yaml",
        "retrieval_strategy_config",
    );
    assert_eq!(p.budget_for(Some("1")), Some(30000));
    assert_eq!(p.budget_for(Some("4")), Some(10000));
}

#[test]
fn unknown_fields_are_rejected() {
    let err = yaml_serde::from_str::<RetrievalStrategyConfig>("ast_parsng: true\n").unwrap_err();
    assert!(err.to_string().contains("ast_parsng"), "{err}");
}

#[test]
fn the_workflow_checker_names_unknown_lsp_tools_and_keys() {
    let ok = serde_json::json!({
        "enabled": true,
        "lsp_integration": { "enabled": true, "tools": ["get_signature", "find_definition"] },
        "rag_strategy": { "sources": [{ "name": "lsp_tools", "execution_timing": "on_demand" }] },
    });
    RetrievalStrategyConfig::check(&ok).unwrap();
    let s: RetrievalStrategyConfig = serde_json::from_value(ok).unwrap();
    assert!(s.sources()[0].on_demand());

    let unknown_tool = serde_json::json!({
        "lsp_integration": { "enabled": true, "tools": ["get_referenses"] },
    });
    let err = RetrievalStrategyConfig::check(&unknown_tool).unwrap_err();
    assert!(err.contains("unknown tool `get_referenses`"), "{err}");
    assert!(err.contains("get_references"), "{err}");

    let unknown_key = serde_json::json!({ "lsp_integraton": true });
    let err = RetrievalStrategyConfig::check(&unknown_key).unwrap_err();
    assert!(err.contains("lsp_integraton"), "{err}");
}

#[test]
fn the_presets_hand_the_index_its_presets() {
    assert_eq!(
        RetrievalStrategyConfig::code().scope(),
        RetrievalScope::code()
    );
    assert_eq!(
        RetrievalStrategyConfig::docs().scope(),
        RetrievalScope::docs()
    );
    let s = load("seed000_feature_strategy.yaml", "retrieval_strategy_config");
    let scope = s.scope();
    assert!(scope.ast);
    assert_eq!(scope.sources, s.sources());
    assert_eq!(scope.hints, s.retrieval_hints);
}
