//! Prompts for query generation and the deterministic queries used without a model.

use trellis_workflow::StageContext;

use super::failure::FailureAnalysis;
use super::strategy::RetrievalStrategyConfig;
use super::{PackedItem, Route, queries};

/// Characters of stage guidance in a prompt.
const MAX_GUIDANCE: usize = 600;
/// Characters of failure text in a prompt.
const MAX_FAILURE_PROMPT: usize = 1800;

pub(super) fn strategy_line(strategy: &RetrievalStrategyConfig, routes: &[Route]) -> String {
    let corpus = if strategy.ast_enabled() {
        "code: functions, classes and files"
    } else {
        "documents: sections, decision records and specifications"
    };
    let mut s = format!(
        "Search strategy: {} ({corpus})",
        strategy.strategy_name.as_deref().unwrap_or("default")
    );
    let served: Vec<&str> = routes
        .iter()
        .filter(|r| r.source.is_some())
        .map(|r| r.spec.source.as_str())
        .collect();
    if !served.is_empty() {
        s.push_str(&format!("\nSources: {}", served.join(", ")));
    }
    let h = &strategy.retrieval_hints;
    if !h.focus_on.is_empty() {
        s.push_str(&format!("\nFocus on: {}", h.focus_on.join(", ")));
    }
    if !h.avoid.is_empty() {
        s.push_str(&format!("\nAvoid: {}", h.avoid.join(", ")));
    }
    s
}

pub(super) fn upfront_prompt(
    task: &str,
    strategy: &RetrievalStrategyConfig,
    stage: &StageContext,
    routes: &[Route],
    max_queries: usize,
) -> String {
    let mut s = format!("Task: {}\n\nStage: {}", task.trim(), stage.stage_name);
    if let Some(d) = &stage.stage_description {
        s.push_str(&format!(" — {}", d.trim()));
    }
    if let Some(g) = stage.retrieval_guidance.as_deref().map(str::trim)
        && !g.is_empty()
    {
        s.push_str(&format!(
            "\nStage guidance:\n{}",
            queries::truncate_chars(g, MAX_GUIDANCE)
        ));
    }
    s.push_str(&format!(
        "\n\n{}\n\nWrite up to {} search queries that find what this stage needs.",
        strategy_line(strategy, routes),
        max_queries.saturating_sub(1).max(1)
    ));
    s
}

pub(super) fn upfront_fallback(task: &str, stage: &StageContext) -> Vec<String> {
    let mut out = Vec::new();
    let ids = queries::identifiers(task, 6);
    if !ids.is_empty() {
        out.push(ids.join(" "));
    }
    let kw = queries::keywords(task, 5);
    let stage_words = queries::keywords(&stage.stage_name.replace('_', " "), 3);
    if !kw.is_empty() {
        out.push(format!("{} {}", stage_words.join(" "), kw.join(" ")));
    }
    out
}

pub(super) fn failure_excerpt(analysis: &FailureAnalysis) -> String {
    let keys = [
        "error",
        "panicked",
        "assert",
        "fail",
        "exception",
        "expected",
        "-->",
        "line ",
    ];
    let mut lines: Vec<&str> = analysis
        .text
        .lines()
        .filter(|l| {
            let l = l.to_ascii_lowercase();
            keys.iter().any(|k| l.contains(k))
        })
        .collect();
    if lines.is_empty() {
        lines = analysis.text.lines().collect();
    }
    let mut s = String::new();
    for l in lines {
        if s.len() + l.len() > MAX_FAILURE_PROMPT {
            break;
        }
        s.push_str(l.trim_end());
        s.push('\n');
    }
    s
}

pub(super) fn adaptive_prompt(
    task: &str,
    stage: &StageContext,
    analysis: &FailureAnalysis,
    regions: &[PackedItem],
    round: i64,
    max_queries: usize,
) -> String {
    let mut s = format!(
        "Task: {}\n\nStage `{}` failed (attempt {}). Failure:\n{}",
        task.trim(),
        stage.stage_name,
        round.max(1),
        failure_excerpt(analysis)
    );
    if !analysis.refs.is_empty() {
        let refs: Vec<String> = analysis
            .refs
            .iter()
            .take(8)
            .map(|r| format!("{}:{}", r.path, r.line))
            .collect();
        s.push_str(&format!("\nLocations: {}", refs.join(", ")));
    }
    let symbols: Vec<&str> = regions.iter().filter_map(|r| r.symbol.as_deref()).collect();
    if !symbols.is_empty() {
        s.push_str(&format!("\nIn: {}", symbols.join(", ")));
    }
    if !analysis.identifiers.is_empty() {
        s.push_str(&format!("\nNames: {}", analysis.identifiers.join(", ")));
    }
    s.push_str(&format!(
        "\n\nWrite up to {} search queries that find the code or documents needed to fix \
         this failure.",
        max_queries.saturating_sub(1).max(1)
    ));
    s
}

pub(super) fn adaptive_fallback(analysis: &FailureAnalysis) -> Vec<String> {
    let mut out = Vec::new();
    if let Some(h) = &analysis.headline {
        out.push(h.clone());
    }
    let kw = queries::keywords(&failure_excerpt(analysis), 6);
    if !kw.is_empty() {
        out.push(kw.join(" "));
    }
    out
}

/// The failing tests, identifiers and enclosing symbols named by the failure, as one query.
pub(super) fn identifier_query(
    analysis: &FailureAnalysis,
    regions: &[PackedItem],
) -> Option<String> {
    let mut names: Vec<String> = Vec::new();
    let symbols = regions.iter().filter_map(|r| r.symbol.as_deref());
    for n in analysis
        .identifiers
        .iter()
        .map(String::as_str)
        .chain(symbols)
    {
        let last = n.rsplit("::").next().unwrap_or(n);
        if last.len() >= 3 && !names.iter().any(|x| x == last) {
            names.push(last.to_owned());
        }
    }
    names.truncate(8);
    (!names.is_empty()).then(|| names.join(" "))
}
