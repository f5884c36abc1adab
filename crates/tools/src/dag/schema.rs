//! Schema analysis for the DAG builder: the parameters a tool takes
//! and the properties it returns, with their JSON types, read from its JSON Schemas.

use serde::Serialize;
use serde_json::Value;

use crate::spec::ToolSpec;

/// A JSON value's type, as far as a schema says.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum JsonType {
    /// `"type": "string"`.
    String,
    /// `"type": "integer"`.
    Integer,
    /// `"type": "number"`.
    Number,
    /// `"type": "boolean"`.
    Boolean,
    /// `"type": "object"`.
    Object,
    /// `"type": "array"`.
    Array,
    /// No usable `type` (any value).
    Any,
}

impl JsonType {
    /// The type a (sub)schema declares: its `type` (the first non-null one of a list), else
    /// the type of its `anyOf`/`oneOf` variants when they all agree, else [`JsonType::Any`].
    pub fn of(schema: &Value) -> Self {
        match schema.get("type") {
            Some(Value::String(t)) => Self::named(t),
            Some(Value::Array(ts)) => ts
                .iter()
                .filter_map(Value::as_str)
                .find(|t| *t != "null")
                .map_or(Self::Any, Self::named),
            _ => {
                let variants = schema
                    .get("anyOf")
                    .or_else(|| schema.get("oneOf"))
                    .and_then(Value::as_array);
                let Some(variants) = variants else {
                    return Self::Any;
                };
                let mut types = variants
                    .iter()
                    .filter(|v| v.get("type").and_then(Value::as_str) != Some("null"))
                    .map(Self::of);
                match types.next() {
                    Some(first) if types.all(|t| t == first) => first,
                    _ => Self::Any,
                }
            }
        }
    }

    fn named(t: &str) -> Self {
        match t {
            "string" => Self::String,
            "integer" => Self::Integer,
            "number" => Self::Number,
            "boolean" => Self::Boolean,
            "object" => Self::Object,
            "array" => Self::Array,
            _ => Self::Any,
        }
    }

    /// Whether a value of type `self` (an output) can fill a parameter of type `param`:
    /// equal types, an integer for a number, or either side untyped.
    pub fn fits(self, param: JsonType) -> bool {
        self == param
            || self == Self::Any
            || param == Self::Any
            || (self == Self::Integer && param == Self::Number)
    }
}

/// One parameter of a tool's input, or one property of its output.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Port {
    /// The property name (`path`, `jsonString`).
    pub name: String,
    /// Its type.
    #[serde(rename = "type")]
    pub ty: JsonType,
    /// Whether the schema requires it (inputs only; outputs are always `false`).
    pub required: bool,
}

/// The name an output carries when a tool has no output schema: its text result.
pub const TEXT_OUTPUT: &str = "text";

/// The top-level parameters of an input schema, by name (never in the map's order, which
/// depends on serde_json's features).
pub fn inputs(schema: &Value) -> Vec<Port> {
    let required: Vec<&str> = schema
        .get("required")
        .and_then(Value::as_array)
        .map(|r| r.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    properties(schema)
        .map(|(name, s)| Port {
            required: required.contains(&name.as_str()),
            name: name.clone(),
            ty: JsonType::of(s),
        })
        .collect()
}

/// What a tool returns (by name): the top-level properties of its output schema, or — without one —
/// its text ([`TEXT_OUTPUT`], a string). A tool with an output schema also returns its text,
/// addressable as `text` when the schema has no property of that name.
pub fn outputs(spec: &ToolSpec) -> Vec<Port> {
    let mut ports: Vec<Port> = spec
        .output_schema
        .as_ref()
        .map(|s| {
            properties(s)
                .map(|(name, s)| Port {
                    name: name.clone(),
                    ty: JsonType::of(s),
                    required: false,
                })
                .collect()
        })
        .unwrap_or_default();
    if !ports.iter().any(|p| p.name == TEXT_OUTPUT) {
        ports.push(Port {
            name: TEXT_OUTPUT.to_owned(),
            ty: JsonType::String,
            required: false,
        });
    }
    ports
}

/// A schema's properties, by name.
fn properties(schema: &Value) -> impl Iterator<Item = (&String, &Value)> {
    let mut props: Vec<(&String, &Value)> = schema
        .get("properties")
        .and_then(Value::as_object)
        .into_iter()
        .flatten()
        .collect();
    props.sort_by(|a, b| a.0.cmp(b.0));
    props.into_iter()
}

/// A property name reduced for matching: lower case, without `_`, `-` and spaces, so
/// `json_string`, `jsonString` and `JSON-string` are one name.
pub fn normalize(name: &str) -> String {
    name.chars()
        .filter(|c| !matches!(c, '_' | '-' | ' '))
        .flat_map(char::to_lowercase)
        .collect()
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn types_come_from_type_lists_and_agreeing_variants() {
        assert_eq!(
            JsonType::of(&json!({"type": ["string", "null"]})),
            JsonType::String
        );
        assert_eq!(
            JsonType::of(&json!({"anyOf": [{"type": "integer"}, {"type": "null"}]})),
            JsonType::Integer
        );
        assert_eq!(
            JsonType::of(&json!({"anyOf": [{"type": "integer"}, {"type": "string"}]})),
            JsonType::Any
        );
        assert!(JsonType::Integer.fits(JsonType::Number));
        assert!(!JsonType::Number.fits(JsonType::Integer));
        assert!(!JsonType::String.fits(JsonType::Object));
    }

    #[test]
    fn inputs_come_by_name_with_required_flags() {
        let s = json!({"type": "object", "properties": {
            "path": {"type": "string"}, "limit": {"type": ["integer", "null"]}},
            "required": ["path"]});
        let ports = inputs(&s);
        assert_eq!(ports.len(), 2);
        assert_eq!(ports[1].name, "path");
        assert!(ports[1].required);
        assert_eq!(ports[0].ty, JsonType::Integer);
        assert!(!ports[0].required);
    }

    #[test]
    fn names_normalize_across_cases_and_separators() {
        assert_eq!(normalize("json_string"), normalize("jsonString"));
        assert_eq!(normalize("JSON-String"), "jsonstring");
    }
}
