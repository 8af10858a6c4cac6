//! The run's decisions, with no I/O: a state machine told what the workers' links say and what
//! time it is, which answers with what to send and what to tell the run's followers. Here is
//! every judgement of a run across workers: when to start them, whom to give up on and why,
//! what to believe, when a second is complete. `mod.rs` is its driver (the links, the channel,
//! the progress line, the exporter, the hlog), so each judgement is tested on made-up instants
//! (`machine/tests.rs`) with no worker running.
//!
//! Time comes in as a [`Now`], both clocks read together by the driver: `Instant`s for the
//! deadlines, and the controller's CLOCK_MONOTONIC nanoseconds, the clock the start instant is
//! stated in and the workers' seconds are judged against.

use std::collections::{BTreeMap, VecDeque};
use std::time::{Duration, Instant};

use volley_engine::{RingSupport, Stats, Stop};
use volley_worker::shard::{Event, Outcome};

use super::checks;
use super::compact::CompactStats;
use super::link::{Command, LinkEvent, WorkerInfo};
use super::results::{Ended, FleetRun, Second, WorkerRun};
use super::series::{Label, Profile};
use super::worker_series::SeriesBudget;
use crate::gate::Watch;
use crate::printable::one_line;

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
/// After a Stop (Ctrl-C, `--abort-on-fail`), workers have this long to send what they measured.
const STOP_GRACE: Duration = Duration::from_secs(3);

/// The time, as the driver read it: both clocks at (nearly) one instant.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Now {
    pub at: Instant,
    /// The controller's CLOCK_MONOTONIC (ns), `volley_worker::clock::now_nanos`.
    pub nanos: u64,
}

/// One worker as the run begins.
pub(crate) struct Member {
    /// Its line of the report as far as it is known before it says anything: its address,
    /// connections and rate. One with a failure already (it could not even be reached) is not
    /// waited for.
    pub report: WorkerRun,
    /// The requests of its shard, when the run counts requests.
    pub budget: Option<u64>,
    /// On another machine: the start needs a margin for the Start message to reach it, and its
    /// intervals are summed in case it is lost.
    pub remote: bool,
}

/// What the driver is to do, in order.
// A second is the large one (its histograms' headers), and a few actions go out per second:
// boxing it would be an allocation per second for nothing, as for `LinkEvent`.
#[allow(clippy::large_enum_variant)]
#[derive(Debug)]
pub(crate) enum Action {
    Send {
        worker: usize,
        command: Command,
    },
    /// The load starts `margin` from now (the instant the Start messages name): for the
    /// followers that note when it began.
    Started {
        margin: Duration,
    },
    /// Second `second`, merged over every worker that was live for it: for the progress line
    /// (`live` workers are still running, at least 1), the exporter and the hlog.
    Second {
        second: u32,
        delta: Stats,
        live: usize,
    },
}

/// A run across workers, from the first link event to the last result.
pub(crate) struct Fleet<'w> {
    run: FleetRun,
    state: State,
    stop: Stop,
    connect_timeout: Duration,
    most_connections: usize,
    /// `--abort-on-fail`: judges each interval as it arrives.
    watch: Option<&'w mut Watch>,
    setup_deadline: Instant,
    /// The start instant in the controller's clock, and the `Instant` it stands for.
    planned: Option<(u64, Instant)>,
    finish_deadline: Option<Instant>,
    /// Set once every worker was told to stop: from then on only their results are awaited.
    stop_deadline: Option<Instant>,
    actions: VecDeque<Action>,
}

impl<'w> Fleet<'w> {
    /// A run of `members` whose links were opened at `now`, stopping as `stop` says; workers have
    /// `connect_timeout` and [`SETUP_LIMIT`] to get ready.
    pub(crate) fn new(
        now: Instant,
        stop: Stop,
        connect_timeout: Duration,
        profile: Profile,
        members: Vec<Member>,
        watch: Option<&'w mut Watch>,
    ) -> Self {
        let remote = members.iter().any(|m| m.remote);
        let most_connections = members.iter().map(|m| m.report.connections).max().unwrap_or(0);
        let mut state = State::default();
        let mut workers = Vec::with_capacity(members.len());
        let series = remote.then(|| SeriesBudget::for_workers(members.len()));
        for (i, member) in members.into_iter().enumerate() {
            let mut tracked = Tracked::new(member.budget, member.remote, profile.warm_up_seconds);
            tracked.series_room = match series {
                Some(s) if member.remote && s.is_detailed(i) => s.seconds_each,
                _ => 0,
            };
            tracked.terminal = member.report.failure.is_some();
            state.workers.push(tracked);
            workers.push(member.report);
        }
        Fleet {
            run: FleetRun { workers, remote, profile, series, ..Default::default() },
            state,
            stop,
            connect_timeout,
            most_connections,
            watch,
            setup_deadline: now + connect_timeout + SETUP_LIMIT,
            planned: None,
            finish_deadline: None,
            stop_deadline: None,
            actions: VecDeque::new(),
        }
    }

    /// Every worker finished, failed or was given up on: nothing more is awaited.
    pub(crate) fn is_done(&self) -> bool {
        self.state.all_terminal()
    }

    /// The next thing to do, if any.
    pub(crate) fn poll_action(&mut self) -> Option<Action> {
        self.actions.pop_front()
    }

    /// Ctrl-C: every live worker is told to stop, and has [`STOP_GRACE`] to send what it
    /// measured. Nothing more once a stop is under way.
    pub(crate) fn interrupt(&mut self, now: Now) {
        if self.stop_deadline.is_some() || self.is_done() {
            return;
        }
        self.run.interrupted = true;
        self.stop_all(now.at);
    }

    /// Time passed: the deadlines, the silence and lag of each worker, and the start once every
    /// live worker is ready.
    pub(crate) fn on_tick(&mut self, now: Now) {
        if self.is_done() {
            return;
        }
        if self.planned.is_none() && now.at >= self.setup_deadline {
            let limit = self.connect_timeout + SETUP_LIMIT;
            for i in self.live() {
                if !self.state.workers[i].ready {
                    self.give_up(i, format!("not ready within {limit:?}"));
                }
            }
        }
        if self.stop_deadline.is_some_and(|d| now.at >= d) {
            for i in self.live() {
                // Already told to stop: only the wait ends.
                self.fail(i, format!("no result within {STOP_GRACE:?} of the stop"));
            }
        } else if self.finish_deadline.is_some_and(|d| now.at >= d) {
            for i in self.live() {
                self.give_up(i, "no result by the end of the run plus its grace".into());
            }
        } else {
            self.check_pace(now);
            self.start_when_ready(now);
        }
        self.flush();
    }

    /// Worker `worker`'s link said `event` at `now`.
    pub(crate) fn on_event(&mut self, now: Now, worker: usize, event: LinkEvent) {
        let i = worker;
        if self.state.workers.get(i).is_none_or(|w| w.terminal) {
            return;
        }
        let report = &mut self.run.workers[i];
        match event {
            LinkEvent::Hello(info) => {
                report.info = Some(WorkerInfo {
                    name: one_line(&info.name),
                    version: one_line(&info.version),
                    kernel: one_line(&info.kernel),
                    ..info
                });
            }
            LinkEvent::Synced(offset) => report.clock = Some(offset),
            LinkEvent::Worker(Event::Accepted { ring, threads, .. }) => {
                report.ring = Some(RingSupport { kernel: one_line(&ring.kernel), ..ring });
                report.threads = threads;
            }
            LinkEvent::Worker(Event::Ready { .. }) => self.state.workers[i].ready = true,
            LinkEvent::Worker(Event::Started { at_nanos }) => {
                if let (Some((planned, _)), Some(clock)) = (self.planned, report.clock) {
                    report.start_offset = Some(clock.to_controller(at_nanos) as i64 - planned as i64);
                }
            }
            LinkEvent::Worker(Event::Interval { second, delta }) => self.interval(now, i, second, delta),
            // Stopped before its end, and not by a Stop from here (Ctrl-C, --abort-on-fail):
            // a lost worker, named with what ended it; its intervals are what it is known to
            // have done, and the totals are lower bounds. Never the run's `interrupted`.
            LinkEvent::Worker(Event::Finished(outcome)) if outcome.interrupted && self.stop_deadline.is_none() => {
                let why = outcome.stopped_by.as_deref().map_or_else(
                    || "it stopped before its end without being asked to (it did not say why)".to_string(),
                    one_line,
                );
                self.fail(i, format!("ended early: {why}"));
            }
            LinkEvent::Worker(Event::Finished(outcome)) => self.finished(i, *outcome),
            LinkEvent::Worker(Event::Failed(reason)) => self.fail(i, one_line(&reason)),
            // The permit is given back once the result is taken.
            LinkEvent::Held(event, _permit) => return self.on_event(now, i, LinkEvent::Worker(event)),
            LinkEvent::Encoded(encoded) => match encoded.decode() {
                Ok(event) => return self.on_event(now, i, LinkEvent::Worker(event)),
                Err(why) => self.give_up(i, one_line(&why)),
            },
        }
        self.flush();
    }

    /// Every link has ended (the channel closed): no result is coming from those still awaited.
    pub(crate) fn links_ended(&mut self) {
        for i in self.live() {
            self.fail(i, "the worker's link ended without a result".into());
        }
        self.flush();
    }

    /// What the run produced. A worker without a result keeps what its intervals said.
    pub(crate) fn finish(mut self) -> FleetRun {
        // Only a driver that stops early leaves seconds here; the report still gets them.
        for (second, delta) in self.state.flush() {
            self.run.intervals.push(Second::of(second, &delta, self.run.profile.whole(second)));
        }
        self.run.series_cut = self.state.workers.iter().any(|w| w.series_cut);
        for (i, tracked) in self.state.workers.iter_mut().enumerate() {
            let worker = &mut self.run.workers[i];
            worker.seconds = std::mem::take(&mut tracked.seconds);
            if worker.outcome.is_some() || worker.summarised.is_some() {
                continue;
            }
            worker.reported_seconds = tracked.last_second;
            let partial = tracked.received.take().map(|sum| sum.to_stats());
            let warm_up = tracked.received_warm_up.take().map(|sum| sum.to_stats());
            let summarised = self.run.is_summarised(i);
            match partial {
                Some(partial) if summarised => self.run.summarise(i, partial, warm_up, None),
                partial => {
                    let worker = &mut self.run.workers[i];
                    worker.partial = partial;
                    worker.partial_warm_up = warm_up;
                }
            }
        }
        self.run
    }

    /// The workers still awaited, by index.
    fn live(&self) -> Vec<usize> {
        (0..self.state.workers.len()).filter(|&i| !self.state.workers[i].terminal).collect()
    }

    fn send(&mut self, worker: usize, command: Command) {
        self.actions.push_back(Action::Send { worker, command });
    }

    fn stop_all(&mut self, now: Instant) {
        self.stop_deadline = Some(now + STOP_GRACE);
        for i in self.live() {
            self.send(i, Command::Stop);
        }
    }

    fn fail(&mut self, i: usize, reason: String) {
        self.run.workers[i].failure = Some(reason);
        self.state.workers[i].terminal = true;
    }

    /// Failed, and told to stop so that it does not go on loading the target for nothing.
    fn give_up(&mut self, i: usize, reason: String) {
        self.fail(i, reason);
        self.send(i, Command::Stop);
    }

    /// A worker that reported what cannot be true: failed, stopped, and nothing it said is used.
    fn distrust(&mut self, i: usize, lie: checks::Implausible) {
        let w = &mut self.state.workers[i];
        w.received = None;
        w.received_warm_up = None;
        w.seconds.clear();
        self.give_up(i, lie.to_string());
    }

    /// Once started and while no stop is under way: a worker silent for [`SILENCE_LIMIT`] or
    /// more than [`LAG_LIMIT`] seconds behind is given up on.
    fn check_pace(&mut self, now: Now) {
        let Some((at, sent)) = self.planned.filter(|_| self.stop_deadline.is_none()) else {
            return;
        };
        let elapsed = Duration::from_nanos(now.nanos.saturating_sub(at));
        // A timed run's workers owe no intervals past its end, only their result.
        let (running, elapsed) = match self.stop {
            Stop::Duration(d) => (elapsed < d, elapsed.min(d)),
            Stop::Requests(_) => (true, elapsed),
        };
        for i in self.live() {
            let w = &self.state.workers[i];
            let behind = elapsed.as_secs().saturating_sub(u64::from(w.last_second));
            // Silent for exactly the limit is silent for the limit: the deadline is the instant
            // it is failed at, as every other deadline here.
            if running && now.at.saturating_duration_since(w.heard_at.unwrap_or(sent)) >= SILENCE_LIMIT {
                self.give_up(i, format!("sent nothing for {SILENCE_LIMIT:?}"));
            } else if behind > LAG_LIMIT {
                let last = w.last_second;
                self.give_up(i, format!("fell {behind}s behind the run (its last interval was second {last})"));
            }
        }
    }

    /// Every live worker is ready: pick the instant and tell each (its link states it in the
    /// worker's clock). Never during a stop, and never for nobody.
    fn start_when_ready(&mut self, now: Now) {
        let ready = self.state.workers.iter().all(|w| w.terminal || w.ready);
        if self.planned.is_some() || self.stop_deadline.is_some() || !ready || self.is_done() {
            return;
        }
        let margin = if self.run.remote {
            let slowest = self.run.workers.iter().filter_map(|w| w.clock.map(|c| c.rtt)).max().unwrap_or(0);
            START_MARGIN + Duration::from_nanos(slowest.saturating_mul(2))
        } else {
            Duration::ZERO
        };
        let at = now.nanos.saturating_add(u64::try_from(margin.as_nanos()).unwrap_or(u64::MAX));
        self.planned = Some((at, now.at + margin));
        for i in self.live() {
            self.send(i, Command::Start { at });
        }
        if let Stop::Duration(d) = self.stop {
            let closing = CLOSE_ALLOWANCE.saturating_mul(u32::try_from(self.most_connections).unwrap_or(u32::MAX));
            self.finish_deadline = Some(now.at + margin + d + FINISH_GRACE + closing);
        }
        self.actions.push_back(Action::Started { margin });
    }

    fn interval(&mut self, now: Now, i: usize, second: u32, delta: Stats) {
        let elapsed = self.planned.map(|(at, _)| Duration::from_nanos(now.nanos.saturating_sub(at)));
        let w = &self.state.workers[i];
        let warm_up = second <= self.run.profile.warm_up_seconds;
        // A budget counts the requests after the warm-up only.
        let budget = if warm_up { None } else { w.budget };
        let believable = checks::second(second, w.last_second, elapsed)
            .and_then(|()| checks::counts(&delta, w.said_done, budget, &self.run.profile.checks));
        if let Err(lie) = believable {
            return self.distrust(i, lie);
        }
        // Judged as each worker's second arrives, not once every worker sent it: what one
        // worker proves lost is lost, and waiting costs time. The warm-up's seconds are not
        // judged: they are not in the verdict either.
        let breached = match (self.watch.as_deref_mut(), elapsed) {
            (Some(watch), Some(elapsed)) if self.stop_deadline.is_none() && !warm_up => watch.interval(&delta, elapsed),
            _ => false,
        };
        let label = self.run.profile.shard(i, second);
        self.state.interval(now.at, i, second, delta, label);
        if breached {
            self.stop_all(now.at);
        }
    }

    fn finished(&mut self, i: usize, mut outcome: Outcome) {
        let w = &self.state.workers[i];
        let shape = &self.run.profile.checks;
        let checked = checks::finished(&outcome.stats, w.said_done, w.said_ok, w.budget, shape)
            .and_then(|()| outcome.warm_up.as_ref().map_or(Ok(()), |s| checks::counts(s, 0, None, shape)));
        if let Err(lie) = checked {
            return self.distrust(i, lie);
        }
        for (_, why) in &mut outcome.error_samples {
            *why = one_line(why);
        }
        if self.run.is_summarised(i) {
            // Into the totals now, its line a digest: a thousand results held until the
            // report would be a thousand sets of histograms.
            let (ended, stats, warm_up) = Ended::of(outcome);
            self.run.summarise(i, stats, warm_up, Some(ended));
        } else {
            self.run.workers[i].outcome = Some(outcome);
        }
        let w = &mut self.state.workers[i];
        w.terminal = true;
        // Its result is what the report uses; the sum of its intervals was for losing it.
        w.received = None;
        w.received_warm_up = None;
    }

    /// The seconds now complete, into the run's series and out to the followers.
    fn flush(&mut self) {
        let live = self.state.workers.iter().filter(|w| !w.terminal).count().max(1);
        for (second, delta) in self.state.flush() {
            self.run.intervals.push(Second::of(second, &delta, self.run.profile.whole(second)));
            self.actions.push_back(Action::Second { second, delta, live });
        }
    }
}

/// What the run keeps about one worker while the run goes on.
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
    /// One running sum, not one per second, kept compact (its counts that are not zero, tens
    /// of kilobytes where histograms would take 0.38 MB). The in-process worker keeps none: it
    /// cannot be lost without this process. The warm-up's seconds are summed apart.
    received: Option<CompactStats>,
    received_warm_up: Option<CompactStats>,
    /// Its first seconds that are the warm-up's: not counted against the budget.
    warm_up_seconds: u32,
    keeps_sum: bool,
    /// Its seconds, summed up; kept for remote workers only, like `received`, and only for as
    /// many as the run's `SeriesBudget` gives it (none for a summarised worker).
    seconds: Vec<Second>,
    series_room: usize,
    /// It had more seconds than its room.
    series_cut: bool,
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
            series_room: 0,
            series_cut: false,
            budget,
        }
    }
}

/// Per worker, what the run tracks; per second, the delta merged over the workers, until every
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

    /// Takes a checked interval, arrived at `now`: into the worker's running sum and its
    /// second's merge.
    fn interval(&mut self, now: Instant, worker: usize, second: u32, delta: Stats, label: Label) {
        let w = &mut self.workers[worker];
        w.last_second = second;
        w.heard_at = Some(now);
        let warm_up = second <= w.warm_up_seconds;
        // The final result's counts are the measurement's: what the seconds after the warm-up
        // said must be in them.
        if !warm_up {
            w.said_done = w.said_done.saturating_add(checks::done(&delta.counters));
            w.said_ok = w.said_ok.saturating_add(delta.counters.ok);
        }
        if w.seconds.len() < w.series_room {
            w.seconds.push(Second::of(second, &delta, label));
        } else if w.series_room > 0 {
            w.series_cut = true;
        }
        let received = if warm_up { &mut w.received_warm_up } else { &mut w.received };
        match received {
            Some(sum) => sum.merge(&delta),
            None if w.keeps_sum => *received = Some(CompactStats::of(&delta)),
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
mod tests;
