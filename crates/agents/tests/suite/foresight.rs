//! Foresight: before the first model call, a confident suggested workflow's safe steps run
//! ahead and their results are in the prompt; a less confident one is shown as a
//! suggestion; unsafe or unbound steps never run ahead.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use serde_json::{Value, json};
use trellis_protocol::SessionEvent;
use trellis_test_support::tools::{FakeTool, Runs, count, object_schema};
use trellis_tools::{
    AdviceMode, Registry, SpeculationOutcome, Suggested, ToolAdvisor, ToolOutput, ToolSpec,
    ToolsConfig,
};

use super::speculation::{call, report, run_with};

/// list_issues → {issue_id} → get_issue(issue_id) → {path} → read_source(path); save_note
/// (path) writes; search_web(query) has no producer of `query`.
fn registry(runs: &Runs) -> Registry {
    let mut r = Registry::new();
    let tools: [(&str, &[&str], Value, bool); 5] = [
        ("list_issues", &[], json!({"issue_id": "42"}), true),
        (
            "get_issue",
            &["issue_id"],
            json!({"path": "src/a.rs"}),
            true,
        ),
        (
            "read_source",
            &["path"],
            json!({"source": "fn a() {}"}),
            true,
        ),
        ("save_note", &["path"], json!({"saved": true}), false),
        ("search_web", &["query"], json!({"hits": 0}), true),
    ];
    for (name, params, data, read_only) in tools {
        let outputs: Vec<(&str, &str)> = data
            .as_object()
            .unwrap()
            .keys()
            .map(|k| (k.as_str(), "string"))
            .collect();
        let inputs: Vec<(&str, &str)> = params.iter().map(|p| (*p, "string")).collect();
        let label = name.to_owned();
        let answer = data.clone();
        let mut tool = FakeTool::new(name)
            .input(object_schema(&inputs, params))
            .output(object_schema(&outputs, &[]))
            .counting(runs)
            .returns(move |args| {
                Ok(ToolOutput {
                    text: format!("{label} {args} → {answer}"),
                    data: Some(answer.clone()),
                })
            });
        if !read_only {
            tool = tool.writes();
        }
        r.register(tool.arc());
    }
    r.allow(
        "reader",
        [
            "list_issues",
            "get_issue",
            "read_source",
            "save_note",
            "search_web",
        ],
    );
    r
}

/// Suggests a fixed workflow; records outcomes.
struct Fixedly(Suggested, Mutex<Vec<(String, SpeculationOutcome)>>);

impl Fixedly {
    fn new(
        tools: &[&str],
        edges: &[(usize, usize)],
        confidence: f64,
        mode: AdviceMode,
    ) -> Arc<Self> {
        Arc::new(Self(
            Suggested {
                tools: tools.iter().map(|t| (*t).to_owned()).collect(),
                edges: edges.to_vec(),
                confidence,
                mode,
                explanation: "learned order a → b".into(),
            },
            Mutex::default(),
        ))
    }

    fn outcomes(&self) -> Vec<(String, SpeculationOutcome)> {
        self.1.lock().unwrap().clone()
    }
}

impl ToolAdvisor for Fixedly {
    fn suggest(&self, _intent: &str, tools: &[ToolSpec]) -> Option<Suggested> {
        assert!(
            tools.iter().any(|t| t.name == "list_issues"),
            "the agent's tools"
        );
        Some(self.0.clone())
    }

    fn predict_next(&self, _completed: &[String]) -> Vec<(String, f64)> {
        Vec::new()
    }

    fn threshold(&self) -> f64 {
        0.92
    }

    fn speculated(&self, tool: &str, _confidence: f64, outcome: SpeculationOutcome) {
        self.1.lock().unwrap().push((tool.into(), outcome));
    }
}

const CHAIN: [&str; 4] = ["list_issues", "get_issue", "read_source", "save_note"];
const EDGES: [(usize, usize); 3] = [(0, 1), (1, 2), (1, 3)];

fn first_prompt(requests: &[trellis_llm::ChatRequest]) -> String {
    requests[0]
        .messages
        .iter()
        .map(|m| m.content.as_str())
        .collect::<Vec<_>>()
        .join("\n")
}

#[tokio::test]
async fn a_confident_workflow_runs_ahead_and_the_model_answers_from_its_results() {
    let runs: Runs = Arc::default();
    let advisor = Fixedly::new(&CHAIN, &EDGES, 0.95, AdviceMode::Speculative);
    let (events, requests) = run_with(
        vec![report()],
        advisor.clone(),
        registry(&runs),
        ToolsConfig::default(),
    )
    .await;
    // One model call: the three read-only steps ran ahead, outputs wired by name.
    assert_eq!(requests.len(), 1);
    for tool in ["list_issues", "get_issue", "read_source"] {
        assert_eq!(count(&runs, tool), 1, "{tool}");
    }
    assert_eq!(count(&runs, "save_note"), 0, "it writes");
    let prompt = first_prompt(&requests);
    assert!(prompt.contains("confidence 0.95"), "{prompt}");
    assert!(
        prompt.contains(r#"### get_issue {"issue_id":"42"}"#),
        "{prompt}"
    );
    assert!(
        prompt.contains(r#"### read_source {"path":"src/a.rs"}"#),
        "{prompt}"
    );
    assert!(prompt.contains("fn a() {}"), "{prompt}");
    assert!(
        prompt.contains("4. save_note (after get_issue)"),
        "{prompt}"
    );
    // The graph does not learn its own speculation: no tool events.
    assert!(
        !events
            .iter()
            .any(|e| matches!(e, SessionEvent::ToolCompleted { .. }))
    );
    assert!(events.iter().any(
        |e| matches!(e, SessionEvent::Note { text } if text.contains("ran the task's usual workflow ahead"))
    ));
    let mut outcomes = advisor.outcomes();
    outcomes.sort_by(|a, b| a.0.cmp(&b.0));
    assert_eq!(
        outcomes,
        [
            ("get_issue".to_owned(), SpeculationOutcome::Used),
            ("list_issues".to_owned(), SpeculationOutcome::Used),
            ("read_source".to_owned(), SpeculationOutcome::Used),
        ]
    );
}

#[tokio::test]
async fn an_identical_call_is_answered_from_the_result_and_another_one_wastes_it() {
    let runs: Runs = Arc::default();
    let advisor = Fixedly::new(&CHAIN, &EDGES, 0.95, AdviceMode::Speculative);
    let (events, _) = run_with(
        vec![
            call("c1", "read_source", json!({"path": "src/a.rs"})),
            call("c2", "get_issue", json!({"issue_id": "7"})),
            report(),
        ],
        advisor.clone(),
        registry(&runs),
        ToolsConfig::default(),
    )
    .await;
    assert_eq!(
        count(&runs, "read_source"),
        1,
        "answered from the kept result"
    );
    assert_eq!(count(&runs, "get_issue"), 2, "other arguments run as usual");
    let answered = events.iter().find_map(|e| match e {
        SessionEvent::ToolCompleted {
            call_id, output, ..
        } if call_id == "c1" => Some(output.clone()),
        _ => None,
    });
    assert!(answered.unwrap().contains("fn a() {}"));
    let outcomes: BTreeMap<String, SpeculationOutcome> = advisor.outcomes().into_iter().collect();
    assert_eq!(outcomes["read_source"], SpeculationOutcome::Used);
    assert_eq!(outcomes["get_issue"], SpeculationOutcome::Wasted);
    assert_eq!(outcomes["list_issues"], SpeculationOutcome::Used);
}

#[tokio::test]
async fn a_suggestion_is_shown_and_nothing_runs() {
    let runs: Runs = Arc::default();
    let advisor = Fixedly::new(&CHAIN, &EDGES, 0.78, AdviceMode::Suggestion);
    let (_, requests) = run_with(
        vec![report()],
        advisor.clone(),
        registry(&runs),
        ToolsConfig::default(),
    )
    .await;
    assert!(runs.lock().unwrap().is_empty());
    let prompt = first_prompt(&requests);
    assert!(prompt.contains("suggests a workflow"), "{prompt}");
    assert!(prompt.contains("confidence 0.78"), "{prompt}");
    assert!(
        prompt.contains("1. list_issues\n2. get_issue (after list_issues)"),
        "{prompt}"
    );
    assert!(advisor.outcomes().is_empty());
}

#[tokio::test]
async fn unbound_arguments_fall_back_to_a_suggestion_and_foresight_can_be_turned_off() {
    let runs: Runs = Arc::default();
    // `search_web` needs a query nothing provides by name; `read_source` depends on it.
    let advisor = Fixedly::new(
        &["search_web", "read_source"],
        &[(0, 1)],
        0.97,
        AdviceMode::Speculative,
    );
    let (_, requests) = run_with(
        vec![report()],
        advisor.clone(),
        registry(&runs),
        ToolsConfig::default(),
    )
    .await;
    assert!(runs.lock().unwrap().is_empty());
    let prompt = first_prompt(&requests);
    assert!(prompt.contains("It was not run ahead"), "{prompt}");
    assert!(advisor.outcomes().is_empty());

    let advisor = Fixedly::new(&CHAIN, &EDGES, 0.95, AdviceMode::Speculative);
    let mut off = ToolsConfig::default();
    off.speculation.from_task = false;
    let (_, requests) = run_with(vec![report()], advisor, registry(&runs), off).await;
    assert!(runs.lock().unwrap().is_empty());
    assert!(!first_prompt(&requests).contains("tool knowledge graph"));
}
