//! Call sites as Trace2 writes them: a path relative to the crate or repository (git
//! writes `read-cache.c`), never an absolute build path, which would leak the build
//! machine's directories (and a user name) into shipped telemetry.
//!
//! Paths of the program's own crates are relative already (`src/main.rs`,
//! `crates/x/src/lib.rs`) and are kept as they are. An absolute path is cut to a
//! suffix, so no allocation is needed:
//!
//! | absolute path | written as |
//! |---|---|
//! | `…/.cargo/registry/src/<index>/serde-1.0.1/src/de.rs` | `serde-1.0.1/src/de.rs` |
//! | `…/.cargo/git/checkouts/<repo>/<rev>/src/lib.rs` | `<repo>/<rev>/src/lib.rs` |
//! | `/rustc/<hash>/library/std/src/panicking.rs` | `library/std/src/panicking.rs` |
//! | `/any/where/mycrate/src/lib.rs` | `mycrate/src/lib.rs` |
//! | `/any/where/build.rs` (no `src`) | `build.rs` |
//!
//! Cutting searches the path for its markers, about 1,400 instructions for a
//! dependency's path: more than the rest of a line's formatting. A dependency's call site
//! that writes a line per request (tower-http's request span) would pay it every time, so
//! the cut of a call site's `'static` path is remembered per thread, by the path's address.

use std::cell::Cell;

use tracing_core::Metadata;
use tracing_trace2_record::Callsite;

/// `file` made relative (see the module documentation); a relative path is returned as
/// it is.
#[inline]
pub fn relative_path(file: &str) -> &str {
    // The program's own paths (the common case) cost one test, inlined into the caller.
    if is_absolute(file) {
        cut_absolute(file)
    } else {
        file
    }
}

/// The suffix of an absolute `file` that Trace2 shows.
#[inline(never)]
fn cut_absolute(file: &str) -> &str {
    let file_norm = file;
    for marker in ["/registry/src/", "/git/checkouts/"] {
        if let Some(pos) = file_norm.rfind(marker) {
            let rest = &file[pos + marker.len()..];
            // Skip the index (registry) directory: `<index>/<crate>-<version>/…`.
            if marker == "/registry/src/"
                && let Some(slash) = rest.find('/')
            {
                return &rest[slash + 1..];
            }
            return rest;
        }
    }
    if let Some(rest) = file.strip_prefix("/rustc/")
        && let Some(slash) = rest.find('/')
    {
        return &rest[slash + 1..];
    }
    // `<crate dir>/src/…`: keep the crate's directory name and what follows.
    if let Some(src) = file.rfind("/src/") {
        let crate_dir = file[..src].rfind('/').map_or(0, |p| p + 1);
        return &file[crate_dir..];
    }
    file.rsplit('/').next().unwrap_or(file)
}

/// Cuts remembered per thread (direct-mapped by the path's address).
const CUT_SLOTS: usize = 16;

thread_local! {
    /// (address, length, offset of the cut) of recently cut `'static` paths. Plain cells
    /// with a const initializer: no allocation, no destructor.
    static CUTS: [Cell<(usize, usize, usize)>; CUT_SLOTS] =
        const { [const { Cell::new((0, 0, 0)) }; CUT_SLOTS] };
}

/// [`relative_path`] of a `'static` path (a call site's), remembered per thread: the
/// same address and length always hold the same text, as `'static` memory is never
/// reused.
#[inline]
fn relative_static(file: &'static str) -> &'static str {
    if !is_absolute(file) {
        return file;
    }
    cached_cut(file)
}

#[inline(never)]
fn cached_cut(file: &'static str) -> &'static str {
    let address = file.as_ptr() as usize;
    // Fibonacci hashing of the address: its top bits pick the slot.
    let slot = ((address as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 60) as usize % CUT_SLOTS;
    CUTS.try_with(|cuts| {
        let (seen, len, offset) = cuts[slot].get();
        if seen == address
            && len == file.len()
            && let Some(cut) = file.get(offset..)
        {
            return cut;
        }
        let cut = cut_absolute(file);
        cuts[slot].set((address, file.len(), file.len() - cut.len()));
        cut
    })
    .unwrap_or_else(|_| cut_absolute(file))
}

#[inline]
fn is_absolute(file: &str) -> bool {
    let b = file.as_bytes();
    // Unix paths, and Windows ones (`C:\…`, `\\server\…`) that a cross build may carry.
    b.first() == Some(&b'/')
        || b.first() == Some(&b'\\')
        || (b.len() > 2 && b[1] == b':' && (b[2] == b'\\' || b[2] == b'/'))
}

/// The call site of a span or event.
#[inline]
pub(crate) fn of(meta: &'static Metadata<'static>) -> Callsite<'static> {
    Callsite {
        file: meta.file().map(relative_static),
        line: meta.line().unwrap_or(0),
    }
}

#[cfg(test)]
mod tests {
    use super::{relative_path, relative_static};

    #[test]
    fn absolute_paths_are_cut() {
        let cases = [
            ("src/main.rs", "src/main.rs"),
            ("crates/x/src/lib.rs", "crates/x/src/lib.rs"),
            (
                "/home/alice/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/serde-1.0.1/src/de.rs",
                "serde-1.0.1/src/de.rs",
            ),
            (
                "/home/alice/.cargo/git/checkouts/gix-3f2a/1a2b3c4/gix/src/lib.rs",
                "gix-3f2a/1a2b3c4/gix/src/lib.rs",
            ),
            (
                "/rustc/90b35a6239c3d8bdabc530a6a0816f7ff89a0aaf/library/std/src/panicking.rs",
                "library/std/src/panicking.rs",
            ),
            ("/home/alice/work/mydep/src/a/b.rs", "mydep/src/a/b.rs"),
            ("/home/alice/work/build.rs", "build.rs"),
        ];
        for (input, expected) in cases {
            assert_eq!(relative_path(input), expected, "{input}");
            assert!(!relative_path(input).contains("alice"));
        }
    }

    /// The remembered cut is the cut, for paths that share a slot and for a path met
    /// again, and a path of the same address but another length is cut anew.
    #[test]
    fn remembered_cuts_are_the_cuts() {
        // Kept in a static, so that LeakSanitizer sees them reachable.
        static PATHS: std::sync::OnceLock<Vec<String>> = std::sync::OnceLock::new();
        let paths = PATHS.get_or_init(|| {
            (0..40)
                .map(|i| format!("/home/alice/.cargo/registry/src/index-1/dep{i}-1.0.0/src/lib.rs"))
                .collect()
        });
        for _ in 0..3 {
            for path in paths {
                assert_eq!(relative_static(path), relative_path(path));
                // A prefix of the same memory: same address, another length.
                let prefix = &path[..path.len() - 7];
                assert_eq!(relative_static(prefix), relative_path(prefix), "{prefix}");
            }
        }
        assert_eq!(relative_static("src/main.rs"), "src/main.rs");
    }
}
