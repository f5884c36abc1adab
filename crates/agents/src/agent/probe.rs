//! What a drawing role runs its answers against (the runtime provides it): the project's tests
//! (`test_samples`) and the scripts that show the problem (`reproduce`), each in a scratch copy
//! of the workspace with some files replaced.

use std::collections::BTreeSet;

use futures::future::BoxFuture;
use tokio_util::sync::CancellationToken;

/// What the project's tests said of a set of files.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TestOutcome {
    /// Whether the test command passed.
    pub passed: bool,
    /// The failures it printed (a failing test's name, an error line), one per entry.
    pub failures: BTreeSet<String>,
}

impl TestOutcome {
    /// How many failures `self` has that `before` did not: 0 when it passes; at least 1 when
    /// it fails and `before` passed.
    pub fn new_failures(&self, before: &TestOutcome) -> usize {
        if self.passed {
            return 0;
        }
        let new = self.failures.difference(&before.failures).count();
        if before.passed { new.max(1) } else { new }
    }

    /// How many of `before`'s failures `self` no longer has: all of them (at least 1) when
    /// it passes and `before` did not.
    pub fn fixed(&self, before: &TestOutcome) -> usize {
        if before.passed {
            return 0;
        }
        if self.passed {
            return before.failures.len().max(1);
        }
        before.failures.difference(&self.failures).count()
    }
}

/// Runs the project's tests with some files' text replaced, never touching the workspace
/// (the runtime's runs them in a scratch copy of it): what `test_samples` ranks answers by.
pub trait TestProbe: Send + Sync {
    /// The test command's outcome with each `(path, text)` of `files` in place of the
    /// workspace's file; `None` when the tests could not be run at all.
    fn run(
        &self,
        files: Vec<(String, String)>,
        cancel: CancellationToken,
    ) -> BoxFuture<'_, Option<TestOutcome>>;

    /// The command, as the notes name it.
    fn command(&self) -> String;

    /// The language of the scripts a `reproduce` role writes for this project; `None` (the
    /// default): none are written.
    fn script_language(&self) -> Option<ScriptLanguage> {
        None
    }

    /// Runs `script` (written to [`ScriptLanguage::file`]) in a scratch copy of the workspace
    /// with each `(path, text)` of `files` in place; `None` when it could not be run (no
    /// script language, killed by the time limit).
    fn run_script(
        &self,
        files: Vec<(String, String)>,
        script: String,
        cancel: CancellationToken,
    ) -> BoxFuture<'_, Option<ScriptRun>> {
        let _ = (files, script, cancel);
        Box::pin(async { None })
    }
}

/// The language a project's reproduction scripts are written in, and how the probe runs one.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ScriptLanguage {
    /// Run as `python3 -B .trellis-repro.py` from the copy's root.
    Python,
    /// Run as `node .trellis-repro.cjs` from the copy's root (CommonJS: `require`).
    JavaScript,
}

impl ScriptLanguage {
    /// The language's name in the request.
    pub fn name(self) -> &'static str {
        match self {
            Self::Python => "Python",
            Self::JavaScript => "JavaScript (Node.js, CommonJS `require`)",
        }
    }

    /// The fence tag the request asks for.
    pub(crate) fn tag(self) -> &'static str {
        match self {
            Self::Python => "python",
            Self::JavaScript => "javascript",
        }
    }

    /// The fence tags an answer's script may carry (or none).
    pub(crate) fn tags(self) -> &'static [&'static str] {
        match self {
            Self::Python => &["", "python", "py", "python3"],
            Self::JavaScript => &["", "javascript", "js", "node", "cjs"],
        }
    }

    /// The file a script is written to, at the copy's root.
    pub fn file(self) -> &'static str {
        match self {
            Self::Python => ".trellis-repro.py",
            Self::JavaScript => ".trellis-repro.cjs",
        }
    }

    /// The command that runs the script, from the copy's root.
    pub fn command(self) -> String {
        match self {
            Self::Python => format!("python3 -B {}", self.file()),
            Self::JavaScript => format!("node {}", self.file()),
        }
    }

    /// Whether a failed run's output shows it failed on one of its assertions — the check
    /// of the result the task asks for — rather than on anything else: a script that does
    /// not parse, imports what does not exist, or calls the project's code wrongly (a
    /// `TypeError` of its own making) shows nothing about the problem.
    pub fn failed_on_assertion(self, output: &str) -> bool {
        output.lines().any(|l| {
            let l = l.trim_start();
            l.starts_with("AssertionError")
                || (self == Self::JavaScript && l.contains("ERR_ASSERTION"))
        })
    }
}

/// What running a script said.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ScriptRun {
    /// Whether it exited 0 in time.
    pub passed: bool,
    /// The end of its output (stdout and stderr).
    pub output: String,
}
