//! Cumulative counts as the exposition shows them: requests, responses by status, errors by
//! kind, bytes, connections, and the latency histogram in the fixed buckets.

use std::collections::BTreeMap;

use hdrhistogram::Histogram;
use volley_engine::{Counters, ErrorKind, MAX_CHECKS, MAX_NAMES, Stats};

use super::buckets::{BOUNDS_NS, bucket_of};

/// What some seconds or some runs added up to. Every field only grows under [`Tally::add`],
/// [`Tally::plus`] and [`Tally::at_least`], so counters built from it never go down.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Tally {
    /// Finished requests: ok plus errors.
    pub requests: u64,
    pub status: BTreeMap<u16, u64>,
    pub errors: [u64; ErrorKind::ALL.len()],
    pub aborted: u64,
    pub connects: u64,
    pub bytes_sent: u64,
    pub bytes_received: u64,
    /// Responses per latency bucket (not cumulative); the last is above every bound (+Inf).
    pub buckets: [u64; BOUNDS_NS.len() + 1],
    /// The responses' latencies summed, in seconds.
    pub latency_sum: f64,
    /// A mix's names, each with its requests, statuses, errors and latencies (the other
    /// fields stay 0 in a name's tally): kept by name, so that runs of a worker add up name by
    /// name; at most [`MAX_NAMES`] over the life of the process.
    pub names: BTreeMap<String, Tally>,
    /// A name's tally: its checks' counts, `[passed, failed]`, by the check's name; at most
    /// [`MAX_CHECKS`] over all names and the life of the process.
    pub checks: BTreeMap<String, [u64; 2]>,
}

impl Default for Tally {
    fn default() -> Self {
        Tally {
            requests: 0,
            status: BTreeMap::new(),
            errors: [0; ErrorKind::ALL.len()],
            aborted: 0,
            connects: 0,
            bytes_sent: 0,
            bytes_received: 0,
            buckets: [0; BOUNDS_NS.len() + 1],
            latency_sum: 0.0,
            names: BTreeMap::new(),
            checks: BTreeMap::new(),
        }
    }
}

impl Tally {
    /// What `stats` counted; `names` are the mix's names by index (empty without a mix), and
    /// `checks` each name's checks' names by index.
    pub(crate) fn of(stats: &Stats, names: &[String], checks: &[Vec<String>]) -> Tally {
        let mut tally = Tally::default();
        tally.add(stats, names, checks);
        tally
    }

    /// Adds what `stats` counted; `names` are the mix's names by index, `checks` their checks'.
    pub(crate) fn add(&mut self, stats: &Stats, names: &[String], checks: &[Vec<String>]) {
        let c = &stats.counters;
        let add = |a: &mut u64, b: u64| *a = a.saturating_add(b);
        self.add_outcomes(c, &stats.histograms.latency);
        add(&mut self.aborted, c.aborted);
        add(&mut self.connects, c.connects);
        add(&mut self.bytes_sent, c.bytes_sent);
        add(&mut self.bytes_received, c.bytes_received);
        let mut check_room = Tally::check_room(&self.names);
        for (index, stats) in stats.names.iter() {
            let Some(name) = names.get(index) else { continue };
            let room = self.names.len() < MAX_NAMES;
            let tally = match self.names.get_mut(name) {
                Some(tally) => tally,
                None if room => self.names.entry(name.clone()).or_default(),
                None => continue,
            };
            tally.add_outcomes(&stats.counters, &stats.latency);
            let check_names = checks.get(index).map_or(&[][..], Vec::as_slice);
            for (check, counts) in check_names.iter().zip(&stats.checks) {
                tally.add_check(check, [counts.passed, counts.failed], &u64::saturating_add, &mut check_room);
            }
        }
    }

    /// How many more check series the names may take: [`MAX_CHECKS`] over all of them.
    fn check_room(names: &BTreeMap<String, Tally>) -> usize {
        MAX_CHECKS.saturating_sub(names.values().map(|t| t.checks.len()).sum())
    }

    /// Adds (or combines by `count`) one check's `[passed, failed]`; a check not counted yet
    /// takes one of `room`, and is left out when there is none.
    fn add_check(&mut self, check: &str, counts: [u64; 2], count: &impl Fn(u64, u64) -> u64, room: &mut usize) {
        let slot = match self.checks.get_mut(check) {
            Some(slot) => slot,
            None if *room > 0 => {
                *room -= 1;
                self.checks.entry(check.to_string()).or_default()
            }
            None => return,
        };
        *slot = [count(slot[0], counts[0]), count(slot[1], counts[1])];
    }

    /// Requests, statuses, errors and latencies.
    fn add_outcomes(&mut self, c: &Counters, latency: &Histogram<u64>) {
        let add = |a: &mut u64, b: u64| *a = a.saturating_add(b);
        add(&mut self.requests, c.total());
        for (code, n) in c.statuses() {
            add(self.status.entry(code).or_default(), n);
        }
        for (slot, kind) in self.errors.iter_mut().zip(ErrorKind::ALL) {
            add(slot, c.errors_of(kind));
        }
        // Each recorded value at the top of its HdrHistogram bucket, as the report's percentiles
        // give it, so a percentile of the report falls in the bucket counted here.
        for v in latency.iter_recorded() {
            add(&mut self.buckets[bucket_of(v.value_iterated_to())], v.count_at_value());
        }
        if !latency.is_empty() {
            self.latency_sum += latency.mean() * latency.len() as f64 / 1e9;
        }
    }

    /// The sum of two tallies.
    pub(crate) fn plus(&self, other: &Tally) -> Tally {
        self.combine(other, &u64::saturating_add, &|a, b| a + b)
    }

    /// Each count the larger of the two. A run's result covers what its seconds said, so for
    /// an honest run this is the result; a worker failed for reporting what cannot be true has
    /// its numbers left out of the result, and this keeps the counters from going back down.
    pub(crate) fn at_least(&self, other: &Tally) -> Tally {
        self.combine(other, &u64::max, &f64::max)
    }

    fn combine(&self, other: &Tally, count: &impl Fn(u64, u64) -> u64, sum: &impl Fn(f64, f64) -> f64) -> Tally {
        let mut status = self.status.clone();
        for (code, n) in &other.status {
            let slot = status.entry(*code).or_default();
            *slot = count(*slot, *n);
        }
        let pairwise = |a: &[u64], b: &[u64], out: &mut [u64]| {
            for ((o, a), b) in out.iter_mut().zip(a).zip(b) {
                *o = count(*a, *b);
            }
        };
        let mut errors = [0; ErrorKind::ALL.len()];
        pairwise(&self.errors, &other.errors, &mut errors);
        let mut buckets = [0; BOUNDS_NS.len() + 1];
        pairwise(&self.buckets, &other.buckets, &mut buckets);
        let mut names = self.names.clone();
        for (name, theirs) in &other.names {
            let room = names.len() < MAX_NAMES;
            match names.get_mut(name) {
                Some(ours) => *ours = ours.combine(theirs, count, sum),
                None if room => {
                    names.insert(name.clone(), Tally::default().combine(theirs, count, sum));
                }
                None => {}
            }
        }
        // A name's checks, the names' room shared: the run's tally takes them name by name.
        let mut room = Tally::check_room(&names);
        for (name, theirs) in &other.names {
            if let Some(ours) = names.get_mut(name) {
                for (check, counts) in &theirs.checks {
                    ours.add_check(check, *counts, count, &mut room);
                }
            }
        }
        Tally {
            checks: self.checks.clone(),
            requests: count(self.requests, other.requests),
            status,
            errors,
            aborted: count(self.aborted, other.aborted),
            connects: count(self.connects, other.connects),
            bytes_sent: count(self.bytes_sent, other.bytes_sent),
            bytes_received: count(self.bytes_received, other.bytes_received),
            buckets,
            latency_sum: sum(self.latency_sum, other.latency_sum),
            names,
        }
    }

    /// Responses with a latency: the histogram's `_count`.
    pub(crate) fn responses(&self) -> u64 {
        self.buckets.iter().fold(0, |sum, n| sum.saturating_add(*n))
    }
}
