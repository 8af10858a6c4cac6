//! What a run across workers produced, as the report reads it: per worker its part (its outcome,
//! or why it has none and what it said until then), and the run's seconds merged over the
//! workers. A leaf of its own because both the fleet's state machine, which fills it in, and
//! its driver, which hands it to the report, name these types.

use std::time::Duration;

use volley_engine::{CheckCounts, ErrorKind, RingSupport, Stats};
use volley_worker::shard::Outcome;

use super::clock_sync::Offset;
use super::link::WorkerInfo;
use super::series::{Label, Profile};
use super::worker_series::SeriesBudget;
// The leaf, not `report`: the report reads the fleet's results.
use crate::report::digest::Digest;

/// One worker's part of a run, as the report shows it.
#[derive(Debug, Default)]
pub(crate) struct WorkerRun {
    /// The address it was given (or "local").
    pub address: String,
    pub info: Option<WorkerInfo>,
    pub connections: usize,
    /// Open model: its share of the rate, in requests per second.
    pub rate: Option<u64>,
    /// Engine threads, as it said when it accepted the shard.
    pub threads: usize,
    pub ring: Option<RingSupport>,
    pub clock: Option<Offset>,
    /// Its actual start against the planned instant, in the controller's clock (ns).
    pub start_offset: Option<i64>,
    pub outcome: Option<Outcome>,
    /// Why it has no (complete) result.
    pub failure: Option<String>,
    /// A worker lost before its result: its intervals merged, up to `reported_seconds`. None
    /// when it sent none, or when it was failed for reporting what cannot be true.
    pub partial: Option<Stats>,
    /// The same for its seconds of warm-up, which are not in `partial`.
    pub partial_warm_up: Option<Stats>,
    pub reported_seconds: u32,
    /// Its own seconds, for the per-worker lines of a distributed run's report; none for a
    /// local run, whose one worker's seconds are the run's.
    pub seconds: Vec<Second>,
    /// A worker past the run's series budget whose result (or, lost, its intervals' sum) went
    /// into the run's [`Apart`] as it came: what its line shows. `outcome` and `partial` are
    /// then None.
    pub summarised: Option<Box<Summarised>>,
}

/// What is kept of a summarised worker's part once its statistics are in the run's [`Apart`].
#[derive(Debug)]
pub(crate) struct Summarised {
    pub digest: Digest,
    /// Its result's other numbers; None for a worker lost before its result.
    pub ended: Option<Ended>,
}

/// A result's numbers besides its statistics.
#[derive(Debug)]
pub(crate) struct Ended {
    pub duration: Duration,
    pub threads: usize,
    pub connections: usize,
    pub client_cpu: Duration,
    pub interrupted: bool,
    pub error_samples: Vec<(ErrorKind, String)>,
    pub stream_limit: Option<u32>,
}

/// The summarised workers' statistics, merged as they came: part of the run's totals with every
/// other worker's (HdrHistogram's merge is exact in any order).
#[derive(Debug, Default)]
pub(crate) struct Apart {
    pub stats: Stats,
    pub warm_up: Option<Stats>,
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
    /// The warm-up, and the stages' and rate's share of each second.
    pub profile: Profile,
    /// Which workers' own series and histograms were kept; None for a local run.
    pub series: Option<SeriesBudget>,
    /// A detailed worker's series reached its share of the budget and stops there.
    pub series_cut: bool,
    /// The summarised workers' statistics; None when no worker was summarised.
    pub apart: Option<Apart>,
}

impl FleetRun {
    /// Worker `i` is past the run's series budget: its line is a [`Digest`].
    pub(crate) fn is_summarised(&self, i: usize) -> bool {
        self.series.is_some_and(|s| !s.is_detailed(i))
    }

    /// Worker `i`'s result, or (`outcome` None) what its intervals said before it was lost: into
    /// the run's [`Apart`], its line a digest. Its warm-up too.
    pub(crate) fn summarise(&mut self, i: usize, stats: Stats, warm_up: Option<Stats>, ended: Option<Ended>) {
        let apart = self.apart.get_or_insert_with(Apart::default);
        apart.stats.merge(&stats);
        if let Some(w) = &warm_up {
            apart.warm_up.get_or_insert_with(Stats::new).merge(w);
        }
        self.workers[i].summarised = Some(Box::new(Summarised { digest: Digest::of(&stats), ended }));
    }
}

impl Ended {
    /// An outcome's numbers, its statistics taken out (they are returned: the stats and the warm-up).
    pub(crate) fn of(outcome: Outcome) -> (Ended, Stats, Option<Stats>) {
        let Outcome {
            stats,
            duration,
            threads,
            connections,
            client_cpu,
            interrupted,
            error_samples,
            stream_limit,
            warm_up,
            stopped_by: _,
        } = outcome;
        (Ended { duration, threads, connections, client_cpu, interrupted, error_samples, stream_limit }, stats, warm_up)
    }
}

/// One second of the run, summed up. Only the summary is kept: a second's full histograms take
/// most of a megabyte, which an hour-long run must not pile up.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Second {
    pub second: u32,
    pub ok: u64,
    pub errors: u64,
    /// Latency percentiles of that second's responses (ns); None when there were none.
    pub p50: Option<u64>,
    pub p90: Option<u64>,
    pub p99: Option<u64>,
    pub max: Option<u64>,
    /// The status codes of that second's responses, with their counts, in order.
    pub statuses: Vec<(u16, u64)>,
    /// Open model: requests sent in that second (its achieved rate), those sent late, those
    /// due while no connection was free; service-time percentiles (ns).
    pub sent: u64,
    pub late: u64,
    pub blocked: u64,
    pub service_p50: Option<u64>,
    pub service_p99: Option<u64>,
    /// Its place in the run: warm-up, stage, requests asked for.
    pub label: Label,
    /// A mix's names that finished requests in that second, by index, in order: the CSV
    /// series' rows per name. About 80 bytes a name a second, so an hour of all 1000 names
    /// moving every second keeps 290 MB; a run of a few names keeps next to nothing.
    pub names: Vec<NameSecond>,
}

/// One name's share of a second.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct NameSecond {
    /// Its index in the mix's names.
    pub index: usize,
    pub ok: u64,
    pub errors: u64,
    /// Latency percentiles of its responses in that second (ns); None when it had none.
    pub p50: Option<u64>,
    pub p99: Option<u64>,
    /// Its checks' verdicts in that second, over all its checks.
    pub checks: CheckCounts,
    /// With scenarios: what happened at its steps in that second besides answers, as
    /// `Counters` counts them.
    pub flow: FlowCounts,
}

/// A name's iterations that ended at its steps, its failed extractions and the redirects it
/// followed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct FlowCounts {
    pub abandoned: u64,
    pub extract_failed: u64,
    pub redirects: u64,
}

impl FlowCounts {
    fn of(c: &volley_engine::Counters) -> FlowCounts {
        FlowCounts { abandoned: c.abandoned, extract_failed: c.extract_failed, redirects: c.redirects }
    }

    /// The sum of the two.
    pub(crate) fn plus(self, other: FlowCounts) -> FlowCounts {
        FlowCounts {
            abandoned: self.abandoned + other.abandoned,
            extract_failed: self.extract_failed + other.extract_failed,
            redirects: self.redirects + other.redirects,
        }
    }
}

impl Second {
    pub(crate) fn of(second: u32, delta: &Stats, label: Label) -> Second {
        let lat = &delta.histograms.latency;
        let at = |q| (!lat.is_empty()).then(|| lat.value_at_quantile(q));
        let service_time = &delta.histograms.service;
        let service = |q| (!service_time.is_empty()).then(|| service_time.value_at_quantile(q));
        Second {
            second,
            ok: delta.counters.ok,
            errors: delta.counters.errors(),
            p50: at(0.5),
            p90: at(0.9),
            p99: at(0.99),
            max: (!lat.is_empty()).then(|| lat.max()),
            statuses: delta.counters.statuses().collect(),
            sent: delta.histograms.lateness.len(),
            late: delta.counters.late,
            blocked: delta.counters.blocked,
            service_p50: service(0.5),
            service_p99: service(0.99),
            label,
            names: delta
                .names
                .iter()
                .filter(|(_, n)| n.counters.total() > 0)
                .map(|(index, n)| {
                    let at = |q| (!n.latency.is_empty()).then(|| n.latency.value_at_quantile(q));
                    let checks = n.checks.iter().fold(CheckCounts::default(), |mut all, c| {
                        all.merge(c);
                        all
                    });
                    let (ok, errors) = (n.counters.ok, n.counters.errors());
                    let flow = FlowCounts::of(&n.counters);
                    NameSecond { index, ok, errors, p50: at(0.5), p99: at(0.99), checks, flow }
                })
                .collect(),
        }
    }
}
