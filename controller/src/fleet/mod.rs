//! A run across workers: split the plan, reach every worker, start them all at one instant,
//! merge their seconds into one progress line and keep their results for the report.
//!
//! A local run is a fleet of one in-process worker, so both take this path. Nothing a worker
//! sends is taken on trust (`checks.rs`), and no worker can keep the run waiting: one that stops
//! reporting, falls behind or does not answer a Stop is failed, and what its intervals said
//! until then is kept for the report. So is one that ends its shard early when nobody here
//! asked it to (its daemon was signalled, it lost the heartbeat): that is not this run's Ctrl-C.

mod checks;
mod clock_sync;
mod link;
mod local;
mod progress;
mod remote;
mod results;
mod series;
mod split;

use std::collections::BTreeMap;
use std::sync::mpsc::{self, RecvTimeoutError};
use std::time::{Duration, Instant};

use volley_engine::{Plan, RingSupport, RunControl, Stats, Stop};
use volley_worker::clock::now_nanos;
use volley_worker::metrics::Exporter;
use volley_worker::shard::Event;
use volley_worker::wire;

pub(crate) use link::WorkerInfo;
pub(crate) use remote::Access;
pub(crate) use results::{FleetRun, Second};
pub(crate) use series::Profile;
pub(crate) use split::split;

use crate::gate::Watch;
use crate::output::hlog::IntervalLog;
use crate::printable::one_line;
use link::{Command, Link, LinkEvent};
use progress::ProgressLine;
use results::WorkerRun;

/// Remote workers get their start this far ahead (plus twice the slowest round trip), so the
/// Start message reaches every one of them before the instant it names.
const START_MARGIN: Duration = Duration::from_millis(50);
/// How long workers may take to connect, sync clocks and open their connections, beyond the
/// plan's own connect timeout.
const SETUP_LIMIT: Duration = Duration::from_secs(15);
/// How long past a timed run's end a worker may take to send its result, beside what closing
/// its connections takes ([`CLOSE_ALLOWANCE`] each).
const FINISH_GRACE: Duration = Duration::from_secs(10);
/// What closing one connection at a run's end may take: measured at 10 to 30 µs (10,000 on
/// one thread in 0.1 to 0.3 s), given several times over, so a million-connection shard has 50 s
/// more and no run that ran goes without its report.
const CLOSE_ALLOWANCE: Duration = Duration::from_micros(50);
/// A started worker sends an interval every second (empty ones too); one that sends nothing
/// for this long is not working, whatever its connection says.
const SILENCE_LIMIT: Duration = Duration::from_secs(5);
/// A worker whose last interval trails the run's wall time by more seconds than this is not
/// keeping up. While it is live every later second is buffered (about 0.8 MB each, merged over
/// the workers), so this, with the check that no second comes before its time, bounds the buffer.
const LAG_LIMIT: u64 = 10;
/// After a Stop (Ctrl-C), workers have this long to send what they measured.
const STOP_GRACE: Duration = Duration::from_secs(3);

/// Where a shard runs.
#[derive(Debug, Clone)]
pub(crate) enum Place {
    Local,
    /// host:port of a `volley worker`.
    Remote(String),
}

/// Who follows a run as it goes, besides the progress line.
#[derive(Default)]
pub(crate) struct Followers<'a> {
    /// `--prometheus`: told of the start, and given each second merged over the workers as soon
    /// as every live one sent it.
    pub live: Option<&'a Exporter>,
    /// `--abort-on-fail`: every interval goes to it as it arrives, and when it says a threshold
    /// can no longer pass every worker is stopped.
    pub watch: Option<&'a mut Watch>,
    /// `--hlog`: told when the load starts, and given each second merged over the workers.
    pub hlog: Option<&'a mut IntervalLog>,
}

/// Runs `shards[i]` on `places[i]`, all starting together, told to `followers` as it goes.
pub(crate) fn run(
    shards: Vec<Plan>,
    places: Vec<Place>,
    access: &Access,
    runtime: Option<&tokio::runtime::Handle>,
    worker_threads: Option<u32>,
    interrupt: &RunControl,
    followers: Followers<'_>,
) -> FleetRun {
    let Followers { live, mut watch, mut hlog } = followers;
    let (tx, rx) = mpsc::channel::<(usize, LinkEvent)>();
    let remote = places.iter().any(|p| matches!(p, Place::Remote(_)));
    let stop = shards[0].stop;
    let connect_timeout = shards[0].connect_timeout;
    let most_connections = shards.iter().map(|s| s.connections).max().unwrap_or(0);
    let profile = Profile::new(&shards);
    let mut fleet = FleetRun { remote, profile: profile.clone(), ..Default::default() };
    let mut links = Vec::with_capacity(shards.len());
    let mut state = State::default();
    for (index, (shard, place)) in shards.into_iter().zip(places).enumerate() {
        let end = match shard.stop {
            Stop::Duration(d) => d,
            Stop::Requests(_) => Duration::ZERO,
        };
        let mut worker = WorkerRun {
            connections: shard.connections,
            rate: profile.asked_rate(Some(index), end),
            ..Default::default()
        };
        let budget = match shard.stop {
            Stop::Requests(n) => Some(n),
            Stop::Duration(_) => None,
        };
        state.workers.push(Tracked::new(budget, matches!(place, Place::Remote(_)), profile.warm_up_seconds));
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
                    None => {
                        worker.failure = Some("no runtime for remote workers".into());
                        state.workers[index].terminal = true;
                    }
                }
                Link::Remote(cmd_tx)
            }
        };
        fleet.workers.push(worker);
        links.push(link);
    }
    drop(tx);

    let mut progress = ProgressLine::new();
    let setup_deadline = Instant::now() + connect_timeout + SETUP_LIMIT;
    // The start instant in the controller's clock, and when it was sent.
    let mut planned: Option<(u64, Instant)> = None;
    let mut finish_deadline: Option<Instant> = None;
    let mut stop_deadline: Option<Instant> = None;

    while !state.all_terminal() {
        let now = Instant::now();
        if interrupt.is_stopped() && stop_deadline.is_none() {
            stop_deadline = Some(now + STOP_GRACE);
            fleet.interrupted = true;
            for (i, link) in links.iter().enumerate() {
                if !state.workers[i].terminal {
                    link.send(Command::Stop);
                }
            }
        }
        let give_up = |fleet: &mut FleetRun, state: &mut State, i: usize, reason: String| {
            fail(fleet, state, i, reason);
            links[i].send(Command::Stop);
        };
        if planned.is_none() && now >= setup_deadline {
            for i in 0..links.len() {
                if !state.workers[i].ready && !state.workers[i].terminal {
                    give_up(&mut fleet, &mut state, i, format!("not ready within {:?}", connect_timeout + SETUP_LIMIT));
                }
            }
        }
        if stop_deadline.is_some_and(|d| now >= d) {
            for i in 0..links.len() {
                if !state.workers[i].terminal {
                    // Already told to stop: only the wait ends.
                    fail(&mut fleet, &mut state, i, format!("no result within {STOP_GRACE:?} of the stop"));
                }
            }
            continue;
        }
        if finish_deadline.is_some_and(|d| now >= d) {
            for i in 0..links.len() {
                if !state.workers[i].terminal {
                    give_up(&mut fleet, &mut state, i, "no result by the end of the run plus its grace".into());
                }
            }
            continue;
        }
        if let Some((at, sent)) = planned.filter(|_| stop_deadline.is_none()) {
            let elapsed = Duration::from_nanos(now_nanos().saturating_sub(at));
            // A timed run's workers owe no intervals past its end, only their result.
            let (running, elapsed) = match stop {
                Stop::Duration(d) => (elapsed < d, elapsed.min(d)),
                Stop::Requests(_) => (true, elapsed),
            };
            for i in 0..links.len() {
                let w = &state.workers[i];
                if w.terminal {
                    continue;
                }
                let behind = elapsed.as_secs().saturating_sub(u64::from(w.last_second));
                if running && now.duration_since(w.heard_at.unwrap_or(sent)) > SILENCE_LIMIT {
                    give_up(&mut fleet, &mut state, i, format!("sent nothing for {SILENCE_LIMIT:?}"));
                } else if behind > LAG_LIMIT {
                    let last = w.last_second;
                    give_up(
                        &mut fleet,
                        &mut state,
                        i,
                        format!("fell {behind}s behind the run (its last interval was second {last})"),
                    );
                }
            }
        }
        // Every live worker is ready: pick the instant and tell each in its own clock.
        if planned.is_none() && stop_deadline.is_none() && state.workers.iter().all(|w| w.terminal || w.ready) {
            let slowest = fleet.workers.iter().filter_map(|w| w.clock.map(|c| c.rtt)).max().unwrap_or(0);
            let margin = if remote { START_MARGIN + Duration::from_nanos(2 * slowest) } else { Duration::ZERO };
            let at = now_nanos() + margin.as_nanos() as u64;
            planned = Some((at, Instant::now() + margin));
            for (i, link) in links.iter().enumerate() {
                if !state.workers[i].terminal {
                    link.send(Command::Start { at });
                }
            }
            if let Stop::Duration(d) = stop {
                let closing = CLOSE_ALLOWANCE.saturating_mul(u32::try_from(most_connections).unwrap_or(u32::MAX));
                finish_deadline = Some(Instant::now() + margin + d + FINISH_GRACE + closing);
            }
            if let Some(live) = live {
                live.run_started();
            }
            if let Some(hlog) = hlog.as_deref_mut() {
                hlog.started(std::time::SystemTime::now() + margin);
            }
        }
        let (i, event) = match rx.recv_timeout(Duration::from_millis(20)) {
            Ok(message) => message,
            Err(RecvTimeoutError::Timeout) => continue,
            Err(RecvTimeoutError::Disconnected) => {
                for i in 0..links.len() {
                    if !state.workers[i].terminal {
                        fail(&mut fleet, &mut state, i, "the worker's link ended without a result".into());
                    }
                }
                break;
            }
        };
        if state.workers[i].terminal {
            continue;
        }
        let worker = &mut fleet.workers[i];
        match event {
            LinkEvent::Hello(info) => {
                worker.info = Some(WorkerInfo {
                    name: one_line(&info.name),
                    version: one_line(&info.version),
                    kernel: one_line(&info.kernel),
                    ..info
                });
            }
            LinkEvent::Synced(offset) => worker.clock = Some(offset),
            LinkEvent::Worker(Event::Accepted { ring, threads, .. }) => {
                worker.ring = Some(RingSupport { kernel: one_line(&ring.kernel), ..ring });
                worker.threads = threads;
            }
            LinkEvent::Worker(Event::Ready { .. }) => state.workers[i].ready = true,
            LinkEvent::Worker(Event::Started { at_nanos }) => {
                if let (Some((planned, _)), Some(clock)) = (planned, worker.clock) {
                    worker.start_offset = Some(clock.to_controller(at_nanos) as i64 - planned as i64);
                }
            }
            LinkEvent::Worker(Event::Interval { second, delta }) => {
                let elapsed = planned.map(|(at, _)| Duration::from_nanos(now_nanos().saturating_sub(at)));
                let w = &state.workers[i];
                let warm_up = second <= profile.warm_up_seconds;
                // A budget counts the requests after the warm-up only.
                let budget = if warm_up { None } else { w.budget };
                let believable = checks::second(second, w.last_second, elapsed)
                    .and_then(|()| checks::counts(&delta, w.said_done, budget));
                match believable {
                    Ok(()) => {
                        // Judged as each worker's second arrives, not once every worker sent
                        // it: what one worker proves lost is lost, and waiting costs time. The
                        // warm-up's seconds are not judged: they are not in the verdict either.
                        let breached = match (watch.as_deref_mut(), elapsed) {
                            (Some(watch), Some(elapsed)) if stop_deadline.is_none() && !warm_up => {
                                watch.interval(&delta, elapsed)
                            }
                            _ => false,
                        };
                        state.interval(i, second, delta, profile.shard(i, second));
                        if breached {
                            stop_deadline = Some(Instant::now() + STOP_GRACE);
                            for (j, link) in links.iter().enumerate() {
                                if !state.workers[j].terminal {
                                    link.send(Command::Stop);
                                }
                            }
                        }
                    }
                    Err(lie) => distrust(&mut fleet, &mut state, &links[i], i, lie),
                }
            }
            // Stopped before its end, and not by a Stop from here (Ctrl-C, --abort-on-fail):
            // a lost worker, named with what ended it; its intervals are what it is known to
            // have done, and the totals are lower bounds. Never the run's `interrupted`.
            LinkEvent::Worker(Event::Finished(outcome)) if outcome.interrupted && stop_deadline.is_none() => {
                let why = outcome.stopped_by.as_deref().map_or_else(
                    || "it stopped before its end without being asked to (it did not say why)".to_string(),
                    one_line,
                );
                fail(&mut fleet, &mut state, i, format!("ended early: {why}"));
            }
            LinkEvent::Worker(Event::Finished(mut outcome)) => {
                let w = &state.workers[i];
                let checked = checks::finished(&outcome.stats, w.said_done, w.said_ok, w.budget)
                    .and_then(|()| outcome.warm_up.as_ref().map_or(Ok(()), |s| checks::counts(s, 0, None)));
                match checked {
                    Ok(()) => {
                        for (_, why) in &mut outcome.error_samples {
                            *why = one_line(why);
                        }
                        worker.outcome = Some(*outcome);
                        state.workers[i].terminal = true;
                    }
                    Err(lie) => distrust(&mut fleet, &mut state, &links[i], i, lie),
                }
            }
            LinkEvent::Worker(Event::Failed(reason)) => fail(&mut fleet, &mut state, i, one_line(&reason)),
        }
        let workers = state.workers.iter().filter(|w| !w.terminal).count().max(1);
        for (second, delta) in state.flush() {
            progress.interval(second, &delta, workers);
            if let Some(live) = live {
                live.second(&delta);
            }
            if let Some(hlog) = hlog.as_deref_mut() {
                hlog.second(second, &delta);
            }
            fleet.intervals.push(Second::of(second, &delta, profile.whole(second)));
        }
    }
    for (second, delta) in state.flush() {
        if let Some(live) = live {
            live.second(&delta);
        }
        if let Some(hlog) = hlog.as_deref_mut() {
            hlog.second(second, &delta);
        }
        fleet.intervals.push(Second::of(second, &delta, profile.whole(second)));
    }
    for (worker, tracked) in fleet.workers.iter_mut().zip(&mut state.workers) {
        worker.seconds = std::mem::take(&mut tracked.seconds);
        if worker.outcome.is_none() {
            worker.partial = tracked.received.take();
            worker.partial_warm_up = tracked.received_warm_up.take();
            worker.reported_seconds = tracked.last_second;
        }
    }
    progress.clear();
    fleet
}

fn fail(fleet: &mut FleetRun, state: &mut State, i: usize, reason: String) {
    fleet.workers[i].failure = Some(reason);
    state.workers[i].terminal = true;
}

/// A worker that reported what cannot be true: failed, stopped, and nothing it said is used.
fn distrust(fleet: &mut FleetRun, state: &mut State, link: &Link, i: usize, lie: checks::Implausible) {
    fail(fleet, state, i, lie.to_string());
    state.workers[i].received = None;
    state.workers[i].received_warm_up = None;
    state.workers[i].seconds.clear();
    link.send(Command::Stop);
}

/// What the run loop keeps about one worker while the run goes on.
struct Tracked {
    ready: bool,
    /// Finished, failed or given up on: nothing it sends from now on is taken.
    terminal: bool,
    /// The last second it reported; 0 before its first.
    last_second: u32,
    /// When its last interval arrived; None before the first.
    heard_at: Option<Instant>,
    /// What its intervals accounted for so far: requests done (ok, errors, aborted), and ok.
    said_done: u64,
    said_ok: u64,
    /// A remote worker's intervals, merged: what it is known to have done should it be lost.
    /// One running sum, not one per second, so it stays the size of one set of histograms.
    /// The in-process worker keeps none: it cannot be lost without this process, and the
    /// sum's 0.8 MB would be a twentieth of a local run's memory. The warm-up's seconds are
    /// summed apart.
    received: Option<Stats>,
    received_warm_up: Option<Stats>,
    /// Its first seconds that are the warm-up's: not counted against the budget.
    warm_up_seconds: u32,
    keeps_sum: bool,
    /// Its seconds, summed up; kept for remote workers only, like `received`.
    seconds: Vec<Second>,
    /// The requests of its shard, when the run counts requests.
    budget: Option<u64>,
}

impl Tracked {
    fn new(budget: Option<u64>, keeps_sum: bool, warm_up_seconds: u32) -> Self {
        Tracked {
            ready: false,
            terminal: false,
            last_second: 0,
            heard_at: None,
            said_done: 0,
            said_ok: 0,
            received: None,
            received_warm_up: None,
            warm_up_seconds,
            keeps_sum,
            seconds: Vec::new(),
            budget,
        }
    }
}

/// Per worker, what the loop tracks; per second, the delta merged over the workers, until every
/// live worker has reported that second.
#[derive(Default)]
struct State {
    workers: Vec<Tracked>,
    pending: BTreeMap<u32, Stats>,
}

impl State {
    fn all_terminal(&self) -> bool {
        self.workers.iter().all(|w| w.terminal)
    }

    /// Takes a checked interval: into the worker's running sum and its second's merge.
    fn interval(&mut self, worker: usize, second: u32, delta: Stats, label: series::Label) {
        let w = &mut self.workers[worker];
        w.last_second = second;
        w.heard_at = Some(Instant::now());
        let warm_up = second <= w.warm_up_seconds;
        // The final result's counts are the measurement's: what the seconds after the warm-up
        // said must be in them.
        if !warm_up {
            w.said_done = w.said_done.saturating_add(checks::done(&delta.counters));
            w.said_ok = w.said_ok.saturating_add(delta.counters.ok);
        }
        if w.keeps_sum {
            w.seconds.push(Second::of(second, &delta, label));
        }
        let received = if warm_up { &mut w.received_warm_up } else { &mut w.received };
        match received {
            Some(sum) => sum.merge(&delta),
            None if w.keeps_sum => *received = Some(delta.clone()),
            None => {}
        }
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
            if self.workers.iter().any(|w| !w.terminal && w.last_second < second) {
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

    use super::{State, Tracked};

    fn delta(ok: u64) -> Stats {
        let mut s = Stats::new();
        s.counters.ok = ok;
        s
    }

    #[test]
    fn a_second_is_complete_once_every_live_worker_reported_it() {
        let mut state =
            State { workers: vec![Tracked::new(None, true, 0), Tracked::new(None, true, 0)], ..Default::default() };
        state.interval(0, 1, delta(10), Default::default());
        assert!(state.flush().is_empty(), "worker 1 has not reported second 1");
        state.interval(1, 1, delta(5), Default::default());
        state.interval(1, 2, delta(7), Default::default());
        let done = state.flush();
        assert_eq!(done.iter().map(|(s, d)| (*s, d.counters.ok)).collect::<Vec<_>>(), vec![(1, 15)]);
        // Worker 0 ends without a second 2: that second holds worker 1's part only.
        state.workers[0].terminal = true;
        let done = state.flush();
        assert_eq!(done.iter().map(|(s, d)| (*s, d.counters.ok)).collect::<Vec<_>>(), vec![(2, 7)]);
    }
}
