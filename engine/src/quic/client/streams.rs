//! The streams of one connection, by kind, and the queue of those with something to send.

use std::collections::VecDeque;

use super::stream::{RecvStream, SendStream};

/// A request stream's place in `Streams::bidi` once it is retired.
const RETIRED: u32 = u32::MAX;

/// Our bidirectional request stream: both halves.
#[derive(Debug, Default)]
pub(crate) struct Bidi {
    pub send: SendStream,
    pub recv: RecvStream,
}

/// Every stream of the connection, by kind. Streams are numbered by kind (RFC 9000 §2.1):
/// ours bidirectional 4n, ours unidirectional 4n + 2, the server's unidirectional 4n + 3.
#[derive(Default)]
pub(crate) struct Streams {
    /// Our request streams still in use, by stream number from `bidi_base` on: the slot in
    /// `slots` each one has, or [`RETIRED`]. Slots are reused in place, so a request costs
    /// neither an allocation nor a move of its stream's state.
    pub bidi: VecDeque<u32>,
    pub bidi_base: u64,
    pub bidi_opened: u64,
    pub bidi_limit: u64,
    pub uni: Vec<SendStream>,
    pub uni_limit: u64,
    pub peer_uni: Vec<RecvStream>,
    pub peer_uni_accepted: usize,
    /// Streams with something to send, in the order they got it.
    pub queue: VecDeque<u64>,
    pub slots: Vec<Bidi>,
    /// Slots of retired streams, for the next ones.
    pub free: Vec<u32>,
    /// The peer's limits on new stream data: per stream, and connection-wide (MAX_DATA).
    pub send_window_bidi: u64,
    pub send_window_uni: u64,
    pub max_data: u64,
    pub data_sent: u64,
}

impl Streams {
    pub(crate) fn send(&mut self, id: u64) -> Option<&mut SendStream> {
        match id & 3 {
            0 => self.bidi_mut(id).map(|b| &mut b.send),
            2 => self.uni.get_mut((id >> 2) as usize),
            _ => None,
        }
    }

    pub(crate) fn bidi_mut(&mut self, id: u64) -> Option<&mut Bidi> {
        let index = (id >> 2).checked_sub(self.bidi_base)?;
        let slot = *self.bidi.get(index as usize)?;
        self.slots.get_mut(slot as usize)
    }

    pub(crate) fn recv(&mut self, id: u64) -> Option<&mut RecvStream> {
        match id & 3 {
            0 => self.bidi_mut(id).map(|b| &mut b.recv),
            3 => self.peer_uni.get_mut((id >> 2) as usize),
            _ => None,
        }
    }

    pub(crate) fn enqueue(&mut self, id: u64) {
        if let Some(s) = self.send(id)
            && !s.queued
            && s.has_pending()
        {
            s.queued = true;
            self.queue.push_back(id);
        }
    }

    /// Queues every stream with something to send (after the connection's window opened).
    pub(crate) fn enqueue_all(&mut self) {
        let base = self.bidi_base;
        let bidi = (0..self.bidi.len() as u64).map(|i| (base + i) << 2);
        let uni = (0..self.uni.len() as u64).map(|i| (i << 2) | 2);
        for id in bidi.chain(uni) {
            self.enqueue(id);
        }
    }

    /// Drops a request stream both of whose halves are over.
    pub(crate) fn retire_if_done(&mut self, id: u64) {
        if id & 3 != 0 {
            return;
        }
        let Some(b) = self.bidi_mut(id) else { return };
        if !(b.send.is_done() && b.recv.ended) {
            return;
        }
        let index = ((id >> 2) - self.bidi_base) as usize;
        let slot = std::mem::replace(&mut self.bidi[index], RETIRED);
        self.free.push(slot);
        while self.bidi.front() == Some(&RETIRED) {
            self.bidi.pop_front();
            self.bidi_base += 1;
        }
    }
}
