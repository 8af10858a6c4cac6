//! One stream's two directions: what we send (kept until acknowledged, resent where lost) and
//! what we receive (put in order, held until read, with its flow-control window).
//!
//! Lean on purpose: a request stream carries one small request and one small response, so the
//! common path is one STREAM frame each way, acknowledged whole. Loss and reordering take the
//! slower paths (`lost`, `acked_above`, `out_of_order`), which stay empty otherwise.

use std::collections::BTreeMap;

use bytes::Bytes;

/// The stream-level receive window we grant, and grant again as it is read.
pub(crate) const RECV_WINDOW: u64 = 16 << 20;

/// Our sending half.
#[derive(Debug, Default)]
pub(crate) struct SendStream {
    /// Everything written, in order; kept whole until the stream is done (request bodies are
    /// the run's shared `Bytes`, so this holds references, not copies).
    data: Vec<Bytes>,
    /// Bytes written in all.
    len: u64,
    /// `finish` was called: the stream ends at `len`.
    pub fin: bool,
    /// Sent once up to here.
    sent: u64,
    fin_sent: bool,
    /// Acknowledged from 0 up to here, and above it in these ranges (only after loss).
    acked: u64,
    acked_above: Vec<(u64, u64)>,
    fin_acked: bool,
    /// Ranges to send again, and whether the FIN is to go again.
    lost: Vec<(u64, u64)>,
    lost_fin: bool,
    /// The peer's limit on this stream's offset (MAX_STREAM_DATA).
    pub max_data: u64,
    /// Reset by us (RESET_STREAM sent): nothing more goes out.
    pub reset: bool,
    /// In the connection's queue of streams with something to send.
    pub queued: bool,
}

/// A frame's worth of a stream to send: `len` bytes from `offset`, and whether FIN goes with them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Chunk {
    pub offset: u64,
    pub len: usize,
    pub fin: bool,
    /// These bytes were sent before (their first sending counted against connection credit).
    pub again: bool,
}

impl SendStream {
    pub(crate) fn new(max_data: u64) -> Self {
        SendStream { max_data, ..Default::default() }
    }

    /// This stream's state, cleared for a new stream with `max_data`; its buffers' capacity
    /// is kept (a request stream each, so no allocation per request).
    pub(crate) fn reuse(&mut self, max_data: u64) {
        self.data.clear();
        self.len = 0;
        self.fin = false;
        self.sent = 0;
        self.fin_sent = false;
        self.acked = 0;
        self.acked_above.clear();
        self.fin_acked = false;
        self.lost.clear();
        self.lost_fin = false;
        self.max_data = max_data;
        self.reset = false;
        self.queued = false;
    }

    pub(crate) fn write(&mut self, bytes: Bytes) {
        self.len += bytes.len() as u64;
        if !bytes.is_empty() {
            self.data.push(bytes);
        }
    }

    /// Bytes written in all.
    pub(crate) fn len(&self) -> u64 {
        self.len
    }

    /// The stream's final size if it is reset now: what has gone out, which is what the
    /// peer's flow control counted (RFC 9000 §4.5), not what was written.
    pub(crate) fn final_size_if_reset(&self) -> u64 {
        self.sent
    }

    /// Something is waiting to go (new bytes within the stream's limit, or a lost range).
    pub(crate) fn has_pending(&self) -> bool {
        !self.reset
            && (!self.lost.is_empty()
                || self.lost_fin
                || (self.sent < self.len && self.sent < self.max_data)
                || (self.fin && !self.fin_sent && self.sent == self.len))
    }

    /// The next chunk of at most `room` bytes: lost ranges first, then new bytes within the
    /// stream's limit and `credit` (the connection's). Marks it sent.
    pub(crate) fn next_chunk(&mut self, room: usize, credit: u64) -> Option<Chunk> {
        if self.reset {
            return None;
        }
        if let Some(&(lo, hi)) = self.lost.first() {
            let len = (hi - lo).min(room as u64);
            if len == 0 && room == 0 {
                return None;
            }
            if lo + len == hi {
                self.lost.remove(0);
            } else {
                self.lost[0].0 = lo + len;
            }
            let fin = self.lost_fin && lo + len == self.len && self.lost.is_empty();
            if fin {
                self.lost_fin = false;
            }
            return Some(Chunk { offset: lo, len: len as usize, fin, again: true });
        }
        if self.lost_fin && self.fin_sent && self.sent == self.len {
            self.lost_fin = false;
            return Some(Chunk { offset: self.len, len: 0, fin: true, again: true });
        }
        let limit = self.len.min(self.max_data).min(self.sent.saturating_add(credit));
        let len = (limit.saturating_sub(self.sent)).min(room as u64);
        let fin = self.fin && self.sent + len == self.len;
        if len == 0 && (!fin || self.fin_sent) {
            return None;
        }
        let chunk = Chunk { offset: self.sent, len: len as usize, fin, again: false };
        self.sent += len;
        self.fin_sent |= fin;
        Some(chunk)
    }

    /// Copies `len` bytes from `offset` to `out`.
    pub(crate) fn copy(&self, mut offset: u64, mut len: usize, out: &mut Vec<u8>) {
        let mut start = 0u64;
        for chunk in &self.data {
            let end = start + chunk.len() as u64;
            if len > 0 && offset < end {
                let from = (offset - start) as usize;
                let n = len.min(chunk.len() - from);
                out.extend_from_slice(&chunk[from..from + n]);
                offset += n as u64;
                len -= n;
            }
            start = end;
        }
    }

    pub(crate) fn on_acked(&mut self, offset: u64, len: usize, fin: bool) {
        self.fin_acked |= fin;
        let end = offset + len as u64;
        if offset <= self.acked {
            self.acked = self.acked.max(end);
        } else {
            self.acked_above.push((offset, end));
        }
        if !self.acked_above.is_empty() {
            self.acked_above.sort_unstable();
            let mut i = 0;
            while i < self.acked_above.len() {
                let (lo, hi) = self.acked_above[i];
                if lo <= self.acked {
                    self.acked = self.acked.max(hi);
                    self.acked_above.remove(i);
                    i = 0;
                } else {
                    i += 1;
                }
            }
        }
    }

    /// A packet carrying this range was lost: whatever of it is not acknowledged goes again.
    pub(crate) fn on_lost(&mut self, offset: u64, len: usize, fin: bool) {
        if self.reset {
            return;
        }
        let lo = offset.max(self.acked);
        let hi = offset + len as u64;
        let covered = self.acked_above.iter().any(|&(a, b)| a <= lo && hi <= b);
        if lo < hi && !covered {
            self.lost.push((lo, hi));
            self.lost.sort_unstable();
        }
        if fin && !self.fin_acked {
            self.lost_fin = true;
        }
    }

    /// Everything, FIN included, is acknowledged (or the stream was reset).
    pub(crate) fn is_done(&self) -> bool {
        self.reset || (self.fin && self.fin_acked && self.acked >= self.len)
    }
}

/// The peer's sending half, as we receive it.
#[derive(Debug)]
pub(crate) struct RecvStream {
    /// In-order bytes not yet read.
    buf: Vec<u8>,
    /// Received in order up to here (the end of `buf`).
    offset: u64,
    /// Bytes that arrived ahead of `offset` (only after loss or reordering).
    out_of_order: BTreeMap<u64, Vec<u8>>,
    final_size: Option<u64>,
    reset: Option<u64>,
    /// Read by the session up to here.
    consumed: u64,
    /// The offset our MAX_STREAM_DATA allows up to.
    pub window: u64,
    /// Told `Readable` and not read since.
    pub signalled: bool,
    /// The session has read the end (FIN or reset).
    pub ended: bool,
}

/// What the peer did wrong on a stream (RFC 9000 §4.5, §4.1).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum RecvError {
    FlowControl,
    FinalSize,
}

/// Where a `read` stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum RecvEnd {
    Blocked,
    Finished,
    Reset(u64),
}

impl Default for RecvStream {
    fn default() -> Self {
        RecvStream {
            buf: Vec::new(),
            offset: 0,
            out_of_order: BTreeMap::new(),
            final_size: None,
            reset: None,
            consumed: 0,
            window: RECV_WINDOW,
            signalled: false,
            ended: false,
        }
    }
}

impl RecvStream {
    /// A stream whose window starts at `window` bytes.
    pub(crate) fn new(window: u64) -> Self {
        RecvStream { window, ..Default::default() }
    }

    /// This stream's state, cleared for a new stream with `window`; the buffer's capacity is
    /// kept.
    pub(crate) fn reuse(&mut self, window: u64) {
        self.buf.clear();
        self.offset = 0;
        self.out_of_order.clear();
        self.final_size = None;
        self.reset = None;
        self.consumed = 0;
        self.window = window;
        self.signalled = false;
        self.ended = false;
    }

    /// Takes a STREAM frame's data; true when there is something new to read.
    pub(crate) fn on_data(&mut self, offset: u64, data: &[u8], fin: bool) -> Result<bool, RecvError> {
        let end = offset + data.len() as u64;
        if end > self.window {
            return Err(RecvError::FlowControl);
        }
        match self.final_size {
            Some(size) if end > size || (fin && end != size) => return Err(RecvError::FinalSize),
            _ => {}
        }
        if fin {
            if end < self.offset || self.out_of_order.last_key_value().is_some_and(|(o, d)| o + d.len() as u64 > end) {
                return Err(RecvError::FinalSize);
            }
            self.final_size = Some(end);
        }
        if self.reset.is_some() || self.ended {
            return Ok(false);
        }
        let before = (self.buf.len(), fin);
        if offset <= self.offset {
            if end > self.offset {
                self.buf.extend_from_slice(&data[(self.offset - offset) as usize..]);
                self.offset = end;
                self.join_out_of_order();
            }
        } else if !data.is_empty() {
            self.out_of_order.entry(offset).or_insert_with(|| data.to_vec());
        }
        Ok(self.buf.len() > before.0 || (before.1 && self.is_finished()))
    }

    fn join_out_of_order(&mut self) {
        while let Some(entry) = self.out_of_order.first_entry() {
            let start = *entry.key();
            if start > self.offset {
                break;
            }
            let data = entry.remove();
            let end = start + data.len() as u64;
            if end > self.offset {
                self.buf.extend_from_slice(&data[(self.offset - start) as usize..]);
                self.offset = end;
            }
        }
    }

    /// The peer reset the stream: true when the session has yet to hear of it.
    pub(crate) fn on_reset(&mut self, code: u64, final_size: u64) -> Result<bool, RecvError> {
        if final_size > self.window || self.final_size.is_some_and(|s| s != final_size) || final_size < self.offset {
            return Err(RecvError::FinalSize);
        }
        // A stream whose every byte and FIN had come is complete: a reset after it changes
        // nothing (RFC 9000 §3.2, "Data Recvd").
        let complete = self.is_finished();
        self.final_size = Some(final_size);
        if self.ended || self.reset.is_some() || complete {
            return Ok(false);
        }
        self.reset = Some(code);
        self.buf.clear();
        self.out_of_order.clear();
        Ok(true)
    }

    fn is_finished(&self) -> bool {
        self.final_size == Some(self.offset)
    }

    /// Hands what is in order to `each` and says where the stream stands.
    pub(crate) fn read(&mut self, each: impl FnOnce(&[u8])) -> RecvEnd {
        self.signalled = false;
        if let Some(code) = self.reset {
            self.ended = true;
            return RecvEnd::Reset(code);
        }
        if !self.buf.is_empty() {
            each(&self.buf);
            self.consumed += self.buf.len() as u64;
            self.buf.clear();
        }
        if self.is_finished() {
            self.ended = true;
            RecvEnd::Finished
        } else {
            RecvEnd::Blocked
        }
    }

    /// A new window edge to announce (MAX_STREAM_DATA), once half the window is read.
    pub(crate) fn window_update(&mut self) -> Option<u64> {
        if self.final_size.is_some() || self.window - self.consumed > RECV_WINDOW / 2 {
            return None;
        }
        self.window = self.consumed + RECV_WINDOW;
        Some(self.window)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read_all(r: &mut RecvStream) -> (Vec<u8>, RecvEnd) {
        let mut got = Vec::new();
        let end = r.read(|b| got.extend_from_slice(b));
        (got, end)
    }

    #[test]
    fn a_small_request_goes_in_one_chunk_with_its_fin_and_is_done_when_acknowledged() {
        let mut s = SendStream::new(1 << 20);
        s.write(Bytes::from_static(b"head"));
        s.write(Bytes::from_static(b"body"));
        s.fin = true;
        let c = s.next_chunk(1000, u64::MAX).unwrap();
        assert_eq!(c, Chunk { offset: 0, len: 8, fin: true, again: false });
        let mut out = Vec::new();
        s.copy(c.offset, c.len, &mut out);
        assert_eq!(out, b"headbody");
        assert!(!s.has_pending() && s.next_chunk(1000, u64::MAX).is_none());
        assert!(!s.is_done());
        s.on_acked(0, 8, true);
        assert!(s.is_done());
    }

    #[test]
    fn a_lost_range_goes_again_but_not_what_another_packet_got_acknowledged() {
        let mut s = SendStream::new(1 << 20);
        s.write(Bytes::from(vec![7u8; 30]));
        s.fin = true;
        let a = s.next_chunk(10, u64::MAX).unwrap();
        let b = s.next_chunk(10, u64::MAX).unwrap();
        let c = s.next_chunk(10, u64::MAX).unwrap();
        assert!(c.fin && !a.fin && !b.fin);
        s.on_acked(b.offset, b.len, b.fin);
        s.on_lost(a.offset, a.len, a.fin);
        s.on_lost(c.offset, c.len, c.fin);
        let again: Vec<Chunk> = std::iter::from_fn(|| s.next_chunk(100, 0)).collect();
        assert_eq!(
            again,
            vec![
                Chunk { offset: 0, len: 10, fin: false, again: true },
                Chunk { offset: 20, len: 10, fin: true, again: true }
            ]
        );
        s.on_acked(0, 10, false);
        assert!(!s.is_done());
        s.on_acked(20, 10, true);
        assert!(s.is_done());
    }

    #[test]
    fn new_bytes_wait_for_the_streams_and_the_connections_credit() {
        let mut s = SendStream::new(5);
        s.write(Bytes::from(vec![1u8; 10]));
        s.fin = true;
        assert_eq!(s.next_chunk(100, 3).unwrap().len, 3);
        assert_eq!(s.next_chunk(100, 100).unwrap().len, 2);
        assert!(!s.has_pending());
        s.max_data = 10;
        assert!(s.has_pending());
        assert_eq!(s.next_chunk(100, 100).unwrap(), Chunk { offset: 5, len: 5, fin: true, again: false });
    }

    #[test]
    fn data_in_any_order_is_read_in_order_once() {
        let mut r = RecvStream::default();
        assert_eq!(r.on_data(5, b"world", true), Ok(false));
        assert_eq!(r.on_data(0, b"hello", false), Ok(true));
        assert_eq!(r.on_data(0, b"hel", false), Ok(false), "a duplicate is nothing new");
        assert_eq!(read_all(&mut r), (b"helloworld".to_vec(), RecvEnd::Finished));
    }

    #[test]
    fn an_empty_fin_after_the_data_finishes_the_stream() {
        let mut r = RecvStream::default();
        assert_eq!(r.on_data(0, b"ab", false), Ok(true));
        assert_eq!(read_all(&mut r), (b"ab".to_vec(), RecvEnd::Blocked));
        assert_eq!(r.on_data(2, b"", true), Ok(true));
        assert_eq!(read_all(&mut r), (Vec::new(), RecvEnd::Finished));
    }

    #[test]
    fn data_beyond_the_window_or_the_final_size_is_the_peers_error() {
        let mut r = RecvStream::default();
        assert_eq!(r.on_data(RECV_WINDOW, b"x", false), Err(RecvError::FlowControl));
        assert_eq!(r.on_data(0, b"abc", true), Ok(true));
        assert_eq!(r.on_data(3, b"d", false), Err(RecvError::FinalSize));
        assert_eq!(r.on_data(0, b"ab", true), Err(RecvError::FinalSize));
    }

    #[test]
    fn a_reset_ends_the_stream_once_and_drops_what_was_unread() {
        let mut r = RecvStream::default();
        r.on_data(0, b"abc", false).unwrap();
        assert_eq!(r.on_reset(9, 3), Ok(true));
        assert_eq!(r.on_reset(9, 3), Ok(false));
        assert_eq!(read_all(&mut r), (Vec::new(), RecvEnd::Reset(9)));
    }

    #[test]
    fn the_window_grows_once_half_of_it_is_read() {
        let mut r = RecvStream::default();
        let half = vec![0u8; (RECV_WINDOW / 2) as usize];
        r.on_data(0, &half, false).unwrap();
        assert_eq!(r.window_update(), None);
        read_all(&mut r);
        assert_eq!(r.window_update(), Some(RECV_WINDOW / 2 + RECV_WINDOW));
    }
}
