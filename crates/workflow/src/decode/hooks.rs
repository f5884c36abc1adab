//! A workflow's `hooks:` list: items with the keys of a configuration `[[hooks]]` entry
//! (docs/conventions.md, "Hooks"), each checked where it is written. `workflows` is refused:
//! a workflow's hooks run in its own runs only.

use trellis_graph::nearest;
use trellis_protocol::{HookConfig, HookEvent, Preset};

use super::{Decoder, Map};
use crate::schema::WorkflowHook;
use crate::yaml::{Node, Yaml};

impl Decoder<'_> {
    /// `hooks: [{event, command, …}, …]`.
    pub(super) fn hooks(&mut self, node: &Node) -> Vec<WorkflowHook> {
        match &node.value {
            Yaml::Null => Vec::new(),
            Yaml::Seq(items) => items
                .iter()
                .enumerate()
                .filter_map(|(i, item)| self.hook(item, i))
                .collect(),
            _ => {
                self.problem(
                    node.pos,
                    format!("`hooks` must be a list, found {}", node.kind()),
                    Some("write each hook as a `- event: …` item with its `command`".into()),
                );
                Vec::new()
            }
        }
    }

    fn hook(&mut self, node: &Node, index: usize) -> Option<WorkflowHook> {
        let what = format!("hooks[{index}]");
        let map = self.map(node, &what, &HookConfig::KEYS)?;
        if let Some(pos) = map.key_pos("workflows") {
            self.problem(
                pos,
                format!(
                    "{what}.workflows: a workflow's hooks run only in its own runs, so they \
                     take no `workflows` filter"
                ),
                Some(
                    "remove `workflows:` (a hook for several workflows is a `[[hooks]]` entry \
                     of the configuration with `workflows = [...]`)"
                        .into(),
                ),
            );
        }
        let event = self
            .required(&map, node.pos, "event", &what)
            .and_then(|n| self.hook_event(n, &what));
        let command = self
            .required(&map, node.pos, "command", &what)
            .and_then(|n| self.hook_command(n, &what));
        let name = self.opt_string(&map, "name", &what);
        let tools = self.strings(&map, "tools", &what);
        let timeout_secs = self.hook_timeout(&map, &what);
        let preset = map.get("preset").and_then(|n| self.hook_preset(n, &what));
        let hook = HookConfig {
            event: event?,
            command: command?,
            name,
            tools,
            workflows: Vec::new(),
            timeout_secs: timeout_secs?,
            preset,
        };
        Some(WorkflowHook {
            source: format!("workflow {}, {what}", self.file),
            hook,
        })
    }

    fn hook_event(&mut self, node: &Node, what: &str) -> Option<HookEvent> {
        let text = self.string(node, &format!("{what}.event"))?;
        let event = HookEvent::parse(text.trim());
        if event.is_none() {
            let names = HookEvent::ALL.map(HookEvent::as_str);
            let fix = match nearest(text.trim(), names.into_iter()) {
                Some(n) => format!("did you mean `{n}`? (events: {})", names.join(", ")),
                None => format!("events: {}", names.join(", ")),
            };
            self.problem(
                node.pos,
                format!("unknown hook event `{text}` in {what}.event"),
                Some(fix),
            );
        }
        event
    }

    fn hook_command(&mut self, node: &Node, what: &str) -> Option<String> {
        let command = self.string(node, &format!("{what}.command"))?;
        if command.trim().is_empty() {
            self.problem(
                node.pos,
                format!("{what}.command is empty"),
                Some(
                    "write the command line the hook runs (`command: \"scripts/check.sh\"`), \
                     or remove the hook"
                        .into(),
                ),
            );
            return None;
        }
        Some(command)
    }

    /// `timeout_secs`: whole seconds, at least 1 (default 30). `None` when it is wrong.
    fn hook_timeout(&mut self, map: &Map<'_>, what: &str) -> Option<u64> {
        let Some(node) = map.get("timeout_secs") else {
            return Some(HookConfig::DEFAULT_TIMEOUT_SECS);
        };
        match node.value {
            Yaml::Int(n) if n >= 1 => u64::try_from(n).ok(),
            _ => {
                self.problem(
                    node.pos,
                    format!(
                        "{what}.timeout_secs must be a whole number of seconds, at least 1; \
                         found {}",
                        if node.text.is_empty() {
                            node.kind()
                        } else {
                            node.text.as_str()
                        }
                    ),
                    Some(format!(
                        "write e.g. `timeout_secs: 10` (default {})",
                        HookConfig::DEFAULT_TIMEOUT_SECS
                    )),
                );
                None
            }
        }
    }

    fn hook_preset(&mut self, node: &Node, what: &str) -> Option<Preset> {
        let text = self.string(node, &format!("{what}.preset"))?;
        match text.trim().parse::<Preset>() {
            Ok(p) => Some(p),
            Err(_) => {
                let names = Preset::ALL.map(Preset::as_str);
                let fix = match nearest(text.trim(), names.into_iter()) {
                    Some(n) => format!("did you mean `{n}`? (presets: {})", names.join(", ")),
                    None => format!("presets: {}", names.join(", ")),
                };
                self.problem(
                    node.pos,
                    format!("unknown sandbox preset `{text}` in {what}.preset"),
                    Some(fix),
                );
                None
            }
        }
    }
}
