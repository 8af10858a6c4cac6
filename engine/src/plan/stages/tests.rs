//! The rate curve's arithmetic with made-up profiles: totals per stage, due instants in order
//! and where the integral puts them.

use super::*;

fn s(secs: f64, target: u64) -> Stage {
    Stage { duration: Duration::from_secs_f64(secs), target }
}

fn secs(d: Duration) -> f64 {
    d.as_secs_f64()
}

/// Every due instant of `curve`, in order.
fn all_dues(curve: &Curve) -> Vec<Duration> {
    let mut hint = 0;
    (0..curve.total()).map(|k| curve.due(k, &mut hint).expect("within the total")).collect()
}

#[test]
fn each_stage_sends_the_integral_of_its_ramp() {
    // 0 → 1000 over 30 s, → 5000 over 60 s, → 0 over 30 s: 15,000 + 180,000 + 75,000.
    let stages = [s(30.0, 1000), s(60.0, 5000), s(30.0, 0)];
    let curve = Curve::new(0, &stages, 0.5);
    assert_eq!(curve.total(), 270_000);
    assert_eq!(curve.due_by(Duration::from_secs(30)), 15_000);
    assert_eq!(curve.due_by(Duration::from_secs(90)), 195_000);
    assert_eq!(curve.due_by(Duration::from_secs(120)), 270_000);
    assert_eq!(curve.due_by(Duration::from_secs(500)), 270_000, "nothing is due after the last stage");
    // Half-way up the first ramp a quarter of its requests are due (t²).
    assert_eq!(curve.due_by(Duration::from_secs(15)), 3_750);
}

#[test]
fn the_first_stage_starts_from_the_starting_rate() {
    // 100/s → 300/s over 2 s: 400 requests; held flat at 300 for 1 s: 300 more.
    let curve = Curve::new(100, &[s(2.0, 300), s(1.0, 300)], 0.5);
    assert_eq!(curve.total(), 700);
    assert_eq!(curve.due_by(Duration::from_secs(1)), 150);
    // A flat rate is evenly spaced: request k at (k + ½)/R.
    let flat = Curve::new(200, &[s(1.0, 200)], 0.5);
    let dues = all_dues(&flat);
    assert_eq!(dues.len(), 200);
    for (k, due) in dues.iter().enumerate() {
        let want = (k as f64 + 0.5) / 200.0;
        assert!((secs(*due) - want).abs() < 1e-9, "request {k} due at {due:?}, not {want}");
    }
}

#[test]
fn due_instants_never_go_back_and_agree_with_the_count() {
    let stages = [s(1.0, 200), s(1.0, 600), s(1.0, 0), s(0.5, 0), s(2.0, 1000), s(0.25, 7)];
    let curve = Curve::new(0, &stages, 0.5);
    let dues = all_dues(&curve);
    for pair in dues.windows(2) {
        assert!(pair[0] <= pair[1], "{pair:?}");
    }
    // By its own due instant, request k is due; a little before, it is not yet.
    for (k, due) in dues.iter().enumerate() {
        assert!(curve.due_by(*due) > k as u64, "request {k} at {due:?}");
        if let Some(before) = due.checked_sub(Duration::from_micros(10)) {
            assert!(curve.due_by(before) <= k as u64, "request {k} due early");
        }
    }
    assert_eq!(curve.due(curve.total(), &mut 0), None, "the curve ends");
    // A stage at 0 after a ramp down: nothing is due during it.
    let idle_from = Duration::from_secs(3);
    let idle_to = Duration::from_secs_f64(3.5);
    assert_eq!(curve.due_by(idle_to) - curve.due_by(idle_from), 0);
    assert!(dues.iter().all(|d| *d <= idle_from || *d > idle_to));
}

#[test]
fn requests_ramp_as_the_rate_does_second_by_second() {
    // 1s:200, 1s:600, 1s:0 from 0: 100, 400, 300.
    let stages = [s(1.0, 200), s(1.0, 600), s(1.0, 0)];
    let per_second: Vec<u64> = (0..3)
        .map(|i| requested_between(0, &stages, 0.5, Duration::from_secs(i), Duration::from_secs(i + 1)))
        .collect();
    assert_eq!(per_second, vec![100, 400, 300]);
    assert_eq!(requested_between(250, &[], 0.5, Duration::ZERO, Duration::from_secs(2)), 500);
    assert_eq!(stage_at(&stages, Duration::from_millis(999)), Some(1));
    assert_eq!(stage_at(&stages, Duration::from_secs(1)), Some(2));
    assert_eq!(stage_at(&stages, Duration::from_secs(3)), None);
}

#[test]
fn asking_out_of_order_still_finds_the_right_instant() {
    let curve = Curve::new(0, &[s(1.0, 100), s(1.0, 100), s(1.0, 300)], 0.5);
    let dues = all_dues(&curve);
    let mut hint = 2;
    assert_eq!(curve.due(3, &mut hint), Some(dues[3]));
    assert_eq!(curve.due(200, &mut hint), Some(dues[200]));
    assert_eq!(curve.due(10, &mut hint), Some(dues[10]));
}

#[test]
fn parts_with_their_phases_interleave_evenly_on_a_ramp_and_add_up() {
    // 0 → 1000/s over 2 s (1000 requests) in 4 equal parts, each with its phase (i + ½)/4.
    let whole = Curve::new(0, &[s(2.0, 1000)], 0.5);
    let mut dues: Vec<Duration> = Vec::new();
    let mut total = 0;
    for i in 0..4 {
        let part = Curve::new(0, &[s(2.0, 250)], (0.5 + i as f64) / 4.0);
        total += part.total();
        dues.extend(all_dues(&part));
    }
    assert_eq!(total, whole.total());
    dues.sort_unstable();
    // Merged, they are the whole's own due instants, to the nanosecond's rounding.
    for (k, (part, own)) in dues.iter().zip(all_dues(&whole)).enumerate() {
        assert!(part.abs_diff(own) <= Duration::from_nanos(2), "request {k}: {part:?} against {own:?}");
    }
}
