//! The sending half of a connection: what `poll_transmit` puts in each batch of datagrams.
//! Handshake packets go one datagram at a time (an Initial padded to 1,200 bytes); 1-RTT
//! packets fill datagrams of the MTU, ACK first, then control frames, then stream data from
//! the queue, for one GSO send.

use std::time::Instant;

use super::super::frame;
use super::super::packet::{self, PacketNumber, Space};
use super::super::recovery::Resend;
use super::{Connection, Control, KEY_UPDATE_AFTER, MAX_IN_FLIGHT, MIN_INITIAL, State, space_index};
use crate::quic::surface::Datagrams;

impl Connection {
    /// Writes the next batch of datagrams into `buf` (cleared first), all of one size but the
    /// last, for one GSO send; None when nothing is due.
    pub(crate) fn poll_transmit(&mut self, now: Instant, buf: &mut Vec<u8>) -> Option<Datagrams> {
        buf.clear();
        match self.state {
            State::Drained | State::Draining { .. } => return None,
            State::Closing { .. } => return self.send_close(buf),
            _ => {}
        }
        if self.spaces[..2].iter().any(|s| s.keys.is_some() && s.wants_send()) {
            return self.send_handshake(now, buf);
        }
        self.one_rtt.as_ref()?;
        let mut segment = 0;
        let mut count = 0;
        while count < self.settings.max_datagrams {
            let start = buf.len();
            let room = if segment == 0 { self.mtu } else { segment };
            if !self.send_data_packet(now, buf, room) {
                break;
            }
            count += 1;
            let len = buf.len() - start;
            if segment == 0 {
                segment = len;
            }
            if len < room {
                // A datagram short of the segment size ends the batch (GSO's rule).
                break;
            }
        }
        if count == 0 {
            return None;
        }
        self.last_sent = now;
        Some(Datagrams { len: buf.len(), segment_size: segment })
    }

    /// The handshake's datagram: an Initial and a Handshake packet coalesced as needed, padded
    /// to 1,200 bytes when it holds an Initial.
    fn send_handshake(&mut self, now: Instant, buf: &mut Vec<u8>) -> Option<Datagrams> {
        let initial = self.spaces[0].keys.is_some() && self.spaces[0].wants_send();
        let handshake = self.spaces[1].keys.is_some() && self.spaces[1].wants_send();
        if initial {
            let pad = if handshake { None } else { Some(MIN_INITIAL) };
            self.send_handshake_packet(now, buf, Space::Initial, pad);
        }
        if handshake {
            let pad = initial.then(|| MIN_INITIAL.saturating_sub(buf.len()));
            self.send_handshake_packet(now, buf, Space::Handshake, pad.filter(|&p| p > 0));
            // A client discards its Initial keys once it sends a Handshake packet (RFC 9001
            // §4.9.1).
            self.discard_initial();
        }
        if buf.is_empty() {
            return None;
        }
        self.last_sent = now;
        Some(Datagrams { len: buf.len(), segment_size: buf.len() })
    }

    fn send_handshake_packet(&mut self, now: Instant, buf: &mut Vec<u8>, space: Space, pad_to: Option<usize>) {
        let i = space_index(space);
        let dcid = self.dcid;
        let scid = self.scid;
        let s = &mut self.spaces[i];
        let Some(keys) = s.keys.as_ref() else { return };
        let pn = s.next_pn;
        let start = buf.len();
        let builder = packet::begin(buf, space, &dcid, &scid, &[], PacketNumber::new(pn, s.sent.largest_acked), false);
        let limit = start + self.mtu.max(MIN_INITIAL);
        let mut frames = s.sent.frames();
        let mut eliciting = false;
        if s.received.ack_due || !s.received.is_empty() {
            let (ranges, delay) = s.received.for_ack(now);
            frame::encode_ack(buf, ranges, delay >> 3);
            s.received.ack_due = false;
        }
        while s.crypto_out.has_pending() {
            let room = builder.room(buf, limit - start);
            if room < 16 {
                break;
            }
            // The header's size depends on the offset `next_chunk` picks: room for the largest.
            let max = room - frame::crypto_header_len(s.crypto_out.len(), room);
            let Some(chunk) = s.crypto_out.next_chunk(max, u64::MAX) else { break };
            frame::encode_crypto_header(buf, chunk.offset, chunk.len);
            s.crypto_out.copy(chunk.offset, chunk.len, buf);
            frames.push(Resend::Crypto { offset: chunk.offset, len: chunk.len as u32 });
            eliciting = true;
        }
        if s.ping && !eliciting {
            frame::encode_ping(buf);
            eliciting = true;
        }
        s.ping = false;
        let _ = packet::finish(buf, builder, keys.local.header.as_ref(), keys.local.packet.as_ref(), pad_to);
        s.next_pn += 1;
        self.sent_packets += 1;
        if eliciting {
            s.sent.push(pn, now, buf.len() - start, frames);
        } else {
            s.sent.recycle(frames);
        }
    }

    /// One 1-RTT packet of at most `room` bytes at the end of `buf`; false (and nothing
    /// written) when there is nothing to send.
    fn send_data_packet(&mut self, now: Instant, buf: &mut Vec<u8>, room: usize) -> bool {
        let has_data = !self.streams.queue.is_empty() && self.spaces[2].sent.bytes_in_flight < MAX_IN_FLIGHT;
        let s = &self.spaces[2];
        if !(s.received.ack_due || s.ping || !self.controls.is_empty() || has_data) {
            return false;
        }
        self.maybe_update_keys();
        let start = buf.len();
        let Some(one) = self.one_rtt.as_mut() else { return false };
        let s = &mut self.spaces[2];
        let pn = s.next_pn;
        let pn_coded = PacketNumber::new(pn, s.sent.largest_acked);
        let builder = packet::begin(buf, Space::Data, &self.dcid, &[], &[], pn_coded, one.phase);
        let mut frames = s.sent.frames();
        let mut eliciting = false;
        if s.received.ack_due {
            let (ranges, delay) = s.received.for_ack(now);
            frame::encode_ack(buf, ranges, delay >> 3);
            s.received.ack_due = false;
        }
        if s.ping {
            frame::encode_ping(buf);
            s.ping = false;
            eliciting = true;
        }
        let mut kept = 0;
        for i in 0..self.controls.len() {
            let c = self.controls[i];
            if builder.room(buf, room) < 40 {
                self.controls[kept] = c;
                kept += 1;
                continue;
            }
            eliciting = true;
            match c {
                Control::ResetStream { id, code, final_size } => {
                    frame::encode_reset_stream(buf, id, code, final_size);
                    frames.push(Resend::ResetStream { id, code, final_size });
                }
                Control::StopSending { id, code } => {
                    frame::encode_stop_sending(buf, id, code);
                    frames.push(Resend::StopSending { id, code });
                }
                Control::MaxStreamData { id, max } => {
                    frame::encode_max_stream_data(buf, id, max);
                    frames.push(Resend::MaxStreamData { id });
                }
                Control::RetireConnectionId { seq } => {
                    frame::encode_retire_connection_id(buf, seq);
                    frames.push(Resend::RetireConnectionId { seq });
                }
                Control::PathResponse(data) => frame::encode_path_response(buf, data),
            }
        }
        self.controls.truncate(kept);
        let streams = &mut self.streams;
        let window_full = s.sent.bytes_in_flight >= MAX_IN_FLIGHT;
        while let Some(&id) = streams.queue.front().filter(|_| !window_full) {
            let space_left = builder.room(buf, room);
            let header = frame::stream_header_len(id, u64::MAX >> 2, space_left);
            if space_left <= header {
                break;
            }
            let credit = streams.max_data - streams.data_sent;
            let Some(send) = streams.send(id) else {
                streams.queue.pop_front();
                continue;
            };
            let Some(chunk) = send.next_chunk(space_left - header, credit) else {
                send.queued = false;
                streams.queue.pop_front();
                continue;
            };
            frame::encode_stream_header(buf, id, chunk.offset, chunk.len, chunk.fin);
            send.copy(chunk.offset, chunk.len, buf);
            // Out of the queue once nothing is left to send.
            let pending = send.has_pending();
            send.queued = pending;
            if !chunk.again {
                streams.data_sent += chunk.len as u64;
            }
            frames.push(Resend::Stream { id, offset: chunk.offset, len: chunk.len as u32, fin: chunk.fin });
            eliciting = true;
            if !pending {
                streams.queue.pop_front();
            }
        }
        if buf.len() == builder.payload_start() {
            // Only a header: the queue held nothing sendable (flow control); undo it.
            buf.truncate(start);
            s.sent.recycle(frames);
            return false;
        }
        let more = (!self.streams.queue.is_empty() && !window_full) || !self.controls.is_empty();
        let pad = more.then_some(room);
        let _ = packet::finish(buf, builder, one.local_header.as_ref(), one.local.as_ref(), pad);
        s.next_pn += 1;
        one.sent_with_key += 1;
        one.phase_first_sent.get_or_insert(pn);
        self.sent_packets += 1;
        if eliciting {
            s.sent.push(pn, now, buf.len() - start, frames);
        } else {
            s.sent.recycle(frames);
        }
        true
    }

    /// Our own key update, long before the AEAD's limit (RFC 9001 §6.1), once the peer has
    /// acknowledged a packet under the current keys.
    fn maybe_update_keys(&mut self) {
        let largest_acked = self.spaces[2].sent.largest_acked;
        if let Some(one) = self.one_rtt.as_mut()
            && self.handshake_confirmed
            && one.sent_with_key >= KEY_UPDATE_AFTER
            && one.phase_first_sent.is_some_and(|first| largest_acked.is_some_and(|l| l >= first))
        {
            one.update();
        }
    }

    /// The CONNECTION_CLOSE, once, in the highest space we have keys for.
    fn send_close(&mut self, buf: &mut Vec<u8>) -> Option<Datagrams> {
        let close = self.close.take()?;
        let (dcid, scid) = (self.dcid, self.scid);
        if let Some(one) = self.one_rtt.as_ref() {
            let s = &mut self.spaces[2];
            let b = packet::begin(
                buf,
                Space::Data,
                &dcid,
                &[],
                &[],
                PacketNumber::new(s.next_pn, s.sent.largest_acked),
                one.phase,
            );
            frame::encode_connection_close(buf, close.application, close.code, &close.reason);
            let _ = packet::finish(buf, b, one.local_header.as_ref(), one.local.as_ref(), None);
            s.next_pn += 1;
        } else {
            let i = if self.spaces[1].keys.is_some() { 1 } else { 0 };
            let space = [Space::Initial, Space::Handshake][i];
            let s = &mut self.spaces[i];
            let keys = s.keys.as_ref()?;
            let pad = (space == Space::Initial).then_some(MIN_INITIAL);
            let b =
                packet::begin(buf, space, &dcid, &scid, &[], PacketNumber::new(s.next_pn, s.sent.largest_acked), false);
            // In the handshake, an application's close goes as a transport APPLICATION_ERROR.
            frame::encode_connection_close(buf, false, close.code, &[]);
            let _ = packet::finish(buf, b, keys.local.header.as_ref(), keys.local.packet.as_ref(), pad);
            s.next_pn += 1;
        }
        self.sent_packets += 1;
        Some(Datagrams { len: buf.len(), segment_size: buf.len() })
    }
}
