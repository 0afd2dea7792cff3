//! The record codec's decoder on arbitrary bytes: never a panic; whatever decodes
//! encodes back to bytes that decode to the same record.
#![no_main]

use libfuzzer_sys::fuzz_target;
use tracing_trace2_record::codec::{self, Replayer};

fuzz_target!(|data: &[u8]| {
    let _ = Replayer::new().replay(data, |_| ());
    let mut list = Vec::new();
    if let Ok((record, _rest)) = codec::decode(data, &mut list) {
        let mut again = Vec::new();
        codec::encode(&record, &mut again);
        let mut list2 = Vec::new();
        let (back, rest) = codec::decode(&again, &mut list2).expect("re-encoded record decodes");
        assert!(rest.is_empty());
        assert_eq!(format!("{back:?}"), format!("{record:?}"));
    }
});
