//! A tiny blocking HTTP/1.1 client to poke servers with.

use std::io::{self, BufRead, BufReader, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

/// A response as read by [`read_response`]. Header names are lowercased.
#[derive(Clone, Debug)]
pub struct RawResponse {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
    /// Interim (1xx) responses seen before the final one, by status.
    pub interim: Vec<u16>,
}

impl RawResponse {
    /// First value of header `name` (case-insensitive).
    pub fn header(&self, name: &str) -> Option<&str> {
        header_lookup(&self.headers, name)
    }
}

pub(super) fn header_lookup<'a>(headers: &'a [(String, String)], name: &str) -> Option<&'a str> {
    headers.iter().find(|(n, _)| n.eq_ignore_ascii_case(name)).map(|(_, v)| v.as_str())
}

/// Writes one HTTP/1.1 request (`Host: test`, plus `Content-Length` when `body` is not empty).
pub fn send_request(
    stream: &mut impl Write,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &[u8],
) -> io::Result<()> {
    let mut out = format!("{method} {path} HTTP/1.1\r\nHost: test\r\n");
    for (name, value) in headers {
        out.push_str(&format!("{name}: {value}\r\n"));
    }
    if !body.is_empty() {
        out.push_str(&format!("Content-Length: {}\r\n", body.len()));
    }
    out.push_str("\r\n");
    let mut bytes = out.into_bytes();
    bytes.extend_from_slice(body);
    stream.write_all(&bytes)?;
    stream.flush()
}

/// Reads one response (skipping 1xx) from `reader`; handles Content-Length, chunked and
/// read-to-close bodies. Reuse the same `BufReader` for the next response on the connection.
/// `head_request`: the request was HEAD, so no body follows.
pub fn read_response(reader: &mut impl BufRead, head_request: bool) -> io::Result<RawResponse> {
    let mut interim = Vec::new();
    loop {
        let status_line = read_line(reader)?;
        let status: u16 = status_line
            .split(' ')
            .nth(1)
            .and_then(|s| s.parse().ok())
            .ok_or_else(|| invalid(format!("bad status line {status_line:?}")))?;
        let mut headers = Vec::new();
        loop {
            let line = read_line(reader)?;
            if line.is_empty() {
                break;
            }
            let (name, value) = line.split_once(':').ok_or_else(|| invalid(format!("bad header line {line:?}")))?;
            headers.push((name.trim().to_ascii_lowercase(), value.trim().to_string()));
        }
        if (100..200).contains(&status) {
            interim.push(status);
            continue;
        }
        let mut body = Vec::new();
        if head_request || status == 204 || status == 304 {
        } else if header_lookup(&headers, "transfer-encoding").is_some_and(|v| v.eq_ignore_ascii_case("chunked")) {
            loop {
                let size_line = read_line(reader)?;
                let size_hex = size_line.split(';').next().unwrap_or("").trim();
                let size = usize::from_str_radix(size_hex, 16)
                    .map_err(|_| invalid(format!("bad chunk size {size_line:?}")))?;
                if size == 0 {
                    while !read_line(reader)?.is_empty() {}
                    break;
                }
                let start = body.len();
                body.resize(start + size, 0);
                reader.read_exact(&mut body[start..])?;
                if !read_line(reader)?.is_empty() {
                    return Err(invalid("chunk not followed by CRLF".into()));
                }
            }
        } else if let Some(len) = header_lookup(&headers, "content-length") {
            let len: usize = len.parse().map_err(|_| invalid(format!("bad content-length {len:?}")))?;
            body.resize(len, 0);
            reader.read_exact(&mut body)?;
        } else {
            reader.read_to_end(&mut body)?;
        }
        return Ok(RawResponse { status, headers, body, interim });
    }
}

fn read_line(reader: &mut impl BufRead) -> io::Result<String> {
    let mut line = Vec::new();
    reader.read_until(b'\n', &mut line)?;
    if !line.ends_with(b"\r\n") {
        return Err(io::Error::new(io::ErrorKind::UnexpectedEof, "connection closed inside a line"));
    }
    line.truncate(line.len() - 2);
    String::from_utf8(line).map_err(|_| invalid("non-UTF-8 line".into()))
}

pub(super) fn invalid(msg: String) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, msg)
}

/// One GET on a new plain connection: `GET path` to `addr`, then the response.
pub fn http_get(addr: SocketAddr, path: &str) -> io::Result<RawResponse> {
    let mut stream = TcpStream::connect(addr)?;
    stream.set_read_timeout(Some(Duration::from_secs(10)))?;
    send_request(&mut stream, "GET", path, &[], b"")?;
    read_response(&mut BufReader::new(stream), false)
}
