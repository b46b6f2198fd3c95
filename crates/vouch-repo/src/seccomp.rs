//! The system-call filter of a sandbox (contract §14.0.5): what no command of a patch attempt
//! needs and every escape starts with — new namespaces, mounts, tracing another process,
//! kernel keyrings, BPF, performance events, modules, `kexec`, handle-based opens,
//! `userfaultfd`, terminal injection — answers `EPERM`; `clone3` answers `ENOSYS` (its flags
//! are behind a pointer a filter cannot read, and the C library then falls back to `clone`,
//! whose flags it can). Programs are compiled once per process by `seccompiler` and handed
//! to bubblewrap, which loads them just before it starts the command.

use seccompiler::{
    BpfProgram, SeccompAction, SeccompCmpArgLen, SeccompCmpOp, SeccompCondition, SeccompFilter,
    SeccompRule, TargetArch,
};
use std::collections::BTreeMap;
use std::sync::OnceLock;

/// System calls refused outright (`EPERM`).
const DENIED: &[i64] = &[
    libc::SYS_unshare,
    libc::SYS_setns,
    libc::SYS_mount,
    libc::SYS_umount2,
    libc::SYS_pivot_root,
    libc::SYS_chroot,
    libc::SYS_ptrace,
    libc::SYS_process_vm_readv,
    libc::SYS_process_vm_writev,
    libc::SYS_keyctl,
    libc::SYS_add_key,
    libc::SYS_request_key,
    libc::SYS_bpf,
    libc::SYS_perf_event_open,
    libc::SYS_kexec_load,
    libc::SYS_kexec_file_load,
    libc::SYS_init_module,
    libc::SYS_finit_module,
    libc::SYS_delete_module,
    libc::SYS_reboot,
    libc::SYS_swapon,
    libc::SYS_swapoff,
    libc::SYS_open_by_handle_at,
    libc::SYS_name_to_handle_at,
    libc::SYS_userfaultfd,
    libc::SYS_fsopen,
    libc::SYS_fsmount,
    libc::SYS_fsconfig,
    libc::SYS_fspick,
    libc::SYS_move_mount,
    libc::SYS_open_tree,
    libc::SYS_mount_setattr,
    libc::SYS_acct,
    libc::SYS_quotactl,
    libc::SYS_syslog,
    #[cfg(target_arch = "x86_64")]
    libc::SYS_iopl,
    #[cfg(target_arch = "x86_64")]
    libc::SYS_ioperm,
];

/// `clone` flags that make a namespace: refused in `clone` (and `unshare` is refused whole).
const NAMESPACE_FLAGS: [u64; 8] = [
    libc::CLONE_NEWNS as u64,
    libc::CLONE_NEWCGROUP as u64,
    libc::CLONE_NEWUTS as u64,
    libc::CLONE_NEWIPC as u64,
    libc::CLONE_NEWUSER as u64,
    libc::CLONE_NEWPID as u64,
    libc::CLONE_NEWNET as u64,
    0x80, // CLONE_NEWTIME
];

/// `ioctl(fd, TIOCSTI, …)`: typing into the terminal the sandbox was started from.
const TIOCSTI: u64 = 0x5412;

/// The x32 ABI's numbers are the same calls with this bit set (x86_64 only).
#[cfg(target_arch = "x86_64")]
const X32_BIT: i64 = 0x4000_0000;

fn arch() -> Result<TargetArch, String> {
    TargetArch::try_from(std::env::consts::ARCH).map_err(|e| {
        format!("no system-call filter for this architecture ({e}); commands run without one")
    })
}

fn masked(index: u8, flag: u64) -> Result<SeccompRule, String> {
    let c = SeccompCondition::new(
        index,
        SeccompCmpArgLen::Qword,
        SeccompCmpOp::MaskedEq(flag),
        flag,
    )
    .map_err(|e| e.to_string())?;
    SeccompRule::new(vec![c]).map_err(|e| e.to_string())
}

fn with_x32(rules: &mut BTreeMap<i64, Vec<SeccompRule>>, nr: i64, r: Vec<SeccompRule>) {
    #[cfg(target_arch = "x86_64")]
    rules.insert(nr | X32_BIT, r.clone());
    rules.insert(nr, r);
}

fn compile(rules: BTreeMap<i64, Vec<SeccompRule>>, errno: i32) -> Result<Vec<u8>, String> {
    let filter = SeccompFilter::new(
        rules,
        SeccompAction::Allow,
        SeccompAction::Errno(errno as u32),
        arch()?,
    )
    .map_err(|e| e.to_string())?;
    let program: BpfProgram = filter
        .try_into()
        .map_err(|e: seccompiler::BackendError| e.to_string())?;
    let mut bytes = Vec::with_capacity(program.len() * 8);
    for i in program {
        bytes.extend(i.code.to_ne_bytes());
        bytes.push(i.jt);
        bytes.push(i.jf);
        bytes.extend(i.k.to_ne_bytes());
    }
    Ok(bytes)
}

fn build() -> Result<Vec<Vec<u8>>, String> {
    let mut deny = BTreeMap::new();
    for nr in DENIED {
        with_x32(&mut deny, *nr, vec![]);
    }
    let clone: Result<Vec<SeccompRule>, String> =
        NAMESPACE_FLAGS.iter().map(|f| masked(0, *f)).collect();
    with_x32(&mut deny, libc::SYS_clone, clone?);
    let sti = SeccompCondition::new(1, SeccompCmpArgLen::Dword, SeccompCmpOp::Eq, TIOCSTI)
        .map_err(|e| e.to_string())?;
    let sti = SeccompRule::new(vec![sti]).map_err(|e| e.to_string())?;
    with_x32(&mut deny, libc::SYS_ioctl, vec![sti]);
    let mut nosys = BTreeMap::new();
    with_x32(&mut nosys, libc::SYS_clone3, vec![]);
    Ok(vec![
        compile(deny, libc::EPERM)?,
        compile(nosys, libc::ENOSYS)?,
    ])
}

/// The filter programs (each in the kernel's `sock_filter` layout, as bubblewrap reads it), or
/// why this machine has none. Built once per process.
pub fn programs() -> Result<&'static [Vec<u8>], String> {
    static BUILT: OnceLock<Result<Vec<Vec<u8>>, String>> = OnceLock::new();
    BUILT
        .get_or_init(build)
        .as_ref()
        .map(Vec::as_slice)
        .map_err(Clone::clone)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_programs_compile_here() {
        let p = programs().unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(p.len(), 2);
        assert!(p.iter().all(|b| !b.is_empty() && b.len() % 8 == 0));
    }
}
