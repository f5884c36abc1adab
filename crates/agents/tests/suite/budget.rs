//! The tool-schema budget: an agent's own tools always, the MCP tools most relevant to the
//! task within the budget, `search_tools` for the rest — and what it finds is offered next.

use std::sync::Arc;

use serde_json::{Value, json};
use trellis_agents::{AgentOutcome, AgentRun, Resume, RoleSpec};
use trellis_llm::{ChatRequest, FinishReason, Message, Role, StreamEvent};
use trellis_test_support::TempWorkspace;
use trellis_test_support::scripted::{ScriptedProvider, Turn};
use trellis_test_support::tools::FakeTool;
use trellis_tools::{NonInteractive, Registry, Tool, ToolEnv, ToolSource, ToolsConfig, Workspace};

fn tool(name: &str, description: &str) -> Arc<dyn Tool> {
    FakeTool::new(name)
        .description(description)
        .input(json!({"type": "object", "properties": {"q": {"type": "string", "description": "What to look up, in the tool's own terms."}}}))
        .arc()
}

/// An MCP server's tools, as the hub offers them.
struct Server(Vec<Arc<dyn Tool>>);

impl ToolSource for Server {
    fn tools(&self) -> Vec<Arc<dyn Tool>> {
        self.0.clone()
    }
}

/// 40 tools of one server: a weather forecast, a stock quote, and 38 others.
fn server() -> Server {
    let mut tools = vec![
        tool(
            "srv__weather_forecast",
            "Weather forecast for a city: temperature, rain and wind for the next days.",
        ),
        tool(
            "srv__stock_quote",
            "The latest stock quote (price, change) of a ticker symbol on an exchange.",
        ),
    ];
    for i in 0..38 {
        tool_push(&mut tools, i);
    }
    Server(tools)
}

fn tool_push(tools: &mut Vec<Arc<dyn Tool>>, i: usize) {
    let topics = [
        "invoice", "calendar", "ticket", "playlist", "recipe", "shipment",
    ];
    let topic = topics[i % topics.len()];
    tools.push(tool(
        &format!("srv__{topic}_{i}"),
        &format!("Manage {topic} number {i}: create, list, update and archive {topic} records of the account, with filters and paging."),
    ));
}

fn names(r: &ChatRequest) -> Vec<String> {
    r.tools.iter().map(|t| t.name.clone()).collect()
}

fn call(id: &str, name: &str, args: Value) -> Turn {
    Turn::Events(vec![
        StreamEvent::ToolCallDelta {
            index: 0,
            id: Some(id.into()),
            name: Some(name.into()),
            arguments: args.to_string(),
        },
        StreamEvent::Finish {
            reason: FinishReason::ToolCalls,
        },
    ])
}

fn agent(model: &ScriptedProvider, ws: &TempWorkspace, config: ToolsConfig) -> AgentRun {
    let mut registry = Registry::new().with_source(Arc::new(server()));
    registry.register(tool("note", "Take a note."));
    registry.allow("planner", ["note", "srv__*"]);
    AgentRun {
        max_turns: 6,
        ..AgentRun::new(
            "plan",
            RoleSpec {
                name: "planner".into(),
                role: "You plan.".into(),
                objective: "Plan.".into(),
                max_turns: 6,
                ..Default::default()
            },
            Arc::new(model.clone()),
            Arc::new(registry),
            ToolEnv::new(
                Workspace::new(ws.path(), &Default::default()).unwrap(),
                Arc::new(config),
                Arc::new(NonInteractive { approve: true }),
            ),
            vec![
                Message::system("## ROLE\nYou plan."),
                Message::user("## TASK\nWhat is the weather forecast for Paris this weekend?"),
            ],
        )
    }
}

fn report() -> Turn {
    Turn::Json(
        json!({ "failure": false, "output": "planned", "files_changed": [], "findings": [] }),
    )
}

#[tokio::test]
async fn mcp_tools_compete_for_the_budget_and_search_tools_finds_the_rest() {
    let ws = TempWorkspace::new("budget").unwrap();
    // A 4k window: 5 % is ~200 tokens — the agent's own tool, `search_tools` and the most
    // relevant of the 40 (the budget is filled by relevance, so a larger one takes more).
    let model = ScriptedProvider::new([
        call(
            "s1",
            "search_tools",
            json!({"query": "stock price of a ticker"}),
        ),
        call("q1", "srv__stock_quote", json!({"q": "ACME"})),
        report(),
    ])
    .with_context_window(4096);
    let out = agent(&model, &ws, ToolsConfig::default())
        .run(Resume::Fresh)
        .await
        .unwrap();
    assert!(matches!(out, AgentOutcome::Done(_)), "{out:?}");
    let requests = model.requests();
    let first = names(&requests[0]);
    assert!(
        first.contains(&"note".to_owned()),
        "own tools always: {first:?}"
    );
    assert!(
        first.contains(&"srv__weather_forecast".to_owned()),
        "{first:?}"
    );
    assert!(first.contains(&"search_tools".to_owned()), "{first:?}");
    assert!(!first.contains(&"srv__stock_quote".to_owned()), "{first:?}");
    assert!(first.len() < 6, "{} tools offered: {first:?}", first.len());
    let spent: u64 = requests[0]
        .tools
        .iter()
        .map(|t| {
            let r = ChatRequest {
                tools: vec![t.clone()],
                ..ChatRequest::new(Vec::new())
            };
            trellis_llm::tokens::estimate_request(&r).tokens
        })
        .sum();
    assert!(spent <= 4096 / 20, "{spent} tokens of schemas");

    // The search found the quote tool: listed in its answer, offered next, and callable.
    let found = requests[1]
        .messages
        .iter()
        .find(|m| m.role == Role::Tool)
        .unwrap();
    assert!(
        found.content.contains("## srv__stock_quote"),
        "{}",
        found.content
    );
    assert!(names(&requests[1]).contains(&"srv__stock_quote".to_owned()));
    let result = requests[2]
        .messages
        .iter()
        .rfind(|m| m.role == Role::Tool)
        .unwrap();
    assert!(
        result.content.contains("srv__stock_quote"),
        "{}",
        result.content
    );

    // A big window, or the budget off: every tool, no search.
    for (window, enabled) in [(1_000_000, true), (8192, false)] {
        let model = ScriptedProvider::new([report()]).with_context_window(window);
        let mut config = ToolsConfig::default();
        config.budget.enabled = enabled;
        agent(&model, &ws, config).run(Resume::Fresh).await.unwrap();
        let all = names(&model.requests()[0]);
        assert_eq!(all.iter().filter(|n| n.starts_with("srv__")).count(), 40);
        assert!(!all.contains(&"search_tools".to_owned()));
    }
}

/// A tool knowledge graph that learned one tool matters.
struct Ranks(&'static str);

impl trellis_tools::ToolAdvisor for Ranks {
    fn importance(&self) -> std::collections::BTreeMap<String, f64> {
        [(self.0.to_owned(), 0.9), ("srv__invoice_0".to_owned(), 0.1)].into()
    }

    fn predict_next(&self, _completed: &[String]) -> Vec<(String, f64)> {
        Vec::new()
    }

    fn threshold(&self) -> f64 {
        0.92
    }

    fn speculated(&self, _: &str, _: f64, _: trellis_tools::SpeculationOutcome) {}
}

#[tokio::test]
async fn the_knowledge_graphs_pagerank_breaks_ties_in_the_budget() {
    // Every generic tool matches "records of the account" alike; only one or two fit.
    let offered = |advisor: Option<Arc<Ranks>>| async move {
        let ws = TempWorkspace::new("budget-prior").unwrap();
        let model = ScriptedProvider::new([report()]).with_context_window(4096);
        let mut a = agent(&model, &ws, ToolsConfig::default());
        a.messages[1] = Message::user("## TASK\nArchive the records of the account.");
        a.env.advisor = advisor.map(|a| a as Arc<dyn trellis_tools::ToolAdvisor>);
        a.run(Resume::Fresh).await.unwrap();
        names(&model.requests()[0])
    };
    let plain = offered(None).await;
    assert!(!plain.contains(&"srv__recipe_22".to_owned()), "{plain:?}");
    let ranked = offered(Some(Arc::new(Ranks("srv__recipe_22")))).await;
    assert!(ranked.contains(&"srv__recipe_22".to_owned()), "{ranked:?}");
}

/// Embeds by concept: weather words, money words, anything else.
struct Concepts;

impl trellis_index::Embedder for Concepts {
    fn id(&self) -> String {
        "concepts".into()
    }

    fn dim(&self) -> usize {
        3
    }

    fn embed(&self, texts: &[&str]) -> trellis_index::Result<Vec<Vec<f32>>> {
        Ok(texts
            .iter()
            .map(|t| {
                let t = t.to_lowercase();
                let has = |words: &[&str]| words.iter().any(|w| t.contains(w));
                if has(&["weather", "umbrella", "rain", "sky"]) {
                    vec![1.0, 0.0, 0.0]
                } else if has(&["stock", "shares", "ticker"]) {
                    vec![0.0, 1.0, 0.0]
                } else {
                    vec![0.0, 0.0, 1.0]
                }
            })
            .collect())
    }
}

#[tokio::test]
async fn with_an_embedder_a_tool_is_found_by_meaning_not_only_by_words() {
    // No word of the task is in the forecast tool's name or description.
    let offered = |embedder: Option<Arc<dyn trellis_index::Embedder>>| async move {
        let ws = TempWorkspace::new("budget-embed").unwrap();
        let model = ScriptedProvider::new([report()]).with_context_window(4096);
        let mut a = agent(&model, &ws, ToolsConfig::default());
        a.messages[1] = Message::user("## TASK\nWill I need an umbrella in Paris tomorrow?");
        a.context.tool_embedder = embedder;
        a.run(Resume::Fresh).await.unwrap();
        names(&model.requests()[0])
    };
    let lexical = offered(None).await;
    assert!(
        !lexical.contains(&"srv__weather_forecast".to_owned()),
        "{lexical:?}"
    );
    let hybrid = offered(Some(Arc::new(Concepts))).await;
    assert!(
        hybrid.contains(&"srv__weather_forecast".to_owned()),
        "{hybrid:?}"
    );
}
