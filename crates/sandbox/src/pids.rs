//! The pids limit: a pids cgroup of its own per command where the cgroup tree is writable
//! (cgroup v1's `pids` hierarchy, or a v2 cgroup whose `pids` controller is delegated),
//! joined by the child before it runs anything; else `RLIMIT_NPROC`, which the kernel
//! counts per user (so it is set to the user's processes now plus the limit) and does not
//! enforce for root.

use std::fs::File;
use std::os::fd::{AsRawFd, RawFd};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

static NEXT: AtomicU64 = AtomicU64::new(0);

/// A command's pids cgroup: removed (its processes killed first) when dropped.
#[derive(Debug)]
pub struct PidsCgroup {
    dir: PathBuf,
    procs: File,
}

impl PidsCgroup {
    /// A new cgroup limited to `max` processes, or `None` where none can be made.
    pub fn create(max: u32) -> Option<Self> {
        let parent = parent_dir()?;
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let dir = parent.join(format!("trellis-sandbox-{}-{n}", std::process::id()));
        std::fs::create_dir(&dir).ok()?;
        let made = std::fs::write(dir.join("pids.max"), max.to_string())
            .and_then(|()| File::options().write(true).open(dir.join("cgroup.procs")));
        match made {
            Ok(procs) => Some(Self { dir, procs }),
            Err(_) => {
                let _ = std::fs::remove_dir(&dir);
                None
            }
        }
    }

    /// The descriptor the child writes `0` to (itself) before it runs anything.
    pub fn procs_fd(&self) -> RawFd {
        self.procs.as_raw_fd()
    }

    /// The cgroup's directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }
}

impl Drop for PidsCgroup {
    fn drop(&mut self) {
        // Removed off the command's path: an exited command's processes linger in the
        // cgroup for a few milliseconds while its namespaces are torn down.
        let dir = std::mem::take(&mut self.dir);
        match reaper() {
            Some(tx) if tx.send(dir.clone()).is_ok() => {}
            _ => remove(&dir),
        }
    }
}

/// The thread that removes finished commands' cgroups.
fn reaper() -> Option<std::sync::mpsc::Sender<PathBuf>> {
    static REAPER: std::sync::OnceLock<Option<std::sync::Mutex<std::sync::mpsc::Sender<PathBuf>>>> =
        std::sync::OnceLock::new();
    REAPER
        .get_or_init(|| {
            let (tx, rx) = std::sync::mpsc::channel::<PathBuf>();
            std::thread::Builder::new()
                .name("trellis-sandbox-cgroups".into())
                .spawn(move || {
                    for dir in rx {
                        remove(&dir);
                    }
                })
                .ok()
                .map(|_| std::sync::Mutex::new(tx))
        })
        .as_ref()
        .and_then(|m| m.lock().ok().map(|tx| tx.clone()))
}

/// Removes a cgroup, killing whatever is left in it (a background process that left the
/// session) so the directory can go.
fn remove(dir: &Path) {
    let mut pause = std::time::Duration::from_micros(100);
    for _ in 0..40 {
        if std::fs::remove_dir(dir).is_ok() {
            return;
        }
        let procs = std::fs::read_to_string(dir.join("cgroup.procs")).unwrap_or_default();
        for pid in procs.lines().filter_map(|l| l.trim().parse::<i32>().ok()) {
            if pid > 1 {
                let _ = kill(pid);
            }
        }
        std::thread::sleep(pause);
        pause = (pause * 2).min(std::time::Duration::from_millis(20));
    }
    tracing::warn!(dir = %dir.display(), "could not remove a sandbox pids cgroup");
}

#[allow(unsafe_code)]
fn kill(pid: i32) -> std::io::Result<()> {
    // SAFETY: kill(2) with a pid read from the cgroup's own process list.
    let rc = unsafe { libc::kill(pid, libc::SIGKILL) };
    if rc == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

/// Where this process's pids cgroup is (v1 `pids` hierarchy, else v2 with `pids` enabled
/// for its children), if it is writable.
fn parent_dir() -> Option<PathBuf> {
    let own = std::fs::read_to_string("/proc/self/cgroup").ok()?;
    for line in own.lines() {
        let mut parts = line.splitn(3, ':');
        let (_, controllers, path) = (parts.next()?, parts.next()?, parts.next()?);
        let rel = path.trim_start_matches('/');
        let dir = if controllers.split(',').any(|c| c == "pids") {
            Path::new("/sys/fs/cgroup/pids").join(rel)
        } else if controllers.is_empty() {
            let dir = Path::new("/sys/fs/cgroup").join(rel);
            let enabled = std::fs::read_to_string(dir.join("cgroup.subtree_control")).ok()?;
            if !enabled.split_whitespace().any(|c| c == "pids") {
                continue;
            }
            dir
        } else {
            continue;
        };
        if dir.join("cgroup.procs").exists() {
            return Some(dir);
        }
    }
    None
}

/// The `RLIMIT_NPROC` for a command allowed `max` processes: the processes this user has
/// now plus `max` (the kernel counts the user's processes, not the command's).
pub fn nproc_limit(max: u32) -> u64 {
    // SAFETY-free: reading our real uid through /proc avoids an unsafe getuid call.
    let uid = std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("Uid:"))
                .and_then(|v| v.split_whitespace().next().map(str::to_owned))
        })
        .unwrap_or_default();
    let mut count: u64 = 0;
    if let Ok(entries) = std::fs::read_dir("/proc") {
        for e in entries.flatten() {
            let status = e.path().join("status");
            if let Ok(s) = std::fs::read_to_string(status)
                && s.lines()
                    .find_map(|l| l.strip_prefix("Uid:"))
                    .and_then(|v| v.split_whitespace().next())
                    == Some(uid.as_str())
            {
                count += s
                    .lines()
                    .find_map(|l| l.strip_prefix("Threads:"))
                    .and_then(|v| v.trim().parse::<u64>().ok())
                    .unwrap_or(1);
            }
        }
    }
    count + u64::from(max)
}
