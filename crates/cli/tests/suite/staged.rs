//! `trellis run --workflow staged_review` through the binary against the loopback
//! OpenAI-wire mock: every stage tool call goes over the wire; the run pauses at each gate,
//! and answers given by other processes (`trellis runs resume RUN --answer GATE=…`) move it
//! on — a text answer sends the artifact back with that feedback.

use serde_json::{Value, json};
use trellis_test_support::TempWorkspace;

use super::common::*;
use super::mock::*;

const BUG: &str =
    "self.release(sku, quantity)\n        self.stock[sku] = self.stock.get(sku, 0) + quantity";
const FIX: &str =
    "self.release(sku, quantity)\n        self.stock[sku] = self.stock.get(sku, 0) - quantity";

/// A stage role's next move: one tool call per turn, then its report (JSON, as the agents'
/// reports are asked for).
fn staged(body: &Value) -> String {
    let (sys, all, n) = (
        system(body),
        body["messages"].to_string(),
        tool_results(body),
    );
    let call = |name: &str, args: Value| tool_sse(&format!("call_{n}"), name, &args.to_string());
    let done = |what: &str| {
        sse(
            &json!({ "failure": false, "output": what, "files_changed": [], "findings": [] })
                .to_string(),
        )
    };
    if !body["response_format"].is_null() && sys.contains("orchestrator") {
        return sse(&answer(body));
    }
    if sys.contains("scoping a change request") {
        let narrowed = all.contains("only the commit method");
        return match n {
            0 => call(
                "submit_scope",
                json!({
                    "in_scope": [if narrowed { "Inventory.commit only" } else { "Inventory" }],
                    "out_of_scope": ["the CLI"],
                    "constraints": ["keep the public API"],
                }),
            ),
            _ => done("scope submitted"),
        };
    }
    if sys.contains("researching a codebase") {
        return match n {
            0 => call(
                "submit_research",
                json!({
                    "key_files": [{ "path": "inventory.py", "why": "Inventory.commit" }],
                    "patterns": ["plain classes"],
                    "recommendations": ["subtract shipped units"],
                }),
            ),
            _ => done("research submitted"),
        };
    }
    if sys.contains("planning an approved") {
        return match n {
            0 => call(
                "submit_plan",
                json!({
                    "approach_summary": "Subtract shipped units in commit.",
                    "pulses": [{ "id": "P1", "title": "fix commit", "description": "use -", "files": ["inventory.py"] }],
                }),
            ),
            _ => done("plan submitted"),
        };
    }
    if sys.contains("implementing an approved plan") {
        return match n {
            0 => call(
                "edit_file",
                json!({ "path": "inventory.py", "old_string": BUG, "new_string": FIX }),
            ),
            1 => call(
                "complete_pulse",
                json!({ "summary": "commit subtracts shipped units" }),
            ),
            _ => done("pulse complete"),
        };
    }
    if sys.contains("meticulous code reviewer") {
        return match n {
            0 => call("get_diff", json!({})),
            1 => call(
                "complete_review",
                json!({ "verdict": "APPROVED", "summary": "the fix subtracts shipped units" }),
            ),
            _ => done("APPROVED"),
        };
    }
    sse(&answer(body))
}

fn example(config: &str) -> TempWorkspace {
    trellis_test_support::example_repo("inventory", config).unwrap()
}

/// `trellis runs resume RUN --answer GATE=VALUE` from another process; its output.
fn answer_gate(ws: &TempWorkspace, run: &str, gate: &str, value: &str) -> String {
    let pair = format!("{gate}={value}");
    ok(args(
        isolated(ws.path()),
        &["runs", "resume", run, "--answer", &pair],
    ))
}

#[test]
fn staged_review_pauses_at_each_gate_and_answers_from_other_processes_move_it_on() {
    let (url, seen) = serve(staged);
    let ws = example(&mock_config(&url));
    let out = ok(args(
        isolated(ws.path()),
        &[
            "run",
            "Fix the stock bookkeeping of commit",
            "--workflow",
            "staged_review",
            "--no-review",
        ],
    ));
    assert!(out.contains("the run is waiting for input"), "{out}");
    assert!(
        out.contains("approve_scope: Approve the scope card (version 1)"),
        "{out}"
    );
    let run = run_id(&out);
    // A text answer is feedback: scoping runs again with it and submits version 2.
    let out = answer_gate(&ws, &run, "approve_scope", "only the commit method, please");
    assert!(
        out.contains("approve_scope: Approve the scope card (version 2)"),
        "{out}"
    );
    let out = answer_gate(&ws, &run, "approve_scope", "yes");
    assert!(out.contains("approve_research"), "{out}");
    let out = answer_gate(&ws, &run, "approve_research", "yes");
    assert!(out.contains("approve_plan"), "{out}");
    // After the plan: execution, then the review, automatically; the review waits.
    let out = answer_gate(&ws, &run, "approve_plan", "yes");
    assert!(out.contains("approve_review"), "{out}");
    let out = answer_gate(&ws, &run, "approve_review", "yes");
    assert!(out.contains("succeeded at DONE"), "{out}");

    // Everything went over the wire: the stage tools were offered and called.
    let bodies = seen.lock().unwrap().clone();
    let offered = |name: &str| {
        bodies.iter().any(|b| {
            b["tools"]
                .as_array()
                .is_some_and(|t| t.iter().any(|t| t["function"]["name"] == name))
        })
    };
    for tool in [
        "submit_scope",
        "submit_research",
        "submit_plan",
        "complete_pulse",
        "complete_review",
        "get_diff",
    ] {
        assert!(offered(tool), "{tool} was never offered");
    }
    assert!(
        bodies.iter().any(|b| system(b).contains("scoping")
            && b["messages"].to_string().contains("only the commit method")),
        "the feedback never reached the scoping agent"
    );
    // The artifacts are files in the run's artifacts directory; the fix is on the run branch.
    let dir = ws.path().join(".trellis/runs").join(&run).join("artifacts");
    let v2 = std::fs::read_to_string(dir.join("scope_card.v2.json")).unwrap();
    assert!(v2.contains("Inventory.commit only"), "{v2}");
    for f in ["research_card.json", "plan.json", "review.json"] {
        assert!(dir.join(f).is_file(), "{f} missing");
    }
    let review = ok(args(isolated(ws.path()), &["review", &run, "--json"]));
    assert!(review.contains("get(sku, 0) - quantity"), "{review}");
}
