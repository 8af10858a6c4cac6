//! The report of a run: built once from merged statistics, printed as text or JSON.

pub(crate) mod digest;
mod json;
mod protocols;
mod saved;
mod text;

use std::time::Duration;

use volley_engine::{
    CheckCounts, ErrorKind, NameStats, Plan, Protocol, QuicCongestion, RingSupport, ScenarioStats, Stage, Stats,
};

pub(crate) use protocols::{HttpVersion, Protocols};

use crate::fleet::{FleetRun, Second, SeriesBudget, WorkerInfo};

pub(crate) use digest::{Digest, PERCENTILES};
pub(crate) use json::to_json;
pub(crate) use saved::from_saved;
pub(crate) use text::to_text;

/// Engine threads busier than this were probably the bottleneck, not the server.
const SATURATED: f64 = 0.90;
/// A median hold above this share of the median latency is worth a warning: the client's own
/// batching is then a large part of what it measured.
const HELD_SHARE: f64 = 0.20;
/// Open model: an achieved rate below this share of the requested one did not keep the schedule
/// (the share find-max will judge a step by).
pub(crate) const KEPT_RATE: f64 = 0.99;
/// A worker that started further than this from the planned instant is worth a warning.
const LATE_START: Duration = Duration::from_millis(10);

/// What the report takes from the plan beside the workers' numbers: where the load went, how,
/// and the names of its mix.
pub(crate) struct PlanSummary {
    pub url: String,
    pub protocol: Protocol,
    pub congestion: QuicCongestion,
    /// The mix's names in index order (`Mix::names`, the targets file's order); empty without a mix.
    pub names: Vec<String>,
    /// For each name, the names of its checks (`Mix::check_names`); empty without a mix.
    pub checks: Vec<Vec<String>>,
    /// A scenario mix's scenarios, with their weights; empty otherwise.
    pub scenarios: Vec<ScenarioLine>,
    /// The scenario file's feeders; empty without.
    pub feeders: Vec<FeederLine>,
}

/// A feeder of the run: its name, mode and rows (all of the run's workers' together).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct FeederLine {
    pub name: String,
    pub mode: String,
    pub rows: u64,
}

/// A scenario of the run, and its weight.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ScenarioLine {
    pub name: String,
    pub weight: u32,
    /// Its users' cadence of iterations, if it is paced.
    pub pacing: Option<Duration>,
}

impl PlanSummary {
    pub(crate) fn of(plan: &Plan) -> Self {
        PlanSummary {
            url: plan.target.to_string(),
            protocol: plan.protocol,
            congestion: plan.quic_congestion,
            names: plan.requests.names(),
            checks: plan.requests.check_names(),
            scenarios: plan
                .requests
                .scenarios()
                .unwrap_or_default()
                .iter()
                .map(|s| ScenarioLine { name: s.name.clone(), weight: s.weight, pacing: s.pacing })
                .collect(),
            feeders: plan
                .feeders
                .iter()
                .map(|f| FeederLine { name: f.name.clone(), mode: f.mode.name().into(), rows: f.rows.len() as u64 })
                .collect(),
        }
    }
}

pub(crate) struct Report {
    pub url: String,
    /// The HTTP version the run spoke; a merge of saved reports may cover several.
    pub protocol: Protocols,
    /// HTTP/2 and HTTP/3: the streams per connection asked for (-p).
    pub streams: Option<u32>,
    /// HTTP/2 and HTTP/3: the lowest stream limit a server set below `streams`.
    pub stream_limit: Option<u32>,
    /// HTTP/3: QUIC's congestion control (`--quic-congestion`); None for the other protocols.
    pub quic_congestion: Option<QuicCongestion>,
    pub threads: usize,
    pub connections: usize,
    /// Open model: the requests per second asked for (over every worker); None: closed model.
    pub rate: Option<u64>,
    pub duration: Duration,
    pub stats: Stats,
    pub interrupted: bool,
    pub error_samples: Vec<(ErrorKind, String)>,
    /// Engine threads' CPU time over their wall time, 0 to 1.
    pub client_busy: Option<f64>,
    pub client_cpu: Duration,
    /// What the kernel's io_uring offered the engine (of the first worker that said).
    pub ring: Option<RingSupport>,
    /// Each worker's part; one "local" worker for a run on this machine.
    pub workers: Vec<WorkerLine>,
    /// The run went through remote workers (or merges saved reports): show the breakdown.
    pub distributed: bool,
    /// One summary per second, merged over the workers.
    pub intervals: Vec<Second>,
    /// `--abort-on-fail` stopped the run: which threshold could no longer pass, and when.
    pub aborted: Option<crate::gate::Breach>,
    /// `--warm-up`: what its seconds counted, apart from `stats`.
    pub warm_up: Option<WarmUp>,
    /// `--stages` without a rate: the connection counts the run ramped through.
    pub connection_stages: Vec<Stage>,
    /// A mix's names, in index order: `stats.names` holds each one's statistics (a name with
    /// none counted none). Empty without a mix.
    pub names: Vec<String>,
    /// For each name (as `names`), its checks' names: `NameStats::checks` counts them by index.
    pub checks: Vec<Vec<String>>,
    /// A scenario mix's scenarios: then `stats.counters.iterations` counts their passes.
    pub scenarios: Vec<ScenarioLine>,
    /// The scenario file's feeders: `stats.counters.feeder_rows` counts the rows taken,
    /// `ran_out` the threads whose share of a shard feeder was used up.
    pub feeders: Vec<FeederLine>,
    /// A distributed run: which workers' own series and histograms were kept (the rest are
    /// summarised), and whether a kept series stopped at its share. None for a local run and
    /// for merged saved reports, whose workers are all kept.
    pub worker_series: Option<(SeriesBudget, bool)>,
}

/// One name of a mix with its statistics, for the reports' per-name sections.
pub(crate) struct NameLine<'a> {
    pub name: &'a str,
    pub stats: std::borrow::Cow<'a, NameStats>,
    /// Its checks' names: `stats.checks` counts them by index (a check past its end counted
    /// nothing).
    pub checks: &'a [String],
}

impl NameLine<'_> {
    /// Each check's name with its counts.
    pub(crate) fn check_lines(&self) -> impl Iterator<Item = (&str, CheckCounts)> {
        self.checks
            .iter()
            .enumerate()
            .map(|(k, name)| (name.as_str(), self.stats.checks.get(k).copied().unwrap_or_default()))
    }
}

/// One scenario of the run with what was counted for it, for the reports' per-scenario
/// sections.
pub(crate) struct ScenarioRow<'a> {
    pub line: &'a ScenarioLine,
    pub stats: std::borrow::Cow<'a, ScenarioStats>,
}

impl ScenarioRow<'_> {
    /// Its completed iterations' duration at quantile `q`, in milliseconds; none when it has
    /// none (a scenario that is not a flow, or one that completed nothing).
    pub(crate) fn duration_ms(&self, q: f64) -> Option<f64> {
        let d = &self.stats.duration;
        (!d.is_empty()).then(|| d.value_at_quantile(q) as f64 / 1e6)
    }

    /// Its pacing in milliseconds, if it is paced.
    pub(crate) fn pacing_ms(&self) -> Option<f64> {
        self.line.pacing.map(|p| p.as_secs_f64() * 1e3)
    }
}

/// The warm-up's own numbers: counted, merged over the workers, and kept out of the rest.
#[derive(Debug, Clone)]
pub(crate) struct WarmUp {
    pub seconds: u32,
    pub stats: Stats,
}

/// One worker's part of the report.
#[derive(Debug, Clone)]
pub(crate) struct WorkerLine {
    /// The address it was reached at, "local", or a saved report's file.
    pub address: String,
    /// What it said about itself (name, version, cores, kernel).
    pub info: Option<WorkerInfo>,
    pub connections: usize,
    /// Open model: its share of the rate, in requests per second.
    pub rate: Option<u64>,
    pub threads: usize,
    pub duration: Duration,
    pub client_cpu: Duration,
    pub interrupted: bool,
    /// Its actual start against the planned instant, in the controller's clock (ns).
    pub start_offset: Option<i64>,
    /// What it measured; None when it failed before it had anything to say, or when it was
    /// summarised (`digest`).
    pub stats: Option<Stats>,
    /// A worker past the run's series budget: what its line shows, its statistics already in
    /// the run's totals.
    pub digest: Option<Box<Digest>>,
    pub error_samples: Vec<(ErrorKind, String)>,
    pub ring: Option<RingSupport>,
    /// Why its result is missing or incomplete.
    pub failure: Option<String>,
    /// HTTP/2 and HTTP/3: the lowest stream limit its server connections set below the streams asked for.
    pub stream_limit: Option<u32>,
    /// It was lost before its result: `stats` are what its intervals said until then (for
    /// `duration`), so the run's totals are lower bounds.
    pub partial: bool,
    /// Its own seconds in a distributed run (empty otherwise).
    pub intervals: Vec<Second>,
    /// What it counted during the warm-up, apart from `stats`.
    pub warm_up: Option<Stats>,
}

impl Report {
    pub(crate) fn from_fleet(plan: PlanSummary, fleet: FleetRun) -> Self {
        let PlanSummary { url, protocol, congestion, names, checks, scenarios, feeders } = plan;
        let interrupted = fleet.interrupted;
        // The numbers are the measurement's, after the warm-up; so is the time they took.
        let warm_up = fleet.profile.warm_up();
        let measured = |d: Duration| d.saturating_sub(warm_up);
        let workers = fleet
            .workers
            .into_iter()
            .map(|w| {
                let info = w.info;
                let ring = w.ring;
                if let Some(summarised) = w.summarised {
                    let digest = Some(Box::new(summarised.digest));
                    let line = WorkerLine {
                        address: w.address,
                        info,
                        connections: w.connections,
                        rate: w.rate,
                        threads: w.threads,
                        duration: measured(Duration::from_secs(u64::from(w.reported_seconds))),
                        client_cpu: Duration::ZERO,
                        interrupted: false,
                        start_offset: w.start_offset,
                        stats: None,
                        digest,
                        error_samples: Vec::new(),
                        ring,
                        failure: w.failure,
                        stream_limit: None,
                        partial: true,
                        intervals: w.seconds,
                        warm_up: None,
                    };
                    return match summarised.ended {
                        Some(e) => WorkerLine {
                            connections: e.connections,
                            threads: e.threads,
                            duration: measured(e.duration),
                            client_cpu: e.client_cpu,
                            interrupted: e.interrupted,
                            error_samples: e.error_samples,
                            stream_limit: e.stream_limit,
                            partial: false,
                            ..line
                        },
                        None => line,
                    };
                }
                match w.outcome {
                    Some(o) => WorkerLine {
                        address: w.address,
                        info: info.clone(),
                        connections: o.connections,
                        rate: w.rate,
                        threads: o.threads,
                        duration: measured(o.duration),
                        client_cpu: o.client_cpu,
                        interrupted: o.interrupted,
                        start_offset: w.start_offset,
                        stats: Some(o.stats),
                        digest: None,
                        error_samples: o.error_samples,
                        ring,
                        failure: w.failure,
                        stream_limit: o.stream_limit,
                        partial: false,
                        intervals: w.seconds,
                        warm_up: o.warm_up,
                    },
                    None => WorkerLine {
                        address: w.address,
                        info: info.clone(),
                        connections: w.connections,
                        rate: w.rate,
                        threads: if w.partial.is_some() { w.threads } else { 0 },
                        duration: measured(Duration::from_secs(u64::from(w.reported_seconds))),
                        client_cpu: Duration::ZERO,
                        interrupted: false,
                        start_offset: w.start_offset,
                        partial: w.partial.is_some(),
                        stats: w.partial,
                        digest: None,
                        error_samples: Vec::new(),
                        ring,
                        failure: w.failure,
                        stream_limit: None,
                        intervals: w.seconds,
                        warm_up: w.partial_warm_up,
                    },
                }
            })
            .collect();
        let mut report = Report::from_workers(url, workers, fleet.remote, interrupted, fleet.intervals);
        if let Some(apart) = fleet.apart {
            report.stats.merge(&apart.stats);
            if let Some(w) = apart.warm_up {
                match &mut report.warm_up {
                    Some(sum) => sum.stats.merge(&w),
                    None => report.warm_up = Some(WarmUp { seconds: 0, stats: w }),
                }
            }
        }
        if let Some(w) = &mut report.warm_up {
            w.seconds = fleet.profile.warm_up_seconds;
        }
        report.connection_stages = fleet.profile.connection_stages().to_vec();
        report.worker_series = fleet.series.map(|s| (s, fleet.series_cut));
        report.names = names;
        report.checks = checks;
        report.scenarios = scenarios;
        report.feeders = feeders;
        report.protocol = Protocols::one(HttpVersion::of(protocol));
        match protocol {
            Protocol::Http1 => {}
            Protocol::Http2 { streams } => report.streams = Some(streams),
            Protocol::Http3 { streams } => {
                report.streams = Some(streams);
                report.quic_congestion = Some(congestion);
            }
        }
        report
    }

    /// Merges the workers' results: counters add up, histograms are added sample for sample.
    pub(crate) fn from_workers(
        url: String,
        workers: Vec<WorkerLine>,
        distributed: bool,
        interrupted: bool,
        intervals: Vec<Second>,
    ) -> Self {
        let mut stats = Stats::new();
        let mut error_samples: Vec<(ErrorKind, String)> = Vec::new();
        let (mut threads, mut connections, mut duration, mut cpu, mut wall) =
            (0, 0, Duration::ZERO, Duration::ZERO, 0.0);
        for w in &workers {
            connections += w.connections;
            if !w.has_numbers() {
                continue;
            }
            if let Some(s) = &w.stats {
                stats.merge(s);
            }
            threads += w.threads;
            duration = duration.max(w.duration);
            // A lost worker's CPU time is unknown: it would only dilute the others'.
            if !w.partial {
                cpu += w.client_cpu;
                wall += w.duration.as_secs_f64() * w.threads as f64;
            }
            for (kind, why) in &w.error_samples {
                if !error_samples.iter().any(|(k, _)| k == kind) {
                    error_samples.push((*kind, why.clone()));
                }
            }
        }
        let warm_up = workers.iter().filter_map(|w| w.warm_up.as_ref()).fold(None, |sum: Option<Stats>, s| {
            let mut sum = sum.unwrap_or_default();
            sum.merge(s);
            Some(sum)
        });
        // Every worker's share counts, a failed one's too: it is what the run asked for.
        let rate = workers.iter().filter_map(|w| w.rate).reduce(u64::saturating_add);
        Report {
            url,
            protocol: Protocols::one(HttpVersion::Http1),
            streams: None,
            quic_congestion: None,
            stream_limit: workers.iter().filter_map(|w| w.stream_limit).min(),
            threads,
            connections,
            rate,
            duration,
            stats,
            interrupted: interrupted || workers.iter().any(|w| w.interrupted && w.failure.is_none()),
            error_samples,
            client_busy: (wall > 0.0).then(|| cpu.as_secs_f64() / wall),
            client_cpu: cpu,
            ring: workers.iter().find_map(|w| w.ring.clone()),
            workers,
            distributed,
            intervals,
            worker_series: None,
            aborted: None,
            warm_up: warm_up.map(|stats| WarmUp { seconds: 0, stats }),
            connection_stages: Vec::new(),
            names: Vec::new(),
            checks: Vec::new(),
            scenarios: Vec::new(),
            feeders: Vec::new(),
        }
    }

    /// Each name of the mix in index order, with what was counted for it (nothing, for a name
    /// no request of which finished).
    pub(crate) fn name_lines(&self) -> impl Iterator<Item = NameLine<'_>> {
        self.names.iter().enumerate().map(|(index, name)| NameLine {
            name,
            checks: self.checks.get(index).map_or(&[], Vec::as_slice),
            stats: match self.stats.names.get(index) {
                Some(stats) => std::borrow::Cow::Borrowed(stats),
                None => std::borrow::Cow::Owned(NameStats::new()),
            },
        })
    }

    /// Each scenario in the file's order, with what was counted for it.
    pub(crate) fn scenario_rows(&self) -> impl Iterator<Item = ScenarioRow<'_>> {
        self.scenarios.iter().enumerate().map(|(index, line)| ScenarioRow {
            line,
            stats: match self.stats.scenarios.get(index) {
                Some(stats) => std::borrow::Cow::Borrowed(stats),
                None => std::borrow::Cow::Owned(ScenarioStats::default()),
            },
        })
    }

    /// Whether the run's scenarios are paced (all are, or none).
    pub(crate) fn is_paced(&self) -> bool {
        self.scenarios.iter().any(|s| s.pacing.is_some())
    }

    /// Everything the run counted, its warm-up included: what its seconds add up to.
    pub(crate) fn everything(&self) -> Stats {
        let mut all = self.stats.clone();
        if let Some(w) = &self.warm_up {
            all.merge(&w.stats);
        }
        all
    }

    /// The largest distance between a worker's actual start and the planned instant.
    pub(crate) fn start_skew(&self) -> Option<Duration> {
        self.workers.iter().filter_map(|w| w.start_offset).map(|o| Duration::from_nanos(o.unsigned_abs())).max()
    }

    /// Some workers were lost and only their intervals until then are counted.
    pub(crate) fn totals_are_lower_bounds(&self) -> bool {
        self.workers.iter().any(|w| w.partial)
    }

    /// Workers without a complete result, as "address: why".
    pub(crate) fn failed_workers(&self) -> Vec<String> {
        self.workers.iter().filter_map(|w| w.failure.as_ref().map(|f| format!("{}: {f}", w.address))).collect()
    }

    pub(crate) fn requests_per_sec(&self) -> f64 {
        per_sec(self.stats.counters.total(), self.duration)
    }

    /// Open model: requests sent per second of the run (a request declined unprocessed and sent
    /// again counts each time), to set against the rate asked for.
    pub(crate) fn achieved_rate(&self) -> Option<f64> {
        self.rate.and_then(|_| achieved_rate(self.stats.histograms.lateness.len(), self.duration))
    }

    /// Requests the run could have in flight at once: connections × streams (HTTP/2, HTTP/3).
    fn slots(&self) -> u64 {
        (self.connections as u64).saturating_mul(u64::from(self.streams.unwrap_or(1)))
    }

    /// Open model: what the counts say about the schedule, when it was not kept.
    fn schedule_warnings(&self, w: &mut Vec<String>) {
        let (Some(rate), Some(achieved)) = (self.rate, self.achieved_rate()) else { return };
        let c = &self.stats.counters;
        if achieved < KEPT_RATE * rate as f64 {
            w.push(format!(
                "the client sent {achieved:.1} requests a second of the {rate} asked for ({:.1}%): the schedule was not kept",
                achieved / rate as f64 * 100.0
            ));
        }
        if c.blocked > 0 {
            // Little's law: requests in flight = rate × time each one takes.
            let service = self.stats.histograms.service.mean() / 1e9;
            let (slots, needed) = (self.slots(), (rate as f64 * service).ceil());
            let gives = if self.streams.is_some_and(|s| s > 1) { "-c × -p gives" } else { "-c gives" };
            let why = if needed > slots as f64 {
                format!(
                    "{rate} requests a second at the mean service time of {:.3} ms need about {needed:.0} in flight, more than the {slots} {gives}: raise -c",
                    service * 1e3
                )
            } else {
                format!(
                    "{gives} {slots} and {rate} requests a second at the mean service time of {:.3} ms need about {needed:.0} in flight, so the server was slow at times",
                    service * 1e3
                )
            };
            w.push(format!(
                "{} requests were due while no connection or stream was free (they waited, and their latency counts it): {why}",
                c.blocked
            ));
        }
        if c.unsent > 0 {
            w.push(format!("{} requests were due before the run ended and never sent", c.unsent));
        }
    }

    /// What the numbers above cannot show on their own.
    pub(crate) fn warnings(&self) -> Vec<String> {
        let c = &self.stats.counters;
        let mut w = Vec::new();
        for worker in self.workers.iter().filter(|w| w.failure.is_some()) {
            let failure = format!("{}: {}", worker.address, worker.failure.as_deref().unwrap_or_default());
            w.push(if worker.partial {
                format!(
                    "worker {failure}; its first {} s, as its intervals reported them, are counted: the totals are lower bounds",
                    worker.duration.as_secs()
                )
            } else {
                format!("worker {failure}; the report covers the other workers only")
            });
        }
        if let Some((s, cut)) = self.worker_series.filter(|(s, cut)| s.summarised() > 0 || *cut) {
            w.push(format!(
                "per-worker series and histograms are kept for the first {} of {} workers, {} s each at most{}; the other {} are summarised (totals and percentiles); the run's totals, histograms and series are merged from every worker",
                s.detailed,
                s.workers,
                s.seconds_each,
                if cut { " (some were cut there)" } else { "" },
                s.summarised()
            ));
        }
        if c.ran_out > 0 {
            w.push(format!(
                "the data ran out: {} engine thread(s) used up their share of a shard feeder's rows and started no more iterations that need it; the run did less than it was asked",
                c.ran_out
            ));
        }
        if let Some(skew) = self.start_skew().filter(|s| *s > LATE_START) {
            w.push(format!(
                "workers started up to {:.1} ms away from the planned instant: their measurement windows overlap that much less",
                skew.as_secs_f64() * 1e3
            ));
        }
        if let Some(b) = &self.aborted {
            w.push(format!(
                "aborted after {:.1} s: {} could no longer pass (--abort-on-fail); the numbers cover what was done until then",
                b.after.as_secs_f64(),
                b.threshold
            ));
        }
        if self.interrupted {
            w.push("interrupted: the run was stopped before its end; the numbers cover what was done".to_string());
        }
        if c.aborted > 0 {
            w.push(format!(
                "{} requests were in flight when the run stopped: the server may have seen them, but they are neither ok nor errors",
                c.aborted
            ));
        }
        let h3 = self.protocol.is_only(HttpVersion::Http3);
        if c.refused > 0 {
            let how = if h3 { "GOAWAY or H3_REQUEST_REJECTED" } else { "GOAWAY or REFUSED_STREAM" };
            w.push(format!(
                "the server declined {} {} requests unprocessed ({how}); they were sent again and are not in the totals",
                c.refused, self.protocol
            ));
        }
        if let (Some(limit), Some(asked)) = (self.stream_limit, self.streams) {
            let how = if h3 { "QUIC's MAX_STREAMS" } else { "SETTINGS_MAX_CONCURRENT_STREAMS" };
            w.push(format!(
                "the server allows {limit} streams per connection ({how}), fewer than the {asked} asked for with -p: at most {} requests were in flight",
                u64::from(limit).saturating_mul(self.connections as u64)
            ));
        }
        if c.clamped > 0 {
            w.push(format!("{} samples were beyond the histogram's 1 h range and were recorded as 1 h", c.clamped));
        }
        let (hold, latency) = (&self.stats.histograms.hold, &self.stats.histograms.latency);
        let (hold_p50, latency_p50) = (hold.value_at_quantile(0.5), latency.value_at_quantile(0.5));
        if hold_p50 > 0 && hold_p50 as f64 > HELD_SHARE * latency_p50 as f64 {
            w.push(format!(
                "the client held half the responses {:.3} ms or more to batch them, over {:.0}% of the median latency ({:.3} ms): --max-hold 0 measures without holding, for more CPU per request",
                hold_p50 as f64 / 1e6,
                HELD_SHARE * 100.0,
                latency_p50 as f64 / 1e6
            ));
        }
        self.schedule_warnings(&mut w);
        if let Some(busy) = self.client_busy.filter(|b| *b >= SATURATED) {
            w.push(format!(
                "the client was saturated ({:.0}% of its threads' time on CPU): latencies include time waiting for the client; use more threads (-t) or machines",
                busy * 100.0
            ));
        }
        w
    }

    /// The command's result once the report is printed: failed, interrupted, or fine.
    pub(crate) fn outcome(&self) -> Result<(), crate::error::CliError> {
        let failed = self.failed_workers();
        match self.failure() {
            Some(why) => Err(crate::error::CliError::RunFailed(why)),
            None if self.interrupted => Err(crate::error::CliError::Interrupted),
            None if !failed.is_empty() => Err(crate::error::CliError::Incomplete(first_few(&failed))),
            None => Ok(()),
        }
    }

    /// Why the run cannot count as a success, when it cannot.
    pub(crate) fn failure(&self) -> Option<String> {
        let c = &self.stats.counters;
        if !self.workers.iter().any(WorkerLine::has_numbers) {
            return Some(match self.failed_workers().as_slice() {
                [one] if !self.distributed => one.trim_start_matches("local: ").to_string(),
                all => format!("no worker could run: {}", first_few(all)),
            });
        }
        if c.ok > 0 {
            return None;
        }
        if c.errors() == 0 {
            // Nothing failed either: every request was still waiting for its response when the
            // run ended. After Ctrl-C that is the user's doing, and 130 says so; otherwise the
            // server answered nothing in time, which is no success.
            if self.interrupted {
                return None;
            }
            return Some(match c.aborted {
                0 => "no request succeeded: none was answered before the run ended".to_string(),
                n => format!("no request succeeded: all {n} were still waiting for their responses when the run ended"),
            });
        }
        let (kind, why) =
            self.error_samples.first().map(|(k, w)| (k.name(), w.as_str())).unwrap_or(("unknown", "no detail"));
        if c.connects == 0 && c.errors_of(ErrorKind::Connect) > 0 {
            return Some(format!("could not connect to {}: {why}", self.url));
        }
        Some(format!("no request succeeded: all {} failed ({kind}: {why})", c.errors()))
    }
}

/// The first few of many workers' failures, and how many more: one line on stderr stays one a
/// person can read, however large the fleet (each worker's reason is in the JSON report).
fn first_few(failed: &[String]) -> String {
    const SHOWN: usize = 5;
    if failed.len() <= SHOWN {
        return failed.join("; ");
    }
    format!(
        "{}; and {} more workers (-j or -o json:FILE lists each)",
        failed[..SHOWN - 2].join("; "),
        failed.len() - (SHOWN - 2)
    )
}

/// Requests sent per second over `d`; None for fewer than two, which span no interval: one
/// request over the half millisecond of its own latency is not a rate of two thousand a second.
pub(crate) fn achieved_rate(sent: u64, d: Duration) -> Option<f64> {
    (sent >= 2).then(|| per_sec(sent, d))
}

pub(crate) fn per_sec(n: u64, d: Duration) -> f64 {
    let secs = d.as_secs_f64();
    if secs > 0.0 { n as f64 / secs } else { 0.0 }
}

impl WorkerLine {
    /// It measured something: its statistics, or a summarised worker's digest.
    pub(crate) fn has_numbers(&self) -> bool {
        self.stats.is_some() || self.digest.is_some()
    }
}

#[cfg(test)]
impl WorkerLine {
    /// A worker that ran one connection on one thread for a second and measured `stats`: the
    /// tests' worker, changed where a test needs it.
    pub(crate) fn measured(address: &str, stats: Stats) -> Self {
        Self {
            address: address.into(),
            info: None,
            connections: 1,
            rate: None,
            threads: 1,
            duration: Duration::from_secs(1),
            client_cpu: Duration::ZERO,
            interrupted: false,
            start_offset: None,
            stats: Some(stats),
            digest: None,
            error_samples: Vec::new(),
            ring: None,
            failure: None,
            stream_limit: None,
            partial: false,
            intervals: Vec::new(),
            warm_up: None,
        }
    }
}

/// A run of a mix, made by hand: the reports' per-name tests share it.
#[cfg(test)]
pub(crate) mod mix_fixture {
    use volley_engine::{ErrorKind, Stats};

    use super::{Report, WorkerLine};

    /// The mix's names in the targets file's order: "search" never has a request finish.
    pub(crate) const NAMES: [&str; 3] = ["home", "search", "login"];

    /// The latencies (ns) worker `worker` measured for name `name`: "home" on both workers,
    /// over three orders of magnitude, "login" on the first only.
    pub(crate) fn latencies(worker: usize, name: usize) -> Vec<u64> {
        match (worker, name) {
            (0, 0) => (1..=9).map(|i| i * 1_000_000 + 7_777).collect(),
            (1, 0) => (1..=5).map(|i| i * 30_000_000 + 123).collect(),
            (0, 2) => vec![400_000, 500_000, 600_000],
            _ => Vec::new(),
        }
    }

    /// Worker `worker`'s statistics: each name's latencies (first byte at half of each),
    /// statuses (one of "home"'s on the first worker a 404, "login"'s 201) and one timeout of
    /// "home" on the first worker; the run's own counters and latencies are the names' sum.
    pub(crate) fn worker_stats(worker: usize) -> Stats {
        let mut stats = Stats::new();
        for name in 0..NAMES.len() {
            for (i, v) in latencies(worker, name).into_iter().enumerate() {
                let status = match (name, i) {
                    (2, _) => 201,
                    (0, 0) if worker == 0 => 404,
                    _ => 200,
                };
                for (counters, latency, ttfb) in
                    [(&mut stats.counters, &mut stats.histograms.latency, &mut stats.histograms.ttfb), {
                        let n = stats.names.entry(name);
                        (&mut n.counters, &mut n.latency, &mut n.ttfb)
                    }]
                {
                    counters.ok += 1;
                    counters.add_status(status, 1);
                    latency.record(v).expect("in range");
                    ttfb.record(v / 2).expect("in range");
                }
            }
        }
        if worker == 0 {
            stats.counters.add_errors(ErrorKind::Timeout, 1);
            stats.names.entry(0).counters.add_errors(ErrorKind::Timeout, 1);
        }
        stats
    }

    /// The run over both workers (a second each), as `from_fleet` makes it with the plan's names.
    pub(crate) fn report() -> Report {
        let workers = (0..2).map(|w| WorkerLine::measured(&format!("w{w}"), worker_stats(w))).collect();
        let mut report = Report::from_workers("http://x/".into(), workers, true, false, Vec::new());
        report.names = NAMES.map(String::from).to_vec();
        report
    }

    /// The same run as two paced scenarios' (20 ms): "browse" (weight 3) started 10
    /// iterations, completed 8 (taking 40 to 80 ms) and abandoned 1, 2 of them late, and missed
    /// 1 slot; "buy" (weight 1) started none.
    pub(crate) fn paced_report() -> Report {
        let mut report = report();
        let pacing = Some(std::time::Duration::from_millis(20));
        report.scenarios = vec![
            super::ScenarioLine { name: "browse".into(), weight: 3, pacing },
            super::ScenarioLine { name: "buy".into(), weight: 1, pacing },
        ];
        let browse = report.stats.scenarios.entry(0);
        (browse.started, browse.completed, browse.abandoned, browse.late, browse.missed) = (10, 8, 1, 2, 1);
        for ms in [40, 45, 50, 55, 60, 65, 70, 80] {
            browse.duration.record(ms * 1_000_000).expect("in range");
        }
        report
    }
}

#[cfg(test)]
mod tests {
    use volley_engine::Stats;
    use volley_worker::wire;

    use super::{Report, WorkerLine};

    /// Latencies spread over six orders of magnitude, deterministic.
    fn samples(n: usize, seed: u64) -> Vec<u64> {
        let mut x = seed;
        (0..n)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                1_000 + (x % 1_000) * 10u64.pow((x >> 20) as u32 % 6)
            })
            .collect()
    }

    #[test]
    fn merged_worker_histograms_equal_one_histogram_fed_every_sample() {
        let mut all = Stats::new();
        let mut workers = Vec::new();
        // Uneven workers with different distributions, as real ones are.
        for (w, (n, seed)) in [(50_000, 1u64), (7_321, 2), (120_000, 3)].into_iter().enumerate() {
            let mut mine = Stats::new();
            for v in samples(n, seed).into_iter().map(|v| v * (w as u64 + 1)) {
                mine.histograms.latency.record(v).unwrap();
                all.histograms.latency.record(v).unwrap();
                mine.counters.ok += 1;
                all.counters.ok += 1;
            }
            // Through the wire, as a remote worker's result travels.
            let travelled = wire::stats_from_proto(&wire::stats_to_proto(&mine), wire::Bounds::default()).unwrap();
            workers.push(WorkerLine::measured(&format!("w{w}"), travelled));
        }
        let report = Report::from_workers("http://x/".into(), workers, true, false, Vec::new());
        let (merged, direct) = (&report.stats.histograms.latency, &all.histograms.latency);
        assert_eq!(report.stats.counters.ok, all.counters.ok);
        assert_eq!(merged.len(), direct.len());
        assert_eq!((merged.min(), merged.max()), (direct.min(), direct.max()));
        assert_eq!(merged.mean(), direct.mean());
        for q in (0..=1000).map(|i| f64::from(i) / 1000.0).chain([0.9999, 0.99999]) {
            assert_eq!(merged.value_at_quantile(q), direct.value_at_quantile(q), "quantile {q}");
        }
    }
}
