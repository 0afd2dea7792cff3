//! Argv quoting on arbitrary arguments (split at NUL bytes): the quoted list reads
//! back, word for word, as `sh` reads it.
#![no_main]

use libfuzzer_sys::fuzz_target;
use tracing_trace2_record::text::push_quoted_list;

/// Reads a quoted list as `sh` does: single quotes, backslash outside them, spaces.
fn shell_words(text: &str) -> Vec<String> {
    let (mut words, mut word, mut quoted) = (Vec::new(), None::<String>, false);
    let mut chars = text.chars();
    while let Some(c) = chars.next() {
        match (quoted, c) {
            (true, '\'') => quoted = false,
            (true, c) => word.get_or_insert_default().push(c),
            (false, '\'') => {
                quoted = true;
                word.get_or_insert_default();
            }
            (false, '\\') => word.get_or_insert_default().extend(chars.next()),
            (false, ' ') => words.extend(word.take()),
            (false, c) => word.get_or_insert_default().push(c),
        }
    }
    words.extend(word);
    words
}

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    let args: Vec<&str> = text.split('\0').collect();
    let mut out = Vec::new();
    push_quoted_list(&mut out, &args);
    let quoted = std::str::from_utf8(&out).expect("quoting keeps UTF-8");
    assert_eq!(shell_words(quoted), args, "{quoted}");
});
