//! Fan-out groups: what a collector sees of its spawner's latest fan-out, and when it fires.

use trellis_protocol::NodeState;

use super::core::RunCore;
use crate::handler::{Aggregate, ChildResult};

impl RunCore {
    /// Every child of the latest fan-out of `spawner`, with the collector's verdict.
    pub fn collect(
        &self,
        spawner: usize,
        policy: crate::FailurePolicy,
    ) -> (Vec<ChildResult>, Aggregate) {
        let mut children = Vec::new();
        let (mut total, mut failures, mut pruned) = (0, 0, 0);
        let prefix_len = self.nodes[spawner].id.as_str().len() + 1;
        for id in &self.nodes[spawner].group {
            let Some(&c) = self.by_id.get(id) else {
                continue;
            };
            let n = &self.nodes[c];
            let state = n.state.unwrap_or(NodeState::Ready);
            if n.pruned {
                pruned += 1;
            } else {
                total += 1;
                if state == NodeState::Failed {
                    failures += 1;
                }
            }
            children.push(ChildResult {
                node: n.id.clone(),
                key: n
                    .id
                    .as_str()
                    .get(prefix_len..)
                    .unwrap_or_default()
                    .to_owned(),
                state,
                attempt: n.attempt,
                result: (*n.result).clone(),
                error: n.error.clone(),
            });
        }
        let failed = policy.group_failed(failures, total);
        (
            children,
            Aggregate {
                policy,
                failed,
                total,
                failures,
                pruned,
            },
        )
    }

    /// Whether every non-pruned child of the latest fan-out of `spawner` is final (a held
    /// child is not).
    pub fn group_done(&self, spawner: usize) -> bool {
        self.nodes[spawner]
            .group
            .iter()
            .all(|id| match self.by_id.get(id) {
                Some(&c) => {
                    let n = &self.nodes[c];
                    n.pruned || (!n.held && n.state.is_some_and(NodeState::is_final))
                }
                None => false,
            })
    }

    /// Ordinals of the node and its spawn-tree descendants (and collectors of spawners in it).
    pub fn subtree(&self, root: usize) -> Vec<usize> {
        let mut out = vec![root];
        let mut i = 0;
        while i < out.len() {
            let o = out[i];
            out.extend(self.nodes[o].children.iter().copied());
            if let Some(cs) = self.graph.collectors.get(&self.nodes[o].id) {
                out.extend(cs.iter().filter_map(|c| self.by_id.get(c).copied()));
            }
            i += 1;
        }
        out.dedup();
        out
    }
}
