//! The fallback where bubblewrap cannot run (nested containers without user namespaces):
//! a Landlock ruleset, built before the fork and applied in the child, that lets the
//! command read the system but not the hidden paths (the home directory beyond its readable
//! paths, Trellis's configuration), write only the writable paths, its private tmp and a
//! few devices, connect or bind no TCP port with the network off, and (ABI 6) signal no
//! process outside its domain. Landlock only adds allowances, so a read-only path inside a
//! writable one (a plain repository's `.git/hooks`) cannot be carved out here: with the
//! fallback only a linked worktree's hooks are protected (docs/security.md).

use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};

use landlock::{
    ABI, Access, AccessFs, AccessNet, CompatLevel, Compatible, PathBeneath, PathFd, Ruleset,
    RulesetAttr, RulesetCreatedAttr, Scope,
};

use crate::error::{Error, Result};
use crate::policy::SandboxPolicy;

/// The Landlock ABI version this kernel offers (`None`: no Landlock).
#[allow(unsafe_code)]
pub fn abi_version() -> Option<i64> {
    // SAFETY: LANDLOCK_CREATE_RULESET_VERSION with a null attribute and size 0 only
    // returns the version; no memory is passed.
    let v = unsafe {
        libc::syscall(
            libc::SYS_landlock_create_ruleset,
            std::ptr::null::<u8>(),
            0usize,
            1u32,
        )
    };
    (v > 0).then_some(v)
}

/// A ruleset that handles no file or network access and only scopes abstract Unix
/// sockets and signals to the command's own domain (ABI 6): what bubblewrap's commands get
/// instead of a network namespace, whose only remaining job with seccomp refusing every
/// non-Unix socket was to hide the host's abstract sockets (1-2 ms per command to make).
/// `None` below ABI 6.
pub fn scope_only() -> Result<Option<OwnedFd>> {
    if abi_version().is_none_or(|v| v < 6) {
        return Ok(None);
    }
    let err = |e: landlock::RulesetError| Error::Landlock(e.to_string());
    let created = Ruleset::default()
        .set_compatibility(CompatLevel::HardRequirement)
        .scope(Scope::Signal | Scope::AbstractUnixSocket)
        .map_err(err)?
        .create()
        .map_err(err)?;
    Ok(created.into())
}

/// Devices every command may read and write.
const DEVICES: &[&str] = &[
    "/dev/null",
    "/dev/zero",
    "/dev/full",
    "/dev/random",
    "/dev/urandom",
    "/dev/tty",
];

/// The ruleset's file descriptor, ready for `landlock_restrict_self` in the child.
pub fn ruleset(policy: &SandboxPolicy, tmp: &Path) -> Result<OwnedFd> {
    let err = |e: landlock::RulesetError| Error::Landlock(e.to_string());
    let abi = ABI::V6;
    let mut ruleset = Ruleset::default()
        .set_compatibility(CompatLevel::BestEffort)
        .handle_access(AccessFs::from_all(abi))
        .map_err(err)?
        .scope(Scope::Signal | Scope::AbstractUnixSocket)
        .map_err(err)?;
    if !policy.network {
        ruleset = ruleset
            .handle_access(AccessNet::BindTcp | AccessNet::ConnectTcp)
            .map_err(err)?;
    }
    let mut created = ruleset.create().map_err(err)?;
    let read = AccessFs::from_read(abi);
    let all = AccessFs::from_all(abi);
    let mut hidden: Vec<PathBuf> = policy.hidden.clone();
    hidden.extend(policy.home.iter().cloned());
    let mut grants: Vec<(PathBuf, landlock::BitFlags<AccessFs>)> = Vec::new();
    readable_except(Path::new("/"), &hidden, &mut grants, read);
    grants.extend(policy.home_read.iter().map(|p| (p.clone(), read)));
    grants.extend(policy.readable.iter().map(|p| (p.clone(), read)));
    grants.extend(policy.writable.iter().map(|p| (p.clone(), all)));
    grants.push((tmp.to_path_buf(), all));
    grants.extend(
        DEVICES
            .iter()
            .map(|d| (PathBuf::from(d), AccessFs::from_file(abi))),
    );
    for (path, access) in grants {
        let Ok(fd) = PathFd::new(&path) else { continue };
        let access = if path.is_dir() {
            access
        } else {
            access & AccessFs::from_file(abi)
        };
        created = created
            .add_rule(PathBeneath::new(fd, access))
            .map_err(err)?;
    }
    let fd: Option<OwnedFd> = created.into();
    fd.ok_or_else(|| Error::Landlock("the kernel does not support Landlock".into()))
}

/// Grants `access` on `dir`, or, when a hidden path lies below it, on each of its entries
/// but the hidden ones (recursively): Landlock rules only allow, so "everything but X" is
/// the siblings of X and of each of its ancestors.
fn readable_except(
    dir: &Path,
    hidden: &[PathBuf],
    out: &mut Vec<(PathBuf, landlock::BitFlags<AccessFs>)>,
    access: landlock::BitFlags<AccessFs>,
) {
    if hidden.iter().any(|h| h == dir) {
        return;
    }
    if !hidden.iter().any(|h| h.starts_with(dir)) {
        out.push((dir.to_path_buf(), access));
        return;
    }
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for e in entries.flatten() {
        readable_except(&e.path(), hidden, out, access);
    }
}
