//! The connection ramp with made-up profiles and instants: where each connection opens and
//! closes, the rounding, a ramp down to 0, and parts of a split adding up exactly.

use super::*;
use crate::test_rng::Rng;

fn s(secs: f64, target: u64) -> Stage {
    Stage { duration: Duration::from_secs_f64(secs), target }
}

fn ms(ms: f64) -> Duration {
    Duration::from_secs_f64(ms / 1000.0)
}

/// Every instant the open count of `ramp` changes, in order, with the count from then on.
fn changes(ramp: &ConnectionRamp) -> Vec<(Duration, usize)> {
    let mut out = Vec::new();
    let mut at = Duration::ZERO;
    while let Some(next) = ramp.next_change(at) {
        assert!(next > at, "a change after {at:?} must be later: {next:?}");
        let open = ramp.open_at(next);
        // A nanosecond early (rounding) is allowed: asked again, it answers the real one.
        if open != ramp.open_at(at) {
            out.push((next, open));
        }
        at = next;
        assert!(out.len() < 100_000, "runaway");
    }
    out
}

/// Part `i` of `parts` of `c` connections, as `Plan::split` shares them.
fn share(c: u64, parts: usize, i: usize) -> usize {
    (c / parts as u64 + u64::from((i as u64) < c % parts as u64)) as usize
}

#[test]
fn a_ramp_up_and_down_opens_each_connection_half_a_step_in_and_closes_it_half_a_step_early() {
    // 0 → 8 over 1 s, 8 for 1 s, 8 → 0 over 1 s.
    let stages = [s(1.0, 8), s(1.0, 8), s(1.0, 0)];
    let ramp = ConnectionRamp::new(&stages, ConnectionIndices::WHOLE, 8);
    assert_eq!(ramp.open_at(Duration::ZERO), 0, "a ramp from 0 starts with nothing open");
    assert_eq!(ramp.open_at(ms(62.5)), 0, "at exactly ½ the first is not open yet");
    assert_eq!(ramp.open_at(ms(62.6)), 1);
    assert_eq!(ramp.open_at(ms(500.0)), 4);
    assert_eq!(ramp.open_at(ms(1500.0)), 8);
    assert_eq!(ramp.open_at(ms(2500.0)), 4);
    assert_eq!(ramp.open_at(ms(2937.5)), 0, "the last closes half a step before the end");
    assert_eq!(ramp.open_at(ms(2937.4)), 1);
    assert_eq!(ramp.open_at(ms(3000.0)), 0);
    assert_eq!(ramp.open_at(ms(10_000.0)), 0, "after the stages, the last target");
    let got = changes(&ramp);
    let up = (0..8).map(|j| (ms((j as f64 + 0.5) * 125.0), j + 1));
    let down = (0..8).map(|k| (ms(2000.0 + (k as f64 + 0.5) * 125.0), 7 - k));
    let want: Vec<(Duration, usize)> = up.chain(down).collect();
    assert_eq!(got.len(), want.len(), "{got:?}");
    for ((at, open), (want_at, want_open)) in got.iter().zip(&want) {
        assert_eq!(open, want_open);
        assert!(at.abs_diff(*want_at) <= Duration::from_nanos(2), "{at:?} against {want_at:?}");
    }
    assert_eq!(ramp.next_change(ms(2999.0)), None, "nothing changes once all are closed");
}

#[test]
fn the_count_is_the_ramp_rounded_to_the_nearest_whole() {
    // 0 → 3 over 1 s: 3t is above ½, 1½, 2½ from 1/6, 1/2, 5/6 s.
    let ramp = ConnectionRamp::new(&[s(1.0, 3)], ConnectionIndices::WHOLE, 3);
    for (at, want) in [(160.0, 0), (170.0, 1), (490.0, 1), (510.0, 2), (830.0, 2), (840.0, 3), (1000.0, 3)] {
        assert_eq!(ramp.open_at(ms(at)), want, "at {at} ms");
        assert_eq!(connections_at(&[s(1.0, 3)], ConnectionIndices::WHOLE, 3, ms(at)), want as u64);
    }
    // A stage that starts above 0 after a flat one, and one that goes down but not to 0.
    let ramp = ConnectionRamp::new(&[s(1.0, 4), s(2.0, 10), s(1.0, 6)], ConnectionIndices::WHOLE, 10);
    assert_eq!(ramp.open_at(ms(1000.0)), 4);
    assert_eq!(ramp.open_at(ms(2000.0)), 7);
    assert_eq!(ramp.open_at(ms(3000.0)), 10);
    assert_eq!(ramp.open_at(ms(3500.0)), 8);
    assert_eq!(ramp.open_at(ms(9000.0)), 6, "held at the last target after the stages");
    assert_eq!(ramp.next_change(ms(4000.0)), None);
}

#[test]
fn fewer_connections_than_the_ramp_asks_cap_the_count() {
    let ramp = ConnectionRamp::new(&[s(1.0, 10)], ConnectionIndices::WHOLE, 4);
    assert_eq!(ramp.open_at(ms(1000.0)), 4);
    assert_eq!(changes(&ramp).len(), 4);
}

#[test]
fn parts_of_a_split_add_up_to_the_whole_count_at_every_instant() {
    let mut rng = Rng(3);
    for _ in 0..300 {
        let stages: Vec<Stage> = (0..1 + rng.below(5))
            .map(|_| Stage {
                duration: Duration::from_millis(1 + rng.below(3000) as u64),
                target: rng.below(60) as u64,
            })
            .collect();
        let peak = stages.iter().map(|s| s.target).max().unwrap_or(0);
        let c = peak.max(1) + rng.below(3) as u64;
        let workers = 1 + rng.below(4);
        // Over workers, then each over threads, as a distributed run splits it.
        let mut parts: Vec<ConnectionRamp> = Vec::new();
        for w in 0..workers {
            let wc = share(c, workers, w) as u64;
            let wi = ConnectionIndices::WHOLE.part(w, workers);
            let threads = 1 + rng.below(4);
            for t in 0..threads {
                parts.push(ConnectionRamp::new(&stages, wi.part(t, threads), share(wc, threads, t)));
            }
        }
        let whole = ConnectionRamp::new(&stages, ConnectionIndices::WHOLE, c as usize);
        let end: Duration = stages.iter().map(|s| s.duration).sum();
        // Made-up instants, and every instant a part's count changes (and a nanosecond either
        // side), where a rounding difference between parts would show.
        let mut instants: Vec<Duration> =
            (0..50).map(|_| Duration::from_nanos(rng.below(end.as_nanos() as usize + 1) as u64)).collect();
        for part in &parts {
            for (at, _) in changes(part) {
                instants.extend([at - Duration::from_nanos(1), at, at + Duration::from_nanos(1)]);
            }
        }
        for at in instants {
            let sum: usize = parts.iter().map(|p| p.open_at(at)).sum();
            assert_eq!(sum, whole.open_at(at), "at {at:?} of {stages:?} over {workers} workers");
            assert_eq!(sum as u64, connections_at(&stages, ConnectionIndices::WHOLE, peak as usize, at).min(c));
        }
    }
}

#[test]
fn a_part_opens_its_own_connections_first_to_last_as_the_whole_count_passes_them() {
    // Connections 1, 4, 7 of 9 (part 1 of 3); the whole ramps 0 → 9 over 9 s.
    let part = ConnectionRamp::new(&[s(9.0, 9)], ConnectionIndices::WHOLE.part(1, 3), 3);
    let got = changes(&part);
    let opened: Vec<(u64, usize)> = got.iter().map(|(at, open)| (at.as_millis() as u64, *open)).collect();
    assert_eq!(opened, vec![(1500, 1), (4500, 2), (7500, 3)]);
}
