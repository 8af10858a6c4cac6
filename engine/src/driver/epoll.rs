//! The I/O for where io_uring is blocked (a container's default seccomp profile, a sysctl):
//! the loop's operations (`ops::Io`) done with non-blocking system calls as one edge-triggered
//! epoll reports readiness, each posting the completions io_uring would post, so the same loop
//! drives it unchanged.
//!
//! A send is tried at once (as io_uring tries at submit) and, when the socket is full, again
//! when epoll says it has room; a receive is armed once and reads into this thread's buffers
//! whenever the socket has bytes, one completion a buffer, as a multishot receive does; a
//! connect is the non-blocking connect, done when the socket turns writable, bounded by a
//! deadline this I/O keeps. Edge-triggered: every socket is registered once, for reading and
//! writing, and a read that leaves bytes behind (no buffer free) is taken up again at the next
//! wait rather than by another event. A stream read that fills less than its buffer emptied
//! the socket, so no second read is spent to learn that; datagrams are read sixteen to a
//! recvmmsg, and a short batch likewise emptied the socket.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};
use std::io;
use std::time::{Duration, Instant};

use super::ops::{Io, SocketKind};
use super::uring::{Completion, Op, token};

/// io_uring's completion flags, as `io_uring::cqueue::{buffer_select, more}` read them.
const F_BUFFER: u32 = 1;
const F_MORE: u32 = 2;
const BUFFER_SHIFT: u32 = 16;
/// io_uring's `io_uring_recvmsg_out`: name, control, payload and flags lengths before the name.
const RECVMSG_OUT: usize = 16;
/// A hold's shortest sleep: shorter, the wake-up costs more than the batch it gathers saves.
const MIN_HOLD_SLEEP: Duration = Duration::from_micros(10);

/// Datagrams read per recvmmsg: a QUIC flight of a few dozen packets in two or three calls.
const DATAGRAMS: usize = 16;

/// Readiness events taken per epoll_wait.
const EVENTS: usize = 256;

/// A send not yet taken by the socket.
#[derive(Clone, Copy)]
enum Pending {
    /// Bytes, posting a completion with how many were written; a quiet send's are written
    /// whole and post only a failure.
    Bytes { ptr: *const u8, len: usize, quiet: bool },
    /// A SENDMSG (UDP with GSO), posting a completion.
    Msg(*const libc::msghdr),
}

/// How a slot's receive is armed.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Recv {
    Off,
    Plain,
    /// RECVMSG with the name and control room of the loop's header.
    Msg {
        name: usize,
        control: usize,
    },
}

struct Slot {
    fd: i32,
    kind: SocketKind,
    generation: u16,
    /// A connect is in flight, due by this instant.
    connecting: Option<Instant>,
    recv: Recv,
    /// The socket may hold bytes not yet read (edge-triggered: no event will say so again).
    readable: bool,
    /// The peer has closed (or the socket failed): a short read no longer means the socket is
    /// empty, since its end (or error) is still to be read and no further event will come.
    hung_up: bool,
    /// Sends the socket has not taken yet, in order.
    sends: VecDeque<Pending>,
}

impl Slot {
    fn new() -> Self {
        Slot {
            fd: -1,
            kind: SocketKind::Stream,
            generation: 0,
            connecting: None,
            recv: Recv::Off,
            readable: false,
            hung_up: false,
            sends: VecDeque::new(),
        }
    }
}

/// Receive buffers: one allocation cut into `count` buffers of `size` bytes, and the free ones.
struct Buffers {
    /// From a boxed slice, owned here (freed on drop): reached by pointer, since the loop reads
    /// (and TLS decrypts in) a buffer while this I/O goes on with others.
    memory: *mut [u8],
    size: usize,
    free: Vec<u16>,
}

impl Buffers {
    fn new(count: u16, size: usize) -> Self {
        Buffers {
            memory: Box::into_raw(vec![0u8; count as usize * size].into_boxed_slice()),
            size,
            free: (0..count).rev().collect(),
        }
    }

    fn start(&self, bid: u16) -> *mut u8 {
        // SAFETY: bid < count, so the offset is inside the allocation.
        unsafe { self.memory.cast::<u8>().add(bid as usize * self.size) }
    }
}

impl Drop for Buffers {
    fn drop(&mut self) {
        // SAFETY: from Box::into_raw in `new`, freed only here.
        drop(unsafe { Box::from_raw(self.memory) });
    }
}

pub(crate) struct Epoll {
    epfd: i32,
    slots: Vec<Slot>,
    bufs: Buffers,
    /// Completions posted and not yet collected.
    ready: Vec<Completion>,
    events: Vec<libc::epoll_event>,
    /// Slots armed to receive whose socket may still hold bytes: read at the next wait.
    again: Vec<usize>,
    /// Connects' deadlines, earliest first; an entry whose slot no longer connects with that
    /// generation is stale.
    deadlines: BinaryHeap<Reverse<(Instant, usize, u16)>>,
    connect_timeout: Duration,
    /// epoll_pwait2 (Linux 5.11, waits in nanoseconds) works here; without it waits are whole
    /// milliseconds.
    pwait2: bool,
    /// When the loop last took the completions: the pace since then sets a hold's sleep.
    taken_at: Instant,
    /// Receive completions posted since then. Only these set the pace: a send's completion is
    /// posted at once, and counting them (QUIC's, a datagram each) made the pace look quick
    /// and a hold sleep in many short steps.
    received: usize,
    /// The last hold ran out before its batch came: the next sleeps through its limit at once.
    ran_out: bool,
    /// Sockets the loop has closed, whose `close` waits for the next wait. Each costs this
    /// thread about 20 µs of the kernel's work (over loopback, the server's side too), where
    /// io_uring's closes run in the kernel's own workers: at the load's end the thread's last
    /// word (the counts) goes out first, then its 10,000 closes.
    doomed: Vec<i32>,
}

impl Epoll {
    /// An epoll for `slots` sockets, and `buffers` receive buffers of `buf_size` bytes.
    pub(crate) fn new(slots: usize, connect_timeout: Duration, buffers: u16, buf_size: usize) -> io::Result<Self> {
        // SAFETY: a plain syscall; the descriptor is checked and owned by `Epoll`.
        let epfd = unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) };
        if epfd < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(Epoll {
            epfd,
            slots: (0..slots).map(|_| Slot::new()).collect(),
            bufs: Buffers::new(buffers, buf_size),
            ready: Vec::with_capacity(EVENTS),
            taken_at: Instant::now(),
            received: 0,
            ran_out: false,
            // SAFETY: epoll_event is plain old data.
            events: vec![unsafe { std::mem::zeroed() }; EVENTS],
            again: Vec::new(),
            deadlines: BinaryHeap::new(),
            doomed: Vec::new(),
            connect_timeout,
            pwait2: true,
        })
    }

    fn post(&mut self, op: Op, slot: usize, res: i32, flags: u32) {
        let generation = self.slots[slot].generation;
        self.received += usize::from(op == Op::Recv);
        self.ready.push((token(op, slot, generation), res, flags));
    }

    /// Waits up to `timeout` for readiness (not at all with completions ready) and turns what it reports into
    /// completions; connects past their deadline time out.
    fn poll(&mut self, timeout: Duration) -> io::Result<()> {
        // Before the wait: a closed socket leaves the epoll set, so none of its events is seen.
        self.close_doomed();
        for slot in std::mem::take(&mut self.again) {
            self.read(slot);
        }
        let mut timeout = timeout;
        if !self.ready.is_empty() {
            timeout = Duration::ZERO;
        }
        if let Some(Reverse((at, _, _))) = self.deadlines.peek() {
            timeout = timeout.min(at.saturating_duration_since(Instant::now()));
        }
        let n = self.epoll_wait(timeout)?;
        for k in 0..n {
            let event = self.events[k];
            let slot = event.u64 as usize;
            let bits = event.events as i32;
            let error = bits & (libc::EPOLLERR | libc::EPOLLHUP) != 0;
            if self.slots[slot].connecting.is_some() {
                self.slots[slot].hung_up |= bits & libc::EPOLLRDHUP != 0 || error;
                if bits & libc::EPOLLOUT != 0 || error {
                    self.connected(slot);
                }
                continue;
            }
            if bits & (libc::EPOLLIN | libc::EPOLLRDHUP) != 0 || error {
                self.slots[slot].readable = true;
                self.slots[slot].hung_up |= bits & libc::EPOLLRDHUP != 0 || error;
                self.read(slot);
            }
            if bits & libc::EPOLLOUT != 0 || error {
                self.write(slot);
            }
        }
        self.expire(Instant::now());
        Ok(())
    }

    fn close_doomed(&mut self) {
        for fd in self.doomed.drain(..) {
            // SAFETY: a socket this I/O owned, which no slot names any more.
            unsafe { libc::close(fd) };
        }
    }

    /// epoll_wait for up to `timeout`; returns how many events it filled in.
    fn epoll_wait(&mut self, timeout: Duration) -> io::Result<usize> {
        let events = self.events.as_mut_ptr();
        let max = self.events.len() as i32;
        let n = if self.pwait2 {
            let ts = libc::timespec { tv_sec: timeout.as_secs() as _, tv_nsec: timeout.subsec_nanos() as _ };
            // SAFETY: the events buffer holds `max` entries; the timespec lives through the call;
            // no signal mask.
            let n = unsafe {
                libc::syscall(libc::SYS_epoll_pwait2, self.epfd, events, max, &raw const ts, std::ptr::null::<u8>(), 0)
            };
            if n < 0 && io::Error::last_os_error().raw_os_error() == Some(libc::ENOSYS) {
                // An older kernel, or a filter that does not know it: milliseconds from here on.
                self.pwait2 = false;
                return self.epoll_wait(timeout);
            }
            n as i32
        } else {
            // Rounded up, so a wait for a deadline does not wake just before it, again and again.
            let ms = timeout.as_nanos().div_ceil(1_000_000).min(i32::MAX as u128) as i32;
            // SAFETY: as above.
            unsafe { libc::epoll_wait(self.epfd, events, max, ms) }
        };
        if n < 0 {
            let e = io::Error::last_os_error();
            return if e.raw_os_error() == Some(libc::EINTR) { Ok(0) } else { Err(e) };
        }
        Ok(n as usize)
    }

    /// Connects whose deadline has passed fail as a timed-out linked connect does.
    fn expire(&mut self, now: Instant) {
        while let Some(&Reverse((at, slot, generation))) = self.deadlines.peek() {
            if at > now {
                break;
            }
            self.deadlines.pop();
            let s = &mut self.slots[slot];
            if s.generation != generation || s.connecting != Some(at) {
                continue;
            }
            s.connecting = None;
            self.post(Op::Connect, slot, -libc::ECANCELED, 0);
            self.post(Op::ConnectTimeout, slot, -libc::ETIME, 0);
        }
    }

    /// The socket of a connect turned writable (or failed): the connect's result.
    fn connected(&mut self, slot: usize) {
        let fd = self.slots[slot].fd;
        let mut err: libc::c_int = 0;
        let mut len = size_of::<libc::c_int>() as libc::socklen_t;
        // SAFETY: getsockopt writes one int into a live local.
        let r = unsafe { libc::getsockopt(fd, libc::SOL_SOCKET, libc::SO_ERROR, (&raw mut err).cast(), &raw mut len) };
        if r != 0 {
            err = io::Error::last_os_error().raw_os_error().unwrap_or(libc::EIO);
        }
        if err == libc::EINPROGRESS || err == libc::EALREADY {
            return;
        }
        self.slots[slot].connecting = None;
        self.post(Op::Connect, slot, -err, 0);
        self.post(Op::ConnectTimeout, slot, -libc::ECANCELED, 0);
        // Bytes (or the peer's close) may have come with the connect's own event.
        self.slots[slot].readable = true;
        self.read(slot);
    }

    /// Reads what the socket holds into buffers while its receive is armed: one completion a
    /// buffer. Stops at an empty socket, at the end of the stream, at an error, or when no
    /// buffer is free (a last completion, ENOBUFS, as io_uring's: the loop arms it again once
    /// buffers come back, and the bytes left are read then).
    fn read(&mut self, slot: usize) {
        loop {
            let s = &self.slots[slot];
            if s.recv == Recv::Off || !s.readable || s.fd < 0 {
                return;
            }
            let (fd, kind, recv) = (s.fd, s.kind, s.recv);
            if let Recv::Msg { name, control } = recv {
                return self.read_datagrams(slot, fd, name, control);
            }
            let Some(bid) = self.bufs.free.pop() else {
                self.slots[slot].recv = Recv::Off;
                self.post(Op::Recv, slot, -libc::ENOBUFS, 0);
                return;
            };
            let start = self.bufs.start(bid);
            let size = self.bufs.size;
            // SAFETY: the buffer is free (no view of it is lent out) and `size` long.
            let res = unsafe { libc::recv(fd, start.cast(), size, 0) };
            if res < 0 {
                let errno = errno();
                self.bufs.free.push(bid);
                if self.read_failed(slot, errno) {
                    continue;
                }
                return;
            }
            if kind == SocketKind::Stream && res == 0 {
                // The peer's close: no buffer, as io_uring ends a multishot receive.
                self.bufs.free.push(bid);
                self.slots[slot].recv = Recv::Off;
                self.post(Op::Recv, slot, 0, 0);
                return;
            }
            self.post(Op::Recv, slot, res as i32, F_BUFFER | u32::from(bid) << BUFFER_SHIFT | F_MORE);
            if kind == SocketKind::Stream && (res as usize) < size && !self.slots[slot].hung_up {
                // A stream read short of its buffer emptied the socket; new bytes, or the
                // peer's close, bring a new event.
                self.slots[slot].readable = false;
                return;
            }
        }
    }

    /// Reads the datagrams the socket holds, up to `DATAGRAMS` a recvmmsg, one to a buffer laid
    /// out as io_uring's multishot RECVMSG lays it out: its `io_uring_recvmsg_out`, `name` bytes
    /// of name room, `control` of control room, then the payload; one completion a datagram.
    /// A recvmmsg that fills less than it asked for emptied the socket (an error that arrives
    /// meanwhile brings its own event), so no call is spent to learn that, unless the socket
    /// failed: then it is read on, so the error is taken.
    fn read_datagrams(&mut self, slot: usize, fd: i32, name: usize, control: usize) {
        let payload_at = RECVMSG_OUT + name + control;
        let size = self.bufs.size;
        loop {
            let k = self.bufs.free.len().min(DATAGRAMS);
            if k == 0 || size < payload_at {
                self.slots[slot].recv = Recv::Off;
                self.post(Op::Recv, slot, -libc::ENOBUFS, 0);
                return;
            }
            let bids: [u16; DATAGRAMS] =
                std::array::from_fn(|i| if i < k { self.bufs.free.pop().unwrap_or(0) } else { 0 });
            // SAFETY: iovec and mmsghdr are plain old data; zeroed is their empty value.
            let mut iovs: [libc::iovec; DATAGRAMS] = unsafe { std::mem::zeroed() };
            let mut msgs: [libc::mmsghdr; DATAGRAMS] = unsafe { std::mem::zeroed() };
            for i in 0..k {
                let start = self.bufs.start(bids[i]);
                // SAFETY: every pointer is inside the free buffer at `start`, `size` bytes long,
                // and payload_at <= size (checked above).
                unsafe {
                    iovs[i] = libc::iovec { iov_base: start.add(payload_at).cast(), iov_len: size - payload_at };
                    let msg = &mut msgs[i].msg_hdr;
                    if name > 0 {
                        msg.msg_name = start.add(RECVMSG_OUT).cast();
                        msg.msg_namelen = name as _;
                    }
                    msg.msg_iov = &raw mut iovs[i];
                    msg.msg_iovlen = 1;
                    msg.msg_control = start.add(RECVMSG_OUT + name).cast();
                    msg.msg_controllen = control as _;
                }
            }
            // SAFETY: `msgs` holds k headers pointing into k free buffers, all live through the
            // call; no timeout.
            let n = unsafe { libc::recvmmsg(fd, msgs.as_mut_ptr(), k as _, 0, std::ptr::null_mut()) };
            let failed = (n < 0).then(errno);
            let got = n.max(0) as usize;
            for &bid in bids[got..k].iter().rev() {
                self.bufs.free.push(bid);
            }
            if let Some(errno) = failed {
                if self.read_failed(slot, errno) {
                    continue;
                }
                return;
            }
            for i in 0..got {
                let h = &msgs[i].msg_hdr;
                let out: [u32; 4] = [h.msg_namelen, h.msg_controllen as u32, msgs[i].msg_len, h.msg_flags as u32];
                let start = self.bufs.start(bids[i]);
                // SAFETY: the header's 16 bytes are the buffer's first, before its name room.
                unsafe { std::ptr::copy_nonoverlapping(out.as_ptr().cast::<u8>(), start, RECVMSG_OUT) };
                let used = (payload_at + msgs[i].msg_len as usize) as i32;
                self.post(Op::Recv, slot, used, F_BUFFER | u32::from(bids[i]) << BUFFER_SHIFT | F_MORE);
            }
            if got < k && !self.slots[slot].hung_up {
                self.slots[slot].readable = false;
                return;
            }
        }
    }

    /// A read failed with `errno`: an empty socket waits for its next event, anything but an
    /// interrupted call ends the receive. True when the read should be tried again.
    fn read_failed(&mut self, slot: usize, errno: i32) -> bool {
        match errno {
            libc::EAGAIN => self.slots[slot].readable = false,
            libc::EINTR => return true,
            _ => {
                self.slots[slot].recv = Recv::Off;
                self.post(Op::Recv, slot, -errno, 0);
            }
        }
        false
    }

    /// The socket has room: the sends waiting, in order, until it has none.
    fn write(&mut self, slot: usize) {
        let fd = self.slots[slot].fd;
        if fd < 0 {
            return;
        }
        while let Some(&pending) = self.slots[slot].sends.front() {
            let (sent, op, quiet_rest) = match pending {
                Pending::Bytes { ptr, len, quiet } => {
                    let sent = send_bytes(fd, ptr, len);
                    let rest = match sent {
                        // SAFETY: n < len, so the rest is inside the caller's bytes.
                        Ok(n) if quiet && n < len => {
                            Some(Pending::Bytes { ptr: unsafe { ptr.add(n) }, len: len - n, quiet })
                        }
                        _ => None,
                    };
                    (sent, if quiet { Op::SendQuiet } else { Op::Send }, rest)
                }
                Pending::Msg(msg) => {
                    // SAFETY: the caller of `sendmsg` keeps the header and what it points at.
                    let n = unsafe { libc::sendmsg(fd, msg, libc::MSG_NOSIGNAL) };
                    (if n < 0 { Err(errno()) } else { Ok(n as usize) }, Op::Send, None)
                }
            };
            match sent {
                Err(libc::EAGAIN) => return,
                Err(libc::EINTR) => continue,
                _ if quiet_rest.is_some() => {
                    self.slots[slot].sends[0] = quiet_rest.unwrap_or(pending);
                    continue;
                }
                // A quiet send that went whole posts nothing.
                Ok(_) if op == Op::SendQuiet => {}
                Ok(n) => self.post(op, slot, n as i32, 0),
                Err(e) => self.post(op, slot, -e, 0),
            }
            self.slots[slot].sends.pop_front();
        }
    }

    fn queue_send(&mut self, slot: usize, generation: u16, pending: Pending) {
        let s = &mut self.slots[slot];
        s.generation = generation;
        s.sends.push_back(pending);
        if s.sends.len() == 1 {
            self.write(slot);
        }
    }
}

fn errno() -> i32 {
    io::Error::last_os_error().raw_os_error().unwrap_or(libc::EIO)
}

/// One send(2) of `len` bytes at `ptr`; Err is the errno.
fn send_bytes(fd: i32, ptr: *const u8, len: usize) -> Result<usize, i32> {
    // SAFETY: the caller of the operation keeps the bytes valid until it completes.
    let n = unsafe { libc::send(fd, ptr.cast(), len, libc::MSG_NOSIGNAL) };
    if n < 0 { Err(errno()) } else { Ok(n as usize) }
}

impl Drop for Epoll {
    fn drop(&mut self) {
        self.close_doomed();
        for s in &self.slots {
            if s.fd >= 0 {
                // SAFETY: a socket this I/O owns.
                unsafe { libc::close(s.fd) };
            }
        }
        // SAFETY: the epoll descriptor is ours.
        unsafe { libc::close(self.epfd) };
    }
}

impl Io for Epoll {
    /// The close's own; the cancelled operations post theirs.
    const CLOSE_COMPLETIONS: u32 = 1;

    fn batch_room(&self) -> usize {
        EVENTS
    }

    fn adopt_socket(&mut self, slot: usize, fd: i32, kind: SocketKind) -> io::Result<()> {
        let mut event = libc::epoll_event {
            events: (libc::EPOLLIN | libc::EPOLLOUT | libc::EPOLLRDHUP | libc::EPOLLET) as u32,
            u64: slot as u64,
        };
        // SAFETY: a plain syscall on descriptors we own; the event is read during the call.
        if unsafe { libc::epoll_ctl(self.epfd, libc::EPOLL_CTL_ADD, fd, &raw mut event) } != 0 {
            let e = io::Error::last_os_error();
            // SAFETY: the caller handed `fd` over.
            unsafe { libc::close(fd) };
            return Err(e);
        }
        let s = &mut self.slots[slot];
        debug_assert!(s.fd < 0, "slot {slot} still has a socket");
        *s = Slot { fd, kind, ..Slot::new() };
        Ok(())
    }

    fn wait(&mut self, now: Instant, until: Instant) -> io::Result<()> {
        self.poll(until.saturating_duration_since(now))
    }

    fn sleep(&mut self, now: Instant, until: Instant) -> io::Result<()> {
        self.poll(until.saturating_duration_since(now))
    }

    fn ready(&mut self) -> usize {
        self.ready.len()
    }

    /// io_uring's hold sleeps in the kernel until the batch is there; epoll wakes for each
    /// ready socket, and a wake-up per response cost 4 times io_uring's CPU per request over
    /// h2c. So the thread sleeps for as long as the rest of the batch should take at the pace
    /// the received completions came at, looks, and sleeps again while the hold lasts. After a
    /// hold that ran out (the completions come slower than a batch a hold, as where the server
    /// sets the pace) it sleeps through its whole limit at once, as io_uring's does: sleeping
    /// in steps cost h2c 2.3 sleeps a hold and a third more CPU per request than io_uring.
    fn hold(&mut self, batch: usize, limit: Duration) -> io::Result<()> {
        let end = Instant::now() + limit;
        loop {
            let ready = self.ready.len();
            let now = Instant::now();
            if ready >= batch || now >= end {
                self.ran_out = ready < batch;
                return Ok(());
            }
            let rest = if self.ran_out {
                end - now
            } else {
                let pace = now.saturating_duration_since(self.taken_at) / self.received.max(1) as u32;
                pace.saturating_mul((batch - ready) as u32)
            };
            std::thread::sleep(rest.max(MIN_HOLD_SLEEP).min(end - now));
            self.poll(Duration::ZERO)?;
        }
    }

    fn completions(&mut self, into: &mut Vec<Completion>) {
        self.taken_at = Instant::now();
        self.received = 0;
        into.clear();
        std::mem::swap(into, &mut self.ready);
    }

    unsafe fn connect(
        &mut self,
        slot: usize,
        generation: u16,
        addr: *const libc::sockaddr,
        len: libc::socklen_t,
    ) -> io::Result<()> {
        let s = &mut self.slots[slot];
        s.generation = generation;
        // SAFETY: the caller keeps `addr` valid for the call (it is used only during it).
        let r = unsafe { libc::connect(s.fd, addr, len) };
        let err = if r == 0 { 0 } else { errno() };
        if err == libc::EINPROGRESS {
            let at = Instant::now() + self.connect_timeout;
            s.connecting = Some(at);
            self.deadlines.push(Reverse((at, slot, generation)));
            return Ok(());
        }
        self.post(Op::Connect, slot, -err, 0);
        self.post(Op::ConnectTimeout, slot, -libc::ECANCELED, 0);
        Ok(())
    }

    fn recv_multishot(&mut self, slot: usize, generation: u16) -> io::Result<()> {
        self.arm(slot, generation, Recv::Plain);
        Ok(())
    }

    unsafe fn recvmsg_multishot(&mut self, slot: usize, generation: u16, msg: *const libc::msghdr) -> io::Result<()> {
        // SAFETY: the caller keeps `msg` valid; only its two lengths are read. (The control
        // length is a usize with glibc and a u32 with musl.)
        #[allow(clippy::unnecessary_cast)]
        let (name, control) = unsafe { ((*msg).msg_namelen as usize, (*msg).msg_controllen as usize) };
        self.arm(slot, generation, Recv::Msg { name, control });
        Ok(())
    }

    unsafe fn sendmsg(&mut self, slot: usize, generation: u16, msg: *const libc::msghdr) -> io::Result<()> {
        self.queue_send(slot, generation, Pending::Msg(msg));
        Ok(())
    }

    unsafe fn send(&mut self, slot: usize, generation: u16, bytes: &[u8]) -> io::Result<()> {
        self.queue_send(slot, generation, Pending::Bytes { ptr: bytes.as_ptr(), len: bytes.len(), quiet: false });
        Ok(())
    }

    unsafe fn send_quiet(&mut self, slot: usize, generation: u16, bytes: &[u8]) -> io::Result<()> {
        self.queue_send(slot, generation, Pending::Bytes { ptr: bytes.as_ptr(), len: bytes.len(), quiet: true });
        Ok(())
    }

    fn cancel_and_close(&mut self, slot: usize, generation: u16) -> io::Result<()> {
        let s = &mut self.slots[slot];
        s.generation = generation;
        let connecting = s.connecting.take().is_some();
        let receiving = std::mem::replace(&mut s.recv, Recv::Off) != Recv::Off;
        // A quiet send posts nothing when cancelled: the loop never counted it.
        let sends = s.sends.iter().filter(|p| !matches!(p, Pending::Bytes { quiet: true, .. })).count();
        s.sends.clear();
        s.readable = false;
        let fd = std::mem::replace(&mut s.fd, -1);
        if fd >= 0 {
            // Closed at the next wait, which also takes it out of the epoll set.
            self.doomed.push(fd);
        }
        if connecting {
            self.post(Op::Connect, slot, -libc::ECANCELED, 0);
            self.post(Op::ConnectTimeout, slot, -libc::ECANCELED, 0);
        }
        if receiving {
            self.post(Op::Recv, slot, -libc::ECANCELED, 0);
        }
        for _ in 0..sends {
            self.post(Op::Send, slot, -libc::ECANCELED, 0);
        }
        self.post(Op::Close, slot, 0, 0);
        Ok(())
    }

    fn bytes<'a>(&self, bid: u16, len: usize) -> &'a [u8] {
        // SAFETY: in bounds (bid < count, len at most a buffer); the memory never moves or
        // frees while the loop runs, and no read goes into a buffer lent out.
        unsafe { std::slice::from_raw_parts(self.bufs.start(bid), len.min(self.bufs.size)) }
    }

    unsafe fn bytes_mut<'a>(&self, bid: u16, part: &[u8]) -> &'a mut [u8] {
        let buffer = self.bufs.start(bid) as usize;
        let start = part.as_ptr() as usize;
        assert!(start >= buffer && start + part.len() <= buffer + self.bufs.size, "not a part of buffer {bid}");
        // SAFETY: in bounds (checked above); the caller's contract covers every other view.
        unsafe { std::slice::from_raw_parts_mut(start as *mut u8, part.len()) }
    }

    fn recycle(&mut self, bid: u16) {
        self.bufs.free.push(bid);
    }

    fn publish(&mut self) {}
}

impl Epoll {
    fn arm(&mut self, slot: usize, generation: u16, recv: Recv) {
        let s = &mut self.slots[slot];
        s.generation = generation;
        s.recv = recv;
        if s.readable {
            // Bytes were left in the socket when the last receive ended (no buffer free).
            self.again.push(slot);
        }
    }
}

#[cfg(test)]
mod tests;
