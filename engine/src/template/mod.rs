//! Templates: `{{name}}` in a scenario step's path, header values and body, filled per request
//! from built-ins (`vu`, `iteration`, `worker`, `thread`, `random_int A B`, `uuid`,
//! `unix_ms`).
//!
//! A template is compiled once, at start-up, into literal pieces and slots; each protocol then
//! pre-encodes everything around the slots ([`Encoded`]), so that a request costs only the
//! slots' bytes (and, for HPACK and QPACK, their length prefixes): no parsing, and no
//! allocation beyond buffers a connection reuses.

mod encoded;
mod slot;

use std::fmt;

pub(crate) use encoded::{Encoded, Framing, Out};
use slot::Slot;
pub(crate) use slot::{Fill, decimal};

/// The built-ins, as errors list them.
pub const TEMPLATE_BUILT_INS: &str = "vu, iteration, worker, thread, random_int A B, uuid, unix_ms";

/// Text with `{{…}}` slots, compiled.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Template {
    pieces: Box<[Piece]>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Piece {
    Text(Box<[u8]>),
    Slot(Slot),
}

/// Why a text is not a template, and where in it (a byte offset).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{what}")]
pub struct TemplateError {
    pub offset: usize,
    pub what: String,
}

/// Checks `text` as a template: what `Plan::validate` and the scenario file's reader call.
pub fn check_template(text: &[u8]) -> Result<(), TemplateError> {
    Template::parse(text).map(|_| ())
}

/// `text` with each slot as one digit: what the rules for where it goes (a path's, say) are
/// checked on, since every built-in fills in digits, letters and `-`. Text that is not a
/// template comes back as it is.
pub fn template_skeleton(text: &str) -> std::borrow::Cow<'_, str> {
    match Template::parse(text.as_bytes()) {
        Ok(t) if t.has_slots() => {
            let mut out = String::with_capacity(text.len());
            for piece in &t.pieces {
                match piece {
                    Piece::Text(bytes) => out.push_str(&String::from_utf8_lossy(bytes)),
                    Piece::Slot(_) => out.push('0'),
                }
            }
            out.into()
        }
        _ => text.into(),
    }
}

impl Template {
    /// Compiles `text`: each `{{ name }}` (blanks inside allowed) becomes a slot. A `{{`
    /// without `}}`, or naming nothing known, is an error: text that must carry `{{` as it is
    /// (a binary body, say) is not to be templated at all.
    pub(crate) fn parse(text: &[u8]) -> Result<Template, TemplateError> {
        let mut pieces = Vec::new();
        let mut rest = 0;
        while let Some(open) = find(&text[rest..], b"{{").map(|i| rest + i) {
            let Some(close) = find(&text[open + 2..], b"}}").map(|i| open + 2 + i) else {
                return Err(TemplateError { offset: open, what: "`{{` without a closing `}}`".into() });
            };
            let inside = std::str::from_utf8(&text[open + 2..close]).unwrap_or("\u{fffd}");
            let slot = Slot::parse(inside.trim()).map_err(|what| TemplateError { offset: open, what })?;
            if open > rest {
                pieces.push(Piece::Text(text[rest..open].into()));
            }
            pieces.push(Piece::Slot(slot));
            rest = close + 2;
        }
        if rest < text.len() {
            pieces.push(Piece::Text(text[rest..].into()));
        }
        Ok(Template { pieces: pieces.into() })
    }

    /// `text` as it is, with no slots.
    pub(crate) fn text(text: &[u8]) -> Template {
        let pieces = if text.is_empty() { Vec::new() } else { vec![Piece::Text(text.into())] };
        Template { pieces: pieces.into() }
    }

    /// Whether it has slots (else it is its text, always).
    pub(crate) fn has_slots(&self) -> bool {
        self.pieces.iter().any(|p| matches!(p, Piece::Slot(_)))
    }

    /// Appends the text with its slots filled.
    pub(crate) fn render(&self, fill: &mut Fill<'_>, out: &mut Vec<u8>) {
        for piece in &self.pieces {
            match piece {
                Piece::Text(text) => out.extend_from_slice(text),
                Piece::Slot(slot) => fill.write(slot, out),
            }
        }
    }
}

impl fmt::Display for Template {
    /// The template as it would be written (slots in their canonical spelling).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for piece in &self.pieces {
            match piece {
                Piece::Text(text) => f.write_str(&String::from_utf8_lossy(text))?,
                Piece::Slot(slot) => write!(f, "{{{{{slot}}}}}")?,
            }
        }
        Ok(())
    }
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}

#[cfg(test)]
mod tests;
