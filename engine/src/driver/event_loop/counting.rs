//! The loop's accounting: what a session reports (responses, errors, refusals, its stream
//! limit) into the thread's statistics, and the failures of connections and their set-up.

use std::time::Instant;

use super::Loop;
use crate::driver::Judge;
use crate::driver::conn::Phase;
use crate::driver::ops::Io;
use crate::session::{Event, Why};
use crate::stats::{Counters, ErrorKind, Kind, Spans, Stats};

/// Requests a server may decline unprocessed, with no response in between, before declined
/// ones count as errors instead of being sent again.
const REFUSED_IN_A_ROW: u64 = 1000;

impl<I: Io> Loop<I> {
    /// The connection is set up: counted, and its connect time recorded.
    pub(super) fn established(&mut self, i: usize, now: Instant) {
        self.connects_ok += 1;
        self.stats.counters.connects += 1;
        let started = self.conns[i].connect_started;
        Stats::record(
            &mut self.stats.counters,
            &mut self.stats.histograms.connect,
            now.saturating_duration_since(started),
        );
        self.conns[i].phase = Phase::Open;
        self.open += 1;
    }

    /// Counts what the session of `i` reported.
    pub(super) fn count_events(&mut self, i: usize) {
        let mut events = std::mem::take(&mut self.events);
        // Recorded a run of equal spans at a time (a receive's responses share an arrival).
        let (mut ttfb, mut latency, mut service) = (Spans::default(), Spans::default(), Spans::default());
        // The verdicts on what was kept of the response that follows, and the values its
        // extractors took (`Event::Judged`).
        let mut kept_verdicts: Option<u64> = None;
        let mut extracted = None;
        for event in events.drain(..) {
            match event {
                Event::FirstByte { request, sent_at, at } => {
                    ttfb.add(sent_at, at, &mut self.stats.counters, &mut self.stats.histograms.ttfb);
                    if let Some(names) = &self.shared.names {
                        let name = usize::from(names[request as usize]);
                        self.name_samples.span(&mut self.stats.names, name, Kind::FirstByte, sent_at, at);
                    }
                }
                Event::Response { request, status, due, sent_at, at } => {
                    let kept_verdicts = kept_verdicts.take();
                    let mut extracted = extracted.take();
                    // A check that failed ends the iteration.
                    let mut abort = false;
                    if let Some(set) = extracted.as_ref().map(|e: &crate::session::Extracted| &e.set_cookies)
                        && !set.is_empty()
                    {
                        self.picker.store_cookies(&mut self.conns[i].cursor, request, set);
                    }
                    // A redirect followed is not its step's answer: the hop's will be, and only
                    // that one is checked, extracted from and thought after.
                    let location = extracted.as_mut().and_then(|e| e.location.take());
                    let redirected = self.follow_redirect(i, request, status, location);
                    if !redirected
                        && let Some(&expected) = self.shared.extracts.get(request as usize)
                        && expected > 0
                    {
                        self.take_values(i, request, expected, extracted);
                    }
                    self.refused_in_a_row = 0;
                    self.batch_responses += 1;
                    self.in_flight = self.in_flight.saturating_sub(1);
                    let counters = &mut self.stats.counters;
                    counters.ok += 1;
                    counters.status(status);
                    let h = &mut self.stats.histograms;
                    latency.add(due, at, counters, &mut h.latency);
                    if self.open_model {
                        service.add(sent_at, at, counters, &mut h.service);
                    }
                    if let Some(names) = &self.shared.names {
                        let index = usize::from(names[request as usize]);
                        self.name_samples.span(&mut self.stats.names, index, Kind::Latency, due, at);
                        let name = self.stats.names.entry(index);
                        name.counters.ok += 1;
                        name.counters.status(status);
                        name.counters.redirects += u64::from(redirected);
                        if let Some(checks) = self.shared.checks.as_ref().filter(|_| !redirected) {
                            // A response whose step has checks on what is kept and no verdicts
                            // fails them: a check passes only on evidence.
                            let kept_failed = kept_verdicts.unwrap_or(u64::MAX);
                            let took = at.saturating_duration_since(due);
                            for check in &checks[request as usize] {
                                let counts = name.check(usize::from(check.index));
                                let passed = match &check.judge {
                                    Judge::Now(rule) => rule.passes(status, took),
                                    Judge::Kept(j) => kept_failed & (1 << j) == 0,
                                };
                                if passed {
                                    counts.passed += 1;
                                } else {
                                    counts.failed += 1;
                                    abort |= check.abort;
                                }
                            }
                        }
                    }
                    if abort {
                        self.end_flow(i, request);
                    }
                    if !redirected {
                        self.end_step(i, request, Some(at));
                        self.think(i, request, Some(at));
                    }
                }
                Event::Judged { failed, extracted: values } => {
                    kept_verdicts = Some(failed);
                    extracted = Some(values);
                }
                Event::RetryAfter { status, value } => self.stats.counters.retry_after.record(status, value),
                Event::Refused { request } => {
                    self.in_flight = self.in_flight.saturating_sub(1);
                    self.refused(i, request);
                }
                Event::Failed { request, kind, why } => {
                    self.in_flight = self.in_flight.saturating_sub(1);
                    self.count_errors(kind, 1, why);
                    self.count_name_error(request, kind);
                    self.end_flow(i, request);
                    self.end_step(i, request, None);
                    self.think(i, request, None);
                }
                Event::SetupFailed { kind, why } => self.setup_failed(i, kind, why),
                Event::Limited(limit) => {
                    self.stream_limit = Some(self.stream_limit.map_or(limit, |l| l.min(limit)));
                }
                Event::DroppedPackets(n) => self.stats.counters.dropped_packets += n,
            }
        }
        let (counters, h) = (&mut self.stats.counters, &mut self.stats.histograms);
        ttfb.flush(counters, &mut h.ttfb);
        latency.flush(counters, &mut h.latency);
        service.flush(counters, &mut h.service);
        self.name_samples.end_receive(&mut self.stats.names);
        self.events = events;
    }

    /// `request` was answered with `status` and `location`: if it follows redirects and this
    /// is one it may follow, its hop goes next (true, counted); else its redirects in a row, if
    /// any, are over.
    fn follow_redirect(&mut self, i: usize, request: u32, status: u16, location: Option<Vec<u8>>) -> bool {
        let Some(redirects) = &self.shared.redirects else { return false };
        let cursor = &mut self.conns[i].cursor;
        let (hops, current) = cursor.redirected();
        match location.and_then(|l| redirects.next_hop(request, status, &l, hops, current)) {
            Some((hop, url)) => {
                cursor.follow(hop, url, redirects.var);
                self.stats.counters.redirects += 1;
                true
            }
            None => {
                cursor.end_redirects();
                false
            }
        }
    }

    /// The response to `request` (with `expected` extractors) brought `values`: into its user's
    /// variables if every extractor took one; else the extraction failed, and so does the rest
    /// of the iteration, which would need the value.
    fn take_values(&mut self, i: usize, request: u32, expected: u8, values: Option<crate::session::Extracted>) {
        let values = values.unwrap_or_default().values;
        if values.len() == usize::from(expected) && values.iter().all(|(_, v)| v.is_some()) {
            let cursor = &mut self.conns[i].cursor;
            for (var, value) in &values {
                cursor.set_var(usize::from(*var), value.as_deref().unwrap_or_default());
            }
            return;
        }
        self.count_for_run_and_name(request, |c| c.extract_failed += 1);
        self.end_flow(i, request);
    }

    /// `request` was answered at `at` (None: it failed, now): its user pauses, if its step
    /// has a think time. The clock is read only then.
    fn think(&mut self, i: usize, request: u32, at: Option<Instant>) {
        if let Some(Some(think)) = self.shared.thinks.get(request as usize) {
            let at = at.unwrap_or_else(Instant::now);
            let paused = self.picker.think(&mut self.conns[i].cursor, think, at);
            self.count_for_run_and_name(request, |c| c.think(paused));
        }
    }

    /// `request` had its final answer at `at` (None: it failed, now): if it is its scenario's
    /// last step, the iteration under way is complete, counted under its scenario, with how
    /// long it took if it is a flow (whose user is one request at a time, so the iteration is
    /// its own). The clock is read only then.
    fn end_step(&mut self, i: usize, request: u32, at: Option<Instant>) {
        let Some(step) = self.shared.steps.get(request as usize).filter(|s| s.last) else { return };
        let scenario = self.stats.scenarios.entry(usize::from(step.scenario));
        scenario.completed += 1;
        if self.shared.flows.get(request as usize).copied().unwrap_or(false)
            && let Some(took) = self.conns[i].cursor.iteration_took(at.unwrap_or_else(Instant::now))
        {
            Stats::record(&mut self.stats.counters, &mut scenario.duration, took);
        }
    }

    /// Counts with `count` for the run and, in a mix, for `request`'s name too.
    fn count_for_run_and_name(&mut self, request: u32, count: impl Fn(&mut Counters)) {
        count(&mut self.stats.counters);
        if let Some(names) = &self.shared.names {
            count(&mut self.stats.names.entry(usize::from(names[request as usize])).counters);
        }
    }

    /// `request` ended without what a flow's later steps need (its extraction, the request or
    /// a check with `on_failure = "abort"` failed): if it is a flow's step, its iteration ends
    /// here, counted as abandoned under its name when steps were left.
    fn end_flow(&mut self, i: usize, request: u32) {
        self.conns[i].cursor.end_redirects();
        if !self.picker.end_iteration(&mut self.conns[i].cursor, request) {
            return;
        }
        self.count_for_run_and_name(request, |c| c.abandoned += 1);
        if let Some(step) = self.shared.steps.get(request as usize) {
            self.stats.scenarios.entry(usize::from(step.scenario)).abandoned += 1;
        }
    }

    /// Requests the server declined unprocessed: they go back into the budget to be sent again,
    /// unless the server has declined everything for a while; then they fail, so that a server
    /// refusing every request cannot keep a `-n` run going forever.
    pub(super) fn refused(&mut self, i: usize, request: u32) {
        self.refused_in_a_row += 1;
        if self.refused_in_a_row > REFUSED_IN_A_ROW {
            let why = format!(
                "the server declined over {REFUSED_IN_A_ROW} requests in a row unprocessed; they are no longer sent again"
            );
            self.count_errors(ErrorKind::Reset, 1, why.into());
            self.count_name_error(request, ErrorKind::Reset);
            self.end_flow(i, request);
            self.end_step(i, request, None);
            return;
        }
        self.stats.counters.refused += 1;
        if !self.picker.send_again(&mut self.conns[i].cursor, request) {
            self.schedule.give_back(1);
        }
    }

    /// `n` requests failed for one reason.
    pub(super) fn count_errors(&mut self, kind: ErrorKind, n: u64, why: Why) {
        if n == 0 {
            return;
        }
        self.stats.counters.add_errors(kind, n);
        if !self.error_samples.iter().any(|(k, _)| *k == kind) {
            self.error_samples.push((kind, why.into_owned()));
        }
    }

    /// A mix: request `request` failed as `kind`, counted under its name too.
    fn count_name_error(&mut self, request: u32, kind: ErrorKind) {
        if let Some(names) = &self.shared.names {
            self.stats.names.entry(usize::from(names[request as usize])).counters.error(kind);
        }
    }

    /// Connection `i` could not be set up: a failed connect, and the request it was opened for
    /// (its next) fails as `kind`.
    pub(super) fn setup_failed(&mut self, i: usize, kind: ErrorKind, why: Why) {
        self.connect_failures += 1;
        let claimed = std::mem::take(&mut self.conns[i].claimed);
        if claimed {
            self.schedule.drop_claim();
        } else if !self.picker.owes(&self.conns[i].cursor) {
            return;
        }
        // Opened for a unit of the schedule, or for the next step of an iteration under way.
        self.count_errors(kind, 1, why);
        let request = self.picker.advance(&mut self.conns[i].cursor);
        let now = Instant::now();
        if claimed {
            self.picker.start_iteration(&mut self.conns[i].cursor, request, now, &mut self.stats);
        }
        self.count_name_error(request, kind);
        self.end_flow(i, request);
        self.end_step(i, request, Some(now));
    }

    /// The transport of `i` failed, and with it every request in flight on it (or its set-up).
    /// The caller closes it.
    pub(super) fn fail(&mut self, i: usize, kind: ErrorKind, why: Why) {
        match self.conns[i].session.as_mut() {
            Some(session) => {
                session.fail(kind, why, &mut self.events);
                self.count_events(i);
            }
            None => self.setup_failed(i, kind, why),
        }
    }
}
