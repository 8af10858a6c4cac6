//! The seam between the event loop and the kernel: the few operations the loop asks for
//! (adopt a socket, connect with a timeout, a multishot receive into buffers the I/O picks,
//! sends, cancel-and-close, waits) and the completions they post, in io_uring's shape (user
//! data, result, flags). Two implementations: [`RingIo`], io_uring itself (`uring.rs` and its
//! provided-buffer ring), and `epoll::Epoll`, which performs the same operations with
//! non-blocking system calls as epoll reports readiness and posts the same completions, so one
//! loop (`event_loop.rs`) drives either, monomorphised: the io_uring loop pays nothing for the
//! seam.

use std::io;
use std::time::{Duration, Instant};

use io_uring::IoUring;

use super::buf_ring::BufRing;
use super::uring::{CLOSE_COMPLETIONS, Completion, Uring};

/// What a socket is, for an I/O that reads differently from a stream and from datagrams.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum SocketKind {
    Stream,
    Datagram,
}

/// The operations the event loop submits, and their completions. Each operation posts exactly
/// the completions io_uring would: a connect two (itself and its linked timeout), a multishot
/// receive one per buffer (with MORE while it goes on) and a last one without MORE, a send one
/// (a quiet send only if it fails), a cancel-and-close `CLOSE_COMPLETIONS` beside the
/// cancelled operations' own last ones; the loop's count of operations in flight relies on it.
pub(crate) trait Io {
    /// Completions one `cancel_and_close` posts, besides those of the operations it cancels.
    const CLOSE_COMPLETIONS: u32;

    /// Room for this many completions at once: the size of one batch.
    fn batch_room(&self) -> usize;

    /// Takes socket `fd` (non-blocking) for `slot`: from here on the I/O owns it and closes it.
    fn adopt_socket(&mut self, slot: usize, fd: i32, kind: SocketKind) -> io::Result<()>;

    /// Waits until `until` for the first completion (whatever is queued goes out first).
    fn wait(&mut self, now: Instant, until: Instant) -> io::Result<()>;

    /// Sleeps until `until`, whatever completes meanwhile (unless a batch's worth does).
    fn sleep(&mut self, now: Instant, until: Instant) -> io::Result<()>;

    /// Completions ready to be collected.
    fn ready(&mut self) -> usize;

    /// Holds out up to `limit` until `batch` completions are ready, counting those ready now.
    fn hold(&mut self, batch: usize, limit: Duration) -> io::Result<()>;

    /// Moves every completion that is ready into `into` (cleared first).
    fn completions(&mut self, into: &mut Vec<Completion>);

    /// Connects `slot` to `addr`, bounded by the connect timeout: two completions.
    ///
    /// # Safety
    /// `addr` (of `len` bytes) must stay valid until the connect completes.
    unsafe fn connect(
        &mut self,
        slot: usize,
        generation: u16,
        addr: *const libc::sockaddr,
        len: libc::socklen_t,
    ) -> io::Result<()>;

    /// One multishot receive on `slot` into the I/O's buffers.
    fn recv_multishot(&mut self, slot: usize, generation: u16) -> io::Result<()>;

    /// One multishot RECVMSG on `slot`: each buffer laid out as io_uring's
    /// `io_uring_recvmsg_out` with `msg`'s name and control lengths (see `recvmsg.rs`).
    ///
    /// # Safety
    /// `msg` must stay valid until the receive has ended (a completion without MORE).
    unsafe fn recvmsg_multishot(&mut self, slot: usize, generation: u16, msg: *const libc::msghdr) -> io::Result<()>;

    /// SENDMSG on `slot` (UDP with GSO); completes as a send.
    ///
    /// # Safety
    /// `msg`, and everything it points at, must stay valid and unchanged until it completes.
    unsafe fn sendmsg(&mut self, slot: usize, generation: u16, msg: *const libc::msghdr) -> io::Result<()>;

    /// Sends `bytes` on `slot`; completes with how many were written.
    ///
    /// # Safety
    /// `bytes` must stay valid and unchanged until the send completes.
    unsafe fn send(&mut self, slot: usize, generation: u16, bytes: &[u8]) -> io::Result<()>;

    /// Sends all of `bytes` on `slot`, posting a completion only if it fails.
    ///
    /// # Safety
    /// `bytes` must stay valid and unchanged until they are taken whole (no completion says
    /// when) or the slot is closed.
    unsafe fn send_quiet(&mut self, slot: usize, generation: u16, bytes: &[u8]) -> io::Result<()>;

    /// Sends `bytes` on UDP socket `slot` as datagrams of `segment_size` bytes, one plain send
    /// each; returns how many, each completing as a send.
    ///
    /// # Safety
    /// As for `send`, until every one of them completes.
    unsafe fn send_datagrams(
        &mut self,
        slot: usize,
        generation: u16,
        bytes: &[u8],
        segment_size: usize,
    ) -> io::Result<u32> {
        let mut queued = 0;
        for datagram in bytes.chunks(segment_size.max(1)) {
            // SAFETY: passed on to the caller.
            unsafe { self.send(slot, generation, datagram)? };
            queued += 1;
        }
        Ok(queued)
    }

    /// Cancels every operation on `slot` and closes its socket.
    fn cancel_and_close(&mut self, slot: usize, generation: u16) -> io::Result<()>;

    /// The bytes a receive put into buffer `bid`, detached from `self`: valid until `bid` is
    /// recycled, which the caller does afterwards.
    fn bytes<'a>(&self, bid: u16, len: usize) -> &'a [u8];

    /// `part`, which `bytes` lent from buffer `bid`, to be changed in place.
    ///
    /// # Safety
    /// As `BufRing::bytes_mut`.
    unsafe fn bytes_mut<'a>(&self, bid: u16, part: &[u8]) -> &'a mut [u8];

    /// Hands buffer `bid` back; receives see it after the next `publish`.
    fn recycle(&mut self, bid: u16);

    fn publish(&mut self);
}

/// io_uring: the ring and its provided-buffer ring.
pub(crate) struct RingIo<'r> {
    uring: Uring<'r>,
    bufs: BufRing,
}

impl<'r> RingIo<'r> {
    /// The ring for `connections` connections.
    pub(crate) fn ring(connections: usize) -> io::Result<IoUring> {
        Uring::ring(connections)
    }

    /// The ring's parts for `slots` sockets, and `entries` receive buffers of `buf_size` bytes.
    pub(crate) fn new(
        ring: &'r mut IoUring,
        slots: u32,
        connect_timeout: Duration,
        entries: u16,
        buf_size: usize,
    ) -> io::Result<Self> {
        let uring = Uring::new(ring, slots, connect_timeout)?;
        let bufs = BufRing::new(uring.submitter(), entries, buf_size, 0)?;
        Ok(RingIo { uring, bufs })
    }
}

impl Io for RingIo<'_> {
    const CLOSE_COMPLETIONS: u32 = CLOSE_COMPLETIONS;

    #[inline]
    fn batch_room(&self) -> usize {
        self.uring.sq_entries()
    }

    fn adopt_socket(&mut self, slot: usize, fd: i32, _kind: SocketKind) -> io::Result<()> {
        let registered = self.uring.register_socket(slot, fd);
        // SAFETY: the caller handed `fd` over; the registered table keeps its own reference.
        unsafe { libc::close(fd) };
        registered
    }

    #[inline]
    fn wait(&mut self, now: Instant, until: Instant) -> io::Result<()> {
        self.uring.wait(now, until)
    }

    #[inline]
    fn sleep(&mut self, now: Instant, until: Instant) -> io::Result<()> {
        self.uring.sleep(now, until)
    }

    #[inline]
    fn ready(&mut self) -> usize {
        self.uring.ready()
    }

    #[inline]
    fn hold(&mut self, batch: usize, limit: Duration) -> io::Result<()> {
        self.uring.hold(batch, limit)
    }

    #[inline]
    fn completions(&mut self, into: &mut Vec<Completion>) {
        self.uring.completions(into)
    }

    #[inline]
    unsafe fn connect(
        &mut self,
        slot: usize,
        generation: u16,
        addr: *const libc::sockaddr,
        len: libc::socklen_t,
    ) -> io::Result<()> {
        // SAFETY: passed on to the caller.
        unsafe { self.uring.connect(slot, generation, addr, len) }
    }

    #[inline]
    fn recv_multishot(&mut self, slot: usize, generation: u16) -> io::Result<()> {
        self.uring.recv_multishot(slot, generation, self.bufs.group)
    }

    #[inline]
    unsafe fn recvmsg_multishot(&mut self, slot: usize, generation: u16, msg: *const libc::msghdr) -> io::Result<()> {
        // SAFETY: passed on to the caller.
        unsafe { self.uring.recvmsg_multishot(slot, generation, self.bufs.group, msg) }
    }

    #[inline]
    unsafe fn sendmsg(&mut self, slot: usize, generation: u16, msg: *const libc::msghdr) -> io::Result<()> {
        // SAFETY: passed on to the caller.
        unsafe { self.uring.sendmsg(slot, generation, msg) }
    }

    #[inline]
    unsafe fn send(&mut self, slot: usize, generation: u16, bytes: &[u8]) -> io::Result<()> {
        // SAFETY: passed on to the caller.
        unsafe { self.uring.send(slot, generation, bytes) }
    }

    #[inline]
    unsafe fn send_quiet(&mut self, slot: usize, generation: u16, bytes: &[u8]) -> io::Result<()> {
        // SAFETY: passed on to the caller.
        unsafe { self.uring.send_quiet(slot, generation, bytes) }
    }

    #[inline]
    fn cancel_and_close(&mut self, slot: usize, generation: u16) -> io::Result<()> {
        self.uring.cancel_and_close(slot, generation)
    }

    #[inline]
    fn bytes<'a>(&self, bid: u16, len: usize) -> &'a [u8] {
        self.bufs.bytes(bid, len)
    }

    #[inline]
    unsafe fn bytes_mut<'a>(&self, bid: u16, part: &[u8]) -> &'a mut [u8] {
        // SAFETY: passed on to the caller.
        unsafe { self.bufs.bytes_mut(bid, part) }
    }

    #[inline]
    fn recycle(&mut self, bid: u16) {
        self.bufs.push(bid)
    }

    #[inline]
    fn publish(&mut self) {
        self.bufs.publish()
    }
}
