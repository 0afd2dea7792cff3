//! Text from a trace made safe for a terminal. A trace is untrusted input: a region label, an
//! error message or a file name may carry terminal escapes (`ESC ] 0 ; … BEL` retitles the window,
//! `ESC [ 2 J` clears the screen) or bidirectional overrides that reorder what a person reads.
//! Everything the tool prints for people goes through [`visible`], which writes such characters
//! as escapes (`\e`, `\x07`, `\u{202e}`) instead of sending them.

use std::borrow::Cow;
use std::fmt::Write;

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
}
