//! The schedule with made-up instants: no clock, no sockets.

use std::time::{Duration, Instant};

use super::*;

fn ms(t0: Instant, ms: u64) -> Instant {
    t0 + Duration::from_millis(ms)
}

fn us(t0: Instant, us: u64) -> Instant {
    t0 + Duration::from_micros(us)
}

/// Takes requests at `now` for free connections until the schedule gives none.
fn take_all(s: &mut Schedule, now: Instant) -> Vec<Take> {
    let mut out = Vec::new();
    loop {
        match s.take(now, &mut false) {
            t @ (Take::Now | Take::Due(_)) => out.push(t),
            _ => return out,
        }
    }
}

#[test]
fn a_closed_budget_hands_out_exactly_its_requests_due_at_once() {
    let t0 = Instant::now();
    let mut s = Schedule::closed(Some(3));
    assert!(s.claim(), "a connection opens for the first");
    let mut claimed = true;
    assert_eq!(s.take(t0, &mut claimed), Take::Now);
    assert!(!claimed, "the connection's own request is used first");
    assert_eq!(take_all(&mut s, t0).len(), 2);
    assert!(s.is_spent());
    assert_eq!(s.take(t0, &mut false), Take::Spent);
    assert_eq!(s.next_due(), None, "the closed model never asks to be woken");
}

#[test]
fn a_closed_schedule_without_a_budget_runs_until_stopped() {
    let t0 = Instant::now();
    let mut s = Schedule::closed(None);
    assert_eq!(take_all_bounded(&mut s, t0, 10_000), 10_000);
    s.stop();
    assert_eq!(s.take(t0, &mut false), Take::Spent);
}

fn take_all_bounded(s: &mut Schedule, now: Instant, most: usize) -> usize {
    (0..most).take_while(|_| matches!(s.take(now, &mut false), Take::Now | Take::Due(_))).count()
}

#[test]
fn given_back_requests_are_sent_again_and_the_total_stays_exact() {
    let t0 = Instant::now();
    let mut s = Schedule::closed(Some(5));
    assert_eq!(take_all(&mut s, t0).len(), 5);
    s.give_back(2);
    assert!(!s.is_spent());
    assert_eq!(take_all(&mut s, t0).len(), 2);
    // A claim that a closing connection never used comes back too; one that failed does not.
    assert!(!s.claim());
    s.give_back(2);
    assert!(s.claim() && s.claim());
    s.return_claim();
    s.drop_claim();
    assert_eq!(take_all(&mut s, t0).len(), 1);
    assert!(s.is_spent());
}

#[test]
fn nothing_is_due_before_the_start() {
    let t0 = Instant::now();
    let mut s = Schedule::open(None, Rate::per_second(1000));
    assert_eq!(s.take(t0, &mut false), Take::NotYet);
    assert_eq!(s.next_due(), None);
    s.start(ms(t0, 5));
    assert_eq!(s.next_due(), Some(ms(t0, 5)));
    assert_eq!(s.take(ms(t0, 4), &mut false), Take::NotYet);
    assert_eq!(s.take(ms(t0, 5), &mut false), Take::Due(ms(t0, 5)));
}

#[test]
fn an_open_schedule_spaces_its_requests_evenly_whatever_the_rate() {
    for rate in [1u64, 3, 7, 1000, 33_333, 1_000_000] {
        let t0 = Instant::now();
        let mut s = Schedule::open(None, Rate::per_second(rate));
        s.start(t0);
        let mut due = Vec::new();
        while due.len() < 2000.min(rate as usize * 2 + 1) {
            // A connection free exactly when each request is due.
            let now = s.next_due().expect("a next request");
            match s.take(now, &mut false) {
                Take::Due(d) => due.push(d),
                other => panic!("{other:?} at its own due instant"),
            }
        }
        let spacing = 1e9 / rate as f64;
        for (k, d) in due.iter().enumerate() {
            // Each instant is the exact slot to the nanosecond, however many came before: no
            // rounding error accumulates.
            let exact = k as f64 * spacing;
            let at = d.duration_since(t0).as_nanos() as f64;
            assert!((at - exact).abs() < 1.0, "rate {rate}: slot {k} at {at} ns, not {exact}");
        }
    }
}

#[test]
fn the_spacing_is_the_time_between_the_next_two_requests_due() {
    let t0 = Instant::now();
    let mut closed = Schedule::closed(None);
    assert_eq!(closed.spacing(), None, "the closed model has no pace");
    let mut s = Schedule::open(Some(3), Rate::per_second(10_000));
    assert_eq!(s.spacing(), None, "nothing is due before the start");
    s.start(t0);
    assert_eq!(s.spacing(), Some(Duration::from_micros(100)));
    assert_eq!(take_all(&mut s, us(t0, 100)).len(), 2);
    assert_eq!(s.spacing(), None, "the next request due is the last");
}

#[test]
fn a_second_at_a_rate_holds_exactly_that_many_requests_with_remainders_spread() {
    // 7 per second: slots at 0, 142857142, 285714285, ... ns; one second (exclusive) holds 7.
    let t0 = Instant::now();
    let mut s = Schedule::open(None, Rate::per_second(7));
    s.start(t0);
    let mut in_first_second = 0;
    loop {
        let due = s.next_due().unwrap();
        if due >= t0 + Duration::from_secs(1) {
            break;
        }
        assert!(matches!(s.take(due, &mut false), Take::Due(_)));
        in_first_second += 1;
    }
    assert_eq!(in_first_second, 7);
}

#[test]
fn a_late_request_keeps_its_due_instant_and_the_backlog_goes_out_at_once() {
    let t0 = Instant::now();
    let mut s = Schedule::open(None, Rate::per_second(1000));
    s.start(t0);
    assert_eq!(s.take(t0, &mut false), Take::Due(t0));
    // Nothing free for 10 ms: slots 1..=10 are due by then, and each keeps its own instant.
    let late = take_all(&mut s, ms(t0, 10));
    assert_eq!(late, (1..=10).map(|k| Take::Due(ms(t0, k))).collect::<Vec<_>>());
    assert_eq!(s.take(ms(t0, 10), &mut false), Take::NotYet);
    assert_eq!(s.next_due(), Some(ms(t0, 11)));
}

#[test]
fn a_stagger_delays_the_first_request_and_keeps_the_spacing() {
    let t0 = Instant::now();
    let mut s = Schedule::open(None, Rate { per_second: 100, offset: Duration::from_millis(3) });
    s.start(t0);
    assert_eq!(s.take(ms(t0, 2), &mut false), Take::NotYet);
    assert_eq!(take_all(&mut s, ms(t0, 23)), vec![Take::Due(ms(t0, 3)), Take::Due(ms(t0, 13)), Take::Due(ms(t0, 23))]);
}

#[test]
fn an_open_budget_is_exact_and_given_back_requests_take_later_slots() {
    let t0 = Instant::now();
    let mut s = Schedule::open(Some(4), Rate::per_second(1000));
    s.start(t0);
    assert_eq!(take_all(&mut s, ms(t0, 1)).len(), 2);
    s.give_back(1);
    // Three left: the pace goes on from slot 2, it does not go back.
    assert_eq!(take_all(&mut s, ms(t0, 100)), vec![Take::Due(ms(t0, 2)), Take::Due(ms(t0, 3)), Take::Due(ms(t0, 4))]);
    assert_eq!(s.take(ms(t0, 100), &mut false), Take::Spent);
    assert_eq!(s.next_due(), None, "nothing left to wake for");
}

#[test]
fn a_claimed_request_waits_for_its_slot() {
    let t0 = Instant::now();
    let mut s = Schedule::open(Some(2), Rate::per_second(10));
    assert!(s.claim() && s.claim());
    s.start(t0);
    let (mut a, mut b) = (true, true);
    assert_eq!(s.take(t0, &mut a), Take::Due(t0));
    assert!(!a);
    assert_eq!(s.take(ms(t0, 50), &mut b), Take::NotYet);
    assert!(b, "a connection keeps its claim until its request is due");
    assert_eq!(s.next_due(), Some(ms(t0, 100)), "the held claim is still to be sent");
    assert_eq!(s.take(ms(t0, 100), &mut b), Take::Due(ms(t0, 100)));
    assert_eq!(s.next_due(), None);
}

#[test]
fn once_every_request_is_claimed_a_connection_without_one_is_told_so_rather_than_to_wait() {
    let t0 = Instant::now();
    let mut s = Schedule::open(Some(2), Rate::per_second(10));
    let mut held = s.claim();
    s.start(t0);
    assert_eq!(s.take(t0, &mut false), Take::Due(t0));
    // The last request is held by another connection, due at 100 ms: this one can close.
    assert_eq!(s.take(ms(t0, 1), &mut false), Take::Spent);
    assert_eq!(s.take(ms(t0, 1), &mut held), Take::NotYet);
}

#[test]
fn requests_found_due_with_no_connection_free_are_counted_once_each() {
    let t0 = Instant::now();
    let mut s = Schedule::open(None, Rate::per_second(1000));
    s.start(t0);
    assert_eq!(s.take(t0, &mut false), Take::Due(t0));
    // Slots 1..=5 due by 5 ms, nothing free: 5. Looked at again at 7 ms: 2 more.
    assert_eq!(s.mark_blocked(us(t0, 5_500)), 5);
    assert_eq!(s.mark_blocked(us(t0, 5_900)), 0);
    assert_eq!(s.mark_blocked(ms(t0, 7)), 2);
    // A connection frees and takes the backlog; those taken are not counted again.
    assert_eq!(take_all(&mut s, ms(t0, 7)).len(), 7);
    assert_eq!(s.mark_blocked(ms(t0, 7)), 0);
    assert_eq!(s.mark_blocked(us(t0, 8_000)), 1);
}

#[test]
fn blocked_and_overdue_counts_stop_at_the_budget() {
    let t0 = Instant::now();
    let mut s = Schedule::open(Some(3), Rate::per_second(1000));
    s.start(t0);
    assert_eq!(s.take(t0, &mut false), Take::Due(t0));
    // 2 requests left, however many slots have passed.
    assert_eq!(s.overdue(ms(t0, 50)), 2);
    assert_eq!(s.mark_blocked(ms(t0, 50)), 2);
    assert_eq!(s.mark_blocked(ms(t0, 60)), 0);
}

#[test]
fn requests_due_when_a_timed_run_ends_and_never_sent_are_overdue() {
    let t0 = Instant::now();
    let mut s = Schedule::open(None, Rate::per_second(100));
    s.start(t0);
    assert_eq!(take_all(&mut s, ms(t0, 500)).len(), 51);
    // The last 100 ms found no connection free: slots at 510..=600 ms were never sent.
    assert_eq!(s.overdue(ms(t0, 600)), 10);
    assert_eq!(Schedule::closed(None).overdue(ms(t0, 600)), 0);
}

#[test]
fn a_stopped_open_schedule_hands_out_nothing_more() {
    let t0 = Instant::now();
    let mut s = Schedule::open(None, Rate::per_second(1000));
    s.start(t0);
    s.stop();
    assert_eq!(s.take(ms(t0, 10), &mut false), Take::Spent);
    assert_eq!(s.next_due(), None);
}

fn stages(list: &[(u64, u64)]) -> Vec<Stage> {
    list.iter().map(|&(ms, target)| Stage { duration: Duration::from_millis(ms), target }).collect()
}

/// Takes every request of a schedule at its own due instant, as a connection always free would.
fn dues_of(s: &mut Schedule, t0: Instant) -> Vec<Duration> {
    let mut out = Vec::new();
    while let Some(due) = s.next_due() {
        assert_eq!(s.take(due, &mut false), Take::Due(due));
        out.push(due.duration_since(t0));
        assert!(out.len() <= 100_000, "a bounded profile ends");
    }
    out
}

#[test]
fn stages_ramp_the_rate_and_each_stage_sends_its_integral() {
    let t0 = Instant::now();
    // From 0: up to 200/s over 1 s (100 requests), up to 600/s (400), down to 0 (300).
    let mut s = Schedule::staged(None, Rate::per_second(0), &stages(&[(1000, 200), (1000, 600), (1000, 0)]), 0.5);
    s.start(t0);
    let dues = dues_of(&mut s, t0);
    assert_eq!(dues.len(), 800, "the stages' total");
    let in_second =
        |i: u64| dues.iter().filter(|d| **d > Duration::from_secs(i) && **d <= Duration::from_secs(i + 1)).count();
    assert_eq!((in_second(0), in_second(1), in_second(2)), (100, 400, 300));
    for pair in dues.windows(2) {
        assert!(pair[0] <= pair[1], "due instants go forward: {pair:?}");
    }
    // The first ramp is t²: a quarter of its requests by half-way, the first not at once.
    assert_eq!(dues.iter().filter(|d| **d <= Duration::from_millis(500)).count(), 25);
    assert!(dues[0] > Duration::from_millis(50), "a ramp from 0 starts slowly: {:?}", dues[0]);
    assert_eq!(s.take(t0 + Duration::from_secs(10), &mut false), Take::Spent, "nothing after the last stage");
    assert!(!s.claim(), "no connection is opened for a profile that has ended");
}

#[test]
fn a_stage_at_zero_idles_and_the_load_comes_back_after_it() {
    let t0 = Instant::now();
    // 100/s held for 1 s, down to 0 at once, nothing for 1 s, back to 100/s.
    let mut s =
        Schedule::staged(None, Rate::per_second(100), &stages(&[(1000, 100), (1, 0), (1000, 0), (1000, 100)]), 0.5);
    s.start(t0);
    let dues = dues_of(&mut s, t0);
    let idle = dues.iter().filter(|d| **d > Duration::from_millis(1001) && **d <= Duration::from_millis(2001)).count();
    assert_eq!(idle, 0, "nothing is due while the rate is 0");
    assert_eq!(dues.len(), 100 + 50, "a flat second of 100 and a ramp up to 100");
    // While it idles, a free connection is told to wait (not to close): more comes later.
    let mut s =
        Schedule::staged(None, Rate::per_second(100), &stages(&[(1000, 100), (1, 0), (1000, 0), (1000, 100)]), 0.5);
    s.start(t0);
    while s.next_due().is_some_and(|d| d <= t0 + Duration::from_millis(1500)) {
        let due = s.next_due().unwrap();
        s.take(due, &mut false);
    }
    assert_eq!(s.take(t0 + Duration::from_millis(1500), &mut false), Take::NotYet);
    assert!(s.next_due().is_some_and(|d| d > t0 + Duration::from_millis(2001)));
}

#[test]
fn stages_count_blocked_and_overdue_requests_by_the_ramp() {
    let t0 = Instant::now();
    let mut s = Schedule::staged(None, Rate::per_second(0), &stages(&[(1000, 200)]), 0.5);
    s.start(t0);
    // 25 requests due by 500 ms, none taken: all blocked, all overdue; never more than 100.
    assert_eq!(s.mark_blocked(ms(t0, 500)), 25);
    assert_eq!(s.overdue(ms(t0, 500)), 25);
    assert_eq!(s.overdue(ms(t0, 5000)), 100);
}

#[test]
fn a_budget_deferred_past_the_warm_up_counts_only_what_comes_after_it() {
    let t0 = Instant::now();
    let mut s = Schedule::closed(Some(10));
    s.defer_budget();
    // The warm-up sends 50 (far beyond the budget); 45 of them are answered by its end, 5
    // are still in flight, and a connection being opened holds a claim.
    assert_eq!(take_all_bounded(&mut s, t0, 50), 50);
    assert!(s.claim());
    s.end_warm_up(45);
    // What comes after: the 5 in flight, the claim, and 4 more make the budget of 10.
    assert_eq!(take_all(&mut s, t0).len(), 4);
    assert!(s.is_spent());
    // Requests given back during the warm-up were never counted, and do not change that.
    let mut s = Schedule::closed(Some(10));
    s.defer_budget();
    assert_eq!(take_all_bounded(&mut s, t0, 20), 20);
    s.give_back(3);
    s.end_warm_up(17);
    assert_eq!(take_all(&mut s, t0).len(), 10);
    // Without a budget (a timed run) there is nothing to defer.
    let mut s = Schedule::closed(None);
    s.defer_budget();
    s.end_warm_up(0);
    assert_eq!(take_all_bounded(&mut s, t0, 1000), 1000);
}

/// A timed run of 3 s at 1000/s, started at `t0`.
fn three_seconds_at_1000(t0: Instant) -> Schedule {
    let mut s = Schedule::open(None, Rate::per_second(1000));
    s.start(t0);
    s.end_at(ms(t0, 3000));
    s
}

#[test]
fn a_timed_run_has_rate_times_duration_slots_and_none_at_or_after_its_end() {
    let t0 = Instant::now();
    let mut s = three_seconds_at_1000(t0);
    // Woken well after the end, the loop finds exactly the slots before it: 0 ms to 2999 ms.
    let late = ms(t0, 3005);
    assert_eq!(take_all(&mut s, late).len(), 3000);
    assert_eq!(s.next_due(), None, "the slot at the end instant is not part of the run");
    assert_eq!(s.take(late, &mut false), Take::Spent);
    assert_eq!(s.overdue(late), 0);
}

#[test]
fn slots_before_the_end_that_were_never_taken_are_overdue_and_later_ones_are_not() {
    let t0 = Instant::now();
    let mut s = three_seconds_at_1000(t0);
    assert_eq!(take_all(&mut s, us(t0, 2_997_500)).len(), 2998);
    assert_eq!(s.overdue(ms(t0, 3010)), 2, "2998 ms and 2999 ms");
}

#[test]
fn has_more_says_whether_a_connection_may_still_get_a_request() {
    let mut s = Schedule::closed(Some(1));
    assert!(s.has_more(false));
    assert!(s.claim());
    assert!(s.has_more(true) && !s.has_more(false), "the last request is the claimed one");
    s.drop_claim();
    assert!(!s.has_more(false), "spent");
    s.give_back(1);
    assert!(s.has_more(false), "a refused request came back");
    let mut timed = Schedule::closed(None);
    assert!(timed.has_more(false));
    timed.stop();
    assert!(!timed.has_more(false));
}
