//! Tests of the gzip/DEFLATE decoder against streams made by real tools: `gzip -9`
//! (with a file name in the header) and `gzip -1 -n` of a generated sample (dynamic,
//! stored and long-match blocks), a tiny fixed-Huffman stream, and the release
//! records helm 4.1 and helm 3.17 wrote into their Secrets; then truncated,
//! corrupted and oversized inputs, which must fail cleanly.

use super::*;

const SAMPLE_9: &[u8] = include_bytes!("testdata/inflate/sample-9.gz");
const SAMPLE_1: &[u8] = include_bytes!("testdata/inflate/sample-1.gz");
const HELM4: &[u8] = include_bytes!("testdata/inflate/helm4-release.gz");
const HELM3: &[u8] = include_bytes!("testdata/inflate/helm3-release.gz");
/// `printf 'hello hello hello\n' | gzip -9 -n`: one fixed-Huffman block.
const HELLO: &[u8] = &[
    0x1f, 0x8b, 0x08, 0x00, 0x00, 0x00, 0x00, 0x00, 0x02, 0x03, 0xcb, 0x48, 0xcd, 0xc9, 0xc9, 0x57,
    0xc8, 0x40, 0x90, 0x5c, 0x00, 0x3b, 0x7c, 0x8a, 0xdf, 0x12, 0x00, 0x00, 0x00,
];
const CAP: usize = 64 << 20;

/// The sample the `.gz` fixtures were made from: 3000 words from a small set, 20000
/// pseudo-random bytes, then 5000 `a`s (the same generator made the fixtures).
fn sample() -> Vec<u8> {
    let mut x: u64 = 0x2545_f491_4f6c_dd1d;
    let mut next = || {
        x = x
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        x
    };
    let words: [&[u8]; 16] = [
        b"apiVersion",
        b"kind",
        b"ConfigMap",
        b"metadata",
        b"name",
        b"namespace",
        b"labels",
        b"helm",
        b"release",
        b"data",
        b"spec",
        b"replicas",
        b"image",
        b"port",
        b"  ",
        b"- ",
    ];
    let mut out = Vec::new();
    for _ in 0..3000 {
        out.extend_from_slice(words[((next() >> 33) % 16) as usize]);
        out.push(if next() >> 60 == 0 { b'\n' } else { b' ' });
    }
    for _ in 0..20000 {
        out.push((next() >> 56) as u8);
    }
    out.extend(std::iter::repeat_n(b'a', 5000));
    out
}

#[test]
fn decodes_what_gzip_wrote_at_both_levels() {
    let expected = sample();
    assert_eq!(expected.len(), 44769);
    assert_eq!(gunzip(SAMPLE_9, CAP).unwrap(), expected);
    assert_eq!(gunzip(SAMPLE_1, CAP).unwrap(), expected);
    assert_eq!(gunzip(HELLO, CAP).unwrap(), b"hello hello hello\n");
}

#[test]
fn decodes_the_release_records_helm_3_and_4_stored() {
    for (gz, len, crc, key) in [
        (HELM4, 1049, 0x4edc_6351, "apply_method"),
        (HELM3, 911, 0x3f1c_c7e9, "config"),
    ] {
        let json = gunzip(gz, CAP).unwrap();
        assert_eq!((json.len(), crc32(&json)), (len, crc));
        let release: serde_json::Value = serde_json::from_slice(&json).unwrap();
        assert_eq!(release["config"], serde_json::json!({"a": "x"}));
        assert!(release.get(key).is_some(), "{release}");
        let manifest = release["manifest"].as_str().unwrap();
        assert!(manifest.contains("kind: ConfigMap"), "{manifest}");
        assert!(manifest.contains("kind: Service"), "{manifest}");
    }
}

#[test]
fn two_members_in_a_row_are_one_output() {
    let mut both = HELLO.to_vec();
    both.extend_from_slice(HELLO);
    assert_eq!(
        gunzip(&both, CAP).unwrap(),
        b"hello hello hello\nhello hello hello\n"
    );
}

#[test]
fn every_truncation_fails_cleanly() {
    for gz in [SAMPLE_9, SAMPLE_1, HELM4, HELLO] {
        for cut in (0..gz.len()).step_by(97).chain([gz.len() - 1]) {
            assert!(gunzip(&gz[..cut], CAP).is_err(), "cut at {cut}");
        }
    }
}

#[test]
fn a_corrupt_byte_is_an_error_never_a_panic() {
    for gz in [HELM4, HELM3, HELLO] {
        let good = gunzip(gz, CAP).unwrap();
        let mut errors = 0;
        for at in 0..gz.len() {
            for flip in [0x01u8, 0x80, 0xff] {
                let mut bad = gz.to_vec();
                bad[at] ^= flip;
                // Header fields we do not check (mtime, OS, FTEXT) and padding bits
                // may change freely; any other change is caught (the CRC-32 at the
                // latest), so a wrong output never comes back.
                match gunzip(&bad, CAP) {
                    Ok(out) => assert_eq!(out, good, "byte {at} ^ {flip:#x}"),
                    Err(_) => errors += 1,
                }
            }
        }
        assert!(
            errors > 3 * (gz.len() - 10) - 30,
            "{errors} of {}",
            gz.len()
        );
    }
}

#[test]
fn output_beyond_the_cap_is_refused() {
    let expected = sample();
    let cap = expected.len() - 1;
    assert_eq!(gunzip(SAMPLE_9, cap), Err(InflateError::TooLarge(cap)));
    assert_eq!(gunzip(SAMPLE_9, expected.len()).unwrap(), expected);
    // A small stream that expands without end (a bomb) stops at the cap.
    let mut bomb = vec![0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 0];
    // Fixed block: literal 'a' then repeats of length 258 at distance 1, never ending.
    let mut body = BitWriter::default();
    body.put(0, 1); // not last
    body.put(1, 2); // fixed
    body.code(0x30 + u32::from(b'a'), 8); // literal 'a' (code 00110000 + 0x61)
    for _ in 0..20_000 {
        body.code(0xc5, 8); // length 258 (symbol 285: 11000101)
        body.code(0, 5); // distance 1
    }
    bomb.extend_from_slice(&body.bytes);
    assert_eq!(gunzip(&bomb, 1 << 20), Err(InflateError::TooLarge(1 << 20)));
}

#[test]
fn malformed_headers_and_blocks_name_the_fault() {
    assert_eq!(gunzip(b"", CAP), Err(InflateError::Truncated));
    let mut bad = HELLO.to_vec();
    bad[0] = 0;
    assert!(matches!(gunzip(&bad, CAP), Err(InflateError::BadHeader(_))));
    let mut bad = HELLO.to_vec();
    bad[3] = 0x20;
    assert!(matches!(gunzip(&bad, CAP), Err(InflateError::BadHeader(_))));
    // Block type 3 is reserved.
    assert_eq!(
        inflate(&[0x07], CAP),
        Err(InflateError::Corrupt("reserved block type"))
    );
    // A stored block whose length check fails.
    assert_eq!(
        inflate(&[0x01, 0x05, 0x00, 0x00, 0x00], CAP),
        Err(InflateError::Corrupt("stored block length check"))
    );
    // A stored block: "hi".
    assert_eq!(
        inflate(&[0x01, 0x02, 0x00, 0xfd, 0xff, b'h', b'i'], CAP).unwrap(),
        b"hi"
    );
    // A back-reference before the start of the output.
    let mut body = BitWriter::default();
    body.put(1, 1);
    body.put(1, 2);
    body.code(0b0000001, 7); // symbol 257: length 3
    body.code(0, 5); // distance 1, with no output yet
    assert_eq!(
        inflate(&body.bytes, CAP),
        Err(InflateError::Corrupt("distance before the start of output"))
    );
}

#[test]
fn crc32_matches_the_standard_check_value() {
    assert_eq!(crc32(b"123456789"), 0xcbf4_3926);
    assert_eq!(crc32(b""), 0);
}

/// Packs bits as DEFLATE does: plain fields least significant bit first, Huffman
/// codes most significant bit first.
#[derive(Default)]
struct BitWriter {
    bytes: Vec<u8>,
    used: u32,
}

impl BitWriter {
    fn bit(&mut self, b: u32) {
        if self.used % 8 == 0 {
            self.bytes.push(0);
        }
        if b != 0 {
            let last = self.bytes.len() - 1;
            self.bytes[last] |= 1 << (self.used % 8);
        }
        self.used += 1;
    }

    fn put(&mut self, value: u32, n: u32) {
        for i in 0..n {
            self.bit((value >> i) & 1);
        }
    }

    fn code(&mut self, code: u32, n: u32) {
        for i in (0..n).rev() {
            self.bit((code >> i) & 1);
        }
    }
}
