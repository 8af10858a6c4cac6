//! Running a plan: spread it over threads, collect their per-second deltas, merge the result.

use std::collections::btree_map::Entry;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, mpsc};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::driver::{
    self, CheckJudge, GRO_BUF_SIZE, Judge, MIN_BUF_SIZE, RequestChecks, Shared, ThreadDone, ThreadMsg, ThreadPlan,
};
use crate::engine::choose_engine;
use crate::error::EngineError;
use crate::fd_limit;
use crate::gate::StartGate;
use crate::plan::{Hops, LOCATION_VAR, NamedRequest, OnFailure, Plan, Protocol, Stop};
use crate::quic;
use crate::ring::RingSupport;
use crate::session::{CookieUrls, Fields, KeptCheckTable, KeptChecks, SessionConfig};
use crate::stats::{ErrorKind, Snapshot, Stats};
use crate::template::{Template, Templating, Vocabulary};
use crate::tls;
use crate::{h1, h2, h3};

/// Starts and stops a run from outside (a controller, Ctrl-C). Cheap to clone.
///
/// A gated run opens its connections and then waits for [`RunControl::start_at`], so that
/// several engines (on several machines) send their first requests at one instant.
#[derive(Debug, Clone)]
pub struct RunControl {
    stop_flag: Arc<AtomicBool>,
    pub(crate) gate: Arc<StartGate>,
    /// Engine threads whose counts are in and who are still closing their connections.
    closing: Arc<Mutex<Vec<JoinHandle<std::io::Result<()>>>>>,
}

impl Default for RunControl {
    fn default() -> Self {
        RunControl::new()
    }
}

impl RunControl {
    /// A run whose load starts as soon as each connection is up.
    pub fn new() -> Self {
        let control = RunControl::gated();
        control.start_at(control.gate.base());
        control
    }

    /// A run that opens its connections (unless keep-alive is off) and then waits for
    /// [`RunControl::start_at`] before it sends anything.
    pub fn gated() -> Self {
        RunControl {
            stop_flag: Arc::new(AtomicBool::new(false)),
            gate: Arc::new(StartGate::closed()),
            closing: Arc::default(),
        }
    }

    /// Lets the load start at `at` (at once if it is past). Only the first call counts.
    pub fn start_at(&self, at: Instant) {
        self.gate.open_at(at);
    }

    /// Asks every engine thread to stop; they notice within 50 ms and return their statistics.
    pub fn stop(&self) {
        self.stop_flag.store(true, Ordering::Relaxed);
    }

    pub fn is_stopped(&self) -> bool {
        self.stop_flag.load(Ordering::Relaxed)
    }

    /// The instant the load may start, once [`RunControl::start_at`] named one: for a shard
    /// runner other than the engine (the simulated fleet's) that keeps the same gate.
    pub fn start_instant(&self) -> Option<Instant> {
        self.gate.at()
    }

    /// Waits until the engine threads of a run that returned have closed its connections
    /// (within a second each): [`run`] returns as soon as the counts are final, and closing
    /// 10,000 connections is a fifth of a second of the kernel's time. What comes next on the
    /// same machine (another run) waits here; a process about to exit need not.
    pub fn wait_closed(&self) {
        let handles = std::mem::take(&mut *self.closing.lock().unwrap_or_else(|e| e.into_inner()));
        for handle in handles {
            let _ = handle.join();
        }
    }
}

/// What a run tells its caller while it goes on.
// Interval is the large one (its histograms) and is handed over, not copied: boxing it would
// only add an allocation per second.
#[allow(clippy::large_enum_variant)]
#[derive(Debug)]
pub enum Progress {
    /// Every connection has been tried once: `connected` are up (and, in a gated run, waiting
    /// for the start), `failed` could not be set up.
    Ready { connected: u64, failed: u64 },
    /// The load began: when the last engine thread sent its first requests.
    Started { at: Instant },
    /// One whole second of the run.
    Interval(Snapshot),
}

/// What a finished run measured.
#[derive(Debug, Clone)]
pub struct RunResult {
    /// What was measured: everything counted after the warm-up (all of the run without one).
    pub stats: Stats,
    /// With a warm-up: what was counted during it (its seconds, and the set-up before the
    /// start), apart from `stats`. Together they are everything the run did.
    pub warm_up: Option<Stats>,
    /// From the start of load to the end of the last thread (zero if it never started).
    pub duration: Duration,
    pub threads: usize,
    pub connections: usize,
    /// Stopped from outside before the plan was done.
    pub interrupted: bool,
    pub ring: RingSupport,
    /// CPU time the engine threads used, to tell a saturated client from a slow server.
    pub client_cpu: Duration,
    /// The first message seen for each error kind, to say *why* next to the counts.
    pub error_samples: Vec<(ErrorKind, String)>,
    /// HTTP/2: the lowest SETTINGS_MAX_CONCURRENT_STREAMS a server sent, when it was below the
    /// streams asked for (fewer requests were in flight than planned).
    pub stream_limit: Option<u32>,
}

/// How the loop judges each of a request's checks (`indices`: each one's index among its
/// name's): rules on what a session keeps by the bit it sets, in their order among those.
fn judges(checks: &[crate::plan::Check], indices: Vec<u16>) -> RequestChecks {
    let mut kept = 0u8;
    checks
        .iter()
        .zip(indices)
        .map(|(c, k)| {
            let judge = if c.rule.needs_kept() {
                kept = kept.saturating_add(1);
                Judge::Kept(kept - 1)
            } else {
                Judge::Now(c.rule.clone())
            };
            CheckJudge { judge, index: k, abort: c.on_failure == OnFailure::Abort }
        })
        .collect()
}

/// Per request of a mix (`requests`, hops included), what `of` makes of it, if some request
/// `has` something to make it of; else empty, and the loop looks nothing up.
fn per_request<T>(
    requests: &[&NamedRequest],
    has: impl Fn(&NamedRequest) -> bool,
    of: impl Fn(&NamedRequest) -> T,
) -> Box<[T]> {
    if requests.iter().any(|r| has(r)) { requests.iter().map(|r| of(r)).collect() } else { Box::default() }
}

/// Per variable (of `variables` in all): some templated request writes it into its path, where
/// a value may hold no blank.
fn variables_in_paths(requests: &[&NamedRequest], templating: &Templating, variables: usize) -> Vec<bool> {
    let mut in_path = vec![false; variables];
    let templated = requests.iter().enumerate().filter(|(i, _)| templating.is_templated(*i));
    for r in templated.map(|(_, r)| r) {
        if let Ok(path) = Template::parse(r.path_and_query.as_bytes(), &templating.vocabulary) {
            for v in path.variables() {
                if let Some(used) = in_path.get_mut(v) {
                    *used = true;
                }
            }
        }
    }
    in_path
}

/// Runs `plan` to its end, telling `on_progress` when the connections are up, when the load
/// started, and once per second that second's delta.
pub fn run(plan: &Plan, control: &RunControl, on_progress: &mut dyn FnMut(Progress)) -> Result<RunResult, EngineError> {
    plan.validate()?;
    let ring = choose_engine(plan.engine)?;
    // A mix's steps that follow redirects have hop requests, after its own (`plan::Hops`).
    let hops = plan.requests.mix().map(Hops::of).unwrap_or_default();
    // A mix's requests, hops included; none for the one request.
    let mixed: Vec<&NamedRequest> = plan.requests.mix().map_or(Vec::new(), |m| m.requests.iter().collect());
    let own = mixed.len();
    let mixed: Vec<&NamedRequest> = mixed.into_iter().chain(hops.requests()).collect();
    // Every request with its path; a mix's names, by request.
    let mut requests = plan.requests.each(&plan.target.path_and_query);
    requests.extend(hops.requests().map(|r| (r.path_and_query.as_str(), &r.spec)));
    let names = plan.requests.mix().map(|mix| hops.extended(mix.name_indices()).into_boxed_slice());
    // Hops' paths are filled from a variable of their own.
    let mut variables = plan.requests.variables();
    if hops.any() {
        variables.push(LOCATION_VAR.to_string());
    }
    // Per request: its `{{…}}` are templates, and the feeders they use.
    let vocabulary = Vocabulary::of(&plan.feeders).with_variables(variables.iter().cloned());
    let (templated, feeder_uses): (Vec<bool>, Vec<u32>) = match plan.requests.mix() {
        Some(_) => mixed.iter().map(|r| (r.templated, r.feeders(&vocabulary))).unzip(),
        None => (vec![false], vec![0]),
    };
    // Per request: its user's jar goes with it, and it sets its own Cookie field (then the jar
    // adds none).
    let jars: Vec<(bool, bool)> = mixed.iter().map(|r| (r.cookies, r.spec.has_header("cookie"))).collect();
    let cookie_urls =
        CookieUrls::new(&plan.target, requests.iter().zip(&jars).map(|((path, _), &(on, own))| (*path, on, own)));
    let cookies = (0..jars.len() as u32).map(|i| cookie_urls.as_ref().is_some_and(|c| c.sends(i).is_some())).collect();
    let templating = Templating { templated, vocabulary, cookies };
    let addr = plan.target.resolve()?[0];
    driver::check_sources_against(&plan.source_addrs, addr.ip())?;
    let redirects = hops.redirects(
        &plan.target,
        &requests[..own.min(requests.len())].iter().map(|(path, _)| *path).collect::<Vec<_>>(),
        variables.len().saturating_sub(1) as u16,
    );
    let kept_checks: KeptCheckTable = if mixed.iter().any(|r| {
        r.cookies || r.follow_redirects > 0 || !r.extract.is_empty() || r.checks.iter().any(|c| c.rule.needs_kept())
    }) {
        let in_path = variables_in_paths(&mixed, &templating, variables.len());
        mixed
            .iter()
            .map(|r| {
                let reads = Fields { set_cookie: r.cookies, location: r.follow_redirects > 0, ..Fields::NONE };
                KeptChecks::of(r.checks.iter().map(|c| &c.rule), &r.extract, &variables, &in_path, reads)
                    .map(|k| k.keeping_bodies_up_to(plan.kept_body_bytes))
            })
            .collect()
    } else {
        Arc::from([])
    };
    let session = match plan.protocol {
        Protocol::Http1 => SessionConfig::H1(h1::Config {
            kept_checks: kept_checks.clone(),
            keepalive: plan.keepalive,
            request_timeout: plan.request_timeout,
            templates: requests
                .iter()
                .enumerate()
                .map(|(i, (path, spec))| {
                    let (vocabulary, cookies) = (templating.vocabulary_of(i), templating.keeps_cookies(i));
                    templating
                        .needs_template(i)
                        .then(|| h1::encode_template(&plan.target, path, spec, !plan.keepalive, vocabulary, cookies))?
                })
                .collect(),
        }),
        Protocol::Http2 { streams: 0 } => return Err(EngineError::Plan("HTTP/2 streams must be at least 1")),
        Protocol::Http2 { .. } if !plan.keepalive => {
            return Err(EngineError::Plan("HTTP/2 needs keep-alive: its connections carry many requests"));
        }
        Protocol::Http2 { streams } => SessionConfig::H2(Arc::new(h2::Config {
            requests: h2::encode_requests(&plan.target, &requests, &templating).into(),
            streams,
            connect_timeout: plan.connect_timeout,
            request_timeout: plan.request_timeout,
            kept_checks: kept_checks.clone(),
        })),
        Protocol::Http3 { streams: 0 } => return Err(EngineError::Plan("HTTP/3 streams must be at least 1")),
        Protocol::Http3 { .. } if !plan.keepalive => {
            return Err(EngineError::Plan("HTTP/3 needs keep-alive: its connections carry many requests"));
        }
        Protocol::Http3 { .. } if !plan.target.is_tls() => {
            return Err(EngineError::Plan("HTTP/3 needs an https:// URL"));
        }
        Protocol::Http3 { streams } => {
            // The name is checked once here, rather than failing every connection.
            tls::server_name(&plan.target.host)?;
            SessionConfig::H3(Arc::new(h3::Setup {
                request: h3::Config::new(
                    &plan.target,
                    &requests,
                    &templating,
                    streams,
                    plan.connect_timeout,
                    plan.request_timeout,
                ),
                quic: quic::Config::for_plan(plan)?,
                server: addr,
                server_name: plan.target.host.clone(),
                kept_checks,
            }))
        }
    };
    let tls = if plan.target.is_tls() && !session.is_udp() {
        Some((tls::client_config(&plan.tls, session.alpn())?, tls::server_name(&plan.target.host)?))
    } else {
        None
    };
    // Decided by whoever built the plan (`Plan::threads_for`) and checked by `validate`.
    let threads = plan.threads;
    // The first thread takes the largest share of the connections.
    fd_limit::ensure_room_for(plan.connections.div_ceil(threads) as u64)?;
    // Read for QUIC runs only: a TCP run has no use for it, nor reason to fail over it.
    let udp_buffer = if session.is_udp() { udp_buffer_size(std::env::var_os(UDP_BUFFER_VAR))? } else { GRO_BUF_SIZE };
    let shared = Arc::new(Shared {
        addr,
        sockaddr: driver::encode_sockaddr(&addr),
        requests: requests
            .iter()
            .map(|(path, spec)| h1::encode_request(&plan.target, path, spec, !plan.keepalive))
            .collect(),
        names,
        checks: plan.requests.mix().filter(|mix| mix.requests.iter().any(|r| !r.checks.is_empty())).map(|mix| {
            let indices = hops.extended(mix.check_indices());
            mixed.iter().zip(indices).map(|(r, indices)| judges(&r.checks, indices)).collect()
        }),
        heads: requests.iter().map(|(_, spec)| spec.is_head()).collect(),
        flows: plan.requests.mix().map(|mix| hops.extended(mix.flow_steps()).into()).unwrap_or_default(),
        thinks: per_request(&mixed, |r| r.think.is_some(), |r| r.think),
        extracts: per_request(&mixed, |r| !r.extract.is_empty(), |r| r.extract.len() as u8),
        cookies: cookie_urls,
        redirects,
        scenarios: plan.requests.scenarios().map(|s| s.into()),
        steps: plan.requests.mix().map(|mix| hops.extended(mix.scenario_steps()).into()).unwrap_or_default(),
        feeder_uses: feeder_uses.into(),
        tls,
        connect_timeout: plan.connect_timeout,
        keepalive: plan.keepalive,
        max_hold: plan.max_hold,
        udp_buffer,
        session,
        sources: driver::SourceAddrs::new(&plan.source_addrs, threads),
        engine: ring.engine,
    });

    let (tx, rx) = mpsc::channel::<ThreadMsg>();
    let mut handles = Vec::with_capacity(threads);
    for (index, part) in plan.split(threads).into_iter().enumerate() {
        let thread_plan = ThreadPlan {
            index,
            connections: part.connections,
            budget: match part.stop {
                Stop::Requests(n) => Some(n),
                Stop::Duration(_) => None,
            },
            duration: match part.stop {
                Stop::Duration(d) => Some(d),
                Stop::Requests(_) => None,
            },
            load: part.load,
            warm_up_ticks: plan.warm_up_seconds(),
            // A fleet's split makes worker i's connections the whole's i-th, every W-th.
            worker: plan.load.indices().first,
            seed: part.requests.mix().and_then(|mix| mix.order.seed()),
            feeders: part.feeders,
            gate: control.gate.clone(),
            stop_flag: control.stop_flag.clone(),
            tx: tx.clone(),
        };
        let shared = shared.clone();
        let spawned = std::thread::Builder::new()
            .name(format!("volley-engine-{index}"))
            .spawn(move || driver::run_thread(shared, thread_plan));
        match spawned {
            Ok(handle) => handles.push(handle),
            Err(source) => {
                // The threads already running hold connections and buffers; left alone (a gated
                // run's never opens) they would keep them, and count against the same task limit
                // that failed here, for as long as the process lives.
                control.stop();
                drop(tx);
                for handle in handles {
                    let _ = handle.join();
                }
                return Err(EngineError::Spawn { thread: index + 1, threads, source });
            }
        }
    }
    drop(tx);

    let mut collector = Collector::new(threads, plan.warm_up_seconds());
    // Until every thread's last word, or every thread gone (one that failed to set up says none).
    while !collector.all_done() {
        let Ok(msg) = rx.recv() else { break };
        collector.take(msg, on_progress);
    }
    let duration = match collector.start {
        Some(start) => collector.end.unwrap_or_else(Instant::now).saturating_duration_since(start),
        None => Duration::ZERO,
    };
    if collector.all_done() {
        // Each thread is closing its connections now; its outcome is in its last word.
        control.closing.lock().unwrap_or_else(|e| e.into_inner()).extend(handles);
        if let Some(failure) = collector.failure {
            return Err(EngineError::Thread(failure));
        }
    } else {
        for handle in handles {
            match handle.join() {
                Ok(Ok(())) => {}
                Ok(Err(e)) => return Err(EngineError::Thread(e.to_string())),
                Err(_) => return Err(EngineError::Thread("an engine thread panicked".into())),
            }
        }
    }
    Ok(RunResult {
        warm_up: plan.warm_up.map(|_| collector.warm_up),
        stats: collector.total,
        duration,
        threads,
        connections: plan.connections,
        interrupted: control.is_stopped(),
        ring,
        client_cpu: collector.cpu,
        error_samples: collector.error_samples,
        stream_limit: collector.stream_limit,
    })
}

/// Merges thread messages: per-second deltas into snapshots, everything into the total.
struct Collector {
    /// Per thread: the last tick it reported, and whether it is ready, started, done.
    last_tick: Vec<u32>,
    ready: Vec<Option<(u64, u64)>>,
    started: Vec<Option<Instant>>,
    done: Vec<bool>,
    ready_told: bool,
    started_told: bool,
    /// When the first thread started: the run's duration counts from here.
    start: Option<Instant>,
    /// Per tick: the merged delta of the threads that reported it.
    pending: std::collections::BTreeMap<u32, Stats>,
    total: Stats,
    /// Ticks up to this one are the warm-up (0: none); what they counted is kept here, not in
    /// `total`.
    warm_up_ticks: u32,
    warm_up: Stats,
    error_samples: Vec<(ErrorKind, String)>,
    end: Option<Instant>,
    cpu: Duration,
    stream_limit: Option<u32>,
    /// The first error a thread's load ended with.
    failure: Option<String>,
}

impl Collector {
    fn new(threads: usize, warm_up_ticks: u32) -> Self {
        Collector {
            last_tick: vec![0; threads],
            ready: vec![None; threads],
            started: vec![None; threads],
            done: vec![false; threads],
            ready_told: false,
            started_told: false,
            start: None,
            pending: Default::default(),
            total: Stats::new(),
            warm_up_ticks,
            warm_up: Stats::new(),
            error_samples: Vec::new(),
            end: None,
            cpu: Duration::ZERO,
            stream_limit: None,
            failure: None,
        }
    }

    fn all_done(&self) -> bool {
        self.done.iter().all(|d| *d)
    }

    fn take(&mut self, msg: ThreadMsg, on_progress: &mut dyn FnMut(Progress)) {
        match msg {
            ThreadMsg::Ready { thread, connected, failed } => self.ready[thread] = Some((connected, failed)),
            ThreadMsg::Started { thread, at } => {
                self.started[thread] = Some(at);
                self.start = Some(self.start.map_or(at, |s| s.min(at)));
            }
            ThreadMsg::Interval { thread, tick, delta } => {
                if tick <= self.warm_up_ticks {
                    self.warm_up.merge(&delta);
                } else {
                    self.total.merge(&delta);
                }
                self.last_tick[thread] = tick;
                // The first thread's delta becomes the second's: no fresh histograms to fill.
                match self.pending.entry(tick) {
                    Entry::Vacant(v) => {
                        v.insert(delta);
                    }
                    Entry::Occupied(mut o) => o.get_mut().merge(&delta),
                }
            }
            ThreadMsg::Done(done) => {
                let ThreadDone { thread, rest, error_samples, ended, cpu, stream_limit, failure } = done;
                self.failure = self.failure.take().or(failure);
                // A thread that ended before its warm-up did (stopped) counted the rest in it.
                if self.last_tick[thread] < self.warm_up_ticks {
                    self.warm_up.merge(&rest);
                } else {
                    self.total.merge(&rest);
                }
                self.stream_limit = match (self.stream_limit, stream_limit) {
                    (Some(a), Some(b)) => Some(a.min(b)),
                    (a, b) => a.or(b),
                };
                self.cpu += cpu;
                self.done[thread] = true;
                self.end = Some(self.end.map_or(ended, |e| e.max(ended)));
                for (kind, text) in error_samples {
                    if !self.error_samples.iter().any(|(k, _)| *k == kind) {
                        self.error_samples.push((kind, text));
                    }
                }
            }
        }
        if !self.ready_told && (0..self.done.len()).all(|t| self.done[t] || self.ready[t].is_some()) {
            self.ready_told = true;
            let (connected, failed) = self.ready.iter().flatten().fold((0, 0), |(c, f), (tc, tf)| (c + tc, f + tf));
            on_progress(Progress::Ready { connected, failed });
        }
        // The load is on once every thread that will start has started.
        if !self.started_told
            && (0..self.done.len()).all(|t| self.done[t] || self.started[t].is_some())
            && let Some(at) = self.started.iter().flatten().max().copied()
        {
            self.started_told = true;
            on_progress(Progress::Started { at });
        }
        // A tick is complete once every thread has reported it or is done (a thread's Done
        // comes after all of its ticks, so a done thread will not report it later).
        while let Some(entry) = self.pending.first_entry() {
            let tick = *entry.key();
            if (0..self.done.len()).any(|t| !self.done[t] && self.last_tick[t] < tick) {
                break;
            }
            let delta = entry.remove();
            let warm_up = tick <= self.warm_up_ticks;
            on_progress(Progress::Interval(Snapshot { elapsed: Duration::from_secs(u64::from(tick)), delta, warm_up }));
        }
    }
}

/// Sets the size of each UDP receive buffer, in bytes, below the default of a whole GRO batch
/// ([`GRO_BUF_SIZE`]). With the default no datagram is ever cut short (it holds the largest
/// UDP carries), so the MSG_TRUNC count could never be seen working; a smaller buffer turns GRO
/// off and lets a test have a real peer's oversized datagram cut short by the kernel. It also
/// saves memory where QUIC's datagrams (at most 1472 bytes from a compliant peer) are all
/// that arrives. Read once per run, by whichever process runs the engine (a worker's own).
pub const UDP_BUFFER_VAR: &str = "VOLLEY_UDP_RECV_BUFFER";

fn udp_buffer_size(value: Option<std::ffi::OsString>) -> Result<usize, EngineError> {
    let Some(value) = value else { return Ok(GRO_BUF_SIZE) };
    value
        .to_str()
        .and_then(|v| v.trim().parse::<usize>().ok())
        .filter(|size| (MIN_BUF_SIZE..=GRO_BUF_SIZE).contains(size))
        .ok_or_else(|| EngineError::UdpBuffer {
            var: UDP_BUFFER_VAR,
            value: value.to_string_lossy().chars().take(40).collect(),
            min: MIN_BUF_SIZE,
            max: GRO_BUF_SIZE,
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_udp_receive_buffer_is_a_whole_gro_batch_unless_a_size_within_bounds_is_given() {
        assert_eq!(udp_buffer_size(None).unwrap(), GRO_BUF_SIZE);
        assert_eq!(udp_buffer_size(Some("4096".into())).unwrap(), 4096);
        assert_eq!(udp_buffer_size(Some(MIN_BUF_SIZE.to_string().into())).unwrap(), MIN_BUF_SIZE);
        for bad in ["", "lots", "-1", "2047", "65601", "99999999999999999999999"] {
            let err = udp_buffer_size(Some(bad.into())).expect_err(bad).to_string();
            assert!(err.starts_with(&format!("{UDP_BUFFER_VAR}='{bad}'")) && err.contains("2048 to 65600"), "{err}");
        }
    }
}
