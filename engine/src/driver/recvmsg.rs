//! Multishot RECVMSG into the provided-buffer ring, for every socket: each completion's buffer
//! holds the kernel's `io_uring_recvmsg_out` header, room for one control message, then the
//! payload. A TCP socket's control message is the kernel's receive timestamp (SO_TIMESTAMPNS),
//! so a response's latency ends when its bytes reached the socket, not when the loop got to
//! them; a UDP socket's is GRO's segment size.

use std::time::Duration;

use io_uring::types::RecvMsgOut;

/// Room for one control message: a timespec (SCM_TIMESTAMPNS) or an int (UDP_GRO), each
/// CMSG_SPACE of its data, at most 32 bytes on 64-bit.
const CONTROL_LEN: usize = 32;
/// What a receive buffer holds besides the payload: the kernel's header and our control room.
#[cfg_attr(not(test), allow(dead_code))]
pub(crate) const BUF_OVERHEAD: usize = 16 + CONTROL_LEN;

/// What one RECVMSG completion's buffer holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Received<'a> {
    /// Bytes of a stream, or one datagram, or several of `segment_size` bytes (the last may be
    /// shorter) under GRO. Empty on a stream socket: the peer closed it.
    pub payload: &'a [u8],
    pub segment_size: Option<usize>,
    /// The datagram (or GRO batch) did not fit the buffer: `payload` is its start only.
    pub truncated: bool,
    /// When the last of these bytes reached the host (CLOCK_REALTIME), on a socket that asked
    /// for it.
    pub timestamp: Option<Duration>,
}

/// A thread's multishot RECVMSG: the message header every receive is armed with (no name, the
/// sockets being connected; room for one control message), kept at one address for as long as
/// receives may use it.
pub(crate) struct RecvMsg {
    msg: Box<libc::msghdr>,
}

impl RecvMsg {
    pub(crate) fn new() -> Self {
        // SAFETY: msghdr is plain old data; all-zero is a valid value.
        let mut msg: Box<libc::msghdr> = Box::new(unsafe { std::mem::zeroed() });
        // With buffer selection the kernel only reads the lengths: where name and control go
        // is decided in the provided buffer.
        msg.msg_controllen = CONTROL_LEN as _;
        RecvMsg { msg }
    }

    pub(super) fn header(&self) -> *const libc::msghdr {
        &raw const *self.msg
    }

    /// Reads a completion's buffer (the first `res` bytes of it); None if the kernel's layout
    /// is not there.
    pub(crate) fn parse<'a>(&self, buf: &'a [u8]) -> Option<Received<'a>> {
        let out = RecvMsgOut::parse(buf, &self.msg).ok()?;
        let truncated = out.is_payload_truncated();
        // RecvMsgOut lends the payload for its own lifetime only; it is a part of `buf`.
        let payload = out.payload_data();
        let start = (payload.as_ptr() as usize).checked_sub(buf.as_ptr() as usize)?;
        let payload = buf.get(start..start + payload.len())?;
        let (mut segment_size, mut timestamp) = (None, None);
        for (level, kind, data) in ControlMessages(out.control_data()) {
            match (level, kind) {
                (libc::SOL_UDP, libc::UDP_GRO) => segment_size = gro_segment(data),
                (libc::SOL_SOCKET, libc::SCM_TIMESTAMPNS) => timestamp = timespec(data),
                _ => {}
            }
        }
        Some(Received { payload, segment_size, truncated, timestamp })
    }
}

/// The control messages in a buffer: (level, type, data) of each `struct cmsghdr`, a size_t
/// length, then level and type (ints); the data follows, aligned to size_t, and the next
/// header after the data, aligned the same way. Stops at the first malformed header.
struct ControlMessages<'a>(&'a [u8]);

impl<'a> Iterator for ControlMessages<'a> {
    type Item = (i32, i32, &'a [u8]);

    fn next(&mut self) -> Option<Self::Item> {
        const WORD: usize = size_of::<usize>();
        const HEADER: usize = WORD + 8;
        let control = self.0;
        let len = usize::from_ne_bytes(control.get(..WORD)?.try_into().ok()?);
        let level = i32::from_ne_bytes(control.get(WORD..WORD + 4)?.try_into().ok()?);
        let kind = i32::from_ne_bytes(control.get(WORD + 4..HEADER)?.try_into().ok()?);
        if len < HEADER {
            return None;
        }
        let data = control.get(HEADER..len)?;
        self.0 = control.get(len.next_multiple_of(WORD)..).unwrap_or_default();
        Some((level, kind, data))
    }
}

/// UDP_GRO's data: the segment size, an int.
fn gro_segment(data: &[u8]) -> Option<usize> {
    let size = i32::from_ne_bytes(data.get(..4)?.try_into().ok()?);
    usize::try_from(size).ok().filter(|&s| s > 0)
}

/// SCM_TIMESTAMPNS's data: a `struct timespec` (seconds, then nanoseconds, each 64-bit here).
fn timespec(data: &[u8]) -> Option<Duration> {
    let secs = i64::from_ne_bytes(data.get(..8)?.try_into().ok()?);
    let nanos = i64::from_ne_bytes(data.get(8..16)?.try_into().ok()?);
    Some(Duration::new(u64::try_from(secs).ok()?, u32::try_from(nanos).ok().filter(|&n| n < 1_000_000_000)?))
}

#[cfg(test)]
mod tests;
