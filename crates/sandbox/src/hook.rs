//! What a sandboxed command's child does between `fork` and `exec` ([`Hook`]): only
//! system calls on values prepared before the fork (async-signal-safe: no allocation, no
//! locks), as a forked child of a multi-threaded process must.

use std::os::unix::process::CommandExt;
use std::process::Command;

/// What the child does between fork and exec; every field is ready before the fork.
#[derive(Default)]
pub(crate) struct Hook {
    /// The pids cgroup's join descriptor the child writes `0` to.
    pub(crate) cgroup_fd: Option<i32>,
    /// `RLIMIT_NPROC` where no cgroup could be made.
    pub(crate) nproc: Option<u64>,
    /// A descriptor the child keeps across `exec` (bubblewrap's seccomp program).
    pub(crate) inherit_fd: Option<i32>,
    /// The Landlock ruleset the child enters (with `no_new_privs`).
    pub(crate) landlock_fd: Option<i32>,
    /// The seccomp filter the child loads last.
    pub(crate) seccomp: Option<seccompiler::BpfProgram>,
    /// `PR_SET_PDEATHSIG` (SIGKILL), and the pid of the parent process that must still be
    /// there once it is set (else the parent died in between and the signal never comes).
    pub(crate) pdeathsig: Option<u32>,
}

impl Hook {
    /// Only enters the Landlock domain of the ruleset `fd` (and a new session).
    pub(crate) fn scoped(fd: i32) -> Self {
        Self {
            landlock_fd: Some(fd),
            ..Self::default()
        }
    }

    #[allow(unsafe_code)]
    pub(crate) fn install(self, cmd: &mut Command) {
        // SAFETY: the closure only makes system calls on values prepared before the fork
        // (raw descriptors, a built BPF program); it allocates nothing and takes no lock.
        unsafe {
            cmd.pre_exec(move || self.run());
        }
    }

    #[allow(unsafe_code)]
    fn run(&self) -> std::io::Result<()> {
        let check = |rc: libc::c_long| {
            if rc < 0 {
                Err(std::io::Error::last_os_error())
            } else {
                Ok(())
            }
        };
        // SAFETY (every call below): plain system calls with integer arguments or
        // pointers to memory owned by `self`, which outlives the call.
        unsafe {
            // A process group leader already (a caller that asked for one) cannot start a
            // session: it stays the leader of its own group, which is what is killed.
            if libc::setsid() < 0 && *libc::__errno_location() != libc::EPERM {
                return Err(std::io::Error::last_os_error());
            }
            if let Some(fd) = self.cgroup_fd {
                let zero = b"0";
                check(libc::write(fd, zero.as_ptr().cast(), zero.len()) as libc::c_long)?;
            }
            if let Some(n) = self.nproc {
                let lim = libc::rlimit {
                    rlim_cur: n,
                    rlim_max: n,
                };
                check(libc::c_long::from(libc::setrlimit(
                    libc::RLIMIT_NPROC,
                    &lim,
                )))?;
            }
            if let Some(fd) = self.inherit_fd {
                check(libc::c_long::from(libc::fcntl(fd, libc::F_SETFD, 0)))?;
            }
            if let Some(parent) = self.pdeathsig {
                check(libc::c_long::from(libc::prctl(
                    libc::PR_SET_PDEATHSIG,
                    libc::SIGKILL,
                )))?;
                if u32::try_from(libc::getppid()).ok() != Some(parent) {
                    return Err(std::io::Error::from_raw_os_error(libc::ESRCH));
                }
            }
            if let Some(fd) = self.landlock_fd {
                check(libc::c_long::from(libc::prctl(
                    libc::PR_SET_NO_NEW_PRIVS,
                    1,
                    0,
                    0,
                    0,
                )))?;
                check(libc::syscall(libc::SYS_landlock_restrict_self, fd, 0u32))?;
            }
        }
        if let Some(program) = &self.seccomp {
            seccompiler::apply_filter(program)
                .map_err(|_| std::io::Error::from_raw_os_error(libc::EPERM))?;
        }
        Ok(())
    }
}
