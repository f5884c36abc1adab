//! [`Sandbox`]: the backend chosen once per process (the preflight is cached), and
//! [`Sandbox::wrap`], which turns a command into one that runs inside it.
//!
//! Everything the child does between `fork` and `exec` is prepared before the fork — the
//! seccomp program, the Landlock ruleset's descriptor, the pids cgroup's
//! descriptor — so the `pre_exec` hook only makes system calls (async-signal-safe: no
//! allocation, no locks), as a forked child of a multi-threaded process must.

use std::ffi::OsString;
use std::io::Write;
use std::os::fd::{AsRawFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

use crate::bwrap::{self, Bwrap};
use crate::config::Mode;
use crate::error::{Error, Result};
use crate::hook::Hook;
use crate::landlock as ll;
use crate::pids::{self, PidsCgroup};
use crate::policy::SandboxPolicy;
use crate::seccomp;

/// What a command is: program, arguments, working directory and its whole environment
/// (nothing else is inherited).
#[derive(Clone, Debug)]
pub struct CommandSpec {
    /// The program.
    pub program: OsString,
    /// Its arguments.
    pub args: Vec<OsString>,
    /// The working directory.
    pub cwd: PathBuf,
    /// The environment, exactly.
    pub env: Vec<(OsString, OsString)>,
}

/// The backend that runs sandboxed commands.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Backend {
    /// bubblewrap.
    Bwrap(Bwrap),
    /// Landlock + seccomp applied in the child.
    Landlock,
    /// No sandbox (`[sandbox] mode = "off"`).
    Off,
}

impl Backend {
    /// The name recorded with every command (`bwrap`, `landlock`, `off`).
    pub fn name(&self) -> &'static str {
        match self {
            Backend::Bwrap(_) => "bwrap",
            Backend::Landlock => "landlock",
            Backend::Off => "off",
        }
    }
}

/// What this machine offers, found out once per process.
#[derive(Clone, Debug)]
struct Probe {
    bwrap: std::result::Result<Bwrap, String>,
    landlock: std::result::Result<(), String>,
}

fn probe() -> &'static Probe {
    static PROBE: OnceLock<Probe> = OnceLock::new();
    PROBE.get_or_init(|| Probe {
        bwrap: bwrap::preflight(),
        landlock: match ll::abi_version() {
            Some(_) => Ok(()),
            None => {
                Err("the kernel offers no Landlock (not built in or not enabled in `lsm=`)".into())
            }
        },
    })
}

/// The sandbox of a process: a backend, chosen by `[sandbox] mode`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Sandbox {
    backend: Backend,
}

impl Sandbox {
    /// The backend `mode` asks for, if it can run here; `auto` prefers bubblewrap. The
    /// error names the cause and the setting to change.
    pub fn new(mode: Mode) -> Result<Self> {
        let p = probe();
        let backend = match mode {
            Mode::Off => Backend::Off,
            Mode::Bwrap => Backend::Bwrap(p.bwrap.clone().map_err(|cause| Error::Backend {
                mode: "bwrap",
                cause,
            })?),
            Mode::Landlock => {
                p.landlock.clone().map_err(|cause| Error::Backend {
                    mode: "landlock",
                    cause,
                })?;
                Backend::Landlock
            }
            Mode::Auto => match (&p.bwrap, &p.landlock) {
                (Ok(b), _) => Backend::Bwrap(b.clone()),
                (Err(_), Ok(())) => Backend::Landlock,
                (Err(b), Err(l)) => {
                    return Err(Error::Unavailable {
                        cause: format!("bubblewrap: {b}; Landlock: {l}"),
                    });
                }
            },
        };
        Ok(Self { backend })
    }

    /// No sandbox at all (tests of code that spawns, and `mode = "off"`).
    pub fn off() -> Self {
        Self {
            backend: Backend::Off,
        }
    }

    /// The backend.
    pub fn backend(&self) -> &Backend {
        &self.backend
    }

    /// Whether commands run unsandboxed.
    pub fn is_off(&self) -> bool {
        self.backend == Backend::Off
    }

    /// `spec` as a command that runs inside the sandbox under `policy`, in a new session
    /// (its process group id is its pid: do not ask for another process group). Keep the
    /// returned [`Wrapped`] (its guard) until the child has exited.
    pub fn wrap(&self, spec: &CommandSpec, policy: &SandboxPolicy) -> Result<Wrapped> {
        let policy = policy.canonical();
        let mut guard = Guard::default();
        if !self.is_off() && policy.pids_max > 0 {
            guard.cgroup = PidsCgroup::create(policy.pids_max);
        }
        let mut hook = Hook {
            // Both backends: bubblewrap's own `--die-with-parent` is set only once it runs,
            // so a parent that exits right after the spawn would leave it behind.
            pdeathsig: (!self.is_off()).then(std::process::id),
            cgroup_fd: guard.cgroup.as_ref().map(PidsCgroup::procs_fd),
            nproc: (!self.is_off() && guard.cgroup.is_none() && policy.pids_max > 0)
                .then(|| pids::nproc_limit(policy.pids_max)),
            ..Hook::default()
        };
        let mut cmd = match &self.backend {
            Backend::Off => {
                let mut c = Command::new(&spec.program);
                c.args(&spec.args);
                c
            }
            Backend::Bwrap(b) => {
                if b.scope && !policy.network {
                    let fd = ll::scope_only()?.ok_or_else(|| {
                        Error::Landlock("the kernel's Landlock lost its scopes".into())
                    })?;
                    hook.landlock_fd = Some(fd.as_raw_fd());
                    guard.fds.push(fd);
                }
                let program = seccomp::program(policy.network)?;
                let (reader, mut writer) = std::io::pipe()?;
                writer.write_all(&seccomp::bytes(&program))?;
                drop(writer);
                let fd: OwnedFd = reader.into();
                hook.inherit_fd = Some(fd.as_raw_fd());
                let mut c = Command::new(&b.program);
                c.args(b.args(&policy, &spec.cwd, Some(fd.as_raw_fd())));
                c.arg(&spec.program).args(&spec.args);
                guard.fds.push(fd);
                c
            }
            Backend::Landlock => {
                let tmp = PrivateTmp::create()?;
                let fd = ll::ruleset(&policy, tmp.path())?;
                hook.landlock_fd = Some(fd.as_raw_fd());
                hook.seccomp = Some(seccomp::program(policy.network)?);
                let mut c = Command::new(&spec.program);
                c.args(&spec.args);
                guard.fds.push(fd);
                guard.tmp = Some(tmp);
                c
            }
        };
        cmd.current_dir(&spec.cwd).env_clear();
        cmd.envs(
            spec.env
                .iter()
                .filter(|(k, v)| self.is_off() || passes(k, v, &policy))
                .map(|(k, v)| (k, v)),
        );
        // bubblewrap sets its own `/tmp` (`--setenv`); the fallback its private directory.
        if let Some(tmp) = &guard.tmp {
            cmd.env("TMPDIR", tmp.path());
        }
        hook.install(&mut cmd);
        Ok(Wrapped {
            command: cmd,
            guard,
            backend: self.backend.name(),
        })
    }
}

/// Whether a variable of the caller's environment is passed into the sandbox: not the
/// temporary directories (the sandbox has its own), nor a `CARGO_TARGET_DIR` the command
/// could not write (cargo then builds in the worktree's `target/` instead of failing).
fn passes(key: &std::ffi::OsStr, value: &std::ffi::OsStr, policy: &SandboxPolicy) -> bool {
    match key.to_str() {
        Some("TMPDIR" | "TMP" | "TEMP") => false,
        Some("CARGO_TARGET_DIR") => {
            let dir = Path::new(value);
            dir.is_absolute() && policy.writable.iter().any(|w| dir.starts_with(w))
        }
        _ => true,
    }
}

/// A command ready to spawn, and what must live until its child has exited.
#[derive(Debug)]
pub struct Wrapped {
    /// The command (stdio is the caller's to set).
    pub command: Command,
    /// The pids cgroup, descriptors and private tmp of the command.
    pub guard: Guard,
    /// The backend's name.
    pub backend: &'static str,
}

/// Kept until the child exits: its pids cgroup (removed on drop, any process left in it
/// killed), the descriptors its hook uses, its private tmp (fallback only).
#[derive(Debug, Default)]
pub struct Guard {
    cgroup: Option<PidsCgroup>,
    fds: Vec<OwnedFd>,
    tmp: Option<PrivateTmp>,
}

impl Guard {
    /// The pids cgroup's directory, if the command has one.
    pub fn cgroup(&self) -> Option<&Path> {
        self.cgroup.as_ref().map(PidsCgroup::dir)
    }
}

/// A private tmp directory (mode 0700), removed on drop.
#[derive(Debug)]
struct PrivateTmp(PathBuf);

impl PrivateTmp {
    fn create() -> Result<Self> {
        use std::os::unix::fs::DirBuilderExt;
        use std::sync::atomic::{AtomicU64, Ordering};
        static NEXT: AtomicU64 = AtomicU64::new(0);
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let dir =
            std::env::temp_dir().join(format!("trellis-sandbox-tmp-{}-{n}", std::process::id()));
        std::fs::DirBuilder::new()
            .mode(0o700)
            .create(&dir)
            .map_err(|source| Error::Path {
                path: dir.clone(),
                source,
            })?;
        Ok(Self(dir))
    }

    fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for PrivateTmp {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}
