//! Plain counters: outcomes, status codes, errors by kind, bytes on the wire, Retry-After,
//! datagrams cut short.

use super::RetryAfterCounts;

/// Why a request failed. Each kind has its own counter.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ErrorKind {
    /// The connection could not be set up (refused, unreachable, connect timeout).
    Connect,
    /// No complete response within `--timeout`.
    Timeout,
    /// The peer reset or closed the connection before the response was complete.
    Reset,
    /// The response broke HTTP (malformed, oversized).
    Protocol,
    /// The TLS handshake or a TLS record failed (including certificate verification).
    Tls,
}

impl ErrorKind {
    pub const ALL: [ErrorKind; 5] =
        [ErrorKind::Connect, ErrorKind::Timeout, ErrorKind::Reset, ErrorKind::Protocol, ErrorKind::Tls];

    pub fn name(self) -> &'static str {
        match self {
            ErrorKind::Connect => "connect",
            ErrorKind::Timeout => "timeout",
            ErrorKind::Reset => "reset",
            ErrorKind::Protocol => "protocol",
            ErrorKind::Tls => "tls",
        }
    }

    fn index(self) -> usize {
        self as usize
    }
}

/// Status codes are three digits; anything else is a protocol error before it gets here.
pub const STATUS_SLOTS: usize = 1000;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Counters {
    /// Requests that got a complete response, whatever its status.
    pub ok: u64,
    errors: [u64; ErrorKind::ALL.len()],
    status: Vec<u64>,
    pub bytes_sent: u64,
    pub bytes_received: u64,
    /// Connections set up successfully.
    pub connects: u64,
    /// Requests still in flight when the run stopped (deadline or Ctrl-C): sent, perhaps seen by
    /// the server, but neither ok nor errors.
    pub aborted: u64,
    /// Samples beyond a histogram's range, recorded as its highest value.
    pub clamped: u64,
    /// HTTP/2 requests the server declined unprocessed (beyond a GOAWAY's last stream, or
    /// RST_STREAM REFUSED_STREAM) and that were sent again: neither ok nor errors, since the
    /// server promised it did not act on them.
    pub refused: u64,
    /// Open model: requests sent more than 1 ms after they were due.
    pub late: u64,
    /// Open model: requests that were due while no connection or stream was free to take them
    /// (found so by the event loop; each request counted once).
    pub blocked: u64,
    /// Open model: requests due before the run ended that were never sent.
    pub unsent: u64,
    /// With scenarios: iterations started (passes of a scenario, each a unit of a `-n`
    /// budget or a rate); 0 otherwise.
    pub iterations: u64,
    /// With feeders: rows taken (one per feeder an iteration uses).
    pub feeder_rows: u64,
    /// Threads that stopped starting iterations because their share of a shard feeder's rows
    /// was used up ("the data ran out").
    pub ran_out: u64,
    /// Responses one of whose step's extractors found nothing (each ends its iteration).
    pub extract_failed: u64,
    /// With flows: iterations ended before their last step, because a step's extraction or
    /// request failed (counted under the step's name where it ended).
    pub abandoned: u64,
    /// With steps that follow redirects: redirects followed (each hop once, under its step's
    /// name); each hop's response is counted as one too.
    pub redirects: u64,
    /// With think times: the pauses users took after answers (or failures), and their sum in
    /// nanoseconds (a mean, merged exactly; the pauses are in no latency).
    pub thinks: u64,
    pub think_nanos: u64,
    /// Responses that carried `Retry-After`.
    pub retry_after: RetryAfterCounts,
    /// UDP (HTTP/3): datagrams larger than a receive buffer, cut short by the kernel
    /// (MSG_TRUNC); QUIC drops what does not decrypt and repairs it as a loss.
    pub truncated: u64,
    /// QUIC packets received that could not be parsed or opened, dropped unread.
    pub dropped_packets: u64,
}

impl Default for Counters {
    fn default() -> Self {
        Counters {
            ok: 0,
            errors: [0; ErrorKind::ALL.len()],
            status: vec![0; STATUS_SLOTS],
            bytes_sent: 0,
            bytes_received: 0,
            connects: 0,
            aborted: 0,
            clamped: 0,
            refused: 0,
            late: 0,
            blocked: 0,
            unsent: 0,
            iterations: 0,
            feeder_rows: 0,
            ran_out: 0,
            extract_failed: 0,
            abandoned: 0,
            redirects: 0,
            thinks: 0,
            think_nanos: 0,
            retry_after: RetryAfterCounts::default(),
            truncated: 0,
            dropped_packets: 0,
        }
    }
}

impl Counters {
    /// A user paused for `paused` after an answer (or a failure).
    pub(crate) fn think(&mut self, paused: std::time::Duration) {
        self.thinks += 1;
        self.think_nanos = self.think_nanos.saturating_add(super::nanos_of(paused));
    }

    pub fn error(&mut self, kind: ErrorKind) {
        self.errors[kind.index()] += 1;
    }

    pub fn add_errors(&mut self, kind: ErrorKind, n: u64) {
        let slot = &mut self.errors[kind.index()];
        *slot = slot.saturating_add(n);
    }

    pub fn errors_of(&self, kind: ErrorKind) -> u64 {
        self.errors[kind.index()]
    }

    pub fn errors(&self) -> u64 {
        self.errors.iter().fold(0, |sum, n| sum.saturating_add(*n))
    }

    /// [`Counters::total`], or None when it is past what a u64 holds.
    pub fn total_checked(&self) -> Option<u64> {
        self.errors.iter().try_fold(self.ok, |sum, n| sum.checked_add(*n))
    }

    /// Requests attempted and finished one way or the other: ok plus errors.
    pub fn total(&self) -> u64 {
        self.ok.saturating_add(self.errors())
    }

    pub fn status(&mut self, code: u16) {
        if let Some(slot) = self.status.get_mut(code as usize) {
            *slot += 1;
        }
    }

    pub fn add_status(&mut self, code: u16, n: u64) {
        if let Some(slot) = self.status.get_mut(code as usize) {
            *slot = slot.saturating_add(n);
        }
    }

    /// Status codes seen, in order, with their counts.
    pub fn statuses(&self) -> impl Iterator<Item = (u16, u64)> + '_ {
        self.status.iter().enumerate().filter(|(_, n)| **n > 0).map(|(code, n)| (code as u16, *n))
    }

    /// Adds `other`, saturating: counts from other machines or files may be absurd, and a
    /// total that wrapped around would look plausible.
    pub fn merge(&mut self, other: &Counters) {
        self.merge_with(other, |a, b| *a = a.saturating_add(b));
    }

    /// Adds `other` unless some count would pass what a u64 holds; then `self` is unchanged
    /// and false says so. For saved reports, whose absurd counts are refused rather than
    /// saturated without a word.
    pub fn checked_merge(&mut self, other: &Counters) -> bool {
        let mut fits = true;
        let mut probe = self.clone();
        probe.merge_with(other, |a, b| match a.checked_add(b) {
            Some(sum) => *a = sum,
            None => fits = false,
        });
        if fits {
            *self = probe;
        }
        fits
    }

    fn merge_with(&mut self, other: &Counters, mut add: impl FnMut(&mut u64, u64)) {
        add(&mut self.ok, other.ok);
        for (a, b) in self.errors.iter_mut().zip(other.errors.iter()) {
            add(a, *b);
        }
        for (a, b) in self.status.iter_mut().zip(other.status.iter()) {
            add(a, *b);
        }
        add(&mut self.bytes_sent, other.bytes_sent);
        add(&mut self.bytes_received, other.bytes_received);
        add(&mut self.connects, other.connects);
        add(&mut self.aborted, other.aborted);
        add(&mut self.clamped, other.clamped);
        add(&mut self.refused, other.refused);
        add(&mut self.late, other.late);
        add(&mut self.blocked, other.blocked);
        add(&mut self.unsent, other.unsent);
        add(&mut self.iterations, other.iterations);
        add(&mut self.feeder_rows, other.feeder_rows);
        add(&mut self.ran_out, other.ran_out);
        add(&mut self.extract_failed, other.extract_failed);
        add(&mut self.abandoned, other.abandoned);
        add(&mut self.redirects, other.redirects);
        add(&mut self.thinks, other.thinks);
        add(&mut self.think_nanos, other.think_nanos);
        add(&mut self.truncated, other.truncated);
        add(&mut self.dropped_packets, other.dropped_packets);
        self.retry_after.merge(&other.retry_after);
    }
}
