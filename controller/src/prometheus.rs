//! `--prometheus ADDR` on the controller: the run's seconds, merged over every worker, as
//! OpenMetrics while it goes on, then the report's totals; served until the report is printed,
//! and `--prometheus-linger D` longer, so a scrape after the end sees the final numbers.

use std::time::{Duration, Instant};

use volley_engine::RunControl;
use volley_worker::metrics::Exporter;

use crate::cli::LoadArgs;
use crate::error::CliError;
use crate::options::parse_duration;

pub(crate) struct Endpoint {
    pub exporter: Exporter,
    linger: Option<Duration>,
}

/// The endpoint `--prometheus` asks for, listening; none without the flag. An address that
/// cannot be bound is a usage error, found before any load starts.
pub(crate) fn start(args: &LoadArgs) -> Result<Option<Endpoint>, CliError> {
    let Some(addr) = args.prometheus else { return Ok(None) };
    let linger = args.prometheus_linger.as_deref().map(|d| parse_duration(d, "--prometheus-linger")).transpose()?;
    let exporter = Exporter::start(addr).map_err(|e| CliError::Usage(e.to_string()))?;
    Ok(Some(Endpoint { exporter, linger }))
}

impl Endpoint {
    /// Serves on for `--prometheus-linger`, or until a Ctrl-C that comes during it (one that
    /// stopped the run leaves the linger to a second one, which exits at once).
    pub(crate) fn linger(self, interrupt: &RunControl) {
        let Some(linger) = self.linger else { return };
        let until = Instant::now() + linger;
        let stopped_before = interrupt.is_stopped();
        while Instant::now() < until && (stopped_before || !interrupt.is_stopped()) {
            std::thread::sleep(Duration::from_millis(50).min(until.saturating_duration_since(Instant::now())));
        }
    }
}
