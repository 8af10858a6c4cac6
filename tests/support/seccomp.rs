//! What a container runtime's default seccomp profile does to io_uring, for tests: a filter that
//! refuses io_uring_setup with EPERM (Docker's answer; containerd and podman answer ENOSYS, which
//! volley reads the same way), installed in a child between fork and exec, so the `volley` it
//! runs (and every thread and process it starts) meets io_uring as it would in a container.
//! No package needed: the filter is four BPF instructions handed to prctl.

use std::os::unix::process::CommandExt;
use std::process::Command;

/// io_uring_setup's number, the same on every architecture (the unified syscall table).
const IO_URING_SETUP: u32 = 425;

// Classic BPF, as seccomp takes it (linux/filter.h, linux/seccomp.h): BPF_LD | BPF_W | BPF_ABS,
// BPF_JMP | BPF_JEQ | BPF_K and BPF_RET | BPF_K, whose zero parts are left out.
const BPF_LD_W_ABS: u16 = 0x20;
const BPF_JMP_JEQ_K: u16 = 0x05 | 0x10;
const BPF_RET_K: u16 = 0x06;
const SECCOMP_RET_ERRNO: u32 = 0x0005_0000;
const SECCOMP_RET_ALLOW: u32 = 0x7fff_0000;
const SECCOMP_MODE_FILTER: libc::c_ulong = 2;

/// The filter: the syscall's number (offset 0 of `struct seccomp_data`) is io_uring_setup's:
/// fail with EPERM; anything else: allow.
static FILTER: [libc::sock_filter; 4] = [
    libc::sock_filter { code: BPF_LD_W_ABS, jt: 0, jf: 0, k: 0 },
    libc::sock_filter { code: BPF_JMP_JEQ_K, jt: 0, jf: 1, k: IO_URING_SETUP },
    libc::sock_filter { code: BPF_RET_K, jt: 0, jf: 0, k: SECCOMP_RET_ERRNO | libc::EPERM as u32 },
    libc::sock_filter { code: BPF_RET_K, jt: 0, jf: 0, k: SECCOMP_RET_ALLOW },
];

/// `cmd` will run with io_uring blocked as a container's default seccomp profile blocks it.
pub fn without_io_uring(cmd: &mut Command) -> &mut Command {
    // SAFETY: runs in the forked child before exec; it only calls prctl (async-signal-safe) with
    // a program in static memory.
    unsafe { cmd.pre_exec(block_io_uring) }
}

fn block_io_uring() -> std::io::Result<()> {
    let program = libc::sock_fprog { len: FILTER.len() as u16, filter: FILTER.as_ptr().cast_mut() };
    // SAFETY: plain prctl calls; the program outlives them (the kernel copies it).
    unsafe {
        // Needed to install a filter without CAP_SYS_ADMIN, as runtimes set it too.
        if libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0
            || libc::prctl(libc::PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &raw const program) != 0
        {
            return Err(std::io::Error::last_os_error());
        }
    }
    Ok(())
}
