//! End to end: certificates as users make them and meet them. A self-signed certificate made by
//! the `openssl` command (CA:TRUE, as `openssl req -x509` marks it) is trusted with `--cacert`
//! as curl trusts it, against nginx over HTTP/1.1 and HTTP/2; a certificate that does not
//! verify ends the run with one line on stderr saying what is wrong and what to do.

use crate::support;

use std::process::Output;

use support::{Behavior, Nginx, TestCert, TestServer, json_report, number, run_volley};

/// The run failed with exactly one line on stderr, saying that every request failed with the
/// TLS error `sentence`; the JSON report's TLS error sample is the same sentence.
fn assert_refused_with(out: &Output, sentence: &str) {
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "expected failure; stderr: {err}");
    let lines: Vec<&str> = err.lines().collect();
    assert_eq!(lines.len(), 1, "expected one line on stderr, got: {err:?}");
    assert!(lines[0].starts_with("volley: error: no request succeeded: all "), "{err}");
    assert!(lines[0].ends_with(&format!(" failed (tls: {sentence})")), "expected '{sentence}' in:\n{err}");
    let r = json_report(out);
    assert_eq!(r["errorSamples"]["tls"], sentence, "{r}");
    assert_eq!(number(&r, "/requests/ok"), 0, "{r}");
}

#[test]
fn a_self_signed_certificate_made_by_openssl_is_trusted_with_cacert_over_http1_and_http2() {
    let Some(cert) = TestCert::openssl_self_signed("DNS:localhost") else { return };
    let Some(nginx) = Nginx::start_tls_with(cert) else { return };
    let ca = nginx.cert().unwrap().write_ca(nginx.dir());
    let ca = ca.to_str().unwrap();
    let url = nginx.https_url().replace("127.0.0.1", "localhost");

    let r = json_report(&run_volley(["-n", "300", "-c", "3", "--cacert", ca, "-j", &url]));
    assert_eq!(number(&r, "/requests/ok"), 300, "{r}");
    let r = json_report(&run_volley(["--http2", "-n", "400", "-c", "2", "-p", "8", "--cacert", ca, "-j", &url]));
    assert_eq!(number(&r, "/requests/ok"), 400, "{r}");

    assert_eq!(nginx.settled_requests(), 700);
    let lines = nginx.log_lines();
    assert_eq!(lines.iter().filter(|l| l.contains(" HTTP/1.1 ")).count(), 300, "{lines:?}");
    assert_eq!(lines.iter().filter(|l| l.contains(" HTTP/2.0 ")).count(), 400, "{lines:?}");
}

#[test]
fn a_self_signed_certificate_is_still_refused_for_another_name_without_cacert_or_from_another_key() {
    let Some(cert) = TestCert::openssl_self_signed("DNS:localhost") else { return };
    let Some(same_subject) = TestCert::openssl_self_signed("DNS:localhost") else { return };
    let Some(nginx) = Nginx::start_tls_with(cert) else { return };
    let ca = nginx.cert().unwrap().write_ca(nginx.dir());
    let ca = ca.to_str().unwrap();
    let by_name = nginx.https_url().replace("127.0.0.1", "localhost");

    // The certificate names only localhost: the address is not one of its names.
    let out = run_volley(["-n", "20", "-c", "2", "--cacert", ca, "-j", &nginx.https_url()]);
    assert_refused_with(
        &out,
        "the server's certificate is not valid for 127.0.0.1 (it names localhost): use one of its names in the \
         URL, or skip verification with -k",
    );

    let ca_sentence = "the server's certificate is a CA certificate (CA:TRUE), which is accepted only when it is \
                       itself one of the --cacert certificates: give that certificate with --cacert FILE, or skip \
                       verification with -k";
    assert_refused_with(&run_volley(["-n", "20", "-c", "2", "-j", &by_name]), ca_sentence);

    // Same subject and name, made by another key: not the certificate the server has.
    let other = nginx.dir().join("other.pem");
    std::fs::write(&other, &same_subject.cert_pem).unwrap();
    let out = run_volley(["-n", "20", "-c", "2", "--cacert", other.to_str().unwrap(), "-j", &by_name]);
    assert_refused_with(&out, ca_sentence);

    assert_eq!(nginx.settled_requests(), 0);
}

#[test]
fn a_server_certificate_from_an_unknown_ca_is_refused_with_what_to_do() {
    let server = TestServer::start_tls(Behavior::ok(14));
    let url = server.url().replace("127.0.0.1", "localhost");
    assert_refused_with(
        &run_volley(["-n", "10", "-c", "2", "-j", &url]),
        "the server's certificate is not signed by a CA volley trusts (unknown issuer): give that CA, or a \
         self-signed certificate itself, with --cacert FILE, or skip verification with -k",
    );
    // Trusting its CA is the fix that the line names.
    let dir = tempfile::tempdir().unwrap();
    let ca = server.cert().unwrap().write_ca(dir.path());
    let r = json_report(&run_volley(["-n", "10", "-c", "2", "--cacert", ca.to_str().unwrap(), "-j", &url]));
    assert_eq!(number(&r, "/requests/ok"), 10, "{r}");
    assert_eq!(server.requests(), 10);
}
