use serde::Deserialize;

use super::super::input::Saved;
use super::{all, drawable};
use crate::gate::{Threshold, judge};
use crate::output::report_json;
use crate::report::mix_fixture;

/// The page's charts and tables for the fixture's run judged on `thresholds`.
fn page_of(thresholds: &[&str]) -> (serde_json::Value, String) {
    let report = mix_fixture::report();
    let thresholds: Vec<Threshold> = thresholds.iter().map(|t| Threshold::parse(t).expect("valid")).collect();
    let json = report_json(&report, &judge(&thresholds, &report));
    let saved = Saved::deserialize(&json).expect("a report");
    let charts = all(&saved, &drawable(&saved.thresholds)).expect("charts");
    let page = super::super::page(&json).expect("a page");
    (serde_json::to_value(&charts).expect("serialisable"), page)
}

#[test]
fn the_names_chart_has_a_line_per_name_with_responses_and_its_thresholds_markers() {
    let (charts, _) = page_of(&["home:p99<100ms", "p99<1s"]);
    let names = charts.as_array().expect("charts").iter().find(|c| c["id"] == "names").expect("a names chart");
    let labels: Vec<&str> =
        names["series"].as_array().expect("lines").iter().filter_map(|l| l["label"].as_str()).collect();
    // home is the busiest; search finished nothing, so it has no line.
    assert_eq!(labels, ["home", "login", "home:p99<100ms (FAIL)"]);
    // The home line's last point is its merged maximum: the slow worker's 150 ms.
    let home = names["series"][0]["values"].as_array().expect("values");
    let top = home.iter().rev().find_map(|v| v.as_f64()).expect("a point");
    assert!((150.0..151.0).contains(&top), "{top}");
    // The name's threshold is not drawn on the run's charts.
    let run = charts.as_array().expect("charts").iter().find(|c| c["id"] == "spectrum").expect("the run's spectrum");
    assert!(!run.to_string().contains("home:p99"), "{run}");
    assert!(run.to_string().contains("p99<1s (pass)"), "{run}");
}

#[test]
fn the_page_has_a_row_per_name_in_the_files_order() {
    let (_, page) = page_of(&[]);
    let table = page.split_once("<h2>Names</h2>").expect("a names table").1;
    let table = table.split_once("</table>").expect("closed").0;
    let rows: Vec<&str> = table.lines().filter(|l| l.starts_with("<tr><td>")).collect();
    assert_eq!(rows.len(), 3, "{table}");
    for (row, name) in rows.iter().zip(mix_fixture::NAMES) {
        assert!(row.starts_with(&format!("<tr><td><code>{name}</code></td>")), "{row}");
    }
    assert!(rows[0].contains("<td>15</td><td>14</td><td>1</td>"), "{}", rows[0]);
    assert!(rows[1].contains("<td>none</td>"), "search has no status: {}", rows[1]);
}

#[test]
fn a_run_without_a_mix_has_no_names_chart_or_table() {
    let mut report = mix_fixture::report();
    report.names.clear();
    let json = report_json(&report, &[]);
    let page = super::super::page(&json).expect("a page");
    assert!(!page.contains("<h2>Names</h2>") && !page.contains("\"id\":\"names\""));
}
