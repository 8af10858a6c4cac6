//! The JSON report as the HTML page reads it: the fields it draws, typed, so that a file that is
//! not a volley report is refused with the field it lacks rather than drawn as empty charts.
//! Fields added to the report after its first release are optional here, so older reports
//! still open.

use std::collections::BTreeMap;

use serde::Deserialize;

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct Saved {
    pub url: String,
    pub protocol: String,
    pub connections: u64,
    pub threads: u64,
    pub duration_seconds: f64,
    pub requests: Requests,
    pub requests_per_sec: f64,
    pub status_codes: BTreeMap<String, u64>,
    pub errors: BTreeMap<String, u64>,
    pub latency_seconds: Summary,
    pub connect_seconds: Summary,
    pub first_byte_seconds: Summary,
    pub histograms: Histograms,
    pub intervals: Vec<SavedSecond>,
    #[serde(default)]
    pub workers: Vec<SavedWorker>,
    #[serde(default)]
    pub warnings: Vec<String>,
    #[serde(default)]
    pub thresholds: Vec<SavedVerdict>,
    /// A mix's names, in the targets file's order; none without a mix.
    #[serde(default)]
    pub names: Vec<SavedName>,
    /// A scenario run's scenarios, in the file's order; none without (or in reports from
    /// before scenarios counted their iterations).
    #[serde(default)]
    pub scenarios: Vec<SavedScenario>,
}

/// One scenario, as the report's `scenarios` hold it.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct SavedScenario {
    pub name: String,
    pub weight: u64,
    #[serde(default)]
    pub pacing_seconds: Option<f64>,
    #[serde(default)]
    pub iterations: Option<SavedIterations>,
    #[serde(default)]
    pub duration_seconds: Option<Summary>,
}

/// A scenario's iterations.
#[derive(Debug, Deserialize)]
pub(super) struct SavedIterations {
    pub started: u64,
    pub completed: u64,
    pub abandoned: u64,
    #[serde(default)]
    pub late: u64,
    #[serde(default)]
    pub missed: u64,
}

/// One name of a mix, as the report's `names` hold it.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct SavedName {
    pub name: String,
    pub requests: Requests,
    pub requests_per_sec: f64,
    pub status_codes: BTreeMap<String, u64>,
    pub latency_seconds: Summary,
    pub histograms: NameHistograms,
    /// A scenario's checks of this name (none in reports from before checks).
    #[serde(default)]
    pub checks: Vec<SavedCheck>,
    /// Iterations that ended at this name's step (null without scenarios; absent in reports
    /// from before extractors).
    #[serde(default)]
    pub abandoned: Option<u64>,
    /// Its responses whose extraction failed (likewise).
    #[serde(default)]
    pub extract_failed: Option<u64>,
    /// Redirects its steps followed (absent in reports from before redirects were followed).
    #[serde(default)]
    pub redirects: Option<u64>,
}

/// One check of a name, as the report's `names[].checks` hold it.
#[derive(Debug, Deserialize)]
pub(super) struct SavedCheck {
    pub name: String,
    pub passed: u64,
    pub failed: u64,
}

#[derive(Debug, Deserialize)]
pub(super) struct NameHistograms {
    pub latency: String,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct Requests {
    pub total: u64,
    pub ok: u64,
    pub errors: u64,
    #[serde(default)]
    pub aborted: u64,
}

/// A histogram's summary in seconds; only `count` when it is empty.
#[derive(Debug, Deserialize)]
pub(super) struct Summary {
    pub count: u64,
    pub min: Option<f64>,
    pub mean: Option<f64>,
    pub max: Option<f64>,
    #[serde(default)]
    pub percentiles: BTreeMap<String, f64>,
}

/// Base64 HdrHistogram V2+DEFLATE, in nanoseconds.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct Histograms {
    pub latency: String,
    pub connect: String,
    pub first_byte: String,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct SavedSecond {
    pub second: u32,
    pub requests: u64,
    pub errors: u64,
    pub p50_seconds: Option<f64>,
    #[serde(default)]
    pub p90_seconds: Option<f64>,
    pub p99_seconds: Option<f64>,
    #[serde(default)]
    pub max_seconds: Option<f64>,
    #[serde(default)]
    pub status_codes: BTreeMap<String, u64>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct SavedWorker {
    pub address: String,
    pub name: Option<String>,
    pub connections: u64,
    pub threads: u64,
    pub failure: Option<String>,
    #[serde(default)]
    pub partial: bool,
    pub start_offset_seconds: Option<f64>,
    pub requests: Option<Requests>,
    pub requests_per_sec: Option<f64>,
    pub latency_seconds: Option<Summary>,
    pub histograms: Option<Histograms>,
    #[serde(default)]
    pub intervals: Vec<SavedSecond>,
}

impl SavedWorker {
    /// The name it gave itself with the address it was reached at (workers on machines cloned
    /// from one image often share a host name), or the address alone.
    pub fn label(&self) -> String {
        match self.name.as_deref().filter(|n| !n.is_empty() && *n != self.address) {
            Some(name) => format!("{name} ({})", self.address),
            None => self.address.clone(),
        }
    }
}

#[derive(Debug, Deserialize)]
pub(super) struct SavedVerdict {
    /// As given on the command line.
    pub threshold: String,
    pub limit: f64,
    pub measured: Option<f64>,
    pub unit: String,
    pub passed: bool,
}
