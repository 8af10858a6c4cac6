//! Text from outside — what workers say about themselves and their failures, error samples,
//! saved reports — made safe to print: a worker's name or reason is shown on a terminal and in
//! the one line on stderr, so an escape sequence in it would drive the terminal, a line break
//! would forge lines, and 100 KB would drown the report.

/// At most this many characters of any one text are kept.
const MAX_CHARS: usize = 240;

/// `text` on one line: control characters (and the invisible ones that reorder or hide text)
/// escaped as Rust does (`\u{1b}`, `\n`), cut after [`MAX_CHARS`] characters with an ellipsis.
pub(crate) fn one_line(text: &str) -> String {
    let mut out = String::with_capacity(text.len().min(MAX_CHARS + 16));
    for (n, c) in text.chars().enumerate() {
        if n == MAX_CHARS {
            out.push('…');
            break;
        }
        if c.is_control() || is_invisible_format(c) {
            out.extend(c.escape_default());
        } else {
            out.push(c);
        }
    }
    out
}

/// Unicode format characters that change how the text around them is shown: zero-width ones
/// and the bidirectional overrides and isolates ("Trojan Source").
fn is_invisible_format(c: char) -> bool {
    matches!(c, '\u{200B}'..='\u{200F}' | '\u{202A}'..='\u{202E}' | '\u{2060}'..='\u{2069}' | '\u{FEFF}')
}

#[cfg(test)]
mod tests {
    use super::one_line;

    #[test]
    fn control_characters_are_escaped_and_long_text_is_cut() {
        assert_eq!(one_line("worker-1 (eu)"), "worker-1 (eu)");
        assert_eq!(one_line("a\x1b[2Jb\nc\rd\te\u{7f}\u{9b}"), "a\\u{1b}[2Jb\\nc\\rd\\te\\u{7f}\\u{9b}");
        assert_eq!(one_line("evil\u{202E}txt.exe"), "evil\\u{202e}txt.exe");
        let long = one_line(&"é".repeat(100_000));
        assert_eq!(long.chars().count(), 241);
        assert!(long.ends_with('…'));
    }
}
