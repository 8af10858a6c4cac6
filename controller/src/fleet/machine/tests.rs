use std::time::{Duration, Instant};

use volley_engine::{ErrorKind, Stats, Stop};
use volley_worker::shard::{Event, Outcome};

use super::super::clock_sync::Offset;
use super::super::link::{Command, Encoded, LinkEvent};
use super::super::results::WorkerRun;
use super::super::series::Profile;
use super::super::worker_series::DETAILED_WORKERS;
use super::{Action, Fleet, LAG_LIMIT, Member, Now, SILENCE_LIMIT, STOP_GRACE};
use crate::gate::{Threshold, Watch};

/// The controller's clock when the links were opened: any value, as long as it is not 0.
const T0_NANOS: u64 = 7_000_000_000_000;
/// The plan's connect timeout: with the setup limit, workers have 17 s to get ready.
const CONNECT: Duration = Duration::from_secs(2);
const TIMED: Stop = Stop::Duration(Duration::from_secs(10));

/// Made-up time: the links opened at `base`, when the controller's clock read [`T0_NANOS`].
struct Clock {
    base: Instant,
}

impl Clock {
    /// `ms` milliseconds after the links opened.
    fn at(&self, ms: u64) -> Now {
        self.after(Duration::from_millis(ms))
    }

    fn after(&self, offset: Duration) -> Now {
        Now { at: self.base + offset, nanos: T0_NANOS + offset.as_nanos() as u64 }
    }
}

fn member(remote: bool, budget: Option<u64>) -> Member {
    Member { report: WorkerRun::default(), budget, remote }
}

fn local() -> Member {
    member(false, None)
}

fn remote() -> Member {
    member(true, None)
}

fn fleet<'w>(members: Vec<Member>, stop: Stop, watch: Option<&'w mut Watch>) -> (Fleet<'w>, Clock) {
    let base = Instant::now();
    (Fleet::new(base, stop, CONNECT, Profile::default(), members, watch), Clock { base })
}

/// Every worker ready at 1 s and the start chosen then; for local workers it is that instant.
fn started<'w>(members: Vec<Member>, stop: Stop, watch: Option<&'w mut Watch>) -> (Fleet<'w>, Clock) {
    let (mut f, clock) = fleet(members, stop, watch);
    for i in 0..f.run.workers.len() {
        f.on_event(clock.at(1_000), i, ready());
    }
    f.on_tick(clock.at(1_000));
    assert_eq!(starts(&drain(&mut f)).len(), 1, "the run started");
    (f, clock)
}

fn ready() -> LinkEvent {
    LinkEvent::Worker(Event::Ready { connected: 1, failed: 0 })
}

/// `ok` responses of 1 ms each.
fn stats(ok: u64) -> Stats {
    let mut s = Stats::new();
    s.counters.ok = ok;
    s.histograms.latency.record_n(1_000_000, ok).expect("in range");
    s
}

fn interval(second: u32, ok: u64) -> LinkEvent {
    LinkEvent::Worker(Event::Interval { second, delta: stats(ok) })
}

fn outcome(ok: u64, interrupted: bool, stopped_by: Option<&str>) -> LinkEvent {
    LinkEvent::Worker(Event::Finished(Box::new(Outcome {
        stats: stats(ok),
        duration: Duration::from_secs(10),
        threads: 1,
        connections: 1,
        client_cpu: Duration::ZERO,
        interrupted,
        error_samples: vec![(ErrorKind::Reset, "reset\nby peer".into())],
        stream_limit: None,
        warm_up: None,
        stopped_by: stopped_by.map(str::to_string),
    })))
}

fn finished(ok: u64) -> LinkEvent {
    outcome(ok, false, None)
}

fn drain(f: &mut Fleet<'_>) -> Vec<Action> {
    std::iter::from_fn(|| f.poll_action()).collect()
}

fn sends(actions: &[Action]) -> Vec<(usize, Command)> {
    actions
        .iter()
        .filter_map(|a| match a {
            Action::Send { worker, command } => Some((*worker, *command)),
            _ => None,
        })
        .collect()
}

fn starts(actions: &[Action]) -> Vec<Duration> {
    actions
        .iter()
        .filter_map(|a| match a {
            Action::Started { margin } => Some(*margin),
            _ => None,
        })
        .collect()
}

/// The merged seconds given out, with their ok counts and live workers.
fn seconds(actions: &[Action]) -> Vec<(u32, u64, usize)> {
    actions
        .iter()
        .filter_map(|a| match a {
            Action::Second { second, delta, live } => Some((*second, delta.counters.ok, *live)),
            _ => None,
        })
        .collect()
}

fn failure<'a>(f: &'a Fleet<'_>, worker: usize) -> Option<&'a str> {
    f.run.workers[worker].failure.as_deref()
}

#[test]
fn the_start_is_chosen_once_every_live_worker_is_ready_with_no_margin_for_a_local_run() {
    let (mut f, clock) = fleet(vec![local(), local()], TIMED, None);
    f.on_tick(clock.at(500));
    f.on_event(clock.at(600), 0, ready());
    f.on_tick(clock.at(700));
    assert!(drain(&mut f).is_empty(), "worker 1 is not ready yet");
    f.on_event(clock.at(800), 1, ready());
    f.on_tick(clock.at(900));
    let at = T0_NANOS + 900_000_000;
    let actions = drain(&mut f);
    assert_eq!(sends(&actions), vec![(0, Command::Start { at }), (1, Command::Start { at })]);
    assert_eq!(starts(&actions), vec![Duration::ZERO]);
    f.on_tick(clock.at(1_000));
    assert!(drain(&mut f).is_empty(), "the start is sent once");
}

#[test]
fn a_remote_run_starts_fifty_milliseconds_plus_twice_the_slowest_round_trip_ahead() {
    let (mut f, clock) = fleet(vec![remote(), remote()], TIMED, None);
    f.on_event(clock.at(100), 0, LinkEvent::Synced(Offset { nanos: 5, rtt: 3_000_000 }));
    f.on_event(clock.at(100), 1, LinkEvent::Synced(Offset { nanos: -5, rtt: 7_000_000 }));
    f.on_event(clock.at(200), 0, ready());
    f.on_event(clock.at(200), 1, ready());
    f.on_tick(clock.at(1_000));
    let margin = Duration::from_millis(50 + 2 * 7);
    let at = T0_NANOS + 1_000_000_000 + margin.as_nanos() as u64;
    let actions = drain(&mut f);
    assert_eq!(sends(&actions), vec![(0, Command::Start { at }), (1, Command::Start { at })]);
    assert_eq!(starts(&actions), vec![margin]);
    // Worker 1 says it started 2 ms late, in its own clock (5 ns behind ours).
    f.on_event(clock.at(1_100), 1, LinkEvent::Worker(Event::Started { at_nanos: at + 2_000_000 - 5 }));
    assert_eq!(f.run.workers[1].start_offset, Some(2_000_000));
}

#[test]
fn a_worker_not_ready_by_the_setup_deadline_is_failed_and_stopped_and_the_rest_start() {
    let (mut f, clock) = fleet(vec![local(), local()], TIMED, None);
    f.on_event(clock.at(1_000), 0, ready());
    let deadline = Duration::from_secs(17);
    f.on_tick(clock.after(deadline - Duration::from_nanos(1)));
    assert!(drain(&mut f).is_empty());
    f.on_tick(clock.after(deadline));
    let at = T0_NANOS + deadline.as_nanos() as u64;
    let actions = drain(&mut f);
    assert_eq!(sends(&actions), vec![(1, Command::Stop), (0, Command::Start { at })]);
    assert_eq!(failure(&f, 1), Some("not ready within 17s"));
    assert_eq!(failure(&f, 0), None);
}

#[test]
fn a_worker_that_could_not_be_reached_is_not_waited_for() {
    let mut lost = remote();
    lost.report.failure = Some("no runtime for remote workers".into());
    let (mut f, clock) = fleet(vec![lost, local()], TIMED, None);
    f.on_event(clock.at(1_000), 1, ready());
    f.on_tick(clock.at(1_000));
    assert_eq!(sends(&drain(&mut f)).iter().map(|(i, _)| *i).collect::<Vec<_>>(), vec![1]);
}

#[test]
fn a_silent_worker_is_failed_at_the_silence_limit_and_not_one_instant_before() {
    // Started at 1 s: worker 1 never sends an interval, worker 0 sends its first at 2 s.
    let (mut f, clock) = started(vec![local(), local()], Stop::Duration(Duration::from_secs(60)), None);
    f.on_event(clock.at(2_000), 0, interval(1, 4));
    let limit = Duration::from_secs(1) + SILENCE_LIMIT;
    f.on_tick(clock.after(limit - Duration::from_nanos(1)));
    assert!(drain(&mut f).is_empty(), "silent for a nanosecond less than the limit");
    f.on_tick(clock.after(limit));
    let actions = drain(&mut f);
    assert_eq!(sends(&actions), vec![(1, Command::Stop)]);
    assert_eq!(failure(&f, 1), Some("sent nothing for 5s"));
    assert_eq!(seconds(&actions), vec![(1, 4, 1)], "worker 1 no longer holds second 1 back");
    // Worker 0's silence counts from its last interval.
    f.on_event(clock.at(6_500), 0, interval(2, 4));
    let limit = Duration::from_millis(6_500) + SILENCE_LIMIT;
    f.on_tick(clock.after(limit - Duration::from_nanos(1)));
    assert!(sends(&drain(&mut f)).is_empty());
    f.on_tick(clock.after(limit));
    assert_eq!(sends(&drain(&mut f)), vec![(0, Command::Stop)]);
    assert!(f.is_done());
}

#[test]
fn a_worker_more_than_the_lag_limit_behind_is_failed_though_it_still_sends() {
    let (mut f, clock) = started(vec![member(false, Some(1_000))], Stop::Requests(1_000), None);
    // Seconds 1 to 4, one every 4 s: never silent for long, but ever further behind.
    for second in 1..=4 {
        f.on_event(clock.at(u64::from(second) * 4_000 - 2_000), 0, interval(second, 1));
    }
    drain(&mut f);
    // 1 + 4 + LAG_LIMIT: the run's second 14 is over, its last was 4.
    let lag = (1 + 4 + LAG_LIMIT) * 1_000;
    f.on_tick(clock.at(lag));
    assert!(drain(&mut f).is_empty(), "exactly the limit behind");
    f.on_tick(clock.at(lag + 1_000));
    assert_eq!(sends(&drain(&mut f)), vec![(0, Command::Stop)]);
    assert_eq!(failure(&f, 0), Some("fell 11s behind the run (its last interval was second 4)"));
}

#[test]
fn a_timed_run_owes_no_intervals_past_its_end_only_its_result_by_the_end_plus_grace() {
    let mut big = local();
    big.report.connections = 1_000;
    let (mut f, clock) = started(vec![big, local()], TIMED, None);
    for second in 1..=10 {
        f.on_event(clock.at(u64::from(second) * 1_000 + 1_000), 0, interval(second, 1));
        f.on_event(clock.at(u64::from(second) * 1_000 + 1_000), 1, interval(second, 1));
    }
    f.on_event(clock.at(11_500), 1, finished(10));
    // Silent since 11 s, past the run's end at 11 s: not a failure.
    f.on_tick(clock.at(20_000));
    assert!(sends(&drain(&mut f)).is_empty());
    // Started at 1 s, 10 s long, 10 s of grace and 50 µs for each of the most connections.
    let deadline = Duration::from_secs(21) + Duration::from_millis(50);
    f.on_tick(clock.after(deadline - Duration::from_nanos(1)));
    assert!(drain(&mut f).is_empty());
    f.on_tick(clock.after(deadline));
    assert_eq!(sends(&drain(&mut f)), vec![(0, Command::Stop)]);
    assert_eq!(failure(&f, 0), Some("no result by the end of the run plus its grace"));
    assert_eq!(failure(&f, 1), None);
    let run = f.finish();
    assert!(run.workers[1].outcome.is_some());
    assert_eq!(run.intervals.len(), 10);
}

#[test]
fn a_second_from_the_future_is_distrusted_its_sums_cleared_and_it_is_stopped() {
    let (mut f, clock) = fleet(vec![remote(), remote()], TIMED, None);
    f.on_event(clock.at(500), 0, ready());
    f.on_event(clock.at(500), 1, ready());
    // Remote: starts 50 ms after the tick, at 1 s.
    f.on_tick(clock.at(950));
    f.on_event(clock.at(2_000), 0, interval(1, 3));
    f.on_event(clock.at(3_000), 0, interval(2, 3));
    drain(&mut f);
    // 3 s into the run, second 6 cannot be over (2 s of slack for the clocks).
    f.on_event(clock.at(4_000), 0, interval(6, 3));
    assert_eq!(sends(&drain(&mut f)), vec![(0, Command::Stop)]);
    assert_eq!(failure(&f, 0), Some("reported second 6 only 3.0s into the run"));
    let run = f.finish();
    assert!(run.workers[0].partial.is_none(), "nothing it said is used");
    assert!(run.workers[0].seconds.is_empty());
}

#[test]
fn a_second_that_goes_backwards_is_distrusted() {
    let (mut f, clock) = started(vec![local()], TIMED, None);
    f.on_event(clock.at(3_000), 0, interval(2, 1));
    f.on_event(clock.at(3_100), 0, interval(1, 1));
    assert_eq!(sends(&drain(&mut f)), vec![(0, Command::Stop)]);
    assert_eq!(failure(&f, 0), Some("reported second 1 after second 2"));
}

#[test]
fn counts_beyond_the_shard_budget_are_distrusted() {
    let (mut f, clock) = started(vec![member(true, Some(10))], Stop::Requests(10), None);
    f.on_event(clock.at(2_000), 0, interval(1, 6));
    f.on_event(clock.at(3_000), 0, interval(2, 5));
    assert_eq!(sends(&drain(&mut f)), vec![(0, Command::Stop)]);
    assert_eq!(failure(&f, 0), Some("reported 11 requests done for a shard of 10"));
    assert!(f.finish().workers[0].partial.is_none());
}

#[test]
fn final_counts_below_what_the_intervals_said_are_distrusted() {
    let (mut f, clock) = started(vec![local()], TIMED, None);
    f.on_event(clock.at(2_000), 0, interval(1, 8));
    f.on_event(clock.at(11_500), 0, finished(5));
    assert_eq!(sends(&drain(&mut f)), vec![(0, Command::Stop)]);
    assert_eq!(failure(&f, 0), Some("its final counts (5 requests) are below what its intervals said (8)"));
    assert!(f.run.workers[0].outcome.is_none());
}

#[test]
fn two_workers_silent_in_the_same_interval_are_both_failed_and_stopped() {
    let (mut f, clock) = started(vec![local(), local(), local()], TIMED, None);
    f.on_event(clock.at(2_000), 2, interval(1, 2));
    f.on_tick(clock.at(6_000));
    let actions = drain(&mut f);
    assert_eq!(sends(&actions), vec![(0, Command::Stop), (1, Command::Stop)]);
    assert_eq!(seconds(&actions), vec![(1, 2, 1)]);
    assert_eq!(failure(&f, 0), Some("sent nothing for 5s"));
    assert_eq!(failure(&f, 1), Some("sent nothing for 5s"));
    assert!(!f.is_done());
}

#[test]
fn two_workers_lying_about_the_same_second_are_both_failed_and_the_third_carries_it() {
    let (mut f, clock) =
        started(vec![member(false, Some(5)), member(false, Some(5)), member(false, Some(5))], Stop::Requests(15), None);
    f.on_event(clock.at(2_000), 0, interval(1, 6));
    f.on_event(clock.at(2_000), 1, interval(1, 7));
    f.on_event(clock.at(2_000), 2, interval(1, 4));
    let actions = drain(&mut f);
    assert_eq!(sends(&actions), vec![(0, Command::Stop), (1, Command::Stop)]);
    assert_eq!(seconds(&actions), vec![(1, 4, 1)]);
    assert_eq!(failure(&f, 1), Some("reported 7 requests done for a shard of 5"));
}

#[test]
fn ctrl_c_before_the_start_stops_everyone_and_no_start_is_ever_sent() {
    let (mut f, clock) = fleet(vec![local(), local()], TIMED, None);
    f.on_event(clock.at(400), 0, ready());
    f.interrupt(clock.at(500));
    let mut actions = drain(&mut f);
    assert_eq!(sends(&actions), vec![(0, Command::Stop), (1, Command::Stop)]);
    assert!(f.run.interrupted);
    f.on_event(clock.at(600), 1, ready());
    f.on_tick(clock.at(700));
    // Stopped before it started: that is its result, not an early end.
    f.on_event(clock.at(800), 0, outcome(0, true, None));
    f.on_tick(clock.after(Duration::from_millis(500) + STOP_GRACE));
    actions.extend(drain(&mut f));
    assert!(starts(&actions).is_empty());
    assert!(!sends(&actions).iter().any(|(_, c)| matches!(c, Command::Start { .. })));
    assert!(f.run.workers[0].outcome.is_some());
    assert_eq!(failure(&f, 1), Some("no result within 3s of the stop"));
    assert!(f.is_done());
}

#[test]
fn ctrl_c_while_running_waits_the_stop_grace_then_gives_up_with_no_result_within() {
    let (mut f, clock) = started(vec![local(), local()], TIMED, None);
    f.interrupt(clock.at(5_000));
    assert_eq!(sends(&drain(&mut f)), vec![(0, Command::Stop), (1, Command::Stop)]);
    f.interrupt(clock.at(5_100));
    // Silent since the start at 1 s, but told to stop: only the grace counts now.
    f.on_tick(clock.at(7_000));
    assert!(drain(&mut f).is_empty(), "Ctrl-C is taken once, and nobody is failed for silence");
    f.on_event(clock.at(7_500), 0, outcome(3, true, None));
    let grace = Duration::from_secs(5) + STOP_GRACE;
    f.on_tick(clock.after(grace - Duration::from_nanos(1)));
    assert!(!f.is_done());
    f.on_tick(clock.after(grace));
    assert!(sends(&drain(&mut f)).is_empty(), "already told to stop");
    assert_eq!(failure(&f, 1), Some("no result within 3s of the stop"));
    assert!(f.is_done());
    let run = f.finish();
    assert!(run.interrupted);
    assert!(run.workers[0].outcome.is_some());
}

#[test]
fn a_worker_that_ends_early_unasked_is_failed_with_its_reason() {
    let (mut f, clock) = started(vec![local(), local()], TIMED, None);
    f.on_event(clock.at(3_000), 0, outcome(2, true, Some("the daemon was signalled\n(SIGTERM)")));
    f.on_event(clock.at(3_000), 1, outcome(2, true, None));
    assert!(sends(&drain(&mut f)).is_empty(), "they have already stopped");
    assert_eq!(failure(&f, 0), Some("ended early: the daemon was signalled\\n(SIGTERM)"));
    assert_eq!(
        failure(&f, 1),
        Some("ended early: it stopped before its end without being asked to (it did not say why)")
    );
    assert!(f.is_done());
    assert!(!f.finish().interrupted, "a worker's own stop is not the run's Ctrl-C");
}

#[test]
fn a_finished_worker_is_kept_with_its_outcome_and_the_run_is_done_when_every_worker_is() {
    let (mut f, clock) = started(vec![local(), local()], TIMED, None);
    f.on_event(clock.at(2_000), 0, interval(1, 5));
    f.on_event(clock.at(11_200), 0, finished(5));
    assert!(!f.is_done());
    f.on_event(clock.at(11_300), 1, finished(0));
    let actions = drain(&mut f);
    assert!(f.is_done());
    assert_eq!(seconds(&actions), vec![(1, 5, 1)]);
    let run = f.finish();
    let kept = run.workers[0].outcome.as_ref().expect("its outcome");
    assert_eq!(kept.stats.counters.ok, 5);
    assert_eq!(kept.error_samples[0].1, "reset\\nby peer", "printed on one line");
    assert!(run.workers.iter().all(|w| w.failure.is_none()));
}

#[test]
fn links_that_end_fail_every_worker_still_awaited() {
    let (mut f, clock) = started(vec![local(), local()], TIMED, None);
    f.on_event(clock.at(11_200), 0, finished(0));
    f.links_ended();
    assert!(f.is_done());
    assert!(sends(&drain(&mut f)).is_empty());
    assert_eq!(failure(&f, 0), None);
    assert_eq!(failure(&f, 1), Some("the worker's link ended without a result"));
}

#[test]
fn a_merged_second_is_given_out_once_every_live_worker_reported_it() {
    let (mut f, clock) = started(vec![local(), local()], TIMED, None);
    f.on_event(clock.at(2_000), 0, interval(1, 10));
    assert!(seconds(&drain(&mut f)).is_empty(), "worker 1 has not reported second 1");
    f.on_event(clock.at(2_100), 1, interval(1, 5));
    f.on_event(clock.at(3_000), 1, interval(2, 7));
    f.on_event(clock.at(3_100), 0, interval(2, 1));
    f.on_event(clock.at(4_000), 0, interval(3, 2));
    assert_eq!(seconds(&drain(&mut f)), vec![(1, 15, 2), (2, 8, 2)]);
    assert_eq!(f.run.intervals.iter().map(|s| s.ok).collect::<Vec<_>>(), vec![15, 8]);
}

#[test]
fn a_failed_worker_no_longer_holds_seconds_back_and_keeps_what_it_said() {
    let (mut f, clock) = started(vec![remote(), remote()], TIMED, None);
    f.on_event(clock.at(2_100), 0, interval(1, 3));
    f.on_event(clock.at(2_100), 1, interval(1, 1));
    f.on_event(clock.at(3_100), 0, interval(2, 4));
    f.on_event(clock.at(4_100), 0, interval(3, 5));
    assert_eq!(seconds(&drain(&mut f)), vec![(1, 4, 2)]);
    f.on_event(clock.at(4_200), 1, LinkEvent::Worker(Event::Failed("connection reset\u{1b}[2J".into())));
    assert_eq!(seconds(&drain(&mut f)), vec![(2, 4, 1), (3, 5, 1)]);
    assert_eq!(failure(&f, 1), Some("connection reset\\u{1b}[2J"));
    // Nothing it sends once failed is taken.
    f.on_event(clock.at(4_300), 1, interval(2, 100));
    assert!(drain(&mut f).is_empty());
    let run = f.finish();
    let lost = &run.workers[1];
    assert_eq!(lost.partial.as_ref().map(|s| s.counters.ok), Some(1));
    assert_eq!((lost.reported_seconds, lost.seconds.len()), (1, 1));
    assert_eq!(run.workers[0].partial.as_ref().map(|s| s.counters.ok), Some(12));
}

#[test]
fn the_in_process_worker_keeps_no_sum_of_its_own() {
    let (mut f, clock) = started(vec![local()], TIMED, None);
    f.on_event(clock.at(2_000), 0, interval(1, 3));
    f.links_ended();
    let run = f.finish();
    assert!(run.workers[0].partial.is_none());
    assert!(run.workers[0].seconds.is_empty());
    assert_eq!(run.workers[0].reported_seconds, 1);
    assert_eq!(run.intervals.len(), 1, "the run's own series has it");
}

#[test]
fn an_abort_on_fail_breach_stops_every_worker_and_is_not_an_interrupt() {
    let mut watch = Watch::new(&[Threshold::parse("errors<1").expect("a threshold")], Duration::ZERO, &[]);
    let (mut f, clock) = started(vec![local(), local()], TIMED, Some(&mut watch));
    f.on_event(clock.at(2_000), 0, interval(1, 3));
    assert!(sends(&drain(&mut f)).is_empty());
    let mut failing = stats(2);
    failing.counters.add_errors(ErrorKind::Timeout, 1);
    f.on_event(clock.at(2_100), 1, LinkEvent::Worker(Event::Interval { second: 1, delta: failing }));
    assert_eq!(sends(&drain(&mut f)), vec![(0, Command::Stop), (1, Command::Stop)]);
    // Asked to stop by us: their interrupted results are results.
    f.on_event(clock.at(2_500), 0, outcome(3, true, None));
    f.on_event(clock.at(2_500), 1, outcome(3, true, None));
    assert!(f.is_done());
    let run = f.finish();
    assert!(!run.interrupted);
    assert!(run.workers.iter().all(|w| w.outcome.is_some()));
    assert_eq!(watch.breach().map(|b| b.threshold), Some("errors<1".to_string()));
}

#[test]
fn the_warm_up_is_neither_judged_nor_counted_against_the_budget() {
    let mut watch = Watch::new(&[Threshold::parse("errors<1").expect("a threshold")], Duration::ZERO, &[]);
    let base = Instant::now();
    let clock = Clock { base };
    let mut profile = Profile::default();
    profile.warm_up_seconds = 1;
    let mut f = Fleet::new(base, Stop::Requests(5), CONNECT, profile, vec![member(true, Some(5))], Some(&mut watch));
    f.on_event(clock.at(1_000), 0, ready());
    f.on_tick(clock.at(1_000));
    drain(&mut f);
    let mut warm = stats(9);
    warm.counters.add_errors(ErrorKind::Timeout, 1);
    f.on_event(clock.at(2_000), 0, LinkEvent::Worker(Event::Interval { second: 1, delta: warm }));
    f.on_event(clock.at(3_000), 0, interval(2, 5));
    assert!(sends(&drain(&mut f)).is_empty(), "ten in the warm-up, then five of five");
    let run = f.finish();
    assert_eq!(run.workers[0].partial_warm_up.as_ref().map(|s| s.counters.ok), Some(9));
    assert_eq!(run.workers[0].partial.as_ref().map(|s| s.counters.ok), Some(5));
    assert!(watch.breach().is_none());
}

/// `event` as a remote worker's link hands it over: in its wire form.
fn encoded(event: LinkEvent) -> LinkEvent {
    let LinkEvent::Worker(event) = event else { panic!("a worker's event") };
    LinkEvent::Encoded(Box::new(Encoded {
        message: volley_worker::wire::event_to_proto(event),
        bounds: Default::default(),
    }))
}

/// `ok` responses spread over a few latencies, different per worker: merges that lose or
/// double a sample show in the percentiles.
fn varied(worker: usize, ok: u64) -> Stats {
    let mut s = Stats::new();
    s.counters.ok = ok;
    for k in 0..ok {
        let v = 1_000_000 + (worker as u64 * 7_919 + k * 104_729) % 40_000_000;
        s.histograms.latency.record(v).expect("in range");
    }
    s
}

#[test]
fn summarised_workers_go_into_the_runs_totals_as_they_come_and_keep_a_digest_only() {
    let workers = DETAILED_WORKERS + 3;
    let (mut f, clock) = started((0..workers).map(|_| remote()).collect(), TIMED, None);
    let mut truth = Stats::new();
    for i in 0..workers {
        let first = varied(i, 5 + i as u64 % 7);
        truth.merge(&first);
        f.on_event(clock.at(2_100), i, encoded(LinkEvent::Worker(Event::Interval { second: 1, delta: first.clone() })));
        // The last worker is lost after its first second; the others finish.
        if i + 1 == workers {
            f.on_event(clock.at(2_200), i, LinkEvent::Worker(Event::Failed("gone".into())));
            continue;
        }
        let mut all = first;
        let second = varied(i + 1_000, 9);
        all.merge(&second);
        truth.merge(&second);
        let LinkEvent::Worker(Event::Finished(mut outcome)) = finished(0) else { unreachable!() };
        outcome.stats = all;
        f.on_event(clock.at(3_100), i, encoded(LinkEvent::Worker(Event::Finished(outcome))));
    }
    assert!(f.is_done());
    let run = f.finish();
    let detailed = &run.workers[..DETAILED_WORKERS];
    assert!(detailed.iter().all(|w| w.outcome.is_some() && w.summarised.is_none()));
    let summarised = &run.workers[DETAILED_WORKERS..];
    assert!(summarised.iter().all(|w| w.outcome.is_none() && w.partial.is_none()));
    let digests: Vec<_> = summarised.iter().map(|w| w.summarised.as_ref().expect("a digest")).collect();
    assert!(digests[..2].iter().all(|d| d.ended.is_some()), "finished");
    assert!(digests[2].ended.is_none(), "lost: its intervals' sum");
    assert_eq!(digests[2].digest.counters.ok, 5 + (workers as u64 - 1) % 7);

    // Every worker's part, detailed or summarised, finished or lost, is in the totals once.
    let mut merged = run.apart.as_ref().expect("summarised workers' statistics").stats.clone();
    for w in detailed {
        merged.merge(&w.outcome.as_ref().expect("finished").stats);
    }
    assert_eq!(merged.counters.ok, truth.counters.ok);
    let (m, t) = (&merged.histograms.latency, &truth.histograms.latency);
    assert_eq!(volley_engine::encode_histogram(m), volley_engine::encode_histogram(t));
    assert_eq!((m.len(), m.min(), m.max()), (t.len(), t.min(), t.max()));
}

#[test]
fn an_encoded_event_is_taken_as_decoded_and_an_unreadable_one_fails_and_stops_its_worker() {
    let (mut f, clock) = started(vec![remote(), remote()], TIMED, None);
    f.on_event(clock.at(2_100), 0, encoded(interval(1, 3)));
    let mut bad = volley_worker::wire::event_to_proto(Event::Interval { second: 1, delta: stats(1) });
    if let Some(volley_proto::v1::run_event::Event::Interval(i)) = &mut bad.event {
        i.delta.as_mut().expect("a delta").latency = vec![1, 2, 3];
    }
    f.on_event(clock.at(2_100), 1, LinkEvent::Encoded(Box::new(Encoded { message: bad, bounds: Default::default() })));
    let actions = drain(&mut f);
    assert_eq!(sends(&actions), vec![(1, Command::Stop)]);
    assert_eq!(seconds(&actions), vec![(1, 3, 1)]);
    assert!(failure(&f, 1).is_some_and(|why| why.starts_with("unreadable event")), "{:?}", failure(&f, 1));
}
