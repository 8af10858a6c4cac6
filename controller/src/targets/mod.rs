//! `--targets FILE`: the requests of a mix, read from a file in vegeta's `http` format
//! (`http.rs`) or as JSON lines (`jsonl.rs`), each with a name its statistics are kept under,
//! all to one origin (`origin.rs`).
//!
//! Both formats hand each target over as a [`Draft`]; [`MixBuilder`] is what they have in
//! common: the origin rule, body files, names and the limits of a mix. `--scenario` files
//! (`crate::scenario`) share the checks of a request and the origin rule from here.

mod bodies;
mod error;
mod http;
mod jsonl;
mod origin;

use std::io::Read;
use std::path::Path;

use volley_engine::{MAX_REQUESTS, NamedRequest, RequestSpec, Target};

pub(crate) use bodies::Bodies;

use error::Located;
pub(crate) use error::{At, Problem, TargetsError, shown};
pub(crate) use origin::{OneOrigin, Shown, same_origin};

/// The largest targets file read: far beyond a mix's limits ([`MAX_REQUESTS`] targets, bodies
/// of [`volley_engine::MAX_BODY_BYTES`] in all), while a wrong file (a disk image, /dev/zero) is refused
/// before it fills the memory.
pub(crate) const MAX_FILE_BYTES: u64 = 256 << 20;

/// The most headers one target may have of its own: servers refuse more (Apache's default
/// limit is 100), and each costs memory in every copy of the plan.
pub(crate) const MAX_HEADERS: usize = 100;

/// How a targets file is written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Format {
    /// vegeta's `http` format: `METHOD URL`, header lines, an optional `@FILE` body line.
    Http,
    /// One JSON object a line: vegeta's JSON targets, with an optional `name`.
    Json,
}

/// A targets file read: the run's origin and its requests, in the file's order.
#[derive(Debug)]
pub(crate) struct Targets {
    /// The origin every request goes to, as a target whose path is `/`.
    pub origin: Target,
    pub requests: Vec<NamedRequest>,
}

/// Reads the targets file at `path`, in `format` or else the one its first line shows. `url`,
/// the command line's, gives the origin (and may then be left out of the file's targets).
pub(crate) fn read(path: &Path, format: Option<Format>, url: Option<&Target>) -> Result<Targets, TargetsError> {
    let file = path.display().to_string();
    if let Some(url) = url
        && url.path_and_query != "/"
    {
        return Err(TargetsError::UrlHasPath { url: url.to_string() });
    }
    let opened = std::fs::File::open(path).map_err(|why| TargetsError::Unreadable { file: file.clone(), why })?;
    let bytes = match read_at_most(opened, MAX_FILE_BYTES) {
        Ok(Some(bytes)) => bytes,
        Ok(None) => return Err(TargetsError::TooLarge { file }),
        Err(why) => return Err(TargetsError::Unreadable { file, why }),
    };
    let text = utf8(&bytes).map_err(|at| at.has(Problem::NotUtf8).in_file(&file))?;
    // Editors on Windows start a file with a byte order mark: not part of the first line.
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let mut mix = MixBuilder::new(url, path.parent().unwrap_or(Path::new("")));
    let parsed = match format.unwrap_or_else(|| detect(text)) {
        Format::Http => http::parse(text, &mut mix),
        Format::Json => jsonl::parse(text, &mut mix),
    };
    parsed.map_err(|located| located.in_file(&file))?;
    match mix.finish() {
        (Some(origin), requests) if !requests.is_empty() => Ok(Targets { origin, requests }),
        _ => Err(TargetsError::Empty { file }),
    }
}

/// `-H` headers on every request of a mix; a request's own header of the same name (in any
/// case) wins. Several `-H` of one name are all added, as they are for one request.
pub(crate) fn add_headers(requests: &mut [NamedRequest], extra: &[(String, String)]) {
    for request in requests {
        add_headers_to(&mut request.spec.headers, extra);
    }
}

/// `extra` after `headers`, but for the names `headers` has (in any case).
pub(crate) fn add_headers_to(headers: &mut Vec<(String, String)>, extra: &[(String, String)]) {
    let own = headers.len();
    for (name, value) in extra {
        if !headers[..own].iter().any(|(n, _)| n.eq_ignore_ascii_case(name)) {
            headers.push((name.clone(), value.clone()));
        }
    }
}

/// JSON lines when the first line that is neither blank nor a comment opens an object.
fn detect(text: &str) -> Format {
    let first = text.lines().map(str::trim).find(|l| !l.is_empty() && !l.starts_with('#'));
    if first.is_some_and(|l| l.starts_with('{')) { Format::Json } else { Format::Http }
}

/// Everything `from` gives, if that is at most `limit` bytes (reading no further than one byte
/// past it); None when there is more.
pub(crate) fn read_at_most(from: impl Read, limit: u64) -> std::io::Result<Option<Vec<u8>>> {
    let mut bytes = Vec::new();
    from.take(limit.saturating_add(1)).read_to_end(&mut bytes)?;
    Ok((bytes.len() as u64 <= limit).then_some(bytes))
}

/// The bytes as text, or where the first that is not UTF-8 is.
pub(crate) fn utf8(bytes: &[u8]) -> Result<&str, At> {
    std::str::from_utf8(bytes).map_err(|e| {
        let before = &bytes[..e.valid_up_to()];
        let line_start = before.iter().rposition(|&b| b == b'\n').map_or(0, |i| i + 1);
        At::new(before.iter().filter(|&&b| b == b'\n').count() + 1, e.valid_up_to() - line_start + 1)
    })
}

/// The lines of a file, numbered from 1, without their line ending (LF or CRLF).
fn numbered_lines(text: &str) -> impl Iterator<Item = (usize, &str)> {
    text.split('\n').map(|l| l.strip_suffix('\r').unwrap_or(l)).zip(1..).map(|(l, n)| (n, l))
}

/// One target as a format read it, before the checks every format shares.
#[derive(Debug)]
struct Draft {
    /// Where the target starts: its request line, or its JSON line.
    at: At,
    /// Checked to be a token by the format, which knows where each character is.
    method: String,
    /// An absolute URL or a path, as written.
    url: String,
    url_at: At,
    /// Checked by the format with [`check_header`].
    headers: Vec<(String, String)>,
    body: Body,
    /// The name given in the file, if any; else `METHOD PATH`.
    name: Option<(String, At)>,
}

/// A target's body, as a format gives it.
#[derive(Debug)]
enum Body {
    None,
    Bytes {
        bytes: Vec<u8>,
        at: At,
    },
    /// A file to read, relative to the targets file's directory unless absolute.
    File {
        path: String,
        at: At,
    },
}

/// The checks and limits both formats share, turning drafts into a mix's requests.
struct MixBuilder {
    origin: OneOrigin,
    bodies: Bodies,
    requests: Vec<NamedRequest>,
}

impl MixBuilder {
    fn new(url: Option<&Target>, dir: &Path) -> MixBuilder {
        MixBuilder { origin: OneOrigin::new(url), bodies: Bodies::new(dir), requests: Vec::new() }
    }

    /// Adds a target, or says what is wrong with it and where.
    fn push(&mut self, draft: Draft) -> Result<(), Located> {
        // Checked as they come, so that a huge file is refused without being held whole.
        if self.requests.len() == MAX_REQUESTS {
            return Err(draft.at.has(Problem::TooManyTargets));
        }
        let path_and_query = self.origin.path_of(&draft.url).map_err(|p| draft.url_at.has(p))?;
        let body = match draft.body {
            Body::None => Vec::new(),
            Body::Bytes { bytes, at } => {
                self.bodies.count(bytes.len()).map_err(|p| at.has(p))?;
                bytes
            }
            Body::File { path, at } => self.bodies.read(&path).map_err(|p| at.has(p))?,
        };
        let name = match draft.name {
            Some((name, at)) => checked_name(name).map_err(|p| at.has(p))?,
            None => default_name(&draft.method, &path_and_query),
        };
        let spec = RequestSpec::new(&draft.method, draft.headers, body);
        self.requests.push(NamedRequest {
            name,
            path_and_query,
            spec,
            templated: false,
            checks: vec![],
            extract: vec![],
            think: None,
            cookies: false,
            follow_redirects: 0,
        });
        Ok(())
    }

    /// The origin (none if no target was added) and the requests.
    fn finish(self) -> (Option<Target>, Vec<NamedRequest>) {
        (self.origin.into_target(), self.requests)
    }
}

/// The name of a request the file names not: `METHOD PATH`, the query apart, so that
/// `GET /users?id=7` and `GET /users?id=8` are one name.
pub(crate) fn default_name(method: &str, path_and_query: &str) -> String {
    format!("{method} {}", path_and_query.split('?').next().unwrap_or_default())
}

/// A name given in the file: its report line and JSON key, so neither empty nor with control
/// characters (a line break would forge a line of the report).
pub(crate) fn checked_name(name: String) -> Result<String, Problem> {
    if name.trim().is_empty() {
        return Err(Problem::EmptyName);
    }
    if name.chars().any(char::is_control) {
        return Err(Problem::NameControl { name: shown(&name) });
    }
    Ok(name)
}

/// An HTTP token (RFC 9110): what a method or a header name consists of. The first character
/// that is not allowed, with its byte offset, if any.
fn first_non_token(text: &str) -> Option<(usize, char)> {
    text.char_indices().find(|&(_, c)| !(c.is_ascii_alphanumeric() || "!#$%&'*+-.^_`|~".contains(c)))
}

/// The method, unless a character of it is not a token's: then that character's offset.
pub(crate) fn check_method(method: &str) -> Result<(), (usize, Problem)> {
    match first_non_token(method) {
        None if !method.is_empty() => Ok(()),
        None => Err((0, Problem::RequestLine)),
        Some((offset, c)) => {
            Err((offset, Problem::Method { method: shown(method), found: c.escape_default().to_string() }))
        }
    }
}

/// A header as the request will carry it: the engine writes name and value as they are, so a
/// line break or NUL would end the request there and smuggle in another.
pub(crate) fn check_header(name: &str, value: &str) -> Result<(), Problem> {
    if name.is_empty() || first_non_token(name).is_some() {
        return Err(Problem::HeaderName { name: shown(name) });
    }
    if value.contains(['\r', '\n', '\0']) {
        return Err(Problem::HeaderValue { name: name.to_string() });
    }
    Ok(())
}

#[cfg(test)]
mod tests;
