//! Failure analysis for adaptive retrieval: the failed stage's recorded result (test output,
//! compiler errors, stack frames) flattened to text; `path:line` references, failing test
//! names and identifiers extracted; the referenced regions read from the run's worktree.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use serde::Serialize;
use serde_json::Value;
use trellis_index::analyze::{analyze, join};

use super::PackedItem;
use super::queries::identifiers;

/// A `path:line` named by a failure, resolved inside the worktree.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct FailureRef {
    /// Path relative to the worktree, `/`-separated.
    pub path: String,
    /// 1-based line.
    pub line: u32,
}

/// What adaptive retrieval reads out of a failure.
#[derive(Clone, Debug, Default, Serialize)]
pub struct FailureAnalysis {
    /// Every string of the failure JSON, labelled by key, capped.
    pub text: String,
    /// The first line that looks like the error.
    pub headline: Option<String>,
    /// Locations in the worktree, in order of appearance.
    pub refs: Vec<FailureRef>,
    /// Failing test names and identifiers named by the messages.
    pub identifiers: Vec<String>,
}

/// Characters of failure text analysed.
const MAX_TEXT: usize = 40_000;
/// Files larger than this are not read for regions.
const MAX_FILE_BYTES: u64 = 1_000_000;
/// A symbol or section longer than this is replaced by a window around the line.
const MAX_REGION_LINES: u32 = 150;

/// Collects the strings of `v`: into `labelled` as `key: text` (for the model), into `bare`
/// as they are (for extraction, so that key names are not taken for identifiers).
fn flatten(v: &Value, key: &str, labelled: &mut String, bare: &mut String) {
    if bare.len() >= MAX_TEXT {
        return;
    }
    match v {
        Value::String(s) if !s.trim().is_empty() => {
            if !key.is_empty() {
                labelled.push_str(key);
                labelled.push_str(": ");
            }
            labelled.push_str(s);
            labelled.push('\n');
            bare.push_str(s);
            bare.push('\n');
        }
        Value::Array(a) => a.iter().for_each(|x| flatten(x, key, labelled, bare)),
        Value::Object(m) => m.iter().for_each(|(k, x)| flatten(x, k, labelled, bare)),
        Value::Number(_) if key == "exit_code" || key == "status" => {
            labelled.push_str(&format!("{key}: {v}\n"));
        }
        _ => {}
    }
}

/// Analyses `failure`; references resolve against `worktree` (absolute paths under one of
/// `roots` — the worktree, the indexed repo — are made relative).
pub fn analyse_failure(failure: &Value, worktree: &Path, roots: &[PathBuf]) -> FailureAnalysis {
    let (mut labelled, mut bare) = (String::new(), String::new());
    flatten(failure, "", &mut labelled, &mut bare);
    let text = super::queries::truncate_chars(&labelled, MAX_TEXT);
    let bare = super::queries::truncate_chars(&bare, MAX_TEXT);
    let headline = bare
        .lines()
        .map(str::trim)
        .find(|l| {
            let l = l.to_ascii_lowercase();
            [
                "error",
                "panicked",
                "assert",
                "failed",
                "exception",
                "traceback",
            ]
            .iter()
            .any(|w| l.contains(w))
        })
        .map(|l| super::queries::truncate_chars(l, 200));
    let mut refs: Vec<FailureRef> = Vec::new();
    for (path, line) in locations(&bare) {
        if let Some(rel) = resolve(&path, worktree, roots)
            && !refs.iter().any(|r| r.path == rel && r.line == line)
        {
            refs.push(FailureRef { path: rel, line });
        }
    }
    let mut ids = test_names(&bare);
    for id in identifiers(&bare, 40) {
        // File names are references already, not identifiers.
        if !ids.contains(&id) && !refs.iter().any(|r| r.path.ends_with(&id)) {
            ids.push(id);
        }
    }
    ids.truncate(16);
    FailureAnalysis {
        text,
        headline,
        refs,
        identifiers: ids,
    }
}

/// The `path:line` of every stack frame and location in `text`, in order: the index's
/// reader of bug reports (Python, Rust, Go, Java and JavaScript traces, compiler and test
/// runner locations), so a failure and a task are read alike.
fn locations(text: &str) -> Vec<(String, u32)> {
    trellis_index::query::frames::frames(text)
        .into_iter()
        .filter_map(|f| Some((f.path, f.line.filter(|l| *l > 0)?)))
        .collect()
}

/// The path relative to the worktree if the file exists there.
fn resolve(path: &str, worktree: &Path, roots: &[PathBuf]) -> Option<String> {
    let p = Path::new(path);
    let rel: PathBuf = if p.is_absolute() {
        roots
            .iter()
            .find_map(|r| p.strip_prefix(r).ok())?
            .to_path_buf()
    } else {
        p.strip_prefix("./").unwrap_or(p).to_path_buf()
    };
    if rel
        .components()
        .any(|c| matches!(c, std::path::Component::ParentDir))
    {
        return None;
    }
    worktree
        .join(&rel)
        .is_file()
        .then(|| rel.to_string_lossy().replace('\\', "/"))
}

/// Failing test names: `test a::b ... FAILED`, `FAILED tests/x.py::test_y`, `--- FAIL: TestX`,
/// `thread 'a::b' panicked`.
fn test_names(text: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    let mut push = |s: &str| {
        let s = s.trim_matches(|c: char| !(c.is_alphanumeric() || c == '_'));
        if s.len() >= 3 && !out.iter().any(|o| o == s) {
            out.push(s.to_owned());
        }
    };
    for l in text.lines().map(str::trim) {
        if let Some(rest) = l.strip_prefix("test ")
            && let Some((name, status)) = rest.split_once(" ... ")
            && status.starts_with("FAILED")
        {
            push(name);
        } else if let Some(rest) = l.strip_prefix("FAILED ") {
            let node = rest.split_whitespace().next().unwrap_or("");
            push(node.rsplit("::").next().unwrap_or(node));
        } else if let Some(rest) = l.strip_prefix("--- FAIL: ") {
            push(rest.split_whitespace().next().unwrap_or(""));
        } else if let Some(rest) = l.strip_prefix("thread '")
            && let Some((name, tail)) = rest.split_once('\'')
            && tail.contains("panicked")
            && name != "main"
        {
            push(name);
        }
    }
    out
}

/// The region of `worktree/path` around each referenced line: the smallest symbol or
/// section containing it (or a window when there is none or it is huge); several references
/// into one region give one item. At most `max` items.
pub(crate) fn regions(
    worktree: &Path,
    refs: &[FailureRef],
    ast: bool,
    context_lines: u32,
    max: usize,
) -> Vec<PackedItem> {
    let mut out: Vec<PackedItem> = Vec::new();
    let mut files: HashMap<&str, Option<(String, Vec<trellis_index::Chunk>)>> = HashMap::new();
    for r in refs {
        if let Some(item) = out
            .iter_mut()
            .find(|i| i.path == r.path && i.start_line <= r.line && r.line <= i.end_line)
        {
            if let Some(note) = &mut item.note {
                note.push_str(&format!(", {}", r.line));
            }
            continue;
        }
        if out.len() >= max {
            break;
        }
        let file = files.entry(r.path.as_str()).or_insert_with(|| {
            let full = worktree.join(&r.path);
            let small = std::fs::metadata(&full).is_ok_and(|m| m.len() <= MAX_FILE_BYTES);
            let text = small
                .then(|| std::fs::read_to_string(&full).ok())
                .flatten()?;
            let chunks = analyze(&r.path, &text, ast).chunks;
            Some((text, chunks))
        });
        let Some((text, chunks)) = file else { continue };
        let lines: Vec<&str> = text.lines().collect();
        let n = lines.len() as u32;
        if r.line > n {
            continue;
        }
        let best = chunks
            .iter()
            .filter(|c| {
                c.decl.start_line <= r.line
                    && r.line <= c.decl.end_line
                    && c.decl.end_line - c.decl.start_line < MAX_REGION_LINES
                    && c.decl.kind != trellis_index::ChunkKind::File
            })
            .min_by_key(|c| c.decl.end_line - c.decl.start_line);
        let item = match best {
            Some(c) => PackedItem {
                source: super::FAILURE_SOURCE.to_owned(),
                path: r.path.clone(),
                start_line: c.decl.start_line,
                end_line: c.decl.end_line,
                symbol: c
                    .decl
                    .kind
                    .is_symbol()
                    .then(|| c.decl.qualified_name.clone()),
                section: (c.decl.kind == trellis_index::ChunkKind::Section)
                    .then(|| c.decl.qualified_name.clone()),
                kind: c.decl.kind.as_str().to_owned(),
                text: c.text.clone(),
                tokens: 0,
                score: 0.0,
                note: Some(format!("named by the failure at line {}", r.line)),
            },
            None => {
                let start = r.line.saturating_sub(context_lines).max(1);
                let end = (r.line + context_lines).min(n);
                PackedItem {
                    source: super::FAILURE_SOURCE.to_owned(),
                    path: r.path.clone(),
                    start_line: start,
                    end_line: end,
                    symbol: None,
                    section: None,
                    kind: "window".to_owned(),
                    text: join(&lines, start, end),
                    tokens: 0,
                    score: 0.0,
                    note: Some(format!("named by the failure at line {}", r.line)),
                }
            }
        };
        out.push(item);
    }
    out
}

/// Re-checks an index item (grounded against the indexed repo) against the worktree, which
/// agents have edited: kept if its text is still at its lines, moved if the text is
/// elsewhere in the file, replaced by the worktree's version of its symbol if that changed,
/// dropped otherwise (`None`).
pub(crate) fn reground(
    item: PackedItem,
    worktree: &Path,
    ast: bool,
    files: &mut HashMap<String, Option<String>>,
) -> Option<PackedItem> {
    // Not a region of a file (a web page, an advisory, a language server's signature).
    if item.start_line == 0 {
        return Some(item);
    }
    let content = files
        .entry(item.path.clone())
        .or_insert_with(|| std::fs::read_to_string(worktree.join(&item.path)).ok())
        .as_deref()?;
    let lines: Vec<&str> = content.lines().collect();
    if (item.end_line as usize) <= lines.len()
        && join(&lines, item.start_line, item.end_line) == item.text
    {
        return Some(item);
    }
    if !item.text.is_empty()
        && let Some(at) = content.find(&item.text)
        && (at == 0 || content.as_bytes()[at - 1] == b'\n')
    {
        let start = content[..at].matches('\n').count() as u32 + 1;
        let end = start + item.text.matches('\n').count() as u32;
        return Some(PackedItem {
            start_line: start,
            end_line: end,
            ..item
        });
    }
    let name = item.symbol.as_ref().or(item.section.as_ref())?;
    let chunk = analyze(&item.path, content, ast)
        .chunks
        .into_iter()
        .find(|c| &c.decl.qualified_name == name)?;
    Some(PackedItem {
        start_line: chunk.decl.start_line,
        end_line: chunk.decl.end_line,
        text: chunk.text,
        note: Some("as edited in the run's worktree".to_owned()),
        ..item
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn locations_in_common_formats() {
        let text = "error[E0308]: mismatched types\n  --> src/lib.rs:12:5\n\
            File \"/w/app/calc.py\", line 7, in add\n\
            tests/test_calc.py:14: AssertionError\n\
            at Object.<anonymous> (src/util.js:3:11)\n\
            see http://example.com:8080/x and version 1.2:3";
        let locs = locations(text);
        assert_eq!(
            locs,
            [
                ("src/lib.rs".to_owned(), 12),
                ("/w/app/calc.py".to_owned(), 7),
                ("tests/test_calc.py".to_owned(), 14),
                ("src/util.js".to_owned(), 3),
            ]
        );
    }

    #[test]
    fn test_names_in_common_formats() {
        let text = "test calc::tests::adds ... FAILED\n\
            FAILED tests/test_calc.py::test_total - assert 3 == 4\n\
            --- FAIL: TestParse (0.00s)\n\
            thread 'calc::tests::subtracts' panicked at src/lib.rs:9:5";
        assert_eq!(
            test_names(text),
            [
                "calc::tests::adds",
                "test_total",
                "TestParse",
                "calc::tests::subtracts"
            ]
        );
    }
}
