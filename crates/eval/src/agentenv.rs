//! The environment both agents work in: the task's, as its tests run. SWE-bench's agents work
//! inside the task's container, where the project's test runner and dependencies are
//! installed; here the environment is a cached directory (`TRELLIS_EVAL_ENV`) the setup
//! commands filled (a virtualenv, `node_modules`). Without it an agent that runs the tests
//! gets the machine's `python3`, which has no pytest.

use std::path::Path;
use std::time::Duration;

use crate::Result;
use crate::task::Task;
use crate::workdir::{ENV_VAR, must};

/// Variables for an agent's commands: the environment's executables first on `PATH` (every
/// `bin` directory one level down — a virtualenv's — and `node_modules/.bin`), `VIRTUAL_ENV`
/// for a virtualenv, and the variables the test command assigns before its command
/// (`PYTHONPATH=src:. …`), evaluated by bash in `checkout` with `TRELLIS_EVAL_ENV` set.
/// Ordered by name.
pub async fn agent_env(
    task: &Task,
    env_dir: &Path,
    checkout: &Path,
) -> Result<Vec<(String, String)>> {
    let mut vars: Vec<(String, String)> = Vec::new();
    let mut bins: Vec<String> = Vec::new();
    let mut entries: Vec<_> = std::fs::read_dir(env_dir)
        .map(|rd| rd.flatten().map(|e| e.path()).collect())
        .unwrap_or_default();
    entries.sort();
    for dir in entries {
        if dir.join("bin").is_dir() {
            bins.push(dir.join("bin").to_string_lossy().into_owned());
        }
        if dir.join("pyvenv.cfg").is_file() && !vars.iter().any(|(k, _)| k == "VIRTUAL_ENV") {
            vars.push(("VIRTUAL_ENV".into(), dir.to_string_lossy().into_owned()));
        }
    }
    let node_bin = env_dir.join("node_modules").join(".bin");
    if node_bin.is_dir() {
        bins.push(node_bin.to_string_lossy().into_owned());
    }
    let (prefix, names) = leading_assignments(&task.environment.test_command);
    if !names.is_empty() {
        let dir = [(ENV_VAR, env_dir.to_string_lossy().into_owned())];
        let out = must(
            &format!("{prefix} env -0"),
            checkout,
            &dir,
            Duration::from_secs(30),
        )
        .await?;
        for pair in out.stdout.split('\0') {
            if let Some((k, v)) = pair.split_once('=')
                && names.iter().any(|n| n == k)
                && k != "PATH"
            {
                vars.push((k.to_owned(), v.to_owned()));
            }
        }
    }
    if !bins.is_empty() {
        let path = std::env::var("PATH").unwrap_or_default();
        bins.push(path);
        vars.push(("PATH".into(), bins.join(":")));
    }
    vars.sort();
    Ok(vars)
}

/// The assignments before a shell command (`A=1 B="x y" cmd …`): their text as written and
/// their names. Words are split at unquoted blanks; the first word that is not `NAME=…` ends
/// them.
fn leading_assignments(command: &str) -> (String, Vec<String>) {
    let mut names = Vec::new();
    let mut end = 0;
    let mut rest = command;
    loop {
        let trimmed = rest.trim_start();
        let start = command.len() - trimmed.len();
        let word_len = word_length(trimmed);
        let word = &trimmed[..word_len];
        let Some((name, _)) = word.split_once('=') else {
            break;
        };
        let valid = name
            .chars()
            .next()
            .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
            && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
        if !valid {
            break;
        }
        names.push(name.to_owned());
        end = start + word_len;
        rest = &trimmed[word_len..];
    }
    (command[..end].trim().to_owned(), names)
}

/// Bytes of the shell word at the start of `s` (quotes and backslashes respected).
fn word_length(s: &str) -> usize {
    let mut quote: Option<char> = None;
    let mut escaped = false;
    for (i, c) in s.char_indices() {
        if escaped {
            escaped = false;
            continue;
        }
        match (quote, c) {
            (Some('\''), '\'') => quote = None,
            (Some('\''), _) => {}
            (_, '\\') => escaped = true,
            (Some('"'), '"') => quote = None,
            (Some(_), _) => {}
            (None, '\'' | '"') => quote = Some(c),
            (None, c) if c.is_whitespace() => return i,
            (None, _) => {}
        }
    }
    s.len()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn assignments_before_the_command_are_found_with_quotes() {
        let (prefix, names) = leading_assignments(
            r#"PYTHONPATH=src:. NODE_PATH="$TRELLIS_EVAL_ENV/node modules" "$TRELLIS_EVAL_ENV/venv/bin/python" -m pytest X=1 {tests}"#,
        );
        assert_eq!(
            prefix,
            r#"PYTHONPATH=src:. NODE_PATH="$TRELLIS_EVAL_ENV/node modules""#
        );
        assert_eq!(names, vec!["PYTHONPATH", "NODE_PATH"]);
        assert_eq!(
            leading_assignments("python -m pytest {tests}"),
            (String::new(), vec![])
        );
        assert_eq!(
            leading_assignments("A='x y'z"),
            ("A='x y'z".into(), vec!["A".into()])
        );
        // `=` in the command's own arguments, or a name that is not one, ends the prefix.
        assert_eq!(leading_assignments("./x=1 y"), (String::new(), vec![]));
        assert_eq!(leading_assignments(""), (String::new(), vec![]));
    }

    #[tokio::test]
    async fn agents_get_the_environment_the_tests_run_in() {
        let env = tempfile::tempdir().unwrap();
        let checkout = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(env.path().join("venv/bin")).unwrap();
        std::fs::write(env.path().join("venv/pyvenv.cfg"), "home = /usr/bin\n").unwrap();
        std::fs::create_dir_all(env.path().join("node_modules/.bin")).unwrap();
        let line = serde_json::json!({
            "instance_id": "o__r-1", "repo": "r.bundle", "base_commit": "abc1234",
            "problem_statement": "Fix it.", "test_patch": "diff --git a/t b/t\n",
            "FAIL_TO_PASS": ["t::x"], "PASS_TO_PASS": [],
            "environment": {"language": "python", "env_key": "r-1",
                "test_command": "PYTHONPATH=src:. NODE_PATH=\"$TRELLIS_EVAL_ENV/node_modules\" \
                                 \"$TRELLIS_EVAL_ENV/venv/bin/python\" -m pytest {tests}"}
        });
        let task = &crate::task::parse(&line.to_string(), Path::new("t.jsonl")).unwrap()[0];
        let vars = agent_env(task, env.path(), checkout.path()).await.unwrap();
        let get = |k: &str| vars.iter().find(|(n, _)| n == k).map(|(_, v)| v.clone());
        let dir = env.path().to_string_lossy().into_owned();
        assert_eq!(get("PYTHONPATH").as_deref(), Some("src:."));
        assert_eq!(get("NODE_PATH"), Some(format!("{dir}/node_modules")));
        assert_eq!(get("VIRTUAL_ENV"), Some(format!("{dir}/venv")));
        let path = get("PATH").unwrap();
        assert!(
            path.starts_with(&format!("{dir}/venv/bin:{dir}/node_modules/.bin:")),
            "{path}"
        );
        assert!(path.ends_with(&std::env::var("PATH").unwrap()), "{path}");
        assert_eq!(vars.len(), 4, "{vars:?}");
        // No environment, no assignments: nothing changes.
        let bare = tempfile::tempdir().unwrap();
        let mut plain = task.clone();
        plain.environment.test_command = "python -m pytest {tests}".into();
        assert!(
            agent_env(&plain, bare.path(), checkout.path())
                .await
                .unwrap()
                .is_empty()
        );
    }
}
