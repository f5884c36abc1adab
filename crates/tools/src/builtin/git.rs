//! `git_status`, `git_diff`, `git_log`: read-only views of the workspace's repository.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::context::ToolContext;
use crate::error::{Error, Result};
use crate::fsutil::cap_text;
use crate::tool::TypedTool;

/// Runs a read-only git command in the workspace and returns its (capped) output.
async fn git(ctx: &ToolContext, args: &[&str]) -> Result<String> {
    let out = tokio::process::Command::new("git")
        .current_dir(ctx.workspace().root())
        .args([
            "--no-pager",
            "-c",
            "color.ui=never",
            "-c",
            "core.quotePath=false",
        ])
        .args(args)
        .env("GIT_TERMINAL_PROMPT", "0")
        .env("GIT_OPTIONAL_LOCKS", "0")
        .stdin(std::process::Stdio::null())
        .kill_on_drop(true)
        .output()
        .await
        .map_err(|e| Error::Failed(format!("cannot run git: {e}")))?;
    if !out.status.success() {
        return Err(Error::Failed(format!(
            "git {} failed: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        )));
    }
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    Ok(cap_text(&text, ctx.config().shell.max_output_bytes).0)
}

/// Text output of a git tool.
#[derive(Debug, Serialize, JsonSchema)]
pub struct GitText {
    /// What git printed.
    pub output: String,
}

/// `git_status` arguments (none).
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct GitStatusInput {}

/// Shows the working tree status.
pub struct GitStatus;

impl TypedTool for GitStatus {
    type Input = GitStatusInput;
    type Output = GitText;

    fn read_only(&self) -> bool {
        true
    }

    fn name(&self) -> &'static str {
        "git_status"
    }

    fn description(&self) -> &'static str {
        "Show the branch and the changed, staged and untracked files of the workspace (git status --short --branch)."
    }

    fn text_only(&self) -> bool {
        true
    }

    async fn run(&self, ctx: &ToolContext, _: GitStatusInput) -> Result<GitText> {
        let output = git(
            ctx,
            &["status", "--short", "--branch", "--untracked-files=all"],
        )
        .await?;
        Ok(GitText { output })
    }

    fn render(&self, o: &GitText) -> String {
        o.output.clone()
    }
}

/// `git_diff` arguments.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct GitDiffInput {
    /// Compare against the commit the run started from (everything this run changed,
    /// committed or not) instead of the index.
    #[serde(default)]
    pub since_run_start: bool,
    /// Show staged changes (index against HEAD).
    #[serde(default)]
    pub staged: bool,
    /// Only show a summary of changed files and line counts.
    #[serde(default)]
    pub stat: bool,
    /// Limit to this path.
    #[serde(default)]
    pub path: Option<String>,
}

/// Shows changes as a unified diff.
pub struct GitDiff;

impl TypedTool for GitDiff {
    type Input = GitDiffInput;
    type Output = GitText;

    fn read_only(&self) -> bool {
        true
    }

    fn name(&self) -> &'static str {
        "git_diff"
    }

    fn description(&self) -> &'static str {
        "Show changes of the workspace as a unified diff: unstaged changes by default, staged \
         ones with staged, or everything since the run started with since_run_start."
    }

    fn text_only(&self) -> bool {
        true
    }

    async fn run(&self, ctx: &ToolContext, input: GitDiffInput) -> Result<GitText> {
        let mut args: Vec<String> = vec!["diff".into()];
        if input.stat {
            args.push("--stat".into());
        }
        if input.since_run_start {
            let base = ctx.env.base_commit.clone().ok_or_else(|| {
                Error::Failed(
                    "this workspace has no run start commit; use git_diff without since_run_start"
                        .into(),
                )
            })?;
            args.push(base);
        } else if input.staged {
            args.push("--cached".into());
        }
        args.push("--".into());
        if let Some(p) = &input.path {
            args.push(ctx.workspace().resolve(p)?.rel);
        }
        let refs: Vec<&str> = args.iter().map(String::as_str).collect();
        let mut output = git(ctx, &refs).await?;
        if input.since_run_start || !input.staged {
            let untracked = git(ctx, &["ls-files", "--others", "--exclude-standard"]).await?;
            if !untracked.trim().is_empty() {
                output.push_str("\nUntracked files (not shown above):\n");
                output.push_str(&untracked);
            }
        }
        if output.trim().is_empty() {
            output = "no changes\n".into();
        }
        Ok(GitText { output })
    }

    fn render(&self, o: &GitText) -> String {
        o.output.clone()
    }
}

/// `git_log` arguments.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct GitLogInput {
    /// How many commits (default 20, at most 200).
    #[serde(default)]
    pub max_count: Option<usize>,
    /// Only commits touching this path.
    #[serde(default)]
    pub path: Option<String>,
}

/// Shows recent commits.
pub struct GitLog;

impl TypedTool for GitLog {
    type Input = GitLogInput;
    type Output = GitText;

    fn read_only(&self) -> bool {
        true
    }

    fn name(&self) -> &'static str {
        "git_log"
    }

    fn description(&self) -> &'static str {
        "Show recent commits (hash, date, author, subject), optionally only those touching a path."
    }

    fn text_only(&self) -> bool {
        true
    }

    async fn run(&self, ctx: &ToolContext, input: GitLogInput) -> Result<GitText> {
        let n = format!("-n{}", input.max_count.unwrap_or(20).clamp(1, 200));
        let mut args = vec![
            "log".to_owned(),
            n,
            "--date=short".into(),
            "--pretty=format:%h %ad %an  %s".into(),
            "--".into(),
        ];
        if let Some(p) = &input.path {
            args.push(ctx.workspace().resolve(p)?.rel);
        }
        let refs: Vec<&str> = args.iter().map(String::as_str).collect();
        let output = git(ctx, &refs).await?;
        Ok(GitText { output })
    }

    fn render(&self, o: &GitText) -> String {
        o.output.clone()
    }
}
