//! A role with `edit_format: blocks`: edits written as SEARCH/REPLACE blocks in the model's
//! text become `edit_file` calls; a block that cannot be applied is explained to the model,
//! and the activation ends with a success report once every block is applied.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use trellis_agents::roles::EditFormat;
use trellis_agents::{AgentOutcome, AgentRun, Resume, RoleCatalog, SessionSink};
use trellis_llm::{Message, Role};
use trellis_protocol::{SessionEvent, ToolStatus};
use trellis_test_support::TempWorkspace;
use trellis_test_support::scripted::{ScriptedProvider, Turn};
use trellis_tools::{NonInteractive, Registry, ToolEnv, ToolsConfig, Workspace};

pub(crate) const SOURCE: &str = "def bits(val, len_):\n    if val > 2 ** len_:\n        raise ValueError(val)\n    return val\n";

pub(crate) struct Ran {
    pub(crate) report: trellis_agents::AgentReport,
    pub(crate) requests: Vec<trellis_llm::ChatRequest>,
    pub(crate) events: Vec<SessionEvent>,
    pub(crate) file: String,
}

async fn run(answers: Vec<&str>) -> Ran {
    run_with(answers, 1).await
}

/// `answers` to the built-in fixer drawing `samples` answers per turn.
async fn run_with(answers: Vec<&str>, samples: u32) -> Ran {
    run_probed(answers, samples, None).await
}

/// [`run_with`], the answers tested by `probe` (`test_samples`).
async fn run_probed(
    answers: Vec<&str>,
    samples: u32,
    probe: Option<Arc<dyn trellis_agents::TestProbe>>,
) -> Ran {
    run_role(answers, samples, probe, false).await
}

/// [`run_probed`], the answers held to the block grammar when `block_grammar`.
async fn run_role(
    answers: Vec<&str>,
    samples: u32,
    probe: Option<Arc<dyn trellis_agents::TestProbe>>,
    block_grammar: bool,
) -> Ran {
    run_spec(answers, samples, probe, block_grammar, false).await
}

/// The second file a focused role is shown (`pkg/util.py`, beside `pkg/math.py`).
pub(crate) const OTHER: &str = "def double(x):\n    return x * 2\n";

/// [`run_role`]; a `focus` role is also shown `pkg/util.py` ([`OTHER`]).
pub(crate) async fn run_spec(
    answers: Vec<&str>,
    samples: u32,
    probe: Option<Arc<dyn trellis_agents::TestProbe>>,
    block_grammar: bool,
    focus: bool,
) -> Ran {
    let test_samples = probe.is_some();
    run_configured(answers, probe, focus, |role| trellis_agents::RoleSpec {
        samples,
        test_samples,
        block_grammar,
        focus,
        reproduce: false,
        ..role
    })
    .await
}

/// `answers` to the built-in fixer as `configure` changes it, given `probe`; a `focus` run
/// also shows `pkg/util.py` ([`OTHER`]).
pub(crate) async fn run_configured(
    answers: Vec<&str>,
    probe: Option<Arc<dyn trellis_agents::TestProbe>>,
    focus: bool,
    configure: impl FnOnce(trellis_agents::RoleSpec) -> trellis_agents::RoleSpec,
) -> Ran {
    let ws = TempWorkspace::new("blocks").unwrap();
    std::fs::create_dir_all(ws.path().join("pkg")).unwrap();
    std::fs::write(ws.path().join("pkg/math.py"), SOURCE).unwrap();
    std::fs::write(ws.path().join("pkg/util.py"), OTHER).unwrap();
    let role = RoleCatalog::builtin()
        .unwrap()
        .get("fixer")
        .unwrap()
        .clone();
    assert_eq!(role.edit_format, EditFormat::Blocks);
    let role = configure(role);
    let mut registry = Registry::builtin(&BTreeMap::new());
    registry.allow(&role.name, role.tools.iter().map(String::as_str));
    let scripted = ScriptedProvider::new(
        answers
            .into_iter()
            .map(|a| Turn::Text(a.to_owned()))
            .collect::<Vec<_>>(),
    );
    let events = Arc::new(Mutex::new(Vec::new()));
    let sink: SessionSink = {
        let events = events.clone();
        Arc::new(move |e| events.lock().unwrap().push(e))
    };
    let env = ToolEnv::new(
        Workspace::new(ws.path(), &Default::default()).unwrap(),
        Arc::new(ToolsConfig::default()),
        Arc::new(NonInteractive { approve: true }),
    );
    let messages = vec![
        Message::system(trellis_agents::prompt::system_prompt(
            &role,
            &[("edit_file".into(), "Replace an exact string.".into())],
        )),
        Message::user(if focus {
            format!(
                "## RELEVANT CODEBASE\n### pkg/util.py:1-2 (double)\n```python\n{OTHER}```\n\
                 ### pkg/math.py:1-4 (bits)\n```python\n{SOURCE}```"
            )
        } else {
            format!("## RELEVANT CODEBASE\n### pkg/math.py:1-4 (bits)\n```python\n{SOURCE}```")
        }),
        Message::user("## TASK\nBits: a value of exactly 2**len_ does not fit."),
    ];
    let provider = Arc::new(scripted.clone());
    let agent = AgentRun {
        events: Some(sink),
        probe,
        ..AgentRun::new("fix", role, provider, Arc::new(registry), env, messages)
    };
    let report = match agent.run(Resume::Fresh).await.unwrap() {
        AgentOutcome::Done(r) => r,
        AgentOutcome::Interrupted { interrupt, .. } => panic!("interrupted: {interrupt:?}"),
    };
    let file = std::fs::read_to_string(ws.path().join("pkg/math.py")).unwrap();
    let events = events.lock().unwrap().clone();
    Ran {
        report,
        requests: scripted.requests(),
        events,
        file,
    }
}

/// The notes of a session's events, in order.
pub(crate) fn notes(events: &[SessionEvent]) -> Vec<String> {
    events
        .iter()
        .filter_map(|e| match e {
            SessionEvent::Note { text } => Some(text.clone()),
            _ => None,
        })
        .collect()
}

pub(crate) fn edits(events: &[SessionEvent]) -> Vec<(String, ToolStatus)> {
    events
        .iter()
        .filter_map(|e| match e {
            SessionEvent::ToolCompleted { name, status, .. } => Some((name.clone(), *status)),
            _ => None,
        })
        .collect()
}

#[tokio::test]
async fn a_block_is_applied_as_an_edit_and_ends_the_activation() {
    // Written as a small model writes it: indentation lost, the file named in backticks,
    // inside a fence.
    let ran = run(vec![
        "The bound is off by one: 2**len_ needs len_+1 bits.\n```python\n`pkg/math.py`\n\
         <<<<<<< SEARCH\nif val > 2 ** len_:\n=======\nif val >= 2 ** len_:\n>>>>>>> REPLACE\n```",
    ])
    .await;
    assert_eq!(ran.file, SOURCE.replace("val > 2", "val >= 2"));
    assert!(!ran.report.report.failure);
    assert_eq!(
        ran.report.report.output,
        "The bound is off by one: 2**len_ needs len_+1 bits."
    );
    assert_eq!((ran.report.turns, ran.report.tool_calls), (1, 1));
    assert_eq!(
        edits(&ran.events),
        [("edit_file".to_owned(), ToolStatus::Ok)]
    );
    // One request, in free text: no tools offered, no report format imposed.
    assert_eq!(ran.requests.len(), 1);
    assert!(ran.requests[0].tools.is_empty());
    assert!(ran.requests[0].final_format.is_none());
    let system = &ran.requests[0].messages[0].content;
    assert!(system.contains("<<<<<<< SEARCH"), "{system}");
    assert!(!system.contains("- edit_file"), "{system}");
}

#[tokio::test]
async fn the_block_grammar_is_sent_only_when_the_role_asks_for_it() {
    let answer = "Off by one.\npkg/math.py\n<<<<<<< SEARCH\n    if val > 2 ** len_:\n=======\n    \
                  if val >= 2 ** len_:\n>>>>>>> REPLACE\n";
    // The built-in fixer's default: free text.
    let off = run(vec![answer]).await;
    assert!(off.requests.iter().all(|r| r.grammar.is_none()));
    let on = run_role(vec![answer], 1, None, true).await;
    assert_eq!(on.file, SOURCE.replace("val > 2", "val >= 2"));
    let g = on.requests[0].grammar.as_deref().unwrap();
    // The file the pack shows, and its lines as the workspace has them.
    assert!(g.contains(r#""pkg/math.py\n<<<<<<< SEARCH\n" s0"#), "{g}");
    for line in SOURCE.lines().filter(|l| !l.trim().is_empty()) {
        let quoted = format!("\"{}\\n\"", line.trim_end().replace('"', "\\\""));
        assert!(g.contains(&quoted), "{quoted} not in\n{g}");
    }
}

#[tokio::test]
async fn a_block_that_matches_nothing_is_explained_and_the_next_answer_counts() {
    let ran = run(vec![
        // The template's placeholder path and a SEARCH part the file does not have.
        "Off by one.\n<the file's path, as shown with its code>\n<<<<<<< SEARCH\n    if (val > \
         2**len_):\n=======\n    if val >= 2 ** len_:\n>>>>>>> REPLACE\n",
        // No path at all: the block belongs to the file shown where its SEARCH part is.
        "<<<<<<< SEARCH\n    if val > 2 ** len_:\n=======\n    if val >= 2 ** len_:\n>>>>>>> \
         REPLACE\n",
    ])
    .await;
    assert_eq!(ran.file, SOURCE.replace("val > 2", "val >= 2"));
    assert!(!ran.report.report.failure);
    assert_eq!(ran.requests.len(), 2);
    let told = ran.requests[1].messages.last().unwrap();
    assert_eq!(told.role, Role::User);
    assert!(
        told.content
            .starts_with("These edit blocks were not applied:")
            && told.content.contains("in none of the files shown"),
        "{}",
        told.content
    );
    assert_eq!(
        edits(&ran.events),
        [("edit_file".to_owned(), ToolStatus::Ok)]
    );
}

#[tokio::test]
async fn an_answer_without_blocks_is_asked_for_the_change_once() {
    let ran = run(vec![
        "The code already handles it.",
        "It needs no change: the bound is right.",
        r#"{"failure": true, "output": "no change made"}"#,
    ])
    .await;
    assert_eq!(ran.file, SOURCE);
    assert!(ran.report.report.failure);
    let asked = &ran.requests[1].messages.last().unwrap().content;
    assert!(
        asked.starts_with("You reported success, but no edit block has been applied"),
        "{asked}"
    );
    // The prose second answer is not a report: the third request asks for one.
    assert_eq!(ran.requests.len(), 3);
    assert!(ran.requests[2].response_format.is_some());
}

#[tokio::test]
async fn a_block_written_twice_is_applied_once() {
    let block = "pkg/math.py\n<<<<<<< SEARCH\n    if val > 2 ** len_:\n=======\n    if val >= 2 ** \
                 len_:\n>>>>>>> REPLACE\n";
    let ran = run(vec![&format!("Off by one.\n{block}\n{block}")]).await;
    assert_eq!(ran.file, SOURCE.replace("val > 2", "val >= 2"));
    assert_eq!((ran.report.turns, ran.report.tool_calls), (1, 1));
    assert!(!ran.report.report.failure);
}

pub(crate) const FIX: &str = "pkg/math.py\n<<<<<<< SEARCH\n    if val > 2 ** len_:\n=======\n    if val >= 2 ** len_:\n>>>>>>> REPLACE";

#[tokio::test]
async fn several_samples_keep_the_answer_whose_blocks_apply_and_most_agree_on() {
    // The greedy answer only talks, the second copies a line wrongly, the third applies.
    let wrong = FIX.replace("if val > 2", "if value > 2");
    let ran = run_with(vec!["The bound is off by one.", &wrong, FIX], 3).await;
    assert_eq!(ran.file, SOURCE.replace("val > 2", "val >= 2"));
    assert_eq!((ran.report.turns, ran.report.tool_calls), (1, 1));
    // The first answer as the profile gives it; the others sampled, each with its seed.
    let drawn: Vec<_> = ran
        .requests
        .iter()
        .map(|r| (r.temperature, r.seed))
        .collect();
    assert_eq!(
        drawn,
        [
            (None, None),
            (Some(0.8), Some(1001)),
            (Some(0.8), Some(1002))
        ]
    );
    assert!(
        ran.requests
            .iter()
            .all(|r| r.messages == ran.requests[0].messages)
    );
    let notes: Vec<&str> = ran
        .events
        .iter()
        .filter_map(|e| match e {
            SessionEvent::Note { text } => Some(text.as_str()),
            _ => None,
        })
        .collect();
    assert!(
        notes.iter().any(|n| n.starts_with(
            "drew 3 answers: 1 with blocks that all apply; kept answer 3 (its change made by \
             1 of them). Answers 1: no block; 2: 0 block(s) apply, 1 refused (the SEARCH part \
             of the block for `pkg/math.py` is not in the file"
        ) && n.ends_with("; 3: 1 block(s) apply")),
        "{notes:?}"
    );
    // The turn's recorded answer is the one kept, with every answer's tokens.
    let kept = ran.events.iter().find_map(|e| match e {
        SessionEvent::TurnCompleted { message, .. } => Some(message.to_string()),
        _ => None,
    });
    assert!(kept.is_some_and(|m| m.contains("val >= 2")));

    // Two answers agree on another change than the greedy one: the majority is kept,
    // however its blocks' blank lines and line ends are written.
    let other = FIX.replace(">= 2 ** len_", "> 2 ** len_ - 1");
    let other_spaced = other.replace("len_ - 1:", "len_ - 1:   \n");
    let ran = run_with(vec![FIX, &other, &other_spaced], 3).await;
    assert_eq!(ran.file, SOURCE.replace("2 ** len_:", "2 ** len_ - 1:"));
}

#[tokio::test]
async fn a_drawing_whose_blocks_all_fail_is_drawn_again_without_the_refusal() {
    // Both answers of the first drawing copy the line wrongly: nothing applies, so the next
    // turn draws again from the same conversation — sampled, with seeds of its own — instead
    // of showing the model its refused answer and the refusal (which a small model repeats).
    let wrong = FIX.replace("if val > 2", "if value > 2");
    let wronger = FIX.replace("if val > 2", "if v > 2");
    let ran = run_with(vec![&wrong, &wronger, FIX, FIX], 2).await;
    assert_eq!(ran.file, SOURCE.replace("val > 2", "val >= 2"));
    assert_eq!((ran.report.turns, ran.report.tool_calls), (2, 1));
    let drawn: Vec<_> = ran
        .requests
        .iter()
        .map(|r| (r.temperature, r.seed))
        .collect();
    assert_eq!(
        drawn,
        [
            (None, None),
            (Some(0.8), Some(1001)),
            (Some(0.8), Some(2000)),
            (Some(0.8), Some(2001))
        ]
    );
    assert!(
        ran.requests
            .iter()
            .all(|r| r.messages == ran.requests[0].messages),
        "a redrawn turn saw other messages: {:?}",
        ran.requests[2].messages
    );
    assert!(ran.events.iter().any(|e| matches!(
        e,
        SessionEvent::Note { text } if text.starts_with("no drawn answer has a block that applies")
    )));

    // One answer per turn: the refusal is the model's to answer, as before.
    let ran = run_with(vec![&wrong, FIX], 1).await;
    assert_eq!(ran.file, SOURCE.replace("val > 2", "val >= 2"));
    assert!(
        ran.requests[1]
            .messages
            .iter()
            .any(|m| m.content.starts_with("These edit blocks were not applied"))
    );
}

#[tokio::test]
async fn answers_without_blocks_are_drawn_again_twice_then_asked_for_the_change() {
    // Three drawings whose answers only talk: the second and third turns are drawn again from
    // the same conversation; after two redraws the model is asked to make the change (the
    // question of an unbacked success), and its answer to that applies.
    let talk = "The bound is off by one; the fix is done.";
    let ran = run_with(vec![talk, talk, talk, talk, talk, talk, FIX, FIX], 2).await;
    assert_eq!(ran.file, SOURCE.replace("val > 2", "val >= 2"));
    assert_eq!(ran.report.turns, 4);
    let first = &ran.requests[0].messages;
    assert!(ran.requests[..6].iter().all(|r| &r.messages == first));
    assert_eq!(
        ran.requests[6].messages.len(),
        first.len() + 2,
        "the fourth turn answers the question"
    );
    let redraws = ran
        .events
        .iter()
        .filter(|e| matches!(e, SessionEvent::Note { text } if text.starts_with("no drawn answer")))
        .count();
    assert_eq!(redraws, 2);
}

/// Tests that pass when `pkg/math.py` contains `passing` (what the probe was given).
struct Probe {
    passing: &'static str,
    seen: Mutex<Vec<Vec<(String, String)>>>,
}

impl trellis_agents::TestProbe for Probe {
    fn run(
        &self,
        files: Vec<(String, String)>,
        _cancel: tokio_util::sync::CancellationToken,
    ) -> futures::future::BoxFuture<'_, Option<trellis_agents::TestOutcome>> {
        let passed = files.iter().any(|(_, text)| text.contains(self.passing));
        self.seen.lock().unwrap().push(files);
        Box::pin(async move {
            Some(trellis_agents::TestOutcome {
                passed,
                failures: if passed {
                    Default::default()
                } else {
                    ["FAILED test_math.py::test_bits".to_owned()].into()
                },
            })
        })
    }

    fn command(&self) -> String {
        "pytest".into()
    }
}

#[tokio::test]
async fn tested_samples_keep_the_change_that_breaks_no_test_over_the_majority() {
    let other = FIX.replace(">= 2 ** len_", "> 2 ** len_ - 1");
    let probe = Arc::new(Probe {
        passing: "val >= 2",
        seen: Mutex::new(Vec::new()),
    });
    // Two answers agree on a change the tests fail; the third passes them.
    let ran = run_probed(vec![&other, &other, FIX], 3, Some(probe.clone())).await;
    assert_eq!(ran.file, SOURCE.replace("val > 2", "val >= 2"));
    // The files as they are, then each different change once, with the whole file's text.
    let seen = probe.seen.lock().unwrap().clone();
    assert_eq!(seen.len(), 3, "{seen:?}");
    assert!(seen[0].is_empty());
    assert_eq!(
        seen[2],
        [(
            "pkg/math.py".to_owned(),
            SOURCE.replace("val > 2", "val >= 2")
        )]
    );
    let note = ran.events.iter().find_map(|e| match e {
        SessionEvent::Note { text } if text.starts_with("tested") => Some(text.clone()),
        _ => None,
    });
    assert_eq!(
        note.as_deref(),
        Some(
            "tested the answers with `pytest`: as they are: fail (1 failures); answer 1: \
             no new failure; answer 3: no new failure, 1 fixed"
        )
    );
}

#[tokio::test]
async fn an_answer_with_the_whole_function_in_a_fence_replaces_it() {
    // No block: the changed function written whole, as small models often do.
    let ran = run(vec![
        "The bound is off by one.\n\n```python\ndef bits(val, len_):\n    if val >= 2 ** len_:\n        raise ValueError(val)\n    return val\n```",
    ])
    .await;
    assert_eq!(ran.file, SOURCE.replace("val > 2", "val >= 2"));
    assert!(!ran.report.report.failure);
    assert_eq!((ran.report.turns, ran.report.tool_calls), (1, 1));
    assert_eq!(
        edits(&ran.events),
        [("edit_file".to_owned(), ToolStatus::Ok)]
    );
}
