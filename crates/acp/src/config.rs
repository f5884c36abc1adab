//! A session's settings, offered to the editor as ACP session config options (and, for the
//! autonomy, as the older session modes): which workflow a prompt runs, and how much the
//! agent may do without asking.

use std::collections::BTreeMap;

use agent_client_protocol::v1::schema as acp;
use serde::{Deserialize, Serialize};

/// The config option choosing the workflow.
pub const WORKFLOW: &str = "workflow";
/// The config option (and the modes) choosing the autonomy.
pub const AUTONOMY: &str = "autonomy";
/// The workflow value that lets the orchestrator choose.
pub const AUTO: &str = "auto";

/// How much a prompt may do without asking.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Autonomy {
    /// Approvals are asked; the run's change set is applied to the user's files only when the
    /// user accepts it (a permission request showing the diffs).
    #[default]
    Ask,
    /// Approvals are asked; the change set is applied when the run ends (undo with `/undo`).
    AutoEdit,
    /// Nothing is asked: tools the policy would ask about are denied, and the change set is
    /// never applied (it stays in the run's worktree for `trellis review`).
    ReadOnly,
}

impl Autonomy {
    /// Every value, in the order offered.
    pub const ALL: [Autonomy; 3] = [Autonomy::Ask, Autonomy::AutoEdit, Autonomy::ReadOnly];

    /// Its id on the wire.
    pub fn id(self) -> &'static str {
        match self {
            Autonomy::Ask => "ask",
            Autonomy::AutoEdit => "auto-edit",
            Autonomy::ReadOnly => "read-only",
        }
    }

    /// The value with this id.
    pub fn parse(id: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|a| a.id() == id)
    }

    fn name(self) -> &'static str {
        match self {
            Autonomy::Ask => "Ask",
            Autonomy::AutoEdit => "Auto-edit",
            Autonomy::ReadOnly => "Read-only",
        }
    }

    fn description(self) -> &'static str {
        match self {
            Autonomy::Ask => "Ask before commands and before applying the changes to your files",
            Autonomy::AutoEdit => {
                "Apply the run's changes to your files when it ends (undo with /undo); ask before commands"
            }
            Autonomy::ReadOnly => {
                "Never change your files; deny what would need approval (changes stay in the run's worktree)"
            }
        }
    }
}

/// A session's settings, stored with it (the `config` JSON of its record).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct SessionConfig {
    /// The workflow every prompt runs; `None`: the orchestrator chooses.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub workflow: Option<String>,
    /// How much a prompt may do without asking.
    pub autonomy: Autonomy,
    /// Approvals answered "always" (`true`) or "never" (`false`), by tool (or prompt).
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub approvals: BTreeMap<String, bool>,
}

/// A short name for a workflow.
fn workflow_name(name: &str) -> String {
    match name {
        "feature_with_iterative_testing" => "Feature (implement, test, review)".into(),
        "architecture_discussion" => "Discussion (analyse, answer, document)".into(),
        "bug_fix" => "Bug fix (one small change)".into(),
        other => other.replace('_', " "),
    }
}

impl SessionConfig {
    /// The stored form.
    pub fn to_json(&self) -> String {
        serde_json::to_string(self).unwrap_or_else(|_| "{}".into())
    }

    /// From the stored form (defaults for what is missing or unreadable).
    pub fn from_json(text: &str) -> Self {
        serde_json::from_str(text).unwrap_or_default()
    }

    /// The config options: the workflow (`auto` or one of `workflows`) and the autonomy.
    pub fn options(&self, workflows: &[String]) -> Vec<acp::SessionConfigOption> {
        let mut choices = vec![
            acp::SessionConfigSelectOption::new(AUTO, "Auto")
                .description("The orchestrator picks the workflow for each request".to_owned()),
        ];
        choices.extend(
            workflows
                .iter()
                .map(|w| acp::SessionConfigSelectOption::new(w.clone(), workflow_name(w))),
        );
        let workflow = acp::SessionConfigOption::select(
            WORKFLOW,
            "Workflow",
            self.workflow.clone().unwrap_or_else(|| AUTO.into()),
            choices,
        )
        .description("The Trellis workflow a prompt runs".to_owned());
        let autonomy = acp::SessionConfigOption::select(
            AUTONOMY,
            "Autonomy",
            self.autonomy.id(),
            Autonomy::ALL
                .iter()
                .map(|a| {
                    acp::SessionConfigSelectOption::new(a.id(), a.name())
                        .description(a.description().to_owned())
                })
                .collect::<Vec<_>>(),
        )
        .category(acp::SessionConfigOptionCategory::Mode)
        .description("What Trellis may do without asking".to_owned());
        vec![workflow, autonomy]
    }

    /// The autonomy as session modes (for clients without config options).
    pub fn modes(&self) -> acp::SessionModeState {
        acp::SessionModeState::new(
            self.autonomy.id(),
            Autonomy::ALL
                .iter()
                .map(|a| {
                    acp::SessionMode::new(a.id(), a.name()).description(a.description().to_owned())
                })
                .collect(),
        )
    }

    /// Sets option `id` to `value`; an error message when either is unknown.
    pub fn set(&mut self, id: &str, value: &str, workflows: &[String]) -> Result<(), String> {
        match id {
            WORKFLOW if value == AUTO => self.workflow = None,
            WORKFLOW if workflows.iter().any(|w| w == value) => {
                self.workflow = Some(value.to_owned());
            }
            WORKFLOW => {
                return Err(format!(
                    "unknown workflow `{value}` (one of: {AUTO}, {})",
                    workflows.join(", ")
                ));
            }
            AUTONOMY => {
                self.autonomy = Autonomy::parse(value).ok_or_else(|| {
                    format!("unknown autonomy `{value}` (one of: ask, auto-edit, read-only)")
                })?;
            }
            other => {
                return Err(format!(
                    "unknown config option `{other}` (workflow, autonomy)"
                ));
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn options_modes_and_settings_round_trip() {
        let flows = vec![
            "architecture_discussion".to_owned(),
            "feature_with_iterative_testing".to_owned(),
        ];
        let mut c = SessionConfig::default();
        let v = serde_json::to_value(c.options(&flows)).unwrap();
        assert_eq!(v[0]["id"], "workflow");
        assert_eq!(v[0]["currentValue"], "auto");
        assert_eq!(v[0]["options"].as_array().unwrap().len(), 3);
        assert_eq!(v[1]["id"], "autonomy");
        assert_eq!(v[1]["category"], "mode");
        assert_eq!(v[1]["currentValue"], "ask");
        c.set(WORKFLOW, "feature_with_iterative_testing", &flows)
            .unwrap();
        c.set(AUTONOMY, "read-only", &flows).unwrap();
        assert!(c.set(WORKFLOW, "nope", &flows).is_err());
        assert!(c.set(AUTONOMY, "yolo", &flows).is_err());
        assert!(c.set("model", "x", &flows).is_err());
        let back = SessionConfig::from_json(&c.to_json());
        assert_eq!(back, c);
        assert_eq!(
            c.to_json(),
            r#"{"workflow":"feature_with_iterative_testing","autonomy":"read-only"}"#
        );
        let modes = serde_json::to_value(back.modes()).unwrap();
        assert_eq!(modes["currentModeId"], "read-only");
        c.set(WORKFLOW, AUTO, &flows).unwrap();
        assert_eq!(c.workflow, None);
        assert_eq!(
            SessionConfig::from_json("garbage"),
            SessionConfig::default()
        );
    }
}
