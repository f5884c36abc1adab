//! Compression of handoff fields to their limits (`docs/context.md`, "Handoff compression"):
//! a field that is too long is summarised by a model before it is truncated.
//!
//! A typed output declares a field's limit as a JSON Schema `maxLength` (in Rust,
//! `#[schemars(length(max = N))]`, e.g. [`limits::GAP_ANALYSIS`]). The normaliser in
//! `trellis-llm` truncates an over-long string to its limit; [`normalise_compressing`] asks a
//! model to summarise it to the limit first ([`compress_field`]), checks the answer is
//! within the limit, and only truncates when the model fails or overshoots. Every repair is
//! returned as a [`FieldRepair`] and logged (`tracing`, target `trellis_agents::compress`).

use schemars::JsonSchema;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use tokio_util::sync::CancellationToken;
use trellis_llm::normalise::{
    NormaliseError, NormaliseOptions, Normalised, Repair, normalise_value,
};
use trellis_llm::{ChatRequest, Message, ModelProvider, Usage};

use crate::context::measure;
use crate::error::{Error, Result};

/// The limits of the task tree's handoff fields, in characters.
pub mod limits {
    /// `Task.gap_analysis` (set by the researcher).
    pub const GAP_ANALYSIS: usize = 2000;
    /// `Task.implementation_plan_summary` (compressed from the planner's full plan).
    pub const IMPLEMENTATION_PLAN_SUMMARY: usize = 500;
    /// `Task.result_summary` (set by the implementor).
    pub const RESULT_SUMMARY: usize = 1000;
    /// `Task.qa_feedback` (set by QA).
    pub const QA_FEEDBACK: usize = 500;
    /// A completed task's summary as the expander sees it.
    pub const COMPLETED_TASK_SUMMARY: usize = 300;
}

/// How a field was brought within its limit.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FieldRepairMethod {
    /// A model summarised it.
    Summarised,
    /// It was cut (the model failed, overshot, or none was available).
    Truncated,
}

/// One over-long field brought within its limit.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct FieldRepair {
    /// The field (a name, or a JSON pointer into the output).
    pub field: String,
    /// Its length before, in characters.
    pub from_chars: usize,
    /// Its length after.
    pub to_chars: usize,
    /// The limit.
    pub max_chars: usize,
    /// How.
    pub method: FieldRepairMethod,
    /// Why the model's summary was not used (for `truncated`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// Tokens of the summary call.
    #[serde(default)]
    pub usage: Usage,
}

/// A field within its limit, and the repair when it was not.
#[derive(Clone, Debug, PartialEq)]
pub struct Compressed {
    /// The text, at most the limit.
    pub text: String,
    /// What was done (`None`: it was within the limit).
    pub repair: Option<FieldRepair>,
}

/// `text` cut to `max` characters, the last one an ellipsis when anything was cut.
pub fn truncate_chars(text: &str, max: usize) -> String {
    if text.chars().count() <= max {
        return text.to_owned();
    }
    if max == 0 {
        return String::new();
    }
    let mut s: String = text.chars().take(max - 1).collect();
    s.push('…');
    s
}

fn log(repair: &FieldRepair) {
    tracing::info!(
        field = %repair.field,
        from = repair.from_chars,
        to = repair.to_chars,
        max = repair.max_chars,
        method = ?repair.method,
        reason = repair.reason.as_deref().unwrap_or(""),
        "normaliser: over-long field repaired"
    );
}

fn truncated(field: &str, text: &str, max: usize, reason: String, usage: Usage) -> Compressed {
    let cut = truncate_chars(text, max);
    let repair = FieldRepair {
        field: field.to_owned(),
        from_chars: text.chars().count(),
        to_chars: cut.chars().count(),
        max_chars: max,
        method: FieldRepairMethod::Truncated,
        reason: Some(reason),
        usage,
    };
    log(&repair);
    Compressed {
        text: cut,
        repair: Some(repair),
    }
}

/// Brings `text` (the value of `field`) within `max_chars` characters: `provider` is asked
/// to summarise it to the limit; its answer is used when it is within the limit, else (or
/// when the call fails, or without a provider) `text` is truncated. The input is cut to fit
/// the model's window first. Fails only when cancelled.
pub async fn compress_field(
    provider: Option<&dyn ModelProvider>,
    field: &str,
    text: &str,
    max_chars: usize,
    cancel: &CancellationToken,
) -> Result<Compressed> {
    let from = text.chars().count();
    if from <= max_chars {
        return Ok(Compressed {
            text: text.to_owned(),
            repair: None,
        });
    }
    let Some(provider) = provider else {
        return Ok(truncated(
            field,
            text,
            max_chars,
            "no model to summarise with".into(),
            Usage::default(),
        ));
    };
    // Room for an answer somewhat over the limit, so an overshoot shows rather than being
    // cut off mid-sentence.
    let max_tokens = (max_chars / 2 + 64) as u64;
    let budget = provider
        .context_window()
        .await
        .map(|w| u64::from(w.tokens).saturating_sub(max_tokens + 64).max(256));
    let mut input = text.to_owned();
    let request = loop {
        let request = ChatRequest {
            max_tokens: u32::try_from(max_tokens).ok(),
            ..ChatRequest::new(vec![
                Message::system(format!(
                    "You compress text that one agent hands to another. Rewrite the text you \
                     are given in at most {max_chars} characters, keeping facts, names, file \
                     paths, numbers, decisions and open problems; drop repetition and filler. \
                     Answer with the rewritten text only."
                )),
                Message::user(format!("Field `{field}`:\n{input}")),
            ])
        };
        match budget {
            Some(b) if measure(provider, &request) > b && input.len() > 400 => {
                let keep = input.len() * 7 / 10;
                input = crate::prompt::truncate(&input, keep);
            }
            _ => break request,
        }
    };
    let completion = match provider.complete(request, cancel.clone()).await {
        Ok(c) => c,
        Err(trellis_llm::Error::Cancelled) => return Err(Error::Cancelled),
        Err(e) => {
            return Ok(truncated(
                field,
                text,
                max_chars,
                format!("the summary call failed: {e}"),
                Usage::default(),
            ));
        }
    };
    let summary = completion.text.trim();
    let chars = summary.chars().count();
    if summary.is_empty() || chars > max_chars {
        let why = if summary.is_empty() {
            "the model answered nothing".to_owned()
        } else {
            format!("the model's summary had {chars} characters (limit {max_chars})")
        };
        return Ok(truncated(field, text, max_chars, why, completion.usage));
    }
    let repair = FieldRepair {
        field: field.to_owned(),
        from_chars: from,
        to_chars: chars,
        max_chars,
        method: FieldRepairMethod::Summarised,
        reason: None,
        usage: completion.usage,
    };
    log(&repair);
    Ok(Compressed {
        text: summary.to_owned(),
        repair: Some(repair),
    })
}

/// `schema` without string limits (`maxLength`).
fn without_max_length(schema: &Value) -> Value {
    match schema {
        Value::Object(m) => Value::Object(
            m.iter()
                .filter(|(k, v)| !(k.as_str() == "maxLength" && v.is_number()))
                .map(|(k, v)| (k.clone(), without_max_length(v)))
                .collect(),
        ),
        Value::Array(items) => Value::Array(items.iter().map(without_max_length).collect()),
        other => other.clone(),
    }
}

/// [`normalise_value`], with every string the schema's `maxLength` would truncate
/// compressed by [`compress_field`] instead (the normaliser's other repairs as they are).
/// Returns the value with its repairs, and one [`FieldRepair`] per over-long field.
pub async fn normalise_value_compressing(
    text: &str,
    schema: &Value,
    options: NormaliseOptions,
    provider: Option<&dyn ModelProvider>,
    cancel: &CancellationToken,
) -> Result<(Normalised<Value>, Vec<FieldRepair>)> {
    let mut n = normalise_value(text, schema, options).map_err(Error::Output)?;
    let cut: Vec<(String, usize)> = n
        .repairs
        .iter()
        .filter_map(|r| match r {
            Repair::Truncated { path, to, .. } => Some((path.clone(), *to)),
            _ => None,
        })
        .collect();
    if cut.is_empty() {
        return Ok((n, Vec::new()));
    }
    // The same answer without string limits holds the full strings at the same paths.
    let full = normalise_value(
        text,
        &without_max_length(schema),
        NormaliseOptions {
            max_repairs: usize::MAX,
        },
    )
    .map_err(Error::Output)?;
    let mut repairs = Vec::new();
    for (path, max) in cut {
        let Some(Value::String(original)) = full.value.pointer(&path) else {
            continue; // a list cut to `maxItems`
        };
        let field = if path.is_empty() { "/" } else { path.as_str() };
        let c = compress_field(provider, field, original, max, cancel).await?;
        if let Some(slot) = n.value.pointer_mut(&path) {
            *slot = Value::String(c.text);
        }
        repairs.extend(c.repair);
    }
    Ok((n, repairs))
}

/// [`normalise_value_compressing`] into `T`, with `T`'s JSON Schema.
pub async fn normalise_compressing<T>(
    text: &str,
    options: NormaliseOptions,
    provider: Option<&dyn ModelProvider>,
    cancel: &CancellationToken,
) -> Result<(Normalised<T>, Vec<FieldRepair>)>
where
    T: DeserializeOwned + JsonSchema + 'static,
{
    let schema = trellis_llm::structured::shared_schema_of::<T>();
    let (n, repairs) =
        normalise_value_compressing(text, &schema, options, provider, cancel).await?;
    match serde_json::from_value::<T>(n.value) {
        Ok(value) => Ok((
            Normalised {
                value,
                repairs: n.repairs,
            },
            repairs,
        )),
        Err(e) => Err(Error::Output(NormaliseError::Invalid {
            message: e.to_string(),
            repairs: n.repairs,
        })),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn truncation_marks_the_cut_within_the_limit() {
        assert_eq!(truncate_chars("abcdef", 4), "abc…");
        assert_eq!(truncate_chars("abc", 4), "abc");
        assert_eq!(truncate_chars("ééééé", 3).chars().count(), 3);
    }

    #[test]
    fn string_limits_are_removed_not_properties_named_like_them() {
        let s = json!({"type": "object", "properties": {
            "a": {"type": "string", "maxLength": 5},
            "maxLength": {"type": "integer"}
        }});
        let t = without_max_length(&s);
        assert!(t["properties"]["a"].get("maxLength").is_none());
        assert!(t["properties"].get("maxLength").is_some());
    }
}
