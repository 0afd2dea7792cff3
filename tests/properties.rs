//! Properties of the surfaces the fuzz targets (`fuzz/`) explore, checked on stable in
//! CI with proptest: every Event line is one line of valid JSON, the Perf and Normal
//! formatters take any record, damaged encodings decode to an error and never panic,
//! argv quoting reads back as the shell would, redaction is stable, destination values
//! always parse.

use proptest::prelude::*;
use tracing_trace2_event::EventFormat;
use tracing_trace2_normal::NormalFormat;
use tracing_trace2_perf::PerfFormat;
use tracing_trace2_record::codec::{self, Replayer};
use tracing_trace2_record::text::push_quoted_list;
use tracing_trace2_record::{Format, Record, Trace2Event};
use tracing_trace2_test_support::random::{KINDS, Owned, Rng};

/// A random record of kind `kind` from `seed`, handed to `f`.
fn with_record<R>(seed: u64, kind: usize, f: impl FnOnce(&Record<'_>) -> R) -> R {
    let owned = Owned::new(&mut Rng(seed | 1), kind);
    let list: Vec<&str> = owned.list.iter().map(String::as_str).collect();
    f(&owned.record(&list))
}

fn render(format: &dyn Format, record: &Record<'_>) -> Vec<u8> {
    let mut out = Vec::new();
    format.format(record, &mut out);
    out
}

/// Reads a shell-quoted list back as `sh` would (single quotes, backslash outside them,
/// words split on spaces).
fn shell_words(text: &str) -> Vec<String> {
    let mut words = Vec::new();
    let mut word: Option<String> = None;
    let mut chars = text.chars();
    let mut quoted = false;
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

proptest! {
    #![proptest_config(ProptestConfig {
        cases: 512,
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    /// Every Event line (brief or not, any nesting limit) is one JSON object on one
    /// line, in valid UTF-8.
    #[test]
    fn event_lines_are_one_line_of_json(
        seed in any::<u64>(), kind in 0..KINDS, brief in any::<bool>(), nesting in 0u32..4,
    ) {
        let format = EventFormat::new().with_brief(brief).with_max_nesting(nesting);
        let (line, raw_json_ok) = with_record(seed, kind, |record| {
            // A `data_json` value is written as given: the layer hands over only text
            // that parsed as JSON (anything else becomes `data`).
            let raw_json_ok = match record.event {
                Trace2Event::DataJson { json, .. } => {
                    serde_json::from_str::<serde_json::Value>(json).is_ok()
                }
                _ => true,
            };
            (render(&format, record), raw_json_ok)
        });
        prop_assume!(raw_json_ok);
        if !line.is_empty() {
            let text = std::str::from_utf8(&line).expect("valid UTF-8");
            prop_assert!(text.ends_with('\n'));
            prop_assert_eq!(text.matches('\n').count(), 1);
            let value: serde_json::Value = serde_json::from_str(text).unwrap_or_else(|e| panic!("{e}: {text}"));
            prop_assert!(value.is_object());
            prop_assert!(value["event"].is_string());
        }
    }

    /// The Perf and Normal formatters take any record and end what they write with a
    /// newline.
    #[test]
    fn perf_and_normal_take_any_record(seed in any::<u64>(), kind in 0..KINDS, brief in any::<bool>()) {
        let formats: [Box<dyn Format>; 2] = [
            Box::new(PerfFormat::new().with_brief(brief).with_utc_offset(-3600)),
            Box::new(NormalFormat::new().with_brief(brief).with_utc_offset(19800)),
        ];
        for format in &formats {
            let out = with_record(seed, kind, |record| render(format.as_ref(), record));
            prop_assert!(out.is_empty() || out.ends_with(b"\n"));
        }
    }

    /// Every strict prefix of an encoded record is an error, never a panic; bytes
    /// changed anywhere decode to something or to an error, never a panic.
    #[test]
    fn damaged_encodings_are_errors(
        seed in any::<u64>(), kind in 0..KINDS, cut in any::<prop::sample::Index>(),
        flip in any::<prop::sample::Index>(), xor in 1u8..,
    ) {
        let encoded = with_record(seed, kind, |record| {
            let mut buf = Vec::new();
            codec::encode(record, &mut buf);
            buf
        });
        let mut replayer = Replayer::new();
        let short = &encoded[..cut.index(encoded.len())];
        if !short.is_empty() {
            let decoded = replayer.replay(short, |_| ());
            prop_assert!(decoded.is_err(), "a strict prefix decoded: {:?}", decoded);
        }
        let mut changed = encoded.clone();
        let at = flip.index(changed.len());
        changed[at] ^= xor;
        let _ = replayer.replay(&changed, |_| ());
        prop_assert_eq!(replayer.replay(&encoded, |_| ()), Ok(1));
    }

    /// Arbitrary bytes never make the decoder panic.
    #[test]
    fn arbitrary_bytes_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..600)) {
        let _ = Replayer::new().replay(&bytes, |_| ());
        let mut list = Vec::new();
        let _ = codec::decode(&bytes, &mut list);
    }

    /// A quoted argv reads back, word for word, as the shell reads it.
    #[test]
    fn quoted_argv_reads_back(argv in prop::collection::vec("[^\\x00]{0,12}", 1..5)) {
        let args: Vec<&str> = argv.iter().map(String::as_str).collect();
        let mut out = Vec::new();
        push_quoted_list(&mut out, &args);
        prop_assert_eq!(shell_words(std::str::from_utf8(&out).unwrap()), argv);
    }

    /// Redaction hides the password of any http(s) URL and is stable when applied again.
    #[test]
    fn redaction_is_stable(
        scheme in "https?://", user in "[^:@/]{0,8}", password in "[^@/]{1,8}", rest in ".{0,16}",
        other in ".{0,40}",
    ) {
        let url = format!("{scheme}{user}:{password}@{rest}");
        let once = tracing_trace2_core::redact::redact_url(&url).into_owned();
        let hidden = format!("{scheme}{user}:<REDACTED>@{rest}");
        prop_assert_eq!(once, hidden);
        let once = tracing_trace2_core::redact::redact_url(&other).into_owned();
        let twice = tracing_trace2_core::redact::redact_url(&once).into_owned();
        prop_assert_eq!(twice, once);
    }

    /// Any destination value parses to something (git's rules decide what), without panic.
    #[test]
    fn any_destination_value_parses(value in ".{0,40}") {
        let _ = tracing_trace2_dst::parse_destination(&value);
    }
}
