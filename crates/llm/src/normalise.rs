//! The normaliser: turns a model's answer into a value of
//! the requested type, repairing what small models typically get wrong, logging every
//! repair, and refusing when the repair would be too extensive.
//!
//! Text repairs: markdown fences and surrounding prose are stripped, the JSON value is
//! located by bracket matching, a value cut off mid-way is closed, trailing commas and
//! Python literals are fixed. Schema repairs (walking the type's JSON Schema): strings to
//! lists, number and boolean strings to numbers and booleans, scalars to strings, key and
//! enum case, defaults for missing fields, unknown fields dropped, strings and lists
//! truncated to `maxLength`/`maxItems`, duplicate items removed where `uniqueItems`.
//! Summarising an over-long field with a model (LLM-based compression) is
//! the agent layer's job; here the field is truncated and the repair logged.

mod coerce;
mod extract;

use std::any::TypeId;
use std::collections::HashMap;
use std::sync::{Arc, LazyLock, Mutex};

use schemars::JsonSchema;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// One repair applied to an answer.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Repair {
    /// The value was inside a markdown code fence.
    StrippedFences,
    /// Prose around the value was dropped (character counts).
    ExtractedValue {
        /// Characters before the value.
        dropped_before: usize,
        /// Characters after the value.
        dropped_after: usize,
    },
    /// The value was cut off; these characters closed it.
    ClosedTruncated {
        /// What was appended.
        appended: String,
    },
    /// Trailing commas or Python literals were fixed.
    FixedSyntax,
    /// A value was converted to the schema's type.
    Coerced {
        /// JSON pointer of the value.
        path: String,
        /// What it was.
        from: String,
        /// What it became.
        to: String,
    },
    /// A key or enum value matched only ignoring case (or `-`/`_`/space).
    Renamed {
        /// JSON pointer.
        path: String,
        /// The original spelling.
        from: String,
        /// The schema's spelling.
        to: String,
    },
    /// A missing field was filled with its default.
    FilledDefault {
        /// JSON pointer.
        path: String,
    },
    /// A field the schema does not define was removed.
    DroppedField {
        /// JSON pointer.
        path: String,
    },
    /// A string or list exceeded its maximum and was cut.
    Truncated {
        /// JSON pointer.
        path: String,
        /// Original length (characters or items).
        from: usize,
        /// New length.
        to: usize,
    },
    /// Duplicate list items were removed.
    Deduplicated {
        /// JSON pointer.
        path: String,
        /// How many were removed.
        removed: usize,
    },
}

/// Limits of the normaliser.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NormaliseOptions {
    /// More repairs than this fail the answer ("too extensive").
    pub max_repairs: usize,
}

impl Default for NormaliseOptions {
    fn default() -> Self {
        Self { max_repairs: 8 }
    }
}

/// Why an answer could not be normalised.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum NormaliseError {
    /// No JSON value could be found or repaired.
    #[error("the answer contains no parsable JSON value: {snippet:?}")]
    NoJson {
        /// The start of the answer.
        snippet: String,
    },
    /// Repairing would take more changes than allowed.
    #[error("the answer needs {} repairs (limit {limit}); refusing to guess", repairs.len())]
    TooExtensive {
        /// What would have been repaired.
        repairs: Vec<Repair>,
        /// The limit.
        limit: usize,
    },
    /// The repaired value still does not fit the type.
    #[error("the answer does not match the schema: {message}")]
    Invalid {
        /// The deserializer's message (names the field).
        message: String,
        /// Repairs that were applied before giving up.
        repairs: Vec<Repair>,
    },
}

/// A normalised answer and the repairs it took.
#[derive(Clone, Debug, PartialEq)]
pub struct Normalised<T> {
    /// The value.
    pub value: T,
    /// Every repair, in order (empty when the answer was valid as given).
    pub repairs: Vec<Repair>,
}

/// `T`'s JSON Schema, without the `$schema`/`title` decoration.
pub fn schema_of<T: JsonSchema + 'static>() -> Value {
    Value::clone(&shared_schema_of::<T>())
}

/// [`schema_of`], derived once per type and process and shared: an agent asks for its
/// report's schema several times per activation, and deriving it was ~2 % of `trellis
/// serve`'s CPU on the G1 benchmark.
pub fn shared_schema_of<T: JsonSchema + 'static>() -> Arc<Value> {
    static SCHEMAS: LazyLock<Mutex<HashMap<TypeId, Arc<Value>>>> = LazyLock::new(Default::default);
    let key = TypeId::of::<T>();
    if let Some(schema) = SCHEMAS.lock().ok().and_then(|m| m.get(&key).cloned()) {
        return schema;
    }
    let mut v = schemars::schema_for!(T).to_value();
    if let Value::Object(m) = &mut v {
        m.remove("$schema");
        m.remove("title");
    }
    let schema = Arc::new(v);
    if let Ok(mut m) = SCHEMAS.lock() {
        m.insert(key, schema.clone());
    }
    schema
}

/// The first complete JSON object in `text` that parses without repairs — raw, inside a
/// code fence, or amid prose — trying each `{` in turn.
pub fn first_json_object(text: &str) -> Option<Value> {
    extract::first_object(text)
}

/// Normalises `text` against `schema` into a JSON value.
pub fn normalise_value(
    text: &str,
    schema: &Value,
    options: NormaliseOptions,
) -> Result<Normalised<Value>, NormaliseError> {
    let mut repairs = Vec::new();
    let want_array = coerce::expects_array(schema);
    let Some(mut value) = extract::extract_json(text, want_array, &mut repairs) else {
        return Err(NormaliseError::NoJson {
            snippet: text.chars().take(120).collect(),
        });
    };
    coerce::coerce(schema, schema, &mut value, "", &mut repairs);
    for r in &repairs {
        tracing::info!(repair = ?r, "normaliser repair");
    }
    if repairs.len() > options.max_repairs {
        return Err(NormaliseError::TooExtensive {
            repairs,
            limit: options.max_repairs,
        });
    }
    Ok(Normalised { value, repairs })
}

/// Normalises `text` into `T`, using `T`'s JSON Schema.
pub fn normalise<T>(text: &str, options: NormaliseOptions) -> Result<Normalised<T>, NormaliseError>
where
    T: DeserializeOwned + JsonSchema + 'static,
{
    let schema = shared_schema_of::<T>();
    let Normalised { value, repairs } = normalise_value(text, &schema, options)?;
    match serde_json::from_value::<T>(value) {
        Ok(value) => Ok(Normalised { value, repairs }),
        Err(e) => Err(NormaliseError::Invalid {
            message: e.to_string(),
            repairs,
        }),
    }
}
