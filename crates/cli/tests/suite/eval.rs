//! `trellis eval` (issue 34, item 6): the harness on two tiny tasks with a scripted model
//! behind the OpenAI wire — one the model's edit resolves, one it does not — and the task
//! file's validation.

use std::path::Path;
use std::process::Command;

use serde_json::{Value, json};

use trellis_test_support::git;

use super::common::*;
use super::mock::*;

const CALC: &str = "def add(a, b):\n    return a - b\n\n\ndef mul(a, b):\n    return a + b\n\n\ndef sub(a, b):\n    return a - b\n";
const VISIBLE: &str = "import unittest\n\nimport calc\n\n\nclass CalcTest(unittest.TestCase):\n    def test_sub(self):\n        self.assertEqual(calc.sub(5, 3), 2)\n";

/// A new test file `test_hidden.py` as a diff (the task's hidden test).
fn hidden(name: &str, body: &str) -> String {
    let lines: Vec<String> = format!(
        "import unittest\n\nimport calc\n\n\nclass HiddenTest(unittest.TestCase):\n    def {name}(self):\n        {body}\n"
    )
    .lines()
    .map(|l| format!("+{l}\n"))
    .collect();
    format!(
        "diff --git a/test_hidden.py b/test_hidden.py\nnew file mode 100644\n--- /dev/null\n+++ b/test_hidden.py\n@@ -0,0 +1,{} @@\n{}",
        lines.len(),
        lines.concat()
    )
}

/// The reference fix of the function at `line` (its `def` line).
fn fix(line: u32, def: &str, old: &str, new: &str) -> String {
    format!(
        "diff --git a/calc.py b/calc.py\n--- a/calc.py\n+++ b/calc.py\n@@ -{line},3 +{line},3 @@\n def {def}:\n-    return {old}\n+    return {new}\n \n"
    )
}

/// The repository and the task file (two tasks) in `dir`.
fn tasks(dir: &Path) -> std::path::PathBuf {
    let repo = dir.join("calc");
    std::fs::create_dir_all(&repo).unwrap();
    std::fs::write(repo.join("calc.py"), CALC).unwrap();
    std::fs::write(repo.join("test_calc.py"), VISIBLE).unwrap();
    git(&repo, &["init", "-q", "-b", "main"]);
    git(&repo, &["add", "."]);
    git(
        &repo,
        &[
            "-c",
            "user.name=t",
            "-c",
            "user.email=t@t",
            "commit",
            "-qm",
            "calc",
        ],
    );
    let base = git(&repo, &["rev-parse", "HEAD"]).trim().to_owned();
    let env = json!({"language": "python", "setup": ["mkdir -p \"$TRELLIS_EVAL_ENV/made\""],
        // The assignment reaches the agents (the task's environment): mini's fix uses it.
        "test_command": "CALC_FIX='a + b' test -d \"$TRELLIS_EVAL_ENV/made\" && python3 -B -m unittest {tests}", "env_key": "calc-1"});
    let task = |id: &str, problem: &str, test: &str, body: &str, patch: String| {
        json!({"instance_id": id, "repo": "calc", "base_commit": base, "problem_statement": problem,
            "test_patch": hidden(test, body), "patch": patch,
            "FAIL_TO_PASS": [format!("test_hidden.HiddenTest.{test}")],
            "PASS_TO_PASS": ["test_calc.CalcTest.test_sub"], "environment": env})
        .to_string()
    };
    let file = dir.join("tasks.jsonl");
    std::fs::write(
        &file,
        [
            task(
                "calc-add",
                "calc.add subtracts instead of adding.",
                "test_add",
                "self.assertEqual(calc.add(2, 3), 5)",
                fix(1, "add(a, b)", "a - b", "a + b"),
            ),
            task(
                "calc-mul",
                "calc.mul adds instead of multiplying.",
                "test_mul",
                "self.assertEqual(calc.mul(2, 3), 6)",
                fix(5, "mul(a, b)", "a + b", "a * b"),
            ),
        ]
        .join("\n")
            + "\n",
    )
    .unwrap();
    file
}

/// The scripted model. As Trellis's code agent it fixes `add` (an edit, then its report) and
/// reports without a change on anything else; as mini-swe-agent (its `bash` tool) it fixes
/// `add` with `sed` (the replacement from the task environment's `CALC_FIX`) and submits, and submits at once on anything else; every other request
/// gets the mock's usual answer.
fn model(body: &Value) -> String {
    let mini = body["tools"]
        .as_array()
        .is_some_and(|t| t.iter().any(|t| t["function"]["name"] == "bash"));
    if mini {
        let fixing = body["messages"].to_string().contains("calc.add subtracts");
        let command = if fixing && tool_results(body) == 0 {
            "sed -i \"2s/a - b/$CALC_FIX/\" calc.py"
        } else {
            "echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT"
        };
        return tool_sse("call_1", "bash", &json!({ "command": command }).to_string());
    }
    let offers_edit = body["tools"]
        .as_array()
        .is_some_and(|t| t.iter().any(|t| t["function"]["name"] == "edit_file"));
    let code_agent = offers_edit && system(body).contains("senior software engineer");
    if code_agent
        && tool_results(body) == 0
        && body["messages"].to_string().contains("calc.add subtracts")
    {
        return tool_sse(
            "call_1",
            "edit_file",
            &json!({"path": "calc.py", "old_string": "    return a - b\n\n\ndef mul", "new_string": "    return a + b\n\n\ndef mul"}).to_string(),
        );
    }
    sse(&answer(body))
}

/// `-c` overrides making `mock` (the loopback mock at `url`) the model of every run.
fn mock_overrides(url: &str) -> Vec<String> {
    let profile = |k: &str, v: &str| format!("models.profiles.mock.{k}={v}");
    [
        "models.default=\"mock\"".to_owned(),
        profile("provider", "\"openai\""),
        profile("base_url", &format!("\"{url}\"")),
        profile("model", "\"mock-model\""),
        profile("context", "32768"),
        "index.embedding.backend=\"none\"".to_owned(),
    ]
    .into_iter()
    .flat_map(|o| ["-c".to_owned(), o])
    .collect()
}

fn eval(dir: &Path) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_trellis"));
    c.current_dir(dir)
        .env_remove("RUST_LOG")
        .env("XDG_CONFIG_HOME", dir.join("xdg-config"));
    c
}

#[test]
fn the_harness_scores_a_resolved_and_an_unresolved_task_and_resumes() {
    let dir = tempfile::tempdir().unwrap();
    let file = tasks(dir.path());
    let (url, _seen) = serve(model);
    let run = |extra: &[&str]| {
        let mut a: Vec<String> = mock_overrides(&url);
        a.extend([
            "eval".into(),
            "run".into(),
            file.to_string_lossy().into_owned(),
            "--out".into(),
            dir.path().join("out").to_string_lossy().into_owned(),
            "--envs".into(),
            dir.path().join("envs").to_string_lossy().into_owned(),
            "--workflow".into(),
            "feature_with_iterative_testing".into(),
            "--skip".into(),
            "security_review".into(),
            "--skip".into(),
            "lint_and_format".into(),
            "--agents".into(),
            "trellis,mini-swe-agent".into(),
            "--wall-minutes".into(),
            "3".into(),
        ]);
        a.extend(extra.iter().map(|s| (*s).to_owned()));
        let out = eval(dir.path()).args(&a).output().unwrap();
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(out.status.success(), "{text}");
        text
    };
    let printed = run(&[]);
    let records: Vec<Value> = std::fs::read_to_string(dir.path().join("out/results.jsonl"))
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let by = |id: &str, agent: &str| {
        records
            .iter()
            .find(|r| r["instance_id"] == id && r["agent"] == agent)
            .unwrap_or_else(|| panic!("{id} {agent}: {printed}"))
    };
    let add = by("calc-add", "trellis");
    assert_eq!(add["resolved"], true, "{add:#}\n{printed}");
    assert_eq!(add["files_changed"], json!(["calc.py"]), "{add:#}");
    assert!(add["model_calls"].as_u64().unwrap() >= 2, "{add:#}");
    assert_eq!(add["tool_calls"], 1, "{add:#}");
    assert_eq!(add["ended"], "finished", "{add:#}");
    // `trellis runs show RUN` explains the attempt, in the task's checkout.
    let checkout = add["checkout"].as_str().unwrap();
    let run_id = add["run_id"].as_str().unwrap();
    ok(args(
        trellis(Path::new(checkout)),
        &["runs", "show", run_id],
    ));
    for agent in ["trellis", "mini-swe-agent"] {
        let mul = by("calc-mul", agent);
        assert_eq!(mul["resolved"], false, "{mul:#}");
        assert_eq!(mul["verdict"]["fail_to_pass"]["exit_code"], 1, "{mul:#}");
        assert_eq!(mul["verdict"]["pass_to_pass"]["exit_code"], 0, "{mul:#}");
        assert!(
            printed.contains(&format!("| {agent} | 2 | 1 (50 %) |")),
            "{printed}"
        );
    }
    // The anchor went through `trellis models serve` to the same model: its edit, its
    // submission, its usage from the trajectory.
    let mini = by("calc-add", "mini-swe-agent");
    assert_eq!(mini["resolved"], true, "{mini:#}\n{printed}");
    assert_eq!(mini["ended"], "finished", "{mini:#}");
    assert_eq!(mini["files_changed"], json!(["calc.py"]), "{mini:#}");
    assert_eq!(
        (mini["model_calls"].as_u64(), mini["tool_calls"].as_u64()),
        (Some(2), Some(2)),
        "{mini:#}"
    );
    assert!(mini["prompt_tokens"].as_u64().unwrap() > 0, "{mini:#}");
    assert!(dir.path().join("out/summary.md").is_file());
    // Run again: everything is recorded, nothing runs.
    let again = run(&[]);
    assert!(
        again.contains("2 tasks × 2 agents, 4 already recorded"),
        "{again}"
    );
    assert_eq!(
        std::fs::read_to_string(dir.path().join("out/results.jsonl"))
            .unwrap()
            .lines()
            .count(),
        4
    );
}

#[test]
fn validate_checks_each_task_and_a_bad_file_names_line_and_field() {
    let dir = tempfile::tempdir().unwrap();
    let file = tasks(dir.path());
    let envs = dir.path().join("envs");
    let validate = || {
        eval(dir.path())
            .args(["eval", "validate"])
            .arg(&file)
            .arg("--envs")
            .arg(&envs)
            .output()
            .unwrap()
    };
    let out = validate();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(text.contains("2 tasks checked, 2 valid, 0 not"), "{text}");
    // A reference patch that does not fix the task is reported, exit 2.
    let broken = std::fs::read_to_string(&file)
        .unwrap()
        .replace("a * b", "a - b");
    std::fs::write(&file, broken).unwrap();
    let out = validate();
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(2), "{text}");
    assert!(
        text.contains("calc-mul: not resolved by the reference patch"),
        "{text}"
    );
    // A bad line is refused with its line and field, before anything runs.
    std::fs::write(&file, "{\"instance_id\": \"x\"}\n").unwrap();
    let out = validate();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains("tasks.jsonl: line 1, field `environment`: missing"),
        "{err}"
    );
}

/// A run stopped by the model-call limit (`budgets.run.calls`) is recorded as ended by it,
/// with what the run was waiting for.
#[test]
fn the_call_limit_ends_an_attempt() {
    let dir = tempfile::tempdir().unwrap();
    let file = tasks(dir.path());
    let (url, seen) = serve(model);
    let out = eval(dir.path())
        .args(mock_overrides(&url))
        .args(["eval", "run"])
        .arg(&file)
        .arg("--out")
        .arg(dir.path().join("out"))
        .args([
            "--tasks",
            "calc-add",
            "--agents",
            "trellis",
            "--max-calls",
            "1",
        ])
        .args([
            "--workflow",
            "feature_with_iterative_testing",
            "--skip",
            "security_review",
        ])
        .args(["--skip", "lint_and_format"])
        .output()
        .unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "{text}");
    let record: Value = serde_json::from_str(
        std::fs::read_to_string(dir.path().join("out/results.jsonl"))
            .unwrap()
            .trim(),
    )
    .unwrap();
    let shown = ok(args(
        trellis(Path::new(record["checkout"].as_str().unwrap())),
        &["runs", "show", record["run_id"].as_str().unwrap(), "--json"],
    ));
    assert_eq!(record["ended"], "calls", "{record:#}\n{text}\n{shown}");
    assert_eq!(record["resolved"], false, "{record:#}");
    assert!(
        record["detail"]
            .as_str()
            .unwrap_or_default()
            .contains("budget"),
        "{record:#}"
    );
    assert_eq!(
        seen.lock().unwrap().len(),
        1,
        "one model call, then the limit"
    );
}
