//! The Event formatter (and its JSON escaping) on arbitrary records, read from the
//! fuzz input with the record codec: every line is one JSON object on one line.
#![no_main]

use libfuzzer_sys::fuzz_target;
use tracing_trace2_event::EventFormat;
use tracing_trace2_record::codec::Replayer;
use tracing_trace2_record::{Trace2Event, Format};

fuzz_target!(|data: &[u8]| {
    let Some((&options, encoded)) = data.split_first() else {
        return;
    };
    let format = EventFormat::new()
        .with_brief(options & 1 != 0)
        .with_max_nesting(u32::from(options >> 1));
    let _ = Replayer::new().replay(encoded, |record| {
        if let Trace2Event::DataJson { json, .. } = record.event {
            // Written as given: the layer passes only text that parsed as JSON.
            if serde_json::from_str::<serde_json::Value>(json).is_err() {
                return;
            }
        }
        let mut line = Vec::new();
        format.format(record, &mut line);
        if line.is_empty() {
            return;
        }
        let text = std::str::from_utf8(&line).expect("valid UTF-8");
        assert!(
            text.ends_with('\n') && text.matches('\n').count() == 1,
            "{text}"
        );
        let value: serde_json::Value =
            serde_json::from_str(text).unwrap_or_else(|e| panic!("{e}: {text}"));
        assert!(value["event"].is_string());
    });
});
