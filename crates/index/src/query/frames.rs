//! Stack frames and `path:line` references in the formats bug reports paste: Python
//! tracebacks, Rust panics and backtraces, Go goroutine traces, Java and JavaScript stack
//! traces, and compiler or test-runner locations (`src/x.c:12:3: error`, `tests/a.py:7:`).

use std::sync::LazyLock;

use regex::Regex;
use serde::Serialize;

/// The format a frame was read in.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum FrameFormat {
    /// `File "x.py", line 12, in f`.
    Python,
    /// `at src/x.rs:12:5` (backtrace) or `panicked at src/x.rs:12:5`.
    Rust,
    /// `\t/go/src/pkg/x.go:12 +0x1d` under a `pkg.(*T).M(...)` line.
    Go,
    /// `at a.b.C.m(C.java:12)`.
    Java,
    /// `at f (src/file.js:1:2)` or `at src/file.js:1:2`.
    JavaScript,
    /// Any other `path.ext:line[:col]`.
    Location,
}

/// One frame of a stack trace (or one `path:line` reference).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct StackFrame {
    /// The path as written, normalised: `/`-separated, `file://` and `./` removed. Java
    /// frames give the package path (`a/b/C.java`), since the trace names only the file.
    pub path: String,
    /// 1-based line, when given.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub line: Option<u32>,
    /// The function or method, when given (`f`, `a.b.C.m`, `pkg::f`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub function: Option<String>,
    /// Which format it was read in.
    pub format: FrameFormat,
}

fn re(pattern: &str) -> Option<Regex> {
    Regex::new(pattern).ok()
}

static PYTHON: LazyLock<Option<Regex>> =
    LazyLock::new(|| re(r#"File "([^"]+)", line (\d+)(?:, in ([\w<>.]+))?"#));
static JAVA: LazyLock<Option<Regex>> = LazyLock::new(|| {
    re(r"\bat\s+([\w$.<>/]+)\(([\w$-]+\.(?:java|kt|scala|groovy|clj))(?::(\d+))?\)")
});
static JS: LazyLock<Option<Regex>> = LazyLock::new(|| {
    re(
        r"\bat\s+(?:(?:async\s+)?([^\s()]+)\s+)?\(?((?:file://)?[^\s()]+?\.(?:js|mjs|cjs|jsx|ts|tsx|mts|cts|vue|svelte)):(\d+)(?::\d+)?\)?",
    )
});
static RUST: LazyLock<Option<Regex>> =
    LazyLock::new(|| re(r"(?:\bat|panicked at)\s+'?([^\s:'\x22,]+\.rs):(\d+)(?::\d+)?"));
static RUST_FN: LazyLock<Option<Regex>> =
    LazyLock::new(|| re(r"^\s*\d+:\s+(?:0x[0-9a-f]+ - )?([\w:<>$]+?)(?:::h[0-9a-f]{16})?$"));
static GO: LazyLock<Option<Regex>> =
    LazyLock::new(|| re(r"^\s+(\S+\.go):(\d+)(?:\s+\+0x[0-9a-f]+)?\s*$"));
static GO_FN: LazyLock<Option<Regex>> = LazyLock::new(|| re(r"^([\w./*()\-]+?)\((?:[^()]*)\)\s*$"));
static LOCATION: LazyLock<Option<Regex>> = LazyLock::new(|| {
    re(&format!(
        r"(?:^|[\s(\[`'\x22=])((?:[A-Za-z]:)?[\w./\\-]*[\w-]\.(?:{})):(\d+)(?::\d+)?",
        super::SOURCE_EXTENSIONS.join("|")
    ))
});

/// Normalises a path as a report writes it: `\` to `/`, without `file://`, a drive letter,
/// `./` or surrounding quotes.
pub fn normalize_path(p: &str) -> String {
    let p = p.trim_matches(|c: char| c == '"' || c == '\'' || c == '`');
    let p = p.strip_prefix("file://").unwrap_or(p);
    let p = p.replace('\\', "/");
    let p = match p.as_bytes() {
        [d, b':', b'/', ..] if d.is_ascii_alphabetic() => p[2..].to_owned(),
        _ => p,
    };
    let mut p = p.as_str();
    while let Some(rest) = p.strip_prefix("./") {
        p = rest;
    }
    p.to_owned()
}

/// The package path of a Java frame: `a.b.C$Inner.m` in `C.java` → `a/b/C.java`.
fn java_path(function: &str, file: &str) -> String {
    let segments: Vec<&str> = function.split('.').collect();
    // The class is the segment before the method; the package is everything before it.
    let package = segments.len().saturating_sub(2);
    let mut path: Vec<&str> = segments[..package].to_vec();
    path.push(file);
    path.join("/")
}

/// Every frame of `text`, in order of appearance, each (path, line) once.
pub fn frames(text: &str) -> Vec<StackFrame> {
    let mut out: Vec<(usize, StackFrame)> = Vec::new();
    let mut taken: Vec<(usize, usize)> = Vec::new();
    let mut push = |out: &mut Vec<(usize, StackFrame)>, span: (usize, usize), f: StackFrame| {
        if taken.iter().any(|(a, b)| span.0 < *b && *a < span.1) {
            return;
        }
        taken.push(span);
        out.push((span.0, f));
    };
    let num = |s: Option<regex::Match<'_>>| s.and_then(|m| m.as_str().parse::<u32>().ok());
    if let Some(r) = PYTHON.as_ref() {
        for c in r.captures_iter(text) {
            let (Some(all), Some(path)) = (c.get(0), c.get(1)) else {
                continue;
            };
            push(
                &mut out,
                (all.start(), all.end()),
                StackFrame {
                    path: normalize_path(path.as_str()),
                    line: num(c.get(2)),
                    function: c.get(3).map(|m| m.as_str().to_owned()),
                    format: FrameFormat::Python,
                },
            );
        }
    }
    if let Some(r) = JAVA.as_ref() {
        for c in r.captures_iter(text) {
            let (Some(all), Some(func), Some(file)) = (c.get(0), c.get(1), c.get(2)) else {
                continue;
            };
            push(
                &mut out,
                (all.start(), all.end()),
                StackFrame {
                    path: java_path(func.as_str(), file.as_str()),
                    line: num(c.get(3)),
                    function: Some(func.as_str().to_owned()),
                    format: FrameFormat::Java,
                },
            );
        }
    }
    if let Some(r) = JS.as_ref() {
        for c in r.captures_iter(text) {
            let (Some(all), Some(path)) = (c.get(0), c.get(2)) else {
                continue;
            };
            push(
                &mut out,
                (all.start(), all.end()),
                StackFrame {
                    path: normalize_path(path.as_str()),
                    line: num(c.get(3)),
                    function: c.get(1).map(|m| m.as_str().to_owned()),
                    format: FrameFormat::JavaScript,
                },
            );
        }
    }
    line_frames(text, &mut out, &mut push);
    if let Some(r) = LOCATION.as_ref() {
        for c in r.captures_iter(text) {
            let (Some(path), Some(line)) = (c.get(1), c.get(2)) else {
                continue;
            };
            push(
                &mut out,
                (path.start(), line.end()),
                StackFrame {
                    path: normalize_path(path.as_str()),
                    line: line.as_str().parse().ok(),
                    function: None,
                    format: FrameFormat::Location,
                },
            );
        }
    }
    out.sort_by_key(|(at, _)| *at);
    let mut seen: Vec<(String, Option<u32>)> = Vec::new();
    out.into_iter()
        .map(|(_, f)| f)
        .filter(|f| {
            let key = (f.path.clone(), f.line);
            let new = !seen.contains(&key);
            if new {
                seen.push(key);
            }
            new
        })
        .collect()
}

/// `frames` innermost first: Python prints the innermost frame last ("most recent call
/// last"), the other formats first.
pub fn innermost_first(frames: &[StackFrame]) -> Vec<&StackFrame> {
    let mut out: Vec<&StackFrame> = frames.iter().collect();
    if let Some(last) = out.iter().rposition(|f| f.format == FrameFormat::Python) {
        out[..=last].reverse();
    }
    out
}

type Push<'a> = dyn FnMut(&mut Vec<(usize, StackFrame)>, (usize, usize), StackFrame) + 'a;

/// Rust and Go traces: the frame's location is on the line after its function.
fn line_frames(text: &str, out: &mut Vec<(usize, StackFrame)>, push: &mut Push<'_>) {
    // (the location's pattern, the function line's pattern, the format), tried in order.
    let kinds: [(&Option<Regex>, &Option<Regex>, FrameFormat); 2] = [
        (&RUST, &RUST_FN, FrameFormat::Rust),
        (&GO, &GO_FN, FrameFormat::Go),
    ];
    let mut offset = 0;
    let mut previous: Option<&str> = None;
    for line in text.split_inclusive('\n') {
        let start = offset;
        offset += line.len();
        let l = line.trim_end_matches(['\n', '\r']);
        let found = kinds.iter().find_map(|(at, func, format)| {
            let c = at.as_ref()?.captures(l)?;
            let (all, path) = (c.get(0)?, c.get(1)?);
            Some((c.get(2), all.range(), path.as_str(), *func, *format))
        });
        if let Some((line_no, all, path, func, format)) = found {
            let function = previous
                .and_then(|p| func.as_ref()?.captures(p))
                .and_then(|c| c.get(1))
                .map(|m| m.as_str().to_owned());
            push(
                out,
                (start + all.start, start + all.end),
                StackFrame {
                    path: normalize_path(path),
                    line: line_no.and_then(|m| m.as_str().parse().ok()),
                    function,
                    format,
                },
            );
        }
        previous = Some(l);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn one(text: &str) -> StackFrame {
        let f = frames(text);
        assert_eq!(f.len(), 1, "{text:?}: {f:?}");
        f.into_iter().next().unwrap()
    }

    #[test]
    fn python_traceback() {
        let t = "Traceback (most recent call last):\n  File \"/srv/app/pkg/views.py\", line 42, in get_user\n    return User.objects.get(pk=pk)\n  File \"pkg/models.py\", line 7, in get\nKeyError: 'pk'";
        let f = frames(t);
        assert_eq!(f.len(), 2);
        assert_eq!(f[0].path, "/srv/app/pkg/views.py");
        assert_eq!(f[0].line, Some(42));
        assert_eq!(f[0].function.as_deref(), Some("get_user"));
        assert_eq!(f[0].format, FrameFormat::Python);
        assert_eq!(f[1].path, "pkg/models.py");
    }

    #[test]
    fn rust_panic_and_backtrace() {
        let p = one("thread 'main' panicked at src/config/load.rs:12:5:\nindex out of bounds");
        assert_eq!(
            (p.path.as_str(), p.line, p.format),
            ("src/config/load.rs", Some(12), FrameFormat::Rust)
        );
        let old = one("thread 'main' panicked at 'oops', src/lib.rs:3:9");
        assert_eq!(old.path, "src/lib.rs");
        let bt = frames(
            "stack backtrace:\n   0: rust_begin_unwind\n   1: mycrate::parse::parse_header\n             at ./src/parse.rs:88:13\n   2: main\n             at src/main.rs:4:5\n",
        );
        assert_eq!(bt.len(), 2);
        assert_eq!(bt[0].path, "src/parse.rs");
        assert_eq!(
            bt[0].function.as_deref(),
            Some("mycrate::parse::parse_header")
        );
        assert_eq!(bt[1].function.as_deref(), Some("main"));
    }

    #[test]
    fn go_trace() {
        let f = frames(
            "goroutine 1 [running]:\nmain.(*Server).handle(0xc000010000)\n\t/home/u/proj/server/handle.go:57 +0x1d\nmain.main()\n\t/home/u/proj/main.go:12 +0x25\n",
        );
        assert_eq!(f.len(), 2);
        assert_eq!(f[0].path, "/home/u/proj/server/handle.go");
        assert_eq!(f[0].line, Some(57));
        assert_eq!(f[0].function.as_deref(), Some("main.(*Server).handle"));
        assert_eq!(f[0].format, FrameFormat::Go);
    }

    #[test]
    fn java_trace() {
        let f = one(
            "Exception in thread \"main\" java.lang.IllegalStateException: boom\n\tat com.acme.store.Cart$Item.total(Cart.java:118)",
        );
        assert_eq!(f.path, "com/acme/store/Cart.java");
        assert_eq!(f.line, Some(118));
        assert_eq!(
            f.function.as_deref(),
            Some("com.acme.store.Cart$Item.total")
        );
        assert_eq!(f.format, FrameFormat::Java);
    }

    #[test]
    fn javascript_trace() {
        let f = frames(
            "TypeError: x is undefined\n    at parseRow (/app/src/csv/parse.js:10:15)\n    at async Promise.all (index 0)\n    at file:///app/lib/main.mjs:3:1",
        );
        assert_eq!(f.len(), 2, "{f:?}");
        assert_eq!(f[0].path, "/app/src/csv/parse.js");
        assert_eq!(f[0].function.as_deref(), Some("parseRow"));
        assert_eq!(f[0].line, Some(10));
        assert_eq!(f[1].path, "/app/lib/main.mjs");
        assert_eq!(f[1].function, None);
    }

    #[test]
    fn compiler_and_test_runner_locations() {
        let f = frames(
            "src/net/conn.c:120:7: error: use of undeclared identifier\nFAILED tests/test_io.py:31: AssertionError\nsee http://example.com/a.py:80",
        );
        let paths: Vec<(&str, Option<u32>)> = f.iter().map(|f| (f.path.as_str(), f.line)).collect();
        assert_eq!(
            paths,
            [
                ("src/net/conn.c", Some(120)),
                ("tests/test_io.py", Some(31))
            ]
        );
    }

    #[test]
    fn paths_are_normalised() {
        assert_eq!(normalize_path("C:\\proj\\src\\a.py"), "/proj/src/a.py");
        assert_eq!(normalize_path("./././src/a.rs"), "src/a.rs");
        assert_eq!(normalize_path("file:///x/y.js"), "/x/y.js");
    }
}
