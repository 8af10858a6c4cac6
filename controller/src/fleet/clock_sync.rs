//! Estimating a worker's clock offset NTP-style: many probes, the one with the lowest round
//! trip wins, because its answer is the least delayed on either leg.

/// One probe: the controller's clock before and after, the worker's clock in between (ns).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Probe {
    pub sent: u64,
    pub worker: u64,
    pub received: u64,
}

/// The worker's clock minus the controller's, and the round trip it was measured with.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct Offset {
    pub nanos: i64,
    pub rtt: u64,
}

impl Offset {
    /// An instant in the controller's clock, stated in the worker's.
    pub(crate) fn to_worker(self, controller_nanos: u64) -> u64 {
        controller_nanos.saturating_add_signed(self.nanos)
    }

    /// An instant in the worker's clock, stated in the controller's.
    pub(crate) fn to_controller(self, worker_nanos: u64) -> u64 {
        worker_nanos.saturating_add_signed(-self.nanos)
    }
}

/// The offset from the probe with the lowest round trip; None without probes.
pub(crate) fn estimate(probes: &[Probe]) -> Option<Offset> {
    let best = probes.iter().filter(|p| p.received >= p.sent).min_by_key(|p| p.received - p.sent)?;
    let rtt = best.received - best.sent;
    let midpoint = best.sent + rtt / 2;
    Some(Offset { nanos: best.worker as i64 - midpoint as i64, rtt })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_lowest_round_trip_wins() {
        // The worker is 1_000_000 ns ahead; the slow probe's answer was delayed on the way back.
        let probes = [
            Probe { sent: 100, worker: 1_000_150, received: 5_000 },
            Probe { sent: 10_000, worker: 1_010_050, received: 10_100 },
            Probe { sent: 20_000, worker: 1_023_000, received: 26_000 },
        ];
        let offset = estimate(&probes).unwrap();
        assert_eq!(offset, Offset { nanos: 1_000_000, rtt: 100 });
        assert_eq!(offset.to_worker(50_000), 1_050_000);
        assert_eq!(offset.to_controller(1_050_000), 50_000);
    }

    #[test]
    fn a_worker_behind_the_controller_has_a_negative_offset() {
        let offset = estimate(&[Probe { sent: 5_000_000, worker: 1_000_010, received: 5_000_020 }]).unwrap();
        assert_eq!(offset.nanos, -4_000_000);
        assert_eq!(offset.to_controller(offset.to_worker(7_000_000)), 7_000_000);
    }

    #[test]
    fn no_probes_no_estimate() {
        assert_eq!(estimate(&[]), None);
    }
}
