//! What can be wrong with a targets file: the file as a whole, or something in it, said as
//! `FILE:LINE:COLUMN: what`.

use volley_engine::{MAX_BODY_BYTES, MAX_REQUESTS};

use super::{MAX_FILE_BYTES, MAX_HEADERS};
use crate::printable::one_line;

/// Why a targets file cannot be used.
#[derive(Debug, thiserror::Error)]
pub(crate) enum TargetsError {
    #[error("--targets {file}: {why}")]
    Unreadable { file: String, why: std::io::Error },
    #[error("--targets {file}: the file is larger than {} MiB, the most a targets file may be", MAX_FILE_BYTES >> 20)]
    TooLarge { file: String },
    #[error("--targets {file}: the file lists no targets")]
    Empty { file: String },
    /// The paths are the file's: a path on the command line would be silently dropped.
    #[error(
        "--targets: the URL {url} has a path; with a targets file the URL gives only the origin (scheme, host, port), the paths are the file's"
    )]
    UrlHasPath { url: String },
    #[error("{file}:{line}:{column}: {problem}")]
    At { file: String, line: usize, column: usize, problem: Problem },
}

/// Where in the file: a line and a column (of bytes), both from 1.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct At {
    pub line: usize,
    pub column: usize,
}

impl At {
    pub(crate) fn new(line: usize, column: usize) -> At {
        At { line, column }
    }

    pub(super) fn has(self, problem: Problem) -> Located {
        Located { at: self, problem }
    }
}

/// A problem and where it is, before the file's name is put to it.
#[derive(Debug)]
pub(crate) struct Located {
    pub at: At,
    pub problem: Problem,
}

impl Located {
    pub(super) fn in_file(self, file: &str) -> TargetsError {
        TargetsError::At { file: file.to_string(), line: self.at.line, column: self.at.column, problem: self.problem }
    }
}

/// Something in the file that is wrong. Text taken from the file is kept as [`shown`] makes it:
/// the message is the one line on stderr, which a line break or an escape in it would break.
#[derive(Debug, thiserror::Error)]
pub(crate) enum Problem {
    #[error("the file is not UTF-8 text")]
    NotUtf8,
    #[error("expected 'METHOD URL', such as 'GET http://127.0.0.1:8080/'")]
    RequestLine,
    #[error("'{found}' cannot be in a method ('{method}')")]
    Method { method: String, found: String },
    #[error("{0}")]
    Url(String),
    #[error("{path} is a path, and there is no URL on the command line to give its origin")]
    PathWithoutOrigin { path: String },
    #[error("{found} is a second origin; a run has one ({first})")]
    SecondOrigin { found: String, first: String },
    #[error("{found} is not the origin of the command line's URL ({url}); a run has one")]
    NotTheUrlsOrigin { found: String, url: String },
    /// A scenario file's `origin`, which its steps' absolute URLs must keep to.
    #[error("{found} is not the file's origin ({origin}); a run has one")]
    NotTheFilesOrigin { found: String, origin: String },
    #[error("expected a header 'Name: value', a body '@FILE' or a blank line")]
    HeaderLine,
    #[error("'{name}' is not a header name")]
    HeaderName { name: String },
    /// A line break would end the request there and start another (request smuggling).
    #[error("the value of {name} holds a line break or NUL, which a header value cannot")]
    HeaderValue { name: String },
    #[error("more than {MAX_HEADERS} headers in one target")]
    TooManyHeaders,
    #[error("a target ends after its body: a blank line must come first")]
    AfterBody,
    #[error("'@' without a file: give @PATH")]
    NoBodyPath,
    #[error("the body file {path}: {why}")]
    BodyFile { path: String, why: std::io::Error },
    #[error("the bodies come to more than {} MiB, the most a run's requests may carry", MAX_BODY_BYTES >> 20)]
    BodiesTooLarge,
    #[error("more than the {MAX_REQUESTS} targets a run may list")]
    TooManyTargets,
    #[error("the name is empty")]
    EmptyName,
    #[error("the name '{name}' holds control characters")]
    NameControl { name: String },
    /// serde_json's words, without its position (which is the file's here).
    #[error("{0}")]
    Json(String),
    #[error("the body is not base64 (standard alphabet, padded): {0}")]
    Base64(base64::DecodeError),
}

/// Text from the file as a message shows it: on one line, escaped, cut when long.
pub(crate) fn shown(text: &str) -> String {
    one_line(text)
}
