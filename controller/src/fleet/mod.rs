//! A run across workers: split the plan, reach every worker, start them all at one instant,
//! merge their seconds into one progress line and keep their results for the report.
//!
//! A local run is a fleet of one in-process worker, so both take this path.

mod clock_sync;
mod link;
mod local;
mod progress;
mod remote;
mod split;

use std::collections::BTreeMap;
use std::sync::mpsc::{self, RecvTimeoutError};
use std::time::{Duration, Instant};

use volley_engine::{Plan, RingSupport, RunControl, Stats, Stop};
use volley_worker::clock::now_nanos;
use volley_worker::shard::{Event, Outcome};
use volley_worker::wire;

pub(crate) use link::WorkerInfo;
pub(crate) use remote::Access;
pub(crate) use split::split;

use clock_sync::Offset;
use link::{Command, Link, LinkEvent};
use progress::ProgressLine;

/// Remote workers get their start this far ahead (plus twice the slowest round trip), so the
/// Start message reaches every one of them before the instant it names.
const START_MARGIN: Duration = Duration::from_millis(50);
/// How long workers may take to connect, sync clocks and open their connections, beyond the
/// plan's own connect timeout.
const SETUP_LIMIT: Duration = Duration::from_secs(15);
/// How long past a timed run's end a worker may take to send its result.
const FINISH_GRACE: Duration = Duration::from_secs(10);

/// Where a shard runs.
#[derive(Debug, Clone)]
pub(crate) enum Place {
    Local,
    /// host:port of a `volley worker`.
    Remote(String),
}

/// One worker's part of a run, as the report shows it.
#[derive(Debug, Default)]
pub(crate) struct WorkerRun {
    /// The address it was given (or "local").
    pub address: String,
    pub info: Option<WorkerInfo>,
    pub connections: usize,
    pub ring: Option<RingSupport>,
    pub clock: Option<Offset>,
    /// Its actual start against the planned instant, in the controller's clock (ns).
    pub start_offset: Option<i64>,
    pub outcome: Option<Outcome>,
    /// Why it has no (complete) result.
    pub failure: Option<String>,
}

/// Everything a run across workers produced.
#[derive(Debug, Default)]
pub(crate) struct FleetRun {
    pub workers: Vec<WorkerRun>,
    /// One summary per second, merged over the workers, in order.
    pub intervals: Vec<Second>,
    /// Ctrl-C stopped the run.
    pub interrupted: bool,
    pub remote: bool,
}

/// Runs `shards[i]` on `places[i]`, all starting together.
pub(crate) fn run(
    shards: Vec<Plan>,
    places: Vec<Place>,
    access: &Access,
    runtime: Option<&tokio::runtime::Handle>,
    worker_threads: Option<u32>,
    interrupt: &RunControl,
) -> FleetRun {
    let (tx, rx) = mpsc::channel::<(usize, LinkEvent)>();
    let remote = places.iter().any(|p| matches!(p, Place::Remote(_)));
    let stop = shards[0].stop;
    let connect_timeout = shards[0].connect_timeout;
    let mut fleet = FleetRun { remote, ..Default::default() };
    let mut links = Vec::with_capacity(shards.len());
    for (index, (shard, place)) in shards.into_iter().zip(places).enumerate() {
        let mut worker = WorkerRun { connections: shard.connections, ..Default::default() };
        let link = match place {
            Place::Local => {
                worker.address = "local".into();
                local::start(index, shard, tx.clone())
            }
            Place::Remote(address) => {
                worker.address = address.clone();
                let (cmd_tx, cmd_rx) = tokio::sync::mpsc::unbounded_channel();
                // Without -t, each worker uses its own cores.
                let proto = wire::shard_to_proto(&shard, worker_threads);
                match runtime {
                    Some(rt) => {
                        rt.spawn(remote::drive(index, address, access.clone(), proto, tx.clone(), cmd_rx));
                    }
                    None => worker.failure = Some("no runtime for remote workers".into()),
                }
                Link::Remote(cmd_tx)
            }
        };
        fleet.workers.push(worker);
        links.push(link);
    }
    drop(tx);

    let mut state = State::new(fleet.workers.len());
    for (i, w) in fleet.workers.iter().enumerate() {
        if w.failure.is_some() {
            state.terminal[i] = true;
        }
    }
    let mut progress = ProgressLine::new();
    let setup_deadline = Instant::now() + connect_timeout + SETUP_LIMIT;
    let mut planned: Option<u64> = None;
    let mut finish_deadline: Option<Instant> = None;
    let mut stop_sent = false;

    while !state.all_terminal() {
        let now = Instant::now();
        if interrupt.is_stopped() && !stop_sent {
            stop_sent = true;
            fleet.interrupted = true;
            for (i, link) in links.iter().enumerate() {
                if !state.terminal[i] {
                    link.send(Command::Stop);
                }
            }
        }
        if planned.is_none() && now >= setup_deadline {
            for (i, link) in links.iter().enumerate() {
                if !state.ready[i] && !state.terminal[i] {
                    fail(&mut fleet, &mut state, i, format!("not ready within {:?}", connect_timeout + SETUP_LIMIT));
                    link.send(Command::Stop);
                }
            }
        }
        if finish_deadline.is_some_and(|d| now >= d) {
            for (i, link) in links.iter().enumerate() {
                if !state.terminal[i] {
                    fail(&mut fleet, &mut state, i, "no result by the end of the run plus its grace".into());
                    link.send(Command::Stop);
                }
            }
            continue;
        }
        // Every live worker is ready: pick the instant and tell each in its own clock.
        if planned.is_none() && !stop_sent && (0..links.len()).all(|i| state.terminal[i] || state.ready[i]) {
            let slowest = fleet.workers.iter().filter_map(|w| w.clock.map(|c| c.rtt)).max().unwrap_or(0);
            let margin = if remote { START_MARGIN + Duration::from_nanos(2 * slowest) } else { Duration::ZERO };
            let at = now_nanos() + margin.as_nanos() as u64;
            planned = Some(at);
            for (i, link) in links.iter().enumerate() {
                if !state.terminal[i] {
                    link.send(Command::Start { at });
                }
            }
            if let Stop::Duration(d) = stop {
                finish_deadline = Some(Instant::now() + margin + d + FINISH_GRACE);
            }
        }
        let (i, event) = match rx.recv_timeout(Duration::from_millis(20)) {
            Ok(message) => message,
            Err(RecvTimeoutError::Timeout) => continue,
            Err(RecvTimeoutError::Disconnected) => {
                for i in 0..links.len() {
                    if !state.terminal[i] {
                        fail(&mut fleet, &mut state, i, "the worker's link ended without a result".into());
                    }
                }
                break;
            }
        };
        if state.terminal[i] {
            continue;
        }
        let worker = &mut fleet.workers[i];
        match event {
            LinkEvent::Hello(info) => worker.info = Some(info),
            LinkEvent::Synced(offset) => worker.clock = Some(offset),
            LinkEvent::Worker(Event::Accepted { ring, .. }) => worker.ring = Some(ring),
            LinkEvent::Worker(Event::Ready { .. }) => state.ready[i] = true,
            LinkEvent::Worker(Event::Started { at_nanos }) => {
                if let (Some(planned), Some(clock)) = (planned, worker.clock) {
                    worker.start_offset = Some(clock.to_controller(at_nanos) as i64 - planned as i64);
                }
            }
            LinkEvent::Worker(Event::Interval { second, delta }) => state.interval(i, second, delta),
            LinkEvent::Worker(Event::Finished(outcome)) => {
                worker.outcome = Some(*outcome);
                state.terminal[i] = true;
            }
            LinkEvent::Worker(Event::Failed(reason)) => fail(&mut fleet, &mut state, i, reason),
        }
        let live = state.terminal.iter().filter(|t| !**t).count().max(1);
        for (second, delta) in state.flush() {
            progress.interval(second, &delta, live);
            fleet.intervals.push(Second::of(second, &delta));
        }
    }
    for (second, delta) in state.flush() {
        fleet.intervals.push(Second::of(second, &delta));
    }
    progress.clear();
    fleet
}

/// One second of the run, summed up. Only the summary is kept: a second's full histograms take
/// most of a megabyte, which an hour-long run must not pile up.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Second {
    pub second: u32,
    pub ok: u64,
    pub errors: u64,
    /// Latency percentiles of that second's responses (ns); None when there were none.
    pub p50: Option<u64>,
    pub p99: Option<u64>,
}

impl Second {
    fn of(second: u32, delta: &Stats) -> Second {
        let lat = &delta.histograms.latency;
        let at = |q| (!lat.is_empty()).then(|| lat.value_at_quantile(q));
        Second { second, ok: delta.counters.ok, errors: delta.counters.errors(), p50: at(0.5), p99: at(0.99) }
    }
}

fn fail(fleet: &mut FleetRun, state: &mut State, i: usize, reason: String) {
    fleet.workers[i].failure = Some(reason);
    state.terminal[i] = true;
}

/// Per worker: ready, done, the last second it reported; per second, the merged delta.
struct State {
    ready: Vec<bool>,
    terminal: Vec<bool>,
    last_second: Vec<u32>,
    pending: BTreeMap<u32, Stats>,
}

impl State {
    fn new(workers: usize) -> Self {
        State {
            ready: vec![false; workers],
            terminal: vec![false; workers],
            last_second: vec![0; workers],
            pending: BTreeMap::new(),
        }
    }

    fn all_terminal(&self) -> bool {
        self.terminal.iter().all(|t| *t)
    }

    fn interval(&mut self, worker: usize, second: u32, delta: Stats) {
        self.last_second[worker] = second;
        match self.pending.entry(second) {
            std::collections::btree_map::Entry::Vacant(v) => {
                v.insert(delta);
            }
            std::collections::btree_map::Entry::Occupied(mut o) => o.get_mut().merge(&delta),
        }
    }

    /// The seconds every live worker has reported, merged.
    fn flush(&mut self) -> Vec<(u32, Stats)> {
        let mut out = Vec::new();
        while let Some(entry) = self.pending.first_entry() {
            let second = *entry.key();
            if (0..self.terminal.len()).any(|w| !self.terminal[w] && self.last_second[w] < second) {
                break;
            }
            out.push((second, entry.remove()));
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use volley_engine::Stats;

    use super::State;

    fn delta(ok: u64) -> Stats {
        let mut s = Stats::new();
        s.counters.ok = ok;
        s
    }

    #[test]
    fn a_second_is_complete_once_every_live_worker_reported_it() {
        let mut state = State::new(2);
        state.interval(0, 1, delta(10));
        assert!(state.flush().is_empty(), "worker 1 has not reported second 1");
        state.interval(1, 1, delta(5));
        state.interval(1, 2, delta(7));
        let done = state.flush();
        assert_eq!(done.iter().map(|(s, d)| (*s, d.counters.ok)).collect::<Vec<_>>(), vec![(1, 15)]);
        // Worker 0 ends without a second 2: that second holds worker 1's part only.
        state.terminal[0] = true;
        let done = state.flush();
        assert_eq!(done.iter().map(|(s, d)| (*s, d.counters.ok)).collect::<Vec<_>>(), vec![(2, 7)]);
    }
}
