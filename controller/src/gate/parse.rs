//! The threshold language: `METRIC OP VALUE`, e.g. `p99<5ms`, `rps>=1000`, `error_rate<0.1%`,
//! `status_5xx<1%`, `status_200>100`. Parsed once, before any load starts, so a typo is a usage
//! error and not a failed gate after a ten-minute run.

use std::fmt;

use crate::error::CliError;

/// What the accepted metrics are, for the usage line of a bad expression.
const METRICS: &str = "p50..p99.99, mean, min, max (of latency, or connect_/first_byte_ before them), rps, \
                       error_rate, errors, status_CODE or status_Nxx, retry_after";

/// Which of the three timings a latency metric reads.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Timing {
    /// Request due or sent to the last byte of its response.
    Latency,
    Connect,
    FirstByte,
}

/// One number of a timing's histogram.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Stat {
    /// A quantile in (0, 1].
    Quantile(f64),
    Mean,
    Min,
    Max,
}

/// Which responses a status metric counts.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Statuses {
    Code(u16),
    /// 1 to 5: every code from N00 to N99.
    Class(u16),
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Metric {
    /// Seconds.
    Time(Timing, Stat),
    /// Requests finished per second of the run.
    Rps,
    /// Failed requests (connect, timeout, reset, protocol, TLS) over all requests, 0 to 1.
    ErrorRate,
    /// Failed requests.
    Errors,
    /// Responses with these statuses: a count, or with `rate` their share of all requests.
    Status { statuses: Statuses, rate: bool },
    /// Responses that carried Retry-After: a count, or with `rate` their share of all requests.
    RetryAfter { rate: bool },
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Op {
    Lt,
    Le,
    Gt,
    Ge,
}

impl Op {
    pub(crate) fn holds(self, measured: f64, limit: f64) -> bool {
        match self {
            Op::Lt => measured < limit,
            Op::Le => measured <= limit,
            Op::Gt => measured > limit,
            Op::Ge => measured >= limit,
        }
    }
}

impl fmt::Display for Op {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Op::Lt => "<",
            Op::Le => "<=",
            Op::Gt => ">",
            Op::Ge => ">=",
        })
    }
}

/// One `--threshold`: what to measure, how to compare, and the limit in the metric's own unit
/// (seconds for times, a fraction for rates).
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Threshold {
    /// As the user wrote it, for the report.
    pub text: String,
    /// The metric's name as written (`p99`, `connect_p99`, `status_5xx`).
    pub name: String,
    pub metric: Metric,
    pub op: Op,
    pub limit: f64,
    /// A comparison with `--baseline`: the baseline's value, which `limit` allows a regression
    /// from.
    pub baseline: Option<f64>,
}

/// Parses every `--threshold`; the first bad one is a usage error naming it.
pub(crate) fn parse_all(texts: &[String]) -> Result<Vec<Threshold>, CliError> {
    texts.iter().map(|t| Threshold::parse(t)).collect()
}

impl Threshold {
    pub(crate) fn parse(text: &str) -> Result<Threshold, CliError> {
        Threshold::parse_as(text, "--threshold")
    }

    /// The same language for another flag (`find-max --slo`), named in its errors.
    pub(crate) fn parse_as(text: &str, flag: &str) -> Result<Threshold, CliError> {
        let bad = |why: String| CliError::Usage(format!("{flag} '{text}': {why}"));
        let at = text
            .find(['<', '>'])
            .ok_or_else(|| bad("expected METRIC<VALUE, <=, > or >= (e.g. p99<5ms, rps>1000)".into()))?;
        let name = text[..at].trim().to_ascii_lowercase();
        let rest = &text[at..];
        let (op, value) = match rest.as_bytes() {
            [b'<', b'=', ..] => (Op::Le, &rest[2..]),
            [b'>', b'=', ..] => (Op::Ge, &rest[2..]),
            [b'<', ..] => (Op::Lt, &rest[1..]),
            _ => (Op::Gt, &rest[1..]),
        };
        let value = value.trim();
        let metric = metric(&name).ok_or_else(|| bad(format!("unknown metric '{name}' (known: {METRICS})")))?;
        let (metric, limit) = limit(metric, value).map_err(bad)?;
        Ok(Threshold { text: text.trim().to_string(), name, metric, op, limit, baseline: None })
    }
}

fn metric(name: &str) -> Option<Metric> {
    match name {
        "rps" => return Some(Metric::Rps),
        "error_rate" => return Some(Metric::ErrorRate),
        "errors" => return Some(Metric::Errors),
        "retry_after" => return Some(Metric::RetryAfter { rate: false }),
        _ => {}
    }
    if let Some(code) = name.strip_prefix("status_") {
        let statuses = match code.as_bytes() {
            [c @ b'1'..=b'5', b'x', b'x'] => Statuses::Class(u16::from(c - b'0')),
            _ => Statuses::Code(code.parse().ok().filter(|c| (100..=599).contains(c))?),
        };
        return Some(Metric::Status { statuses, rate: false });
    }
    let (timing, stat) = if let Some(s) = name.strip_prefix("connect_") {
        (Timing::Connect, s)
    } else if let Some(s) = name.strip_prefix("first_byte_") {
        (Timing::FirstByte, s)
    } else {
        (Timing::Latency, name.strip_prefix("latency_").unwrap_or(name))
    };
    let stat = match stat {
        "mean" => Stat::Mean,
        "min" => Stat::Min,
        "max" => Stat::Max,
        p => {
            let percent: f64 = p.strip_prefix('p')?.parse().ok()?;
            if !(percent > 0.0 && percent <= 100.0) {
                return None;
            }
            // Divided as whole numbers so that p99.99 is the double nearest 0.9999, the
            // quantile the report's own p99.99 reads (99.99 / 100 is one ulp below it).
            Stat::Quantile((percent * 1e6).round() / 1e8)
        }
    };
    Some(Metric::Time(timing, stat))
}

/// The limit in the metric's unit; a status metric becomes a rate when its limit is a percent.
fn limit(metric: Metric, value: &str) -> Result<(Metric, f64), String> {
    let number = |v: &str| -> Result<f64, String> {
        v.trim()
            .parse::<f64>()
            .ok()
            .filter(|n| n.is_finite() && *n >= 0.0)
            .ok_or_else(|| format!("'{value}' is not a number"))
    };
    let percent = |v: &str| -> Result<f64, String> {
        let n = number(v)?;
        if n > 100.0 {
            return Err(format!("{value} is more than 100%"));
        }
        Ok(n / 100.0)
    };
    match metric {
        Metric::Time(..) => {
            let split = value.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(value.len());
            let n = number(&value[..split])?;
            let scale = match value[split..].trim() {
                "ns" => 1e-9,
                "us" | "µs" => 1e-6,
                "ms" => 1e-3,
                "s" => 1.0,
                "" => return Err(format!("'{value}' needs a unit: ns, us, ms or s (e.g. 5ms)")),
                unit => return Err(format!("unknown unit '{unit}' (use ns, us, ms or s)")),
            };
            Ok((metric, n * scale))
        }
        Metric::ErrorRate => match value.strip_suffix('%') {
            Some(v) => Ok((metric, percent(v)?)),
            None => Err(format!("'{value}' needs a percent sign: error_rate<1% (use errors<N for a count)")),
        },
        Metric::Status { statuses, .. } => match value.strip_suffix('%') {
            Some(v) => Ok((Metric::Status { statuses, rate: true }, percent(v)?)),
            None => Ok((metric, number(value)?)),
        },
        Metric::RetryAfter { .. } => match value.strip_suffix('%') {
            Some(v) => Ok((Metric::RetryAfter { rate: true }, percent(v)?)),
            None => Ok((metric, number(value)?)),
        },
        // `errors<0.1%`, as people write an error budget, is `error_rate<0.1%`.
        Metric::Errors => match value.strip_suffix('%') {
            Some(v) => Ok((Metric::ErrorRate, percent(v)?)),
            None => Ok((metric, number(value)?)),
        },
        Metric::Rps => {
            if value.ends_with('%') {
                return Err("a percent needs a rate: error_rate (or errors), status_CODE or retry_after".into());
            }
            Ok((metric, number(value)?))
        }
    }
}

#[cfg(test)]
mod tests;
