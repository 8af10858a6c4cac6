//! Setting up an io_uring: the tuning flags with their fallback, and the one-line explanation
//! when io_uring cannot be used at all.

use std::io;

use io_uring::IoUring;

use crate::engine::kind::Engine;
use crate::error::EngineError;

/// What the kernel gave us. Reported so a run says what it measured with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RingSupport {
    /// The kernel release, as `uname -r` prints it.
    pub kernel: String,
    /// SINGLE_ISSUER | COOP_TASKRUN | DEFER_TASKRUN | NO_SQARRAY were accepted.
    pub tuned: bool,
    /// Batched waits bounded by `min_wait_usec` (Linux 6.12+).
    pub min_wait: bool,
    /// The engine runs on io_uring, or on epoll (then `tuned` and `min_wait` are false).
    pub engine: Engine,
    /// Why io_uring was not used, when `--engine auto` fell back to epoll.
    pub fallback: Option<String>,
}

/// Creates a ring, asking for the tuning flags first and falling back to none.
pub(crate) fn build_ring(entries: u32, cq_entries: u32) -> io::Result<(IoUring, bool)> {
    let tuned = IoUring::builder()
        .setup_single_issuer()
        .setup_coop_taskrun()
        .setup_defer_taskrun()
        .setup_no_sqarray()
        .setup_cqsize(cq_entries)
        .build(entries);
    match tuned {
        Ok(ring) => Ok((ring, true)),
        Err(_) => IoUring::builder().setup_cqsize(cq_entries).build(entries).map(|r| (r, false)),
    }
}

/// Checks, before any load starts, that io_uring works here with what the engine needs.
pub fn probe_io_uring() -> Result<RingSupport, EngineError> {
    let kernel = kernel_release();
    let (ring, tuned) = build_ring(8, 16).map_err(|e| EngineError::IoUringUnavailable(explain(&e)))?;
    if kernel_older_than(&kernel, 6, 0) {
        return Err(EngineError::IoUringUnavailable(format!(
            "io_uring here lacks multishot receive: kernel {kernel} is older than 6.0; run volley on Linux 6.0 or newer"
        )));
    }
    Ok(RingSupport {
        kernel,
        tuned,
        min_wait: ring.params().is_feature_min_timeout(),
        engine: Engine::IoUring,
        fallback: None,
    })
}

fn explain(e: &io::Error) -> String {
    let disabled = std::fs::read_to_string("/proc/sys/kernel/io_uring_disabled")
        .ok()
        .and_then(|s| s.trim().parse::<u32>().ok())
        .unwrap_or(0);
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    explain_with(e, disabled, under_seccomp_filter(&status))
}

/// The explanation, given `kernel.io_uring_disabled` and whether a seccomp filter is on us.
fn explain_with(e: &io::Error, disabled: u32, seccomp: bool) -> String {
    match e.raw_os_error() {
        Some(libc::EPERM) if disabled == 2 => "io_uring is disabled on this machine (kernel.io_uring_disabled=2): enable it with 'sysctl -w kernel.io_uring_disabled=0'".to_string(),
        Some(libc::EPERM) if disabled == 1 => "io_uring is restricted on this machine (kernel.io_uring_disabled=1): add this user to the group in kernel.io_uring_group, or set 'sysctl -w kernel.io_uring_disabled=0'".to_string(),
        // Container runtimes' default profiles refuse syscalls they do not list with ENOSYS
        // (podman, containerd) or EPERM (docker), so either errno under a filter means blocked.
        Some(libc::ENOSYS | libc::EPERM) if seccomp => "io_uring is blocked by a seccomp filter (a container runtime's default profile blocks it): run with a profile that allows io_uring_setup, io_uring_enter and io_uring_register, such as volley's deploy/seccomp/volley-worker.json (podman or docker: --security-opt seccomp=volley-worker.json; Kubernetes: seccompProfile type Localhost)".to_string(),
        Some(libc::ENOSYS) => "io_uring is not available: this kernel has no io_uring_setup (needs Linux 6.0+ built with CONFIG_IO_URING)".to_string(),
        Some(libc::EPERM) => "io_uring is not permitted here (no seccomp filter is on this process, so a security module or sandbox refuses it): allow io_uring_setup, io_uring_enter and io_uring_register".to_string(),
        Some(libc::ENOMEM) => "io_uring cannot lock memory for its rings: raise 'ulimit -l' (RLIMIT_MEMLOCK)".to_string(),
        _ => format!("io_uring cannot be set up: {e}"),
    }
}

/// `Seccomp: 2` in /proc/self/status: a seccomp filter (as container runtimes install) is on.
fn under_seccomp_filter(status: &str) -> bool {
    status.lines().any(|l| l.strip_prefix("Seccomp:").is_some_and(|mode| mode.trim() == "2"))
}

/// The kernel release, as `uname -r` prints it; empty if the system will not say.
pub fn kernel_release() -> String {
    std::fs::read_to_string("/proc/sys/kernel/osrelease").map(|s| s.trim().to_string()).unwrap_or_default()
}

fn kernel_older_than(release: &str, major: u32, minor: u32) -> bool {
    let mut parts = release.split(|c: char| !c.is_ascii_digit()).filter_map(|p| p.parse::<u32>().ok());
    match (parts.next(), parts.next()) {
        (Some(a), Some(b)) => (a, b) < (major, minor),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_unusable_io_uring_is_explained_in_one_line_with_a_fix() {
        for errno in [libc::ENOSYS, libc::EPERM, libc::ENOMEM, libc::EINVAL] {
            let text = explain(&io::Error::from_raw_os_error(errno));
            assert!(text.starts_with("io_uring "), "{text}");
            assert!(!text.contains('\n'), "{text}");
        }
        assert!(explain(&io::Error::from_raw_os_error(libc::ENOMEM)).contains("ulimit -l"));
    }

    #[test]
    fn io_uring_refused_under_a_seccomp_filter_is_called_blocked_and_the_profile_named() {
        for errno in [libc::ENOSYS, libc::EPERM] {
            let text = explain_with(&io::Error::from_raw_os_error(errno), 0, true);
            assert!(text.starts_with("io_uring is blocked by a seccomp filter"), "{text}");
            assert!(text.contains("deploy/seccomp/volley-worker.json"), "{text}");
        }
        let no_filter = explain_with(&io::Error::from_raw_os_error(libc::ENOSYS), 0, false);
        assert!(no_filter.contains("this kernel has no io_uring_setup"), "{no_filter}");
        let sysctl = explain_with(&io::Error::from_raw_os_error(libc::EPERM), 2, true);
        assert!(sysctl.contains("kernel.io_uring_disabled=2"), "{sysctl}");
    }

    #[test]
    fn a_seccomp_filter_is_read_off_proc_status() {
        assert!(under_seccomp_filter("Name:\tvolley\nSeccomp:\t2\nSeccomp_filters:\t1\n"));
        assert!(!under_seccomp_filter("Name:\tvolley\nSeccomp:\t0\nSeccomp_filters:\t0\n"));
        assert!(!under_seccomp_filter(""));
    }

    #[test]
    fn io_uring_works_on_the_machines_volley_is_tested_on() {
        let support = probe_io_uring().expect("io_uring must work where the tests run");
        assert!(!support.kernel.is_empty());
    }

    #[test]
    fn the_kernel_release_reads_as_uname_prints_it() {
        assert!(kernel_release().chars().next().is_some_and(|c| c.is_ascii_digit()), "{}", kernel_release());
    }

    #[test]
    fn kernel_versions_compare_by_major_then_minor() {
        assert!(kernel_older_than("5.15.0-91-generic", 6, 0));
        assert!(!kernel_older_than("6.18.44-fc", 6, 0));
        assert!(!kernel_older_than("garbage", 6, 0));
    }
}
