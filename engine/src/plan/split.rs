//! Splitting one plan into parts whose totals are exactly the plan's: over workers (the
//! controller) and over one engine's threads (the engine), by the same rule.

use std::ops::Range;
use std::time::Duration;

use super::{Load, Mix, Plan, Rate, Requests, Stage, Stop};
use crate::feeder::{Feeder, FeederMode};

impl Plan {
    /// This plan as `parts` plans (workers, or one engine's threads) that add up to exactly it:
    /// connections spread evenly (the remainder to the first parts); a request budget in
    /// proportion to each part's connections (largest remainders first, and every part at least
    /// one when there are as many requests as parts); a duration unchanged. A rate is split
    /// like a request budget, in whole requests per second adding up to exactly the rate, and
    /// the budget then follows the rates, so that every part ends at about the same time; part
    /// `i` is staggered by `i` of the whole rate's spacings, so the parts' requests interleave
    /// (split again over threads, the whole run's requests stay evenly spaced). Stages' targets
    /// split like the rate, and parts interleave by their stage phase instead of a stagger. A
    /// part runs on at most as many threads as it has connections, or requests per second (at
    /// its peak).
    ///
    /// Connections interleave by index (part i takes every `parts`-th, from the i-th: exactly
    /// its even share), so that a ramp of the connection count opens the same ones everywhere
    /// and the parts' open connections add up to the whole's count at every instant.
    ///
    /// A shard feeder's rows split like the budget (each part a consecutive run of them), so
    /// that every row is some part's and no two parts share one; other feeders' rows are every
    /// part's.
    ///
    /// With a rate below `parts`, the last parts get none (and no budget): callers split a rate
    /// over at most as many parts as it has requests per second.
    pub fn split(&self, parts: usize) -> Vec<Plan> {
        if parts == 0 {
            return Vec::new();
        }
        let connections: Vec<u64> = (0..parts).map(|i| even_share(self.connections as u64, parts, i)).collect();
        let loads = self.load.split(&connections);
        let rates: Option<Vec<u64>> = match &self.load {
            Load::Open { .. } => Some(loads.iter().map(|l| l.start_rate()).collect()),
            Load::Closed { .. } => None,
        };
        let weights = rates.as_deref().unwrap_or(&connections);
        let budgets = match self.stop {
            Stop::Requests(n) => Some(proportional(n, weights)),
            Stop::Duration(_) => None,
        };
        let rows: Vec<Vec<Range<usize>>> = self.feeders.iter().map(|f| f.shares(weights)).collect();
        loads
            .into_iter()
            .enumerate()
            .map(|(i, load)| {
                let mut part = self.clone();
                part.connections = connections[i] as usize;
                part.load = load;
                part.threads = part.threads_for(self.threads);
                if let Some(b) = &budgets {
                    part.stop = Stop::Requests(b[i]);
                }
                for (feeder, rows) in part.feeders.iter_mut().zip(&rows) {
                    feeder.rows = rows[i].clone();
                }
                if let Requests::Mix(Mix { order, .. }) = &mut part.requests
                    && let Some(seed) = order.seed_mut()
                {
                    // Each part draws its own sequence (split again, each of its parts too).
                    *seed = part_seed(*seed, i);
                }
                part
            })
            .collect()
    }
}

impl Feeder {
    /// Its rows for parts of `weights`: a shard feeder's in proportion, consecutive; the
    /// others' all of them, every part.
    fn shares(&self, weights: &[u64]) -> Vec<Range<usize>> {
        if self.mode != FeederMode::Shard {
            return vec![self.rows.clone(); weights.len()];
        }
        let mut start = self.rows.start;
        proportional(self.rows.len() as u64, weights)
            .into_iter()
            .map(|n| {
                let rows = start..start + n as usize;
                start = rows.end;
                rows
            })
            .collect()
    }
}

/// The seed of part `i` of a plan seeded with `seed`: distinct for every part, and the same
/// for the same plan.
fn part_seed(seed: u64, i: usize) -> u64 {
    let mut z = seed ^ (i as u64 + 1).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z ^ (z >> 27)
}

impl Load {
    /// This load over parts with `connections` each. A closed model's ramp is the whole run's
    /// in every part, each part opening its own connections. A rate and each stage's target
    /// split in proportion to the connections; a constant rate's parts are staggered by the
    /// whole's spacing, stages' parts interleave by their phase.
    fn split(&self, connections: &[u64]) -> Vec<Load> {
        let parts = connections.len();
        match self {
            Load::Closed { ramp, indices } => {
                (0..parts).map(|i| Load::Closed { ramp: ramp.clone(), indices: indices.part(i, parts) }).collect()
            }
            Load::Open { rate, stages, phase, indices } => {
                let rates = proportional(rate.per_second, connections);
                // Each stage's target splits like the rate, so at every instant the parts' rates
                // add up to the whole's (a sum of linear ramps is the linear ramp of the sums).
                let targets: Vec<Vec<u64>> = stages.iter().map(|s| proportional(s.target, connections)).collect();
                let spacing = 1e9 / rate.per_second.max(1) as f64;
                (0..parts)
                    .map(|i| {
                        // Stages interleave their parts by phase instead (`Load::Open::phase`).
                        let stagger = if stages.is_empty() {
                            Duration::from_nanos((spacing * i as f64) as u64)
                        } else {
                            Duration::ZERO
                        };
                        Load::Open {
                            rate: Rate { per_second: rates[i], offset: rate.offset + stagger },
                            stages: stages.iter().zip(&targets).map(|(s, t)| Stage { target: t[i], ..*s }).collect(),
                            phase: (phase + i as f64) / parts as f64,
                            indices: indices.part(i, parts),
                        }
                    })
                    .collect()
            }
        }
    }

    /// The open model's requests per second at the start (0 for the closed model).
    fn start_rate(&self) -> u64 {
        match self {
            Load::Open { rate, .. } => rate.per_second,
            Load::Closed { .. } => 0,
        }
    }
}

/// Part `index`'s share of `total` split evenly over `parts`: the remainder goes to the first
/// ones, so the shares add up to exactly `total`.
fn even_share(total: u64, parts: usize, index: usize) -> u64 {
    let parts = parts as u64;
    total / parts + u64::from((index as u64) < total % parts)
}

/// `total` in proportion to `weights`, adding up to exactly `total`; every part gets at least one
/// when `total` allows it.
fn proportional(total: u64, weights: &[u64]) -> Vec<u64> {
    let sum: u64 = weights.iter().sum();
    if sum == 0 {
        return (0..weights.len()).map(|i| even_share(total, weights.len(), i)).collect();
    }
    let exact: Vec<u128> = weights.iter().map(|w| u128::from(total) * u128::from(*w)).collect();
    let mut parts: Vec<u64> = exact.iter().map(|e| (e / u128::from(sum)) as u64).collect();
    let mut order: Vec<usize> = (0..weights.len()).collect();
    // Largest remainder first; ties to the earlier part.
    order.sort_by_key(|&i| std::cmp::Reverse(exact[i] % u128::from(sum)));
    let mut left = total - parts.iter().sum::<u64>();
    for &i in order.iter().cycle() {
        if left == 0 {
            break;
        }
        parts[i] += 1;
        left -= 1;
    }
    if total >= weights.len() as u64 {
        // A part with nothing would be an empty shard; take one from the largest.
        for i in 0..parts.len() {
            if parts[i] == 0 {
                let max = (0..parts.len()).max_by_key(|&j| parts[j]).unwrap_or(0);
                parts[max] -= 1;
                parts[i] += 1;
            }
        }
    }
    parts
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::plan::{ConnectionIndices, RequestSpec};
    use crate::target::Target;
    use crate::test_rng::Rng;

    fn plan(connections: usize, stop: Stop) -> Plan {
        let mut plan = Plan::new(
            Target::parse("http://127.0.0.1:1/").expect("valid URL"),
            RequestSpec::new("GET", vec![], vec![]),
            connections,
            stop,
        );
        plan.threads = 4;
        plan
    }

    fn rate(plan: &Plan) -> Rate {
        match &plan.load {
            Load::Open { rate, .. } => *rate,
            Load::Closed { .. } => panic!("a rate"),
        }
    }

    fn phase(plan: &Plan) -> f64 {
        match &plan.load {
            Load::Open { phase, .. } => *phase,
            Load::Closed { .. } => panic!("a rate"),
        }
    }

    fn budgets(parts: &[Plan]) -> Vec<u64> {
        parts
            .iter()
            .map(|s| match s.stop {
                Stop::Requests(n) => n,
                Stop::Duration(_) => 0,
            })
            .collect()
    }

    #[test]
    fn connections_and_requests_add_up_to_what_was_asked() {
        for (c, n, k) in [(50, 200, 2), (5, 7, 2), (7, 1000, 3), (3, 3, 3), (100, 101, 7), (10, 1_000_003, 4)] {
            let parts = plan(c, Stop::Requests(n)).split(k);
            assert_eq!(parts.len(), k);
            assert_eq!(parts.iter().map(|s| s.connections).sum::<usize>(), c);
            assert_eq!(budgets(&parts).iter().sum::<u64>(), n, "c={c} n={n} k={k}");
            assert!(budgets(&parts).iter().all(|b| *b >= 1));
            assert!(parts.iter().all(|s| s.threads <= s.connections));
        }
    }

    #[test]
    fn random_splits_add_up_and_stay_even() {
        let mut rng = Rng(7);
        for _ in 0..2000 {
            let k = 1 + rng.below(16);
            let c = k + rng.below(500);
            let n = rng.below(100_000) as u64;
            let parts = plan(c, Stop::Requests(n)).split(k);
            assert_eq!(parts.iter().map(|s| s.connections).sum::<usize>(), c);
            assert_eq!(budgets(&parts).iter().sum::<u64>(), n, "c={c} n={n} k={k}");
            let conns: Vec<usize> = parts.iter().map(|p| p.connections).collect();
            assert!(conns.iter().max().unwrap() - conns.iter().min().unwrap() <= 1, "{conns:?}");
            if n >= k as u64 {
                assert!(budgets(&parts).iter().all(|b| *b >= 1), "c={c} n={n} k={k}");
            }
        }
    }

    #[test]
    fn budgets_follow_the_connections() {
        let parts = plan(3, Stop::Requests(300)).split(2);
        assert_eq!(parts.iter().map(|s| s.connections).collect::<Vec<_>>(), vec![2, 1]);
        assert_eq!(budgets(&parts), vec![200, 100]);
    }

    #[test]
    fn fewer_requests_than_parts_leaves_the_last_parts_without_any() {
        let parts = plan(4, Stop::Requests(2)).split(4);
        assert_eq!(budgets(&parts), vec![1, 1, 0, 0]);
    }

    #[test]
    fn rates_split_into_whole_requests_per_second_that_add_up_and_budgets_follow_them() {
        let mut rng = Rng(11);
        for _ in 0..2000 {
            let k = 1 + rng.below(16);
            let c = k + rng.below(500);
            let r = k as u64 + rng.below(100_000) as u64;
            let n = rng.below(100_000) as u64;
            let mut whole = plan(c, Stop::Requests(n));
            whole.load = Load::rate(r);
            let parts = whole.split(k);
            let rates: Vec<u64> = parts.iter().map(|p| rate(p).per_second).collect();
            assert_eq!(rates.iter().sum::<u64>(), r, "c={c} r={r} k={k}");
            assert!(rates.iter().all(|r| *r >= 1), "{rates:?}");
            assert_eq!(budgets(&parts).iter().sum::<u64>(), n);
            // A part's budget is its share of the rate's, to within one request.
            for (b, share) in budgets(&parts).iter().zip(&rates) {
                let exact = n as f64 * *share as f64 / r as f64;
                assert!((*b as f64 - exact).abs() <= 1.0, "budget {b} for {share}/{r} of {n}");
            }
            assert!(parts.iter().all(|p| p.threads as u64 <= rate(p).per_second));
        }
    }

    #[test]
    fn split_rates_are_staggered_so_that_every_request_of_the_whole_is_evenly_spaced() {
        let mut whole = plan(12, Stop::Duration(Duration::from_secs(1)));
        whole.load = Load::rate(1200);
        // Over 3 workers, then each over 4 threads, as a distributed run splits it.
        let mut due: Vec<u64> = Vec::new();
        for worker in whole.split(3) {
            for thread in worker.split(4) {
                let rate = rate(&thread);
                assert_eq!(rate.per_second, 100);
                let offset = rate.offset.as_nanos() as u64;
                due.extend((0..100).map(|k| offset + k * 10_000_000));
            }
        }
        due.sort_unstable();
        // 1200 requests a second: one every 833,333 ns, give or take the nanoseconds of rounding.
        for pair in due.windows(2) {
            let gap = pair[1] - pair[0];
            assert!((833_331..=833_336).contains(&gap), "gap {gap} ns");
        }
    }

    #[test]
    fn every_stage_target_splits_into_parts_that_add_up_to_it() {
        let mut rng = Rng(5);
        for _ in 0..500 {
            let k = 1 + rng.below(8);
            let c = k + rng.below(100);
            let mut whole = plan(c, Stop::Duration(Duration::from_secs(3)));
            let from = rng.below(50) as u64;
            let stages = (0..1 + rng.below(5))
                .map(|_| Stage {
                    duration: Duration::from_millis(1 + rng.below(5000) as u64),
                    target: rng.below(10_000) as u64,
                })
                .collect();
            whole.load = Load::staged_rate(from, stages);
            whole.threads = 4.min(c);
            let parts = whole.split(k);
            for (j, stage) in whole.load.stages().iter().enumerate() {
                let sum: u64 = parts.iter().map(|p| p.load.stages()[j].target).sum();
                assert_eq!(sum, stage.target, "stage {j} over {k} parts");
                assert!(parts.iter().all(|p| p.load.stages()[j].duration == stage.duration));
            }
            let start: u64 = parts.iter().map(|p| rate(p).per_second).sum();
            assert_eq!(start, from);
            // A part runs on no more threads than its highest rate has requests a second.
            assert!(parts.iter().all(|p| p.threads as u64 <= p.peak_rate().unwrap().max(1)));
        }
        // Stages interleave their parts by phase, not by a time offset; split again over
        // threads, every part of the whole has a phase of its own.
        let mut whole = plan(12, Stop::Duration(Duration::from_secs(2)));
        whole.load = Load::staged_rate(0, vec![Stage { duration: Duration::from_secs(2), target: 1200 }]);
        let mut phases: Vec<f64> = Vec::new();
        for worker in whole.split(3) {
            assert_eq!(rate(&worker).offset, Duration::ZERO);
            phases.extend(worker.split(4).iter().map(phase));
        }
        phases.sort_by(f64::total_cmp);
        let want: Vec<f64> = (0..12).map(|i| (i as f64 + 0.5) / 12.0).collect();
        for (got, want) in phases.iter().zip(&want) {
            assert!((got - want).abs() < 1e-12, "{phases:?}");
        }
        // A profile starting at 0 still gets threads: its peak is what it must carry.
        let mut whole = plan(8, Stop::Duration(Duration::from_secs(2)));
        whole.load = Load::staged_rate(0, vec![Stage { duration: Duration::from_secs(2), target: 800 }]);
        assert!(whole.split(2).iter().all(|p| p.threads == 4 && p.load.stages()[0].target == 400));
    }

    #[test]
    fn a_connection_ramp_keeps_the_whole_stages_and_every_connection_belongs_to_one_part() {
        let mut rng = Rng(13);
        for _ in 0..300 {
            let c = 1 + rng.below(200);
            let mut whole = plan(c, Stop::Duration(Duration::from_secs(3)));
            whole.load = Load::ramp(vec![Stage { duration: Duration::from_secs(3), target: c as u64 }]);
            let workers = 1 + rng.below(c.min(8));
            let mut seen = vec![0u32; c];
            for worker in whole.split(workers) {
                assert_eq!(worker.load.stages(), whole.load.stages(), "a closed ramp's stages are the whole run's");
                for thread in worker.split(1 + rng.below(4)) {
                    let Load::Closed { indices: ConnectionIndices { first, step }, .. } = thread.load else {
                        panic!("a ramp stays closed");
                    };
                    for m in 0..thread.connections as u64 {
                        seen[(first + step * m) as usize] += 1;
                    }
                }
            }
            assert!(seen.iter().all(|n| *n == 1), "c={c} over {workers} workers: {seen:?}");
        }
    }

    #[test]
    fn timed_runs_keep_their_duration() {
        let parts = plan(4, Stop::Duration(Duration::from_secs(3))).split(2);
        assert!(parts.iter().all(|s| s.stop == Stop::Duration(Duration::from_secs(3))));
    }
}
