//! The threshold language: `[NAME:]METRIC OP VALUE`, e.g. `p99<5ms`, `rps>=1000`,
//! `error_rate<0.1%`, `status_5xx<1%`, `status_200>100`, and per name of a mix `login:p99<200ms`
//! or `"GET /users":p99<200ms` (a name with a blank or a colon is quoted). Parsed once, before
//! any load starts, so a typo is a usage error and not a failed gate after a ten-minute run.

use std::fmt;

use crate::error::CliError;

/// What the accepted metrics are, for the usage line of a bad expression.
const METRICS: &str = "p50..p99.99, mean, min, max (of latency, or connect_/first_byte_ before them), rps, \
                       error_rate, errors, status_CODE or status_Nxx, retry_after, checks";

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
    /// The share of a scenario's checks that passed (of the run's, or of one name's), 0 to 1.
    Checks,
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
    /// The name of a mix whose statistics it reads (`login` of `login:p99<200ms`); None for
    /// the whole run's.
    pub mix_name: Option<String>,
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
        let whole = text;
        let (mix_name, text) = split_name(text).map_err(bad)?;
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
        if mix_name.is_some() {
            per_name(metric, &name).map_err(bad)?;
        }
        Ok(Threshold { text: whole.trim().to_string(), name, mix_name, metric, op, limit, baseline: None })
    }

    /// What it measures, for people: `p99`, or `p99 of login` for a name's.
    pub(crate) fn what(&self) -> String {
        match &self.mix_name {
            Some(n) => format!("{} of {n}", self.name),
            None => self.name.clone(),
        }
    }
}

/// Takes a leading `NAME:` off a threshold: a bare name runs to the first colon before the
/// operator and holds no blank; a name in double quotes may hold anything (`\"` and `\\` for a
/// quote and a backslash). Metrics never hold a colon, so a colon always means a name.
fn split_name(text: &str) -> Result<(Option<String>, &str), String> {
    let trimmed = text.trim_start();
    if let Some(quoted) = trimmed.strip_prefix('"') {
        let mut name = String::new();
        let mut chars = quoted.char_indices();
        let end = loop {
            match chars.next() {
                Some((_, '\\')) => match chars.next() {
                    Some((_, c)) => name.push(c),
                    None => return Err("the quoted name has no closing '\"'".into()),
                },
                Some((at, '"')) => break at,
                Some((_, c)) => name.push(c),
                None => return Err("the quoted name has no closing '\"'".into()),
            }
        };
        let rest = quoted[end + 1..].trim_start();
        let rest = rest.strip_prefix(':').ok_or("expected ':' after the quoted name, e.g. \"GET /users\":p99<200ms")?;
        if name.is_empty() {
            return Err("the name is empty".into());
        }
        return Ok((Some(name), rest));
    }
    let operator = text.find(['<', '>']).unwrap_or(text.len());
    let Some(colon) = text[..operator].find(':') else { return Ok((None, text)) };
    let name = text[..colon].trim();
    if name.is_empty() {
        return Err("the name before ':' is empty".into());
    }
    if name.contains(char::is_whitespace) {
        return Err(format!("quote a name that holds a blank: '\"{name}\":...'"));
    }
    Ok((Some(name.to_string()), &text[colon + 1..]))
}

/// A name as a threshold writes it, so that [`split_name`] reads it back: bare when it can be,
/// in double quotes (with `\"` and `\\`) when it holds a blank, a colon, a quote, a backslash
/// or an operator.
pub(crate) fn written_name(name: &str) -> String {
    let plain = !name.is_empty()
        && !name.starts_with('"')
        && !name.chars().any(|c| c.is_whitespace() || matches!(c, ':' | '"' | '\\' | '<' | '>'));
    if plain {
        return name.to_string();
    }
    let mut out = String::with_capacity(name.len() + 2);
    out.push('"');
    for c in name.chars() {
        if matches!(c, '"' | '\\') {
            out.push('\\');
        }
        out.push(c);
    }
    out.push('"');
    out
}

/// Refuses a metric a name does not keep: connect times belong to connections, which every
/// name of a mix shares, and Retry-After is counted for the run only.
fn per_name(metric: Metric, name: &str) -> Result<(), String> {
    match metric {
        Metric::Time(Timing::Connect, _) => {
            Err(format!("{name} is not kept per name: a connection serves every name (use it without a name)"))
        }
        Metric::RetryAfter { .. } => Err(format!("{name} is counted for the whole run only (use it without a name)")),
        _ => Ok(()),
    }
}

/// A threshold naming a name the run does not have is a usage error, found once the plan is
/// built and before any load starts: a typo in a name would otherwise fail the gate with "no
/// data" after the whole run.
pub(crate) fn check_names(thresholds: &[Threshold], names: &[String], flag: &str) -> Result<(), CliError> {
    /// Names listed in the error at most: a run may have 1000, and the error is one line.
    const SHOWN: usize = 10;
    let Some((t, name)) =
        thresholds.iter().find_map(|t| t.mix_name.as_ref().filter(|n| !names.contains(n)).map(|n| (t, n)))
    else {
        return Ok(());
    };
    let known = if names.is_empty() {
        "the run has no names (a name is a --targets file's)".to_string()
    } else {
        let quoted: Vec<String> = names.iter().take(SHOWN).map(|n| format!("'{n}'")).collect();
        let more = names.len().saturating_sub(SHOWN);
        let more = if more > 0 { format!(" and {more} more") } else { String::new() };
        format!("the run's names are {}{more}", quoted.join(", "))
    };
    let name = crate::printable::one_line(name);
    Err(CliError::Usage(format!("{flag} '{}': no name '{name}': {known}", crate::printable::one_line(&t.text))))
}

fn metric(name: &str) -> Option<Metric> {
    match name {
        "rps" => return Some(Metric::Rps),
        "error_rate" => return Some(Metric::ErrorRate),
        "errors" => return Some(Metric::Errors),
        "retry_after" => return Some(Metric::RetryAfter { rate: false }),
        "checks" => return Some(Metric::Checks),
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
        Metric::Checks => match value.strip_suffix('%') {
            Some(v) => Ok((metric, percent(v)?)),
            None => Err(format!("'{value}' needs a percent sign: checks>99.9% (the share of checks passed)")),
        },
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
