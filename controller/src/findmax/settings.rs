//! The search's flags, checked before any load: SLOs, the rates it may try, how long each step
//! holds and how close the answer must be. Bad input is one usage error naming the flag.

use std::time::Duration;

use super::searched::Searched;
use crate::cli::FindMaxArgs;
use crate::error::CliError;
use crate::gate::Threshold;
use crate::options::{parse_duration, parse_whole_rate};

/// Shorter steps have too few requests to judge a p99 at low rates, and the engine reports
/// whole seconds.
const SHORTEST_STEP: Duration = Duration::from_secs(1);
/// Enough to double from 1 request a second to the engine's highest rate and bisect to 0.1%.
const MOST_STEPS: u32 = 1000;
/// The default top of a rate search: requests per second.
const MAX_RATE: &str = "1000000";
/// The default top of a search of paced users.
const MAX_USERS: &str = "10000";

#[derive(Debug, Clone)]
pub(crate) struct Settings {
    pub slos: Vec<Threshold>,
    /// What the search varies, which `start` and `max` count.
    pub searched: Searched,
    pub start: u64,
    /// The highest rate (or number of users) tried.
    pub max: u64,
    pub max_steps: u32,
    pub step: Duration,
    pub pause: Duration,
    /// As a fraction: the search ends when the lowest rate that failed is at most this much
    /// above the highest that held.
    pub precision: f64,
}

impl Settings {
    /// `searched` is what the plan makes the search vary: it decides what `--start` counts,
    /// which of `--max-rate` and `--max-users` applies, and whether `-c` may be given.
    pub(crate) fn parse(args: &FindMaxArgs, searched: Searched) -> Result<Settings, CliError> {
        if searched == Searched::Users && args.load.connections.is_some() {
            return Err(CliError::Usage(
                "find-max: -c/--connections does not apply: with a paced scenario the search chooses the number of users (see --start and --max-users)".into(),
            ));
        }
        if args.slos.is_empty() {
            return Err(CliError::Usage(
                "find-max needs at least one --slo, e.g. --slo 'p99<20ms' --slo 'error_rate<0.1%'".into(),
            ));
        }
        let slos = args.slos.iter().map(|s| Threshold::parse_as(s, "--slo")).collect::<Result<Vec<_>, _>>()?;
        let start = parse_level(&args.start, "--start", searched)?;
        let max = match (searched, &args.max_rate, &args.max_users) {
            (Searched::Rate, rate, None) => parse_level(rate.as_deref().unwrap_or(MAX_RATE), "--max-rate", searched)?,
            (Searched::Users, None, users) => {
                parse_level(users.as_deref().unwrap_or(MAX_USERS), "--max-users", searched)?
            }
            (Searched::Rate, _, Some(_)) => {
                return Err(CliError::Usage(
                    "--max-users is for a paced scenario, whose users a search counts: this one searches a rate (--max-rate)".into(),
                ));
            }
            (Searched::Users, Some(_), _) => {
                return Err(CliError::Usage(
                    "--max-rate does not apply: a paced scenario's search counts users (--start, --max-users)".into(),
                ));
            }
        };
        let flag = searched.max_flag();
        if max < start {
            return Err(CliError::Usage(format!(
                "{flag} ({max}) is below --start ({start}): the search would have nothing to try"
            )));
        }
        let max_steps = parse_steps(&args.max_steps)?;
        let step = parse_duration(&args.step_duration, "--step-duration")?;
        if step < SHORTEST_STEP {
            return Err(CliError::Usage(format!(
                "--step-duration: '{}' is shorter than 1s, too short to judge a step",
                args.step_duration
            )));
        }
        let pause = match args.step_pause.trim() {
            "0" => Duration::ZERO,
            text => parse_duration(text, "--step-pause")?,
        };
        let precision = parse_precision(&args.precision)?;
        Ok(Settings { slos, searched, start, max, max_steps, step, pause, precision })
    }
}

/// A whole rate, or a whole number of users, of at least 1.
fn parse_level(text: &str, flag: &str, searched: Searched) -> Result<u64, CliError> {
    if searched == Searched::Rate {
        return parse_whole_rate(text, flag);
    }
    let bad = |why: &str| CliError::Usage(format!("{flag}: '{text}' {why}"));
    match text.trim().parse::<u64>() {
        Ok(0) => Err(bad("is zero: give at least 1 user")),
        Ok(n) => Ok(n),
        Err(_) => Err(bad("is not a whole number of users")),
    }
}

fn parse_steps(text: &str) -> Result<u32, CliError> {
    let bad = |why: &str| CliError::Usage(format!("--max-steps: '{text}' {why}"));
    match text.trim().parse::<u32>() {
        Ok(0) => Err(bad("is zero: give at least 1")),
        Ok(n) if n > MOST_STEPS => Err(bad(&format!("is more than {MOST_STEPS}"))),
        Ok(n) => Ok(n),
        Err(_) => Err(bad("is not a whole number of steps")),
    }
}

/// `5%` or `5`: a percent above 0 and below 100.
fn parse_precision(text: &str) -> Result<f64, CliError> {
    let bad = |why: &str| CliError::Usage(format!("--precision: '{text}' {why}"));
    let number = text.trim().strip_suffix('%').unwrap_or(text.trim()).trim();
    let percent: f64 = number.parse().ok().filter(|p: &f64| p.is_finite()).ok_or_else(|| bad("is not a percent"))?;
    if percent <= 0.0 || percent >= 100.0 {
        return Err(bad("must be above 0% and below 100%"));
    }
    Ok(percent / 100.0)
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::*;

    fn settings(flags: &[&str]) -> Result<Settings, CliError> {
        let args = [&["volley", "find-max"], flags, &["http://127.0.0.1:1/"]].concat();
        match crate::cli::Cli::try_parse_from(args).expect("parses").command {
            Some(crate::cli::Command::FindMax(args)) => Settings::parse(&args, Searched::Rate),
            other => panic!("not find-max: {other:?}"),
        }
    }

    #[test]
    fn the_defaults_are_doubling_from_100_for_10s_steps_to_within_5_percent() {
        let s = settings(&["--slo", "p99<20ms"]).expect("valid");
        assert_eq!((s.start, s.max, s.max_steps), (100, 1_000_000, 30));
        assert_eq!((s.step, s.pause), (Duration::from_secs(10), Duration::from_secs(1)));
        assert!((s.precision - 0.05).abs() < 1e-12);
        assert_eq!(s.slos.len(), 1);
    }

    #[test]
    fn every_bad_flag_is_a_usage_error_that_names_it() {
        for (flags, says) in [
            (&["--start", "10"][..], "at least one --slo"),
            (&["--slo", "p99<20"], "--slo 'p99<20': "),
            (&["--slo", "p99<1ms", "--start", "0"], "--start: '0' is zero"),
            (&["--slo", "p99<1ms", "--start", "-3"], "--start: '-3' is negative"),
            (&["--slo", "p99<1ms", "--start", "500", "--max-rate", "400"], "--max-rate (400) is below --start (500)"),
            (&["--slo", "p99<1ms", "--step-duration", "soon"], "--step-duration: invalid duration 'soon'"),
            (&["--slo", "p99<1ms", "--step-duration", "0s"], "--step-duration: duration must be more than zero"),
            (&["--slo", "p99<1ms", "--step-duration", "500ms"], "shorter than 1s"),
            (&["--slo", "p99<1ms", "--max-steps", "0"], "--max-steps: '0' is zero"),
            (&["--slo", "p99<1ms", "--precision", "0%"], "--precision: '0%' must be above 0%"),
            (&["--slo", "p99<1ms", "--precision", "fine"], "is not a percent"),
        ] {
            match settings(flags) {
                Err(CliError::Usage(line)) => assert!(line.contains(says), "{flags:?}: {line}"),
                other => panic!("{flags:?}: {other:?}"),
            }
        }
    }
}
