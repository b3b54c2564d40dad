//! FNV-1a, 128 bit: the one hash behind addon-operator's checksums (a release's
//! rendered manifest and chart files in `addon/helm.rs`, a values scope in
//! `addon/values/scope.rs`). Stable across runs and builds, which `std`'s hasher is
//! not; not cryptographic, and never used where that would matter.

/// An FNV-1a 128 hasher.
pub(crate) struct Fnv128(u128);

impl Fnv128 {
    const OFFSET: u128 = 0x6c62_272e_07bb_0142_62b8_2175_6295_c58d;
    const PRIME: u128 = 0x0000_0000_0100_0000_0000_0000_0000_013b;

    pub(crate) fn new() -> Fnv128 {
        Fnv128(Self::OFFSET)
    }

    /// Hashes `data` in.
    pub(crate) fn bytes(&mut self, data: &[u8]) {
        for b in data {
            self.0 ^= u128::from(*b);
            self.0 = self.0.wrapping_mul(Self::PRIME);
        }
    }

    /// A length-prefixed field, so ("ab","c") and ("a","bc") hash differently.
    pub(crate) fn field(&mut self, data: &[u8]) {
        self.bytes(&(data.len() as u64).to_le_bytes());
        self.bytes(data);
    }

    /// The hash as a number.
    pub(crate) fn finish(&self) -> u128 {
        self.0
    }

    /// The hash as 32 hex digits.
    pub(crate) fn hex(&self) -> String {
        format!("{:032x}", self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::Fnv128;

    #[test]
    fn matches_the_reference_vector() {
        let mut h = Fnv128::new();
        h.bytes(b"a");
        // FNV-1a 128 of "a" from the reference implementation.
        assert_eq!(h.hex(), "d228cb696f1a8caf78912b704e4a8964");
    }
}
