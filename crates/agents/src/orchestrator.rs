//! The orchestrator (the layer above the workflows): one structured model call picks the workflow
//! for a request and decides each optional stage from its `reasoning_guidance`.
//!
//! - The workflows' `selection_criteria.applicable_patterns` (regular expressions matched
//!   against the request) and description words give a *prior*, shown to the model and used
//!   when its answer cannot be used.
//! - The answer's schema is built at run time: `workflow` is an `enum` of the discovered
//!   names and `stages[].stage` an `enum` of the optional stages, so a grammar-constrained
//!   model can only name real ones.
//! - `--workflow` fixes the workflow (the model then only decides stages); `--include` /
//!   `--skip` fix stages (no model call at all when nothing is left to decide).

use std::collections::BTreeMap;
use std::path::Path;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;
use trellis_llm::{
    ChatRequest, Message, ModelProvider, ResponseFormat, StructuredOptions, complete_structured_as,
};
use trellis_workflow::{Decision, Decisions, Workflow};

use crate::error::{Error, Result};

/// What the orchestrator knows about the repository.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ProjectContext {
    /// Languages by file count, most files first.
    pub languages: Vec<(String, usize)>,
    /// Files seen (capped walk).
    pub files: usize,
    /// Markdown / reStructuredText / text documents.
    pub documents: usize,
    /// Whether the request or the repository touches security-sensitive areas
    /// (authentication, tokens, cryptography, secrets, permissions).
    pub security_sensitive: bool,
    /// The project's instructions for agents (`AGENTS.md` …), already cut to the
    /// orchestrator's budget; empty when there are none.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub instructions: String,
}

const SENSITIVE: &[&str] = &[
    "auth",
    "jwt",
    "token",
    "password",
    "secret",
    "crypto",
    "oauth",
    "login",
    "session",
    "permission",
    "credential",
    "encrypt",
    "signature",
    "cve",
];

const SKIP_DIRS: &[&str] = &[
    ".git",
    ".trellis",
    "target",
    "node_modules",
    "dist",
    "build",
    "__pycache__",
    ".venv",
    "venv",
    "vendor",
];

fn language_of(ext: &str) -> Option<&'static str> {
    Some(match ext {
        "rs" => "Rust",
        "py" => "Python",
        "js" | "mjs" | "cjs" | "jsx" => "JavaScript",
        "ts" | "tsx" => "TypeScript",
        "go" => "Go",
        "java" => "Java",
        "c" | "h" => "C",
        "cc" | "cpp" | "cxx" | "hpp" | "hh" => "C++",
        "rb" => "Ruby",
        "kt" => "Kotlin",
        "swift" => "Swift",
        "cs" => "C#",
        "php" => "PHP",
        "sh" => "Shell",
        _ => return None,
    })
}

impl ProjectContext {
    /// Looks at up to 20 000 files of `repo` (skipping VCS, build and dependency
    /// directories) and at the request.
    pub fn detect(repo: &Path, request: &str) -> Self {
        let mut langs: BTreeMap<&'static str, usize> = BTreeMap::new();
        let mut ctx = ProjectContext::default();
        let mut sensitive_paths = 0usize;
        let mut stack = vec![repo.to_path_buf()];
        while let Some(dir) = stack.pop() {
            let Ok(entries) = std::fs::read_dir(&dir) else {
                continue;
            };
            for e in entries.flatten() {
                if ctx.files >= 20_000 {
                    break;
                }
                let name = e.file_name().to_string_lossy().to_lowercase();
                let Ok(ft) = e.file_type() else { continue };
                if ft.is_dir() {
                    if !SKIP_DIRS.contains(&name.as_str()) && !name.starts_with('.') {
                        stack.push(e.path());
                    }
                    continue;
                }
                ctx.files += 1;
                if SENSITIVE.iter().any(|w| name.contains(w)) {
                    sensitive_paths += 1;
                }
                let ext = name.rsplit_once('.').map(|(_, x)| x).unwrap_or_default();
                if matches!(ext, "md" | "rst" | "txt" | "adoc") {
                    ctx.documents += 1;
                } else if let Some(l) = language_of(ext) {
                    *langs.entry(l).or_default() += 1;
                }
            }
        }
        let mut languages: Vec<(String, usize)> =
            langs.into_iter().map(|(l, n)| (l.to_owned(), n)).collect();
        languages.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
        ctx.languages = languages;
        let req = request.to_lowercase();
        ctx.security_sensitive = SENSITIVE.iter().any(|w| req.contains(w)) || sensitive_paths > 0;
        ctx
    }

    /// A short description for prompts.
    pub fn describe(&self) -> String {
        let langs: Vec<String> = self
            .languages
            .iter()
            .take(5)
            .map(|(l, n)| format!("{l} ({n} files)"))
            .collect();
        format!(
            "languages: {}; files: {}; documents: {}; security_sensitive: {}",
            if langs.is_empty() {
                "none detected".to_owned()
            } else {
                langs.join(", ")
            },
            self.files,
            self.documents,
            self.security_sensitive
        )
    }
}

/// The model's answer.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct OrchestratorAnswer {
    /// Why this workflow and these stages.
    pub reasoning: String,
    /// The chosen workflow.
    pub workflow: String,
    /// A decision for each optional stage of the chosen workflow.
    #[serde(default)]
    pub stages: Vec<StageChoice>,
}

/// One optional stage's decision.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct StageChoice {
    /// The stage name.
    pub stage: String,
    /// Whether to run it.
    pub include: bool,
    /// Why.
    #[serde(default)]
    pub reason: String,
}

/// Who decided something.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DecidedBy {
    /// The model.
    Model,
    /// The command line (`--workflow`, `--include`, `--skip`).
    User,
    /// The selection prior or a default, because the model's answer could not be used.
    Default,
    /// The workflows' selection patterns: the model chose a workflow whose patterns do not
    /// match the request while another of the same kind (`workflow_type`) has patterns that do.
    Patterns,
}

/// One optional stage's final decision.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct StageDecision {
    /// The stage name.
    pub stage: String,
    /// Whether it runs.
    pub include: bool,
    /// Why.
    pub reason: String,
    /// Who decided.
    pub by: DecidedBy,
}

/// The orchestrator's result: stored with the run and shown to the user.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Orchestration {
    /// The workflow.
    pub workflow: String,
    /// Who chose it.
    pub workflow_by: DecidedBy,
    /// The model's reasoning (empty when it was not asked).
    pub reasoning: String,
    /// Optional-stage decisions.
    pub stages: Vec<StageDecision>,
    /// The selection prior: workflows by score.
    pub prior: Vec<(String, f32)>,
    /// The project context the decision used.
    pub project: ProjectContext,
    /// Repairs, fallbacks and other remarks.
    pub notes: Vec<String>,
}

impl Orchestration {
    /// The stage decisions for plan assembly.
    pub fn decisions(&self) -> Decisions {
        let mut d = Decisions::default();
        for s in &self.stages {
            d.set(
                s.stage.clone(),
                if s.include {
                    Decision::Include
                } else {
                    Decision::Skip
                },
                Some(format!(
                    "{} ({})",
                    s.reason,
                    match s.by {
                        DecidedBy::Model => "orchestrator",
                        DecidedBy::User => "command line",
                        DecidedBy::Default => "default",
                        DecidedBy::Patterns => "selection patterns",
                    }
                )),
            );
        }
        d
    }
}

/// What the user fixed on the command line.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Overrides {
    /// `--workflow`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workflow: Option<String>,
    /// `--include` (stage ids or names).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub include: Vec<String>,
    /// `--skip`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub skip: Vec<String>,
}

/// The case-insensitive regex of an `applicable_patterns` entry (`None`: it does not
/// compile), compiled once per process: every run's planning asks, and compiling the
/// workflows' patterns each time was a tenth of the CPU of a small run
/// (docs/benchmarks.md).
fn pattern(p: &str) -> Option<std::sync::Arc<regex::Regex>> {
    /// Patterns kept (the workflows' own: a few dozen).
    const KEEP: usize = 512;
    // Shared, not cloned: a cloned `Regex` starts with an empty match cache, which it
    // allocates again at its first match (most of what this function cost per run).
    type Compiled = std::collections::HashMap<String, Option<std::sync::Arc<regex::Regex>>>;
    static COMPILED: std::sync::LazyLock<std::sync::Mutex<Compiled>> =
        std::sync::LazyLock::new(Default::default);
    let mut compiled = COMPILED.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(r) = compiled.get(p) {
        return r.clone();
    }
    let r = regex::RegexBuilder::new(p)
        .case_insensitive(true)
        .build()
        .ok()
        .map(std::sync::Arc::new);
    if compiled.len() >= KEEP {
        compiled.clear();
    }
    compiled.insert(p.to_owned(), r.clone());
    r
}

/// The prior of each workflow for `request`: 1 per matching `applicable_patterns` regex plus
/// a small share for words of the name and description found in the request.
pub fn prior(workflows: &[&Workflow], request: &str) -> Vec<(String, f32)> {
    let req = request.to_lowercase();
    let words: Vec<&str> = req
        .split(|c: char| !c.is_alphanumeric())
        .filter(|w| w.len() > 3)
        .collect();
    let mut out: Vec<(String, f32)> = workflows
        .iter()
        .map(|w| {
            let m = &w.metadata;
            let mut score = 0.0f32;
            if let Some(sc) = &m.selection_criteria {
                for p in &sc.applicable_patterns {
                    if pattern(p).is_some_and(|r| r.is_match(request)) {
                        score += 1.0;
                    }
                }
            }
            let text = format!(
                "{} {}",
                m.name.replace('_', " "),
                m.description.as_deref().unwrap_or_default()
            )
            .to_lowercase();
            let hits = words.iter().filter(|w| text.contains(**w)).count();
            score += 0.2 * hits.min(3) as f32;
            (m.name.clone(), score)
        })
        .collect();
    out.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
    out
}

fn optional_stages(w: &Workflow) -> Vec<&trellis_workflow::Stage> {
    w.stages.iter().filter(|s| !s.required).collect()
}

fn matches_stage(s: &trellis_workflow::Stage, key: &str) -> bool {
    s.name.value == key || s.stage_id.value.as_str() == key
}

/// The answer's JSON Schema with the names it may use.
fn answer_schema(workflows: &[&str], stages: &[String]) -> Value {
    let stage = if stages.is_empty() {
        json!({ "type": "string" })
    } else {
        json!({ "type": "string", "enum": stages })
    };
    json!({
        "type": "object",
        "properties": {
            "reasoning": { "type": "string", "maxLength": 240 },
            "workflow": { "type": "string", "enum": workflows },
            "stages": {
                "type": "array",
                "maxItems": stages.len().max(1),
                "items": {
                    "type": "object",
                    "properties": {
                        "stage": stage,
                        "include": { "type": "boolean" },
                        "reason": { "type": "string", "maxLength": 120 }
                    },
                    "required": ["stage", "include", "reason"]
                }
            }
        },
        "required": ["reasoning", "workflow", "stages"]
    })
}

fn prompt(
    workflows: &[&Workflow],
    prior: &[(String, f32)],
    project: &ProjectContext,
    request: &str,
    fixed: Option<&str>,
) -> Vec<Message> {
    let mut s = String::from(
        "## ROLE\nYou are the orchestrator of a multi-agent coding system.\n\n\
         ## PRIMARY OBJECTIVE\nPick the workflow that fits the user's request and decide, for each \
         optional stage of that workflow, whether to run it.\n\n\
         ## PROCESS\n1. Read the request and the project context.\n\
         2. Compare the request with each workflow's description. A workflow's prior counts \
         its patterns that match the request: choose the workflow with the highest prior unless \
         its description clearly does not fit the request.\n\
         3. For each optional stage of the chosen workflow, follow its guidance.\n\n## OUTPUT FORMAT\nOnly a JSON object: {\"reasoning\": \"…\", \"workflow\": \
         \"<name>\", \"stages\": [{\"stage\": \"<optional stage name>\", \"include\": true|false, \
         \"reason\": \"…\"}]}\n\n## CONSTRAINTS\n- Use only the workflow and stage names listed.\n\
         - Give one entry per optional stage of the chosen workflow.\n",
    );
    if let Some(f) = fixed {
        s.push_str(&format!(
            "- The user chose the workflow `{f}`; answer with it.\n"
        ));
    }
    let mut w_text = String::from("## WORKFLOWS\n");
    for w in workflows {
        let m = &w.metadata;
        let score = prior
            .iter()
            .find(|(n, _)| *n == m.name)
            .map_or(0.0, |p| p.1);
        let matched = if score >= 1.0 {
            ": its patterns match the request"
        } else {
            ""
        };
        w_text.push_str(&format!(
            "- {} ({}): {} [prior {score:.1}{matched}]\n",
            m.name,
            m.workflow_type.as_deref().unwrap_or("-"),
            m.description.as_deref().unwrap_or("")
        ));
        for st in optional_stages(w) {
            w_text.push_str(&format!(
                "  - optional stage {}: {}\n",
                st.name.value,
                st.reasoning_guidance
                    .as_deref()
                    .unwrap_or("no guidance")
                    .trim()
                    .replace('\n', " ")
            ));
        }
    }
    vec![
        Message::system(s),
        Message::user(format!(
            "## PROJECT CONTEXT\n{}{}",
            project.describe(),
            if project.instructions.is_empty() {
                String::new()
            } else {
                format!(
                    "\nThe project's instructions for agents:\n{}",
                    project.instructions.trim_end()
                )
            }
        )),
        Message::user(w_text),
        Message::user(format!("## REQUEST\n{}", request.trim())),
    ]
}

/// Decides the workflow and optional stages for `request`.
pub async fn orchestrate(
    provider: &dyn ModelProvider,
    workflows: &[&Workflow],
    request: &str,
    project: ProjectContext,
    overrides: &Overrides,
    cancel: CancellationToken,
) -> Result<Orchestration> {
    if workflows.is_empty() {
        return Err(Error::Orchestrator(
            "no workflows are available (see `trellis workflows list`)".into(),
        ));
    }
    let prior = prior(workflows, request);
    let mut notes = Vec::new();
    let fixed = fixed_workflow(workflows, overrides)?;
    // Nothing to ask: the workflow is fixed and every optional stage is decided.
    if let Some(w) = fixed
        && optional_stages(w)
            .iter()
            .all(|s| user_decision(overrides, s).is_some())
    {
        return Ok(Orchestration {
            workflow: w.metadata.name.clone(),
            workflow_by: DecidedBy::User,
            reasoning: String::new(),
            stages: optional_stages(w)
                .into_iter()
                .filter_map(|s| user_decision(overrides, s))
                .collect(),
            prior,
            project,
            notes,
        });
    }
    let request_msg = decision_request(workflows, &prior, &project, request, fixed);
    let answer = ask_model(provider, request_msg, cancel, &mut notes).await?;
    let (workflow, workflow_by) =
        answered_workflow(workflows, &prior, fixed, answer.as_ref(), &mut notes);
    let (workflow, workflow_by) = match (workflow_by, by_patterns(workflows, &prior, workflow)) {
        (DecidedBy::Model, Some(matched)) => {
            notes.push(format!(
                "the model chose `{}`, whose selection patterns do not match the request; \
                 `{}`'s do, and it is of the same kind: `{}` runs",
                workflow.metadata.name, matched.metadata.name, matched.metadata.name
            ));
            (matched, DecidedBy::Patterns)
        }
        _ => (workflow, workflow_by),
    };
    let stages = stage_decisions(workflow, overrides, answer.as_ref());
    Ok(Orchestration {
        workflow: workflow.metadata.name.clone(),
        workflow_by,
        reasoning: answer.map(|a| a.reasoning).unwrap_or_default(),
        stages,
        prior,
        project,
        notes,
    })
}

/// The workflow the user fixed with `--workflow`, if any; an unknown name is an error that
/// suggests the nearest one.
fn fixed_workflow<'a>(
    workflows: &[&'a Workflow],
    overrides: &Overrides,
) -> Result<Option<&'a Workflow>> {
    let Some(name) = &overrides.workflow else {
        return Ok(None);
    };
    workflows
        .iter()
        .find(|w| w.metadata.name == *name)
        .copied()
        .map(Some)
        .ok_or_else(|| {
            let names = workflows.iter().map(|w| w.metadata.name.as_str());
            Error::Orchestrator(format!(
                "no workflow `{name}`{}; see `trellis workflows list`",
                trellis_graph::nearest(name, names)
                    .map(|n| format!(" (did you mean `{n}`?)"))
                    .unwrap_or_default()
            ))
        })
}

/// The user's decision of stage `s` with `--include` or `--skip`, if any (`--include` first).
fn user_decision(overrides: &Overrides, s: &trellis_workflow::Stage) -> Option<StageDecision> {
    let hit = |keys: &[String]| keys.iter().any(|k| matches_stage(s, k));
    let (include, flag) = if hit(&overrides.include) {
        (true, "--include")
    } else if hit(&overrides.skip) {
        (false, "--skip")
    } else {
        return None;
    };
    Some(StageDecision {
        stage: s.name.value.clone(),
        include,
        reason: format!("{flag} on the command line"),
        by: DecidedBy::User,
    })
}

/// The model request: the workflows it may choose (the fixed one, else all) best prior
/// first, and an answer schema whose names are those workflows and their optional stages.
fn decision_request(
    workflows: &[&Workflow],
    prior: &[(String, f32)],
    project: &ProjectContext,
    request: &str,
    fixed: Option<&Workflow>,
) -> ChatRequest {
    let names: Vec<&str> = match fixed {
        Some(w) => vec![w.metadata.name.as_str()],
        None => workflows.iter().map(|w| w.metadata.name.as_str()).collect(),
    };
    let mut stage_names: Vec<String> = workflows
        .iter()
        .filter(|w| names.contains(&w.metadata.name.as_str()))
        .flat_map(|w| optional_stages(w).into_iter().map(|s| s.name.value.clone()))
        .collect();
    stage_names.sort();
    stage_names.dedup();
    // Listed best prior first: a small model leans towards what it reads first, so let that
    // be what the patterns point to (measured: docs/eval.md, "The orchestrator's choice").
    let shown: Vec<&Workflow> = prior
        .iter()
        .filter_map(|(name, _)| workflows.iter().find(|w| w.metadata.name == *name))
        .filter(|w| names.contains(&w.metadata.name.as_str()))
        .copied()
        .collect();
    let mut request_msg = ChatRequest::new(prompt(
        &shown,
        prior,
        project,
        request,
        fixed.map(|w| w.metadata.name.as_str()),
    ));
    // Bounded strings and room for every field: a small model that loops inside a string
    // must still reach the closing fields before `max_tokens`. A little temperature keeps
    // greedy decoding out of repetition loops.
    request_msg.temperature = Some(0.2);
    request_msg.max_tokens = Some(1024);
    request_msg.response_format = Some(ResponseFormat {
        name: "orchestrator_decision".into(),
        schema: answer_schema(&names, &stage_names),
    });
    request_msg
}

/// Asks the model; an answer that cannot be used is noted and `None` (cancellation and an
/// exhausted budget are errors). Repairs made to the answer are noted.
async fn ask_model(
    provider: &dyn ModelProvider,
    request: ChatRequest,
    cancel: CancellationToken,
    notes: &mut Vec<String>,
) -> Result<Option<OrchestratorAnswer>> {
    match complete_structured_as::<OrchestratorAnswer>(
        provider,
        request,
        StructuredOptions::default(),
        cancel,
    )
    .await
    {
        Ok(a) => {
            notes.extend(a.repairs.iter().map(|r| format!("repaired: {r:?}")));
            Ok(Some(a.value))
        }
        Err(trellis_llm::Error::Cancelled) => Err(Error::Cancelled),
        Err(trellis_llm::Error::Budget(e)) => Err(Error::Model(e.into())),
        Err(e) => {
            notes.push(format!("the model's answer could not be used: {e}"));
            Ok(None)
        }
    }
}

/// The workflow: the user's, else the model's if it names one (or nearly), else the
/// prior's best.
fn answered_workflow<'a>(
    workflows: &[&'a Workflow],
    prior: &[(String, f32)],
    fixed: Option<&'a Workflow>,
    answer: Option<&OrchestratorAnswer>,
    notes: &mut Vec<String>,
) -> (&'a Workflow, DecidedBy) {
    let a = match (fixed, answer) {
        (Some(w), _) => return (w, DecidedBy::User),
        (None, None) => return (best_prior(workflows, prior), DecidedBy::Default),
        (None, Some(a)) => a,
    };
    if let Some(w) = workflows.iter().find(|w| w.metadata.name == a.workflow) {
        return (*w, DecidedBy::Model);
    }
    let near = trellis_graph::nearest(
        &a.workflow,
        workflows.iter().map(|w| w.metadata.name.as_str()),
    )
    .and_then(|n| workflows.iter().find(|w| w.metadata.name == n));
    match near {
        Some(w) => {
            notes.push(format!(
                "the model named `{}`; taken as `{}`",
                a.workflow, w.metadata.name
            ));
            (*w, DecidedBy::Model)
        }
        None => {
            notes.push(format!(
                "the model named an unknown workflow `{}`; used the prior's best",
                a.workflow
            ));
            (best_prior(workflows, prior), DecidedBy::Default)
        }
    }
}

/// Each optional stage of `workflow`: the user's decision, else the model's, else skipped.
fn stage_decisions(
    workflow: &Workflow,
    overrides: &Overrides,
    answer: Option<&OrchestratorAnswer>,
) -> Vec<StageDecision> {
    let mut stages = Vec::new();
    for s in optional_stages(workflow) {
        if let Some(d) = user_decision(overrides, s) {
            stages.push(d);
            continue;
        }
        let choice = answer.and_then(|a| a.stages.iter().find(|c| matches_stage(s, &c.stage)));
        stages.push(match choice {
            Some(c) => StageDecision {
                stage: s.name.value.clone(),
                include: c.include,
                reason: if c.reason.trim().is_empty() {
                    "no reason given".into()
                } else {
                    c.reason.trim().to_owned()
                },
                by: DecidedBy::Model,
            },
            None => StageDecision {
                stage: s.name.value.clone(),
                include: false,
                reason: "the model gave no decision; optional stages default to skipped".into(),
                by: DecidedBy::Default,
            },
        });
    }
    stages
}

/// The workflow the selection patterns choose over `chosen`: the best prior among those
/// whose patterns match the request, when `chosen`'s match nothing and both are of the same
/// `workflow_type` (the model tells a discussion from an implementation; the patterns, which
/// the workflows' authors wrote for this, tell which implementation). A small model answers
/// with the workflow it has seen most; a request that says "fix" goes to the fix workflow.
fn by_patterns<'a>(
    workflows: &[&'a Workflow],
    prior: &[(String, f32)],
    chosen: &Workflow,
) -> Option<&'a Workflow> {
    let score = |name: &str| prior.iter().find(|(n, _)| n == name).map_or(0.0, |p| p.1);
    if score(&chosen.metadata.name) >= 1.0 {
        return None;
    }
    let kind = |w: &Workflow| w.metadata.workflow_type.clone();
    prior
        .iter()
        .filter(|(_, s)| *s >= 1.0)
        .filter_map(|(n, _)| workflows.iter().find(|w| w.metadata.name == *n))
        .find(|w| kind(w).is_some() && kind(w) == kind(chosen))
        .copied()
}

fn best_prior<'a>(workflows: &[&'a Workflow], prior: &[(String, f32)]) -> &'a Workflow {
    prior
        .first()
        .and_then(|(n, _)| workflows.iter().find(|w| w.metadata.name == *n))
        .copied()
        .unwrap_or(workflows[0])
}
