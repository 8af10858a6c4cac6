//! How a session takes requests: from its connection's claimed one first, then from the
//! thread's schedule, each with the instant it was due and which of the run's requests it is.

use std::time::{Duration, Instant};

use url::Url;

use super::jar::{CookieUrls, Jar};
use super::schedule::{Schedule, Take};
use crate::feeder::{Feeds, NO_ROW, RowPick};
use crate::plan::{Scenario, path_and_query};
use crate::random::{generator_state, next_random};
use crate::stats::Stats;
use crate::template::Fill;

/// A request sent more than this after its due instant counts as late.
pub(crate) const LATE: Duration = Duration::from_millis(1);

/// What a session may take requests from: first the one its connection claimed when it was
/// opened (a connection is only opened for a request), then the thread's schedule. In the open
/// model each request's send lateness is recorded here, where it is taken.
pub(crate) struct Units<'a> {
    claimed: &'a mut bool,
    schedule: &'a mut Schedule,
    stats: &'a mut Stats,
    /// Where the connection is in the mix; None: request 0, not a HEAD.
    picks: Option<(&'a mut Cursor, &'a mut Picker)>,
    /// A take found the next request not yet due: the session has room and waits for it.
    not_due: bool,
    /// Requests the session took (to send, or to fail unsent).
    taken: u32,
}

impl<'a> Units<'a> {
    pub(crate) fn new(claimed: &'a mut bool, schedule: &'a mut Schedule, stats: &'a mut Stats) -> Self {
        Units { claimed, schedule, stats, picks: None, not_due: false, taken: 0 }
    }

    /// Requests are picked from a mix: `cursor` is where the connection is in it, which
    /// `picker` moves on as they are taken.
    pub(crate) fn picking(mut self, cursor: &'a mut Cursor, picker: &'a mut Picker) -> Self {
        self.picks = Some((cursor, picker));
        self
    }

    /// One request to start at `now`, with the instant it was due (`now` in the closed model)
    /// and which request it is; None when there is none, or none due yet. A step of an
    /// iteration already started is due at once and takes nothing from the schedule: the
    /// budget and the rate count iterations. `busy`: the session has requests in flight, so a
    /// flow's step (which may need what they answer) waits for them.
    #[inline]
    pub(crate) fn take(&mut self, now: Instant, busy: bool) -> Option<Start> {
        if let Some((cursor, picker)) = &mut self.picks {
            if busy && picker.waits(cursor) {
                return None;
            }
            // The user is pausing after a step (think time): nothing until it is over.
            if let Some(until) = cursor.resume_at {
                if until > now {
                    return None;
                }
                cursor.resume_at = None;
            }
        }
        if let Some((cursor, picker)) = &mut self.picks
            && picker.owes(cursor)
        {
            if self.schedule.is_stopping() {
                return None;
            }
            self.taken += 1;
            return Some(Start { due: now, request: picker.advance(cursor) });
        }
        if let Some((cursor, picker)) = &mut self.picks
            && let Some(slot) = picker.slot(cursor, now)
            && slot > now
        {
            // A paced user waits for its next iteration's slot, as it waits out a think time.
            cursor.resume_at = Some(slot);
            return None;
        }
        let (due, late) = match self.schedule.take(now, self.claimed) {
            Take::Now => (now, None),
            Take::Due(due) => (due, Some(now.saturating_duration_since(due))),
            Take::NotYet => {
                self.not_due = true;
                return None;
            }
            Take::Spent => return None,
        };
        if let Some((cursor, picker)) = &mut self.picks
            && !picker.has_rows(cursor)
        {
            // The thread's share of a shard feeder is used up: the unit just taken is not
            // used, no iteration that needs the feeder starts here again, and the thread ends
            // once what is under way is done.
            self.stats.counters.ran_out += u64::from(picker.run_out());
            self.schedule.exhaust();
            return None;
        }
        if let Some(lateness) = late {
            let counters = &mut self.stats.counters;
            counters.late += u64::from(lateness > LATE);
            Stats::record(counters, &mut self.stats.histograms.lateness, lateness);
        }
        self.taken += 1;
        let (request, due) = self.pick(due);
        Some(Start { due, request })
    }

    /// The request taken next for a unit of the schedule due at `due`, and the connection moves
    /// on; with scenarios, the unit is an iteration and this its first step. With the instant
    /// it is due: `due`, or a paced iteration's slot.
    #[inline]
    fn pick(&mut self, due: Instant) -> (u32, Instant) {
        match &mut self.picks {
            None => (0, due),
            Some((cursor, picker)) => {
                cursor.iterations += 1;
                let request = picker.advance(cursor);
                let due = picker.start_iteration(cursor, request, due, self.stats);
                self.stats.counters.feeder_rows += picker.take_rows(cursor, request);
                (request, due)
            }
        }
    }

    /// What the slots of `request`, just taken, are filled from: its connection, iteration,
    /// thread and worker, and the cookies its user's jar has for it. None without a picker.
    pub(crate) fn fill(&mut self, request: u32) -> Option<Fill<'_>> {
        let (cursor, picker) = self.picks.as_mut()?;
        cursor.cookie.clear();
        if let (Some(jar), Some(url)) = (&cursor.jar, picker.cookies.as_ref().and_then(|c| c.sends(request))) {
            // A hop of a redirect goes to its location, not its step's path.
            jar.header(cursor.location.as_deref().unwrap_or(url), &mut cursor.cookie);
        }
        Some(Fill {
            vu: cursor.vu,
            iteration: cursor.iterations.saturating_sub(1),
            worker: picker.numbering.worker,
            thread: picker.numbering.thread,
            rng: &mut picker.numbering.rng,
            unique: &mut picker.numbering.unique,
            rows: picker.feeds.as_ref().map(|f| (&f.feeds, &*cursor.rows)),
            vars: &cursor.vars,
            cookie: &cursor.cookie,
        })
    }

    /// Whether request `request` is a HEAD (its responses have no body); never without a
    /// picker.
    pub(crate) fn is_head(&self, request: u32) -> bool {
        self.picks.as_ref().is_some_and(|(_, picker)| picker.is_head(request))
    }

    /// The connection's own request is still unused: it was opened for a request that could
    /// not start. Taking it makes the caller answer for it (as an error): which request it is.
    pub(crate) fn take_unused_claim(&mut self) -> Option<u32> {
        let unused = std::mem::take(self.claimed);
        if !unused {
            return None;
        }
        self.schedule.drop_claim();
        self.taken += 1;
        Some(self.pick(Instant::now()).0)
    }

    /// Whether a request may still come from here, now or later (nothing is taken): the
    /// connection's claimed one, or one of the schedule's while the run goes on.
    pub(crate) fn has_more(&self) -> bool {
        let owed = self.picks.as_ref().is_some_and(|(cursor, picker)| picker.owes(cursor));
        (owed && !self.schedule.is_stopping()) || self.schedule.has_more(*self.claimed)
    }

    /// How many requests the session took: each ends as a response, a failure or a refusal.
    pub(crate) fn taken(&self) -> u32 {
        self.taken
    }

    /// The session asked for a request and the next was not due yet: it has room, and waits.
    pub(crate) fn found_none_due(&self) -> bool {
        self.not_due
    }
}

/// A request a session starts: when it was due, and which of the run's it is (0 without a mix).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Start {
    pub due: Instant,
    pub request: u32,
}

/// Where a connection slot is in the mix, kept across its connections: the request it sends
/// next, and (with scenarios) steps the server declined unprocessed, to send again first; and
/// what templates number it by.
#[derive(Debug, Clone, Default)]
pub(crate) struct Cursor {
    next: u32,
    again: Vec<u32>,
    /// The slot's index among the whole run's connections: `{{vu}}`.
    vu: u64,
    /// Iterations it started; the one under way is `{{iteration}}`, from 0.
    iterations: u64,
    /// With feeders: per feeder, the row the iteration under way took ([`NO_ROW`] for none).
    rows: Box<[u32]>,
    /// With extractors: the slot's variables, by index in the plan's, as its steps' extractors
    /// set them.
    vars: Vec<Vec<u8>>,
    /// Think time: the user sends nothing before this instant.
    pub resume_at: Option<Instant>,
    /// The user's cookies, once an answer set one.
    jar: Option<Box<Jar>>,
    /// The Cookie field's value for the request being filled (empty: none).
    cookie: Vec<u8>,
    /// Following redirects: where the hop being sent or answered goes, and how many redirects
    /// in a row its step has followed.
    location: Option<Box<Url>>,
    hops: u8,
    /// With scenarios: when the iteration under way was due to start.
    started: Option<Instant>,
    /// Pacing: when its next iteration is due (its first, once the user has its phase).
    slot: Option<Instant>,
}

impl Cursor {
    /// Slot `vu` of the whole run, starting at request `next`.
    pub(crate) fn at(next: u32, vu: u64) -> Self {
        Cursor {
            next,
            again: Vec::new(),
            vu,
            iterations: 0,
            rows: Box::default(),
            vars: Vec::new(),
            resume_at: None,
            jar: None,
            cookie: Vec::new(),
            location: None,
            hops: 0,
            started: None,
            slot: None,
        }
    }

    /// Its user follows a redirect: hop request `hop` goes next, to `url`, whose path and query
    /// fill variable `var` (the hop's path).
    pub(crate) fn follow(&mut self, hop: u32, url: Url, var: u16) {
        self.set_var(usize::from(var), path_and_query(&url).as_bytes());
        self.hops = self.hops.saturating_add(1);
        self.location = Some(Box::new(url));
        self.again.push(hop);
    }

    /// How long the iteration under way has taken at `at`, from when it was due to start.
    pub(crate) fn iteration_took(&self, at: Instant) -> Option<Duration> {
        self.started.map(|started| at.saturating_duration_since(started))
    }

    /// Its step's redirects are over: it had its answer, or failed.
    pub(crate) fn end_redirects(&mut self) {
        self.hops = 0;
        self.location = None;
    }

    /// How many redirects in a row its step has followed, and where the last one went.
    pub(crate) fn redirected(&self) -> (u8, Option<&Url>) {
        (self.hops, self.location.as_deref())
    }

    /// Variable `var` is now `value` (its memory reused).
    pub(crate) fn set_var(&mut self, var: usize, value: &[u8]) {
        if self.vars.len() <= var {
            self.vars.resize_with(var + 1, Vec::new);
        }
        let slot = &mut self.vars[var];
        slot.clear();
        slot.extend_from_slice(value);
    }
}

/// What a thread's templates number requests by, besides their connection's cursor.
#[derive(Debug, Clone)]
pub(crate) struct Numbering {
    pub worker: u64,
    pub thread: u64,
    /// xorshift64* states for random values, never 0: `random_int`'s (from the seed) and
    /// UUIDs' (from the clock).
    pub rng: u64,
    pub unique: u64,
}

impl Default for Numbering {
    fn default() -> Self {
        Numbering { worker: 0, thread: 0, rng: 1, unique: 1 }
    }
}

/// How a thread's connections pick the requests of a mix: each in turn through the list, at
/// random from a seeded generator, or as the steps of scenarios drawn by weight; and what each
/// request is.
#[derive(Debug, Clone)]
pub(crate) struct Picker {
    /// Per request: it is a HEAD.
    heads: Box<[bool]>,
    /// xorshift64* state; None: in turn.
    random: Option<u64>,
    /// Weighted scenarios; None: each request is an iteration of its own.
    scenarios: Option<Scenarios>,
    /// Per request: it is a step of a flow (`Mix::flow_steps`), so it is sent only when its
    /// connection has nothing else in flight (its user is one request at a time), and a
    /// failure there may end its iteration. Empty when no scenario is a flow.
    flows: Box<[bool]>,
    numbering: Numbering,
    /// The thread's feeders; None without.
    feeds: Option<FeedPicks>,
    /// Per request, the URL its user's cookies are matched against; None when no jar is on.
    cookies: Option<CookieUrls>,
}

/// A picker's feeders: their rows, and which of them an iteration uses.
#[derive(Debug, Clone)]
struct FeedPicks {
    feeds: Feeds,
    /// Per request: the feeders an iteration starting with it uses (bit i: feeder i), its
    /// scenario's steps' together.
    masks: Box<[u32]>,
    /// A shard feeder's rows ran out here (counted once).
    ran_out: bool,
}

/// The scenarios a picker draws from, laid out over the list of requests.
#[derive(Debug, Clone)]
struct Scenarios {
    /// Per scenario, in order: the sum of the weights up to and including it, and its first
    /// request.
    cumulative: Box<[(u64, u32)]>,
    /// Per scenario: its pacing, if it has one; `paced`: some scenario has.
    pacing: Box<[Option<Duration>]>,
    paced: bool,
    /// Per request: it is its scenario's first step (an iteration starts with it) and its
    /// last (the iteration ends after it).
    first: Box<[bool]>,
    last: Box<[bool]>,
}

impl Picker {
    /// `heads` has one entry per request of the mix; `seed` picks at random, else in turn.
    /// `scenarios` (with a seed) lays the requests out as the steps of weighted scenarios.
    pub(crate) fn new(heads: Box<[bool]>, seed: Option<u64>, scenarios: Option<&[Scenario]>) -> Self {
        let random = seed.map(|s| generator_state(s.wrapping_add(0x9e37_79b9_7f4a_7c15)));
        let scenarios = scenarios.filter(|s| !s.is_empty()).map(|list| {
            let n = heads.len();
            let (mut first, mut last) = (vec![false; n], vec![false; n]);
            let (mut weight, mut at) = (0u64, 0u32);
            let cumulative = list
                .iter()
                .map(|s| {
                    weight += u64::from(s.weight);
                    let start = at;
                    at += s.steps;
                    if let Some(f) = first.get_mut(start as usize) {
                        *f = true;
                    }
                    if let Some(l) = (at as usize).checked_sub(1).and_then(|i| last.get_mut(i)) {
                        *l = true;
                    }
                    (weight, start)
                })
                .collect();
            let pacing: Box<[Option<Duration>]> = list.iter().map(|s| s.pacing).collect();
            let paced = pacing.iter().any(Option::is_some);
            Scenarios { cumulative, pacing, paced, first: first.into(), last: last.into() }
        });
        Picker {
            heads,
            random,
            scenarios,
            flows: Box::default(),
            numbering: Numbering::default(),
            feeds: None,
            cookies: None,
        }
    }

    /// `flows[r]`: request r is a step of a flow, sent only when its connection is otherwise
    /// idle.
    pub(crate) fn with_flows(mut self, flows: Box<[bool]>) -> Self {
        if flows.iter().any(|&f| f) {
            self.flows = flows;
        }
        self
    }

    /// Whether what `cursor` sends next is a flow's step, which waits for the connection's
    /// requests in flight.
    #[inline]
    fn waits(&self, cursor: &Cursor) -> bool {
        !self.flows.is_empty() && {
            let next = cursor.again.last().copied().unwrap_or(cursor.next);
            self.flows.get(next as usize).copied().unwrap_or(false)
        }
    }

    /// Users keep cookies for the requests `cookies` has a URL for.
    pub(crate) fn with_cookies(mut self, cookies: Option<CookieUrls>) -> Self {
        self.cookies = cookies;
        self
    }

    /// An answer to `request` set `set_cookies` (the values of its `set-cookie` fields): into
    /// the jar of `cursor`'s user, if the request's jar is on.
    pub(crate) fn store_cookies(&self, cursor: &mut Cursor, request: u32, set_cookies: &[Vec<u8>]) {
        if let Some(url) = self.cookies.as_ref().and_then(|c| c.get(request)) {
            let url = cursor.location.as_deref().unwrap_or(url);
            cursor.jar.get_or_insert_default().store(set_cookies, url);
        }
    }

    /// The user of `cursor` pauses after an answer, by `think`, from `at`: for how long.
    pub(crate) fn think(&mut self, cursor: &mut Cursor, think: &crate::plan::Think, at: Instant) -> Duration {
        let pause = think.draw(&mut self.numbering.rng);
        cursor.resume_at = Some(at + pause);
        pause
    }

    /// The iteration under way on `cursor` ends at `request`, if that is a flow's step: its
    /// remaining steps are not sent, and the next request starts a new iteration. True if steps
    /// were left. Other scenarios' iterations go on whatever their steps' answers (a flow's user
    /// sends one request at a time, so only a flow's are sure to be the cursor's own). After its
    /// scenario's last step nothing is left of its iteration, and what `cursor` owes then
    /// belongs to the next one (a step of another scenario already under way on HTTP/2 or
    /// HTTP/3), which goes on.
    pub(crate) fn end_iteration(&mut self, cursor: &mut Cursor, request: u32) -> bool {
        let at = request as usize;
        let flow_step = self.flows.get(at).copied().unwrap_or(false);
        let owes = self.owes(cursor);
        let (Some(state), Some(scenarios)) = (&mut self.random, &self.scenarios) else { return false };
        if !flow_step || !owes || scenarios.last.get(at).copied().unwrap_or(true) {
            return false;
        }
        cursor.again.clear();
        cursor.next = scenarios.draw(state);
        true
    }

    /// Iterations take rows of `feeds`: `uses[r]` says which feeders request r's templates use
    /// (bit i: feeder i).
    pub(crate) fn feeding(mut self, feeds: Feeds, uses: &[u32]) -> Self {
        if feeds.len() == 0 || uses.iter().all(|&m| m == 0) {
            return self;
        }
        let mut masks: Vec<u32> = uses.to_vec();
        masks.resize(self.heads.len(), 0);
        if let Some(scenarios) = &self.scenarios {
            // An iteration is its scenario's steps: the first step's mask is all of theirs.
            let mut first = 0;
            for (r, &last) in scenarios.last.iter().enumerate() {
                if last {
                    let all = masks[first..=r].iter().fold(0, |a, m| a | m);
                    masks[first] = all;
                    first = r + 1;
                }
            }
        }
        self.feeds = Some(FeedPicks { feeds, masks: masks.into(), ran_out: false });
        self
    }

    /// Whether the iteration `cursor` starts next has a row of every feeder it uses.
    #[inline]
    fn has_rows(&self, cursor: &Cursor) -> bool {
        let Some(f) = &self.feeds else { return true };
        let mask = f.masks.get(cursor.next as usize).copied().unwrap_or(0);
        mask == 0 || f.feeds.has_rows(mask)
    }

    /// Marks the rows as run out: true the first time.
    fn run_out(&mut self) -> bool {
        self.feeds.as_mut().is_some_and(|f| !std::mem::replace(&mut f.ran_out, true))
    }

    /// The iteration `cursor` just started with `request` takes its rows: how many.
    #[inline]
    fn take_rows(&mut self, cursor: &mut Cursor, request: u32) -> u64 {
        let Some(f) = &mut self.feeds else { return 0 };
        let mask = f.masks.get(request as usize).copied().unwrap_or(0);
        if mask == 0 {
            return 0;
        }
        if cursor.rows.len() != f.feeds.len() {
            cursor.rows = vec![NO_ROW; f.feeds.len()].into();
        }
        match f.feeds.take(mask, cursor.vu, cursor.iterations.saturating_sub(1), &mut cursor.rows) {
            RowPick::Taken(n) => n,
            // Only a request answered for unsent (a claim whose connection failed) gets here
            // without rows: it is never filled.
            RowPick::RanOut => {
                cursor.rows.fill(NO_ROW);
                0
            }
        }
    }

    /// Templates on this thread are numbered by `numbering`.
    pub(crate) fn numbered(mut self, numbering: Numbering) -> Self {
        self.numbering = numbering;
        self
    }

    /// The first request of connection slot `slot`: in turn, slot k starts at request k, so a
    /// run's first requests spread over the list too.
    pub(crate) fn first(&mut self, slot: usize) -> u32 {
        let len = self.heads.len().max(1);
        match (&mut self.random, &self.scenarios) {
            (Some(state), Some(scenarios)) => scenarios.draw(state),
            (None, _) => (slot % len) as u32,
            (Some(state), None) => draw(state, len),
        }
    }

    /// The request `cursor` sends now (one to send again first), and moves it on.
    #[inline]
    pub(crate) fn advance(&mut self, cursor: &mut Cursor) -> u32 {
        if let Some(again) = cursor.again.pop() {
            return again;
        }
        let next = &mut cursor.next;
        let this = *next;
        let len = self.heads.len().max(1);
        *next = match (&mut self.random, &self.scenarios) {
            (Some(state), Some(scenarios)) => {
                if scenarios.last.get(this as usize).copied().unwrap_or(true) {
                    scenarios.draw(state)
                } else {
                    this + 1
                }
            }
            (None, _) => {
                let n = this + 1;
                if n as usize >= len { 0 } else { n }
            }
            (Some(state), None) => draw(state, len),
        };
        this
    }

    pub(crate) fn is_head(&self, request: u32) -> bool {
        self.heads.get(request as usize).copied().unwrap_or(false)
    }

    /// With scenarios: `cursor` starts an iteration with `request`, taken at `taken`, counted
    /// in `stats` (the run's and its scenario's). The instant it was due: `taken`, or a paced
    /// iteration's slot, which sets the next one's; one taken over [`LATE`] after its slot is
    /// counted late.
    pub(crate) fn start_iteration(
        &self,
        cursor: &mut Cursor,
        request: u32,
        taken: Instant,
        stats: &mut Stats,
    ) -> Instant {
        let Some(scenarios) = &self.scenarios else { return taken };
        let index = scenarios.index_of(request);
        let scenario = stats.scenarios.entry(index);
        scenario.started += 1;
        let mut due = taken;
        if let Some(period) = scenarios.pacing.get(index).copied().flatten() {
            let slot = cursor.slot.unwrap_or(taken).min(taken);
            scenario.late += u64::from(taken.saturating_duration_since(slot) > LATE);
            cursor.slot = Some(slot + period);
            due = slot;
        }
        cursor.started = Some(due);
        stats.counters.iterations += 1;
        due
    }

    /// Pacing, as a timed run ends at `end`: the slots of `cursor`'s user that came due by
    /// then and that it had not started (it was behind its cadence), counted to the scenario
    /// it starts next.
    pub(crate) fn count_missed(&self, cursor: &Cursor, end: Instant, stats: &mut Stats) {
        let Some(slot) = cursor.slot.filter(|&slot| slot <= end) else { return };
        let Some((index, period)) = self.next_pacing(cursor) else { return };
        let behind = end.duration_since(slot).as_nanos() / period.as_nanos().max(1);
        let missed = &mut stats.scenarios.entry(index).missed;
        *missed = missed.saturating_add(u64::try_from(behind).unwrap_or(u64::MAX).saturating_add(1));
    }

    /// Pacing: when the iteration `cursor` starts next is due, its user's first at `now` plus
    /// the user's phase. None when it is not paced.
    #[inline]
    fn slot(&self, cursor: &mut Cursor, now: Instant) -> Option<Instant> {
        let (_, period) = self.next_pacing(cursor)?;
        Some(*cursor.slot.get_or_insert_with(|| now + phase(cursor.vu, period)))
    }

    /// The scenario `cursor` sends next and its pacing, if it is paced.
    #[inline]
    fn next_pacing(&self, cursor: &Cursor) -> Option<(usize, Duration)> {
        let scenarios = self.scenarios.as_ref().filter(|s| s.paced)?;
        let index = scenarios.index_of(cursor.next);
        Some((index, scenarios.pacing.get(index).copied().flatten()?))
    }

    /// Whether what `cursor` sends next goes on iterations already started (a step to send
    /// again, or a scenario's step after its first): it takes no unit of the budget or the
    /// rate of its own.
    #[inline]
    pub(crate) fn owes(&self, cursor: &Cursor) -> bool {
        self.scenarios
            .as_ref()
            .is_some_and(|s| !cursor.again.is_empty() || !s.first.get(cursor.next as usize).copied().unwrap_or(true))
    }

    /// The server declined `request` unprocessed. With scenarios it is sent again on this slot
    /// as the step it is (true); otherwise the caller gives its unit back to the schedule, and
    /// whichever request comes next takes it (false).
    pub(crate) fn send_again(&self, cursor: &mut Cursor, request: u32) -> bool {
        if self.scenarios.is_none() {
            return false;
        }
        cursor.again.push(request);
        true
    }
}

impl Scenarios {
    /// The index of the scenario `request` is a step of: the last whose first request is at or
    /// before it.
    fn index_of(&self, request: u32) -> usize {
        self.cumulative.partition_point(|&(_, first)| first <= request).saturating_sub(1)
    }

    /// The first request of a scenario drawn by weight.
    fn draw(&self, state: &mut u64) -> u32 {
        let total = self.cumulative.last().map_or(1, |&(w, _)| w.max(1));
        let r = next_random(state) % total;
        let k = self.cumulative.partition_point(|&(w, _)| w <= r);
        self.cumulative.get(k).map_or(0, |&(_, start)| start)
    }
}

/// Where in its pacing `period` user `vu` starts: the golden ratio's multiples modulo 1 spread
/// any number of users nearly evenly over the period, without knowing how many there are, so
/// that their iterations do not all fall due at once.
fn phase(vu: u64, period: Duration) -> Duration {
    let fraction = (vu.wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 11) as f64 / (1u64 << 53) as f64;
    period.mul_f64(fraction)
}

/// A request index in `0..len`, uniformly enough (len ≤ 100,000 against 64 random bits).
fn draw(state: &mut u64, len: usize) -> u32 {
    (next_random(state) % len as u64) as u32
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn in_turn_each_connection_walks_the_list_from_its_own_slot() {
        let mut picker = Picker::new(vec![false; 3].into(), None, None);
        let mut cursor = Cursor::at(picker.first(4), 0);
        let taken: Vec<u32> = (0..5).map(|_| picker.advance(&mut cursor)).collect();
        assert_eq!(taken, [1, 2, 0, 1, 2]);
    }

    #[test]
    fn at_random_the_same_seed_draws_the_same_requests_and_covers_them_all_evenly() {
        let draw_all = |seed| {
            let mut picker = Picker::new(vec![false; 4].into(), Some(seed), None);
            let mut cursor = Cursor::at(picker.first(0), 0);
            (0..40_000).map(|_| picker.advance(&mut cursor)).collect::<Vec<u32>>()
        };
        let a = draw_all(7);
        assert_eq!(a, draw_all(7));
        assert_ne!(a, draw_all(8));
        for request in 0..4 {
            let n = a.iter().filter(|&&r| r == request).count();
            // 10,000 expected; a binomial's standard deviation here is about 87.
            assert!((9_500..=10_500).contains(&n), "request {request}: {n}");
        }
    }

    #[test]
    fn a_paced_user_waits_for_its_slot_keeps_the_cadence_and_counts_late_starts_and_missed_slots() {
        let period = Duration::from_millis(20);
        let scenarios = [Scenario { name: "frame".into(), weight: 1, steps: 1, pacing: Some(period) }];
        let mut picker = Picker::new(vec![false].into(), Some(1), Some(&scenarios));
        let mut stats = Stats::new();
        let t0 = Instant::now();
        let mut cursor = Cursor::at(picker.first(0), 5);
        // Its first slot is its phase into the period, from the first take.
        let first = picker.slot(&mut cursor, t0).expect("paced");
        assert_eq!(first, t0 + phase(5, period));
        assert_eq!(picker.slot(&mut cursor, t0 + period), Some(first), "the slot stays until taken");
        // Taken on time: due at its slot, the next one a period on.
        let request = picker.advance(&mut cursor);
        assert_eq!(picker.start_iteration(&mut cursor, request, first, &mut stats), first);
        assert_eq!(picker.slot(&mut cursor, first), Some(first + period));
        // Taken 5 ms after its slot: late, due at the slot all the same, and the cadence holds.
        let request = picker.advance(&mut cursor);
        let taken = first + period + Duration::from_millis(5);
        assert_eq!(picker.start_iteration(&mut cursor, request, taken, &mut stats), first + period);
        assert_eq!(picker.slot(&mut cursor, taken), Some(first + 2 * period));
        let frame = stats.scenarios.get(0).expect("counted");
        assert_eq!((frame.started, frame.late, stats.counters.iterations), (2, 1, 2));
        // The run ends with its next slot not yet due: nothing missed. Ending 2.5 periods after
        // it, three slots came due that it never started.
        let next = first + 2 * period;
        picker.count_missed(&cursor, next - Duration::from_nanos(1), &mut stats);
        assert_eq!(stats.scenarios.get(0).map(|s| s.missed), Some(0));
        picker.count_missed(&cursor, next + period * 5 / 2, &mut stats);
        assert_eq!(stats.scenarios.get(0).map(|s| s.missed), Some(3));
        // Unpaced scenarios have no slot.
        let mut unpaced = two_scenarios(1);
        let mut cursor = Cursor::at(unpaced.first(0), 0);
        assert_eq!(unpaced.slot(&mut cursor, t0), None);
        let mut none = Stats::new();
        unpaced.count_missed(&cursor, t0 + period, &mut none);
        assert!(none.scenarios.is_empty(), "nothing to miss");
    }

    #[test]
    fn users_phases_spread_over_the_period() {
        let period = Duration::from_millis(100);
        let mut tenths = [0; 10];
        for vu in 0..1000 {
            let p = phase(vu, period);
            assert!(p < period);
            tenths[(p.as_millis() / 10) as usize] += 1;
        }
        assert!(tenths.iter().all(|&n| (90..=110).contains(&n)), "{tenths:?}");
    }

    /// Two scenarios: "browse" of steps 0, 1, 2 (weight 3) and "buy" of steps 3, 4 (weight 1).
    fn two_scenarios(seed: u64) -> Picker {
        let scenarios = [
            Scenario { name: "browse".into(), weight: 3, steps: 3, pacing: None },
            Scenario { name: "buy".into(), weight: 1, steps: 2, pacing: None },
        ];
        Picker::new(vec![false; 5].into(), Some(seed), Some(&scenarios))
    }

    #[test]
    fn scenarios_send_their_steps_in_order_and_draw_the_next_by_weight() {
        let mut picker = two_scenarios(11);
        let mut cursor = Cursor::at(picker.first(0), 0);
        let (mut browse, mut buy) = (0, 0);
        for _ in 0..20_000 {
            assert!(!picker.owes(&cursor), "an iteration starts at a scenario's first step");
            match picker.advance(&mut cursor) {
                0 => {
                    browse += 1;
                    for step in [1, 2] {
                        assert!(picker.owes(&cursor), "step {step} goes on the iteration");
                        assert_eq!(picker.advance(&mut cursor), step);
                    }
                }
                3 => {
                    buy += 1;
                    assert!(picker.owes(&cursor));
                    assert_eq!(picker.advance(&mut cursor), 4);
                }
                other => panic!("an iteration started at step {other}"),
            }
        }
        // 15,000 expected; the binomial's standard deviation is about 61: within 5 of them.
        assert!((14_690..=15_310).contains(&browse), "browse {browse}, buy {buy}");
        assert_eq!(browse + buy, 20_000);
    }

    #[test]
    fn a_declined_step_is_sent_again_as_itself_before_the_iteration_goes_on() {
        let mut picker = two_scenarios(5);
        let mut cursor = Cursor::at(3, 0);
        assert_eq!(picker.advance(&mut cursor), 3);
        assert!(picker.send_again(&mut cursor, 3));
        assert!(picker.owes(&cursor), "owed: it takes no new unit");
        assert_eq!(picker.advance(&mut cursor), 3);
        assert_eq!(picker.advance(&mut cursor), 4);
        assert!(!picker.owes(&cursor));
        // Without scenarios the unit goes back to the schedule instead.
        let plain = Picker::new(vec![false; 2].into(), None, None);
        assert!(!plain.send_again(&mut Cursor::at(0, 0), 1));
        assert!(!plain.owes(&Cursor::at(1, 0)));
    }

    #[test]
    fn ending_an_iteration_skips_its_remaining_steps_and_the_next_starts_a_scenario() {
        // Not a flow: its iterations go on whatever happens to a step.
        let mut plain = two_scenarios(3);
        let mut cursor = Cursor::at(0, 0);
        assert_eq!(plain.advance(&mut cursor), 0);
        assert!(!plain.end_iteration(&mut cursor, 0));
        assert!(plain.owes(&cursor));
        let mut picker = two_scenarios(3).with_flows(vec![true; 5].into());
        let mut cursor = Cursor::at(0, 0);
        assert_eq!(picker.advance(&mut cursor), 0);
        assert!(picker.owes(&cursor), "steps 1 and 2 are left");
        assert!(picker.end_iteration(&mut cursor, 0));
        assert!(!picker.owes(&cursor), "the next request starts an iteration");
        assert!([0, 3].contains(&picker.advance(&mut cursor)));
        // At the end of an iteration there is nothing left to skip.
        let mut last = Cursor::at(3, 0);
        assert_eq!(picker.advance(&mut last), 3);
        assert_eq!(picker.advance(&mut last), 4);
        assert!(!picker.end_iteration(&mut last, 4));
        // A scenario's last step ends nothing of the next iteration, already under way.
        let mut next = Cursor::at(3, 0);
        assert_eq!(picker.advance(&mut next), 3);
        assert!(!picker.end_iteration(&mut next, 2), "step 2 was browse's last");
        assert!(picker.owes(&next), "buy's step 4 is still to be sent");
    }

    #[test]
    fn a_flows_step_waits_while_its_connection_is_busy_and_other_requests_do_not() {
        // "browse" (steps 0-2) is a flow, "buy" (3-4) is not.
        let picker = two_scenarios(9).with_flows(vec![true, true, true, false, false].into());
        let (mut claimed, mut schedule, mut stats) = (false, Schedule::closed(Some(10)), Stats::default());
        let mut cursor = Cursor::at(1, 0);
        let mut picker = picker;
        let mut units = Units::new(&mut claimed, &mut schedule, &mut stats).picking(&mut cursor, &mut picker);
        assert_eq!(units.take(Instant::now(), true), None, "step 1 waits for what is in flight");
        assert_eq!(units.take(Instant::now(), false).map(|s| s.request), Some(1));
        let mut buy = Cursor::at(4, 0);
        let mut units = Units::new(&mut claimed, &mut schedule, &mut stats).picking(&mut buy, &mut picker);
        assert_eq!(units.take(Instant::now(), true).map(|s| s.request), Some(4), "not a flow: it goes at once");
        // Without flows nothing waits.
        let mut plain = two_scenarios(9).with_flows(vec![false; 5].into());
        let mut again = Cursor::at(1, 0);
        let mut units = Units::new(&mut claimed, &mut schedule, &mut stats).picking(&mut again, &mut plain);
        assert_eq!(units.take(Instant::now(), true).map(|s| s.request), Some(1));
    }

    #[test]
    fn a_user_pausing_takes_nothing_until_its_pause_is_over() {
        let mut picker = two_scenarios(9);
        let (mut claimed, mut schedule, mut stats) = (false, Schedule::closed(Some(10)), Stats::default());
        let mut cursor = Cursor::at(1, 0);
        let now = Instant::now();
        picker.think(&mut cursor, &crate::plan::Think::Fixed(Duration::from_millis(30)), now);
        let mut units = Units::new(&mut claimed, &mut schedule, &mut stats).picking(&mut cursor, &mut picker);
        assert_eq!(units.take(now + Duration::from_millis(29), false), None);
        assert!(!units.found_none_due(), "a pause is not the schedule's: no waiting for a due request");
        assert_eq!(units.take(now + Duration::from_millis(30), false).map(|s| s.request), Some(1));
        assert_eq!(cursor.resume_at, None);
    }

    #[test]
    fn a_variable_keeps_its_latest_value() {
        let mut cursor = Cursor::at(0, 0);
        cursor.set_var(2, b"first");
        cursor.set_var(2, b"2nd");
        assert_eq!(cursor.vars, vec![Vec::<u8>::new(), Vec::new(), b"2nd".to_vec()]);
    }
}
