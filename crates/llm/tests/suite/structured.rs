use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::json;
use tokio_util::sync::CancellationToken;
use trellis_llm::normalise::Repair;
use trellis_llm::{ChatRequest, Error, Message, StructuredOptions, complete_structured};
use trellis_test_support::scripted::{ScriptedProvider, Turn};

#[derive(Debug, Deserialize, JsonSchema, PartialEq)]
struct Plan {
    steps: Vec<String>,
    risky: bool,
}

fn ask() -> ChatRequest {
    ChatRequest::new(vec![Message::user("Plan the change.")])
}

#[tokio::test]
async fn an_unusable_answer_is_re_asked_once_with_the_error() {
    let scripted = ScriptedProvider::new([
        Turn::Text("I would start by reading the code.".into()),
        Turn::Json(json!({"steps": ["read", "edit"], "risky": false})),
    ]);
    let a = complete_structured::<Plan>(
        &scripted,
        ask(),
        StructuredOptions::default(),
        CancellationToken::new(),
    )
    .await
    .unwrap();
    assert_eq!(a.value.steps, ["read", "edit"]);
    assert_eq!(a.completions.len(), 2);
    let requests = scripted.requests();
    assert_eq!(requests.len(), 2);
    // The schema was requested, and the re-ask shows the model its answer and the error.
    assert_eq!(requests[0].response_format.as_ref().unwrap().name, "Plan");
    let second = &requests[1].messages;
    assert_eq!(second[1].content, "I would start by reading the code.");
    assert!(
        second[2].content.contains("no parsable JSON"),
        "{}",
        second[2].content
    );
}

#[tokio::test]
async fn repairs_are_reported_and_a_second_failure_is_an_error() {
    let scripted = ScriptedProvider::new([Turn::Text(
        "```json\n{\"Steps\": \"- read\\n- edit\", \"risky\": \"yes\"}\n```".into(),
    )]);
    let a = complete_structured::<Plan>(
        &scripted,
        ask(),
        StructuredOptions::default(),
        CancellationToken::new(),
    )
    .await
    .unwrap();
    assert!(a.value.risky);
    assert_eq!(a.value.steps, ["read", "edit"]);
    assert!(a.repairs.contains(&Repair::StrippedFences));
    assert_eq!(a.completions.len(), 1);

    let scripted = ScriptedProvider::new([Turn::Text("no".into()), Turn::Text("still no".into())]);
    let err = complete_structured::<Plan>(
        &scripted,
        ask(),
        StructuredOptions::default(),
        CancellationToken::new(),
    )
    .await
    .unwrap_err();
    assert!(matches!(err, Error::Structured(_)), "{err}");
    assert_eq!(scripted.remaining(), 0);
}
