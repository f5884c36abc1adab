//! `_trellis/requestChanges`: the runtime service's `requestChanges` op for one of the
//! session's runs, followed like a prompt turn — the stage that runs again streams as
//! `session/update`s, its approvals and its new change set are asked as permission requests,
//! and `session/cancel` stops it.

use std::sync::Arc;

use agent_client_protocol::v1::ConnectionTo;
use agent_client_protocol::v1::schema as acp;
use agent_client_protocol::{Client, Error};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;
use trellis_protocol::acp::RequestChangesParams;
use trellis_protocol::{Op, StreamId};

use super::{Turn, TurnGuard, input_mode};
use crate::map::StagePlan;
use crate::{AcpAgent, ext::op_error, internal};

impl AcpAgent {
    /// Requests changes on run `p.run` (default: the session's latest) and follows the
    /// revision until the run stops again: the op's result with the turn's `stopReason`.
    /// The session must have no turn running (a prompt or another revision).
    pub(crate) async fn request_changes(
        self: &Arc<Self>,
        p: RequestChangesParams,
        conn: ConnectionTo<Client>,
    ) -> Result<Value, Error> {
        let session = acp::SessionId::new(p.session_id.clone());
        let service = self.live_service(&session).await?;
        let run = self
            .session_run(&service, &p.session_id, p.run.as_deref())
            .await?;
        let token = CancellationToken::new();
        let (_, config) = self.claim_session(&session, &p.session_id, &token)?;
        let _guard = TurnGuard {
            agent: self,
            session: p.session_id.clone(),
        };
        // Subscribed before the op, so the revision's first events are not missed.
        let mut live = service.live();
        let mut result = service
            .call(Op::RequestChanges {
                run: run.to_string(),
                node: p.node,
                artifact: p.artifact,
                feedback: p.feedback,
            })
            .await
            .map_err(op_error)?;
        // Only recorded (a change set without a run): nothing runs.
        if result.get("recorded").is_some() {
            return Ok(result);
        }
        let turn = Turn {
            conn,
            session,
            root: service.root().to_path_buf(),
            service: service.clone(),
            token,
        };
        turn.thought(format!(
            "Changes requested on run {run}: {} again.\n",
            result["revising"].as_str().unwrap_or("the stage")
        ));
        let (svc, r) = (service.clone(), run.clone());
        let plan = tokio::task::spawn_blocking(move || {
            let planned = svc.run_planned(&r)?;
            let events = svc.stream_events(&StreamId::Run(r), 0, None)?;
            Ok::<_, trellis_core::service::OpError>(
                planned.map(|p| StagePlan::replayed(&p.plan, &events)),
            )
        })
        .await
        .map_err(internal)?
        .map_err(internal)?
        .unwrap_or_default();
        if !plan.is_empty() {
            turn.send(acp::SessionUpdate::Plan(plan.to_acp()));
        }
        let stop = self
            .drive_run(
                &turn,
                &mut live,
                &run,
                plan,
                input_mode(config.autonomy),
                config.autonomy,
            )
            .await?;
        if let Value::Object(o) = &mut result {
            o.insert("stopReason".into(), json!(stop));
        }
        Ok(result)
    }
}
