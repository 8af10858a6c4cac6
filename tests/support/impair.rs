//! A UDP impairment proxy for the HTTP/3 tests, since tc netem is not available here: it listens
//! on a loopback UDP port, gives each client (each source address: volley opens a connected
//! socket per connection) a socket of its own towards the server, and forwards datagrams both
//! ways, dropping a seeded-random share of them in each direction and reordering some (one is
//! held back and sent right after the next one of its direction). It counts what it forwarded,
//! dropped and reordered, so a test can check that the impairment really happened, and the
//! largest datagram each way. It can also send clients datagrams of its own, larger than any
//! QUIC packet ([`Oversize`]), counted as injected.
//!
//! Each direction of each client has its own random sequence drawn from the seed, so a run is
//! the same impairment every time as far as the datagrams' order is (threads decide the rest).

use std::collections::HashMap;
use std::io::ErrorKind;
use std::net::{SocketAddr, UdpSocket};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// What the proxy does to datagrams, each direction alike.
#[derive(Clone, Copy, Debug)]
pub struct Impairment {
    pub seed: u64,
    /// Datagrams dropped, per thousand.
    pub drop_per_mille: u32,
    /// Datagrams held back and sent after the next one, per thousand.
    pub reorder_per_mille: u32,
    /// Datagrams of the proxy's own, larger than any QUIC packet, sent to clients.
    pub oversize: Option<Oversize>,
}

/// Before every `every`th datagram from the server to a client (the first included), a
/// datagram of `len` zero bytes to that client, at most `most` per client. It goes ahead of a
/// datagram the client still needs, so a client reads it as long as it reads that one; zeros
/// are no QUIC packet (the fixed bit is clear), which QUIC drops.
#[derive(Clone, Copy, Debug)]
pub struct Oversize {
    pub every: u64,
    pub len: usize,
    pub most: u64,
}

impl Default for Impairment {
    /// 2% dropped and 2% reordered each way.
    fn default() -> Self {
        Impairment { seed: 0x5eed_1234, drop_per_mille: 20, reorder_per_mille: 20, oversize: None }
    }
}

/// A held datagram with no successor this long is sent anyway (late, not reordered), so that
/// the last datagram of a burst is not turned into a loss. Longer than a QUIC probe timeout on
/// loopback (about 26 ms: mostly the peer's 25 ms ack delay), so that one request at a time
/// (`-p 1`, nothing else in flight) is reordered too: its probe overtakes it.
const HOLD_LIMIT: Duration = Duration::from_millis(50);
/// How often idle threads look at the stop flag.
const IDLE_WAKE: Duration = Duration::from_millis(20);

/// What happened to datagrams going one way.
#[derive(Default, Debug)]
pub struct LaneCounts {
    pub forwarded: AtomicU64,
    pub dropped: AtomicU64,
    pub reordered: AtomicU64,
    /// The largest datagram that came this way, in bytes of UDP payload.
    pub largest: AtomicU64,
    /// The proxy's own datagrams sent this way ([`Oversize`]).
    pub injected: AtomicU64,
}

/// Both directions' counts, and the clients seen.
#[derive(Default, Debug)]
pub struct ImpairCounts {
    pub to_server: LaneCounts,
    pub to_client: LaneCounts,
    pub clients: AtomicU64,
}

impl LaneCounts {
    pub fn forwarded(&self) -> u64 {
        self.forwarded.load(Ordering::SeqCst)
    }
    pub fn dropped(&self) -> u64 {
        self.dropped.load(Ordering::SeqCst)
    }
    pub fn reordered(&self) -> u64 {
        self.reordered.load(Ordering::SeqCst)
    }
    pub fn largest(&self) -> u64 {
        self.largest.load(Ordering::SeqCst)
    }
    pub fn injected(&self) -> u64 {
        self.injected.load(Ordering::SeqCst)
    }
}

/// A running proxy; dropping it stops it.
pub struct ImpairProxy {
    addr: SocketAddr,
    counts: Arc<ImpairCounts>,
    stop: Arc<AtomicBool>,
    threads: Arc<Mutex<Vec<JoinHandle<()>>>>,
}

impl ImpairProxy {
    /// Starts forwarding from a fresh 127.0.0.1 port to `server`.
    pub fn start(server: SocketAddr, impairment: Impairment) -> ImpairProxy {
        let front = UdpSocket::bind("127.0.0.1:0").expect("a UDP port on loopback");
        let addr = front.local_addr().expect("bound address");
        let counts = Arc::new(ImpairCounts::default());
        let stop = Arc::new(AtomicBool::new(false));
        let threads = Arc::new(Mutex::new(Vec::new()));
        let front = Front {
            socket: Arc::new(front),
            server,
            impairment,
            counts: counts.clone(),
            stop: stop.clone(),
            threads: threads.clone(),
            clients: HashMap::new(),
        };
        let handle = std::thread::spawn(move || front.run());
        threads.lock().unwrap().push(handle);
        ImpairProxy { addr, counts, stop, threads }
    }

    /// Where clients send to.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// `https://127.0.0.1:PORT/`: the server's URL through the proxy.
    pub fn url(&self) -> String {
        format!("https://{}/", self.addr)
    }

    pub fn counts(&self) -> &ImpairCounts {
        &self.counts
    }
}

impl Drop for ImpairProxy {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        // Threads only start others while the front runs; it is joined first.
        loop {
            let next = self.threads.lock().unwrap().pop();
            let Some(thread) = next else { break };
            let _ = thread.join();
        }
    }
}

/// One direction of one client: its random sequence and the datagram it holds back.
struct Lane {
    rng: u64,
    impairment: Impairment,
    held: Option<(Vec<u8>, Instant)>,
}

impl Lane {
    fn new(impairment: Impairment, stream: u64) -> Self {
        // Never zero: xorshift would stay there.
        let rng = (impairment.seed ^ stream.wrapping_mul(0x9e37_79b9_7f4a_7c15)) | 1;
        Lane { rng, impairment, held: None }
    }

    /// xorshift64*: deterministic from the seed.
    fn per_mille(&mut self) -> u32 {
        self.rng ^= self.rng >> 12;
        self.rng ^= self.rng << 25;
        self.rng ^= self.rng >> 27;
        (self.rng.wrapping_mul(0x2545_f491_4f6c_dd1d) % 1000) as u32
    }

    /// One datagram on its way: dropped, held back, or sent (with the held one after it).
    fn pass(&mut self, datagram: &[u8], counts: &LaneCounts, send: impl Fn(&[u8])) {
        counts.largest.fetch_max(datagram.len() as u64, Ordering::SeqCst);
        let draw = self.per_mille();
        if draw < self.impairment.drop_per_mille {
            counts.dropped.fetch_add(1, Ordering::SeqCst);
            return;
        }
        if let Some((held, _)) = self.held.take() {
            send(datagram);
            send(&held);
            counts.forwarded.fetch_add(2, Ordering::SeqCst);
            counts.reordered.fetch_add(1, Ordering::SeqCst);
            return;
        }
        if self.per_mille() < self.impairment.reorder_per_mille {
            self.held = Some((datagram.to_vec(), Instant::now()));
            return;
        }
        send(datagram);
        counts.forwarded.fetch_add(1, Ordering::SeqCst);
    }

    /// Sends a held datagram that waited [`HOLD_LIMIT`] for a successor.
    fn release_stale(&mut self, counts: &LaneCounts, send: impl Fn(&[u8])) {
        if self.held.as_ref().is_some_and(|(_, at)| at.elapsed() >= HOLD_LIMIT)
            && let Some((held, _)) = self.held.take()
        {
            send(&held);
            counts.forwarded.fetch_add(1, Ordering::SeqCst);
        }
    }

    /// How long the next receive may wait.
    fn wait(&self) -> Duration {
        if self.held.is_some() { Duration::from_millis(1) } else { IDLE_WAKE }
    }
}

/// The clients' side: one socket, every client's datagrams to the server.
struct Front {
    socket: Arc<UdpSocket>,
    server: SocketAddr,
    impairment: Impairment,
    counts: Arc<ImpairCounts>,
    stop: Arc<AtomicBool>,
    threads: Arc<Mutex<Vec<JoinHandle<()>>>>,
    clients: HashMap<SocketAddr, (Arc<UdpSocket>, Lane)>,
}

impl Front {
    fn run(mut self) {
        let mut buf = vec![0u8; 65_536];
        while !self.stop.load(Ordering::SeqCst) {
            let wait = self.clients.values().map(|(_, lane)| lane.wait()).min().unwrap_or(IDLE_WAKE);
            self.socket.set_read_timeout(Some(wait)).expect("a read timeout");
            match self.socket.recv_from(&mut buf) {
                Ok((n, client)) => self.forward_to_server(client, &buf[..n]),
                Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {}
                // An ICMP error for an earlier datagram to a client that went away.
                Err(_) => {}
            }
            let counts = &self.counts.to_server;
            for (back, lane) in self.clients.values_mut() {
                lane.release_stale(counts, |d| {
                    let _ = back.send(d);
                });
            }
        }
    }

    fn forward_to_server(&mut self, client: SocketAddr, datagram: &[u8]) {
        if !self.clients.contains_key(&client) {
            let index = self.counts.clients.fetch_add(1, Ordering::SeqCst);
            let back = UdpSocket::bind("127.0.0.1:0").expect("a UDP port towards the server");
            back.connect(self.server).expect("connect towards the server");
            let back = Arc::new(back);
            let returning = Back {
                socket: back.clone(),
                front: self.socket.clone(),
                client,
                lane: Lane::new(self.impairment, index * 2 + 1),
                oversize: self.impairment.oversize,
                counts: self.counts.clone(),
                stop: self.stop.clone(),
            };
            self.threads.lock().unwrap().push(std::thread::spawn(move || returning.run()));
            self.clients.insert(client, (back, Lane::new(self.impairment, index * 2)));
        }
        let Some((back, lane)) = self.clients.get_mut(&client) else { return };
        lane.pass(datagram, &self.counts.to_server, |d| {
            let _ = back.send(d);
        });
    }
}

/// One client's socket towards the server, and the server's datagrams back to that client.
struct Back {
    socket: Arc<UdpSocket>,
    front: Arc<UdpSocket>,
    client: SocketAddr,
    lane: Lane,
    oversize: Option<Oversize>,
    counts: Arc<ImpairCounts>,
    stop: Arc<AtomicBool>,
}

impl Back {
    fn run(mut self) {
        let mut buf = vec![0u8; 65_536];
        let (front, client, counts) = (self.front.clone(), self.client, self.counts.clone());
        let send = |d: &[u8]| {
            let _ = front.send_to(d, client);
        };
        let (mut seen, mut injected) = (0u64, 0u64);
        let zeros = vec![0u8; self.oversize.map_or(0, |o| o.len)];
        while !self.stop.load(Ordering::SeqCst) {
            self.socket.set_read_timeout(Some(self.lane.wait())).expect("a read timeout");
            match self.socket.recv(&mut buf) {
                Ok(n) => {
                    if let Some(o) = self.oversize
                        && seen.is_multiple_of(o.every)
                        && injected < o.most
                        && front.send_to(&zeros, client).is_ok()
                    {
                        injected += 1;
                        counts.to_client.injected.fetch_add(1, Ordering::SeqCst);
                    }
                    seen += 1;
                    self.lane.pass(&buf[..n], &counts.to_client, send)
                }
                Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {}
                Err(_) => {}
            }
            self.lane.release_stale(&counts.to_client, send);
        }
    }
}
