//! Templates: `{{name}}` in a scenario step's path, header values and body, filled per request
//! from built-ins (`vu`, `iteration`, `worker`, `thread`, `random_int A B`, `uuid`,
//! `unix_ms`), from feeders' columns (`{{users.email}}`, of the row the iteration took) and from
//! variables earlier steps' extractors filled (`{{token}}`).
//!
//! A template is compiled once, at start-up, into literal pieces and slots; each protocol then
//! pre-encodes everything around the slots ([`Encoded`]), so that a request costs only the
//! slots' bytes (and, for HPACK and QPACK, their length prefixes): no parsing, and no
//! allocation beyond buffers a connection reuses.

mod encoded;
mod slot;

use std::fmt;
use std::sync::Arc;

use crate::feeder::Feeder;

pub(crate) use encoded::{Encoded, Framing, Out, integer};
use slot::Slot;
pub(crate) use slot::{Fill, decimal};

/// The built-ins, as errors list them.
pub const TEMPLATE_BUILT_INS: &str = "vu, iteration, worker, thread, random_int A B, uuid, unix_ms";

/// The built-ins' names, which no variable may take.
pub(crate) const BUILT_IN_NAMES: [&str; 7] = ["vu", "iteration", "worker", "thread", "random_int", "uuid", "unix_ms"];

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

/// What `{{FEEDER.COLUMN}}` slots may name: the plan's feeders' names and columns, in order.
/// The default names none: built-ins only.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Vocabulary {
    feeders: Arc<[(String, Vec<String>)]>,
    /// Variables extractors fill (`{{token}}`), in the plan's order.
    variables: Arc<[String]>,
}

impl Vocabulary {
    /// `feeders`' names and columns.
    pub fn of(feeders: &[Feeder]) -> Vocabulary {
        Vocabulary::new(feeders.iter().map(|f| (f.name.clone(), f.columns.clone())))
    }

    /// Feeders by name, each with its columns, in the plan's order.
    pub fn new(feeders: impl IntoIterator<Item = (String, Vec<String>)>) -> Vocabulary {
        Vocabulary { feeders: feeders.into_iter().collect(), variables: Arc::from([]) }
    }

    /// The same, with `variables` (extractors' names, in the plan's order) for `{{NAME}}` too.
    pub fn with_variables(mut self, variables: impl IntoIterator<Item = String>) -> Vocabulary {
        self.variables = variables.into_iter().collect();
        self
    }

    /// Variable `name`'s slot, if the plan has it.
    fn variable(&self, name: &str) -> Option<Slot> {
        let i = self.variables.iter().position(|v| v == name)?;
        u16::try_from(i).ok().map(Slot::Var)
    }

    /// `FEEDER.COLUMN`'s slot.
    fn column(&self, name: &str) -> Result<Slot, String> {
        let (feeder, column) = name.split_once('.').unwrap_or((name, ""));
        let Some((f, (_, columns))) = self.feeders.iter().enumerate().find(|(_, (n, _))| n == feeder) else {
            let known: Vec<&str> = self.feeders.iter().map(|(n, _)| n.as_str()).collect();
            return Err(if known.is_empty() {
                format!("`{{{{{name}}}}}` names feeder `{feeder}`, and the file declares no [[feeder]]")
            } else {
                format!(
                    "`{{{{{name}}}}}` names feeder `{feeder}`, which is not declared (feeders: {})",
                    known.join(", ")
                )
            });
        };
        let Some(c) = columns.iter().position(|c| c == column) else {
            return Err(format!(
                "`{{{{{name}}}}}`: feeder `{feeder}` has no column `{column}` (its columns: {})",
                columns.join(", ")
            ));
        };
        match (u8::try_from(f), u16::try_from(c)) {
            (Ok(feeder), Ok(column)) => Ok(Slot::Column { feeder, column }),
            _ => Err(format!("`{{{{{name}}}}}`: too many feeders or columns")),
        }
    }
}

/// Which of a run's requests are templates (a scenario file's steps, unless `template =
/// false`), and what their slots may name.
#[derive(Debug, Clone, Default)]
pub(crate) struct Templating {
    pub templated: Vec<bool>,
    pub vocabulary: Vocabulary,
    /// Per request: its user's cookie jar adds a Cookie field to it when it has cookies for it,
    /// so its encoding is a template too, filled when it does. Empty: none has.
    pub cookies: Vec<bool>,
}

impl Templating {
    /// Whether request `i`'s `{{…}}` are templates.
    pub(crate) fn is_templated(&self, i: usize) -> bool {
        self.templated.get(i).copied().unwrap_or(false)
    }

    /// Whether request `i` may carry cookies from its user's jar.
    pub(crate) fn keeps_cookies(&self, i: usize) -> bool {
        self.cookies.get(i).copied().unwrap_or(false)
    }

    /// Whether request `i` needs a template: it has `{{…}}` or may carry cookies.
    pub(crate) fn needs_template(&self, i: usize) -> bool {
        self.is_templated(i) || self.keeps_cookies(i)
    }

    /// The vocabulary of request `i`'s slots; None when it is not templated (written as it is).
    pub(crate) fn vocabulary_of(&self, i: usize) -> Option<&Vocabulary> {
        self.is_templated(i).then_some(&self.vocabulary)
    }
}

/// Checks `text` as a template whose feeder columns are `vocabulary`'s: what `Plan::validate`
/// and the scenario file's reader call.
pub fn check_template(text: &[u8], vocabulary: &Vocabulary) -> Result<(), TemplateError> {
    Template::parse(text, vocabulary).map(|_| ())
}

/// `text` with each slot as one digit: what the rules for where it goes (a path's, say) are
/// checked on, since every built-in fills in digits, letters and `-` (feeders' cells are
/// checked where they go apart: `Plan::validate`). Text that is not a template comes back as
/// it is.
pub fn template_skeleton<'a>(text: &'a str, vocabulary: &Vocabulary) -> std::borrow::Cow<'a, str> {
    match Template::parse(text.as_bytes(), vocabulary) {
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
    pub(crate) fn parse(text: &[u8], vocabulary: &Vocabulary) -> Result<Template, TemplateError> {
        let mut pieces = Vec::new();
        let mut rest = 0;
        while let Some(open) = find(&text[rest..], b"{{").map(|i| rest + i) {
            let Some(close) = find(&text[open + 2..], b"}}").map(|i| open + 2 + i) else {
                return Err(TemplateError { offset: open, what: "`{{` without a closing `}}`".into() });
            };
            let inside = std::str::from_utf8(&text[open + 2..close]).unwrap_or("\u{fffd}");
            let slot = Slot::parse(inside.trim(), vocabulary).map_err(|what| TemplateError { offset: open, what })?;
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

    /// The feeders its slots use: bit i for feeder i.
    pub(crate) fn feeders(&self) -> u32 {
        self.pieces.iter().fold(0, |mask, p| match p {
            Piece::Slot(Slot::Column { feeder, .. }) => mask | 1u32.checked_shl(u32::from(*feeder)).unwrap_or(0),
            _ => mask,
        })
    }

    /// The variables its slots use, by index in the plan's.
    pub(crate) fn variables(&self) -> impl Iterator<Item = usize> + '_ {
        self.pieces.iter().filter_map(|p| match p {
            Piece::Slot(Slot::Var(v)) => Some(usize::from(*v)),
            _ => None,
        })
    }

    /// The columns its slots use, as (feeder, column).
    pub(crate) fn columns(&self) -> impl Iterator<Item = (usize, usize)> + '_ {
        self.pieces.iter().filter_map(|p| match p {
            Piece::Slot(Slot::Column { feeder, column }) => Some((usize::from(*feeder), usize::from(*column))),
            _ => None,
        })
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
