//! Tests of the text primitives, across the modules.

use super::json::{block_needs_escape, block_needs_escape_portable, needs_escape};
use super::time::push_datetime;
use super::*;

/// Every length up to 80, and nothing past the copy is touched.
#[test]
fn copy_short_copies_every_length() {
    let src: Vec<u8> = (0..80u8)
        .map(|b| b.wrapping_mul(7).wrapping_add(1))
        .collect();
    for n in 0..=src.len() {
        let mut dst = vec![0xaa; 90];
        copy_short(&mut dst, &src[..n]);
        assert_eq!(&dst[..n], &src[..n], "{n}");
        assert!(dst[n..].iter().all(|&b| b == 0xaa), "{n}");
    }
}

fn s(f: impl FnOnce(&mut Vec<u8>)) -> String {
    let mut v = Vec::new();
    f(&mut v);
    String::from_utf8(v).unwrap()
}

#[test]
fn seconds() {
    assert_eq!(s(|o| push_seconds(o, 410)), "0.000410");
    assert_eq!(s(|o| push_seconds(o, 3_001_686)), "3.001686");
    assert_eq!(s(|o| push_seconds_9(o, 845)), " 0.000845");
    assert_eq!(s(|o| push_seconds_9(o, 10_000_000)), "10.000000");
    assert_eq!(s(|o| push_seconds_9(o, 123_000_000)), "123.000000");
    for micros in [
        0,
        1,
        999_999,
        1_000_000,
        9_999_999,
        10_000_000,
        86_400_123_456,
    ] {
        let expected = format!("{}.{:06}", micros / 1_000_000, micros % 1_000_000);
        assert_eq!(s(|o| push_seconds(o, micros)), expected);
        assert_eq!(s(|o| push_seconds_9(o, micros)), format!("{expected:>9}"));
    }
}

#[test]
fn timer_seconds_round_like_printf() {
    assert_eq!(s(|o| push_timer_seconds(o, 20_141_499)), "0.020141");
    assert_eq!(s(|o| push_timer_seconds(o, 20_141_501)), "0.020142");
    assert_eq!(s(|o| push_timer_seconds(o, 0)), "0.000000");
}

#[test]
fn quoting() {
    assert_eq!(s(|o| push_quoted(o, "")), "''");
    assert_eq!(
        s(|o| push_quoted(o, "a-b_c.d/e:f=g@h+i,j^k")),
        "a-b_c.d/e:f=g@h+i,j^k"
    );
    assert_eq!(s(|o| push_quoted(o, "arg two")), "'arg two'");
    assert_eq!(
        s(|o| push_quoted(o, "alias.x=!echo hi")),
        "'alias.x='\\!'echo hi'"
    );
    assert_eq!(
        s(|o| push_quoted(o, "my proc (x)'q")),
        "'my proc (x)'\\''q'"
    );
    assert_eq!(s(|o| push_quoted(o, "é")), "'é'");
    assert_eq!(
        s(|o| push_quoted_list(o, &["git", "-c", "a b", ""])),
        "git -c 'a b' ''"
    );
}

#[test]
fn padding() {
    assert_eq!(s(|o| push_padded(o, "data", 12)), "data        ");
    assert_eq!(s(|o| push_padded(o, "region_enter!", 12)), "region_enter!");
    assert_eq!(
        s(|o| push_cut_padded(o, "traverse_trees", 12)),
        "traverse_tre"
    );
    assert_eq!(s(|o| push_cut_padded(o, "", 3)), "   ");
}

#[test]
fn json_escaping() {
    assert_eq!(
        s(|o| push_json_str(o, "bad\"na\\me\tx\u{1}\u{7f}é/")),
        "\"bad\\\"na\\\\me\\tx\\u0001\u{7f}é/\""
    );
    assert_eq!(
        s(|o| push_json_str(o, "\u{1b}\u{8}\u{c}\r\n")),
        "\"\\u001b\\b\\f\\r\\n\""
    );
}

/// Escaping one byte at a time, the plain way: the reference for the fast scan.
fn json_reference(text: &str) -> String {
    let mut out = String::from("\"");
    for c in text.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{c}' => out.push_str("\\f"),
            '\u{8}' => out.push_str("\\b"),
            c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// Every special byte at every position of strings longer than one scan word,
/// next to bytes that look alike to a word-wide test (0x20, 0x21, 0x5b, 0xdc, DEL).
#[test]
fn json_escaping_at_every_position() {
    let specials = ['"', '\\', '\n', '\u{0}', '\u{1f}', '\u{c}'];
    let fillers = ["a", " ", "!", "[", "\u{7f}", "é", "ü"];
    for filler in fillers {
        for len in 0..70 {
            let base: String = filler.repeat(len);
            assert_eq!(s(|o| push_json_str(o, &base)), json_reference(&base));
            for special in specials {
                for pos in 0..=base.chars().count() {
                    let mut text: String = base.chars().take(pos).collect();
                    text.push(special);
                    text.extend(base.chars().skip(pos));
                    text.push(special);
                    assert_eq!(
                        s(|o| push_json_str(o, &text)),
                        json_reference(&text),
                        "{text:?}"
                    );
                }
            }
        }
    }
}

/// Everything the appender writes equals what the `push_*` functions write, from
/// an empty vector, after existing bytes, and at every capacity around the size
/// of the result (so that growing happens at every possible piece).
#[test]
fn appender_matches_push_functions() {
    // Past 128 bytes, where a copy is a `memcpy` (shorter under Miri, a thousand times
    // slower: `appender_copies_every_length` goes through every length).
    let long = "x".repeat(if cfg!(miri) { 130 } else { 300 });
    let strings = [
        "",
        "a",
        "ab",
        "abc",
        "main",
        "index",
        "cache_nr",
        "benches/peers.rs",
        "count/untracked!",
        "exactly-seventeen",
        "tab\there",
        "q\"uote",
        "back\\slash",
        "ctl\u{1}\u{1f}",
        "é ü \u{7f} 日本",
        "20261121T232137.816920Z-H0a7c9cdf-P00002a1e",
        &long,
    ];
    let numbers = [
        0u64,
        1,
        9,
        10,
        99,
        100,
        999,
        1000,
        9999,
        10_000,
        123_456_789,
        u64::MAX,
    ];
    let signed = [0i64, 1, -1, -9, 9999, -10_000, i64::MIN, i64::MAX];
    let micros = [
        0u64,
        410,
        999_999,
        1_000_000,
        9_999_999,
        10_000_000,
        u64::MAX,
    ];
    // The expected bytes, and where each kind of piece first starts in them past a
    // string of every kind (the capacities Miri tries).
    let (expected, firsts) = {
        let mut out = b"head".to_vec();
        let mut firsts = Vec::new();
        for text in strings {
            firsts.push(out.len());
            out.extend_from_slice(b",\"k\":");
            push_json_str(&mut out, text);
            out.push(b';');
            firsts.push(out.len());
            push_json_str(&mut out, text);
            firsts.push(out.len());
            out.extend_from_slice(text.as_bytes());
        }
        for n in numbers {
            firsts.push(out.len());
            out.extend_from_slice(b",\"n\":");
            push_u64(&mut out, n);
            firsts.push(out.len());
            push_u64(&mut out, n);
        }
        for n in signed {
            firsts.push(out.len());
            out.extend_from_slice(b",\"i\":");
            push_i64(&mut out, n);
            firsts.push(out.len());
            push_i64(&mut out, n);
        }
        for m in micros {
            firsts.push(out.len());
            out.extend_from_slice(b",\"t\":");
            push_seconds(&mut out, m);
            firsts.push(out.len());
            push_seconds(&mut out, m);
        }
        firsts.push(out.len());
        out.extend_from_slice(b"[tail]\n");
        (out, firsts)
    };
    let write = |out: &mut Vec<u8>| {
        let w = &mut Appender::new(out);
        for text in strings {
            w.put_json_field_then(b",\"k\":", text, b";");
            w.put_json_str(text);
            w.put(text.as_bytes());
        }
        for n in numbers {
            w.put_u64_after(b",\"n\":", n);
            w.put_u64(n);
        }
        for n in signed {
            w.put_i64_after(b",\"i\":", n);
            w.put_i64(n);
        }
        for m in micros {
            w.put_seconds_after(b",\"t\":", m);
            w.put_seconds(m);
        }
        w.with_vec(|out| out.push(b'['));
        w.put_all([b"tail", b"]", b"\n"]);
    };
    // Every capacity around the result's size. Under Miri (a thousand times slower)
    // one capacity per kind of piece, so that growth still falls in a piece of every
    // kind: the three string pieces of "", of a string with escapes and of the long one,
    // the two pieces of a number, a signed number and a time each, the tail; and room
    // for all of it.
    let capacities: Vec<usize> = if cfg!(miri) {
        let strings_end = 3 * strings.len();
        let (signed_at, micros_at) = (
            strings_end + 2 * numbers.len(),
            strings_end + 2 * (numbers.len() + signed.len()),
        );
        let escaped = strings.iter().position(|s| s.contains('"')).unwrap();
        [0, escaped, strings.len() - 1]
            .into_iter()
            .flat_map(|string| 3 * string..3 * string + 3)
            .chain([strings_end + 6, strings_end + 7])
            .chain([signed_at + 2, signed_at + 3])
            .chain([micros_at + 2, micros_at + 3])
            .chain([firsts.len() - 1])
            .map(|piece| firsts[piece] + 1)
            .chain([expected.len()])
            .collect()
    } else {
        (0..16)
            .chain(expected.len() - 600..expected.len() + 2)
            .collect()
    };
    for capacity in capacities {
        let mut out = Vec::with_capacity(capacity);
        out.extend_from_slice(b"head");
        write(&mut out);
        assert_eq!(
            String::from_utf8_lossy(&out),
            String::from_utf8_lossy(&expected),
            "capacity {capacity}"
        );
    }
    let mut out = Vec::new();
    let w = &mut Appender::new(&mut out);
    assert!(w.is_empty());
    w.reserve(100);
    w.put_byte(b'x');
    assert_eq!(w.len(), 1);
}

/// A panic inside `with_vec`, after the vector has grown elsewhere, leaves the
/// vector as `with_vec` left it.
#[test]
fn appender_survives_a_panic_in_with_vec() {
    let mut out = b"start".to_vec();
    let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        let w = &mut Appender::new(&mut out);
        w.put(b"-one");
        w.with_vec(|vec| {
            vec.extend_from_slice(&[b'x'; 4096]);
            panic!("inside");
        });
    }));
    assert!(result.is_err());
    assert_eq!(out.len(), 5 + 4 + 4096);
    assert!(out.starts_with(b"start-one"));
}

/// Every length up to two blocks and beyond, through the word-sized copies.
#[test]
fn appender_copies_every_length() {
    let source: Vec<u8> = (0..300).map(|i| b'a' + (i % 26) as u8).collect();
    for len in 0..source.len() {
        for start in [0, 1, 7] {
            let mut out = vec![b'-'; start];
            Appender::new(&mut out).put(&source[..len]);
            assert_eq!(&out[..start], &vec![b'-'; start][..]);
            assert_eq!(&out[start..], &source[..len], "{len}");
        }
    }
}

/// Fixed-size arrays, alone and before a slice of every length, whatever room the
/// vector starts with (none, exactly enough, one byte short).
#[test]
fn appender_puts_arrays() {
    let source: Vec<u8> = (0..100).map(|i| b'A' + (i % 26) as u8).collect();
    for len in 0..source.len() {
        let want: Vec<u8> = [&b"pre"[..], &[1, 2, 3, 4], &source[..len], &[9; 9]].concat();
        for spare in [0, want.len() - 3, want.len() - 4, want.len()] {
            let mut out = Vec::with_capacity(spare);
            out.extend_from_slice(b"pre");
            {
                let w = &mut Appender::new(&mut out);
                w.put_array_then([1, 2, 3, 4], &source[..len]);
                w.put_array([9u8; 9]);
            }
            assert_eq!(out, want, "{len} {spare}");
        }
    }
}

/// The SIMD block test, the portable one and the byte-wise one agree for every
/// byte value at every position of a block.
#[test]
fn block_tests_agree() {
    for byte in 0..=255u8 {
        for pos in 0..16 {
            for filler in [b'a', b' ', 0x7f, 0xc3, 0x21, 0x5d] {
                let mut block = [filler; 16];
                block[pos] = byte;
                let expected = block.iter().any(|&b| needs_escape(b));
                assert_eq!(block_needs_escape(block), expected, "{byte} {pos}");
                assert_eq!(block_needs_escape_portable(block), expected, "{byte} {pos}");
            }
        }
    }
}

#[test]
fn dates() {
    // 2026-11-21T23:21:37.816991Z
    let wall = 1_795_303_297_816_991;
    assert_eq!(
        s(|o| push_utc_datetime(o, wall)),
        "2026-11-21T23:21:37.816991Z"
    );
    assert_eq!(s(|o| push_sid_datetime(o, wall)), "20261121T232137.816991Z");
    assert_eq!(s(|o| push_time_of_day(o, wall, 0)), "23:21:37.816991");
    assert_eq!(s(|o| push_time_of_day(o, wall, 3600)), "00:21:37.816991");
    assert_eq!(
        s(|o| push_utc_datetime(o, 951_782_400_000_000)),
        "2000-02-29T00:00:00.000000Z"
    );
}

/// The per-thread second cache must never hand out a stale second: alternate
/// between seconds, cross minute, day and year boundaries, and go before 1970.
#[test]
fn cached_dates_match_the_uncached_ones() {
    let uncached = |wall: i64| s(|o| push_datetime(o, wall, true));
    let times = [
        1_795_303_297_816_991,
        1_795_303_297_000_000,
        1_795_303_298_000_001,
        1_795_303_297_999_999,
        1_798_761_599_999_999, // 2026-12-31T23:59:59.999999Z
        1_798_761_600_000_000,
        -1,
        -1_000_000,
        0,
    ];
    for _ in 0..2 {
        for wall in times {
            assert_eq!(s(|o| push_utc_datetime(o, wall)), uncached(wall), "{wall}");
        }
    }
    assert_eq!(
        s(|o| push_utc_datetime(o, -1)),
        "1969-12-31T23:59:59.999999Z"
    );
    // The far ends of the range: the last second is never kept (its range test
    // would wrap around to the first one).
    for _ in 0..2 {
        for wall in [i64::MAX, i64::MIN, i64::MIN + 5, i64::MAX - 5, i64::MAX] {
            assert_eq!(s(|o| push_utc_datetime(o, wall)), uncached(wall), "{wall}");
        }
    }
    // A new thread starts with the epoch's second in its cache.
    std::thread::spawn(move || {
        for wall in [999_999, 0, 1_000_000, -1, 0] {
            assert_eq!(s(|o| push_utc_datetime(o, wall)), uncached(wall), "{wall}");
        }
    })
    .join()
    .unwrap();
}

#[test]
fn time_of_day_matches_the_calendar_breakdown() {
    for wall in [
        1_795_303_297_816_991_i64,
        -1,
        0,
        86_399_999_999,
        3_600_000_000,
    ] {
        for offset in [0, 3600, -3600, 19_800, -36_000] {
            let t = DateTime::from_micros(wall, offset);
            let expected = format!(
                "{:02}:{:02}:{:02}.{:06}",
                t.hour, t.minute, t.second, t.micros
            );
            assert_eq!(s(|o| push_time_of_day(o, wall, offset)), expected);
        }
    }
}

/// A JSON field is written as `push_json_str` writes it at every length to 40, with a
/// byte to escape (or a harmless one) at every position, whatever the room left (the
/// text is tested where it is copied, and a text that needs escaping is written again).
#[test]
fn json_fields_read_the_same_at_every_length_and_escape() {
    let mut texts = vec!["é/ü\u{7f}~".to_owned()];
    // Under Miri (which runs this some thousand times slower) the lengths around the
    // 16-byte blocks, and escapes at both ends and the middle: the same paths, fewer texts.
    let lengths: Vec<usize> = if cfg!(miri) {
        vec![0, 1, 2, 15, 16, 17, 31, 32, 33, 39]
    } else {
        (0..40).collect()
    };
    for len in lengths {
        let base = "abcdefghijklmnopqrstuvwxyz0123456789ABCD"[..len].to_owned();
        let positions: Vec<usize> = if cfg!(miri) && len > 2 {
            vec![0, len / 2, len - 1]
        } else {
            (0..len).collect()
        };
        for pos in positions {
            for byte in ['"', '\\', '\u{0}', '\u{1f}', '\n', ' ', '\u{7f}'] {
                let mut text = base.clone();
                text.replace_range(pos..pos + 1, &byte.to_string());
                texts.push(text);
            }
        }
        texts.push(base);
    }
    for text in &texts {
        let mut expected = b"x,\"k\":".to_vec();
        push_json_str(&mut expected, text);
        expected.extend_from_slice(b"}\n");
        for capacity in [0, 5, expected.len() - 1, expected.len(), 200] {
            let mut out = Vec::with_capacity(capacity);
            out.push(b'x');
            Appender::new(&mut out).put_json_field_then(b",\"k\":", text, b"}\n");
            assert_eq!(
                String::from_utf8_lossy(&out),
                String::from_utf8_lossy(&expected),
                "{text:?} {capacity}"
            );
        }
    }
}

/// Texts that need no escaping take the fast path, at every length and whatever room
/// the vector has; a text that needs escaping falls back (the bytes are the same
/// either way, so the count is what shows the path).
#[test]
fn plain_json_fields_take_the_fast_path() {
    let hits = || super::appender::PLAIN_JSON_FIELDS.with(std::cell::Cell::get);
    let before = hits();
    let mut plain = 0;
    for len in 0..40 {
        let text = "abcdefghij".repeat(4)[..len].to_owned();
        for capacity in [0, len + 8, 200] {
            let mut out = Vec::with_capacity(capacity);
            Appender::new(&mut out).put_json_field_then(b",\"k\":", &text, b"}");
            plain += 1;
            assert_eq!(out, format!(",\"k\":\"{text}\"}}").into_bytes());
        }
    }
    assert_eq!(hits() - before, plain);
    for text in ["q\"uote", "tab\tin a longer text than sixteen", "\u{1}"] {
        let mut out = Vec::new();
        Appender::new(&mut out).put_json_field(b"", text);
        let mut expected = Vec::new();
        push_json_str(&mut expected, text);
        assert_eq!(out, expected);
    }
    assert_eq!(hits() - before, plain, "an escaped text took the fast path");
}

/// `put_long` appends what `put` does at every length to 300, at every starting room
/// (the vector grown when it must), and writes nothing past its piece.
#[test]
fn put_long_appends_every_length() {
    let src: Vec<u8> = (0..300u32).map(|i| (i * 13 + 5) as u8).collect();
    for n in 0..=src.len() {
        for capacity in [0, 4, n, n + 3, 400] {
            let mut out = Vec::with_capacity(capacity);
            out.extend_from_slice(b"ab");
            {
                let w = &mut Appender::new(&mut out);
                w.put_long(&src[..n]);
                w.put(b"|");
            }
            let mut expected = b"ab".to_vec();
            expected.extend_from_slice(&src[..n]);
            expected.push(b'|');
            assert_eq!(out, expected, "{n} {capacity}");
        }
    }
}
