//! `read_file`, `list_directory`, `write_file`.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::context::ToolContext;
use crate::error::{Error, Result};
use crate::fsutil::{is_binary, write_atomic};
use crate::tool::TypedTool;
use crate::workspace::Resolved;

/// Files larger than this are refused by `read_file` outright.
const MAX_FILE_BYTES: u64 = 64 * 1024 * 1024;
/// Longer lines are cut in `read_file` output.
const MAX_LINE_CHARS: usize = 2000;

/// Resolves `path` and, for a secret file, asks the policy (`secret_access`).
pub(crate) async fn resolve_gated(ctx: &ToolContext, path: &str, verb: &str) -> Result<Resolved> {
    let r = ctx.workspace().resolve(path)?;
    if ctx.workspace().is_secret(&r.rel) {
        ctx.gate(
            ctx.config().policy.secret_access,
            format!("{verb} the secret file `{}`", r.rel),
            None,
        )
        .await?;
    }
    Ok(r)
}

/// `read_file` arguments.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ReadFileInput {
    /// File path relative to the workspace root.
    pub path: String,
    /// First line to return, 1-based (default 1).
    #[serde(default)]
    pub offset: Option<usize>,
    /// How many lines to return (default: to the end, within the size cap).
    #[serde(default)]
    pub limit: Option<usize>,
}

/// `read_file` result.
#[derive(Debug, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ReadFileOutput {
    /// The file, relative to the root.
    pub path: String,
    /// The lines, each prefixed with its number and a tab (`cat -n` style).
    pub content: String,
    /// First line returned (1-based).
    pub start_line: usize,
    /// Last line returned.
    pub end_line: usize,
    /// Lines in the file.
    pub total_lines: usize,
    /// Whether the output stopped early at the size cap.
    pub truncated: bool,
    /// Set for a binary file (its content is not returned).
    pub binary: bool,
    /// File size in bytes.
    pub size: u64,
}

/// Reads a text file.
pub struct ReadFile;

impl TypedTool for ReadFile {
    type Input = ReadFileInput;
    type Output = ReadFileOutput;

    fn read_only(&self) -> bool {
        true
    }

    fn name(&self) -> &'static str {
        "read_file"
    }

    fn description(&self) -> &'static str {
        "Read a text file of the workspace. Returns numbered lines (`cat -n` style). Use \
         offset/limit to page through large files; output is capped in size. Binary files are \
         detected and not shown. Paths are relative to the workspace root."
    }

    async fn run(&self, ctx: &ToolContext, input: ReadFileInput) -> Result<ReadFileOutput> {
        let r = resolve_gated(ctx, &input.path, "reading").await?;
        let meta = tokio::fs::metadata(&r.abs)
            .await
            .map_err(Error::io("cannot read", &r.abs))?;
        if meta.is_dir() {
            return Err(Error::Failed(format!(
                "`{}` is a directory; use list_directory",
                r.rel
            )));
        }
        if meta.len() > MAX_FILE_BYTES {
            return Err(Error::Failed(format!(
                "`{}` is {} bytes, too large to read; use grep to find what you need",
                r.rel,
                meta.len()
            )));
        }
        let bytes = tokio::fs::read(&r.abs)
            .await
            .map_err(Error::io("cannot read", &r.abs))?;
        let text = match std::str::from_utf8(&bytes) {
            Ok(t) if !is_binary(&bytes) => t,
            _ => {
                return Ok(ReadFileOutput {
                    path: r.rel,
                    content: String::new(),
                    start_line: 0,
                    end_line: 0,
                    total_lines: 0,
                    truncated: false,
                    binary: true,
                    size: meta.len(),
                });
            }
        };
        let lines: Vec<&str> = text.lines().collect();
        let total = lines.len();
        let start = input.offset.unwrap_or(1).max(1);
        let limit = input.limit.unwrap_or(usize::MAX);
        let cap = ctx.config().files.max_read_bytes;
        let mut content = String::new();
        let mut end = start.saturating_sub(1);
        let mut truncated = false;
        for (i, line) in lines.iter().enumerate().skip(start - 1).take(limit) {
            let shown: String = if line.chars().count() > MAX_LINE_CHARS {
                let mut s: String = line.chars().take(MAX_LINE_CHARS).collect();
                s.push_str(" … [line cut]");
                s
            } else {
                (*line).to_owned()
            };
            let entry = format!("{:>6}\t{shown}\n", i + 1);
            if content.len() + entry.len() > cap && !content.is_empty() {
                truncated = true;
                break;
            }
            content.push_str(&entry);
            end = i + 1;
        }
        Ok(ReadFileOutput {
            path: r.rel,
            content,
            start_line: start,
            end_line: end,
            total_lines: total,
            truncated,
            binary: false,
            size: meta.len(),
        })
    }

    fn render(&self, o: &ReadFileOutput) -> String {
        if o.binary {
            return format!("{}: binary file ({} bytes), not shown", o.path, o.size);
        }
        if o.total_lines == 0 {
            return format!("{}: empty file", o.path);
        }
        let mut s = o.content.clone();
        if o.truncated || o.end_line < o.total_lines {
            s.push_str(&format!(
                "[{}: showed lines {}-{} of {}; continue with offset={}]\n",
                o.path,
                o.start_line,
                o.end_line,
                o.total_lines,
                o.end_line + 1
            ));
        }
        s
    }
}

/// `list_directory` arguments.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ListDirectoryInput {
    /// Directory relative to the workspace root (default: the root).
    #[serde(default)]
    pub path: Option<String>,
    /// How many levels to descend (default 1, at most 5).
    #[serde(default)]
    pub depth: Option<usize>,
}

/// One directory entry.
#[derive(Debug, Serialize, JsonSchema)]
pub struct DirEntry {
    /// Path relative to the workspace root.
    pub path: String,
    /// `file`, `dir` or `symlink`.
    pub kind: String,
    /// Size in bytes (files).
    pub size: Option<u64>,
}

/// `list_directory` result.
#[derive(Debug, Serialize, JsonSchema)]
pub struct ListDirectoryOutput {
    /// The entries, sorted by path.
    pub entries: Vec<DirEntry>,
    /// Whether the listing stopped at the result cap.
    pub truncated: bool,
}

/// Lists a directory.
pub struct ListDirectory;

impl TypedTool for ListDirectory {
    type Input = ListDirectoryInput;
    type Output = ListDirectoryOutput;

    fn read_only(&self) -> bool {
        true
    }

    fn name(&self) -> &'static str {
        "list_directory"
    }

    fn description(&self) -> &'static str {
        "List a directory of the workspace (default: the root), optionally several levels \
         deep. Respects .gitignore; hidden files are shown, .git is not."
    }

    async fn run(
        &self,
        ctx: &ToolContext,
        input: ListDirectoryInput,
    ) -> Result<ListDirectoryOutput> {
        let r = ctx
            .workspace()
            .resolve(input.path.as_deref().unwrap_or("."))?;
        if !r.abs.is_dir() {
            return Err(Error::Failed(format!("`{}` is not a directory", r.rel)));
        }
        let depth = input.depth.unwrap_or(1).clamp(1, 5);
        let max = ctx.config().files.max_results;
        let root = ctx.workspace().root().to_owned();
        let walker = ignore::WalkBuilder::new(&r.abs)
            .hidden(false)
            .max_depth(Some(depth))
            .filter_entry(|e| e.file_name() != ".git")
            .build();
        let mut entries = Vec::new();
        let mut truncated = false;
        for e in walker.flatten() {
            if e.depth() == 0 {
                continue;
            }
            if entries.len() >= max {
                truncated = true;
                break;
            }
            let ft = e.file_type();
            let kind = match ft {
                Some(t) if t.is_symlink() => "symlink",
                Some(t) if t.is_dir() => "dir",
                _ => "file",
            };
            let size = (kind == "file")
                .then(|| e.metadata().ok().map(|m| m.len()))
                .flatten();
            let rel = e
                .path()
                .strip_prefix(&root)
                .unwrap_or(e.path())
                .to_string_lossy()
                .into_owned();
            entries.push(DirEntry {
                path: rel,
                kind: kind.into(),
                size,
            });
        }
        entries.sort_by(|a, b| a.path.cmp(&b.path));
        Ok(ListDirectoryOutput { entries, truncated })
    }

    fn render(&self, o: &ListDirectoryOutput) -> String {
        let mut s = String::new();
        for e in &o.entries {
            match e.kind.as_str() {
                "dir" => s.push_str(&format!("{}/\n", e.path)),
                "symlink" => s.push_str(&format!("{}@\n", e.path)),
                _ => s.push_str(&format!("{} ({} bytes)\n", e.path, e.size.unwrap_or(0))),
            }
        }
        if o.entries.is_empty() {
            s.push_str("(empty)\n");
        }
        if o.truncated {
            s.push_str("[listing truncated; list a subdirectory]\n");
        }
        s
    }
}

/// `write_file` arguments.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct WriteFileInput {
    /// File path relative to the workspace root; parent directories are created.
    pub path: String,
    /// The complete new contents.
    pub content: String,
}

/// `write_file` result.
#[derive(Debug, Serialize, JsonSchema)]
pub struct WriteFileOutput {
    /// The file written.
    pub path: String,
    /// Bytes written.
    pub bytes: usize,
    /// Whether the file was created.
    pub created: bool,
}

/// Writes a whole file.
pub struct WriteFile;

impl TypedTool for WriteFile {
    type Input = WriteFileInput;
    type Output = WriteFileOutput;

    fn name(&self) -> &'static str {
        "write_file"
    }

    fn description(&self) -> &'static str {
        "Create or overwrite a file with the given contents (parent directories are created). \
         Prefer edit_file for changing part of an existing file."
    }

    async fn run(&self, ctx: &ToolContext, input: WriteFileInput) -> Result<WriteFileOutput> {
        let r = resolve_gated(ctx, &input.path, "writing").await?;
        if r.abs.is_dir() {
            return Err(Error::Failed(format!("`{}` is a directory", r.rel)));
        }
        let created = !r.abs.exists();
        write_atomic(&r.abs, input.content.as_bytes(), None, false)?;
        Ok(WriteFileOutput {
            path: r.rel,
            bytes: input.content.len(),
            created,
        })
    }

    fn render(&self, o: &WriteFileOutput) -> String {
        format!(
            "{} {} ({} bytes)",
            if o.created { "created" } else { "wrote" },
            o.path,
            o.bytes
        )
    }
}
