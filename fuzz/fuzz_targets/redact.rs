//! URL redaction on arbitrary text: never a panic, stable when applied again, and a
//! changed value keeps everything but the password.
#![no_main]

use libfuzzer_sys::fuzz_target;
use tracing_trace2_core::redact::redact_url;

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    let once = redact_url(&text).into_owned();
    assert_eq!(redact_url(&once), once.as_str());
    if once != text {
        assert!(once.contains(":<REDACTED>@"), "{once}");
        assert!(text.starts_with("http://") || text.starts_with("https://"));
    }
});
