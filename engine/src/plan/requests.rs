//! What a run sends: the command line's one request, or a mix of named requests (a targets
//! file's, or the steps of a scenario file's weighted scenarios), each name with statistics of
//! its own.

use std::time::Duration;

use super::RequestSpec;
use super::checks::{Check, OnFailure};
use super::extract::Extractor;
use super::think::Think;
use crate::template::{Template, Vocabulary};

/// The most names a mix may have: each costs its own statistics in every thread, every second
/// and on the wire.
pub const MAX_NAMES: usize = 1000;

/// The most requests a mix may list (several may share a name).
pub const MAX_REQUESTS: usize = 100_000;

/// What a run sends.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Requests {
    /// One request, at the URL's path: statistics for the run as a whole only.
    One(RequestSpec),
    /// Several requests to the URL's origin, each with its own path and a name whose
    /// statistics are kept apart as well as in the run's.
    Mix(Mix),
}

/// The most scenarios a mix may have.
pub const MAX_SCENARIOS: usize = 1000;

/// Several requests, and the order connections take them in.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mix {
    pub requests: Vec<NamedRequest>,
    pub order: Order,
}

/// One request of a mix.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NamedRequest {
    /// What its statistics are kept under; requests may share one.
    pub name: String,
    /// Path and query, starting with `/`: the origin is the run's.
    pub path_and_query: String,
    pub spec: RequestSpec,
    /// `{{…}}` in its path, header values and body are templates, filled per request (a
    /// scenario file's steps); else everything is sent as written.
    pub templated: bool,
    /// What each response to it is checked for (a scenario file's steps); counted under its
    /// name.
    pub checks: Vec<Check>,
    /// Values taken from each response to it into its virtual user's variables, for later
    /// steps of its scenario (a scenario file's steps).
    pub extract: Vec<Extractor>,
    /// The pause its user takes after each answer to it (or failure) before its next request;
    /// it makes its scenario a flow.
    pub think: Option<Think>,
    /// Its user's cookie jar goes with it (a scenario file's steps, unless turned off): the
    /// cookies its answers set are kept, and those RFC 6265 matches to its URL are sent with it.
    pub cookies: bool,
    /// How many redirects in a row its answers are followed through (a scenario file's steps
    /// that say so; see `redirects.rs`); 0: none, a redirect is its answer. It makes its
    /// scenario a flow.
    pub follow_redirects: u8,
}

/// Which request of a mix a connection sends next.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Order {
    /// Each connection walks the list in turn, connection k starting at request k (mod the
    /// list's length), so that a run's first requests spread over the list too.
    InTurn,
    /// Each request drawn at random, from a generator seeded by `seed` and the thread (and
    /// worker): the same plan draws the same sequence.
    Random { seed: u64 },
    /// Weighted scenarios, each a run of consecutive requests of the list (its steps, sent in
    /// order): a connection draws a scenario by weight, from a generator seeded as for
    /// `Random`, sends its steps, and draws again. One pass of a scenario is an iteration:
    /// what a `-n` budget and a rate count.
    Scenarios { scenarios: Vec<Scenario>, seed: u64 },
}

/// The longest pacing a scenario may have: an hour between a user's iterations.
pub const MAX_PACING: Duration = Duration::from_secs(3600);

/// A scenario of a mix: its steps are the next `steps` requests of the list after those of the
/// scenarios before it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Scenario {
    pub name: String,
    /// Its share of iterations: `weight` over the sum of all scenarios' weights.
    pub weight: u32,
    pub steps: u32,
    /// Pacing: each of its users starts its iterations on this cadence (a user's next iteration
    /// is due this long after its last one was); None: as soon as the last one is done.
    pub pacing: Option<Duration>,
}

/// A step's place among a run's scenarios.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct StepOf {
    /// The scenario's index among the run's.
    pub scenario: u16,
    /// It is the scenario's last step: an iteration ends with it.
    pub last: bool,
}

/// Whether `path` may go into a request line (and HTTP/2's and HTTP/3's `:path`) as it is: it
/// starts with `/` and holds no blank or control byte, which would end the line early or
/// smuggle in a request of its own.
pub fn is_request_path(path: &str) -> bool {
    path.starts_with('/') && !path.bytes().any(|b| b <= b' ' || b == 0x7f)
}

impl NamedRequest {
    /// Whether its path may go into a request line ([`is_request_path`]); a template's with
    /// its slots filled, whose built-ins fill in digits, letters and `-` only (and feeders'
    /// cells are checked apart), its feeder columns `vocabulary`'s.
    pub fn has_request_path(&self, vocabulary: &Vocabulary) -> bool {
        if self.templated {
            is_request_path(&crate::template::template_skeleton(&self.path_and_query, vocabulary))
        } else {
            is_request_path(&self.path_and_query)
        }
    }
}

impl NamedRequest {
    /// Whether it makes its scenario a flow: it has extractors, a think time, a check that
    /// aborts, or follows redirects.
    fn makes_a_flow(&self) -> bool {
        !self.extract.is_empty()
            || self.think.is_some()
            || self.checks.iter().any(|c| c.on_failure == OnFailure::Abort)
            || self.follow_redirects > 0
    }

    /// Whether no two of its checks share a name (each name is one count of its name's).
    pub fn checks_are_distinct(&self) -> bool {
        self.checks.iter().enumerate().all(|(i, c)| self.checks[..i].iter().all(|d| d.name != c.name))
    }

    /// The feeders its templates use (bit i: feeder i of `vocabulary`'s); 0 unless templated.
    pub(crate) fn feeders(&self, vocabulary: &Vocabulary) -> u32 {
        if !self.templated {
            return 0;
        }
        self.template_texts().filter_map(|t| Template::parse(t, vocabulary).ok()).fold(0, |mask, t| mask | t.feeders())
    }

    /// The texts that are templates when it is templated: its path, its body and its header
    /// values.
    pub(crate) fn template_texts(&self) -> impl Iterator<Item = &[u8]> {
        [self.path_and_query.as_bytes(), &self.spec.body]
            .into_iter()
            .chain(self.spec.headers.iter().map(|(_, v)| v.as_bytes()))
    }
}

impl Mix {
    /// The variables its extractors set, each once, in order of first appearance: the plan's
    /// order, which a template's `{{var}}` slot indexes.
    pub(crate) fn variables(&self) -> Vec<&str> {
        let mut names: Vec<&str> = Vec::new();
        for e in self.requests.iter().flat_map(|r| &r.extract) {
            if !names.contains(&e.var.as_str()) {
                names.push(&e.var);
            }
        }
        names
    }

    /// The most requests one iteration of its scenarios may send: a step that follows
    /// redirects sends its hops too. 1 without scenarios, where a request is a unit.
    pub fn most_requests_per_iteration(&self) -> u64 {
        let Some(scenarios) = self.order.scenarios() else { return 1 };
        let mut first = 0;
        let per_scenario = scenarios.iter().map(|s| {
            let end = (first + s.steps as usize).min(self.requests.len());
            let steps = &self.requests[first.min(end)..end];
            first = end;
            steps.iter().map(|r| 1 + u64::from(r.follow_redirects)).sum::<u64>()
        });
        per_scenario.max().unwrap_or(1).max(1)
    }

    /// Per request: it is a step of a flow, a scenario one of whose steps has extractors, a
    /// think time or a check that aborts (its user sends one request at a time, and a failed
    /// step ends its iteration). All false without such a scenario.
    pub(crate) fn flow_steps(&self) -> Vec<bool> {
        let mut flows = vec![false; self.requests.len()];
        let mut first = 0;
        for scenario in self.order.scenarios().unwrap_or(&[]) {
            let end = (first + scenario.steps as usize).min(self.requests.len());
            if self.requests[first..end].iter().any(NamedRequest::makes_a_flow) {
                flows[first..end].fill(true);
            }
            first = end;
        }
        flows
    }
}

impl Requests {
    /// The variables its extractors set, each once, in order of first appearance (none
    /// without a mix).
    pub fn variables(&self) -> Vec<String> {
        self.mix().map_or_else(Vec::new, |mix| mix.variables().into_iter().map(String::from).collect())
    }

    /// Every request, with the path it goes to (`default_path` for the one request).
    pub(crate) fn each<'a>(&'a self, default_path: &'a str) -> Vec<(&'a str, &'a RequestSpec)> {
        match self {
            Requests::One(spec) => vec![(default_path, spec)],
            Requests::Mix(mix) => mix.requests.iter().map(|r| (r.path_and_query.as_str(), &r.spec)).collect(),
        }
    }

    /// The mix, if this is one.
    pub fn mix(&self) -> Option<&Mix> {
        match self {
            Requests::One(_) => None,
            Requests::Mix(mix) => Some(mix),
        }
    }

    /// A mix's distinct names in index order ([`Mix::names`]), owned: what reports, live
    /// metrics and logs label per-name numbers with. Empty for the one request.
    pub fn names(&self) -> Vec<String> {
        self.mix().map(|m| m.names().into_iter().map(String::from).collect()).unwrap_or_default()
    }

    /// For each of [`Requests::names`], its checks' names ([`Mix::check_names`]), owned. Empty for
    /// the one request.
    pub fn check_names(&self) -> Vec<Vec<String>> {
        self.mix()
            .map(|m| m.check_names().into_iter().map(|c| c.into_iter().map(String::from).collect()).collect())
            .unwrap_or_default()
    }

    /// A scenario mix's scenarios, if the requests are their steps.
    pub fn scenarios(&self) -> Option<&[Scenario]> {
        self.mix().and_then(|m| m.order.scenarios())
    }
}

impl Order {
    /// The seed of its random choices, if it makes any.
    pub fn seed(&self) -> Option<u64> {
        match self {
            Order::InTurn => None,
            Order::Random { seed } | Order::Scenarios { seed, .. } => Some(*seed),
        }
    }

    pub(crate) fn seed_mut(&mut self) -> Option<&mut u64> {
        match self {
            Order::InTurn => None,
            Order::Random { seed } | Order::Scenarios { seed, .. } => Some(seed),
        }
    }

    /// The scenarios, if requests come as the steps of scenarios.
    pub fn scenarios(&self) -> Option<&[Scenario]> {
        match self {
            Order::Scenarios { scenarios, .. } => Some(scenarios),
            _ => None,
        }
    }
}

impl Mix {
    /// The distinct names, in the order they first appear: what per-name statistics are
    /// indexed by, on every thread and worker alike.
    pub fn names(&self) -> Vec<&str> {
        let mut names: Vec<&str> = Vec::new();
        let mut seen = std::collections::HashSet::new();
        for r in &self.requests {
            if seen.insert(r.name.as_str()) {
                names.push(&r.name);
            }
        }
        names
    }

    /// For each name (in [`Mix::names`]' order), the names of its checks: those of the requests
    /// of that name, each once, in the order they first appear. What per-name check counts are
    /// indexed by.
    pub fn check_names(&self) -> Vec<Vec<&str>> {
        let indices = self.name_indices();
        let mut names: Vec<Vec<&str>> = vec![Vec::new(); self.names().len()];
        for (r, &name) in self.requests.iter().zip(&indices) {
            let checks = &mut names[usize::from(name)];
            for c in &r.checks {
                if !checks.contains(&c.name.as_str()) {
                    checks.push(&c.name);
                }
            }
        }
        names
    }

    /// For each request, for each of its checks, the check's index among its name's
    /// ([`Mix::check_names`]).
    pub(crate) fn check_indices(&self) -> Vec<Vec<u16>> {
        let names = self.check_names();
        let indices = self.name_indices();
        self.requests
            .iter()
            .zip(&indices)
            .map(|(r, &name)| {
                let of_name = &names[usize::from(name)];
                r.checks.iter().map(|c| of_name.iter().position(|n| *n == c.name).unwrap_or_default() as u16).collect()
            })
            .collect()
    }

    /// How many checks the mix has, counted as its reports list them (a check name once per
    /// request name).
    pub fn check_count(&self) -> usize {
        self.check_names().iter().map(Vec::len).sum()
    }

    /// Per request, with scenarios: its scenario's index, and whether it is its last step (an
    /// iteration ends with it). Empty without scenarios.
    pub(crate) fn scenario_steps(&self) -> Vec<StepOf> {
        let mut steps = Vec::with_capacity(self.requests.len());
        for (index, scenario) in self.order.scenarios().unwrap_or(&[]).iter().enumerate() {
            for step in 0..scenario.steps {
                steps.push(StepOf { scenario: index as u16, last: step + 1 == scenario.steps });
            }
        }
        steps.truncate(self.requests.len());
        steps
    }

    /// For each request, the index of its name in [`Mix::names`].
    pub(crate) fn name_indices(&self) -> Vec<u16> {
        let mut index: std::collections::HashMap<&str, u16> = std::collections::HashMap::new();
        self.requests
            .iter()
            .map(|r| {
                let next = index.len() as u16;
                *index.entry(r.name.as_str()).or_insert(next)
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(name: &str) -> NamedRequest {
        NamedRequest {
            name: name.into(),
            path_and_query: "/".into(),
            spec: RequestSpec::new("GET", vec![], vec![]),
            templated: false,
            checks: vec![],
            extract: vec![],
            think: None,
            cookies: false,
            follow_redirects: 0,
        }
    }

    fn checked(name: &str, checks: &[&str]) -> NamedRequest {
        let rule = super::super::checks::Rule::Status(vec![200..=200]);
        let checks = checks
            .iter()
            .map(|c| Check {
                name: (*c).into(),
                rule: rule.clone(),
                on_failure: super::super::checks::OnFailure::Continue,
            })
            .collect();
        NamedRequest { checks, ..request(name) }
    }

    #[test]
    fn a_names_checks_are_those_of_its_requests_each_once_and_requests_point_at_theirs() {
        let mix = Mix {
            requests: vec![checked("a", &["ok", "fast"]), checked("b", &[]), checked("a", &["fast", "small"])],
            order: Order::InTurn,
        };
        assert_eq!(mix.check_names(), [vec!["ok", "fast", "small"], vec![]]);
        assert_eq!(mix.check_indices(), [vec![0, 1], vec![], vec![1, 2]]);
        assert_eq!(mix.check_count(), 3);
    }

    #[test]
    fn an_iteration_sends_at_most_its_longest_scenarios_steps_and_the_redirects_they_follow() {
        let follows = |n| NamedRequest { follow_redirects: n, ..request("s") };
        let scenario = |steps| Scenario { name: "s".into(), weight: 1, steps, pacing: None };
        let mix = Mix {
            requests: vec![request("a"), follows(10), request("b"), request("c"), request("d"), request("e")],
            order: Order::Scenarios { scenarios: vec![scenario(2), scenario(4)], seed: 0 },
        };
        assert_eq!(mix.most_requests_per_iteration(), 12, "1 + (1 + 10) beats 4");
        let plain = Mix { requests: vec![follows(3)], order: Order::InTurn };
        assert_eq!(plain.most_requests_per_iteration(), 1);
    }

    #[test]
    fn names_are_distinct_in_order_of_first_appearance_and_requests_point_at_theirs() {
        let mix = Mix {
            requests: vec![request("b"), request("a"), request("b"), request("c"), request("a")],
            order: Order::InTurn,
        };
        assert_eq!(mix.names(), ["b", "a", "c"]);
        assert_eq!(mix.name_indices(), [0, 1, 0, 2, 1]);
    }
}
