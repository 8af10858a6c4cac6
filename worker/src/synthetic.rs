//! A shard runner that sends no load: it keeps the engine's gate and its event order (Accepted,
//! Ready, Started at the gate's instant, one Interval per second, Finished), and fills each
//! second with statistics of the shape a real run gives (a log-normal latency around 2 ms with
//! a tail, first bytes a little before the last, a few 503s and timeouts, connect times in the
//! first second). It exists to measure a controller against thousands of workers served from
//! one process (`volley sim-fleet`): everything from the wire encoding on is the real thing.

use std::time::{Duration, Instant};

use volley_engine::{ErrorKind, Load, Plan, RingSupport, RunControl, Stats, Stop};

use crate::clock;
use crate::runner::ShardRunner;
use crate::shard::{Event, Outcome};

/// A closed-model connection's requests per second (a 5 ms round trip).
const PER_CONNECTION: u64 = 200;
/// How often a wait looks at the stop flag, and for the start instant. A simulated fleet has a
/// thread per worker: at 2 ms a thousand of them woke 500,000 times a second and starved the
/// daemons' own heartbeat reading. The start is announced 50 ms ahead at least, so the gate is
/// still seen before its instant.
const STOP_POLL: Duration = Duration::from_millis(100);
const GATE_POLL: Duration = Duration::from_millis(20);

/// The runner the simulated fleet's workers use.
pub fn runner() -> ShardRunner {
    ShardRunner::new("synthetic", run_synthetic_shard)
}

/// Runs `plan` as [`crate::shard::run_shard`] would, with made-up statistics and no load.
pub fn run_synthetic_shard(plan: &Plan, control: &RunControl, sink: &mut dyn FnMut(Event)) {
    yield_to_the_daemon();
    let ring = RingSupport {
        kernel: String::new(),
        tuned: true,
        min_wait: false,
        engine: volley_engine::Engine::IoUring,
        fallback: None,
    };
    sink(Event::Accepted { threads: plan.threads, connections: plan.connections, ring });
    sink(Event::Ready { connected: plan.connections as u64, failed: 0 });
    let Some(start) = wait_for_gate(control) else {
        return sink(Event::Finished(Box::new(outcome(plan, Stats::new(), None, Duration::ZERO, true))));
    };
    sink(Event::Started { at_nanos: clock::nanos_of(start) });
    let rate = match &plan.load {
        Load::Open { rate, .. } => rate.per_second,
        Load::Closed { .. } => (plan.connections as u64).saturating_mul(PER_CONNECTION),
    };
    let (mut left, seconds) = match plan.stop {
        Stop::Requests(n) => (n, u32::MAX),
        Stop::Duration(d) => (u64::MAX, u32::try_from(d.as_secs()).unwrap_or(u32::MAX)),
    };
    let warm_up_seconds = plan.warm_up.map_or(0, |w| u32::try_from(w.as_secs()).unwrap_or(u32::MAX));
    let mut rng = Rng(clock::now_nanos() | 1);
    let (mut stats, mut warm_up) = (Stats::new(), plan.warm_up.map(|_| Stats::new()));
    let mut interrupted = false;
    let mut second = 0u32;
    while second < seconds && left > 0 {
        second += 1;
        if !sleep_until(start + Duration::from_secs(u64::from(second)), control) {
            interrupted = true;
            break;
        }
        let n = rate.min(left);
        left -= n;
        let delta = one_second(&mut rng, n, (second == 1).then_some(plan.connections as u64));
        match warm_up.as_mut().filter(|_| second <= warm_up_seconds) {
            Some(w) => w.merge(&delta),
            None => stats.merge(&delta),
        }
        sink(Event::Interval { second, delta });
    }
    let took = Instant::now().saturating_duration_since(start);
    sink(Event::Finished(Box::new(outcome(plan, stats, warm_up, took, interrupted))));
}

fn outcome(plan: &Plan, stats: Stats, warm_up: Option<Stats>, duration: Duration, interrupted: bool) -> Outcome {
    let error_samples = if stats.counters.errors() > 0 {
        vec![(ErrorKind::Timeout, "synthetic: no response within the timeout".to_string())]
    } else {
        Vec::new()
    };
    Outcome {
        stats,
        duration,
        threads: plan.threads,
        connections: plan.connections,
        client_cpu: Duration::ZERO,
        interrupted,
        error_samples,
        stream_limit: None,
        warm_up,
        stopped_by: None,
    }
}

/// `n` requests' worth of one second; `connects` connections set up in it (the first second).
fn one_second(rng: &mut Rng, n: u64, connects: Option<u64>) -> Stats {
    let mut s = Stats::new();
    let c = &mut s.counters;
    for _ in 0..n {
        // One in 2,000 times out: an error, with no latency.
        if rng.below(2_000) == 0 {
            c.error(ErrorKind::Timeout);
            continue;
        }
        let latency = rng.latency();
        c.ok += 1;
        c.status(if rng.below(200) == 0 { 503 } else { 200 });
        c.bytes_sent += 120;
        c.bytes_received += 350;
        s.histograms.latency.record(latency).expect("within the auto-resizing range");
        s.histograms.ttfb.record((latency * 9 / 10).max(1)).expect("within the auto-resizing range");
    }
    if let Some(connects) = connects {
        s.counters.connects = connects;
        for _ in 0..connects {
            let t = 60_000 + rng.below(80_000);
            s.histograms.connect.record(t).expect("within the auto-resizing range");
        }
    }
    s
}

/// Puts this thread in SCHED_IDLE: it runs only on CPU that nothing else wants. A thousand
/// simulated workers share one machine, and all of their seconds fall due at one instant: in
/// the normal class their encoding (each real worker's own machine's business, 0.3 to 0.5 ms
/// a second here) took the CPU from the daemons' runtime and from the controller being
/// measured, which then read and sent heartbeats late and runs were stopped for a lost
/// controller that was there (nice 10 was not enough against a thousand threads). Best
/// effort: a failure leaves the class as it was.
fn yield_to_the_daemon() {
    let param = libc::sched_param { sched_priority: 0 };
    // SAFETY: pid 0 is the calling thread; `param` outlives the call.
    unsafe {
        libc::sched_setscheduler(0, libc::SCHED_IDLE, &param);
    }
}

/// Waits for the gate's instant; None when the run is stopped first.
fn wait_for_gate(control: &RunControl) -> Option<Instant> {
    loop {
        if control.is_stopped() {
            return None;
        }
        if let Some(at) = control.start_instant() {
            // The instant it really began: a Start that came late shows as skew, as it would.
            return sleep_until(at, control).then(Instant::now);
        }
        std::thread::sleep(GATE_POLL);
    }
}

/// Sleeps until `at`; false when the run is stopped first.
fn sleep_until(at: Instant, control: &RunControl) -> bool {
    loop {
        if control.is_stopped() {
            return false;
        }
        let now = Instant::now();
        if now >= at {
            return true;
        }
        std::thread::sleep((at - now).min(STOP_POLL));
    }
}

/// xorshift64*: cheap numbers with no dependency.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }

    fn unit(&mut self) -> f64 {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64
    }

    /// Nanoseconds: log-normal around 2 ms (σ 0.35), and one in 100 eight times slower.
    fn latency(&mut self) -> u64 {
        let (u1, u2) = (self.unit().max(f64::MIN_POSITIVE), self.unit());
        let normal = (-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos();
        let tail = if self.below(100) == 0 { 8.0 } else { 1.0 };
        (2_000_000.0 * (0.35 * normal).exp() * tail) as u64
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use volley_engine::{RequestSpec, Target};

    #[test]
    fn a_synthetic_shard_keeps_the_engines_order_and_its_seconds_add_up_to_its_result() {
        let target = Target::parse("http://127.0.0.1:9/").expect("valid URL");
        let mut plan = Plan::new(target, RequestSpec::new("GET", Vec::new(), Vec::new()), 2, Stop::Requests(500));
        plan.threads = 1;
        let control = RunControl::gated();
        control.start_at(Instant::now());
        let mut events = Vec::new();
        run_synthetic_shard(&plan, &control, &mut |e| events.push(e));
        let mut sum = Stats::new();
        for e in &events {
            if let Event::Interval { delta, .. } = e {
                sum.merge(delta);
            }
        }
        let Some(Event::Finished(outcome)) = events.last() else { panic!("no result: {events:?}") };
        assert!(matches!(events[0], Event::Accepted { .. }) && matches!(events[2], Event::Started { .. }));
        // 400 a second from 2 connections: two seconds for 500 requests.
        assert_eq!(events.iter().filter(|e| matches!(e, Event::Interval { .. })).count(), 2);
        assert_eq!(outcome.stats.counters.ok + outcome.stats.counters.errors(), 500);
        assert_eq!(outcome.stats.counters, sum.counters);
        assert_eq!(outcome.stats.histograms.latency.len(), outcome.stats.counters.ok);
        assert_eq!(outcome.stats.histograms.connect.len(), 2);
    }
}
