//! Query analysis: what a long natural-language query (a whole bug report with a stack trace
//! and code) names, so that search can use it deliberately instead of handing BM25 two
//! hundred terms and the embedder the first 128 word pieces.
//!
//! [`analyze`] extracts identifiers (`CamelCase`, `snake_case`, `dotted.qualified.names`,
//! `a::b` paths, calls `f(`, code spans and fenced code), file paths and module paths, stack
//! frames ([`frames`]) and error messages, and derives a title (the first line or
//! sentence), a focused sub-query (title + identifiers + paths) for a second BM25 ranking and
//! a condensed text for the embedder. A query of at most
//! [`QueryConfig::long_words`](crate::config::QueryConfig) words without a stack frame or
//! fenced code is *short* and searched exactly as written.

pub mod frames;
pub mod markup;

use std::sync::LazyLock;

use regex::Regex;
use serde::Serialize;

pub use frames::{FrameFormat, StackFrame, normalize_path};

/// File extensions a path in a report is recognised by.
pub(crate) const SOURCE_EXTENSIONS: &[&str] = &[
    "rs", "py", "pyi", "pyx", "js", "mjs", "cjs", "jsx", "ts", "tsx", "mts", "cts", "vue",
    "svelte", "go", "java", "kt", "kts", "scala", "groovy", "c", "h", "cc", "cpp", "cxx", "hpp",
    "hh", "hxx", "m", "mm", "cs", "swift", "rb", "php", "lua", "ex", "exs", "erl", "hs", "ml",
    "clj", "dart", "sh", "bash", "zsh", "sql", "html", "css", "scss", "md", "rst", "toml", "yaml",
    "yml", "json", "xml", "ini", "cfg", "proto", "gradle", "cmake",
];

/// At most this many identifiers are kept (first mentioned first).
const MAX_IDENTIFIERS: usize = 32;
/// At most this many paths are kept.
const MAX_PATHS: usize = 16;
/// Longest title kept (characters).
const MAX_TITLE_CHARS: usize = 200;
/// Words of the condensed embedding text, at most.
const MAX_CONDENSED_WORDS: usize = 96;
/// Words of prose after the title in the `lead` embedding text, at most.
const MAX_LEAD_WORDS: usize = 48;

/// What a query names.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct QueryAnalysis {
    /// Whether the query is handled as a long one (see the module docs); a short query is
    /// searched as written and the fields below are informational.
    pub long: bool,
    /// Words in the query.
    pub words: usize,
    /// The first line or sentence of prose.
    pub title: String,
    /// Identifiers, first mentioned first: code spans, stack-frame functions (innermost
    /// first), error types, then names in prose and code.
    pub identifiers: Vec<String>,
    /// File paths as written (normalised), stack-frame paths first, then module paths
    /// written with dots (`a.b.c`) as `a/b/c`.
    pub paths: Vec<String>,
    /// Stack frames and `path:line` references.
    pub frames: Vec<StackFrame>,
    /// Error lines (`KeyError: 'x'`, `error[E0308]: mismatched types`, panics).
    pub errors: Vec<String>,
    /// The indexed files the paths and frames resolve to (filled in by the index).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub files: Vec<String>,
    /// The sub-query searched with BM25 beside the whole text (long queries).
    #[serde(skip_serializing_if = "String::is_empty")]
    pub focused: String,
    /// What the embedder reads instead of the whole text (long queries): title, first
    /// error line, identifiers.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub condensed: String,
    /// The title, first error line, the opening prose after the title (stack frames, code
    /// and markup left out) and the identifiers: the alternative embedding text
    /// (`search.query.embed = "lead"`).
    #[serde(skip_serializing_if = "String::is_empty")]
    pub lead: String,
}

fn re(pattern: &str) -> Option<Regex> {
    Regex::new(pattern).ok()
}

static FENCE: LazyLock<Option<Regex>> = LazyLock::new(|| re(r"(?s)```[^\n]*\n(.*?)(?:```|\z)"));
static SPAN: LazyLock<Option<Regex>> = LazyLock::new(|| re(r"`([^`\n]{1,120})`"));
static ERROR: LazyLock<Option<Regex>> = LazyLock::new(|| {
    re(
        r#"(?m)^[ \t>]*(?:Exception in thread "[^"]*" |Caused by: |Uncaught |panic: )?((?:[A-Za-z_][\w$]*\.)*[A-Za-z_][\w$]*(?:Error|Exception|Warning|Panic|Fault|Failure|Interrupt|Exit))(?:: ?(.*))?$"#,
    )
});
static COMPILER_ERROR: LazyLock<Option<Regex>> =
    LazyLock::new(|| re(r"(?m)^[ \t>]*((?:error|fatal error|panic)(?:\[E\d+\])?: .+)$"));
static PANIC: LazyLock<Option<Regex>> =
    LazyLock::new(|| re(r"panicked at (?:'([^'\n]+)'|[^\n]+:\d+:\d+:\n([^\n]+))"));

/// English words that look like identifiers only by capitalisation (`JavaScript`, `GitHub`).
const NOT_IDENTIFIERS: &[&str] = &[
    "JavaScript",
    "TypeScript",
    "GitHub",
    "GitLab",
    "PyPI",
    "macOS",
    "iOS",
    "iPhone",
    "PowerShell",
    "YouTube",
    "LinkedIn",
    "PostgreSQL",
    "MySQL",
    "SQLite",
    "MongoDB",
    "OpenAI",
    "WebSocket",
    "VSCode",
    "IntelliJ",
    "PyCharm",
    "NumPy",
    "README",
];

/// Keywords and common words of code blocks that say nothing about where the code is.
const CODE_NOISE: &[&str] = &[
    "self",
    "this",
    "print",
    "println",
    "len",
    "str",
    "int",
    "None",
    "True",
    "False",
    "return",
    "import",
    "from",
    "def",
    "class",
    "fn",
    "let",
    "mut",
    "pub",
    "const",
    "var",
    "function",
    "new",
    "assert",
    "assert_eq",
    "__init__",
    "__name__",
    "__main__",
    "main",
    "Some",
    "Ok",
    "Err",
    "unwrap",
    "expect",
    "console",
    "log",
    "isinstance",
    "range",
    "list",
    "dict",
    "set",
    "tuple",
    "format",
    "append",
];

/// Analyses `query`. `long_words` is the word count above which a query is long (a stack
/// frame or fenced code makes it long at any length).
pub fn analyze(query: &str, long_words: usize) -> QueryAnalysis {
    let words = query.split_whitespace().count();
    let frames = frames::frames(query);
    let mut code_blocks: Vec<&str> = Vec::new();
    let mut prose = query.to_owned();
    if let Some(r) = FENCE.as_ref() {
        code_blocks = r
            .captures_iter(query)
            .filter_map(|c| c.get(1).map(|m| m.as_str()))
            .collect();
        prose = r.replace_all(query, "\n").into_owned();
    }
    let errors = error_lines(query);
    let mut ids = Names::default();
    // Backticked names first: the writer marked them as code.
    let mut span_paths: Vec<String> = Vec::new();
    if let Some(r) = SPAN.as_ref() {
        for c in r.captures_iter(&prose) {
            let Some(s) = c.get(1).map(|m| m.as_str().trim()) else {
                continue;
            };
            if let Some(p) = as_path(s) {
                span_paths.push(p);
            } else if !s.contains(char::is_whitespace) {
                ids.add_qualified(s.trim_end_matches("()"));
            } else {
                for w in words_of(s) {
                    if is_identifier(w) || w.ends_with('(') {
                        ids.add_qualified(w.trim_end_matches('('));
                    }
                }
            }
        }
    }
    for f in frames::innermost_first(&frames) {
        if let Some(func) = &f.function {
            ids.add_qualified(func);
        }
    }
    for e in &errors {
        if let Some(ty) = e.split(':').next()
            && is_identifier(ty.trim())
        {
            ids.add_qualified(ty.trim());
        }
    }
    let mut paths: Vec<String> = frames.iter().map(|f| f.path.clone()).collect();
    paths.extend(span_paths);
    let mut modules: Vec<String> = Vec::new();
    scan_words(&prose, &mut ids, &mut paths, &mut modules, false);
    for block in &code_blocks {
        scan_words(block, &mut ids, &mut paths, &mut modules, true);
    }
    paths.extend(modules);
    let mut seen: Vec<String> = Vec::new();
    paths.retain(|p| {
        let new = !p.is_empty() && !seen.contains(p);
        if new {
            seen.push(p.clone());
        }
        new
    });
    paths.truncate(MAX_PATHS);
    let title = title_of(&prose);
    let long = words > long_words || !frames.is_empty() || !code_blocks.is_empty();
    let identifiers = ids.into_vec();
    let mut a = QueryAnalysis {
        long,
        words,
        title,
        identifiers,
        paths,
        frames,
        errors,
        ..QueryAnalysis::default()
    };
    if long {
        a.focused = focused(&a);
        a.condensed = condensed(&a, "");
        a.lead = condensed(&a, &opening(&prose, &a.title));
    }
    a
}

/// Identifiers in order of first mention, each once.
#[derive(Default)]
struct Names(Vec<String>);

impl Names {
    fn add(&mut self, s: &str) {
        let s = s.trim_matches(|c: char| !(c.is_alphanumeric() || c == '_' || c == '$'));
        if s.len() < 2 || s.len() > 80 || NOT_IDENTIFIERS.contains(&s) {
            return;
        }
        if self.0.len() < MAX_IDENTIFIERS && !self.0.iter().any(|x| x == s) {
            self.0.push(s.to_owned());
        }
    }

    /// A name and, when qualified (`a.b.C.m`, `a::b::f`, `C#m`), its last two segments.
    fn add_qualified(&mut self, s: &str) {
        let s = s.trim_end_matches("()");
        let segments: Vec<&str> = s
            .split(['.', ':', '#', '/'])
            .filter(|x| !x.is_empty())
            .map(|x| x.trim_matches(|c: char| c == '(' || c == ')' || c == '*'))
            .collect();
        if segments.len() > 1 {
            self.add(s);
            for seg in segments.iter().rev().take(2) {
                // `Cart$Item` → `Item` as well: Java's inner classes.
                for part in seg.split('$').filter(|p| !p.is_empty()) {
                    if !part.starts_with("lambda") && !part.chars().all(|c| c.is_ascii_digit()) {
                        self.add(part);
                    }
                }
            }
        } else {
            self.add(s);
        }
    }

    fn into_vec(self) -> Vec<String> {
        self.0
    }
}

/// Whether an identifier says more than an English word would: code-shaped
/// ([`is_identifier`]) or qualified (`a.b`, `a::b`). Backticked plain words (`input`,
/// `default`) and the last segments of qualified names (`string` of `z.string`) are kept
/// as identifiers but are not distinctive.
pub fn is_distinctive(ident: &str) -> bool {
    is_identifier(ident) || ident.contains('.') || ident.contains("::")
}

/// Whether a word looks like code rather than English: `snake_case`, `CamelCase` or
/// `camelCase`, `ALL_CAPS` with an underscore, or letters mixed with digits after a letter.
pub fn is_identifier(w: &str) -> bool {
    let w = w.trim_matches('_');
    let mut chars = w.chars();
    let Some(first) = chars.next() else {
        return false;
    };
    if !(first.is_alphabetic() || first == '$') || w.len() < 3 {
        return false;
    }
    if !w
        .chars()
        .all(|c| c.is_alphanumeric() || c == '_' || c == '$')
    {
        return false;
    }
    let has_lower = w.chars().any(char::is_lowercase);
    let inner_upper = w.chars().skip(1).any(char::is_uppercase);
    (w.contains('_') && w.chars().any(char::is_alphabetic)) || (has_lower && inner_upper)
}

/// A path written in the query (a word with a known extension, or with `/` and one),
/// normalised; `None` for URLs and other words.
fn as_path(w: &str) -> Option<String> {
    if w.contains("://") && !w.starts_with("file://") {
        return None;
    }
    let w = w.trim_end_matches(|c: char| c.is_ascii_digit() || c == ':');
    let w = w.trim_end_matches(['.', ',', ';', ')', '\'', '"']);
    let file = w.rsplit(['/', '\\']).next()?;
    let (stem, ext) = file.rsplit_once('.')?;
    if stem.is_empty() || !SOURCE_EXTENSIONS.contains(&ext) {
        return None;
    }
    // `e.g.`, `v1.2` and the like have no letters in their stem or extension-only words.
    if !stem.chars().any(char::is_alphabetic) {
        return None;
    }
    Some(normalize_path(w))
}

/// A module path written with dots (`pkg.sub.mod`: at least three segments, or two with an
/// underscore or in code) as `pkg/sub/mod`; `None` otherwise.
fn as_module(w: &str, code: bool) -> Option<String> {
    let segments: Vec<&str> = w.split('.').collect();
    let valid = segments.iter().all(|s| {
        s.chars()
            .next()
            .is_some_and(|c| c.is_alphabetic() || c == '_')
            && s.chars().all(|c| c.is_alphanumeric() || c == '_')
    });
    let lowered = segments[..segments.len().saturating_sub(1)]
        .iter()
        .all(|s| s.chars().all(|c| !c.is_uppercase()));
    if !valid || !lowered || segments.len() < 2 {
        return None;
    }
    if segments.len() == 2 && !w.contains('_') && !code {
        return None;
    }
    Some(segments.join("/"))
}

/// The words of `text`: runs of characters that can appear in a name or a path.
fn words_of(text: &str) -> impl Iterator<Item = &str> {
    text.split(|c: char| {
        !(c.is_alphanumeric() || matches!(c, '_' | '.' | ':' | '/' | '\\' | '-' | '$' | '('))
    })
    .map(|w| {
        w.trim_start_matches([':', '-'])
            .trim_end_matches(['.', ':', '-', '/'])
    })
    .filter(|w| !w.is_empty())
}

/// Identifiers, paths and dotted module paths of `text`. Plain words count only as calls:
/// `name(` in code, `name()` in prose; common keywords are skipped.
fn scan_words(
    text: &str,
    ids: &mut Names,
    paths: &mut Vec<String>,
    modules: &mut Vec<String>,
    code: bool,
) {
    // (piece, followed by `(`, followed by `()`): in prose only `name()` counts as a call
    // (`fix(v4):` and `min(5` are not code), in code any `name(`.
    let pieces = words_of(text).flat_map(|raw| {
        let n = raw.split('(').count();
        let empty_call = raw.ends_with('(');
        raw.split('(').enumerate().map(move |(i, w)| {
            (
                w.trim_start_matches('.'),
                i + 1 < n,
                empty_call && i + 2 == n,
            )
        })
    });
    for (w, call, empty_call) in pieces {
        let call = if code { call } else { empty_call };
        if w.is_empty() {
            continue;
        }
        if w.contains("://") {
            continue;
        }
        if let Some(p) = as_path(w) {
            paths.push(p);
            continue;
        }
        if w.contains("::") {
            ids.add_qualified(w);
            continue;
        }
        if w.contains('.') {
            let segments: Vec<&str> = w.split('.').collect();
            if let Some(m) = as_module(w, code) {
                modules.push(m);
            }
            let qualified = segments.len() > 1
                && segments.iter().all(|s| {
                    s.chars()
                        .next()
                        .is_some_and(|c| c.is_alphabetic() || c == '_')
                });
            if qualified && (call || segments.iter().any(|s| is_identifier(s))) {
                ids.add_qualified(w);
            }
            continue;
        }
        if w.contains('/') || w.contains('\\') || w.contains(':') || w.contains('-') {
            continue;
        }
        if CODE_NOISE.contains(&w) {
            continue;
        }
        if is_identifier(w) || (call && w.len() > 2 && w.chars().any(char::is_alphabetic)) {
            ids.add(w);
        }
    }
}

/// Error lines: exception types with their messages, compiler errors, panic messages.
fn error_lines(text: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    let mut push = |s: &str| {
        let s: String = s.trim().chars().take(MAX_TITLE_CHARS).collect();
        if !s.is_empty() && !out.contains(&s) && out.len() < 8 {
            out.push(s);
        }
    };
    if let Some(r) = ERROR.as_ref() {
        for c in r.captures_iter(text) {
            let Some(ty) = c.get(1) else { continue };
            match c.get(2).map(|m| m.as_str().trim()) {
                Some(msg) if !msg.is_empty() => push(&format!("{}: {msg}", ty.as_str())),
                _ => push(ty.as_str()),
            }
        }
    }
    for r in [COMPILER_ERROR.as_ref(), PANIC.as_ref()]
        .into_iter()
        .flatten()
    {
        for c in r.captures_iter(text) {
            if let Some(m) = c.get(1).or_else(|| c.get(2)) {
                push(m.as_str());
            }
        }
    }
    out
}

/// The first line of prose, or its first sentence when the line is long.
fn title_of(prose: &str) -> String {
    let line = prose
        .lines()
        .map(|l| l.trim().trim_start_matches('#').trim())
        .find(|l| l.chars().filter(|c| c.is_alphabetic()).count() >= 3)
        .unwrap_or_default();
    let sentence = match line.find(". ") {
        Some(i) if line.chars().count() > MAX_TITLE_CHARS => &line[..i],
        _ => line,
    };
    sentence.chars().take(MAX_TITLE_CHARS).collect()
}

/// Title, distinctive identifiers and path stems: the terms that say where the problem is.
fn focused(a: &QueryAnalysis) -> String {
    let mut parts: Vec<String> = vec![a.title.clone()];
    parts.extend(a.identifiers.iter().filter(|i| is_distinctive(i)).cloned());
    parts.extend(a.paths.iter().filter_map(|p| {
        let file = p.rsplit('/').next()?;
        Some(file.split('.').next().unwrap_or(file).to_owned())
    }));
    parts.join(" ")
}

/// The prose after the title, at most [`MAX_LEAD_WORDS`] words: lines without stack
/// frames, error lines or markup, bullets removed.
fn opening(prose: &str, title: &str) -> String {
    let mut words: Vec<&str> = Vec::new();
    let mut past_title = false;
    for line in prose.lines() {
        let l = line.trim();
        if !past_title {
            past_title = !title.is_empty() && l.contains(title);
            continue;
        }
        let l = l.trim_start_matches(['*', '-', '>', '#', '+', ' ']);
        let letters = l.chars().filter(|c| c.is_alphabetic()).count();
        if letters * 2 < l.len()
            || l.starts_with('<')
            || l.starts_with("Traceback")
            || !frames::frames(l).is_empty()
            || !error_lines(l).is_empty()
        {
            continue;
        }
        for w in l.split_whitespace() {
            if words.len() == MAX_LEAD_WORDS {
                return words.join(" ");
            }
            words.push(w);
        }
    }
    words.join(" ")
}

/// Title, first error, `opening` and identifiers, capped: what the embedder reads of a long
/// query.
fn condensed(a: &QueryAnalysis, opening: &str) -> String {
    let mut parts: Vec<&str> = vec![a.title.as_str()];
    parts.extend(a.errors.first().map(String::as_str));
    parts.push(opening);
    parts.extend(a.identifiers.iter().map(String::as_str));
    let text = parts.join(" ");
    text.split_whitespace()
        .take(MAX_CONDENSED_WORDS)
        .collect::<Vec<_>>()
        .join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_queries_are_not_long() {
        let a = analyze("retry backoff in the http client", 24);
        assert!(!a.long);
        assert!(a.focused.is_empty() && a.condensed.is_empty());
        let a = analyze("where is parse_config called", 24);
        assert!(!a.long);
        assert_eq!(a.identifiers, ["parse_config"]);
    }

    #[test]
    fn identifiers_of_every_shape() {
        let a = analyze(
            "The `Index::search` call fails in HttpClient when parse_config reads \
             `max_tokens`; the config module django.db.models.query_utils breaks, \
             and calling refresh() twice in JavaScript on GitHub does too. MAX_SIZE is 3.\n\
             fix(v4): clamp min(5) too",
            8,
        );
        for want in [
            "Index::search",
            "search",
            "Index",
            "max_tokens",
            "HttpClient",
            "parse_config",
            "django.db.models.query_utils",
            "query_utils",
            "refresh",
            "MAX_SIZE",
        ] {
            assert!(
                a.identifiers.iter().any(|x| x == want),
                "{want} missing from {:?}",
                a.identifiers
            );
        }
        for not in [
            "JavaScript",
            "GitHub",
            "The",
            "calling",
            "config",
            "fix",
            "min",
        ] {
            assert!(!a.identifiers.iter().any(|x| x == not), "{not}");
        }
        assert!(a.paths.contains(&"django/db/models/query_utils".to_owned()));
        assert!(a.long);
    }

    #[test]
    fn paths_and_not_urls_or_versions() {
        let a = analyze(
            "Broken since v1.2.3 in src/index/search.rs and `docs/retrieval.md`, \
             see https://example.com/x/page.html, e.g. lib.rs.",
            4,
        );
        assert_eq!(
            a.paths,
            ["docs/retrieval.md", "src/index/search.rs", "lib.rs"]
        );
    }

    #[test]
    fn a_bug_report_with_a_traceback_and_code() {
        let report = "ValueError when saving a model with a custom field\n\n\
            Steps:\n```python\nfrom app.fields import ColorField\nColorField(max_length=3).clean(value)\n```\n\
            Traceback (most recent call last):\n  File \"/venv/lib/app/fields.py\", line 88, in clean\n\
            \x20   raise ValueError(msg)\nValueError: invalid color 'red'\n";
        let a = analyze(report, 200);
        assert!(a.long, "a traceback makes a query long");
        assert_eq!(
            a.title,
            "ValueError when saving a model with a custom field"
        );
        assert_eq!(a.frames.len(), 1);
        assert_eq!(a.paths[0], "/venv/lib/app/fields.py");
        assert!(a.paths.contains(&"app/fields".to_owned()), "{:?}", a.paths);
        assert_eq!(a.errors, ["ValueError: invalid color 'red'"]);
        assert_eq!(a.identifiers[0], "clean");
        for want in ["ValueError", "ColorField", "max_length"] {
            assert!(
                a.identifiers.iter().any(|x| x == want),
                "{want}: {:?}",
                a.identifiers
            );
        }
        assert!(!a.identifiers.iter().any(|x| x == "from" || x == "import"));
        assert!(a.focused.contains("ColorField") && a.focused.contains("fields"));
        assert!(a.condensed.starts_with("ValueError when saving"));
        assert!(a.condensed.contains("invalid color"));
        assert!(a.lead.starts_with("ValueError when saving"));
        assert!(a.lead.contains("Steps:"), "{}", a.lead);
        assert!(!a.lead.contains("line 88"), "{}", a.lead);
    }

    #[test]
    fn compiler_errors_and_panics_are_errors() {
        let a = analyze(
            "error[E0308]: mismatched types\n --> src/main.rs:4:5\nthread 'main' panicked at 'index out of bounds', src/lib.rs:3:9",
            100,
        );
        assert_eq!(
            a.errors,
            ["error[E0308]: mismatched types", "index out of bounds"]
        );
        let paths: Vec<&str> = a.frames.iter().map(|f| f.path.as_str()).collect();
        assert_eq!(paths, ["src/main.rs", "src/lib.rs"]);
    }

    #[test]
    fn identifier_shapes() {
        for yes in [
            "parse_config",
            "HttpClient",
            "parseHTTP",
            "MAX_SIZE",
            "utf8Decode",
        ] {
            assert!(is_identifier(yes), "{yes}");
        }
        for no in ["Hello", "OK", "the", "a_", "42_x", "HTTP"] {
            assert!(!is_identifier(no), "{no}");
        }
    }
}
