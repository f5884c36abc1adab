//! One answer of a channel session: the discussion agent reads the conversation so far, the
//! repository map and the code the workspace index finds for the question (hybrid search over
//! symbols and document sections), and answers with read-only tools.

use std::sync::Arc;

use tokio_util::sync::CancellationToken;
use trellis_agents::{AgentOutcome, AgentRun, Resume, RoleSpec};
use trellis_index::{Index, RepoMapRequest, RetrievalRequest, RetrievalScope, UpdateOptions};
use trellis_llm::Message;
use trellis_protocol::{SessionEvent, SessionId, SubmissionId};
use trellis_runtime::sessions::Sessions as _;
use trellis_tools::{NonInteractive, Registry, ToolEnv, Workspace};

use super::sessions::next_turn;
use super::{OpError, Service};

/// The tools a discussion may use: reading only.
const TOOLS: [&str; 4] = ["read_file", "list_directory", "glob_search", "grep"];

/// The model role channels use (`[models.roles] discussion = "…"`; the default profile
/// otherwise).
pub const MODEL_ROLE: &str = "discussion";

fn role() -> RoleSpec {
    RoleSpec {
        name: "discussion_agent".into(),
        model_role: MODEL_ROLE.into(),
        role: "You discuss this repository with its maintainers: its design, its code, and how \
               to change it."
            .into(),
        objective: "Answer the latest message directly and concretely, grounded in the \
                    repository's code and documents."
            .into(),
        process: vec![
            "Use the retrieved code below and read files when you need more.".into(),
            "Cite files (and line ranges) for what you state.".into(),
        ],
        tools: TOOLS.iter().map(|t| (*t).to_owned()).collect(),
        constraints: vec![
            "Do not edit files; you have read-only tools.".into(),
            "Say so when something is not in the repository.".into(),
        ],
        max_turns: 8,
        // As the analysis agent: greedy decoding of a small local model otherwise cycles
        // through the same sentence (docs/models.md, "The demo's answer").
        frequency_penalty: Some(0.3),
        ..RoleSpec::default()
    }
}

/// The conversation of a channel so far, as question and answer pairs: each user message
/// and the answer that completed it. Tool calls and their results stay in the record (and in
/// `runs show --turns`), not in the next prompt — so a turn cancelled in the middle of a tool
/// call never leaves a call without its result.
fn conversation(history: &[SessionEvent]) -> Vec<Message> {
    history
        .iter()
        .filter_map(|e| match e {
            SessionEvent::UserMessage { text } => Some(Message::user(text.clone())),
            SessionEvent::SessionCompleted {
                output: serde_json::Value::String(answer),
            } => Some(Message::assistant(answer.clone())),
            _ => None,
        })
        .collect()
}

/// Code and documents the index finds for `question`, as a context message, the index first
/// brought up to date with the workspace (text and symbols; embeddings stay as `trellis
/// index` left them), so the first message of a never-indexed workspace has its context too.
/// Empty when the workspace has no indexable file.
async fn retrieved(svc: &Service, question: &str) -> String {
    let repo = svc.runtime.repo().to_path_buf();
    let config = svc.runtime.index_config().clone();
    let question = question.to_owned();
    let question_words: Vec<String> = question
        .split(|c: char| !(c.is_alphanumeric() || c == '_'))
        .filter(|w| w.len() > 2)
        .map(str::to_owned)
        .collect();
    let found = tokio::task::spawn_blocking(move || -> Result<String, String> {
        let mut index = Index::open(&repo, config).map_err(|e| e.to_string())?;
        // A failed update (another process writing, say) leaves the index as it was: search it.
        let updated = index.update(&UpdateOptions {
            embed: false,
            ..UpdateOptions::default()
        });
        let closed = index.close_writer();
        if let Err(e) = updated.map(drop).and(closed) {
            tracing::warn!("chat: the index could not be brought up to date: {e}");
        }
        if index.counts().map_err(|e| e.to_string())?.files == 0 {
            return Ok(String::new());
        }
        let scope = RetrievalScope::code();
        let pack = index
            .retrieve(&RetrievalRequest {
                query: question,
                scope: &scope,
                stage: None,
                budget_tokens: Some(3000),
                candidates: None,
            })
            .map_err(|e| e.to_string())?;
        // The repository's outline, ranked by PageRank over references, then the matches.
        let map = index
            .repo_map(&RepoMapRequest {
                files_in_play: Vec::new(),
                mentioned: question_words,
                budget_tokens: 800,
            })
            .map_err(|e| e.to_string())?;
        let mut s = String::new();
        if !map.text.trim().is_empty() {
            s.push_str("### Repository map\n");
            s.push_str(&map.text);
            s.push_str("\n### Best matches\n");
        }
        for item in &pack.items {
            let a = &item.attribution;
            s.push_str(&format!(
                "── {}:{}-{}\n{}\n\n",
                a.path, a.start_line, a.end_line, item.text
            ));
        }
        Ok(s)
    })
    .await;
    match found {
        Ok(Ok(s)) => s,
        Ok(Err(e)) => format!("(retrieval failed: {e})"),
        Err(e) => format!("(retrieval failed: {e})"),
    }
}

/// Answers `text` in channel session `session`.
pub(crate) async fn answer(
    svc: &Arc<Service>,
    sub: &SubmissionId,
    session: &SessionId,
    text: &str,
    cancel: CancellationToken,
) -> Result<String, OpError> {
    if text.trim().is_empty() {
        return Err(OpError::new("the message is empty"));
    }
    svc.bus.flush().await;
    let history = svc.hub.history(session)?;
    let first_turn = next_turn(&history);
    let sink = svc.hub.sink(session, Some(sub.clone()));
    let role = role();
    let mut registry = Registry::builtin(&Default::default());
    registry.allow(&role.name, TOOLS);
    let registry = Arc::new(registry);
    let tools: Vec<(String, String)> = registry
        .specs_for(&role.name)
        .into_iter()
        .map(|t| (t.name, t.description))
        .collect();
    let workspace = Workspace::new(svc.runtime.repo(), &svc.runtime.tools().secrets)
        .map_err(|e| OpError::internal(e.to_string()))?;
    let env = ToolEnv::new(
        workspace,
        svc.runtime.tools().clone(),
        Arc::new(NonInteractive { approve: false }),
    );
    let provider = svc.runtime.models().for_role(MODEL_ROLE)?;
    let mut messages = vec![Message::system(trellis_agents::prompt::chat_prompt(
        &role, &tools,
    ))];
    messages.extend(conversation(&history));
    let context = retrieved(svc, text).await;
    if !context.is_empty() {
        messages.push(Message::user(format!(
            "## RETRIEVED CODE (the workspace index's best matches for the next message)\n{context}"
        )));
    }
    sink(SessionEvent::UserMessage {
        text: text.to_owned(),
    });
    messages.push(Message::user(text.to_owned()));
    // Channels have no budget ledger: the summary model is the plain profile of its role.
    let mut context = svc.runtime.context_config().policy_for(&role.name);
    context.summarizer = svc
        .runtime
        .models()
        .for_role(svc.runtime.context_config().summary_role())
        .ok();
    context.outputs = Some(Arc::new(trellis_agents::context::DirOutputs::new(
        svc.runtime
            .repo()
            .join(".trellis")
            .join("sessions")
            .join(trellis_agents::context::outputs::slug(session.as_str()))
            .join("tool-outputs"),
    )));
    let run = AgentRun {
        node: session.to_string(),
        role: role.clone(),
        provider,
        tools: registry,
        tool_scope: None,
        env,
        gate: None,
        ledger: None,
        messages,
        max_turns: role.max_turns,
        events: Some(sink.clone()),
        inbox: None,
        first_turn,
        attempt: 0,
        free_text: true,
        context,
        cancel,
        probe: None,
    };
    match run.run(Resume::Fresh).await {
        Ok(AgentOutcome::Done(report)) => {
            let answer = report.report.output;
            sink(SessionEvent::SessionCompleted {
                output: serde_json::Value::String(answer.clone()),
            });
            Ok(answer)
        }
        Ok(AgentOutcome::Interrupted { interrupt, .. }) => {
            let why = format!("the discussion agent stopped to ask: {}", interrupt.prompt);
            sink(SessionEvent::SessionError { error: why.clone() });
            Err(OpError::conflict(why))
        }
        Err(e) => {
            sink(SessionEvent::SessionError {
                error: e.to_string(),
            });
            Err(OpError::of(
                super::OpErrorKind::Upstream,
                format!("session {session}: {e}"),
            ))
        }
    }
}
