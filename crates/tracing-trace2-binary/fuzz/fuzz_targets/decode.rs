//! Any bytes, decoded every way: no panic, no hang, and no more events handed out than
//! the input could hold.

#![no_main]

use libfuzzer_sys::fuzz_target;
use tracing_trace2_binary::{
    DecodeOptions, TextFormat, TextOptions, decode, decode_to_event_json, decode_to_text,
};

fuzz_target!(|data: &[u8]| {
    let mut events = 0u64;
    let report = decode(data, &DecodeOptions::default(), |_, record| {
        events += 1;
        // Touch every field, as a formatter would.
        let _ = format!("{record:?}");
    })
    .expect("reading memory cannot fail");
    assert_eq!(report.events, events);
    // An event takes at least two bytes of a frame.
    assert!(events <= data.len() as u64);
    for format in [TextFormat::Normal, TextFormat::Perf, TextFormat::Event] {
        let mut out = Vec::new();
        let _ = decode_to_text(data, &mut out, &TextOptions::new(format));
    }
    let mut out = Vec::new();
    let _ = decode_to_event_json(data, &mut out);
});
