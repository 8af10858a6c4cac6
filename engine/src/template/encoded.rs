//! A protocol's encoding of a templated request: its bytes pre-encoded, with holes where the
//! slots' values go, each in the protocol's framing.

use super::{Fill, Template, Vocabulary};

/// How a filled value is framed where it goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Framing {
    /// As it is: HTTP/1.1's request line and fields.
    Raw,
    /// A string literal of HPACK (RFC 7541 §5.2) and QPACK (RFC 9204 §4.1.2): its length with
    /// a 7-bit prefix, the Huffman bit clear, then the bytes.
    Literal,
}

/// Where an encoder writes: a plain `Vec` (the value written as it is), or an [`Encoded`],
/// which makes a value with slots a hole to fill per request.
pub(crate) trait Out {
    fn bytes(&mut self, bytes: &[u8]);

    fn push(&mut self, byte: u8) {
        self.bytes(&[byte]);
    }

    /// A path or a field's value: `plain` writes its encoding as it is into the Vec given,
    /// unless this output fills templates and `text` has slots.
    fn value(&mut self, text: &str, framing: Framing, plain: impl FnOnce(&mut Vec<u8>));
}

impl Out for Vec<u8> {
    fn bytes(&mut self, bytes: &[u8]) {
        self.extend_from_slice(bytes);
    }

    fn push(&mut self, byte: u8) {
        Vec::push(self, byte);
    }

    fn value(&mut self, _text: &str, _framing: Framing, plain: impl FnOnce(&mut Vec<u8>)) {
        plain(self);
    }
}

/// Pre-encoded bytes and holes.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Encoded {
    parts: Vec<Part>,
    /// The feeder columns its values' slots may name; None: its values are written as they
    /// are, `{{…}}` and all.
    vocabulary: Option<Vocabulary>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Part {
    Bytes(Vec<u8>),
    Hole(Template, Framing),
}

impl Out for Encoded {
    fn bytes(&mut self, bytes: &[u8]) {
        match self.parts.last_mut() {
            Some(Part::Bytes(last)) => last.extend_from_slice(bytes),
            _ => self.parts.push(Part::Bytes(bytes.to_vec())),
        }
    }

    fn value(&mut self, text: &str, framing: Framing, plain: impl FnOnce(&mut Vec<u8>)) {
        // Templates were checked with the plan: one that does not parse here has no slots.
        let template = self.vocabulary.as_ref().and_then(|v| Template::parse(text.as_bytes(), v).ok());
        match template.filter(Template::has_slots) {
            Some(template) => self.parts.push(Part::Hole(template, framing)),
            None => {
                let mut bytes = Vec::new();
                plain(&mut bytes);
                self.bytes(&bytes);
            }
        }
    }
}

impl Encoded {
    /// An encoding whose values' slots may name `vocabulary`'s feeder columns.
    pub(crate) fn new(vocabulary: &Vocabulary) -> Encoded {
        Encoded { parts: Vec::new(), vocabulary: Some(vocabulary.clone()) }
    }

    /// An encoding of a request that is not templated: no holes, whatever its values hold.
    pub(crate) fn as_written() -> Encoded {
        Encoded { parts: Vec::new(), vocabulary: None }
    }

    /// One for `vocabulary`, or as written without one.
    pub(crate) fn for_templates(vocabulary: Option<&Vocabulary>) -> Encoded {
        vocabulary.map_or_else(Encoded::as_written, Encoded::new)
    }

    /// Whether any value had slots: else the encoding is one run of bytes, which a plain
    /// `Vec` would have held as well.
    pub(crate) fn has_holes(&self) -> bool {
        self.parts.iter().any(|p| matches!(p, Part::Hole(..)))
    }

    /// Appends the bytes with every hole filled.
    pub(crate) fn render(&self, fill: &mut Fill<'_>, out: &mut Vec<u8>) {
        for part in &self.parts {
            match part {
                Part::Bytes(bytes) => out.extend_from_slice(bytes),
                Part::Hole(template, Framing::Raw) => template.render(fill, out),
                Part::Hole(template, Framing::Literal) => {
                    // Rendered in place after a one-byte length, the common case; a value too
                    // long for one byte is moved up to make room for its length's other bytes.
                    // Rendered elsewhere and copied, every value was written twice.
                    let at = out.len();
                    out.push(0);
                    template.render(fill, out);
                    let len = out.len() - at - 1;
                    if len < 0x7f {
                        out[at] = len as u8;
                    } else {
                        // The length's first byte has every prefix bit set, 0x7f, and takes
                        // the placeholder's place; its other bytes go after the value, then
                        // rotate in front of it: the value moves once.
                        out[at] = 0x7f;
                        let end = out.len();
                        integer(out, 0x00, 7, len);
                        debug_assert_eq!(out[end], 0x7f);
                        out.remove(end);
                        let tail = out.len() - end;
                        out[at + 1..].rotate_right(tail);
                    }
                }
            }
        }
    }
}

/// RFC 7541 §5.1's integer (also QPACK's, RFC 9204 §4.1.1): `value` in the low `prefix_bits`
/// of a byte whose high bits are `flags`, and what does not fit in 7-bit groups after it.
pub(crate) fn integer(out: &mut impl Out, flags: u8, prefix_bits: u32, mut value: usize) {
    let max = (1usize << prefix_bits) - 1;
    if value < max {
        out.push(flags | value as u8);
        return;
    }
    out.push(flags | max as u8);
    value -= max;
    while value >= 0x80 {
        out.push(0x80 | (value & 0x7f) as u8);
        value >>= 7;
    }
    out.push(value as u8);
}
