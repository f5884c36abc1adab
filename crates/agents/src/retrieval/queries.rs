//! Query generation: one structured model call per stage (or per failure), the task always
//! first, and deterministic queries when the model fails or says nothing usable.

use std::collections::HashSet;

use schemars::JsonSchema;
use serde::Deserialize;
use tokio_util::sync::CancellationToken;
use trellis_llm::{ChatRequest, Message, ModelProvider, StructuredOptions, complete_structured};

use super::RetrievalOptions;

/// What the model is asked for.
#[derive(Debug, Deserialize, JsonSchema)]
struct Queries {
    /// Short search queries.
    queries: Vec<String>,
}

/// Queries for one retrieval, and where they came from.
#[derive(Clone, Debug, Default)]
pub(crate) struct Generated {
    /// The task first, then the rest.
    pub(crate) queries: Vec<String>,
    /// Whether the model contributed any query.
    pub(crate) from_model: bool,
    /// Why the deterministic queries were used, if they were.
    pub(crate) note: Option<String>,
}

const SYSTEM: &str = "You write search queries that find context in a software repository \
(code, documentation, decision records) for an agent about to work on a task. \
Answer only with JSON: {\"queries\": [\"...\"]}. Each query is 2 to 8 words: concrete \
identifiers, file names, concepts or error messages. No explanations.";

/// Longest query kept (characters).
const MAX_QUERY_CHARS: usize = 160;
/// Longest task used as a query (characters).
const MAX_TASK_CHARS: usize = 500;

/// The task as a query: whitespace collapsed, capped.
pub(crate) fn task_query(task: &str) -> String {
    let t = collapse(task);
    truncate_chars(&t, MAX_TASK_CHARS)
}

fn collapse(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}

pub(crate) fn truncate_chars(s: &str, n: usize) -> String {
    match s.char_indices().nth(n) {
        Some((i, _)) => s[..i].to_owned(),
        None => s.to_owned(),
    }
}

/// Cleans model output: trims bullets and quotes, drops empty and duplicate queries (also
/// the task itself), caps lengths.
fn clean(raw: Vec<String>, task: &str) -> Vec<String> {
    let mut seen: HashSet<String> = HashSet::from([task.to_lowercase()]);
    let mut out = Vec::new();
    for q in raw {
        let q = collapse(&q);
        let q = q
            .trim_start_matches(|c: char| c == '-' || c == '*' || c.is_ascii_digit() || c == '.')
            .trim()
            .trim_matches(|c: char| c == '"' || c == '\'' || c == '`')
            .trim();
        let q = truncate_chars(q, MAX_QUERY_CHARS);
        if q.chars().filter(|c| c.is_alphanumeric()).count() < 3 {
            continue;
        }
        if seen.insert(q.to_lowercase()) {
            out.push(q);
        }
    }
    out
}

/// Asks the model for queries. `prompt` is the user message; `fallback` the deterministic
/// queries (after the task) used when the model fails or returns nothing usable.
pub(crate) async fn generate(
    provider: &dyn ModelProvider,
    prompt: String,
    task: &str,
    fallback: Vec<String>,
    options: &RetrievalOptions,
    cancel: &CancellationToken,
) -> Generated {
    let task = task_query(task);
    let max = options.max_queries.max(1);
    let mut request = ChatRequest::new(vec![Message::system(SYSTEM), Message::user(prompt)]);
    request.max_tokens = Some(options.query_max_tokens);
    request.temperature = options.temperature;
    let call = complete_structured::<Queries>(
        provider,
        request,
        StructuredOptions {
            reask: options.reask,
            ..StructuredOptions::default()
        },
        cancel.clone(),
    );
    let answer = tokio::time::timeout(options.query_timeout, call).await;
    let (model, note) = match answer {
        Ok(Ok(a)) => {
            let q = clean(a.value.queries, &task);
            if q.is_empty() {
                (q, Some("the model proposed no usable query".to_owned()))
            } else {
                (q, None)
            }
        }
        Ok(Err(e)) => (Vec::new(), Some(format!("query generation failed: {e}"))),
        Err(_) => (
            Vec::new(),
            Some(format!(
                "query generation timed out after {} s",
                options.query_timeout.as_secs_f32()
            )),
        ),
    };
    let from_model = !model.is_empty();
    let rest = if from_model {
        model
    } else {
        clean(fallback, &task)
    };
    let mut queries = vec![task];
    queries.extend(rest.into_iter().take(max - 1));
    Generated {
        queries,
        from_model,
        note: note.map(|n| format!("{n}; used deterministic queries")),
    }
}

/// Words that carry no search value.
const STOP: &[&str] = &[
    "a", "an", "the", "and", "or", "of", "to", "in", "on", "for", "with", "by", "is", "are", "be",
    "it", "this", "that", "from", "as", "at", "into", "so", "we", "i", "you", "our", "my",
    "should", "must", "can", "please", "make", "add", "use", "using", "when", "which", "what",
    "how", "all", "new", "about", "do", "does", "not", "if", "then", "than", "also", "stage",
];

/// Content words of `text` in order, without stop words and duplicates.
pub(crate) fn keywords(text: &str, n: usize) -> Vec<String> {
    let mut seen = HashSet::new();
    text.split(|c: char| !(c.is_alphanumeric() || c == '_'))
        .filter(|w| w.chars().count() > 2 && !STOP.contains(&w.to_lowercase().as_str()))
        .filter(|w| seen.insert(w.to_lowercase()))
        .take(n)
        .map(str::to_owned)
        .collect()
}

/// Identifier-like tokens of `text`: backticked or quoted names, `snake_case`, `camelCase`,
/// `Type::path`, `file.ext` — what code search matches best.
pub(crate) fn identifiers(text: &str, n: usize) -> Vec<String> {
    let mut seen = HashSet::new();
    let mut out = Vec::new();
    let mut push = |w: &str| {
        let w = w.trim_matches(|c: char| !(c.is_alphanumeric() || c == '_'));
        if w.len() >= 3 && w.len() <= 80 && seen.insert(w.to_owned()) {
            out.push(w.to_owned());
        }
    };
    // Quoted: `name`, 'name'.
    for quote in ['`', '\''] {
        let parts: Vec<&str> = text.split(quote).collect();
        for inner in parts.iter().skip(1).step_by(2).take(64) {
            if is_identifier(inner) {
                push(inner);
            }
        }
    }
    for w in text.split(|c: char| !(c.is_alphanumeric() || "_:.".contains(c))) {
        let w = w.trim_matches(|c: char| c == '.' || c == ':');
        if looks_like_identifier(w) {
            push(w);
        }
    }
    out.truncate(n);
    out
}

fn is_identifier(s: &str) -> bool {
    let s = s.trim();
    !s.is_empty()
        && s.len() <= 80
        && s.chars()
            .next()
            .is_some_and(|c| c.is_alphabetic() || c == '_')
        && s.chars().all(|c| c.is_alphanumeric() || "_:.".contains(c))
}

fn looks_like_identifier(w: &str) -> bool {
    // `file.py:10` is a location, not a name.
    if !is_identifier(w) || w.replace("::", "").contains(':') {
        return false;
    }
    let snake = w.contains('_') && w.chars().any(char::is_alphabetic);
    let path = w.contains("::");
    let camel = w.chars().skip(1).any(|c| c.is_uppercase()) && w.chars().any(char::is_lowercase);
    let file = w.rsplit_once('.').is_some_and(|(a, ext)| {
        !a.is_empty() && (1..=4).contains(&ext.len()) && ext.chars().all(|c| c.is_ascii_lowercase())
    });
    snake || path || camel || file
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn identifiers_and_keywords() {
        let ids = identifiers(
            "Fix `parse_config` so that ConfigLoader::load reads settings.toml; 'total' is wrong",
            10,
        );
        assert_eq!(
            ids,
            [
                "parse_config",
                "total",
                "ConfigLoader::load",
                "settings.toml"
            ]
        );
        assert_eq!(
            keywords("Add a retry to the HTTP client for timeouts", 3),
            ["retry", "HTTP", "client"]
        );
    }

    #[test]
    fn clean_drops_noise_and_the_task() {
        let q = clean(
            vec![
                "1. \"token validation\"".into(),
                "Token Validation".into(),
                "-".into(),
                "the task".into(),
            ],
            "the task",
        );
        assert_eq!(q, ["token validation"]);
    }
}
