//! Matching the recorded model calls (`model_calls`: model, profile, cost) to the turns that
//! made them. A turn's events do not name the model; the call recorded for the turn's stage
//! as the turn ended does.

use std::collections::{HashMap, VecDeque};

use trellis_protocol::records::ModelCallRecord;

use crate::semconv::{self, trellis};
use crate::span::Attributes;

/// How long after a turn's end its call may be recorded (the ledger books it after the
/// stream ends).
const LATE_MS: i64 = 2_000;

/// The recorded calls not claimed yet, per (run, stage), in the order they ended.
#[derive(Debug, Default)]
pub(super) struct ModelCalls {
    pending: HashMap<(String, String), VecDeque<ModelCallRecord>>,
    skipped: Vec<ModelCallRecord>,
}

impl ModelCalls {
    pub(super) fn extend(&mut self, calls: impl IntoIterator<Item = ModelCallRecord>) {
        for call in calls {
            match (&call.run_id, &call.stage) {
                (Some(run), Some(stage)) => self
                    .pending
                    .entry((run.to_string(), stage.clone()))
                    .or_default()
                    .push_back(call),
                _ => self.skipped.push(call),
            }
        }
        for queue in self.pending.values_mut() {
            queue.make_contiguous().sort_by_key(|c| (c.at, c.id));
        }
    }

    /// The call of a turn of `stage` that ran from `start_ms` to `end_ms`: the first one
    /// recorded after the turn started, if it was recorded by `end_ms` (plus a margin).
    /// Calls recorded before it (summaries, retries) are left for [`ModelCalls::unclaimed`].
    pub(super) fn claim(
        &mut self,
        run: &str,
        stage: &str,
        start_ms: i64,
        end_ms: i64,
    ) -> Option<ModelCallRecord> {
        let queue = self.pending.get_mut(&(run.to_owned(), stage.to_owned()))?;
        while queue.front().is_some_and(|c| c.at < start_ms) {
            if let Some(c) = queue.pop_front() {
                self.skipped.push(c);
            }
        }
        if queue.front().is_some_and(|c| c.at <= end_ms + LATE_MS) {
            return queue.pop_front();
        }
        None
    }

    /// Whether no call was ever added (a live mapper's).
    pub(super) fn is_empty(&self) -> bool {
        self.pending.is_empty() && self.skipped.is_empty()
    }

    /// Every call no turn claimed.
    pub(super) fn unclaimed(&mut self) -> Vec<ModelCallRecord> {
        let mut out = std::mem::take(&mut self.skipped);
        out.extend(self.pending.drain().flat_map(|(_, q)| q));
        out.sort_by_key(|c| (c.at, c.id));
        out
    }
}

/// The attributes a recorded call adds to its span: model, profile, cached tokens, cost.
pub(super) fn describe(attrs: &mut Attributes, call: &ModelCallRecord) {
    attrs.set(semconv::GEN_AI_REQUEST_MODEL, call.model.as_str());
    attrs.set(trellis::MODEL_PROFILE, call.profile.as_str());
    if call.cached_tokens > 0 {
        attrs.set(
            semconv::GEN_AI_USAGE_CACHE_READ_INPUT_TOKENS,
            call.cached_tokens,
        );
    }
    if let Some(cost) = call.cost_usd {
        attrs.set(trellis::COST_USD, cost);
    }
}
