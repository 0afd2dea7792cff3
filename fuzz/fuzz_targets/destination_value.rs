//! Destination values (`GIT_TRACE2*`): any text parses to one of git's kinds, and a socket
//! or path value keeps the text it was given.
#![no_main]

use libfuzzer_sys::fuzz_target;
use tracing_trace2_dst::{DestinationValue, parse_destination};

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    match parse_destination(&text) {
        DestinationValue::Path(path) => {
            assert!(text.starts_with('/') && path.as_os_str() == text.as_ref())
        }
        DestinationValue::Fd(fd) => assert!((2..=9).contains(&fd)),
        _ => {}
    }
});
