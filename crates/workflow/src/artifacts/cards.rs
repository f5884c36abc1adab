//! `staged_review`'s cards: the scope card, the research card and the plan (JSON objects), their
//! validation from JSON and their markdown rendering.
//!
//! Validation is lenient where the intent is clear and strict where it is not: unknown
//! fields are ignored (and named only when something else is wrong, to catch typos), a
//! single string where a list is expected becomes a one-item list, and a number as a pulse
//! id becomes its text; missing or empty required fields and items of the wrong type are
//! errors naming the field and the item.

use std::fmt::Write as _;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::{ArtifactError, ArtifactKind, ArtifactProblem};

/// The scope card: what the request covers.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct ScopeCard {
    /// One or two sentences: what the request is about.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub summary: Option<String>,
    /// What the change covers, one item per behaviour, component or file area (at least
    /// one).
    pub in_scope: Vec<String>,
    /// What it deliberately leaves out.
    #[serde(default)]
    pub out_of_scope: Vec<String>,
    /// Rules the work must respect (compatibility, APIs not to change, performance, style).
    #[serde(default)]
    pub constraints: Vec<String>,
}

/// A file the research found relevant.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct KeyFile {
    /// Path relative to the repository root.
    pub path: String,
    /// Why it matters for the request.
    pub why: String,
}

/// The research card: what the research found in the codebase.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct ResearchCard {
    /// One or two sentences: what was found.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub summary: Option<String>,
    /// The files that matter, each with why (at least one).
    pub key_files: Vec<KeyFile>,
    /// Conventions and patterns the change should follow.
    #[serde(default)]
    pub patterns: Vec<String>,
    /// Recommendations for the plan.
    #[serde(default)]
    pub recommendations: Vec<String>,
}

/// One pulse of a plan: a unit of execution.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct Pulse {
    /// A short unique id (`P1`, `P2`, …).
    pub id: String,
    /// What the pulse does, in a few words.
    pub title: String,
    /// What to change and how.
    pub description: String,
    /// The files it is expected to touch.
    #[serde(default)]
    pub files: Vec<String>,
}

/// `staged_review`'s plan: the approach and its pulses.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct PlanCard {
    /// The approach, in a short paragraph.
    pub approach_summary: String,
    /// The pulses, in execution order (at least one).
    pub pulses: Vec<Pulse>,
}

/// "an object", "a string", … for messages.
pub(crate) fn type_name(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "true/false",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "a list",
        Value::Object(_) => "an object",
    }
}

/// Reads fields of one JSON object, collecting problems.
struct Fields<'a> {
    obj: &'a Map<String, Value>,
    /// Prefix of field names in messages (`pulses[2].`).
    prefix: String,
    known: &'static [&'static str],
    problems: Vec<ArtifactProblem>,
}

impl<'a> Fields<'a> {
    fn new(obj: &'a Map<String, Value>, prefix: String, known: &'static [&'static str]) -> Self {
        Self {
            obj,
            prefix,
            known,
            problems: Vec::new(),
        }
    }

    fn problem(&mut self, message: String) {
        self.problems.push(ArtifactProblem::new(message));
    }

    /// A string field; `hint` says what it should hold.
    fn string(&mut self, key: &str, required: bool, hint: &str) -> String {
        let name = format!("{}{key}", self.prefix);
        match self.obj.get(key) {
            None | Some(Value::Null) if required => {
                self.problem(format!("`{name}` is missing; give {hint}"));
                String::new()
            }
            None | Some(Value::Null) => String::new(),
            Some(Value::String(s)) if required && s.trim().is_empty() => {
                self.problem(format!("`{name}` is empty; give {hint}"));
                String::new()
            }
            Some(Value::String(s)) => s.trim().to_owned(),
            Some(Value::Number(n)) if key == "id" => n.to_string(),
            Some(other) => {
                self.problem(format!(
                    "`{name}` is {}; give {hint} as a string",
                    type_name(other)
                ));
                String::new()
            }
        }
    }

    /// A list of strings (a lone string counts as one item).
    fn strings(&mut self, key: &str, required: bool, hint: &str) -> Vec<String> {
        let name = format!("{}{key}", self.prefix);
        let before = self.problems.len();
        let items: Vec<&Value> = match self.obj.get(key) {
            None | Some(Value::Null) => Vec::new(),
            Some(Value::Array(a)) => a.iter().collect(),
            Some(v @ Value::String(_)) => vec![v],
            Some(other) => {
                self.problem(format!(
                    "`{name}` is {}; give a list of strings: {hint}",
                    type_name(other)
                ));
                return Vec::new();
            }
        };
        let mut out = Vec::new();
        for (i, item) in items.iter().enumerate() {
            match item {
                Value::String(s) if !s.trim().is_empty() => out.push(s.trim().to_owned()),
                Value::String(_) => {
                    self.problem(format!("`{name}` item {} is empty; remove it", i + 1));
                }
                other => self.problem(format!(
                    "`{name}` item {} is {}; give each item as a string",
                    i + 1,
                    type_name(other)
                )),
            }
        }
        if required && out.is_empty() && self.problems.len() == before {
            let state = if self.obj.contains_key(key) {
                "is empty"
            } else {
                "is missing"
            };
            self.problem(format!(
                "`{name}` {state}; give a list of at least one string: {hint}"
            ));
        }
        out
    }

    /// A list of objects, each read by `each`.
    fn objects<T>(
        &mut self,
        key: &str,
        hint: &str,
        mut each: impl FnMut(&mut Fields<'_>) -> T,
        known: &'static [&'static str],
    ) -> Vec<T> {
        let name = format!("{}{key}", self.prefix);
        let items = match self.obj.get(key) {
            Some(Value::Array(a)) if !a.is_empty() => a,
            None | Some(Value::Null) => {
                self.problem(format!("`{name}` is missing; give a list of {hint}"));
                return Vec::new();
            }
            Some(Value::Array(_)) => {
                self.problem(format!("`{name}` is empty; give at least one of {hint}"));
                return Vec::new();
            }
            Some(other) => {
                self.problem(format!(
                    "`{name}` is {}; give a list of {hint}",
                    type_name(other)
                ));
                return Vec::new();
            }
        };
        let mut out = Vec::new();
        for (i, item) in items.iter().enumerate() {
            let Value::Object(obj) = item else {
                self.problem(format!(
                    "`{name}` item {} is {}; give each item as an object, {hint}",
                    i + 1,
                    type_name(item)
                ));
                continue;
            };
            let mut inner = Fields::new(obj, format!("{name}[{}].", i + 1), known);
            let value = each(&mut inner);
            let failed = !inner.problems.is_empty();
            self.problems.append(&mut inner.finish_problems());
            if !failed {
                out.push(value);
            }
        }
        out
    }

    /// The problems, with a note on unknown fields when there are any problems.
    fn finish_problems(self) -> Vec<ArtifactProblem> {
        let mut problems = self.problems;
        if !problems.is_empty() {
            let unknown: Vec<String> = self
                .obj
                .keys()
                .filter(|k| !self.known.contains(&k.as_str()))
                .map(|k| format!("`{}{k}`", self.prefix))
                .collect();
            if !unknown.is_empty() {
                problems.push(ArtifactProblem::new(format!(
                    "ignored unknown field(s) {}; the fields are: {}",
                    unknown.join(", "),
                    self.known.join(", ")
                )));
            }
        }
        problems
    }

    fn finish<T>(self, kind: ArtifactKind, value: T) -> Result<T, ArtifactError> {
        let problems = self.finish_problems();
        if problems.is_empty() {
            Ok(value)
        } else {
            Err(ArtifactError::invalid(kind, problems))
        }
    }
}

fn object(kind: ArtifactKind, v: &Value) -> Result<&Map<String, Value>, ArtifactError> {
    match v {
        Value::Object(o) => Ok(o),
        other => Err(ArtifactError::invalid(
            kind,
            vec![ArtifactProblem::new(format!(
                "expected a JSON object with the {} fields, got {}",
                kind.label(),
                type_name(other)
            ))],
        )),
    }
}

const SCOPE_FIELDS: &[&str] = &["summary", "in_scope", "out_of_scope", "constraints"];
const RESEARCH_FIELDS: &[&str] = &["summary", "key_files", "patterns", "recommendations"];
const KEY_FILE_FIELDS: &[&str] = &["path", "why"];
const PLAN_FIELDS: &[&str] = &["approach_summary", "pulses"];
const PULSE_FIELDS: &[&str] = &["id", "title", "description", "files"];

pub(crate) fn scope_card(v: &Value) -> Result<ScopeCard, ArtifactError> {
    let mut f = Fields::new(
        object(ArtifactKind::ScopeCard, v)?,
        String::new(),
        SCOPE_FIELDS,
    );
    let summary = f.string("summary", false, "a one-sentence summary");
    let card = ScopeCard {
        summary: (!summary.is_empty()).then_some(summary),
        in_scope: f.strings("in_scope", true, "what the change covers"),
        out_of_scope: f.strings("out_of_scope", false, "what it leaves out"),
        constraints: f.strings("constraints", false, "rules the work must respect"),
    };
    f.finish(ArtifactKind::ScopeCard, card)
}

pub(crate) fn research_card(v: &Value) -> Result<ResearchCard, ArtifactError> {
    let kind = ArtifactKind::ResearchCard;
    let mut f = Fields::new(object(kind, v)?, String::new(), RESEARCH_FIELDS);
    let summary = f.string("summary", false, "a one-sentence summary");
    let key_files = f.objects(
        "key_files",
        r#"{"path": "src/x.rs", "why": "…"}"#,
        |k| KeyFile {
            path: k.string(
                "path",
                true,
                "the file's path relative to the repository root",
            ),
            why: k.string("why", true, "why the file matters for the request"),
        },
        KEY_FILE_FIELDS,
    );
    let card = ResearchCard {
        summary: (!summary.is_empty()).then_some(summary),
        key_files,
        patterns: f.strings("patterns", false, "conventions the change should follow"),
        recommendations: f.strings("recommendations", false, "advice for the plan"),
    };
    f.finish(kind, card)
}

pub(crate) fn plan(v: &Value) -> Result<PlanCard, ArtifactError> {
    let kind = ArtifactKind::Plan;
    let mut f = Fields::new(object(kind, v)?, String::new(), PLAN_FIELDS);
    let approach_summary = f.string(
        "approach_summary",
        true,
        "the approach in a short paragraph",
    );
    let pulses = f.objects(
        "pulses",
        r#"{"id": "P1", "title": "…", "description": "…", "files": ["…"]}"#,
        |p| Pulse {
            id: p.string("id", true, "a short unique id such as `P1`"),
            title: p.string("title", true, "what the pulse does in a few words"),
            description: p.string("description", true, "what to change and how"),
            files: p.strings("files", false, "the files it touches"),
        },
        PULSE_FIELDS,
    );
    for (i, p) in pulses.iter().enumerate() {
        if let Some(j) = pulses[..i].iter().position(|q| q.id == p.id) {
            f.problem(format!(
                "pulse id `{}` is used by pulses {} and {}; give each pulse its own id",
                p.id,
                j + 1,
                i + 1
            ));
        }
    }
    f.finish(
        kind,
        PlanCard {
            approach_summary,
            pulses,
        },
    )
}

fn bullets(out: &mut String, items: &[String]) {
    if items.is_empty() {
        out.push_str("_None._\n");
    }
    for i in items {
        let _ = writeln!(out, "- {i}");
    }
}

impl ScopeCard {
    /// The card as markdown.
    pub fn to_markdown(&self) -> String {
        let mut s = String::from("# Scope card\n\n");
        if let Some(summary) = &self.summary {
            let _ = writeln!(s, "{summary}\n");
        }
        s.push_str("## In scope\n\n");
        bullets(&mut s, &self.in_scope);
        s.push_str("\n## Out of scope\n\n");
        bullets(&mut s, &self.out_of_scope);
        s.push_str("\n## Constraints\n\n");
        bullets(&mut s, &self.constraints);
        s
    }
}

impl ResearchCard {
    /// The card as markdown.
    pub fn to_markdown(&self) -> String {
        let mut s = String::from("# Research card\n\n");
        if let Some(summary) = &self.summary {
            let _ = writeln!(s, "{summary}\n");
        }
        s.push_str("## Key files\n\n");
        for k in &self.key_files {
            let _ = writeln!(s, "- `{}` — {}", k.path, k.why);
        }
        s.push_str("\n## Patterns\n\n");
        bullets(&mut s, &self.patterns);
        s.push_str("\n## Recommendations\n\n");
        bullets(&mut s, &self.recommendations);
        s
    }
}

impl PlanCard {
    /// The plan as markdown.
    pub fn to_markdown(&self) -> String {
        let mut s = format!(
            "# Plan\n\n## Approach\n\n{}\n\n## Pulses\n",
            self.approach_summary
        );
        for (i, p) in self.pulses.iter().enumerate() {
            let _ = write!(
                s,
                "\n### {}. {}: {}\n\n{}\n",
                i + 1,
                p.id,
                p.title,
                p.description
            );
            if !p.files.is_empty() {
                let files: Vec<String> = p.files.iter().map(|f| format!("`{f}`")).collect();
                let _ = write!(s, "\nFiles: {}\n", files.join(", "));
            }
        }
        s
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use serde_json::json;

    use super::super::validate;
    use super::*;

    fn err(kind: &str, v: Value) -> String {
        validate(kind, &v.to_string()).unwrap_err().to_string()
    }

    #[test]
    fn scope_card_problems() {
        let table = [
            (
                json!({}),
                "scope card: `in_scope` is missing; give a list of at least one string: what \
                 the change covers",
            ),
            (
                json!({"in_scope": []}),
                "scope card: `in_scope` is empty; give a list of at least one string: what the \
                 change covers",
            ),
            (
                json!({"in_scope": ["a", 3, " "]}),
                "scope card: `in_scope` item 2 is a number; give each item as a string\n\
                 scope card: `in_scope` item 3 is empty; remove it",
            ),
            (
                json!({"in_scope": {"a": 1}}),
                "scope card: `in_scope` is an object; give a list of strings: what the change \
                 covers",
            ),
            (
                json!({"inscope": ["a"]}),
                "scope card: `in_scope` is missing; give a list of at least one string: what \
                 the change covers\nscope card: ignored unknown field(s) `inscope`; the fields \
                 are: summary, in_scope, out_of_scope, constraints",
            ),
            (
                json!({"in_scope": ["a"], "summary": 1}),
                "scope card: `summary` is a number; give a one-sentence summary as a string",
            ),
            (
                json!(["a"]),
                "scope card: expected a JSON object with the scope card fields, got a list",
            ),
        ];
        for (input, want) in table {
            assert_eq!(err("scope_card", input.clone()), want, "{input}");
        }
    }

    #[test]
    fn scope_card_is_lenient_where_clear() {
        let v = json!({"in_scope": "one thing", "extra": true, "constraints": [" keep API "]});
        let card = scope_card(&v).unwrap();
        assert_eq!(card.in_scope, vec!["one thing"]);
        assert_eq!(card.constraints, vec!["keep API"]);
        assert!(card.out_of_scope.is_empty());
        let md = card.to_markdown();
        assert_eq!(
            md,
            "# Scope card\n\n## In scope\n\n- one thing\n\n## Out of scope\n\n_None._\n\n\
             ## Constraints\n\n- keep API\n"
        );
    }

    #[test]
    fn research_card_problems() {
        let table = [
            (
                json!({}),
                "research card: `key_files` is missing; give a list of {\"path\": \"src/x.rs\", \
                 \"why\": \"…\"}",
            ),
            (
                json!({"key_files": []}),
                "research card: `key_files` is empty; give at least one of {\"path\": \
                 \"src/x.rs\", \"why\": \"…\"}",
            ),
            (
                json!({"key_files": ["src/a.rs"]}),
                "research card: `key_files` item 1 is a string; give each item as an object, \
                 {\"path\": \"src/x.rs\", \"why\": \"…\"}",
            ),
            (
                json!({"key_files": [{"path": "a"}, {"why": "b", "reason": "c"}]}),
                "research card: `key_files[1].why` is missing; give why the file matters for \
                 the request\nresearch card: `key_files[2].path` is missing; give the file's \
                 path relative to the repository root\nresearch card: ignored unknown field(s) \
                 `key_files[2].reason`; the fields are: path, why",
            ),
        ];
        for (input, want) in table {
            assert_eq!(err("research_card", input.clone()), want, "{input}");
        }
    }

    #[test]
    fn research_card_renders() {
        let v = json!({"key_files": [{"path": "src/a.rs", "why": "the parser"}],
                       "patterns": ["errors via thiserror"], "summary": "Found it."});
        let md = research_card(&v).unwrap().to_markdown();
        assert_eq!(
            md,
            "# Research card\n\nFound it.\n\n## Key files\n\n- `src/a.rs` — the parser\n\n\
             ## Patterns\n\n- errors via thiserror\n\n## Recommendations\n\n_None._\n"
        );
    }

    #[test]
    fn plan_problems() {
        let table = [
            (
                json!({"pulses": [{"id": "P1", "title": "t", "description": "d"}]}),
                "plan: `approach_summary` is missing; give the approach in a short paragraph",
            ),
            (
                json!({"approach_summary": " ", "pulses": "x"}),
                "plan: `approach_summary` is empty; give the approach in a short paragraph\n\
                 plan: `pulses` is a string; give a list of {\"id\": \"P1\", \"title\": \"…\", \
                 \"description\": \"…\", \"files\": [\"…\"]}",
            ),
            (
                json!({"approach_summary": "a", "pulses": [{"id": "P1", "title": "t"}]}),
                "plan: `pulses[1].description` is missing; give what to change and how",
            ),
            (
                json!({"approach_summary": "a", "pulses": [
                    {"id": "P1", "title": "t", "description": "d"},
                    {"id": "P1", "title": "u", "description": "e"}]}),
                "plan: pulse id `P1` is used by pulses 1 and 2; give each pulse its own id",
            ),
        ];
        for (input, want) in table {
            assert_eq!(err("plan", input.clone()), want, "{input}");
        }
    }

    #[test]
    fn plan_renders_and_takes_numeric_ids() {
        let v = json!({"approach_summary": "Do it.", "pulses": [
            {"id": 1, "title": "Parser", "description": "Add it.", "files": ["src/p.rs"]}]});
        let plan = plan(&v).unwrap();
        assert_eq!(plan.pulses[0].id, "1");
        assert_eq!(
            plan.to_markdown(),
            "# Plan\n\n## Approach\n\nDo it.\n\n## Pulses\n\n### 1. 1: Parser\n\nAdd it.\n\n\
             Files: `src/p.rs`\n"
        );
    }
}
