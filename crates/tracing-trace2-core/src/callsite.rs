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
        file: meta.file().map(relative_path),
        line: meta.line().unwrap_or(0),
    }
}

#[cfg(test)]
mod tests {
    use super::relative_path;

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
}
