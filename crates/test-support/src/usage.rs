//! What a benchmark's process uses: CPU time (`getrusage`) and resident memory
//! (`/proc/self/status`). Linux (and other Unix systems for the CPU times).

use std::time::Duration;

/// User + system CPU time of the process so far (`getrusage(RUSAGE_SELF)`: every thread,
/// exited ones included).
pub fn cpu_time() -> Duration {
    rusage(libc::RUSAGE_SELF)
}

/// User + system CPU time of the child processes waited for so far (git, test commands):
/// `getrusage(RUSAGE_CHILDREN)`.
pub fn children_cpu_time() -> Duration {
    rusage(libc::RUSAGE_CHILDREN)
}

/// User + system CPU time of the calling thread so far (`getrusage(RUSAGE_THREAD)`, Linux).
#[cfg(target_os = "linux")]
pub fn thread_cpu_time() -> Duration {
    rusage(libc::RUSAGE_THREAD)
}

#[allow(unsafe_code)]
fn rusage(who: libc::c_int) -> Duration {
    let mut ru = std::mem::MaybeUninit::<libc::rusage>::zeroed();
    // SAFETY: `ru` is valid for writes of a `rusage`, which is all getrusage writes.
    let rc = unsafe { libc::getrusage(who, ru.as_mut_ptr()) };
    if rc != 0 {
        return Duration::ZERO;
    }
    // SAFETY: zero-initialised (a valid `rusage`: integers only) and filled by the call.
    let ru = unsafe { ru.assume_init() };
    let tv = |t: libc::timeval| {
        Duration::from_secs(u64::try_from(t.tv_sec).unwrap_or(0))
            + Duration::from_micros(u64::try_from(t.tv_usec).unwrap_or(0))
    };
    tv(ru.ru_utime) + tv(ru.ru_stime)
}

fn status_kib(field: &str) -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    status
        .lines()
        .find_map(|l| l.strip_prefix(field))
        .and_then(|v| v.trim_start_matches(':').split_whitespace().next())
        .and_then(|v| v.parse().ok())
}

/// Peak resident set size, `VmHWM` of `/proc/self/status`, KiB.
pub fn peak_rss_kib() -> Option<u64> {
    status_kib("VmHWM")
}

/// Resident set size now, `VmRSS` of `/proc/self/status`, KiB.
pub fn rss_kib() -> Option<u64> {
    status_kib("VmRSS")
}

/// Resets `VmHWM` to the current RSS (`echo 5 > /proc/self/clear_refs`, Linux ≥ 4.0);
/// whether it could.
pub fn reset_peak_rss() -> bool {
    std::fs::write("/proc/self/clear_refs", "5").is_ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_this_process() {
        let mut x = 0u64;
        for i in 0..2_000_000u64 {
            x = x.wrapping_mul(31).wrapping_add(i);
        }
        assert!(x != 1);
        assert!(cpu_time() > Duration::ZERO);
        if cfg!(target_os = "linux") {
            assert!(rss_kib().unwrap() > 0);
            assert!(peak_rss_kib().unwrap() >= rss_kib().unwrap() / 2);
        }
    }
}
