//! Prompts with a fixed structure: a system prompt of ROLE, PRIMARY OBJECTIVE, PROCESS,
//! TOOLS AVAILABLE, OUTPUT FORMAT and CONSTRAINTS, then context messages separated by kind
//! (project, retrieved codebase, enriched context, earlier stages, user messages, task) so a
//! model attends to each separately and each has its own budget.

use serde_json::Value;
use trellis_llm::Message;
use trellis_llm::structured::schema_of;
use trellis_protocol::canonical::to_canonical_string;

use crate::output::StageReport;
use crate::roles::{AnswerFormat, EditFormat, FAILED_MARK, RoleSpec};

/// One kind of context message.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum ContextKind {
    /// Languages, layout, the test command.
    Project,
    /// Context retrieved before the run (`retrieval_context`).
    Codebase,
    /// Context added by adaptive retrieval after a failure (`enriched_context`).
    Enriched,
    /// Outputs of stages that ran before.
    EarlierStages,
    /// Messages the user sent to the run.
    UserMessages,
    /// The task and the stage's guidance.
    Task,
}

impl ContextKind {
    /// The heading of the message.
    pub fn heading(&self) -> &'static str {
        match self {
            ContextKind::Project => "## PROJECT CONTEXT",
            ContextKind::Codebase => "## RELEVANT CODEBASE",
            ContextKind::Enriched => "## ENRICHED CONTEXT (retrieved after a failure)",
            ContextKind::EarlierStages => "## EARLIER STAGES",
            ContextKind::UserMessages => "## MESSAGES FROM THE USER",
            ContextKind::Task => "## TASK",
        }
    }
}

/// The system prompt of `role`, offering `tools` (name, description). A role with
/// `edit_format: blocks` is not offered the editing tools: its answers carry its edits as
/// blocks ([`BLOCKS_INSTRUCTION`]).
pub fn system_prompt(role: &RoleSpec, tools: &[(String, String)]) -> String {
    if role.edit_format == EditFormat::Blocks {
        let offered: Vec<(String, String)> = tools
            .iter()
            .filter(|(name, _)| role.offers(name))
            .cloned()
            .collect();
        return prompt_with(role, &offered, Some(BLOCKS_INSTRUCTION));
    }
    if role.answer == AnswerFormat::Prose {
        return prompt_with(role, tools, Some(&prose_instruction()));
    }
    prompt_with(role, tools, Some(&output_instruction()))
}

/// How an `answer: prose` role answers.
pub fn prose_instruction() -> String {
    format!(
        "When you are done (no more tool calls), answer the request directly in plain prose \
         (markdown allowed, no JSON): your answer is what the user reads. Name the files, \
         functions and sections your answer rests on. If you could not answer the request at \
         all, start with `{FAILED_MARK}` and say why in one sentence."
    )
}

/// How a `blocks` role answers.
pub const BLOCKS_INSTRUCTION: &str = "Answer with one sentence saying what is wrong and how \
you fix it, then the change as one or more edit blocks. The SEARCH part of a block is the few \
whole lines you change, with a line or two around them so that they are found only once (not \
a whole function), copied character for character with their indentation; the REPLACE part is \
the lines that take their place. Change only what the \
task needs. If the change cannot be made from the code you were shown, say why in one \
sentence and write no block. A block starts with the file's path on a line of its own, as in \
this example for a file `shapes/area.py`:

shapes/area.py
<<<<<<< SEARCH
def rectangle(width, height):
    return width + height
=======
def rectangle(width, height):
    return width * height
>>>>>>> REPLACE";

/// The system prompt of a conversational role (channel sessions): like [`system_prompt`],
/// answering in prose instead of a typed report.
pub fn chat_prompt(role: &RoleSpec, tools: &[(String, String)]) -> String {
    prompt_with(role, tools, None)
}

fn prompt_with(role: &RoleSpec, tools: &[(String, String)], output: Option<&str>) -> String {
    let mut s = String::new();
    s.push_str("## ROLE\n");
    s.push_str(role.role.trim());
    s.push_str("\n\n## PRIMARY OBJECTIVE\n");
    s.push_str(role.objective.trim());
    if !role.process.is_empty() {
        s.push_str("\n\n## PROCESS\n");
        for (i, step) in role.process.iter().enumerate() {
            s.push_str(&format!("{}. {}\n", i + 1, step.trim()));
        }
    }
    s.push_str("\n## TOOLS AVAILABLE\n");
    if tools.is_empty() {
        s.push_str("None: work from the context you are given.\n");
    } else {
        for (name, description) in tools {
            let first = description.lines().next().unwrap_or_default();
            s.push_str(&format!("- {name}: {first}\n"));
        }
    }
    if let Some(output) = output {
        s.push_str("\n## OUTPUT FORMAT\n");
        s.push_str(output);
    }
    if !role.constraints.is_empty() {
        s.push_str("\n\n## CONSTRAINTS\n");
        for c in &role.constraints {
            s.push_str(&format!("- {}\n", c.trim()));
        }
    }
    s
}

/// How the final answer must look.
pub fn output_instruction() -> String {
    OUTPUT_INSTRUCTION.clone()
}

static OUTPUT_INSTRUCTION: std::sync::LazyLock<String> = std::sync::LazyLock::new(|| {
    format!(
        "When you are done (no more tool calls), answer with only a JSON object — no prose, no \
         markdown fence — matching this JSON Schema:\n{}\n`output` is your result for the user \
         (summary of the change, the analysis, or the test report); `findings` lists problems \
         found, one per entry.",
        to_canonical_string(&schema_of::<StageReport>()).unwrap_or_default()
    )
});

/// The stage's `failure_criteria` in words. The workflow's keys are the engine's, not the
/// model's: `agent_defined: true` means the agent's own report decides, which a
/// model is told as such; echoing the raw object made models quote "the `agent_defined`
/// condition" back to the user.
fn failure_text(criteria: &Value, prose: bool) -> Option<String> {
    let Value::Object(map) = criteria else {
        return None;
    };
    let mut lines = Vec::new();
    // Sorted, so the prompt is the same whatever the map's order.
    let mut entries: Vec<(&String, &Value)> = map.iter().collect();
    entries.sort_by(|a, b| a.0.cmp(b.0));
    for (key, value) in entries {
        match (key.as_str(), value) {
            // A prose role is told how to fail in its OUTPUT FORMAT (`FAILED:`).
            ("agent_defined", Value::Bool(true)) if prose => {}
            ("agent_defined", Value::Bool(true)) => lines.push(
                "You judge whether this stage failed: set `failure` to true in your report \
                 only if you could not do the stage's work."
                    .to_string(),
            ),
            ("agent_defined", _) => {}
            (key, Value::String(text)) => lines.push(format!(
                "The stage fails when {}: {text}",
                key.replace('_', " ")
            )),
            (key, other) => lines.push(format!(
                "The stage fails when {}: {}",
                key.replace('_', " "),
                to_canonical_string(other).unwrap_or_default()
            )),
        }
    }
    (!lines.is_empty()).then(|| lines.join("\n") + "\n")
}

/// Context messages in a fixed order, skipping empty ones.
pub fn context_messages(parts: &[(ContextKind, String)]) -> Vec<Message> {
    let mut parts: Vec<&(ContextKind, String)> =
        parts.iter().filter(|(_, t)| !t.trim().is_empty()).collect();
    parts.sort_by(|a, b| a.0.cmp(&b.0));
    parts
        .into_iter()
        .map(|(k, t)| Message::user(format!("{}\n{}", k.heading(), t.trim())))
        .collect()
}

/// The TASK message of a stage for `role`: the request, the stage and its guidance, and the
/// attempt. The stage's `retrieval_guidance` is the retrieval agent's (what context to
/// gather), not shown here: models echoed its lines ("Retrieval strategy: document_domain",
/// "No MCP tools available") back as their answer.
pub fn task_text(
    role: &RoleSpec,
    task: &str,
    stage: &Value,
    attempt: u32,
    previous: Option<&Value>,
) -> String {
    let mut s = format!("Request: {}\n", task.trim());
    // A prose answer is the user's to read: the stage's name and the failure rule (told in
    // OUTPUT FORMAT) are left out, or a small model answers about them ("The stage
    // `architectural_analysis` did not fail.") instead of the request.
    let prose = role.answer == AnswerFormat::Prose;
    if !prose {
        push_stage_line(&mut s, stage);
    }
    push_guidance(&mut s, stage, prose);
    push_artifacts(&mut s, stage);
    push_work_item(&mut s, stage);
    push_work_under_review(&mut s, stage);
    push_conflict(&mut s, stage);
    push_children(&mut s, stage);
    push_feedback(&mut s, stage);
    if attempt > 1 {
        push_attempt(&mut s, attempt, previous);
    }
    s
}

/// The string field `k` of the stage's input (empty when absent).
fn stage_field<'a>(stage: &'a Value, k: &str) -> &'a str {
    stage.get(k).and_then(Value::as_str).unwrap_or_default()
}

/// The stage's name and description.
fn push_stage_line(s: &mut String, stage: &Value) {
    s.push_str(&format!("Stage: {}", stage_field(stage, "stage_name")));
    if !stage_field(stage, "stage_description").is_empty() {
        s.push_str(&format!(" — {}", stage_field(stage, "stage_description")));
    }
    s.push('\n');
}

/// The stage's reasoning guidance and its failure criteria in words.
fn push_guidance(s: &mut String, stage: &Value, prose: bool) {
    let guidance = stage_field(stage, "reasoning_guidance");
    if !guidance.trim().is_empty() {
        s.push_str(&format!("Guidance: {}\n", guidance.trim()));
    }
    if let Some(fc) = stage
        .get("failure_criteria")
        .and_then(|c| failure_text(c, prose))
    {
        s.push_str(&fc);
    }
}

/// The artifacts the stage produces (`produces`, `also_produces`) and how to deliver them.
fn push_artifacts(s: &mut String, stage: &Value) {
    let mut produces: Vec<&str> = stage
        .get("produces")
        .and_then(Value::as_str)
        .into_iter()
        .collect();
    if let Some(Value::Array(more)) = stage.get("also_produces") {
        produces.extend(more.iter().filter_map(Value::as_str));
    }
    match produces.as_slice() {
        [] => {}
        [kind] => s.push_str(&format!(
            "This stage produces the `{kind}` artifact: submit it with the stage's submit tool \
             (when you have none, your final answer is the artifact). The user may approve it \
             or send it back with feedback.\n"
        )),
        kinds => s.push_str(&format!(
            "This stage produces the artifacts {}: your final answer holds each of them as a \
             section of its own, in this order, each starting with its `# ` title line ({}).\n",
            kinds
                .iter()
                .map(|k| format!("`{k}`"))
                .collect::<Vec<_>>()
                .join(", "),
            kinds
                .iter()
                .map(|k| {
                    let title = k
                        .parse::<trellis_workflow::artifacts::ArtifactKind>()
                        .map_or(*k, |k| k.title());
                    format!("`# {title}`")
                })
                .collect::<Vec<_>>()
                .join(", ")
        )),
    }
}

/// The stage's work item, cut to its `item_max_chars`.
fn push_work_item(s: &mut String, stage: &Value) {
    if let Some(item) = stage.get("item").filter(|v| !v.is_null()) {
        let item = match item {
            Value::String(t) => t.clone(),
            other => to_canonical_string(other).unwrap_or_default(),
        };
        // A stage may say how much of its item to show (`item_max_chars`, default 4000).
        let max = stage
            .get("item_max_chars")
            .and_then(Value::as_u64)
            .map_or(4000, |m| usize::try_from(m).unwrap_or(usize::MAX));
        s.push_str(&format!("Your work item: {}\n", truncate(&item, max)));
    }
}

/// A reviewer's subject: the author's report and its diff against the run branch.
fn push_work_under_review(s: &mut String, stage: &Value) {
    if let Some(work) = stage.get("work").filter(|v| !v.is_null()) {
        let text = work
            .get("output")
            .and_then(Value::as_str)
            .unwrap_or_default();
        s.push_str(&format!(
            "The work under review (its author's report): {}\n",
            truncate(text.trim(), 3000)
        ));
        if let Some(diff) = stage.get("work_diff").and_then(Value::as_str) {
            s.push_str(&format!(
                "Its changes, as a diff against the run branch:\n```diff\n{}\n```\n",
                truncate(diff, 12000)
            ));
        }
    }
}

/// A merge agent's conflict: whose work, into what, in which files, and how to resolve it.
fn push_conflict(s: &mut String, stage: &Value) {
    if let Some(conflict) = stage.get("conflict").filter(|v| !v.is_null()) {
        let files: Vec<&str> = conflict["files"]
            .as_array()
            .map(|f| f.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default();
        s.push_str(&format!(
            "Merge conflict to resolve: merging the work of `{}` into {} conflicts in {}. \
             Your workspace is that merge: those files hold git's conflict markers \
             (`<<<<<<<`, `=======`, `>>>>>>>`). Edit each file so it keeps the intent of both \
             sides, remove every marker, and answer with one line saying how you resolved them \
             (your merge strategy).\n",
            conflict["node"].as_str().unwrap_or_default(),
            conflict["target"].as_str().unwrap_or("the run branch"),
            files.join(", ")
        ));
    }
}

/// A collector's inputs: the results of the work nodes it collects.
fn push_children(s: &mut String, stage: &Value) {
    if let Some(Value::Array(children)) = stage.get("children") {
        s.push_str(&format!(
            "The results of the {} work nodes you collect (pruned ones are left out):\n",
            children.len()
        ));
        for c in children {
            s.push_str(&format!(
                "### {} ({})\n{}\n",
                c["key"].as_str().unwrap_or_default(),
                c["state"].as_str().unwrap_or_default(),
                truncate(c["output"].as_str().unwrap_or_default().trim(), 3000)
            ));
        }
    }
}

/// Feedback from the user or the reviewer to address.
fn push_feedback(s: &mut String, stage: &Value) {
    if let Some(feedback) = stage.get("feedback").filter(|v| !v.is_null()) {
        let feedback = match feedback {
            Value::String(t) => t.clone(),
            other => to_canonical_string(other).unwrap_or_default(),
        };
        s.push_str(&format!(
            "Feedback to address (from the user or the reviewer) — revise your earlier work \
             accordingly: {}\n",
            truncate(feedback.trim(), 4000)
        ));
    }
}

/// A retry: the attempt's number and what the previous attempt reported.
fn push_attempt(s: &mut String, attempt: u32, previous: Option<&Value>) {
    s.push_str(&format!("This is attempt {attempt} of this stage."));
    if let Some(reason) = previous
        .and_then(|p| p.get("output").or_else(|| p.get("reason")))
        .and_then(Value::as_str)
    {
        s.push_str(&format!(
            " The previous attempt reported: {}",
            truncate(reason, 2000)
        ));
    }
    s.push('\n');
}

/// Cuts `text` to at most `max` bytes on a char boundary, marking the cut.
pub fn truncate(text: &str, max: usize) -> String {
    if text.len() <= max {
        return text.to_owned();
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}… [{} bytes cut]", &text[..end], text.len() - end)
}

/// The EARLIER STAGES text from the `stage_results` channel, skipping `current`.
pub fn earlier_stages(stage_results: Option<&Value>, current: &str) -> String {
    let Some(Value::Object(m)) = stage_results else {
        return String::new();
    };
    let mut s = String::new();
    // By stage name, however the map keeps its keys in this build.
    let mut stages: Vec<(&String, &Value)> = m.iter().collect();
    stages.sort_by(|a, b| a.0.cmp(b.0));
    for (stage, r) in stages {
        // A fan-out's work nodes (`<stage>/<key>`) reach their review and collector
        // directly, not every agent.
        if stage == current || stage.contains('/') {
            continue;
        }
        let failed = r.get("failure").and_then(Value::as_bool).unwrap_or(false);
        let out = r.get("output").unwrap_or(&Value::Null);
        let text = out
            .get("output")
            .or_else(|| out.get("reason"))
            .and_then(Value::as_str)
            .unwrap_or_default();
        s.push_str(&format!(
            "### {stage} ({})\n{}\n",
            if failed { "failed" } else { "succeeded" },
            truncate(text, 3000)
        ));
        if let Some(Value::Array(f)) = out.get("findings")
            && !f.is_empty()
        {
            for item in f.iter().filter_map(Value::as_str).take(20) {
                s.push_str(&format!("- {}\n", truncate(item, 400)));
            }
        }
        if let Some(Value::Array(files)) = out.get("files_changed")
            && !files.is_empty()
        {
            let names: Vec<&str> = files.iter().filter_map(Value::as_str).collect();
            s.push_str(&format!("files changed: {}\n", names.join(", ")));
        }
    }
    s
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;
    use serde_json::{Map, json};

    fn role() -> RoleSpec {
        RoleSpec::default()
    }

    fn before(text: &str, a: &str, b: &str) -> bool {
        match (text.find(a), text.find(b)) {
            (Some(i), Some(j)) => i < j,
            _ => panic!("`{a}` or `{b}` missing from {text}"),
        }
    }

    #[test]
    fn failure_criteria_are_told_in_words_never_as_the_engine_keys() {
        let stage = json!({"stage_name": "s", "failure_criteria": {"agent_defined": true}});
        let text = task_text(&role(), "do it", &stage, 1, None);
        assert!(!text.contains("agent_defined"), "{text}");
        assert!(
            text.contains("set `failure` to true in your report only if"),
            "{text}"
        );
        let stage = json!({"stage_name": "s", "failure_criteria": {"agent_defined": false}});
        assert!(!task_text(&role(), "do it", &stage, 1, None).contains("fail"));
        let stage =
            json!({"stage_name": "s", "failure_criteria": {"tests_fail": "any test fails"}});
        let text = task_text(&role(), "do it", &stage, 1, None);
        assert!(
            text.contains("The stage fails when tests fail: any test fails"),
            "{text}"
        );
    }

    #[test]
    fn a_prose_role_answers_in_words_and_fails_by_its_first_word() {
        let prose = RoleSpec {
            answer: AnswerFormat::Prose,
            ..RoleSpec::default()
        };
        let stage = json!({"stage_name": "s", "failure_criteria": {"agent_defined": true}});
        let text = task_text(&prose, "discuss it", &stage, 1, None);
        assert_eq!(text.trim(), "Request: discuss it");
        let system = system_prompt(&prose, &[]);
        assert!(system.contains("plain prose"), "{system}");
        assert!(system.contains("start with `FAILED:`"), "{system}");
        assert!(!system.contains("JSON Schema"), "{system}");
        assert!(system_prompt(&role(), &[]).contains("JSON Schema"));
    }

    #[test]
    fn retrieval_guidance_is_the_retrieval_agents_not_the_task() {
        let stage = json!({
            "stage_name": "analysis",
            "retrieval_guidance": "Retrieval strategy: document_domain",
            "reasoning_guidance": "Include when the change touches storage",
        });
        let text = task_text(&role(), "discuss it", &stage, 1, None);
        assert!(!text.contains("document_domain"), "{text}");
        assert!(
            text.contains("Guidance: Include when the change touches storage"),
            "{text}"
        );
    }

    #[test]
    fn json_in_prompts_is_sorted_whatever_the_map_order() {
        // StageReport declares failure, output, files_changed, findings; the prompt sorts.
        let text = output_instruction();
        assert!(before(&text, "\"files_changed\"", "\"output\""), "{text}");
        assert!(before(&text, "\"findings\"", "\"output\""), "{text}");

        let mut fc = Map::new();
        fc.insert("zeta".into(), json!(1));
        fc.insert("alpha".into(), json!(2));
        let stage = json!({"stage_name": "s", "failure_criteria": Value::Object(fc)});
        let text = task_text(&role(), "do it", &stage, 1, None);
        assert!(
            before(&text, "fails when alpha: 2", "fails when zeta: 1"),
            "{text}"
        );

        let mut results = Map::new();
        results.insert("review".into(), json!({"output": {"output": "r"}}));
        results.insert("analysis".into(), json!({"output": {"output": "a"}}));
        let text = earlier_stages(Some(&Value::Object(results)), "other");
        assert!(before(&text, "### analysis", "### review"), "{text}");
    }

    #[test]
    fn task_text_names_the_artifact_the_item_and_the_feedback() {
        let stage = json!({
            "stage_name": "scoping",
            "produces": "scope_card",
            "item": {"id": "T1", "title": "parse flags"},
            "feedback": "drop the web UI from the scope",
        });
        let text = task_text(&role(), "add a flag", &stage, 2, None);
        assert!(
            text.contains("produces the `scope_card` artifact"),
            "{text}"
        );
        assert!(
            text.contains(r#"Your work item: {"id":"T1","title":"parse flags"}"#),
            "{text}"
        );
        assert!(text.contains("Feedback to address"), "{text}");
        assert!(text.contains("drop the web UI from the scope"), "{text}");
        let plain = task_text(&role(), "add a flag", &json!({"stage_name": "s"}), 1, None);
        assert!(
            !plain.contains("Feedback") && !plain.contains("artifact"),
            "{plain}"
        );
    }
}
