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

/// The name of every cgroup made here: `trellis-sandbox-<pid>-<n>`.
const PREFIX: &str = "trellis-sandbox-";

/// A command's pids cgroup: removed (its processes killed first) when dropped.
#[derive(Debug)]
pub struct PidsCgroup {
    dir: PathBuf,
    procs: File,
}

impl PidsCgroup {
    /// A new cgroup limited to `max` processes, or `None` where none can be made.
    pub fn create(max: u32) -> Option<Self> {
        let (parent, join) = parent_dir()?;
        let dir = loop {
            let n = NEXT.fetch_add(1, Ordering::Relaxed);
            let dir = parent.join(format!("{PREFIX}{}-{n}", std::process::id()));
            match std::fs::create_dir(&dir) {
                Ok(()) => break dir,
                // Left by an earlier process of the same pid that could not remove it.
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
                Err(e) => {
                    tracing::warn!(dir = %dir.display(), error = %e,
                        "cannot make a sandbox pids cgroup; falling back to RLIMIT_NPROC");
                    return None;
                }
            }
        };
        let made = std::fs::write(dir.join("pids.max"), max.to_string())
            .and_then(|()| File::options().write(true).open(dir.join(join)));
        match made {
            Ok(procs) => Some(Self { dir, procs }),
            Err(_) => {
                let _ = std::fs::remove_dir(&dir);
                None
            }
        }
    }

    /// The descriptor the child writes `0` to (itself) before it runs anything: cgroup
    /// v1's `tasks` (the child has one thread, so moving the thread moves the process, and
    /// the kernel skips the global lock a `cgroup.procs` write takes — whose RCU sync cost
    /// 1-2 ms per command and 10-20 ms at p99), v2's `cgroup.procs`.
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
/// for its children), if it is writable, and the file a child joins a cgroup of it through.
/// Read once per process: a process's own cgroup does not change under it.
fn parent_dir() -> Option<(PathBuf, &'static str)> {
    static PARENT: std::sync::OnceLock<Option<(PathBuf, &'static str)>> =
        std::sync::OnceLock::new();
    PARENT.get_or_init(find_parent).clone()
}

fn find_parent() -> Option<(PathBuf, &'static str)> {
    let found = find_parent_dir()?;
    sweep(&found.0);
    Some(found)
}

/// Removes the cgroups that processes now gone left behind (a process that exited before
/// its reaper thread ran, or was killed), once per process: any process still in one is
/// killed with it, as its owner's guard would have done.
fn sweep(parent: &Path) {
    let Ok(entries) = std::fs::read_dir(parent) else {
        return;
    };
    for e in entries.flatten() {
        let name = e.file_name();
        let Some(owner) = name
            .to_str()
            .and_then(|n| n.strip_prefix(PREFIX))
            .and_then(|rest| rest.split('-').next())
            .and_then(|pid| pid.parse::<u32>().ok())
        else {
            continue;
        };
        if owner != std::process::id() && !Path::new(&format!("/proc/{owner}")).exists() {
            remove(&e.path());
        }
    }
}

fn find_parent_dir() -> Option<(PathBuf, &'static str)> {
    let own = std::fs::read_to_string("/proc/self/cgroup").ok()?;
    for line in own.lines() {
        let mut parts = line.splitn(3, ':');
        let (_, controllers, path) = (parts.next()?, parts.next()?, parts.next()?);
        let rel = path.trim_start_matches('/');
        let (dir, join) = if controllers.split(',').any(|c| c == "pids") {
            (Path::new("/sys/fs/cgroup/pids").join(rel), "tasks")
        } else if controllers.is_empty() {
            let dir = Path::new("/sys/fs/cgroup").join(rel);
            let enabled = std::fs::read_to_string(dir.join("cgroup.subtree_control")).ok()?;
            if !enabled.split_whitespace().any(|c| c == "pids") {
                continue;
            }
            (dir, "cgroup.procs")
        } else {
            continue;
        };
        if dir.join(join).exists() {
            return Some((dir, join));
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
