//! UDP on the ring, for QUIC: one connected socket per connection in a fixed-file slot, one
//! multishot RECVMSG into the provided-buffer ring (UDP GRO where the kernel has it: several
//! datagrams in one buffer, with their size in a control message), and SENDMSG with a
//! UDP_SEGMENT control message (GSO: one send, many datagrams), falling back to one plain send
//! per datagram on a socket whose kernel refuses GSO.
//!
//! The operations complete as their TCP counterparts do and carry the same tokens: a multishot
//! RECVMSG is an `Op::Recv` (a buffer per completion, re-armed when a completion comes without
//! the MORE flag) and each send an `Op::Send`, so the loop's bookkeeping holds for both. A
//! connected UDP socket also reports the peer's ICMP errors: a port where nothing listens ends
//! the receive with ECONNREFUSED, well before any connect timeout.

use std::io;
use std::net::SocketAddr;

use super::ops::{Io, SocketKind};
use super::socket::encode_sockaddr;
use super::source::bind;
use crate::gso::{GSO_MAX_BYTES, GSO_MAX_SEGMENTS};

/// A provided buffer for UDP must hold the kernel's header, our control message and a whole GRO
/// batch (up to 64 KiB): a batch that does not fit is cut short (MSG_TRUNC), and the datagrams
/// past the cut are lost, so GRO is only for buffers of this size. It also holds any one
/// datagram UDP can carry (65,527 bytes under IPv6), so with it nothing is ever cut short.
pub(crate) const GRO_BUF_SIZE: usize = 65_536 + 64;
/// The smallest UDP receive buffer `VOLLEY_UDP_RECV_BUFFER` may ask for: the kernel's header,
/// our control message and the largest datagram QUIC lets a peer send us (quinn-proto's
/// max_udp_payload_size, 1472 bytes), rounded up.
pub(crate) const MIN_BUF_SIZE: usize = 2048;

/// A new non-blocking UDP socket connected to `addr`, from `source` when given (see
/// `source.rs`), with GRO asked for when `gro` (and the kernel takes it): the descriptor, and
/// whether GRO is on. A UDP connect sends nothing (it only fixes the peer), so it is a plain
/// system call rather than a ring operation.
pub(super) fn new_connected_socket(
    addr: &SocketAddr,
    source: Option<&SocketAddr>,
    gro: bool,
) -> io::Result<(i32, bool)> {
    let domain = if addr.is_ipv4() { libc::AF_INET } else { libc::AF_INET6 };
    let (sockaddr, len) = encode_sockaddr(addr);
    // SAFETY: plain syscalls on a descriptor we own; the address outlives the call.
    unsafe {
        let fd = libc::socket(domain, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC | libc::SOCK_NONBLOCK, 0);
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        let bound = source.map_or(Ok(()), |source| bind(fd, source));
        if let Err(e) = bound {
            libc::close(fd);
            return Err(e);
        }
        if libc::connect(fd, (&raw const sockaddr).cast(), len) != 0 {
            let e = io::Error::last_os_error();
            libc::close(fd);
            return Err(e);
        }
        let gro = gro && set_int(fd, libc::SOL_UDP, libc::UDP_GRO, 1);
        Ok((fd, gro))
    }
}

/// Opens a UDP socket connected to `addr`, from `source` when given, into the I/O's `slot`;
/// says whether GRO is on.
pub(super) fn open_connected(
    io: &mut impl Io,
    slot: usize,
    addr: &SocketAddr,
    source: Option<&SocketAddr>,
    gro: bool,
) -> io::Result<bool> {
    let (fd, gro) = new_connected_socket(addr, source, gro)?;
    io.adopt_socket(slot, fd, SocketKind::Datagram).map(|()| gro)
}

fn set_int(fd: i32, level: libc::c_int, name: libc::c_int, value: libc::c_int) -> bool {
    // SAFETY: setsockopt reads one int from a live local.
    unsafe {
        libc::setsockopt(fd, level, name, (&raw const value).cast(), size_of::<libc::c_int>() as libc::socklen_t) == 0
    }
}

/// One connection's UDP sends: the SENDMSG header, its iovec and its UDP_SEGMENT control
/// message, boxed so they stay where the kernel reads them until the send completes, and
/// whether this socket still takes GSO.
pub(crate) struct UdpSend {
    parts: Box<SendParts>,
    gso: bool,
}

#[repr(C)]
struct SendParts {
    msg: libc::msghdr,
    iov: libc::iovec,
    /// u64s, for the alignment control messages need.
    control: [u64; 4],
}

impl UdpSend {
    pub(crate) fn new() -> Self {
        // SAFETY: plain old data; all-zero is a valid value (null pointers, zero lengths).
        UdpSend { parts: Box::new(unsafe { std::mem::zeroed() }), gso: true }
    }

    /// Whether sends still go out as GSO batches.
    #[cfg_attr(not(test), allow(dead_code))]
    pub(crate) fn gso(&self) -> bool {
        self.gso
    }

    /// Sends `bytes`, datagrams of `segment_size` bytes (the last may be shorter), on `slot`:
    /// one SENDMSG with UDP_SEGMENT, or, once GSO is off, for a single datagram or for a batch
    /// beyond GSO's limits, one plain send per datagram. Returns how many operations were queued, each an `Op::Send` with a
    /// completion of its own.
    ///
    /// # Safety
    /// `bytes` must stay valid and unchanged, and `self` in place, until those complete.
    pub(crate) unsafe fn send(
        &mut self,
        io: &mut impl Io,
        slot: usize,
        generation: u16,
        bytes: &[u8],
        segment_size: usize,
    ) -> io::Result<u32> {
        let segment_size = segment_size.max(1);
        // A batch beyond the kernel's limits would be refused (EINVAL) as if GSO were missing.
        let fits = bytes.len() <= GSO_MAX_BYTES && bytes.len().div_ceil(segment_size) <= GSO_MAX_SEGMENTS;
        if !self.gso || !fits || bytes.len() <= segment_size {
            // SAFETY: passed on to the caller.
            return unsafe { io.send_datagrams(slot, generation, bytes, segment_size) };
        }
        let msg = self.prepare(bytes, segment_size);
        // SAFETY: `msg` points into `self.parts`, which the caller keeps in place, and at
        // `bytes`, which the caller keeps valid.
        unsafe { io.sendmsg(slot, generation, msg)? };
        Ok(1)
    }

    /// A GSO send completed with `res`: whether the kernel refused GSO itself (EIO from a
    /// device without checksum offload, EINVAL from a socket or kernel that cannot segment),
    /// in which case GSO is turned off for this socket and the caller sends the same bytes
    /// again, datagram by datagram.
    pub(crate) fn refused(&mut self, res: i32) -> bool {
        let refused = self.gso && (res == -libc::EIO || res == -libc::EINVAL);
        if refused {
            self.gso = false;
        }
        refused
    }

    fn prepare(&mut self, bytes: &[u8], segment_size: usize) -> *const libc::msghdr {
        let p = &mut *self.parts;
        p.iov = libc::iovec { iov_base: bytes.as_ptr() as *mut libc::c_void, iov_len: bytes.len() };
        p.control = [0; 4];
        // SAFETY: msghdr is plain old data.
        p.msg = unsafe { std::mem::zeroed() };
        p.msg.msg_iov = &raw mut p.iov;
        p.msg.msg_iovlen = 1;
        p.msg.msg_control = p.control.as_mut_ptr().cast();
        // SAFETY: CMSG_SPACE is arithmetic.
        p.msg.msg_controllen = unsafe { libc::CMSG_SPACE(size_of::<u16>() as u32) } as _;
        // SAFETY: the control buffer is 32 bytes, aligned, and room for CMSG_SPACE(2) (24 on
        // 64-bit); CMSG_FIRSTHDR points into it.
        unsafe {
            let cmsg = libc::CMSG_FIRSTHDR(&raw const p.msg);
            (*cmsg).cmsg_level = libc::SOL_UDP;
            (*cmsg).cmsg_type = libc::UDP_SEGMENT;
            (*cmsg).cmsg_len = libc::CMSG_LEN(size_of::<u16>() as u32) as _;
            // A datagram is at most 64 KiB, so its size fits UDP_SEGMENT's u16.
            std::ptr::write_unaligned(libc::CMSG_DATA(cmsg).cast::<u16>(), segment_size.min(65_535) as u16);
        }
        &raw const p.msg
    }
}

#[cfg(test)]
mod tests;
