//! Structured output: ask for a Rust type's JSON Schema, parse and repair the answer, and
//! optionally re-ask once with the validation error.
//!
//! How the schema reaches the model depends on the provider: the embedded model compiles it
//! to a llama.cpp grammar (the answer always parses); OpenAI-compatible servers get
//! `response_format: json_schema` (or, where a server does not support it, the schema in the
//! system prompt); Anthropic gets a forced tool whose input schema is the schema. Whatever the
//! route, the answer goes through the [normaliser](crate::normalise).

use schemars::JsonSchema;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use tokio_util::sync::CancellationToken;
use trellis_protocol::canonical::to_canonical_string;

use crate::normalise::{NormaliseError, NormaliseOptions, Normalised, Repair, normalise};
use crate::provider::ModelProvider;
use crate::types::{ChatRequest, Completion, Message, ResponseFormat};
use crate::{Error, Result};

pub use crate::normalise::{schema_of, shared_schema_of};

/// How a remote provider asks for structured output.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum StructuredMode {
    /// The endpoint enforces the schema (`response_format: json_schema`; for Anthropic, a
    /// forced tool call).
    #[default]
    Native,
    /// `response_format: json_object` plus the schema in the system prompt.
    JsonObject,
    /// The schema in the system prompt only, for servers without `response_format`.
    Prompt,
    /// Anthropic: force a tool whose input schema is the schema (same as `native` there).
    Tool,
}

/// The [`ResponseFormat`] for `T`, named after the type.
pub fn response_format<T: JsonSchema + 'static>() -> ResponseFormat {
    let name: String = T::schema_name()
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                c
            } else {
                '_'
            }
        })
        .take(64)
        .collect();
    ResponseFormat {
        name,
        schema: schema_of::<T>(),
    }
}

/// The instruction used where the schema travels in the prompt.
pub(crate) fn schema_instruction(schema: &Value) -> String {
    format!(
        "Answer with a single JSON value that matches this JSON Schema, and nothing else \
         (no prose, no markdown):\n{}",
        to_canonical_string(schema).unwrap_or_default()
    )
}

/// Options of [`complete_structured`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StructuredOptions {
    /// Normaliser limits.
    pub normalise: NormaliseOptions,
    /// Re-ask once with the validation error when the answer cannot be repaired.
    pub reask: bool,
}

impl Default for StructuredOptions {
    fn default() -> Self {
        Self {
            normalise: NormaliseOptions::default(),
            reask: true,
        }
    }
}

/// A structured answer with what it took to get it.
#[derive(Clone, Debug)]
pub struct StructuredAnswer<T> {
    /// The value.
    pub value: T,
    /// Repairs the normaliser applied.
    pub repairs: Vec<Repair>,
    /// Every completion made (one, or two after a re-ask) — for usage accounting.
    pub completions: Vec<Completion>,
}

/// Calls `provider` asking for a `T` and returns it parsed (and repaired if needed).
pub async fn complete_structured<T>(
    provider: &dyn ModelProvider,
    mut request: ChatRequest,
    options: StructuredOptions,
    cancel: CancellationToken,
) -> Result<StructuredAnswer<T>>
where
    T: DeserializeOwned + JsonSchema + 'static,
{
    request.response_format = Some(response_format::<T>());
    complete_structured_as(provider, request, options, cancel).await
}

/// Like [`complete_structured`], with the request's own `response_format` — for a schema
/// built at run time (say, an `enum` of the names the answer must pick from) that `T`'s
/// derived schema cannot express. The answer is parsed into `T` with the normaliser.
pub async fn complete_structured_as<T>(
    provider: &dyn ModelProvider,
    mut request: ChatRequest,
    options: StructuredOptions,
    cancel: CancellationToken,
) -> Result<StructuredAnswer<T>>
where
    T: DeserializeOwned + JsonSchema + 'static,
{
    if request.response_format.is_none() {
        request.response_format = Some(response_format::<T>());
    }
    let mut completions = Vec::new();
    let first = provider.complete(request.clone(), cancel.clone()).await?;
    let answer = first.text.clone();
    completions.push(first);
    let error = match normalise::<T>(&answer, options.normalise) {
        Ok(Normalised { value, repairs }) => {
            return Ok(StructuredAnswer {
                value,
                repairs,
                completions,
            });
        }
        Err(e) => e,
    };
    if !options.reask {
        return Err(error.into());
    }
    tracing::info!(error = %error, "structured answer rejected; asking again");
    request.messages.push(Message::assistant(answer));
    request.messages.push(Message::user(reask_message(&error)));
    let second = provider.complete(request, cancel).await?;
    let result = normalise::<T>(&second.text, options.normalise);
    completions.push(second);
    match result {
        Ok(Normalised { value, repairs }) => Ok(StructuredAnswer {
            value,
            repairs,
            completions,
        }),
        Err(e) => Err(Error::Structured(e)),
    }
}

fn reask_message(error: &NormaliseError) -> String {
    format!(
        "That answer could not be used: {error}. Reply again with only the corrected JSON value."
    )
}
