//! What the benchmark learns from the operating system: CPU time, memory, load, the machine.
//!
//! Everything comes from `/proc` (the workspace denies `unsafe_code`, so no `getrusage`).

use std::path::Path;
use std::process::Command;

use serde::Serialize;

/// CPU time (user + system) consumed so far by every live thread of this process, in
/// seconds: the sum of the first field of `/proc/self/task/*/schedstat` (nanoseconds). Threads
/// that already exited are not counted, so callers measure across spans in which the
/// runtime's and the store's threads stay alive. Falls back to `/proc/self/stat`
/// (utime + stime, 10 ms ticks) when schedstat is unavailable.
pub fn cpu_seconds() -> f64 {
    schedstat_seconds().unwrap_or_else(stat_seconds)
}

fn schedstat_seconds() -> Option<f64> {
    let mut total_ns: u64 = 0;
    for entry in std::fs::read_dir("/proc/self/task").ok()? {
        let path = entry.ok()?.path().join("schedstat");
        // A thread may exit between listing and reading: skip it.
        let Ok(text) = std::fs::read_to_string(&path) else {
            continue;
        };
        total_ns += text.split_whitespace().next()?.parse::<u64>().ok()?;
    }
    Some(total_ns as f64 * 1e-9)
}

fn stat_seconds() -> f64 {
    let Ok(text) = std::fs::read_to_string("/proc/self/stat") else {
        return f64::NAN;
    };
    // Fields after the parenthesised command name; utime and stime are fields 14 and 15.
    let rest = text.rsplit_once(')').map_or("", |(_, r)| r);
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let tick = |i: usize| {
        fields
            .get(i)
            .and_then(|f| f.parse::<f64>().ok())
            .unwrap_or(f64::NAN)
    };
    // fields[0] is field 3 (state), so field 14 is fields[11].
    (tick(11) + tick(12)) / 100.0
}

/// A `VmXXX:` line of `/proc/self/status`, in MiB.
fn status_mib(key: &str) -> f64 {
    let Ok(text) = std::fs::read_to_string("/proc/self/status") else {
        return f64::NAN;
    };
    text.lines()
        .find_map(|l| l.strip_prefix(key))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|kib| kib.parse::<f64>().ok())
        .map_or(f64::NAN, |kib| kib / 1024.0)
}

/// Current resident set size, MiB.
pub fn rss_mib() -> f64 {
    status_mib("VmRSS:")
}

/// Peak resident set size of this process, MiB (what Python's `ru_maxrss` reports).
pub fn peak_rss_mib() -> f64 {
    status_mib("VmHWM:")
}

/// The 1/5/15-minute load averages.
pub fn loadavg() -> [f64; 3] {
    let text = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    let mut it = text
        .split_whitespace()
        .map(|v| v.parse::<f64>().unwrap_or(f64::NAN));
    [
        it.next().unwrap_or(f64::NAN),
        it.next().unwrap_or(f64::NAN),
        it.next().unwrap_or(f64::NAN),
    ]
}

/// The machine and software the numbers were measured on.
#[derive(Clone, Debug, Serialize)]
pub struct Machine {
    /// Logical CPUs available to this process.
    pub nproc: usize,
    /// `lscpu`'s model name.
    pub cpu_model: String,
    /// `lscpu`'s hypervisor vendor, if any.
    pub hypervisor: Option<String>,
    /// Kernel release.
    pub kernel: String,
    /// `rustc --version`.
    pub rustc: String,
    /// Trellis commit (`git rev-parse --short HEAD`, `+dirty` when the tree has changes).
    pub commit: String,
    /// SQLite compiled into the store.
    pub sqlite: String,
    /// Total memory, MiB.
    pub mem_total_mib: f64,
}

/// Output of a command, trimmed, or `"?"` when it cannot run.
fn output(cmd: &str, args: &[&str], dir: &Path) -> String {
    Command::new(cmd)
        .args(args)
        .current_dir(dir)
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map_or_else(
            || "?".to_owned(),
            |o| String::from_utf8_lossy(&o.stdout).trim().to_owned(),
        )
}

impl Machine {
    /// Collects the description (`repo` is the Trellis checkout).
    pub fn detect(repo: &Path) -> Self {
        let lscpu = output("lscpu", &[], repo);
        let field = |name: &str| {
            lscpu
                .lines()
                .find_map(|l| l.strip_prefix(name))
                .map(|v| v.trim_start_matches(':').trim().to_owned())
        };
        let dirty = !output(
            "git",
            &["status", "--porcelain", "--untracked-files=no"],
            repo,
        )
        .is_empty();
        let commit = output("git", &["rev-parse", "--short", "HEAD"], repo);
        let mem_total_mib = std::fs::read_to_string("/proc/meminfo")
            .ok()
            .and_then(|t| {
                t.lines()
                    .find_map(|l| l.strip_prefix("MemTotal:"))
                    .map(str::to_owned)
            })
            .and_then(|v| {
                v.split_whitespace()
                    .next()
                    .and_then(|k| k.parse::<f64>().ok())
            })
            .map_or(f64::NAN, |kib| kib / 1024.0);
        Self {
            nproc: std::thread::available_parallelism().map_or(0, usize::from),
            cpu_model: field("Model name").unwrap_or_else(|| "?".into()),
            hypervisor: field("Hypervisor vendor"),
            kernel: std::fs::read_to_string("/proc/sys/kernel/osrelease")
                .map_or_else(|_| "?".into(), |s| s.trim().to_owned()),
            rustc: output("rustc", &["--version"], repo),
            commit: if dirty {
                format!("{commit}+dirty")
            } else {
                commit
            },
            sqlite: rusqlite::version().to_owned(),
            mem_total_mib,
        }
    }
}

/// Now as `YYYY-MM-DD HH:MM:SS UTC`.
pub fn utc_now() -> String {
    let t = trellis_protocol::format_utc_ms(trellis_protocol::now_ms());
    format!("{} UTC", t.get(..19).unwrap_or(&t))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_time_advances() {
        let a = cpu_seconds();
        let start = std::time::Instant::now();
        let mut x = 0u64;
        while cpu_seconds() <= a && start.elapsed() < std::time::Duration::from_secs(5) {
            for i in 0..100_000u64 {
                x = std::hint::black_box(x.wrapping_add(i));
            }
        }
        assert!(cpu_seconds() > a, "no CPU time accounted after {x}");
    }
}
