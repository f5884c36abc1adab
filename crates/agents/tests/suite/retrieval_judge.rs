//! Relevance judgement (`RetrievalOptions::judge`): the model's grammar-constrained answer
//! reorders and filters a stage's best results; a failing judgement keeps the ranking. With
//! the scripted model and with the OpenAI provider against a loopback chat-completions
//! server (the schema reaches the wire as `json_schema`).

use std::sync::Arc;

use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;
use trellis_agents::StagePack;
use trellis_agents::retrieval::{RetrievalAgent, RetrievalOptions, strategy_of};
use trellis_index::IndexConfig;
use trellis_llm::{ChatRequest, ModelProvider, ModelRegistry, Role};
use trellis_test_support::TempWorkspace;
use trellis_test_support::scripted::{ScriptedProvider, Turn};
use trellis_test_support::wire::{self, Reply, Seen, text_sse};

use super::retrieval::{TASK, plan, write_fixture};

/// The numbers the judge prompt gives the results of `path`.
fn numbers_of(prompt: &str, path: &str) -> Vec<usize> {
    prompt
        .lines()
        .filter_map(|l| {
            let rest = l.strip_prefix('[')?;
            let (n, after) = rest.split_once("] ")?;
            after.starts_with(path).then(|| n.parse().ok())?
        })
        .collect()
}

fn user_text(r: &ChatRequest) -> String {
    r.messages
        .iter()
        .filter(|m| m.role == Role::User)
        .map(|m| m.content.clone())
        .collect()
}

/// Queries for query generation; for the judge, the results in `src/calc.py` only.
fn answer(r: &ChatRequest) -> Value {
    match r.response_format.as_ref().map(|f| f.name.as_str()) {
        Some("relevance") => json!({ "relevant": numbers_of(&user_text(r), "src/calc.py") }),
        _ => json!({ "queries": ["cart total price", "tax rate configuration"] }),
    }
}

async fn run(provider: Arc<dyn ModelProvider>, root: &std::path::Path, judge: bool) -> StagePack {
    let plan = plan("feature_with_iterative_testing", &[], TASK);
    let strategy = strategy_of(&plan).unwrap();
    let stage = plan.planned[0].context.clone();
    let options = RetrievalOptions {
        judge,
        ..RetrievalOptions::default()
    };
    let agent = RetrievalAgent::new(root, IndexConfig::default(), None, provider, options);
    agent
        .prepare(&strategy, None, CancellationToken::new())
        .await
        .unwrap();
    let mut packs = agent
        .upfront(
            TASK,
            &strategy,
            std::slice::from_ref(&stage),
            CancellationToken::new(),
        )
        .await
        .unwrap();
    packs.remove(&stage.stage_name).unwrap()
}

/// What a judged pack must be: the judged window of `before` (its first `window` items)
/// reduced to the items in `src/calc.py`, then the rest of `before`.
fn assert_judged(before: &StagePack, after: &StagePack, window: usize) {
    let paths = |p: &StagePack| -> Vec<(String, u32)> {
        p.items
            .iter()
            .map(|i| (i.path.clone(), i.start_line))
            .collect()
    };
    let before_paths = paths(before);
    let n = window.min(before_paths.len());
    let mut want: Vec<(String, u32)> = before_paths[..n]
        .iter()
        .filter(|(p, _)| p == "src/calc.py")
        .cloned()
        .collect();
    assert!(!want.is_empty() && want.len() < n, "{before_paths:?}");
    want.extend(before_paths[n..].iter().cloned());
    assert_eq!(paths(after), want);
    let dropped: usize = before.items[..n]
        .iter()
        .filter(|i| i.path != "src/calc.py")
        .map(|i| i.tokens)
        .sum();
    // The items' tokens drop by the judged-out items' (the code maps follow the items'
    // files, so theirs are compared apart).
    let maps = |p: &StagePack| p.maps.as_ref().map_or(0, |m| m.tokens);
    assert_eq!(
        after.used_tokens - maps(after),
        before.used_tokens - maps(before) - dropped
    );
    assert!(
        after.notes.iter().any(|n| n.contains("the model judged")),
        "{:?}",
        after.notes
    );
}

#[tokio::test]
async fn the_scripted_model_judges_the_best_results() {
    let ws = TempWorkspace::new("retr-judge").unwrap();
    write_fixture(ws.path());
    let plain = ScriptedProvider::responding(|r| Turn::Json(answer(r)));
    let before = run(Arc::new(plain.clone()), ws.path(), false).await;
    assert_eq!(plain.requests().len(), 1, "no judgement unless asked");
    let judging = ScriptedProvider::responding(|r| Turn::Json(answer(r)));
    let after = run(Arc::new(judging.clone()), ws.path(), true).await;
    assert_judged(
        &before,
        &after,
        RetrievalOptions::default().judge_candidates,
    );
    let requests = judging.requests();
    assert_eq!(requests.len(), 2);
    let format = requests[1].response_format.as_ref().unwrap();
    let shown = before.items.len().min(8);
    let numbers: Vec<usize> = (1..=shown).collect();
    assert_eq!(
        format.schema["properties"]["relevant"]["items"]["enum"],
        json!(numbers)
    );
    assert!(user_text(&requests[1]).contains(TASK));
}

#[tokio::test]
async fn a_failing_judgement_keeps_the_ranking() {
    let ws = TempWorkspace::new("retr-judge-fail").unwrap();
    write_fixture(ws.path());
    let plain = ScriptedProvider::responding(|r| Turn::Json(answer(r)));
    let before = run(Arc::new(plain), ws.path(), false).await;
    let failing = ScriptedProvider::responding(|r| match r.response_format.as_ref() {
        Some(f) if f.name == "relevance" => Turn::HttpError {
            status: 400,
            message: "grammar too large".into(),
        },
        _ => Turn::Json(answer(r)),
    });
    let after = run(Arc::new(failing), ws.path(), true).await;
    assert_eq!(after.items, before.items);
    assert!(
        after
            .notes
            .iter()
            .any(|n| n.starts_with("relevance judgement failed") && n.ends_with("ranking kept")),
        "{:?}",
        after.notes
    );
}

/// A loopback chat-completions endpoint answering with `answer` (streamed as one chunk)
/// and recording the request bodies; it serves until the returned server is dropped.
fn serve() -> (wire::Wire, Seen) {
    wire::serve(|body| {
        // The request as the model side sees it: the user message and the schema's name.
        let request = ChatRequest {
            messages: vec![trellis_llm::Message::user(
                body["messages"][1]["content"].as_str().unwrap_or_default(),
            )],
            response_format: body["response_format"]["json_schema"]["name"]
                .as_str()
                .map(|name| trellis_llm::types::ResponseFormat {
                    name: name.into(),
                    schema: Value::Null,
                }),
            ..ChatRequest::default()
        };
        Reply::sse(text_sse(&answer(&request).to_string()))
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_openai_wire_endpoint_gets_the_schema_as_json_schema() {
    let ws = TempWorkspace::new("retr-judge-wire").unwrap();
    write_fixture(ws.path());
    let (url, bodies) = serve();
    let toml = format!(
        "[models]\ndefault = \"mock\"\n\n[models.profiles.mock]\nprovider = \"openai\"\nbase_url = \"{url}\"\nmodel = \"mock-model\"\nmax_retries = 0\n"
    );
    let config =
        trellis_config::Config::from_toml(std::path::Path::new("config.toml"), &toml).unwrap();
    let provider = ModelRegistry::from_config(&config)
        .unwrap()
        .for_role("default")
        .unwrap();
    let before = run(provider.clone(), ws.path(), false).await;
    let after = run(provider, ws.path(), true).await;
    assert_judged(
        &before,
        &after,
        RetrievalOptions::default().judge_candidates,
    );
    let bodies = bodies.lock().unwrap().clone();
    let judge = bodies
        .iter()
        .find(|b| b["response_format"]["json_schema"]["name"] == "relevance")
        .unwrap();
    assert_eq!(judge["response_format"]["type"], "json_schema");
    let schema = &judge["response_format"]["json_schema"]["schema"];
    assert_eq!(schema["required"], json!(["relevant"]));
    assert!(schema["properties"]["relevant"]["items"]["enum"].is_array());
    assert_eq!(judge["temperature"], 0.0);
}
