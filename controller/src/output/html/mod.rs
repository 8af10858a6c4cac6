//! The HTML report: one self-contained page (uPlot and the data inside it, nothing fetched) with
//! the totals, the thresholds' verdicts, and charts of requests/s and latency over time, the
//! latency distribution, connection set-up, and status codes and errors over time, per worker
//! in a distributed run. It is made from the JSON report alone, so `-o html:FILE` during a run
//! and `volley report run.json` afterwards draw the same page.
//!
//! The page's script writes what it drew into `#render-check` (each chart's data points and the
//! pixels painted in its first line's colour, and any script error), which the end-to-end test
//! reads from a headless Chromium.

mod charts;
mod input;
mod spectrum;
mod tables;

use std::path::Path;

use serde::Deserialize;
use serde_json::{Value, json};

use crate::error::CliError;
use input::Saved;

const UPLOT_VERSION: &str = "1.6.32";
const UPLOT_JS: &str = include_str!("../../../vendor/uplot/uPlot.iife.min.js");
const UPLOT_CSS: &str = include_str!("../../../vendor/uplot/uPlot.min.css");
const REPORT_JS: &str = include_str!("report.js");
const REPORT_CSS: &str = include_str!("report.css");
/// Runs before anything else, so an error in uPlot or the report's script is recorded too.
const ERROR_HOOK: &str = "window.volleyCheck={done:false,charts:[],errors:[]};\
function publishCheck(){var e=document.getElementById('render-check');if(e)e.textContent=JSON.stringify(volleyCheck);}\
window.addEventListener('error',function(e){volleyCheck.errors.push(String(e.message||e));publishCheck();});";

#[derive(Debug, thiserror::Error)]
pub(crate) enum PageError {
    #[error("not a volley JSON report ({0})")]
    NotAReport(String),
    #[error("unreadable histogram: {0}")]
    Histogram(String),
}

/// The page for a JSON report (as `-j` writes it).
pub(crate) fn page(report: &Value) -> Result<String, PageError> {
    let r = Saved::deserialize(report).map_err(|e| PageError::NotAReport(e.to_string()))?;
    let thresholds = charts::drawable(&r.thresholds);
    let charts = charts::all(&r, &thresholds).map_err(PageError::Histogram)?;
    let data = json!({ "uplot": UPLOT_VERSION, "charts": charts });
    let mut figures = String::new();
    for chart in &charts {
        figures.push_str(&format!("<figure class=\"chart\"><div id=\"chart-{}\"></div></figure>\n", chart.id));
    }
    let title = tables::escape(&r.url);
    Ok(format!(
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n\
         <title>volley: {title}</title>\n<script>{ERROR_HOOK}</script>\n\
         <style>{UPLOT_CSS}</style>\n<style>{REPORT_CSS}</style>\n</head>\n<body>\n\
         <header><h1>volley report</h1><p class=\"target\">{title} · {protocol}</p>\n{verdict}</header>\n\
         {summary}{names}{scenarios}{checks}{abandoned}{redirects}{thresholds}{warnings}<h2>Charts</h2>\n{figures}{workers}\
         <footer>Charts drawn by uPlot {UPLOT_VERSION} (MIT licence), embedded in this file: it needs no network access.</footer>\n\
         <pre id=\"render-check\" hidden>{{\"done\":false}}</pre>\n\
         <script type=\"application/json\" id=\"report-data\">{data}</script>\n\
         <script>{UPLOT_JS}</script>\n<script>{REPORT_JS}</script>\n</body>\n</html>\n",
        protocol = tables::escape(&r.protocol),
        verdict = tables::verdict(&r),
        summary = tables::summary(&r),
        names = tables::names(&r),
        scenarios = tables::scenarios(&r),
        checks = tables::checks(&r),
        abandoned = tables::abandoned(&r),
        redirects = tables::redirects(&r),
        thresholds = tables::thresholds(&r.thresholds),
        warnings = tables::warnings(&r),
        workers = tables::workers(&r),
        data = script_safe(&data.to_string()),
    ))
}

/// JSON that cannot end its `<script>` element or open a comment in it; JSON.parse reads the
/// escapes back as the characters they stand for.
fn script_safe(json: &str) -> String {
    json.replace('<', "\\u003c").replace('>', "\\u003e").replace('&', "\\u0026")
}

/// `volley report FILE`: the page for a saved JSON report. A file that cannot be read or is not
/// a report is a usage error naming it.
pub(crate) fn from_saved(path: &Path) -> Result<String, CliError> {
    let bad = |why: String| CliError::Usage(format!("{}: {why}", path.display()));
    let text = std::fs::read_to_string(path).map_err(|e| bad(e.to_string()))?;
    let report: Value = serde_json::from_str(&text).map_err(|e| bad(format!("not a volley JSON report ({e})")))?;
    page(&report).map_err(|e| bad(e.to_string()))
}

#[cfg(test)]
mod tests {
    use super::script_safe;

    #[test]
    fn embedded_data_cannot_close_its_script_element() {
        let data = serde_json::json!({ "url": "http://x/</script><script>alert(1)</script>" }).to_string();
        let safe = script_safe(&data);
        assert!(!safe.contains("</"), "{safe}");
        let back: serde_json::Value = serde_json::from_str(&safe).unwrap();
        assert_eq!(back["url"], "http://x/</script><script>alert(1)</script>");
    }
}
