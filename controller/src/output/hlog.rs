//! `--hlog FILE`: the run as an HdrHistogram interval log, the format HdrHistogram's own tools
//! read (HistogramLogReader in Java, Python, Go...; HistogramLogProcessor, HdrHistogram's plotter).
//!
//! One line per second and latency kind, each tagged with its kind (`Tag=latency,`), holding
//! that second's histogram merged over every worker: the same seconds the progress line, the
//! CSV and the JSON series show, written as each one is complete, so a long run's log can be
//! followed while it grows. A last interval holds what no second did (the run's last partial
//! second, the responses that came after a deadline), so that the intervals of a kind add up
//! to the report's histogram of it. Values are nanoseconds; `Interval_Max` is in milliseconds
//! (the maximum divided by 1,000,000, HdrHistogram's convention for nanosecond logs);
//! timestamps are seconds from the run's start, which `#[StartTime]` and `#[BaseTime]` give
//! since the epoch.
//!
//! A run of a mix adds, for each name that finished requests in a second, its latency and time
//! to first byte, tagged `latency@NAME` and `ttfb@NAME`; a run of flows adds, for each scenario
//! that completed iterations in a second, their durations, tagged `duration@SCENARIO`. The last
//! interval holds each one's rest too. A tag ends at a comma and readers split lines on blanks,
//! so a name's bytes other than ASCII letters, digits and `-._~/:` are percent-encoded
//! (`latency@GET%20/users`). Checks are counts, not latencies: an interval log holds histograms
//! only, so their counts per second are in the CSV series instead.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use base64::Engine;
use hdrhistogram::Histogram;
use volley_engine::{Histograms, Stats, encode_histogram, new_histogram};

use crate::error::CliError;

/// Which of a set of histograms a kind is.
type Pick = fn(&Histograms) -> &Histogram<u64>;

/// The kinds logged and their tags, in the order each interval lists them. A new latency kind
/// is one line here.
const KINDS: [(&str, Pick); 6] = [
    ("latency", |h| &h.latency),
    // The open model's (--rate): service time and send lateness; empty in a closed run.
    ("service", |h| &h.service),
    ("lateness", |h| &h.lateness),
    ("connect", |h| &h.connect),
    ("ttfb", |h| &h.ttfb),
    ("hold", |h| &h.hold),
];

/// Nanoseconds per unit of `Interval_Max`: milliseconds.
const MAX_VALUE_DIVISOR: f64 = 1e6;

/// An interval log being written. Writing never stops the run: the first failure is kept,
/// nothing more is written, and [`IntervalLog::finish`] reports it.
pub(crate) struct IntervalLog {
    path: PathBuf,
    out: BufWriter<File>,
    /// When the load started, once it has; the header is written with the first interval.
    started: Option<SystemTime>,
    header_written: bool,
    /// The end of the last second logged, in seconds from the start.
    logged_until: u32,
    /// Per kind, the seconds logged so far: what the last interval takes from the totals.
    logged: Vec<Histogram<u64>>,
    /// A mix's names: their latency and first byte.
    names: Tagged<2>,
    /// A run's scenarios: their iterations' durations.
    scenarios: Tagged<1>,
    failure: Option<std::io::Error>,
}

/// Histograms kept per index (a mix's names, a run's scenarios), logged as `KIND@TAG`: the
/// tags, and per index what its seconds logged so far add up to (made when it first moves, so
/// as large again as the report's own histograms of those it keeps), to log the rest at the end.
struct Tagged<const N: usize> {
    kinds: [&'static str; N],
    tags: Vec<String>,
    logged: Vec<Option<Box<[Histogram<u64>; N]>>>,
}

impl<const N: usize> Tagged<N> {
    fn new(kinds: [&'static str; N]) -> Self {
        Tagged { kinds, tags: Vec::new(), logged: Vec::new() }
    }

    /// The names in index order, once the plan is known.
    fn name(&mut self, names: &[String]) {
        self.tags = names.iter().map(|n| tag_text(n)).collect();
        self.logged = names.iter().map(|_| None).collect();
    }

    /// Index `index`'s tags, a kind each (`latency@home`); none past the names.
    fn tags(&self, index: usize) -> Option<[String; N]> {
        let tag = self.tags.get(index)?;
        Some(self.kinds.map(|kind| format!("{kind}@{tag}")))
    }

    /// Index `index`'s histograms of a second, added to what is logged.
    fn add(&mut self, index: usize, histograms: [&Histogram<u64>; N]) {
        if let Some(slot) = self.logged.get_mut(index) {
            let logged = slot.get_or_insert_with(|| Box::new(std::array::from_fn(|_| new_histogram())));
            for (sum, h) in logged.iter_mut().zip(histograms) {
                // Both share volley's bounds, so adding cannot fail.
                let _ = sum.add(h);
            }
        }
    }

    /// Index `index`'s `totals` beyond its seconds logged; none when they lack logged samples
    /// (a worker's discarded: no rest is honest) or nothing is left.
    fn rest(&self, index: usize, totals: [&Histogram<u64>; N]) -> Option<[Histogram<u64>; N]> {
        let mut rest: [Histogram<u64>; N] = std::array::from_fn(|k| totals[k].clone());
        if let Some(Some(logged)) = self.logged.get(index) {
            for (h, logged) in rest.iter_mut().zip(logged.iter()) {
                h.subtract(logged).ok()?;
            }
        }
        rest.iter().any(|h| !h.is_empty()).then_some(rest)
    }
}

impl IntervalLog {
    /// Creates (or empties) `path` before any load starts: a path that cannot be written is a
    /// usage error, like a misspelt flag, not a failed run.
    pub(crate) fn create(path: &Path) -> Result<IntervalLog, CliError> {
        let file = File::create(path)
            .map_err(|e| CliError::Usage(format!("--hlog {}: cannot write it: {e}", path.display())))?;
        Ok(IntervalLog {
            path: path.to_path_buf(),
            out: BufWriter::new(file),
            started: None,
            header_written: false,
            logged_until: 0,
            logged: KINDS.iter().map(|_| new_histogram()).collect(),
            names: Tagged::new(["latency", "ttfb"]),
            scenarios: Tagged::new(["duration"]),
            failure: None,
        })
    }

    /// The mix's names in index order, once the plan is known: each second logs its names too.
    pub(crate) fn names(&mut self, names: &[String]) {
        self.names.name(names);
    }

    /// The run's scenarios in index order, once the plan is known: each second logs the
    /// durations of the iterations they completed.
    pub(crate) fn scenarios(&mut self, scenarios: &[String]) {
        self.scenarios.name(scenarios);
    }

    /// Logs `histograms` under `tags` (a `Tagged` set's, for one index), if it has them.
    fn tagged_lines<const N: usize>(
        &mut self,
        tags: Option<[String; N]>,
        histograms: [&Histogram<u64>; N],
        (start, length): (f64, f64),
    ) {
        for (tag, h) in tags.iter().flatten().zip(histograms) {
            self.line(tag, start, length, h);
        }
    }

    /// The load starts at `at` (wall clock).
    pub(crate) fn started(&mut self, at: SystemTime) {
        self.started = Some(at);
    }

    /// Second `second` of the run (it covers `second - 1` to `second`), merged over the workers.
    pub(crate) fn second(&mut self, second: u32, delta: &Stats) {
        let start = second.saturating_sub(1);
        for (i, (tag, of)) in KINDS.iter().enumerate() {
            let h = of(&delta.histograms);
            // Both share volley's bounds, so adding cannot fail.
            let _ = self.logged[i].add(h);
            self.line(tag, f64::from(start), 1.0, h);
        }
        let span = (f64::from(start), 1.0);
        for (index, n) in delta.names.iter() {
            self.names.add(index, [&n.latency, &n.ttfb]);
            self.tagged_lines(self.names.tags(index), [&n.latency, &n.ttfb], span);
        }
        for (index, s) in delta.scenarios.iter().filter(|(_, s)| !s.duration.is_empty()) {
            self.scenarios.add(index, [&s.duration]);
            self.tagged_lines(self.scenarios.tags(index), [&s.duration], span);
        }
        self.logged_until = self.logged_until.max(second);
        self.flush();
    }

    /// Logs what the report's `totals` hold beyond the seconds logged, as one last interval
    /// from the end of the last second to the end of the run (`duration`), then reports the
    /// first write that failed, if any.
    pub(crate) fn finish(mut self, totals: &Stats, duration: Duration) -> Result<(), CliError> {
        let mut rest = Vec::with_capacity(KINDS.len());
        for (i, (_, of)) in KINDS.iter().enumerate() {
            let mut h = of(&totals.histograms).clone();
            match h.subtract(&self.logged[i]) {
                Ok(()) => rest.push(h),
                Err(_) => break,
            }
        }
        if rest.len() < KINDS.len() {
            // A worker failed for numbers that cannot be true after some of its seconds were
            // logged: those seconds stay, its part left the report, so no remainder is honest.
            self.comment("the report's totals lack some samples of the seconds above (a worker's numbers were discarded): no last interval");
        } else if rest.iter().any(|h| !h.is_empty()) {
            let start = f64::from(self.logged_until);
            let length = (duration.as_secs_f64() - start).max(0.0);
            for ((tag, _), h) in KINDS.iter().zip(&rest) {
                self.line(tag, start, length, h);
            }
        }
        if rest.len() == KINDS.len() {
            let start = f64::from(self.logged_until);
            let span = (start, (duration.as_secs_f64() - start).max(0.0));
            for (index, n) in totals.names.iter() {
                if let Some([latency, ttfb]) = self.names.rest(index, [&n.latency, &n.ttfb]) {
                    self.tagged_lines(self.names.tags(index), [&latency, &ttfb], span);
                }
            }
            for (index, s) in totals.scenarios.iter() {
                if let Some([duration]) = self.scenarios.rest(index, [&s.duration]) {
                    self.tagged_lines(self.scenarios.tags(index), [&duration], span);
                }
            }
        }
        self.header();
        self.flush();
        match self.failure {
            None => Ok(()),
            Some(e) => Err(CliError::File { path: format!("--hlog {}", self.path.display()), why: e.to_string() }),
        }
    }

    fn line(&mut self, tag: &str, start: f64, length: f64, h: &Histogram<u64>) {
        self.header();
        let encoded = base64::engine::general_purpose::STANDARD.encode(encode_histogram(h));
        let max = h.max() as f64 / MAX_VALUE_DIVISOR;
        self.write(format_args!("Tag={tag},{start:.3},{length:.3},{max:.3},{encoded}\n"));
    }

    fn comment(&mut self, text: &str) {
        self.header();
        self.write(format_args!("#[{text}]\n"));
    }

    /// The header HdrHistogram's writers put first: version, start and base time, legend.
    fn header(&mut self) {
        if self.header_written {
            return;
        }
        self.header_written = true;
        // A run that never started is logged from now, with nothing in it.
        let start = self.started.unwrap_or_else(SystemTime::now).duration_since(UNIX_EPOCH).unwrap_or_default();
        // Whole milliseconds, so that the number and the date say the same.
        let start = Duration::from_millis(u64::try_from(start.as_millis()).unwrap_or(u64::MAX));
        let epoch = start.as_secs_f64();
        let mut tags: Vec<&str> = KINDS.iter().map(|(tag, _)| *tag).collect();
        if !self.names.tags.is_empty() {
            tags.push("and latency@NAME and ttfb@NAME per name of the mix (percent-encoded)");
        }
        if !self.scenarios.tags.is_empty() {
            tags.push("and duration@SCENARIO per scenario, a flow's iterations (percent-encoded)");
        }
        self.write(format_args!(
            "#[Histogram log format version 1.3]\n\
             #[volley: one interval a second, merged over all workers, tags {}; values in nanoseconds, Interval_Max in milliseconds]\n\
             #[StartTime: {epoch:.3} (seconds since epoch), {}]\n\
             #[BaseTime: {epoch:.3} (seconds since epoch)]\n\
             \"StartTimestamp\",\"Interval_Length\",\"Interval_Max\",\"Interval_Compressed_Histogram\"\n",
            tags.join(", "),
            utc(start)
        ));
    }

    fn write(&mut self, text: std::fmt::Arguments<'_>) {
        if self.failure.is_none()
            && let Err(e) = self.out.write_fmt(text)
        {
            self.failure = Some(e);
        }
    }

    fn flush(&mut self) {
        if self.failure.is_none()
            && let Err(e) = self.out.flush()
        {
            self.failure = Some(e);
        }
    }
}

/// A name as a tag: bytes other than ASCII letters, digits and `-._~/:` percent-encoded, so
/// that a comma, a blank or a byte a reader might not take cannot break the line.
fn tag_text(name: &str) -> String {
    let mut out = String::with_capacity(name.len());
    for b in name.bytes() {
        if b.is_ascii_alphanumeric() || b"-._~/:".contains(&b) {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// `2024-12-01T10:46:40.123Z`: the start in UTC, for people reading the log.
fn utc(since_epoch: Duration) -> String {
    let secs = since_epoch.as_secs();
    let (days, rest) = (secs / 86_400, secs % 86_400);
    // Howard Hinnant's civil_from_days, for days since 1970-01-01.
    let z = days as i64 + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1_460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}.{:03}Z",
        rest / 3_600,
        rest % 3_600 / 60,
        rest % 60,
        since_epoch.subsec_millis()
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_start_is_written_in_utc() {
        assert_eq!(utc(Duration::ZERO), "1970-01-01T00:00:00.000Z");
        assert_eq!(utc(Duration::from_millis(951_782_400_250)), "2000-02-29T00:00:00.250Z");
        assert_eq!(utc(Duration::from_secs(1_764_547_199)), "2025-11-30T23:59:59.000Z");
    }

    fn stats(latencies: &[u64]) -> Stats {
        let mut s = Stats::new();
        for &v in latencies {
            s.histograms.latency.record(v).unwrap();
        }
        s
    }

    #[test]
    fn seconds_and_the_rest_of_the_totals_are_logged_one_line_a_kind() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("run.hlog");
        let mut log = IntervalLog::create(&path).unwrap();
        log.started(UNIX_EPOCH + Duration::from_secs(1_000));
        let (one, two, tail) = (stats(&[1_000, 2_000]), stats(&[3_000_000]), stats(&[5_000]));
        log.second(1, &one);
        log.second(2, &two);
        let mut totals = Stats::new();
        for s in [&one, &two, &tail] {
            totals.merge(s);
        }
        log.finish(&totals, Duration::from_millis(2_400)).unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines[2], "#[StartTime: 1000.000 (seconds since epoch), 1970-01-01T00:16:40.000Z]");
        assert_eq!(lines[3], "#[BaseTime: 1000.000 (seconds since epoch)]");
        let intervals: Vec<Vec<&str>> = lines[5..].iter().map(|l| l.splitn(5, ',').collect()).collect();
        assert_eq!(intervals.len(), 3 * KINDS.len());
        let latency: Vec<_> = intervals.iter().filter(|f| f[0] == "Tag=latency").map(|f| (f[1], f[2], f[3])).collect();
        assert_eq!(latency, [("0.000", "1.000", "0.002"), ("1.000", "1.000", "3.000"), ("2.000", "0.400", "0.005")]);
        let counts: Vec<u64> = intervals
            .iter()
            .filter(|f| f[0] == "Tag=latency")
            .map(|f| {
                let bytes = base64::engine::general_purpose::STANDARD.decode(f[4]).unwrap();
                volley_engine::decode_histogram(&bytes).unwrap().len()
            })
            .collect();
        assert_eq!(counts, [2, 1, 1]);
    }

    #[test]
    fn each_name_of_a_mix_has_its_tags_and_its_intervals_add_up_to_its_totals() {
        use crate::report::mix_fixture;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("run.hlog");
        let mut log = IntervalLog::create(&path).unwrap();
        let mut names: Vec<String> = mix_fixture::NAMES.map(String::from).to_vec();
        names[2] = "POST /log,in".into();
        log.names(&names);
        // Second 1 is the first worker's; the second worker's part is the rest of the totals.
        let (first, second) = (mix_fixture::worker_stats(0), mix_fixture::worker_stats(1));
        log.second(1, &first);
        let mut totals = first.clone();
        totals.merge(&second);
        log.finish(&totals, Duration::from_millis(1_500)).unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        assert!(text.contains("per name of the mix"), "{text}");
        let count = |tag: &str| -> Vec<u64> {
            text.lines()
                .filter(|l| l.starts_with(&format!("Tag={tag},")))
                .map(|l| {
                    let bytes =
                        base64::engine::general_purpose::STANDARD.decode(l.rsplit(',').next().unwrap()).unwrap();
                    volley_engine::decode_histogram(&bytes).unwrap().len()
                })
                .collect()
        };
        // home: 9 answers in second 1, the other worker's 5 in the rest; login only in second 1.
        assert_eq!(count("latency@home"), [9, 5]);
        assert_eq!(count("ttfb@home"), [9, 5]);
        assert_eq!(count("latency@POST%20/log%2Cin"), [3]);
        assert!(count("latency@search").is_empty(), "a name that never moved has no line");
        assert_eq!(count("latency"), [12, 5], "the run's own lines are unchanged");
    }

    #[test]
    fn each_flows_durations_have_their_tag_and_their_intervals_add_up_to_its_totals() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("run.hlog");
        let mut log = IntervalLog::create(&path).unwrap();
        log.scenarios(&["visit".into(), "not a flow".into()]);
        let second = |durations: &[u64]| {
            let mut s = Stats::new();
            let visit = s.scenarios.entry(0);
            for &d in durations {
                visit.duration.record(d).unwrap();
            }
            // A scenario that is not a flow starts and completes iterations without durations.
            (s.scenarios.entry(1).started, s.scenarios.entry(1).completed) = (5, 5);
            s
        };
        let (one, two, tail) = (second(&[40_000_000, 50_000_000]), second(&[]), second(&[70_000_000]));
        log.second(1, &one);
        log.second(2, &two);
        let mut totals = Stats::new();
        for s in [&one, &two, &tail] {
            totals.merge(s);
        }
        log.finish(&totals, Duration::from_millis(2_500)).unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        assert!(text.contains("and duration@SCENARIO per scenario"), "{text}");
        let lines: Vec<(String, u64)> = text
            .lines()
            .filter(|l| l.starts_with("Tag=duration@"))
            .map(|l| {
                let fields: Vec<&str> = l.splitn(5, ',').collect();
                let bytes = base64::engine::general_purpose::STANDARD.decode(fields[4]).unwrap();
                (format!("{} {}", fields[0], fields[1]), volley_engine::decode_histogram(&bytes).unwrap().len())
            })
            .collect();
        // Second 1's two, none in second 2 (no line), the rest's one from 2 s on.
        assert_eq!(lines, [("Tag=duration@visit 0.000".to_string(), 2), ("Tag=duration@visit 2.000".to_string(), 1)]);
    }

    #[test]
    fn totals_that_lack_logged_samples_get_a_comment_instead_of_a_last_interval() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("run.hlog");
        let mut log = IntervalLog::create(&path).unwrap();
        log.second(1, &stats(&[1_000, 2_000]));
        log.finish(&stats(&[1_000]), Duration::from_millis(1_500)).unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        assert_eq!(text.lines().filter(|l| l.starts_with("Tag=latency")).count(), 1, "{text}");
        assert!(text.lines().last().unwrap().starts_with("#[the report's totals lack"), "{text}");
    }

    #[test]
    fn a_path_that_cannot_be_written_is_a_usage_error() {
        let e = IntervalLog::create(Path::new("/nonexistent-dir/run.hlog")).err().expect("refused");
        assert!(matches!(e, CliError::Usage(_)), "{e}");
        assert!(e.to_string().starts_with("--hlog /nonexistent-dir/run.hlog: cannot write it"), "{e}");
    }
}
