//! One step of the search judged: what it measured (kept small, since a search holds every
//! step while a report holds histograms per second) and whether it held every SLO and the
//! cadence: in a rate search, 99% of the rate sent; in a search of paced users, 99% of the
//! slots that came due started.

use std::time::Duration;

use super::searched::Searched;
use crate::gate::{self, Threshold, Verdict};
use crate::report::{KEPT_RATE, Report};

/// How a step ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum StepOutcome {
    /// Every SLO and the cadence held.
    Held,
    Failed,
    /// Ctrl-C stopped it: not judged.
    Interrupted,
    /// A worker failed during it: not judged, and the search stops.
    Incomplete,
}

#[derive(Debug, Clone)]
pub(crate) struct Step {
    pub searched: Searched,
    /// Requests per second asked for, or paced users.
    pub level: u64,
    /// Requests sent per second of the step; with paced users, iterations started.
    pub achieved: f64,
    /// With paced users: the iterations started, those that started late, the slots missed.
    pub iterations: Option<Iterations>,
    pub duration: Duration,
    pub ok: u64,
    pub errors: u64,
    /// Failed requests over all requests (HTTP statuses are not failures).
    pub error_rate: Option<f64>,
    /// Responses with a 5xx status over all requests.
    pub status_5xx_rate: Option<f64>,
    /// Latency from due, in seconds.
    pub p50: Option<f64>,
    pub p99: Option<f64>,
    /// Requests that were due while no connection was free.
    pub blocked: u64,
    pub slos: Vec<Verdict>,
    /// achieved / rate, or with paced users the share of the slots due that started; the step
    /// holds the cadence at [`KEPT_RATE`] or above.
    pub cadence: f64,
    pub outcome: StepOutcome,
    /// Why a run went wrong beyond its SLOs (a worker failed, nothing succeeded), for people.
    pub note: Option<String>,
}

/// A step's iterations of paced users, over all its scenarios.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct Iterations {
    pub started: u64,
    /// Started over a millisecond after their slot: in the latency from the slot, which the
    /// SLOs judge, and reported; the cadence is judged on the slots missed.
    pub late: u64,
    /// Slots that came due by the step's end and that their users, behind, had not started.
    pub missed: u64,
}

impl Iterations {
    fn of(report: &Report) -> Iterations {
        report.stats.scenarios.iter().fold(Iterations::default(), |sum, (_, s)| Iterations {
            started: sum.started + s.started,
            late: sum.late + s.late,
            missed: sum.missed + s.missed,
        })
    }

    /// The share of the slots due that started, as a rate search's cadence is the share of the
    /// rate sent: a user late now and then catches up, one that the server holds back falls
    /// behind for good. None kept when none started.
    fn kept(self) -> f64 {
        let due = self.started + self.missed;
        if self.started == 0 { 0.0 } else { self.started as f64 / due as f64 }
    }
}

impl Step {
    /// Judges a step's report at `level` (a rate, or paced users) against `slos`.
    pub(crate) fn judge(searched: Searched, level: u64, report: &Report, slos: &[Threshold]) -> Step {
        let c = &report.stats.counters;
        let latency = &report.stats.histograms.latency;
        let share = |n: u64| (c.total() > 0).then(|| n as f64 / c.total() as f64);
        let quantile = |q: f64| (!latency.is_empty()).then(|| latency.value_at_quantile(q) as f64 / 1e9);
        let fives: u64 = c.statuses().filter(|(code, _)| code / 100 == 5).map(|(_, n)| n).sum();
        let (achieved, iterations, cadence) = match searched {
            Searched::Rate => {
                let achieved = report.achieved_rate().unwrap_or(0.0);
                (achieved, None, achieved / level as f64)
            }
            Searched::Users => {
                let iterations = Iterations::of(report);
                let seconds = report.duration.as_secs_f64();
                let achieved = if seconds > 0.0 { iterations.started as f64 / seconds } else { 0.0 };
                (achieved, Some(iterations), iterations.kept())
            }
        };
        let verdicts = gate::judge(slos, report);
        let failed_workers = report.failed_workers();
        let outcome = if report.interrupted {
            StepOutcome::Interrupted
        } else if !failed_workers.is_empty() {
            StepOutcome::Incomplete
        } else if verdicts.iter().all(|v| v.passed) && cadence >= KEPT_RATE {
            StepOutcome::Held
        } else {
            StepOutcome::Failed
        };
        let note = if failed_workers.is_empty() { report.failure() } else { Some(failed_workers.join("; ")) };
        Step {
            searched,
            level,
            achieved,
            iterations,
            duration: report.duration,
            ok: c.ok,
            errors: c.errors(),
            error_rate: share(c.errors()),
            status_5xx_rate: share(fives),
            p50: quantile(0.5),
            p99: quantile(0.99),
            blocked: c.blocked,
            slos: verdicts,
            cadence,
            outcome,
            note,
        }
    }

    /// Whether the cadence held: requests went out at 99% of the rate or more, or the paced
    /// users started 99% of their slots or more.
    pub(crate) fn kept_cadence(&self) -> bool {
        self.cadence >= KEPT_RATE
    }

    /// What failed, for people: each SLO that did not hold with its measured value, and the
    /// cadence when it was not kept.
    pub(crate) fn failures(&self) -> Vec<String> {
        let mut failed: Vec<String> = self.slos.iter().filter(|v| !v.passed).map(Verdict::failure_text).collect();
        if let (false, Some(i)) = (self.kept_cadence(), self.iterations) {
            failed.push(format!(
                "cadence {:.1}% of the slots due (below {:.0}%: {} of {} not started by the step's end)",
                self.cadence * 100.0,
                KEPT_RATE * 100.0,
                i.missed,
                i.started + i.missed
            ));
        } else if !self.kept_cadence() {
            let blocked = match self.blocked {
                0 => String::new(),
                n => format!(", {n} waited for a free connection"),
            };
            failed.push(format!(
                "cadence {:.1}% of the rate (below {:.0}%{blocked})",
                self.cadence * 100.0,
                KEPT_RATE * 100.0
            ));
        }
        failed
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use volley_engine::Stats;

    use super::*;
    use crate::report::WorkerLine;

    /// A one-second step at `rate` that sent `sent` requests, each answered 200 in `latency`,
    /// `fives` of them with 503 instead.
    fn report(rate: u64, sent: u64, latency: Duration, fives: u64) -> Report {
        let mut stats = Stats::new();
        for _ in 0..sent {
            stats.histograms.latency.record(latency.as_nanos() as u64).unwrap();
            stats.histograms.service.record(latency.as_nanos() as u64).unwrap();
            stats.histograms.lateness.record(1_000).unwrap();
        }
        stats.counters.ok = sent;
        stats.counters.add_status(200, sent - fives);
        stats.counters.add_status(503, fives);
        let worker = WorkerLine { connections: 4, rate: Some(rate), ..WorkerLine::measured("local", stats) };
        Report::from_workers("http://127.0.0.1:1/".into(), vec![worker], false, false, Vec::new())
    }

    fn slos(texts: &[&str]) -> Vec<Threshold> {
        texts.iter().map(|t| Threshold::parse_as(t, "--slo").unwrap()).collect()
    }

    #[test]
    fn a_step_holds_when_every_slo_holds_and_it_sent_99_percent_of_its_rate() {
        let step =
            Step::judge(Searched::Rate, 1000, &report(1000, 990, Duration::from_millis(2), 0), &slos(&["p99<5ms"]));
        assert_eq!(step.outcome, StepOutcome::Held, "{:?}", step.failures());
        assert!(step.failures().is_empty());
        assert!(step.p99.is_some_and(|p99| (p99 - 0.002).abs() < 0.00001), "{:?}", step.p99);
    }

    #[test]
    fn a_step_that_held_its_slos_but_not_the_cadence_fails_and_says_so() {
        let step =
            Step::judge(Searched::Rate, 1000, &report(1000, 989, Duration::from_millis(2), 0), &slos(&["p99<5ms"]));
        assert_eq!(step.outcome, StepOutcome::Failed);
        assert_eq!(step.failures(), vec!["cadence 98.9% of the rate (below 99%)".to_string()]);
    }

    #[test]
    fn a_step_fails_naming_each_slo_that_did_not_hold_with_what_it_measured() {
        let step = Step::judge(
            Searched::Rate,
            1000,
            &report(1000, 1000, Duration::from_millis(8), 20),
            &slos(&["p99<5ms", "status_5xx<1%", "errors<0.1%"]),
        );
        assert_eq!(step.outcome, StepOutcome::Failed);
        let failures = step.failures();
        assert_eq!(failures.len(), 2, "{failures:?}");
        assert!(failures[0].starts_with("p99<5ms (measured 8.0"), "{failures:?}");
        assert_eq!(failures[1], "status_5xx<1% (measured 2.000%)");
        assert_eq!(step.status_5xx_rate, Some(0.02));
        assert_eq!(step.error_rate, Some(0.0));
    }

    /// A step of paced users whose two scenarios started these iterations, (started, missed)
    /// each, a tenth of them late, every request answered 200 in 2 ms.
    fn paced(scenarios: [(u64, u64); 2]) -> Report {
        let mut stats = Stats::new();
        for (index, (started, missed)) in scenarios.into_iter().enumerate() {
            let s = stats.scenarios.entry(index);
            (s.started, s.completed, s.late, s.missed) = (started, started, started / 10, missed);
            for _ in 0..started {
                stats.histograms.latency.record(2_000_000).unwrap();
            }
            stats.counters.ok += started;
            stats.counters.add_status(200, started);
        }
        let worker = WorkerLine { connections: 10, ..WorkerLine::measured("local", stats) };
        Report::from_workers("http://127.0.0.1:1/".into(), vec![worker], false, false, Vec::new())
    }

    #[test]
    fn paced_users_hold_the_cadence_when_they_started_99_percent_of_the_slots_due_over_all_scenarios() {
        let step = Step::judge(Searched::Users, 10, &paced([(594, 4), (396, 2)]), &slos(&["p99<5ms"]));
        assert_eq!(step.outcome, StepOutcome::Held, "{:?}", step.failures());
        assert_eq!(step.iterations, Some(Iterations { started: 990, late: 98, missed: 6 }));
        assert!((step.cadence - 990.0 / 996.0).abs() < 1e-12, "late starts cost no cadence: {}", step.cadence);
        let step = Step::judge(Searched::Users, 10, &paced([(60, 1), (38, 1)]), &slos(&["p99<5ms"]));
        assert_eq!(step.outcome, StepOutcome::Failed);
        assert_eq!(
            step.failures(),
            ["cadence 98.0% of the slots due (below 99%: 2 of 100 not started by the step's end)"]
        );
        let none = Step::judge(Searched::Users, 10, &paced([(0, 0), (0, 0)]), &[]);
        assert_eq!((none.outcome, none.cadence), (StepOutcome::Failed, 0.0), "no iteration keeps no cadence");
    }
}
