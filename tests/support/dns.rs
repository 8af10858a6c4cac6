//! A DNS server of a few lines, for resolvers pointed at it: it answers one name with the A
//! records it was given (and AAAA with none), every other name with NXDOMAIN, and counts the
//! questions it was asked. Enough for glibc's stub resolver, which is all a test needs of DNS.

use std::net::{Ipv4Addr, UdpSocket};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

const TYPE_A: u16 = 1;
const CLASS_IN: u16 = 1;

/// Answers on `socket` (already bound, in whatever network namespace the test wants) until
/// dropped.
pub struct DnsServer {
    stop: Arc<AtomicBool>,
    questions: Arc<AtomicU64>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl DnsServer {
    /// Serves `name` (without the trailing dot, any case) as `addresses` on `socket`.
    pub fn serve(socket: UdpSocket, name: &str, addresses: Vec<Ipv4Addr>) -> DnsServer {
        let stop = Arc::new(AtomicBool::new(false));
        let questions = Arc::new(AtomicU64::new(0));
        socket.set_read_timeout(Some(Duration::from_millis(100))).expect("a read timeout");
        let wanted: Vec<String> = name.split('.').map(str::to_ascii_lowercase).collect();
        let thread = std::thread::spawn({
            let (stop, questions) = (stop.clone(), questions.clone());
            move || {
                let mut buf = [0u8; 1500];
                while !stop.load(Ordering::Relaxed) {
                    let Ok((n, from)) = socket.recv_from(&mut buf) else { continue };
                    if let Some(answer) = answer(&buf[..n], &wanted, &addresses) {
                        questions.fetch_add(1, Ordering::Relaxed);
                        let _ = socket.send_to(&answer, from);
                    }
                }
            }
        });
        DnsServer { stop, questions, thread: Some(thread) }
    }

    /// Questions answered so far.
    pub fn questions(&self) -> u64 {
        self.questions.load(Ordering::Relaxed)
    }
}

impl Drop for DnsServer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// The response to one query: the question echoed, and A records for `wanted`'s A question.
fn answer(query: &[u8], wanted: &[String], addresses: &[Ipv4Addr]) -> Option<Vec<u8>> {
    if query.len() < 12 || u16::from_be_bytes([query[4], query[5]]) != 1 {
        return None;
    }
    // The question: labels up to the root, then its type and class.
    let mut at = 12;
    let mut labels = Vec::new();
    loop {
        let len = usize::from(*query.get(at)?);
        at += 1;
        if len == 0 {
            break;
        }
        labels.push(String::from_utf8_lossy(query.get(at..at + len)?).to_ascii_lowercase());
        at += len;
    }
    let qtype = u16::from_be_bytes([*query.get(at)?, *query.get(at + 1)?]);
    let question = query.get(12..at + 4)?;
    let known = labels == wanted;
    let records: &[Ipv4Addr] = if known && qtype == TYPE_A { addresses } else { &[] };
    let mut out = Vec::with_capacity(512);
    out.extend_from_slice(&query[..2]);
    // A response, recursion desired and available; NXDOMAIN for a name it does not know.
    let flags: u16 = 0x8180 | if known { 0 } else { 3 };
    out.extend_from_slice(&flags.to_be_bytes());
    for count in [1, records.len() as u16, 0, 0] {
        out.extend_from_slice(&count.to_be_bytes());
    }
    out.extend_from_slice(question);
    for address in records {
        // The name as a pointer to the question's, then type, class, TTL, length, address.
        out.extend_from_slice(&[0xc0, 0x0c]);
        out.extend_from_slice(&TYPE_A.to_be_bytes());
        out.extend_from_slice(&CLASS_IN.to_be_bytes());
        out.extend_from_slice(&60u32.to_be_bytes());
        out.extend_from_slice(&4u16.to_be_bytes());
        out.extend_from_slice(&address.octets());
    }
    Some(out)
}
