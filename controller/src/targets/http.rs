//! vegeta's `http` targets format, as volley reads it:
//!
//! ```text
//! # name: list users
//! GET http://127.0.0.1:8080/users?page=1
//! Accept: application/json
//!
//! POST /users
//! Content-Type: application/json
//! @bodies/user.json
//! ```
//!
//! A target is a `METHOD URL` line, its header lines (`Name: value`) and at most one body line
//! (`@FILE`, read relative to the targets file's directory unless absolute); a blank line ends
//! it. Lines starting with `#` are comments, and `# name: NAME` directly above a request line
//! names its target.

use super::error::{At, Located, Problem};
use super::{Body, Draft, MAX_HEADERS, MixBuilder, check_header, check_method, numbered_lines};

/// Reads every target of `text` into `mix`.
pub(super) fn parse(text: &str, mix: &mut MixBuilder) -> Result<(), Located> {
    // The name given by the line just above, if that was `# name: NAME`.
    let mut name: Option<(String, At)> = None;
    let mut target: Option<Draft> = None;
    for (line, content) in numbered_lines(text) {
        let trimmed = content.trim();
        if trimmed.is_empty() {
            if let Some(done) = target.take() {
                mix.push(done)?;
            }
            name = None;
        } else if trimmed.starts_with('#') {
            // Within a target a comment is only a comment; between targets, a name if it is one.
            if target.is_none() {
                name = name_in(content, line);
            }
        } else if let Some(draft) = &mut target {
            add_line(draft, content, line)?;
        } else {
            target = Some(request_line(content, line, name.take())?);
        }
    }
    if let Some(done) = target {
        mix.push(done)?;
    }
    Ok(())
}

/// The name a comment line gives (`# name: NAME`), and where the name starts; None for any
/// other comment.
fn name_in(content: &str, line: usize) -> Option<(String, At)> {
    let comment = content.trim_start().strip_prefix('#')?;
    let name = comment.trim_start().strip_prefix("name:")?.trim_start();
    Some((name.trim_end().to_string(), At::new(line, content.len() - name.len() + 1)))
}

/// `METHOD URL`: a target begins.
fn request_line(content: &str, line: usize, name: Option<(String, At)>) -> Result<Draft, Located> {
    let indent = content.len() - content.trim_start().len();
    let rest = content[indent..].trim_end();
    let method_len = rest.find(|c: char| c.is_ascii_whitespace()).unwrap_or(rest.len());
    let method = &rest[..method_len];
    check_method(method).map_err(|(offset, problem)| At::new(line, indent + offset + 1).has(problem))?;
    let url = rest[method_len..].trim_start();
    // Where the URL starts (or would).
    let url_at = At::new(line, indent + rest.len() - url.len() + 1);
    if url.is_empty() {
        return Err(url_at.has(Problem::RequestLine));
    }
    if let Some(space) = url.find(|c: char| c.is_ascii_whitespace()) {
        // `GET /x HTTP/1.1`: what follows the URL is pointed at.
        let extra = url[space..].trim_start();
        return Err(At::new(line, url_at.column + url.len() - extra.len()).has(Problem::RequestLine));
    }
    Ok(Draft {
        at: At::new(line, indent + 1),
        method: method.to_string(),
        url: url.to_string(),
        url_at,
        headers: Vec::new(),
        body: Body::None,
        name,
    })
}

/// A line within a target: a header, or its body line.
fn add_line(draft: &mut Draft, content: &str, line: usize) -> Result<(), Located> {
    let indent = content.len() - content.trim_start().len();
    let at = At::new(line, indent + 1);
    if matches!(draft.body, Body::File { .. }) {
        return Err(at.has(Problem::AfterBody));
    }
    if let Some(path) = content.trim().strip_prefix('@') {
        let path = path.trim();
        if path.is_empty() {
            return Err(at.has(Problem::NoBodyPath));
        }
        draft.body = Body::File { path: path.to_string(), at };
        return Ok(());
    }
    if draft.headers.len() == MAX_HEADERS {
        return Err(at.has(Problem::TooManyHeaders));
    }
    let Some((name, value)) = content.split_once(':') else {
        return Err(at.has(Problem::HeaderLine));
    };
    let value_at = At::new(line, content.len() - value.trim_start().len() + 1);
    let (name, value) = (name.trim(), value.trim());
    check_header(name, value).map_err(|problem| match problem {
        Problem::HeaderValue { .. } => value_at.has(problem),
        _ => at.has(problem),
    })?;
    draft.headers.push((name.to_string(), value.to_string()));
    Ok(())
}

#[cfg(test)]
mod tests;
