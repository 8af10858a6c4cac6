use serde_json::Value;
use volley_engine::{ErrorKind, MAX_NAMES, Stats, new_histogram};

use super::{LONGEST_SECONDS, from_texts};
use crate::error::CliError;
use crate::report::{Report, ScenarioLine, WarmUp, WorkerLine, mix_fixture};

/// A report as `-j` writes it, from a run that measured something of every kind a report
/// carries: latencies over several orders of magnitude, statuses, errors, a warm-up, a mix.
fn real_report() -> Value {
    let mut stats = Stats::new();
    let mut x = 0x9e37_79b9_7f4a_7c15u64;
    for _ in 0..500 {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let v = 1_000 + (x % 1_000) * 10u64.pow((x >> 20) as u32 % 5);
        stats.histograms.latency.record(v).unwrap();
        stats.histograms.connect.record(v / 3).unwrap();
        stats.histograms.ttfb.record(v / 2).unwrap();
        stats.counters.ok += 1;
        let status = if x.is_multiple_of(7) { 503 } else { 200 };
        stats.counters.status(status);
        // Two names of a mix of three share the requests; the third has none.
        let name = stats.names.entry(usize::from(x.is_multiple_of(3)) * 2);
        name.latency.record(v).unwrap();
        name.ttfb.record(v / 2).unwrap();
        name.counters.ok += 1;
        name.counters.status(status);
    }
    stats.names.entry(0).counters.add_errors(ErrorKind::Timeout, 3);
    stats.counters.add_errors(ErrorKind::Timeout, 3);
    stats.counters.connects = 4;
    stats.counters.bytes_sent = 51_000;
    stats.counters.bytes_received = 90_000;
    let mut warm = Stats::new();
    warm.histograms.latency.record(12_345).unwrap();
    warm.counters.ok = 1;
    warm.counters.status(200);
    let mut line = WorkerLine::measured("local", stats);
    line.warm_up = Some(warm);
    line.client_cpu = std::time::Duration::from_millis(250);
    let mut report = Report::from_workers("http://127.0.0.1:8080/".into(), vec![line], false, false, Vec::new());
    report.warm_up = report.warm_up.take().map(|w| WarmUp { seconds: 2, ..w });
    report.names = vec!["home".into(), "none yet".into(), "login".into()];
    crate::output::report_json(&report, &[])
}

fn refusal(texts: &[(String, String)]) -> String {
    match from_texts(texts) {
        Err(e @ CliError::BadReport { .. }) => {
            assert_eq!(e.exit_code(), std::process::ExitCode::from(2));
            e.to_string()
        }
        Err(other) => panic!("refused as {other:?}, not as a bad report"),
        Ok(_) => panic!("accepted"),
    }
}

fn named(name: &str, report: &Value) -> (String, String) {
    (name.to_string(), report.to_string())
}

#[test]
fn a_real_report_reads_back_with_its_numbers() {
    let report = real_report();
    let merged = from_texts(&[named("a.json", &report), named("b.json", &report)]).unwrap();
    assert_eq!(merged.stats.counters.ok, 1_000);
    assert_eq!(merged.stats.counters.errors_of(ErrorKind::Timeout), 6);
    assert_eq!(merged.client_cpu, std::time::Duration::from_millis(500));
}

/// The mix fixture's run as worker `worker` alone measured it, saved as `-j` writes it.
fn saved_part(worker: usize) -> (String, String) {
    let line = WorkerLine::measured("local", mix_fixture::worker_stats(worker));
    let mut report = Report::from_workers("http://x/".into(), vec![line], false, false, Vec::new());
    report.names = mix_fixture::NAMES.map(String::from).to_vec();
    named(&format!("part{worker}.json"), &crate::output::report_json(&report, &[]))
}

#[test]
fn a_mix_reads_back_with_its_names_and_two_saved_parts_merge_exactly() {
    let merged = from_texts(&[saved_part(0), saved_part(1)]).unwrap();
    assert_eq!(merged.names, mix_fixture::NAMES);
    for (index, _) in mix_fixture::NAMES.iter().enumerate() {
        let mut all = new_histogram();
        (0..2).flat_map(|w| mix_fixture::latencies(w, index)).for_each(|v| all.record(v).unwrap());
        match merged.stats.names.get(index) {
            Some(name) => {
                assert_eq!(name.latency, all, "name {index}");
                assert_eq!(name.counters.ok, all.len());
                for q in [0.5, 0.9, 0.99, 0.999, 1.0] {
                    assert_eq!(
                        name.latency.value_at_quantile(q),
                        all.value_at_quantile(q),
                        "name {index}, quantile {q}"
                    );
                }
            }
            // Saved with no request finished, read back the same: a name without statistics.
            None => assert!(all.is_empty(), "name {index} lost its statistics"),
        }
    }
    let home = merged.stats.names.get(0).expect("home");
    assert_eq!(home.counters.statuses().collect::<Vec<_>>(), [(200, 13), (404, 1)]);
    assert_eq!(home.counters.errors_of(ErrorKind::Timeout), 1);
    // And the merge is written again with every name, in the same order.
    let json = crate::output::report_json(&merged, &[]);
    assert_eq!(json["names"].as_array().map(Vec::len), Some(3));
    assert_eq!(json["names"][0]["requests"]["total"], 15);
}

#[test]
fn reports_of_different_mixes_merge_by_name_in_order_of_appearance() {
    let (_, text) = saved_part(0);
    let mut other: Value = serde_json::from_str(&text).unwrap();
    // The second report's mix: "login" first, then a name the first report does not have.
    let names = other["names"].as_array_mut().unwrap();
    names.swap(0, 2);
    names[1]["name"] = "checkout".into();
    let merged = from_texts(&[saved_part(0), named("other.json", &other)]).unwrap();
    assert_eq!(merged.names, ["home", "search", "login", "checkout"]);
    let ok = |index: usize| merged.stats.names.get(index).map_or(0, |n| n.counters.ok);
    assert_eq!((ok(0), ok(1), ok(2), ok(3)), (18, 0, 6, 0));
}

#[test]
fn checks_merge_by_name_under_their_names_whatever_order_each_report_lists_them_in() {
    let saved = |worker: usize, checks: &[(&str, u64, u64)]| {
        let mut stats = mix_fixture::worker_stats(worker);
        for (k, (_, passed, failed)) in checks.iter().enumerate() {
            *stats.names.entry(0).check(k) = volley_engine::CheckCounts { passed: *passed, failed: *failed };
        }
        let line = WorkerLine::measured("local", stats);
        let mut report = Report::from_workers("http://x/".into(), vec![line], false, false, Vec::new());
        report.names = mix_fixture::NAMES.map(String::from).to_vec();
        report.checks = vec![checks.iter().map(|(n, _, _)| n.to_string()).collect(), vec![], vec![]];
        named(&format!("part{worker}.json"), &crate::output::report_json(&report, &[]))
    };
    let merged = from_texts(&[
        saved(0, &[("ok", 5, 1), ("fast", 4, 2)]),
        saved(1, &[("fast", 3, 0), ("small", 1, 1), ("ok", 4, 0)]),
    ])
    .unwrap();
    assert_eq!(merged.checks, [vec!["ok", "fast", "small"], vec![], vec![]]);
    let home = merged.name_lines().next().expect("home");
    let lines: Vec<(&str, u64, u64)> = home.check_lines().map(|(n, c)| (n, c.passed, c.failed)).collect();
    assert_eq!(lines, [("ok", 9, 1), ("fast", 7, 2), ("small", 1, 1)]);
    // Written again, they read back the same.
    let again = from_texts(&[named("merged.json", &crate::output::report_json(&merged, &[]))]).unwrap();
    assert_eq!(again.checks, merged.checks);
    assert_eq!(again.stats.names.get(0).expect("home").checks, merged.stats.names.get(0).expect("home").checks);
}

#[test]
fn a_report_from_before_mixes_reads_back_without_names() {
    let mut old = real_report();
    old.as_object_mut().unwrap().remove("names");
    let read = from_texts(&[named("old.json", &old)]).unwrap();
    assert!(read.names.is_empty() && read.stats.names.is_empty());
    // Beside one with names, the old one's requests are in the run's numbers only.
    let both = from_texts(&[named("old.json", &old), named("new.json", &real_report())]).unwrap();
    assert_eq!(both.names, ["home", "none yet", "login"]);
    assert_eq!(both.stats.counters.ok, 1_000);
    assert_eq!(both.stats.names.iter().map(|(_, n)| n.counters.ok).sum::<u64>(), 500);
}

#[test]
fn names_twice_past_the_limit_or_with_a_latency_count_that_disagrees_are_refused() {
    let mut twice = real_report();
    twice["names"][1]["name"] = "home".into();
    let line = refusal(&[named("twice.json", &twice)]);
    assert!(line.contains("names/1: 'home' is there twice"), "{line}");
    let mut many = real_report();
    let first = many["names"][0].clone();
    many["names"] = (0..=MAX_NAMES)
        .map(|i| {
            let mut name = first.clone();
            name["name"] = i.to_string().into();
            name
        })
        .collect();
    let line = refusal(&[named("many.json", &many)]);
    assert!(line.contains("1001 names is more than the 1000"), "{line}");
    let mut lying = real_report();
    lying["names"][2]["requests"]["ok"] = 1.into();
    let line = refusal(&[named("lying.json", &lying)]);
    assert!(line.contains("names/2 ('login')") && line.contains("latency histogram"), "{line}");
    let mut huge = real_report();
    huge["names"][0]["errors"]["reset"] = u64::MAX.into();
    let line = refusal(&[named("a.json", &real_report()), named("huge.json", &huge)]);
    assert!(line.starts_with("huge.json: ") && line.contains("'home'") && line.contains("64-bit"), "{line}");
    // A check that judged more responses than its name answered, or counts past 64 bits.
    for (passed, failed) in [(u64::MAX, 1), (u64::MAX, 0)] {
        let mut checked = real_report();
        checked["names"][0]["checks"] = serde_json::json!([{ "name": "ok", "passed": passed, "failed": failed }]);
        let line = refusal(&[named("checked.json", &checked)]);
        assert!(line.contains("checks/0 ('ok') judged") && line.contains("ok"), "{line}");
    }
    let mut twice = real_report();
    twice["names"][0]["checks"] =
        serde_json::json!([{ "name": "ok", "passed": 1, "failed": 0 }, { "name": "ok", "passed": 1, "failed": 0 }]);
    let line = refusal(&[named("twice.json", &twice)]);
    assert!(line.contains("checks/1: 'ok' is there twice"), "{line}");
}

#[test]
fn a_duration_past_any_run_is_refused_naming_the_file_and_the_field() {
    for field in ["durationSeconds", "clientCpuSeconds"] {
        for hostile in [
            serde_json::json!(1e300),
            serde_json::json!(LONGEST_SECONDS * 2.0),
            serde_json::json!(-1.0),
            serde_json::json!("5"),
        ] {
            let mut report = real_report();
            report[field] = hostile.clone();
            let line = refusal(&[named("huge.json", &report)]);
            assert!(line.starts_with("huge.json: ") && line.contains(field), "{field} = {hostile}: {line}");
        }
    }
}

#[test]
fn counts_that_add_up_past_a_u64_are_refused_not_saturated() {
    let mut report = real_report();
    report["errors"]["timeout"] = (1u64 << 63).into();
    let line = refusal(&[named("one.json", &report), named("two.json", &report)]);
    assert!(line.starts_with("two.json: ") && line.contains("64-bit"), "{line}");
    // One such report alone adds up: its numbers are kept as they are.
    let alone = from_texts(&[named("one.json", &report)]).unwrap();
    assert_eq!(alone.stats.counters.errors_of(ErrorKind::Timeout), 1 << 63);
    // Errors and ok requests that together pass a u64 within one report, too.
    report["errors"]["timeout"] = u64::MAX.into();
    refusal(&[named("one.json", &report)]);
}

/// The places of every value in `v`, as JSON pointers.
fn pointers(v: &Value, at: String, into: &mut Vec<String>) {
    match v {
        Value::Object(map) => {
            map.iter().for_each(|(k, v)| pointers(v, format!("{at}/{}", k.replace('~', "~0").replace('/', "~1")), into))
        }
        Value::Array(items) => items.iter().enumerate().for_each(|(i, v)| pointers(v, format!("{at}/{i}"), into)),
        _ => {}
    }
    into.push(at);
}

/// Seeded xorshift, so that a failure reproduces from its iteration.
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: usize) -> usize {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        (self.0 % n.max(1) as u64) as usize
    }
}

/// Whatever is read back must also be shown: the text and JSON reports of an accepted merge
/// run over the same numbers a user's would.
fn read_and_show(texts: &[(String, String)]) {
    if let Ok(report) = from_texts(texts) {
        let _ = crate::report::to_text(&report);
        let _ = crate::output::report_json(&report, &[]);
    }
}

#[test]
fn mutated_real_reports_never_panic_the_reader() {
    let real = real_report();
    let mut places = Vec::new();
    pointers(&real, String::new(), &mut places);
    let hostile = [
        serde_json::json!(null),
        serde_json::json!(-1),
        serde_json::json!(0),
        serde_json::json!(1e308),
        serde_json::json!(-1e308),
        serde_json::json!(u64::MAX),
        serde_json::json!(i64::MIN),
        serde_json::json!(1u64 << 63),
        serde_json::json!(0.5),
        serde_json::json!(""),
        serde_json::json!("AAAA"),
        serde_json::json!("not base64 !"),
        serde_json::json!([]),
        serde_json::json!({}),
        serde_json::json!({ "999999": 1, "200": u64::MAX, "x": "y" }),
        serde_json::json!(true),
    ];
    let mut rng = Rng(0x5eed_0001);
    for iteration in 0..3_000 {
        let mut report = real.clone();
        for _ in 0..1 + rng.below(3) {
            let place = &places[rng.below(places.len())];
            let value = hostile[rng.below(hostile.len())].clone();
            if let Some(slot) = report.pointer_mut(place) {
                *slot = value;
            }
        }
        let twice = rng.below(2) == 0;
        let texts = if twice { vec![named("a", &real), named("b", &report)] } else { vec![named("b", &report)] };
        std::panic::catch_unwind(|| read_and_show(&texts))
            .unwrap_or_else(|_| panic!("iteration {iteration} panicked on {}", texts.last().unwrap().1));
    }
    // The bytes themselves: flipped, cut and spliced.
    let text = real.to_string().into_bytes();
    for iteration in 0..2_000 {
        let mut bytes = text.clone();
        for _ in 0..1 + rng.below(8) {
            let at = rng.below(bytes.len());
            match rng.below(3) {
                0 => bytes[at] = rng.below(256) as u8,
                1 => {
                    bytes.truncate(at.max(1));
                }
                _ => bytes.insert(at, b"0123456789-.eE\"{}[],:"[rng.below(21)]),
            }
        }
        let texts = [("b".to_string(), String::from_utf8_lossy(&bytes).into_owned())];
        std::panic::catch_unwind(|| read_and_show(&texts))
            .unwrap_or_else(|_| panic!("byte iteration {iteration} panicked on {}", texts[0].1));
    }
}

#[test]
fn a_scenario_runs_iterations_and_scenarios_are_written_read_back_and_added_up() {
    let part = |worker: usize, iterations: u64| {
        let mut stats = mix_fixture::worker_stats(worker);
        stats.counters.iterations = iterations;
        // Each iteration of "login" past the first ended there, at a failed extraction.
        (stats.counters.abandoned, stats.counters.extract_failed) = (iterations - 1, iterations - 1);
        let login = stats.names.entry(2);
        (login.counters.abandoned, login.counters.extract_failed) = (iterations - 1, iterations - 1);
        // "browse" is a flow, whose completed iterations have durations (worker w's all take
        // w + 1 × 10 ms); "buy" is not. The second report lists them the other way round.
        let (browse, buy) = if worker == 0 { (0, 1) } else { (1, 0) };
        let flow = stats.scenarios.entry(browse);
        (flow.started, flow.completed, flow.abandoned) = (iterations, 1, iterations - 1);
        flow.duration.record((worker as u64 + 1) * 10_000_000).unwrap();
        stats.scenarios.entry(buy).started = 2;
        let line = WorkerLine::measured("local", stats);
        let mut report = Report::from_workers("http://x/".into(), vec![line], false, false, Vec::new());
        report.names = mix_fixture::NAMES.map(String::from).to_vec();
        report.scenarios = vec![
            ScenarioLine { name: "browse".into(), weight: 3, pacing: None },
            ScenarioLine { name: "buy".into(), weight: 1, pacing: None },
        ];
        if worker > 0 {
            report.scenarios.reverse();
        }
        let text = crate::report::text::to_text(&report);
        assert!(text.contains(&format!("Iterations:   {iterations} ")), "{text}");
        if worker == 0 {
            assert!(text.contains("of scenarios drawn by weight: browse 75%, buy 25%"), "{text}");
            let table: Vec<&str> = text.lines().skip_while(|l| !l.starts_with("Scenarios (")).skip(1).take(3).collect();
            assert_eq!(
                table,
                [
                    "  scenario  weight  started  completed  abandoned     p50     p90     p99     max",
                    "  browse         3        7          1          6  10.002  10.002  10.002  10.002",
                    "  buy            1        2          0          0       -       -       -       -",
                ],
                "{text}"
            );
        }
        let json = crate::output::report_json(&report, &[]);
        assert_eq!(json["iterations"], iterations);
        assert_eq!(json["scenarios"][browse]["iterations"]["abandoned"], iterations - 1);
        assert_eq!(json["scenarios"][buy]["durationSeconds"]["count"], 0);
        named(&format!("part{worker}.json"), &json)
    };
    let merged = from_texts(&[part(0, 7), part(1, 5)]).unwrap();
    // Each scenario merged by name, its durations exactly: one of 10 ms and one of 20 ms.
    let browse = merged.stats.scenarios.get(0).expect("browse");
    assert_eq!((browse.started, browse.completed, browse.abandoned), (12, 2, 10));
    let ms = |nanos: u64| (nanos as f64 / 1e6).round();
    assert_eq!((browse.duration.len(), ms(browse.duration.min()), ms(browse.duration.max())), (2, 10.0, 20.0));
    let buy = merged.stats.scenarios.get(1).expect("buy");
    assert_eq!((buy.started, buy.completed, buy.duration.len()), (4, 0, 0));
    // A report whose durations outnumber its completed iterations is refused.
    let mut broken: Value = serde_json::from_str(&part(0, 7).1).unwrap();
    broken["scenarios"][0]["iterations"]["completed"] = 0.into();
    let err = from_texts(&[named("broken.json", &broken)]).err().expect("refused").to_string();
    assert!(err.contains("'browse' has 1 iteration durations but 0 completed iterations"), "{err}");
    assert_eq!(merged.stats.counters.iterations, 12);
    assert_eq!((merged.stats.counters.abandoned, merged.stats.counters.extract_failed), (10, 10));
    let login = &merged.stats.names.get(2).expect("login").counters;
    assert_eq!((login.abandoned, login.extract_failed), (10, 10));
    assert_eq!(merged.scenarios.iter().map(|s| s.name.as_str()).collect::<Vec<_>>(), ["browse", "buy"]);
    // Without scenarios there are none, and no count of iterations.
    let json = crate::output::report_json(&from_texts(&[saved_part(0)]).unwrap(), &[]);
    assert_eq!((json["scenarios"].as_array().map(Vec::len), &json["iterations"]), (Some(0), &Value::Null));
}
