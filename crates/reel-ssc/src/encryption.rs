//! Tape data encryption (SSC-4 §4.2.27 and §8.5): SECURITY PROTOCOL IN/OUT with the tape data
//! encryption security protocol (20h), as `stenc` and backup applications drive an LTO drive.
//!
//! The drive encrypts each record with AES-256-GCM (algorithm index 1, security algorithm
//! code 0001_0014h, the LTO algorithm) and keeps it in a *sealed form* on the cartridge
//! ([`reel_media::ObjectKind::EncryptedRecord`]): the key-associated data the application sent
//! (uKAD, aKAD: clear text, authenticated), a four-byte key check value, a random nonce, the
//! ciphertext and the tag. The key lives only in the drive's memory: never in the store, never
//! in a log, cleared on demount when asked (CKOD) and when reel stops (a power cycle). A
//! record written with a key reads back only with that key; without one the drive answers what
//! an LTO drive answers (DATA PROTECT, 74h/01h–04h).
//!
//! Sealed form (all integers big-endian):
//! `"RTE1" | algorithm index u8 | KAD count u8 | KADs (type u8, length u16, bytes) |
//! key check [4] | nonce [12] | ciphertext | tag [16]`; everything before the nonce is the
//! GCM associated data. The key check (BLAKE3 key derivation of the key, first 4 bytes) tells a
//! wrong key (74h/03h) from damaged data (74h/04h) without giving the key away.
//!
//! Not emulated, refused with INVALID FIELD IN PARAMETER LIST and listed in
//! docs/compatibility.md: LOCAL scope and LOCK, external (pre-encrypted) writes and RAW reads,
//! supplemental decryption keys, wrapped or encrypted key formats, clearing the key on
//! reservation loss or preemption, and application-supplied nonces.

use aes_gcm::aead::{AeadInOut, KeyInit};
use aes_gcm::{Aes256Gcm, Key, Nonce, Tag};
use reel_media::ObjectKind;
use reel_scsi::{Asc, Cdb, Sense, SenseKey};
use zeroize::Zeroizing;

/// SECURITY PROTOCOL 00h: security protocol information (SPC-4 §7.7.1).
const PROTOCOL_INFORMATION: u8 = 0x00;
/// SECURITY PROTOCOL 20h: tape data encryption (SSC-4 §8.5).
const PROTOCOL_TAPE_DATA_ENCRYPTION: u8 = 0x20;

const PAGE_IN_SUPPORT: u16 = 0x0000;
const PAGE_OUT_SUPPORT: u16 = 0x0001;
const PAGE_CAPABILITIES: u16 = 0x0010;
const PAGE_KEY_FORMATS: u16 = 0x0011;
const PAGE_MANAGEMENT_CAPABILITIES: u16 = 0x0012;
const PAGE_STATUS: u16 = 0x0020;
const PAGE_NEXT_BLOCK_STATUS: u16 = 0x0021;
/// The one SECURITY PROTOCOL OUT page: Set Data Encryption.
const PAGE_SET_DATA_ENCRYPTION: u16 = 0x0010;

const IN_PAGES: [u16; 7] = [
    PAGE_IN_SUPPORT,
    PAGE_OUT_SUPPORT,
    PAGE_CAPABILITIES,
    PAGE_KEY_FORMATS,
    PAGE_MANAGEMENT_CAPABILITIES,
    PAGE_STATUS,
    PAGE_NEXT_BLOCK_STATUS,
];

/// The algorithm index the drive reports (IBM and HPE LTO drives use 1 for AES-256-GCM).
pub(crate) const ALGORITHM_INDEX: u8 = 1;
/// AES-GCM with a 256-bit key (SSC-4 security algorithm codes, SPC-4 §7.6.3.2).
const ALGORITHM_AES256_GCM: u32 = 0x0001_0014;
const KEY_LEN: usize = 32;
/// Longest key-associated data the drive keeps, as IBM LTO drives report them.
const MAX_UKAD: usize = 32;
const MAX_AKAD: usize = 12;
const KAD_UKAD: u8 = 0x00;
const KAD_AKAD: u8 = 0x01;

const SEAL_MAGIC: &[u8; 4] = b"RTE1";
const KEY_CHECK_LEN: usize = 4;
const NONCE_LEN: usize = 12;
const TAG_LEN: usize = 16;
const KEY_CHECK_CONTEXT: &str = "reel 2026-11 tape data encryption key check";

/// Encryption modes of the Set Data Encryption page (SSC-4 §8.5.3.2).
const MODE_DISABLE: u8 = 0;
const MODE_ENCRYPT: u8 = 2;

/// DECRYPTION MODE (SSC-4 §8.5.3.2): what a READ does with encrypted and plain records.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) enum DecryptionMode {
    /// Encrypted records are not read (74h/01h); plain ones are.
    #[default]
    Disable = 0,
    /// Only encrypted records are read; a plain one is 74h/02h.
    Decrypt = 2,
    /// Both are read.
    Mixed = 3,
}

/// One key-associated data descriptor (SSC-4 §8.5.4.4): sent with the key, stored in clear
/// with every record it encrypts, reported by Next Block Encryption Status so the application
/// can tell which key a cartridge needs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Kad {
    kind: u8,
    data: Vec<u8>,
}

/// The drive's data encryption parameters (one set for all I_T nexuses).
#[derive(Default)]
pub(crate) struct Encryption {
    encrypt: bool,
    decrypt: DecryptionMode,
    key: Option<Zeroizing<[u8; KEY_LEN]>>,
    kads: Vec<Kad>,
    /// Clear the key when the cartridge is unloaded (CKOD).
    clear_on_demount: bool,
    /// Counts Set Data Encryption pages the drive accepted (KEY INSTANCE COUNTER).
    key_instance: u32,
    /// Some nexus set ALL I_T NEXUS parameters since the last clear.
    set: bool,
}

/// The object at the drive's position, for Next Block Encryption Status.
pub(crate) struct NextBlock<'a> {
    /// Its logical object number.
    pub object: u64,
    /// What it is (`None`: end-of-data).
    pub kind: Option<ObjectKind>,
    /// Its sealed form when it is an encrypted record (empty otherwise).
    pub sealed: &'a [u8],
}

/// Whether a SECURITY PROTOCOL IN CDB asks for Next Block Encryption Status (the drive then
/// looks at the record at its position).
pub(crate) fn wants_next_block(cdb: &Cdb<'_>) -> bool {
    cdb.byte(1) == PROTOCOL_TAPE_DATA_ENCRYPTION && cdb.be(2, 2) as u16 == PAGE_NEXT_BLOCK_STATUS
}

/// Why a sealed record did not open.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum OpenError {
    /// Not a sealed form this drive knows, or an algorithm it does not have.
    Unsupported,
    /// The key check differs: another key sealed it.
    WrongKey,
    /// The key matches but the tag does not: the record or its KADs were changed.
    Integrity,
}

impl Encryption {
    pub(crate) fn encrypting(&self) -> bool {
        self.encrypt && self.key.is_some()
    }

    /// Whether a Set Data Encryption page turned either direction on (the drive's
    /// encryption state, as IBM's mode page 25h reports it).
    pub(crate) fn enabled(&self) -> bool {
        self.set
    }

    pub(crate) fn decryption_mode(&self) -> DecryptionMode {
        self.decrypt
    }

    /// The cartridge was unloaded: with CKOD the key and modes go (SSC-4 §8.5.3.2).
    pub(crate) fn medium_demounted(&mut self) {
        if self.clear_on_demount {
            self.clear();
        }
    }

    fn clear(&mut self) {
        let key_instance = self.key_instance;
        *self = Encryption {
            key_instance,
            ..Encryption::default()
        };
    }

    /// Seals one host record with the current key (call only when [`Self::encrypting`]).
    pub(crate) fn seal(&self, record: &[u8]) -> Result<Vec<u8>, Sense> {
        let key = self
            .key
            .as_ref()
            .ok_or_else(crate::errors::internal_failure)?;
        let mut out = Vec::with_capacity(record.len() + 96);
        out.extend_from_slice(SEAL_MAGIC);
        out.push(ALGORITHM_INDEX);
        out.push(self.kads.len() as u8);
        for kad in &self.kads {
            out.push(kad.kind);
            out.extend_from_slice(&(kad.data.len() as u16).to_be_bytes());
            out.extend_from_slice(&kad.data);
        }
        out.extend_from_slice(&key_check(key));
        let header_len = out.len();
        let mut nonce = [0u8; NONCE_LEN];
        getrandom::fill(&mut nonce).map_err(|_| crate::errors::internal_failure())?;
        out.extend_from_slice(&nonce);
        out.extend_from_slice(record);
        let (aad, rest) = out.split_at_mut(header_len);
        let (_, body) = rest.split_at_mut(NONCE_LEN);
        let tag = cipher(key)
            .encrypt_inout_detached(&Nonce::from(nonce), aad, body.into())
            .map_err(|_| crate::errors::internal_failure())?;
        out.extend_from_slice(&tag);
        Ok(out)
    }

    /// Opens a sealed record into the host's bytes.
    pub(crate) fn open(&self, sealed: &[u8]) -> Result<Vec<u8>, OpenError> {
        let parsed = parse_sealed(sealed).ok_or(OpenError::Unsupported)?;
        let key = self.key.as_ref().ok_or(OpenError::WrongKey)?;
        if parsed.key_check != key_check(key) {
            return Err(OpenError::WrongKey);
        }
        let mut body = sealed[parsed.body.clone()].to_vec();
        let nonce: [u8; NONCE_LEN] = sealed[parsed.nonce..parsed.nonce + NONCE_LEN]
            .try_into()
            .map_err(|_| OpenError::Unsupported)?;
        let tag: [u8; TAG_LEN] = sealed[parsed.body.end..]
            .try_into()
            .map_err(|_| OpenError::Unsupported)?;
        cipher(key)
            .decrypt_inout_detached(
                &Nonce::from(nonce),
                &sealed[..parsed.nonce],
                body.as_mut_slice().into(),
                &Tag::from(tag),
            )
            .map_err(|_| OpenError::Integrity)?;
        Ok(body)
    }

    /// Handles SECURITY PROTOCOL IN (SPC-4 §6.30). `next_block` is, for a threaded cartridge,
    /// what the drive reads next ([`NextBlock`]); the drive looks only when the CDB asks for
    /// Next Block Encryption Status ([`wants_next_block`]).
    pub(crate) fn security_protocol_in(
        &self,
        cdb: &Cdb<'_>,
        medium: bool,
        next_block: Option<NextBlock<'_>>,
    ) -> Result<Vec<u8>, Sense> {
        check_cdb(cdb)?;
        let page = cdb.be(2, 2) as u16;
        let allocation = cdb.be(6, 4) as usize;
        let mut data = match cdb.byte(1) {
            PROTOCOL_INFORMATION => match page {
                // Supported security protocols: 6 reserved bytes, a length, the list.
                0x0000 => vec![
                    0,
                    0,
                    0,
                    0,
                    0,
                    0,
                    0,
                    2,
                    PROTOCOL_INFORMATION,
                    PROTOCOL_TAPE_DATA_ENCRYPTION,
                ],
                // Certificate data: none.
                0x0001 => vec![0, 0, 0, 0],
                _ => return Err(Sense::invalid_field_in_cdb(2, None)),
            },
            PROTOCOL_TAPE_DATA_ENCRYPTION => match page {
                PAGE_IN_SUPPORT => page_of(
                    page,
                    IN_PAGES.iter().flat_map(|p| p.to_be_bytes()).collect(),
                ),
                PAGE_OUT_SUPPORT => page_of(page, PAGE_SET_DATA_ENCRYPTION.to_be_bytes().to_vec()),
                PAGE_CAPABILITIES => page_of(page, capabilities(medium)),
                // One key format: plain text (00h).
                PAGE_KEY_FORMATS => page_of(page, vec![0x00]),
                PAGE_MANAGEMENT_CAPABILITIES => page_of(page, management_capabilities()),
                PAGE_STATUS => page_of(page, self.status()),
                PAGE_NEXT_BLOCK_STATUS => {
                    let next = next_block.ok_or_else(crate::errors::not_present)?;
                    page_of(page, self.next_block_status(next))
                }
                _ => return Err(Sense::invalid_field_in_cdb(2, None)),
            },
            _ => return Err(Sense::invalid_field_in_cdb(1, None)),
        };
        data.truncate(allocation);
        Ok(data)
    }

    /// Handles SECURITY PROTOCOL OUT (SPC-4 §6.31) with a Set Data Encryption page.
    pub(crate) fn security_protocol_out(
        &mut self,
        cdb: &Cdb<'_>,
        data: &[u8],
    ) -> Result<(), Sense> {
        check_cdb(cdb)?;
        if cdb.byte(1) != PROTOCOL_TAPE_DATA_ENCRYPTION {
            return Err(Sense::invalid_field_in_cdb(1, None));
        }
        if cdb.be(2, 2) as u16 != PAGE_SET_DATA_ENCRYPTION {
            return Err(Sense::invalid_field_in_cdb(2, None));
        }
        if data.len() != cdb.be(6, 4) as usize {
            return Err(Sense::invalid_field_in_cdb(6, None));
        }
        let request = SetDataEncryption::parse(data)?;
        match request.scope {
            // PUBLIC: this nexus uses the parameters shared by all, the only ones kept here.
            Scope::Public => {}
            Scope::All => {
                let key_instance = self.key_instance.wrapping_add(1);
                let enabled = request.encrypt || request.decrypt != DecryptionMode::Disable;
                *self = Encryption {
                    encrypt: request.encrypt,
                    decrypt: request.decrypt,
                    key: request.key.filter(|_| enabled),
                    kads: if enabled { request.kads } else { Vec::new() },
                    clear_on_demount: request.clear_on_demount,
                    key_instance,
                    set: enabled,
                };
            }
        }
        Ok(())
    }

    /// Data Encryption Status page body (SSC-4 §8.5.2.7).
    fn status(&self) -> Vec<u8> {
        let mut out = vec![0u8; 20];
        // I_T NEXUS SCOPE (bits 7–5) and KEY SCOPE (bits 2–0): ALL I_T NEXUS once set, else
        // PUBLIC.
        let scope = if self.set { 2 } else { 0 };
        out[0] = scope << 5 | scope;
        out[1] = if self.encrypt {
            MODE_ENCRYPT
        } else {
            MODE_DISABLE
        };
        out[2] = self.decrypt as u8;
        out[3] = if self.set { ALGORITHM_INDEX } else { 0 };
        out[4..8].copy_from_slice(&self.key_instance.to_be_bytes());
        // Byte 8: PARAMETERS CONTROL 001b when set (the application sets them, SSC-4 table
        // "parameters control"); VCELB, CEEMS, RDMD 0. Byte 9 reserved, 10–11 ASDK COUNT 0.
        out[8] = if self.set { 0x10 } else { 0 };
        for kad in &self.kads {
            put_kad(&mut out, kad.kind, 0, &kad.data);
        }
        out
    }

    /// Next Block Encryption Status page body (SSC-4 §8.5.2.8).
    fn next_block_status(&self, next: NextBlock<'_>) -> Vec<u8> {
        let NextBlock {
            object,
            kind,
            sealed,
        } = next;
        let mut out = vec![0u8; 12];
        out[..8].copy_from_slice(&object.to_be_bytes());
        // COMPRESSION STATUS (bits 7–4) 0: not reported. ENCRYPTION STATUS (bits 3–0):
        // 2h not a logical block, 3h not encrypted, 4h unsupported algorithm, 5h encrypted
        // and this drive holds the key, 6h encrypted with a key it does not hold.
        let status = match kind {
            None | Some(ObjectKind::Filemark) => 0x2,
            Some(ObjectKind::Record { .. }) => 0x3,
            Some(ObjectKind::EncryptedRecord { .. }) => match parse_sealed(sealed) {
                None => 0x4,
                Some(parsed) => {
                    out[9] = parsed.algorithm;
                    for (kind, data) in &parsed.kads {
                        put_kad(&mut out, *kind, 0, data);
                    }
                    match &self.key {
                        Some(key) if key_check(key) == parsed.key_check => 0x5,
                        _ => 0x6,
                    }
                }
            },
        };
        out[8] = status;
        out
    }
}

fn cipher(key: &[u8; KEY_LEN]) -> Aes256Gcm {
    Aes256Gcm::new(&Key::<Aes256Gcm>::from(*key))
}

fn key_check(key: &[u8; KEY_LEN]) -> [u8; KEY_CHECK_LEN] {
    let derived = Zeroizing::new(blake3::derive_key(KEY_CHECK_CONTEXT, key));
    let mut out = [0u8; KEY_CHECK_LEN];
    out.copy_from_slice(&derived[..KEY_CHECK_LEN]);
    out
}

/// The sense a READ of a record gets when it cannot return it (SSC-4 §4.2.27; the codes and
/// their meaning as HPE's and IBM's LTO references give them).
pub(crate) fn read_refused(why: ReadRefusal) -> Sense {
    let asc = match why {
        ReadRefusal::DecryptionDisabled => Asc::UNABLE_TO_DECRYPT_DATA,
        ReadRefusal::NotEncrypted => Asc::UNENCRYPTED_DATA_ENCOUNTERED_WHILE_DECRYPTING,
        ReadRefusal::Open(OpenError::WrongKey) => Asc::INCORRECT_DATA_ENCRYPTION_KEY,
        ReadRefusal::Open(OpenError::Integrity) => Asc::CRYPTOGRAPHIC_INTEGRITY_VALIDATION_FAILED,
        ReadRefusal::Open(OpenError::Unsupported) => Asc::SECURITY_ERROR,
    };
    Sense::new(SenseKey::DATA_PROTECT, asc)
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum ReadRefusal {
    DecryptionDisabled,
    NotEncrypted,
    Open(OpenError),
}

/// SECURITY PROTOCOL IN/OUT CDB checks shared by both: INC_512 (byte 4 bit 7) is not
/// supported, the transfer is counted in bytes.
fn check_cdb(cdb: &Cdb<'_>) -> Result<(), Sense> {
    if cdb.bit(4, 7) {
        return Err(Sense::invalid_field_in_cdb(4, Some(7)));
    }
    Ok(())
}

/// A page: its code, its length and the body.
fn page_of(code: u16, body: Vec<u8>) -> Vec<u8> {
    let mut out = Vec::with_capacity(4 + body.len());
    out.extend_from_slice(&code.to_be_bytes());
    out.extend_from_slice(&(body.len() as u16).to_be_bytes());
    out.extend_from_slice(&body);
    out
}

fn put_kad(out: &mut Vec<u8>, kind: u8, authenticated: u8, data: &[u8]) {
    out.push(kind);
    out.push(authenticated & 0x07);
    out.extend_from_slice(&(data.len() as u16).to_be_bytes());
    out.extend_from_slice(data);
}

/// Data Encryption Capabilities page body (SSC-4 §8.5.2.4): one algorithm descriptor.
fn capabilities(medium: bool) -> Vec<u8> {
    let mut out = vec![0u8; 16];
    // EXTDECC 00b (not reported), CFG_P 01b: the application controls encryption.
    out[0] = 0x01;
    let mut descriptor = vec![0u8; 24];
    descriptor[0] = ALGORITHM_INDEX;
    descriptor[2..4].copy_from_slice(&20u16.to_be_bytes());
    // AVFMV 1 (valid for the mounted volume, when there is one), SDK_C 0, MAC_C 0, DELB_C 1
    // (encrypted blocks are told apart), DECRYPT_C 10b and ENCRYPT_C 10b (in the drive).
    descriptor[4] = u8::from(medium) << 7 | 1 << 4 | 0b10 << 2 | 0b10;
    // AVFCLP 00b, NONCE_C 01b (the drive makes the nonce), KADF_C 1, VCELB_C 0, UKADF 0,
    // AKADF 0.
    descriptor[5] = 0b01 << 4 | 1 << 3;
    descriptor[6..8].copy_from_slice(&(MAX_UKAD as u16).to_be_bytes());
    descriptor[8..10].copy_from_slice(&(MAX_AKAD as u16).to_be_bytes());
    descriptor[10..12].copy_from_slice(&(KEY_LEN as u16).to_be_bytes());
    // DKAD_C, EEMC_C, RDMC_C, EAREM: 0 (no external encryption, no raw reads).
    descriptor[20..24].copy_from_slice(&ALGORITHM_AES256_GCM.to_be_bytes());
    out.extend_from_slice(&descriptor);
    out
}

/// Data Encryption Management Capabilities page body (SSC-4 §8.5.2.6).
fn management_capabilities() -> Vec<u8> {
    let mut out = vec![0u8; 12];
    // LOCK_C 0. CKOD_C 1, CKORP_C 0, CKORL_C 0. AITN_C 1, LOCAL_C 0, PUBLIC_C 1.
    out[1] = 0b100;
    out[3] = 0b101;
    out
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Scope {
    Public,
    All,
}

/// A parsed Set Data Encryption page (SSC-4 §8.5.3.2).
struct SetDataEncryption {
    scope: Scope,
    encrypt: bool,
    decrypt: DecryptionMode,
    clear_on_demount: bool,
    key: Option<Zeroizing<[u8; KEY_LEN]>>,
    kads: Vec<Kad>,
}

impl SetDataEncryption {
    const HEADER_LEN: usize = 20;

    fn parse(data: &[u8]) -> Result<SetDataEncryption, Sense> {
        let bad =
            |byte: usize, bit: Option<u8>| Sense::invalid_field_in_parameter_list(byte as u16, bit);
        if data.len() < Self::HEADER_LEN {
            return Err(Sense::parameter_list_length_error());
        }
        if u16::from_be_bytes([data[0], data[1]]) != PAGE_SET_DATA_ENCRYPTION {
            return Err(bad(0, None));
        }
        if usize::from(u16::from_be_bytes([data[2], data[3]])) + 4 != data.len() {
            return Err(Sense::parameter_list_length_error());
        }
        let scope = match data[4] >> 5 {
            0 => Scope::Public,
            2 => Scope::All,
            _ => return Err(bad(4, Some(7))),
        };
        if data[4] & 0x01 != 0 {
            return Err(bad(4, Some(0)));
        }
        let flags = data[5];
        if flags >> 6 == 3 {
            return Err(bad(5, Some(7)));
        }
        if (flags >> 4) & 0x03 == 1 {
            return Err(bad(5, Some(5)));
        }
        if flags & 0x08 != 0 {
            return Err(bad(5, Some(3)));
        }
        if flags & 0x03 != 0 {
            return Err(bad(5, Some(1)));
        }
        let encrypt = match data[6] {
            MODE_DISABLE => false,
            MODE_ENCRYPT => true,
            _ => return Err(bad(6, None)),
        };
        let decrypt = match data[7] {
            0 => DecryptionMode::Disable,
            2 => DecryptionMode::Decrypt,
            3 => DecryptionMode::Mixed,
            _ => return Err(bad(7, None)),
        };
        let enabled = encrypt || decrypt != DecryptionMode::Disable;
        let key_len = usize::from(u16::from_be_bytes([data[18], data[19]]));
        let key_end = Self::HEADER_LEN + key_len;
        if key_end > data.len() {
            return Err(bad(18, None));
        }
        let mut parsed = SetDataEncryption {
            scope,
            encrypt,
            decrypt,
            clear_on_demount: flags & 0x04 != 0,
            key: None,
            kads: Vec::new(),
        };
        if !enabled {
            // Both modes DISABLE: the key and KADs are not used (stenc sends a zero key).
            return Ok(parsed);
        }
        if data[8] != ALGORITHM_INDEX {
            return Err(bad(8, None));
        }
        if data[9] != 0 {
            return Err(bad(9, None));
        }
        if data[10] > 2 {
            return Err(bad(10, None));
        }
        if key_len != KEY_LEN {
            return Err(bad(18, None));
        }
        let mut key = Zeroizing::new([0u8; KEY_LEN]);
        key.copy_from_slice(&data[Self::HEADER_LEN..key_end]);
        parsed.key = Some(key);
        let mut at = key_end;
        while at < data.len() {
            if at + 4 > data.len() {
                return Err(bad(at, None));
            }
            let kind = data[at];
            // Byte 1 holds only the AUTHENTICATED field of a device-reported descriptor and
            // reserved bits: ignored on input (stenc 1.0.7 leaves it uninitialised).
            let len = usize::from(u16::from_be_bytes([data[at + 2], data[at + 3]]));
            let end = at + 4 + len;
            if end > data.len() {
                return Err(bad(at + 2, None));
            }
            let max = match kind {
                KAD_UKAD => MAX_UKAD,
                KAD_AKAD => MAX_AKAD,
                // NONCE (02h): the drive makes its own; METADATA (03h) and the rest: no.
                _ => return Err(bad(at, None)),
            };
            if len > max || parsed.kads.iter().any(|k| k.kind == kind) {
                return Err(bad(at, None));
            }
            parsed.kads.push(Kad {
                kind,
                data: data[at + 4..end].to_vec(),
            });
            at = end;
        }
        Ok(parsed)
    }
}

/// What the sealed form says without the key.
struct Sealed {
    algorithm: u8,
    kads: Vec<(u8, Vec<u8>)>,
    key_check: [u8; KEY_CHECK_LEN],
    /// Offset of the nonce (the associated data is everything before it).
    nonce: usize,
    body: std::ops::Range<usize>,
}

fn parse_sealed(sealed: &[u8]) -> Option<Sealed> {
    let rest = sealed.strip_prefix(SEAL_MAGIC)?;
    let (&algorithm, rest) = rest.split_first()?;
    if algorithm != ALGORITHM_INDEX {
        return None;
    }
    let (&count, mut rest) = rest.split_first()?;
    let mut kads = Vec::with_capacity(usize::from(count));
    for _ in 0..count {
        let (&kind, tail) = rest.split_first()?;
        let len = usize::from(u16::from_be_bytes(tail.get(..2)?.try_into().ok()?));
        kads.push((kind, tail.get(2..2 + len)?.to_vec()));
        rest = &tail[2 + len..];
    }
    let key_check: [u8; KEY_CHECK_LEN] = rest.get(..KEY_CHECK_LEN)?.try_into().ok()?;
    let nonce = sealed.len() - rest.len() + KEY_CHECK_LEN;
    let body_start = nonce + NONCE_LEN;
    let body_end = sealed.len().checked_sub(TAG_LEN)?;
    if body_start > body_end {
        return None;
    }
    Some(Sealed {
        algorithm,
        kads,
        key_check,
        nonce,
        body: body_start..body_end,
    })
}

#[cfg(test)]
mod tests;
