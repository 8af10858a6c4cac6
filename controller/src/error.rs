//! The one error type the command line reports, as a single line on stderr.

use volley_engine::{EngineError, TargetError};

use crate::scenario::ScenarioError;
use crate::targets::TargetsError;

#[derive(Debug, thiserror::Error)]
pub(crate) enum CliError {
    #[error("{0}")]
    Usage(String),
    #[error("{path}: {why}")]
    File { path: String, why: String },
    /// A saved report given as input (`volley merge`, `compare`, `--baseline`) that is not one
    /// volley can trust: bad input, as a usage error is.
    #[error("{path}: {why}")]
    BadReport { path: String, why: String },
    /// A `--targets` file that cannot be used: bad input, as a usage error is.
    #[error(transparent)]
    Targets(#[from] TargetsError),
    /// A `--scenario` file that cannot be used: bad input, as a usage error is.
    #[error(transparent)]
    Scenario(#[from] ScenarioError),
    #[error(transparent)]
    Target(#[from] TargetError),
    #[error(transparent)]
    Engine(#[from] EngineError),
    #[error("serve: {0}")]
    Serve(String),
    #[error("{0}")]
    Worker(String),
    /// The run happened and its report was printed, but it cannot be called a success.
    #[error("{0}")]
    RunFailed(String),
    /// Some workers failed; the report of the others was printed.
    #[error("incomplete run: {0}")]
    Incomplete(String),
    /// The run completed, and some --threshold did not hold; the report says which.
    #[error("thresholds failed: {0}")]
    ThresholdsFailed(String),
    /// `volley find-max`: even the first step failed; the table was printed.
    #[error("no capacity found: {0}")]
    NoCapacity(String),
    /// Ctrl-C stopped the run; its report was printed.
    #[error("interrupted: the report covers the run up to Ctrl-C")]
    Interrupted,
}

impl CliError {
    /// 130 for Ctrl-C, as shells do; 2 for a usage error, as for clap's own, or a saved report or
    /// targets or scenario file that cannot be used; 3 for a run some
    /// workers did not complete; 4 for thresholds that failed; 5 for a capacity search whose
    /// first step failed; 1 for everything else.
    pub(crate) fn exit_code(&self) -> std::process::ExitCode {
        match self {
            CliError::Usage(_) | CliError::BadReport { .. } | CliError::Targets(_) | CliError::Scenario(_) => {
                std::process::ExitCode::from(2)
            }
            CliError::Interrupted => std::process::ExitCode::from(130),
            CliError::Incomplete(_) => std::process::ExitCode::from(3),
            CliError::ThresholdsFailed(_) => std::process::ExitCode::from(4),
            CliError::NoCapacity(_) => std::process::ExitCode::from(5),
            _ => std::process::ExitCode::FAILURE,
        }
    }
}
