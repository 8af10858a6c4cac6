//! The text report: shb's layout, with oha's latency distribution.

use std::fmt::Write;
use std::io::IsTerminal;

use hdrhistogram::Histogram;
use volley_engine::{Counters, ErrorKind, Stage};

use super::{PERCENTILES, Report, WorkerLine, per_sec};
use crate::printable::one_line;

pub(crate) fn to_text(r: &Report) -> String {
    let c = &r.stats.counters;
    let mut out = String::new();
    let secs = r.duration.as_secs_f64();
    let _ = writeln!(out, "URL:          {}", r.url);
    let _ = write!(out, "Protocol:     {}", r.protocol);
    if let Some(n) = r.streams {
        let streams = if n == 1 { "stream" } else { "streams" };
        let _ = write!(out, ", {n} {streams} per connection");
    }
    if let Some(congestion) = r.quic_congestion {
        let _ = write!(out, ", {} congestion control", congestion.name());
    }
    out.push('\n');
    let _ = writeln!(out, "Threads:      {}", r.threads);
    if let Some(engine) = engine(r) {
        let _ = writeln!(out, "Engine:       {engine}");
    }
    let _ = writeln!(out, "Connections:  {}", r.connections);
    if !r.connection_stages.is_empty() {
        connection_stages(&mut out, &r.connection_stages);
    }
    let _ = writeln!(
        out,
        "Requests:     {} ({} ok, {} errors, of which {} connect) in {:.3}s",
        c.total(),
        c.ok,
        c.errors(),
        c.errors_of(ErrorKind::Connect),
        secs
    );
    let _ = writeln!(out, "Requests/sec: {:.1}", r.requests_per_sec());
    if !r.scenarios.is_empty() {
        iterations(&mut out, r);
    }
    if c.abandoned > 0 || c.extract_failed > 0 {
        abandoned(&mut out, c);
    }
    if c.redirects > 0 {
        let _ = writeln!(out, "Redirects:    {} followed (each hop is among the requests)", c.redirects);
    }
    if !r.feeders.is_empty() {
        feeders(&mut out, r);
    }
    if let Some(w) = &r.warm_up {
        warm_up(&mut out, w);
    }
    let _ = writeln!(
        out,
        "Transfer:     recv {:.2} MB/s ({} bytes), sent {:.2} MB/s ({} bytes)",
        per_sec(c.bytes_received, r.duration) / 1e6,
        c.bytes_received,
        per_sec(c.bytes_sent, r.duration) / 1e6,
        c.bytes_sent
    );
    if c.truncated > 0 {
        let _ = writeln!(
            out,
            "Truncated:    {} UDP datagrams were larger than the receive buffer and were dropped by QUIC",
            c.truncated
        );
    }
    if c.dropped_packets > 0 {
        let _ = writeln!(
            out,
            "Dropped:      {} QUIC packets could not be parsed or opened (stray, forged or cut short) and were dropped",
            c.dropped_packets
        );
    }
    if let Some(rate) = r.rate {
        schedule(&mut out, r, rate, r.achieved_rate());
    }
    let statuses: Vec<_> = c.statuses().collect();
    if !statuses.is_empty() {
        let _ = writeln!(out, "Status codes:");
        for (code, n) in statuses {
            let _ = writeln!(out, "  [{code}] {n}");
        }
    }
    retry_after(&mut out, c);
    if c.errors() > 0 {
        let _ = writeln!(out, "Errors:");
        for kind in ErrorKind::ALL {
            let n = c.errors_of(kind);
            if n > 0 {
                let why = r.error_samples.iter().find(|(k, _)| *k == kind).map(|(_, w)| w.as_str()).unwrap_or("");
                let _ = writeln!(out, "  [{}] {n}  ({why})", kind.name());
            }
        }
    }
    let lat = &r.stats.histograms.latency;
    if r.rate.is_some() {
        side_by_side(&mut out, lat, &r.stats.histograms.service);
    } else if !lat.is_empty() {
        let _ = writeln!(out, "Latency (ms):");
        let _ = writeln!(out, "  min {}  mean {:.3}  max {}", ms(lat.min()), lat.mean() / 1e6, ms(lat.max()));
        let _ = writeln!(out, "Latency distribution:");
        for (label, q) in PERCENTILES {
            let _ = writeln!(out, "  {label}% in {} ms", ms(lat.value_at_quantile(q)));
        }
    }
    summary_line(&mut out, "Connect (ms):", &r.stats.histograms.connect);
    summary_line(&mut out, "First byte (ms):", &r.stats.histograms.ttfb);
    // Part of every latency above; printed once some response was held at all.
    let hold = &r.stats.histograms.hold;
    if hold.max() > 0 {
        summary_line(&mut out, "Client hold (ms):", hold);
    }
    if !r.scenarios.is_empty() {
        scenarios(&mut out, r);
    }
    if !r.names.is_empty() {
        names(&mut out, r);
        checks(&mut out, r, std::io::stdout().is_terminal());
        abandoned_by_name(&mut out, r);
        redirects_by_name(&mut out, r);
        think_by_name(&mut out, r);
    }
    if r.distributed {
        workers(&mut out, r);
    }
    for w in r.warnings() {
        let _ = writeln!(out, "Warning: {w}");
    }
    out
}

/// A mix: one row per name, in the targets file's order, every name even if none of its
/// requests finished.
fn names(out: &mut String, r: &Report) {
    const HEAD: [&str; 10] = ["name", "requests", "ok", "errors", "req/s", "p50", "p90", "p99", "max", "status codes"];
    let dash = || "-".to_string();
    let rows: Vec<[String; 10]> = r
        .name_lines()
        .map(|line| {
            let (c, lat) = (&line.stats.counters, &line.stats.latency);
            let at = |q: f64| if lat.is_empty() { dash() } else { ms(lat.value_at_quantile(q)) };
            let statuses: Vec<String> = c.statuses().map(|(code, n)| format!("{code}×{n}")).collect();
            [
                one_line(line.name),
                c.total().to_string(),
                c.ok.to_string(),
                c.errors().to_string(),
                format!("{:.1}", per_sec(c.total(), r.duration)),
                at(0.5),
                at(0.9),
                at(0.99),
                if lat.is_empty() { dash() } else { ms(lat.max()) },
                if statuses.is_empty() { dash() } else { statuses.join(",") },
            ]
        })
        .collect();
    let _ = writeln!(out, "Names (latency in ms):");
    // The name and the status codes read from the left, the numbers line up on the right.
    table(out, &HEAD, &rows, true);
}

/// A scenario run: per scenario, its iterations and (for a flow, whose iterations are a user's
/// journey) how long the completed ones took; with pacing, its cadence and the iterations that
/// started late.
fn scenarios(out: &mut String, r: &Report) {
    let paced = r.is_paced();
    let mut head = vec!["scenario", "weight", "started", "completed", "abandoned"];
    if paced {
        head.extend(["pacing", "late", "missed"]);
    }
    head.extend(["p50", "p90", "p99", "max"]);
    let dash = || "-".to_string();
    let rows: Vec<Vec<String>> = r
        .scenario_rows()
        .map(|row| {
            let s = &row.stats;
            let at = |q: f64| row.duration_ms(q).map_or_else(dash, |v| format!("{v:.3}"));
            let mut cells = vec![
                one_line(&row.line.name),
                row.line.weight.to_string(),
                s.started.to_string(),
                s.completed.to_string(),
                s.abandoned.to_string(),
            ];
            if paced {
                let pacing = row.pacing_ms().map_or_else(dash, |p| format!("{p:.3}"));
                cells.extend([pacing, s.late.to_string(), s.missed.to_string()]);
            }
            let max = if s.duration.is_empty() { dash() } else { ms(s.duration.max()) };
            cells.extend([at(0.5), at(0.9), at(0.99), max]);
            cells
        })
        .collect();
    let _ = writeln!(
        out,
        "Scenarios (iteration duration{} in ms, flows only; think time included):",
        if paced { " and pacing" } else { "" }
    );
    table(out, &head, &rows, false);
}

/// `rows` under `head`, each column as wide as its widest cell: the first column reads from
/// the left, the others line up on the right, but the last, which reads from the left when
/// `last_left`.
fn table<R: AsRef<[String]>>(out: &mut String, head: &[&str], rows: &[R], last_left: bool) {
    let n = head.len();
    let width = |column: usize| {
        rows.iter()
            .map(|row| row.as_ref()[column].chars().count())
            .chain([head[column].chars().count()])
            .max()
            .unwrap_or(0)
    };
    let widths: Vec<usize> = (0..n).map(width).collect();
    let head: Vec<String> = head.iter().map(|h| h.to_string()).collect();
    let right = if last_left { n - 1 } else { n };
    for row in std::iter::once(head.as_slice()).chain(rows.iter().map(AsRef::as_ref)) {
        let _ = write!(out, "  {:<w$}", row[0], w = widths[0]);
        for (cell, w) in row[1..right].iter().zip(&widths[1..right]) {
            let _ = write!(out, "  {cell:>w$}");
        }
        if last_left {
            let _ = write!(out, "  {}", row[n - 1]);
        }
        out.push('\n');
    }
}

/// Where iterations ended early: for each name that has any, the iterations abandoned at its
/// steps and the responses whose extraction failed.
fn abandoned_by_name(out: &mut String, r: &Report) {
    by_name(out, r, "Abandoned (by the step each iteration ended at):", |c| {
        (c.abandoned > 0 || c.extract_failed > 0)
            .then(|| format!("{}{}", iterations_count(c.abandoned), extractions_failed(c.extract_failed)))
    });
}

/// Where redirects were followed: for each name that followed any, how many.
fn redirects_by_name(out: &mut String, r: &Report) {
    by_name(out, r, "Redirects followed (by step name; the final answers were checked):", |c| {
        (c.redirects > 0).then(|| c.redirects.to_string())
    });
}

/// Where users paused: for each name whose steps have a think time, the pauses after them and
/// their mean.
fn think_by_name(out: &mut String, r: &Report) {
    by_name(out, r, "Think time (by step name; in no latency):", |c| {
        (c.thinks > 0).then(|| format!("{} pauses, mean {} ms", c.thinks, ms(c.think_nanos / c.thinks)))
    });
}

/// A section under `title` with a line for each name whose counters `said` something about,
/// the names aligned; nothing when it said nothing about any.
fn by_name(out: &mut String, r: &Report, title: &str, said: impl Fn(&Counters) -> Option<String>) {
    let lines: Vec<(String, String)> =
        r.name_lines().filter_map(|l| Some((one_line(l.name), said(&l.stats.counters)?))).collect();
    if lines.is_empty() {
        return;
    }
    let width = lines.iter().map(|(name, _)| name.chars().count()).max().unwrap_or(0);
    let _ = writeln!(out, "{title}");
    for (name, text) in lines {
        let _ = writeln!(out, "  {name:<width$}  {text}");
    }
}

/// The run's iterations that ended early, and its failed extractions.
fn abandoned(out: &mut String, c: &Counters) {
    let _ = writeln!(
        out,
        "Abandoned:    {} ended early, at a failed request or extraction{}",
        iterations_count(c.abandoned),
        extractions_failed(c.extract_failed)
    );
}

fn iterations_count(n: u64) -> String {
    format!("{n} {}", if n == 1 { "iteration" } else { "iterations" })
}

/// ` (3 extractions failed)`, or nothing when none did.
fn extractions_failed(n: u64) -> String {
    match n {
        0 => String::new(),
        1 => " (1 extraction failed)".into(),
        n => format!(" ({n} extractions failed)"),
    }
}

/// A scenario's checks: for each name that has any, each check with the share of responses that
/// passed it, marked as k6 marks them (✓ all passed, ✗ some failed, - none judged; `ok` and
/// `FAIL` where the output is not a terminal).
fn checks(out: &mut String, r: &Report, terminal: bool) {
    let lines: Vec<_> = r.name_lines().filter(|l| !l.checks.is_empty()).collect();
    if lines.is_empty() {
        return;
    }
    let (pass, fail, none) = if terminal { ("✓", "✗", "-") } else { ("ok  ", "FAIL", "-   ") };
    let _ = writeln!(out, "Checks:");
    for line in &lines {
        let _ = writeln!(out, "  {}", one_line(line.name));
        for (name, c) in line.check_lines() {
            let mark = match (c.total(), c.failed) {
                (0, _) => none,
                (_, 0) => pass,
                _ => fail,
            };
            let share = c.share_passed().map_or_else(|| "-".to_string(), |s| format!("{:.2}%", s * 100.0));
            let _ = writeln!(out, "    {mark} {}  {share}  ({} passed, {} failed)", one_line(name), c.passed, c.failed);
        }
    }
}

/// A ramp of the connection count: each stage's way from the previous target to its own (the
/// per-second series gives the count at each second's end).
fn connection_stages(out: &mut String, stages: &[Stage]) {
    let mut from = 0;
    let steps: Vec<String> = stages
        .iter()
        .map(|s| {
            let step = format!("{from}→{} in {:?}", s.target, s.duration);
            from = s.target;
            step
        })
        .collect();
    let _ = writeln!(out, "Stages:       connections {}", steps.join(", "));
}

/// The warm-up's requests and latency: counted apart, in none of the other numbers.
fn warm_up(out: &mut String, w: &super::WarmUp) {
    let (c, lat) = (&w.stats.counters, &w.stats.histograms.latency);
    let latency = if lat.is_empty() {
        String::new()
    } else {
        format!(", latency p50 {} ms, p99 {} ms", ms(lat.value_at_quantile(0.5)), ms(lat.value_at_quantile(0.99)))
    };
    let _ = writeln!(
        out,
        "Warm-up:      first {} s: {} requests ({} ok, {} errors){latency}; not in the numbers here",
        w.seconds,
        c.total(),
        c.ok,
        c.errors()
    );
}

/// The open model's own truth: the rate asked for and achieved, and the requests that did not
/// go out on time.
fn schedule(out: &mut String, r: &Report, rate: u64, achieved: Option<f64>) {
    let c = &r.stats.counters;
    let lateness = &r.stats.histograms.lateness;
    let _ = match achieved {
        Some(achieved) => writeln!(
            out,
            "Rate:         {rate}/s requested, {achieved:.1}/s achieved ({} requests sent)",
            lateness.len()
        ),
        None => {
            writeln!(out, "Rate:         {rate}/s requested ({} sent: too few to measure a rate by)", lateness.len())
        }
    };
    let _ = writeln!(
        out,
        "Schedule:     {} sent late (over 1 ms after due), {} due with no connection free, {} never sent",
        c.late, c.blocked, c.unsent
    );
    summary_line(out, "Send lateness (ms):", lateness);
}

/// Open model: latency from when each request was due (corrected for coordinated omission)
/// beside its service time, from when it was sent.
fn side_by_side(out: &mut String, due: &Histogram<u64>, sent: &Histogram<u64>) {
    if due.is_empty() {
        return;
    }
    let _ = writeln!(out, "Latency (ms):   from due (corrected)   service time (from sent)");
    let _ = writeln!(out, "  min          {:>20}   {:>24}", ms(due.min()), ms(sent.min()));
    let _ = writeln!(out, "  mean         {:>20.3}   {:>24.3}", due.mean() / 1e6, sent.mean() / 1e6);
    let _ = writeln!(out, "  max          {:>20}   {:>24}", ms(due.max()), ms(sent.max()));
    let _ = writeln!(out, "Latency distribution:");
    for (label, q) in PERCENTILES {
        let _ = writeln!(
            out,
            "  {:<11}  {:>17} ms   {:>21} ms",
            format!("{label}% in"),
            ms(due.value_at_quantile(q)),
            ms(sent.value_at_quantile(q))
        );
    }
}

/// The engine the load ran on: one name, or, when workers differ, both (each worker's line
/// says its own).
fn engine(r: &Report) -> Option<String> {
    let mut engines: Vec<_> = r.workers.iter().filter_map(|w| w.ring.as_ref()).map(|ring| ring.engine).collect();
    engines.sort_by_key(|e| e.name());
    engines.dedup();
    match engines.as_slice() {
        [] => r.ring.as_ref().map(|ring| ring.engine.name().to_string()),
        [one] => Some(one.name().to_string()),
        _ => Some(format!("{} (per worker below)", engines.iter().map(|e| e.name()).collect::<Vec<_>>().join(" and "))),
    }
}

/// Summarised workers with a failure listed one by one, at most: the rest are counted.
const FAILED_SHOWN: usize = 10;

/// The per-worker breakdown and the start skew. Past the run's series budget (the JSON's
/// `workerSeries`), workers are one line together unless they failed: how many, what they did in
/// all, and the lowest and highest of their rates and percentiles.
fn workers(out: &mut String, r: &Report) {
    let _ = writeln!(out, "Workers:");
    let detailed = r.worker_series.map_or(r.workers.len(), |(s, _)| s.detailed.min(r.workers.len()));
    let (shown, summarised) = r.workers.split_at(detailed);
    for w in shown {
        worker(out, w);
    }
    let failed: Vec<&WorkerLine> = summarised.iter().filter(|w| w.failure.is_some()).collect();
    for w in failed.iter().take(FAILED_SHOWN) {
        worker(out, w);
    }
    if !summarised.is_empty() {
        summarised_workers(out, summarised, failed.len());
    }
    if let Some(skew) = r.start_skew() {
        let _ = writeln!(
            out,
            "Start skew:   {:.3} ms (largest gap between a worker's start and the planned instant)",
            skew.as_secs_f64() * 1e3
        );
    }
}

/// What a worker's line shows: its counters, latency p50 and p99, and requests sent (open
/// model); from its statistics, or a summarised worker's digest. None when it has neither.
fn numbers(w: &WorkerLine) -> Option<(&Counters, u64, u64, u64)> {
    match (&w.stats, &w.digest) {
        (Some(s), _) => {
            let lat = &s.histograms.latency;
            Some((&s.counters, lat.value_at_quantile(0.5), lat.value_at_quantile(0.99), s.histograms.lateness.len()))
        }
        (None, Some(d)) => Some((&d.counters, d.latency.at(0.5), d.latency.at(0.99), d.lateness.count)),
        (None, None) => None,
    }
}

fn worker_name(w: &WorkerLine) -> String {
    match w.info.as_ref().map(|i| &i.name) {
        Some(n) if *n != w.address => format!("{} ({n})", w.address),
        _ => w.address.clone(),
    }
}

/// One worker's line (and, when it failed, what became of it).
fn worker(out: &mut String, w: &WorkerLine) {
    let name = worker_name(w);
    let Some((c, p50, p99, sent)) = numbers(w) else {
        let _ = writeln!(out, "  {name}  FAILED: {}", w.failure.as_deref().unwrap_or("no result"));
        return;
    };
    let start = w.start_offset.map(|o| format!("  start {:+.3} ms", o as f64 / 1e6)).unwrap_or_default();
    let engine = w.ring.as_ref().map(|ring| format!("  {}", ring.engine.name())).unwrap_or_default();
    let rate = match w.rate {
        Some(rate) => format!("  rate {:.1}/s of {rate}/s", per_sec(sent, w.duration)),
        None => String::new(),
    };
    let _ = writeln!(
        out,
        "  {name}{engine}  {} conns  {} requests  {:.1} req/s{rate}  {} errors  p50 {} ms  p99 {} ms{start}",
        w.connections,
        c.total(),
        per_sec(c.total(), w.duration),
        c.errors(),
        ms(p50),
        ms(p99),
    );
    match &w.failure {
        Some(f) if w.partial => {
            let _ = writeln!(out, "    lost: {f} (counted: its first {} s, from its intervals)", w.duration.as_secs());
        }
        Some(f) => {
            let _ = writeln!(out, "    incomplete: {f}");
        }
        None => {}
    }
}

/// The summarised workers in one line: `+ 900 more workers (summarised): ...`.
fn summarised_workers(out: &mut String, workers: &[WorkerLine], failed: usize) {
    let (mut connections, mut requests, mut errors, mut rps) = (0usize, 0u64, 0u64, 0.0f64);
    let (mut rates, mut p50s, mut p99s) = (Range::default(), Range::default(), Range::default());
    for w in workers {
        connections += w.connections;
        let Some((c, p50, p99, _)) = numbers(w) else { continue };
        requests += c.total();
        errors += c.errors();
        let rate = per_sec(c.total(), w.duration);
        rps += rate;
        rates.add(rate);
        if c.ok > 0 {
            p50s.add(p50 as f64);
            p99s.add(p99 as f64);
        }
    }
    let _ = write!(
        out,
        "  + {} more workers (summarised; -j lists each): {connections} conns  {requests} requests  {rps:.1} req/s  {errors} errors",
        workers.len()
    );
    if let Some((lo, hi)) = rates.get() {
        let _ = write!(out, "; each {lo:.1} to {hi:.1} req/s");
    }
    if let (Some((lo50, hi50)), Some((lo99, hi99))) = (p50s.get(), p99s.get()) {
        let _ = write!(
            out,
            ", p50 {} to {} ms, p99 {} to {} ms",
            ms(lo50 as u64),
            ms(hi50 as u64),
            ms(lo99 as u64),
            ms(hi99 as u64)
        );
    }
    match failed {
        0 => {}
        n if n <= FAILED_SHOWN => {
            let _ = write!(out, "; {n} failed (above)");
        }
        n => {
            let _ = write!(out, "; {n} failed ({FAILED_SHOWN} above)");
        }
    }
    let _ = writeln!(out);
}

/// The lowest and highest of some numbers.
#[derive(Default)]
struct Range(Option<(f64, f64)>);

impl Range {
    fn add(&mut self, v: f64) {
        self.0 = Some(self.0.map_or((v, v), |(lo, hi)| (lo.min(v), hi.max(v))));
    }

    fn get(&self) -> Option<(f64, f64)> {
        self.0
    }
}

/// `Retry-After: 123 responses (429: 3, 503: 120), largest 30 s`, only when some came.
fn retry_after(out: &mut String, c: &Counters) {
    let r = &c.retry_after;
    if r.total() == 0 {
        return;
    }
    let per_status: Vec<String> = r.statuses().map(|(code, n)| format!("{code}: {n}")).collect();
    let _ = write!(out, "Retry-After:  {} responses ({})", r.total(), per_status.join(", "));
    if let Some(largest) = r.largest_seconds {
        let _ = write!(out, ", largest {largest} s");
    }
    if r.dates > 0 {
        let _ = write!(out, ", {} as a date", r.dates);
    }
    out.push('\n');
}

fn summary_line(out: &mut String, label: &str, h: &Histogram<u64>) {
    if h.is_empty() {
        return;
    }
    let _ = writeln!(
        out,
        "{label:<17} min {}  p50 {}  p99 {}  max {}  ({} samples)",
        ms(h.min()),
        ms(h.value_at_quantile(0.5)),
        ms(h.value_at_quantile(0.99)),
        ms(h.max()),
        h.len()
    );
}

fn ms(nanos: u64) -> String {
    format!("{:.3}", nanos as f64 / 1e6)
}

#[cfg(test)]
mod tests;

/// The feeders: each with its mode and rows, the rows taken over all, and whether the data ran
/// out.
fn feeders(out: &mut String, r: &Report) {
    let c = &r.stats.counters;
    let each: Vec<String> = r.feeders.iter().map(|f| format!("{} ({}, {} rows)", f.name, f.mode, f.rows)).collect();
    let ran_out =
        if c.ran_out > 0 { format!("; the data ran out on {} engine thread(s)", c.ran_out) } else { String::new() };
    let _ = writeln!(out, "Feeders:      {}: {} rows taken{ran_out}", each.join(", "), c.feeder_rows);
}

/// A scenario run's iterations (passes of a scenario; what -n and --rate count), and the
/// scenarios they were drawn from by weight.
fn iterations(out: &mut String, r: &Report) {
    let n = r.stats.counters.iterations;
    let total: u64 = r.scenarios.iter().map(|s| u64::from(s.weight)).sum();
    let shares: Vec<String> = r
        .scenarios
        .iter()
        .map(|s| format!("{} {:.0}%", s.name, 100.0 * f64::from(s.weight) / total.max(1) as f64))
        .collect();
    let _ = writeln!(
        out,
        "Iterations:   {n} ({:.1}/sec) of scenarios drawn by weight: {}",
        per_sec(n, r.duration),
        shares.join(", ")
    );
}
