//! Ctrl-C: the first stops the run so its report still prints; a second exits at once.

use std::sync::OnceLock;
use std::sync::atomic::{AtomicU32, Ordering};

use volley_engine::RunControl;

static CONTROL: OnceLock<RunControl> = OnceLock::new();
static PRESSES: AtomicU32 = AtomicU32::new(0);

extern "C" fn on_sigint(_: libc::c_int) {
    // Only atomics here: that is all a signal handler may safely touch.
    if PRESSES.fetch_add(1, Ordering::Relaxed) == 0 {
        if let Some(control) = CONTROL.get() {
            control.stop();
        }
    } else {
        // SAFETY: _exit is async-signal-safe.
        unsafe { libc::_exit(130) };
    }
}

/// Routes SIGINT to `control` for the rest of the process.
pub(crate) fn stop_on_ctrl_c(control: &RunControl) {
    if CONTROL.set(control.clone()).is_err() {
        return;
    }
    // SAFETY: installs a handler that only touches atomics.
    unsafe {
        libc::signal(libc::SIGINT, on_sigint as *const () as libc::sighandler_t);
    }
}
