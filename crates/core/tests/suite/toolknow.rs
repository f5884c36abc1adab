//! The workspace's tool knowledge graph as the agents' advisor: a repeated pattern is
//! predicted above the speculation threshold, and used speculations lower the threshold,
//! persisted across processes.

use trellis_core::toolknow::ToolKnowledge;
use trellis_store::{Store, StoreOptions};
use trellis_toolgraph::ExecutedCall;
use trellis_tools::{SpeculationOutcome, ToolAdvisor};

#[test]
fn a_repeated_pattern_is_predicted_above_the_threshold_and_used_results_lower_it() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open_workspace(dir.path(), StoreOptions::default()).unwrap();
    let k = ToolKnowledge::new(store.clone(), true);
    assert!(k.predict_next(&["lookup".into()]).is_empty());
    for _ in 0..30 {
        k.learn(
            "read/reader",
            vec![
                ExecutedCall::new("lookup", true),
                ExecutedCall::new("details", true),
            ],
        );
    }
    let predicted = k.predict_next(&["lookup".into()]);
    let (tool, confidence) = predicted.first().cloned().unwrap();
    assert_eq!(tool, "details");
    assert!(
        confidence >= k.threshold(),
        "{confidence} < {}",
        k.threshold()
    );
    assert_eq!(k.threshold(), 0.92);
    for _ in 0..60 {
        k.speculated("details", confidence, SpeculationOutcome::Used);
    }
    let lowered = k.threshold();
    assert!(lowered < 0.92, "{lowered}");
    // Another process sees the same graph and threshold.
    store.flush().unwrap();
    let again = ToolKnowledge::new(store, true);
    assert_eq!(again.threshold(), lowered);
    assert_eq!(again.predict_next(&["lookup".into()])[0].0, "details");
}

#[test]
fn the_call_log_keeps_outcomes_of_real_tools_only() {
    use trellis_core::toolknow::CallLog;
    use trellis_protocol::{SessionEvent, ToolStatus};
    let log = CallLog::default();
    let done = |name: &str, status| SessionEvent::ToolCompleted {
        turn: 1,
        call_id: "c".into(),
        name: name.into(),
        output: String::new(),
        status,
        duration_ms: 0,
    };
    log.note(&done("read_file", ToolStatus::Ok));
    log.note(&done("execute_dag", ToolStatus::Ok));
    log.note(&done("search_tools", ToolStatus::Ok));
    log.note(&done("grep", ToolStatus::Error));
    log.note(&done("shell", ToolStatus::Interrupted));
    assert_eq!(
        log.take(),
        vec![
            ExecutedCall::new("read_file", true),
            ExecutedCall::new("grep", false)
        ]
    );
    assert!(log.take().is_empty());
}

#[test]
fn a_learned_workflow_is_suggested_for_speculation_from_the_task_text() {
    use trellis_tools::{AdviceMode, ToolSpec};
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open_workspace(dir.path(), StoreOptions::default()).unwrap();
    let k = ToolKnowledge::new(store, true);
    let spec = |name: &str, description: &str| ToolSpec {
        name: name.into(),
        description: description.into(),
        input_schema: serde_json::json!({"type": "object"}),
        output_schema: None,
    };
    let tools = [
        spec("list_issues", "List the open issues."),
        spec("get_issue", "Get one issue and the file it names."),
        spec("read_source", "Read a source file."),
        spec("send_email", "Send an email."),
    ];
    let task = "Find the open issue and read the source file it names.";
    // Nothing learned: at most the best tool alone, below the suggestion band.
    let unseen = k.suggest(task, &tools).unwrap();
    assert_eq!(unseen.mode, AdviceMode::Explicit, "{unseen:?}");
    for _ in 0..12 {
        k.learn(
            "investigate/reader",
            ["list_issues", "get_issue", "read_source"]
                .map(|t| ExecutedCall::new(t, true))
                .to_vec(),
        );
    }
    let some = k.suggest(task, &tools).unwrap();
    assert_eq!(some.mode, AdviceMode::Suggestion, "{some:?}");
    for _ in 0..18 {
        k.learn(
            "investigate/reader",
            ["list_issues", "get_issue", "read_source"]
                .map(|t| ExecutedCall::new(t, true))
                .to_vec(),
        );
    }
    let s = k.suggest(task, &tools).unwrap();
    assert_eq!(
        s.tools,
        ["list_issues", "get_issue", "read_source"],
        "{s:?}"
    );
    assert_eq!(s.mode, AdviceMode::Speculative, "{s:?}");
    assert!(s.confidence >= 0.92, "{s:?}");
    assert!(s.explanation.contains("list_issues → get_issue"), "{s:?}");
    let report = k.thresholds().unwrap();
    assert_eq!((report.threshold, report.samples), (0.92, 0));
}
