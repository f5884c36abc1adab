//! A full feature run from the editor: the session's workflow option picks
//! `feature_with_iterative_testing`, the code agent's edit streams as a tool call with its
//! diff, the runtime runs the example's tests, and the change set — offered with the diff —
//! reaches the user's file when accepted; a question of the code agent asked of a client that
//! takes `_trellis/question`.

use std::sync::{Arc, Mutex};

use agent_client_protocol::v1::schema as acp;
use agent_client_protocol::{Error, UntypedMessage};
use serde_json::{Value, json};
use trellis_acp::{AcpAgent, AcpOptions};
use trellis_llm::Role;
use trellis_protocol::acp::QUESTION_METHOD;
use trellis_test_support::scripted::{ScriptedProvider, Turn};

use super::common::*;

const BUG: &str =
    "self.release(sku, quantity)\n        self.stock[sku] = self.stock.get(sku, 0) + quantity";
const FIX: &str =
    "self.release(sku, quantity)\n        self.stock[sku] = self.stock.get(sku, 0) - quantity";

/// The orchestrator leaves out the optional stages; the code agent fixes the bug, then
/// reports; everyone else reports. With `ask`, the code agent first asks whether `commit`
/// should subtract (`ask_questions`) and fixes the bug only when told yes.
pub(super) fn feature_script(ask: bool) -> ScriptedProvider {
    ScriptedProvider::responding(move |r| {
        let report = |output: &str| {
            Turn::Json(json!({
                "failure": false, "output": output, "files_changed": [], "findings": []
            }))
        };
        let schema = r.response_format.as_ref().map(|f| &f.schema["properties"]);
        let coding = r
            .messages
            .iter()
            .any(|m| m.content.contains("Stage: code_generation"));
        let results: Vec<&str> = r
            .messages
            .iter()
            .filter(|m| m.role == Role::Tool)
            .map(|m| m.content.as_str())
            .collect();
        let told = !ask || results.first().is_some_and(|a| a.contains("A: yes"));
        if schema.is_some_and(|p| p.get("workflow").is_some()) {
            Turn::Json(json!({
                "reasoning": "a bug fix",
                "workflow": "feature_with_iterative_testing",
                "stages": [
                    {"stage": "security_review", "include": false, "reason": "no"},
                    {"stage": "lint_and_format", "include": false, "reason": "no"}
                ]
            }))
        } else if is_queries(r) {
            Turn::Json(json!({ "queries": ["Inventory commit stock"] }))
        } else if coding && !r.tools.is_empty() && ask && results.is_empty() {
            Turn::ToolCall {
                name: "ask_questions".into(),
                arguments: json!({"questions": [{"question": QUESTION, "options": ["yes", "no"]}]}),
            }
        } else if coding && !r.tools.is_empty() && results.len() == usize::from(ask) && told {
            Turn::ToolCall {
                name: "edit_file".into(),
                arguments: json!({ "path": "inventory.py", "old_string": BUG, "new_string": FIX }),
            }
        } else if coding {
            report("commit now removes shipped units from the stock")
        } else {
            report("all tests pass")
        }
    })
}

pub(super) const QUESTION: &str = "Should commit subtract the shipped units?";

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_feature_run_edits_tests_and_applies_the_fix_when_accepted() {
    let f = fixture_with(feature_script(false));
    let root = f.root.clone();
    let agent = AcpAgent::with_service(f.service.clone(), AcpOptions::default());
    let updates: Updates = Arc::default();
    let asked: Arc<Mutex<Vec<Value>>> = Arc::default();
    let q = asked.clone();
    let stop = with_timeout(
        recording(&updates)
            .on_receive_request(
                async move |req: acp::RequestPermissionRequest, responder, _cx| {
                    q.lock().unwrap().push(serde_json::to_value(&req).unwrap());
                    responder.respond(selected("allow_once"))
                },
                agent_client_protocol::on_receive_request!(),
            )
            .connect_with(agent.connection(), async |cx| {
                let sid = open_session(&cx, &root).await?;
                set_option(&cx, &sid, "workflow", "feature_with_iterative_testing").await?;
                let r = prompt(&cx, &sid, "Fix the stock bookkeeping of commit").await?;
                Ok(r.stop_reason)
            }),
    )
    .await
    .unwrap();
    assert_eq!(stop, acp::StopReason::EndTurn);
    let all = updates.lock().unwrap().clone();
    let of = |k: &str| -> Vec<Value> {
        all.iter()
            .filter(|u| u["update"]["sessionUpdate"] == k)
            .map(|u| u["update"].clone())
            .collect()
    };
    // The plan: the two required stages, both completed in the end.
    let last = of("plan").pop().unwrap();
    let entries: Vec<(&str, &str)> = last["entries"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| {
            (
                e["content"].as_str().unwrap(),
                e["status"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        entries,
        [
            ("code_generation", "completed"),
            ("test_generation_and_execution", "completed")
        ],
        "{last}"
    );
    // The edit, as a tool call with its diff.
    let edit = of("tool_call")
        .into_iter()
        .find(|c| c["kind"] == "edit" && c["title"].as_str().unwrap().contains("edit_file"))
        .expect("the edit streams as a tool call");
    assert_eq!(edit["content"][0]["oldText"], BUG);
    assert_eq!(edit["content"][0]["newText"], FIX);
    // The change set was offered with the fix, accepted, and applied.
    let asked = asked.lock().unwrap();
    assert_eq!(asked.len(), 1, "{asked:?}");
    let diff = &asked[0]["toolCall"]["content"][0];
    assert_eq!(
        diff["path"],
        root.join("inventory.py").display().to_string()
    );
    assert!(
        diff["newText"].as_str().unwrap().contains("- quantity"),
        "{diff}"
    );
    let file = std::fs::read_to_string(root.join("inventory.py")).unwrap();
    assert!(file.contains(FIX), "the fix reached the user's file");
}

/// A workflow's question reaches a client that takes `_trellis/question` (listed in its
/// `initialize` `_meta`): the turn asks it there, and the answer goes back to the code agent
/// that asked, whose next step uses it.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_question_is_asked_through_the_extension_and_its_answer_reaches_the_agent() {
    let f = fixture_with(feature_script(true));
    let root = f.root.clone();
    let agent = AcpAgent::with_service(f.service.clone(), AcpOptions::default());
    let (updates, asked): (Updates, Asked) = Default::default();
    let questions: Asked = Arc::default();
    let qs = questions.clone();
    with_timeout(
        answering(&updates, &asked, "reject_once")
            .on_receive_request(
                // The agent's requests beyond ACP's: `_trellis/question` only.
                async move |req: UntypedMessage, responder, _cx| {
                    if req.method() != QUESTION_METHOD {
                        return responder.respond_with_error(Error::method_not_found());
                    }
                    qs.lock().unwrap().push(req.params().clone());
                    responder.respond(json!({"outcome": "answered", "answer": "yes"}))
                },
                agent_client_protocol::on_receive_request!(),
            )
            .connect_with(agent.connection(), async |cx| {
                initialize_taking(&cx, &[QUESTION_METHOD]).await?;
                let sid = new_session(&cx, &root).await?;
                set_option(&cx, &sid, "workflow", "feature_with_iterative_testing").await?;
                let r = prompt(&cx, &sid, "Fix the stock bookkeeping of commit").await?;
                assert_eq!(r.stop_reason, acp::StopReason::EndTurn);
                Ok(())
            }),
    )
    .await
    .unwrap();
    let questions = questions.lock().unwrap();
    assert_eq!(questions.len(), 1, "{questions:?}");
    let q = &questions[0];
    assert_eq!(q["node"], "code_generation", "{q}");
    assert_eq!(q["question"], format!("{QUESTION} [yes / no]"), "{q}");
    // The question showed as a tool call of the session, completed with the answer.
    let id = q["toolCallId"].as_str().unwrap();
    let all = updates.lock().unwrap().clone();
    assert!(
        all.iter().any(|u| u["update"]["toolCallId"] == id
            && u["update"]["status"] == "completed"
            && u["update"]["content"].to_string().contains("yes")),
        "{all:?}"
    );
    // The agent used the answer: the change set has the fix.
    let asked = asked.lock().unwrap();
    assert_eq!(asked.len(), 1, "{asked:?}");
    let diff = &asked[0]["toolCall"]["content"][0];
    assert!(
        diff["newText"].as_str().unwrap().contains("- quantity"),
        "{diff}"
    );
}
