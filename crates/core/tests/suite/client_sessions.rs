//! Client sessions (`trellis acp`'s conversations) and their turns, recorded through the
//! service's ops.

use trellis_protocol::{Op, RunId, ServiceEventBody, StreamId};
use trellis_test_support::scripted::ScriptedProvider;

use super::common::*;
use super::service::{answer, service, stored};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn client_sessions_and_their_turns_are_recorded_by_ops() {
    let ws = inventory(CONFIG);
    let repo = path_of(&ws);
    let svc = service(&repo, &ScriptedProvider::responding(answer));
    let session = trellis_protocol::records::ClientSession {
        id: "acp-7".into(),
        client: "acp".into(),
        cwd: repo.display().to_string(),
        title: None,
        config: "{}".into(),
        created_ms: 0,
        updated_ms: 0,
    };
    let recorded = svc
        .call(Op::RecordClientSession {
            session: session.clone(),
        })
        .await
        .unwrap();
    assert_eq!(recorded["id"], "acp-7");
    assert!(recorded["createdMs"].as_i64().unwrap() > 0, "{recorded}");
    let created = recorded["createdMs"].clone();

    // A turn of a session nobody recorded is refused, naming the op that records one.
    let turn = |session: &str, request: &str| Op::RecordClientTurn {
        turn: trellis_protocol::records::ClientTurn {
            session: session.into(),
            turn: 0,
            run: RunId::from_string("0191"),
            request: request.into(),
            workflow: Some("bug_fix".into()),
            plan: "[]".into(),
            created_ms: 0,
        },
    };
    let e = svc.call(turn("acp-unknown", "x")).await.unwrap_err();
    assert_eq!(e.kind, trellis_protocol::OpErrorKind::NotFound);
    assert!(e.message.contains("recordClientSession"), "{e}");
    assert_eq!(svc.call(turn("acp-7", "fix it")).await.unwrap()["turn"], 1);
    assert_eq!(
        svc.call(turn("acp-7", "and test it")).await.unwrap()["turn"],
        2
    );

    // Recording it again updates its title and keeps its creation time.
    let titled = svc
        .call(Op::RecordClientSession {
            session: trellis_protocol::records::ClientSession {
                title: Some("fix it".into()),
                ..session.clone()
            },
        })
        .await
        .unwrap();
    assert_eq!(titled["createdMs"], created);
    let read = svc.client_session("acp-7").unwrap().unwrap();
    assert_eq!(read.title.as_deref(), Some("fix it"));
    let turns = svc.client_turns("acp-7").unwrap();
    let requests: Vec<&str> = turns.iter().map(|t| t.request.as_str()).collect();
    assert_eq!(requests, ["fix it", "and test it"]);
    assert_eq!(svc.client_sessions("acp").unwrap().len(), 1);

    // An empty id is refused; every op's outcome is on the workspace stream.
    let e = svc
        .call(Op::RecordClientSession {
            session: trellis_protocol::records::ClientSession {
                id: " ".into(),
                ..session
            },
        })
        .await
        .unwrap_err();
    assert_eq!(e.kind, trellis_protocol::OpErrorKind::Invalid);
    svc.bus().flush().await;
    let ops: Vec<String> = stored(&svc, &StreamId::Workspace)
        .into_iter()
        .filter_map(|e| match e.event {
            ServiceEventBody::Workspace(trellis_protocol::WorkspaceEvent::OpCompleted {
                op,
                ..
            }) => Some(op),
            _ => None,
        })
        .collect();
    assert_eq!(
        ops,
        [
            "recordClientSession",
            "recordClientTurn",
            "recordClientTurn",
            "recordClientSession"
        ]
    );
}
