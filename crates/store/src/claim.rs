//! Process identity and liveness, for run claims.
//!
//! A claim records `pid@host` plus the process's start time (field 22 of `/proc/<pid>/stat`,
//! clock ticks since boot). A claim is honoured while that process is alive; a claim whose
//! process exited — or whose pid now belongs to a different process (start time differs) —
//! is stale and taken over. Liveness is read from `/proc` rather than `kill(pid, 0)` because
//! the workspace forbids `unsafe`. Processes on another host cannot be checked: their claims
//! are honoured until released (`Store::break_claim` overrides one).

use std::path::Path;

use serde::Serialize;

/// The process holding (or asking for) a claim.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Owner {
    /// Process id.
    pub pid: u32,
    /// Host name.
    pub host: String,
    /// Process start time in clock ticks since boot, when `/proc` tells it; guards against pid
    /// reuse.
    pub start_time: Option<u64>,
}

impl Owner {
    /// This process.
    pub fn current() -> Self {
        let pid = std::process::id();
        Self {
            pid,
            host: hostname(),
            start_time: proc_stat(pid).and_then(|s| s.start_time),
        }
    }

    /// `pid@host`, as shown in messages.
    pub fn label(&self) -> String {
        format!("{}@{}", self.pid, self.host)
    }

    /// Whether `self` and `other` are the same process.
    pub fn same_process(&self, other: &Owner) -> bool {
        self.pid == other.pid
            && self.host == other.host
            && (self.start_time.is_none()
                || other.start_time.is_none()
                || self.start_time == other.start_time)
    }

    /// Whether this owner may still be running, judged from host `local_host`. Owners on
    /// other hosts, and any owner when `/proc` is unavailable, count as alive.
    pub fn is_alive(&self, local_host: &str) -> bool {
        if self.host != local_host || !Path::new("/proc/self/stat").exists() {
            return true;
        }
        match proc_stat(self.pid) {
            None => false,
            Some(stat) if matches!(stat.state, 'Z' | 'X' | 'x') => false,
            Some(stat) => match (self.start_time, stat.start_time) {
                (Some(claimed), Some(now)) => claimed == now,
                _ => true,
            },
        }
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
        let me = Owner::current();
        assert!(me.start_time.is_some());
        assert!(me.is_alive(&hostname()));
        let reused = Owner {
            start_time: me.start_time.map(|t| t + 1),
            ..me.clone()
        };
        assert!(
            !reused.is_alive(&hostname()),
            "a different start time means pid reuse"
        );
        let remote = Owner {
            host: "elsewhere.invalid".into(),
            pid: u32::MAX,
            ..me
        };
        assert!(
            remote.is_alive(&hostname()),
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
        assert!(!ghost.is_alive(&hostname()));
    }
}
