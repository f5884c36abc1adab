//! A stage's answer as the end of `trellis run` shows it: the agent's report text (JSON
//! unwrapped into its meaningful fields, markdown as written), wrapped and indented,
//! clipped after a few lines, its findings as bullets, and the runtime's notes on it.

use serde_json::Value;

/// How a stage's answer is laid out.
#[derive(Clone, Copy, Debug)]
pub struct Layout {
    /// Text lines shown before clipping.
    pub max_lines: usize,
    /// Findings shown before clipping.
    pub max_findings: usize,
    /// Total line width, indentation included.
    pub width: usize,
    /// Indentation of every line.
    pub indent: usize,
}

impl Default for Layout {
    fn default() -> Self {
        Self {
            max_lines: 12,
            max_findings: 8,
            width: 100,
            indent: 4,
        }
    }
}

/// The lines showing a stage result's answer (`result` is a stage handler's recorded result:
/// `{output, findings, notes, reason, …}`); `more` names the command that prints
/// everything.
pub fn render(result: &Value, layout: Layout, more: &str) -> Vec<String> {
    let raw = result["output"]
        .as_str()
        .filter(|s| !s.trim().is_empty())
        .or_else(|| result["reason"].as_str())
        .unwrap_or_default();
    let mut findings: Vec<String> = strings(&result["findings"]);
    let text = readable(raw, &mut findings);
    let pad = " ".repeat(layout.indent);
    let width = layout.width.saturating_sub(layout.indent).max(20);
    let mut lines: Vec<String> = Vec::new();
    for line in trim_blank_edges(&text) {
        lines.extend(wrap(line, width));
    }
    let mut out: Vec<String> = Vec::new();
    let hidden = lines.len().saturating_sub(layout.max_lines);
    out.extend(
        lines
            .into_iter()
            .take(layout.max_lines)
            .map(|l| if l.is_empty() { l } else { format!("{pad}{l}") }),
    );
    if hidden > 0 {
        out.push(format!("{pad}… ({hidden} more lines: `{more}`)"));
    }
    if !findings.is_empty() {
        out.push(format!("{pad}findings:"));
        for f in findings.iter().take(layout.max_findings) {
            for (i, l) in wrap(&one_line(f), width.saturating_sub(2).max(20))
                .into_iter()
                .enumerate()
            {
                out.push(format!("{pad}{} {l}", if i == 0 { "-" } else { " " }));
            }
        }
        let hidden = findings.len().saturating_sub(layout.max_findings);
        if hidden > 0 {
            out.push(format!("{pad}… ({hidden} more findings: `{more}`)"));
        }
    }
    // What the runtime noticed (an answer that needed repair, unverified tests …), a line
    // each: they explain a surprising answer.
    let notes = strings(&result["notes"]);
    for n in notes.iter().take(layout.max_findings) {
        out.push(format!(
            "{pad}note: {}",
            crate::display::truncate(&one_line(n), width.saturating_sub(6).max(20))
        ));
    }
    let hidden = notes.len().saturating_sub(layout.max_findings);
    if hidden > 0 {
        out.push(format!("{pad}… ({hidden} more notes: `{more}`)"));
    }
    out
}

/// The report text made readable: a JSON answer (possibly fenced) becomes its `output`
/// text, or its fields one per line; its `findings` join `findings`.
fn readable(raw: &str, findings: &mut Vec<String>) -> String {
    let Some(v) = parse_json(raw) else {
        return raw.to_owned();
    };
    match v {
        Value::String(s) => s,
        Value::Object(m) => {
            for f in strings(m.get("findings").unwrap_or(&Value::Null)) {
                if !findings.contains(&f) {
                    findings.push(f);
                }
            }
            if let Some(text) = m.get("output").and_then(Value::as_str) {
                return readable(text, findings);
            }
            let mut lines = Vec::new();
            for (k, v) in m.iter().filter(|(k, _)| k.as_str() != "findings") {
                match v {
                    Value::String(s) if s.contains('\n') => {
                        lines.push(format!("{k}:"));
                        lines.extend(s.lines().map(|l| format!("  {l}")));
                    }
                    Value::String(s) => lines.push(format!("{k}: {s}")),
                    Value::Array(items) => {
                        lines.push(format!("{k}:"));
                        lines.extend(items.iter().map(|i| format!("- {}", scalar(i))));
                    }
                    other => lines.push(format!("{k}: {}", scalar(other))),
                }
            }
            lines.join("\n")
        }
        other => serde_json::to_string_pretty(&other).unwrap_or_else(|_| raw.to_owned()),
    }
}

/// `raw` as JSON when it is an object or string, also inside a ```json fence or after a
/// bare `json` line (what small models write).
fn parse_json(raw: &str) -> Option<Value> {
    let mut t = raw.trim();
    if let Some(rest) = t.strip_prefix("```") {
        t = rest.split_once('\n').map_or("", |(_, body)| body);
        t = t.trim_end().strip_suffix("```").unwrap_or(t).trim();
    } else if let Some(rest) = t.strip_prefix("json")
        && rest.trim_start().starts_with(['{', '"'])
    {
        t = rest.trim_start();
    }
    if !t.starts_with(['{', '"']) {
        return None;
    }
    serde_json::from_str(t).ok()
}

fn strings(v: &Value) -> Vec<String> {
    v.as_array()
        .map(|a| a.iter().map(scalar).filter(|s| !s.is_empty()).collect())
        .unwrap_or_default()
}

fn scalar(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Null => String::new(),
        other => other.to_string(),
    }
}

fn one_line(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// The lines of `text` without leading and trailing blank lines.
fn trim_blank_edges(text: &str) -> Vec<&str> {
    let lines: Vec<&str> = text.lines().map(str::trim_end).collect();
    let start = lines
        .iter()
        .position(|l| !l.is_empty())
        .unwrap_or(lines.len());
    let end = lines
        .iter()
        .rposition(|l| !l.is_empty())
        .map_or(start, |e| e + 1);
    lines
        .get(start..end)
        .map(|l| l.to_vec())
        .unwrap_or_default()
}

/// Wraps one line at word boundaries to `width` characters, continuation lines keeping the
/// line's own indentation; a word longer than the width is cut.
fn wrap(line: &str, width: usize) -> Vec<String> {
    if line.chars().count() <= width {
        return vec![line.to_owned()];
    }
    let lead: String = line.chars().take_while(|c| c.is_whitespace()).collect();
    let lead_n = lead.chars().count();
    let mut out = Vec::new();
    let mut current = lead.clone();
    for word in line.split_whitespace() {
        let used = current.chars().count();
        if used > lead_n && used + 1 + word.chars().count() > width {
            out.push(std::mem::replace(&mut current, lead.clone()));
        }
        if current.chars().count() > lead_n {
            current.push(' ');
        }
        let mut rest: Vec<char> = word.chars().collect();
        while current.chars().count() + rest.len() > width && rest.len() > width / 2 {
            let room = width.saturating_sub(current.chars().count()).max(1);
            let tail = rest.split_off(room.min(rest.len()));
            current.extend(rest);
            out.push(std::mem::replace(&mut current, lead.clone()));
            rest = tail;
        }
        current.extend(rest);
    }
    if current.chars().count() > lead_n {
        out.push(current);
    }
    out
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use serde_json::json;

    use super::*;

    fn layout() -> Layout {
        Layout {
            max_lines: 4,
            max_findings: 2,
            width: 40,
            indent: 2,
        }
    }

    #[test]
    fn markdown_is_shown_wrapped_and_clipped_with_the_command_for_the_rest() {
        let r = json!({
            "output": "## Analysis\n\nStock lives in memory, so a restart loses every reservation made since start.\n- a\n- b\n- c",
            "findings": ["restart loses reservations", "no tests for commit"],
        });
        let lines = render(&r, layout(), "trellis runs show R --json");
        assert_eq!(
            lines,
            [
                "  ## Analysis",
                "",
                "  Stock lives in memory, so a restart",
                "  loses every reservation made since",
                "  … (4 more lines: `trellis runs show R --json`)",
                "  findings:",
                "  - restart loses reservations",
                "  - no tests for commit",
            ]
        );
    }

    #[test]
    fn json_answers_show_their_text_and_findings() {
        for raw in [
            "```json\n{\"output\": \"Keep it in memory.\", \"findings\": [\"x\"]}\n```",
            "json\n{\"output\": \"Keep it in memory.\", \"findings\": [\"x\"]}",
            "{\"output\": \"Keep it in memory.\", \"findings\": [\"x\"]}",
        ] {
            let lines = render(&json!({ "output": raw, "findings": [] }), layout(), "m");
            assert_eq!(
                lines,
                ["  Keep it in memory.", "  findings:", "  - x"],
                "{raw}"
            );
        }
        // An object without `output`: its fields, one per line.
        let raw = r#"{"decision": "persist", "options": ["sqlite", "files"]}"#;
        let lines = render(&json!({ "output": raw }), layout(), "m");
        assert_eq!(
            lines,
            [
                "  decision: persist",
                "  options:",
                "  - sqlite",
                "  - files"
            ]
        );
    }

    #[test]
    fn notes_are_one_clipped_line_each() {
        let r = json!({
            "output": "json",
            "notes": ["final answer was not a report", format!("listed {}", "a.py ".repeat(40))],
        });
        let lines = render(&r, layout(), "m");
        assert_eq!(
            lines,
            [
                "  json",
                "  note: final answer was not a report",
                "  note: listed a.py a.py a.py a.py a.py…",
            ]
        );
    }

    #[test]
    fn a_failed_stage_shows_its_reason_and_long_words_are_cut() {
        let r = json!({ "output": "", "reason": "x".repeat(50) });
        let lines = render(&r, layout(), "m");
        assert_eq!(
            lines,
            [
                format!("  {}", "x".repeat(38)),
                format!("  {}", "x".repeat(12))
            ]
        );
        assert!(render(&json!({}), layout(), "m").is_empty());
    }
}
