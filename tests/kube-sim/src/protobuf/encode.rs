//! Encoding helpers that build protobuf bodies the way Go clients do; tests use
//! them to exercise the decoder over HTTP.

fn varint(mut x: u64, out: &mut Vec<u8>) {
    while x >= 0x80 {
        out.push((x as u8) | 0x80);
        x >>= 7;
    }
    out.push(x as u8);
}

/// A length-delimited field.
pub fn bytes_field(n: u64, data: &[u8], out: &mut Vec<u8>) {
    varint(n << 3 | 2, out);
    varint(data.len() as u64, out);
    out.extend_from_slice(data);
}

/// A varint field.
pub fn varint_field(n: u64, x: u64, out: &mut Vec<u8>) {
    varint(n << 3, out);
    varint(x, out);
}

/// A map<string,string> entry field.
pub fn map_entry(n: u64, k: &str, v: &[u8], out: &mut Vec<u8>) {
    let mut e = Vec::new();
    bytes_field(1, k.as_bytes(), &mut e);
    bytes_field(2, v, &mut e);
    bytes_field(n, &e, out);
}

/// Wraps a message in `k8s\0` + runtime.Unknown.
pub fn envelope(api_version: &str, kind: &str, raw: &[u8]) -> Vec<u8> {
    let mut tm = Vec::new();
    bytes_field(1, api_version.as_bytes(), &mut tm);
    bytes_field(2, kind.as_bytes(), &mut tm);
    let mut out = super::MAGIC.to_vec();
    bytes_field(1, &tm, &mut out);
    bytes_field(2, raw, &mut out);
    bytes_field(4, b"application/vnd.kubernetes.protobuf", &mut out);
    out
}
