//! CRC32C header and data digests (RFC 7143 §13.1, RFC 3385; Castagnoli polynomial).
//! On the wire the 32-bit value is sent least significant byte first (§11.1, "the CRC is
//! ... transmitted in little-endian order" as by the reference examples in Appendix B.4).

/// CRC32C of `bytes` (hardware-accelerated by the `crc32c` crate where available).
pub fn crc32c(bytes: &[u8]) -> u32 {
    crc32c::crc32c(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// RFC 7143 Appendix B.4 test vectors.
    #[test]
    fn rfc_vectors() {
        assert_eq!(crc32c(&[0u8; 32]), 0x8a9136aa);
        assert_eq!(crc32c(&[0xffu8; 32]), 0x62a8ab43);
        let ascending: Vec<u8> = (0u8..32).collect();
        assert_eq!(crc32c(&ascending), 0x46dd794e);
        let descending: Vec<u8> = (0u8..32).rev().collect();
        assert_eq!(crc32c(&descending), 0x113fdb5c);
    }
}
