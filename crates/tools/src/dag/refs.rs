//! References between steps: `${step}` and `${step.field.0.name}` in argument strings, found
//! when the DAG is built and replaced by the outputs when a step runs.

use serde_json::Value;

use super::schema::TEXT_OUTPUT;

/// One reference found in a step's arguments.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Reference {
    /// The argument holding it (dotted for nested ones: `options.path`).
    pub param: String,
    /// The step it names.
    pub step: String,
    /// The path into that step's output (empty: the whole output).
    pub path: Vec<String>,
}

impl Reference {
    /// The output path as written (`content`, or `(whole output)`).
    pub fn display_path(&self) -> String {
        if self.path.is_empty() {
            "(whole)".to_owned()
        } else {
            self.path.join(".")
        }
    }
}

/// What a finished step returned.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct StepOutput {
    /// Its text.
    pub text: String,
    /// Its structured result, if any.
    pub data: Option<Value>,
}

impl StepOutput {
    /// The value at `path`: the whole output (the structured result, else the text), a
    /// property path into the structured result, or `text` for the text.
    pub fn at(&self, path: &[String]) -> Option<Value> {
        let Some((first, rest)) = path.split_first() else {
            return Some(
                self.data
                    .clone()
                    .unwrap_or_else(|| Value::String(self.text.clone())),
            );
        };
        let in_data = self.data.as_ref().and_then(|d| walk(d, path));
        if in_data.is_some() {
            return in_data;
        }
        (first == TEXT_OUTPUT && rest.is_empty()).then(|| Value::String(self.text.clone()))
    }
}

fn walk(value: &Value, path: &[String]) -> Option<Value> {
    let mut at = value;
    for seg in path {
        at = match at {
            Value::Object(m) => m.get(seg)?,
            Value::Array(a) => a.get(seg.parse::<usize>().ok()?)?,
            _ => return None,
        };
    }
    Some(at.clone())
}

/// Every reference in `args` (object keys in name order, array items in order).
pub fn references(args: &Value) -> Vec<Reference> {
    let mut out = Vec::new();
    collect(args, "", &mut out);
    out
}

fn collect(value: &Value, at: &str, out: &mut Vec<Reference>) {
    match value {
        Value::String(s) => {
            for (_, _, step, path) in scan(s) {
                out.push(Reference {
                    param: at.to_owned(),
                    step,
                    path,
                });
            }
        }
        Value::Array(items) => {
            for (i, v) in items.iter().enumerate() {
                collect(v, &join(at, &i.to_string()), out);
            }
        }
        Value::Object(m) => {
            // By key, never in the map's order (a serde_json feature).
            let mut keys: Vec<&String> = m.keys().collect();
            keys.sort_unstable();
            for k in keys {
                collect(&m[k], &join(at, k), out);
            }
        }
        _ => {}
    }
}

fn join(at: &str, key: &str) -> String {
    if at.is_empty() {
        key.to_owned()
    } else {
        format!("{at}.{key}")
    }
}

/// The references of one string: (start, end, step, path) per `${…}`.
fn scan(s: &str) -> Vec<(usize, usize, String, Vec<String>)> {
    let mut found = Vec::new();
    let mut from = 0;
    while let Some(open) = s[from..].find("${").map(|p| p + from) {
        let Some(close) = s[open..].find('}').map(|p| p + open) else {
            break;
        };
        let inner = &s[open + 2..close];
        let mut parts = inner.split('.');
        let step = parts.next().unwrap_or_default();
        let ok = |p: &str| {
            !p.is_empty()
                && p.chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
        };
        let path: Vec<String> = parts.map(str::to_owned).collect();
        if ok(step) && path.iter().all(|p| ok(p)) {
            found.push((open, close + 1, step.to_owned(), path));
        }
        from = close + 1;
    }
    found
}

/// `args` with every reference replaced by its value: a string that is exactly one
/// reference becomes the value itself; references inside longer strings become text (a
/// string value as it is, others as JSON). Errors name the step and the missing output.
pub fn resolve(args: &Value, output: &dyn Fn(&str) -> Option<StepOutput>) -> Result<Value, String> {
    match args {
        Value::String(s) => {
            let refs = scan(s);
            if refs.is_empty() {
                return Ok(args.clone());
            }
            if let [(0, end, step, path)] = refs.as_slice()
                && *end == s.len()
            {
                return value_of(step, path, output);
            }
            let mut text = String::new();
            let mut last = 0;
            for (start, end, step, path) in &refs {
                text.push_str(&s[last..*start]);
                match value_of(step, path, output)? {
                    Value::String(v) => text.push_str(&v),
                    v => text.push_str(&v.to_string()),
                }
                last = *end;
            }
            text.push_str(&s[last..]);
            Ok(Value::String(text))
        }
        Value::Array(items) => items
            .iter()
            .map(|v| resolve(v, output))
            .collect::<Result<_, _>>()
            .map(Value::Array),
        Value::Object(m) => m
            .iter()
            .map(|(k, v)| Ok((k.clone(), resolve(v, output)?)))
            .collect::<Result<_, String>>()
            .map(Value::Object),
        other => Ok(other.clone()),
    }
}

fn value_of(
    step: &str,
    path: &[String],
    output: &dyn Fn(&str) -> Option<StepOutput>,
) -> Result<Value, String> {
    let out = output(step).ok_or_else(|| format!("step `{step}` has no output yet"))?;
    out.at(path).ok_or_else(|| {
        let fields = out
            .data
            .as_ref()
            .and_then(Value::as_object)
            .map(|m| {
                let mut keys: Vec<&str> = m.keys().map(String::as_str).collect();
                keys.sort_unstable();
                keys.join(", ")
            })
            .unwrap_or_default();
        format!(
            "step `{step}` has no output `{}` (it has: {}{TEXT_OUTPUT})",
            path.join("."),
            if fields.is_empty() {
                String::new()
            } else {
                format!("{fields}, ")
            }
        )
    })
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn finds_references_with_their_argument_paths() {
        let refs = references(&json!({"a": "${read.content}", "b": ["x ${list} y"]}));
        assert_eq!(refs.len(), 2);
        assert_eq!(refs[0].param, "a");
        assert_eq!(refs[0].step, "read");
        assert_eq!(refs[0].path, vec!["content".to_owned()]);
        assert_eq!(refs[1].param, "b.0");
        assert!(refs[1].path.is_empty());
        assert!(references(&json!({"a": "${bad step}", "b": "$notref"})).is_empty());
    }

    #[test]
    fn a_whole_reference_keeps_the_type_and_an_embedded_one_becomes_text() {
        let out = |step: &str| {
            (step == "p").then(|| StepOutput {
                text: "parsed".into(),
                data: Some(json!({"parsed": {"k": [1, 2]}, "n": 3})),
            })
        };
        let v = resolve(
            &json!({"data": "${p.parsed}", "msg": "n=${p.n}, first=${p.parsed.k.0}", "t": "${p.text}"}),
            &out,
        )
        .unwrap();
        assert_eq!(v["data"], json!({"k": [1, 2]}));
        assert_eq!(v["msg"], "n=3, first=1");
        assert_eq!(v["t"], "parsed");
        let err = resolve(&json!({"x": "${p.missing}"}), &out).unwrap_err();
        assert!(
            err.contains("no output `missing`") && err.contains("n, parsed"),
            "{err}"
        );
    }
}
