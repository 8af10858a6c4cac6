//! What a container runtime's default seccomp profile does to io_uring, for tests: a filter that
//! refuses io_uring_setup with EPERM (Docker's answer) or ENOSYS (containerd's and podman's),
//! which volley reads the same way, installed in a child between fork and exec, so the `volley` it
//! runs (and every thread and process it starts) meets io_uring as it would in a container.
//! No package needed: the filter is four BPF instructions handed to prctl.

use std::os::unix::process::CommandExt;
use std::process::Command;

// Classic BPF, as seccomp takes it (linux/filter.h): the syscall's number (offset 0 of
// `struct seccomp_data`) loaded, compared, and a verdict returned.
const BPF_LD_W_ABS: u16 = 0x20; // BPF_LD | BPF_W | BPF_ABS
const BPF_JMP_JEQ_K: u16 = 0x15; // BPF_JMP | BPF_JEQ | BPF_K
const BPF_RET_K: u16 = 0x06; // BPF_RET | BPF_K

/// `cmd` will run with io_uring blocked as Docker's default seccomp profile blocks it (EPERM).
pub fn without_io_uring(cmd: &mut Command) -> &mut Command {
    without_io_uring_answering(cmd, libc::EPERM)
}

/// `cmd` will run with io_uring_setup failing with `errno`: EPERM as Docker's default profile
/// answers, ENOSYS as podman's and containerd's do for every syscall they do not list. Its
/// number, 425, is the same on every architecture (it came after the tables were unified), so
/// the filter needs no architecture check.
pub fn without_io_uring_answering(cmd: &mut Command, errno: i32) -> &mut Command {
    let filter = [
        libc::sock_filter { code: BPF_LD_W_ABS, jt: 0, jf: 0, k: 0 },
        libc::sock_filter { code: BPF_JMP_JEQ_K, jt: 0, jf: 1, k: libc::SYS_io_uring_setup as u32 },
        libc::sock_filter { code: BPF_RET_K, jt: 0, jf: 0, k: libc::SECCOMP_RET_ERRNO | errno as u32 },
        libc::sock_filter { code: BPF_RET_K, jt: 0, jf: 0, k: libc::SECCOMP_RET_ALLOW },
    ];
    // SAFETY: runs in the forked child before exec and only calls prctl (async-signal-safe);
    // the filter is moved into the closure, so it lives as long as the child's copy needs it.
    unsafe {
        cmd.pre_exec(move || {
            let program = libc::sock_fprog { len: filter.len() as u16, filter: filter.as_ptr().cast_mut() };
            // PR_SET_NO_NEW_PRIVS lets a filter in without CAP_SYS_ADMIN, as runtimes set it too.
            if libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0
                || libc::prctl(libc::PR_SET_SECCOMP, libc::SECCOMP_MODE_FILTER, &raw const program) != 0
            {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        })
    }
}
