//! Unknown-key detection by walking a value against a section type's JSON Schema.
//!
//! Objects with `properties` are closed (a key outside them is unknown) unless they also
//! have an `additionalProperties` schema; maps (`additionalProperties` only) and untyped
//! values (`true`, `{}`) accept any key. `$ref`, `anyOf`, `oneOf` and `allOf` are followed,
//! and the alternatives' keys are pooled, which is precise enough for tagged enums.

use serde_json::Value;

/// The first unknown key found, as a dotted path below the section.
pub(crate) struct Unknown {
    pub(crate) path: String,
    pub(crate) suggestion: Option<String>,
}

pub(crate) fn first_unknown_key(root: &Value, value: &Value) -> Option<Unknown> {
    walk(root, &[root], value, "")
}

/// The closest candidate to `key`, if it is close enough to be a plausible typo.
pub fn nearest<'a>(key: &str, candidates: impl IntoIterator<Item = &'a str>) -> Option<String> {
    let (best, distance) = candidates
        .into_iter()
        .map(|c| (c, strsim::levenshtein(key, c)))
        .min_by_key(|(_, d)| *d)?;
    let close = distance <= 2
        || distance * 3 <= key.len().max(best.len())
        || (key.len() >= 3 && (best.starts_with(key) || key.starts_with(best)));
    close.then(|| best.to_string())
}

/// Parses serde's "unknown field `x`, expected one of `a`, `b`" (or "expected `a`").
pub(crate) fn serde_unknown_field(message: &str) -> Option<(String, Vec<String>)> {
    let rest = message.strip_prefix("unknown field `")?;
    let (field, rest) = rest.split_once('`')?;
    let expected = rest
        .split('`')
        .skip(1)
        .step_by(2)
        .map(str::to_string)
        .collect();
    Some((field.to_string(), expected))
}

fn resolve<'a>(root: &'a Value, schema: &'a Value, out: &mut Vec<&'a Value>, depth: usize) {
    if depth > 32 {
        return;
    }
    if let Some(r) = schema.get("$ref").and_then(Value::as_str) {
        if let Some(target) = r.strip_prefix('#').and_then(|p| root.pointer(p)) {
            resolve(root, target, out, depth + 1);
        }
        return;
    }
    let mut combined = false;
    for k in ["anyOf", "oneOf", "allOf"] {
        if let Some(alts) = schema.get(k).and_then(Value::as_array) {
            combined = true;
            for a in alts {
                resolve(root, a, out, depth + 1);
            }
        }
    }
    // A schema with both its own properties and a combinator contributes both.
    if !combined || schema.get("properties").is_some() {
        out.push(schema);
    }
}

fn allows_type(schema: &Value, ty: &str) -> bool {
    match schema.get("type") {
        None => true,
        Some(Value::String(t)) => t == ty,
        Some(Value::Array(ts)) => ts.iter().any(|t| t.as_str() == Some(ty)),
        Some(_) => true,
    }
}

fn walk(root: &Value, schemas: &[&Value], value: &Value, path: &str) -> Option<Unknown> {
    let mut candidates = Vec::new();
    for s in schemas {
        resolve(root, s, &mut candidates, 0);
    }
    match value {
        Value::Object(map) => {
            let mut known: Vec<&str> = Vec::new();
            let mut open = false;
            let mut objects = Vec::new();
            for c in &candidates {
                if c.as_bool() == Some(true) {
                    open = true;
                    continue;
                }
                if !c.is_object() || !allows_type(c, "object") {
                    continue;
                }
                let props = c.get("properties").and_then(Value::as_object);
                let extra = c.get("additionalProperties");
                match (props, extra) {
                    (None, None) | (None, Some(Value::Bool(true))) => open = true,
                    (Some(_), Some(Value::Bool(true))) => open = true,
                    _ => {}
                }
                if let Some(p) = props {
                    known.extend(p.keys().map(String::as_str));
                }
                objects.push(*c);
            }
            if objects.is_empty() && !open {
                return None; // not an object position: serde reports the type error
            }
            for (key, child) in map {
                let child_path = join(path, key);
                let mut subs: Vec<&Value> = Vec::new();
                for o in &objects {
                    if let Some(s) = o.get("properties").and_then(|p| p.get(key)) {
                        subs.push(s);
                    } else if let Some(extra) = o.get("additionalProperties")
                        && extra.is_object()
                    {
                        subs.push(extra);
                    }
                }
                if subs.is_empty() {
                    if open {
                        continue;
                    }
                    return Some(Unknown {
                        suggestion: nearest(key, known.iter().copied()).map(|s| join(path, &s)),
                        path: child_path,
                    });
                }
                if let Some(u) = walk(root, &subs, child, &child_path) {
                    return Some(u);
                }
            }
            None
        }
        Value::Array(items) => {
            let subs: Vec<&Value> = candidates.iter().filter_map(|c| c.get("items")).collect();
            if subs.is_empty() {
                return None;
            }
            items
                .iter()
                .enumerate()
                .find_map(|(i, item)| walk(root, &subs, item, &format!("{path}[{i}]")))
        }
        _ => None,
    }
}

fn join(path: &str, key: &str) -> String {
    if path.is_empty() {
        key.to_string()
    } else {
        format!("{path}.{key}")
    }
}
