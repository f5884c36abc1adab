//! Process identity and liveness, for run claims.
//!
//! A claim records `pid@host` plus the process's start time (field 22 of `/proc/<pid>/stat`,
//! clock ticks since boot). A claim is honoured while that process is alive; a claim whose
//! process exited — or whose pid now belongs to a different process (start time differs) —
//! is stale and taken over. Liveness is read from `/proc` rather than `kill(pid, 0)` because
//! the workspace forbids `unsafe`. Processes on another host cannot be checked: their claims
//! are honoured until released (`RunStore::break_claim` overrides one).

use std::path::Path;

use trellis_protocol::records::Owner;

/// This process, as a claim names it.
pub(crate) fn current_owner() -> Owner {
    let pid = std::process::id();
    Owner {
        pid,
        host: hostname(),
        start_time: proc_stat(pid).and_then(|s| s.start_time),
    }
}

/// Whether `owner` may still be running, judged from host `local_host`. Owners on other
/// hosts, and any owner when `/proc` is unavailable, count as alive.
pub(crate) fn is_alive(owner: &Owner, local_host: &str) -> bool {
    if owner.host != local_host || !Path::new("/proc/self/stat").exists() {
        return true;
    }
    match proc_stat(owner.pid) {
        None => false,
        Some(stat) if matches!(stat.state, 'Z' | 'X' | 'x') => false,
        Some(stat) => match (owner.start_time, stat.start_time) {
            (Some(claimed), Some(now)) => claimed == now,
            _ => true,
        },
    }
}

/// This machine's host name (`/proc/sys/kernel/hostname`, then `/etc/hostname`).
pub fn hostname() -> String {
    ["/proc/sys/kernel/hostname", "/etc/hostname"]
        .iter()
        .filter_map(|p| std::fs::read_to_string(p).ok())
        .map(|s| s.trim().to_owned())
        .find(|s| !s.is_empty())
        .unwrap_or_else(|| "localhost".to_owned())
}

struct ProcStat {
    state: char,
    start_time: Option<u64>,
}

/// Reads `/proc/<pid>/stat`; `None` when the process does not exist.
fn proc_stat(pid: u32) -> Option<ProcStat> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // `pid (comm) state …`: comm may contain spaces and parentheses, so split after the
    // last `)`. Fields are numbered from 1; state is field 3, starttime field 22.
    let rest = &text[text.rfind(')')? + 1..];
    let mut fields = rest.split_whitespace();
    let state = fields.next()?.chars().next()?;
    let start_time = fields.nth(18).and_then(|f| f.parse().ok());
    Some(ProcStat { state, start_time })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn this_process_is_alive_and_has_a_start_time() {
        let me = current_owner();
        assert!(me.start_time.is_some());
        assert!(is_alive(&me, &hostname()));
        let reused = Owner {
            start_time: me.start_time.map(|t| t + 1),
            ..me.clone()
        };
        assert!(
            !is_alive(&reused, &hostname()),
            "a different start time means pid reuse"
        );
        let remote = Owner {
            host: "elsewhere.invalid".into(),
            pid: u32::MAX,
            ..me
        };
        assert!(
            is_alive(&remote, &hostname()),
            "remote owners cannot be checked"
        );
    }

    #[test]
    fn absent_pid_is_dead() {
        let ghost = Owner {
            pid: u32::MAX - 1,
            host: hostname(),
            start_time: None,
        };
        assert!(!is_alive(&ghost, &hostname()));
    }
}
