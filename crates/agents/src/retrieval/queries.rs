//! Query generation: one structured model call per stage (or per failure), the task always
//! first, and deterministic queries when the model fails or says nothing usable.

use std::collections::HashSet;

use schemars::JsonSchema;
use serde::Deserialize;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use trellis_llm::{
    ChatRequest, Message, ModelProvider, ProviderKind, StructuredOptions, complete_structured,
};

use super::RetrievalOptions;

/// What the model is asked for. The bounds keep a grammar-constrained small model from
/// generating runaway lists or strings (the embedded model compiles them into its grammar).
#[derive(Debug, Deserialize, JsonSchema)]
struct Queries {
    /// Short search queries.
    #[schemars(length(min = 1, max = 4))]
    queries: Vec<Query>,
}

/// One query.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(transparent)]
struct Query(#[schemars(length(min = 3, max = 48))] String);

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
Each query is 2 to 6 words: function names, type names, file names or concepts from the \
task. Answer only with JSON.";

/// Longest query kept (characters).
const MAX_QUERY_CHARS: usize = 160;
/// Longest task used as a query (characters): a whole bug report with its stack trace. The
/// index reads long queries deliberately (identifiers, paths, frames, a focused sub-query),
/// so the task is passed whole rather than cut to its first lines.
const MAX_TASK_CHARS: usize = 12_000;

/// The task as a query, capped: runs of spaces collapsed within each line, blank lines
/// dropped, line breaks kept (Rust and Go traces put a frame's location on its own line).
pub(crate) fn task_query(task: &str) -> String {
    let t = task
        .lines()
        .map(collapse)
        .filter(|l| !l.is_empty())
        .collect::<Vec<_>>()
        .join("\n");
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
        let alnum = q.chars().filter(|c| c.is_alphanumeric()).count();
        let digits = q.chars().filter(char::is_ascii_digit).count();
        // Small models sometimes answer with URLs or digit strings: no search value.
        if alnum < 3 || digits * 3 > alnum || q.contains("://") || q.contains("www.") {
            continue;
        }
        if seen.insert(q.to_lowercase()) {
            out.push(q);
        }
    }
    out
}

fn words(s: &str) -> Vec<String> {
    s.split(|c: char| !(c.is_alphanumeric() || c == '_'))
        .filter(|w| !w.is_empty() && !STOP.contains(&w.to_lowercase().as_str()))
        .map(str::to_lowercase)
        .collect()
}

/// Drops queries copied from the instructions rather than written for the task (small
/// models echo the prompt): most of their words occur in the prompt but not in the task.
fn drop_echoes(queries: Vec<String>, prompt: &str, task: &str) -> Vec<String> {
    let task_words: HashSet<String> = words(task).into_iter().collect();
    let prompt_words: HashSet<String> = words(prompt).into_iter().collect();
    queries
        .into_iter()
        .filter(|q| {
            let w = words(q);
            let echoed = w
                .iter()
                .filter(|x| prompt_words.contains(*x) && !task_words.contains(*x))
                .count();
            w.is_empty() || echoed * 5 < w.len() * 3
        })
        .collect()
}

/// Asks the model for queries. `prompt` is the user message; `fallback` the deterministic
/// queries (after the task) used when the model fails or returns nothing usable.
pub(crate) async fn generate(
    provider: &dyn ModelProvider,
    prompt: String,
    task: &str,
    fallback: Vec<String>,
    options: &RetrievalOptions,
    deadline: Instant,
    cancel: &CancellationToken,
) -> Generated {
    let task = task_query(task);
    let max = options.max_queries.max(1);
    if Instant::now() >= deadline {
        return finish(
            task,
            Vec::new(),
            fallback,
            max,
            Some("no time left for query generation".to_owned()),
        );
    }
    let prompt_text = format!("{SYSTEM}\n{prompt}");
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
    let answer = tokio::time::timeout_at(deadline, call).await;
    let (model, note) = match answer {
        Ok(Ok(a)) => {
            let raw = a.value.queries.into_iter().map(|q| q.0).collect();
            let q = drop_echoes(clean(raw, &task), &prompt_text, &task);
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
                "query generation ran out of its {} s",
                options.query_timeout.as_secs_f32()
            )),
        ),
    };
    finish(task, model, fallback, max, note)
}

fn finish(
    task: String,
    model: Vec<String>,
    fallback: Vec<String>,
    max: usize,
    note: Option<String>,
) -> Generated {
    let from_model = !model.is_empty();
    let fallback = clean(fallback, &task);
    let mut queries = vec![task];
    if from_model {
        // The first deterministic query (identifiers, the error message) stays: a weak
        // model's queries add to it rather than replace it.
        let keep = usize::from(!fallback.is_empty() && max > 2);
        queries.extend(model.into_iter().take(max - 1 - keep));
        queries.extend(fallback.into_iter().take(keep));
    } else {
        queries.extend(fallback.into_iter().take(max - 1));
    }
    let mut seen = HashSet::new();
    queries.retain(|q| seen.insert(q.to_lowercase()));
    Generated {
        queries,
        from_model,
        note: note.map(|n| format!("{n}; used deterministic queries")),
    }
}

/// How many query-generation calls run at once: one for the embedded model (it generates
/// one answer at a time anyway, and calls queued behind each other would share one timeout),
/// a few for endpoints.
pub(crate) fn concurrency(provider: &dyn ModelProvider) -> usize {
    match provider.info().kind {
        ProviderKind::Embedded => 1,
        _ => 4,
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
/// `Type::path`, `file.ext`, names written as calls (`windowed()`) — what code search matches
/// best.
pub fn identifiers(text: &str, n: usize) -> Vec<String> {
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
    let is_part = |c: char| c.is_alphanumeric() || "_:.".contains(c);
    let mut rest = text;
    while let Some(start) = rest.find(is_part) {
        let word = &rest[start..];
        let end = word.find(|c: char| !is_part(c)).unwrap_or(word.len());
        // A name written as a call (`windowed()`, `parse(x)`) is code however plain it looks.
        let called = word[end..].starts_with('(');
        let w = word[..end].trim_matches(|c: char| c == '.' || c == ':');
        if looks_like_identifier(w) || (called && is_identifier(w)) {
            push(w);
        }
        rest = &word[end..];
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
    fn a_long_task_reaches_the_index_whole_with_its_trace_lines() {
        let task = format!(
            "{}\n\nTraceback (most recent call last):\n  File \"pkg/deep.py\", line 9, in run\n    go()\n\
             stack backtrace:\n   1: app::load\n             at ./src/load.rs:88:13\n",
            "The export fails   after a while. ".repeat(40)
        );
        let q = task_query(&task);
        assert!(q.chars().count() > 1200, "cut: {}", q.len());
        assert!(q.starts_with("The export fails after a while."), "{q}");
        assert!(q.contains("File \"pkg/deep.py\", line 9, in run\ngo()\nstack backtrace:"));
        let frames = trellis_index::query::frames::frames(&q);
        let paths: Vec<&str> = frames.iter().map(|f| f.path.as_str()).collect();
        assert_eq!(paths, ["pkg/deep.py", "src/load.rs"]);
        assert!(task_query(&"x ".repeat(20_000)).chars().count() <= MAX_TASK_CHARS);
    }

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
            identifiers(
                "Raise an exception for invalid size in windowed() (issue 1057)",
                10
            ),
            ["windowed"]
        );
        assert_eq!(
            identifiers("Call repeat(x, n) or tee (the recipe)", 10),
            ["repeat"]
        );
        assert_eq!(
            keywords("Add a retry to the HTTP client for timeouts", 3),
            ["retry", "HTTP", "client"]
        );
    }

    #[test]
    fn the_schema_bounds_the_answer() {
        let schema = trellis_llm::structured::schema_of::<Queries>();
        assert_eq!(schema["properties"]["queries"]["maxItems"], 4);
        let item = &schema["properties"]["queries"]["items"];
        let item = match item.get("$ref").and_then(|r| r.as_str()) {
            Some(r) => &schema["$defs"][r.rsplit('/').next().unwrap()],
            None => item,
        };
        assert_eq!(item["maxLength"], 48, "{schema}");
    }

    #[test]
    fn echoes_of_the_instructions_are_dropped() {
        let prompt = "Task: fix the cart total\nStage guidance: This stage generates \
                      implementation code.\nFocus on: existing_patterns, dependencies";
        let kept = drop_echoes(
            vec![
                "This stage generates implementation code".into(),
                "existing_patterns dependencies".into(),
                "cart total function".into(),
                "price rounding".into(),
            ],
            prompt,
            "fix the cart total",
        );
        assert_eq!(kept, ["cart total function", "price rounding"]);
    }

    #[test]
    fn clean_drops_noise_and_the_task() {
        let q = clean(
            vec![
                "1. \"token validation\"".into(),
                "Token Validation".into(),
                "-".into(),
                "the task".into(),
                "https://example.com/a".into(),
                "v1234567 89".into(),
            ],
            "the task",
        );
        assert_eq!(q, ["token validation"]);
    }
}
