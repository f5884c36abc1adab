//! The embedded llama.cpp provider with real weights: the random-weights fixture for
//! plumbing, and the `small` profile's SmolLM2 for the structured-answer acceptance test.
//! Both are fetched by `scripts/setup.d/30-models.sh` (or on first use).

use std::sync::Arc;

use futures::StreamExt;
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::json;
use tokio_util::sync::CancellationToken;
use trellis_config::Config;
use trellis_llm::{
    ChatRequest, Error, FinishReason, Message, ModelProvider, ModelRegistry, StreamEvent,
    StructuredOptions, ToolSpec, complete_structured,
};

fn provider(name: &str) -> Arc<dyn ModelProvider> {
    ModelRegistry::from_config(&Config::default())
        .unwrap()
        .provider(name)
        .unwrap()
}

#[derive(Debug, Deserialize, JsonSchema)]
#[allow(dead_code)]
struct Verdict {
    #[schemars(length(max = 24))]
    summary: String,
    score: u8,
    approved: bool,
    #[schemars(length(max = 3))]
    tags: Vec<Kind>,
}

#[derive(Debug, Deserialize, JsonSchema, PartialEq)]
#[serde(rename_all = "snake_case")]
enum Kind {
    Bug,
    Feature,
    Docs,
}

fn no_repairs() -> StructuredOptions {
    StructuredOptions {
        reask: false,
        normalise: trellis_llm::normalise::NormaliseOptions { max_repairs: 0 },
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn random_weights_still_answer_in_schema_ten_of_ten() {
    let p = provider("tiny");
    for i in 0..10 {
        let req = ChatRequest {
            max_tokens: Some(400),
            temperature: Some(if i % 2 == 0 { 0.0 } else { 0.9 }),
            ..ChatRequest::new(vec![Message::user(format!("Review change number {i}."))])
        };
        // The grammar alone must make it valid: no repairs, no re-ask allowed.
        let a =
            complete_structured::<Verdict>(p.as_ref(), req, no_repairs(), CancellationToken::new())
                .await
                .unwrap_or_else(|e| panic!("answer {i}: {e}"));
        assert!(a.value.summary.chars().count() <= 24);
        assert!(a.value.tags.len() <= 3);
        assert_eq!(
            a.completions[0].finish,
            Some(FinishReason::Stop),
            "answer {i}"
        );
    }
}

/// The text of `p`'s answer to `req`.
async fn text_of(p: &Arc<dyn ModelProvider>, req: ChatRequest) -> String {
    p.complete(req, CancellationToken::new())
        .await
        .unwrap()
        .text
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sampled_answer_follows_its_seed() {
    let p = provider("tiny");
    let answer = |seed| {
        text_of(
            &p,
            ChatRequest {
                max_tokens: Some(24),
                temperature: Some(0.9),
                seed: Some(seed),
                ..ChatRequest::new(vec![Message::user("Write a line.")])
            },
        )
    };
    let (one, again, two) = (answer(1).await, answer(1).await, answer(2).await);
    assert_eq!(one, again, "the same seed draws the same answer");
    assert_ne!(one, two, "another seed draws another answer");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_frequency_penalty_reaches_the_sampler() {
    // The tiny test model's greedy answer repeats its tokens after a few dozen: with a
    // penalty on repeated tokens it goes elsewhere; a penalty of 0 is none.
    let p = provider("tiny");
    let answer = |penalty| {
        text_of(
            &p,
            ChatRequest {
                max_tokens: Some(48),
                temperature: Some(0.0),
                frequency_penalty: penalty,
                ..ChatRequest::new(vec![Message::user("Say the word hello 40 times.")])
            },
        )
    };
    let (plain, zero, penalized) = (
        answer(None).await,
        answer(Some(0.0)).await,
        answer(Some(1.5)).await,
    );
    assert_eq!(plain, zero, "a penalty of 0 is none");
    assert_ne!(penalized, plain, "the penalty changed nothing: {plain:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn streams_counts_and_cancels() {
    let p = provider("tiny");
    p.prepare().await.unwrap();
    let req = ChatRequest {
        max_tokens: Some(40),
        ..ChatRequest::new(vec![
            Message::system("You write code."),
            Message::user("fn main"),
        ])
    };
    let count = p.count_tokens(&req).unwrap();
    assert!(count.exact && count.tokens > 3, "{count:?}");
    let mut stream = p.stream(req.clone(), CancellationToken::new());
    let mut deltas = 0;
    let mut usage = None;
    let mut finish = None;
    while let Some(e) = stream.next().await {
        match e.unwrap() {
            StreamEvent::TextDelta { .. } => deltas += 1,
            StreamEvent::Usage { usage: u } => usage = Some(u),
            StreamEvent::Finish { reason } => finish = Some(reason),
            _ => {}
        }
    }
    let usage = usage.unwrap();
    assert_eq!(
        usage.prompt_tokens, count.tokens,
        "the budget count is the real prompt"
    );
    assert!(usage.completion_tokens <= 40);
    assert!(deltas > 0);
    assert!(finish.is_some());

    // Cancel after the first delta: generation stops between tokens.
    let cancel = CancellationToken::new();
    let long = ChatRequest {
        max_tokens: Some(5000),
        stop: vec![],
        ..req
    };
    let mut stream = p.stream(long, cancel.clone());
    let mut seen = 0;
    let mut result = None;
    while let Some(e) = stream.next().await {
        match e {
            Ok(StreamEvent::TextDelta { .. }) => {
                seen += 1;
                cancel.cancel();
            }
            Ok(_) => {}
            Err(e) => {
                result = Some(e);
                break;
            }
        }
    }
    assert!(seen >= 1);
    assert!(matches!(result, Some(Error::Cancelled)), "{result:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tools_are_offered_through_the_grammar() {
    let p = provider("tiny");
    let req = ChatRequest {
        max_tokens: Some(120),
        tools: vec![ToolSpec {
            name: "read_file".into(),
            description: "Read a file.".into(),
            parameters: json!({"type": "object", "properties": {"path": {"type": "string", "maxLength": 30}}, "required": ["path"]}),
        }],
        ..ChatRequest::new(vec![Message::user("Open src/lib.rs")])
    };
    let c = p.complete(req, CancellationToken::new()).await.unwrap();
    match &c.finish {
        Some(FinishReason::ToolCalls) => {
            assert_eq!(c.tool_calls[0].name, "read_file");
            let args = c.tool_calls[0].arguments_json().unwrap();
            assert!(args["path"].is_string(), "{args}");
        }
        // Random weights may ramble until max_tokens; the answer is still unwrapped text.
        Some(FinishReason::Stop | FinishReason::Length) => {
            assert!(c.tool_calls.is_empty() || c.finish == Some(FinishReason::Length));
            assert!(!c.text.contains("\"answer\""), "{c:?}");
        }
        other => panic!("{other:?}: {c:?}"),
    }
}

/// `tool_format = "native"` from the configuration reaches the provider: the answer is free
/// text (the random weights write no `<tool_call>`, so no call), never the grammar's
/// `{"tool": …}` / `{"answer": …}` shape, and a call, if any, names the offered tool.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_native_format_is_configurable_and_answers_free_text() {
    let config = Config::from_toml(
        std::path::Path::new("test.toml"),
        "[models.profiles.tiny]\ntool_format = \"native\"\n",
    )
    .unwrap();
    let registry = ModelRegistry::from_config(&config).unwrap();
    let p = registry.provider("tiny").unwrap();
    assert!(
        !p.info().native_structured_output,
        "only a grammar holds the schema"
    );
    let req = ChatRequest {
        max_tokens: Some(40),
        tools: vec![ToolSpec {
            name: "read_file".into(),
            description: "Read a file.".into(),
            parameters: json!({"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]}),
        }],
        ..ChatRequest::new(vec![Message::user("Open src/lib.rs")])
    };
    let c = p.complete(req, CancellationToken::new()).await.unwrap();
    assert!(c.tool_calls.iter().all(|t| t.name == "read_file"), "{c:?}");
    if c.tool_calls.is_empty() {
        assert!(!c.text.starts_with("{\"tool\""), "{c:?}");
        assert!(c.usage.completion_tokens > 0, "{c:?}");
    }
}

#[derive(Debug, Deserialize, JsonSchema)]
struct CapitalAnswer {
    #[schemars(length(max = 40))]
    city: String,
    #[schemars(length(max = 40))]
    country: String,
}

/// The acceptance test of issue 3: a real (small) model answers a structured question with
/// valid output 10 times out of 10. The `small` profile (SmolLM2-135M) keeps it short; the
/// coder model's rate of well-formed answers is not measured yet (issue 33, item 1).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_small_model_answers_structured_questions_ten_of_ten() {
    let p = provider("small");
    let countries = [
        "France", "Germany", "Italy", "Spain", "Japan", "Canada", "Egypt", "Peru", "Norway",
        "Kenya",
    ];
    let mut paris = false;
    for country in countries {
        let req = ChatRequest {
            max_tokens: Some(64),
            ..ChatRequest::new(vec![
                Message::system("You are a helpful assistant. You answer in JSON."),
                Message::user(format!(
                    "What is the capital of {country}? Give the city and the country."
                )),
            ])
        };
        let a = complete_structured::<CapitalAnswer>(
            p.as_ref(),
            req,
            no_repairs(),
            CancellationToken::new(),
        )
        .await
        .unwrap_or_else(|e| panic!("{country}: {e}"));
        eprintln!("{country}: {:?}", a.value);
        assert!(a.value.country.chars().count() <= 40);
        if country == "France" {
            paris = a.value.city.contains("Paris");
        }
    }
    assert!(paris, "SmolLM2 knows the capital of France");
}

/// The usage of one streamed call.
async fn usage_of(p: &dyn ModelProvider, req: ChatRequest) -> trellis_llm::Usage {
    let mut stream = p.stream(req, CancellationToken::new());
    let mut usage = None;
    while let Some(e) = stream.next().await {
        if let StreamEvent::Usage { usage: u } = e.unwrap() {
            usage = Some(u);
        }
    }
    usage.unwrap()
}

/// A growing conversation decodes only what is new: the second call of a conversation
/// reuses the first call's prompt from the KV cache, a different conversation does not
/// disturb it (it takes a slot of its own), and the same prompt again reuses all but its
/// last token (whose logits start the answer).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_growing_conversation_reuses_its_cached_prefix() {
    let p = provider("tiny");
    let system = Message::system("You write code. ".repeat(40));
    let first = ChatRequest {
        max_tokens: Some(8),
        ..ChatRequest::new(vec![system.clone(), Message::user("fn main")])
    };
    let u1 = usage_of(p.as_ref(), first.clone()).await;
    assert_eq!(u1.cached_prompt_tokens, 0, "{u1:?}");
    assert!(u1.prompt_tokens > 64, "{u1:?}");
    let again = usage_of(p.as_ref(), first.clone()).await;
    assert_eq!(
        again.cached_prompt_tokens + 1,
        again.prompt_tokens,
        "{again:?}"
    );

    // Another conversation in between.
    let other = ChatRequest {
        max_tokens: Some(8),
        ..ChatRequest::new(vec![
            Message::system("Something else entirely. ".repeat(30)),
            Message::user("hello"),
        ])
    };
    let u = usage_of(p.as_ref(), other).await;
    assert_eq!(u.cached_prompt_tokens, 0, "{u:?}");

    let mut grown = first.clone();
    grown.messages.push(Message::assistant("fn main() {}"));
    grown.messages.push(Message::user("now add a test"));
    let u2 = usage_of(p.as_ref(), grown).await;
    assert!(
        u2.cached_prompt_tokens + 8 >= u1.prompt_tokens
            && u2.cached_prompt_tokens < u2.prompt_tokens,
        "the first prompt is reused: {u1:?} then {u2:?}"
    );
}

/// A call that shows nothing for a while says how far it has got: reading a prompt longer
/// than one batch reports the tokens read (from the reused prefix up to the whole prompt),
/// and a tool call held back until complete reports the tokens generated every 16.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_long_prompt_and_a_held_back_tool_call_report_progress() {
    let p = provider("tiny");
    let req = ChatRequest {
        max_tokens: Some(60),
        tools: vec![ToolSpec {
            name: "read_file".into(),
            description: "Read a file.".into(),
            parameters: json!({"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]}),
        }],
        ..ChatRequest::new(vec![
            Message::system("Progress is reported while the prompt is read. ".repeat(150)),
            Message::user("Open src/lib.rs"),
        ])
    };
    let mut stream = p.stream(req, CancellationToken::new());
    let (mut reading, mut held, mut usage, mut after_content) = (vec![], vec![], None, false);
    while let Some(e) = stream.next().await {
        match e.unwrap() {
            StreamEvent::Progress {
                prompt_tokens,
                prompt_done,
                generated,
            } => {
                assert!(!after_content, "progress after the answer");
                if generated == 0 {
                    reading.push((prompt_done, prompt_tokens));
                } else {
                    assert_eq!(prompt_done, prompt_tokens);
                    held.push(generated);
                }
            }
            StreamEvent::Usage { usage: u } => usage = Some(u),
            StreamEvent::TextDelta { .. } | StreamEvent::ToolCallDelta { .. } => {
                after_content = true;
            }
            _ => {}
        }
    }
    let usage = usage.unwrap();
    assert!(usage.prompt_tokens > 1024, "{usage:?}");
    // From what the cache held to the whole prompt, one report per batch of 512.
    assert_eq!(reading.first().unwrap().0, usage.cached_prompt_tokens);
    assert_eq!(
        *reading.last().unwrap(),
        (usage.prompt_tokens, usage.prompt_tokens)
    );
    assert!(reading.windows(2).all(|w| w[0].0 < w[1].0), "{reading:?}");
    let batches = (usage.prompt_tokens - usage.cached_prompt_tokens).div_ceil(512);
    assert_eq!(reading.len() as u64, batches + 1, "{reading:?}");
    let every_16: Vec<u64> = (1..=usage.completion_tokens / 16).map(|k| k * 16).collect();
    assert_eq!(held, every_16, "{usage:?}");
}
