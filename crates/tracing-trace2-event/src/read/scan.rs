//! The fast path of the reader: one pass over a line in the form git and the Event
//! formatter write, each value put in its [`Slots`] place as it is scanned, strings
//! borrowed from the line unless they have escapes.
//!
//! It takes a line only when it is sure of it: a JSON object whose first key is
//! `event` with a kind of the catalogue, whose keys have no escapes and are each given
//! once, whose strings have no lone surrogate and whose values nest at most
//! [`MAX_DEPTH`] deep. For any other line it gives up and the
//! [general path](super::general) reads the line (with serde_json's own errors for a
//! line that is not JSON). Where both read a line they give the same slots: a test
//! checks this on random, reordered and damaged lines.

use std::borrow::Cow;

use super::EventLine;
use super::slots::{self, LineValue};

/// How deep values may nest inside a value here (the general path takes deeper ones).
const MAX_DEPTH: u32 = 32;

/// Reads a line (without its LF) of a known kind into `read` (whose slots are empty),
/// or `None` to leave it to the general path (`read` then holds part of the line).
pub(super) fn scan<'a>(line: &'a str, read: &mut EventLine<'a>) -> Option<()> {
    let mut s = Scanner {
        text: line,
        bytes: line.as_bytes(),
        pos: 0,
    };
    s.whitespace();
    s.eat(b'{')?;
    s.whitespace();
    if s.key()? != "event" {
        return None;
    }
    s.colon()?;
    let start = s.pos;
    let name = s.string()?;
    let kind = slots::kind_named(&name)?;
    read.kind = kind;
    let slots = &mut read.slots;
    slots
        .put(
            Some(kind),
            Cow::Borrowed("event"),
            s.since(start)?,
            LineValue::Text(name),
        )
        .ok()?;
    loop {
        s.whitespace();
        match s.next()? {
            b',' => s.whitespace(),
            b'}' => break,
            _ => return None,
        }
        let key = s.key()?;
        s.colon()?;
        let start = s.pos;
        let parsed = s.value()?;
        slots
            .put(Some(kind), Cow::Borrowed(key), s.since(start)?, parsed)
            .ok()?;
    }
    s.whitespace();
    (s.pos == s.bytes.len()).then_some(())
}

/// A position in a line.
struct Scanner<'a> {
    text: &'a str,
    bytes: &'a [u8],
    pos: usize,
}

impl<'a> Scanner<'a> {
    #[inline]
    fn peek(&self) -> Option<u8> {
        self.bytes.get(self.pos).copied()
    }

    #[inline]
    fn next(&mut self) -> Option<u8> {
        let byte = self.peek()?;
        self.pos += 1;
        Some(byte)
    }

    #[inline]
    fn eat(&mut self, byte: u8) -> Option<()> {
        (self.next()? == byte).then_some(())
    }

    /// The text from `start` to here.
    #[inline]
    fn since(&self, start: usize) -> Option<&'a str> {
        self.text.get(start..self.pos)
    }

    /// Skips JSON whitespace.
    #[inline]
    fn whitespace(&mut self) {
        while let Some(b' ' | b'\t' | b'\n' | b'\r') = self.peek() {
            self.pos += 1;
        }
    }

    /// A `:` between whitespace.
    #[inline]
    fn colon(&mut self) -> Option<()> {
        // As git writes it: `":` and the value.
        if self.peek() == Some(b':')
            && !matches!(
                self.bytes.get(self.pos + 1),
                Some(b' ' | b'\t' | b'\n' | b'\r')
            )
        {
            self.pos += 1;
            return Some(());
        }
        self.whitespace();
        self.eat(b':')?;
        self.whitespace();
        Some(())
    }

    /// A key without escapes (the only kind git writes).
    #[inline]
    fn key(&mut self) -> Option<&'a str> {
        self.eat(b'"')?;
        let start = self.pos;
        self.pos += plain_len(&self.bytes[start..]);
        if self.next()? != b'"' {
            return None;
        }
        self.text.get(start..self.pos - 1)
    }

    /// A string, borrowed when it has no escapes.
    #[inline]
    fn string(&mut self) -> Option<Cow<'a, str>> {
        self.eat(b'"')?;
        let start = self.pos;
        self.pos += plain_len(&self.bytes[self.pos..]);
        match self.next()? {
            b'"' => self.text.get(start..self.pos - 1).map(Cow::Borrowed),
            b'\\' => self.escaped(start).map(Cow::Owned),
            _ => None,
        }
    }

    /// The rest of a string that has an escape just before `pos`, unescaped.
    #[cold]
    fn escaped(&mut self, start: usize) -> Option<String> {
        let mut text = String::with_capacity(self.pos - start + 16);
        text.push_str(self.text.get(start..self.pos - 1)?);
        loop {
            // After a backslash.
            let unescaped = match self.next()? {
                b'"' => '"',
                b'\\' => '\\',
                b'/' => '/',
                b'b' => '\u{8}',
                b'f' => '\u{c}',
                b'n' => '\n',
                b'r' => '\r',
                b't' => '\t',
                b'u' => self.unicode_escape()?,
                _ => return None,
            };
            text.push(unescaped);
            let from = self.pos;
            self.pos += plain_len(&self.bytes[self.pos..]);
            text.push_str(self.text.get(from..self.pos)?);
            match self.next()? {
                b'"' => return Some(text),
                b'\\' => {}
                _ => return None,
            }
        }
    }

    /// The character of a `\u` escape (after the `u`); a surrogate pair is one
    /// character, a lone surrogate is left to the general path.
    fn unicode_escape(&mut self) -> Option<char> {
        let first = self.hex4()?;
        let code = match first {
            0xD800..=0xDBFF => {
                if self.next()? != b'\\' || self.next()? != b'u' {
                    return None;
                }
                let second = self.hex4()?;
                if !(0xDC00..=0xDFFF).contains(&second) {
                    return None;
                }
                0x10000 + ((u32::from(first) - 0xD800) << 10) + (u32::from(second) - 0xDC00)
            }
            0xDC00..=0xDFFF => return None,
            _ => u32::from(first),
        };
        char::from_u32(code)
    }

    fn hex4(&mut self) -> Option<u16> {
        let mut value = 0u16;
        for _ in 0..4 {
            let digit = char::from(self.next()?).to_digit(16)?;
            value = value * 16 + digit as u16;
        }
        Some(value)
    }

    /// A value.
    #[inline]
    fn value(&mut self) -> Option<LineValue<'a>> {
        let start = self.pos;
        Some(match self.peek()? {
            b'"' => LineValue::Text(self.string()?),
            b'[' => match self.string_list()? {
                Some(items) => LineValue::List(items),
                None => {
                    self.pos = start;
                    self.skip(0)?;
                    LineValue::Other
                }
            },
            _ => {
                self.skip(0)?;
                LineValue::Other
            }
        })
    }

    /// An array of strings (`Some(None)`: an array with something else in it, not
    /// read to its end).
    fn string_list(&mut self) -> Option<Option<Vec<Cow<'a, str>>>> {
        self.eat(b'[')?;
        self.whitespace();
        let mut items = Vec::new();
        if self.peek()? == b']' {
            self.pos += 1;
            return Some(Some(items));
        }
        loop {
            if self.peek()? != b'"' {
                return Some(None);
            }
            items.push(self.string()?);
            self.whitespace();
            match self.next()? {
                b',' => self.whitespace(),
                b']' => return Some(Some(items)),
                _ => return None,
            }
        }
    }

    /// Skips a JSON value, checking it as serde_json does.
    fn skip(&mut self, depth: u32) -> Option<()> {
        match self.peek()? {
            b'"' => {
                self.string()?;
            }
            open @ (b'[' | b'{') => {
                if depth >= MAX_DEPTH {
                    return None;
                }
                let close = if open == b'[' { b']' } else { b'}' };
                self.pos += 1;
                self.whitespace();
                if self.peek()? == close {
                    self.pos += 1;
                    return Some(());
                }
                loop {
                    if open == b'{' {
                        if self.peek()? != b'"' {
                            return None;
                        }
                        self.string()?;
                        self.colon()?;
                    }
                    self.skip(depth + 1)?;
                    self.whitespace();
                    match self.next()? {
                        b',' => self.whitespace(),
                        byte if byte == close => return Some(()),
                        _ => return None,
                    }
                }
            }
            b't' => self.literal(b"true")?,
            b'f' => self.literal(b"false")?,
            b'n' => self.literal(b"null")?,
            b'-' | b'0'..=b'9' => self.number()?,
            _ => return None,
        }
        Some(())
    }

    fn literal(&mut self, word: &[u8]) -> Option<()> {
        let end = self.pos + word.len();
        if self.bytes.get(self.pos..end)? != word {
            return None;
        }
        self.pos = end;
        Some(())
    }

    /// A JSON number: `-`, then `0` or digits not starting with `0`, then optionally
    /// `.` and digits, then optionally `e`, a sign and digits.
    fn number(&mut self) -> Option<()> {
        if self.peek() == Some(b'-') {
            self.pos += 1;
        }
        match self.next()? {
            b'0' => {
                if self.peek().is_some_and(|b| b.is_ascii_digit()) {
                    return None;
                }
            }
            b'1'..=b'9' => {
                self.digits();
            }
            _ => return None,
        }
        if self.peek() == Some(b'.') {
            self.pos += 1;
            if self.digits() == 0 {
                return None;
            }
        }
        if let Some(b'e' | b'E') = self.peek() {
            self.pos += 1;
            if let Some(b'+' | b'-') = self.peek() {
                self.pos += 1;
            }
            if self.digits() == 0 {
                return None;
            }
        }
        Some(())
    }

    /// Skips digits; how many.
    fn digits(&mut self) -> usize {
        let start = self.pos;
        while self.peek().is_some_and(|b| b.is_ascii_digit()) {
            self.pos += 1;
        }
        self.pos - start
    }
}

/// How many bytes at the start of `bytes` a string holds as they are: up to the first
/// `"`, `\` or control character (or the end). Eight bytes at a time: a byte is
/// flagged in the high bit of its lane when it is below 0x20 or equal to one of the two
/// (a borrow from a flagged lane can flag lanes above it, never below, so the lowest
/// flag is right).
#[inline]
fn plain_len(bytes: &[u8]) -> usize {
    const ONES: u64 = u64::MAX / 255;
    const HIGH_BITS: u64 = ONES << 7;
    let mut len = 0;
    while let Some(chunk) = bytes[len..].first_chunk::<8>() {
        let x = u64::from_le_bytes(*chunk);
        let control = x.wrapping_sub(ONES * 0x20) & !x;
        let quote = x ^ (ONES * u64::from(b'"'));
        let quote = quote.wrapping_sub(ONES) & !quote;
        let backslash = x ^ (ONES * u64::from(b'\\'));
        let backslash = backslash.wrapping_sub(ONES) & !backslash;
        let flagged = (control | quote | backslash) & HIGH_BITS;
        if flagged != 0 {
            return len + (flagged.trailing_zeros() / 8) as usize;
        }
        len += 8;
    }
    let rest = &bytes[len..];
    len + rest
        .iter()
        .position(|&b| b == b'"' || b == b'\\' || b < 0x20)
        .unwrap_or(rest.len())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_len_stops_at_the_first_quote_backslash_or_control_character() {
        let text = "0123456789abcdefghij";
        assert_eq!(plain_len(text.as_bytes()), text.len());
        for stop in ["\"", "\\", "\n", "\u{1}", "\u{1f}"] {
            for at in 0..text.len() {
                let mut line = text.to_owned();
                line.insert_str(at, stop);
                line.push('"');
                assert_eq!(plain_len(line.as_bytes()), at, "{line:?}");
            }
        }
        // Bytes at and above 0x20 (and multi-byte characters) are plain.
        let plain = " !#[]~\u{7f}é日本🦀";
        assert_eq!(plain_len(plain.as_bytes()), plain.len());
    }

    /// Every escape JSON has is read by the fast path itself (a line it gives up on
    /// would still read right through the general path, so only the scanner shows it),
    /// alone, between plain text and next to another escape.
    #[test]
    fn every_escape_is_read_here() {
        let escapes = [
            (r#"\""#, "\""),
            (r"\\", "\\"),
            (r"\/", "/"),
            (r"\b", "\u{8}"),
            (r"\f", "\u{c}"),
            (r"\n", "\n"),
            (r"\r", "\r"),
            (r"\t", "\t"),
            (r"\u0041", "A"),
            (r"\u00e9", "\u{e9}"),
            (r"\ud83e\udd80", "\u{1f980}"),
        ];
        for (written, read) in escapes {
            for (json, text) in [
                (format!("\"{written}\""), read.to_owned()),
                (format!("\"a{written}b\""), format!("a{read}b")),
                (format!("\"{written}{written}c\""), format!("{read}{read}c")),
            ] {
                let mut s = Scanner {
                    text: &json,
                    bytes: json.as_bytes(),
                    pos: 0,
                };
                assert_eq!(s.string().as_deref(), Some(text.as_str()), "{json}");
                assert_eq!(s.pos, json.len(), "{json}");
            }
        }
        // An unknown escape, and lone or broken surrogates: left to the general path.
        for bad in [
            r#""a\qb""#,
            r#""\ud83e""#,
            r#""\ud83eXudd80""#,
            r#""\ud83e\u0041""#,
            r#""\udd80""#,
        ] {
            let mut s = Scanner {
                text: bad,
                bytes: bad.as_bytes(),
                pos: 0,
            };
            assert_eq!(s.string(), None, "{bad}");
        }
    }

    #[test]
    fn numbers_as_json_has_them() {
        for good in ["0", "-0", "12", "1.5", "-0.000065", "1e3", "1E+3", "2.5e-7"] {
            let mut s = Scanner {
                text: good,
                bytes: good.as_bytes(),
                pos: 0,
            };
            assert_eq!((s.number(), s.pos), (Some(()), good.len()), "{good}");
        }
        for bad in ["01", "-", "1.", ".5", "1e", "1e+", "+1", "-a"] {
            let mut s = Scanner {
                text: bad,
                bytes: bad.as_bytes(),
                pos: 0,
            };
            let read = s.number().map(|()| s.pos);
            assert!(read.is_none_or(|end| end < bad.len()), "{bad}");
        }
    }
}
