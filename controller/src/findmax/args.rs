//! `volley find-max`'s own flags, beside the load flags it shares with `volley URL`, and the
//! load flags that mean nothing to a search (each step's rate and length are the search's).

use clap::parser::ValueSource;
use clap::{ArgMatches, Args};

use crate::cli::LoadArgs;
use crate::error::CliError;

#[derive(Debug, Args)]
pub(crate) struct FindMaxArgs {
    /// A service level objective every step must hold, repeatable, in --threshold's language:
    /// p99<20ms, error_rate<0.1% (or errors<0.1%), status_5xx<1%. At least one.
    #[arg(long = "slo", value_name = "EXPR")]
    pub slos: Vec<String>,
    /// The first step's rate, in requests per second; each step that holds doubles it.
    #[arg(long, value_name = "R", default_value = "100", allow_hyphen_values = true)]
    pub start: String,
    /// The highest rate tried: a target that holds it is reported as holding at least that.
    #[arg(long, value_name = "R", default_value = "1000000", allow_hyphen_values = true)]
    pub max_rate: String,
    /// The most steps run, whatever the search still wants: the capacity is then the highest
    /// rate that held so far.
    #[arg(long, value_name = "N", default_value = "30", allow_hyphen_values = true)]
    pub max_steps: String,
    /// How long each step holds its rate (at least 1s).
    #[arg(long, value_name = "D", default_value = "10s")]
    pub step_duration: String,
    /// A pause between steps, so that what one step left behind (a queue, a backlog) is gone
    /// before the next is measured; 0 for none.
    #[arg(long, value_name = "D", default_value = "1s")]
    pub step_pause: String,
    /// Bisect until the rate that failed is within this percent above the rate that held.
    #[arg(long, value_name = "PERCENT", default_value = "5%")]
    pub precision: String,
    #[command(flatten)]
    pub load: LoadArgs,
}

/// Load flags that a search sets itself or cannot use, with why.
const NOT_FOR_A_SEARCH: [(&str, &str, &str); 13] = [
    ("requests", "-n/--requests", "each step runs for --step-duration"),
    ("duration", "-z/--duration", "each step runs for --step-duration"),
    ("rate", "--rate", "the search chooses each step's rate (see --start and --max-rate)"),
    ("stages", "--stages", "the search chooses each step's rate (see --start and --max-rate)"),
    ("warm_up", "--warm-up", "each step is judged on the whole of it (--step-pause separates steps)"),
    ("thresholds", "--threshold", "give the search --slo"),
    ("abort_on_fail", "--abort-on-fail", "each step is judged on the whole of it"),
    ("abort_grace", "--abort-grace", "each step is judged on the whole of it"),
    ("baselines", "--baseline", "a search has no single run to compare"),
    ("max_regression", "--max-regression", "a search has no single run to compare"),
    ("hlog", "--hlog", "a search is many runs, not one interval log"),
    ("prometheus", "--prometheus", "a search is many runs"),
    ("prometheus_linger", "--prometheus-linger", "a search is many runs"),
];

/// The first load flag given on the command line that a search does not take, as a usage
/// error saying why.
pub(crate) fn refuse_load_only_flags(matches: &ArgMatches) -> Result<(), CliError> {
    for (id, flag, why) in NOT_FOR_A_SEARCH {
        if matches.value_source(id) == Some(ValueSource::CommandLine) {
            return Err(CliError::Usage(format!("find-max: {flag} does not apply: {why}")));
        }
    }
    Ok(())
}
