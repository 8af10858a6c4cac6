//! Our parameters back through a decoder of the tests' own, a server's by hand with reserved and
//! unknown ids, and every rule a server's can break.

use super::*;

fn cid(bytes: &[u8]) -> ConnectionId {
    ConnectionId::new(bytes).expect("a connection ID")
}

/// Every parameter of an encoding, in order.
fn params_of(mut bytes: &[u8]) -> Vec<(u64, Vec<u8>)> {
    let mut params = Vec::new();
    while !bytes.is_empty() {
        let (id, value, rest) = next_param(bytes).expect("well formed");
        params.push((id, value.to_vec()));
        bytes = rest;
    }
    params
}

/// One parameter, encoded.
fn param(id: u64, value: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    varint::encode(id, &mut out);
    varint::encode(value.len() as u64, &mut out);
    out.extend_from_slice(value);
    out
}

fn int_param(id: u64, value: u64) -> Vec<u8> {
    let mut encoded = Vec::new();
    varint::encode(value, &mut encoded);
    param(id, &encoded)
}

fn client_params() -> ClientParams {
    ClientParams {
        initial_max_data: (1 << 62) - 1,
        initial_max_stream_data_bidi_local: 16 << 20,
        initial_max_stream_data_bidi_remote: 16 << 20,
        initial_max_stream_data_uni: 16 << 20,
        initial_max_streams_bidi: 100,
        initial_max_streams_uni: 16,
        max_idle_timeout_ms: 30_000,
        max_udp_payload_size: 1452,
        active_connection_id_limit: 2,
        initial_source_connection_id: cid(&[0xc1, 0xc2, 0xc3, 0xc4, 0xc5, 0xc6, 0xc7, 0xc8]),
    }
}

/// The minimal server parameters: the two connection IDs it must send.
fn required() -> Vec<u8> {
    [param(0x00, &[1, 2, 3, 4, 5, 6, 7, 8]), param(0x0f, &[9, 9, 9, 9])].concat()
}

#[test]
fn client_params_round_trip() {
    let params = client_params();
    let mut out = Vec::new();
    params.encode(&mut out);
    let decoded = params_of(&out);
    let int = |id: u64| {
        let values: Vec<u64> =
            decoded.iter().filter(|(i, _)| *i == id).map(|(_, v)| int_value(v).expect("an integer")).collect();
        assert_eq!(values.len(), 1, "id {id:#x} once");
        values[0]
    };
    assert_eq!(int(0x01), params.max_idle_timeout_ms);
    assert_eq!(int(0x03), params.max_udp_payload_size);
    assert_eq!(int(0x04), params.initial_max_data);
    assert_eq!(int(0x05), params.initial_max_stream_data_bidi_local);
    assert_eq!(int(0x06), params.initial_max_stream_data_bidi_remote);
    assert_eq!(int(0x07), params.initial_max_stream_data_uni);
    assert_eq!(int(0x08), params.initial_max_streams_bidi);
    assert_eq!(int(0x09), params.initial_max_streams_uni);
    assert_eq!(int(0x0e), params.active_connection_id_limit);
    let scid: Vec<_> = decoded.iter().filter(|(id, _)| *id == 0x0f).map(|(_, v)| v.clone()).collect();
    assert_eq!(scid, [params.initial_source_connection_id.to_vec()]);
    assert_eq!(decoded.len(), 10, "nothing a client must not send: {decoded:x?}");
}

#[test]
fn client_params_bytes_by_hand() {
    let params = ClientParams {
        initial_max_data: 0x40,
        initial_max_stream_data_bidi_local: 1,
        initial_max_stream_data_bidi_remote: 2,
        initial_max_stream_data_uni: 3,
        initial_max_streams_bidi: 4,
        initial_max_streams_uni: 5,
        max_idle_timeout_ms: 30_000,
        max_udp_payload_size: 1200,
        active_connection_id_limit: 8,
        initial_source_connection_id: cid(&[0xab, 0xcd]),
    };
    let mut out = Vec::new();
    params.encode(&mut out);
    let expected = [
        "01 04 80007530", // max_idle_timeout 30000: a 4-byte varint
        "03 02 44b0",     // max_udp_payload_size 1200
        "04 02 4040",     // initial_max_data 64: 2 bytes
        "05 01 01",
        "06 01 02",
        "07 01 03",
        "08 01 04",
        "09 01 05",
        "0e 01 08",
        "0f 02 abcd",
    ]
    .concat();
    assert_eq!(out, super::super::packet::tests::hex(&expected));
}

#[test]
fn a_server_blob_with_reserved_and_unknown_ids_decodes() {
    let blob = [
        param(27, b"grease"),               // 31 * 0 + 27
        param(31 * 1000 + 27, &[0xff; 40]), // a 2-byte id
        param(0x2ab2, &[]),                 // unknown, empty
        required(),
        int_param(0x01, 60_000),
        param(0x02, &[0x5a; 16]),
        int_param(0x03, 1472),
        int_param(0x04, 1 << 20),
        int_param(0x05, 1 << 16),
        int_param(0x06, 1 << 17),
        int_param(0x07, 1 << 18),
        int_param(0x08, 1 << 60),
        int_param(0x09, 3),
        int_param(0x0a, 20),
        int_param(0x0b, (1 << 14) - 1),
        param(0x0c, &[]),
        param(0x0d, &[0x7f; 41]), // preferred_address: skipped whole
        int_param(0x0e, 4),
        param(0x10, &[6; 20]),
        param(4_611_686_018_427_387_903, b"the largest id"),
    ]
    .concat();
    let params = ServerParams::decode(&blob).expect("decodes");
    assert_eq!(
        params,
        ServerParams {
            original_destination_connection_id: cid(&[1, 2, 3, 4, 5, 6, 7, 8]),
            initial_source_connection_id: cid(&[9, 9, 9, 9]),
            retry_source_connection_id: Some(cid(&[6; 20])),
            stateless_reset_token: Some([0x5a; 16]),
            max_idle_timeout_ms: 60_000,
            max_udp_payload_size: 1472,
            initial_max_data: 1 << 20,
            initial_max_stream_data_bidi_local: 1 << 16,
            initial_max_stream_data_bidi_remote: 1 << 17,
            initial_max_stream_data_uni: 1 << 18,
            initial_max_streams_bidi: 1 << 60,
            initial_max_streams_uni: 3,
            ack_delay_exponent: 20,
            max_ack_delay_ms: (1 << 14) - 1,
            disable_active_migration: true,
            active_connection_id_limit: 4,
        }
    );
}

#[test]
fn absent_parameters_take_the_rfc_defaults() {
    let params = ServerParams::decode(&required()).expect("decodes");
    assert_eq!(
        params,
        ServerParams {
            original_destination_connection_id: cid(&[1, 2, 3, 4, 5, 6, 7, 8]),
            initial_source_connection_id: cid(&[9, 9, 9, 9]),
            retry_source_connection_id: None,
            stateless_reset_token: None,
            max_idle_timeout_ms: 0,
            max_udp_payload_size: 65527,
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
        }
    );
    // An empty connection ID is a connection ID.
    let empty = [param(0x00, &[]), param(0x0f, &[])].concat();
    assert_eq!(ServerParams::decode(&empty).expect("decodes").initial_source_connection_id, cid(&[]));
}

#[test]
fn every_broken_rule_is_an_error() {
    use ParamsError::*;
    let with = |extra: Vec<u8>| ServerParams::decode(&[required(), extra].concat());
    let out_of_range = |name, value| Err(OutOfRange { name, value });

    assert_eq!(with(vec![0x01]), Err(Truncated), "an id alone");
    assert_eq!(with(vec![0x01, 0x04, 0x80]), Err(Truncated), "a value past the end");
    assert_eq!(with(vec![0x01, 0x40]), Err(Truncated), "a length cut short");
    assert_eq!(with(param(0x0f, &[1])), Err(Duplicate { name: "initial_source_connection_id" }));
    assert_eq!(with([int_param(0x0a, 1), int_param(0x0a, 1)].concat()), Err(Duplicate { name: "ack_delay_exponent" }));

    assert_eq!(with(param(0x01, &[0x05, 0x00])), Err(Malformed { name: "max_idle_timeout", len: 2 }));
    assert_eq!(with(param(0x04, &[0x40])), Err(Malformed { name: "initial_max_data", len: 1 }));
    assert_eq!(with(param(0x04, &[])), Err(Malformed { name: "initial_max_data", len: 0 }));
    assert_eq!(with(param(0x02, &[0; 15])), Err(Malformed { name: "stateless_reset_token", len: 15 }));
    assert_eq!(with(param(0x0c, &[0])), Err(Malformed { name: "disable_active_migration", len: 1 }));
    assert_eq!(with(param(0x10, &[0; 21])), Err(Malformed { name: "retry_source_connection_id", len: 21 }));

    assert_eq!(with(int_param(0x03, 1199)), out_of_range("max_udp_payload_size", 1199));
    assert_eq!(with(int_param(0x0a, 21)), out_of_range("ack_delay_exponent", 21));
    assert_eq!(with(int_param(0x0b, 1 << 14)), out_of_range("max_ack_delay", 1 << 14));
    assert_eq!(with(int_param(0x0e, 1)), out_of_range("active_connection_id_limit", 1));
    assert_eq!(with(int_param(0x0e, 0)), out_of_range("active_connection_id_limit", 0));
    assert_eq!(with(int_param(0x08, (1 << 60) + 1)), out_of_range("initial_max_streams_bidi", (1 << 60) + 1));
    assert_eq!(with(int_param(0x09, (1 << 60) + 1)), out_of_range("initial_max_streams_uni", (1 << 60) + 1));

    assert_eq!(ServerParams::decode(&param(0x0f, &[1])), Err(Missing { name: "original_destination_connection_id" }));
    assert_eq!(ServerParams::decode(&param(0x00, &[1])), Err(Missing { name: "initial_source_connection_id" }));
    assert_eq!(ServerParams::decode(&[]), Err(Missing { name: "original_destination_connection_id" }));
}

#[test]
fn errors_read_as_one_line_and_are_transport_parameter_errors() {
    let error = ServerParams::decode(&[required(), int_param(0x0a, 21)].concat()).expect_err("out of range");
    assert_eq!(error.to_string(), "the server's transport parameter ack_delay_exponent is out of range: 21");
    assert_eq!(error.code(), 0x08);
}

#[test]
fn random_bytes_never_panic() {
    let mut rng = crate::test_rng::Rng(0x7a7a_5eed_0042_0001);
    let seed = [required(), int_param(0x01, 60_000), param(0x02, &[0x5a; 16]), param(0x0c, &[])].concat();
    for round in 0..20_000 {
        let bytes: Vec<u8> = if round % 2 == 0 {
            (0..rng.below(80)).map(|_| rng.next() as u8).collect()
        } else {
            let mut bytes = seed.clone();
            let at = rng.below(bytes.len());
            bytes[at] = rng.next() as u8;
            bytes.truncate(rng.below(bytes.len() + 1));
            bytes
        };
        let _ = ServerParams::decode(&bytes);
    }
}
