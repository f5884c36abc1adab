//! The JSON Schemas `trellis mcp` publishes, limited to standard JSON Schema.
//!
//! schemars marks Rust's number types with formats of its own (`"format": "uint32"`,
//! `"double"`). JSON Schema 2020-12 defines no such formats, and strict clients complain: the
//! official MCP TypeScript SDK's client prints "unknown format "uint32" ignored" for every
//! such field on every `tools/list`. The range they stand for is still stated by `minimum`
//! (schemars writes `"minimum": 0` for unsigned types), so dropping them loses nothing a
//! validator checks.

use rmcp::handler::server::router::tool::ToolRouter;
use rmcp::model::{JsonObject, Tool};
use serde_json::Value;

/// The formats JSON Schema 2020-12 defines (Validation, section 7.3).
const STANDARD_FORMATS: &[&str] = &[
    "date-time",
    "date",
    "time",
    "duration",
    "email",
    "idn-email",
    "hostname",
    "idn-hostname",
    "ipv4",
    "ipv6",
    "uri",
    "uri-reference",
    "iri",
    "iri-reference",
    "uuid",
    "uri-template",
    "json-pointer",
    "relative-json-pointer",
    "regex",
];

/// Removes every `format` keyword whose value is not a standard format, at any depth.
/// (A property *named* `format` is a key of `properties`, not a keyword: it is kept.)
pub(crate) fn standard(schema: &mut JsonObject) {
    if schema
        .get("format")
        .and_then(Value::as_str)
        .is_some_and(|f| !STANDARD_FORMATS.contains(&f))
    {
        schema.remove("format");
    }
    for (key, value) in schema.iter_mut() {
        match value {
            // Under `properties`, `$defs` and the like the keys are names, each mapped to a
            // schema; walking them as schemas would take a property named `format` for the
            // keyword, so their members are walked one level down.
            Value::Object(map) if is_schema_map(key) => {
                for member in map.values_mut() {
                    walk(member);
                }
            }
            // Values, not schemas.
            _ if matches!(key.as_str(), "default" | "examples" | "const" | "enum") => {}
            other => walk(other),
        }
    }
}

/// Keywords whose value maps names to schemas.
fn is_schema_map(key: &str) -> bool {
    matches!(
        key,
        "properties" | "$defs" | "definitions" | "patternProperties" | "dependentSchemas"
    )
}

fn walk(value: &mut Value) {
    match value {
        Value::Object(map) => standard(map),
        Value::Array(items) => items.iter_mut().for_each(walk),
        _ => {}
    }
}

/// A tool with its input and output schemas made [`standard`].
pub(crate) fn standard_tool(mut tool: Tool) -> Tool {
    standard(std::sync::Arc::make_mut(&mut tool.input_schema));
    if let Some(out) = tool.output_schema.as_mut() {
        standard(std::sync::Arc::make_mut(out));
    }
    tool
}

/// Every tool of `router` made [`standard`].
pub(crate) fn standard_router<S>(mut router: ToolRouter<S>) -> ToolRouter<S> {
    for route in router.map.values_mut() {
        route.attr = standard_tool(route.attr.clone());
    }
    router
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn standardised(v: Value) -> Value {
        let Value::Object(mut m) = v else {
            panic!("not an object")
        };
        standard(&mut m);
        Value::Object(m)
    }

    #[test]
    fn schemars_number_formats_go_and_standard_formats_and_format_properties_stay() {
        let schema = json!({
            "type": "object",
            "properties": {
                "line": {"type": "integer", "format": "uint32", "minimum": 0},
                "score": {"type": ["number", "null"], "format": "double"},
                "when": {"type": "string", "format": "date-time"},
                "style": {"type": "object", "default": {"format": "uint32"}},
                "format": {"type": "string", "description": "a property named format"},
                "places": {"type": "array", "items": {"$ref": "#/$defs/Place"}},
            },
            "$defs": {
                "Place": {"type": "object", "properties": {
                    "column": {"type": "integer", "format": "uint64", "minimum": 0}
                }},
                "Either": {"anyOf": [{"type": "integer", "format": "int64"}, {"type": "null"}]}
            }
        });
        let out = standardised(schema);
        assert_eq!(
            out["properties"]["line"],
            json!({"type": "integer", "minimum": 0})
        );
        assert_eq!(
            out["properties"]["score"],
            json!({"type": ["number", "null"]})
        );
        assert_eq!(out["properties"]["when"]["format"], "date-time");
        assert_eq!(out["properties"]["format"]["type"], "string");
        assert_eq!(out["properties"]["style"]["default"]["format"], "uint32");
        assert_eq!(
            out["$defs"]["Place"]["properties"]["column"],
            json!({"type": "integer", "minimum": 0})
        );
        assert_eq!(
            out["$defs"]["Either"]["anyOf"][0],
            json!({"type": "integer"})
        );
    }
}
