//! The text of a failed `main`'s `error` line: an error's alternate `Display` form,
//! formatted no further than a bound (a `Display` impl stops at its first failed write),
//! cut on a character boundary and marked with `...`, as a region's message is.

use std::fmt::Display;

/// `err` as `{:#}`, at most `limit` bytes (the cut mark included): the core's bound on
/// every text formatted from a program's values.
pub(super) fn bounded(err: &dyn Display, limit: usize) -> String {
    let mut text = String::new();
    tracing_trace2_core::write_bounded(&mut text, limit, format_args!("{err:#}"));
    text
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fmt;

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
