//! The rules every plan keeps, whoever built it: the command line, or a controller over the
//! wire. The one place a plan's limits are checked: called by the command line once its flags
//! are parsed, by the worker as a shard arrives and by the engine before a run, so a rule the
//! command line keeps cannot be broken by a shard (a plan of stages and a request count, say,
//! that would never end).

use std::time::Duration;

use super::validate_source_addrs;
use crate::feeder::{Feeder, MAX_COLUMNS, MAX_FEEDERS, is_feeder_name};
use crate::template::{Template, Vocabulary, check_template};

use super::{
    Load, MAX_BODY_BYTES, MAX_CHECKS, MAX_CONNECTIONS, MAX_DURATION, MAX_EXTRACTORS, MAX_HOLD, MAX_KEPT_BODY_BYTES,
    MAX_KEPT_CHECKS, MAX_NAMES, MAX_PACING, MAX_RATE, MAX_REDIRECTS, MAX_REQUESTS, MAX_SCENARIOS, MAX_STAGES,
    MAX_STREAMS, MAX_THREADS, MAX_VARIABLES, Mix, Plan, Protocol, Scenario, Source, Stop, Think, is_variable_name,
};

/// Why a plan cannot run: the setting it concerns, and words that name the limit it broke.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{why}")]
pub struct PlanError {
    /// What the broken rule is about, so that the command line can name its flag.
    pub setting: Setting,
    why: String,
}

impl PlanError {
    pub(crate) fn new(setting: Setting, why: String) -> Self {
        PlanError { setting, why }
    }
}

/// A plan's settings, as its rules name them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Setting {
    Connections,
    Threads,
    Requests,
    Duration,
    ConnectTimeout,
    RequestTimeout,
    Body,
    Streams,
    Rate,
    Stages,
    WarmUp,
    Hold,
    /// How much of a body checks and extractors see.
    KeptBody,
    /// A mix's requests (a targets file).
    Targets,
    /// A mix of scenarios (a scenario file).
    Scenario,
    /// The local addresses connections leave from.
    SourceAddrs,
    /// Test data for templates (a scenario file's feeders).
    Feeders,
}

/// Scenarios cover a mix's `requests` exactly, each with a step and a weight, and a draw by
/// weight stays within 64 bits.
fn validate_scenarios(scenarios: &[Scenario], requests: usize) -> Result<(), PlanError> {
    let bad = |why: String| Err(PlanError { setting: Setting::Scenario, why });
    if scenarios.is_empty() {
        return bad("a scenario mix needs at least one scenario".into());
    }
    if scenarios.len() > MAX_SCENARIOS {
        return bad(format!("{} scenarios is more than the {MAX_SCENARIOS} a run may have", scenarios.len()));
    }
    if let Some(s) = scenarios.iter().find(|s| s.steps == 0) {
        return bad(format!("scenario {}: a scenario needs at least one step", s.name));
    }
    if let Some(s) = scenarios.iter().find(|s| s.weight == 0) {
        return bad(format!("scenario {}: a weight must be at least 1", s.name));
    }
    if let Some(s) = scenarios.iter().find(|s| s.pacing.is_some_and(|p| p.is_zero() || p > MAX_PACING)) {
        return bad(format!("scenario {}: pacing runs from 1 ns to {} s", s.name, MAX_PACING.as_secs()));
    }
    if scenarios.iter().any(|s| s.pacing.is_some()) && scenarios.iter().any(|s| s.pacing.is_none()) {
        return bad("pacing is every scenario's or none's: a user's cadence runs across its iterations".into());
    }
    let steps: u64 = scenarios.iter().map(|s| u64::from(s.steps)).sum();
    if steps != requests as u64 {
        return bad(format!("the scenarios have {steps} steps in all, but the mix lists {requests} requests"));
    }
    Ok(())
}

/// Feeders are few, each with distinct columns, a plain name, and rows within its table.
fn validate_feeders(feeders: &[Feeder]) -> Result<(), PlanError> {
    let bad = |why: String| Err(PlanError { setting: Setting::Feeders, why });
    if feeders.len() > MAX_FEEDERS {
        return bad(format!("{} feeders is more than the {MAX_FEEDERS} a run may have", feeders.len()));
    }
    for (i, f) in feeders.iter().enumerate() {
        if !is_feeder_name(&f.name) {
            return bad(format!("feeder `{}`: a name is letters, digits, `_` and `-`", f.name.escape_debug()));
        }
        if feeders[..i].iter().any(|g| g.name == f.name) {
            return bad(format!("two feeders are named `{}`", f.name));
        }
        if f.columns.is_empty() || f.columns.len() > MAX_COLUMNS {
            return bad(format!(
                "feeder {}: it has {} columns, and may have 1 to {MAX_COLUMNS}",
                f.name,
                f.columns.len()
            ));
        }
        if let Some(c) = f.columns.iter().enumerate().find(|(j, c)| f.columns[..*j].contains(c)).map(|(_, c)| c) {
            return bad(format!("feeder {}: two columns are named `{c}`", f.name));
        }
        if f.table.width() != f.columns.len() || f.rows.end > f.table.rows() || f.rows.start > f.rows.end {
            return bad(format!("feeder {}: its rows do not match its columns", f.name));
        }
    }
    Ok(())
}

/// A feeder's cells go where the template puts them as they are: into a path one must hold no
/// blank or control byte, into a header's value no line break or NUL, else a row would end
/// the request line early or smuggle in a header of its own.
fn validate_cells(feeders: &[Feeder], path: &Template, values: &[Template]) -> Result<(), PlanError> {
    let check = |(f, c): (usize, usize), bad_byte: fn(u8) -> bool, place: &str| {
        let Some(feeder) = feeders.get(f) else { return Ok(()) };
        for row in feeder.rows.clone() {
            if let Some(b) = feeder.table.cell(row, c).iter().find(|&&b| bad_byte(b)) {
                return Err(PlanError {
                    setting: Setting::Feeders,
                    why: format!(
                        "feeder {}, row {}: column `{}` goes into {place}, and its value holds byte 0x{b:02x}, \
                         which may not go there",
                        feeder.name,
                        row + 1,
                        feeder.columns.get(c).map_or("", String::as_str),
                    ),
                });
            }
        }
        Ok(())
    };
    for column in path.columns() {
        check(column, |b| b <= b' ' || b == 0x7f, "a path")?;
    }
    for column in values.iter().flat_map(Template::columns) {
        check(column, |b| matches!(b, b'\r' | b'\n' | 0), "a header's value")?;
    }
    Ok(())
}

/// Extractors are a scenario's, few per step, into variables of plain names, each of which a
/// step uses only after an earlier step of its scenario set it (so no request goes out with a
/// value its iteration has not taken).
fn validate_extractors(mix: &Mix, vocabulary: &Vocabulary) -> Result<(), PlanError> {
    let bad = |why: String| Err(PlanError { setting: Setting::Scenario, why });
    let variables = mix.variables();
    if variables.is_empty() {
        return Ok(());
    }
    let Some(scenarios) = mix.order.scenarios() else {
        return bad("extractors belong to a scenario's steps, and this mix has no scenarios".into());
    };
    if variables.len() > MAX_VARIABLES {
        return bad(format!("{} variables is more than the {MAX_VARIABLES} a run may have", variables.len()));
    }
    for r in &mix.requests {
        let name = r.name.escape_debug();
        if r.extract.len() > MAX_EXTRACTORS {
            return bad(format!("{name}: more than the {MAX_EXTRACTORS} extractors a step may have"));
        }
        for e in &r.extract {
            if !is_variable_name(&e.var) {
                return bad(format!(
                    "{name}: variable `{}`: a name is a letter or `_`, then letters, digits and `_`, and not a built-in",
                    e.var.escape_debug()
                ));
            }
            match &e.from {
                // Header names are lowercase in a plan; cookie names keep their case (they are
                // case-sensitive: `JSESSIONID`).
                Source::Header { name: field }
                    if field.is_empty() || !field.bytes().all(|b| b.is_ascii_graphic() && !b.is_ascii_uppercase()) =>
                {
                    return bad(format!("{name}: `{}` is not a lowercase header field name", field.escape_debug()));
                }
                Source::Cookie { name: field }
                    if field.is_empty()
                        || !field.bytes().all(|b| b.is_ascii_graphic() && !b"()<>@,;:\\\"/[]?={}".contains(&b)) =>
                {
                    return bad(format!("{name}: `{}` is not a cookie name", field.escape_debug()));
                }
                Source::Regex { pattern, group } if *group >= pattern.groups() => {
                    return bad(format!(
                        "{name}: the pattern /{}/ has no group {group}",
                        pattern.as_str().escape_debug()
                    ));
                }
                _ => {}
            }
        }
    }
    let mut first = 0;
    for scenario in scenarios {
        let steps = mix.requests.get(first..first + scenario.steps as usize).unwrap_or(&[]);
        for (k, step) in steps.iter().enumerate().filter(|(_, r)| r.templated) {
            for used in step
                .template_texts()
                .filter_map(|t| Template::parse(t, vocabulary).ok())
                .flat_map(|t| t.variables().collect::<Vec<_>>())
            {
                let var = variables.get(used).copied().unwrap_or("");
                if !steps[..k].iter().any(|earlier| earlier.extract.iter().any(|e| e.var == var)) {
                    return bad(format!(
                        "scenario {}, step {}: `{{{{{var}}}}}` is used before an earlier step of the scenario extracts it",
                        scenario.name,
                        step.name.escape_debug()
                    ));
                }
            }
        }
        first += scenario.steps as usize;
    }
    Ok(())
}

impl Plan {
    /// A mix's size, names and paths, and the size of the bodies.
    fn validate_requests(&self) -> Result<(), PlanError> {
        let bad = |setting, why: String| Err(PlanError { setting, why });
        let days = MAX_DURATION.as_secs() / 86_400;
        validate_feeders(&self.feeders)?;
        let vocabulary = self.vocabulary();
        if let Some(mix) = self.requests.mix() {
            let setting = if mix.order.scenarios().is_some() { Setting::Scenario } else { Setting::Targets };
            if mix.requests.is_empty() {
                return bad(setting, "a mix needs at least one request".into());
            }
            if mix.requests.len() > MAX_REQUESTS {
                return bad(
                    setting,
                    format!("{} requests is more than the {MAX_REQUESTS} a mix may list", mix.requests.len()),
                );
            }
            let names = mix.names().len();
            if names > MAX_NAMES {
                return bad(setting, format!("{names} names is more than the {MAX_NAMES} a run may have"));
            }
            if let Some(r) = mix.requests.iter().find(|r| !r.checks_are_distinct()) {
                let name = r.name.escape_debug();
                return bad(setting, format!("{name}: two checks of one name; a step's check names are distinct"));
            }
            if let Some(r) =
                mix.requests.iter().find(|r| r.checks.iter().filter(|c| c.rule.needs_kept()).count() > MAX_KEPT_CHECKS)
            {
                let name = r.name.escape_debug();
                return bad(
                    setting,
                    format!(
                        "{name}: more than the {MAX_KEPT_CHECKS} checks on header fields and the body a step may have"
                    ),
                );
            }
            let checks = mix.check_count();
            if checks > MAX_CHECKS {
                return bad(setting, format!("{checks} checks is more than the {MAX_CHECKS} a run may have"));
            }
            if let Some(r) = mix.requests.iter().find(|r| !r.has_request_path(&vocabulary)) {
                return bad(
                    setting,
                    format!("{}: a path must start with / and hold no blank or control character", r.name),
                );
            }
            if let Some(scenarios) = mix.order.scenarios() {
                validate_scenarios(scenarios, mix.requests.len())?;
                if self.load.is_open() && scenarios.iter().any(|s| s.pacing.is_some()) {
                    return Err(PlanError {
                        setting: Setting::Scenario,
                        why: "pacing gives each user its own cadence: it cannot go with --rate".into(),
                    });
                }
            }
            validate_extractors(mix, &vocabulary)?;
            for r in mix.requests.iter().filter(|r| r.think.is_some()) {
                let name = r.name.escape_debug();
                if mix.order.scenarios().is_none() {
                    return bad(setting, format!("{name}: a think time belongs to a scenario's step"));
                }
                match r.think {
                    Some(Think::Uniform(low, high)) if low > high => {
                        return bad(setting, format!("{name}: a think time's range runs from low to high"));
                    }
                    Some(t) if t.longest() > MAX_DURATION => {
                        return bad(setting, format!("{name}: a think time may be at most {days} days"));
                    }
                    _ => {}
                }
            }
            if mix.order.scenarios().is_none()
                && let Some(r) = mix.requests.iter().find(|r| r.cookies)
            {
                return bad(
                    setting,
                    format!("{}: a cookie jar belongs to a scenario's virtual users", r.name.escape_debug()),
                );
            }
            if let Some(r) = mix.requests.iter().find(|r| r.follow_redirects > 0 && !r.templated) {
                return bad(
                    setting,
                    format!("{}: a step that follows redirects must be a template", r.name.escape_debug()),
                );
            }
            if mix.order.scenarios().is_none()
                && let Some(r) = mix.requests.iter().find(|r| r.follow_redirects > 0)
            {
                return bad(
                    setting,
                    format!("{}: following redirects belongs to a scenario's steps", r.name.escape_debug()),
                );
            }
            if let Some(r) = mix.requests.iter().find(|r| r.follow_redirects > MAX_REDIRECTS) {
                return bad(
                    setting,
                    format!("{}: a step follows at most {MAX_REDIRECTS} redirects in a row", r.name.escape_debug()),
                );
            }
            for r in mix.requests.iter().filter(|r| r.templated) {
                if let Some(e) = r.template_texts().filter_map(|t| check_template(t, &vocabulary).err()).next() {
                    return bad(setting, format!("{}: {e}", r.name));
                }
                if !self.feeders.is_empty() {
                    let parse =
                        |t: &str| Template::parse(t.as_bytes(), &vocabulary).unwrap_or_else(|_| Template::text(b""));
                    let values: Vec<Template> = r.spec.headers.iter().map(|(_, v)| parse(v)).collect();
                    validate_cells(&self.feeders, &parse(&r.path_and_query), &values)?;
                }
            }
        }
        // A mix's bodies together: they travel to a worker in one shard message, like one
        // request's body.
        let body: usize = self.requests.each(&self.target.path_and_query).iter().map(|(_, s)| s.body.len()).sum();
        if body > MAX_BODY_BYTES {
            let (setting, what) = if let Some(mix) = self.requests.mix() {
                let setting = if mix.order.scenarios().is_some() { Setting::Scenario } else { Setting::Targets };
                (setting, "bodies of")
            } else {
                (Setting::Body, "a body of")
            };
            return bad(
                setting,
                format!(
                    "{what} {body} bytes is more than the {MAX_BODY_BYTES} bytes ({} MiB) a run's requests may carry",
                    MAX_BODY_BYTES >> 20
                ),
            );
        }
        Ok(())
    }

    /// Checks the plan against every limit a run has; the first broken one is the error.
    pub fn validate(&self) -> Result<(), PlanError> {
        let bad = |setting, why: String| Err(PlanError { setting, why });
        let days = MAX_DURATION.as_secs() / 86_400;
        // The load first: a ramp's stages are what sets the connections by default, and a
        // rate's peak what bounds the threads, so their complaint is the one that helps.
        self.validate_load()?;
        if self.connections == 0 {
            return bad(Setting::Connections, "connections must be at least 1".into());
        }
        if self.connections > MAX_CONNECTIONS {
            return bad(
                Setting::Connections,
                format!("{} connections is more than the {MAX_CONNECTIONS} a run may have", self.connections),
            );
        }
        if self.threads == 0 {
            return bad(Setting::Threads, "threads must be at least 1".into());
        }
        if self.threads > MAX_THREADS {
            return bad(
                Setting::Threads,
                format!("{} threads is more than the {MAX_THREADS} a run may have", self.threads),
            );
        }
        if self.threads > self.connections {
            return bad(
                Setting::Threads,
                format!("{} threads for {} connections: a thread needs a connection", self.threads, self.connections),
            );
        }
        match self.stop {
            Stop::Requests(0) => return bad(Setting::Requests, "requests must be at least 1".into()),
            Stop::Duration(d) if d.is_zero() => {
                return bad(Setting::Duration, "the run's duration must be longer than zero".into());
            }
            Stop::Duration(d) if d > MAX_DURATION => {
                return bad(Setting::Duration, format!("the run's duration must be at most {days} days"));
            }
            _ => {}
        }
        self.validate_requests()?;
        if let Protocol::Http2 { streams } | Protocol::Http3 { streams } = self.protocol {
            if streams == 0 {
                return bad(Setting::Streams, "streams per connection must be at least 1".into());
            }
            if streams > MAX_STREAMS {
                return bad(
                    Setting::Streams,
                    format!("{streams} streams per connection is more than the {MAX_STREAMS} a run may have"),
                );
            }
        }
        if self.connect_timeout.is_zero() {
            return bad(Setting::ConnectTimeout, "the connect timeout must be longer than zero".into());
        }
        if self.connect_timeout > MAX_DURATION {
            return bad(Setting::ConnectTimeout, format!("the connect timeout must be at most {days} days"));
        }
        if self.request_timeout.is_some_and(|t| t.is_zero() || t > MAX_DURATION) {
            return bad(
                Setting::RequestTimeout,
                format!("the request timeout must be above zero and at most {days} days"),
            );
        }
        if let Some(warm_up) = self.warm_up {
            if warm_up.is_zero() || warm_up.subsec_nanos() != 0 {
                return bad(Setting::WarmUp, "the warm-up must be a whole number of seconds, at least 1".into());
            }
            if warm_up > MAX_DURATION {
                return bad(Setting::WarmUp, format!("the warm-up must be at most {days} days"));
            }
            if matches!(self.stop, Stop::Duration(d) if warm_up >= d) {
                return bad(Setting::WarmUp, "the warm-up must be shorter than the run".into());
            }
            // A budget begins after the warm-up by subtracting the requests still in flight;
            // with iterations of several steps that is not a count of iterations.
            let several_steps = self.requests.scenarios().is_some_and(|s| s.iter().any(|s| s.steps > 1));
            if several_steps && matches!(self.stop, Stop::Requests(_)) {
                return bad(
                    Setting::WarmUp,
                    "a warm-up with a count of iterations of several steps is not supported yet: use a duration (-z)"
                        .into(),
                );
            }
        }
        // A target named by host name has its family checked once resolved (`run`).
        validate_source_addrs(&self.source_addrs, self.target.host.parse().ok())?;
        if self.max_hold > MAX_HOLD {
            return bad(
                Setting::Hold,
                format!("a hold of {:?} is more than the {MAX_HOLD:?} a run may ask", self.max_hold),
            );
        }
        if !(1..=MAX_KEPT_BODY_BYTES).contains(&self.kept_body_bytes) {
            return bad(
                Setting::KeptBody,
                format!(
                    "keeping {} bytes of a body: it may be 1 to {} MiB",
                    self.kept_body_bytes,
                    MAX_KEPT_BODY_BYTES >> 20
                ),
            );
        }
        Ok(())
    }

    /// The load: a rate within the limits and carried by the threads, stages within theirs
    /// and the run's whole length, a ramp's connections within the run's.
    fn validate_load(&self) -> Result<(), PlanError> {
        let bad = |setting, why: String| Err(PlanError { setting, why });
        let stages = self.load.stages();
        if !stages.is_empty() {
            if matches!(self.stop, Stop::Requests(_)) {
                return bad(
                    Setting::Stages,
                    "stages with a request count: the stages are the run's length, so it would never end".into(),
                );
            }
            if stages.len() > MAX_STAGES {
                return bad(
                    Setting::Stages,
                    format!("{} stages is more than the {MAX_STAGES} a run may have", stages.len()),
                );
            }
            if stages.iter().any(|s| s.duration.is_zero()) {
                return bad(Setting::Stages, "a stage must last longer than zero".into());
            }
            let total = stages.iter().try_fold(Duration::ZERO, |sum, s| sum.checked_add(s.duration));
            if total.is_none_or(|t| t > MAX_DURATION) {
                let days = MAX_DURATION.as_secs() / 86_400;
                return bad(Setting::Stages, format!("the stages must last at most {days} days in all"));
            }
        }
        match &self.load {
            Load::Closed { ramp, indices } if !ramp.is_empty() => {
                if ramp.iter().all(|s| s.target == 0) {
                    return bad(
                        Setting::Stages,
                        "every connection count is 0, so no connection would be opened".into(),
                    );
                }
                if let Some(most) = ramp.iter().map(|s| s.target).find(|t| *t > MAX_CONNECTIONS as u64) {
                    return bad(
                        Setting::Stages,
                        format!("a stage of {most} connections is more than the {MAX_CONNECTIONS} a run may have"),
                    );
                }
                let last = indices
                    .step
                    .checked_mul((self.connections as u64).saturating_sub(1))
                    .and_then(|l| l.checked_add(indices.first));
                if indices.step == 0 || last.is_none_or(|l| l >= MAX_CONNECTIONS as u64) {
                    return bad(
                        Setting::Connections,
                        format!("connection indices beyond the {MAX_CONNECTIONS} connections a run may have"),
                    );
                }
            }
            Load::Closed { .. } => {}
            Load::Open { rate, stages, phase, .. } => {
                let peak = self.peak_rate().unwrap_or(0);
                let setting = if stages.is_empty() { Setting::Rate } else { Setting::Stages };
                if peak == 0 {
                    let why = if stages.is_empty() {
                        "the rate must be at least 1 request per second"
                    } else {
                        "every rate is 0, so no request would be sent"
                    };
                    return bad(setting, why.into());
                }
                if peak > MAX_RATE {
                    return bad(
                        setting,
                        format!("a rate of {peak} requests per second is more than the {MAX_RATE} a run may ask"),
                    );
                }
                if rate.offset > MAX_DURATION {
                    return bad(Setting::Rate, "the rate's offset must be at most a year".into());
                }
                if !(*phase > 0.0 && *phase <= 1.0) {
                    return bad(Setting::Stages, "the stages' phase must be above 0 and at most 1".into());
                }
                if self.threads as u64 > peak {
                    return bad(
                        Setting::Threads,
                        format!("{} threads for {peak} requests per second: a thread needs one a second", self.threads),
                    );
                }
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests;
