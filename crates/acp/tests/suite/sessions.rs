//! Sessions recorded in the store: load (replay), list, resume, close, across a restart.

use std::sync::Arc;
use std::time::Duration;

use agent_client_protocol::v1::schema as acp;
use agent_client_protocol::{Client, ErrorCode};
use serde_json::Value;
use trellis_acp::{AcpAgent, AcpOptions};

use super::common::*;

/// The first prompt's text.
const ASK: &str = "Why is stock kept in memory?";

/// A session survives its agent: a new service over the same store (a restarted
/// `trellis acp`) lists it, `session/load` replays the prompt, plan, messages and summary
/// from the store, and the loaded session takes new prompts; `session/close` forgets it in
/// the process, `session/resume` brings it back without a replay.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn sessions_survive_a_restart_load_replays_list_resume_and_close() {
    let f = fixture(Duration::ZERO);
    let root = f.root.clone();
    let first: Updates = Arc::default();
    let session = with_timeout(recording(&first).connect_with(
        agent(&f).connection(),
        async |cx| {
            let session = open_session(&cx, &root).await?;
            let r = prompt(&cx, &session, ASK).await?;
            assert_eq!(r.stop_reason, acp::StopReason::EndTurn);
            Ok(session)
        },
    ))
    .await
    .unwrap();
    f.service.shutdown().await;

    // "Restart": a new service and agent over the same workspace store.
    let service = service_at(&root, Duration::ZERO);
    let restarted = AcpAgent::with_service(service.clone(), AcpOptions::default());
    let replay: Updates = Arc::default();
    let sid = session.clone();
    let replayed = with_timeout(recording(&replay).connect_with(
        restarted.connection(),
        async |cx| {
            init(&cx).await;
            // Unknown to this process until loaded.
            let e = prompt(&cx, &sid, "hi").await.unwrap_err();
            assert_eq!(i32::from(e.code), -32002, "{e:?}");
            let list = cx
                .send_request(acp::ListSessionsRequest::new().cwd(root.clone()))
                .block_task()
                .await?;
            let v = serde_json::to_value(&list).unwrap();
            assert_eq!(v["sessions"][0]["sessionId"], sid.0.as_ref(), "{v}");
            assert_eq!(v["sessions"][0]["title"], ASK, "{v}");
            assert_eq!(v["sessions"][0]["cwd"], root.display().to_string(), "{v}");
            assert!(
                v["sessions"][0]["updatedAt"]
                    .as_str()
                    .unwrap()
                    .contains('T')
            );
            let elsewhere = cx
                .send_request(acp::ListSessionsRequest::new().cwd(root.join("src")))
                .block_task()
                .await?;
            assert!(elsewhere.sessions.is_empty());
            // A wrong cwd or an unknown id.
            let e = cx
                .send_request(acp::LoadSessionRequest::new(sid.clone(), root.join("src")))
                .block_task()
                .await
                .unwrap_err();
            assert_eq!(e.code, ErrorCode::INVALID_PARAMS, "{e:?}");
            let e = cx
                .send_request(acp::LoadSessionRequest::new("ses-nope", root.clone()))
                .block_task()
                .await
                .unwrap_err();
            assert_eq!(i32::from(e.code), -32002, "{e:?}");

            cx.send_request(acp::LoadSessionRequest::new(sid.clone(), root.clone()))
                .block_task()
                .await?;
            let replayed = replay.lock().unwrap().len();
            assert!(replayed > 0);
            // Live again: it takes a prompt.
            let r = prompt(&cx, &sid, "And the reservations?").await?;
            assert_eq!(r.stop_reason, acp::StopReason::EndTurn);
            // Closed: forgotten here; resumed: live again, nothing replayed.
            cx.send_request(acp::CloseSessionRequest::new(sid.clone()))
                .block_task()
                .await?;
            let e = prompt(&cx, &sid, "hi").await.unwrap_err();
            assert_eq!(i32::from(e.code), -32002, "{e:?}");
            let before = replay.lock().unwrap().len();
            cx.send_request(acp::ResumeSessionRequest::new(sid.clone(), root.clone()))
                .block_task()
                .await?;
            assert_eq!(
                replay.lock().unwrap().len(),
                before,
                "resume replays nothing"
            );
            let r = prompt(&cx, &sid, "Once more").await?;
            assert_eq!(r.stop_reason, acp::StopReason::EndTurn);
            Ok(replayed)
        },
    ))
    .await
    .unwrap();

    // The replay (before the second prompt's updates): the prompt, the workflow, the
    // plan as it ended, the agents' text, the summary.
    let all = replay.lock().unwrap().clone();
    let first_live = first.lock().unwrap().clone();
    let kind = |u: &Value| {
        u["update"]["sessionUpdate"]
            .as_str()
            .unwrap_or("?")
            .to_owned()
    };
    assert_eq!(kind(&all[0]), "user_message_chunk", "{all:#?}");
    assert_eq!(all[0]["update"]["content"]["text"], ASK);
    assert!(all.iter().all(|u| u["sessionId"] == session.0.as_ref()));
    let replayed = &all[..replayed];
    let plan = replayed
        .iter()
        .find(|u| kind(u) == "plan")
        .expect("the plan is replayed");
    let entries = plan["update"]["entries"].as_array().unwrap();
    assert!(!entries.is_empty());
    assert!(entries.iter().all(|e| e["status"] == "completed"), "{plan}");
    let text = |us: &[Value]| -> String {
        us.iter()
            .filter(|u| kind(u) == "agent_message_chunk")
            .filter_map(|u| u["update"]["content"]["text"].as_str())
            .collect()
    };
    assert!(
        text(replayed).contains("Stock lives in memory"),
        "{replayed:#?}"
    );
    // What the live turn streamed as messages is what the replay shows.
    assert_eq!(text(replayed), text(&first_live));
    // The second turn was recorded too.
    let turns = service.client_turns(session.0.as_ref()).unwrap();
    assert_eq!(turns.len(), 3);
    assert_eq!(turns[1].request, "And the reservations?");
}

/// An idle session opens nothing: `session/new` and a config change neither open the
/// workspace's service nor store the session; its first prompt does both, and the record
/// carries the settings chosen before. A session never used is not stored (a restarted agent
/// does not list it).
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_session_is_stored_and_the_workspace_opened_when_first_used() {
    use std::sync::atomic::{AtomicUsize, Ordering};

    let f = fixture(Duration::ZERO);
    let root = f.root.clone();
    let opened = Arc::new(AtomicUsize::new(0));
    let (count, service) = (opened.clone(), f.service.clone());
    let open: trellis_acp::OpenService = Arc::new(move |r: &std::path::Path| {
        assert_eq!(r, root.as_path());
        count.fetch_add(1, Ordering::SeqCst);
        Ok(service.clone())
    });
    let lazy = AcpAgent::new(
        open,
        AcpOptions {
            workflow: Some("architecture_discussion".into()),
        },
    );
    let root = f.root.clone();
    let n = opened.clone();
    let (used, unused) = with_timeout(Client.v1().connect_with(lazy.connection(), async |cx| {
        let used = open_session(&cx, &root).await?;
        let unused = new_session(&cx, &root.join("docs")).await?;
        set_option(&cx, &used, "autonomy", "read-only").await?;
        assert_eq!(
            n.load(Ordering::SeqCst),
            0,
            "nothing opened before a prompt"
        );
        let r = prompt(&cx, &used, ASK).await?;
        assert_eq!(r.stop_reason, acp::StopReason::EndTurn);
        assert_eq!(n.load(Ordering::SeqCst), 1);
        Ok((used, unused))
    }))
    .await
    .unwrap();
    let record = f.service.client_session(used.0.as_ref()).unwrap().unwrap();
    assert!(
        record.config.contains(r#""autonomy":"read-only""#),
        "{}",
        record.config
    );
    assert_eq!(record.title.as_deref(), Some(ASK));
    assert!(
        f.service
            .client_session(unused.0.as_ref())
            .unwrap()
            .is_none()
    );
    assert_eq!(opened.load(Ordering::SeqCst), 1);
}
