//! Text-level repairs: find the JSON in a model's answer and make it parse.

use super::Repair;

/// Parses `text` as JSON, repairing what is needed: markdown fences, prose around the
/// value, trailing commas, Python literals, and a value cut off before its end.
pub(super) fn extract_json(
    text: &str,
    want_array: bool,
    repairs: &mut Vec<Repair>,
) -> Option<serde_json::Value> {
    let trimmed = text.trim();
    if let Ok(v) = serde_json::from_str(trimmed) {
        return Some(v);
    }
    let mut body = trimmed;
    if let Some(inner) = fenced(trimmed) {
        repairs.push(Repair::StrippedFences);
        body = inner.trim();
        if let Ok(v) = serde_json::from_str(body) {
            return Some(v);
        }
    }
    let open = if want_array { b'[' } else { b'{' };
    let start = body.bytes().position(|b| b == open)?;
    let (end, closing) = match scan(&body.as_bytes()[start..]) {
        Scan::Complete(len) => (start + len, String::new()),
        Scan::Open(closing) => (body.len(), closing),
        Scan::Broken => return None,
    };
    let candidate = &body[start..end];
    if start > 0 || end < body.len() {
        repairs.push(Repair::ExtractedValue {
            dropped_before: body[..start].chars().count(),
            dropped_after: body[end..].chars().count(),
        });
    }
    let mut fixed = candidate.to_string();
    if !closing.is_empty() {
        fixed = close_truncated(candidate, &closing);
        repairs.push(Repair::ClosedTruncated { appended: closing });
    }
    if let Ok(v) = serde_json::from_str(&fixed) {
        return Some(v);
    }
    let lenient = lenient_fixes(&fixed);
    if lenient != fixed
        && let Ok(v) = serde_json::from_str(&lenient)
    {
        repairs.push(Repair::FixedSyntax);
        return Some(v);
    }
    None
}

/// The first complete JSON object in `text` that parses as it is (raw, inside a code fence,
/// or amid prose), trying each `{` in turn; no repairs. For readers that take a model's free
/// answer leniently but must not invent content (the task tree's steps).
pub(crate) fn first_object(text: &str) -> Option<serde_json::Value> {
    let t = text.trim();
    if let Ok(v @ serde_json::Value::Object(_)) = serde_json::from_str(t) {
        return Some(v);
    }
    let mut start = 0;
    while let Some(off) = t[start..].find('{') {
        let open = start + off;
        if let Scan::Complete(len) = scan(&t.as_bytes()[open..])
            && let Ok(v @ serde_json::Value::Object(_)) = serde_json::from_str(&t[open..open + len])
        {
            return Some(v);
        }
        start = open + 1;
    }
    None
}

/// The inside of the first ``` fenced block, if any.
fn fenced(text: &str) -> Option<&str> {
    let start = text.find("```")?;
    let after = &text[start + 3..];
    // Skip an info string such as `json`.
    let body_start = after.find('\n').map_or(0, |i| i + 1);
    let body = &after[body_start..];
    let end = body.find("```").unwrap_or(body.len());
    Some(&body[..end])
}

/// Where a JSON value starting at `bytes[0]` ends, scanning string- and escape-aware.
enum Scan {
    /// Balanced: its length.
    Complete(usize),
    /// Cut off: the characters that would close it (a quote if inside a string, then the
    /// open brackets in reverse).
    Open(String),
    /// A closing bracket without an opener.
    Broken,
}

fn scan(bytes: &[u8]) -> Scan {
    let mut stack = Vec::new();
    let mut in_string = false;
    let mut escaped = false;
    for (i, &b) in bytes.iter().enumerate() {
        if in_string {
            match (escaped, b) {
                (true, _) => escaped = false,
                (false, b'\\') => escaped = true,
                (false, b'"') => in_string = false,
                _ => {}
            }
            continue;
        }
        match b {
            b'"' => in_string = true,
            b'{' => stack.push('}'),
            b'[' => stack.push(']'),
            b'}' | b']' => {
                if stack.pop().is_none() {
                    return Scan::Broken;
                }
                if stack.is_empty() {
                    return Scan::Complete(i + 1);
                }
            }
            _ => {}
        }
    }
    let mut out = String::new();
    if in_string {
        if escaped {
            out.push('\\');
        }
        out.push('"');
    }
    out.extend(stack.iter().rev());
    Scan::Open(out)
}

/// Appends `closing` after dropping what cannot stand at the cut: a trailing `,`, a key
/// without its value (`"key":` or a half-written `"ke`).
fn close_truncated(candidate: &str, closing: &str) -> String {
    let (mut body, brackets) = if let Some(rest) = closing.strip_prefix("\\\"") {
        (format!("{candidate}\\\""), rest)
    } else if let Some(rest) = closing.strip_prefix('"') {
        (format!("{candidate}\""), rest)
    } else {
        (candidate.to_string(), closing)
    };
    let in_object = brackets.starts_with('}');
    loop {
        let t = body.trim_end();
        if let Some(s) = t.strip_suffix(',') {
            body = s.to_string();
            continue;
        }
        if let Some(s) = t.strip_suffix(':') {
            let s = s.trim_end();
            body = match trailing_string_start(s) {
                Some(k) => s[..k].to_string(),
                None => s.to_string(),
            };
            continue;
        }
        if in_object
            && let Some(k) = trailing_string_start(t)
            && matches!(t[..k].trim_end().chars().last(), Some(',') | Some('{'))
        {
            // A string right after `{` or `,` in an object is a key with no value.
            body = t[..k].to_string();
            continue;
        }
        body = t.to_string();
        break;
    }
    body.push_str(brackets);
    body
}

/// Start of the string literal `s` ends with (keys rarely hold escaped quotes; a wrong
/// guess only makes the parse fail).
fn trailing_string_start(s: &str) -> Option<usize> {
    s.strip_suffix('"')?.rfind('"')
}

/// Trailing commas and Python literals outside strings.
fn lenient_fixes(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let chars: Vec<char> = s.chars().collect();
    let mut in_string = false;
    let mut escaped = false;
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        if in_string {
            out.push(c);
            match (escaped, c) {
                (true, _) => escaped = false,
                (false, '\\') => escaped = true,
                (false, '"') => in_string = false,
                _ => {}
            }
            i += 1;
            continue;
        }
        if c == '"' {
            in_string = true;
        }
        if c == ',' {
            let next = chars[i + 1..].iter().find(|c| !c.is_whitespace());
            if matches!(next, Some('}') | Some(']')) {
                i += 1;
                continue;
            }
        }
        let word_at = |w: &str| {
            let wc: Vec<char> = w.chars().collect();
            chars.len() >= i + wc.len()
                && chars[i..i + wc.len()] == wc[..]
                && chars.get(i + wc.len()).is_none_or(|c| !c.is_alphanumeric())
                && (i == 0 || !chars[i - 1].is_alphanumeric())
        };
        let mut replaced = false;
        for (py, js) in [("True", "true"), ("False", "false"), ("None", "null")] {
            if word_at(py) {
                out.push_str(js);
                i += py.chars().count();
                replaced = true;
                break;
            }
        }
        if !replaced {
            out.push(c);
            i += 1;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ex(s: &str) -> (Option<serde_json::Value>, Vec<Repair>) {
        let mut r = Vec::new();
        (extract_json(s, false, &mut r), r)
    }

    #[test]
    fn first_object_tries_each_brace_and_repairs_nothing() {
        assert_eq!(
            first_object("use {braces} like {\"a\": [1, {\"b\": \"}\"}]} here"),
            Some(serde_json::json!({"a": [1, {"b": "}"}]}))
        );
        assert_eq!(
            first_object("```json\n{\"x\": 1}\n```"),
            Some(serde_json::json!({"x": 1}))
        );
        assert_eq!(first_object("[1, 2]"), None);
        assert_eq!(first_object("cut {\"a\": 1"), None);
    }

    #[test]
    fn closes_cut_values() {
        let (v, r) = ex(r#"{"a": "hello wor"#);
        assert_eq!(v, Some(serde_json::json!({"a": "hello wor"})));
        assert!(matches!(r[0], Repair::ClosedTruncated { .. }));
        let (v, _) = ex(r#"{"a": [1, 2,"#);
        assert_eq!(v, Some(serde_json::json!({"a": [1, 2]})));
        let (v, _) = ex(r#"{"a": 1, "b":"#);
        assert_eq!(v, Some(serde_json::json!({"a": 1})));
        let (v, _) = ex(r#"{"a": 1, "ke"#);
        assert_eq!(v, Some(serde_json::json!({"a": 1})));
        let (v, _) = ex(r#"["x", "y"#);
        assert_eq!(v, None, "an array is not wanted here");
        let mut r = Vec::new();
        let v = extract_json(r#"Sure! ["x", "y"#, true, &mut r);
        assert_eq!(v, Some(serde_json::json!(["x", "y"])));
    }

    #[test]
    fn lenient_syntax() {
        let (v, r) = ex("{'x': 1}");
        assert_eq!(v, None, "single quotes are not guessed at: {r:?}");
        let (v, _) = ex(r#"{"a": True, "b": [None,],}"#);
        assert_eq!(v, Some(serde_json::json!({"a": true, "b": [null]})));
    }
}
