//! JSON string escaping on arbitrary text: the escaped string parses back to the text,
//! and compact_json keeps the value of any JSON it accepts.
#![no_main]

use libfuzzer_sys::fuzz_target;
use tracing_trace2_record::text::{compact_json, push_json_str};

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    let mut out = Vec::new();
    push_json_str(&mut out, &text);
    let back: String = serde_json::from_slice(&out).expect("escaped text is a JSON string");
    assert_eq!(back, text);
    if let Some(compact) = compact_json(&text) {
        let a: serde_json::Value = serde_json::from_str(&compact).expect("compact JSON parses");
        let b: serde_json::Value = serde_json::from_str(&text).expect("accepted JSON parses");
        assert_eq!(a, b);
    }
});
