//! A collector's failure policy: when a group of children counts as failed.

use serde::{Deserialize, Serialize};

/// How a collector decides that its group of children failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FailurePolicy {
    /// The group fails if any child failed.
    AnyFails,
    /// The group fails only if every child failed (an empty group does not fail).
    AllFail,
    /// The group fails if more than half of the children failed.
    MajorityFail,
    /// The group succeeds if at least `k` children succeeded.
    Quorum(u32),
}

impl FailurePolicy {
    /// Whether a group with `failed` failures out of `total` children failed.
    pub fn group_failed(self, failed: usize, total: usize) -> bool {
        match self {
            FailurePolicy::AnyFails => failed > 0,
            FailurePolicy::AllFail => total > 0 && failed == total,
            FailurePolicy::MajorityFail => failed * 2 > total,
            FailurePolicy::Quorum(k) => total.saturating_sub(failed) < k as usize,
        }
    }

    /// The short name a graph fingerprint records: `any`, `all`, `majority`, `quorum(k)`.
    pub(crate) fn name(self) -> String {
        match self {
            FailurePolicy::AnyFails => "any".into(),
            FailurePolicy::AllFail => "all".into(),
            FailurePolicy::MajorityFail => "majority".into(),
            FailurePolicy::Quorum(k) => format!("quorum({k})"),
        }
    }
}
