//! Dependencies between spawned children ([`NodeOutput::spawn_after`]) and revisions requested
//! by handlers ([`NodeOutput::revise`]).
//!
//! A child added with dependencies (`nodeAdded.after`) is *held*: it has no activation until
//! the latest activation of every dependency is COMPLETED and none of them may run again; it
//! becomes READY at the end of that step. A held child one of whose dependencies ended
//! otherwise for good is SKIPPED, and so, in turn, are its held dependents. When a dependency
//! completes again, its dependents run again. The live driver decides all of this at the end
//! of a step (and after a prune) and records it as ordinary transitions, so replay, resume
//! and fork need nothing special.

use std::cmp::Reverse;
use std::collections::{BTreeSet, BinaryHeap};

use rustc_hash::{FxHashMap, FxHashSet};
use trellis_protocol::{EventKind, NodeId, NodeState};

use super::core::{NodeRt, REVISION_REASON, RunCore};
use super::live::Live;
use crate::Result;
use crate::handler::NodeOutput;

impl RunCore {
    /// Records the siblings `id` waits for (`nodeAdded.after`); with some, it is held.
    pub(super) fn set_after(&mut self, id: &NodeId, after: &[NodeId]) -> Result<()> {
        let o = self.node_of(id)?;
        let mut deps = Vec::with_capacity(after.len());
        for d in after {
            let d = self.node_of(d)?;
            if !deps.contains(&d) {
                deps.push(d);
            }
        }
        let n = &mut self.nodes[o];
        n.held = !deps.is_empty();
        n.after = deps;
        self.has_deps |= n.held;
        Ok(())
    }

    /// The siblings waiting for `o`, in node order.
    fn dependents(&self, o: usize) -> impl Iterator<Item = usize> + '_ {
        let siblings: &[usize] = match self.nodes[o].parent {
            Some(p) => &self.nodes[p].children,
            None => &[],
        };
        siblings
            .iter()
            .copied()
            .filter(move |&s| self.nodes[s].after.contains(&o))
    }

    /// Whether `o` may still run again: it, or one of its transitive dependencies, is active
    /// or held (a pruned node never runs again, whatever its dependencies do).
    fn may_run(&self, o: usize) -> bool {
        let mut seen = FxHashSet::default();
        let mut stack = vec![o];
        while let Some(x) = stack.pop() {
            let n = &self.nodes[x];
            if n.pruned || !seen.insert(x) {
                continue;
            }
            if n.is_active() || n.held {
                return true;
            }
            stack.extend(n.after.iter().copied());
        }
        false
    }

    /// Whether dependency `d` is done: its latest activation COMPLETED and it will not run
    /// again.
    fn dep_done(&self, d: usize) -> bool {
        self.nodes[d].state == Some(NodeState::Completed) && !self.may_run(d)
    }

    /// The first dependency of `o` that ended otherwise than COMPLETED for good, and how.
    fn blocker(&self, o: usize) -> Option<(usize, &'static str)> {
        self.nodes[o].after.iter().find_map(|&d| {
            let n = &self.nodes[d];
            let how = match n.state {
                _ if n.pruned => "was pruned",
                Some(NodeState::Failed) => "failed",
                Some(NodeState::Skipped) => "was skipped",
                _ => return None,
            };
            (n.pruned || !self.may_run(d)).then_some((d, how))
        })
    }

    /// The members of `set` in an order where dependencies come first (ties by node order).
    fn dependencies_first(&self, set: &BTreeSet<usize>) -> Vec<usize> {
        let mut waiting: FxHashMap<usize, usize> = set
            .iter()
            .map(|&d| {
                let n = self.nodes[d]
                    .after
                    .iter()
                    .filter(|a| set.contains(a))
                    .count();
                (d, n)
            })
            .collect();
        let mut next: BinaryHeap<Reverse<usize>> = waiting
            .iter()
            .filter(|&(_, &n)| n == 0)
            .map(|(&d, _)| Reverse(d))
            .collect();
        let mut order = Vec::with_capacity(set.len());
        let mut placed = FxHashSet::default();
        while order.len() < set.len() {
            // Dependencies are acyclic; should a cycle slip in, it is broken at its first node.
            let d = match next.pop() {
                Some(Reverse(d)) => d,
                None => match set.iter().find(|d| !placed.contains(*d)) {
                    Some(&d) => d,
                    None => break,
                },
            };
            if !placed.insert(d) {
                continue;
            }
            order.push(d);
            for e in self.dependents(d) {
                if let Some(n) = waiting.get_mut(&e) {
                    *n = n.saturating_sub(1);
                    if *n == 0 && !placed.contains(&e) {
                        next.push(Reverse(e));
                    }
                }
            }
        }
        order
    }
}

/// Why `n` cannot be revised now, if it cannot (the rules of the `revise` command).
fn revision_refused(n: &NodeRt) -> Option<String> {
    match n.state {
        _ if n.pruned => return Some("it is PRUNED".into()),
        _ if n.held => return Some("it waits for its own dependencies".into()),
        Some(NodeState::Completed | NodeState::Failed) => {}
        None => return Some("it has not run yet".into()),
        Some(s @ (NodeState::Ready | NodeState::Running | NodeState::WaitingInput)) => {
            return Some(format!("it is {s}, not finished"));
        }
        Some(s) => {
            return Some(format!(
                "it is {s}; only COMPLETED or FAILED nodes can be revised"
            ));
        }
    }
    let max = n.def.max_attempts?;
    (n.revisions >= max).then(|| {
        format!(
            "it was revised {} time(s), its max_attempts ({max})",
            n.revisions
        )
    })
}

impl Live {
    /// Checks the dependencies of `out`'s spawns and its revision requests against the run as
    /// it is now, for activation `o`; returns the revised dependencies' ids.
    pub(super) fn check_deps(
        &self,
        o: usize,
        out: &NodeOutput,
    ) -> std::result::Result<Vec<NodeId>, String> {
        if out.spawn_after.iter().any(|a| !a.is_empty()) {
            self.check_spawn_after(o, out)?;
        }
        let mut revise = Vec::new();
        for target in &out.revise {
            let d = self.dependency(o, target)?;
            let n = &self.core.nodes[d];
            if let Some(why) = revision_refused(n) {
                return Err(format!("cannot revise {}: {why}", n.id));
            }
            if !revise.contains(&n.id) {
                revise.push(n.id.clone());
            }
        }
        Ok(revise)
    }

    /// The dependency of `o` named `target` (its id or its spawn key).
    fn dependency(&self, o: usize, target: &NodeId) -> std::result::Result<usize, String> {
        let nodes = &self.core.nodes;
        let n = &nodes[o];
        let by_key = n.parent.map(|p| nodes[p].id.child(target.as_str()));
        n.after
            .iter()
            .copied()
            .find(|&d| nodes[d].id == *target || by_key.as_ref() == Some(&nodes[d].id))
            .ok_or_else(|| {
                let deps: Vec<&str> = n.after.iter().map(|&d| nodes[d].id.as_str()).collect();
                format!(
                    "cannot revise `{target}`: it is not a dependency of {} ({})",
                    n.id,
                    if deps.is_empty() {
                        "it has none".to_owned()
                    } else {
                        format!("its dependencies: {}", deps.join(", "))
                    }
                )
            })
    }

    /// Every dependency must be listed before its dependent or be an existing child of the
    /// spawner (not listed again after it), and the dependencies stay acyclic.
    fn check_spawn_after(&self, o: usize, out: &NodeOutput) -> std::result::Result<(), String> {
        let nodes = &self.core.nodes;
        let spawner = &nodes[o];
        let prefix = spawner.id.as_str().len() + 1;
        let key_of = |c: usize| nodes[c].id.as_str().get(prefix..).unwrap_or_default();
        let existing: Vec<&str> = spawner.children.iter().map(|&c| key_of(c)).collect();
        let keys: Vec<&str> = out.spawns.iter().map(|(k, _, _)| k.as_str()).collect();
        for (i, (&key, after)) in keys.iter().zip(&out.spawn_after).enumerate() {
            let first = keys.iter().position(|&k| k == key).unwrap_or(i);
            if first < i {
                if out.spawn_after[first] != *after {
                    return Err(format!(
                        "spawn `{key}` is listed twice with different dependencies"
                    ));
                }
                continue;
            }
            for dep in after.iter().map(String::as_str) {
                if dep == key {
                    return Err(format!("spawn `{key}` cannot wait for itself"));
                }
                let later = keys[i + 1..].contains(&dep);
                if keys[..i].contains(&dep) || (!later && existing.contains(&dep)) {
                    continue;
                }
                let mut valid: Vec<&str> = keys[..i]
                    .iter()
                    .copied()
                    .chain(existing.iter().copied().filter(|e| !keys[i..].contains(e)))
                    .collect();
                valid.sort_unstable();
                valid.dedup();
                let valid = if valid.is_empty() {
                    "none".to_owned()
                } else {
                    valid.join(", ")
                };
                return Err(if later {
                    format!(
                        "spawn `{key}` waits for `{dep}`, which is listed after it; list dependencies first (valid for `{key}`: {valid})"
                    )
                } else {
                    format!(
                        "spawn `{key}` waits for `{dep}`, which is neither spawned before it nor a child of {} (valid for `{key}`: {valid})",
                        spawner.id
                    )
                });
            }
        }
        // Children that stay as they are (completed, active) keep their dependencies; the
        // others take the new ones (pruned ones never run again). A cycle could only come
        // through the former.
        let mut deps: FxHashMap<&str, Vec<&str>> = spawner
            .children
            .iter()
            .filter(|&&c| !nodes[c].pruned)
            .map(|&c| {
                (
                    key_of(c),
                    nodes[c].after.iter().map(|&d| key_of(d)).collect(),
                )
            })
            .collect();
        for (&key, after) in keys.iter().zip(&out.spawn_after) {
            let kept = self.core.ordinal(&spawner.id.child(key)).is_some_and(|c| {
                let n = &nodes[c];
                n.pruned || n.is_active() || n.state == Some(NodeState::Completed)
            });
            if !kept {
                deps.insert(key, after.iter().map(String::as_str).collect());
            }
        }
        for &key in &keys {
            // Depth-first from `key`: `path` holds the keys of the frames on `stack`.
            let mut visited = FxHashSet::from_iter([key]);
            let mut path = vec![key];
            let mut stack = vec![(key, 0usize)];
            while let Some((k, i)) = stack.pop() {
                let Some(&next) = deps.get(k).and_then(|d| d.get(i)) else {
                    path.pop();
                    continue;
                };
                stack.push((k, i + 1));
                if next == key {
                    path.push(next);
                    return Err(format!(
                        "spawn dependencies would form a cycle: {}",
                        path.join(" → ")
                    ));
                }
                if visited.insert(next) {
                    path.push(next);
                    stack.push((next, 0));
                }
            }
        }
        Ok(())
    }

    /// Applies the revisions requested by the outputs of the step just completed: each
    /// dependency still revisable gets a new activation (`revision requested`).
    pub(super) fn apply_revisions(&mut self) -> Result<()> {
        for (_, targets) in std::mem::take(&mut self.core.revised) {
            for target in targets {
                let Some(o) = self.core.ordinal(&target) else {
                    continue;
                };
                let n = &self.core.nodes[o];
                // Checked when the output was recorded; a command may have changed it since
                // (revised or pruned it): then it stays as it is.
                if revision_refused(n).is_some() {
                    continue;
                }
                let attempt = n.attempt + 1;
                self.emit(EventKind::NodeTransition {
                    node: target,
                    attempt,
                    from: None,
                    to: NodeState::Ready,
                    reason: Some(REVISION_REASON.into()),
                })?;
            }
        }
        Ok(())
    }

    /// Settles the dependents of `changed` nodes (finished in the step just completed, pruned,
    /// or added held): each of them — and of their dependents, transitively — is evaluated
    /// once, dependencies first. A held one whose dependencies are done becomes READY; one whose
    /// dependency ended otherwise for good is SKIPPED. A finished one (COMPLETED, FAILED,
    /// SKIPPED) runs again when a dependency of it completed in this step and all are done.
    pub(super) fn settle_dependents(&mut self, changed: &[usize]) -> Result<()> {
        if !self.core.has_deps {
            return Ok(());
        }
        let core = &self.core;
        let completed: Vec<usize> = changed
            .iter()
            .copied()
            .filter(|&c| core.nodes[c].state == Some(NodeState::Completed))
            .collect();
        let mut set = BTreeSet::new();
        let mut stack = Vec::new();
        for &c in changed {
            if core.nodes[c].held {
                set.insert(c);
            }
            stack.push(c);
        }
        while let Some(x) = stack.pop() {
            for d in core.dependents(x) {
                if set.insert(d) {
                    stack.push(d);
                }
            }
        }
        if set.is_empty() {
            return Ok(());
        }
        for d in core.dependencies_first(&set) {
            self.settle_one(d, &completed)?;
        }
        Ok(())
    }

    fn settle_one(&mut self, d: usize, completed: &[usize]) -> Result<()> {
        let core = &self.core;
        let n = &core.nodes[d];
        if n.pruned || n.is_active() || n.after.is_empty() {
            return Ok(());
        }
        if n.after.iter().all(|&a| core.dep_done(a)) {
            if n.held || n.after.iter().any(|a| completed.contains(a)) {
                let id = n.id.clone();
                self.activate(&id, 0)?;
            }
        } else if n.held
            && let Some((dep, how)) = core.blocker(d)
        {
            let reason = format!("dependency {} {how}", core.nodes[dep].id);
            self.skip_held(d, reason)?;
        }
        Ok(())
    }

    /// Records a held child's end: an activation that is SKIPPED at once.
    fn skip_held(&mut self, o: usize, reason: String) -> Result<()> {
        let n = &self.core.nodes[o];
        let (node, attempt) = (n.id.clone(), n.attempt + 1);
        self.emit(EventKind::NodeTransition {
            node: node.clone(),
            attempt,
            from: None,
            to: NodeState::Ready,
            reason: None,
        })?;
        self.emit(EventKind::NodeTransition {
            node,
            attempt,
            from: Some(NodeState::Ready),
            to: NodeState::Skipped,
            reason: Some(reason),
        })
    }

    /// Nothing can run any more (and no node waits for input): every child still held is
    /// settled, and those that are still held then are SKIPPED, so the run neither hangs nor
    /// ends with children waiting; collectors they unblock fire. Whether anything is READY
    /// now.
    pub(super) fn release_held(&mut self) -> Result<bool> {
        let core = &self.core;
        if !core.has_deps
            || core
                .nodes
                .iter()
                .any(|n| n.state == Some(NodeState::WaitingInput))
        {
            return Ok(false);
        }
        let held: Vec<usize> = (0..core.nodes.len())
            .filter(|&o| core.nodes[o].held)
            .collect();
        if held.is_empty() {
            return Ok(false);
        }
        self.settle_dependents(&held)?;
        for o in held {
            let core = &self.core;
            if !core.nodes[o].held {
                continue;
            }
            let reason = match core.blocker(o) {
                Some((dep, how)) => format!("dependency {} {how}", core.nodes[dep].id),
                None => {
                    let dep = core.nodes[o]
                        .after
                        .iter()
                        .find(|&&d| !core.dep_done(d))
                        .map_or_else(String::new, |&d| core.nodes[d].id.to_string());
                    format!("dependency {dep} never completed")
                }
            };
            self.skip_held(o, reason)?;
        }
        self.fire_collectors()?;
        Ok(self.core.has_ready())
    }
}
