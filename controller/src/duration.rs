//! Durations as people write them, on the command line and in scenario files: `10s`, `1m30s`,
//! `500ms`, `250us`, `2h`, or a bare number of seconds.

use std::time::Duration;

use volley_engine::MAX_DURATION;

#[derive(Debug, PartialEq, thiserror::Error)]
pub(crate) enum DurationError {
    #[error("invalid duration '{0}' (use e.g. 10s, 1m30s, 500ms, 250us)")]
    Invalid(String),
    #[error("'{0}' is longer than the longest allowed, 365 days (8760h)")]
    TooLong(String),
    #[error("duration must be more than zero")]
    Zero,
}

/// `text` as a duration. Zero is refused, and so is anything longer than the engine takes (a
/// year).
pub(crate) fn parse(text: &str) -> Result<Duration, DurationError> {
    let bad = || DurationError::Invalid(text.to_string());
    let too_long = || DurationError::TooLong(text.to_string());
    let s = text.trim();
    if s.is_empty() {
        return Err(bad());
    }
    // Seconds as f64; whatever Duration cannot hold (1e30) is too long, not a panic.
    let seconds = |secs: f64| Duration::try_from_secs_f64(secs).map_err(|_| too_long());
    let total = if let Ok(secs) = s.parse::<f64>() {
        if !secs.is_finite() || secs < 0.0 {
            return Err(bad());
        }
        seconds(secs)?
    } else {
        let mut total = Duration::ZERO;
        let mut rest = s;
        while !rest.is_empty() {
            let digits = rest.find(|c: char| !c.is_ascii_digit() && c != '.').ok_or_else(bad)?;
            if digits == 0 {
                return Err(bad());
            }
            let value: f64 = rest[..digits].parse().map_err(|_| bad())?;
            rest = &rest[digits..];
            let unit_len = rest.find(|c: char| c.is_ascii_digit()).unwrap_or(rest.len());
            let unit = match &rest[..unit_len] {
                "us" | "µs" => 0.000_001,
                "ms" => 0.001,
                "s" => 1.0,
                "m" => 60.0,
                "h" => 3600.0,
                _ => return Err(bad()),
            };
            rest = &rest[unit_len..];
            total = total.checked_add(seconds(value * unit)?).ok_or_else(too_long)?;
        }
        total
    };
    if total.is_zero() {
        return Err(DurationError::Zero);
    }
    if total > MAX_DURATION {
        return Err(too_long());
    }
    Ok(total)
}
