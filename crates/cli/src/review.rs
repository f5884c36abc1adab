//! `trellis review <run>`, `trellis undo <run>` and the hidden `trellis sandbox …` helper
//! that creates a run worktree and edits it through the tools (until agents do).

use std::collections::{BTreeMap, BTreeSet};
use std::io::{BufRead, IsTerminal, Write};
use std::path::Path;
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::{Context, bail};
use clap::{Args, Subcommand};
use serde_json::Value;
use tokio_util::sync::CancellationToken;
use trellis_core::service::Service;
use trellis_protocol::{FileHunks, NodeId, Op, ReviewAction, RunId};
use trellis_store::Store;
use trellis_tools::review::{
    self, ChangeSet, FileChange, FileSelection, LineKind, ReviewComment, ReviewOutcome, Selection,
};
use trellis_tools::worktree::RunWorktree;
use trellis_tools::{NonInteractive, Registry, ToolEnv, Workspace};

/// `trellis review` arguments.
#[derive(Debug, Args)]
pub struct ReviewArgs {
    /// Run id or a unique prefix of it.
    pub run: String,
    /// Approve and apply everything.
    #[arg(long, conflicts_with_all = ["select", "reject", "request_changes"])]
    pub approve_all: bool,
    /// Approve and apply only these: `PATH` (whole file) or `PATH:0,2` (hunks by index);
    /// repeatable.
    #[arg(long, value_name = "PATH[:HUNKS]")]
    pub select: Vec<String>,
    /// Reject the whole change.
    #[arg(long)]
    pub reject: bool,
    /// Request changes with this comment (repeatable) instead of applying.
    #[arg(long, value_name = "COMMENT")]
    pub request_changes: Vec<String>,
    /// The stage that should address the requested changes.
    #[arg(long, requires = "request_changes")]
    pub stage: Option<String>,
    /// Print JSON: the change set (without a decision flag), or the result.
    #[arg(long)]
    pub json: bool,
}

/// `trellis undo` arguments.
#[derive(Debug, Args)]
pub struct UndoArgs {
    /// Run id or a unique prefix of it. Undoing an undone run re-applies it.
    pub run: String,
    /// Print JSON.
    #[arg(long)]
    pub json: bool,
}

/// `trellis sandbox` (hidden): exercise worktrees, tools and review without an agent.
#[derive(Debug, Subcommand)]
pub enum SandboxCommand {
    /// Create a run worktree from the repository's current state; prints the run id.
    New {
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// Call one tool in the run's worktree (as role `implementor`, non-interactive).
    Tool {
        /// Run id or prefix.
        run: String,
        /// Tool name.
        tool: String,
        /// JSON arguments.
        args: String,
        /// Approve what the policy would ask about (otherwise it is denied).
        #[arg(long)]
        yes: bool,
    },
    /// Commit the worktree's changes on the run's branch.
    Commit {
        /// Run id or prefix.
        run: String,
        /// The stage named in the commit message.
        #[arg(long, default_value = "manual")]
        stage: String,
        /// Summary line.
        #[arg(long, default_value = "changes")]
        message: String,
    },
    /// Print every tool's name, description and input schema as JSON.
    Tools,
}

fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
        .unwrap_or(0)
}

/// `trellis review`, through the runtime service: show the change set, choose files and
/// hunks (flags or interactively), then apply, reject, or request changes (which runs the
/// chosen stage again with the comments, and follows it).
pub async fn review_with(service: &Arc<Service>, args: ReviewArgs) -> anyhow::Result<ExitCode> {
    let shown = service
        .call(Op::Review {
            run: args.run.clone(),
            action: ReviewAction::Show,
        })
        .await?;
    let set: ChangeSet = serde_json::from_value(shown["changeSet"].clone())
        .context("reading the change set from the service")?;
    let run = shown["run"].as_str().unwrap_or(&args.run).to_owned();
    let short = RunId::from_string(run.clone()).short().to_owned();
    if args.json && !args.decided() {
        println!("{}", serde_json::to_string_pretty(&set)?);
        return Ok(ExitCode::SUCCESS);
    }
    let color =
        !args.json && std::io::stdout().is_terminal() && std::env::var_os("NO_COLOR").is_none();
    if !args.json {
        print_reviewers(&shown);
    }
    let Some(outcome) = choose_outcome(&args, &set, &short, color)? else {
        return Ok(ExitCode::SUCCESS);
    };
    let reviewing = Reviewing {
        service,
        run,
        short,
        json: args.json,
    };
    match &outcome {
        ReviewOutcome::Approved { selection, .. } => {
            reviewing.apply(&set, &outcome, selection).await?;
        }
        ReviewOutcome::Rejected { reason } => {
            reviewing.reject(&outcome, reason.as_deref()).await?;
        }
        ReviewOutcome::ChangesRequested { comments, stage } => {
            reviewing
                .request_changes(&outcome, comments, stage.as_deref())
                .await?;
        }
    }
    Ok(ExitCode::SUCCESS)
}

impl ReviewArgs {
    /// Whether a flag decides the review (otherwise it is shown, or asked interactively).
    fn decided(&self) -> bool {
        self.approve_all
            || !self.select.is_empty()
            || self.reject
            || !self.request_changes.is_empty()
    }
}

/// The decision: from the flags, else asked interactively; `None` when the run changed
/// nothing (said so).
fn choose_outcome(
    args: &ReviewArgs,
    set: &ChangeSet,
    short: &str,
    color: bool,
) -> anyhow::Result<Option<ReviewOutcome>> {
    Ok(Some(if args.approve_all {
        ReviewOutcome::Approved {
            selection: Selection::all(set),
            partial: false,
        }
    } else if !args.select.is_empty() {
        let selection = parse_selection(&args.select, set)?;
        ReviewOutcome::Approved {
            partial: selection != Selection::all(set),
            selection,
        }
    } else if args.reject {
        ReviewOutcome::Rejected { reason: None }
    } else if !args.request_changes.is_empty() {
        ReviewOutcome::ChangesRequested {
            comments: args
                .request_changes
                .iter()
                .map(|c| ReviewComment::general(c.clone()))
                .collect(),
            stage: args.stage.clone(),
        }
    } else {
        if set.files.is_empty() {
            println!("run {short} changed nothing.");
            return Ok(None);
        }
        if !std::io::stdin().is_terminal() {
            bail!(
                "stdin is not a terminal: use --approve-all, --select, --reject, --request-changes or --json"
            );
        }
        interactive(set, color)?
    }))
}

/// A decided review being carried out through the service, and printed.
struct Reviewing<'a> {
    service: &'a Arc<Service>,
    /// The run's full id.
    run: String,
    /// Its short id, for messages.
    short: String,
    /// Print JSON.
    json: bool,
}

impl Reviewing<'_> {
    /// The review op for `action` on the run.
    fn op(&self, action: ReviewAction) -> Op {
        Op::Review {
            run: self.run.clone(),
            action,
        }
    }

    /// Applies the approved files and hunks (rejecting the change when nothing is
    /// approved) and prints what happened to each file.
    async fn apply(
        &self,
        set: &ChangeSet,
        outcome: &ReviewOutcome,
        selection: &Selection,
    ) -> anyhow::Result<()> {
        if selection.is_empty(set) {
            self.service
                .call(self.op(ReviewAction::Reject {
                    comment: Some("nothing approved".into()),
                }))
                .await?;
            println!("nothing approved; the change was rejected.");
            return Ok(());
        }
        let out = self
            .service
            .call(self.op(ReviewAction::Apply {
                accept: Some(accepted(set, selection)),
            }))
            .await?;
        if self.json {
            println!(
                "{}",
                serde_json::to_string_pretty(
                    &serde_json::json!({"outcome": outcome, "applied": out["applied"]})
                )?
            );
        } else {
            let short = &self.short;
            let files = out["applied"]["files"]
                .as_array()
                .cloned()
                .unwrap_or_default();
            for f in &files {
                println!(
                    "{:>16}  {}",
                    f[1].as_str().unwrap_or_default(),
                    f[0].as_str().unwrap_or_default()
                );
            }
            println!(
                "applied run {short} ({} file(s)); `trellis undo {short}` reverses it.",
                files.len()
            );
        }
        Ok(())
    }

    /// Rejects the change and prints the recorded outcome.
    async fn reject(&self, outcome: &ReviewOutcome, reason: Option<&str>) -> anyhow::Result<()> {
        self.service
            .call(self.op(ReviewAction::Reject {
                comment: reason.map(str::to_owned),
            }))
            .await?;
        if self.json {
            println!("{}", serde_json::to_string_pretty(outcome)?);
        } else {
            println!("recorded: {}", outcome.code());
        }
        Ok(())
    }

    /// Requests changes with the comments and, when a stage runs again to address them,
    /// follows it to its end.
    async fn request_changes(
        &self,
        outcome: &ReviewOutcome,
        comments: &[ReviewComment],
        stage: Option<&str>,
    ) -> anyhow::Result<()> {
        let mut live = self.service.live();
        let out = self
            .service
            .call(Op::RequestChanges {
                run: self.run.clone(),
                node: stage.map(NodeId::new),
                artifact: None,
                feedback: feedback(comments),
            })
            .await?;
        if self.json {
            println!("{}", serde_json::to_string_pretty(&out)?);
        } else {
            println!("recorded: {}", outcome.code());
        }
        if let Some(stage) = out["revising"].as_str() {
            if !self.json {
                println!("running `{stage}` again with your comments…");
            }
            let id = RunId::from_string(self.run.clone());
            crate::follow::follow_run(self.service, &mut live, &id, self.json).await;
            if !self.json {
                let short = &self.short;
                let o = self.service.run_state(&id)?;
                println!(
                    "run {short} {}; review the new change set with `trellis review {short}`",
                    o.status
                );
            }
        }
        Ok(())
    }
}

/// The approved files of `set`, whole or by hunk, as the service takes them.
fn accepted(set: &ChangeSet, selection: &Selection) -> Vec<FileHunks> {
    set.files
        .iter()
        .filter_map(|f| match selection.for_file(f) {
            FileSelection::All => Some(FileHunks {
                file: f.path.clone(),
                hunks: None,
            }),
            FileSelection::None => None,
            FileSelection::Hunks(h) => Some(FileHunks {
                file: f.path.clone(),
                hunks: Some(h.into_iter().collect()),
            }),
        })
        .collect()
}

/// The review comments as one feedback text, one line per comment, with its file and hunk.
fn feedback(comments: &[ReviewComment]) -> String {
    let feedback: Vec<String> = comments
        .iter()
        .map(|c| match (&c.path, c.hunk) {
            (Some(p), Some(h)) => format!("{p} (hunk {h}): {}", c.body),
            (Some(p), None) => format!("{p}: {}", c.body),
            _ => c.body.clone(),
        })
        .collect();
    feedback.join("\n")
}

/// The review agent's verdict and the reviewers' comments, if there are any.
fn print_reviewers(shown: &Value) {
    if let Some(r) = shown["agentReview"].as_object() {
        println!(
            "review agent: {} ({}): {}",
            r.get("verdict").and_then(Value::as_str).unwrap_or("?"),
            r.get("status").and_then(Value::as_str).unwrap_or("?"),
            r.get("summary").and_then(Value::as_str).unwrap_or_default()
        );
    }
    let comments: Vec<review::AuthoredComment> =
        serde_json::from_value(shown["comments"].clone()).unwrap_or_default();
    if !comments.is_empty() {
        println!("comments ({}):", comments.len());
        for c in &comments {
            println!("  {} ({})", c.comment, c.author);
        }
        println!();
    }
}

fn parse_selection(specs: &[String], set: &ChangeSet) -> anyhow::Result<Selection> {
    let mut files = BTreeMap::new();
    for spec in specs {
        let (path, hunks) = match spec.rsplit_once(':') {
            Some((p, h)) if set.files.iter().any(|f| f.path == p) => (p, Some(h)),
            _ => (spec.as_str(), None),
        };
        let Some(file) = set.files.iter().find(|f| f.path == path) else {
            bail!(
                "`{path}` is not part of this change (changed files: {})",
                set.files
                    .iter()
                    .map(|f| f.path.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            );
        };
        let sel = match hunks {
            None => FileSelection::All,
            Some(h) => {
                let mut set = BTreeSet::new();
                for n in h.split(',').filter(|s| !s.is_empty()) {
                    let i: usize = n
                        .trim()
                        .parse()
                        .with_context(|| format!("bad hunk index `{n}` in `{spec}`"))?;
                    if i >= file.hunks.len() {
                        bail!(
                            "`{path}` has {} hunk(s) (0..{}); `{i}` does not exist",
                            file.hunks.len(),
                            file.hunks.len()
                        );
                    }
                    set.insert(i);
                }
                FileSelection::Hunks(set)
            }
        };
        files.insert(path.to_owned(), sel);
    }
    Ok(Selection { files })
}

struct Paint(bool);

impl Paint {
    fn c(&self, code: &str, s: &str) -> String {
        if self.0 {
            format!("\x1b[{code}m{s}\x1b[0m")
        } else {
            s.to_owned()
        }
    }
}

/// Prints one file's header and returns the painter.
fn print_file(f: &FileChange, p: &Paint) {
    println!(
        "{}",
        p.c(
            "1",
            &format!(
                "── {} ({:?}, +{} -{})",
                f.path, f.status, f.additions, f.deletions
            )
        )
    );
    if f.old_mode != f.new_mode && f.old_mode.is_some() && f.new_mode.is_some() {
        println!(
            "   mode {:o} → {:o}",
            f.old_mode.unwrap_or(0),
            f.new_mode.unwrap_or(0)
        );
    }
}

fn print_hunk(h: &review::Hunk, p: &Paint) {
    println!(
        "{}",
        p.c(
            "36",
            &format!(
                "@@ -{},{} +{},{} @@  (hunk {})",
                h.old_start, h.old_lines, h.new_start, h.new_lines, h.index
            )
        )
    );
    for l in &h.lines {
        match l.kind {
            LineKind::Added => println!("{}", p.c("32", &format!("+{}", l.text))),
            LineKind::Removed => println!("{}", p.c("31", &format!("-{}", l.text))),
            LineKind::Context => println!(" {}", l.text),
        }
    }
}

fn ask(prompt: &str) -> anyhow::Result<String> {
    print!("{prompt}");
    std::io::stdout().flush()?;
    let mut line = String::new();
    if std::io::stdin().lock().read_line(&mut line)? == 0 {
        anyhow::bail!("input ended before the review was finished; nothing was applied");
    }
    Ok(line.trim().to_lowercase())
}

/// Per-hunk prompts: y/n, a/d for the rest of the file, q to stop, c to request changes.
fn interactive(set: &ChangeSet, color: bool) -> anyhow::Result<ReviewOutcome> {
    let p = Paint(color);
    let mut files = BTreeMap::new();
    'files: for f in &set.files {
        print_file(f, &p);
        let mut approved = BTreeSet::new();
        let n = f.hunks.len().max(1);
        let mut i = 0;
        while i < n {
            if let Some(h) = f.hunks.get(i) {
                print_hunk(h, &p);
            }
            let answer = ask(&format!(
                "Apply this hunk ({}/{n}) [y,n,a=rest of file,d=skip rest of file,q=stop,c=request changes,?]? ",
                i + 1
            ))?;
            match answer.as_str() {
                "y" => {
                    approved.insert(i);
                }
                "n" => {}
                "a" => {
                    approved.extend(i..n);
                    break;
                }
                "d" => break,
                "q" => {
                    files.insert(f.path.clone(), FileSelection::Hunks(approved));
                    break 'files;
                }
                "c" => {
                    let body = ask("Comment for the agent: ")?;
                    let stage = ask("Stage to address it (empty: let the workflow decide): ")?;
                    return Ok(ReviewOutcome::ChangesRequested {
                        comments: vec![ReviewComment {
                            path: Some(f.path.clone()),
                            hunk: Some(i),
                            ..ReviewComment::general(body)
                        }],
                        stage: (!stage.is_empty()).then_some(stage),
                    });
                }
                _ => {
                    println!(
                        "y apply, n skip, a apply this and the rest of the file, d skip the rest of the file, q stop (skip everything left), c request changes"
                    );
                    continue;
                }
            }
            i += 1;
        }
        files.insert(f.path.clone(), FileSelection::Hunks(approved));
    }
    // Hunk-less files (mode-only changes) count as approved when index 0 was.
    let selection = Selection {
        files: files
            .into_iter()
            .map(|(k, v)| match v {
                FileSelection::Hunks(h)
                    if set.files.iter().any(|f| f.path == k && f.hunks.is_empty())
                        && h.contains(&0) =>
                {
                    (k, FileSelection::All)
                }
                other => (k, other),
            })
            .collect(),
    };
    Ok(ReviewOutcome::Approved {
        partial: selection != Selection::all(set),
        selection,
    })
}

/// `trellis undo`, through the runtime service.
pub async fn undo_with(service: &Arc<Service>, args: UndoArgs) -> anyhow::Result<ExitCode> {
    let out = service
        .call(Op::Review {
            run: args.run.clone(),
            action: ReviewAction::Undo,
        })
        .await?;
    let report = &out["undo"];
    if args.json {
        println!("{}", serde_json::to_string_pretty(report)?);
    } else {
        let files: Vec<&str> = report["files"]
            .as_array()
            .map(|a| a.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default();
        println!(
            "{} of run {}: restored {} file(s): {}",
            report["kind"].as_str().unwrap_or("undo"),
            RunId::from_string(report["run"].as_str().unwrap_or(&args.run)).short(),
            files.len(),
            files.join(", ")
        );
    }
    Ok(ExitCode::SUCCESS)
}

/// `trellis sandbox`.
pub async fn sandbox(
    cmd: SandboxCommand,
    repo: &Path,
    overrides: &[String],
    store: Arc<Store>,
) -> anyhow::Result<ExitCode> {
    match cmd {
        SandboxCommand::New { json } => {
            let run = RunId::new();
            let wt = RunWorktree::create(repo, &run)?;
            store.put_change_set(wt.record(now_ms()))?;
            if json {
                println!(
                    "{}",
                    serde_json::json!({"run": run, "worktree": wt.path, "branch": wt.branch, "base": wt.base})
                );
            } else {
                println!(
                    "{run}\n  worktree {}\n  branch   {}\n  base     {}",
                    wt.path.display(),
                    wt.branch,
                    wt.base
                );
            }
        }
        SandboxCommand::Tool {
            run,
            tool,
            args,
            yes,
        } => {
            let rec = store.change_set(&run)?;
            let wt = RunWorktree::from_record(&rec);
            // Section `tools` of the layered configuration (defaults when absent).
            let loaded = crate::workspace::load_config(repo, overrides)?;
            let config = Arc::new(trellis_core::tools_config(&loaded)?);
            let ws = Workspace::new(&wt.path, &config.secrets)?;
            let mut env = ToolEnv::new(
                ws,
                config.clone(),
                Arc::new(NonInteractive { approve: yes }),
            );
            env.run = Some(rec.run_id.clone());
            env.node = Some("sandbox".into());
            env.base_commit = Some(rec.base_commit.clone());
            let args: serde_json::Value =
                serde_json::from_str(&args).context("tool arguments must be JSON")?;
            let registry = Registry::builtin(&config.roles)
                .with_sink(Arc::new(trellis_tools::StoreSink(store.clone())));
            let result = registry
                .call(&env, "implementor", &tool, args, CancellationToken::new())
                .await;
            store.flush()?;
            println!("{}", result.content);
            return Ok(if result.is_error {
                ExitCode::FAILURE
            } else {
                ExitCode::SUCCESS
            });
        }
        SandboxCommand::Commit {
            run,
            stage,
            message,
        } => {
            let rec = store.change_set(&run)?;
            match RunWorktree::from_record(&rec).commit(&stage, &message)? {
                Some(c) => println!("{c}"),
                None => println!("nothing to commit"),
            }
        }
        SandboxCommand::Tools => {
            let registry = Registry::builtin(&BTreeMap::new());
            println!("{}", serde_json::to_string_pretty(&registry.specs())?);
        }
    }
    Ok(ExitCode::SUCCESS)
}
