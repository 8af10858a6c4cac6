//! What a worker's reports must satisfy to be believed. A worker is another machine, perhaps
//! broken, perhaps hostile: its seconds must come in order and not before their time, its
//! counts must fit the shard it was given, and its histograms must hold as many samples as its
//! counters say. A worker whose report fails a check is failed and none of its numbers are used.

use std::time::Duration;

use volley_engine::{Counters, Plan, Stats, Stop};

/// A second can only be reported once it is over; this much is allowed for the error of the
/// clock estimate (at most half a round trip) and the start skew, with room to spare.
pub(crate) const AHEAD_SLACK: Duration = Duration::from_secs(2);

/// Why a worker's report cannot be believed; the text is the failure the report shows.
#[derive(Debug, PartialEq, thiserror::Error)]
pub(crate) enum Implausible {
    #[error("reported second {second} before the run started")]
    BeforeStart { second: u32 },
    #[error("reported second {second} after second {last}")]
    OutOfOrder { second: u32, last: u32 },
    #[error("reported second {second} only {elapsed:.1}s into the run")]
    Ahead { second: u32, elapsed: f64 },
    #[error("reported {done} requests done for a shard of {budget}")]
    OverBudget { done: u64, budget: u64 },
    #[error("its latency histogram holds {samples} samples but it counts {ok} ok requests")]
    Latency { samples: u64, ok: u64 },
    #[error("its service-time histogram holds {samples} samples but it counts {ok} ok requests")]
    Service { samples: u64, ok: u64 },
    #[error("its connect histogram holds {samples} samples but it counts {connects} connections")]
    Connect { samples: u64, connects: u64 },
    #[error("its latency histogram of name {index} holds {samples} samples but it counts {ok} ok requests of it")]
    NameLatency { index: usize, samples: u64, ok: u64 },
    #[error("it counts {counted} checks of name {index}, which has {has}")]
    UnknownChecks { index: usize, counted: usize, has: usize },
    #[error("it counts {checked} responses checked by check {check} of name {index} but {ok} ok requests of it")]
    NameChecks { index: usize, check: usize, checked: u64, ok: u64 },
    #[error("its final counts ({done} requests) are below what its intervals said ({said})")]
    FinalBelowIntervals { done: u64, said: u64 },
}

/// The most requests a worker running `shard` may report done: its `-n`, none for a duration.
/// With scenarios `-n` counts iterations, each of up to the longest scenario's steps and the
/// redirects they may follow.
pub(crate) fn budget(shard: &Plan) -> Option<u64> {
    let Stop::Requests(n) = shard.stop else { return None };
    let per_unit = shard.requests.mix().map_or(1, |m| m.most_requests_per_iteration());
    Some(n.saturating_mul(per_unit))
}

/// Requests a report accounts for: ok, errors and aborted, each taking one unit of a budget.
pub(crate) fn done(c: &Counters) -> u64 {
    c.total().saturating_add(c.aborted)
}

/// An interval for `second` from a worker whose last was `last`, `elapsed` into the run (None:
/// not started).
pub(crate) fn second(second: u32, last: u32, elapsed: Option<Duration>) -> Result<(), Implausible> {
    if second <= last {
        return Err(Implausible::OutOfOrder { second, last });
    }
    let elapsed = elapsed.ok_or(Implausible::BeforeStart { second })?;
    if Duration::from_secs(u64::from(second)) > elapsed + AHEAD_SLACK {
        return Err(Implausible::Ahead { second, elapsed: elapsed.as_secs_f64() });
    }
    Ok(())
}

/// `stats` agree with themselves, with `budget` requests when the shard counts requests
/// (`already` being what earlier reports of the same worker took of it), and with the mix's
/// `checks` (how many each name has).
pub(crate) fn counts(stats: &Stats, already: u64, budget: Option<u64>, checks: &[usize]) -> Result<(), Implausible> {
    let (c, h) = (&stats.counters, &stats.histograms);
    if h.latency.len() != c.ok {
        return Err(Implausible::Latency { samples: h.latency.len(), ok: c.ok });
    }
    // Service time is measured in the open model only: for every ok request, or for none.
    if !h.service.is_empty() && h.service.len() != c.ok {
        return Err(Implausible::Service { samples: h.service.len(), ok: c.ok });
    }
    if h.connect.len() != c.connects {
        return Err(Implausible::Connect { samples: h.connect.len(), connects: c.connects });
    }
    // Each name of a mix by the same rule: its percentiles are reported beside the run's.
    if let Some((index, name)) = stats.names.iter().find(|(_, n)| n.latency.len() != n.counters.ok) {
        return Err(Implausible::NameLatency { index, samples: name.latency.len(), ok: name.counters.ok });
    }
    // A check judges responses of its name: at most one verdict for each.
    for (index, name) in stats.names.iter() {
        let has = checks.get(index).copied().unwrap_or(0);
        if name.checks.len() > has {
            return Err(Implausible::UnknownChecks { index, counted: name.checks.len(), has });
        }
        if let Some((check, c)) = name.checks.iter().enumerate().find(|(_, c)| c.total() > name.counters.ok) {
            return Err(Implausible::NameChecks { index, check, checked: c.total(), ok: name.counters.ok });
        }
    }
    let done = done(c).saturating_add(already);
    match budget {
        Some(budget) if done > budget => Err(Implausible::OverBudget { done, budget }),
        _ => Ok(()),
    }
}

/// A worker's final statistics: consistent, within its budget, and covering what its intervals
/// said (`said_done` requests, `said_ok` of them ok).
pub(crate) fn finished(
    stats: &Stats,
    said_done: u64,
    said_ok: u64,
    budget: Option<u64>,
    checks: &[usize],
) -> Result<(), Implausible> {
    counts(stats, 0, budget, checks)?;
    let done = done(&stats.counters);
    if done < said_done || stats.counters.ok < said_ok {
        return Err(Implausible::FinalBelowIntervals { done, said: said_done });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use volley_engine::{ErrorKind, Stats};

    use super::*;

    fn stats(ok: u64, errors: u64) -> Stats {
        let mut s = Stats::new();
        s.counters.ok = ok;
        s.counters.add_errors(ErrorKind::Reset, errors);
        s.histograms.latency.record_n(1_000_000, ok).unwrap();
        s
    }

    #[test]
    fn seconds_come_in_order_and_not_before_their_time() {
        let at = |s: f64| Some(Duration::from_secs_f64(s));
        assert_eq!(second(1, 0, at(1.01)), Ok(()));
        assert_eq!(second(3, 1, at(1.5)), Ok(()), "within the slack");
        assert_eq!(second(2, 2, at(9.0)), Err(Implausible::OutOfOrder { second: 2, last: 2 }));
        assert_eq!(second(1, 2, at(9.0)), Err(Implausible::OutOfOrder { second: 1, last: 2 }));
        assert!(matches!(second(4, 0, at(1.0)), Err(Implausible::Ahead { second: 4, .. })));
        assert!(matches!(second(u32::MAX, 0, at(1.0)), Err(Implausible::Ahead { .. })));
        assert_eq!(second(1, 0, None), Err(Implausible::BeforeStart { second: 1 }));
    }

    #[test]
    fn a_shards_budget_is_its_requests_or_with_scenarios_its_iterations_of_the_longest() {
        use volley_engine::{Mix, NamedRequest, Order, RequestSpec, Requests, Scenario, Target};
        let target = Target::parse("http://a/").unwrap();
        let mut plan = Plan::new(target, RequestSpec::new("GET", vec![], vec![]), 1, Stop::Requests(10));
        assert_eq!(budget(&plan), Some(10));
        let request = NamedRequest {
            name: "n".into(),
            path_and_query: "/".into(),
            spec: RequestSpec::new("GET", vec![], vec![]),
            templated: false,
            checks: vec![],
            extract: vec![],
            think: None,
            cookies: false,
            follow_redirects: 0,
        };
        let scenario = |name: &str, steps| Scenario { name: name.into(), weight: 1, steps, pacing: None };
        plan.requests = Requests::Mix(Mix {
            requests: vec![request; 4],
            order: Order::Scenarios { scenarios: vec![scenario("a", 1), scenario("b", 3)], seed: 0 },
        });
        assert_eq!(budget(&plan), Some(30), "10 iterations of up to 3 steps");
        plan.stop = Stop::Duration(Duration::from_secs(1));
        assert_eq!(budget(&plan), None);
    }

    #[test]
    fn counts_fit_the_shard_and_the_histograms() {
        assert_eq!(counts(&stats(15, 5), 0, Some(20), &[]), Ok(()));
        assert_eq!(counts(&stats(15, 5), 1, Some(20), &[]), Err(Implausible::OverBudget { done: 21, budget: 20 }));
        assert_eq!(counts(&stats(15, 5), 0, None, &[]), Ok(()));
        let mut lie = stats(10, 0);
        lie.counters.ok = u64::MAX;
        assert!(matches!(counts(&lie, 0, None, &[]), Err(Implausible::Latency { .. })));
        let mut lie = stats(0, 0);
        lie.counters.add_errors(ErrorKind::Tls, u64::MAX);
        lie.counters.aborted = u64::MAX;
        assert_eq!(counts(&lie, 0, Some(20), &[]), Err(Implausible::OverBudget { done: u64::MAX, budget: 20 }));
        let mut lie = stats(1, 0);
        lie.counters.connects = 3;
        assert!(matches!(counts(&lie, 0, None, &[]), Err(Implausible::Connect { samples: 0, connects: 3 })));
        let mut open = stats(4, 0);
        open.histograms.service.record_n(500_000, 4).unwrap();
        assert_eq!(counts(&open, 0, None, &[]), Ok(()), "service time for every ok request");
        open.histograms.service.record(1).unwrap();
        assert_eq!(counts(&open, 0, None, &[]), Err(Implausible::Service { samples: 5, ok: 4 }));
    }

    #[test]
    fn each_names_latency_histogram_holds_as_many_samples_as_its_ok_requests() {
        let mut mix = stats(3, 1);
        let name = mix.names.entry(2);
        name.counters.ok = 3;
        name.latency.record_n(1_000_000, 3).unwrap();
        mix.names.entry(0).counters.add_errors(ErrorKind::Reset, 1);
        assert_eq!(counts(&mix, 0, None, &[]), Ok(()), "a name with errors only has no latency");
        mix.names.entry(2).counters.ok = 4;
        assert_eq!(counts(&mix, 0, None, &[]), Err(Implausible::NameLatency { index: 2, samples: 3, ok: 4 }));
    }

    #[test]
    fn a_names_checks_judge_at_most_its_ok_responses() {
        let mut mix = stats(3, 0);
        let name = mix.names.entry(1);
        name.counters.ok = 3;
        name.latency.record_n(1_000_000, 3).unwrap();
        name.check(0).passed = 3;
        name.check(1).passed = 1;
        name.check(1).failed = 2;
        let shape = [0, 2];
        assert_eq!(counts(&mix, 0, None, &shape), Ok(()));
        assert_eq!(counts(&mix, 0, None, &[0, 1]), Err(Implausible::UnknownChecks { index: 1, counted: 2, has: 1 }));
        assert_eq!(counts(&mix, 0, None, &[]), Err(Implausible::UnknownChecks { index: 1, counted: 2, has: 0 }));
        mix.names.entry(1).check(1).failed = 3;
        assert_eq!(
            counts(&mix, 0, None, &shape),
            Err(Implausible::NameChecks { index: 1, check: 1, checked: 4, ok: 3 })
        );
        // A total past what 64 bits hold is no way around it.
        *mix.names.entry(1).check(1) = volley_engine::CheckCounts { passed: u64::MAX, failed: 1 };
        assert!(matches!(counts(&mix, 0, None, &shape), Err(Implausible::NameChecks { .. })));
    }

    #[test]
    fn final_counts_cover_the_intervals() {
        assert_eq!(finished(&stats(20, 0), 12, 12, Some(20), &[]), Ok(()));
        assert_eq!(
            finished(&stats(10, 0), 12, 12, Some(20), &[]),
            Err(Implausible::FinalBelowIntervals { done: 10, said: 12 })
        );
        assert_eq!(
            finished(&stats(10, 2), 12, 11, None, &[]),
            Err(Implausible::FinalBelowIntervals { done: 12, said: 12 })
        );
        assert_eq!(finished(&stats(10, 0), 0, 0, None, &[]), Ok(()));
    }
}
