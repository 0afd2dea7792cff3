//! Shell-style quoting of arguments and fixed-width padding of columns.

/// Whether `byte` may stand unquoted in a shell-style quoted argument.
#[inline]
fn is_plain(byte: u8) -> bool {
    byte.is_ascii_alphanumeric()
        || matches!(
            byte,
            b'+' | b',' | b'-' | b'.' | b'/' | b':' | b'=' | b'@' | b'_' | b'^'
        )
}

/// Appends `arg` with git's shell-style quoting: verbatim when every byte is plain, else
/// inside single quotes with `'` written as `'\''` and `!` as `'\!'`; `''` when empty.
pub fn push_quoted(out: &mut Vec<u8>, arg: &str) {
    let bytes = arg.as_bytes();
    if !bytes.is_empty() && bytes.iter().all(|&b| is_plain(b)) {
        out.extend_from_slice(bytes);
        return;
    }
    out.push(b'\'');
    for &b in bytes {
        match b {
            b'\'' => out.extend_from_slice(b"'\\''"),
            b'!' => out.extend_from_slice(b"'\\!'"),
            _ => out.push(b),
        }
    }
    out.push(b'\'');
}

/// Appends every element quoted with [`push_quoted`](super::push_quoted), separated by single spaces.
pub fn push_quoted_list(out: &mut Vec<u8>, args: &[&str]) {
    for (i, arg) in args.iter().enumerate() {
        if i > 0 {
            out.push(b' ');
        }
        push_quoted(out, arg);
    }
}

/// Appends spaces until `out` is at least `len` bytes long.
#[inline]
pub fn pad_to(out: &mut Vec<u8>, len: usize) {
    if out.len() < len {
        out.resize(len, b' ');
    }
}

/// Appends `text` left-justified in at least `width` bytes (`%-Ns`); never truncates.
#[inline]
pub fn push_padded(out: &mut Vec<u8>, text: &str, width: usize) {
    let start = out.len();
    out.extend_from_slice(text.as_bytes());
    pad_to(out, start + width);
}

/// Appends `text` cut to `width` bytes and padded to exactly `width` (`%-N.Ns`). The cut
/// is byte-wise, as git's.
#[inline]
pub fn push_cut_padded(out: &mut Vec<u8>, text: &str, width: usize) {
    let bytes = text.as_bytes();
    let start = out.len();
    out.extend_from_slice(&bytes[..bytes.len().min(width)]);
    pad_to(out, start + width);
}
