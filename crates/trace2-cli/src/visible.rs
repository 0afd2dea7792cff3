//! Text from a trace made safe for a terminal. A trace is untrusted input: a region label, an
//! error message or a file name may carry terminal escapes (`ESC ] 0 ; … BEL` retitles the window,
//! `ESC [ 2 J` clears the screen) or bidirectional overrides that reorder what a person reads.
//! Everything the tool prints for people goes through [`visible`], which writes such characters
//! as escapes (`\e`, `\x07`, `\u{202e}`) instead of sending them; [`VisibleLines`] does the
//! same to a stream of lines (`trace2 decode` on a terminal).

use std::borrow::Cow;
use std::fmt::Write;
use std::io;

/// True for a character that must not reach a terminal as it is: C0 and C1 controls, DEL, and
/// the Unicode marks that change the direction of the text around them.
fn is_hidden(c: char) -> bool {
    c.is_control()
        || matches!(c, '\u{200e}' | '\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
}

/// `text` with every control character written as a visible escape; borrowed when there is none.
pub fn visible(text: &str) -> Cow<'_, str> {
    if !text.chars().any(is_hidden) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        if !is_hidden(c) {
            out.push(c);
            continue;
        }
        match c {
            '\t' => out.push_str("\\t"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\u{1b}' => out.push_str("\\e"),
            c if (c as u32) < 0x80 => {
                let _ = write!(out, "\\x{:02x}", c as u32);
            }
            c => {
                let _ = write!(out, "\\u{{{:x}}}", c as u32);
            }
        }
    }
    Cow::Owned(out)
}

/// [`visible`] for a line of several parts, keeping its line breaks: each line is made visible
/// on its own (for multi-line reports).
pub fn visible_lines(text: &str) -> String {
    text.split('\n')
        .map(|line| visible(line).into_owned())
        .collect::<Vec<_>>()
        .join("\n")
}

/// A writer that passes whole lines on with their control characters made [`visible`], each
/// followed by its newline: the text of a trace shown on a terminal. Bytes that are not UTF-8
/// are shown as U+FFFD. A last line without a newline is written by [`flush`](io::Write::flush).
pub struct VisibleLines<W: io::Write> {
    inner: W,
    /// The start of a line whose newline has not come yet.
    pending: Vec<u8>,
}

impl<W: io::Write> VisibleLines<W> {
    /// Lines written to `inner`, made visible.
    pub fn new(inner: W) -> Self {
        VisibleLines {
            inner,
            pending: Vec::new(),
        }
    }

    fn write_line(&mut self, line: &[u8]) -> io::Result<()> {
        let text = String::from_utf8_lossy(line);
        self.inner.write_all(visible(&text).as_bytes())
    }
}

impl<W: io::Write> io::Write for VisibleLines<W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let mut rest = buf;
        while let Some(at) = memchr::memchr(b'\n', rest) {
            if self.pending.is_empty() {
                self.write_line(&rest[..at])?;
            } else {
                self.pending.extend_from_slice(&rest[..at]);
                let line = std::mem::take(&mut self.pending);
                self.write_line(&line)?;
            }
            self.inner.write_all(b"\n")?;
            rest = &rest[at + 1..];
        }
        self.pending.extend_from_slice(rest);
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        if !self.pending.is_empty() {
            let line = std::mem::take(&mut self.pending);
            self.write_line(&line)?;
        }
        self.inner.flush()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes_are_shown_not_sent() {
        assert!(matches!(visible("index/refresh"), Cow::Borrowed(_)));
        assert_eq!(
            visible("a\u{1b}]0;pwned\u{7}b\u{1b}[2Jc"),
            "a\\e]0;pwned\\x07b\\e[2Jc"
        );
        assert_eq!(visible("tab\there\nline\r"), "tab\\there\\nline\\r");
        assert_eq!(visible("del\u{7f} csi\u{9b}"), "del\\x7f csi\\u{9b}");
        assert_eq!(visible("abc\u{202e}fed"), "abc\\u{202e}fed");
        // Other non-ASCII text is shown as it is.
        assert_eq!(visible("répertoire ✓"), "répertoire ✓");
        assert_eq!(visible_lines("a\u{1b}\nb"), "a\\e\nb");
    }

    #[test]
    fn lines_written_in_pieces_are_shown_whole() {
        use std::io::Write as _;
        let text = "x\u{1b}]0;title\u{7}y\n\u{1b}[2J\u{9b}é\n{\"a\":\"\u{202e}\"}\nlast\u{1b}";
        let mut out = VisibleLines::new(Vec::new());
        // Cut everywhere, a multi-byte character and the newlines included.
        for piece in text.as_bytes().chunks(3) {
            out.write_all(piece).unwrap();
        }
        out.flush().unwrap();
        assert_eq!(
            String::from_utf8(out.inner).unwrap(),
            "x\\e]0;title\\x07y\n\\e[2J\\u{9b}é\n{\"a\":\"\\u{202e}\"}\nlast\\e"
        );
    }
}
