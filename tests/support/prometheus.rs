//! A real Prometheus server (Debian's `prometheus` package) in a temp dir, scraping the
//! targets a test names, and its HTTP query API.

use std::net::SocketAddr;
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

use super::client::http_get;
use super::processes::send_signal;
use super::volley::{free_port, in_ci};

/// How long Prometheus may take to open its storage and scrape every target once.
const READY_TIMEOUT: Duration = Duration::from_secs(30);

pub struct Prometheus {
    child: Child,
    addr: SocketAddr,
    dir: tempfile::TempDir,
}

fn find_prometheus() -> Option<PathBuf> {
    ["/usr/bin/prometheus", "/usr/local/bin/prometheus"].into_iter().map(PathBuf::from).find(|p| p.exists())
}

impl Prometheus {
    /// Prometheus scraping each job's addresses at `/metrics` every `interval`, once it is
    /// ready; `None` (and a SKIPPED line) when it is not installed, outside CI.
    pub fn start(jobs: &[(&str, &[SocketAddr])], interval: Duration) -> Option<Prometheus> {
        let Some(binary) = find_prometheus() else {
            assert!(!in_ci(), "prometheus is not installed, and CI must run this test (.ci/run installs it)");
            eprintln!("SKIPPED: prometheus is not installed (apt-get install prometheus); skipping this test");
            return None;
        };
        let dir = tempfile::Builder::new().prefix("volley-prometheus-").tempdir().expect("a temp dir");
        let ms = interval.as_millis();
        let mut config = format!("global:\n  scrape_interval: {ms}ms\n  scrape_timeout: {ms}ms\nscrape_configs:\n");
        for (job, addrs) in jobs {
            let targets: Vec<String> = addrs.iter().map(|a| format!("'{a}'")).collect();
            config.push_str(&format!(
                "  - job_name: {job}\n    static_configs:\n      - targets: [{}]\n",
                targets.join(", ")
            ));
        }
        let config_path = dir.path().join("prometheus.yml");
        std::fs::write(&config_path, config).expect("write prometheus.yml");
        let addr = SocketAddr::from(([127, 0, 0, 1], free_port()));
        let log = std::fs::File::create(dir.path().join("prometheus.log")).expect("a log file");
        let child = Command::new(&binary)
            .arg(format!("--config.file={}", config_path.display()))
            .arg(format!("--storage.tsdb.path={}", dir.path().join("data").display()))
            .arg(format!("--web.listen-address={addr}"))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log)
            .process_group(0)
            .spawn()
            .unwrap_or_else(|e| panic!("cannot run {}: {e}", binary.display()));
        let want = jobs.iter().map(|(_, addrs)| addrs.len()).sum();
        let mut prometheus = Prometheus { child, addr, dir };
        let deadline = Instant::now() + READY_TIMEOUT;
        loop {
            if let Some(status) = prometheus.child.try_wait().expect("waiting for prometheus") {
                panic!("prometheus exited with {status}:\n{}", prometheus.log());
            }
            // Ready is not enough: Prometheus hands discovered targets to its scrape loops
            // only every 5 s, so wait until every target has been scraped once (up or down).
            if prometheus.scraped_every_target(want) {
                return Some(prometheus);
            }
            assert!(Instant::now() < deadline, "prometheus not ready within {READY_TIMEOUT:?}:\n{}", prometheus.log());
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// True once it knows `want` targets and has tried to scrape each of them.
    fn scraped_every_target(&self, want: usize) -> bool {
        let Ok(response) = http_get(self.addr, "/api/v1/targets") else { return false };
        let Ok(body) = serde_json::from_slice::<Value>(&response.body) else { return false };
        let Some(targets) = body["data"]["activeTargets"].as_array() else { return false };
        targets.len() == want && targets.iter().all(|t| t["health"] != "unknown")
    }

    /// What it logged so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("prometheus.log")).unwrap_or_default()
    }

    /// An instant PromQL query over the HTTP API: its `data.result`.
    pub fn query(&self, promql: &str) -> Vec<Value> {
        let path = format!("/api/v1/query?query={}", percent_encode(promql));
        let response = http_get(self.addr, &path).unwrap_or_else(|e| panic!("query {promql}: {e}"));
        let body: Value = serde_json::from_slice(&response.body)
            .unwrap_or_else(|e| panic!("query {promql}: not JSON ({e}): {}", String::from_utf8_lossy(&response.body)));
        assert_eq!(body["status"], "success", "query {promql}: {body}");
        body["data"]["result"].as_array().cloned().unwrap_or_else(|| panic!("query {promql}: no result in {body}"))
    }

    /// The value of a query that yields one sample.
    pub fn scalar(&self, promql: &str) -> f64 {
        let result = self.query(promql);
        assert_eq!(result.len(), 1, "query {promql}: expected one series, got {result:?}");
        sample_value(&result[0]["value"]).unwrap_or_else(|| panic!("query {promql}: {result:?}"))
    }
}

/// A `[timestamp, "value"]` pair's value.
pub fn sample_value(pair: &Value) -> Option<f64> {
    pair.get(1)?.as_str()?.parse().ok()
}

fn percent_encode(s: &str) -> String {
    s.bytes()
        .map(|b| {
            if b.is_ascii_alphanumeric() || b"-_.~".contains(&b) {
                (b as char).to_string()
            } else {
                format!("%{b:02X}")
            }
        })
        .collect()
}

impl Drop for Prometheus {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            send_signal(self.child.id(), libc::SIGKILL);
            let _ = self.child.wait();
        }
    }
}
