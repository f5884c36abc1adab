//! The task file: one JSON object per line in SWE-bench's instance format, plus the
//! `environment` block that says how to set up and test the repository.

use std::path::{Path, PathBuf};

use serde::Deserialize;
use serde_json::{Map, Value};

use trellis_protocol::canonical::kind_of;

use crate::Error;

/// How a task's repository is set up and tested.
#[derive(Clone, Debug, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Environment {
    /// The language (`python`, `javascript`, …): reported, and handed to the agents' tools.
    pub language: String,
    /// Shell commands run once per `env_key`, in a fresh checkout at the task's
    /// `base_commit`, with `TRELLIS_EVAL_ENV` naming the environment's cache directory.
    #[serde(default)]
    pub setup: Vec<String>,
    /// The test command, with `{tests}` where the space-separated test ids go; run from the
    /// checkout's root with `TRELLIS_EVAL_ENV` set; exit 0 iff every test passed.
    pub test_command: String,
    /// What identifies a set-up environment (repository and version): tasks with the same
    /// key share one.
    pub env_key: String,
}

/// One task.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Task {
    /// Unique id (`owner__repo-123`).
    pub instance_id: String,
    /// The repository: a git URL, or a path (a directory or a git bundle) relative to the
    /// task file's directory.
    pub repo: String,
    /// The commit the task starts from.
    pub base_commit: String,
    /// What the agent is asked to do.
    pub problem_statement: String,
    /// The hidden tests, applied after the agent's change (the agent never sees them).
    pub test_patch: String,
    /// The reference fix (only `trellis eval validate` uses it).
    pub patch: Option<String>,
    /// Tests that must go from failing to passing.
    pub fail_to_pass: Vec<String>,
    /// Tests that must keep passing.
    pub pass_to_pass: Vec<String>,
    /// Setup and test command.
    pub environment: Environment,
    /// The 1-based line of the task file it came from.
    pub line: usize,
}

impl Task {
    /// The repository as a clone source: a URL as written, a path against `base`.
    pub fn repo_source(&self, base: &Path) -> String {
        if self.repo.contains("://") || self.repo.starts_with("git@") {
            self.repo.clone()
        } else {
            let p = PathBuf::from(&self.repo);
            if p.is_absolute() {
                self.repo.clone()
            } else {
                base.join(p).to_string_lossy().into_owned()
            }
        }
    }

    /// The test command for `tests`.
    pub fn test_command(&self, tests: &[String]) -> String {
        let ids: Vec<String> = tests.iter().map(|t| quote(t)).collect();
        self.environment
            .test_command
            .replace("{tests}", &ids.join(" "))
    }
}

/// `s` as one shell word.
pub fn quote(s: &str) -> String {
    if !s.is_empty()
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_./:=@%+,".contains(c))
    {
        s.to_owned()
    } else {
        format!("'{}'", s.replace('\'', r"'\''"))
    }
}

/// Reads and checks a task file. Every problem is reported with its line and field; the
/// first bad line stops the read.
pub fn load(path: &Path) -> Result<Vec<Task>, Error> {
    let text = std::fs::read_to_string(path).map_err(|e| Error::Io {
        what: format!("reading the task file {}", path.display()),
        source: e,
    })?;
    parse(&text, path)
}

/// [`load`] on text already read (`path` names it in errors).
pub fn parse(text: &str, path: &Path) -> Result<Vec<Task>, Error> {
    let mut tasks: Vec<Task> = Vec::new();
    for (i, raw) in text.lines().enumerate() {
        let line = i + 1;
        if raw.trim().is_empty() {
            continue;
        }
        let bad = |field: &str, message: String| Error::Task {
            file: path.to_path_buf(),
            line,
            field: field.to_owned(),
            message,
        };
        let value: Value =
            serde_json::from_str(raw).map_err(|e| bad("", format!("not a JSON object: {e}")))?;
        let Value::Object(obj) = value else {
            return Err(bad("", "not a JSON object".into()));
        };
        let task = task(&obj, line).map_err(|(field, message)| bad(&field, message))?;
        if let Some(first) = tasks.iter().find(|t| t.instance_id == task.instance_id) {
            return Err(bad(
                "instance_id",
                format!(
                    "`{}` is already the id of line {}",
                    task.instance_id, first.line
                ),
            ));
        }
        tasks.push(task);
    }
    if tasks.is_empty() {
        return Err(Error::Task {
            file: path.to_path_buf(),
            line: 0,
            field: String::new(),
            message: "no tasks (one JSON object per line)".into(),
        });
    }
    Ok(tasks)
}

type FieldError = (String, String);

fn task(obj: &Map<String, Value>, line: usize) -> Result<Task, FieldError> {
    let environment = match obj.get("environment") {
        None => return Err(missing("environment")),
        Some(v) => {
            Environment::deserialize(v).map_err(|e| ("environment".to_owned(), e.to_string()))?
        }
    };
    if !environment.test_command.contains("{tests}") {
        return Err((
            "environment.test_command".into(),
            "must contain `{tests}`, where the test ids go".into(),
        ));
    }
    if environment.env_key.trim().is_empty() {
        return Err(("environment.env_key".into(), "must not be empty".into()));
    }
    let fail_to_pass = tests(obj, "FAIL_TO_PASS")?;
    if fail_to_pass.is_empty() {
        return Err((
            "FAIL_TO_PASS".into(),
            "must name at least one test (a task is resolved when these pass)".into(),
        ));
    }
    let base_commit = text(obj, "base_commit")?;
    if base_commit.len() < 7 || !base_commit.chars().all(|c| c.is_ascii_hexdigit()) {
        return Err((
            "base_commit".into(),
            format!("`{base_commit}` is not a commit id (hex, at least 7 digits)"),
        ));
    }
    Ok(Task {
        instance_id: text(obj, "instance_id")?,
        repo: text(obj, "repo")?,
        base_commit,
        problem_statement: text(obj, "problem_statement")?,
        test_patch: text(obj, "test_patch")?,
        patch: match obj.get("patch") {
            None | Some(Value::Null) => None,
            Some(Value::String(s)) => Some(s.clone()),
            Some(_) => return Err(("patch".into(), "must be a string (a unified diff)".into())),
        },
        fail_to_pass,
        pass_to_pass: match obj.get("PASS_TO_PASS") {
            None => Vec::new(),
            Some(_) => tests(obj, "PASS_TO_PASS")?,
        },
        environment,
        line,
    })
}

fn missing(field: &str) -> FieldError {
    (field.to_owned(), "missing".into())
}

fn text(obj: &Map<String, Value>, field: &str) -> Result<String, FieldError> {
    match obj.get(field) {
        None => Err(missing(field)),
        Some(Value::String(s)) if !s.trim().is_empty() => Ok(s.clone()),
        Some(Value::String(_)) => Err((field.to_owned(), "must not be empty".into())),
        Some(v) => Err((
            field.to_owned(),
            format!("must be a string, not {}", kind_of(v)),
        )),
    }
}

/// A list of test ids: a JSON array of strings, or (as SWE-bench's published files have
/// it) a string holding one.
fn tests(obj: &Map<String, Value>, field: &str) -> Result<Vec<String>, FieldError> {
    let bad = |m: String| (field.to_owned(), m);
    let value = match obj.get(field) {
        None => return Err(missing(field)),
        Some(Value::String(s)) => serde_json::from_str::<Value>(s)
            .map_err(|e| bad(format!("a string must hold a JSON list of test ids: {e}")))?,
        Some(v) => v.clone(),
    };
    let Value::Array(items) = value else {
        return Err(bad(format!(
            "must be a list of test ids, not {}",
            kind_of(&value)
        )));
    };
    items
        .into_iter()
        .enumerate()
        .map(|(i, v)| match v {
            Value::String(s) if !s.trim().is_empty() => Ok(s),
            other => Err((
                format!("{field}[{i}]"),
                format!(
                    "must be a test id (a non-empty string), not {}",
                    kind_of(&other)
                ),
            )),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn good() -> Value {
        json!({
            "instance_id": "o__r-1", "repo": "repos/r.bundle", "base_commit": "abc1234",
            "problem_statement": "Fix it.", "test_patch": "diff --git a/t b/t\n",
            "patch": "diff --git a/s b/s\n",
            "FAIL_TO_PASS": ["tests/test_a.py::test_x"], "PASS_TO_PASS": "[\"tests/test_a.py::test_y\"]",
            "environment": {"language": "python", "setup": ["true"],
                "test_command": "python -m pytest {tests}", "env_key": "r-1.0"}
        })
    }

    fn err(lines: &[Value]) -> String {
        let text: Vec<String> = lines.iter().map(Value::to_string).collect();
        parse(&text.join("\n"), Path::new("t.jsonl"))
            .unwrap_err()
            .to_string()
    }

    #[test]
    fn a_good_task_parses_with_both_list_forms() {
        let tasks = parse(&good().to_string(), Path::new("t.jsonl")).unwrap();
        assert_eq!(tasks[0].fail_to_pass, ["tests/test_a.py::test_x"]);
        assert_eq!(tasks[0].pass_to_pass, ["tests/test_a.py::test_y"]);
        assert_eq!(
            tasks[0].test_command(&["a b".into(), "c::d".into()]),
            "python -m pytest 'a b' c::d"
        );
        assert_eq!(tasks[0].repo_source(Path::new("/x")), "/x/repos/r.bundle");
    }

    #[test]
    fn bad_tasks_are_refused_with_line_and_field() {
        let with = |k: &str, v: Value| {
            let mut t = good();
            t[k] = v;
            t
        };
        let without = |k: &str| {
            let mut t = good();
            t.as_object_mut().unwrap().remove(k);
            t
        };
        let cases = [
            (
                vec![good(), without("problem_statement")],
                "line 2, field `problem_statement`: missing",
            ),
            (
                vec![with("FAIL_TO_PASS", json!([]))],
                "field `FAIL_TO_PASS`: must name at least one test",
            ),
            (
                vec![with("FAIL_TO_PASS", json!(["a", 3]))],
                "field `FAIL_TO_PASS[1]`: must be a test id",
            ),
            (
                vec![with("base_commit", json!("main"))],
                "field `base_commit`: `main` is not a commit id",
            ),
            (
                vec![with("repo", json!(5))],
                "field `repo`: must be a string, not a number",
            ),
            (
                vec![good(), good()],
                "line 2, field `instance_id`: `o__r-1` is already the id of line 1",
            ),
        ];
        for (lines, want) in cases {
            let got = err(&lines);
            assert!(got.contains(want), "{got}\n  wanted: {want}");
            assert!(got.starts_with("t.jsonl:"), "{got}");
        }
        let mut no_slot = good();
        no_slot["environment"]["test_command"] = json!("pytest");
        assert!(err(&[no_slot]).contains("environment.test_command"));
        let mut extra = good();
        extra["environment"]["shell"] = json!("zsh");
        assert!(err(&[extra]).contains("unknown field `shell`"));
        assert!(err(&[]).contains("no tasks"));
        let got = parse("{\"a\":", Path::new("t.jsonl"))
            .unwrap_err()
            .to_string();
        assert!(
            got.contains("line 1") && got.contains("not a JSON object"),
            "{got}"
        );
    }
}
