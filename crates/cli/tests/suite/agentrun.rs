//! `trellis run` end to end through the binary: against a loopback server speaking the
//! OpenAI chat-completions wire format, and with the embedded local model.

use std::io::{BufRead, BufReader, Write};

use serde_json::{Value, json};
use trellis_test_support::TempWorkspace;

use super::common::*;
use super::mock::*;

/// The wiring tests' configuration: BM25 only, and the `small` profile (SmolLM2-135M: fast,
/// proves every layer runs, cannot code) as the default model.
const SMALL: &str = "[index.embedding]\nbackend = \"none\"\n\n[models]\ndefault = \"small\"\n";

/// A copy of `examples/inventory` as a git repository with `config`.
fn example(config: &str) -> TempWorkspace {
    trellis_test_support::example_repo("inventory", config).unwrap()
}

/// The first request of an agent that may use `shell` asks for a network command.
fn wants_tool(body: &Value) -> Option<String> {
    let offers_shell = body["tools"]
        .as_array()
        .is_some_and(|t| t.iter().any(|t| t["function"]["name"] == "shell"));
    (offers_shell && tool_results(body) == 0)
        .then(|| json!({ "command": "curl -s http://127.0.0.1:9/stock" }).to_string())
}

fn mock_openai() -> (Wire, Seen) {
    mock_openai_with(std::time::Duration::ZERO)
}

/// Like [`mock_openai`], answering agent (non-structured) requests after `agent_delay`.
fn mock_openai_with(agent_delay: std::time::Duration) -> (Wire, Seen) {
    serve(move |body| {
        if body["response_format"].is_null() {
            std::thread::sleep(agent_delay);
        }
        match wants_tool(body) {
            Some(call) => tool_sse("call_1", "shell", &call),
            None => sse(&answer(body)),
        }
    })
}

#[test]
fn run_goes_through_an_openai_compatible_endpoint() {
    let (url, seen) = mock_openai();
    let ws = example(&mock_config(&url));
    let out = ok(args(
        isolated(ws.path()),
        &[
            "run",
            "Let's discuss the decision to keep stock in memory",
            "--no-input",
            "--no-review",
        ],
    ));
    assert!(
        out.contains("workflow: architecture_discussion (chosen by the orchestrator)"),
        "{out}"
    );
    assert!(out.contains("succeeded at DONE"), "{out}");
    // The summary shows the analysis itself, line by line, and its findings (the streamed
    // model text above it is JSON, with the line breaks escaped).
    let summary = &out[out.rfind("\nstages:\n").unwrap()..];
    for line in [
        "  ✓ architectural_analysis (attempt 1)",
        "    MOCK-ANALYSIS: stock lives in memory per ADR 0001; persistence is the next step.",
        "    ## Options",
        "    - persist to SQLite",
        "    findings:",
        "    - MOCK-FINDING: a restart loses every reservation",
    ] {
        assert!(summary.lines().any(|l| l == line), "{line:?} in\n{summary}");
    }
    assert!(
        summary.contains("full transcript: `trellis runs show "),
        "{summary}"
    );
    let bodies = seen.lock().unwrap().clone();
    // Orchestrator, query generation for the planned stage, the analysis agent.
    assert!(bodies.len() >= 3, "{bodies:?}");
    assert!(
        bodies
            .iter()
            .all(|b| b["model"] == "mock-model" && b["stream"] == true)
    );
    assert_eq!(
        bodies[0]["response_format"]["json_schema"]["schema"]["properties"]["workflow"]["enum"],
        json!([
            "architecture_discussion",
            "bug_fix",
            "feature_with_iterative_testing",
            "staged_review",
            "task_tree",
            "three_phase"
        ])
    );
    // The agent's request offers its tools and carries the retrieved ADR as context.
    let agent = bodies.last().unwrap();
    assert!(
        agent["tools"]
            .as_array()
            .is_some_and(|t| t.iter().any(|t| t["function"]["name"] == "read_file"))
    );
    assert!(agent["messages"].to_string().contains("ADR 0001"));
    // Usage was recorded per call, from the endpoint's reports.
    let run = run_id(&out);
    let usage = json(args(
        isolated(ws.path()),
        &["runs", "usage", &run, "--json"],
    ));
    assert!(
        usage.to_string().contains("120") || usage.to_string().contains("100"),
        "{usage}"
    );
    // `--json`: one document on stdout, nothing else.
    let j = json(args(
        isolated(ws.path()),
        &[
            "run",
            "Let's discuss the decision to keep stock in memory",
            "--workflow",
            "architecture_discussion",
            "--skip",
            "decision_documentation",
            "--no-input",
            "--json",
        ],
    ));
    assert_eq!(j["terminal"], "DONE", "{j}");
    assert_eq!(j["orchestrator"]["workflow_by"], "user", "{j}");
}

#[test]
fn ctrl_c_keeps_completed_work_and_resume_finishes_the_run() {
    interrupt_then_resume(true);
}

/// Ctrl-C between the analysis stage's start and its model request reaching the endpoint:
/// the call cut short by the shutdown was recorded as the stage failing, the run ended at
/// ABORT and `runs resume` refused it (issue 33; 1 to 4 runs in 6 before the fix).
#[test]
fn ctrl_c_as_a_stage_starts_keeps_the_run_resumable() {
    interrupt_then_resume(false);
}

/// Starts the discussion, presses Ctrl-C once the analysis stage runs (and, if
/// `after_request`, once its model call has reached the endpoint), then resumes the run: the
/// upfront retrieval is kept, only the analysis asks the model again, and the run ends at
/// DONE.
fn interrupt_then_resume(after_request: bool) {
    let (url, seen) = mock_openai_with(std::time::Duration::from_secs(3));
    let ws = example(&mock_config(&url));
    let mut child = args(
        isolated(ws.path()),
        &[
            "run",
            "Let's discuss the decision to keep stock in memory",
            "--no-input",
            "--no-review",
        ],
    )
    .stdout(std::process::Stdio::piped())
    .spawn()
    .unwrap();
    // Wait until the analysis stage runs (its model call is delayed) ...
    let mut out = BufReader::new(child.stdout.take().unwrap());
    let mut printed = String::new();
    let mut run = String::new();
    loop {
        let mut line = String::new();
        assert!(
            out.read_line(&mut line).unwrap() > 0,
            "ended early:\n{printed}"
        );
        printed.push_str(&line);
        if let Some(id) = line.strip_prefix("run ") {
            run = id.trim().to_owned();
        }
        if line.contains("architectural_analysis#1") && line.contains("RUNNING") {
            break;
        }
    }
    // ... and, if asked, its model call has reached the endpoint.
    let asked = std::time::Instant::now();
    while after_request
        && !seen
            .lock()
            .unwrap()
            .iter()
            .any(|b| b["response_format"].is_null())
    {
        assert!(
            asked.elapsed() < std::time::Duration::from_secs(30),
            "the analysis never called the model:\n{printed}"
        );
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    let pid = child.id().to_string();
    std::process::Command::new("kill")
        .args(["-INT", &pid])
        .status()
        .unwrap();
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(130), "{printed}");
    let before = seen.lock().unwrap().len();
    // The upfront retrieval completed and is kept; resume runs only what is left.
    let show = json(args(isolated(ws.path()), &["runs", "show", &run, "--json"]));
    assert!(show.to_string().contains("upfront_retrieval"), "{show}");
    let resumed = ok(args(isolated(ws.path()), &["runs", "resume", &run]));
    assert!(resumed.contains("succeeded at DONE"), "{resumed}");
    let bodies = seen.lock().unwrap().clone();
    // After the resume: only the analysis agent asked again — no orchestrator, no queries.
    assert!(
        bodies[before..]
            .iter()
            .all(|b| b["response_format"].is_null()),
        "{:?}",
        &bodies[before..]
    );
}

/// An approval asked in the terminal (a pseudo-terminal from `script`): the run pauses on
/// the network command, the answer `n` resumes it, and the model sees the refusal.
#[test]
fn approvals_are_asked_in_the_terminal() {
    let (url, seen) = mock_openai();
    let ws = example(&mock_config(&url));
    std::fs::create_dir_all(ws.path().join(".trellis/agents")).unwrap();
    std::fs::write(
        ws.path().join(".trellis/agents/analysis_agent.yaml"),
        "name: analysis_agent\nrole: You analyse.\nobjective: Analyse.\ntools: [shell, read_file]\n",
    )
    .unwrap();
    let exe = env!("CARGO_BIN_EXE_trellis");
    let command = format!(
        "{exe} -C {} run 'Discuss the stock API' --workflow architecture_discussion --skip decision_documentation --no-review",
        ws.path().display()
    );
    let mut child = std::process::Command::new("script")
        .args(["-qec", &command, "/dev/null"])
        .env("NO_COLOR", "1")
        .env("XDG_CONFIG_HOME", ws.path().join(".trellis/xdg-config"))
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(b"n\n").unwrap();
    let out = child.wait_with_output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text}");
    assert!(text.contains("? architectural_analysis"), "{text}");
    assert!(text.contains("allow `shell`"), "{text}");
    assert!(text.contains("succeeded at DONE"), "{text}");
    let bodies = seen.lock().unwrap().clone();
    let last = bodies.last().unwrap();
    assert!(
        last["messages"]
            .to_string()
            .contains("denied in the terminal"),
        "{last}"
    );
}

/// With the embedded `small` model (SmolLM2 via llama.cpp): every layer runs for real. The
/// output's quality is not asserted. `.config/nextest.toml` runs it alone.
#[test]
fn embedded_model_completes_the_discussion_workflow() {
    let ws = example(SMALL);
    let out = ok(args(
        isolated(ws.path()),
        &[
            "run",
            "Let's discuss the decision to keep stock in memory",
            "--workflow",
            "architecture_discussion",
            "--yes",
            "--no-review",
        ],
    ));
    assert!(out.contains("upfront_retrieval#1"), "{out}");
    assert!(out.contains("architectural_analysis#1"), "{out}");
    assert!(out.contains("at DONE"), "{out}");
}

/// `trellis chat -m` with the embedded `small` model: while the model reads the discussion
/// agent's prompt (longer than one llama.cpp batch) its progress reaches the terminal on
/// stderr (`TRELLIS_PROGRESS_QUIET_SECS=0`: every report, not only after ten silent
/// seconds), and the answer follows on stdout. Without the progress events a slow model's
/// first answer is minutes of silence. Runs alone (`.config/nextest.toml`).
#[test]
fn embedded_model_chat_shows_progress_while_reading() {
    let ws = example(SMALL);
    let mut c = isolated(ws.path());
    c.env("TRELLIS_PROGRESS_QUIET_SECS", "0");
    let out = args(c, &["chat", "-m", "Where is the stock kept?"])
        .output()
        .unwrap();
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    assert!(out.status.success(), "{stdout}\n{stderr}");
    assert!(
        stderr.contains("… model reading the prompt:")
            || stderr.contains("… model read the prompt"),
        "no progress line on stderr:\n{stderr}"
    );
    assert!(stdout.contains("(session "), "{stdout}");
}

/// The built-in `staged_review` with the embedded `small` model, every gate approved (`--yes`):
/// the run reaches an end state (DONE, or ABORT when the 135M model's answers fail a stage
/// three times or it never submits an artifact its gate can accept: the gate sends the
/// producer back three times, then ends the run). The output's quality is not asserted. Runs alone (`.config/nextest.toml`).
#[test]
fn embedded_model_runs_staged_review_to_an_end() {
    let (text, err) = embedded_run("staged_review", "Fix the stock bookkeeping of commit", "");
    assert!(text.contains("scoping#1"), "{text}");
    assert_end_state(&text, &err);
}

/// `trellis run REQUEST --workflow WORKFLOW --yes --no-review` with the embedded `small` model
/// on the inventory example (`extra` appended to its configuration): stdout and stderr.
fn embedded_run(workflow: &str, request: &str, extra: &str) -> (String, String) {
    let ws = example(&format!("{SMALL}{extra}"));
    let out = args(
        isolated(ws.path()),
        &[
            "run",
            request,
            "--workflow",
            workflow,
            "--yes",
            "--no-review",
        ],
    )
    .output()
    .unwrap();
    (
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn assert_end_state(text: &str, err: &str) {
    assert!(
        text.contains("succeeded at DONE") || text.contains("at ABORT"),
        "no end state:\n{text}\n{err}"
    );
}

/// The built-in `three_phase` with the embedded `small` model (`--yes`): discovery, planning
/// and the tickets' pipelines run to an end state — DONE, or ABORT when the 135M model's
/// answers give no usable items or no valid tickets.md after its collector's three attempts.
/// The output's quality is not asserted. Runs alone (`.config/nextest.toml`).
#[test]
fn embedded_model_runs_three_phase_to_an_end() {
    let (text, err) = embedded_run("three_phase", "Fix the stock bookkeeping of commit", "");
    assert!(text.contains("discovery#1"), "{text}");
    assert_end_state(&text, &err);
}

/// The built-in `task_tree` with the embedded `small` model (8k context, `--yes`): the remit,
/// milestones and tasks (the deterministic fallbacks stand in for answers the 135M model gets
/// wrong) run to an end state without a context error. The quality is not asserted. Runs
/// alone (`.config/nextest.toml`).
#[test]
fn embedded_model_runs_task_tree_to_an_end() {
    // Two turns per agent and one run of each stage per task keep the run to minutes on two
    // cores (the loop runs eight roles per milestone and task).
    let (text, err) = embedded_run(
        "task_tree",
        "Add a low-stock report to the inventory",
        "\n[agents]\nmax_turns = 2\n\n[agents.task_tree]\nimplementor_runs = 1\nplanner_runs = 1\nresearcher_runs = 1\nmax_expansions = 1\n",
    );
    assert!(text.contains("intent#1"), "{text}");
    assert_end_state(&text, &err);
    assert!(
        !text.contains("context window") && !err.contains("context window"),
        "a context error:\n{text}\n{err}"
    );
}

/// `trellis acp` with the embedded `small` model: an editor's prompt (NDJSON over stdio)
/// becomes a discussion run whose plan, messages and end stream back. The answer's quality
/// is not asserted. Runs alone (`.config/nextest.toml`, `suite::agentrun::embedded_`).
#[test]
fn embedded_model_answers_an_acp_prompt() {
    let ws = example(SMALL);
    let root = ws.path().canonicalize().unwrap();
    let mut child = args(
        isolated(ws.path()),
        &["acp", "--workflow", "architecture_discussion"],
    )
    .stdin(std::process::Stdio::piped())
    .stdout(std::process::Stdio::piped())
    .stderr(std::process::Stdio::null())
    .spawn()
    .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let mut send = |v: Value| writeln!(stdin, "{v}").and_then(|()| stdin.flush()).unwrap();
    send(json!({"jsonrpc": "2.0", "id": 1, "method": "initialize",
                "params": {"protocolVersion": 1, "clientCapabilities": {}}}));
    let mut updates = Vec::new();
    let mut session = None;
    let stop = loop {
        let line = lines.next().expect("the agent ended early").unwrap();
        let v: Value = serde_json::from_str(&line).unwrap();
        match (v["id"].as_u64(), v["method"].as_str()) {
            // Nothing may be sent before `initialize` has been answered.
            (Some(1), None) => send(json!({"jsonrpc": "2.0", "id": 2, "method": "session/new",
                "params": {"cwd": root, "mcpServers": []}})),
            (Some(2), None) => {
                let id = v["result"]["sessionId"].as_str().expect(&line).to_owned();
                send(
                    json!({"jsonrpc": "2.0", "id": 3, "method": "session/prompt",
                    "params": {"sessionId": id, "prompt": [{"type": "text",
                        "text": "Let's discuss the decision to keep stock in memory"}]}}),
                );
                session = Some(id);
            }
            (Some(3), None) => break v["result"]["stopReason"].clone(),
            // A change set offered, or an approval: keep it out of the user's files.
            (_, Some("session/request_permission")) => send(json!({"jsonrpc": "2.0",
                "id": v["id"], "result": {"outcome": {"outcome": "selected", "optionId": "reject_once"}}})),
            (_, Some("session/update")) => updates.push(v["params"].clone()),
            _ => assert!(v.get("error").is_none(), "{v}"),
        }
    };
    child.kill().ok();
    child.wait().ok();
    assert_eq!(stop, "end_turn");
    assert!(
        updates
            .iter()
            .all(|u| u["sessionId"] == session.as_deref().unwrap())
    );
    let kinds: Vec<&str> = updates
        .iter()
        .filter_map(|u| u["update"]["sessionUpdate"].as_str())
        .collect();
    assert!(kinds.contains(&"agent_message_chunk"), "{kinds:?}");
    let last_plan = updates
        .iter()
        .rev()
        .find(|u| u["update"]["sessionUpdate"] == "plan")
        .expect("a plan");
    assert!(
        last_plan["update"]["entries"]
            .as_array()
            .unwrap()
            .iter()
            .all(|e| e["status"] == "completed"),
        "{last_plan}"
    );
}
