//! Performance gates: `--threshold EXPR` parsed once into a [`Threshold`], judged by the
//! controller on the merged statistics of every worker (never one worker's part: a rate or a
//! count only means something for the whole run).

pub(crate) mod baseline;
mod compare;
mod parse;
mod scope;
mod verdict;
mod watch;

pub(crate) use compare::compare;
pub(crate) use parse::{Metric, Stat, Threshold, Timing, check_names, parse_all};
pub(crate) use verdict::{Verdict, judge, mark_aborted, to_text};
pub(crate) use watch::{Breach, Watch};
