//! The worker's clock as the protocol states it: CLOCK_MONOTONIC in nanoseconds.
//!
//! The controller estimates each worker's offset with Clock probes and then names the start
//! instant in the worker's own monotonic clock. The engine works with `std::time::Instant`,
//! which is opaque, so these functions convert between the two by reading both clocks
//! together and carrying the difference over.

use std::time::{Duration, Instant};

/// How far into the future a converted instant may lie. `Instant + Duration` panics on
/// overflow, and no sane start time is further away than this.
const FAR_FUTURE: Duration = Duration::from_secs(365 * 24 * 3600);

/// The current CLOCK_MONOTONIC reading, in nanoseconds.
pub fn now_nanos() -> u64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: `ts` is a valid, writable timespec; CLOCK_MONOTONIC always exists on Linux, so
    // the call cannot fail and its return value carries nothing.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    (ts.tv_sec as u64).saturating_mul(1_000_000_000).saturating_add(ts.tv_nsec as u64)
}

/// The `Instant` at which CLOCK_MONOTONIC reads `nanos`. A moment already past is taken as
/// now: whatever waits for it should go at once.
pub fn instant_at(nanos: u64) -> Instant {
    let (now, now_ns) = (Instant::now(), now_nanos());
    let ahead = Duration::from_nanos(nanos.saturating_sub(now_ns)).min(FAR_FUTURE);
    now + ahead
}

/// The CLOCK_MONOTONIC reading, in nanoseconds, at `at`.
pub fn nanos_of(at: Instant) -> u64 {
    let (now, now_ns) = (Instant::now(), now_nanos());
    if at >= now {
        now_ns.saturating_add(duration_nanos(at - now))
    } else {
        now_ns.saturating_sub(duration_nanos(now - at))
    }
}

fn duration_nanos(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Reading two clocks one after the other is not atomic; a few microseconds apart is plenty
    /// close for start times that matter to the millisecond.
    const SLACK: Duration = Duration::from_millis(5);

    fn close(a: Instant, b: Instant) -> bool {
        let d = if a > b { a - b } else { b - a };
        d < SLACK
    }

    #[test]
    fn now_nanos_moves_forward_with_real_time() {
        let a = now_nanos();
        std::thread::sleep(Duration::from_millis(20));
        let b = now_nanos();
        assert!(b - a >= 20_000_000, "{a} -> {b}");
        assert!(b - a < 1_000_000_000, "{a} -> {b}");
    }

    #[test]
    fn a_future_reading_becomes_an_instant_that_far_ahead() {
        let want = Instant::now() + Duration::from_millis(300);
        let got = instant_at(now_nanos() + 300_000_000);
        assert!(close(got, want), "{got:?} vs {want:?}");
    }

    #[test]
    fn a_past_reading_becomes_now() {
        let before = Instant::now();
        let got = instant_at(now_nanos().saturating_sub(5_000_000_000));
        assert!(got >= before && close(got, Instant::now()));
        assert!(instant_at(0) >= before);
    }

    #[test]
    fn a_far_future_reading_does_not_overflow() {
        assert!(instant_at(u64::MAX) > Instant::now());
    }

    #[test]
    fn nanos_of_is_the_reverse_of_instant_at() {
        for ahead in [0u64, 1_000_000, 250_000_000, 10_000_000_000] {
            let nanos = now_nanos() + ahead;
            let back = nanos_of(instant_at(nanos));
            assert!(back.abs_diff(nanos) < SLACK.as_nanos() as u64, "{ahead}: {nanos} -> {back}");
        }
    }

    #[test]
    fn nanos_of_a_past_instant_lies_in_the_past() {
        let then = Instant::now();
        let then_ns = now_nanos();
        std::thread::sleep(Duration::from_millis(30));
        let got = nanos_of(then);
        assert!(got.abs_diff(then_ns) < SLACK.as_nanos() as u64, "{then_ns} vs {got}");
    }
}
