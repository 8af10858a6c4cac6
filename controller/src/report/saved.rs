//! Reading saved JSON reports back for `volley merge`: each report becomes one worker line,
//! with its counters and its histograms decoded from the report itself, and its warm-up
//! section, if any, merged apart like a worker's warm-up. A mix's names are merged by name:
//! reports of different mixes merge into the names of all of them, in order of appearance.

use std::time::Duration;

use base64::Engine;
use hdrhistogram::Histogram;
use serde_json::Value;
use volley_engine::{
    CheckCounts, Counters, ErrorKind, MAX_CHECKS, MAX_NAMES, MAX_SCENARIOS, NameStats, QuicCongestion, ScenarioStats,
    Stats, decode_histogram, new_histogram,
};

use super::{HttpVersion, Protocols, Report, ScenarioLine, WorkerLine};
use crate::error::CliError;
use crate::printable::one_line;

/// The longest span any field of a saved report may say, in seconds (about 31 years): far past
/// the longest run the engine takes (a year) and its CPU time on every thread, far below what a
/// `Duration` and the report's arithmetic hold. A larger number is a broken or hostile file.
const LONGEST_SECONDS: f64 = 1e9;

/// One report merged from saved reports, as if each had been a worker of one run.
pub(crate) fn from_saved(paths: &[std::path::PathBuf]) -> Result<Report, CliError> {
    let mut texts = Vec::with_capacity(paths.len());
    for path in paths {
        let text = std::fs::read_to_string(path)
            .map_err(|e| CliError::BadReport { path: path.display().to_string(), why: e.to_string() })?;
        texts.push((path.display().to_string(), text));
    }
    from_texts(&texts)
}

/// [`from_saved`] on reports already read: (the file's name, its text).
fn from_texts(texts: &[(String, String)]) -> Result<Report, CliError> {
    let mut workers = Vec::with_capacity(texts.len());
    let mut urls: Vec<String> = Vec::new();
    let mut protocols: Option<Protocols> = None;
    let mut streams: Vec<Option<u32>> = Vec::new();
    let mut congestions: Vec<Option<QuicCongestion>> = Vec::new();
    let mut warm_up_seconds = 0;
    // What the merged report will count, added up checked: a sum past u64 is refused here,
    // where the file that broke it can be named, not saturated later without a word.
    let mut totals = Counters::default();
    let mut warm_up_totals = Counters::default();
    // Every report's names, each once, and what they count so far (added up checked likewise).
    let mut names: Vec<String> = Vec::new();
    // For each name, its checks' names, and how many there are in all.
    let mut checks: Vec<Vec<String>> = Vec::new();
    let mut checks_total = 0;
    let mut name_totals: Vec<Counters> = Vec::new();
    // Every report's scenarios, each name once (with the weight it first had).
    let mut scenarios: Vec<ScenarioLine> = Vec::new();
    for (path, text) in texts {
        let bad = |why: String| CliError::BadReport { path: path.clone(), why };
        let report: Value = serde_json::from_str(text).map_err(|e| bad(format!("not a JSON report: {e}")))?;
        let url = one_line(report["url"].as_str().unwrap_or_default());
        if !urls.contains(&url) {
            urls.push(url);
        }
        let protocol = match report["protocol"].as_str() {
            None => Protocols::one(HttpVersion::Http1),
            Some(name) => Protocols::parse(name).ok_or_else(|| {
                bad(format!("protocol '{}' is not one volley writes (HTTP/1.1, HTTP/2 or HTTP/3)", one_line(name)))
            })?,
        };
        match &mut protocols {
            Some(all) => all.add(&protocol),
            None => protocols = Some(protocol),
        }
        let asked = report["streamsPerConnection"].as_u64().and_then(|n| u32::try_from(n).ok());
        if !streams.contains(&asked) {
            streams.push(asked);
        }
        let congestion = report["quicCongestion"]
            .as_str()
            .and_then(|name| QuicCongestion::ALL.into_iter().find(|c| c.name() == name));
        if !congestions.contains(&congestion) {
            congestions.push(congestion);
        }
        // Runs merged side by side: their warm-ups were the same seconds, or the longest covers
        // the others.
        let seconds = report["warmUp"]["seconds"].as_u64().and_then(|s| u32::try_from(s).ok()).unwrap_or(0);
        warm_up_seconds = warm_up_seconds.max(seconds);
        let mut line = line(path, &report).map_err(bad)?;
        // Scenarios go by name too, each with the weight it first had.
        for entry in report["scenarios"].as_array().into_iter().flatten() {
            let name = one_line(entry["name"].as_str().unwrap_or_default());
            let index = match scenarios.iter().position(|known| known.name == name) {
                Some(index) => index,
                None if scenarios.len() < MAX_SCENARIOS => {
                    let weight = entry["weight"].as_u64().and_then(|w| u32::try_from(w).ok()).unwrap_or(1);
                    // Reports from before pacing have none.
                    let pacing = match entry["pacingSeconds"].as_f64() {
                        Some(s) if s > 0.0 && s <= volley_engine::MAX_PACING.as_secs_f64() => {
                            Some(Duration::from_secs_f64(s))
                        }
                        Some(_) => return Err(bad("a scenario's pacingSeconds is out of range".into())),
                        None => None,
                    };
                    scenarios.push(ScenarioLine { name, weight, pacing });
                    scenarios.len() - 1
                }
                None => {
                    return Err(bad(format!(
                        "its scenarios and those of the reports before it are more than the {MAX_SCENARIOS} a run may have"
                    )));
                }
            };
            if let Some(measured) = &mut line.stats {
                *measured.scenarios.entry(index) = scenario(entry).map_err(bad)?;
            }
        }
        for (name, mut stats, check_names) in mix_names(&report).map_err(bad)? {
            let index = match names.iter().position(|n| *n == name) {
                Some(index) => index,
                None if names.len() < MAX_NAMES => {
                    names.push(name);
                    checks.push(Vec::new());
                    name_totals.push(Counters::default());
                    names.len() - 1
                }
                None => {
                    return Err(bad(format!(
                        "its names and those of the reports before it are more than the {MAX_NAMES} a run may have"
                    )));
                }
            };
            if !name_totals[index].checked_merge(&stats.counters) || name_totals[index].total_checked().is_none() {
                return Err(bad(format!(
                    "the counts of name '{}' and those of the reports before it add up past what a 64-bit count holds",
                    names[index]
                )));
            }
            // Checks go by name: another report may list a name's checks in another order.
            let mut counts = Vec::new();
            for (check, c) in check_names.into_iter().zip(std::mem::take(&mut stats.checks)) {
                let known = &mut checks[index];
                let k = match known.iter().position(|n| *n == check) {
                    Some(k) => k,
                    None if checks_total < MAX_CHECKS => {
                        checks_total += 1;
                        known.push(check);
                        known.len() - 1
                    }
                    None => {
                        return Err(bad(format!(
                            "its checks and those of the reports before it are more than the {MAX_CHECKS} a run may have"
                        )));
                    }
                };
                if counts.len() <= k {
                    counts.resize(k + 1, CheckCounts::default());
                }
                counts[k] = c;
            }
            stats.checks = counts;
            if let Some(measured) = &mut line.stats {
                *measured.names.entry(index) = stats;
            }
        }
        let fits = |totals: &mut Counters, stats: Option<&Stats>| {
            stats.is_none_or(|s| totals.checked_merge(&s.counters) && totals.total_checked().is_some())
        };
        if !fits(&mut totals, line.stats.as_ref()) || !fits(&mut warm_up_totals, line.warm_up.as_ref()) {
            return Err(bad(
                "its counts and those of the reports before it add up past what a 64-bit count holds".into()
            ));
        }
        workers.push(line);
    }
    let mut report = Report::from_workers(urls.join(", "), workers, true, false, Vec::new());
    report.names = names;
    report.checks = checks;
    report.scenarios = scenarios;
    if let Some(w) = &mut report.warm_up {
        w.seconds = warm_up_seconds;
    }
    if let Some(protocols) = protocols {
        report.protocol = protocols;
    }
    // Merged runs asked for the same streams, or the number means nothing.
    report.streams = match streams.as_slice() {
        [one] => *one,
        _ => None,
    };
    // Likewise QUIC's congestion control: said only when every report ran with the same.
    report.quic_congestion = match congestions.as_slice() {
        [one] => *one,
        _ => None,
    };
    Ok(report)
}

fn line(path: &str, r: &Value) -> Result<WorkerLine, String> {
    let mut stats = Stats::new();
    requests(r, &mut stats.counters)?;
    let c = &mut stats.counters;
    c.bytes_received = count(r, "/bytesReceived")?;
    c.bytes_sent = count(r, "/bytesSent")?;
    c.clamped = count(r, "/clampedSamples")?;
    // Reports from before datagrams cut short were counted have none.
    c.truncated = r["truncatedDatagrams"].as_u64().unwrap_or(0);
    // Nor those from before stray QUIC packets were.
    c.dropped_packets = r["droppedPackets"].as_u64().unwrap_or(0);
    // Reports from before Retry-After was counted have none.
    if let Some(retry) = r.get("retryAfter") {
        for (code, n) in retry["statusCodes"].as_object().into_iter().flatten() {
            let code: u16 = code.parse().map_err(|_| format!("retryAfter status code '{code}' is not a number"))?;
            c.retry_after.add_status(code, n.as_u64().ok_or("a retryAfter count is not a number")?);
        }
        c.retry_after.largest_seconds = retry["largestSeconds"].as_u64();
        c.retry_after.dates = retry["dates"].as_u64().unwrap_or(0);
    }
    let h = &mut stats.histograms;
    for (field, into) in [("latency", &mut h.latency), ("connect", &mut h.connect), ("firstByte", &mut h.ttfb)] {
        *into = histogram(r, field)?.ok_or(format!("no histograms.{field}"))?;
    }
    // Reports from before the client's hold was measured have none.
    if let Some(hold) = histogram(r, "clientHold")? {
        h.hold = hold;
    }
    // The open model's (closed-model reports, and those from before, have none).
    if let Some(service) = histogram(r, "serviceTime")? {
        h.service = service;
    }
    if let Some(lateness) = histogram(r, "lateness")? {
        h.lateness = lateness;
    }
    let schedule_count = |field: &str| r["schedule"][field].as_u64().unwrap_or(0);
    let c = &mut stats.counters;
    (c.late, c.blocked, c.unsent) = (schedule_count("late"), schedule_count("blocked"), schedule_count("unsent"));
    c.iterations = r["iterations"].as_u64().unwrap_or(0);
    // Reports from before extractors, and of runs without scenarios, have none.
    c.extract_failed = r["extractFailed"].as_u64().unwrap_or(0);
    c.abandoned = r["abandoned"].as_u64().unwrap_or(0);
    // Reports from before redirects were followed have none.
    c.redirects = r["redirects"].as_u64().unwrap_or(0);
    (c.thinks, c.think_nanos) = think(&r["think"]);
    c.feeder_rows = r["feeders"]["rowsTaken"].as_u64().unwrap_or(0);
    c.ran_out = r["feeders"]["threadsRanOut"].as_u64().unwrap_or(0);
    if stats.histograms.latency.len() != stats.counters.ok {
        return Err(format!(
            "its latency histogram holds {} samples but it counts {} ok requests",
            stats.histograms.latency.len(),
            stats.counters.ok
        ));
    }
    let error_samples = ErrorKind::ALL
        .iter()
        .filter_map(|k| r["errorSamples"][k.name()].as_str().map(|why| (*k, one_line(why))))
        .collect();
    Ok(WorkerLine {
        address: path.to_string(),
        info: None,
        connections: size(r, "/connections")?,
        rate: r["schedule"]["requestedPerSec"].as_u64(),
        threads: size(r, "/threads")?,
        duration: seconds(r, "/durationSeconds")?,
        // Reports from before the client's CPU was measured have none.
        client_cpu: match r.pointer("/clientCpuSeconds") {
            None => Duration::ZERO,
            Some(_) => seconds(r, "/clientCpuSeconds")?,
        },
        interrupted: r["interrupted"].as_bool().unwrap_or(false),
        start_offset: None,
        stats: Some(stats),
        digest: None,
        error_samples,
        ring: None,
        failure: None,
        stream_limit: r["streamLimit"].as_u64().and_then(|n| u32::try_from(n).ok()),
        partial: r["totalsAreLowerBounds"].as_bool().unwrap_or(false),
        intervals: Vec::new(),
        // A saved report's numbers are its measurement already; its warm-up is apart.
        warm_up: warm_up(&r["warmUp"]).map_err(|why| format!("warmUp: {why}"))?,
    })
}

/// What a report's section (the report itself, or its warm-up) says of its requests: ok,
/// aborted, refused, errors by kind, statuses, connections made.
fn requests(r: &Value, c: &mut Counters) -> Result<(), String> {
    c.ok = count(r, "/requests/ok")?;
    c.aborted = count(r, "/requests/aborted")?;
    c.connects = count(r, "/connectionsMade")?;
    // Reports from before HTTP/2 have no such field.
    c.refused = r.pointer("/requests/refused").map_or(Ok(0), |_| count(r, "/requests/refused"))?;
    for kind in ErrorKind::ALL {
        c.add_errors(kind, count(r, &format!("/errors/{}", kind.name()))?);
    }
    for (code, n) in r["statusCodes"].as_object().into_iter().flatten() {
        let code: u16 = code.parse().map_err(|_| format!("status code '{code}' is not a number"))?;
        c.add_status(code, n.as_u64().ok_or("a status count is not a number")?);
    }
    Ok(())
}

/// A report's `warmUp` section as statistics (its requests, statuses, connections and latency
/// histogram: what the section holds); None when the run had no warm-up.
fn warm_up(w: &Value) -> Result<Option<Stats>, String> {
    if w.is_null() {
        return Ok(None);
    }
    let mut stats = Stats::new();
    requests(w, &mut stats.counters)?;
    stats.histograms.latency = histogram(w, "latency")?.ok_or("no histograms.latency")?;
    if stats.histograms.latency.len() != stats.counters.ok {
        return Err(format!(
            "its latency histogram holds {} samples but it counts {} ok requests",
            stats.histograms.latency.len(),
            stats.counters.ok
        ));
    }
    Ok(Some(stats))
}

/// A report's `names`: each name of its mix with its statistics, in its order. Reports from
/// before mixes, and of runs without one, have none.
/// A saved report's names, each with its statistics and its checks' names (which
/// `NameStats::checks` counts in order).
fn mix_names(r: &Value) -> Result<Vec<(String, NameStats, Vec<String>)>, String> {
    let Some(entries) = r.get("names") else { return Ok(Vec::new()) };
    let entries = entries.as_array().ok_or("names is not a list")?;
    if entries.len() > MAX_NAMES {
        return Err(format!("{} names is more than the {MAX_NAMES} a run may have", entries.len()));
    }
    let mut out: Vec<(String, NameStats, Vec<String>)> = Vec::with_capacity(entries.len());
    for (i, entry) in entries.iter().enumerate() {
        let name = one_line(entry["name"].as_str().ok_or_else(|| format!("names/{i} has no name"))?);
        if out.iter().any(|(n, _, _)| *n == name) {
            return Err(format!("names/{i}: '{name}' is there twice"));
        }
        let (stats, checks) = name_stats(entry).map_err(|why| format!("names/{i} ('{name}'): {why}"))?;
        out.push((name, stats, checks));
    }
    Ok(out)
}

/// One name's outcomes, statuses, histograms and checks (their counts, and their names), as
/// `names` holds them; a report from before checks has none.
fn name_stats(entry: &Value) -> Result<(NameStats, Vec<String>), String> {
    let mut stats = NameStats::new();
    let c = &mut stats.counters;
    c.ok = count(entry, "/requests/ok")?;
    for kind in ErrorKind::ALL {
        c.add_errors(kind, count(entry, &format!("/errors/{}", kind.name()))?);
    }
    for (code, n) in entry["statusCodes"].as_object().into_iter().flatten() {
        let code: u16 = code.parse().map_err(|_| format!("status code '{code}' is not a number"))?;
        c.add_status(code, n.as_u64().ok_or("a status count is not a number")?);
    }
    // Reports from before extractors have none.
    c.extract_failed = entry["extractFailed"].as_u64().unwrap_or(0);
    c.abandoned = entry["abandoned"].as_u64().unwrap_or(0);
    c.redirects = entry["redirects"].as_u64().unwrap_or(0);
    (c.thinks, c.think_nanos) = think(&entry["think"]);
    stats.latency = histogram(entry, "latency")?.ok_or("no histograms.latency")?;
    stats.ttfb = histogram(entry, "firstByte")?.ok_or("no histograms.firstByte")?;
    if stats.latency.len() != stats.counters.ok {
        return Err(format!(
            "its latency histogram holds {} samples but it counts {} ok requests",
            stats.latency.len(),
            stats.counters.ok
        ));
    }
    let mut names = Vec::new();
    for (k, check) in entry["checks"].as_array().into_iter().flatten().enumerate() {
        let name = one_line(check["name"].as_str().ok_or_else(|| format!("checks/{k} has no name"))?);
        if names.contains(&name) {
            return Err(format!("checks/{k}: '{name}' is there twice"));
        }
        let counts = CheckCounts { passed: count(check, "/passed")?, failed: count(check, "/failed")? };
        // Each judges some of the name's responses, once: the counts of merged reports then add
        // up no further than their ok counts, which are added up checked.
        if counts.passed.checked_add(counts.failed).is_none_or(|judged| judged > stats.counters.ok) {
            return Err(format!(
                "checks/{k} ('{name}') judged {} and {} responses, more than its {} ok",
                counts.passed, counts.failed, stats.counters.ok
            ));
        }
        stats.checks.push(counts);
        names.push(name);
    }
    Ok((stats, names))
}

fn count(r: &Value, pointer: &str) -> Result<u64, String> {
    r.pointer(pointer).and_then(Value::as_u64).ok_or_else(|| format!("no count at {pointer}"))
}

/// A count of connections or threads: none is past `u32::MAX`, so that the merge's sums of
/// them cannot overflow (a mutated report's `u64::MAX` threads did).
fn size(r: &Value, pointer: &str) -> Result<usize, String> {
    let n = count(r, pointer)?;
    u32::try_from(n).map(|n| n as usize).map_err(|_| format!("{pointer} is {n}, more than any run has"))
}

fn seconds(r: &Value, pointer: &str) -> Result<Duration, String> {
    let value = r.pointer(pointer).ok_or_else(|| format!("no duration at {pointer}"))?;
    value
        .as_f64()
        .filter(|s| (0.0..=LONGEST_SECONDS).contains(s))
        .map(Duration::from_secs_f64)
        .ok_or_else(|| format!("{pointer} is {value}, not a number of seconds from 0 to {LONGEST_SECONDS:e}"))
}

/// `histograms.FIELD` of a saved report, if it has one.
fn histogram(r: &Value, field: &str) -> Result<Option<Histogram<u64>>, String> {
    let Some(text) = r["histograms"][field].as_str() else { return Ok(None) };
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(text)
        .map_err(|e| format!("histograms.{field} is not base64: {e}"))?;
    decode_histogram(&bytes).map(Some).map_err(|e| format!("histograms.{field}: {e}"))
}

/// A scenario's iterations and durations (reports from before they were counted have none:
/// zeros and an empty histogram).
fn scenario(entry: &Value) -> Result<ScenarioStats, String> {
    let iterations = &entry["iterations"];
    let n = |field: &str| iterations[field].as_u64().unwrap_or(0);
    let s = ScenarioStats {
        started: n("started"),
        completed: n("completed"),
        abandoned: n("abandoned"),
        late: n("late"),
        missed: n("missed"),
        duration: histogram(entry, "duration")?.unwrap_or_else(new_histogram),
    };
    if s.duration.len() > s.completed {
        return Err(format!(
            "its scenario '{}' has {} iteration durations but {} completed iterations",
            one_line(entry["name"].as_str().unwrap_or_default()),
            s.duration.len(),
            s.completed
        ));
    }
    Ok(s)
}

/// A report's `think` (absent in reports from before think time was reported): the pauses and
/// their total in nanoseconds.
fn think(v: &serde_json::Value) -> (u64, u64) {
    (v["pauses"].as_u64().unwrap_or(0), (v["totalSeconds"].as_f64().unwrap_or(0.0) * 1e9).round() as u64)
}

#[cfg(test)]
mod tests;
