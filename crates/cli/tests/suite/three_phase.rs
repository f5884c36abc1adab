//! `trellis run --workflow three_phase` through the binary against the loopback OpenAI-wire
//! mock: discovery, planning and two dependent tickets, each with its review and merge. The
//! first ticket's reviewer asks for a human review: the run waits, and an approval given by
//! another process (`trellis runs resume RUN --answer implementation/T1.review=yes`) moves it
//! on to the merge and the dependent ticket.

use serde_json::{Value, json};

use super::common::*;
use super::mock::*;

const BUG: &str =
    "self.release(sku, quantity)\n        self.stock[sku] = self.stock.get(sku, 0) + quantity";
const FIX: &str =
    "self.release(sku, quantity)\n        self.stock[sku] = self.stock.get(sku, 0) - quantity";

const PLANNED: &str = "# Plan\n## Goal\nFix commit, then report stock.\n\
# Spec\n## R1: commit subtracts shipped units\n\
# Tickets\n## T1: Fix commit\nDepends on: none\nFiles: inventory.py\n\n### Acceptance criteria\n- commit subtracts shipped units\n\n\
## T2: Stock report\nDepends on: T1\nFiles: report.py\n\n### Acceptance criteria\n- report lists stock per SKU\n";

/// Each role's next move over the wire: tool calls, then its report (JSON).
fn three_phase(body: &Value) -> String {
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
    // The work item's id, as the agent's task shows it (JSON inside the messages' JSON).
    let ticket = ["T1", "T2"]
        .into_iter()
        .find(|t| all.contains(&format!("\\\"id\\\":\\\"{t}\\\"")))
        .unwrap_or("");
    if sys.contains("You lead the discovery phase") {
        return done("- storage: where stock is kept\n- api: reservations");
    }
    if sys.contains("You study one area") {
        return done("## Files\ninventory.py holds the stock.");
    }
    if sys.contains("findings of the discovery agents") {
        return done("# Discovery\n## Inventory\nStock lives in inventory.py.");
    }
    if sys.contains("You lead the planning phase") {
        return done("- fix: the commit bug and a report");
    }
    if sys.contains("You plan one part") {
        return done("1. Fix commit\n2. Add report.py");
    }
    if sys.contains("the planners' parts") {
        return done(PLANNED);
    }
    if sys.contains("implementing one ticket") {
        return match (ticket, n) {
            ("T1", 0) => call(
                "edit_file",
                json!({ "path": "inventory.py", "old_string": BUG, "new_string": FIX }),
            ),
            ("T2", 0) => call(
                "write_file",
                json!({ "path": "report.py", "content": "def report(inv):\n    return dict(inv.stock)\n" }),
            ),
            _ => done(&format!("{ticket} implemented")),
        };
    }
    if sys.contains("meticulous code reviewer") {
        let verdict = if ticket == "T1" {
            json!({ "verdict": "HUMAN_REVIEW_REQUESTED", "summary": "a person should confirm the stock semantics" })
        } else {
            json!({ "verdict": "APPROVED", "summary": "the report is fine" })
        };
        return match n {
            0 => call("get_diff", json!({})),
            1 => call("complete_review", verdict),
            _ => done("review complete"),
        };
    }
    sse(&answer(body))
}

#[test]
fn three_phase_runs_its_tickets_and_waits_for_a_human_review_answered_from_another_process() {
    let (url, seen) = serve(three_phase);
    let config = format!(
        "{}\n[agents]\ntest_command = \"python3 -B -m unittest -q\"\n",
        mock_config(&url)
    );
    let ws = trellis_test_support::example_repo("inventory", &config).unwrap();
    let out = ok(args(
        isolated(ws.path()),
        &[
            "run",
            "Fix the stock bookkeeping of commit and add a stock report",
            "--workflow",
            "three_phase",
            "--no-review",
        ],
    ));
    assert!(out.contains("the run is waiting for input"), "{out}");
    assert!(out.contains("implementation/T1.review"), "{out}");
    assert!(out.contains("stock semantics"), "{out}");
    let run = run_id(&out);
    // T2 depends on T1: nothing of it ran while T1's review waits.
    let bodies = seen.lock().unwrap().clone();
    assert!(
        !bodies
            .iter()
            .any(|b| b["messages"].to_string().contains("\\\"id\\\":\\\"T2\\\"")),
        "T2 started before T1 was merged"
    );
    let out = ok(args(
        isolated(ws.path()),
        &[
            "runs",
            "resume",
            &run,
            "--answer",
            "implementation/T1.review=yes",
        ],
    ));
    assert!(out.contains("succeeded at DONE"), "{out}");

    // Both tickets reached the run branch through their merge nodes.
    let show = |path: &str| {
        std::process::Command::new("git")
            .current_dir(ws.path())
            .args(["show", &format!("trellis/run-{run}:{path}")])
            .output()
            .unwrap()
    };
    let inventory = String::from_utf8_lossy(&show("inventory.py").stdout).into_owned();
    assert!(inventory.contains("get(sku, 0) - quantity"), "{inventory}");
    assert!(show("report.py").status.success());
    // The artifacts are files of the run.
    let dir = ws.path().join(".trellis/runs").join(&run).join("artifacts");
    for f in ["discovery.md", "plan.md", "spec.md", "tickets.md"] {
        assert!(dir.join(f).is_file(), "{f} missing");
    }
    // Every node of the pipelines ran; the reviewer saw the ticket's diff.
    let shown = json(args(isolated(ws.path()), &["runs", "show", &run, "--json"]));
    let text = shown.to_string();
    for node in [
        "implementation/T1",
        "implementation/T1.review",
        "implementation/T1.merge",
        "implementation/T2.merge",
        "ticket_collector",
    ] {
        assert!(text.contains(node), "{node} missing: {text}");
    }
    let bodies = seen.lock().unwrap().clone();
    assert!(
        bodies
            .iter()
            .any(|b| system(b).contains("meticulous code reviewer")
                && b["messages"].to_string().contains("```diff"))
    );
}
