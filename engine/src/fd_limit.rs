//! The open-file limit a run needs: each engine thread registers one file slot per connection,
//! and the kernel refuses more slots than RLIMIT_NOFILE allows (EMFILE), so a thread's share
//! of `-c` must fit under the soft limit.

use crate::error::EngineError;

/// Descriptors beyond the registered slots: the process's own files, and each thread's socket
/// between socket() and its registration.
const SLACK: u64 = 64;

/// Raises the soft limit on open files, up to the hard limit, so that `per_thread` connections
/// fit on one thread: many systems start programs at a soft limit of 1024 and a far higher hard
/// one, which a program may raise itself to (as Go programs do at start). A hard limit that is
/// too low is an error that says how to fix it.
pub(crate) fn ensure_room_for(per_thread: u64) -> Result<(), EngineError> {
    let needed = per_thread.saturating_add(SLACK);
    // SAFETY: getrlimit and setrlimit read and write the struct handed to them, nothing else.
    let mut limit = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) } != 0 {
        // Not knowing the limit, let the kernel judge the registration itself.
        return Ok(());
    }
    if limit.rlim_cur >= needed {
        return Ok(());
    }
    // Only the registered slots are certain to be needed; the slack is a margin to raise the
    // soft limit by where the hard one allows, not a reason to refuse a small run (a worker
    // under a low limit may still run a few connections).
    if limit.rlim_max < per_thread {
        return Err(EngineError::FileLimit { per_thread, hard: limit.rlim_max });
    }
    if limit.rlim_cur >= per_thread && limit.rlim_max <= limit.rlim_cur {
        return Ok(());
    }
    let raised = libc::rlimit { rlim_cur: needed.min(limit.rlim_max), rlim_max: limit.rlim_max };
    if unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &raised) } != 0 {
        return Err(EngineError::FileLimit { per_thread, hard: limit.rlim_cur });
    }
    Ok(())
}
