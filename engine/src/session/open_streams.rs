//! The streams a multiplexed connection (HTTP/2, HTTP/3) has open, each in its place until it
//! closes, found by stream id without hashing.
//!
//! With hundreds of streams in flight their state does not stay in cache, and finding a
//! stream was the first touch of cold memory for every response (in perf profiles, half of
//! HTTP/2's `Connection::process`; in a hash map, 70% of HTTP/3's `Session::process`). So: a new stream takes the place
//! closed last, whose memory is still warm; closing moves nothing; and a stream's place can be
//! prefetched as soon as a frame naming it is seen, before it is handled.

/// `ids` at a free place: no stream has it (HTTP/2 ids are 31 bits, QUIC's 62).
const FREE: u64 = u64::MAX;

/// Starts loading `item`'s first cache line, without waiting for it.
#[inline(always)]
fn prefetch<T>(item: &T) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: a prefetch reads nothing the program sees and cannot fault.
    unsafe {
        use std::arch::x86_64::{_MM_HINT_T0, _mm_prefetch};
        _mm_prefetch::<_MM_HINT_T0>((item as *const T).cast());
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = item;
}

pub(crate) struct OpenStreams<T> {
    /// Each stream's state at its place; a free place keeps the last state it held until a new
    /// stream overwrites it.
    items: Vec<T>,
    /// The id of the stream at `items[i]`, or `FREE`.
    ids: Vec<u64>,
    /// Free places, the one freed last on top.
    free: Vec<u32>,
    /// Where a stream sits, by `slot(id)`: a guess, checked against `ids`, with a scan of `ids`
    /// when it misses. A connection's own streams are numbered in order and the open ones span
    /// little more than the streams in flight, so in a table of twice that they rarely share a
    /// slot.
    slots: Vec<u32>,
    /// `id >> shift` numbers a connection's own streams 0, 1, 2, ...: 1 for HTTP/2's odd ids,
    /// 2 for QUIC's, whose two low bits are the stream's type.
    shift: u32,
}

impl<T> OpenStreams<T> {
    /// Room for `expected` streams at once (more still fit); ids numbered by `id >> shift`.
    pub(crate) fn new(expected: u32, shift: u32) -> Self {
        let expected = expected.clamp(1, 1 << 15) as usize;
        OpenStreams {
            items: Vec::with_capacity(expected.min(1024)),
            ids: Vec::with_capacity(expected.min(1024)),
            free: Vec::new(),
            slots: vec![0; (expected * 2).next_power_of_two()],
            shift,
        }
    }

    pub(crate) fn len(&self) -> usize {
        self.ids.len() - self.free.len()
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Opens stream `id` with `item` at the place closed last; returns the place.
    pub(crate) fn insert(&mut self, id: u64, item: T) -> usize {
        debug_assert!(id != FREE && self.index(id).is_none());
        let i = match self.free.pop() {
            Some(i) => {
                let i = i as usize;
                self.items[i] = item;
                self.ids[i] = id;
                i
            }
            None => {
                self.items.push(item);
                self.ids.push(id);
                self.ids.len() - 1
            }
        };
        let slot = self.slot(id);
        self.slots[slot] = i as u32;
        i
    }

    /// The place the next `insert` takes.
    pub(crate) fn next_place(&self) -> usize {
        self.free.last().map_or(self.items.len(), |&i| i as usize)
    }

    /// Where stream `id` is, if open.
    #[inline]
    pub(crate) fn index(&self, id: u64) -> Option<usize> {
        if id == FREE {
            return None;
        }
        let guess = self.slots[self.slot(id)] as usize;
        if self.ids.get(guess) == Some(&id) {
            return Some(guess);
        }
        self.ids.iter().position(|&open| open == id)
    }

    /// Asks the CPU for stream `id`'s state, if open, without waiting for it.
    #[inline]
    pub(crate) fn prefetch(&self, id: u64) -> bool {
        match self.index(id) {
            Some(i) => {
                prefetch(&self.items[i]);
                true
            }
            None => false,
        }
    }

    /// Closes the stream at place `i` and returns its id. Its state stays there until the
    /// place is taken again: read what is needed first.
    pub(crate) fn remove(&mut self, i: usize) -> u64 {
        let id = std::mem::replace(&mut self.ids[i], FREE);
        debug_assert!(id != FREE, "place {i} was free");
        self.free.push(i as u32);
        id
    }

    /// Closes every open stream `pick` says to, calling it once per open stream with its id
    /// and state (it may act on a stream it picks: the state stays readable until then);
    /// returns how many it closed.
    pub(crate) fn close_where(&mut self, mut pick: impl FnMut(u64, &T) -> bool) -> u64 {
        let mut closed = 0;
        for (i, id) in self.ids.iter_mut().enumerate() {
            if *id != FREE && pick(*id, &self.items[i]) {
                *id = FREE;
                self.free.push(i as u32);
                closed += 1;
            }
        }
        closed
    }

    /// Closes every stream.
    pub(crate) fn clear(&mut self) {
        self.items.clear();
        self.ids.clear();
        self.free.clear();
    }

    pub(crate) fn id(&self, i: usize) -> u64 {
        self.ids[i]
    }

    pub(crate) fn get(&self, i: usize) -> &T {
        &self.items[i]
    }

    pub(crate) fn get_mut(&mut self, i: usize) -> &mut T {
        &mut self.items[i]
    }

    /// Every open stream: `(id, state)`.
    pub(crate) fn iter(&self) -> impl Iterator<Item = (u64, &T)> {
        self.ids.iter().zip(&self.items).filter(|(id, _)| **id != FREE).map(|(&id, s)| (id, s))
    }

    /// Every open stream's state, to change.
    pub(crate) fn iter_mut(&mut self) -> impl Iterator<Item = (u64, &mut T)> {
        self.ids.iter().zip(&mut self.items).filter(|(id, _)| **id != FREE).map(|(&id, s)| (id, s))
    }

    /// Places `0..places()` may hold open streams (see `id`, `FREE` ones do not).
    pub(crate) fn places(&self) -> usize {
        self.ids.len()
    }

    /// Whether place `i` holds an open stream.
    pub(crate) fn is_open(&self, i: usize) -> bool {
        self.ids[i] != FREE
    }

    fn slot(&self, id: u64) -> usize {
        (id >> self.shift) as usize & (self.slots.len() - 1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_new_stream_takes_the_place_closed_last_and_every_open_stream_is_found() {
        let mut s = OpenStreams::new(4, 1);
        let places: Vec<usize> = [1u64, 3, 5, 7].iter().map(|&id| s.insert(id, id * 10)).collect();
        assert_eq!(places, [0, 1, 2, 3]);
        // Closed in the order 3, 7: the next stream takes 7's place, the one after 3's (LIFO).
        s.remove(s.index(3).unwrap());
        s.remove(s.index(7).unwrap());
        assert_eq!(s.insert(9, 90), places[3]);
        assert_eq!(s.insert(11, 110), places[1]);
        assert_eq!(s.len(), 4);
        for id in [1u64, 5, 9, 11] {
            let i = s.index(id).unwrap_or_else(|| panic!("stream {id} lost"));
            assert_eq!((s.id(i), *s.get(i)), (id, id * 10));
        }
        for id in [3u64, 7, 13] {
            assert_eq!(s.index(id), None, "stream {id} is not open");
        }
    }

    #[test]
    fn streams_sharing_a_slot_are_found_by_the_scan() {
        // A table of 2 slots for 1 stream: QUIC ids 0, 8 and 16 all land on slot 0.
        let mut s = OpenStreams::new(1, 2);
        for id in [0u64, 8, 16, 4] {
            s.insert(id, id);
        }
        for id in [0u64, 8, 16, 4] {
            assert_eq!(s.index(id).map(|i| *s.get(i)), Some(id));
        }
        s.remove(s.index(16).unwrap());
        assert_eq!(s.index(16), None);
        assert_eq!(s.iter().map(|(id, _)| id).collect::<Vec<_>>(), [0, 8, 4]);
        assert!(s.prefetch(8) && !s.prefetch(16));
    }

    #[test]
    fn close_where_sees_each_open_stream_once_and_frees_the_places_it_picks() {
        let mut s = OpenStreams::new(4, 2);
        for id in [0u64, 8, 16, 4] {
            s.insert(id, id);
        }
        s.remove(s.index(16).unwrap());
        let mut seen = Vec::new();
        let closed = s.close_where(|id, &item| {
            seen.push(id);
            item >= 4
        });
        assert_eq!((closed, seen, s.len()), (2, vec![0, 8, 4], 1));
        assert_eq!((s.index(8), s.index(4), s.index(0)), (None, None, Some(0)));
        // Both places went on the free list: the next two streams take them, the later one first.
        assert_eq!([s.insert(12, 12), s.insert(20, 20)], [3, 1]);
    }

    #[test]
    fn the_free_marker_is_never_found() {
        let mut s: OpenStreams<u8> = OpenStreams::new(2, 2);
        assert_eq!(s.index(FREE), None);
        let i = s.insert(0, 1);
        s.remove(i);
        assert_eq!((s.index(FREE), s.index(0), s.len(), s.is_empty()), (None, None, 0, true));
    }
}
