//! Context management in the agent loop, with the scripted model: conversations that
//! outgrow a small window are compacted (by the summary model, or deterministically when it
//! fails) and every request still fits; large tool outputs go behind handles the agent
//! reads back.

use std::sync::{Arc, Mutex};

use serde_json::{Value, json};
use trellis_agents::context::{ContextPolicy, DirOutputs, Limits, READ_TOOL_OUTPUT};
use trellis_agents::{AgentOutcome, AgentReport, AgentRun, Resume, RoleSpec};
use trellis_llm::tokens::estimate_request;
use trellis_llm::{ChatRequest, Message, ModelProvider, Role};
use trellis_protocol::{CompactionMethod, SessionEvent, ToolStatus};
use trellis_test_support::TempWorkspace;
use trellis_test_support::scripted::{ScriptedProvider, Turn};
use trellis_tools::tool::BoxFuture;
use trellis_tools::{
    NonInteractive, Registry, Tool, ToolContext, ToolEnv, ToolOutput, ToolSpec, ToolsConfig,
    Workspace,
};

const ROLE: &str = "dumper";

/// `dump {tag, bytes}`: `bytes` bytes of numbered lines `<tag>:<n>` (fixed width).
pub struct Dump {
    spec: ToolSpec,
}

/// The output of `dump` for `tag` and `bytes`.
pub fn dump_text(tag: &str, bytes: usize) -> String {
    let mut s = String::new();
    let mut i = 0;
    while s.len() < bytes {
        s.push_str(&format!("{tag}:{i:05}\n"));
        i += 1;
    }
    s.truncate(bytes);
    s
}

impl Tool for Dump {
    fn spec(&self) -> &ToolSpec {
        &self.spec
    }

    fn call<'a>(
        &'a self,
        _ctx: &'a ToolContext,
        args: Value,
    ) -> BoxFuture<'a, trellis_tools::Result<ToolOutput>> {
        Box::pin(async move {
            let tag = args["tag"].as_str().unwrap_or("X").to_owned();
            let bytes = args["bytes"].as_u64().unwrap_or(100) as usize;
            Ok(ToolOutput::text(dump_text(&tag, bytes)))
        })
    }
}

pub struct Fixture {
    pub ws: TempWorkspace,
    pub registry: Arc<Registry>,
    pub workspace: Workspace,
}

pub fn fixture() -> Fixture {
    let ws = TempWorkspace::new("agent-context").unwrap();
    let mut registry = Registry::new();
    registry.register(Arc::new(Dump {
        spec: ToolSpec {
            name: "dump".into(),
            description: "Dumps numbered lines.".into(),
            input_schema: json!({ "type": "object" }),
            output_schema: None,
        },
    }));
    registry.allow(ROLE, ["dump"]);
    let workspace = Workspace::new(ws.path(), &Default::default()).unwrap();
    Fixture {
        ws,
        registry: Arc::new(registry),
        workspace,
    }
}

/// Collects a sink's events.
#[derive(Clone, Default)]
pub struct Recorder(Arc<Mutex<Vec<SessionEvent>>>);

impl Recorder {
    pub fn events(&self) -> Vec<SessionEvent> {
        self.0.lock().unwrap().clone()
    }
}

pub fn agent(
    fx: &Fixture,
    provider: Arc<dyn ModelProvider>,
    context: ContextPolicy,
    recorder: &Recorder,
) -> AgentRun {
    let events = recorder.0.clone();
    AgentRun {
        max_turns: 16,
        events: Some(Arc::new(move |e| events.lock().unwrap().push(e))),
        context,
        ..AgentRun::new(
            "dump_stage",
            RoleSpec {
                name: ROLE.into(),
                role: "You dump.".into(),
                objective: "Dump lines.".into(),
                ..Default::default()
            },
            provider,
            fx.registry.clone(),
            ToolEnv::new(
                fx.workspace.clone(),
                Arc::new(ToolsConfig::default()),
                Arc::new(NonInteractive { approve: true }),
            ),
            vec![
                Message::system("## ROLE\nYou dump lines and report what you saw."),
                Message::user("## PROJECT CONTEXT\nA repository of numbered lines."),
                Message::user("## TASK\nDump the lines of every tag and report."),
            ],
        )
    }
}

pub fn done(outcome: AgentOutcome) -> AgentReport {
    match outcome {
        AgentOutcome::Done(r) => r,
        AgentOutcome::Interrupted { interrupt, .. } => panic!("interrupted: {interrupt:?}"),
    }
}

/// The OpenAI wire's rule: every tool result answers a call of the assistant message right
/// before it (only results in between), and every call is answered before anything else.
pub fn consistent(messages: &[Message]) -> Result<(), String> {
    let mut open: Vec<String> = Vec::new();
    let mut in_results = false;
    for (i, m) in messages.iter().enumerate() {
        if m.role == Role::Tool {
            let id = m.tool_call_id.clone().unwrap_or_default();
            match open.iter().position(|o| *o == id) {
                Some(p) if in_results => {
                    open.remove(p);
                }
                _ => return Err(format!("message {i}: result `{id}` answers no open call")),
            }
            continue;
        }
        if !open.is_empty() {
            return Err(format!("message {i}: calls {open:?} were never answered"));
        }
        open = m.tool_calls.iter().map(|c| c.id.clone()).collect();
        in_results = !open.is_empty();
    }
    if open.is_empty() {
        Ok(())
    } else {
        Err(format!("calls {open:?} were never answered"))
    }
}

fn compactions(events: &[SessionEvent]) -> Vec<SessionEvent> {
    events
        .iter()
        .filter(|e| matches!(e, SessionEvent::ContextCompacted { .. }))
        .cloned()
        .collect()
}

/// Nine calls of `dump` (1,200 bytes each), then `last`.
fn dumping(last: Vec<Turn>) -> Vec<Turn> {
    let mut turns: Vec<Turn> = (0..9)
        .map(|i| Turn::ToolCall {
            name: "dump".into(),
            arguments: json!({ "tag": format!("R{i}"), "bytes": 1200 }),
        })
        .collect();
    turns.extend(last);
    turns
}

fn report() -> Turn {
    Turn::Json(json!({ "failure": false, "output": "dumped nine tags" }))
}

/// Checks every request the model received fits `limits` (counted with the model's own
/// counter, the estimate) and keeps its tool calls paired; returns the largest.
fn assert_all_fit(requests: &[ChatRequest], limits: &Limits) -> u64 {
    let mut peak = 0;
    for (i, r) in requests.iter().enumerate() {
        let tokens = estimate_request(r).tokens;
        peak = peak.max(tokens);
        assert!(
            tokens <= limits.limit,
            "request {i}: {tokens} tokens > limit {}",
            limits.limit
        );
        consistent(&r.messages).unwrap_or_else(|e| panic!("request {i}: {e}"));
        assert_eq!(r.messages[0].role, Role::System, "request {i}");
        assert!(
            r.messages.iter().any(|m| m.content.starts_with("## TASK")),
            "request {i} lost its task"
        );
    }
    peak
}

#[tokio::test]
async fn a_conversation_outgrowing_a_small_window_is_summarised_and_every_request_fits() {
    let fx = fixture();
    let model = ScriptedProvider::new(dumping(vec![report()])).with_context_window(2000);
    let summarizer = ScriptedProvider::responding(|r| {
        let transcript = &r.messages[1].content;
        let tags: Vec<String> = (0..9)
            .map(|i| format!("R{i}"))
            // Seen raw, or named by the earlier summary (folded in).
            .filter(|t| {
                transcript.contains(&format!("{t}:00000"))
                    || transcript.contains(&format!(" {t},"))
                    || transcript.contains(&format!(" {t}."))
            })
            .collect();
        Turn::Text(format!("SUMMARY: dumped tags {}.", tags.join(", ")))
    })
    .with_profile("planner");
    let recorder = Recorder::default();
    let policy = ContextPolicy {
        summarizer: Some(Arc::new(summarizer.clone())),
        ..ContextPolicy::default()
    };
    let limits = policy.limits(Some(2000));
    assert_eq!((limits.limit, limits.threshold), (1500, 1500));
    let out = done(
        agent(&fx, Arc::new(model.clone()), policy, &recorder)
            .run(Resume::Fresh)
            .await
            .unwrap(),
    );
    assert_eq!(out.report.output, "dumped nine tags");
    assert_eq!(out.tool_calls, 9);

    let events = recorder.events();
    // Unmanaged, the tool outputs alone would be far over the window.
    let outputs: usize = events
        .iter()
        .filter_map(|e| match e {
            SessionEvent::ToolCompleted { output, .. } => Some(output.len()),
            _ => None,
        })
        .sum();
    assert!(outputs / 4 > 2000, "{outputs} bytes of tool output");

    let requests = model.requests();
    assert_eq!(requests.len(), 10);
    let peak = assert_all_fit(&requests, &limits);

    let compacted = compactions(&events);
    assert!(!compacted.is_empty());
    for e in &compacted {
        let SessionEvent::ContextCompacted {
            method,
            before_tokens,
            after_tokens,
            limit,
            summarized,
            usage,
            fallback,
            ..
        } = e
        else {
            unreachable!()
        };
        assert_eq!(*method, CompactionMethod::Summary, "{e:?}");
        assert_eq!(*limit, 1500);
        assert!(*before_tokens > limits.threshold, "{e:?}");
        assert!(*after_tokens <= *limit, "{e:?}");
        assert!(*summarized > 0 && usage.prompt_tokens > 0, "{e:?}");
        assert!(fallback.is_none(), "{e:?}");
        println!("{}", e.compaction_text().unwrap());
    }
    // One summary call per compaction, to the summary model; the agent's model never got one.
    let summaries = summarizer.requests();
    assert_eq!(summaries.len(), compacted.len());
    for s in &summaries {
        assert!(
            s.messages[0]
                .content
                .starts_with("You maintain the working memory")
        );
        assert!(s.messages[1].content.contains("## TRANSCRIPT"));
    }
    assert!(requests.iter().all(|r| {
        r.messages
            .iter()
            .all(|m| !m.content.starts_with("You maintain the working memory"))
    }));
    // After the first compaction every request carries the summary, which folds the earlier
    // summary in: the last one names the tags summarised before it.
    let first = requests
        .iter()
        .position(|r| {
            r.messages
                .iter()
                .any(|m| m.content.contains("SUMMARY: dumped"))
        })
        .unwrap();
    for r in &requests[first..] {
        assert!(
            r.messages
                .iter()
                .any(|m| m.content.starts_with("## SUMMARY OF EARLIER WORK"))
        );
    }
    let last = requests.last().unwrap();
    let summary = last
        .messages
        .iter()
        .find(|m| m.content.starts_with("## SUMMARY OF EARLIER WORK"))
        .unwrap();
    assert!(summary.content.contains("R0"), "{}", summary.content);
    // The summary's usage is the agent's too.
    let summary_usage: u64 = compacted
        .iter()
        .map(|e| match e {
            SessionEvent::ContextCompacted { usage, .. } => usage.prompt_tokens,
            _ => 0,
        })
        .sum();
    let turn_usage: u64 = events
        .iter()
        .map(|e| match e {
            SessionEvent::TurnCompleted { usage, .. } => usage.prompt_tokens,
            _ => 0,
        })
        .sum();
    assert_eq!(out.usage.prompt_tokens, summary_usage + turn_usage);
    println!(
        "window 2000, limit {}: {} requests, peak {peak} tokens, {} compactions, {} bytes of tool output",
        limits.limit,
        requests.len(),
        compacted.len(),
        outputs
    );
}

#[tokio::test]
async fn a_failing_summary_falls_back_to_a_digest_and_the_call_still_fits() {
    let fx = fixture();
    // The final answer is prose, so the structured report call follows: it must fit too.
    let model = ScriptedProvider::new(dumping(vec![
        Turn::Text("All nine tags dumped.".into()),
        report(),
    ]))
    .with_context_window(2000);
    let summarizer = ScriptedProvider::new([Turn::HttpError {
        status: 500,
        message: "summary model down".into(),
    }]);
    let recorder = Recorder::default();
    let policy = ContextPolicy {
        summarizer: Some(Arc::new(summarizer.clone())),
        ..ContextPolicy::default()
    };
    let limits = policy.limits(Some(2000));
    let out = done(
        agent(&fx, Arc::new(model.clone()), policy, &recorder)
            .run(Resume::Fresh)
            .await
            .unwrap(),
    );
    assert_eq!(out.report.output, "dumped nine tags");
    let requests = model.requests();
    assert_eq!(requests.len(), 11);
    assert!(requests.last().unwrap().response_format.is_some());
    let peak = assert_all_fit(&requests, &limits);
    let compacted = compactions(&recorder.events());
    assert!(!compacted.is_empty());
    for e in &compacted {
        let SessionEvent::ContextCompacted {
            method,
            after_tokens,
            limit,
            fallback,
            ..
        } = e
        else {
            unreachable!()
        };
        assert_eq!(*method, CompactionMethod::Digest, "{e:?}");
        assert!(after_tokens <= limit, "{e:?}");
        assert!(
            fallback
                .as_deref()
                .is_some_and(|f| f.starts_with("the summary call failed")),
            "{e:?}"
        );
    }
    assert!(
        compacted.iter().any(|e| matches!(e, SessionEvent::ContextCompacted { fallback: Some(f), .. } if f.contains("summary model down")))
    );
    assert_eq!(summarizer.requests().len(), compacted.len());
    let digest = requests
        .last()
        .unwrap()
        .messages
        .iter()
        .find(|m| m.content.starts_with("## EARLIER WORK (condensed)"))
        .unwrap();
    assert!(
        digest.content.contains("- called dump("),
        "{}",
        digest.content
    );
    println!(
        "digest fallback: {} requests, peak {peak} tokens (limit {}), {} compactions",
        requests.len(),
        limits.limit,
        compacted.len()
    );

    // Without a summary model at all: digests too, saying why.
    let model = ScriptedProvider::new(dumping(vec![report()])).with_context_window(2000);
    let recorder = Recorder::default();
    done(
        agent(
            &fx,
            Arc::new(model.clone()),
            ContextPolicy::default(),
            &recorder,
        )
        .run(Resume::Fresh)
        .await
        .unwrap(),
    );
    assert_all_fit(&model.requests(), &limits);
    assert!(compactions(&recorder.events()).iter().all(|e| matches!(
        e,
        SessionEvent::ContextCompacted { method: CompactionMethod::Digest, fallback: Some(f), .. }
            if f == "no summary model is configured"
    )));
}

/// What the user said — review feedback in the MESSAGES FROM THE USER block, a message that
/// reached the agent while it worked — is an instruction, not history: compaction keeps it
/// word for word in every request, summary model or not (the review's "request changes"
/// reached only the first call of the stage's new attempt before).
#[tokio::test]
async fn the_users_words_survive_compaction() {
    let fx = fixture();
    let feedback = "## MESSAGES FROM THE USER\nChanges requested in review: docs/adr.md:3 Status must be Accepted.";
    let arrived = "Message from the user while you were working:\nAlso mention SQLite.";
    let model = ScriptedProvider::new(dumping(vec![report()])).with_context_window(2000);
    let recorder = Recorder::default();
    let mut run = agent(
        &fx,
        Arc::new(model.clone()),
        ContextPolicy::default(),
        &recorder,
    );
    let task = run.messages.pop().unwrap();
    run.messages.push(Message::user(feedback));
    run.messages.push(task);
    run.messages.push(Message::user(arrived));
    let limits = ContextPolicy::default().limits(Some(2000));
    done(run.run(Resume::Fresh).await.unwrap());
    let requests = model.requests();
    assert_all_fit(&requests, &limits);
    assert!(!compactions(&recorder.events()).is_empty());
    for (i, r) in requests.iter().enumerate() {
        for said in [feedback, arrived] {
            assert!(
                r.messages.iter().any(|m| m.content == said),
                "request {i} lost {said:?}: {:#?}",
                r.messages.iter().map(|m| &m.content).collect::<Vec<_>>()
            );
        }
    }
}

#[tokio::test]
async fn a_summary_model_with_a_small_window_folds_the_transcript_in_parts() {
    let fx = fixture();
    let model = ScriptedProvider::new(dumping(vec![report()])).with_context_window(4000);
    let summarizer = ScriptedProvider::responding(|r| {
        let part = r.messages[1]
            .content
            .split("## TRANSCRIPT")
            .nth(1)
            .and_then(|t| t.split(')').next())
            .unwrap_or_default()
            .to_owned();
        Turn::Text(format!("SUMMARY{part}: dumped some tags."))
    })
    .with_context_window(1200)
    .with_profile("planner");
    let recorder = Recorder::default();
    let policy = ContextPolicy {
        summarizer: Some(Arc::new(summarizer.clone())),
        ..ContextPolicy::default()
    };
    let limits = policy.limits(Some(4000));
    done(
        agent(&fx, Arc::new(model.clone()), policy, &recorder)
            .run(Resume::Fresh)
            .await
            .unwrap(),
    );
    assert_all_fit(&model.requests(), &limits);
    let compacted = compactions(&recorder.events());
    let summaries = summarizer.requests();
    assert!(
        summaries.len() > compacted.len(),
        "{} calls",
        summaries.len()
    );
    // Every summary call fits the summary model's window with its answer.
    for (i, s) in summaries.iter().enumerate() {
        let tokens = estimate_request(s).tokens;
        let answer = u64::from(s.max_tokens.unwrap());
        assert!(
            tokens + answer <= 1200,
            "summary call {i}: {tokens} + {answer}"
        );
    }
    // A later part folds in the summary so far.
    assert!(summaries.iter().any(|s| {
        s.messages[1]
            .content
            .contains("## SUMMARY SO FAR\nSUMMARY (part 1 of")
    }));
}

#[tokio::test]
async fn a_cap_below_the_window_is_the_limit() {
    let fx = fixture();
    // A 100k window, but the role's cap is 1,200 tokens.
    let model = ScriptedProvider::new(dumping(vec![report()])).with_context_window(100_000);
    let summarizer = ScriptedProvider::responding(|_| Turn::Text("SUMMARY: dumped.".into()));
    let recorder = Recorder::default();
    let policy = ContextPolicy {
        cap: Some(1_200),
        summarizer: Some(Arc::new(summarizer)),
        ..ContextPolicy::default()
    };
    let limits = policy.limits(Some(100_000));
    assert_eq!((limits.limit, limits.threshold), (1_200, 1_200));
    done(
        agent(&fx, Arc::new(model.clone()), policy, &recorder)
            .run(Resume::Fresh)
            .await
            .unwrap(),
    );
    let peak = assert_all_fit(&model.requests(), &limits);
    assert!(!compactions(&recorder.events()).is_empty());
    println!("cap 1200 on a 100k window: peak {peak} tokens");
}

#[tokio::test]
async fn a_large_tool_output_goes_behind_a_handle_and_reads_back() {
    let fx = fixture();
    let store = fx.ws.path().join(".outputs");
    let model = ScriptedProvider::new([
        Turn::ToolCall {
            name: "dump".into(),
            arguments: json!({ "tag": "T", "bytes": 8000 }),
        },
        Turn::ToolCall {
            name: READ_TOOL_OUTPUT.into(),
            arguments: json!({ "handle": "t1-call_1", "offset": 4000, "limit": 400 }),
        },
        report(),
    ]);
    let recorder = Recorder::default();
    let policy = ContextPolicy {
        tool_output_max_bytes: Some(2000),
        outputs: Some(Arc::new(DirOutputs::new(&store))),
        ..ContextPolicy::default()
    };
    done(
        agent(&fx, Arc::new(model.clone()), policy, &recorder)
            .run(Resume::Fresh)
            .await
            .unwrap(),
    );
    let full = dump_text("T", 8000);
    assert_eq!(
        std::fs::read_to_string(store.join("t1-call_1.txt")).unwrap(),
        full
    );
    let completed: Vec<(String, String, ToolStatus)> = recorder
        .events()
        .into_iter()
        .filter_map(|e| match e {
            SessionEvent::ToolCompleted {
                name,
                output,
                status,
                ..
            } => Some((name, output, status)),
            _ => None,
        })
        .collect();
    assert_eq!(completed.len(), 2);
    let (_, excerpt, _) = &completed[0];
    assert!(
        excerpt.starts_with("[output of 8000 bytes, 1000 lines, stored as `t1-call_1`"),
        "{excerpt}"
    );
    assert!(excerpt.len() < 1400, "{}", excerpt.len());
    assert!(excerpt.contains("T:00000") && excerpt.contains("T:00999"));
    assert!(!excerpt.contains("T:00500"));
    let (name, text, status) = &completed[1];
    assert_eq!((name.as_str(), *status), (READ_TOOL_OUTPUT, ToolStatus::Ok));
    // Offset 4000 is line 500; 400 bytes are 50 lines.
    assert!(text.starts_with("T:00500\n"), "{text}");
    assert!(
        text.contains("T:00549\n") && !text.contains("T:00550"),
        "{text}"
    );
    assert!(text.contains("\"offset\": 4400"), "{text}");

    let requests = model.requests();
    let offered = |r: &ChatRequest| r.tools.iter().any(|t| t.name == READ_TOOL_OUTPUT);
    assert!(!offered(&requests[0]), "granted before anything was stored");
    assert!(offered(&requests[1]) && offered(&requests[2]));
    assert_eq!(requests[1].messages.last().unwrap().content, *excerpt);
    assert_eq!(requests[2].messages.last().unwrap().content, *text);
}

#[tokio::test]
async fn a_resumed_activation_continues_from_its_compacted_conversation() {
    let fx = fixture();
    let summarizer = || {
        Arc::new(ScriptedProvider::responding(|_| {
            Turn::Text("SUMMARY: dumped the first tags.".into())
        }))
    };
    let model = ScriptedProvider::new(dumping(vec![report()])).with_context_window(2000);
    let recorder = Recorder::default();
    let policy = ContextPolicy {
        summarizer: Some(summarizer()),
        ..ContextPolicy::default()
    };
    done(
        agent(&fx, Arc::new(model.clone()), policy, &recorder)
            .run(Resume::Fresh)
            .await
            .unwrap(),
    );
    let events = recorder.events();
    let requests = model.requests();
    // The process "stops" right after the tool call of the first compacted turn.
    let turn = events
        .iter()
        .find_map(|e| match e {
            SessionEvent::ContextCompacted { turn, .. } => Some(*turn),
            _ => None,
        })
        .unwrap();
    let cut = events
        .iter()
        .position(|e| matches!(e, SessionEvent::ToolCompleted { turn: t, .. } if *t == turn))
        .unwrap();
    let rest: Vec<Turn> = dumping(vec![report()]).split_off(turn as usize);
    let resumed = ScriptedProvider::new(rest).with_context_window(2000);
    // A summary model with no script: replaying the compaction must not summarise again.
    let idle = ScriptedProvider::new([]);
    let recorder = Recorder::default();
    let policy = ContextPolicy {
        summarizer: Some(Arc::new(idle.clone())),
        ..ContextPolicy::default()
    };
    done(
        agent(&fx, Arc::new(resumed.clone()), policy, &recorder)
            .run(Resume::Recorded(events[..=cut].to_vec()))
            .await
            .unwrap(),
    );
    // The first request after the resume is the one the uninterrupted run made.
    assert_eq!(
        resumed.requests()[0].messages,
        requests[turn as usize].messages
    );
    // Only compactions after the resume asked the summary model (and fell back to digests).
    assert_eq!(idle.requests().len(), compactions(&recorder.events()).len());
    assert_all_fit(
        &resumed.requests(),
        &ContextPolicy::default().limits(Some(2000)),
    );
}
