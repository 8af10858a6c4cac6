//! JSON lines targets: one object a line, vegeta's JSON target with an optional `name`:
//!
//! ```text
//! {"method":"POST","url":"http://127.0.0.1:8080/users","header":{"Content-Type":["application/json"]},"body":"eyJuYW1lIjoiYSJ9","name":"create user"}
//! ```
//!
//! `header` holds each name's values in an array (a name with several is sent once per value);
//! `body` is base64, the standard alphabet. Blank lines and lines starting with `#` are skipped.
//! Unknown fields are refused, so that a misspelt one (`headers`) is not silently ignored.
//!
//! Each field is kept as the text it was in the line (a `RawValue`) until it is decoded, so that
//! what is wrong in a value is pointed at, not only what is wrong in the JSON.

use std::fmt;

use base64::Engine;
use serde::Deserialize;
use serde::de::{MapAccess, Visitor};
use serde_json::value::RawValue;

use super::error::{At, Located, Problem, shown};
use super::{Body, Draft, MAX_HEADERS, MixBuilder, check_header, check_method, numbered_lines};

/// A target's fields, as written.
#[derive(Deserialize)]
#[serde(deny_unknown_fields, expecting = "a target: an object with a method and a url")]
struct Fields<'a> {
    #[serde(borrow)]
    method: &'a RawValue,
    #[serde(borrow)]
    url: &'a RawValue,
    #[serde(borrow, default)]
    header: Option<&'a RawValue>,
    #[serde(borrow, default)]
    body: Option<&'a RawValue>,
    #[serde(borrow, default)]
    name: Option<&'a RawValue>,
}

/// Reads every target of `text` into `mix`.
pub(super) fn parse(text: &str, mix: &mut MixBuilder) -> Result<(), Located> {
    for (line, content) in numbered_lines(text) {
        let trimmed = content.trim();
        if trimmed.is_empty() || trimmed.starts_with('#') {
            continue;
        }
        let json = JsonLine { line, text: content };
        let fields: Fields = serde_json::from_str(content).map_err(|e| json.error(0, &e))?;
        let method: String = json.decode(fields.method)?;
        check_method(&method).map_err(|(_, problem)| json.at(fields.method).has(problem))?;
        let headers = match fields.header {
            Some(header) => json.headers(header)?,
            None => Vec::new(),
        };
        let body = match fields.body {
            Some(body) => Body::Bytes { bytes: json.base64(body)?, at: json.at(body) },
            None => Body::None,
        };
        let name = match fields.name {
            Some(name) => Some((json.decode(name)?, json.at(name))),
            None => None,
        };
        let url = json.decode(fields.url)?;
        let at = At::new(line, content.len() - content.trim_start().len() + 1);
        mix.push(Draft { at, method, url, url_at: json.at(fields.url), headers, body, name })?;
    }
    Ok(())
}

/// A line of the file, and where in it its values are.
struct JsonLine<'a> {
    line: usize,
    text: &'a str,
}

impl JsonLine<'_> {
    /// Where `value`, a part of this line, starts.
    fn at(&self, value: &RawValue) -> At {
        // A borrowed RawValue is a slice of the line it was read from: its offset is the
        // difference of the addresses.
        let offset = (value.get().as_ptr() as usize).checked_sub(self.text.as_ptr() as usize);
        At::new(self.line, offset.filter(|&o| o < self.text.len()).map_or(1, |o| o + 1))
    }

    /// `value` decoded, or serde_json's complaint at its place in the file.
    fn decode<'de, T: Deserialize<'de>>(&self, value: &'de RawValue) -> Result<T, Located> {
        serde_json::from_str(value.get()).map_err(|e| self.error(self.at(value).column - 1, &e))
    }

    /// serde_json's error in text that starts `offset` bytes into the line.
    fn error(&self, offset: usize, e: &serde_json::Error) -> Located {
        let words = e.to_string();
        let position = format!(" at line {} column {}", e.line(), e.column());
        let words = words.strip_suffix(&position).unwrap_or(&words);
        At::new(self.line, offset + e.column().max(1)).has(Problem::Json(shown(words)))
    }

    /// `{"Name": ["value", ...], ...}`, one header for each value, in the order written.
    fn headers(&self, header: &RawValue) -> Result<Vec<(String, String)>, Located> {
        let HeaderValues(names) = self.decode(header)?;
        let mut headers = Vec::new();
        for (name, values) in names {
            for value in values {
                if headers.len() == MAX_HEADERS {
                    return Err(self.at(header).has(Problem::TooManyHeaders));
                }
                let text: String = self.decode(value)?;
                check_header(&name, &text).map_err(|problem| match problem {
                    Problem::HeaderValue { .. } => self.at(value).has(problem),
                    _ => self.at(header).has(problem),
                })?;
                headers.push((name.clone(), text));
            }
        }
        Ok(headers)
    }

    /// The body, a base64 string.
    fn base64(&self, body: &RawValue) -> Result<Vec<u8>, Located> {
        let text: String = self.decode(body)?;
        base64::engine::general_purpose::STANDARD.decode(text).map_err(|e| self.at(body).has(Problem::Base64(e)))
    }
}

/// A header object's names, each with its values as written, in the object's order (a map
/// would sort them, and drop a name written twice).
struct HeaderValues<'a>(Vec<(String, Vec<&'a RawValue>)>);

impl<'de> Deserialize<'de> for HeaderValues<'de> {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_map(HeaderValuesVisitor)
    }
}

struct HeaderValuesVisitor;

impl<'de> Visitor<'de> for HeaderValuesVisitor {
    type Value = HeaderValues<'de>;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("an object of header names, each with an array of values")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let mut names = Vec::new();
        while let Some(entry) = map.next_entry::<String, Vec<&'de RawValue>>()? {
            names.push(entry);
        }
        Ok(HeaderValues(names))
    }
}

#[cfg(test)]
mod tests;
