//! The per-command pids cgroups where the cgroup tree is writable (cgroup v1's `pids`
//! hierarchy here): names never collide with what an earlier process left behind, and what a
//! process that is gone left behind is removed.

use std::path::PathBuf;

use trellis_sandbox::Preset;

use super::fixture::{Fixture, run};

/// The writable v1 `pids` hierarchy's root, if this machine has one (else nothing to test).
fn pids_root() -> Option<PathBuf> {
    let root = PathBuf::from("/sys/fs/cgroup/pids");
    let own = std::fs::read_to_string("/proc/self/cgroup").ok()?;
    let rel = own.lines().find_map(|l| {
        l.split_once(":pids:")
            .map(|(_, p)| p.trim_start_matches('/').to_owned())
    })?;
    let dir = root.join(rel);
    std::fs::OpenOptions::new()
        .write(true)
        .open(dir.join("tasks"))
        .ok()
        .map(|_| dir)
}

#[test]
fn stale_cgroups_are_swept_and_a_taken_name_is_skipped() {
    let Some(parent) = pids_root() else {
        eprintln!("no writable cgroup v1 pids hierarchy: nothing to test");
        return;
    };
    // Left by a process that is gone (no pid is above the kernel's 2^22 limit)...
    let stale = parent.join("trellis-sandbox-4194305-0");
    let _ = std::fs::create_dir(&stale);
    // ...and names this process will want first, as a dead process of the same pid would
    // have left them.
    let me = std::process::id();
    let taken: Vec<PathBuf> = (0..3)
        .map(|n| parent.join(format!("trellis-sandbox-{me}-{n}")))
        .collect();
    for t in &taken {
        std::fs::create_dir(t).unwrap();
    }
    let f = Fixture::new();
    let mut policy = f.policy(Preset::WorkspaceWrite);
    policy.pids_max = 40;
    for sandbox in Fixture::sandboxes() {
        // The command runs in a cgroup of its own, limited as configured.
        let ran = run(
            &sandbox,
            &policy,
            &f.worktree,
            &f.home,
            &super::fixture::fork_children(60),
        );
        let n = super::fixture::started(&ran);
        assert!(
            n.is_some_and(|n| n < 40),
            "{}: {n:?} {ran:?}",
            sandbox.backend().name()
        );
    }
    assert!(!stale.exists(), "a gone process's cgroup was left");
    for t in &taken {
        let _ = std::fs::remove_dir(t);
    }
}
