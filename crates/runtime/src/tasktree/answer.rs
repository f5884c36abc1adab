//! Reading a step's answer leniently: the first JSON object in the text, and its fields
//! whatever shape a model gave them (a string or a list, `"yes"` for `true`, objects with a
//! `description`).

use serde_json::Value;
use trellis_workflow::tasktree::NewTask;

/// The first JSON object in `text` (raw, in a code fence, or amid prose), if any.
pub fn json_in(text: &str) -> Option<Value> {
    trellis_llm::normalise::first_json_object(text)
}

pub(super) fn text(v: &Value, key: &str) -> String {
    match v.get(key) {
        Some(Value::String(s)) => s.trim().to_owned(),
        Some(Value::Null) | None => String::new(),
        Some(other) => other.to_string(),
    }
}

pub(super) fn strings(v: &Value, key: &str) -> Vec<String> {
    match v.get(key) {
        Some(Value::Array(a)) => a
            .iter()
            .filter_map(|x| match x {
                Value::String(s) => Some(s.trim().to_owned()),
                Value::Object(o) => o
                    .get("description")
                    .and_then(Value::as_str)
                    .map(|s| s.trim().to_owned()),
                _ => None,
            })
            .filter(|s| !s.is_empty())
            .collect(),
        Some(Value::String(s)) if !s.trim().is_empty() => vec![s.trim().to_owned()],
        _ => Vec::new(),
    }
}

pub(super) fn boolean(v: &Value, key: &str) -> Option<bool> {
    match v.get(key)? {
        Value::Bool(b) => Some(*b),
        Value::String(s) => match s.trim().to_ascii_lowercase().as_str() {
            "true" | "yes" => Some(true),
            "false" | "no" => Some(false),
            _ => None,
        },
        _ => None,
    }
}

/// A proposed task from the expander's JSON.
pub(super) fn new_task(v: &Value) -> Option<NewTask> {
    let description = match text(v, "description") {
        d if d.is_empty() => text(v, "title"),
        d => d,
    };
    if description.is_empty() {
        return None;
    }
    let id = match v.get("id") {
        Some(Value::String(s)) if !s.trim().is_empty() => Some(s.trim().to_owned()),
        Some(Value::Number(n)) => Some(n.to_string()),
        _ => None,
    };
    Some(NewTask {
        id,
        description,
        measurable_outcome: text(v, "measurable_outcome"),
        depends_on: strings(v, "depends_on"),
        estimated_complexity: Some(text(v, "estimated_complexity")).filter(|c| !c.is_empty()),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn json_is_found_in_prose_and_fences() {
        assert_eq!(json_in("{\"a\": 1}"), Some(json!({"a": 1})));
        assert_eq!(
            json_in("Here it is:\n```json\n{\"gap_exists\": false, \"x\": \"}\"}\n```"),
            Some(json!({"gap_exists": false, "x": "}"}))
        );
        assert_eq!(json_in("no object {here"), None);
    }
}
