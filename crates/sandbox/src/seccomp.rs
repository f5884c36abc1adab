//! The seccomp filter of every sandboxed command, built with `seccompiler`: system calls
//! that reach other processes or the kernel's attack surface fail with `EPERM`, and with
//! the network off so does opening any socket but a Unix one.
//!
//! Denied always: `ptrace`, `process_vm_readv`/`process_vm_writev` (reading or writing
//! another process's memory), `io_uring_*` (its operations bypass seccomp), `mount`,
//! `umount2`, `pivot_root`, `move_mount`, `open_tree`, `fsopen`, `fsmount`, `fsconfig`,
//! `unshare`, `setns` (new namespaces would regain capabilities), `kexec_*`, `bpf`,
//! `perf_event_open`, `keyctl`, `add_key`, `request_key`, `userfaultfd`, `personality`
//! changes, `init_module`/`finit_module`/`delete_module`, `swapon`/`swapoff`, `reboot`.

use std::collections::BTreeMap;

use seccompiler::{
    BpfProgram, SeccompAction, SeccompCmpArgLen, SeccompCmpOp, SeccompCondition, SeccompFilter,
    SeccompRule, TargetArch,
};

use crate::error::{Error, Result};

/// System calls every sandboxed command is refused.
const DENIED: &[i64] = &[
    libc::SYS_ptrace,
    libc::SYS_process_vm_readv,
    libc::SYS_process_vm_writev,
    libc::SYS_io_uring_setup,
    libc::SYS_io_uring_enter,
    libc::SYS_io_uring_register,
    libc::SYS_mount,
    libc::SYS_umount2,
    libc::SYS_pivot_root,
    libc::SYS_move_mount,
    libc::SYS_open_tree,
    libc::SYS_fsopen,
    libc::SYS_fsmount,
    libc::SYS_fsconfig,
    libc::SYS_fspick,
    libc::SYS_unshare,
    libc::SYS_setns,
    libc::SYS_kexec_load,
    libc::SYS_kexec_file_load,
    libc::SYS_bpf,
    libc::SYS_perf_event_open,
    libc::SYS_keyctl,
    libc::SYS_add_key,
    libc::SYS_request_key,
    libc::SYS_userfaultfd,
    libc::SYS_init_module,
    libc::SYS_finit_module,
    libc::SYS_delete_module,
    libc::SYS_swapon,
    libc::SYS_swapoff,
    libc::SYS_reboot,
];

/// The filter for a command with or without the network, compiled for this machine.
pub fn program(network: bool) -> Result<BpfProgram> {
    let err = |e: seccompiler::BackendError| Error::Seccomp(e.to_string());
    let mut rules: BTreeMap<i64, Vec<SeccompRule>> =
        DENIED.iter().map(|s| (*s, Vec::new())).collect();
    if !network {
        // socket(domain, …) with any domain but AF_UNIX; socketpair is Unix-only anyway.
        let not_unix = SeccompCondition::new(
            0,
            SeccompCmpArgLen::Dword,
            SeccompCmpOp::Ne,
            libc::AF_UNIX as u64,
        )
        .map_err(err)?;
        rules.insert(
            libc::SYS_socket,
            vec![SeccompRule::new(vec![not_unix]).map_err(err)?],
        );
    }
    let arch =
        TargetArch::try_from(std::env::consts::ARCH).map_err(|e| Error::Seccomp(e.to_string()))?;
    let filter = SeccompFilter::new(
        rules,
        SeccompAction::Allow,
        SeccompAction::Errno(libc::EPERM as u32),
        arch,
    )
    .map_err(err)?;
    BpfProgram::try_from(filter).map_err(err)
}

/// The program as the bytes of `struct sock_filter`s, for `bwrap --seccomp FD`.
pub fn bytes(program: &BpfProgram) -> Vec<u8> {
    let mut out = Vec::with_capacity(program.len() * 8);
    for f in program {
        out.extend_from_slice(&f.code.to_ne_bytes());
        out.push(f.jt);
        out.push(f.jf);
        out.extend_from_slice(&f.k.to_ne_bytes());
    }
    out
}
