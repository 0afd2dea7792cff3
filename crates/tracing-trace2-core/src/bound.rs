//! The bound on text formatted from a program's values (a span's fields, an event's
//! message and fields): at most `limit` bytes, cut on a character boundary and ending
//! with [`CUT_MARK`] when longer. A value is formatted through [`Bounded`], which
//! refuses the first write past the bound, so a `Debug` impl stops there: a huge value
//! costs no more time or memory than the bound.

use std::fmt::{self, Write};

/// What ends a text cut at its bound.
pub(crate) const CUT_MARK: &str = "...";

/// A writer that takes text up to `limit` bytes of `out`, then fails: a `Debug` impl
/// stops at its first failed write, so a huge value costs no more than the bound.
pub(crate) struct Bounded<'a> {
    pub out: &'a mut String,
    pub limit: usize,
}

impl Write for Bounded<'_> {
    fn write_str(&mut self, s: &str) -> fmt::Result {
        let room = self.limit.saturating_sub(self.out.len());
        if s.len() <= room {
            self.out.push_str(s);
            return Ok(());
        }
        self.out.push_str(&s[..floor_boundary(s, room)]);
        Err(fmt::Error)
    }
}

/// The largest char boundary of `s` at or below `at`.
pub(crate) fn floor_boundary(s: &str, at: usize) -> usize {
    let mut end = at.min(s.len());
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    end
}

/// Cuts `text` to at most `limit` bytes, on a char boundary, ending with [`CUT_MARK`]
/// when there is room for it.
pub(crate) fn cut_at(text: &mut String, limit: usize) {
    let keep = limit.saturating_sub(CUT_MARK.len());
    text.truncate(floor_boundary(text, keep));
    if limit >= CUT_MARK.len() {
        text.push_str(CUT_MARK);
    }
}

/// Appends `value` to `out` (which holds at most `limit` bytes), formatting it no further
/// than the bound, cut on a character boundary and marked with `...`; `true` when `value`
/// was cut. The bound every text formatted from a program's values gets.
pub fn write_bounded(out: &mut String, limit: usize, value: fmt::Arguments<'_>) -> bool {
    let mut bounded = Bounded { out, limit };
    if bounded.write_fmt(value).is_ok() {
        return false;
    }
    cut_at(out, limit);
    true
}

/// [`write_bounded`] for text: copied whole when it fits.
#[inline]
pub(crate) fn push_bounded(out: &mut String, limit: usize, value: &str) -> bool {
    if out.len() + value.len() <= limit {
        out.push_str(value);
        return false;
    }
    push_cut(out, limit, value)
}

#[cold]
#[inline(never)]
fn push_cut(out: &mut String, limit: usize, value: &str) -> bool {
    let room = limit.saturating_sub(out.len());
    out.push_str(&value[..floor_boundary(value, room)]);
    cut_at(out, limit);
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_is_cut_on_a_character_boundary_and_marked() {
        let mut out = String::new();
        assert!(!push_bounded(&mut out, 8, "12345678"));
        assert_eq!(out, "12345678");
        out.clear();
        assert!(push_bounded(&mut out, 8, "ééééé")); // 10 bytes
        assert_eq!(out, "éé...");
        out.clear();
        assert!(write_bounded(&mut out, 8, format_args!("{:?}", "ééééé")));
        assert_eq!(out, "\"éé...");
        // A bound shorter than the mark keeps what fits, unmarked.
        out.clear();
        assert!(push_bounded(&mut out, 2, "abc"));
        assert_eq!(out, "");
    }
}
