//! QUIC transport parameters (RFC 9000 §18): ours, as the client sends them in the TLS
//! quic_transport_parameters extension, and the server's, as it sends them back, checked
//! against RFC 9000 §18.2's rules and filled in with its defaults.
//!
//! Both are encoded as a sequence of (id, length, value) with varint ids and lengths. Ids we do
//! not know, including the reserved 31 * N + 27 that exercise exactly that (§18.1), are skipped.

use super::packet::ConnectionId;
use crate::quic::varint;

#[cfg(test)]
mod tests;

/// The transport error code for transport parameters the peer got wrong (RFC 9000 §20.1).
pub(crate) const TRANSPORT_PARAMETER_ERROR: u64 = 0x08;

/// The parameters RFC 9000 §18.2 defines, by id.
mod id {
    pub(super) const ORIGINAL_DESTINATION_CONNECTION_ID: u64 = 0x00;
    pub(super) const MAX_IDLE_TIMEOUT: u64 = 0x01;
    pub(super) const STATELESS_RESET_TOKEN: u64 = 0x02;
    pub(super) const MAX_UDP_PAYLOAD_SIZE: u64 = 0x03;
    pub(super) const INITIAL_MAX_DATA: u64 = 0x04;
    pub(super) const INITIAL_MAX_STREAM_DATA_BIDI_LOCAL: u64 = 0x05;
    pub(super) const INITIAL_MAX_STREAM_DATA_BIDI_REMOTE: u64 = 0x06;
    pub(super) const INITIAL_MAX_STREAM_DATA_UNI: u64 = 0x07;
    pub(super) const INITIAL_MAX_STREAMS_BIDI: u64 = 0x08;
    pub(super) const INITIAL_MAX_STREAMS_UNI: u64 = 0x09;
    pub(super) const ACK_DELAY_EXPONENT: u64 = 0x0a;
    pub(super) const MAX_ACK_DELAY: u64 = 0x0b;
    pub(super) const DISABLE_ACTIVE_MIGRATION: u64 = 0x0c;
    pub(super) const PREFERRED_ADDRESS: u64 = 0x0d;
    pub(super) const ACTIVE_CONNECTION_ID_LIMIT: u64 = 0x0e;
    pub(super) const INITIAL_SOURCE_CONNECTION_ID: u64 = 0x0f;
    pub(super) const RETRY_SOURCE_CONNECTION_ID: u64 = 0x10;

    /// Their names in RFC 9000, indexed by id, for error messages.
    pub(super) const NAMES: [&str; 17] = [
        "original_destination_connection_id",
        "max_idle_timeout",
        "stateless_reset_token",
        "max_udp_payload_size",
        "initial_max_data",
        "initial_max_stream_data_bidi_local",
        "initial_max_stream_data_bidi_remote",
        "initial_max_stream_data_uni",
        "initial_max_streams_bidi",
        "initial_max_streams_uni",
        "ack_delay_exponent",
        "max_ack_delay",
        "disable_active_migration",
        "preferred_address",
        "active_connection_id_limit",
        "initial_source_connection_id",
        "retry_source_connection_id",
    ];
}

/// The smallest max_udp_payload_size allowed: every QUIC path carries 1200 bytes (§14).
const MIN_UDP_PAYLOAD_SIZE: u64 = 1200;
/// The largest UDP payload, and max_udp_payload_size's default.
const MAX_UDP_PAYLOAD_SIZE: u64 = 65527;
const MAX_ACK_DELAY_EXPONENT: u64 = 20;
/// max_ack_delay must stay below 2^14 ms.
const MAX_ACK_DELAY_LIMIT: u64 = 1 << 14;
/// No more streams than stream ids can count (§4.6).
const MAX_STREAMS: u64 = 1 << 60;

/// Our transport parameters, as the client sends them. A client sends none of the
/// server-only ones (original and retry connection IDs, reset token, preferred address).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ClientParams {
    pub initial_max_data: u64,
    pub initial_max_stream_data_bidi_local: u64,
    pub initial_max_stream_data_bidi_remote: u64,
    pub initial_max_stream_data_uni: u64,
    pub initial_max_streams_bidi: u64,
    pub initial_max_streams_uni: u64,
    /// 0 disables our idle timeout (the server's may still apply).
    pub max_idle_timeout_ms: u64,
    pub max_udp_payload_size: u64,
    pub active_connection_id_limit: u64,
    /// The Source Connection ID of our first Initial.
    pub initial_source_connection_id: ConnectionId,
}

impl ClientParams {
    /// Appends the encoded parameters: the quic_transport_parameters extension's body. Every
    /// value must be at most [`varint::MAX`].
    pub(crate) fn encode(&self, out: &mut Vec<u8>) {
        let ints = [
            (id::MAX_IDLE_TIMEOUT, self.max_idle_timeout_ms),
            (id::MAX_UDP_PAYLOAD_SIZE, self.max_udp_payload_size),
            (id::INITIAL_MAX_DATA, self.initial_max_data),
            (id::INITIAL_MAX_STREAM_DATA_BIDI_LOCAL, self.initial_max_stream_data_bidi_local),
            (id::INITIAL_MAX_STREAM_DATA_BIDI_REMOTE, self.initial_max_stream_data_bidi_remote),
            (id::INITIAL_MAX_STREAM_DATA_UNI, self.initial_max_stream_data_uni),
            (id::INITIAL_MAX_STREAMS_BIDI, self.initial_max_streams_bidi),
            (id::INITIAL_MAX_STREAMS_UNI, self.initial_max_streams_uni),
            (id::ACTIVE_CONNECTION_ID_LIMIT, self.active_connection_id_limit),
        ];
        for (id, value) in ints {
            debug_assert!(value <= varint::MAX);
            varint::encode(id, out);
            varint::encode(varint::encoded_len(value) as u64, out);
            varint::encode(value, out);
        }
        varint::encode(id::INITIAL_SOURCE_CONNECTION_ID, out);
        varint::encode(self.initial_source_connection_id.len() as u64, out);
        out.extend_from_slice(&self.initial_source_connection_id);
    }
}

/// The server's transport parameters, as received: those it left out have RFC 9000's defaults.
/// Whether the connection IDs match the ones on the wire (§7.3) is for the caller to check,
/// as is that a retry_source_connection_id comes exactly when there was a Retry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ServerParams {
    pub original_destination_connection_id: ConnectionId,
    pub initial_source_connection_id: ConnectionId,
    pub retry_source_connection_id: Option<ConnectionId>,
    pub stateless_reset_token: Option<[u8; 16]>,
    /// 0: no idle timeout on the server's side.
    pub max_idle_timeout_ms: u64,
    pub max_udp_payload_size: u64,
    pub initial_max_data: u64,
    pub initial_max_stream_data_bidi_local: u64,
    pub initial_max_stream_data_bidi_remote: u64,
    pub initial_max_stream_data_uni: u64,
    pub initial_max_streams_bidi: u64,
    pub initial_max_streams_uni: u64,
    pub ack_delay_exponent: u64,
    pub max_ack_delay_ms: u64,
    pub disable_active_migration: bool,
    pub active_connection_id_limit: u64,
}

/// The server's transport parameters break RFC 9000 §18. Every one is a connection error of
/// type [`TRANSPORT_PARAMETER_ERROR`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub(crate) enum ParamsError {
    #[error("the server's transport parameters end inside a parameter")]
    Truncated,
    #[error("the server's transport parameters carry {name} twice")]
    Duplicate { name: &'static str },
    #[error("the server's transport parameter {name} has a malformed value of {len} bytes")]
    Malformed { name: &'static str, len: usize },
    #[error("the server's transport parameter {name} is out of range: {value}")]
    OutOfRange { name: &'static str, value: u64 },
    #[error("the server's transport parameters lack {name}")]
    Missing { name: &'static str },
}

impl ParamsError {
    /// The transport error code to close the connection with.
    pub(crate) fn code(self) -> u64 {
        TRANSPORT_PARAMETER_ERROR
    }
}

impl ServerParams {
    /// Decodes the body of the server's quic_transport_parameters extension.
    pub(crate) fn decode(mut bytes: &[u8]) -> Result<Self, ParamsError> {
        let mut params = ServerParams {
            original_destination_connection_id: ConnectionId::default(),
            initial_source_connection_id: ConnectionId::default(),
            retry_source_connection_id: None,
            stateless_reset_token: None,
            max_idle_timeout_ms: 0,
            max_udp_payload_size: MAX_UDP_PAYLOAD_SIZE,
            initial_max_data: 0,
            initial_max_stream_data_bidi_local: 0,
            initial_max_stream_data_bidi_remote: 0,
            initial_max_stream_data_uni: 0,
            initial_max_streams_bidi: 0,
            initial_max_streams_uni: 0,
            ack_delay_exponent: 3,
            max_ack_delay_ms: 25,
            disable_active_migration: false,
            active_connection_id_limit: 2,
        };
        // One bit per id of RFC 9000's, to catch duplicates (§7.4); unknown ids are not tracked.
        let mut seen = 0u32;
        while !bytes.is_empty() {
            let (id, value, rest) = next_param(bytes)?;
            bytes = rest;
            let Some(&name) = usize::try_from(id).ok().and_then(|i| id::NAMES.get(i)) else {
                continue;
            };
            let bit = 1u32 << id;
            if seen & bit != 0 {
                return Err(ParamsError::Duplicate { name });
            }
            seen |= bit;
            let malformed = ParamsError::Malformed { name, len: value.len() };
            let int = || int_value(value).ok_or(malformed);
            let cid = || ConnectionId::new(value).ok_or(malformed);
            let at_most = |value: u64, max: u64| match value <= max {
                true => Ok(value),
                false => Err(ParamsError::OutOfRange { name, value }),
            };
            let at_least = |value: u64, min: u64| match value >= min {
                true => Ok(value),
                false => Err(ParamsError::OutOfRange { name, value }),
            };
            match id {
                id::ORIGINAL_DESTINATION_CONNECTION_ID => params.original_destination_connection_id = cid()?,
                id::MAX_IDLE_TIMEOUT => params.max_idle_timeout_ms = int()?,
                id::STATELESS_RESET_TOKEN => {
                    params.stateless_reset_token = Some(value.try_into().map_err(|_| malformed)?);
                }
                id::MAX_UDP_PAYLOAD_SIZE => params.max_udp_payload_size = at_least(int()?, MIN_UDP_PAYLOAD_SIZE)?,
                id::INITIAL_MAX_DATA => params.initial_max_data = int()?,
                id::INITIAL_MAX_STREAM_DATA_BIDI_LOCAL => params.initial_max_stream_data_bidi_local = int()?,
                id::INITIAL_MAX_STREAM_DATA_BIDI_REMOTE => params.initial_max_stream_data_bidi_remote = int()?,
                id::INITIAL_MAX_STREAM_DATA_UNI => params.initial_max_stream_data_uni = int()?,
                id::INITIAL_MAX_STREAMS_BIDI => params.initial_max_streams_bidi = at_most(int()?, MAX_STREAMS)?,
                id::INITIAL_MAX_STREAMS_UNI => params.initial_max_streams_uni = at_most(int()?, MAX_STREAMS)?,
                id::ACK_DELAY_EXPONENT => params.ack_delay_exponent = at_most(int()?, MAX_ACK_DELAY_EXPONENT)?,
                id::MAX_ACK_DELAY => params.max_ack_delay_ms = at_most(int()?, MAX_ACK_DELAY_LIMIT - 1)?,
                id::DISABLE_ACTIVE_MIGRATION => {
                    if !value.is_empty() {
                        return Err(malformed);
                    }
                    params.disable_active_migration = true;
                }
                // Migrating to the server's preferred address is not something a load
                // generator does; its own length already told where it ends.
                id::PREFERRED_ADDRESS => {}
                id::ACTIVE_CONNECTION_ID_LIMIT => params.active_connection_id_limit = at_least(int()?, 2)?,
                id::INITIAL_SOURCE_CONNECTION_ID => params.initial_source_connection_id = cid()?,
                id::RETRY_SOURCE_CONNECTION_ID => params.retry_source_connection_id = Some(cid()?),
                _ => {}
            }
        }
        for required in [id::ORIGINAL_DESTINATION_CONNECTION_ID, id::INITIAL_SOURCE_CONNECTION_ID] {
            if seen & (1 << required) == 0 {
                return Err(ParamsError::Missing { name: id::NAMES[required as usize] });
            }
        }
        Ok(params)
    }
}

/// Splits the first parameter off `bytes`: its id, its value and what follows.
fn next_param(bytes: &[u8]) -> Result<(u64, &[u8], &[u8]), ParamsError> {
    let (id, id_len) = varint::decode(bytes).ok_or(ParamsError::Truncated)?;
    let bytes = &bytes[id_len..];
    let (len, len_len) = varint::decode(bytes).ok_or(ParamsError::Truncated)?;
    let bytes = &bytes[len_len..];
    let len = usize::try_from(len).ok().filter(|&len| len <= bytes.len()).ok_or(ParamsError::Truncated)?;
    let (value, rest) = bytes.split_at(len);
    Ok((id, value, rest))
}

/// An integer parameter's value: one varint that fills it exactly.
fn int_value(value: &[u8]) -> Option<u64> {
    varint::decode(value).filter(|&(_, len)| len == value.len()).map(|(v, _)| v)
}
