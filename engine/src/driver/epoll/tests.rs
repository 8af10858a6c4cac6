//! The epoll I/O on real loopback TCP sockets: it must post what io_uring posts for a connect
//! (and its timeout), a receive to the peer's close, a send larger than the socket takes at
//! once, and a close with operations in flight. (UDP runs through both I/Os in `udp/tests.rs`.)

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener};
use std::time::{Duration, Instant};

use io_uring::cqueue;

use super::super::ops::{Io, SocketKind};
use super::super::socket::{encode_sockaddr, new_socket};
use super::super::uring::{Completion, Op, untoken};
use super::Epoll;

/// Completions on slot 0 until `want` of them are for `op`, within two seconds; all of them.
fn wait_for(io: &mut Epoll, op: Op, want: usize) -> Vec<Completion> {
    let mut got: Vec<Completion> = Vec::new();
    let mut batch = Vec::new();
    let end = Instant::now() + Duration::from_secs(2);
    while got.iter().filter(|c| untoken(c.0).is_some_and(|(o, _, _)| o == op)).count() < want {
        let now = Instant::now();
        assert!(now < end, "not {want} of {op:?} completed: {got:?}");
        io.wait(now, end).unwrap();
        io.completions(&mut batch);
        got.extend(&batch);
    }
    got
}

fn of(got: &[Completion], op: Op) -> Vec<(i32, u32)> {
    got.iter().filter(|c| untoken(c.0).is_some_and(|(o, _, _)| o == op)).map(|c| (c.1, c.2)).collect()
}

/// A socket of volley's kind, adopted into `slot` and connecting to `to`.
fn connect(io: &mut Epoll, slot: usize, to: SocketAddr) {
    let fd = new_socket(&to, false).unwrap();
    io.adopt_socket(slot, fd, SocketKind::Stream).unwrap();
    let (addr, len) = encode_sockaddr(&to);
    // SAFETY: `addr` lives through the call, which is all epoll needs.
    unsafe { io.connect(slot, 7, (&raw const addr).cast(), len) }.unwrap();
}

#[test]
fn a_connect_posts_itself_and_its_timeout_and_bytes_then_a_close_end_the_receive() {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let mut io = Epoll::new(2, Duration::from_secs(1), 4, 64).unwrap();
    connect(&mut io, 0, listener.local_addr().unwrap());
    let got = wait_for(&mut io, Op::ConnectTimeout, 1);
    assert_eq!(of(&got, Op::Connect), [(0, 0)], "connected");
    assert_eq!(untoken(got[0].0), Some((Op::Connect, 0, 7)), "with the slot's generation");
    let (mut server, _) = listener.accept().unwrap();
    io.recv_multishot(0, 7).unwrap();
    // 100 bytes into buffers of 64: two completions, each naming its buffer, with MORE.
    server.write_all(&[5u8; 100]).unwrap();
    let got = wait_for(&mut io, Op::Recv, 2);
    let recvs = of(&got, Op::Recv);
    assert_eq!(recvs.iter().map(|r| r.0).collect::<Vec<_>>(), [64, 36]);
    for &(res, flags) in &recvs {
        let bid = cqueue::buffer_select(flags).expect("a buffer");
        assert!(cqueue::more(flags));
        assert!(io.bytes(bid, res as usize).iter().all(|&b| b == 5));
        io.recycle(bid);
    }
    drop(server);
    let got = wait_for(&mut io, Op::Recv, 1);
    assert_eq!(of(&got, Op::Recv), [(0, 0)], "the close: no buffer, no MORE");
    io.cancel_and_close(0, 7).unwrap();
    let got = wait_for(&mut io, Op::Close, 1);
    assert_eq!(of(&got, Op::Recv), [], "nothing left to cancel");
}

#[test]
fn a_connect_nobody_answers_times_out_as_a_cancelled_connect() {
    // A non-routable address (TEST-NET-1) never answers; a connect there stays in progress.
    let mut io = Epoll::new(1, Duration::from_millis(100), 4, 64).unwrap();
    let started = Instant::now();
    connect(&mut io, 0, "192.0.2.1:80".parse().unwrap());
    let got = wait_for(&mut io, Op::ConnectTimeout, 1);
    let connect = of(&got, Op::Connect);
    // Without a route the kernel may refuse at once instead; either way one result.
    assert_eq!(connect.len(), 1);
    if connect[0].0 == -libc::ECANCELED {
        assert!(started.elapsed() >= Duration::from_millis(100), "not before the timeout");
    }
    io.cancel_and_close(0, 7).unwrap();
    let got = wait_for(&mut io, Op::Close, 1);
    assert_eq!(of(&got, Op::Connect), [], "the connect completed once only");
}

#[test]
fn a_send_larger_than_the_socket_takes_completes_in_parts_and_a_close_cancels_what_waits() {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let mut io = Epoll::new(1, Duration::from_secs(1), 4, 64).unwrap();
    connect(&mut io, 0, listener.local_addr().unwrap());
    wait_for(&mut io, Op::ConnectTimeout, 1);
    let (mut server, _) = listener.accept().unwrap();
    let big = vec![9u8; 16 << 20];
    // SAFETY: `big` outlives every send (the close below ends them).
    unsafe { io.send(0, 7, &big) }.unwrap();
    let first = of(&wait_for(&mut io, Op::Send, 1), Op::Send)[0].0;
    assert!(first > 0 && (first as usize) < big.len(), "a part: {first}");
    // The rest waits for room, which only the server's reading makes.
    // SAFETY: as above.
    unsafe { io.send(0, 7, &big[first as usize..]) }.unwrap();
    let mut read = vec![0u8; 1 << 20];
    server.read_exact(&mut read).unwrap();
    let second = of(&wait_for(&mut io, Op::Send, 1), Op::Send)[0].0;
    assert!(second > 0, "room made, the rest went on: {second}");
    // SAFETY: as above.
    unsafe { io.send(0, 7, &big[(first + second) as usize..]) }.unwrap();
    io.cancel_and_close(0, 7).unwrap();
    let got = wait_for(&mut io, Op::Close, 1);
    let sends = of(&got, Op::Send);
    assert!(sends.is_empty() || sends == [(-libc::ECANCELED, 0)], "{sends:?}");
}

#[test]
fn a_quiet_send_posts_nothing_when_it_goes_whole() {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let mut io = Epoll::new(1, Duration::from_secs(1), 4, 64).unwrap();
    connect(&mut io, 0, listener.local_addr().unwrap());
    wait_for(&mut io, Op::ConnectTimeout, 1);
    let (mut server, _) = listener.accept().unwrap();
    // SAFETY: a static.
    unsafe { io.send_quiet(0, 7, b"GET / HTTP/1.1\r\n\r\n") }.unwrap();
    let mut got = [0u8; 18];
    server.read_exact(&mut got).unwrap();
    assert_eq!(&got, b"GET / HTTP/1.1\r\n\r\n");
    io.cancel_and_close(0, 7).unwrap();
    let got = wait_for(&mut io, Op::Close, 1);
    assert_eq!(of(&got, Op::SendQuiet), [], "success posts nothing");
}

#[test]
fn bytes_and_the_close_in_one_event_still_end_the_receive() {
    // A short read usually means the socket is empty; not when the peer's close came with the
    // bytes, which no further event announces (a response cut short, then the close).
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let mut io = Epoll::new(1, Duration::from_secs(1), 4, 64).unwrap();
    connect(&mut io, 0, listener.local_addr().unwrap());
    wait_for(&mut io, Op::ConnectTimeout, 1);
    let (mut server, _) = listener.accept().unwrap();
    io.recv_multishot(0, 7).unwrap();
    server.write_all(b"0123456789").unwrap();
    drop(server);
    // Both are in the socket before the wait looks.
    std::thread::sleep(Duration::from_millis(50));
    let got = wait_for(&mut io, Op::Recv, 2);
    let recvs = of(&got, Op::Recv);
    assert_eq!(recvs[0].0, 10, "{recvs:?}");
    assert_eq!(recvs[1], (0, 0), "then the close, with no buffer and no MORE: {recvs:?}");
    io.recycle(cqueue::buffer_select(recvs[0].1).unwrap());
    io.cancel_and_close(0, 7).unwrap();
}

/// `slots` sockets connected to `listener`, each receiving; the server's ends, in slot order.
fn receiving(io: &mut Epoll, listener: &TcpListener, slots: usize) -> Vec<std::net::TcpStream> {
    let to = listener.local_addr().unwrap();
    let mut servers = Vec::new();
    for slot in 0..slots {
        connect(io, slot, to);
        servers.push(listener.accept().unwrap().0);
    }
    let mut connected = 0;
    let mut batch = Vec::new();
    let end = Instant::now() + Duration::from_secs(2);
    while connected < slots {
        let now = Instant::now();
        assert!(now < end, "{connected} of {slots} connected");
        io.wait(now, end).unwrap();
        io.completions(&mut batch);
        connected += of(&batch, Op::Connect).len();
    }
    for slot in 0..slots {
        io.recv_multishot(slot, 7).unwrap();
    }
    servers
}

#[test]
fn a_hold_returns_once_its_batch_is_ready_and_at_its_limit_when_the_batch_never_comes() {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let mut io = Epoll::new(4, Duration::from_secs(1), 16, 64).unwrap();
    let mut servers = receiving(&mut io, &listener, 4);
    let mut batch = Vec::new();
    io.completions(&mut batch);

    // One answers at once, the other three 20 ms later: the hold gathers all four, long
    // before its limit, though the pace of the first said the rest would come sooner.
    servers[0].write_all(b"a").unwrap();
    let start = Instant::now();
    while io.ready() == 0 {
        io.wait(Instant::now(), start + Duration::from_secs(2)).unwrap();
        assert!(start.elapsed() < Duration::from_secs(2), "the first answer never came");
    }
    let late: Vec<_> = servers.drain(1..).collect();
    let writer = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(20));
        for mut s in &late {
            s.write_all(b"b").unwrap();
        }
        late
    });
    let held = Instant::now();
    io.hold(4, Duration::from_secs(2)).unwrap();
    let took = held.elapsed();
    // Kept open to the end: their closes would be receives too.
    let _late = writer.join().unwrap();
    io.completions(&mut batch);
    assert_eq!(of(&batch, Op::Recv).len(), 4, "{batch:?}");
    assert!(took >= Duration::from_millis(15) && took < Duration::from_secs(1), "held {took:?}");
    for &(_, flags) in &of(&batch, Op::Recv) {
        io.recycle(cqueue::buffer_select(flags).expect("a buffer"));
    }

    // One answer of the four asked for: the hold ends at its limit with that one.
    servers[0].write_all(b"c").unwrap();
    let start = Instant::now();
    while io.ready() == 0 {
        io.wait(Instant::now(), start + Duration::from_secs(2)).unwrap();
        assert!(start.elapsed() < Duration::from_secs(2), "the answer never came");
    }
    let held = Instant::now();
    io.hold(4, Duration::from_millis(30)).unwrap();
    let took = held.elapsed();
    io.completions(&mut batch);
    assert_eq!(of(&batch, Op::Recv).len(), 1, "{batch:?}");
    assert!(took >= Duration::from_millis(30) && took < Duration::from_secs(1), "held {took:?}");
}

/// Writes one byte to `first` now and to each of `rest` `after` from now; returns them.
fn answer(
    first: &mut std::net::TcpStream,
    rest: Vec<std::net::TcpStream>,
    after: Duration,
) -> std::thread::JoinHandle<Vec<std::net::TcpStream>> {
    first.write_all(b"a").unwrap();
    std::thread::spawn(move || {
        std::thread::sleep(after);
        for mut s in &rest {
            s.write_all(b"b").unwrap();
        }
        rest
    })
}

/// Waits for the first completion, holds for `batch` up to `limit`; how long the hold took and
/// how many receives it gathered.
fn first_then_hold(io: &mut Epoll, batch: usize, limit: Duration) -> (Duration, usize) {
    let start = Instant::now();
    while io.ready() == 0 {
        io.wait(Instant::now(), start + Duration::from_secs(2)).unwrap();
        assert!(start.elapsed() < Duration::from_secs(2), "the first answer never came");
    }
    let held = Instant::now();
    io.hold(batch, limit).unwrap();
    let took = held.elapsed();
    let mut got = Vec::new();
    io.completions(&mut got);
    let recvs = of(&got, Op::Recv);
    for &(_, flags) in &recvs {
        io.recycle(cqueue::buffer_select(flags).expect("a buffer"));
    }
    (took, recvs.len())
}

#[test]
fn after_a_hold_that_ran_out_the_next_sleeps_through_its_limit_and_then_paces_again() {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let mut io = Epoll::new(4, Duration::from_secs(1), 16, 64).unwrap();
    let mut servers = receiving(&mut io, &listener, 4);
    let mut batch = Vec::new();
    io.completions(&mut batch);

    // Two of four answer: the hold runs out.
    let second = servers.remove(1);
    let late = answer(&mut servers[0], vec![second], Duration::ZERO);
    let (took, got) = first_then_hold(&mut io, 4, Duration::from_millis(30));
    servers.extend(late.join().unwrap());
    assert_eq!(got, 2);
    assert!(took >= Duration::from_millis(25), "held {took:?}");

    // All four answer within 5 ms, yet this hold sleeps through its 80 ms: one wake-up, not
    // one per guess of the pace.
    let (took, got) = all_answer_then_hold(&mut io, &mut servers, Duration::from_millis(80));
    assert_eq!(got, 4);
    assert!(took >= Duration::from_millis(75), "held {took:?}");

    // That hold's batch came: this one ends when its batch is in, long before its limit.
    let (took, got) = all_answer_then_hold(&mut io, &mut servers, Duration::from_secs(1));
    assert_eq!(got, 4);
    assert!(took < Duration::from_millis(500), "held {took:?}");
}

/// Every one of `servers` answers, the first at once and the rest 5 ms later, while `io` holds
/// for all of them up to `limit`: how long the hold took and how many answers it had.
fn all_answer_then_hold(io: &mut Epoll, servers: &mut Vec<std::net::TcpStream>, limit: Duration) -> (Duration, usize) {
    let batch = servers.len();
    let (mut first, rest) = (servers.remove(0), std::mem::take(servers));
    let late = answer(&mut first, rest, Duration::from_millis(5));
    let held = first_then_hold(io, batch, limit);
    servers.push(first);
    servers.extend(late.join().unwrap());
    held
}
