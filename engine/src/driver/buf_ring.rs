//! A provided-buffer ring: the kernel picks a receive buffer for each multishot completion
//! from here, and the loop hands it back once its bytes are consumed.

use std::io;
use std::sync::atomic::{AtomicU16, Ordering};

use io_uring::Submitter;
use io_uring::types::BufRingEntry;

pub(crate) struct BufRing {
    /// `entries` ring slots, page-aligned as the kernel requires (from mmap).
    ring: *mut BufRingEntry,
    ring_bytes: usize,
    mask: u16,
    /// `entries * buf_size` bytes from a boxed slice, owned here (freed on drop): the kernel
    /// writes into them, and TLS decrypts in place there, so they are reached by pointer.
    buffers: *mut [u8],
    buf_size: usize,
    tail: u16,
    pub(crate) group: u16,
}

impl BufRing {
    /// `entries` must be a power of two, at most 32768.
    pub(crate) fn new(submitter: &Submitter<'_>, entries: u16, buf_size: usize, group: u16) -> io::Result<Self> {
        assert!(entries.is_power_of_two());
        let ring_bytes = entries as usize * std::mem::size_of::<BufRingEntry>();
        // SAFETY: an anonymous private mapping; checked for failure below.
        let ptr = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                ring_bytes,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        if ptr == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        let mut ring = BufRing {
            ring: ptr.cast(),
            ring_bytes,
            mask: entries - 1,
            buffers: Box::into_raw(vec![0u8; entries as usize * buf_size].into_boxed_slice()),
            buf_size,
            tail: 0,
            group,
        };
        for bid in 0..entries {
            ring.push(bid);
        }
        ring.publish();
        // SAFETY: the ring memory lives until `self` drops, after the io_uring that uses it
        // (the event loop drops its ring first).
        unsafe { submitter.register_buf_ring_with_flags(ring.ring as u64, entries, group, 0)? };
        Ok(ring)
    }

    /// The bytes the kernel put into buffer `bid`.
    ///
    /// The slice is detached from `self` so the loop can process it while updating other
    /// state; it stays valid until `bid` is recycled, which the caller does afterwards.
    pub(crate) fn bytes<'a>(&self, bid: u16, len: usize) -> &'a [u8] {
        let start = bid as usize * self.buf_size;
        let len = len.min(self.buf_size);
        // SAFETY: in bounds (bid < entries, len <= buf_size); `buffers` never moves or frees
        // while the loop runs.
        unsafe { std::slice::from_raw_parts(self.buffers.cast::<u8>().add(start), len) }
    }

    /// `part`, which `bytes` lent from buffer `bid`, to be changed in place (TLS decrypts
    /// records where they lie); recycle `bid` afterwards as with `bytes`.
    ///
    /// # Safety
    /// While the returned slice lives, nothing else reads or writes `part` (no other view of
    /// it is used, and `bid` is not pushed back), and the ring outlives it.
    pub(crate) unsafe fn bytes_mut<'a>(&self, bid: u16, part: &[u8]) -> &'a mut [u8] {
        let buffer = bid as usize * self.buf_size;
        let base = self.buffers.cast::<u8>() as usize;
        let start = (part.as_ptr() as usize).saturating_sub(base);
        assert!(start >= buffer && start + part.len() <= buffer + self.buf_size, "not a part of buffer {bid}");
        // SAFETY: in bounds (checked above); the kernel wrote this buffer before the completion
        // that lent it and does not again until `bid` is pushed back; the caller's contract
        // covers every other view.
        unsafe { std::slice::from_raw_parts_mut(self.buffers.cast::<u8>().add(start), part.len()) }
    }

    /// Hands buffer `bid` back; the kernel sees it after the next `publish`.
    pub(crate) fn push(&mut self, bid: u16) {
        // SAFETY: the index is masked into the ring.
        let entry = unsafe { &mut *self.ring.add((self.tail & self.mask) as usize) };
        entry.set_addr(self.buffers.cast::<u8>() as u64 + (bid as usize * self.buf_size) as u64);
        entry.set_len(self.buf_size as u32);
        entry.set_bid(bid);
        self.tail = self.tail.wrapping_add(1);
    }

    pub(crate) fn publish(&self) {
        // SAFETY: the tail field overlays the first entry's reserved field, per the kernel ABI.
        let tail = unsafe { &*(BufRingEntry::tail(self.ring) as *const AtomicU16) };
        tail.store(self.tail, Ordering::Release);
    }
}

impl Drop for BufRing {
    fn drop(&mut self) {
        // SAFETY: mapped in `new` with this size.
        unsafe { libc::munmap(self.ring.cast(), self.ring_bytes) };
        // SAFETY: from Box::into_raw in `new`, freed only here.
        drop(unsafe { Box::from_raw(self.buffers) });
    }
}
