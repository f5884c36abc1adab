//! `edit_file` (one exact replacement) and `multi_edit` (many, all-or-nothing).

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::files::resolve_gated;
use crate::context::ToolContext;
use crate::error::{Error, Result};
use crate::fsutil::{FileWrite, commit_all};
use crate::tool::TypedTool;

/// Replaces `old` by `new` in `text`: exactly once unless `replace_all`. Fails with the
/// line numbers of the matches when the match is missing or not unique.
pub(crate) fn replace_exact(
    text: &str,
    old: &str,
    new: &str,
    replace_all: bool,
    file: &str,
) -> Result<(String, usize)> {
    if old.is_empty() {
        return Err(Error::Failed(format!(
            "old_string is empty; to create or overwrite `{file}` use write_file"
        )));
    }
    if old == new {
        return Err(Error::Failed(
            "old_string and new_string are identical".into(),
        ));
    }
    let starts: Vec<usize> = text.match_indices(old).map(|(i, _)| i).collect();
    match starts.len() {
        0 => {
            let hint = if text.contains(old.trim()) && !old.trim().is_empty() {
                " (it does occur with different surrounding whitespace — copy it exactly, \
                 including indentation and line breaks)"
            } else {
                " — read the file again and copy the text exactly"
            };
            Err(Error::Failed(format!(
                "old_string was not found in `{file}`{hint}"
            )))
        }
        n if n > 1 && !replace_all => {
            let lines: Vec<String> = starts
                .iter()
                .take(10)
                .map(|i| (text.get(..*i).unwrap_or("").matches('\n').count() + 1).to_string())
                .collect();
            Err(Error::Failed(format!(
                "old_string matches {n} times in `{file}` (at lines {}); include more \
                 surrounding lines to make it unique, or set replace_all to change every one",
                lines.join(", ")
            )))
        }
        n => Ok((text.replace(old, new), n)),
    }
}

/// `edit_file` arguments.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct EditFileInput {
    /// File path relative to the workspace root.
    pub path: String,
    /// The exact text to replace (must occur exactly once unless `replace_all`).
    pub old_string: String,
    /// The replacement text.
    pub new_string: String,
    /// Replace every occurrence.
    #[serde(default)]
    pub replace_all: bool,
}

/// `edit_file` result.
#[derive(Debug, Serialize, JsonSchema)]
pub struct EditOutput {
    /// Files changed, with the number of replacements in each.
    pub files: BTreeMap<String, usize>,
}

/// Replaces text in a file.
pub struct EditFile;

impl TypedTool for EditFile {
    type Input = EditFileInput;
    type Output = EditOutput;

    fn name(&self) -> &'static str {
        "edit_file"
    }

    fn description(&self) -> &'static str {
        "Replace an exact string in a file. old_string must match the file's text exactly \
         (whitespace included) and occur exactly once, unless replace_all is set; otherwise \
         the edit fails and the file is unchanged."
    }

    async fn run(&self, ctx: &ToolContext, input: EditFileInput) -> Result<EditOutput> {
        run_edits(
            ctx,
            vec![Edit {
                path: input.path,
                old_string: input.old_string,
                new_string: input.new_string,
                replace_all: input.replace_all,
            }],
        )
        .await
    }

    fn render(&self, o: &EditOutput) -> String {
        render(o)
    }
}

/// One edit of `multi_edit`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Edit {
    /// File path relative to the workspace root.
    pub path: String,
    /// The exact text to replace.
    pub old_string: String,
    /// The replacement.
    pub new_string: String,
    /// Replace every occurrence.
    #[serde(default)]
    pub replace_all: bool,
}

/// `multi_edit` arguments.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct MultiEditInput {
    /// Edits applied in order (later edits see the result of earlier ones in the same
    /// file).
    pub edits: Vec<Edit>,
}

/// Several replacements, all or nothing.
pub struct MultiEdit;

impl TypedTool for MultiEdit {
    type Input = MultiEditInput;
    type Output = EditOutput;

    fn name(&self) -> &'static str {
        "multi_edit"
    }

    fn description(&self) -> &'static str {
        "Apply several exact-string edits, across one or more files, atomically: if any edit \
         fails (no match, several matches) no file is changed. Same matching rules as edit_file."
    }

    async fn run(&self, ctx: &ToolContext, input: MultiEditInput) -> Result<EditOutput> {
        if input.edits.is_empty() {
            return Err(Error::Failed("no edits given".into()));
        }
        run_edits(ctx, input.edits).await
    }

    fn render(&self, o: &EditOutput) -> String {
        render(o)
    }
}

fn render(o: &EditOutput) -> String {
    o.files
        .iter()
        .map(|(f, n)| {
            format!(
                "edited {f} ({n} replacement{})",
                if *n == 1 { "" } else { "s" }
            )
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// Applies edits in memory, then commits every touched file together.
async fn run_edits(ctx: &ToolContext, edits: Vec<Edit>) -> Result<EditOutput> {
    let many = edits.len() > 1;
    // path (relative) -> (absolute, current text)
    let mut files: BTreeMap<String, (std::path::PathBuf, String)> = BTreeMap::new();
    let mut counts: BTreeMap<String, usize> = BTreeMap::new();
    for (i, e) in edits.into_iter().enumerate() {
        let r = resolve_gated(ctx, &e.path, "editing").await?;
        if !files.contains_key(&r.rel) {
            let bytes = tokio::fs::read(&r.abs)
                .await
                .map_err(Error::io("cannot read", &r.abs))?;
            let text = String::from_utf8(bytes)
                .map_err(|_| Error::Failed(format!("`{}` is not UTF-8 text", r.rel)))?;
            files.insert(r.rel.clone(), (r.abs.clone(), text));
        }
        let Some((_, text)) = files.get_mut(&r.rel) else {
            continue;
        };
        let (next, n) = replace_exact(text, &e.old_string, &e.new_string, e.replace_all, &r.rel)
            .map_err(|err| {
                if many {
                    Error::Failed(format!(
                        "edit {} of {}: {err}; no file was changed",
                        i + 1,
                        r.rel
                    ))
                } else {
                    err
                }
            })?;
        *text = next;
        *counts.entry(r.rel).or_default() += n;
    }
    let writes: Vec<FileWrite> = files
        .into_values()
        .map(|(abs, text)| FileWrite {
            path: abs,
            content: Some(text.into_bytes()),
        })
        .collect();
    commit_all(&writes)?;
    Ok(EditOutput { files: counts })
}
