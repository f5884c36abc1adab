//! What the tool knowledge graph tells the agent loop (docs/tools.md): which tools
//! usually come next, how sure it is, and the speculation threshold — and what became of
//! each speculation. The runtime implements [`ToolAdvisor`] over `trellis-toolgraph`.

/// How a speculative call ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SpeculationOutcome {
    /// The model asked for exactly that call: its result was ready.
    Used,
    /// The activation ended without the model asking for it.
    Wasted,
    /// It failed, needed the user or ran out of time (nothing was kept).
    Failed,
}

/// What to do with a suggested workflow: one of three modes, by confidence.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AdviceMode {
    /// Confidence below 0.70: no trustworthy pattern, the model plans.
    Explicit,
    /// From 0.70 to the speculation threshold: show the workflow to the model.
    Suggestion,
    /// At or above the threshold: run its safe steps now, results ready.
    Speculative,
}

/// A workflow the tool knowledge graph suggests for a task.
#[derive(Clone, Debug, PartialEq)]
pub struct Suggested {
    /// The tools, in a topological order.
    pub tools: Vec<String>,
    /// Dependencies `(i, j)`: `tools[i]` runs before `tools[j]` (`i < j`).
    pub edges: Vec<(usize, usize)>,
    /// How sure the graph is, in `[0, 1]`.
    pub confidence: f64,
    /// What to do with it under the current thresholds.
    pub mode: AdviceMode,
    /// Why these tools (direct and transitive dependencies, PageRank), one line.
    pub explanation: String,
}

/// The tool knowledge graph, as the agent loop sees it.
pub trait ToolAdvisor: Send + Sync {
    /// The workflow the graph suggests for `intent` among `tools` (the ones the caller may
    /// use), if any tool matches it.
    fn suggest(&self, intent: &str, tools: &[crate::ToolSpec]) -> Option<Suggested> {
        let _ = (intent, tools);
        None
    }
    /// Tools likely to be called after `completed` (tool names, oldest first), with a
    /// confidence in `[0, 1]`, best first.
    fn predict_next(&self, completed: &[String]) -> Vec<(String, f64)>;
    /// Each known tool's importance in the learned graph (weighted PageRank), the prior of
    /// the tool-schema budget's ranking; empty when nothing was learned.
    fn importance(&self) -> std::collections::BTreeMap<String, f64> {
        std::collections::BTreeMap::new()
    }
    /// Predictions at or above this confidence may run speculatively.
    fn threshold(&self) -> f64;
    /// Records a speculation's outcome (adapts the threshold).
    fn speculated(&self, tool: &str, confidence: f64, outcome: SpeculationOutcome);
}

/// Words of tool names that are never run speculatively, whatever their annotations say:
/// the dangerous operations (delete, deploy, payment, send_email) and their kin
/// (git push, other network writes, destruction).
pub const DANGEROUS_WORDS: &[&str] = &[
    "delete", "remove", "rm", "drop", "destroy", "purge", "kill", "deploy", "release", "publish",
    "push", "payment", "pay", "charge", "refund", "transfer", "purchase", "order", "send", "email",
    "mail", "post", "upload", "write", "create", "update", "exec", "run",
];

/// Whether `tool`'s name (split on `_`, `-`, `.` and camelCase) contains a dangerous word.
pub fn dangerous(tool: &str) -> bool {
    let mut words = Vec::new();
    let mut word = String::new();
    let mut prev_lower = false;
    for c in tool.chars() {
        if matches!(c, '_' | '-' | '.' | ' ' | '/') {
            words.push(std::mem::take(&mut word));
            prev_lower = false;
            continue;
        }
        if c.is_uppercase() && prev_lower {
            words.push(std::mem::take(&mut word));
        }
        prev_lower = c.is_lowercase() || c.is_ascii_digit();
        word.extend(c.to_lowercase());
    }
    words.push(word);
    words.iter().any(|w| DANGEROUS_WORDS.contains(&w.as_str()))
}

#[cfg(test)]
mod tests {
    use super::dangerous;

    #[test]
    fn dangerous_names_are_found_by_their_words() {
        for t in [
            "github__push_files",
            "deleteEntities",
            "stripe__create_payment",
            "gmail.send_email",
            "git__git_push",
        ] {
            assert!(dangerous(t), "{t}");
        }
        for t in [
            "read_file",
            "git_status",
            "time__get_current_time",
            "memory__search_nodes",
            "grep",
        ] {
            assert!(!dangerous(t), "{t}");
        }
    }
}
