//! The text of a failed `main`'s `error` line: an error's alternate `Display` form,
//! formatted no further than a bound (a `Display` impl stops at its first failed write),
//! cut on a character boundary and marked with `...`, as a region's message is.

use std::fmt::{self, Display, Write};

/// What ends a text cut at its bound.
const CUT_MARK: &str = "...";

/// `err` as `{:#}`, at most `limit` bytes (the cut mark included).
pub(super) fn bounded(err: &dyn Display, limit: usize) -> String {
    let mut out = UpTo {
        text: String::new(),
        limit,
        cut: false,
    };
    let _ = write!(out, "{err:#}");
    let UpTo { mut text, cut, .. } = out;
    if cut {
        let mut end = limit.saturating_sub(CUT_MARK.len());
        while !text.is_char_boundary(end) {
            end -= 1;
        }
        text.truncate(end);
        // As a region's message: the mark only where it fits.
        if limit >= CUT_MARK.len() {
            text.push_str(CUT_MARK);
        }
    }
    text
}

/// A `String` that takes at most `limit` bytes; the first write past it fails and marks
/// the text as cut.
struct UpTo {
    text: String,
    limit: usize,
    cut: bool,
}

impl Write for UpTo {
    fn write_str(&mut self, s: &str) -> fmt::Result {
        let left = self.limit - self.text.len();
        if s.len() <= left {
            self.text.push_str(s);
            return Ok(());
        }
        let mut end = left;
        while !s.is_char_boundary(end) {
            end -= 1;
        }
        self.text.push_str(&s[..end]);
        self.cut = true;
        Err(fmt::Error)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An error with a cause, shown as `anyhow` shows one: the chain with `{:#}`.
    struct Chain;
    impl Display for Chain {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("reading config")?;
            if f.alternate() {
                f.write_str(": No such file or directory")?;
            }
            Ok(())
        }
    }

    #[test]
    fn the_alternate_form_is_written() {
        assert_eq!(
            bounded(&Chain, 256),
            "reading config: No such file or directory"
        );
        assert_eq!(bounded(&"no repository", 256), "no repository");
    }

    #[test]
    fn a_long_text_is_cut_at_the_bound() {
        let long = "é".repeat(300);
        let text = bounded(&long, 256);
        assert!(text.len() <= 256, "{}", text.len());
        assert!(text.ends_with("..."));
        assert!(text.starts_with("éé"));
        assert_eq!(bounded(&"x".repeat(256), 256), "x".repeat(256));
        assert_eq!(bounded(&"x".repeat(257), 256).len(), 256);
        assert_eq!(bounded(&"abc", 0), "");
    }

    #[test]
    fn formatting_stops_at_the_bound() {
        struct Endless(std::cell::Cell<usize>);
        impl Display for Endless {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                loop {
                    self.0.set(self.0.get() + 1);
                    f.write_str("piece ")?;
                }
            }
        }
        let endless = Endless(std::cell::Cell::new(0));
        assert_eq!(bounded(&endless, 30).len(), 30);
        assert!(endless.0.get() <= 7, "{} writes", endless.0.get());
    }
}
