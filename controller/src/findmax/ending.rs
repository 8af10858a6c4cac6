//! How a search ended, what it found, and the exit status that says so.

use super::search::{Conclusion, Search};
use super::searched::Searched;
use crate::error::CliError;

#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Ending {
    /// The search ran its course.
    Concluded(Conclusion),
    /// Ctrl-C stopped it.
    Interrupted,
    /// A worker failed during a step, which therefore cannot be judged: the search stopped.
    Incomplete(String),
    /// A step could not run anywhere (no worker could start it): the search stopped.
    CouldNotRun(String),
}

/// The search's result: how it ended, and the highest rate that held and lowest that failed
/// by then.
#[derive(Debug, Clone)]
pub(crate) struct Found {
    pub ending: Ending,
    pub capacity: Option<u64>,
    pub failed: Option<u64>,
}

impl Found {
    pub(crate) fn new(ending: Ending, search: &Search) -> Found {
        let capacity = match &ending {
            Ending::Concluded(c) => c.capacity(),
            _ => search.held(),
        };
        Found { ending, capacity, failed: search.failed() }
    }

    /// The JSON's `outcome`.
    pub(crate) fn name(&self, searched: Searched) -> &'static str {
        match self.ending {
            Ending::Concluded(Conclusion::Found { .. }) => "found",
            Ending::Concluded(Conclusion::ReachedMax { .. }) => match searched {
                Searched::Rate => "reachedMaxRate",
                Searched::Users => "reachedMaxUsers",
            },
            Ending::Concluded(Conclusion::StepLimit { .. }) => "stepLimit",
            Ending::Concluded(Conclusion::FirstStepFailed { .. }) => "firstStepFailed",
            Ending::Interrupted => "interrupted",
            Ending::Incomplete(_) => "incomplete",
            Ending::CouldNotRun(_) => "couldNotRun",
        }
    }

    /// The exit status, once the table is printed: 0 when a capacity was found, 5 when even
    /// the first step failed, 130 for Ctrl-C, 3 for a step a worker did not complete, 1 for
    /// one that could not run at all. `first_failure` says what failed the first step.
    pub(crate) fn outcome(&self, searched: Searched, first_failure: Option<String>) -> Result<(), CliError> {
        match &self.ending {
            Ending::Concluded(Conclusion::FirstStepFailed { failed }) => Err(CliError::NoCapacity(format!(
                "the first step, {}, failed: {}",
                searched.amount(*failed),
                first_failure.unwrap_or_else(|| "see the table".into())
            ))),
            Ending::Concluded(_) => Ok(()),
            Ending::Interrupted => Err(CliError::Interrupted),
            Ending::Incomplete(why) => Err(CliError::Incomplete(why.clone())),
            Ending::CouldNotRun(why) => Err(CliError::RunFailed(why.clone())),
        }
    }
}
