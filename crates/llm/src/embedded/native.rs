//! The model's own tool-call format (`tool_format = "native"`): Qwen2.5's chat template, read
//! from the GGUF's `tokenizer.chat_template` (the Hermes style other ChatML models share).
//!
//! llama.cpp's `apply_chat_template` takes plain role/content messages, so the tool parts the
//! Jinja template would write are written here into the message texts, byte for byte as the
//! template renders them (checked against a rendering of the GGUF's template by Jinja in the
//! tests): the tools' signatures after the system prompt inside `<tools></tools>`, an
//! assistant call as `<tool_call>\n{"name": …, "arguments": …}\n</tool_call>`, tool results
//! as one user turn of `<tool_response>` blocks. JSON inside is written the way the template's
//! `tojson` does (`", "` and `": "` separators) with keys sorted, so the prompt does not
//! depend on serde_json's map order.
//!
//! The answer is generated freely and its `<tool_call>` blocks parsed ([`parse`]).

use serde_json::Value;

use crate::types::{Message, Role, ToolSpec};

/// The text the template adds after the system prompt when tools are offered.
pub(super) fn tools_section(tools: &[ToolSpec]) -> String {
    let mut out = String::from(
        "\n\n# Tools\n\nYou may call one or more functions to assist with the user query.\n\n\
         You are provided with function signatures within <tools></tools> XML tags:\n<tools>",
    );
    for t in tools {
        out.push('\n');
        // `{"type": "function", "function": {...}}`: the shape transformers passes to the
        // template, keys in its order.
        out.push_str("{\"type\": \"function\", \"function\": {\"name\": ");
        write_json(&mut out, &Value::String(t.name.clone()));
        out.push_str(", \"description\": ");
        write_json(&mut out, &Value::String(t.description.clone()));
        out.push_str(", \"parameters\": ");
        write_json(&mut out, &t.parameters);
        out.push_str("}}");
    }
    // The template's string literal writes its braces doubled, and so does the model's
    // training data's rendering of it: kept as the GGUF has it.
    out.push_str(
        "\n</tools>\n\nFor each function call, return a json object with function name and \
         arguments within <tool_call></tool_call> XML tags:\n<tool_call>\n\
         {{\"name\": <function-name>, \"arguments\": <args-json-object>}}\n</tool_call>",
    );
    out
}

/// The role/content pairs of `messages` in the native form: tools after the first system
/// prompt (one is added when there is none), calls and results as the template writes them.
pub(super) fn pairs(messages: &[Message], tools: &[ToolSpec]) -> Vec<(&'static str, String)> {
    let mut out: Vec<(&'static str, String)> = Vec::with_capacity(messages.len() + 1);
    let section = (!tools.is_empty()).then(|| tools_section(tools));
    if let Some(section) = &section
        && messages.first().is_none_or(|m| m.role != Role::System)
    {
        out.push(("system", section.trim_start().to_string()));
    }
    let mut previous_tool = false;
    for (i, m) in messages.iter().enumerate() {
        let is_tool = m.role == Role::Tool;
        match m.role {
            Role::System if i == 0 => {
                let mut text = m.content.clone();
                if let Some(section) = &section {
                    text.push_str(section);
                }
                out.push(("system", text));
            }
            Role::Tool => {
                let block = format!("<tool_response>\n{}\n</tool_response>", m.content);
                match out.last_mut() {
                    // Consecutive results share one user turn.
                    Some((_, text)) if previous_tool => {
                        text.push('\n');
                        text.push_str(&block);
                    }
                    _ => out.push(("user", block)),
                }
            }
            Role::Assistant if !m.tool_calls.is_empty() => {
                let mut text = m.content.clone();
                for call in &m.tool_calls {
                    if !text.is_empty() {
                        text.push('\n');
                    }
                    text.push_str("<tool_call>\n{\"name\": \"");
                    text.push_str(&call.name);
                    text.push_str("\", \"arguments\": ");
                    match call.arguments_json() {
                        Ok(args) => write_json(&mut text, &args),
                        // Arguments that never parsed go back as the model wrote them.
                        Err(_) => write_json(&mut text, &Value::String(call.arguments.clone())),
                    }
                    text.push_str("}\n</tool_call>");
                }
                out.push(("assistant", text));
            }
            role => out.push((role.as_str(), m.content.clone())),
        }
        previous_tool = is_tool;
    }
    out
}

/// Writes `value` as the template's `tojson` does (Python's `json.dumps`: `", "` and `": "`
/// separators, non-ASCII kept), with object keys sorted.
pub(super) fn write_json(out: &mut String, value: &Value) {
    match value {
        Value::Array(items) => {
            out.push('[');
            for (i, v) in items.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                write_json(out, v);
            }
            out.push(']');
        }
        Value::Object(map) => {
            let mut keys: Vec<&String> = map.keys().collect();
            keys.sort();
            out.push('{');
            for (i, k) in keys.into_iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                write_json(out, &Value::String(k.clone()));
                out.push_str(": ");
                if let Some(v) = map.get(k) {
                    write_json(out, v);
                }
            }
            out.push('}');
        }
        scalar => out.push_str(&scalar.to_string()),
    }
}

/// A tool call read from the answer.
#[derive(Clone, Debug, PartialEq)]
pub struct NativeCall {
    /// The tool's name (one of the offered tools).
    pub name: String,
    /// The arguments object.
    pub arguments: Value,
}

/// What a natively generated answer holds.
#[derive(Clone, Debug, PartialEq)]
pub struct NativeAnswer {
    /// The well-formed calls, in order.
    pub calls: Vec<NativeCall>,
    /// Why each malformed `<tool_call>` block was rejected.
    pub rejected: Vec<String>,
    /// The text outside the blocks, trimmed.
    pub text: String,
}

/// Reads the `<tool_call>…</tool_call>` blocks of `answer`. A call is well-formed when its
/// block is one JSON object with a `name` among `tools` and an `arguments` object (a JSON
/// string holding an object is accepted too: some fine-tunes write it that way). A block cut
/// off by the end of the answer is read up to the end. An answer without blocks that is
/// exactly one `{"name", "arguments"}` object is read as that call.
pub fn parse(answer: &str, tools: &[&str]) -> NativeAnswer {
    const OPEN: &str = "<tool_call>";
    const CLOSE: &str = "</tool_call>";
    let mut calls = Vec::new();
    let mut rejected = Vec::new();
    let mut text = String::new();
    let mut rest = answer;
    while let Some(start) = rest.find(OPEN) {
        text.push_str(&rest[..start]);
        let after = &rest[start + OPEN.len()..];
        let (body, next) = match after.find(CLOSE) {
            Some(end) => (&after[..end], &after[end + CLOSE.len()..]),
            None => (after, ""),
        };
        match read_call(body.trim(), tools) {
            Ok(call) => calls.push(call),
            Err(why) => rejected.push(why),
        }
        rest = next;
    }
    text.push_str(rest);
    // No block, but the whole answer is one `{"name": …, "arguments": …}` object: the call
    // without its tags (the coder model drops them on some turns). A final report has no
    // such pair of keys, so it stays text.
    if calls.is_empty()
        && rejected.is_empty()
        && let Ok(Value::Object(o)) = serde_json::from_str::<Value>(text.trim())
        && o.len() == 2
        && o.contains_key("name")
        && o.contains_key("arguments")
    {
        match read_call(text.trim(), tools) {
            Ok(call) => calls.push(call),
            Err(why) => rejected.push(why),
        }
        text.clear();
    }
    NativeAnswer {
        calls,
        rejected,
        text: text.trim().to_string(),
    }
}

fn read_call(body: &str, tools: &[&str]) -> Result<NativeCall, String> {
    let value: Value =
        serde_json::from_str(body).map_err(|e| format!("not one JSON object ({e}): {body}"))?;
    let name = value
        .get("name")
        .and_then(Value::as_str)
        .ok_or_else(|| format!("no \"name\" string: {body}"))?;
    if !tools.contains(&name) {
        return Err(format!("`{name}` is not an offered tool"));
    }
    let arguments = match value.get("arguments") {
        Some(Value::Object(o)) => Value::Object(o.clone()),
        Some(Value::String(s)) => match serde_json::from_str::<Value>(s) {
            Ok(Value::Object(o)) => Value::Object(o),
            _ => return Err(format!("`{name}`: the arguments are not a JSON object")),
        },
        None => return Err(format!("`{name}`: no \"arguments\"")),
        Some(_) => return Err(format!("`{name}`: the arguments are not a JSON object")),
    };
    Ok(NativeCall {
        name: name.to_string(),
        arguments,
    })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use serde_json::json;

    use super::*;
    use crate::types::ToolCall;

    const TOOLS: &[&str] = &["read_file", "grep"];

    #[test]
    fn a_well_formed_call_is_read() {
        let a = parse(
            "<tool_call>\n{\"name\": \"read_file\", \"arguments\": {\"path\": \"inventory.py\"}}\n</tool_call>",
            TOOLS,
        );
        assert_eq!(
            a.calls,
            vec![NativeCall {
                name: "read_file".into(),
                arguments: json!({"path": "inventory.py"})
            }]
        );
        assert!(a.rejected.is_empty() && a.text.is_empty(), "{a:?}");
    }

    #[test]
    fn several_calls_and_the_text_around_them() {
        let a = parse(
            "Let me look.\n<tool_call>\n{\"name\": \"grep\", \"arguments\": {\"pattern\": \"def \"}}\n\
             </tool_call>\n<tool_call>{\"name\": \"read_file\", \"arguments\": \"{\\\"path\\\": \\\"a\\\"}\"}\
             </tool_call> then done",
            TOOLS,
        );
        let names: Vec<&str> = a.calls.iter().map(|c| c.name.as_str()).collect();
        assert_eq!(names, ["grep", "read_file"]);
        assert_eq!(a.calls[1].arguments, json!({"path": "a"}));
        assert_eq!(a.text, "Let me look.\n\n then done");
    }

    #[test]
    fn malformed_and_unknown_calls_are_rejected_with_a_reason() {
        let a = parse(
            "<tool_call>{\"name\": \"read_file\", \"arguments\": {\"path\": </tool_call>\
             <tool_call>{\"name\": \"rm_rf\", \"arguments\": {}}</tool_call>\
             <tool_call>{\"name\": \"grep\", \"arguments\": [1]}</tool_call>\
             <tool_call>{\"arguments\": {}}</tool_call>",
            TOOLS,
        );
        assert!(a.calls.is_empty());
        assert_eq!(a.rejected.len(), 4, "{:?}", a.rejected);
        assert!(a.rejected[0].starts_with("not one JSON object"));
        assert!(a.rejected[1].contains("not an offered tool"));
        assert!(a.rejected[2].contains("not a JSON object"));
        assert!(a.rejected[3].contains("no \"name\""));
    }

    #[test]
    fn a_call_cut_off_at_the_end_is_read_to_the_end() {
        let a = parse(
            "<tool_call>\n{\"name\": \"grep\", \"arguments\": {\"pattern\": \"x\"}}",
            TOOLS,
        );
        assert_eq!(a.calls.len(), 1);
        let plain = parse("{\"failure\": false, \"output\": \"done\"}", TOOLS);
        assert!(plain.calls.is_empty() && plain.rejected.is_empty());
        assert_eq!(plain.text, "{\"failure\": false, \"output\": \"done\"}");
    }

    #[test]
    fn a_bare_call_object_is_a_call_and_a_report_is_not() {
        let a = parse(
            " {\"name\": \"read_file\", \"arguments\": {\"path\": \"a\"}}\n",
            TOOLS,
        );
        assert_eq!(a.calls.len(), 1, "{a:?}");
        assert!(a.text.is_empty());
        let unknown = parse("{\"name\": \"rm\", \"arguments\": {}}", TOOLS);
        assert!(unknown.calls.is_empty() && unknown.rejected.len() == 1);
        let report = parse(
            "{\"name\": \"x\", \"arguments\": {}, \"output\": \"\"}",
            TOOLS,
        );
        assert!(report.calls.is_empty() && report.rejected.is_empty());
    }

    /// Key order of `preserve_order` maps (on in this crate's tests) must not reach the text.
    #[test]
    fn json_is_written_like_tojson_with_sorted_keys() {
        let mut m = serde_json::Map::new();
        m.insert("zeta".into(), json!([1, "é"]));
        m.insert("alpha".into(), json!({"b": null, "a": true}));
        let mut out = String::new();
        write_json(&mut out, &Value::Object(m));
        assert_eq!(
            out,
            "{\"alpha\": {\"a\": true, \"b\": null}, \"zeta\": [1, \"é\"]}"
        );
    }

    /// The expected text is the GGUF template of Qwen2.5-Coder-1.5B-Instruct rendered by
    /// Jinja (Python `jinja2`, `tojson` as transformers defines it) for this conversation;
    /// here the same conversation goes through `pairs` and ChatML.
    #[test]
    fn rendering_matches_the_gguf_template() {
        let tools = vec![ToolSpec {
            name: "read_file".into(),
            description: "Read a file.".into(),
            parameters: json!({"type": "object", "properties": {"path": {"type": "string"}},
                "required": ["path"]}),
        }];
        let call = ToolCall {
            id: "c1".into(),
            name: "read_file".into(),
            arguments: "{\"path\":\"inventory.py\"}".into(),
        };
        let messages = vec![
            Message::system("You are a coder."),
            Message::user("Fix the bug."),
            Message {
                tool_calls: vec![call.clone()],
                ..Message::assistant("")
            },
            Message::tool_result("c1", "1\tclass Inventory:"),
            Message::tool_result("c2", "2\t    pass"),
            Message {
                tool_calls: vec![call],
                ..Message::assistant("Again.")
            },
            Message::tool_result("c3", "same"),
        ];
        let mut prompt = String::new();
        for (role, content) in pairs(&messages, &tools) {
            prompt.push_str(&format!("<|im_start|>{role}\n{content}<|im_end|>\n"));
        }
        prompt.push_str("<|im_start|>assistant\n");
        assert_eq!(prompt, include_str!("testdata/native_rendered.txt"));
    }
}
