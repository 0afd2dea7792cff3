//! The Perf and Normal formatters on arbitrary records, read from the fuzz input with
//! the record codec: never a panic, every line ends with a newline.
#![no_main]

use libfuzzer_sys::fuzz_target;
use tracing_trace2_normal::NormalFormat;
use tracing_trace2_perf::PerfFormat;
use tracing_trace2_record::Format;
use tracing_trace2_record::codec::Replayer;

fuzz_target!(|data: &[u8]| {
    let Some((&options, encoded)) = data.split_first() else {
        return;
    };
    let brief = options & 1 != 0;
    let offset = i32::from(options as i8) * 900;
    let formats: [Box<dyn Format>; 2] = [
        Box::new(PerfFormat::new().with_brief(brief).with_utc_offset(offset)),
        Box::new(
            NormalFormat::new()
                .with_brief(brief)
                .with_utc_offset(offset),
        ),
    ];
    let _ = Replayer::new().replay(encoded, |record| {
        for format in &formats {
            let mut out = Vec::new();
            format.format(record, &mut out);
            assert!(out.is_empty() || out.ends_with(b"\n"));
        }
    });
});
