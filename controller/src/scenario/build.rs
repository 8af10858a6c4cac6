//! A scenario file as written turned into the mix: each step a request checked by the rules a
//! targets file's request keeps, the scenarios in the file's order with their weights and step
//! counts, within a run's limits.

use std::collections::{HashMap, HashSet};
use std::ops::{Range, RangeInclusive};
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use toml::Spanned;
use volley_engine::{
    Check, CheckPattern, CheckRule, CheckText, DEFAULT_REDIRECTS, ExtractSource, Extractor, Feeder, FeederMode,
    JsonValue, MAX_CHECKS, MAX_EXTRACTORS, MAX_FEEDERS, MAX_KEPT_CHECKS, MAX_NAMES, MAX_PACING, MAX_REDIRECTS,
    MAX_REQUESTS, MAX_SCENARIOS, MAX_VARIABLES, NamedRequest, OnFailure, RequestSpec, Scenario, Target, Think,
    Vocabulary, check_template, is_feeder_name, is_variable_name, json_pointer, template_skeleton,
};

use super::ScenarioFile;
use super::error::{Located, Problem, at_offset};
use super::feeder::{self, Format};
use super::file::{CheckTable, ExtractTable, FeederTable, File, Headers, Redirects, Step};
use crate::targets::{
    self, At, Bodies, MAX_HEADERS, OneOrigin, Shown, check_header, check_method, checked_name, default_name,
    same_origin, shown,
};

/// The mix the file describes. `file` has at least one scenario; its feeders hold at most
/// `feeder_limit` bytes of data together.
pub(super) fn build(
    text: &str,
    file: File,
    url: Option<&Target>,
    dir: &Path,
    feeder_limit: u64,
) -> Result<ScenarioFile, Located> {
    let at = |span: Range<usize>| at_offset(text, span.start);
    check_counts(&file, &at)?;
    let variables = variables(&file, &at)?;
    let feeders = feeders(&file.feeders, dir, feeder_limit, &at)?;
    // The variables in the file's order are the plan's (`Plan::vocabulary`): a slot is checked
    // against all of them, then against those earlier steps of its scenario set.
    let columns = Vocabulary::of(&feeders);
    let vocabulary = columns.clone().with_variables(variables);
    // The defaults go into every step, the first ones too: no variable is set before them.
    let t = Texts { text, at: &at, vocabulary: &vocabulary, set: &columns };
    let mut origin = match (&file.origin, url) {
        (Some(given), url) => {
            let origin = file_origin(given, url).map_err(|p| Located::new(at(given.span()), p))?;
            // The same origin either way; the command line's as it was written, if given.
            if url.is_some() { OneOrigin::new(url) } else { OneOrigin::of_file(&origin) }
        }
        (None, url) => OneOrigin::new(url),
    };
    let defaults = match file.defaults.as_ref().and_then(|d| d.headers.as_ref()) {
        Some(headers) => checked_headers(headers, true, &t)?,
        None => Vec::new(),
    };
    let mut bodies = Bodies::new(dir);
    let mut names = HashSet::new();
    // Each (step name, check name) once: what the reports list and the limit counts.
    let mut checks = HashSet::new();
    // Each scenario's name, with the line it was first given on.
    let mut scenario_names: HashMap<String, usize> = HashMap::new();
    let mut requests = Vec::new();
    let mut scenarios = Vec::with_capacity(file.scenarios.len());
    for table in file.scenarios {
        let table = table.into_inner();
        let name_at = at(table.name.span());
        let name = checked_name(table.name.into_inner()).map_err(|p| Located::new(name_at, p))?;
        if let Some(&first) = scenario_names.get(&name) {
            return Err(Located::new(name_at, Problem::SecondScenario { name: shown(&name), first }));
        }
        scenario_names.insert(name.clone(), name_at.line);
        if table.steps.is_empty() {
            return Err(Located::new(name_at, Problem::NoSteps { name: shown(&name) }));
        }
        // At most MAX_REQUESTS in all (check_counts), so a scenario's count fits.
        let steps = table.steps.len() as u32;
        // The variables this scenario's steps so far extract, for the next step's slots.
        let mut set_names: Vec<String> = Vec::new();
        let mut set = columns.clone();
        // A scenario's users keep cookies unless it says otherwise, and its redirects are
        // answers unless it says otherwise; a step may say otherwise again.
        let inherited = Inherited {
            cookies: table.cookies.unwrap_or(true),
            redirects: table.redirects.unwrap_or(Redirects::Manual),
            max_redirects: match &table.max_redirects {
                Some(max) => max_redirects(max, &at)?,
                None => DEFAULT_REDIRECTS,
            },
        };
        for step in table.steps {
            let step_at = at(step.span());
            let t = Texts { set: &set, ..t };
            let request = request(step.into_inner(), &defaults, inherited, &mut origin, &mut bodies, &t)?;
            let before = set_names.len();
            for e in &request.extract {
                if !set_names.contains(&e.var) {
                    set_names.push(e.var.clone());
                }
            }
            if set_names.len() > before {
                set = columns.clone().with_variables(set_names.iter().cloned());
            }
            names.insert(request.name.clone());
            if names.len() > MAX_NAMES {
                return Err(Located::new(step_at, Problem::TooManyNames));
            }
            checks.extend(request.checks.iter().map(|c| (request.name.clone(), c.name.clone())));
            if checks.len() > MAX_CHECKS {
                return Err(Located::new(step_at, Problem::TooManyChecks));
            }
            requests.push(request);
        }
        let weight = table.weight.map_or(1, |w| w.into_inner().0);
        let pacing = match &table.pacing {
            Some(text) => Some(pacing(text.get_ref()).map_err(|what| Located::new(at(text.span()), what))?),
            None => None,
        };
        if let Some(first) = scenarios.first().filter(|s: &&Scenario| s.pacing.is_some() != pacing.is_some()) {
            return Err(Located::new(name_at, Problem::PacingOfSome { first: shown(&first.name) }));
        }
        scenarios.push(Scenario { name, weight, steps, pacing });
    }
    match origin.into_target() {
        Some(origin) => Ok(ScenarioFile { origin, requests, scenarios, feeders }),
        // Every scenario has a step, and a step's path either takes an origin or is refused.
        None => Err(Located::new(At::new(1, 1), Problem::PathWithoutOrigin { path: "/".into() })),
    }
}

/// What a value's templates are checked against: the file's text (to point into it), the
/// feeder columns and variables its slots may name, and the variables set by the time it is
/// sent (those earlier steps of its scenario extract).
struct Texts<'a, F: Fn(Range<usize>) -> At> {
    text: &'a str,
    at: &'a F,
    vocabulary: &'a Vocabulary,
    set: &'a Vocabulary,
}

// Derived Clone and Copy would ask the same of `F`, which only a reference is here.
impl<F: Fn(Range<usize>) -> At> Clone for Texts<'_, F> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<F: Fn(Range<usize>) -> At> Copy for Texts<'_, F> {}

/// The `[[feeder]]`s, each with its file read, in the file's order.
fn feeders(
    tables: &[Spanned<FeederTable>],
    dir: &Path,
    limit: u64,
    at: &impl Fn(Range<usize>) -> At,
) -> Result<Vec<Feeder>, Located> {
    if let Some(extra) = tables.get(MAX_FEEDERS) {
        return Err(Located::new(at(extra.span()), Problem::TooManyFeeders));
    }
    let mut feeders: Vec<Feeder> = Vec::with_capacity(tables.len());
    let mut used = 0u64;
    for table in tables {
        let table = table.get_ref();
        let name = table.name.get_ref();
        let name_at = at(table.name.span());
        if !is_feeder_name(name) {
            return Err(Located::new(name_at, Problem::FeederName { name: shown(name) }));
        }
        if feeders.iter().any(|f| &f.name == name) {
            return Err(Located::new(name_at, Problem::SecondFeeder { name: shown(name) }));
        }
        let mode = match &table.mode {
            None => FeederMode::Cycle,
            Some(mode) => FeederMode::ALL
                .into_iter()
                .find(|m| m.name() == mode.get_ref())
                .ok_or_else(|| Located::new(at(mode.span()), Problem::FeederMode { mode: shown(mode.get_ref()) }))?,
        };
        let path = dir.join(table.file.get_ref());
        let file_at = at(table.file.span());
        let shown_file = shown(table.file.get_ref());
        let format = match &table.format {
            Some(f) => Format::parse(f.get_ref())
                .ok_or_else(|| Located::new(at(f.span()), Problem::FeederFormat { format: shown(f.get_ref()) }))?,
            None => Format::of_path(&path)
                .ok_or_else(|| Located::new(file_at, Problem::FeederFormatUnknown { file: shown_file.clone() }))?,
        };
        let (columns, rows) = feeder::read(&path, format, limit - used).map_err(|p| {
            let problem = match p.line {
                0 => Problem::FeederFile { file: shown_file.clone(), what: p.what },
                line => Problem::FeederLine { file: shown_file.clone(), line, what: p.what },
            };
            Located::new(file_at, problem)
        })?;
        used += rows.bytes() as u64;
        feeders.push(Feeder::new(name.clone(), columns, mode, Arc::new(rows)));
    }
    Ok(feeders)
}

/// The scenarios and steps within a run's limits, counted before any body is read or request
/// built; the error is at the first one too many.
fn check_counts(file: &File, at: &impl Fn(Range<usize>) -> At) -> Result<(), Located> {
    if let Some(extra) = file.scenarios.get(MAX_SCENARIOS) {
        return Err(Located::new(at(extra.span()), Problem::TooManyScenarios));
    }
    let mut steps = file.scenarios.iter().flat_map(|s| s.get_ref().steps.iter());
    if let Some(extra) = steps.nth(MAX_REQUESTS) {
        return Err(Located::new(at(extra.span()), Problem::TooManySteps));
    }
    Ok(())
}

/// The variables the file's extractors set, each once, in the file's order (the plan's order);
/// each extractor's name checked and each step's extractors counted before any request is
/// built, so that a slot is never taken for a variable whose name is refused later.
fn variables(file: &File, at: &impl Fn(Range<usize>) -> At) -> Result<Vec<String>, Located> {
    let mut names: Vec<String> = Vec::new();
    for step in file.scenarios.iter().flat_map(|s| s.get_ref().steps.iter()) {
        let extractors = &step.get_ref().extractors;
        if let Some(extra) = extractors.get(MAX_EXTRACTORS) {
            return Err(Located::new(at(extra.span()), Problem::TooManyExtractors));
        }
        for table in extractors {
            let var = &table.get_ref().var;
            if !is_variable_name(var.get_ref()) {
                return Err(Located::new(at(var.span()), Problem::VariableName { name: shown(var.get_ref()) }));
            }
            if !names.contains(var.get_ref()) {
                if names.len() == MAX_VARIABLES {
                    return Err(Located::new(at(var.span()), Problem::TooManyVariables));
                }
                names.push(var.get_ref().clone());
            }
        }
    }
    Ok(names)
}

/// The file's `origin`: scheme, host and port, and the command line's URL's if it has one.
fn file_origin(given: &Spanned<String>, url: Option<&Target>) -> Result<Target, Problem> {
    let origin = Target::parse(given.get_ref()).map_err(|e| targets::Problem::Url(shown(&e.to_string())))?;
    // A path would be dropped: the steps' paths are the requests'.
    if origin.path_and_query != "/" {
        return Err(Problem::OriginHasPath { origin: shown(given.get_ref()) });
    }
    if let Some(url) = url
        && !same_origin(url, &origin)
    {
        let (found, url) = (Shown(&origin).to_string(), Shown(url).to_string());
        return Err(targets::Problem::NotTheUrlsOrigin { found, url }.into());
    }
    Ok(origin)
}

/// What a step has from its scenario unless it says otherwise.
#[derive(Debug, Clone, Copy)]
struct Inherited {
    cookies: bool,
    redirects: Redirects,
    max_redirects: u8,
}

/// The name of the check `redirects = "error"` gives a step.
const NO_REDIRECT: &str = "no redirect";

/// A `max_redirects`: 1 to MAX_REDIRECTS.
fn max_redirects(max: &Spanned<u64>, at: &impl Fn(Range<usize>) -> At) -> Result<u8, Located> {
    u8::try_from(*max.get_ref())
        .ok()
        .filter(|n| (1..=MAX_REDIRECTS).contains(n))
        .ok_or_else(|| Located::new(at(max.span()), Problem::MaxRedirects { given: *max.get_ref() }))
}

/// One step as the request it is; its user's jar goes with it and its redirects are followed
/// as `inherited` (its scenario's) says, unless it says otherwise.
fn request(
    step: Step,
    defaults: &[(String, String)],
    inherited: Inherited,
    origin: &mut OneOrigin,
    bodies: &mut Bodies,
    t: &Texts<'_, impl Fn(Range<usize>) -> At>,
) -> Result<NamedRequest, Located> {
    let at = t.at;
    let templated = step.template.unwrap_or(true);
    let method = match &step.method {
        Some(method) => {
            check_method(method.get_ref()).map_err(|(_, p)| Located::new(at(method.span()), p))?;
            method.get_ref().clone()
        }
        None => "GET".to_string(),
    };
    let path_at = at(step.path.span());
    let path_and_query = if templated {
        templated_path(&step.path, origin, t)?
    } else {
        path_of(step.path.get_ref(), origin).map_err(|p| Located::new(path_at, p))?
    };
    let mut headers = match &step.headers {
        Some(headers) => checked_headers(headers, templated, t)?,
        None => Vec::new(),
    };
    // The defaults' headers after the step's own, those of a name the step has (in any case)
    // left out: the step's own wins, as a target's wins over -H.
    targets::add_headers_to(&mut headers, defaults);
    if headers.len() > MAX_HEADERS {
        let span = step.headers.as_ref().map_or(step.path.span(), |h| h.span());
        return Err(Located::new(at(span), Problem::TooManyHeaders));
    }
    let body = match (step.body, step.body_file) {
        (Some(_), Some(file)) => return Err(Located::new(at(file.span()), Problem::BodyAndBodyFile)),
        (Some(body), None) => {
            let body_at = at(body.span());
            if templated {
                check_template_at(&body, t)?;
            }
            let bytes = body.into_inner().into_bytes();
            bodies.count(bytes.len()).map_err(|p| Located::new(body_at, p))?;
            bytes
        }
        (None, Some(file)) => {
            let bytes = bodies.read(file.get_ref()).map_err(|p| Located::new(at(file.span()), p))?;
            if templated && let Some((offset, problem)) = template_problem(&bytes, t) {
                let problem =
                    Problem::TemplateInBodyFile { file: shown(file.get_ref()), offset, what: problem.to_string() };
                return Err(Located::new(at(file.span()), problem));
            }
            bytes
        }
        (None, None) => Vec::new(),
    };
    let name = match step.name {
        Some(name) => {
            let name_at = at(name.span());
            checked_name(name.into_inner()).map_err(|p| Located::new(name_at, p))?
        }
        None => default_name(&method, &path_and_query),
    };
    let mut checks: Vec<Check> = Vec::with_capacity(step.checks.len());
    for table in &step.checks {
        let c = check(table, at)?;
        if checks.iter().any(|other| other.name == c.name) {
            let span = table.get_ref().name.as_ref().map_or(table.span(), |n| n.span());
            return Err(Located::new(at(span), Problem::SecondCheck { name: shown(&c.name) }));
        }
        checks.push(c);
        if checks.iter().filter(|c| c.rule.needs_kept()).count() > MAX_KEPT_CHECKS {
            return Err(Located::new(at(table.span()), Problem::TooManyKeptChecks));
        }
    }
    let follow_redirects = match step.redirects.unwrap_or(inherited.redirects) {
        Redirects::Manual => 0,
        Redirects::Follow if !templated => {
            return Err(Located::new(path_at, Problem::FollowWithoutTemplate));
        }
        Redirects::Follow => match &step.max_redirects {
            Some(max) => max_redirects(max, at)?,
            None => inherited.max_redirects,
        },
        Redirects::Error => {
            if checks.iter().any(|c| c.name == NO_REDIRECT) {
                return Err(Located::new(path_at, Problem::SecondCheck { name: NO_REDIRECT.into() }));
            }
            // Any status but a 3xx, and a redirect ends the iteration as a failed check.
            let rule = CheckRule::Status(vec![100..=299, 400..=999]);
            checks.push(Check { name: NO_REDIRECT.into(), rule, on_failure: OnFailure::Abort });
            0
        }
    };
    let extract = step.extractors.iter().map(|table| extractor(table, at)).collect::<Result<_, _>>()?;
    let think = match &step.think {
        Some(value) => {
            Some(think(value.get_ref()).map_err(|what| Located::new(at(value.span()), Problem::Think { what }))?)
        }
        None => None,
    };
    Ok(NamedRequest {
        name,
        path_and_query,
        spec: RequestSpec::new(&method, headers, body),
        templated,
        checks,
        extract,
        think,
        cookies: step.cookies.unwrap_or(inherited.cookies),
        follow_redirects,
    })
}

/// A scenario's `pacing`: a duration from 1 ns to [`MAX_PACING`].
fn pacing(text: &str) -> Result<Duration, Problem> {
    let bad = |why: String| Problem::Pacing { what: format!("'{}' {why}", shown(text)) };
    let pacing = crate::duration::parse(text).map_err(|e| bad(format!("is not a duration: {e}")))?;
    if pacing.is_zero() || pacing > MAX_PACING {
        return Err(bad(format!("is not between 1 ns and {} s", MAX_PACING.as_secs())));
    }
    Ok(pacing)
}

/// A step's `think`: a duration, or a table of one distribution; what is wrong with it, else.
fn think(value: &toml::Value) -> Result<Think, String> {
    let duration = |v: &toml::Value| match v {
        toml::Value::String(text) => crate::duration::parse(text).map_err(|e| format!("'{text}': {e}")),
        other => Err(format!("holds {}, not a duration", a_kind(other))),
    };
    match value {
        toml::Value::String(_) => duration(value).map(Think::Fixed),
        toml::Value::Table(table) => match table.iter().collect::<Vec<_>>().as_slice() {
            [(key, toml::Value::Array(bounds))] if key.as_str() == "uniform" => match bounds.as_slice() {
                [low, high] => {
                    let (low, high) = (duration(low)?, duration(high)?);
                    if low > high {
                        return Err("uniform runs from low to high".into());
                    }
                    Ok(Think::Uniform(low, high))
                }
                _ => Err("uniform takes two durations".into()),
            },
            [(key, mean)] if key.as_str() == "exponential" => duration(mean).map(Think::Exponential),
            _ => Err("is a table of one key, uniform or exponential".into()),
        },
        other => Err(format!("is {}", a_kind(other))),
    }
}

/// A TOML value's kind with its article: "an integer", "a string".
fn a_kind(value: &toml::Value) -> String {
    let kind = value.type_str();
    let article = if kind.starts_with(['a', 'e', 'i', 'o', 'u']) { "an" } else { "a" };
    format!("{article} {kind}")
}

/// One `[[scenario.step.extract]]`: its variable (checked by [`variables`]) and the one place
/// its value comes from.
fn extractor(table: &Spanned<ExtractTable>, at: &impl Fn(Range<usize>) -> At) -> Result<Extractor, Located> {
    let t = table.get_ref();
    let mut given: Vec<(&'static str, Range<usize>)> = [
        t.json.as_ref().map(|v| ("json", v.span())),
        t.header.as_ref().map(|v| ("header", v.span())),
        t.regex.as_ref().map(|v| ("regex", v.span())),
        t.cookie.as_ref().map(|v| ("cookie", v.span())),
    ]
    .into_iter()
    .flatten()
    .collect();
    // In the order written, so that the one pointed at is the second.
    given.sort_by_key(|(_, span)| span.start);
    match given.as_slice() {
        [] => return Err(Located::new(at(table.span()), Problem::ExtractWithoutSource)),
        [_] => {}
        [(first, _), (second, span), ..] => {
            return Err(Located::new(at(span.clone()), Problem::ExtractTwoSources { first, second }));
        }
    }
    if let (Some(group), None) = (&t.group, &t.regex) {
        return Err(Located::new(at(group.span()), Problem::ExtractGroupWithoutRegex));
    }
    // A cookie's name is a token as a field's is (RFC 6265 §4.1.1), but its case is its own.
    let token = |key: &'static str, name: &Spanned<String>| {
        if check_header(name.get_ref(), "").is_err() {
            return Err(Located::new(at(name.span()), Problem::ExtractName { key, name: shown(name.get_ref()) }));
        }
        Ok(name.get_ref().clone())
    };
    let from = if let Some(path) = &t.json {
        ExtractSource::Json { pointer: json_pointer(path.get_ref()) }
    } else if let Some(name) = &t.header {
        ExtractSource::Header { name: token("header", name)?.to_ascii_lowercase() }
    } else if let Some(name) = &t.cookie {
        ExtractSource::Cookie { name: token("cookie", name)? }
    } else if let Some(pattern) = &t.regex {
        let compiled = CheckPattern::new(pattern.get_ref())
            .map_err(|what| Located::new(at(pattern.span()), Problem::ExtractPattern { what }))?;
        // groups() counts the whole match as group 0.
        let group = match &t.group {
            None => usize::from(compiled.groups() > 1),
            Some(group) => match usize::try_from(*group.get_ref()) {
                Ok(n) if n < compiled.groups() => n,
                _ => {
                    let problem = Problem::ExtractNoGroup {
                        group: *group.get_ref(),
                        pattern: shown(pattern.get_ref()),
                        groups: compiled.groups() - 1,
                    };
                    return Err(Located::new(at(group.span()), problem));
                }
            },
        };
        ExtractSource::Regex { pattern: compiled, group }
    } else {
        return Err(Located::new(at(table.span()), Problem::ExtractWithoutSource));
    };
    Ok(Extractor { var: t.var.get_ref().clone(), from })
}

/// One `[[scenario.step.check]]`: its rule, and its name (the rule's own unless it gives one).
fn check(table: &Spanned<CheckTable>, at: &impl Fn(Range<usize>) -> At) -> Result<Check, Located> {
    let t = table.get_ref();
    let spans = |v: Option<Range<usize>>, key: &'static str| v.map(|span| (key, span));
    let mut given: Vec<(&'static str, Range<usize>)> = [
        spans(t.status.as_ref().map(Spanned::span), "status"),
        spans(t.latency_below.as_ref().map(Spanned::span), "latency_below"),
        spans(t.body_contains.as_ref().map(Spanned::span), "body_contains"),
        spans(t.body_matches.as_ref().map(Spanned::span), "body_matches"),
        spans(t.body_size.as_ref().map(Spanned::span), "body_size"),
        spans(t.json.as_ref().map(Spanned::span), "json"),
        spans(t.header.as_ref().map(Spanned::span), "header"),
    ]
    .into_iter()
    .flatten()
    .collect();
    // In the order written, so that the one pointed at is the second.
    given.sort_by_key(|(_, span)| span.start);
    match given.as_slice() {
        [] => return Err(Located::new(at(table.span()), Problem::CheckWithoutRule)),
        [_] => {}
        [(first, _), (second, span), ..] => {
            return Err(Located::new(at(span.clone()), Problem::CheckWithTwoRules { first, second }));
        }
    }
    if let (Some(equals), None, None) = (&t.equals, &t.json, &t.header) {
        return Err(Located::new(at(equals.span()), Problem::CheckEqualsWithoutJson));
    }
    if t.header.is_none() {
        for (key, given) in [("contains", &t.contains), ("matches", &t.matches)] {
            if let Some(given) = given {
                return Err(Located::new(at(given.span()), Problem::CheckTestWithoutHeader { key }));
            }
        }
    }
    let rule = if let Some(status) = &t.status {
        CheckRule::Status(status_ranges(status.get_ref()).map_err(|p| Located::new(at(status.span()), p))?)
    } else if let Some(latency) = &t.latency_below {
        let bound = crate::duration::parse(latency.get_ref())
            .map_err(|e| Located::new(at(latency.span()), Problem::CheckLatency { what: e.to_string() }))?;
        CheckRule::LatencyBelow(bound)
    } else if let Some(text) = &t.body_contains {
        if text.get_ref().is_empty() {
            return Err(Located::new(at(text.span()), Problem::CheckEmptyText));
        }
        CheckRule::BodyContains(text.get_ref().as_bytes().to_vec())
    } else if let Some(pattern) = &t.body_matches {
        let compiled = CheckPattern::new(pattern.get_ref())
            .map_err(|what| Located::new(at(pattern.span()), Problem::CheckPattern { what }))?;
        CheckRule::BodyMatches(compiled)
    } else if let Some(size) = &t.body_size {
        CheckRule::BodySize(size_range(size.get_ref()).map_err(|p| Located::new(at(size.span()), p))?)
    } else if let Some(path) = &t.json {
        let equals = match &t.equals {
            Some(value) => Some(JsonValue(
                json_of(value.get_ref())
                    .map_err(|what| Located::new(at(value.span()), Problem::CheckEquals { what }))?,
            )),
            None => None,
        };
        CheckRule::Json { pointer: json_pointer(path.get_ref()), equals }
    } else if let Some(name) = &t.header {
        header_rule(name, t, at)?
    } else {
        return Err(Located::new(at(table.span()), Problem::CheckWithoutRule));
    };
    let name = match &t.name {
        Some(name) => checked_name(name.get_ref().clone()).map_err(|p| Located::new(at(name.span()), p))?,
        None => rule.default_name(),
    };
    let on_failure = match t.on_failure.as_ref().map(|v| (v.get_ref().as_str(), v.span())) {
        None | Some(("continue", _)) => OnFailure::Continue,
        Some(("abort", _)) => OnFailure::Abort,
        Some((what, span)) => return Err(Located::new(at(span), Problem::CheckOnFailure { what: what.into() })),
    };
    Ok(Check { name, rule, on_failure })
}

/// A header rule: the field's name (lowercased), and at most one test of its value.
fn header_rule(name: &Spanned<String>, t: &CheckTable, at: &impl Fn(Range<usize>) -> At) -> Result<CheckRule, Located> {
    if check_header(name.get_ref(), "").is_err() {
        return Err(Located::new(at(name.span()), Problem::CheckHeaderName { name: shown(name.get_ref()) }));
    }
    let mut tests = [t.equals.as_ref().map(Spanned::span), t.contains.as_ref().map(Spanned::span)]
        .into_iter()
        .chain([t.matches.as_ref().map(Spanned::span)])
        .flatten()
        .collect::<Vec<_>>();
    tests.sort_by_key(|span| span.start);
    if let [_, second, ..] = tests.as_slice() {
        return Err(Located::new(at(second.clone()), Problem::CheckTwoTests));
    }
    let test = if let Some(equals) = &t.equals {
        match equals.get_ref() {
            toml::Value::String(text) => CheckText::Equals(text.as_bytes().to_vec()),
            _ => return Err(Located::new(at(equals.span()), Problem::CheckHeaderEquals)),
        }
    } else if let Some(text) = &t.contains {
        if text.get_ref().is_empty() {
            return Err(Located::new(at(text.span()), Problem::CheckEmptyContains));
        }
        CheckText::Contains(text.get_ref().as_bytes().to_vec())
    } else if let Some(pattern) = &t.matches {
        CheckText::Matches(
            CheckPattern::new(pattern.get_ref())
                .map_err(|what| Located::new(at(pattern.span()), Problem::CheckValuePattern { what }))?,
        )
    } else {
        CheckText::Exists
    };
    Ok(CheckRule::Header { name: name.get_ref().to_ascii_lowercase(), test })
}

/// A body size rule's lengths: a number of bytes, or a range `"A-B"`.
fn size_range(value: &toml::Value) -> Result<RangeInclusive<u64>, Problem> {
    let bad = |what: String| Problem::CheckSize { what };
    match value {
        toml::Value::Integer(n) => {
            u64::try_from(*n).map(|n| n..=n).map_err(|_| bad(format!("{n} is not a number of bytes")))
        }
        toml::Value::String(s) => {
            let parsed = s.split_once('-').and_then(|(a, b)| a.trim().parse::<u64>().ok().zip(b.trim().parse().ok()));
            match parsed {
                Some((from, to)) if from <= to => Ok(from..=to),
                _ => Err(bad(format!("'{}' is not a range of bytes, low to high", s.escape_debug()))),
            }
        }
        other => Err(bad(format!("{} is not a number or a range", other.type_str()))),
    }
}

/// A TOML value as the JSON value it stands for; a date has no JSON form, so it is refused.
fn json_of(value: &toml::Value) -> Result<serde_json::Value, String> {
    Ok(match value {
        toml::Value::String(s) => serde_json::Value::String(s.clone()),
        toml::Value::Integer(n) => serde_json::Value::from(*n),
        toml::Value::Float(f) => {
            serde_json::Number::from_f64(*f).map(serde_json::Value::Number).ok_or("not a JSON number")?
        }
        toml::Value::Boolean(b) => serde_json::Value::Bool(*b),
        toml::Value::Array(items) => serde_json::Value::Array(items.iter().map(json_of).collect::<Result<_, _>>()?),
        toml::Value::Table(table) => serde_json::Value::Object(
            table.iter().map(|(k, v)| Ok((k.clone(), json_of(v)?))).collect::<Result<_, String>>()?,
        ),
        toml::Value::Datetime(_) => return Err("a date has no JSON form: write it as a string".into()),
    })
}

/// A status rule's codes: a code, a class (`2xx`), a range (`200-299`), or an array of them.
fn status_ranges(value: &toml::Value) -> Result<Vec<RangeInclusive<u16>>, Problem> {
    let bad = |what: String| Problem::CheckStatus { what };
    let one = |v: &toml::Value| -> Result<RangeInclusive<u16>, Problem> {
        let code = |n: i64| u16::try_from(n).ok().filter(|c| (100..=999).contains(c));
        match v {
            toml::Value::Integer(n) => {
                code(*n).map(|c| c..=c).ok_or_else(|| bad(format!("{n} is not a status code (100 to 999)")))
            }
            toml::Value::String(s) => {
                let text = s.trim();
                if let [class @ b'1'..=b'9', b'x' | b'X', b'x' | b'X'] = text.as_bytes() {
                    let base = u16::from(class - b'0') * 100;
                    return Ok(base..=base + 99);
                }
                let parsed = match text.split_once('-') {
                    Some((from, to)) => from.trim().parse().ok().zip(to.trim().parse().ok()),
                    None => text.parse().ok().map(|c| (c, c)),
                };
                match parsed.and_then(|(from, to): (i64, i64)| code(from).zip(code(to))) {
                    Some((from, to)) if from <= to => Ok(from..=to),
                    _ => Err(bad(format!("'{}' is not a code, a class or a range of codes", shown(s)))),
                }
            }
            other => Err(bad(format!("is a {}", other.type_str()))),
        }
    };
    match value {
        toml::Value::Array(items) if items.is_empty() => Err(bad("is an empty array".into())),
        toml::Value::Array(items) => items.iter().map(one).collect(),
        v => Ok(vec![one(v)?]),
    }
}

/// A step's path with templates: checked as a path with its slots filled, and kept as written.
/// In an absolute URL, the slots must be in the path or query: the origin is the run's.
fn templated_path(
    path: &Spanned<String>,
    origin: &mut OneOrigin,
    t: &Texts<'_, impl Fn(Range<usize>) -> At>,
) -> Result<String, Located> {
    let at = t.at;
    check_template_at(path, t)?;
    let written = path.get_ref();
    let skeleton = template_skeleton(written, t.vocabulary);
    let checked = path_of(&skeleton, origin).map_err(|p| Located::new(at(path.span()), p))?;
    if skeleton == written.as_str() {
        return Ok(checked);
    }
    // The path begins at the first `/` after the scheme's `//`, the same in both.
    let start = match written.find("://") {
        Some(scheme) => written[scheme + 3..].find('/').map_or(written.len(), |i| scheme + 3 + i),
        None => 0,
    };
    if written[..start].contains("{{") {
        return Err(Located::new(at(path.span()), Problem::TemplateInOrigin));
    }
    Ok(written[start..].to_string())
}

/// `value` checked as a template, an error pointing into it where the file writes it plainly
/// (a quoted string without escapes), else at the value.
fn check_template_at(value: &Spanned<String>, t: &Texts<'_, impl Fn(Range<usize>) -> At>) -> Result<(), Located> {
    let Some((offset, problem)) = template_problem(value.get_ref().as_bytes(), t) else { return Ok(()) };
    let span = value.span();
    let raw = t.text.get(span.clone()).unwrap_or("");
    let quote = raw.chars().next().filter(|c| *c == '"' || *c == '\'');
    let plain = quote.is_some_and(|q| raw.len() == value.get_ref().len() + 2 && raw.ends_with(q));
    let start = if plain { span.start + 1 + offset } else { span.start };
    Err(Located::new((t.at)(start..start), problem))
}

/// What is wrong with `text` as a template, at which byte: a slot that names nothing the file
/// knows, or a variable that no earlier step of the scenario has extracted when it is sent.
fn template_problem(text: &[u8], t: &Texts<'_, impl Fn(Range<usize>) -> At>) -> Option<(usize, Problem)> {
    if let Err(e) = check_template(text, t.vocabulary) {
        return Some((e.offset, Problem::Template { what: e.what }));
    }
    // Every slot names something the file knows, so the one refused now is a variable.
    let e = check_template(text, t.set).err()?;
    Some((e.offset, Problem::VariableBeforeExtracted { var: slot_name(text, e.offset) }))
}

/// The name in the slot that starts at byte `open` of `text` (`{{ name }}`).
fn slot_name(text: &[u8], open: usize) -> String {
    let inside = text.get(open + 2..).unwrap_or_default();
    let end = inside.windows(2).position(|w| w == b"}}").unwrap_or(inside.len());
    let inside = String::from_utf8_lossy(&inside[..end]);
    shown(inside.split_ascii_whitespace().next().unwrap_or(""))
}

/// A step's `path` as the path and query it goes to: a path, or an absolute URL of the run's
/// origin.
fn path_of(path: &str, origin: &mut OneOrigin) -> Result<String, Problem> {
    // Told apart here, so that `users/7` is not called an invalid URL.
    if !path.starts_with('/') && !path.contains("://") {
        return Err(Problem::NotAPath { path: shown(path) });
    }
    origin.path_of(path).map_err(|p| match p {
        targets::Problem::PathWithoutOrigin { path } => Problem::PathWithoutOrigin { path },
        p => p.into(),
    })
}

/// A header table as (name, value) pairs in the order written, each checked as a targets file's
/// header is, at most [`MAX_HEADERS`].
fn checked_headers(
    headers: &Spanned<Headers>,
    templated: bool,
    t: &Texts<'_, impl Fn(Range<usize>) -> At>,
) -> Result<Vec<(String, String)>, Located> {
    let at = t.at;
    let mut pairs = Vec::new();
    for (name, values) in &headers.get_ref().0 {
        for value in values {
            if pairs.len() == MAX_HEADERS {
                return Err(Located::new(at(headers.span()), Problem::TooManyHeaders));
            }
            check_header(name.get_ref(), value.get_ref()).map_err(|p| {
                let span = if matches!(p, targets::Problem::HeaderValue { .. }) { value.span() } else { name.span() };
                Located::new(at(span), p)
            })?;
            if templated {
                check_template_at(value, t)?;
            }
            pairs.push((name.get_ref().clone(), value.get_ref().clone()));
        }
    }
    Ok(pairs)
}
