//! Ring plumbing for one thread: operation tokens, submitting, the one wait with its deadline,
//! collecting completions, and building the operations the loop submits (connect with its
//! timeout, multishot receive or RECVMSG, sends, cancel-and-close; for UDP, SENDMSG, see
//! `udp.rs`). Sockets are fixed-file slots here; no protocol is known.

use std::io;
use std::time::{Duration, Instant};

use io_uring::types::{CancelBuilder, Fixed, SubmitArgs, Timespec};
use io_uring::{CompletionQueue, IoUring, SubmissionQueue, Submitter, opcode, squeue};

use crate::ring::build_ring;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Op {
    Connect = 1,
    ConnectTimeout = 2,
    Recv = 3,
    Send = 4,
    Cancel = 5,
    Close = 6,
    /// A send whose success posts no completion (see `Uring::send_quiet`).
    SendQuiet = 7,
}

/// A completion's user data: the operation, the connection slot and the socket's generation,
/// so completions of an earlier socket on the same slot are recognised.
pub(super) fn token(op: Op, slot: usize, generation: u16) -> u64 {
    (op as u64) << 48 | u64::from(generation) << 32 | slot as u64
}

pub(super) fn untoken(data: u64) -> Option<(Op, usize, u16)> {
    let op = match data >> 48 {
        1 => Op::Connect,
        2 => Op::ConnectTimeout,
        3 => Op::Recv,
        4 => Op::Send,
        5 => Op::Cancel,
        6 => Op::Close,
        7 => Op::SendQuiet,
        _ => return None,
    };
    Some((op, (data & 0xffff_ffff) as usize, (data >> 32) as u16))
}

/// One completion: user data, result, flags.
pub(super) type Completion = (u64, i32, u32);

pub(super) struct Uring<'r> {
    // The ring's parts, held for the whole run so the registered ring fd is used by every
    // enter (the registration lives in the Submitter).
    submitter: Submitter<'r>,
    sq: SubmissionQueue<'r>,
    cq: CompletionQueue<'r>,
    connect_timespec: Timespec,
}

impl<'r> Uring<'r> {
    /// The ring for `connections` connections: room for a few operations each, within the
    /// kernel's limits (asking for more fails the set-up with EINVAL).
    ///
    /// Beyond about 16,000 connections on a thread, more operations can be in flight than the
    /// completion queue holds. Nothing is lost then: the kernel keeps the completions that do
    /// not fit on its overflow list (IORING_FEAT_NODROP, Linux 5.5+) and moves them into the
    /// queue as `drain` makes room, on the next wait, which every turn of the loop does. A
    /// multishot receive is never overflowed: when its completion does not fit, the kernel ends
    /// it with that completion (data included, no MORE flag), and the loop's receive handler arms a new one. Only
    /// if the kernel cannot allocate an overflow entry are completions dropped, and then the
    /// next wait fails (EBADR) and so does the thread: an error, not a count gone wrong.
    pub(super) fn ring(connections: usize) -> io::Result<IoUring> {
        // IORING_MAX_ENTRIES and IORING_MAX_CQ_ENTRIES.
        const SQ_MAX: usize = 32_768;
        const CQ_MAX: usize = 2 * SQ_MAX;
        let entries = connections.saturating_mul(4).saturating_add(64).next_power_of_two().min(SQ_MAX);
        build_ring(entries as u32, (entries * 4).min(CQ_MAX) as u32).map(|(ring, _)| ring)
    }

    /// Takes `ring` apart for the run, with `slots` fixed-file slots for sockets.
    pub(super) fn new(ring: &'r mut IoUring, slots: u32, connect_timeout: Duration) -> io::Result<Self> {
        let (mut submitter, sq, cq) = ring.split();
        // Not fatal: without it each enter looks the ring fd up, which only costs a little.
        let _ = submitter.register_ring_fd();
        submitter.register_files_sparse(slots)?;
        Ok(Uring { submitter, sq, cq, connect_timespec: Timespec::from(connect_timeout) })
    }

    pub(super) fn submitter(&self) -> &Submitter<'r> {
        &self.submitter
    }

    /// Room for this many completions at once: the size of one batch.
    pub(super) fn sq_entries(&self) -> usize {
        self.sq.capacity()
    }

    /// Puts socket `fd` into `slot`; the slot keeps its own reference, so the caller closes `fd`.
    pub(super) fn register_socket(&mut self, slot: usize, fd: i32) -> io::Result<()> {
        self.submitter.register_files_update(slot as u32, &[fd]).map(|_| ())
    }

    /// Submits what is queued and waits until `until` for the first completion.
    pub(super) fn wait(&mut self, now: Instant, until: Instant) -> io::Result<()> {
        self.enter_until(1, now, until)
    }

    /// Submits what is queued and sleeps until `until`, whatever completes meanwhile (unless a
    /// batch's worth does: the completion queue is not to overflow).
    pub(super) fn sleep(&mut self, now: Instant, until: Instant) -> io::Result<()> {
        let batch = self.sq_entries();
        self.enter_until(batch, now, until)
    }

    /// Completions ready to be collected.
    pub(super) fn ready(&mut self) -> usize {
        self.cq.sync();
        self.cq.len()
    }

    /// Holds out up to `limit` until `batch` completions are ready, counting those ready now.
    pub(super) fn hold(&mut self, batch: usize, limit: Duration) -> io::Result<()> {
        let ts = Timespec::from(limit);
        self.enter(batch, &SubmitArgs::new().timespec(&ts))
    }

    /// Submits what is queued and waits until `want` completions are ready or `until` passes.
    fn enter_until(&mut self, want: usize, now: Instant, until: Instant) -> io::Result<()> {
        // A zero timeout would return at once without waiting for even one completion.
        let ts = Timespec::from(until.saturating_duration_since(now).max(Duration::from_micros(1)));
        self.enter(want, &SubmitArgs::new().timespec(&ts))
    }

    /// Submits what is queued and waits as `args` says; a timeout or a signal is not an error.
    fn enter(&mut self, want: usize, args: &SubmitArgs<'_, '_>) -> io::Result<()> {
        self.sq.sync();
        match self.submitter.submit_with_args(want, args) {
            Ok(_) => Ok(()),
            Err(e) if matches!(e.raw_os_error(), Some(libc::ETIME | libc::EINTR | libc::EBUSY)) => Ok(()),
            Err(e) => Err(e),
        }
    }

    /// Hands what is queued to the kernel without waiting, to make room in the queue.
    fn submit_now(&mut self) -> io::Result<()> {
        self.sq.sync();
        self.submitter.submit()?;
        self.sq.sync();
        Ok(())
    }

    /// Moves every completion that is ready into `into` (cleared first).
    pub(super) fn completions(&mut self, into: &mut Vec<Completion>) {
        into.clear();
        self.cq.sync();
        into.extend((&mut self.cq).map(|c| (c.user_data(), c.result(), c.flags())));
        self.cq.sync();
    }

    /// # Safety
    /// Whatever `sqe` points at must stay valid until its operation completes.
    unsafe fn push(&mut self, sqe: squeue::Entry) -> io::Result<()> {
        // SAFETY: the caller keeps the entry's memory alive.
        while unsafe { self.sq.push(&sqe) }.is_err() {
            self.submit_now()?;
        }
        Ok(())
    }

    /// Pushes two linked entries; they must reach the kernel in the same submit, or the link
    /// is lost.
    ///
    /// # Safety
    /// As for `push`, for both entries.
    unsafe fn push_pair(&mut self, first: squeue::Entry, second: squeue::Entry) -> io::Result<()> {
        // SAFETY: passed on to the caller.
        unsafe { self.push_chain(&[first, second]) }
    }

    /// Pushes linked entries; they must reach the kernel in the same submit, or the link is
    /// lost.
    ///
    /// # Safety
    /// As for `push`, for every entry.
    unsafe fn push_chain(&mut self, chain: &[squeue::Entry]) -> io::Result<()> {
        if self.sq.capacity() - self.sq.len() < chain.len() {
            self.submit_now()?;
        }
        for sqe in chain {
            // SAFETY: passed on to the caller.
            unsafe { self.push(sqe.clone())? };
        }
        Ok(())
    }

    /// Connects `slot` to `addr`, linked to the connect timeout: two operations.
    ///
    /// # Safety
    /// `addr` (of `len` bytes) must stay valid until the connect completes.
    pub(super) unsafe fn connect(
        &mut self,
        slot: usize,
        generation: u16,
        addr: *const libc::sockaddr,
        len: libc::socklen_t,
    ) -> io::Result<()> {
        let connect = opcode::Connect::new(Fixed(slot as u32), addr, len)
            .build()
            .flags(squeue::Flags::IO_LINK)
            .user_data(token(Op::Connect, slot, generation));
        let timeout = opcode::LinkTimeout::new(&self.connect_timespec).build().user_data(token(
            Op::ConnectTimeout,
            slot,
            generation,
        ));
        // SAFETY: the caller keeps `addr` alive; the timespec lives in `self`, which outlives
        // every operation (the loop drains the ring before it drops).
        unsafe { self.push_pair(connect, timeout) }
    }

    /// One multishot receive on `slot` into buffer group `group`.
    pub(super) fn recv_multishot(&mut self, slot: usize, generation: u16, group: u16) -> io::Result<()> {
        let sqe =
            opcode::RecvMulti::new(Fixed(slot as u32), group).build().user_data(token(Op::Recv, slot, generation));
        // SAFETY: the kernel picks the memory from the provided-buffer ring, which outlives it.
        unsafe { self.push(sqe) }
    }

    /// One multishot RECVMSG on socket `slot` into buffer group `group`: each completion is
    /// stream bytes, or one datagram (or GRO batch), in a buffer laid out as `msg` says (see
    /// `recvmsg::RecvMsg`).
    ///
    /// # Safety
    /// `msg` must stay valid until the receive has ended (a completion without MORE).
    pub(super) unsafe fn recvmsg_multishot(
        &mut self,
        slot: usize,
        generation: u16,
        group: u16,
        msg: *const libc::msghdr,
    ) -> io::Result<()> {
        let sqe = opcode::RecvMsgMulti::new(Fixed(slot as u32), msg, group).build().user_data(token(
            Op::Recv,
            slot,
            generation,
        ));
        // SAFETY: passed on to the caller; the payload goes into the provided-buffer ring.
        unsafe { self.push(sqe) }
    }

    /// SENDMSG on `slot` (UDP with GSO); completes as a send, with `Op::Send`'s token.
    ///
    /// # Safety
    /// `msg`, and everything it points at, must stay valid and unchanged until it completes.
    pub(super) unsafe fn sendmsg(&mut self, slot: usize, generation: u16, msg: *const libc::msghdr) -> io::Result<()> {
        let sqe = opcode::SendMsg::new(Fixed(slot as u32), msg)
            .flags(libc::MSG_NOSIGNAL as u32)
            .build()
            .user_data(token(Op::Send, slot, generation));
        // SAFETY: passed on to the caller.
        unsafe { self.push(sqe) }
    }

    /// Sends `bytes` on `slot`; completes with how many were written.
    ///
    /// # Safety
    /// `bytes` must stay valid and unchanged until the send completes.
    pub(super) unsafe fn send(&mut self, slot: usize, generation: u16, bytes: &[u8]) -> io::Result<()> {
        let sqe = opcode::Send::new(Fixed(slot as u32), bytes.as_ptr(), bytes.len() as u32)
            .flags(libc::MSG_NOSIGNAL)
            .build()
            .user_data(token(Op::Send, slot, generation));
        // SAFETY: passed on to the caller.
        unsafe { self.push(sqe) }
    }

    /// Sends all of `bytes` on `slot`, posting a completion only if it fails. Only for a few
    /// bytes on a socket with nothing else being sent: the kernel then takes them whole at
    /// submit, and MSG_WAITALL covers the rest.
    ///
    /// # Safety
    /// `bytes` must stay valid and unchanged until the kernel has taken them: at submit when
    /// the socket has room, else whenever it gets room, which no completion reports; a cancel
    /// of the slot's operations ends the send either way.
    pub(super) unsafe fn send_quiet(&mut self, slot: usize, generation: u16, bytes: &[u8]) -> io::Result<()> {
        let sqe = opcode::Send::new(Fixed(slot as u32), bytes.as_ptr(), bytes.len() as u32)
            .flags(libc::MSG_NOSIGNAL | libc::MSG_WAITALL)
            .build()
            .flags(squeue::Flags::SKIP_SUCCESS)
            .user_data(token(Op::SendQuiet, slot, generation));
        // SAFETY: passed on to the caller.
        unsafe { self.push(sqe) }
    }

    /// Cancels every operation on `slot` and then closes it: [`CLOSE_COMPLETIONS`] completions.
    ///
    /// Each cancel names one kind of operation by its user data, which the kernel finds in a
    /// hash table. A cancel by file (`CancelBuilder::fd`) walks every pending poll of the ring
    /// instead: closing 10,000 connections on one thread that way took over ten seconds, most
    /// of a run's end (closing 5,000 took 0.5 s).
    pub(super) fn cancel_and_close(&mut self, slot: usize, generation: u16) -> io::Result<()> {
        let cancel = |op| {
            // A hard link: the next runs whether or not there was anything to cancel.
            opcode::AsyncCancel2::new(CancelBuilder::user_data(token(op, slot, generation)).all())
                .build()
                .flags(squeue::Flags::IO_HARDLINK)
                .user_data(token(Op::Cancel, slot, generation))
        };
        let [connect, recv, send, quiet] = CANCELLED.map(cancel);
        let close = opcode::Close::new(Fixed(slot as u32)).build().user_data(token(Op::Close, slot, generation));
        // SAFETY: none points at memory.
        unsafe { self.push_chain(&[connect, recv, send, quiet, close]) }
    }
}

/// The kinds of operation a connection may have pending when it is closed: each gets a cancel.
const CANCELLED: [Op; 4] = [Op::Connect, Op::Recv, Op::Send, Op::SendQuiet];

/// Completions one [`Uring::cancel_and_close`] posts: a cancel per kind of operation, and the
/// close.
pub(super) const CLOSE_COMPLETIONS: u32 = CANCELLED.len() as u32 + 1;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_round_trip() {
        for op in [Op::Connect, Op::ConnectTimeout, Op::Recv, Op::Send, Op::Cancel, Op::Close, Op::SendQuiet] {
            assert_eq!(untoken(token(op, 4095, 65535)), Some((op, 4095, 65535)));
        }
        assert_eq!(untoken(0), None);
    }
}
