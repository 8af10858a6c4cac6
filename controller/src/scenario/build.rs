//! A scenario file as written turned into the mix: each step a request checked by the rules a
//! targets file's request keeps, the scenarios in the file's order with their weights and step
//! counts, within a run's limits.

use std::collections::{HashMap, HashSet};
use std::ops::Range;
use std::path::Path;

use toml::Spanned;
use volley_engine::{
    MAX_NAMES, MAX_REQUESTS, MAX_SCENARIOS, NamedRequest, RequestSpec, Scenario, Target, check_template,
    template_skeleton,
};

use super::ScenarioFile;
use super::error::{Located, Problem, at_offset};
use super::file::{File, Headers, Step};
use crate::targets::{
    self, At, Bodies, MAX_HEADERS, OneOrigin, Shown, check_header, check_method, checked_name, default_name,
    same_origin, shown,
};

/// The mix the file describes. `file` has at least one scenario.
pub(super) fn build(text: &str, file: File, url: Option<&Target>, dir: &Path) -> Result<ScenarioFile, Located> {
    let at = |span: Range<usize>| at_offset(text, span.start);
    check_counts(&file, &at)?;
    let mut origin = match (&file.origin, url) {
        (Some(given), url) => {
            let origin = file_origin(given, url).map_err(|p| Located::new(at(given.span()), p))?;
            // The same origin either way; the command line's as it was written, if given.
            if url.is_some() { OneOrigin::new(url) } else { OneOrigin::of_file(&origin) }
        }
        (None, url) => OneOrigin::new(url),
    };
    let defaults = match file.defaults.as_ref().and_then(|d| d.headers.as_ref()) {
        Some(headers) => checked_headers(headers, true, text, &at)?,
        None => Vec::new(),
    };
    let mut bodies = Bodies::new(dir);
    let mut names = HashSet::new();
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
        for step in table.steps {
            let step_at = at(step.span());
            let request = request(step.into_inner(), &defaults, &mut origin, &mut bodies, text, &at)?;
            names.insert(request.name.clone());
            if names.len() > MAX_NAMES {
                return Err(Located::new(step_at, Problem::TooManyNames));
            }
            requests.push(request);
        }
        let weight = table.weight.map_or(1, |w| w.into_inner().0);
        scenarios.push(Scenario { name, weight, steps });
    }
    match origin.into_target() {
        Some(origin) => Ok(ScenarioFile { origin, requests, scenarios }),
        // Every scenario has a step, and a step's path either takes an origin or is refused.
        None => Err(Located::new(At::new(1, 1), Problem::PathWithoutOrigin { path: "/".into() })),
    }
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

/// One step as the request it is.
fn request(
    step: Step,
    defaults: &[(String, String)],
    origin: &mut OneOrigin,
    bodies: &mut Bodies,
    text: &str,
    at: &impl Fn(Range<usize>) -> At,
) -> Result<NamedRequest, Located> {
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
        templated_path(&step.path, origin, text, at)?
    } else {
        path_of(step.path.get_ref(), origin).map_err(|p| Located::new(path_at, p))?
    };
    let mut headers = match &step.headers {
        Some(headers) => checked_headers(headers, templated, text, at)?,
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
                check_template_at(&body, text, at)?;
            }
            let bytes = body.into_inner().into_bytes();
            bodies.count(bytes.len()).map_err(|p| Located::new(body_at, p))?;
            bytes
        }
        (None, Some(file)) => {
            let bytes = bodies.read(file.get_ref()).map_err(|p| Located::new(at(file.span()), p))?;
            if templated && let Err(e) = check_template(&bytes) {
                let problem =
                    Problem::TemplateInBodyFile { file: shown(file.get_ref()), offset: e.offset, what: e.what };
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
    Ok(NamedRequest { name, path_and_query, spec: RequestSpec::new(&method, headers, body), templated })
}

/// A step's path with templates: checked as a path with its slots filled, and kept as written.
/// In an absolute URL, the slots must be in the path or query: the origin is the run's.
fn templated_path(
    path: &Spanned<String>,
    origin: &mut OneOrigin,
    text: &str,
    at: &impl Fn(Range<usize>) -> At,
) -> Result<String, Located> {
    check_template_at(path, text, at)?;
    let written = path.get_ref();
    let skeleton = template_skeleton(written);
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
fn check_template_at(value: &Spanned<String>, text: &str, at: &impl Fn(Range<usize>) -> At) -> Result<(), Located> {
    let Err(e) = check_template(value.get_ref().as_bytes()) else { return Ok(()) };
    let span = value.span();
    let raw = text.get(span.clone()).unwrap_or("");
    let quote = raw.chars().next().filter(|c| *c == '"' || *c == '\'');
    let plain = quote.is_some_and(|q| raw.len() == value.get_ref().len() + 2 && raw.ends_with(q));
    let start = if plain { span.start + 1 + e.offset } else { span.start };
    Err(Located::new(at(start..start), Problem::Template { what: e.what }))
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
    text: &str,
    at: &impl Fn(Range<usize>) -> At,
) -> Result<Vec<(String, String)>, Located> {
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
                check_template_at(value, text, at)?;
            }
            pairs.push((name.get_ref().clone(), value.get_ref().clone()));
        }
    }
    Ok(pairs)
}
