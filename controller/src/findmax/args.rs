//! The load flags that mean nothing to `volley find-max` (each step's rate and length are the
//! search's); its own flags are `cli::FindMaxArgs`, beside the load flags it shares.

use clap::ArgMatches;
use clap::parser::ValueSource;

use crate::error::CliError;

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
