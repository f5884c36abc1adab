//! The project's test command: configured (`agents.test_command`) or detected from the
//! repository, run by the runtime after the test role's agent so that the stage's verdict
//! is the real exit status, not the model's claim.

use std::path::Path;
use std::process::Stdio;

use serde::Serialize;
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;
use trellis_tools::{Registry, ToolEnv};

/// The registry role the runtime runs the test command as (allowed `shell` only).
pub const TEST_RUNNER: &str = "test_runner";

/// A test command and why it was chosen.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct TestCommand {
    /// The shell command.
    pub command: String,
    /// Where it came from (`agents.test_command`, `Cargo.toml`, …).
    pub source: String,
}

fn python_has_pytest() -> bool {
    std::process::Command::new("python3")
        .args(["-c", "import pytest"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// Whether the files at the top of `dir` make it a Python project.
fn is_python(dir: &Path) -> bool {
    [
        "pyproject.toml",
        "setup.py",
        "setup.cfg",
        "pytest.ini",
        "tox.ini",
    ]
    .iter()
    .any(|f| dir.join(f).exists())
        || std::fs::read_dir(dir).is_ok_and(|entries| {
            entries.flatten().any(|e| {
                let n = e.file_name().to_string_lossy().into_owned();
                (n.starts_with("test_") && n.ends_with(".py")) || n == "tests"
            })
        })
}

/// The language of the scripts that show a problem (role setting `reproduce`) for the
/// project at `dir`: Python for a Python project, JavaScript for one with a `package.json`.
pub fn script_language(dir: &Path) -> Option<trellis_agents::ScriptLanguage> {
    if is_python(dir) {
        Some(trellis_agents::ScriptLanguage::Python)
    } else if dir.join("package.json").exists() {
        Some(trellis_agents::ScriptLanguage::JavaScript)
    } else {
        None
    }
}

/// The configured command, else the one the project's instructions name (`AGENTS.md`:
/// "run `make test`"), else one detected from the files at the top of `dir`.
pub fn detect(
    dir: &Path,
    configured: Option<&str>,
    instructions: &crate::instructions::Instructions,
) -> Option<TestCommand> {
    if let Some(c) = configured.filter(|c| !c.trim().is_empty()) {
        return Some(TestCommand {
            command: c.trim().to_owned(),
            source: "agents.test_command".into(),
        });
    }
    let mut passed_over = None;
    if let Some((command, file)) = instructions.test_command() {
        match missing_program(&command, dir) {
            None => {
                return Some(TestCommand {
                    command,
                    source: file.display().to_string(),
                });
            }
            // A command that cannot start here (a tool the file assumes, not installed)
            // would fail every test run: the detected one is used, and the record says why.
            Some(program) => {
                passed_over = Some(format!(
                    "{}'s `{command}` not used: `{program}` is not installed (not on PATH)",
                    file.display()
                ));
            }
        }
    }
    let detected = detect_from_files(dir);
    match passed_over {
        None => detected,
        Some(why) => detected.map(|c| TestCommand {
            source: format!("{}; {why}", c.source),
            ..c
        }),
    }
}

/// A program `command` needs that is not installed: its first word after any `NAME=value`
/// assignments when that is neither on `PATH` nor a file under `dir` (`./gradlew`), and for
/// `make TARGET` the first word of each line of the target's recipe in `dir/Makefile` (a
/// `make test` that runs `pixi run test-all`). `None` when all are there, or when a first
/// word is something the shell runs itself (`cd`, `source`, a subshell) or a variable.
fn missing_program(command: &str, dir: &Path) -> Option<String> {
    let mut words = command
        .split_whitespace()
        .skip_while(|w| w.contains('=') && !w.starts_with('='));
    let program = words.next()?;
    if let Some(missing) = not_installed(program, dir) {
        return Some(missing);
    }
    if program == "make"
        && let Some(target) = words.next().filter(|t| !t.starts_with('-'))
        && let Ok(makefile) = std::fs::read_to_string(dir.join("Makefile"))
    {
        return recipe(&makefile, target).iter().find_map(|line| {
            line.split_whitespace()
                .next()
                .and_then(|p| not_installed(p, dir))
        });
    }
    None
}

/// `program` when it is not installed (see [`missing_program`]).
fn not_installed(program: &str, dir: &Path) -> Option<String> {
    const SHELL: &[&str] = &[
        "cd", "source", ".", "export", "set", "exec", "env", "time", "echo", "test", "[", "(", "{",
        "!", "true", "false", "if", "for", "while",
    ];
    if SHELL.contains(&program) || program.starts_with(['(', '$', '"', '\'', '`']) {
        return None;
    }
    let found = if program.contains('/') {
        dir.join(program).exists()
    } else {
        trellis_sandbox::find_on_path(program).is_some()
    };
    (!found).then(|| program.to_owned())
}

/// The command lines of `target`'s recipe in `makefile` (the tab-indented lines after
/// `target:`), without make's `@`, `-` and `+` prefixes.
fn recipe<'a>(makefile: &'a str, target: &str) -> Vec<&'a str> {
    let mut lines = makefile.lines().skip_while(|l| {
        l.split_once(':')
            .is_none_or(|(names, _)| !names.split_whitespace().any(|n| n == target))
    });
    if lines.next().is_none() {
        return Vec::new();
    }
    lines
        .take_while(|l| l.starts_with('\t'))
        .map(|l| l.trim_start_matches(['\t', '@', '-', '+', ' ']))
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .collect()
}

/// The test command the files at the top of `dir` call for.
fn detect_from_files(dir: &Path) -> Option<TestCommand> {
    let has = |f: &str| dir.join(f).exists();
    let found = |command: &str, source: &str| {
        Some(TestCommand {
            command: command.into(),
            source: source.into(),
        })
    };
    if has("Cargo.toml") {
        return found("cargo test --quiet", "Cargo.toml");
    }
    if has("go.mod") {
        return found("go test ./...", "go.mod");
    }
    if has("package.json")
        && std::fs::read_to_string(dir.join("package.json"))
            .ok()
            .and_then(|t| serde_json::from_str::<Value>(&t).ok())
            .is_some_and(|v| v["scripts"]["test"].is_string())
    {
        return found("npm test --silent", "package.json scripts.test");
    }
    let python = is_python(dir);
    // `-B`: no bytecode files. Agents edit fast: a same-size edit within the second of the
    // previous run would otherwise be served from a stale `.pyc`.
    // `--continue-on-collection-errors`: a module that cannot be imported (an old project's
    // bench or plugin module on a newer Python) would otherwise stop the whole run before a
    // single test ran, and every change would look as good as no change.
    if python {
        return if python_has_pytest() {
            found(
                "python3 -B -m pytest -q -p no:cacheprovider --continue-on-collection-errors",
                "Python project (pytest)",
            )
        } else {
            found(
                "python3 -B -m unittest discover -v",
                "Python project (unittest)",
            )
        };
    }
    if std::fs::read_to_string(dir.join("Makefile"))
        .is_ok_and(|m| m.lines().any(|l| l.starts_with("test:")))
    {
        return found("make test", "Makefile test target");
    }
    None
}

/// The result of running the test command.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct TestRun {
    /// The command.
    pub command: TestCommand,
    /// Whether it passed (exit 0, no timeout).
    pub passed: bool,
    /// The exit code (`None` if killed or refused).
    pub exit_code: Option<i32>,
    /// The end of its output (stdout and stderr).
    pub output: String,
    /// Lines that look like failures (`FAILED`, `FAIL:`, `Error`, `panicked`, `assert`).
    pub failures: Vec<String>,
}

/// Runs `command` through the registry's `shell` tool (recorded and policy-checked like an
/// agent's call) in the environment's workspace.
pub async fn run(
    registry: &Registry,
    env: &ToolEnv,
    command: &TestCommand,
    timeout_secs: u64,
    cancel: CancellationToken,
) -> TestRun {
    let result = registry
        .call(
            env,
            TEST_RUNNER,
            "shell",
            json!({ "command": command.command, "timeout_secs": timeout_secs }),
            cancel,
        )
        .await;
    let data = result.data.clone().unwrap_or(Value::Null);
    let exit_code = data
        .get("exitCode")
        .and_then(Value::as_i64)
        .map(|c| c as i32);
    let timed_out = data
        .get("timedOut")
        .and_then(Value::as_bool)
        .unwrap_or(false);
    let mut output = String::new();
    for k in ["stdout", "stderr"] {
        if let Some(t) = data.get(k).and_then(Value::as_str)
            && !t.trim().is_empty()
        {
            output.push_str(t.trim_end());
            output.push('\n');
        }
    }
    if output.is_empty() {
        output = result.content.clone();
    }
    let failures = output
        .lines()
        .filter(|l| {
            let t = l.trim_start();
            t.starts_with("FAIL")
                || t.starts_with("ERROR")
                || t.contains("panicked at")
                || t.starts_with("AssertionError")
                || t.contains("Error:")
                || t.starts_with("test result: FAILED")
        })
        .take(30)
        .map(|l| crate::text::clip(l.trim(), 300))
        .collect();
    TestRun {
        command: command.clone(),
        passed: !result.is_error && exit_code == Some(0) && !timed_out,
        exit_code,
        output: tail(&output, 6000),
        failures,
    }
}

/// The last `max` bytes of `text` (on a char boundary).
fn tail(text: &str, max: usize) -> String {
    if text.len() <= max {
        return text.to_owned();
    }
    let mut start = text.len() - max;
    while !text.is_char_boundary(start) {
        start += 1;
    }
    format!("[… {} bytes cut]\n{}", start, &text[start..])
}

/// The longest a probe's test run may take (or `agents.test_timeout_secs` when shorter): a
/// suite that takes longer is not run for every drawn answer.
pub const PROBE_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(120);

/// Top-level directories a scratch copy links to instead of copying (installed dependencies
/// and build output: large, and read-only to the tests).
const LINKED: &[&str] = &["node_modules", ".venv", "venv", "target"];

/// Copies the tree at `from` into `to` for a test run: without `.git` and `.trellis`, the
/// [`LINKED`] top-level directories as symlinks, symlinks as symlinks.
fn copy_for_tests(from: &Path, to: &Path, top: bool) -> std::io::Result<()> {
    std::fs::create_dir_all(to)?;
    for entry in std::fs::read_dir(from)? {
        let entry = entry?;
        let name = entry.file_name();
        let (src, dst) = (entry.path(), to.join(&name));
        let kind = entry.file_type()?;
        if name == ".git" || name == ".trellis" {
            continue;
        }
        if kind.is_symlink() {
            std::os::unix::fs::symlink(std::fs::read_link(&src)?, &dst)?;
        } else if kind.is_dir() && top && LINKED.iter().any(|l| name == *l) {
            std::os::unix::fs::symlink(&src, &dst)?;
        } else if kind.is_dir() {
            copy_for_tests(&src, &dst, false)?;
        } else {
            std::fs::copy(&src, &dst)?;
        }
    }
    Ok(())
}

/// A failure line as a key that does not change with what the failure printed: pytest's
/// `FAILED a.py::t - message` is `FAILED a.py::t`. Summary lines (`FAILED (failures=2)`,
/// counts) are not failures of their own: `None`.
fn failure_key(line: &str) -> Option<String> {
    let key = line.split(" - ").next().unwrap_or(line).trim();
    (!key.starts_with("FAILED (") && !key.starts_with("test result:")).then(|| key.to_owned())
}

/// The project's test command run on a scratch copy of a workspace with some files
/// replaced: the [`TestProbe`](trellis_agents::TestProbe) of a role that tests its drawn
/// answers (`test_samples`). The workspace itself is never written.
pub struct ScratchProbe {
    /// The registry the command runs through (as [`TEST_RUNNER`]).
    pub registry: std::sync::Arc<Registry>,
    /// The agent's environment (its workspace is the one copied).
    pub env: ToolEnv,
    /// The command.
    pub command: TestCommand,
    /// Its time limit.
    pub timeout_secs: u64,
    /// The secret patterns of the copy's workspace (the run's).
    pub secrets: trellis_tools::SecretsConfig,
    /// The language of the scripts that show the problem (`reproduce`), if the project has
    /// one ([`script_language`]).
    pub scripts: Option<trellis_agents::ScriptLanguage>,
}

impl ScratchProbe {
    /// `command` run in a scratch copy of the workspace with each `(path, text)` of `files`
    /// written over it; `None` when the copy could not be made, or the command was killed (the
    /// time limit) or refused: not a verdict on the files.
    async fn in_copy(
        &self,
        files: Vec<(String, String)>,
        command: &TestCommand,
        cancel: CancellationToken,
    ) -> Option<TestRun> {
        let root = self.env.workspace.root().to_path_buf();
        let scratch = tempfile::Builder::new()
            .prefix("trellis-probe-")
            .tempdir()
            .ok()?;
        let dir = scratch.path().to_path_buf();
        let copied = tokio::task::spawn_blocking(move || -> std::io::Result<()> {
            copy_for_tests(&root, &dir, true)?;
            for (path, text) in files {
                std::fs::write(dir.join(path), text)?;
            }
            Ok(())
        })
        .await;
        if !matches!(copied, Ok(Ok(()))) {
            return None;
        }
        let mut env = self.env.clone();
        env.workspace = trellis_tools::Workspace::new(scratch.path(), &self.secrets).ok()?;
        // The copy links the workspace's build and dependency directories: the sandbox
        // lets the tests write those (a build's output), nothing else of the workspace.
        let mut config = (*env.config).clone();
        let root = self.env.workspace.root();
        config
            .sandbox
            .writable
            .extend(LINKED.iter().map(|l| root.join(l)).filter(|p| p.is_dir()));
        env.config = std::sync::Arc::new(config);
        // The project's own command: `ask` is taken as approved; `deny` still applies.
        env.interaction = std::sync::Arc::new(trellis_tools::NonInteractive { approve: true });
        let run = run(&self.registry, &env, command, self.timeout_secs, cancel).await;
        run.exit_code?;
        Some(run)
    }
}

impl trellis_agents::TestProbe for ScratchProbe {
    fn run(
        &self,
        files: Vec<(String, String)>,
        cancel: CancellationToken,
    ) -> futures::future::BoxFuture<'_, Option<trellis_agents::TestOutcome>> {
        Box::pin(async move {
            let run = self.in_copy(files, &self.command, cancel).await?;
            Some(trellis_agents::TestOutcome {
                passed: run.passed,
                failures: run.failures.iter().filter_map(|l| failure_key(l)).collect(),
            })
        })
    }

    fn command(&self) -> String {
        self.command.command.clone()
    }

    fn script_language(&self) -> Option<trellis_agents::ScriptLanguage> {
        self.scripts
    }

    fn run_script(
        &self,
        mut files: Vec<(String, String)>,
        script: String,
        cancel: CancellationToken,
    ) -> futures::future::BoxFuture<'_, Option<trellis_agents::ScriptRun>> {
        Box::pin(async move {
            let lang = self.scripts?;
            files.push((lang.file().to_owned(), script));
            let command = TestCommand {
                command: lang.command(),
                source: "a script that shows the problem".into(),
            };
            let run = self.in_copy(files, &command, cancel).await?;
            Some(trellis_agents::ScriptRun {
                passed: run.passed,
                output: run.output,
            })
        })
    }
}

#[cfg(test)]
mod probe_tests {
    use super::*;

    #[test]
    fn failure_keys_drop_messages_and_summaries() {
        assert_eq!(
            failure_key("FAILED tests/a.py::t - assert 1 == 2").as_deref(),
            Some("FAILED tests/a.py::t")
        );
        assert_eq!(
            failure_key("FAIL: test_x (m.C)").as_deref(),
            Some("FAIL: test_x (m.C)")
        );
        assert_eq!(failure_key("FAILED (failures=2)"), None);
    }

    #[tokio::test]
    async fn the_probe_tests_a_change_in_a_copy_and_leaves_the_workspace_alone() {
        use trellis_agents::TestProbe;
        let ws = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        std::fs::write(ws.path().join("a.py"), "x = 1\n").unwrap_or_else(|e| panic!("{e}"));
        let mut registry = Registry::builtin(&Default::default());
        registry.allow(TEST_RUNNER, ["shell"]);
        let env = ToolEnv::new(
            trellis_tools::Workspace::new(ws.path(), &Default::default())
                .unwrap_or_else(|e| panic!("{e}")),
            std::sync::Arc::new(trellis_tools::ToolsConfig::default()),
            std::sync::Arc::new(trellis_tools::NonInteractive { approve: false }),
        );
        let probe = ScratchProbe {
            registry: std::sync::Arc::new(registry),
            env,
            command: TestCommand {
                command: "grep -q 'x = 2' a.py || { echo 'FAILED t.py::x - not 2'; exit 1; }"
                    .into(),
                source: "test".into(),
            },
            timeout_secs: 30,
            secrets: Default::default(),
            scripts: Some(trellis_agents::ScriptLanguage::Python),
        };
        let before = probe.run(Vec::new(), CancellationToken::new()).await;
        assert_eq!(
            before.map(|o| (o.passed, o.failures.into_iter().collect::<Vec<_>>())),
            Some((false, vec!["FAILED t.py::x".to_owned()]))
        );
        let after = probe
            .run(
                vec![("a.py".into(), "x = 2\n".into())],
                CancellationToken::new(),
            )
            .await;
        assert!(after.is_some_and(|o| o.passed && o.failures.is_empty()));
        // A script that shows the problem: run by python3 from the copy's root, importing
        // the copy's module, with the change or without it.
        let script = "import a\nassert a.x == 2, a.x\n".to_owned();
        let now = probe
            .run_script(Vec::new(), script.clone(), CancellationToken::new())
            .await
            .unwrap_or_else(|| panic!("the script ran"));
        assert!(
            !now.passed && now.output.contains("AssertionError: 1"),
            "{now:?}"
        );
        let fixed = probe
            .run_script(
                vec![("a.py".into(), "x = 2\n".into())],
                script,
                CancellationToken::new(),
            )
            .await;
        assert!(fixed.is_some_and(|r| r.passed));
        assert_eq!(
            std::fs::read_to_string(ws.path().join("a.py")).unwrap_or_default(),
            "x = 1\n"
        );
        assert!(!ws.path().join(".trellis-repro.py").exists());
    }

    #[test]
    fn scripts_are_written_in_the_projects_language() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(script_language(dir.path()), None);
        std::fs::write(dir.path().join("package.json"), "{}").unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(
            script_language(dir.path()),
            Some(trellis_agents::ScriptLanguage::JavaScript)
        );
        std::fs::write(dir.path().join("pyproject.toml"), "").unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(
            script_language(dir.path()),
            Some(trellis_agents::ScriptLanguage::Python)
        );
    }

    #[test]
    fn a_scratch_copy_leaves_out_git_and_links_dependencies() {
        let from = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let to = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        for dir in [".git", "node_modules/x", "src/pkg"] {
            std::fs::create_dir_all(from.path().join(dir)).unwrap_or_else(|e| panic!("{e}"));
        }
        std::fs::write(from.path().join("src/pkg/a.py"), "x = 1\n")
            .unwrap_or_else(|e| panic!("{e}"));
        copy_for_tests(from.path(), to.path(), true).unwrap_or_else(|e| panic!("{e}"));
        assert!(!to.path().join(".git").exists());
        assert!(to.path().join("node_modules").is_symlink());
        assert_eq!(
            std::fs::read_to_string(to.path().join("src/pkg/a.py")).unwrap_or_default(),
            "x = 1\n"
        );
        assert!(!to.path().join("src").is_symlink());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::instructions::{DEFAULT_NAMES, Instructions};

    /// A Python project whose AGENTS.md names `command` as the way to run its tests.
    fn project(command: &str) -> (tempfile::TempDir, Instructions) {
        let repo = tempfile::tempdir().expect("test");
        let r = repo.path();
        std::fs::write(r.join("pyproject.toml"), "[project]\nname = \"p\"\n").expect("test");
        std::fs::write(
            r.join("AGENTS.md"),
            format!("# Notes\n\n## Testing\n- Run the tests: `{command}`\n"),
        )
        .expect("test");
        let found = Instructions::discover(r, None, &DEFAULT_NAMES);
        (repo, found)
    }

    #[test]
    fn the_instructions_test_command_is_used_when_its_program_is_installed() {
        let (repo, found) = project("python3 -m pytest -x");
        let c = detect(repo.path(), None, &found).expect("a command");
        assert_eq!(c.command, "python3 -m pytest -x");
        assert_eq!(c.source, "AGENTS.md");
    }

    #[test]
    fn a_test_command_whose_program_is_not_installed_gives_way_to_the_detected_one() {
        // The repository's own script, named but not there.
        let (repo, found) = project("./run_tests.sh --all");
        let c = detect(repo.path(), None, &found).expect("a command");
        assert!(c.command.starts_with("python3 -B -m "), "{c:?}");
        assert!(
            c.source.ends_with(
                "AGENTS.md's `./run_tests.sh --all` not used: `./run_tests.sh` is not \
                 installed (not on PATH)"
            ),
            "{c:?}"
        );
        // A make target whose recipe runs a program that is not installed: the same.
        let (repo, found) = project("make test");
        std::fs::write(
            repo.path().join("Makefile"),
            "default: help\n\ntest:\n\t@echo testing\n\tpixi-not-installed-here run test-all\n\nlint:\n\truff .\n",
        )
        .expect("test");
        let c = detect(repo.path(), None, &found).expect("a command");
        assert!(
            c.source
                .contains("`pixi-not-installed-here` is not installed"),
            "{c:?}"
        );
        // A script of the repository's own counts as installed.
        let (repo, found) = project("./run_tests.sh --fast");
        std::fs::write(repo.path().join("run_tests.sh"), "#!/bin/sh\n").expect("test");
        let c = detect(repo.path(), None, &found).expect("a command");
        assert_eq!(c.command, "./run_tests.sh --fast");
        // Assignments before the program are skipped.
        assert_eq!(
            missing_program("CI=1 LANG=C ./nope.sh", repo.path()).as_deref(),
            Some("./nope.sh")
        );
    }
}
