//! Loss detection for one packet number space (RFC 9002 §5–6): the packets we sent that the
//! peer has yet to acknowledge, what each carried that must go again if it is lost, and the
//! round-trip estimate the timers come from.
//!
//! No congestion control: this QUIC is for loopback-class paths, where the client must not
//! throttle itself (`--quic-congestion standard` keeps quinn-proto and its CUBIC for a WAN).
//! Flow control and a fixed cap on bytes in flight (`conn::MAX_IN_FLIGHT`) bound what is sent.

use std::collections::VecDeque;
use std::time::{Duration, Instant};

/// RFC 9002 §6.1.1: a packet this many below an acknowledged one is lost.
const PACKET_THRESHOLD: u64 = 3;
/// RFC 9002 §6.2: the timer granularity.
const GRANULARITY: Duration = Duration::from_millis(1);

/// A frame that must be sent again if the packet carrying it is lost (ACKs, PADDING and PINGs
/// need not: they are made afresh).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Resend {
    Stream { id: u64, offset: u64, len: u32, fin: bool },
    Crypto { offset: u64, len: u32 },
    ResetStream { id: u64, code: u64, final_size: u64 },
    StopSending { id: u64, code: u64 },
    MaxStreamData { id: u64 },
    RetireConnectionId { seq: u64 },
}

#[derive(Debug)]
pub(crate) struct Sent {
    pub pn: u64,
    pub time: Instant,
    pub size: u32,
    pub frames: Vec<Resend>,
    /// Acknowledged or declared lost: its slot waits to leave the front of the queue.
    settled: bool,
}

/// The round-trip estimate (RFC 9002 §5).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Rtt {
    pub latest: Duration,
    pub smoothed: Duration,
    pub var: Duration,
    pub min: Duration,
    sampled: bool,
}

impl Rtt {
    pub(crate) fn new(initial: Duration) -> Self {
        Rtt { latest: initial, smoothed: initial, var: initial / 2, min: initial, sampled: false }
    }

    /// A sample from the largest newly acknowledged packet; `ack_delay` is the peer's, already
    /// capped at its max_ack_delay (zero before the handshake is confirmed).
    pub(crate) fn update(&mut self, sample: Duration, ack_delay: Duration) {
        self.latest = sample;
        if !self.sampled {
            self.sampled = true;
            self.min = sample;
            self.smoothed = sample;
            self.var = sample / 2;
            return;
        }
        self.min = self.min.min(sample);
        let adjusted = if sample >= self.min + ack_delay { sample - ack_delay } else { sample };
        let diff = self.smoothed.abs_diff(adjusted);
        self.var = (self.var * 3 + diff) / 4;
        self.smoothed = (self.smoothed * 7 + adjusted) / 8;
    }

    /// The probe timeout before backing off (RFC 9002 §6.2.1), without the peer's ack delay.
    pub(crate) fn pto_base(&self) -> Duration {
        self.smoothed + (self.var * 4).max(GRANULARITY)
    }

    fn loss_delay(&self) -> Duration {
        (self.latest.max(self.smoothed) * 9 / 8).max(GRANULARITY)
    }
}

/// The packets of one space awaiting an acknowledgement, oldest first. Only ack-eliciting
/// packets are kept: a packet of ACKs alone is never acknowledged and never sent again.
#[derive(Debug, Default)]
pub(crate) struct SentPackets {
    queue: VecDeque<Sent>,
    /// Unsettled packets in `queue`, and their bytes.
    in_flight: usize,
    pub bytes_in_flight: u64,
    pub largest_acked: Option<u64>,
    /// When the oldest unsettled packet below the largest acknowledged will count as lost.
    pub loss_time: Option<Instant>,
    /// When the last ack-eliciting packet left (the probe timer counts from it).
    pub last_sent: Option<Instant>,
    /// Packets declared lost (by threshold or probe), in all.
    pub lost: u64,
    /// Frame lists of settled packets, to be filled again without allocating.
    spare: Vec<Vec<Resend>>,
}

impl SentPackets {
    /// An empty frame list for the next packet.
    pub(crate) fn frames(&mut self) -> Vec<Resend> {
        self.spare.pop().unwrap_or_default()
    }

    /// Records an ack-eliciting packet.
    pub(crate) fn push(&mut self, pn: u64, time: Instant, size: usize, frames: Vec<Resend>) {
        self.queue.push_back(Sent { pn, time, size: size as u32, frames, settled: false });
        self.in_flight += 1;
        self.bytes_in_flight += size as u64;
        self.last_sent = Some(time);
    }

    /// Gives a packet of ACKs alone its frame list back.
    pub(crate) fn recycle(&mut self, frames: Vec<Resend>) {
        self.spare.push(frames);
    }

    pub(crate) fn has_in_flight(&self) -> bool {
        self.in_flight > 0
    }

    /// Takes an ACK's ranges (largest first). Every frame of a newly acknowledged packet goes
    /// to `acked`, of a packet found lost to `lost`. Returns when the largest acknowledged
    /// packet was sent if it is newly acknowledged (an RTT sample is due).
    pub(crate) fn on_ack(
        &mut self,
        ranges: impl Iterator<Item = (u64, u64)>,
        now: Instant,
        rtt: &Rtt,
        mut acked: impl FnMut(Resend),
        lost: impl FnMut(Resend),
    ) -> Option<Instant> {
        let mut sample = None;
        let mut first = true;
        for (lo, hi) in ranges {
            if first {
                first = false;
                self.largest_acked = Some(self.largest_acked.map_or(hi, |l| l.max(hi)));
            }
            let start = self.queue.partition_point(|p| p.pn < lo);
            for p in self.queue.range_mut(start..) {
                if p.pn > hi {
                    break;
                }
                if p.settled {
                    continue;
                }
                if p.pn == hi && sample.is_none() && Some(hi) == self.largest_acked {
                    sample = Some(p.time);
                }
                p.settled = true;
                self.in_flight -= 1;
                self.bytes_in_flight -= u64::from(p.size);
                for &f in &p.frames {
                    acked(f);
                }
            }
        }
        self.detect_lost(now, rtt, lost);
        sample
    }

    /// Declares lost what RFC 9002 §6.1 says is, and sets `loss_time` for the rest below the
    /// largest acknowledged.
    pub(crate) fn detect_lost(&mut self, now: Instant, rtt: &Rtt, mut lost: impl FnMut(Resend)) {
        self.loss_time = None;
        let Some(largest) = self.largest_acked else { return };
        let delay = rtt.loss_delay();
        for p in self.queue.iter_mut() {
            if p.pn > largest {
                break;
            }
            if p.settled {
                continue;
            }
            if p.pn + PACKET_THRESHOLD <= largest || p.time + delay <= now {
                p.settled = true;
                self.in_flight -= 1;
                self.bytes_in_flight -= u64::from(p.size);
                self.lost += 1;
                for &f in &p.frames {
                    lost(f);
                }
            } else {
                let at = p.time + delay;
                self.loss_time = Some(self.loss_time.map_or(at, |t| t.min(at)));
            }
        }
        self.trim();
    }

    /// A probe timeout: the oldest packet in flight is taken as lost, so its frames go again
    /// in the probe. Returns whether there was one.
    pub(crate) fn probe_oldest(&mut self, lost: impl FnMut(Resend)) -> bool {
        let Some(p) = self.queue.iter_mut().find(|p| !p.settled) else { return false };
        p.settled = true;
        self.in_flight -= 1;
        self.bytes_in_flight -= u64::from(p.size);
        self.lost += 1;
        p.frames.iter().copied().for_each(lost);
        self.trim();
        true
    }

    /// Forgets every packet (the space's keys are discarded): nothing of them goes again.
    pub(crate) fn discard(&mut self) {
        self.queue.clear();
        self.in_flight = 0;
        self.bytes_in_flight = 0;
        self.loss_time = None;
        self.last_sent = None;
    }

    fn trim(&mut self) {
        while self.queue.front().is_some_and(|p| p.settled) {
            if let Some(mut p) = self.queue.pop_front() {
                p.frames.clear();
                self.spare.push(p.frames);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stream(offset: u64) -> Resend {
        Resend::Stream { id: 0, offset, len: 10, fin: false }
    }

    fn sent(n: u64, at: Instant) -> SentPackets {
        let mut s = SentPackets::default();
        for pn in 0..n {
            s.push(pn, at, 100, vec![stream(pn * 10)]);
        }
        s
    }

    #[test]
    fn an_ack_settles_its_packets_and_samples_the_largest() {
        let t0 = Instant::now();
        let mut s = sent(3, t0);
        let rtt = Rtt::new(Duration::from_millis(10));
        let (mut acked, mut lost) = (Vec::new(), Vec::new());
        let sample = s.on_ack([(0, 2)].into_iter(), t0, &rtt, |f| acked.push(f), |f| lost.push(f));
        assert_eq!(sample, Some(t0));
        assert_eq!(acked.len(), 3);
        assert!(lost.is_empty() && !s.has_in_flight());
    }

    #[test]
    fn three_later_packets_acknowledged_make_an_earlier_one_lost() {
        let t0 = Instant::now();
        let mut s = sent(5, t0);
        let rtt = Rtt::new(Duration::from_secs(10));
        let (mut acked, mut lost) = (Vec::new(), Vec::new());
        s.on_ack([(3, 4)].into_iter(), t0, &rtt, |f| acked.push(f), |f| lost.push(f));
        assert_eq!(lost, vec![stream(0), stream(10)], "pns 0 and 1 are at least three below 4");
        assert!(s.loss_time.is_some(), "pn 2 waits for the time threshold");
        let mut later = Vec::new();
        s.detect_lost(t0 + Duration::from_secs(12), &rtt, |f| later.push(f));
        assert_eq!(later, vec![stream(20)]);
        assert!(!s.has_in_flight() && s.loss_time.is_none());
    }

    #[test]
    fn an_ack_for_a_packet_already_declared_lost_changes_nothing() {
        let t0 = Instant::now();
        let mut s = sent(4, t0);
        let rtt = Rtt::new(Duration::from_secs(10));
        let mut lost = Vec::new();
        s.on_ack([(3, 3)].into_iter(), t0, &rtt, |_| {}, |f| lost.push(f));
        assert_eq!(lost.len(), 1);
        let mut acked = Vec::new();
        s.on_ack([(3, 3), (0, 0)].into_iter(), t0, &rtt, |f| acked.push(f), |_| {});
        assert!(acked.is_empty());
    }

    #[test]
    fn a_probe_sends_the_oldest_packets_frames_again() {
        let t0 = Instant::now();
        let mut s = sent(2, t0);
        let mut lost = Vec::new();
        assert!(s.probe_oldest(|f| lost.push(f)));
        assert_eq!(lost, vec![stream(0)]);
        assert!(s.has_in_flight());
    }

    #[test]
    fn the_rtt_follows_samples_and_takes_the_peers_delay_off_above_the_minimum() {
        let mut rtt = Rtt::new(Duration::from_millis(10));
        rtt.update(Duration::from_millis(2), Duration::ZERO);
        assert_eq!((rtt.smoothed, rtt.min), (Duration::from_millis(2), Duration::from_millis(2)));
        rtt.update(Duration::from_millis(10), Duration::from_millis(8));
        assert_eq!(rtt.smoothed, Duration::from_millis(2));
        assert!(rtt.pto_base() >= Duration::from_millis(3));
    }
}
