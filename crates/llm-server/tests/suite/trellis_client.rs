//! Another Trellis pointed at the server: an `openai` profile whose base URL is the served
//! endpoint (the token in a configured header) streams text, calls tools and gets a
//! structured answer through the same provider code that talks to vLLM or OpenAI.

use std::path::Path;
use std::sync::Arc;

use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::json;
use tokio_util::sync::CancellationToken;
use trellis_config::Config;
use trellis_llm::{
    ChatRequest, FinishReason, Message, ModelProvider, ModelRegistry, StructuredOptions, ToolSpec,
    complete_structured,
};
use trellis_llm_server::Limits;

use super::common::*;

fn remote(base_url: &str) -> Arc<dyn ModelProvider> {
    let toml = format!(
        r#"
[models.profiles.shared]
provider = "openai"
base_url = "{base_url}"
model = "scripted"
structured_output = "native"
max_retries = 0
headers = {{ Authorization = "Bearer {TOKEN}" }}
"#
    );
    let config = Config::from_toml(Path::new("test.toml"), &toml).unwrap();
    ModelRegistry::from_config(&config)
        .unwrap()
        .provider("shared")
        .unwrap()
}

#[derive(Debug, Deserialize, JsonSchema)]
#[allow(dead_code)]
struct Capital {
    city: String,
    country: String,
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn trellis_openai_provider_talks_to_the_served_model() {
    let model = scripted();
    let server = start(Arc::new(model.clone()), Limits::default()).await;
    let client = remote(&server.base_url());

    let answer = client
        .complete(
            ChatRequest::new(vec![Message::user("hi")]),
            CancellationToken::new(),
        )
        .await
        .unwrap();
    assert_eq!(answer.text, "Hello from the scripted model.");
    assert_eq!(answer.finish, Some(FinishReason::Stop));
    assert!(answer.usage.completion_tokens > 0, "{answer:?}");

    let tools = ChatRequest {
        tools: vec![ToolSpec {
            name: "read_file".into(),
            description: "Reads a file".into(),
            parameters: json!({"type": "object", "properties": {"path": {"type": "string"}}}),
        }],
        ..ChatRequest::new(vec![Message::user("read the readme")])
    };
    let call = client
        .complete(tools, CancellationToken::new())
        .await
        .unwrap();
    assert_eq!(call.finish, Some(FinishReason::ToolCalls));
    assert_eq!(call.tool_calls[0].name, "read_file");
    assert_eq!(
        call.tool_calls[0].arguments_json().unwrap(),
        json!({"path": "README.md"})
    );

    let capital = complete_structured::<Capital>(
        client.as_ref(),
        ChatRequest::new(vec![Message::user("capital of France?")]),
        StructuredOptions::default(),
        CancellationToken::new(),
    )
    .await
    .unwrap();
    assert_eq!(capital.value.city, "Paris");
    // The schema travelled as `response_format: json_schema` and reached the model.
    let sent = model.requests().pop().unwrap();
    let format = sent.response_format.unwrap();
    assert_eq!(format.schema["required"], json!(["city", "country"]));
}
