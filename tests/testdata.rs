//! The crates' own copies of git's captures (`crates/*/testdata/`, which their unit
//! tests read so that a published package tests itself) are still byte for byte the
//! files of the capture set the root suite reads.

#[path = "support/mod.rs"]
mod support;

use std::path::{Path, PathBuf};

/// Every file under `dir`, as paths relative to it.
fn files_under(dir: &Path) -> Vec<PathBuf> {
    let mut found = Vec::new();
    let mut pending = vec![PathBuf::new()];
    while let Some(relative) = pending.pop() {
        for entry in std::fs::read_dir(dir.join(&relative)).unwrap() {
            let entry = entry.unwrap();
            let path = relative.join(entry.file_name());
            if entry.file_type().unwrap().is_dir() {
                pending.push(path);
            } else {
                found.push(path);
            }
        }
    }
    found
}

#[test]
fn crate_testdata_matches_the_capture_set() {
    let samples = support::samples_dir();
    let crates = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("crates");
    let mut compared = 0;
    for krate in std::fs::read_dir(&crates).unwrap() {
        let testdata = krate.unwrap().path().join("testdata");
        if !testdata.is_dir() {
            continue;
        }
        for relative in files_under(&testdata) {
            if relative == Path::new("README.md") {
                continue;
            }
            let copy = std::fs::read(testdata.join(&relative)).unwrap();
            let original = samples.join(&relative);
            let original =
                std::fs::read(&original).unwrap_or_else(|e| panic!("{}: {e}", original.display()));
            assert!(
                copy == original,
                "{} differs from the capture set",
                testdata.join(&relative).display()
            );
            compared += 1;
        }
    }
    // normal, perf and event each carry their captures.
    assert!(compared >= 60, "only {compared} files compared");
}
