//! Artifacts: what the stages of `staged_review` and `three_phase` hand
//! to each other and to the user, with validation whose messages a model can act on.
//!
//! | kind | file | content | rules |
//! |---|---|---|---|
//! | `scope_card` | `scope_card.json` | [`ScopeCard`] | `in_scope` has an item |
//! | `research_card` | `research_card.json` | [`ResearchCard`] | `key_files` has an entry, each with `path` and `why` |
//! | `plan` | `plan.json` | [`PlanCard`] | `approach_summary`, at least one pulse, pulse ids unique |
//! | `discovery` | `discovery.md` | markdown | not empty, at least one heading |
//! | `plan_md` | `plan.md` | markdown | not empty, at least one heading |
//! | `spec` | `spec.md` | markdown | not empty, at least one heading |
//! | `tickets` | `tickets.md` | [`Tickets`] (see [`tickets`]) | ids unique, dependencies defined, no cycle, acceptance criteria |
//!
//! [`validate`] checks an artifact's text and returns the parsed [`Validated`] value or an
//! [`ArtifactError`] listing every problem (with its line for markdown), phrased as what to
//! change. [`Validated::to_markdown`] is what the UI and CLI show; [`Validated::content`]
//! is what is stored. Nothing here reads or writes files.

mod cards;
mod docs;
pub mod tickets;

use std::fmt;
use std::str::FromStr;

use serde_json::Value;

pub use cards::{KeyFile, PlanCard, Pulse, ResearchCard, ScopeCard};
pub use tickets::{Ticket, Tickets, parse_tickets, tickets_ready};

/// The kinds of artifact.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ArtifactKind {
    /// `staged_review`'s scope card (JSON).
    ScopeCard,
    /// `staged_review`'s research card (JSON).
    ResearchCard,
    /// `staged_review`'s plan: approach summary and pulses (JSON).
    Plan,
    /// `three_phase`'s `discovery.md`.
    Discovery,
    /// `three_phase`'s `plan.md`.
    PlanMd,
    /// `three_phase`'s `spec.md`.
    Spec,
    /// `three_phase`'s `tickets.md`.
    Tickets,
}

impl ArtifactKind {
    /// Every kind.
    pub const ALL: [ArtifactKind; 7] = [
        ArtifactKind::ScopeCard,
        ArtifactKind::ResearchCard,
        ArtifactKind::Plan,
        ArtifactKind::Discovery,
        ArtifactKind::PlanMd,
        ArtifactKind::Spec,
        ArtifactKind::Tickets,
    ];

    /// The kind's name (the store's `artifacts.kind`).
    pub fn as_str(self) -> &'static str {
        match self {
            ArtifactKind::ScopeCard => "scope_card",
            ArtifactKind::ResearchCard => "research_card",
            ArtifactKind::Plan => "plan",
            ArtifactKind::Discovery => "discovery",
            ArtifactKind::PlanMd => "plan_md",
            ArtifactKind::Spec => "spec",
            ArtifactKind::Tickets => "tickets",
        }
    }

    /// Whether the content is JSON (the cards) rather than markdown.
    pub fn is_json(self) -> bool {
        matches!(
            self,
            ArtifactKind::ScopeCard | ArtifactKind::ResearchCard | ArtifactKind::Plan
        )
    }

    /// The file name extension: `json` or `md`.
    pub fn extension(self) -> &'static str {
        if self.is_json() { "json" } else { "md" }
    }

    /// The file's stem: the kind's name, except `plan` for `plan.md`.
    pub fn file_stem(self) -> &'static str {
        match self {
            ArtifactKind::PlanMd => "plan",
            other => other.as_str(),
        }
    }

    /// The file name of the latest version (`tickets.md`, `scope_card.json`).
    pub fn file_name(self) -> String {
        format!("{}.{}", self.file_stem(), self.extension())
    }

    /// The file name of version `version` (`tickets.v2.md`).
    pub fn versioned_file_name(self, version: u32) -> String {
        format!("{}.v{version}.{}", self.file_stem(), self.extension())
    }

    /// The `# ` title of its section in an answer holding several artifacts.
    pub fn title(self) -> &'static str {
        match self {
            ArtifactKind::ScopeCard => "Scope card",
            ArtifactKind::ResearchCard => "Research card",
            ArtifactKind::Plan => "Plan card",
            ArtifactKind::Discovery => "Discovery",
            ArtifactKind::PlanMd => "Plan",
            ArtifactKind::Spec => "Spec",
            ArtifactKind::Tickets => "Tickets",
        }
    }

    /// How messages name it: the file name for markdown, `scope card` … for the cards.
    pub fn label(self) -> &'static str {
        match self {
            ArtifactKind::ScopeCard => "scope card",
            ArtifactKind::ResearchCard => "research card",
            ArtifactKind::Plan => "plan",
            ArtifactKind::Discovery => "discovery.md",
            ArtifactKind::PlanMd => "plan.md",
            ArtifactKind::Spec => "spec.md",
            ArtifactKind::Tickets => "tickets.md",
        }
    }
}

impl fmt::Display for ArtifactKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for ArtifactKind {
    type Err = ArtifactError;

    /// A kind's name, or its file name (`tickets.md`, `plan.md`, `scope_card.json`).
    fn from_str(s: &str) -> Result<Self, ArtifactError> {
        let s = s.trim();
        ArtifactKind::ALL
            .into_iter()
            .find(|k| k.as_str() == s || k.file_name() == s)
            .ok_or_else(|| ArtifactError::UnknownKind { kind: s.to_owned() })
    }
}

/// One thing wrong with an artifact.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ArtifactProblem {
    /// The line (from 1) in a markdown artifact, when the problem has one.
    pub line: Option<usize>,
    /// What is wrong and what to do about it.
    pub message: String,
}

impl ArtifactProblem {
    pub(crate) fn at(line: usize, message: impl Into<String>) -> Self {
        Self {
            line: Some(line),
            message: message.into(),
        }
    }

    pub(crate) fn new(message: impl Into<String>) -> Self {
        Self {
            line: None,
            message: message.into(),
        }
    }
}

/// Why an artifact was refused.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ArtifactError {
    /// No such kind.
    #[error("unknown artifact kind `{kind}`; known: {}", known_kinds())]
    UnknownKind {
        /// The name given.
        kind: String,
    },
    /// The content breaks the kind's rules; every problem is listed.
    #[error("{}", render_problems(*kind, problems))]
    Invalid {
        /// The kind.
        kind: ArtifactKind,
        /// The problems, in order.
        problems: Vec<ArtifactProblem>,
    },
}

impl ArtifactError {
    pub(crate) fn invalid(kind: ArtifactKind, problems: Vec<ArtifactProblem>) -> Self {
        ArtifactError::Invalid { kind, problems }
    }

    /// The problems (empty for an unknown kind).
    pub fn problems(&self) -> &[ArtifactProblem] {
        match self {
            ArtifactError::Invalid { problems, .. } => problems,
            ArtifactError::UnknownKind { .. } => &[],
        }
    }
}

fn known_kinds() -> String {
    ArtifactKind::ALL.map(ArtifactKind::as_str).join(", ")
}

/// One problem a line: `tickets.md line 12: …` or `scope card: …`.
fn render_problems(kind: ArtifactKind, problems: &[ArtifactProblem]) -> String {
    problems
        .iter()
        .map(|p| match p.line {
            Some(line) => format!("{} line {line}: {}", kind.label(), p.message),
            None => format!("{}: {}", kind.label(), p.message),
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// A markdown artifact that passed its (minimal) rules.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Document {
    /// Its kind (`discovery`, `plan_md`, `spec`).
    pub kind: ArtifactKind,
    /// The markdown, as given.
    pub markdown: String,
    /// Its headings' texts, in order.
    pub headings: Vec<String>,
}

/// A valid artifact, parsed.
#[derive(Clone, Debug, PartialEq)]
pub enum Validated {
    /// A scope card.
    ScopeCard(ScopeCard),
    /// A research card.
    ResearchCard(ResearchCard),
    /// A `staged_review` plan.
    Plan(PlanCard),
    /// `discovery.md`, `plan.md` or `spec.md`.
    Document(Document),
    /// `tickets.md`.
    Tickets {
        /// The tickets.
        tickets: Tickets,
        /// The markdown, as given.
        markdown: String,
    },
}

impl Validated {
    /// Its kind.
    pub fn kind(&self) -> ArtifactKind {
        match self {
            Validated::ScopeCard(_) => ArtifactKind::ScopeCard,
            Validated::ResearchCard(_) => ArtifactKind::ResearchCard,
            Validated::Plan(_) => ArtifactKind::Plan,
            Validated::Document(d) => d.kind,
            Validated::Tickets { .. } => ArtifactKind::Tickets,
        }
    }

    /// What is stored: the card as pretty JSON (normalised: unknown keys dropped), the
    /// markdown as given.
    pub fn content(&self) -> String {
        let json = |v: Result<String, serde_json::Error>| v.unwrap_or_default();
        match self {
            Validated::ScopeCard(c) => json(serde_json::to_string_pretty(c)),
            Validated::ResearchCard(c) => json(serde_json::to_string_pretty(c)),
            Validated::Plan(c) => json(serde_json::to_string_pretty(c)),
            Validated::Document(d) => d.markdown.clone(),
            Validated::Tickets { markdown, .. } => markdown.clone(),
        }
    }

    /// What the UI and CLI show: the cards rendered as markdown, the markdown as given.
    pub fn to_markdown(&self) -> String {
        match self {
            Validated::ScopeCard(c) => c.to_markdown(),
            Validated::ResearchCard(c) => c.to_markdown(),
            Validated::Plan(c) => c.to_markdown(),
            Validated::Document(d) => d.markdown.clone(),
            Validated::Tickets { markdown, .. } => markdown.clone(),
        }
    }
}

/// The sections of an answer that holds several markdown artifacts, each starting with its
/// kind's `# ` title line ([`ArtifactKind::title`], or its file name: `# plan.md`), outside
/// code fences; the section runs to the next such title. Kinds without a section are absent.
pub fn split_sections(answer: &str, kinds: &[ArtifactKind]) -> Vec<(ArtifactKind, String)> {
    let titled = |line: &str| -> Option<ArtifactKind> {
        let (level, text) = docs::heading(line)?;
        (level == 1).then_some(())?;
        kinds.iter().copied().find(|k| {
            text.eq_ignore_ascii_case(k.title())
                || text.eq_ignore_ascii_case(&k.file_name())
                || text.eq_ignore_ascii_case(k.as_str())
        })
    };
    let mut out: Vec<(ArtifactKind, String)> = Vec::new();
    let mut fenced = false;
    for line in answer.lines() {
        if docs::is_fence(line) {
            fenced = !fenced;
        }
        let start = if fenced { None } else { titled(line) };
        match start {
            Some(k) if !out.iter().any(|(seen, _)| *seen == k) => {
                out.push((k, format!("{line}\n")));
            }
            _ => {
                if let Some((_, text)) = out.last_mut() {
                    text.push_str(line);
                    text.push('\n');
                }
            }
        }
    }
    out
}

/// Checks `content` as an artifact of `kind` (a kind name or file name, see
/// [`ArtifactKind::from_str`]).
pub fn validate(kind: &str, content: &str) -> Result<Validated, ArtifactError> {
    validate_kind(kind.parse()?, content)
}

/// Checks `content` as an artifact of `kind`: JSON text for the cards (an object, or a JSON
/// string holding one), markdown otherwise.
pub fn validate_kind(kind: ArtifactKind, content: &str) -> Result<Validated, ArtifactError> {
    if kind.is_json() {
        let value: Value = serde_json::from_str(content.trim()).map_err(|e| {
            ArtifactError::invalid(
                kind,
                vec![ArtifactProblem::new(format!(
                    "not valid JSON ({e}); send one JSON object with the {} fields",
                    kind.label()
                ))],
            )
        })?;
        return validate_json(kind, &value);
    }
    match kind {
        ArtifactKind::Tickets => {
            let tickets = parse_tickets(content)?;
            Ok(Validated::Tickets {
                tickets,
                markdown: content.to_owned(),
            })
        }
        _ => docs::validate(kind, content).map(Validated::Document),
    }
}

/// Checks a card given as JSON (what the `submit_*` tools receive). A markdown kind is
/// accepted as a JSON string holding the markdown.
pub fn validate_json(kind: ArtifactKind, value: &Value) -> Result<Validated, ArtifactError> {
    // Models sometimes send the object as a JSON string.
    if let Value::String(s) = value {
        if kind.is_json() {
            if let Ok(inner @ Value::Object(_)) = serde_json::from_str::<Value>(s.trim()) {
                return validate_json(kind, &inner);
            }
        } else {
            return validate_kind(kind, s);
        }
    }
    match kind {
        ArtifactKind::ScopeCard => cards::scope_card(value).map(Validated::ScopeCard),
        ArtifactKind::ResearchCard => cards::research_card(value).map(Validated::ResearchCard),
        ArtifactKind::Plan => cards::plan(value).map(Validated::Plan),
        other => Err(ArtifactError::invalid(
            other,
            vec![ArtifactProblem::new(format!(
                "expected the markdown text as a string, got {}",
                cards::type_name(value)
            ))],
        )),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    #[test]
    fn an_answer_splits_into_its_artifacts_sections() {
        let answer = "Intro\n# Plan\nGoals\n```\n# Spec\n```\n# Tickets\n## T1: a\n# Spec\n## R1\n";
        let kinds = [
            ArtifactKind::PlanMd,
            ArtifactKind::Spec,
            ArtifactKind::Tickets,
        ];
        let parts = super::split_sections(answer, &kinds);
        let names: Vec<ArtifactKind> = parts.iter().map(|(k, _)| *k).collect();
        assert_eq!(
            names,
            [
                ArtifactKind::PlanMd,
                ArtifactKind::Tickets,
                ArtifactKind::Spec
            ]
        );
        assert_eq!(parts[0].1, "# Plan\nGoals\n```\n# Spec\n```\n");
        assert_eq!(parts[2].1, "# Spec\n## R1\n");
    }

    use super::*;

    #[test]
    fn kinds_parse_from_names_and_file_names() {
        for k in ArtifactKind::ALL {
            assert_eq!(k.as_str().parse::<ArtifactKind>().unwrap(), k);
            assert_eq!(k.file_name().parse::<ArtifactKind>().unwrap(), k);
        }
        assert_eq!(ArtifactKind::PlanMd.file_name(), "plan.md");
        assert_eq!(ArtifactKind::Plan.file_name(), "plan.json");
        assert_eq!(
            ArtifactKind::Tickets.versioned_file_name(3),
            "tickets.v3.md"
        );
    }

    #[test]
    fn unknown_kind_lists_the_known_ones() {
        let e = validate("scope", "{}").unwrap_err();
        assert_eq!(
            e.to_string(),
            "unknown artifact kind `scope`; known: scope_card, research_card, plan, discovery, \
             plan_md, spec, tickets"
        );
    }

    #[test]
    fn invalid_json_says_so() {
        let e = validate("scope_card", "{in_scope: [}").unwrap_err();
        assert!(
            e.to_string().starts_with("scope card: not valid JSON ("),
            "{e}"
        );
        assert!(
            e.to_string()
                .ends_with("send one JSON object with the scope card fields")
        );
    }

    #[test]
    fn a_card_sent_as_a_json_string_is_accepted() {
        let v = Value::String(r#"{"in_scope": ["a"]}"#.into());
        let ok = validate_json(ArtifactKind::ScopeCard, &v).unwrap();
        assert_eq!(ok.kind(), ArtifactKind::ScopeCard);
    }

    #[test]
    fn markdown_kinds_take_a_string_through_validate_json() {
        let ok = validate_json(ArtifactKind::Spec, &Value::String("# Spec\nx".into())).unwrap();
        assert_eq!(ok.to_markdown(), "# Spec\nx");
        let e = validate_json(ArtifactKind::Spec, &serde_json::json!({"a": 1})).unwrap_err();
        assert_eq!(
            e.to_string(),
            "spec.md: expected the markdown text as a string, got an object"
        );
    }

    #[test]
    fn several_problems_are_one_line_each() {
        let e = validate("tickets", "## T1: a\nDepends on: T2\n## T1: b\n").unwrap_err();
        let text = e.to_string();
        assert!(text.lines().count() >= 3, "{text}");
        assert!(
            text.lines().all(|l| l.starts_with("tickets.md line ")),
            "{text}"
        );
    }
}
