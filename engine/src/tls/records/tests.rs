//! The engine's TLS session against a rustls server in memory, past the handshake: every
//! record the server writes opened once and in order however receives cut them, ours read
//! by the server, for each version and suite; key updates both ways; close_notify, alerts
//! and tampering.

use std::io::{Read, Write};
use std::sync::Arc;

use rustls::crypto::ring::cipher_suite;
use rustls::pki_types::{PrivateKeyDer, PrivatePkcs8KeyDer, ServerName};
use rustls::{ServerConfig, ServerConnection, SupportedCipherSuite};

use crate::plan::TlsOptions;
use crate::test_rng::Rng;
use crate::tls::{TlsSession, client_config};

/// A server offering only `suite` (and so only its version), and the engine's session with
/// it, both past the handshake.
fn connected(suite: SupportedCipherSuite) -> (ServerConnection, TlsSession) {
    let key = rcgen::KeyPair::generate().unwrap();
    let cert = rcgen::CertificateParams::new(vec!["localhost".into()]).unwrap().self_signed(&key).unwrap();
    let key = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(key.serialize_der()));
    let mut provider = rustls::crypto::ring::default_provider();
    provider.cipher_suites = vec![suite];
    let server = ServerConfig::builder_with_provider(Arc::new(provider))
        .with_protocol_versions(&[suite.version()])
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(vec![cert.der().clone()], key)
        .unwrap();
    let mut server = ServerConnection::new(Arc::new(server)).unwrap();
    server.set_buffer_limit(None);
    let options = TlsOptions { insecure: true, extra_ca_pem: Vec::new() };
    let config = client_config(&options, &[]).unwrap();
    let mut client = TlsSession::new(&config, &ServerName::try_from("localhost").unwrap()).unwrap();
    let mut plain = Vec::new();
    for _ in 0..10 {
        to_server(&mut client, &mut server);
        let mut wire = from_server(&mut server);
        client.receive(&mut wire, &mut plain).unwrap();
        if !client.is_handshaking() && !server.is_handshaking() {
            to_server(&mut client, &mut server);
            assert!(plain.is_empty());
            return (server, client);
        }
    }
    panic!("the handshake did not finish")
}

/// Hands the client's records to the server; returns the plaintext the server read.
fn to_server(client: &mut TlsSession, server: &mut ServerConnection) -> Vec<u8> {
    let mut wire = Vec::new();
    client.take_ciphertext(&mut wire);
    let mut from_client = &wire[..];
    let mut plain = Vec::new();
    while !from_client.is_empty() {
        server.read_tls(&mut from_client).unwrap();
        server.process_new_packets().unwrap();
        let _ = server.reader().read_to_end(&mut plain);
    }
    plain
}

fn from_server(server: &mut ServerConnection) -> Vec<u8> {
    let mut wire = Vec::new();
    while server.wants_write() {
        server.write_tls(&mut wire).unwrap();
    }
    wire
}

/// Feeds `wire` to the client in pieces of random sizes; returns the plaintext.
fn receive_in_pieces(client: &mut TlsSession, wire: &[u8], rng: &mut Rng) -> Vec<u8> {
    let mut plain = Vec::new();
    let mut rest = wire;
    while !rest.is_empty() {
        let n = (1 + rng.below(3_000)).min(rest.len());
        let mut piece = rest[..n].to_vec();
        rest = &rest[n..];
        assert!(!client.receive(&mut piece, &mut plain).unwrap().closed);
    }
    plain
}

/// Records of 0 to 100 bytes and some over a record's 16 KiB, as a server writes them.
fn server_writes(server: &mut ServerConnection, rng: &mut Rng) -> (Vec<u8>, Vec<u8>) {
    let mut sent = Vec::new();
    for i in 0..200 {
        let len = if i % 50 == 49 { 20_000 + rng.below(20_000) } else { rng.below(100) };
        let text: Vec<u8> = (0..len).map(|_| rng.below(256) as u8).collect();
        server.writer().write_all(&text).unwrap();
        sent.extend_from_slice(&text);
    }
    (sent, from_server(server))
}

fn round_trips(suite: SupportedCipherSuite) {
    let (mut server, mut client) = connected(suite);
    let mut rng = Rng(0x5eed);
    for round in 0..3 {
        let (sent, wire) = server_writes(&mut server, &mut rng);
        assert_eq!(receive_in_pieces(&mut client, &wire, &mut rng), sent, "{suite:?}, round {round}");
        // Ours, small and over a record's size, read back by rustls.
        let request: Vec<u8> = (0..40_000).map(|_| rng.below(256) as u8).collect();
        client.send(b"GET / HTTP/1.1\r\n\r\n");
        client.send(&request);
        let got = to_server(&mut client, &mut server);
        assert_eq!(&got[..18], b"GET / HTTP/1.1\r\n\r\n");
        assert_eq!(&got[18..], &request[..], "{suite:?}, round {round}");
    }
}

#[test]
fn tls13_aes_128_gcm_records_come_out_whole_and_in_order_both_ways() {
    round_trips(cipher_suite::TLS13_AES_128_GCM_SHA256);
}

#[test]
fn tls13_aes_256_gcm_and_chacha20_records_come_out_whole_and_in_order_both_ways() {
    round_trips(cipher_suite::TLS13_AES_256_GCM_SHA384);
    round_trips(cipher_suite::TLS13_CHACHA20_POLY1305_SHA256);
}

#[test]
fn tls12_gcm_with_its_explicit_nonce_and_chacha20_records_come_out_whole_and_in_order_both_ways() {
    round_trips(cipher_suite::TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256);
    round_trips(cipher_suite::TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256);
}

#[test]
fn the_servers_key_updates_are_followed_and_ours_are_read_by_it() {
    let (mut server, mut client) = connected(cipher_suite::TLS13_AES_128_GCM_SHA256);
    let mut rng = Rng(11);
    // rustls's refresh asks us to update ours too; and every 50 records we update ours anyway
    // (the test build's key limit), so both sides change keys several times.
    for round in 0..4 {
        server.refresh_traffic_keys().unwrap();
        let (sent, wire) = server_writes(&mut server, &mut rng);
        assert_eq!(receive_in_pieces(&mut client, &wire, &mut rng), sent, "round {round}");
        for n in 0..60 {
            client.send(format!("request {round}.{n}\n").as_bytes());
        }
        let got = String::from_utf8(to_server(&mut client, &mut server)).unwrap();
        assert_eq!(got.lines().count(), 60, "round {round}");
        assert!(got.ends_with(&format!("request {round}.59\n")));
    }
}

#[test]
fn close_notify_ends_the_plaintext_and_what_follows_is_not_read() {
    for suite in [cipher_suite::TLS13_AES_128_GCM_SHA256, cipher_suite::TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256] {
        let (mut server, mut client) = connected(suite);
        server.writer().write_all(b"last words").unwrap();
        server.send_close_notify();
        let mut wire = from_server(&mut server);
        wire.extend_from_slice(b"\x17\x03\x03\x00\x05junk!");
        let mut plain = Vec::new();
        assert!(client.receive(&mut wire, &mut plain).unwrap().closed, "{suite:?}");
        assert_eq!(plain, b"last words");
        assert!(!client.receive(&mut b"more".to_vec(), &mut plain).unwrap().closed);
        assert_eq!(plain, b"last words");
    }
}

#[test]
fn a_tampered_record_fails_the_session_as_undecryptable() {
    for suite in [cipher_suite::TLS13_AES_128_GCM_SHA256, cipher_suite::TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256] {
        let (mut server, mut client) = connected(suite);
        server.writer().write_all(b"response").unwrap();
        let mut wire = from_server(&mut server);
        let last = wire.len() - 1;
        wire[last] ^= 1;
        let err = client.receive(&mut wire, &mut Vec::new()).err();
        assert_eq!(err, Some(rustls::Error::DecryptError), "{suite:?}");
    }
}

#[test]
fn a_fatal_alert_from_the_server_is_its_error() {
    let (mut server, mut client) = connected(cipher_suite::TLS13_AES_128_GCM_SHA256);
    // A record the server cannot read makes it send bad_record_mac.
    let mut garbage = b"\x17\x03\x03\x00\x20".to_vec();
    garbage.extend_from_slice(&[7; 32]);
    server.read_tls(&mut &garbage[..]).unwrap();
    assert!(server.process_new_packets().is_err());
    let mut wire = from_server(&mut server);
    let err = client.receive(&mut wire, &mut Vec::new()).err();
    assert_eq!(err, Some(rustls::Error::AlertReceived(rustls::AlertDescription::BadRecordMac)));
}

#[test]
fn a_reply_that_is_not_tls_is_refused() {
    let (_, mut client) = connected(cipher_suite::TLS13_AES_128_GCM_SHA256);
    let err = client.receive(&mut b"HTTP/1.1 400 Bad Request\r\n\r\n".to_vec(), &mut Vec::new()).err();
    assert!(matches!(err, Some(rustls::Error::InvalidMessage(_))), "{err:?}");
}
