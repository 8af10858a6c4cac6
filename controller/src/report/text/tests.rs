use super::to_text;
use crate::report::mix_fixture;

#[test]
fn a_mix_has_a_row_per_name_in_the_files_order_with_its_counts_and_percentiles() {
    let text = to_text(&mix_fixture::report());
    let table: Vec<&str> =
        text.lines().skip_while(|l| !l.starts_with("Names (latency in ms):")).skip(1).take(4).collect();
    let cells = |line: &str| line.split_whitespace().map(String::from).collect::<Vec<_>>();
    assert_eq!(
        cells(table[0]),
        ["name", "requests", "ok", "errors", "req/s", "p50", "p90", "p99", "max", "status", "codes"]
    );
    // home: 9 + 5 answered (a 404 among them) and a timeout, over the run's second.
    assert_eq!(cells(table[1])[..5], ["home", "15", "14", "1", "15.0"]);
    assert_eq!(cells(table[1])[9], "200×13,404×1");
    // Its percentiles are those of its 14 samples together (the median the first worker's 7 ms).
    let mut home = volley_engine::new_histogram();
    (0..2).flat_map(|w| mix_fixture::latencies(w, 0)).for_each(|v| home.record(v).expect("in range"));
    let at = |q: f64| format!("{:.3}", home.value_at_quantile(q) as f64 / 1e6);
    assert_eq!(cells(table[1])[5..9], [at(0.5), at(0.9), at(0.99), at(1.0)]);
    assert_eq!(cells(table[1])[5], "7.008");
    // Nothing of "search" finished: it is listed all the same.
    assert_eq!(cells(table[2]), ["search", "0", "0", "0", "0.0", "-", "-", "-", "-", "-"]);
    assert_eq!(cells(table[3])[..5], ["login", "3", "3", "0", "3.0"]);
    assert_eq!((cells(table[3])[5].as_str(), cells(table[3])[9].as_str()), ("0.500", "201×3"));
    // Columns line up: every row as wide as the header up to the status codes.
    let status_at = table[0].find("status").expect("header");
    assert!(table[1..].iter().all(|row| row.char_indices().nth(status_at).is_some_and(|(_, c)| c != ' ')), "{text}");
    // After the run's latencies, before the workers.
    let at = |label: &str| text.find(label).unwrap_or_else(|| panic!("no {label} in\n{text}"));
    assert!(at("Latency distribution:") < at("Names (") && at("Names (") < at("Workers:"), "{text}");
}

#[test]
fn a_run_without_a_mix_has_no_names_table() {
    let mut report = mix_fixture::report();
    report.names.clear();
    assert!(!to_text(&report).contains("Names"));
}
