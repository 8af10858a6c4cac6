//! What a slot may name, and the values a request fills them with.

use std::fmt;
use std::time::{SystemTime, UNIX_EPOCH};

use super::{TEMPLATE_BUILT_INS, Vocabulary};
use crate::feeder::{Feeds, NO_ROW};
use crate::random::next_random;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Slot {
    /// The connection's index in the whole run: unique across threads and workers.
    Vu,
    /// Which of its connection's iterations this is, from 0.
    Iteration,
    /// The worker's index in the fleet (0 on one machine).
    Worker,
    /// The engine thread's index on its machine.
    Thread,
    /// A number drawn uniformly from `low..=high` on every use.
    RandomInt { low: i64, high: i64 },
    /// A random (version 4) UUID on every use, different on every run whatever the seed.
    Uuid,
    /// Milliseconds since the Unix epoch when the request is encoded.
    UnixMs,
    /// A column of a feeder (`{{users.email}}`), of the row the iteration took: indices into
    /// the plan's feeders and that feeder's columns.
    Column { feeder: u8, column: u16 },
    /// A variable of the virtual user, as an earlier step's extractor set it: its index in the
    /// plan's.
    Var(u16),
}

impl Slot {
    pub(super) fn parse(inside: &str, vocabulary: &Vocabulary) -> Result<Slot, String> {
        let mut words = inside.split_ascii_whitespace();
        let name = words.next().unwrap_or("");
        let slot = match name {
            _ if name.contains('.') => vocabulary.column(name)?,
            "vu" => Slot::Vu,
            "iteration" => Slot::Iteration,
            "worker" => Slot::Worker,
            "thread" => Slot::Thread,
            "uuid" => Slot::Uuid,
            "unix_ms" => Slot::UnixMs,
            "random_int" => {
                let bounds: Vec<&str> = words.by_ref().collect();
                let parsed: Vec<Option<i64>> = bounds.iter().map(|b| b.parse().ok()).collect();
                match parsed.as_slice() {
                    [Some(low), Some(high)] if low <= high => return Ok(Slot::RandomInt { low: *low, high: *high }),
                    _ => {
                        return Err(format!(
                            "`{{{{{inside}}}}}`: random_int takes two whole numbers, the lower first \
                             (`{{{{random_int 1 100}}}}`)"
                        ));
                    }
                }
            }
            "" => return Err("`{{}}` names nothing".into()),
            other => match vocabulary.variable(other) {
                Some(slot) => slot,
                None => {
                    return Err(format!(
                        "`{{{{{other}}}}}` names nothing volley knows (it knows {TEMPLATE_BUILT_INS}, a feeder's \
                         columns as FEEDER.COLUMN, and variables an extractor sets)"
                    ));
                }
            },
        };
        match words.next() {
            Some(_) => Err(format!("`{{{{{inside}}}}}`: {name} takes no arguments")),
            None => Ok(slot),
        }
    }
}

impl fmt::Display for Slot {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Slot::Vu => f.write_str("vu"),
            Slot::Iteration => f.write_str("iteration"),
            Slot::Worker => f.write_str("worker"),
            Slot::Thread => f.write_str("thread"),
            Slot::RandomInt { low, high } => write!(f, "random_int {low} {high}"),
            Slot::Uuid => f.write_str("uuid"),
            Slot::UnixMs => f.write_str("unix_ms"),
            Slot::Column { feeder, column } => write!(f, "feeder{feeder}.column{column}"),
            Slot::Var(v) => write!(f, "var{v}"),
        }
    }
}

/// What one request's slots are filled from: its connection and iteration, its thread and
/// worker, the thread's generator for random values, and the rows its iteration took.
pub(crate) struct Fill<'a> {
    pub vu: u64,
    pub iteration: u64,
    pub worker: u64,
    pub thread: u64,
    /// xorshift64* state, never 0: `random_int`'s, from the run's seed.
    pub rng: &'a mut u64,
    /// The same, for UUIDs: from the clock, so that a run with the same seed (0 by default)
    /// never sends another run's "unique" ids.
    pub unique: &'a mut u64,
    /// The thread's feeders, and the row of each that the iteration took.
    pub rows: Option<(&'a Feeds, &'a [u32])>,
    /// The virtual user's variables, by index (empty before an extractor set one).
    pub vars: &'a [Vec<u8>],
    /// The value of the Cookie field its user's jar adds to the request; empty: none.
    pub cookie: &'a [u8],
}

#[cfg(test)]
impl<'a> Fill<'a> {
    /// User `vu`'s iteration `iteration` on thread 0 of worker 0, with no rows, variables or
    /// cookie: what protocol tests fill templates from.
    pub(crate) fn of_user(vu: u64, iteration: u64, rng: &'a mut u64, unique: &'a mut u64) -> Self {
        Fill { vu, iteration, worker: 0, thread: 0, rng, unique, rows: None, vars: &[], cookie: &[] }
    }
}

impl Fill<'_> {
    /// Whether a template is worth filling for this request: it has slots (`slots`), or the
    /// user's jar adds a cookie; else its pre-encoded bytes go as they are.
    #[inline]
    pub(crate) fn needed_by(&self, slots: bool) -> bool {
        slots || !self.cookie.is_empty()
    }

    pub(super) fn write(&mut self, slot: &Slot, out: &mut Vec<u8>) {
        match *slot {
            Slot::Vu => decimal(out, self.vu),
            Slot::Iteration => decimal(out, self.iteration),
            Slot::Worker => decimal(out, self.worker),
            Slot::Thread => decimal(out, self.thread),
            Slot::RandomInt { low, high } => {
                // The draw scaled to the span (its high 64 bits of draw × span): its bias, as a
                // modulo's, is below 2⁻⁶⁴ × span, nothing a load test can see, and it takes one
                // multiplication where a 128-bit modulo took a call (5 ns a request).
                let draw = next_random(self.rng);
                let offset = match u64::try_from(high as i128 - low as i128 + 1) {
                    Ok(span) => ((u128::from(draw) * u128::from(span)) >> 64) as i128,
                    // The whole of i64: every draw is in it.
                    Err(_) => i128::from(draw),
                };
                let drawn = low as i128 + offset;
                if drawn < 0 {
                    out.push(b'-');
                }
                decimal(out, drawn.unsigned_abs() as u64);
            }
            Slot::Uuid => {
                let mut bytes = [0u8; 16];
                bytes[..8].copy_from_slice(&next_random(self.unique).to_le_bytes());
                bytes[8..].copy_from_slice(&next_random(self.unique).to_le_bytes());
                bytes[6] = (bytes[6] & 0x0f) | 0x40; // version 4
                bytes[8] = (bytes[8] & 0x3f) | 0x80; // RFC 9562's variant
                const HEX: &[u8; 16] = b"0123456789abcdef";
                for (i, b) in bytes.iter().enumerate() {
                    if matches!(i, 4 | 6 | 8 | 10) {
                        out.push(b'-');
                    }
                    out.extend_from_slice(&[HEX[usize::from(b >> 4)], HEX[usize::from(b & 0xf)]]);
                }
            }
            Slot::UnixMs => {
                let ms = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_millis() as u64);
                decimal(out, ms);
            }
            Slot::Column { feeder, column } => {
                if let Some((feeds, rows)) = self.rows {
                    let feeder = usize::from(feeder);
                    let row = rows.get(feeder).copied().unwrap_or(NO_ROW);
                    out.extend_from_slice(feeds.cell(feeder, row, usize::from(column)));
                }
            }
            Slot::Var(v) => {
                if let Some(value) = self.vars.get(usize::from(v)) {
                    out.extend_from_slice(value);
                }
            }
        }
    }
}

/// `n` in decimal, without the formatting machinery.
pub(crate) fn decimal(out: &mut Vec<u8>, mut n: u64) {
    let mut digits = [0u8; 20];
    let mut at = digits.len();
    loop {
        at -= 1;
        digits[at] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    out.extend_from_slice(&digits[at..]);
}
