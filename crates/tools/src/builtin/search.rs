//! `glob_search` and `grep` (ripgrep's crates; .gitignore-aware).

use std::path::{Path, PathBuf};

use globset::{Glob, GlobMatcher};
use grep_matcher::Matcher;
use grep_regex::RegexMatcherBuilder;
use grep_searcher::{BinaryDetection, Searcher, SearcherBuilder, Sink, SinkContext, SinkMatch};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::context::ToolContext;
use crate::error::{Error, Result};
use crate::tool::TypedTool;
use crate::workspace::Workspace;

/// A glob matched against workspace-relative paths; without `/` it matches file names at
/// any depth.
fn path_glob(pattern: &str) -> Result<GlobMatcher> {
    let full = if pattern.contains('/') || pattern.starts_with("**") {
        pattern.to_owned()
    } else {
        format!("**/{pattern}")
    };
    Glob::new(&full)
        .map(|g| g.compile_matcher())
        .map_err(|e| Error::InvalidArgs {
            tool: "glob".into(),
            message: format!("bad glob `{pattern}`: {e}"),
        })
}

/// Files under `start` (gitignore-aware, hidden included, `.git` skipped), with their
/// workspace-relative paths.
fn walk_files(ws: &Workspace, start: &Path) -> impl Iterator<Item = (PathBuf, String)> {
    let root = ws.root().to_owned();
    ignore::WalkBuilder::new(start)
        .hidden(false)
        .filter_entry(|e| e.file_name() != ".git")
        .build()
        .flatten()
        .filter(|e| e.file_type().is_some_and(|t| t.is_file()))
        .map(move |e| {
            let rel = e
                .path()
                .strip_prefix(&root)
                .unwrap_or(e.path())
                .to_string_lossy()
                .into_owned();
            (e.into_path(), rel)
        })
}

/// `glob_search` arguments.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct GlobSearchInput {
    /// Glob pattern (`**/*.rs`, `src/**/mod.rs`, `Cargo.toml`); a pattern without `/`
    /// matches file names at any depth.
    pub pattern: String,
    /// Directory to search, relative to the root (default: the root).
    #[serde(default)]
    pub path: Option<String>,
}

/// `glob_search` result.
#[derive(Debug, Serialize, JsonSchema)]
pub struct GlobSearchOutput {
    /// Matching files, relative to the root, sorted.
    pub files: Vec<String>,
    /// Whether the result stopped at the cap.
    pub truncated: bool,
}

/// Finds files by glob.
pub struct GlobSearch;

impl TypedTool for GlobSearch {
    type Input = GlobSearchInput;
    type Output = GlobSearchOutput;

    fn read_only(&self) -> bool {
        true
    }

    fn name(&self) -> &'static str {
        "glob_search"
    }

    fn description(&self) -> &'static str {
        "Find files whose workspace-relative path matches a glob (`**/*.rs`, `src/**/test_*.py`). \
         Respects .gitignore."
    }

    async fn run(&self, ctx: &ToolContext, input: GlobSearchInput) -> Result<GlobSearchOutput> {
        let start = ctx
            .workspace()
            .resolve(input.path.as_deref().unwrap_or("."))?;
        let glob = path_glob(&input.pattern)?;
        let max = ctx.config().files.max_results;
        let mut files: Vec<String> = walk_files(ctx.workspace(), &start.abs)
            .filter(|(_, rel)| glob.is_match(rel))
            .map(|(_, rel)| rel)
            .take(max + 1)
            .collect();
        let truncated = files.len() > max;
        files.truncate(max);
        files.sort();
        Ok(GlobSearchOutput { files, truncated })
    }

    fn render(&self, o: &GlobSearchOutput) -> String {
        if o.files.is_empty() {
            return "no files match".into();
        }
        let mut s = o.files.join("\n");
        s.push('\n');
        if o.truncated {
            s.push_str("[more files match; narrow the pattern]\n");
        }
        s
    }
}

/// `grep` arguments.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct GrepInput {
    /// Regular expression (Rust regex syntax), or a literal with `fixed_strings`.
    pub pattern: String,
    /// File or directory to search, relative to the root (default: the root).
    #[serde(default)]
    pub path: Option<String>,
    /// Only search files whose path matches this glob (`*.rs`).
    #[serde(default)]
    pub glob: Option<String>,
    /// Match case-insensitively.
    #[serde(default)]
    pub case_insensitive: bool,
    /// Treat the pattern as a literal string.
    #[serde(default)]
    pub fixed_strings: bool,
    /// Lines of context before and after each match (at most 10).
    #[serde(default)]
    pub context: Option<usize>,
}

/// One output line of `grep`.
#[derive(Debug, Serialize, JsonSchema)]
pub struct GrepLine {
    /// File, relative to the root.
    pub path: String,
    /// Line number.
    pub line: u64,
    /// The line's text.
    pub text: String,
    /// Whether it matched (false: a context line).
    pub is_match: bool,
}

/// `grep` result.
#[derive(Debug, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct GrepOutput {
    /// Matching (and context) lines, by file.
    pub lines: Vec<GrepLine>,
    /// Matches found.
    pub matches: usize,
    /// Whether the search stopped at the cap.
    pub truncated: bool,
    /// Secret files that were not searched.
    pub skipped_secrets: usize,
}

/// Searches file contents.
pub struct Grep;

struct Collect<'a> {
    rel: &'a str,
    lines: &'a mut Vec<GrepLine>,
    matches: &'a mut usize,
    max: usize,
}

impl Sink for Collect<'_> {
    type Error = std::io::Error;

    fn matched(&mut self, _: &Searcher, m: &SinkMatch<'_>) -> Result<bool, std::io::Error> {
        *self.matches += 1;
        self.lines.push(GrepLine {
            path: self.rel.to_owned(),
            line: m.line_number().unwrap_or(0),
            text: String::from_utf8_lossy(m.bytes()).trim_end().to_owned(),
            is_match: true,
        });
        Ok(*self.matches < self.max)
    }

    fn context(&mut self, _: &Searcher, c: &SinkContext<'_>) -> Result<bool, std::io::Error> {
        self.lines.push(GrepLine {
            path: self.rel.to_owned(),
            line: c.line_number().unwrap_or(0),
            text: String::from_utf8_lossy(c.bytes()).trim_end().to_owned(),
            is_match: false,
        });
        Ok(true)
    }
}

impl TypedTool for Grep {
    type Input = GrepInput;
    type Output = GrepOutput;

    fn read_only(&self) -> bool {
        true
    }

    fn name(&self) -> &'static str {
        "grep"
    }

    fn description(&self) -> &'static str {
        "Search file contents with a regular expression (ripgrep engine). Respects .gitignore, \
         skips binary files and secret files. Returns `path:line:text` lines; narrow with path \
         and glob."
    }

    async fn run(&self, ctx: &ToolContext, input: GrepInput) -> Result<GrepOutput> {
        let start = ctx
            .workspace()
            .resolve(input.path.as_deref().unwrap_or("."))?;
        let matcher = RegexMatcherBuilder::new()
            .case_insensitive(input.case_insensitive)
            .fixed_strings(input.fixed_strings)
            .build(&input.pattern)
            .map_err(|e| Error::InvalidArgs {
                tool: "grep".into(),
                message: format!("bad pattern: {e}"),
            })?;
        // Fail early on a matcher error rather than per file.
        let _ = matcher.find(b"");
        let glob = input.glob.as_deref().map(path_glob).transpose()?;
        let context = input.context.unwrap_or(0).min(10);
        let mut searcher = SearcherBuilder::new()
            .line_number(true)
            .binary_detection(BinaryDetection::quit(0))
            .before_context(context)
            .after_context(context)
            .build();
        let max = ctx.config().files.max_results;
        let mut out = GrepOutput {
            lines: Vec::new(),
            matches: 0,
            truncated: false,
            skipped_secrets: 0,
        };
        for (abs, rel) in walk_files(ctx.workspace(), &start.abs) {
            if ctx.cancel.is_cancelled() {
                return Err(Error::Cancelled);
            }
            if glob.as_ref().is_some_and(|g| !g.is_match(&rel)) {
                continue;
            }
            if ctx.workspace().is_secret(&rel) {
                out.skipped_secrets += 1;
                continue;
            }
            let sink = Collect {
                rel: &rel,
                lines: &mut out.lines,
                matches: &mut out.matches,
                max,
            };
            // Unreadable files are skipped, like rg does.
            let _ = searcher.search_path(&matcher, &abs, sink);
            if out.matches >= max {
                out.truncated = true;
                break;
            }
        }
        Ok(out)
    }

    fn render(&self, o: &GrepOutput) -> String {
        let mut s = String::new();
        for l in &o.lines {
            let sep = if l.is_match { ':' } else { '-' };
            s.push_str(&format!("{}{sep}{}{sep}{}\n", l.path, l.line, l.text));
        }
        if o.matches == 0 {
            s.push_str("no matches\n");
        }
        if o.truncated {
            s.push_str(&format!(
                "[stopped after {} matches; narrow the search]\n",
                o.matches
            ));
        }
        if o.skipped_secrets > 0 {
            s.push_str(&format!(
                "[{} secret file(s) not searched; read_file them if you must (needs approval)]\n",
                o.skipped_secrets
            ));
        }
        s
    }
}
