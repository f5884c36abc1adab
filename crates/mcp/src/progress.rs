//! A server's `notifications/progress`, routed to the tool call whose request carried the
//! progress token (rmcp gives every request one), and so to the agent's session as
//! `toolProgress` events.
//!
//! rmcp hands each notification to the connection's handler on a task of its own, so two
//! reports can arrive out of order, and one that races the call's result can arrive after
//! it: the call passes on only reports whose `progress` is above the last one it passed on
//! (MCP requires `progress` to increase), and none after its result.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use rmcp::model::{ProgressNotificationParam, ProgressToken};
use tokio::sync::mpsc;

/// Reports a call has not taken yet; more are dropped (the next report supersedes them).
const BUFFER: usize = 64;

type Routes = HashMap<ProgressToken, (u64, mpsc::Sender<ProgressNotificationParam>)>;

/// The calls of one server waiting for progress, by token.
#[derive(Default)]
pub(crate) struct ProgressRoutes {
    routes: Mutex<Routes>,
    next: AtomicU64,
}

impl ProgressRoutes {
    /// Passes a report to the call that waits for its token; reports nobody waits for (a
    /// call that has ended) are dropped.
    pub(crate) fn deliver(&self, params: ProgressNotificationParam) {
        let sender = self
            .routes
            .lock()
            .ok()
            .and_then(|r| r.get(&params.progress_token).map(|(_, tx)| tx.clone()));
        match sender {
            Some(tx) => {
                // Full: the call is behind; the reports after this one tell it more.
                let _ = tx.try_send(params);
            }
            None => tracing::debug!(token = ?params.progress_token, "progress for no waiting call"),
        }
    }

    /// Waits for the reports of `token` until the returned subscription is dropped.
    pub(crate) fn subscribe(self: &Arc<Self>, token: ProgressToken) -> Subscription {
        let (tx, rx) = mpsc::channel(BUFFER);
        let id = self.next.fetch_add(1, Ordering::Relaxed);
        if let Ok(mut r) = self.routes.lock() {
            r.insert(token.clone(), (id, tx));
        }
        Subscription {
            routes: self.clone(),
            token,
            id,
            rx,
        }
    }
}

/// One call's progress reports.
pub(crate) struct Subscription {
    routes: Arc<ProgressRoutes>,
    token: ProgressToken,
    id: u64,
    rx: mpsc::Receiver<ProgressNotificationParam>,
}

impl Subscription {
    /// The next report.
    pub(crate) async fn recv(&mut self) -> Option<ProgressNotificationParam> {
        self.rx.recv().await
    }
}

impl Drop for Subscription {
    fn drop(&mut self) {
        if let Ok(mut r) = self.routes.routes.lock()
            && r.get(&self.token).is_some_and(|(id, _)| *id == self.id)
        {
            r.remove(&self.token);
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;
    use rmcp::model::NumberOrString;

    fn report(token: i64, progress: f64) -> ProgressNotificationParam {
        ProgressNotificationParam::new(ProgressToken(NumberOrString::Number(token)), progress)
    }

    #[tokio::test]
    async fn reports_reach_the_call_of_their_token_until_it_ends() {
        let routes = Arc::new(ProgressRoutes::default());
        let mut a = routes.subscribe(ProgressToken(NumberOrString::Number(1)));
        let mut b = routes.subscribe(ProgressToken(NumberOrString::Number(2)));
        routes.deliver(report(2, 1.0));
        routes.deliver(report(1, 3.0));
        routes.deliver(report(9, 1.0));
        assert_eq!(a.recv().await.unwrap().progress, 3.0);
        assert_eq!(b.recv().await.unwrap().progress, 1.0);
        drop(a);
        assert_eq!(routes.routes.lock().unwrap().len(), 1);
        // A later call with the same token replaces the route; the old one's end keeps it.
        let c = routes.subscribe(ProgressToken(NumberOrString::Number(2)));
        drop(b);
        routes.deliver(report(2, 5.0));
        let mut c = c;
        assert_eq!(c.recv().await.unwrap().progress, 5.0);
    }
}
