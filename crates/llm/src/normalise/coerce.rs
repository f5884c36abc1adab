//! Schema-level repairs: walk the value alongside its JSON Schema and fix types, names,
//! missing fields and sizes.

use serde_json::{Map, Value};

use super::Repair;

/// Follows `$ref` and unwraps nullable `anyOf`/`oneOf` (`Option<T>`).
fn resolve<'a>(root: &'a Value, mut s: &'a Value) -> &'a Value {
    for _ in 0..32 {
        if let Some(r) = s.get("$ref").and_then(Value::as_str) {
            match r.strip_prefix('#').and_then(|p| root.pointer(p)) {
                Some(t) => {
                    s = t;
                    continue;
                }
                None => return s,
            }
        }
        let alts = s
            .get("anyOf")
            .or_else(|| s.get("oneOf"))
            .and_then(Value::as_array);
        if let Some(alts) = alts {
            let non_null: Vec<&Value> = alts
                .iter()
                .filter(|a| a.get("type").and_then(Value::as_str) != Some("null"))
                .collect();
            if let [only] = non_null.as_slice() {
                s = only;
                continue;
            }
        }
        return s;
    }
    s
}

fn primary_type(s: &Value) -> Option<&str> {
    match s.get("type") {
        Some(Value::String(t)) => Some(t),
        Some(Value::Array(ts)) => ts.iter().filter_map(Value::as_str).find(|t| *t != "null"),
        _ => None,
    }
}

fn nullable(s: &Value) -> bool {
    match s.get("type") {
        Some(Value::Array(ts)) => ts.iter().any(|t| t.as_str() == Some("null")),
        _ => false,
    }
}

pub(super) fn expects_array(schema: &Value) -> bool {
    primary_type(resolve(schema, schema)) == Some("array")
}

/// Lowercase without `-`, `_` and spaces, for forgiving name matches.
fn loose(s: &str) -> String {
    s.chars()
        .filter(|c| !matches!(c, '-' | '_' | ' '))
        .flat_map(char::to_lowercase)
        .collect()
}

fn kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

pub(super) fn coerce(
    root: &Value,
    schema: &Value,
    value: &mut Value,
    path: &str,
    repairs: &mut Vec<Repair>,
) {
    let s = resolve(root, schema);
    if value.is_null() && nullable(s) {
        return;
    }
    if let (Some(options), Value::String(text)) = (s.get("enum").and_then(Value::as_array), &value)
        && !options.iter().any(|o| o.as_str() == Some(text))
    {
        let want = loose(text);
        if let Some(hit) = options
            .iter()
            .filter_map(Value::as_str)
            .find(|o| loose(o) == want)
        {
            repairs.push(Repair::Renamed {
                path: path.to_string(),
                from: text.clone(),
                to: hit.to_string(),
            });
            *value = Value::String(hit.to_string());
        }
        return;
    }
    match primary_type(s) {
        Some("object") => coerce_object(root, s, value, path, repairs),
        Some("array") => coerce_array(root, s, value, path, repairs),
        Some("string") => coerce_string(s, value, path, repairs),
        Some(t @ ("integer" | "number")) => coerce_number(t == "integer", value, path, repairs),
        Some("boolean") => coerce_bool(value, path, repairs),
        _ => {}
    }
}

fn coerced(repairs: &mut Vec<Repair>, path: &str, from: &Value, to: &str) {
    repairs.push(Repair::Coerced {
        path: path.to_string(),
        from: kind(from).to_string(),
        to: to.to_string(),
    });
}

fn coerce_object(
    root: &Value,
    s: &Value,
    value: &mut Value,
    path: &str,
    repairs: &mut Vec<Repair>,
) {
    let Value::Object(map) = value else {
        return;
    };
    let empty = Map::new();
    let props = s
        .get("properties")
        .and_then(Value::as_object)
        .unwrap_or(&empty);
    let required: Vec<&str> = s
        .get("required")
        .and_then(Value::as_array)
        .map(|r| r.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    let closed = s.get("additionalProperties") == Some(&Value::Bool(false));
    let keys: Vec<String> = map.keys().cloned().collect();
    for key in keys {
        if props.contains_key(&key) {
            continue;
        }
        let want = loose(&key);
        let target = props
            .keys()
            .find(|p| loose(p) == want && !map.contains_key(p.as_str()))
            .cloned();
        if let Some(target) = target {
            if let Some(v) = map.remove(&key) {
                repairs.push(Repair::Renamed {
                    path: format!("{path}/{key}"),
                    from: key.clone(),
                    to: target.clone(),
                });
                map.insert(target, v);
            }
        } else if closed {
            map.remove(&key);
            repairs.push(Repair::DroppedField {
                path: format!("{path}/{key}"),
            });
        }
    }
    for (name, prop) in props {
        let child = format!("{path}/{name}");
        if let Some(v) = map.get_mut(name) {
            coerce(root, prop, v, &child, repairs);
            continue;
        }
        let resolved = resolve(root, prop);
        let default = prop.get("default").or_else(|| resolved.get("default"));
        if let Some(d) = default {
            // Filling an optional field from its default is not a repair: the answer was
            // valid; a required one is.
            map.insert(name.clone(), d.clone());
            if required.contains(&name.as_str()) {
                repairs.push(Repair::FilledDefault { path: child });
            }
        } else if required.contains(&name.as_str()) {
            if nullable(resolved) || nullable(prop) {
                map.insert(name.clone(), Value::Null);
                repairs.push(Repair::FilledDefault { path: child });
            } else if primary_type(resolved) == Some("array") {
                map.insert(name.clone(), Value::Array(Vec::new()));
                repairs.push(Repair::FilledDefault { path: child });
            }
        }
    }
}

fn coerce_array(root: &Value, s: &Value, value: &mut Value, path: &str, repairs: &mut Vec<Repair>) {
    let replacement = match &*value {
        Value::Array(_) => None,
        Value::String(text) => {
            let trimmed = text.trim();
            let parsed = serde_json::from_str::<Value>(trimmed)
                .ok()
                .filter(Value::is_array);
            Some(parsed.unwrap_or_else(|| Value::Array(split_list(trimmed))))
        }
        Value::Null => Some(Value::Array(Vec::new())),
        other => Some(Value::Array(vec![other.clone()])),
    };
    if let Some(new) = replacement {
        coerced(repairs, path, value, "array");
        *value = new;
    }
    let Value::Array(items) = value else {
        return;
    };
    if let Some(item_schema) = s.get("items") {
        for (i, item) in items.iter_mut().enumerate() {
            coerce(root, item_schema, item, &format!("{path}/{i}"), repairs);
        }
    }
    if s.get("uniqueItems") == Some(&Value::Bool(true)) {
        let before = items.len();
        let mut seen = Vec::with_capacity(before);
        items.retain(|v| {
            if seen.contains(v) {
                false
            } else {
                seen.push(v.clone());
                true
            }
        });
        if items.len() < before {
            repairs.push(Repair::Deduplicated {
                path: path.to_string(),
                removed: before - items.len(),
            });
        }
    }
    if let Some(max) = s.get("maxItems").and_then(Value::as_u64) {
        let max = usize::try_from(max).unwrap_or(usize::MAX);
        if items.len() > max {
            repairs.push(Repair::Truncated {
                path: path.to_string(),
                from: items.len(),
                to: max,
            });
            items.truncate(max);
        }
    }
}

/// "a, b" / "- a\n- b" / "1. a\n2. b" → items; a single line without commas → one item.
fn split_list(text: &str) -> Vec<Value> {
    if text.is_empty() {
        return Vec::new();
    }
    let lines: Vec<&str> = text
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect();
    let parts: Vec<String> = if lines.len() > 1 {
        lines
            .iter()
            .map(|l| {
                let l = l.trim_start_matches(['-', '*', '•']);
                let l = l.trim_start_matches(|c: char| c.is_ascii_digit());
                l.trim_start_matches(['.', ')']).trim().to_string()
            })
            .collect()
    } else if text.contains(',') {
        text.split(',').map(|p| p.trim().to_string()).collect()
    } else {
        vec![text.to_string()]
    };
    parts
        .into_iter()
        .filter(|p| !p.is_empty())
        .map(Value::String)
        .collect()
}

fn coerce_string(s: &Value, value: &mut Value, path: &str, repairs: &mut Vec<Repair>) {
    match value {
        Value::Number(n) => {
            let t = n.to_string();
            coerced(repairs, path, value, "string");
            *value = Value::String(t);
        }
        Value::Bool(b) => {
            let t = b.to_string();
            coerced(repairs, path, value, "string");
            *value = Value::String(t);
        }
        Value::Array(items) if items.iter().all(Value::is_string) && !items.is_empty() => {
            let t = items
                .iter()
                .filter_map(Value::as_str)
                .collect::<Vec<_>>()
                .join("\n");
            coerced(repairs, path, value, "string");
            *value = Value::String(t);
        }
        _ => {}
    }
    if let (Value::String(text), Some(max)) = (value, s.get("maxLength").and_then(Value::as_u64)) {
        let max = usize::try_from(max).unwrap_or(usize::MAX);
        let len = text.chars().count();
        if len > max {
            let cut = text.char_indices().nth(max).map_or(text.len(), |(i, _)| i);
            text.truncate(cut);
            repairs.push(Repair::Truncated {
                path: path.to_string(),
                from: len,
                to: max,
            });
        }
    }
}

fn coerce_number(integer: bool, value: &mut Value, path: &str, repairs: &mut Vec<Repair>) {
    let parsed = match &*value {
        Value::String(t) => {
            let t = t.trim().trim_end_matches('%').replace('_', "");
            t.parse::<f64>().ok().filter(|f| f.is_finite())
        }
        Value::Number(n) if integer && !n.is_i64() && !n.is_u64() => n.as_f64(),
        Value::Bool(b) => Some(if *b { 1.0 } else { 0.0 }),
        _ => return,
    };
    let Some(f) = parsed else {
        return;
    };
    let new = if integer {
        if f.fract() != 0.0 || f.abs() > 9.0e15 {
            return;
        }
        Value::from(f as i64)
    } else {
        match serde_json::Number::from_f64(f) {
            Some(n) => Value::Number(n),
            None => return,
        }
    };
    coerced(
        repairs,
        path,
        value,
        if integer { "integer" } else { "number" },
    );
    *value = new;
}

fn coerce_bool(value: &mut Value, path: &str, repairs: &mut Vec<Repair>) {
    let b = match &*value {
        Value::String(t) => match t.trim().to_lowercase().as_str() {
            "true" | "yes" | "y" | "1" => true,
            "false" | "no" | "n" | "0" => false,
            _ => return,
        },
        Value::Number(n) if n.as_f64() == Some(0.0) => false,
        Value::Number(n) if n.as_f64() == Some(1.0) => true,
        _ => return,
    };
    coerced(repairs, path, value, "boolean");
    *value = Value::Bool(b);
}
