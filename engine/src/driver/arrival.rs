//! When received bytes reached the host, as an `Instant`: the kernel stamps each packet with
//! CLOCK_REALTIME, the loop keeps time in CLOCK_MONOTONIC, and one pair of readings per batch
//! of completions ties the two together.
//!
//! A response's latency ends at its arrival, not when the loop handled it, so whatever the
//! client adds after the bytes are in (a wake-up, a hold for a batch, a wait for the next
//! request due) is in no latency. The realtime clock only slews under NTP (at most 0.05%), so
//! over the few milliseconds between a packet and the reading the two clocks agree to well
//! under a microsecond. A step of the wall clock in between would move the arrivals of that
//! one batch: one after the loop saw it is taken as then, one before its request was sent
//! gives the latency's floor (1 ns).

use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

#[derive(Debug, Clone, Copy)]
pub(super) struct ArrivalClock {
    /// One moment on both clocks.
    monotonic: Instant,
    realtime: Duration,
}

impl ArrivalClock {
    /// Reads both clocks now.
    pub(super) fn read() -> Self {
        let monotonic = Instant::now();
        let realtime = SystemTime::now().duration_since(UNIX_EPOCH).unwrap_or_default();
        ArrivalClock { monotonic, realtime }
    }

    /// The instant of a kernel `timestamp`, never after `now` (when the loop saw it): that
    /// is what the latency would have ended at without one.
    pub(super) fn instant(&self, timestamp: Option<Duration>, now: Instant) -> Instant {
        let Some(timestamp) = timestamp else { return now };
        let at = match timestamp.checked_sub(self.realtime) {
            Some(after) => self.monotonic.checked_add(after),
            None => self.monotonic.checked_sub(self.realtime - timestamp),
        };
        at.map_or(now, |at| at.min(now))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn clock(monotonic: Instant, realtime_ms: u64) -> ArrivalClock {
        ArrivalClock { monotonic, realtime: Duration::from_millis(realtime_ms) }
    }

    #[test]
    fn a_timestamp_before_the_reading_is_as_far_before_it_on_the_monotonic_clock() {
        let base = Instant::now();
        let reading = clock(base + Duration::from_millis(10), 5_000);
        let now = base + Duration::from_millis(11);
        let at = reading.instant(Some(Duration::from_millis(4_997)), now);
        assert_eq!(at, base + Duration::from_millis(7));
    }

    #[test]
    fn an_arrival_is_never_after_the_loop_saw_it() {
        let base = Instant::now();
        let reading = clock(base, 5_000);
        // The wall clock stepped forward between the reading and the packet.
        let now = base + Duration::from_millis(1);
        assert_eq!(reading.instant(Some(Duration::from_millis(9_000)), now), now);
        // Still after the reading but before `now`: kept.
        assert_eq!(reading.instant(Some(Duration::from_micros(5_000_400)), now), base + Duration::from_micros(400));
    }

    #[test]
    fn without_a_timestamp_the_arrival_is_when_the_loop_saw_it() {
        let now = Instant::now();
        assert_eq!(ArrivalClock::read().instant(None, now), now);
    }
}
