//! Credential redaction in URLs, applied to `start`, `child_start`, `exec` and
//! `def_param` values unless `GIT_TRACE2_REDACT` turns it off.
//!
//! Only a string that begins with `https://` or `http://` is considered. In the part after
//! the scheme, the first `@` or `/` must be an `@`; within the text before it, everything
//! after the first `:` (the password) is replaced with `<REDACTED>`.

use std::borrow::Cow;
use std::sync::atomic::{AtomicBool, Ordering};

static ENABLED: AtomicBool = AtomicBool::new(true);

/// Turns redaction on or off for the whole process (on by default).
pub fn set_enabled(enabled: bool) {
    ENABLED.store(enabled, Ordering::Relaxed);
}

/// Whether redaction is on.
pub fn enabled() -> bool {
    ENABLED.load(Ordering::Relaxed)
}

/// `value` with the password of a leading http(s) URL replaced, when redaction is on.
pub fn redact(value: &str) -> Cow<'_, str> {
    if enabled() {
        redact_url(value)
    } else {
        Cow::Borrowed(value)
    }
}

/// `value` with the password of a leading http(s) URL replaced, whatever the setting.
pub fn redact_url(value: &str) -> Cow<'_, str> {
    let Some(rest_at) = ["https://", "http://"]
        .iter()
        .find(|scheme| value.starts_with(*scheme))
        .map(|scheme| scheme.len())
    else {
        return Cow::Borrowed(value);
    };
    let rest = &value[rest_at..];
    let Some(end) = rest.find(['@', '/']) else {
        return Cow::Borrowed(value);
    };
    if rest.as_bytes()[end] != b'@' {
        return Cow::Borrowed(value);
    }
    let Some(colon) = rest[..end].find(':') else {
        return Cow::Borrowed(value);
    };
    let keep = rest_at + colon + 1;
    let mut out = String::with_capacity(value.len() + 10);
    out.push_str(&value[..keep]);
    out.push_str("<REDACTED>");
    out.push_str(&rest[end..]);
    Cow::Owned(out)
}

#[cfg(test)]
mod tests {
    use super::redact_url;

    #[test]
    fn redacts_like_git() {
        let cases = [
            (
                "https://user:pa55@127.0.0.1:1/repo.git",
                "https://user:<REDACTED>@127.0.0.1:1/repo.git",
            ),
            ("https://a:b:c@h/x", "https://a:<REDACTED>@h/x"),
            ("https://:@h", "https://:<REDACTED>@h"),
            ("http://u:p@h", "http://u:<REDACTED>@h"),
            ("http://nopass@127.0.0.1/x", "http://nopass@127.0.0.1/x"),
            ("https://user@host:443/", "https://user@host:443/"),
            ("HTTPS://u:p@h", "HTTPS://u:p@h"),
            ("https://host:8080/p@x", "https://host:8080/p@x"),
            ("https://host", "https://host"),
            (
                "-c remote.origin.url=https://carol:pw2@example.org/r",
                "-c remote.origin.url=https://carol:pw2@example.org/r",
            ),
        ];
        for (input, expected) in cases {
            assert_eq!(redact_url(input), expected, "{input}");
        }
    }
}
