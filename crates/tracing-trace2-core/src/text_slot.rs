//! [`TextSlot`]: a field's text as the layer keeps it between visiting and formatting,
//! by reference when it is a literal, else in a buffer reused from one value to the next.
//! Shared by a span's region fields and a user event's fields.

use crate::bound::push_bounded;

/// A text field that remembers whether it was given. Cleared, never freed, so that a
/// recycled state reuses its capacity. A value in a read-only segment of the program
/// (a literal, as `trace2.*` values nearly always are) is kept by reference instead of
/// copied; the binary target then finds it by address without comparing its bytes.
#[derive(Clone, Debug, Default)]
pub(crate) struct TextSlot {
    text: String,
    /// The value when it is a literal (then `text` is not used).
    fixed: Option<&'static str>,
    set: bool,
}

impl TextSlot {
    pub(crate) fn get(&self) -> Option<&str> {
        match self.fixed {
            Some(fixed) => Some(fixed),
            None => self.set.then_some(self.text.as_str()),
        }
    }

    /// Marks the field given and returns its emptied buffer.
    pub(crate) fn start(&mut self) -> &mut String {
        self.set = true;
        self.fixed = None;
        self.text.clear();
        &mut self.text
    }

    /// Gives the field `value`: by reference when it is a literal, else copied.
    pub(crate) fn set_str(&mut self, value: &str) {
        match tracing_trace2_dst::statics::as_static(value) {
            Some(fixed) => {
                self.set = true;
                self.fixed = Some(fixed);
            }
            None => self.copy_str(value),
        }
    }

    /// [`Self::set_str`] bounded at `limit` bytes (see `bound.rs`): a longer value is cut
    /// and marked.
    #[inline]
    pub(crate) fn set_str_bounded(&mut self, value: &str, limit: usize) {
        if value.len() <= limit {
            self.set_str(value);
        } else {
            push_bounded(self.start(), limit, value);
        }
    }

    /// [`Self::set_str`] for text that is not a literal: out of line, so that a visit
    /// whose values are literals (nearly every one) saves no registers for the copy.
    #[inline(never)]
    fn copy_str(&mut self, value: &str) {
        self.start().push_str(value);
    }

    /// Sets a text known to live as long as the program, by reference.
    pub(crate) fn set_static(&mut self, value: &'static str) {
        self.set = true;
        self.fixed = Some(value);
    }

    pub(crate) fn copy_from(&mut self, other: &TextSlot) {
        if other.set {
            match other.fixed {
                Some(fixed) => {
                    self.set = true;
                    self.fixed = Some(fixed);
                }
                None => self.start().push_str(&other.text),
            }
        }
    }

    /// The room of the buffer (what a recycled state keeps).
    pub(crate) fn capacity(&self) -> usize {
        self.text.capacity()
    }

    /// Forgets the value but keeps the buffer's text (the next [`Self::start`] empties
    /// it; nothing reads it before).
    pub(crate) fn forget(&mut self) {
        self.set = false;
        self.fixed = None;
    }
}
