//! The order in which the embedded model writes a tool call's arguments.
//!
//! llama.cpp's schema-to-grammar converter keeps an object's keys in the order the schema
//! lists them, and the model must then write them in that order. Sorted keys made the model
//! write `edit_file`'s `new_string` before the `path` and the `old_string` it replaces —
//! the replacement before knowing what it replaces (measured: the forced edit of a 1.5B
//! model was a repeated word and no path, docs/eval.md). So a schema's `properties` come in
//! the order of its `required` list (a JSON array: the same whatever a map's order), then
//! the optional ones, sorted. Everything else stays canonical, so the grammar and the prompt
//! are the same for the same request.

use serde_json::{Map, Value};
use trellis_protocol::canonical::canonical;

/// `schema`, canonical, with every object schema's `properties` in writing order: the
/// `required` names first, in that list's order, then the others (sorted).
pub(super) fn schema(schema: &Value) -> Value {
    let mut v = canonical(schema.clone());
    reorder_schema(&mut v);
    v
}

fn reorder_schema(v: &mut Value) {
    match v {
        Value::Object(o) => {
            let required: Vec<String> = match o.get("required") {
                Some(Value::Array(r)) => r
                    .iter()
                    .filter_map(Value::as_str)
                    .map(str::to_owned)
                    .collect(),
                _ => Vec::new(),
            };
            if let Some(Value::Object(props)) = o.get_mut("properties") {
                let mut rest: Vec<(String, Value)> = std::mem::take(props).into_iter().collect();
                let mut out = Map::new();
                for name in &required {
                    if let Some(i) = rest.iter().position(|(k, _)| k == name) {
                        let (k, s) = rest.remove(i);
                        out.insert(k, s);
                    }
                }
                out.extend(rest);
                *props = out;
            }
            o.values_mut().for_each(reorder_schema);
        }
        Value::Array(a) => a.iter_mut().for_each(reorder_schema),
        _ => {}
    }
}

/// `value` — a call's arguments — with its keys in the order [`schema`] has the model write
/// them (through `properties`, `items` and local `$ref`s); keys the schema does not name
/// follow, sorted.
pub(super) fn arguments(value: &Value, tool_schema: &Value) -> Value {
    let root = schema(tool_schema);
    let mut v = canonical(value.clone());
    order_value(&mut v, &root, &root, 0);
    v
}

fn resolve<'a>(s: &'a Value, root: &'a Value) -> &'a Value {
    match s.get("$ref").and_then(Value::as_str) {
        Some(r) => r
            .strip_prefix('#')
            .and_then(|p| root.pointer(p))
            .unwrap_or(s),
        None => s,
    }
}

fn order_value(v: &mut Value, schema: &Value, root: &Value, depth: usize) {
    // A recursive `$ref` cannot make this loop: it stops where the value ends, or here.
    if depth > 32 {
        return;
    }
    let schema = resolve(schema, root);
    match v {
        Value::Object(o) => {
            let Some(Value::Object(props)) = schema.get("properties") else {
                return;
            };
            let mut rest: Vec<(String, Value)> = std::mem::take(o).into_iter().collect();
            let mut out = Map::new();
            for (name, s) in props {
                if let Some(i) = rest.iter().position(|(k, _)| k == name) {
                    let (k, mut x) = rest.remove(i);
                    order_value(&mut x, s, root, depth + 1);
                    out.insert(k, x);
                }
            }
            rest.sort_by(|a, b| a.0.cmp(&b.0));
            out.extend(rest);
            *o = out;
        }
        Value::Array(a) => {
            if let Some(items) = schema.get("items") {
                for x in a {
                    order_value(x, items, root, depth + 1);
                }
            }
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;
    use serde_json::json;

    fn edit_schema() -> Value {
        // As schemars writes `multi_edit`'s: the edit type behind a `$ref`; keys inserted
        // in an order that is neither sorted nor the writing order.
        json!({
            "type": "object",
            "properties": {"edits": {"type": "array", "items": {"$ref": "#/$defs/Edit"}}},
            "required": ["edits"],
            "$defs": {"Edit": {
                "type": "object",
                "properties": {
                    "replace_all": {"type": "boolean"},
                    "new_string": {"type": "string"},
                    "path": {"type": "string"},
                    "old_string": {"type": "string"}
                },
                "required": ["path", "old_string", "new_string"]
            }}
        })
    }

    #[test]
    fn required_properties_come_first_in_their_listed_order() {
        let text = serde_json::to_string(&schema(&edit_schema())).unwrap();
        let at = |k: &str| text.find(&format!("\"{k}\":{{\"type\"")).unwrap();
        assert!(at("path") < at("old_string"), "{text}");
        assert!(at("old_string") < at("new_string"), "{text}");
        assert!(at("new_string") < at("replace_all"), "{text}");
        // The same text whatever order the keys were inserted in.
        let mut shuffled = edit_schema();
        let defs = shuffled["$defs"]["Edit"]["properties"]
            .as_object_mut()
            .unwrap();
        let path = defs.shift_remove("path").unwrap();
        defs.insert("path".into(), path);
        assert_eq!(serde_json::to_string(&schema(&shuffled)).unwrap(), text);
    }

    #[test]
    fn arguments_follow_the_schema_through_refs_and_items() {
        let args = json!({"edits": [
            {"zz": 1, "new_string": "b", "replace_all": false, "old_string": "a", "path": "x.py"}
        ]});
        let text = serde_json::to_string(&arguments(&args, &edit_schema())).unwrap();
        assert_eq!(
            text,
            r#"{"edits":[{"path":"x.py","old_string":"a","new_string":"b","replace_all":false,"zz":1}]}"#
        );
    }
}
