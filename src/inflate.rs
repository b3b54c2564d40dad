//! A small, bounded gzip (RFC 1952) and DEFLATE (RFC 1951) decoder, written from the
//! RFCs for one job: reading helm's release records (base64 of gzip of JSON, in the
//! release Secrets) so the addon engine can see a release's manifest and values
//! without running `helm get`. Stored, fixed-Huffman and dynamic-Huffman blocks;
//! the gzip header's optional fields, the CRC-32 and length trailer, and several
//! members in a row. A release Secret is input from the namespace, so every
//! malformed stream is an error (never a panic), and output beyond the caller's cap
//! is refused before it is written. Canonical Huffman codes are decoded one bit at
//! a time from per-length counts, which is slow next to table decoders but small and
//! plainly bounded: a few MB/s is far more than a release record needs.

use std::fmt;

/// Why a stream could not be decoded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum InflateError {
    /// The input ended inside the stream.
    Truncated,
    /// The output would exceed the cap given by the caller.
    TooLarge(usize),
    /// The gzip header is not one we read (magic, method, reserved flags).
    BadHeader(&'static str),
    /// A malformed DEFLATE stream.
    Corrupt(&'static str),
    /// The trailer's CRC-32 or length does not match the output.
    BadTrailer(&'static str),
}

impl fmt::Display for InflateError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            InflateError::Truncated => write!(f, "gzip stream is truncated"),
            InflateError::TooLarge(cap) => write!(f, "gzip output exceeds {cap} bytes"),
            InflateError::BadHeader(why) => write!(f, "bad gzip header: {why}"),
            InflateError::Corrupt(why) => write!(f, "corrupt deflate data: {why}"),
            InflateError::BadTrailer(why) => write!(f, "bad gzip trailer: {why}"),
        }
    }
}

type Result<T> = std::result::Result<T, InflateError>;

/// Decodes a gzip file (one or more members) into at most `cap` bytes.
pub(crate) fn gunzip(data: &[u8], cap: usize) -> Result<Vec<u8>> {
    let mut out = Vec::new();
    let mut at = 0;
    loop {
        let start = out.len();
        at = header_end(data, at)?;
        let mut bits = Bits::new(data, at);
        inflate_into(&mut bits, &mut out, cap)?;
        at = bits.byte_pos();
        let trailer = data.get(at..at + 8).ok_or(InflateError::Truncated)?;
        let word = |i: usize| {
            u32::from_le_bytes([trailer[i], trailer[i + 1], trailer[i + 2], trailer[i + 3]])
        };
        if word(0) != crc32(&out[start..]) {
            return Err(InflateError::BadTrailer("CRC-32 mismatch"));
        }
        if word(4) != (out.len() - start) as u32 {
            return Err(InflateError::BadTrailer("length mismatch"));
        }
        at += 8;
        if at == data.len() {
            return Ok(out);
        }
    }
}

/// Decodes a raw DEFLATE stream into at most `cap` bytes; bytes after its last
/// block are ignored.
pub(crate) fn inflate(data: &[u8], cap: usize) -> Result<Vec<u8>> {
    let mut out = Vec::new();
    inflate_into(&mut Bits::new(data, 0), &mut out, cap)?;
    Ok(out)
}

/// Where the DEFLATE data of the gzip member at `at` starts.
fn header_end(data: &[u8], at: usize) -> Result<usize> {
    let head = data.get(at..at + 10).ok_or(InflateError::Truncated)?;
    if head[0] != 0x1f || head[1] != 0x8b {
        return Err(InflateError::BadHeader("not gzip (magic)"));
    }
    if head[2] != 8 {
        return Err(InflateError::BadHeader("compression method is not deflate"));
    }
    let flags = head[3];
    if flags & 0xe0 != 0 {
        return Err(InflateError::BadHeader("reserved flag set"));
    }
    let mut pos = at + 10;
    if flags & 0x04 != 0 {
        let len = data.get(pos..pos + 2).ok_or(InflateError::Truncated)?;
        pos += 2 + u16::from_le_bytes([len[0], len[1]]) as usize;
    }
    for flag in [0x08, 0x10] {
        if flags & flag != 0 {
            let rest = data.get(pos..).ok_or(InflateError::Truncated)?;
            let nul = rest.iter().position(|&b| b == 0);
            pos += nul.ok_or(InflateError::Truncated)? + 1;
        }
    }
    if flags & 0x02 != 0 {
        pos += 2;
    }
    if pos > data.len() {
        return Err(InflateError::Truncated);
    }
    Ok(pos)
}

/// Reads bits least significant first, as DEFLATE packs them.
struct Bits<'a> {
    data: &'a [u8],
    pos: usize,
    buf: u32,
    count: u32,
}

impl<'a> Bits<'a> {
    fn new(data: &'a [u8], pos: usize) -> Bits<'a> {
        Bits {
            data,
            pos,
            buf: 0,
            count: 0,
        }
    }

    /// The next `n` (at most 16) bits as a number.
    fn take(&mut self, n: u32) -> Result<u32> {
        while self.count < n {
            let byte = *self.data.get(self.pos).ok_or(InflateError::Truncated)?;
            self.pos += 1;
            self.buf |= u32::from(byte) << self.count;
            self.count += 8;
        }
        let value = self.buf & ((1u32 << n) - 1);
        self.buf >>= n;
        self.count -= n;
        Ok(value)
    }

    /// Drops the bits left in the current byte (before a stored block).
    fn align(&mut self) {
        self.buf = 0;
        self.count = 0;
    }

    /// The position of the first byte not yet (even partly) consumed.
    fn byte_pos(&self) -> usize {
        self.pos
    }
}

/// A canonical Huffman code: how many codes of each length, and the symbols in
/// code order.
struct Huffman {
    counts: [u16; 16],
    symbols: Vec<u16>,
}

impl Huffman {
    /// The code for symbol lengths `lengths` (0 = unused). An over-subscribed set is
    /// an error; an incomplete one is accepted and fails only if an unused code is read.
    fn new(lengths: &[u8]) -> Result<Huffman> {
        let mut counts = [0u16; 16];
        for &len in lengths {
            counts[usize::from(len & 15)] += 1;
        }
        let mut left: i32 = 1;
        for &count in &counts[1..] {
            left = left * 2 - i32::from(count);
            if left < 0 {
                return Err(InflateError::Corrupt("over-subscribed Huffman code"));
            }
        }
        let mut offsets = [0u16; 16];
        for len in 1..15 {
            offsets[len + 1] = offsets[len] + counts[len];
        }
        let mut symbols = vec![0u16; lengths.len()];
        for (symbol, &len) in lengths.iter().enumerate() {
            if len != 0 {
                let slot = &mut offsets[usize::from(len & 15)];
                symbols[usize::from(*slot)] = symbol as u16;
                *slot += 1;
            }
        }
        Ok(Huffman { counts, symbols })
    }

    /// The next symbol, reading its code bit by bit.
    fn decode(&self, bits: &mut Bits) -> Result<u16> {
        let (mut code, mut first, mut index) = (0i32, 0i32, 0i32);
        for len in 1..16 {
            code |= bits.take(1)? as i32;
            let count = i32::from(self.counts[len]);
            if code - first < count {
                let at = (index + code - first) as usize;
                return self
                    .symbols
                    .get(at)
                    .copied()
                    .ok_or(InflateError::Corrupt("bad Huffman code"));
            }
            index += count;
            first = (first + count) << 1;
            code <<= 1;
        }
        Err(InflateError::Corrupt("unused Huffman code"))
    }
}

/// Decodes blocks until the final one.
fn inflate_into(bits: &mut Bits, out: &mut Vec<u8>, cap: usize) -> Result<()> {
    loop {
        let last = bits.take(1)? == 1;
        match bits.take(2)? {
            0 => stored(bits, out, cap)?,
            1 => {
                let (lit, dist) = fixed_codes()?;
                codes(bits, out, cap, &lit, &dist)?;
            }
            2 => {
                let (lit, dist) = dynamic_codes(bits)?;
                codes(bits, out, cap, &lit, &dist)?;
            }
            _ => return Err(InflateError::Corrupt("reserved block type")),
        }
        if last {
            return Ok(());
        }
    }
}

/// A stored (uncompressed) block.
fn stored(bits: &mut Bits, out: &mut Vec<u8>, cap: usize) -> Result<()> {
    bits.align();
    let at = bits.pos;
    let head = bits.data.get(at..at + 4).ok_or(InflateError::Truncated)?;
    let len = u16::from_le_bytes([head[0], head[1]]);
    let nlen = u16::from_le_bytes([head[2], head[3]]);
    if len != !nlen {
        return Err(InflateError::Corrupt("stored block length check"));
    }
    let len = usize::from(len);
    let body = (bits.data)
        .get(at + 4..at + 4 + len)
        .ok_or(InflateError::Truncated)?;
    room(out, len, cap)?;
    out.extend_from_slice(body);
    bits.pos = at + 4 + len;
    Ok(())
}

/// Fails when `n` more bytes would take the output past `cap`.
fn room(out: &[u8], n: usize, cap: usize) -> Result<()> {
    match out.len().checked_add(n) {
        Some(total) if total <= cap => Ok(()),
        _ => Err(InflateError::TooLarge(cap)),
    }
}

/// The fixed codes of RFC 1951 §3.2.6.
fn fixed_codes() -> Result<(Huffman, Huffman)> {
    let mut lengths = [0u8; 288];
    for (i, len) in lengths.iter_mut().enumerate() {
        *len = match i {
            0..=143 => 8,
            144..=255 => 9,
            256..=279 => 7,
            _ => 8,
        };
    }
    Ok((Huffman::new(&lengths)?, Huffman::new(&[5u8; 30])?))
}

/// The order code length code lengths come in (RFC 1951 §3.2.7).
const CLEN_ORDER: [usize; 19] = [
    16, 17, 18, 0, 8, 7, 9, 6, 10, 5, 11, 4, 12, 3, 13, 2, 14, 1, 15,
];

/// The codes of a dynamic block, read from its header.
fn dynamic_codes(bits: &mut Bits) -> Result<(Huffman, Huffman)> {
    let nlen = bits.take(5)? as usize + 257;
    let ndist = bits.take(5)? as usize + 1;
    let ncode = bits.take(4)? as usize + 4;
    if nlen > 286 || ndist > 30 {
        return Err(InflateError::Corrupt("too many length or distance codes"));
    }
    let mut clens = [0u8; 19];
    for &i in &CLEN_ORDER[..ncode] {
        clens[i] = bits.take(3)? as u8;
    }
    let clen = Huffman::new(&clens)?;
    let mut lengths = [0u8; 316];
    let mut n = 0;
    while n < nlen + ndist {
        let symbol = clen.decode(bits)?;
        let (value, repeat) = match symbol {
            0..=15 => (symbol as u8, 1),
            16 => {
                let prev = n.checked_sub(1).map(|p| lengths[p]);
                let prev = prev.ok_or(InflateError::Corrupt("repeat with no previous length"))?;
                (prev, 3 + bits.take(2)? as usize)
            }
            17 => (0, 3 + bits.take(3)? as usize),
            _ => (0, 11 + bits.take(7)? as usize),
        };
        if n + repeat > nlen + ndist {
            return Err(InflateError::Corrupt("code lengths overrun"));
        }
        lengths[n..n + repeat].fill(value);
        n += repeat;
    }
    if lengths[256] == 0 {
        return Err(InflateError::Corrupt("no end-of-block code"));
    }
    let lit = Huffman::new(&lengths[..nlen])?;
    let dist = Huffman::new(&lengths[nlen..nlen + ndist])?;
    Ok((lit, dist))
}

const LEN_BASE: [u16; 29] = [
    3, 4, 5, 6, 7, 8, 9, 10, 11, 13, 15, 17, 19, 23, 27, 31, 35, 43, 51, 59, 67, 83, 99, 115, 131,
    163, 195, 227, 258,
];
const LEN_EXTRA: [u8; 29] = [
    0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3, 4, 4, 4, 4, 5, 5, 5, 5, 0,
];
const DIST_BASE: [u16; 30] = [
    1, 2, 3, 4, 5, 7, 9, 13, 17, 25, 33, 49, 65, 97, 129, 193, 257, 385, 513, 769, 1025, 1537,
    2049, 3073, 4097, 6145, 8193, 12289, 16385, 24577,
];
const DIST_EXTRA: [u8; 30] = [
    0, 0, 0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 6, 6, 7, 7, 8, 8, 9, 9, 10, 10, 11, 11, 12, 12, 13,
    13,
];

/// The literals and back-references of one Huffman block, up to its end code.
fn codes(
    bits: &mut Bits,
    out: &mut Vec<u8>,
    cap: usize,
    lit: &Huffman,
    dist: &Huffman,
) -> Result<()> {
    loop {
        let symbol = usize::from(lit.decode(bits)?);
        if symbol < 256 {
            room(out, 1, cap)?;
            out.push(symbol as u8);
            continue;
        }
        if symbol == 256 {
            return Ok(());
        }
        let i = symbol - 257;
        let (Some(&base), Some(&extra)) = (LEN_BASE.get(i), LEN_EXTRA.get(i)) else {
            return Err(InflateError::Corrupt("invalid length symbol"));
        };
        let len = usize::from(base) + bits.take(u32::from(extra))? as usize;
        let d = usize::from(dist.decode(bits)?);
        let (Some(&base), Some(&extra)) = (DIST_BASE.get(d), DIST_EXTRA.get(d)) else {
            return Err(InflateError::Corrupt("invalid distance symbol"));
        };
        let back = usize::from(base) + bits.take(u32::from(extra))? as usize;
        if back > out.len() {
            return Err(InflateError::Corrupt("distance before the start of output"));
        }
        room(out, len, cap)?;
        let from = out.len() - back;
        for k in 0..len {
            let byte = out[from + k];
            out.push(byte);
        }
    }
}

/// The CRC-32 table (polynomial 0xEDB88320, reflected), built at compile time.
const CRC_TABLE: [u32; 256] = {
    let mut table = [0u32; 256];
    let mut n = 0;
    while n < 256 {
        let mut c = n as u32;
        let mut k = 0;
        while k < 8 {
            c = if c & 1 != 0 {
                0xedb8_8320 ^ (c >> 1)
            } else {
                c >> 1
            };
            k += 1;
        }
        table[n] = c;
        n += 1;
    }
    table
};

/// The CRC-32 of gzip (RFC 1952 §8).
pub(crate) fn crc32(data: &[u8]) -> u32 {
    let mut c = !0u32;
    for &b in data {
        c = CRC_TABLE[((c ^ u32::from(b)) & 0xff) as usize] ^ (c >> 8);
    }
    !c
}

#[cfg(test)]
#[path = "inflate_tests.rs"]
mod tests;
