//! The live progress line: one line on a terminal's stderr, rewritten every second; nothing
//! when stderr is a pipe or a file.

use std::io::{IsTerminal, Write};

use volley_engine::Stats;

pub(crate) struct ProgressLine {
    enabled: bool,
    total: u64,
    errors: u64,
    shown: bool,
}

impl ProgressLine {
    pub(crate) fn new() -> Self {
        ProgressLine { enabled: std::io::stderr().is_terminal(), total: 0, errors: 0, shown: false }
    }

    /// Second `second` of the run, merged over every worker.
    pub(crate) fn interval(&mut self, second: u32, delta: &Stats, workers: usize) {
        self.total = self.total.saturating_add(delta.counters.total());
        self.errors = self.errors.saturating_add(delta.counters.errors());
        if !self.enabled {
            return;
        }
        let p99 = delta.histograms.latency.value_at_quantile(0.99) as f64 / 1e6;
        let line = format!(
            "\r\x1b[K[{second}s] {} requests  {} req/s  {} errors  p99 {p99:.2} ms  ({workers} worker{})",
            self.total,
            delta.counters.total(),
            self.errors,
            if workers == 1 { "" } else { "s" }
        );
        let mut err = std::io::stderr().lock();
        let _ = err.write_all(line.as_bytes());
        let _ = err.flush();
        self.shown = true;
    }

    /// Wipes the line before the report prints.
    pub(crate) fn clear(&mut self) {
        if self.shown {
            let mut err = std::io::stderr().lock();
            let _ = err.write_all(b"\r\x1b[K");
            let _ = err.flush();
            self.shown = false;
        }
    }
}
