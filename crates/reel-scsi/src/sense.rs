//! Status and sense data (SPC-4 §4.5): the one place where sense bytes are built and parsed.
//!
//! [`Sense`] is a typed builder; [`Sense::encode`] writes fixed format (70h/71h, SPC-4 §4.5.3)
//! or descriptor format (72h/73h, SPC-4 §4.5.2), chosen per logical unit by the D_SENSE bit of
//! the control mode page. Tape needs FILEMARK, EOM, ILI and INFORMATION (the residue), so they
//! are first-class fields. [`parse_sense`] reads both formats back (tests and the initiator).

use std::fmt;

use bytes::Bytes;
use thiserror::Error;

/// A sense key (SPC-4 §4.5.6, table 27).
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct SenseKey(pub u8);

impl SenseKey {
    pub const NO_SENSE: Self = Self(0x0);
    pub const RECOVERED_ERROR: Self = Self(0x1);
    pub const NOT_READY: Self = Self(0x2);
    pub const MEDIUM_ERROR: Self = Self(0x3);
    pub const HARDWARE_ERROR: Self = Self(0x4);
    pub const ILLEGAL_REQUEST: Self = Self(0x5);
    pub const UNIT_ATTENTION: Self = Self(0x6);
    pub const DATA_PROTECT: Self = Self(0x7);
    pub const BLANK_CHECK: Self = Self(0x8);
    pub const VENDOR_SPECIFIC: Self = Self(0x9);
    pub const COPY_ABORTED: Self = Self(0xA);
    pub const ABORTED_COMMAND: Self = Self(0xB);
    pub const VOLUME_OVERFLOW: Self = Self(0xD);
    pub const MISCOMPARE: Self = Self(0xE);

    /// The standard name, if the key is defined.
    pub fn name(self) -> Option<&'static str> {
        Some(match self.0 {
            0x0 => "NO SENSE",
            0x1 => "RECOVERED ERROR",
            0x2 => "NOT READY",
            0x3 => "MEDIUM ERROR",
            0x4 => "HARDWARE ERROR",
            0x5 => "ILLEGAL REQUEST",
            0x6 => "UNIT ATTENTION",
            0x7 => "DATA PROTECT",
            0x8 => "BLANK CHECK",
            0x9 => "VENDOR SPECIFIC",
            0xA => "COPY ABORTED",
            0xB => "ABORTED COMMAND",
            0xD => "VOLUME OVERFLOW",
            0xE => "MISCOMPARE",
            _ => return None,
        })
    }
}

impl fmt::Debug for SenseKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.name() {
            Some(name) => f.write_str(name),
            None => write!(f, "SenseKey({:#x})", self.0),
        }
    }
}

/// Additional sense code and qualifier (SPC-4 §4.5.6, table 28) as `ASC << 8 | ASCQ`.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct Asc(pub u16);

macro_rules! asc_table {
    ($($name:ident = $value:expr, $text:expr;)*) => {
        impl Asc {
            $(#[doc = $text] pub const $name: Self = Self($value);)*

            /// The standard description, for the codes this crate names.
            pub fn name(self) -> Option<&'static str> {
                match self.0 {
                    $($value => Some($text),)*
                    _ => None,
                }
            }
        }
    };
}

asc_table! {
    NO_ADDITIONAL_SENSE = 0x0000, "NO ADDITIONAL SENSE INFORMATION";
    FILEMARK_DETECTED = 0x0001, "FILEMARK DETECTED";
    END_OF_PARTITION_MEDIUM_DETECTED = 0x0002, "END-OF-PARTITION/MEDIUM DETECTED";
    SETMARK_DETECTED = 0x0003, "SETMARK DETECTED";
    BEGINNING_OF_PARTITION_MEDIUM_DETECTED = 0x0004, "BEGINNING-OF-PARTITION/MEDIUM DETECTED";
    END_OF_DATA_DETECTED = 0x0005, "END-OF-DATA DETECTED";
    PROGRAMMABLE_EARLY_WARNING_DETECTED = 0x0007, "PROGRAMMABLE EARLY WARNING DETECTED";
    OPERATION_IN_PROGRESS = 0x0016, "OPERATION IN PROGRESS";
    LOGICAL_UNIT_NOT_READY_CAUSE_NOT_REPORTABLE = 0x0400, "LOGICAL UNIT NOT READY, CAUSE NOT REPORTABLE";
    LOGICAL_UNIT_IS_IN_PROCESS_OF_BECOMING_READY = 0x0401, "LOGICAL UNIT IS IN PROCESS OF BECOMING READY";
    LOGICAL_UNIT_NOT_READY_INITIALIZING_COMMAND_REQUIRED = 0x0402, "LOGICAL UNIT NOT READY, INITIALIZING COMMAND REQUIRED";
    LOGICAL_UNIT_NOT_READY_MANUAL_INTERVENTION_REQUIRED = 0x0403, "LOGICAL UNIT NOT READY, MANUAL INTERVENTION REQUIRED";
    LOGICAL_UNIT_NOT_READY_FORMAT_IN_PROGRESS = 0x0404, "LOGICAL UNIT NOT READY, FORMAT IN PROGRESS";
    LOGICAL_UNIT_COMMUNICATION_FAILURE = 0x0800, "LOGICAL UNIT COMMUNICATION FAILURE";
    WRITE_ERROR = 0x0C00, "WRITE ERROR";
    UNRECOVERED_READ_ERROR = 0x1100, "UNRECOVERED READ ERROR";
    RECORD_NOT_FOUND = 0x1401, "RECORD NOT FOUND";
    PARAMETER_LIST_LENGTH_ERROR = 0x1A00, "PARAMETER LIST LENGTH ERROR";
    MISCOMPARE_DURING_VERIFY_OPERATION = 0x1D00, "MISCOMPARE DURING VERIFY OPERATION";
    INVALID_COMMAND_OPERATION_CODE = 0x2000, "INVALID COMMAND OPERATION CODE";
    LOGICAL_BLOCK_ADDRESS_OUT_OF_RANGE = 0x2100, "LOGICAL BLOCK ADDRESS OUT OF RANGE";
    INVALID_ELEMENT_ADDRESS = 0x2101, "INVALID ELEMENT ADDRESS";
    INVALID_FIELD_IN_CDB = 0x2400, "INVALID FIELD IN CDB";
    LOGICAL_UNIT_NOT_SUPPORTED = 0x2500, "LOGICAL UNIT NOT SUPPORTED";
    INVALID_FIELD_IN_PARAMETER_LIST = 0x2600, "INVALID FIELD IN PARAMETER LIST";
    PARAMETER_NOT_SUPPORTED = 0x2601, "PARAMETER NOT SUPPORTED";
    PARAMETER_VALUE_INVALID = 0x2602, "PARAMETER VALUE INVALID";
    INVALID_RELEASE_OF_PERSISTENT_RESERVATION = 0x2604, "INVALID RELEASE OF PERSISTENT RESERVATION";
    WRITE_PROTECTED = 0x2700, "WRITE PROTECTED";
    NOT_READY_TO_READY_CHANGE_MEDIUM_MAY_HAVE_CHANGED = 0x2800, "NOT READY TO READY CHANGE, MEDIUM MAY HAVE CHANGED";
    IMPORT_OR_EXPORT_ELEMENT_ACCESSED = 0x2801, "IMPORT OR EXPORT ELEMENT ACCESSED";
    POWER_ON_RESET_OR_BUS_DEVICE_RESET_OCCURRED = 0x2900, "POWER ON, RESET, OR BUS DEVICE RESET OCCURRED";
    POWER_ON_OCCURRED = 0x2901, "POWER ON OCCURRED";
    SCSI_BUS_RESET_OCCURRED = 0x2902, "SCSI BUS RESET OCCURRED";
    BUS_DEVICE_RESET_FUNCTION_OCCURRED = 0x2903, "BUS DEVICE RESET FUNCTION OCCURRED";
    DEVICE_INTERNAL_RESET = 0x2904, "DEVICE INTERNAL RESET";
    I_T_NEXUS_LOSS_OCCURRED = 0x2907, "I_T NEXUS LOSS OCCURRED";
    PARAMETERS_CHANGED = 0x2A00, "PARAMETERS CHANGED";
    MODE_PARAMETERS_CHANGED = 0x2A01, "MODE PARAMETERS CHANGED";
    LOG_PARAMETERS_CHANGED = 0x2A02, "LOG PARAMETERS CHANGED";
    RESERVATIONS_PREEMPTED = 0x2A03, "RESERVATIONS PREEMPTED";
    RESERVATIONS_RELEASED = 0x2A04, "RESERVATIONS RELEASED";
    REGISTRATIONS_PREEMPTED = 0x2A05, "REGISTRATIONS PREEMPTED";
    TIMESTAMP_CHANGED = 0x2A10, "TIMESTAMP CHANGED";
    COMMAND_SEQUENCE_ERROR = 0x2C00, "COMMAND SEQUENCE ERROR";
    COMMANDS_CLEARED_BY_ANOTHER_INITIATOR = 0x2F00, "COMMANDS CLEARED BY ANOTHER INITIATOR";
    INCOMPATIBLE_MEDIUM_INSTALLED = 0x3000, "INCOMPATIBLE MEDIUM INSTALLED";
    CANNOT_READ_MEDIUM_UNKNOWN_FORMAT = 0x3001, "CANNOT READ MEDIUM - UNKNOWN FORMAT";
    MEDIUM_FORMAT_CORRUPTED = 0x3100, "MEDIUM FORMAT CORRUPTED";
    SAVING_PARAMETERS_NOT_SUPPORTED = 0x3900, "SAVING PARAMETERS NOT SUPPORTED";
    POSITION_PAST_BEGINNING_OF_MEDIUM = 0x3B0C, "POSITION PAST BEGINNING OF MEDIUM";
    MEDIUM_NOT_PRESENT = 0x3A00, "MEDIUM NOT PRESENT";
    SEQUENTIAL_POSITIONING_ERROR = 0x3B00, "SEQUENTIAL POSITIONING ERROR";
    MEDIUM_DESTINATION_ELEMENT_FULL = 0x3B0D, "MEDIUM DESTINATION ELEMENT FULL";
    MEDIUM_SOURCE_ELEMENT_EMPTY = 0x3B0E, "MEDIUM SOURCE ELEMENT EMPTY";
    END_OF_MEDIUM_REACHED = 0x3B0F, "END OF MEDIUM REACHED";
    INQUIRY_DATA_HAS_CHANGED = 0x3F03, "INQUIRY DATA HAS CHANGED";
    REPORTED_LUNS_DATA_HAS_CHANGED = 0x3F0E, "REPORTED LUNS DATA HAS CHANGED";
    INTERNAL_TARGET_FAILURE = 0x4400, "INTERNAL TARGET FAILURE";
    DATA_PHASE_ERROR = 0x4B00, "DATA PHASE ERROR";
    WRITE_APPEND_ERROR = 0x5000, "WRITE APPEND ERROR";
    MEDIUM_REMOVAL_PREVENTED = 0x5302, "MEDIUM REMOVAL PREVENTED";
    SYSTEM_RESOURCE_FAILURE = 0x5500, "SYSTEM RESOURCE FAILURE";
    SECURITY_ERROR = 0x7400, "SECURITY ERROR";
    UNABLE_TO_DECRYPT_DATA = 0x7401, "UNABLE TO DECRYPT DATA";
    UNENCRYPTED_DATA_ENCOUNTERED_WHILE_DECRYPTING = 0x7402, "UNENCRYPTED DATA ENCOUNTERED WHILE DECRYPTING";
    INCORRECT_DATA_ENCRYPTION_KEY = 0x7403, "INCORRECT DATA ENCRYPTION KEY";
    CRYPTOGRAPHIC_INTEGRITY_VALIDATION_FAILED = 0x7404, "CRYPTOGRAPHIC INTEGRITY VALIDATION FAILED";
}

impl Asc {
    /// An ASC/ASCQ pair.
    pub const fn new(asc: u8, ascq: u8) -> Self {
        Self(((asc as u16) << 8) | ascq as u16)
    }

    /// The ADDITIONAL SENSE CODE byte.
    pub const fn asc(self) -> u8 {
        (self.0 >> 8) as u8
    }

    /// The ADDITIONAL SENSE CODE QUALIFIER byte.
    pub const fn ascq(self) -> u8 {
        self.0 as u8
    }
}

impl fmt::Debug for Asc {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.name() {
            Some(name) => write!(f, "{:02X}h/{:02X}h {name}", self.asc(), self.ascq()),
            None => write!(f, "{:02X}h/{:02X}h", self.asc(), self.ascq()),
        }
    }
}

/// The SENSE KEY SPECIFIC field (SPC-4 §4.5.2.4.1), present when SKSV is one.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum KeySpecific {
    /// Field pointer (SPC-4 §4.5.2.4.2) for ILLEGAL REQUEST: `cd` is true for a CDB field,
    /// false for a parameter-list field; `bit` is the bit pointer (BPV = 1) of the field's most
    /// significant bit.
    FieldPointer {
        cd: bool,
        byte: u16,
        bit: Option<u8>,
    },
    /// Progress indication (SPC-4 §4.5.2.4.4) in 1/65536 units, for NO SENSE and NOT READY.
    Progress(u16),
    /// Any other sense-key-specific bytes (SKSV bit cleared in byte 0).
    Raw([u8; 3]),
}

impl KeySpecific {
    fn encode(self) -> [u8; 3] {
        let bytes = match self {
            Self::FieldPointer { cd, byte, bit } => {
                let mut b0 = 0;
                if cd {
                    b0 |= 0x40;
                }
                if let Some(bit) = bit {
                    b0 |= 0x08 | (bit & 0x07);
                }
                let [hi, lo] = byte.to_be_bytes();
                [b0, hi, lo]
            }
            Self::Progress(progress) => {
                let [hi, lo] = progress.to_be_bytes();
                [0, hi, lo]
            }
            Self::Raw(raw) => raw,
        };
        [bytes[0] | 0x80, bytes[1], bytes[2]]
    }

    fn decode(key: SenseKey, bytes: [u8; 3]) -> Option<Self> {
        if bytes[0] & 0x80 == 0 {
            return None;
        }
        let b0 = bytes[0] & 0x7F;
        let value = u16::from_be_bytes([bytes[1], bytes[2]]);
        Some(match key {
            SenseKey::ILLEGAL_REQUEST if b0 & 0x30 == 0 => Self::FieldPointer {
                cd: b0 & 0x40 != 0,
                byte: value,
                bit: (b0 & 0x08 != 0).then_some(b0 & 0x07),
            },
            SenseKey::NO_SENSE | SenseKey::NOT_READY if b0 == 0 => Self::Progress(value),
            _ => Self::Raw([b0, bytes[1], bytes[2]]),
        })
    }
}

/// Which sense data format a logical unit returns (SPC-4 §4.5.1; D_SENSE in SPC-4 §7.5.8).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum SenseFormat {
    /// Fixed format, response codes 70h/71h.
    #[default]
    Fixed,
    /// Descriptor format, response codes 72h/73h.
    Descriptor,
}

/// Sense data, independent of its encoding. Build with [`Sense::new`] and the `with_*` methods.
#[derive(Clone, Debug, PartialEq, Eq, Error)]
#[error("{key:?}, {asc:?}")]
pub struct Sense {
    pub key: SenseKey,
    pub asc: Asc,
    /// A deferred error (response code 71h/73h, SPC-4 §4.5.5).
    pub deferred: bool,
    /// FILEMARK (SSC-4 §4.2.x: a filemark was read or spaced over).
    pub filemark: bool,
    /// EOM: end of medium / beginning of partition reached.
    pub eom: bool,
    /// ILI: incorrect length indicator.
    pub ili: bool,
    /// The INFORMATION field (an LBA, or a tape residue in two's complement, sign-extended).
    /// Fixed format holds 4 bytes: a value that does not fit (nor is a sign-extended 32-bit
    /// negative number) is sent with VALID = 0 (SPC-4 §4.5.3).
    pub information: Option<u64>,
    /// The COMMAND-SPECIFIC INFORMATION field.
    pub command_specific: Option<u64>,
    /// The SENSE KEY SPECIFIC field.
    pub key_specific: Option<KeySpecific>,
}

impl Sense {
    /// Sense data with `key` and `asc`, nothing else.
    pub const fn new(key: SenseKey, asc: Asc) -> Self {
        Self {
            key,
            asc,
            deferred: false,
            filemark: false,
            eom: false,
            ili: false,
            information: None,
            command_specific: None,
            key_specific: None,
        }
    }

    /// NO SENSE / NO ADDITIONAL SENSE INFORMATION.
    pub const fn no_sense() -> Self {
        Self::new(SenseKey::NO_SENSE, Asc::NO_ADDITIONAL_SENSE)
    }

    /// ILLEGAL REQUEST with `asc`.
    pub const fn illegal_request(asc: Asc) -> Self {
        Self::new(SenseKey::ILLEGAL_REQUEST, asc)
    }

    /// UNIT ATTENTION with `asc`.
    pub const fn unit_attention(asc: Asc) -> Self {
        Self::new(SenseKey::UNIT_ATTENTION, asc)
    }

    /// ILLEGAL REQUEST / INVALID COMMAND OPERATION CODE (SPC-4 §4.5.6).
    pub const fn invalid_opcode() -> Self {
        Self::illegal_request(Asc::INVALID_COMMAND_OPERATION_CODE)
    }

    /// ILLEGAL REQUEST / INVALID FIELD IN CDB with a field pointer at `byte` (and `bit`, the
    /// field's most significant bit) of the CDB (SPC-4 §4.5.2.4.2, C/D = 1).
    pub const fn invalid_field_in_cdb(byte: u16, bit: Option<u8>) -> Self {
        Self::illegal_request(Asc::INVALID_FIELD_IN_CDB).with_key_specific(
            KeySpecific::FieldPointer {
                cd: true,
                byte,
                bit,
            },
        )
    }

    /// ILLEGAL REQUEST / INVALID FIELD IN PARAMETER LIST with a field pointer at `byte` (and
    /// `bit`) of the parameter list (SPC-4 §4.5.2.4.2, C/D = 0).
    pub const fn invalid_field_in_parameter_list(byte: u16, bit: Option<u8>) -> Self {
        Self::illegal_request(Asc::INVALID_FIELD_IN_PARAMETER_LIST).with_key_specific(
            KeySpecific::FieldPointer {
                cd: false,
                byte,
                bit,
            },
        )
    }

    /// ILLEGAL REQUEST / PARAMETER LIST LENGTH ERROR.
    pub const fn parameter_list_length_error() -> Self {
        Self::illegal_request(Asc::PARAMETER_LIST_LENGTH_ERROR)
    }

    /// Sets the INFORMATION field.
    pub const fn with_information(mut self, information: u64) -> Self {
        self.information = Some(information);
        self
    }

    /// Sets the INFORMATION field to a signed residue (two's complement, SSC-4 §4.2.x).
    pub const fn with_residue(self, residue: i64) -> Self {
        self.with_information(residue as u64)
    }

    /// Sets the COMMAND-SPECIFIC INFORMATION field.
    pub const fn with_command_specific(mut self, value: u64) -> Self {
        self.command_specific = Some(value);
        self
    }

    /// Sets the SENSE KEY SPECIFIC field.
    pub const fn with_key_specific(mut self, value: KeySpecific) -> Self {
        self.key_specific = Some(value);
        self
    }

    /// Sets FILEMARK.
    pub const fn with_filemark(mut self) -> Self {
        self.filemark = true;
        self
    }

    /// Sets EOM.
    pub const fn with_eom(mut self) -> Self {
        self.eom = true;
        self
    }

    /// Sets ILI.
    pub const fn with_ili(mut self) -> Self {
        self.ili = true;
        self
    }

    /// Marks the sense data as a deferred error.
    pub const fn deferred(mut self) -> Self {
        self.deferred = true;
        self
    }

    /// Encodes in `format`; see [`Sense::encode_fixed`] and [`Sense::encode_descriptor`].
    pub fn encode(&self, format: SenseFormat) -> Vec<u8> {
        match format {
            SenseFormat::Fixed => self.encode_fixed(),
            SenseFormat::Descriptor => self.encode_descriptor(),
        }
    }

    /// Encodes in `format` as [`Bytes`].
    pub fn to_bytes(&self, format: SenseFormat) -> Bytes {
        Bytes::from(self.encode(format))
    }

    /// Fixed format sense data, 18 bytes (SPC-4 §4.5.3, table 26).
    pub fn encode_fixed(&self) -> Vec<u8> {
        let mut out = vec![0u8; 18];
        out[0] = if self.deferred { 0x71 } else { 0x70 };
        if let Some(info) = self.information.and_then(fixed_information) {
            out[0] |= 0x80; // VALID
            out[3..7].copy_from_slice(&info.to_be_bytes());
        }
        out[2] = self.key.0 & 0x0F | self.stream_bits();
        out[7] = 10; // additional sense length: bytes 8..18
        if let Some(value) = self.command_specific {
            out[8..12].copy_from_slice(&(value as u32).to_be_bytes());
        }
        out[12] = self.asc.asc();
        out[13] = self.asc.ascq();
        if let Some(sks) = self.key_specific {
            out[15..18].copy_from_slice(&sks.encode());
        }
        out
    }

    /// Descriptor format sense data (SPC-4 §4.5.2): information (00h), command-specific (01h),
    /// sense key specific (02h) and stream commands (04h) descriptors as needed.
    pub fn encode_descriptor(&self) -> Vec<u8> {
        let mut out = vec![0u8; 8];
        out[0] = if self.deferred { 0x73 } else { 0x72 };
        out[1] = self.key.0 & 0x0F;
        out[2] = self.asc.asc();
        out[3] = self.asc.ascq();
        if let Some(info) = self.information {
            // SPC-4 §4.5.2.2: VALID = 1, 8-byte INFORMATION.
            out.extend_from_slice(&[DESC_INFORMATION, 0x0A, 0x80, 0]);
            out.extend_from_slice(&info.to_be_bytes());
        }
        if let Some(value) = self.command_specific {
            // SPC-4 §4.5.2.3.
            out.extend_from_slice(&[DESC_COMMAND_SPECIFIC, 0x0A, 0, 0]);
            out.extend_from_slice(&value.to_be_bytes());
        }
        if let Some(sks) = self.key_specific {
            // SPC-4 §4.5.2.4.
            out.extend_from_slice(&[DESC_KEY_SPECIFIC, 0x06, 0, 0]);
            out.extend_from_slice(&sks.encode());
            out.push(0);
        }
        let stream = self.stream_bits();
        if stream != 0 {
            // SPC-4 §4.5.2.6 (stream commands), bits as in fixed format byte 2.
            out.extend_from_slice(&[DESC_STREAM_COMMANDS, 0x02, 0, stream]);
        }
        // At most 8 + 12 + 12 + 8 + 4 bytes: always fits the one-byte length.
        out[7] = (out.len() - 8) as u8;
        out
    }

    fn stream_bits(&self) -> u8 {
        u8::from(self.filemark) << 7 | u8::from(self.eom) << 6 | u8::from(self.ili) << 5
    }
}

const DESC_INFORMATION: u8 = 0x00;
const DESC_COMMAND_SPECIFIC: u8 = 0x01;
const DESC_KEY_SPECIFIC: u8 = 0x02;
const DESC_STREAM_COMMANDS: u8 = 0x04;

/// The 4-byte fixed-format INFORMATION value for `value`, if representable: an unsigned 32-bit
/// value or a sign-extended negative 32-bit value (a tape residue).
fn fixed_information(value: u64) -> Option<u32> {
    if let Ok(v) = u32::try_from(value) {
        return Some(v);
    }
    i32::try_from(value as i64).ok().map(|v| v as u32)
}

/// Why sense bytes could not be parsed.
#[derive(Clone, Debug, PartialEq, Eq, Error)]
#[non_exhaustive]
pub enum SenseParseError {
    #[error("sense data is {0} bytes, shorter than its 8-byte header")]
    TooShort(usize),
    #[error("unknown sense response code {0:#04x}")]
    UnknownResponseCode(u8),
    #[error("sense descriptor at offset {0} runs past the sense data")]
    TruncatedDescriptor(usize),
}

/// Parses fixed (70h/71h) or descriptor (72h/73h) sense data. Fields beyond the bytes present
/// read as absent; unknown descriptors are skipped. Fixed format INFORMATION and
/// COMMAND-SPECIFIC INFORMATION are 4 bytes and come back zero-extended (a zero
/// COMMAND-SPECIFIC INFORMATION reads as absent).
pub fn parse_sense(bytes: &[u8]) -> Result<Sense, SenseParseError> {
    if bytes.len() < 8 {
        return Err(SenseParseError::TooShort(bytes.len()));
    }
    let at = |i: usize| bytes.get(i).copied().unwrap_or(0);
    let be =
        |range: std::ops::Range<usize>| range.fold(0u64, |acc, i| (acc << 8) | u64::from(at(i)));
    match bytes[0] & 0x7F {
        code @ (0x70 | 0x71) => {
            let end = (8 + usize::from(bytes[7])).min(bytes.len());
            let at = |i: usize| if i < end { at(i) } else { 0 };
            let key = SenseKey(at(2) & 0x0F);
            let mut sense = Sense::new(key, Asc::new(at(12), at(13)));
            sense.deferred = code == 0x71;
            sense.filemark = at(2) & 0x80 != 0;
            sense.eom = at(2) & 0x40 != 0;
            sense.ili = at(2) & 0x20 != 0;
            if bytes[0] & 0x80 != 0 {
                sense.information = Some(be(3..7));
            }
            let cs = if end >= 12 { be(8..12) } else { 0 };
            sense.command_specific = (cs != 0).then_some(cs);
            sense.key_specific = KeySpecific::decode(key, [at(15), at(16), at(17)]);
            Ok(sense)
        }
        code @ (0x72 | 0x73) => {
            let key = SenseKey(bytes[1] & 0x0F);
            let mut sense = Sense::new(key, Asc::new(bytes[2], bytes[3]));
            sense.deferred = code == 0x73;
            let end = (8 + usize::from(bytes[7])).min(bytes.len());
            let mut offset = 8;
            while offset + 2 <= end {
                let kind = bytes[offset];
                let len = usize::from(bytes[offset + 1]);
                let next = offset + 2 + len;
                if next > end {
                    return Err(SenseParseError::TruncatedDescriptor(offset));
                }
                let body = &bytes[offset + 2..next];
                let body_at = |i: usize| body.get(i).copied().unwrap_or(0);
                let body_u64 = || {
                    body.get(2..10)
                        .map(|b| b.iter().fold(0u64, |a, &x| (a << 8) | u64::from(x)))
                };
                match kind {
                    DESC_INFORMATION if body_at(0) & 0x80 != 0 => sense.information = body_u64(),
                    DESC_COMMAND_SPECIFIC => sense.command_specific = body_u64(),
                    DESC_KEY_SPECIFIC => {
                        sense.key_specific =
                            KeySpecific::decode(key, [body_at(2), body_at(3), body_at(4)]);
                    }
                    DESC_STREAM_COMMANDS => {
                        let bits = body_at(1);
                        sense.filemark = bits & 0x80 != 0;
                        sense.eom = bits & 0x40 != 0;
                        sense.ili = bits & 0x20 != 0;
                    }
                    _ => {}
                }
                offset = next;
            }
            Ok(sense)
        }
        other => Err(SenseParseError::UnknownResponseCode(other)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn fixed_layout_of_invalid_field_in_cdb() {
        let bytes = Sense::invalid_field_in_cdb(2, Some(7)).encode_fixed();
        assert_eq!(
            bytes,
            [
                0x70, 0, 0x05, 0, 0, 0, 0, 10, 0, 0, 0, 0, 0x24, 0x00, 0, 0xCF, 0x00, 0x02
            ]
        );
    }

    #[test]
    fn fixed_layout_of_tape_read_into_filemark() {
        let sense = Sense::new(SenseKey::NO_SENSE, Asc::FILEMARK_DETECTED)
            .with_filemark()
            .with_information(0x1234);
        let bytes = sense.encode_fixed();
        assert_eq!(&bytes[..8], &[0xF0, 0, 0x80, 0, 0, 0x12, 0x34, 10]);
        assert_eq!(&bytes[12..14], &[0x00, 0x01]);
    }

    #[test]
    fn negative_residue_fits_fixed_format() {
        let bytes = Sense::no_sense().with_ili().with_residue(-4).encode_fixed();
        assert_eq!(&bytes[..7], &[0xF0, 0, 0x20, 0xFF, 0xFF, 0xFF, 0xFC]);
        let big = Sense::no_sense().with_information(1 << 40).encode_fixed();
        assert_eq!(big[0], 0x70, "VALID = 0 when INFORMATION does not fit");
    }

    #[test]
    fn descriptor_layout() {
        let sense = Sense::new(SenseKey::MEDIUM_ERROR, Asc::new(0x3B, 0x00))
            .with_eom()
            .with_information(7)
            .deferred();
        let bytes = sense.encode_descriptor();
        assert_eq!(
            bytes,
            [
                0x73, 0x03, 0x3B, 0x00, 0, 0, 0, 16, //
                0x00, 0x0A, 0x80, 0, 0, 0, 0, 0, 0, 0, 0, 7, //
                0x04, 0x02, 0, 0x40
            ]
        );
    }

    #[test]
    fn short_or_unknown_sense_is_an_error() {
        assert_eq!(parse_sense(&[0x70; 7]), Err(SenseParseError::TooShort(7)));
        assert_eq!(
            parse_sense(&[0x7F, 0, 0, 0, 0, 0, 0, 0]),
            Err(SenseParseError::UnknownResponseCode(0x7F))
        );
        assert_eq!(
            parse_sense(&[0x72, 5, 0x24, 0, 0, 0, 0, 4, 0x02, 0x06, 0, 0]),
            Err(SenseParseError::TruncatedDescriptor(8))
        );
    }

    #[test]
    fn names() {
        assert_eq!(
            format!("{:?}", Asc::INVALID_FIELD_IN_CDB),
            "24h/00h INVALID FIELD IN CDB"
        );
        assert_eq!(format!("{:?}", SenseKey::UNIT_ATTENTION), "UNIT ATTENTION");
    }

    fn any_sense() -> impl Strategy<Value = Sense> {
        let sks = prop_oneof![
            (any::<bool>(), any::<u16>(), proptest::option::of(0u8..8))
                .prop_map(|(cd, byte, bit)| KeySpecific::FieldPointer { cd, byte, bit }),
            any::<u16>().prop_map(KeySpecific::Progress),
        ];
        (
            (0u8..16, any::<u16>(), any::<[bool; 4]>()),
            proptest::option::of(any::<u64>()),
            proptest::option::of(any::<u64>()),
            proptest::option::of(sks),
        )
            .prop_map(|((key, asc, flags), information, command_specific, sks)| {
                let key = SenseKey(key);
                // Keep only sense-key-specific shapes that the key implies.
                let key_specific = sks.map(|s| match (key, s) {
                    (SenseKey::ILLEGAL_REQUEST, KeySpecific::FieldPointer { .. }) => s,
                    (SenseKey::NO_SENSE | SenseKey::NOT_READY, KeySpecific::Progress(_)) => s,
                    (_, s) => KeySpecific::Raw(s.encode().map(|b| b & 0x7F)),
                });
                let key_specific = key_specific.map(|s| match (key, s) {
                    (
                        SenseKey::ILLEGAL_REQUEST | SenseKey::NO_SENSE | SenseKey::NOT_READY,
                        KeySpecific::Raw(_),
                    ) => KeySpecific::Raw([0x30, 0, 0]),
                    _ => s,
                });
                Sense {
                    key,
                    asc: Asc(asc),
                    deferred: flags[0],
                    filemark: flags[1],
                    eom: flags[2],
                    ili: flags[3],
                    information,
                    command_specific,
                    key_specific,
                }
            })
    }

    proptest! {
        #[test]
        fn descriptor_round_trip(sense in any_sense()) {
            prop_assert_eq!(parse_sense(&sense.encode_descriptor()), Ok(sense));
        }

        #[test]
        fn fixed_round_trip(sense in any_sense()) {
            let mut expected = sense.clone();
            expected.information = sense.information.and_then(fixed_information).map(u64::from);
            expected.command_specific =
                sense.command_specific.map(|v| v & 0xFFFF_FFFF).filter(|&v| v != 0);
            prop_assert_eq!(parse_sense(&sense.encode_fixed()), Ok(expected));
        }

        #[test]
        fn parse_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..64)) {
            let _ = parse_sense(&bytes);
        }
    }
}
