//! A `reproduce` role asks for scripts that show the problem, keeps those that fail on the
//! files as they are on an assertion (not broken themselves), and keeps the drawn change most of them pass
//! with — over the majority, and drawing once more when no answer passes one.

use std::sync::{Arc, Mutex};

use trellis_agents::{ScriptLanguage, ScriptRun, TestOutcome, TestProbe};

use super::blocks::{FIX, Ran, SOURCE, notes, run_configured};

/// A script that shows the problem: it passes when `pkg/math.py` holds the fix.
const SHOWS: &str = "```python\nfrom pkg.math import bits\ntry:\n    bits(4, 2)\nexcept ValueError:\n    pass\nelse:\n    raise AssertionError('4 fits in 2 bits')\n```";

/// A script that cannot run: its import does not exist.
const BROKEN: &str = "```python\nimport nosuch\nassert nosuch.bits(4, 2)\n```";

/// Runs scripts as a project would: a script importing `nosuch` is broken; the others pass
/// when the files given hold `val >= 2`.
/// The files a script ran with, and the script.
type ScriptCall = (Vec<(String, String)>, String);

#[derive(Default)]
struct Scripts {
    runs: Mutex<Vec<ScriptCall>>,
}

impl TestProbe for Scripts {
    fn run(
        &self,
        _files: Vec<(String, String)>,
        _cancel: tokio_util::sync::CancellationToken,
    ) -> futures::future::BoxFuture<'_, Option<TestOutcome>> {
        panic!("test_samples is off: the project's tests are not run")
    }

    fn command(&self) -> String {
        "pytest".into()
    }

    fn script_language(&self) -> Option<ScriptLanguage> {
        Some(ScriptLanguage::Python)
    }

    fn run_script(
        &self,
        files: Vec<(String, String)>,
        script: String,
        _cancel: tokio_util::sync::CancellationToken,
    ) -> futures::future::BoxFuture<'_, Option<ScriptRun>> {
        let run = if script.contains("nosuch") {
            ScriptRun {
                passed: false,
                output: "Traceback (most recent call last):\nModuleNotFoundError: No module named 'nosuch'\n".into(),
            }
        } else if files.iter().any(|(_, t)| t.contains("val >= 2")) {
            ScriptRun {
                passed: true,
                output: String::new(),
            }
        } else {
            ScriptRun {
                passed: false,
                output: "Traceback (most recent call last):\nAssertionError: 4 fits in 2 bits\n"
                    .into(),
            }
        };
        self.runs.lock().unwrap().push((files, script));
        Box::pin(async move { Some(run) })
    }
}

async fn run(answers: Vec<&str>, samples: u32, probe: Arc<Scripts>) -> Ran {
    run_configured(answers, Some(probe), false, |role| {
        trellis_agents::RoleSpec {
            samples,
            test_samples: false,
            reproduce: true,
            ..role
        }
    })
    .await
}

#[tokio::test]
async fn the_change_the_kept_scripts_pass_with_is_kept_over_the_majority() {
    // Two answers agree on a change the script fails with; the third passes it. Then the three
    // scripts: one that shows the problem, one broken, and the first again.
    let other = FIX.replace(">= 2 ** len_", "> 2 ** len_ + 1");
    let probe = Arc::new(Scripts::default());
    let ran = run(
        vec![&other, &other, FIX, SHOWS, BROKEN, SHOWS],
        3,
        probe.clone(),
    )
    .await;
    assert_eq!(ran.file, SOURCE.replace("val > 2", "val >= 2"));
    // The scripts are asked for in the same conversation, after the answers, short.
    assert_eq!(ran.requests.len(), 6);
    let first = &ran.requests[0].messages;
    for r in &ran.requests[3..] {
        assert_eq!(r.messages.len(), first.len() + 1);
        assert_eq!(&r.messages[..first.len()], &first[..]);
        assert!(
            r.messages[first.len()]
                .content
                .starts_with("Do not fix anything yet. First write a short Python script")
        );
        assert_eq!(r.max_tokens, Some(512));
    }
    // Each script on the files as they are (the duplicate left out), then the kept script
    // with each different clean change.
    let runs = probe.runs.lock().unwrap().clone();
    assert_eq!(runs.len(), 4, "{runs:?}");
    assert!(runs[..2].iter().all(|(files, _)| files.is_empty()));
    assert!(
        runs[2..]
            .iter()
            .all(|(_, s)| s.starts_with("from pkg.math import bits"))
    );
    let notes = notes(&ran.events);
    assert!(
        notes.iter().any(|n| n.starts_with(
            "asked for 3 scripts that show the problem (`python3 -B .trellis-repro.py`): kept 1."
        ) && n.contains(
            "script 2 (2 lines): fails, not on an assertion (ModuleNotFoundError: No module \
             named 'nosuch')"
        ) && n.contains("script 3: the same as another")
            && n.contains("script 1 (7 lines): an assertion fails as the files are (kept)")),
        "{notes:?}"
    );
    assert!(
        notes.iter().any(
            |n| n == "the scripts that show the problem, passed of 1: answer 1: 0; answer 3: 1"
        ),
        "{notes:?}"
    );
    assert!(
        notes
            .iter()
            .any(|n| n.starts_with("drew 3 answers: 3 with blocks that all apply; kept answer 3"))
    );
}

#[tokio::test]
async fn no_answer_passing_a_kept_script_draws_once_more() {
    let other = FIX.replace(">= 2 ** len_", "> 2 ** len_ + 1");
    let probe = Arc::new(Scripts::default());
    // First drawing: two answers, neither passes; the scripts; the second drawing's second
    // answer passes.
    let ran = run(
        vec![&other, &other, SHOWS, SHOWS, SHOWS, &other, FIX],
        2,
        probe.clone(),
    )
    .await;
    assert_eq!(ran.file, SOURCE.replace("val > 2", "val >= 2"));
    assert_eq!(ran.requests.len(), 7);
    // The second drawing: the same conversation, sampled with seeds of their own.
    let first = &ran.requests[0].messages;
    assert!(ran.requests[5..].iter().all(|r| &r.messages == first));
    let seeds: Vec<Option<u32>> = ran.requests.iter().map(|r| r.seed).collect();
    assert_eq!(
        seeds,
        [
            None,
            Some(1001),
            Some(1500),
            Some(1501),
            Some(1502),
            Some(1002),
            Some(1003)
        ]
    );
    let notes = notes(&ran.events);
    assert!(
        notes
            .iter()
            .any(|n| n == "no drawn answer passes a script that shows the problem: drawing again")
    );
    assert!(
        notes
            .iter()
            .any(|n| n.starts_with("drew 4 answers") && n.contains("kept answer 4"))
    );

    // No script kept (each passes as the files are, or is broken): the drawing is ranked as
    // before and not drawn again.
    let probe = Arc::new(Scripts::default());
    let ran = run(vec![&other, FIX, BROKEN, "no script", BROKEN], 2, probe).await;
    assert_eq!(
        ran.file,
        SOURCE.replace("val > 2 ** len_:", "val > 2 ** len_ + 1:"),
        "the earliest clean answer, as without scripts"
    );
    assert_eq!(ran.requests.len(), 5);
}
