//! UDP through each I/O (a real ring, and epoll) on real loopback sockets: what leaves a GSO
//! send, what a GRO receive hands over, a datagram cut short, a kernel refusing GSO, and a
//! closed port. Every test runs on both, with the same assertions: epoll must post what
//! io_uring posts.

use std::mem::ManuallyDrop;
use std::net::{SocketAddr, UdpSocket};
use std::os::fd::{AsRawFd, FromRawFd};
use std::time::{Duration, Instant};

use io_uring::cqueue;

use super::super::epoll::Epoll;
use super::super::ops::{Io, RingIo, SocketKind};
use super::super::recvmsg::{BUF_OVERHEAD, RecvMsg};
use super::super::uring::{Completion, Op, untoken};
use super::{GRO_BUF_SIZE, UdpSend, new_connected_socket, open_connected, set_int};

const SLOTS: u32 = 4;

/// Runs `$body` (a function generic over `Io`) on io_uring and then on epoll, each with
/// `$count` receive buffers of `$size` bytes.
macro_rules! on_both {
    ($count:expr, $size:expr, $body:ident) => {{
        let mut ring = RingIo::ring(4).unwrap();
        $body(&mut RingIo::new(&mut ring, SLOTS, Duration::from_secs(1), $count, $size).unwrap());
        $body(&mut Epoll::new(SLOTS as usize, Duration::from_secs(1), $count, $size).unwrap());
    }};
}

/// A loopback socket for the other end, which answers within a second or fails the test.
fn peer() -> UdpSocket {
    let socket = UdpSocket::bind("127.0.0.1:0").unwrap();
    socket.set_read_timeout(Some(Duration::from_secs(1))).unwrap();
    socket
}

/// `count` datagrams of `size` bytes, each filled with its own index, and a shorter `tail`.
fn segments(count: usize, size: usize, tail: usize) -> Vec<u8> {
    let mut bytes = Vec::new();
    for i in 0..count {
        bytes.extend(std::iter::repeat_n(i as u8, size));
    }
    bytes.extend(std::iter::repeat_n(0xee, tail));
    bytes
}

/// Completions until `want` of them are for `op` on `slot`, within a second.
fn wait_for(io: &mut impl Io, op: Op, slot: usize, want: usize) -> Vec<Completion> {
    wait_for_all(io, slot, &[(op, want)])
}

/// Completions on `slot` until each `(op, count)` is met, within a second; all of them, in order.
fn wait_for_all(io: &mut impl Io, slot: usize, want: &[(Op, usize)]) -> Vec<Completion> {
    let mut got: Vec<Completion> = Vec::new();
    let mut batch = Vec::new();
    let end = Instant::now() + Duration::from_secs(1);
    let count =
        |got: &[Completion], op: Op| got.iter().filter(|c| untoken(c.0).is_some_and(|(o, _, _)| o == op)).count();
    while want.iter().any(|&(op, n)| count(&got, op) < n) {
        let now = Instant::now();
        assert!(now < end, "not all of {want:?} completed: {got:?}");
        io.wait(now, end).unwrap();
        io.completions(&mut batch);
        got.extend(
            batch
                .iter()
                .filter(|c| untoken(c.0).is_some_and(|(o, s, _)| s == slot && want.iter().any(|&(op, _)| op == o))),
        );
    }
    got
}

/// Cancels everything on the slots and closes them, and waits for it, so no operation outlives
/// the buffers it may write into.
fn close_all(io: &mut impl Io, slots: &[usize]) {
    for &slot in slots {
        io.cancel_and_close(slot, 0).unwrap();
    }
    for &slot in slots {
        wait_for(io, Op::Close, slot, 1);
    }
}

/// Opens a connected socket into `slot` by hand, to learn its own address first.
fn open_with_address(
    io: &mut impl Io,
    slot: usize,
    to: SocketAddr,
    gro: bool,
    before: impl FnOnce(i32),
) -> (SocketAddr, bool) {
    let (fd, gro) = new_connected_socket(&to, None, gro).unwrap();
    // SAFETY: fd is ours and open; ManuallyDrop leaves closing it to us.
    let local = ManuallyDrop::new(unsafe { UdpSocket::from_raw_fd(fd) }).local_addr().unwrap();
    before(fd);
    io.adopt_socket(slot, fd, SocketKind::Datagram).unwrap();
    (local, gro)
}

#[test]
fn a_gso_send_of_n_segments_arrives_as_n_datagrams() {
    on_both!(8, 2048, a_gso_send_of_n_segments_arrives_as_n_datagrams_on);
}

fn a_gso_send_of_n_segments_arrives_as_n_datagrams_on(io: &mut impl Io) {
    let receiver = peer();
    open_connected(io, 0, &receiver.local_addr().unwrap(), None, false).unwrap();
    let bytes = segments(5, 1000, 300);
    let mut send = UdpSend::new();
    // SAFETY: `bytes` and `send` live until the completion is collected below.
    let ops = unsafe { send.send(io, 0, 0, &bytes, 1000) }.unwrap();
    assert_eq!(ops, 1, "one SENDMSG for the whole batch");
    let done = wait_for(io, Op::Send, 0, 1);
    assert_eq!(done[0].1, 5300, "the send took every byte");
    let mut buf = [0u8; 2048];
    for i in 0..5u8 {
        let n = receiver.recv(&mut buf).unwrap();
        assert_eq!(n, 1000, "datagram {i}");
        assert!(buf[..n].iter().all(|&b| b == i), "datagram {i} holds its own segment");
    }
    let n = receiver.recv(&mut buf).unwrap();
    assert_eq!(n, 300, "the shorter tail is a datagram of its own");
    assert!(send.gso());
    close_all(io, &[0]);
}

#[test]
fn a_socket_given_a_source_address_sends_from_it() {
    on_both!(8, 2048, a_socket_given_a_source_address_sends_from_it_on);
}

fn a_socket_given_a_source_address_sends_from_it_on(io: &mut impl Io) {
    let receiver = peer();
    let source: SocketAddr = "127.0.0.7:0".parse().unwrap();
    open_connected(io, 0, &receiver.local_addr().unwrap(), Some(&source), false).unwrap();
    let bytes = [7u8; 100];
    let mut send = UdpSend::new();
    // SAFETY: `bytes` and `send` live until the completion is collected below.
    unsafe { send.send(io, 0, 0, &bytes, 1000) }.unwrap();
    wait_for(io, Op::Send, 0, 1);
    let mut buf = [0u8; 2048];
    let (n, from) = receiver.recv_from(&mut buf).unwrap();
    assert_eq!((n, from.ip()), (100, source.ip()));
    close_all(io, &[0]);
}

#[test]
fn a_gro_receive_hands_over_several_datagrams_with_their_segment_size() {
    on_both!(8, GRO_BUF_SIZE, a_gro_receive_hands_over_several_datagrams_with_their_segment_size_on);
}

fn a_gro_receive_hands_over_several_datagrams_with_their_segment_size_on(io: &mut impl Io) {
    let sender = peer();
    let (local, gro) = open_with_address(io, 0, sender.local_addr().unwrap(), true, |_| {});
    assert!(gro, "the kernel takes UDP_GRO");
    let recv = RecvMsg::new();
    // SAFETY: `recv` outlives the receive, which close_all ends.
    unsafe { io.recvmsg_multishot(0, 0, recv.header()) }.unwrap();
    // The sender's GSO batch crosses loopback whole, and a GRO socket takes it whole.
    sender.connect(local).unwrap();
    let bytes = segments(3, 1000, 200);
    let mut gso = UdpSend::new();
    let msg = gso.prepare(&bytes, 1000);
    // SAFETY: `msg` points into `gso` and at `bytes`, both alive for this call.
    assert_eq!(unsafe { libc::sendmsg(sender.as_raw_fd(), msg, 0) }, 3200);
    let done = wait_for(io, Op::Recv, 0, 1);
    let (_, res, flags) = done[0];
    assert!(res > 0, "receive failed: {res}");
    let bid = cqueue::buffer_select(flags).expect("a provided buffer");
    let got = recv.parse(io.bytes(bid, res as usize)).expect("the kernel's layout");
    assert_eq!(got.payload, &bytes[..], "all three datagrams in one buffer");
    assert_eq!(got.segment_size, Some(1000));
    assert!(!got.truncated);
    assert!(cqueue::more(flags), "the multishot receive goes on");
    io.recycle(bid);
    io.publish();
    close_all(io, &[0]);
}

#[test]
fn a_datagram_larger_than_its_buffer_is_counted_as_truncated() {
    on_both!(8, 256, a_datagram_larger_than_its_buffer_is_counted_as_truncated_on);
}

fn a_datagram_larger_than_its_buffer_is_counted_as_truncated_on(io: &mut impl Io) {
    let sender = peer();
    let (local, _) = open_with_address(io, 0, sender.local_addr().unwrap(), false, |_| {});
    let recv = RecvMsg::new();
    // SAFETY: `recv` outlives the receive, which close_all ends.
    unsafe { io.recvmsg_multishot(0, 0, recv.header()) }.unwrap();
    sender.send_to(&[7u8; 1000], local).unwrap();
    sender.send_to(&[8u8; 100], local).unwrap();
    let done = wait_for(io, Op::Recv, 0, 2);
    let mut payloads = Vec::new();
    for (_, res, flags) in done {
        assert!(res > 0, "receive failed: {res}");
        let bid = cqueue::buffer_select(flags).unwrap();
        let got = recv.parse(io.bytes(bid, res as usize)).unwrap();
        payloads.push((got.payload.len(), got.truncated));
        io.recycle(bid);
    }
    io.publish();
    // What fits the buffer after the kernel's header and our control room, and the flag.
    assert_eq!(payloads, [(256 - BUF_OVERHEAD, true), (100, false)]);
    close_all(io, &[0]);
}

#[test]
fn the_largest_datagram_udp_carries_fits_a_default_buffer_whole() {
    on_both!(2, GRO_BUF_SIZE, the_largest_datagram_udp_carries_fits_a_default_buffer_whole_on);
}

fn the_largest_datagram_udp_carries_fits_a_default_buffer_whole_on(io: &mut impl Io) {
    let sender = peer();
    let (local, _) = open_with_address(io, 0, sender.local_addr().unwrap(), true, |_| {});
    let recv = RecvMsg::new();
    // SAFETY: `recv` outlives the receive, which close_all ends.
    unsafe { io.recvmsg_multishot(0, 0, recv.header()) }.unwrap();
    // IPv4's largest UDP payload: 65,535 less the IP and UDP headers.
    sender.send_to(&vec![9u8; 65_507], local).unwrap();
    let (_, res, flags) = wait_for(io, Op::Recv, 0, 1)[0];
    assert!(res > 0, "receive failed: {res}");
    let bid = cqueue::buffer_select(flags).unwrap();
    let got = recv.parse(io.bytes(bid, res as usize)).unwrap();
    assert_eq!((got.payload.len(), got.truncated), (65_507, false));
    io.recycle(bid);
    io.publish();
    close_all(io, &[0]);
}

#[test]
fn a_kernel_refusing_gso_turns_it_off_and_the_batch_goes_out_datagram_by_datagram() {
    on_both!(8, 2048, a_kernel_refusing_gso_turns_it_off_and_the_batch_goes_out_datagram_by_datagram_on);
}

fn a_kernel_refusing_gso_turns_it_off_and_the_batch_goes_out_datagram_by_datagram_on(io: &mut impl Io) {
    let receiver = peer();
    // Without UDP checksums the kernel cannot segment (udp_send_skb answers EINVAL): a real
    // socket that refuses GSO as some devices and kernels do.
    open_with_address(io, 0, receiver.local_addr().unwrap(), false, |fd| {
        assert!(set_int(fd, libc::SOL_SOCKET, libc::SO_NO_CHECK, 1));
    });
    let bytes = segments(3, 500, 0);
    let mut send = UdpSend::new();
    // SAFETY: `bytes` and `send` live until the completions are collected below.
    assert_eq!(unsafe { send.send(io, 0, 0, &bytes, 500) }.unwrap(), 1);
    let refused = wait_for(io, Op::Send, 0, 1)[0].1;
    assert_eq!(refused, -libc::EINVAL);
    assert!(send.refused(refused));
    assert!(!send.gso(), "GSO is off for this socket");
    // SAFETY: as above.
    let ops = unsafe { send.send(io, 0, 0, &bytes, 500) }.unwrap();
    assert_eq!(ops, 3, "one plain send per datagram");
    let sent: Vec<i32> = wait_for(io, Op::Send, 0, 3).iter().map(|c| c.1).collect();
    assert_eq!(sent, [500, 500, 500]);
    let mut buf = [0u8; 2048];
    for i in 0..3u8 {
        assert_eq!(receiver.recv(&mut buf).unwrap(), 500);
        assert!(buf[..500].iter().all(|&b| b == i));
    }
    // A later error is not taken for a GSO refusal twice.
    assert!(!send.refused(-libc::EINVAL));
    close_all(io, &[0]);
}

#[test]
fn a_closed_port_ends_the_receive_with_connection_refused() {
    on_both!(8, 2048, a_closed_port_ends_the_receive_with_connection_refused_on);
}

fn a_closed_port_ends_the_receive_with_connection_refused_on(io: &mut impl Io) {
    let closed = peer().local_addr().unwrap();
    open_connected(io, 0, &closed, None, false).unwrap();
    let recv = RecvMsg::new();
    // SAFETY: `recv` outlives the receive, which the refusal ends.
    unsafe { io.recvmsg_multishot(0, 0, recv.header()) }.unwrap();
    let datagram = [1u8; 100];
    let mut send = UdpSend::new();
    // SAFETY: `datagram` and `send` live until the completion is collected below.
    unsafe { send.send(io, 0, 0, &datagram, 100) }.unwrap();
    let done = wait_for_all(io, 0, &[(Op::Send, 1), (Op::Recv, 1)]);
    let of = |op: Op| *done.iter().find(|c| untoken(c.0).is_some_and(|(o, _, _)| o == op)).unwrap();
    assert_eq!(of(Op::Send).1, 100);
    let (_, res, flags) = of(Op::Recv);
    assert_eq!(res, -libc::ECONNREFUSED, "the ICMP port unreachable reaches the receive");
    assert!(!cqueue::more(flags), "and ends it");
    close_all(io, &[0]);
}

#[test]
fn a_receive_that_runs_out_of_buffers_ends_and_once_rearmed_gets_the_datagrams_that_waited() {
    on_both!(2, 2048, a_receive_that_runs_out_of_buffers_ends_and_once_rearmed_gets_the_datagrams_that_waited_on);
}

fn a_receive_that_runs_out_of_buffers_ends_and_once_rearmed_gets_the_datagrams_that_waited_on(io: &mut impl Io) {
    let sender = peer();
    let (local, _) = open_with_address(io, 0, sender.local_addr().unwrap(), false, |_| {});
    let recv = RecvMsg::new();
    // SAFETY: `recv` outlives both receives: the first ends by itself, close_all the second.
    unsafe { io.recvmsg_multishot(0, 0, recv.header()) }.unwrap();
    for i in 0..4u8 {
        sender.send_to(&[i; 100], local).unwrap();
    }
    let mut got = Vec::new();
    let mut ended = false;
    for _ in 0..2 {
        for (_, res, flags) in wait_for(io, Op::Recv, 0, 1) {
            if res == -libc::ENOBUFS {
                assert!(!cqueue::more(flags));
                ended = true;
                continue;
            }
            let bid = cqueue::buffer_select(flags).unwrap();
            got.push(recv_payload(&recv, io, bid, res));
            io.recycle(bid);
            ended |= !cqueue::more(flags);
        }
        if ended {
            break;
        }
    }
    assert!(ended, "two buffers for four datagrams end the receive");
    assert!(got.len() <= 2);
    io.publish();
    // Re-armed, it gets what waited in the socket: nothing was dropped.
    // SAFETY: as above.
    unsafe { io.recvmsg_multishot(0, 0, recv.header()) }.unwrap();
    while got.len() < 4 {
        for (_, res, flags) in wait_for(io, Op::Recv, 0, 1) {
            // Having used the last buffer the receive ends again, with or without data waiting.
            if res == -libc::ENOBUFS {
                continue;
            }
            assert!(res > 0, "receive failed: {res} after {got:?}");
            let bid = cqueue::buffer_select(flags).unwrap();
            got.push(recv_payload(&recv, io, bid, res));
            io.recycle(bid);
            io.publish();
        }
    }
    assert_eq!(got, [0, 1, 2, 3]);
    close_all(io, &[0]);
}

#[test]
fn fifty_datagrams_that_waited_arrive_whole_and_in_order_each_in_a_buffer_of_its_own() {
    on_both!(64, 2048, fifty_datagrams_that_waited_arrive_whole_and_in_order_each_in_a_buffer_of_its_own_on);
}

/// More datagrams than epoll reads in one recvmmsg, of different sizes, already waiting when
/// the receive is armed.
fn fifty_datagrams_that_waited_arrive_whole_and_in_order_each_in_a_buffer_of_its_own_on(io: &mut impl Io) {
    let sender = peer();
    let (local, _) = open_with_address(io, 0, sender.local_addr().unwrap(), false, |_| {});
    for i in 0..50u8 {
        sender.send_to(&vec![i; 1 + usize::from(i) * 20], local).unwrap();
    }
    let recv = RecvMsg::new();
    // SAFETY: `recv` outlives the receive, which close_all ends.
    unsafe { io.recvmsg_multishot(0, 0, recv.header()) }.unwrap();
    let mut got = Vec::new();
    for (_, res, flags) in wait_for(io, Op::Recv, 0, 50) {
        assert!(cqueue::more(flags), "the receive goes on: {res}");
        let bid = cqueue::buffer_select(flags).unwrap();
        let datagram = recv.parse(io.bytes(bid, res as usize)).unwrap();
        assert!(!datagram.truncated);
        let first = datagram.payload[0];
        got.push((first, datagram.payload.len(), datagram.payload.iter().all(|&b| b == first)));
        io.recycle(bid);
    }
    let want: Vec<_> = (0..50u8).map(|i| (i, 1 + usize::from(i) * 20, true)).collect();
    assert_eq!(got, want);
    close_all(io, &[0]);
}

/// The first byte of a 100-byte datagram in buffer `bid`.
fn recv_payload(recv: &RecvMsg, io: &impl Io, bid: u16, res: i32) -> u8 {
    let got = recv.parse(io.bytes(bid, res as usize)).unwrap();
    assert_eq!(got.payload.len(), 100);
    got.payload[0]
}

#[test]
fn a_batch_beyond_gsos_limits_goes_out_datagram_by_datagram_and_gso_stays_on() {
    on_both!(8, 2048, a_batch_beyond_gsos_limits_goes_out_datagram_by_datagram_and_gso_stays_on_on);
}

fn a_batch_beyond_gsos_limits_goes_out_datagram_by_datagram_and_gso_stays_on_on(io: &mut impl Io) {
    let receiver = peer();
    open_connected(io, 0, &receiver.local_addr().unwrap(), None, false).unwrap();
    let bytes = segments(70, 100, 0);
    let mut send = UdpSend::new();
    // SAFETY: `bytes` and `send` live until the completions are collected below.
    let ops = unsafe { send.send(io, 0, 0, &bytes, 100) }.unwrap();
    assert_eq!(ops, 70, "more segments than one GSO send may carry");
    assert!(wait_for(io, Op::Send, 0, 70).iter().all(|c| c.1 == 100));
    let mut buf = [0u8; 2048];
    for i in 0..70u8 {
        assert_eq!(receiver.recv(&mut buf).unwrap(), 100);
        assert_eq!(buf[0], i);
    }
    assert!(send.gso());
    close_all(io, &[0]);
}
