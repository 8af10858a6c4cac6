//! What one UDP send with GSO (UDP_SEGMENT) may carry: the kernel's UDP_MAX_SEGMENTS (before
//! Linux 6.9) and a datagram's 16-bit length. The loop sends within both (`driver/udp.rs`), and
//! QUIC makes its batches to fit (`quic::Config`); a leaf of its own, so that neither takes it
//! from the other.

pub(crate) const GSO_MAX_SEGMENTS: usize = 64;
pub(crate) const GSO_MAX_BYTES: usize = 65_000;
