//! The bubblewrap backend: the argv that puts a command in new PID and IPC namespaces
//! (and, unless the policy grants it or Landlock scopes abstract Unix sockets instead, a new
//! network namespace), on a read-only view of the system with the
//! writable paths bound read-write, a private `/tmp`, the home directory replaced by an
//! empty tmpfs with the readable paths bound back read-only, all capabilities dropped, a
//! new session, and death with its parent; plus the preflight that finds out whether
//! bubblewrap runs here (and whether it may mount `/proc`, which nested containers refuse).

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use std::os::fd::AsRawFd;

use crate::hook::Hook;
use crate::landlock;
use crate::policy::SandboxPolicy;

/// What the preflight found out about bubblewrap on this machine.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Bwrap {
    /// The `bwrap` executable.
    pub program: PathBuf,
    /// Whether a fresh `/proc` can be mounted (`--proc /proc`); else the host's is bound.
    pub proc: bool,
    /// Whether bubblewrap runs inside a Landlock domain that scopes abstract Unix sockets
    /// and signals (Landlock ABI 6): then a command without the network needs no network
    /// namespace of its own, because seccomp refuses every socket but a Unix one and the
    /// scope hides the host's abstract sockets, the one thing a namespace still hid.
    pub scope: bool,
}

/// Finds `bwrap` on `PATH` and tries it: first with a fresh `/proc`, then (containers that
/// refuse to mount procfs) with the host's bound read-only; each first inside a Landlock
/// scope (where the kernel has one), then without. The error says what failed.
pub fn preflight() -> Result<Bwrap, String> {
    let program = find_on_path("bwrap").ok_or_else(|| "bwrap is not on PATH".to_owned())?;
    let scope = landlock::scope_only().ok().flatten().is_some();
    let mut last = String::new();
    for (proc, scope) in [(true, scope), (true, false), (false, scope), (false, false)] {
        let b = Bwrap {
            program: program.clone(),
            proc,
            scope,
        };
        let policy = SandboxPolicy::default();
        let mut args = b.args(&policy, Path::new("/"), None);
        args.push("true".into());
        let mut cmd = Command::new(&b.program);
        cmd.args(&args)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        let _fd = if scope {
            match landlock::scope_only() {
                Ok(Some(fd)) => {
                    Hook::scoped(fd.as_raw_fd()).install(&mut cmd);
                    Some(fd)
                }
                _ => continue,
            }
        } else {
            None
        };
        match cmd.output() {
            Ok(out) if out.status.success() => return Ok(b),
            Ok(out) => {
                last = format!(
                    "`bwrap` failed ({}): {}",
                    out.status,
                    String::from_utf8_lossy(&out.stderr).trim()
                );
            }
            Err(e) => last = format!("cannot start `{}`: {e}", program.display()),
        }
    }
    Err(last)
}

/// The executable file `name` in a folder of `PATH`, the first one found.
pub fn find_on_path(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|d| d.join(name))
        .find(|p| executable(p))
}

/// Whether `path` is a file someone may execute.
fn executable(path: &std::path::Path) -> bool {
    use std::os::unix::fs::PermissionsExt as _;
    path.metadata()
        .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

impl Bwrap {
    /// bubblewrap's arguments up to and including `--`, for a command in `cwd` under
    /// `policy` (canonical paths), with the seccomp program readable on `seccomp_fd`.
    pub fn args(
        &self,
        policy: &SandboxPolicy,
        cwd: &Path,
        seccomp_fd: Option<i32>,
    ) -> Vec<OsString> {
        let mut a: Vec<OsString> = Vec::new();
        let mut push = |items: &[&str]| a.extend(items.iter().map(OsString::from));
        // No UTS namespace: with every capability dropped the command cannot set the
        // host name anyway (sethostname needs CAP_SYS_ADMIN). No cgroup namespace: the
        // cgroup file systems are read-only under `--ro-bind / /`, so a command cannot
        // leave its pids cgroup either way; a namespace would only hide the cgroups'
        // names, for ~0.7 ms per command.
        push(&[
            "--new-session",
            "--die-with-parent",
            "--unshare-pid",
            "--unshare-ipc",
            "--cap-drop",
            "ALL",
            "--ro-bind",
            "/",
            "/",
            "--dev",
            "/dev",
            "--tmpfs",
            "/tmp",
            "--tmpfs",
            "/dev/shm",
        ]);
        if self.proc {
            push(&["--proc", "/proc"]);
        } else {
            push(&["--ro-bind", "/proc", "/proc"]);
        }
        if !policy.network && !self.scope {
            push(&["--unshare-net"]);
        }
        let mut binds: Vec<(&Path, &'static str)> = Vec::new();
        if let Some(home) = &policy.home {
            binds.push((home, "--tmpfs"));
            binds.extend(policy.home_read.iter().map(|p| (p.as_path(), "--ro-bind")));
        }
        binds.extend(policy.hidden.iter().map(|p| (p.as_path(), "--tmpfs")));
        binds.extend(policy.readable.iter().map(|p| (p.as_path(), "--ro-bind")));
        binds.extend(policy.writable.iter().map(|p| (p.as_path(), "--bind")));
        binds.extend(policy.protected.iter().map(|p| (p.as_path(), "--ro-bind")));
        // Shallower mounts first, so a deeper one (the worktree under the hidden home, a
        // protected `.git/hooks` in the worktree) lands on top; stable for equal depth.
        binds.sort_by_key(|(p, _)| p.components().count());
        for (path, how) in binds {
            a.push(how.into());
            if how != "--tmpfs" {
                a.push(path.into());
            }
            a.push(path.into());
        }
        if let Some(fd) = seccomp_fd {
            a.push("--seccomp".into());
            a.push(fd.to_string().into());
        }
        a.push("--setenv".into());
        a.push("TMPDIR".into());
        a.push("/tmp".into());
        a.push("--chdir".into());
        a.push(cwd.into());
        a.push("--".into());
        a
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn deeper_mounts_land_on_top_of_the_hidden_home() {
        let policy = SandboxPolicy {
            writable: vec!["/home/u/src/repo".into()],
            readable: vec!["/home/u/src/other".into()],
            protected: vec!["/home/u/src/repo/.git/hooks".into()],
            home: Some("/home/u".into()),
            home_read: vec!["/home/u/.rustup".into()],
            hidden: vec!["/home/u/.config/trellis".into()],
            network: false,
            pids_max: 10,
        };
        let b = Bwrap {
            program: "bwrap".into(),
            proc: false,
            scope: false,
        };
        let args: Vec<String> = b
            .args(&policy, Path::new("/home/u/src/repo"), Some(7))
            .into_iter()
            .map(|a| a.to_string_lossy().into_owned())
            .collect();
        let at = |needle: &[&str]| {
            args.windows(needle.len())
                .position(|w| w == needle)
                .unwrap_or_else(|| panic!("{needle:?} not in {args:?}"))
        };
        let home = at(&["--tmpfs", "/home/u"]);
        let repo = at(&["--bind", "/home/u/src/repo", "/home/u/src/repo"]);
        let hooks = at(&["--ro-bind", "/home/u/src/repo/.git/hooks"]);
        assert!(home < repo && repo < hooks, "{args:?}");
        at(&["--tmpfs", "/home/u/.config/trellis"]);
        assert!(home < at(&["--ro-bind", "/home/u/src/other"]), "{args:?}");
        at(&["--ro-bind", "/proc", "/proc"]);
        at(&["--unshare-net"]);
        at(&["--cap-drop", "ALL"]);
        at(&["--seccomp", "7"]);
        assert_eq!(args.last().map(String::as_str), Some("--"));
        // Inside a Landlock scope the network namespace goes; the rest stays.
        let scoped: Vec<String> = Bwrap { scope: true, ..b }
            .args(&policy, Path::new("/home/u/src/repo"), Some(7))
            .into_iter()
            .map(|a| a.to_string_lossy().into_owned())
            .collect();
        assert!(!scoped.iter().any(|a| a == "--unshare-net"), "{scoped:?}");
        assert!(scoped.iter().any(|a| a == "--unshare-pid"), "{scoped:?}");
    }
}
