//! The little of the protobuf wire format a Perfetto trace needs, written by hand: varints,
//! fixed64, length-delimited strings and nested messages, appended to a `Vec<u8>`.

/// Wire type of varints.
const VARINT: u32 = 0;
/// Wire type of 64-bit fixed values.
const FIXED64: u32 = 1;
/// Wire type of strings, bytes and nested messages.
const LEN: u32 = 2;

/// Appends `value` as a base-128 varint.
pub fn varint(buf: &mut Vec<u8>, mut value: u64) {
    while value >= 0x80 {
        buf.push(value as u8 | 0x80);
        value >>= 7;
    }
    buf.push(value as u8);
}

fn tag(buf: &mut Vec<u8>, field: u32, wire: u32) {
    varint(buf, u64::from(field << 3 | wire));
}

/// A `uint64`/`uint32`/`bool`/enum field.
pub fn uint(buf: &mut Vec<u8>, field: u32, value: u64) {
    tag(buf, field, VARINT);
    varint(buf, value);
}

/// An `int64`/`int32` field (negative values take ten bytes, as protobuf says).
pub fn int(buf: &mut Vec<u8>, field: u32, value: i64) {
    uint(buf, field, value as u64);
}

/// A `fixed64` field.
pub fn fixed64(buf: &mut Vec<u8>, field: u32, value: u64) {
    tag(buf, field, FIXED64);
    buf.extend_from_slice(&value.to_le_bytes());
}

/// A `double` field.
pub fn double(buf: &mut Vec<u8>, field: u32, value: f64) {
    fixed64(buf, field, value.to_bits());
}

/// A `string` or `bytes` field, or a message already encoded.
pub fn bytes(buf: &mut Vec<u8>, field: u32, value: &[u8]) {
    tag(buf, field, LEN);
    varint(buf, value.len() as u64);
    buf.extend_from_slice(value);
}

/// A `string` field.
pub fn string(buf: &mut Vec<u8>, field: u32, value: &str) {
    bytes(buf, field, value.as_bytes());
}

/// A nested message whose body `body` appends; its length is put in front once known (a copy
/// of the body within `buf`, which is small: one event's fields).
pub fn message(buf: &mut Vec<u8>, field: u32, body: impl FnOnce(&mut Vec<u8>)) {
    let start = buf.len();
    body(buf);
    let len = buf.len() - start;
    let mut header = Vec::with_capacity(8);
    tag(&mut header, field, LEN);
    varint(&mut header, len as u64);
    buf.splice(start..start, header);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn encodes_what_protobuf_specifies() {
        let mut buf = Vec::new();
        varint(&mut buf, 300);
        assert_eq!(buf, [0xac, 0x02]);
        buf.clear();
        uint(&mut buf, 1, 150);
        assert_eq!(buf, [0x08, 0x96, 0x01]);
        buf.clear();
        int(&mut buf, 2, -1);
        assert_eq!(buf.len(), 11);
        assert_eq!(buf[..2], [0x10, 0xff]);
        assert_eq!(buf[10], 0x01);
        buf.clear();
        string(&mut buf, 2, "testing");
        assert_eq!(buf, b"\x12\x07testing");
        buf.clear();
        message(&mut buf, 3, |b| uint(b, 1, 150));
        assert_eq!(buf, [0x1a, 0x03, 0x08, 0x96, 0x01]);
        buf.clear();
        fixed64(&mut buf, 47, 1);
        assert_eq!(buf, [0xf9, 0x02, 1, 0, 0, 0, 0, 0, 0, 0]);
    }
}
