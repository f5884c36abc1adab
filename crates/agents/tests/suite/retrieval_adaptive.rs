//! Retrieval agent, adaptive mode and query fallbacks.

use serde_json::json;
use tokio_util::sync::CancellationToken;
use trellis_agents::RetrievalOptions;
use trellis_agents::retrieval::{FAILURE_SOURCE, strategy_of};
use trellis_llm::Role;
use trellis_test_support::TempWorkspace;
use trellis_test_support::scripted::{ScriptedProvider, Turn};

use super::retrieval::{TASK, agent, assert_grounded, plan, queries, write_fixture};

/// The run's worktree: the fixture as an agent left it (three lines added on top, `total`
/// edited), so line numbers and texts differ from the indexed repository.
fn edited_worktree(ws: &TempWorkspace) -> (std::path::PathBuf, u32) {
    let wt = ws.path().join("worktree");
    write_fixture(&wt);
    let calc = std::fs::read_to_string(wt.join("src/calc.py")).unwrap();
    let calc = format!(
        "# Edited by the code agent.\n# Second line.\n# Third line.\n{}",
        calc.replace("    result = 0\n", "    result = 0  # running sum\n")
    );
    std::fs::write(wt.join("src/calc.py"), &calc).unwrap();
    let line = calc
        .lines()
        .position(|l| l.contains("for item in items[1:]"))
        .unwrap() as u32
        + 1;
    (wt, line)
}

#[tokio::test]
async fn adaptive_reads_the_failure_and_the_regions_it_names_from_the_worktree() {
    let ws = TempWorkspace::new("retr-adaptive").unwrap();
    let repo = ws.path().join("repo");
    write_fixture(&repo);
    let (wt, line) = edited_worktree(&ws);
    let plan = plan("feature_with_iterative_testing", &[], TASK);
    let strategy = strategy_of(&plan).unwrap();
    let retry = plan.planned[0].context.clone();
    assert_eq!(retry.stage_name, "code_generation");
    let provider = ScriptedProvider::new([queries(&["sum item prices loop"])]);
    let agent = agent(&repo, &provider, RetrievalOptions::default());
    agent
        .prepare(&strategy, None, CancellationToken::new())
        .await
        .unwrap();
    let output = format!(
        "FAILED tests/test_calc.py::test_total - assert 5 == 6\n\n    def test_total():\n\
         >       assert total([Item(1), Item(2), Item(3)]) == 6\nE       assert 5 == 6\n\n\
         tests/test_calc.py:10: AssertionError\nTraceback:\n  File \"{}\", line {line}, in total\n",
        wt.join("src/calc.py").display()
    );
    let failure = json!({
        "failure": true,
        "output": { "tests": output, "exit_code": 1 },
        "files_changed": ["src/calc.py"],
    });
    let pack = agent
        .adaptive(
            TASK,
            &strategy,
            &retry,
            &failure,
            1,
            &wt,
            CancellationToken::new(),
        )
        .await
        .unwrap();

    // The model saw the failure and the locations.
    let requests = provider.requests();
    assert_eq!(requests.len(), 1);
    let prompt: String = requests[0]
        .messages
        .iter()
        .filter(|m| m.role == Role::User)
        .map(|m| m.content.clone())
        .collect();
    assert!(
        prompt.contains("Stage `code_generation` failed"),
        "{prompt}"
    );
    assert!(prompt.contains("AssertionError"), "{prompt}");
    assert!(prompt.contains(&format!("src/calc.py:{line}")), "{prompt}");
    assert!(prompt.contains(TASK));

    assert_eq!(pack.round, 1);
    assert_eq!(pack.stage, "code_generation");
    assert_eq!(pack.queries[0], TASK);
    assert_eq!(pack.queries[1], "sum item prices loop");
    let ids = pack.queries.last().unwrap();
    assert!(ids.contains("test_total") && ids.contains("total"), "{ids}");
    assert!(
        !ids.contains("files_changed") && !ids.contains(".py"),
        "{ids}"
    );

    // The regions named by the failure come first, read from the worktree.
    let regions: Vec<_> = pack
        .items
        .iter()
        .take_while(|i| i.source == FAILURE_SOURCE)
        .collect();
    assert_eq!(regions.len(), 2, "{pack:#?}");
    let calc = regions.iter().find(|i| i.path == "src/calc.py").unwrap();
    assert_eq!(calc.symbol.as_deref(), Some("total"));
    assert!(calc.start_line <= line && line <= calc.end_line);
    assert!(calc.text.contains("# running sum"), "{calc:?}");
    assert!(calc.note.as_deref().unwrap().contains(&line.to_string()));
    let test = regions
        .iter()
        .find(|i| i.path == "tests/test_calc.py")
        .unwrap();
    assert_eq!(test.symbol.as_deref(), Some("test_total"));
    // Index results follow, re-checked against the worktree (moved `add`, edited `total`).
    assert!(pack.items.len() > regions.len());
    assert!(
        pack.items
            .iter()
            .any(|i| i.source == "codebase_semantic_search" && i.path == "src/calc.py"),
        "{pack:#?}"
    );
    assert_grounded(&pack, &wt);
    assert!(pack.used_tokens <= pack.budget_tokens);
    assert_eq!(pack.budget_tokens, 30_000);
    let md = pack.render();
    assert!(md.contains("enriched after failure, round 1"), "{md}");
    assert!(
        md.contains(&format!("named by the failure at line {line}")),
        "{md}"
    );
}

#[tokio::test]
async fn model_failure_falls_back_to_deterministic_queries() {
    let ws = TempWorkspace::new("retr-fallback").unwrap();
    write_fixture(ws.path());
    let plan = plan("feature_with_iterative_testing", &[], TASK);
    let strategy = strategy_of(&plan).unwrap();
    let stages: Vec<_> = plan.planned.iter().map(|p| p.context.clone()).collect();
    let provider = ScriptedProvider::new([
        Turn::HttpError {
            status: 500,
            message: "model server down".into(),
        },
        Turn::Text("I am not able to help with that.".into()),
    ]);
    let agent = agent(ws.path(), &provider, RetrievalOptions::default());
    agent
        .prepare(&strategy, None, CancellationToken::new())
        .await
        .unwrap();
    let packs = agent
        .upfront(TASK, &strategy, &stages, CancellationToken::new())
        .await
        .unwrap();
    assert_eq!(provider.requests().len(), 2);
    for pack in packs.values() {
        assert!(!pack.queries_from_model);
        assert_eq!(pack.queries[0], TASK);
        assert!(pack.queries.len() >= 2, "{:?}", pack.queries);
        assert!(
            pack.notes
                .iter()
                .any(|n| n.contains("used deterministic queries")),
            "{:?}",
            pack.notes
        );
        assert!(!pack.items.is_empty());
    }
    let code = &packs["code_generation"];
    assert_eq!(code.queries[1], "total calc.py tax_rate");
    assert!(
        code.notes[0].contains("model server down"),
        "{:?}",
        code.notes
    );
    let test = &packs["test_generation_and_execution"];
    assert!(
        test.queries[2].starts_with("test generation execution"),
        "{:?}",
        test.queries
    );

    // Adaptive: the script is exhausted, so the model call fails too.
    let failure =
        json!({ "error": "thread 'main' panicked: `parse_config` returned an empty currency" });
    let pack = agent
        .adaptive(
            TASK,
            &strategy,
            &stages[0],
            &failure,
            2,
            ws.path(),
            CancellationToken::new(),
        )
        .await
        .unwrap();
    assert!(!pack.queries_from_model);
    assert!(pack.notes.iter().any(|n| n.contains("names no file:line")));
    assert!(
        pack.queries.iter().any(|q| q.contains("panicked")),
        "{:?}",
        pack.queries
    );
    assert!(pack.queries.last().unwrap().contains("parse_config"));
    assert!(
        pack.items
            .iter()
            .any(|i| i.symbol.as_deref() == Some("parse_config")),
        "{pack:#?}"
    );
}
