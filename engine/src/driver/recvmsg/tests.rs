//! The receive buffer's layout, by hand (control messages, well formed or not) and from a real
//! TCP socket through a real ring: its bytes come with the instant they reached the host, and
//! the peer's close is an empty payload.

use std::io::Write;
use std::net::{TcpListener, TcpStream};
use std::os::fd::AsRawFd;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use io_uring::cqueue;

use super::super::buf_ring::BufRing;
use super::super::socket::new_socket;
use super::super::uring::{Completion, Op, Uring, untoken};
use super::{CONTROL_LEN, ControlMessages, RecvMsg};

/// A buffer as the kernel lays it out: the header, the control room, then the payload.
fn buffer(control: &[u8], payload: &[u8]) -> Vec<u8> {
    let mut buf = Vec::new();
    for field in [0u32, control.len() as u32, payload.len() as u32, 0] {
        buf.extend(field.to_ne_bytes());
    }
    buf.extend(control);
    buf.resize(16 + CONTROL_LEN, 0);
    buf.extend(payload);
    buf
}

/// One control message: its header (length, level, type) and its data, padded to a word.
fn cmsg(level: i32, kind: i32, data: &[u8]) -> Vec<u8> {
    let mut out = (16 + data.len()).to_ne_bytes().to_vec();
    out.extend(level.to_ne_bytes());
    out.extend(kind.to_ne_bytes());
    out.extend(data);
    out.resize(out.len().next_multiple_of(8), 0);
    out
}

#[test]
fn a_timestamp_control_message_is_read_as_the_arrival() {
    let mut timespec = 1_700_000_000i64.to_ne_bytes().to_vec();
    timespec.extend(123_456_789i64.to_ne_bytes());
    let buf = buffer(&cmsg(libc::SOL_SOCKET, libc::SCM_TIMESTAMPNS, &timespec), b"HTTP/1.1 200 OK");
    let got = RecvMsg::new().parse(&buf).unwrap();
    assert_eq!(got.payload, b"HTTP/1.1 200 OK");
    assert_eq!(got.timestamp, Some(Duration::new(1_700_000_000, 123_456_789)));
    assert_eq!(got.segment_size, None);
}

#[test]
fn a_gro_control_message_is_read_as_the_segment_size() {
    let buf = buffer(&cmsg(libc::SOL_UDP, libc::UDP_GRO, &1200i32.to_ne_bytes()), &[1; 2400]);
    let got = RecvMsg::new().parse(&buf).unwrap();
    assert_eq!((got.segment_size, got.timestamp, got.payload.len()), (Some(1200), None, 2400));
}

#[test]
fn malformed_control_messages_end_the_walk_without_a_value() {
    // A zero length would point the next header at this one again.
    let zero = [0u8; 16];
    assert_eq!(ControlMessages(&zero).count(), 0);
    // A length past the control room.
    let mut long = cmsg(libc::SOL_SOCKET, libc::SCM_TIMESTAMPNS, &[0; 16]);
    long[..8].copy_from_slice(&64usize.to_ne_bytes());
    assert_eq!(ControlMessages(&long).count(), 0);
    // Nanoseconds out of range are no timestamp.
    let mut timespec = 5i64.to_ne_bytes().to_vec();
    timespec.extend(2_000_000_000i64.to_ne_bytes());
    let buf = buffer(&cmsg(libc::SOL_SOCKET, libc::SCM_TIMESTAMPNS, &timespec), b"x");
    assert_eq!(RecvMsg::new().parse(&buf).unwrap().timestamp, None);
}

/// Completions for `op` on slot 0 until there are `want`, within a second.
fn wait_for(uring: &mut Uring<'_>, op: Op, want: usize) -> Vec<Completion> {
    let (mut got, mut batch) = (Vec::new(), Vec::new());
    let end = Instant::now() + Duration::from_secs(1);
    while got.len() < want {
        let now = Instant::now();
        assert!(now < end, "{want} {op:?} did not complete: {got:?}");
        uring.wait(now, end).unwrap();
        uring.completions(&mut batch);
        got.extend(batch.iter().filter(|c| untoken(c.0).is_some_and(|(o, s, _)| o == op && s == 0)));
    }
    got
}

fn realtime() -> Duration {
    SystemTime::now().duration_since(UNIX_EPOCH).unwrap()
}

#[test]
fn a_tcp_receive_carries_when_its_bytes_arrived_and_a_close_is_an_empty_payload() {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    // volley's own socket, timestamps on, connected by hand and put into slot 0.
    let fd = new_socket(&addr, true).unwrap();
    // SAFETY: fd is ours; TcpStream owns it from here.
    let client = unsafe { <TcpStream as std::os::fd::FromRawFd>::from_raw_fd(fd) };
    let (sockaddr, len) = super::super::socket::encode_sockaddr(&addr);
    // SAFETY: a plain connect on our socket; it is non-blocking, so it may be in progress.
    let r = unsafe { libc::connect(client.as_raw_fd(), (&raw const sockaddr).cast(), len) };
    assert!(r == 0 || std::io::Error::last_os_error().raw_os_error() == Some(libc::EINPROGRESS));
    let (mut server, _) = listener.accept().unwrap();
    let mut ring = Uring::ring(4).unwrap();
    let mut uring = Uring::new(&mut ring, 2, Duration::from_secs(1)).unwrap();
    uring.register_socket(0, client.as_raw_fd()).unwrap();
    let mut bufs = BufRing::new(uring.submitter(), 4, 4096, 0).unwrap();
    let recv = RecvMsg::new();
    // SAFETY: `recv` outlives the receive, which ends with the close below.
    unsafe { uring.recvmsg_multishot(0, 0, bufs.group, recv.header()) }.unwrap();

    // The kernel turns packet timestamps on for the whole host a moment after the first socket
    // asks (a deferred static key), so the first bytes may come without one.
    let mut stamped = None;
    for _ in 0..50 {
        let before = realtime();
        server.write_all(b"HTTP/1.1 200 OK\r\n\r\n").unwrap();
        // Seen well after it arrived: the timestamp is the arrival, not this.
        std::thread::sleep(Duration::from_millis(20));
        let (_, res, flags) = wait_for(&mut uring, Op::Recv, 1)[0];
        let after = realtime();
        let bid = cqueue::buffer_select(flags).expect("a provided buffer");
        let got = recv.parse(bufs.bytes(bid, res as usize)).expect("the kernel's layout");
        assert_eq!(got.payload, b"HTTP/1.1 200 OK\r\n\r\n");
        assert!(cqueue::more(flags), "the multishot receive goes on");
        let timestamp = got.timestamp;
        bufs.push(bid);
        bufs.publish();
        if let Some(at) = timestamp {
            stamped = Some((before, at, after));
            break;
        }
    }
    let (before, at, after) = stamped.expect("SO_TIMESTAMPNS stamps the receives within a second");
    assert!(
        before <= at && at + Duration::from_millis(15) <= after,
        "arrived {at:?}, written {before:?}, seen {after:?}"
    );

    drop(server);
    let (_, res, flags) = wait_for(&mut uring, Op::Recv, 1)[0];
    let bid = cqueue::buffer_select(flags).expect("a provided buffer");
    let got = recv.parse(bufs.bytes(bid, res as usize)).expect("the kernel's layout");
    assert!(got.payload.is_empty(), "the close: {} bytes", got.payload.len());
    assert!(!cqueue::more(flags), "the close ends the receive");
    bufs.push(bid);
    bufs.publish();
    uring.cancel_and_close(0, 0).unwrap();
    wait_for(&mut uring, Op::Close, 1);
}
