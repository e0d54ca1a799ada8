//! CDB framing (SAM-5 §5.2, SPC-4 §4.2) and the typed SPC commands the core executes.
//!
//! [`Cdb::parse`] cuts the bytes received to the length implied by the operation code's group
//! and checks the CONTROL byte; [`SpcCommand::parse`] decodes the commands that
//! [`crate::ScsiDevice`] handles itself, rejecting unsupported fields with a field pointer.

use std::fmt;

use thiserror::Error;

use crate::sense::Sense;

/// An operation code (SPC-4 §4.2.5.1) with named constants for the commands reel knows.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Opcode(pub u8);

macro_rules! opcodes {
    ($($(#[$meta:meta])* $name:ident = $value:expr;)*) => {
        impl Opcode {
            $($(#[$meta])* pub const $name: Self = Self($value);)*

            /// The command's name, for the operation codes this crate names.
            pub fn name(self) -> Option<&'static str> {
                match self.0 {
                    $($value => Some(stringify!($name)),)*
                    _ => None,
                }
            }
        }
    };
}

opcodes! {
    TEST_UNIT_READY = 0x00;
    REWIND = 0x01;
    REQUEST_SENSE = 0x03;
    FORMAT_MEDIUM = 0x04;
    READ_BLOCK_LIMITS = 0x05;
    INITIALIZE_ELEMENT_STATUS = 0x07;
    READ_6 = 0x08;
    WRITE_6 = 0x0A;
    SET_CAPACITY = 0x0B;
    WRITE_FILEMARKS_6 = 0x10;
    SPACE_6 = 0x11;
    INQUIRY = 0x12;
    VERIFY_6 = 0x13;
    MODE_SELECT_6 = 0x15;
    RESERVE_6 = 0x16;
    RELEASE_6 = 0x17;
    ERASE_6 = 0x19;
    MODE_SENSE_6 = 0x1A;
    START_STOP_UNIT = 0x1B;
    RECEIVE_DIAGNOSTIC_RESULTS = 0x1C;
    SEND_DIAGNOSTIC = 0x1D;
    PREVENT_ALLOW_MEDIUM_REMOVAL = 0x1E;
    READ_CAPACITY_10 = 0x25;
    READ_10 = 0x28;
    WRITE_10 = 0x2A;
    LOCATE_10 = 0x2B;
    VERIFY_10 = 0x2F;
    READ_POSITION = 0x34;
    SYNCHRONIZE_CACHE_10 = 0x35;
    READ_BUFFER = 0x3C;
    REPORT_DENSITY_SUPPORT = 0x44;
    LOG_SELECT = 0x4C;
    LOG_SENSE = 0x4D;
    MODE_SELECT_10 = 0x55;
    RESERVE_10 = 0x56;
    RELEASE_10 = 0x57;
    MODE_SENSE_10 = 0x5A;
    PERSISTENT_RESERVE_IN = 0x5E;
    PERSISTENT_RESERVE_OUT = 0x5F;
    VARIABLE_LENGTH = 0x7F;
    ALLOW_OVERWRITE = 0x82;
    READ_ATTRIBUTE = 0x8C;
    WRITE_ATTRIBUTE = 0x8D;
    READ_16 = 0x88;
    WRITE_16 = 0x8A;
    VERIFY_16 = 0x8F;
    /// Also SPACE(16) on sequential-access devices (SSC-4).
    SYNCHRONIZE_CACHE_16 = 0x91;
    LOCATE_16 = 0x92;
    SERVICE_ACTION_IN_16 = 0x9E;
    REPORT_LUNS = 0xA0;
    SECURITY_PROTOCOL_IN = 0xA2;
    MAINTENANCE_IN = 0xA3;
    MAINTENANCE_OUT = 0xA4;
    MOVE_MEDIUM = 0xA5;
    EXCHANGE_MEDIUM = 0xA6;
    READ_12 = 0xA8;
    WRITE_12 = 0xAA;
    SECURITY_PROTOCOL_OUT = 0xB5;
    SEND_VOLUME_TAG = 0xB6;
    READ_ELEMENT_STATUS = 0xB8;
}

impl fmt::Debug for Opcode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.name() {
            Some(name) => write!(f, "{name}({:#04x})", self.0),
            None => write!(f, "Opcode({:#04x})", self.0),
        }
    }
}

/// MAINTENANCE IN service action REPORT SUPPORTED OPERATION CODES (SPC-4 §6.35).
pub const SA_REPORT_SUPPORTED_OPCODES: u8 = 0x0C;
/// MAINTENANCE IN service action REPORT TIMESTAMP (SPC-4 §6.38).
pub const SA_REPORT_TIMESTAMP: u8 = 0x0F;
/// MAINTENANCE OUT service action SET TIMESTAMP (SPC-4 §6.45).
pub const SA_SET_TIMESTAMP: u8 = 0x0F;
/// SERVICE ACTION IN(16) service action READ CAPACITY(16) (SBC-3 §5.16).
pub const SA_READ_CAPACITY_16: u8 = 0x10;

/// The CDB length implied by an operation code's group (SPC-4 §4.2.5.1), `None` for the
/// reserved group 3 (except variable length 7Fh, see [`Cdb::parse`]) and the vendor-specific
/// groups 6 and 7.
pub fn cdb_length(opcode: u8) -> Option<usize> {
    match opcode >> 5 {
        0 => Some(6),
        1 | 2 => Some(10),
        4 => Some(16),
        5 => Some(12),
        _ => None,
    }
}

/// Whether an operation code uses a SERVICE ACTION field in byte 1 (bits 4:0) that the core
/// knows about: MAINTENANCE IN/OUT, SERVICE ACTION IN/OUT(12/16), PERSISTENT RESERVE IN/OUT.
pub fn has_service_action(opcode: u8) -> bool {
    matches!(
        opcode,
        0x5E | 0x5F | 0x9E | 0x9F | 0xA3 | 0xA4 | 0xAB | 0xA9
    )
}

/// Why a CDB could not be framed.
#[derive(Clone, Debug, PartialEq, Eq, Error)]
#[non_exhaustive]
pub enum CdbError {
    #[error("empty CDB")]
    Empty,
    #[error("operation code {0:#04x} is not supported")]
    UnsupportedOpcode(u8),
    #[error("CDB is {got} bytes, its operation code needs {needed}")]
    TooShort { needed: usize, got: usize },
    #[error("invalid field in CDB at byte {byte}")]
    InvalidField { byte: u16, bit: Option<u8> },
}

impl From<CdbError> for Sense {
    fn from(error: CdbError) -> Self {
        match error {
            CdbError::Empty | CdbError::UnsupportedOpcode(_) => Sense::invalid_opcode(),
            // The first missing byte is the offending field.
            CdbError::TooShort { got, .. } => {
                Sense::invalid_field_in_cdb(u16::try_from(got).unwrap_or(u16::MAX), None)
            }
            CdbError::InvalidField { byte, bit } => Sense::invalid_field_in_cdb(byte, bit),
        }
    }
}

/// A framed CDB: exactly as long as its operation code implies. Accessors never panic: bytes
/// past the end read as zero.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Cdb<'a> {
    bytes: &'a [u8],
}

impl<'a> Cdb<'a> {
    /// Frames `raw` (trailing bytes beyond the implied length are ignored, as iSCSI pads CDBs
    /// to 16 bytes) and checks the CONTROL byte: NACA = 1 (SAM-5 §5.2, ACA is not supported)
    /// and LINK = 1 (linked commands are obsolete) are INVALID FIELD IN CDB pointing at it.
    /// Vendor-specific groups 6 and 7 keep all bytes and get no CONTROL byte check.
    pub fn parse(raw: &'a [u8]) -> Result<Self, CdbError> {
        let &opcode = raw.first().ok_or(CdbError::Empty)?;
        let (len, control_at) = match opcode {
            // SPC-4 §4.2.3: variable length CDB, CONTROL in byte 1, length 8 + byte 7.
            0x7F => {
                let additional = raw.get(7).copied().ok_or(CdbError::TooShort {
                    needed: 8,
                    got: raw.len(),
                })?;
                let len = 8 + usize::from(additional);
                (len, 1)
            }
            0x60..=0x7E => return Err(CdbError::UnsupportedOpcode(opcode)),
            0xC0..=0xFF => return Ok(Self { bytes: raw }),
            _ => {
                let len = cdb_length(opcode).ok_or(CdbError::UnsupportedOpcode(opcode))?;
                (len, len - 1)
            }
        };
        let bytes = raw.get(..len).ok_or(CdbError::TooShort {
            needed: len,
            got: raw.len(),
        })?;
        let control = bytes[control_at];
        if control & 0x04 != 0 {
            return Err(CdbError::InvalidField {
                byte: control_at as u16,
                bit: Some(2),
            });
        }
        if control & 0x01 != 0 {
            return Err(CdbError::InvalidField {
                byte: control_at as u16,
                bit: Some(0),
            });
        }
        Ok(Self { bytes })
    }

    /// The framed bytes.
    pub fn as_bytes(&self) -> &'a [u8] {
        self.bytes
    }

    /// The CDB length.
    pub fn len(&self) -> usize {
        self.bytes.len()
    }

    /// Never true for a parsed CDB.
    pub fn is_empty(&self) -> bool {
        self.bytes.is_empty()
    }

    /// The operation code.
    pub fn opcode(&self) -> Opcode {
        Opcode(self.byte(0))
    }

    /// The SERVICE ACTION field (byte 1 bits 4:0) of commands that have one.
    pub fn service_action(&self) -> u8 {
        self.byte(1) & 0x1F
    }

    /// Byte `i`, zero past the end.
    pub fn byte(&self, i: usize) -> u8 {
        self.bytes.get(i).copied().unwrap_or(0)
    }

    /// Bit `bit` of byte `i`.
    pub fn bit(&self, i: usize, bit: u8) -> bool {
        self.byte(i) >> (bit & 7) & 1 != 0
    }

    /// Big-endian integer of `n` (at most 8) bytes starting at `i`.
    pub fn be(&self, i: usize, n: usize) -> u64 {
        (i..i + n.min(8)).fold(0, |acc, j| (acc << 8) | u64::from(self.byte(j)))
    }

    /// Big-endian 16-bit field at `i`.
    pub fn be16(&self, i: usize) -> u16 {
        self.be(i, 2) as u16
    }

    /// Big-endian 32-bit field at `i`.
    pub fn be32(&self, i: usize) -> u32 {
        self.be(i, 4) as u32
    }

    /// Big-endian 64-bit field at `i`.
    pub fn be64(&self, i: usize) -> u64 {
        self.be(i, 8)
    }

    /// The CONTROL byte (the last byte; byte 1 of a variable length CDB).
    pub fn control(&self) -> u8 {
        if self.byte(0) == 0x7F {
            self.byte(1)
        } else {
            self.byte(self.len().saturating_sub(1))
        }
    }
}

/// The SPC commands [`crate::ScsiDevice`] executes itself, decoded.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SpcCommand {
    /// INQUIRY (SPC-4 §6.6).
    Inquiry {
        evpd: bool,
        page: u8,
        allocation_length: u16,
    },
    /// TEST UNIT READY (SPC-4 §6.47).
    TestUnitReady,
    /// REQUEST SENSE (SPC-4 §6.39).
    RequestSense { desc: bool, allocation_length: u8 },
    /// MODE SENSE(6)/(10) (SPC-4 §6.11, §6.12); `ten` for the 10-byte form.
    ModeSense {
        ten: bool,
        dbd: bool,
        llbaa: bool,
        pc: u8,
        page: u8,
        subpage: u8,
        allocation_length: u16,
    },
    /// MODE SELECT(6)/(10) (SPC-4 §6.9, §6.10).
    ModeSelect {
        ten: bool,
        pf: bool,
        sp: bool,
        parameter_list_length: u16,
    },
    /// LOG SENSE (SPC-4 §6.8).
    LogSense {
        ppc: bool,
        sp: bool,
        pc: u8,
        page: u8,
        subpage: u8,
        parameter_pointer: u16,
        allocation_length: u16,
    },
    /// LOG SELECT (SPC-4 §6.7).
    LogSelect {
        pcr: bool,
        sp: bool,
        pc: u8,
        page: u8,
        subpage: u8,
        parameter_list_length: u16,
    },
    /// REPORT LUNS (SPC-4 §6.33).
    ReportLuns {
        select_report: u8,
        allocation_length: u32,
    },
    /// REPORT SUPPORTED OPERATION CODES (SPC-4 §6.35).
    ReportSupportedOpcodes {
        rctd: bool,
        reporting_options: u8,
        opcode: u8,
        service_action: u16,
        allocation_length: u32,
    },
    /// REPORT TIMESTAMP (SPC-4 §6.38).
    ReportTimestamp { allocation_length: u32 },
    /// SET TIMESTAMP (SPC-4 §6.45).
    SetTimestamp { parameter_list_length: u32 },
    /// RESERVE(6)/(10) (SPC-2 §7.21, §7.22).
    Reserve,
    /// RELEASE(6)/(10) (SPC-2 §7.19, §7.20).
    Release,
    /// PERSISTENT RESERVE IN (SPC-4 §6.13).
    PersistentReserveIn {
        service_action: u8,
        allocation_length: u16,
    },
    /// PERSISTENT RESERVE OUT (SPC-4 §6.14).
    PersistentReserveOut {
        service_action: u8,
        scope: u8,
        pr_type: u8,
        parameter_list_length: u32,
    },
}

/// Shorthand for an INVALID FIELD IN CDB error.
fn field(byte: u16, bit: u8) -> Sense {
    Sense::invalid_field_in_cdb(byte, Some(bit))
}

impl SpcCommand {
    /// Decodes `cdb` if it is one of the core's commands. `Ok(None)`: not a core command (the
    /// personality's, or unknown). Unsupported values are INVALID FIELD IN CDB with a field
    /// pointer at the field's most significant bit.
    pub fn parse(cdb: &Cdb<'_>) -> Result<Option<Self>, Sense> {
        let command = match cdb.opcode() {
            Opcode::INQUIRY => {
                // SPC-4 §6.6.1: CMDDT is obsolete; EVPD = 0 needs PAGE CODE = 0.
                if cdb.bit(1, 1) {
                    return Err(field(1, 1));
                }
                let evpd = cdb.bit(1, 0);
                if !evpd && cdb.byte(2) != 0 {
                    return Err(field(2, 7));
                }
                Self::Inquiry {
                    evpd,
                    page: cdb.byte(2),
                    allocation_length: cdb.be16(3),
                }
            }
            Opcode::TEST_UNIT_READY => Self::TestUnitReady,
            Opcode::REQUEST_SENSE => Self::RequestSense {
                desc: cdb.bit(1, 0),
                allocation_length: cdb.byte(4),
            },
            op @ (Opcode::MODE_SENSE_6 | Opcode::MODE_SENSE_10) => {
                let ten = op == Opcode::MODE_SENSE_10;
                if !ten && cdb.bit(1, 4) {
                    return Err(field(1, 4)); // LLBAA exists only in MODE SENSE(10)
                }
                Self::ModeSense {
                    ten,
                    dbd: cdb.bit(1, 3),
                    llbaa: cdb.bit(1, 4),
                    pc: cdb.byte(2) >> 6,
                    page: cdb.byte(2) & 0x3F,
                    subpage: cdb.byte(3),
                    allocation_length: if ten {
                        cdb.be16(7)
                    } else {
                        u16::from(cdb.byte(4))
                    },
                }
            }
            op @ (Opcode::MODE_SELECT_6 | Opcode::MODE_SELECT_10) => {
                let ten = op == Opcode::MODE_SELECT_10;
                Self::ModeSelect {
                    ten,
                    pf: cdb.bit(1, 4),
                    sp: cdb.bit(1, 0),
                    parameter_list_length: if ten {
                        cdb.be16(7)
                    } else {
                        u16::from(cdb.byte(4))
                    },
                }
            }
            Opcode::LOG_SENSE => Self::LogSense {
                ppc: cdb.bit(1, 1),
                sp: cdb.bit(1, 0),
                pc: cdb.byte(2) >> 6,
                page: cdb.byte(2) & 0x3F,
                subpage: cdb.byte(3),
                parameter_pointer: cdb.be16(5),
                allocation_length: cdb.be16(7),
            },
            Opcode::LOG_SELECT => Self::LogSelect {
                pcr: cdb.bit(1, 1),
                sp: cdb.bit(1, 0),
                pc: cdb.byte(2) >> 6,
                page: cdb.byte(2) & 0x3F,
                subpage: cdb.byte(3),
                parameter_list_length: cdb.be16(7),
            },
            Opcode::REPORT_LUNS => Self::ReportLuns {
                select_report: cdb.byte(2),
                allocation_length: cdb.be32(6),
            },
            Opcode::MAINTENANCE_IN => match cdb.service_action() {
                SA_REPORT_SUPPORTED_OPCODES => {
                    let reporting_options = cdb.byte(2) & 0x07;
                    if reporting_options > 3 {
                        return Err(field(2, 2));
                    }
                    Self::ReportSupportedOpcodes {
                        rctd: cdb.bit(2, 7),
                        reporting_options,
                        opcode: cdb.byte(3),
                        service_action: cdb.be16(4),
                        allocation_length: cdb.be32(6),
                    }
                }
                SA_REPORT_TIMESTAMP => Self::ReportTimestamp {
                    allocation_length: cdb.be32(6),
                },
                _ => return Ok(None),
            },
            Opcode::MAINTENANCE_OUT => match cdb.service_action() {
                SA_SET_TIMESTAMP => Self::SetTimestamp {
                    parameter_list_length: cdb.be32(6),
                },
                _ => return Ok(None),
            },
            Opcode::RESERVE_6 | Opcode::RESERVE_10 | Opcode::RELEASE_6 | Opcode::RELEASE_10 => {
                // SPC-2 §7.21: third-party and extent reservations are not supported.
                let op = cdb.opcode();
                let ten = op == Opcode::RESERVE_10 || op == Opcode::RELEASE_10;
                if ten && cdb.bit(1, 4) {
                    return Err(field(1, 4)); // 3RDPTY
                }
                if ten && cdb.bit(1, 1) {
                    return Err(field(1, 1)); // LONGID
                }
                if cdb.bit(1, 0) {
                    return Err(field(1, 0)); // EXTENT (obsolete)
                }
                if op == Opcode::RESERVE_6 || op == Opcode::RESERVE_10 {
                    Self::Reserve
                } else {
                    Self::Release
                }
            }
            Opcode::PERSISTENT_RESERVE_IN => {
                let service_action = cdb.service_action();
                if service_action > 3 {
                    return Err(field(1, 4));
                }
                Self::PersistentReserveIn {
                    service_action,
                    allocation_length: cdb.be16(7),
                }
            }
            Opcode::PERSISTENT_RESERVE_OUT => {
                let service_action = cdb.service_action();
                if service_action > 6 {
                    // REGISTER AND MOVE (07h) and REPLACE LOST RESERVATION (08h) unsupported.
                    return Err(field(1, 4));
                }
                Self::PersistentReserveOut {
                    service_action,
                    scope: cdb.byte(2) >> 4,
                    pr_type: cdb.byte(2) & 0x0F,
                    parameter_list_length: cdb.be32(5),
                }
            }
            _ => return Ok(None),
        };
        Ok(Some(command))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sense::KeySpecific;

    #[test]
    fn lengths_by_group() {
        assert_eq!(Cdb::parse(&[0x12, 0, 0, 0, 36, 0, 9, 9]).unwrap().len(), 6);
        let mut read10 = [0u8; 16];
        read10[0] = 0x28;
        assert_eq!(Cdb::parse(&read10).unwrap().len(), 10);
        read10[0] = 0x88;
        assert_eq!(Cdb::parse(&read10).unwrap().len(), 16);
        read10[0] = 0xA8;
        assert_eq!(Cdb::parse(&read10).unwrap().len(), 12);
    }

    #[test]
    fn framing_errors() {
        assert_eq!(Cdb::parse(&[]), Err(CdbError::Empty));
        assert_eq!(
            Cdb::parse(&[0x28, 0, 0]),
            Err(CdbError::TooShort { needed: 10, got: 3 })
        );
        assert_eq!(
            Cdb::parse(&[0x65, 0, 0, 0, 0, 0]),
            Err(CdbError::UnsupportedOpcode(0x65))
        );
        assert_eq!(
            Cdb::parse(&[0, 0, 0, 0, 0, 0x04]),
            Err(CdbError::InvalidField {
                byte: 5,
                bit: Some(2)
            })
        );
        assert_eq!(
            Cdb::parse(&[0x7F, 0x04, 0, 0, 0, 0, 0, 0]),
            Err(CdbError::InvalidField {
                byte: 1,
                bit: Some(2)
            })
        );
        assert_eq!(
            Cdb::parse(&[0x7F, 0, 0, 0, 0, 0, 0, 4]),
            Err(CdbError::TooShort { needed: 12, got: 8 })
        );
        let sense = Sense::from(CdbError::TooShort { needed: 10, got: 3 });
        assert_eq!(
            sense.key_specific,
            Some(KeySpecific::FieldPointer {
                cd: true,
                byte: 3,
                bit: None
            })
        );
    }

    #[test]
    fn accessors_never_panic() {
        let cdb = Cdb::parse(&[0x00, 1, 2, 3, 4, 0]).unwrap();
        assert_eq!(cdb.be64(4), 0x0400_0000_0000_0000);
        assert_eq!(cdb.byte(100), 0);
        assert_eq!(cdb.be32(1), 0x0102_0304);
        assert_eq!(cdb.control(), 0);
    }

    #[test]
    fn inquiry_fields() {
        let cdb = Cdb::parse(&[0x12, 0x01, 0x80, 0x01, 0x00, 0]).unwrap();
        assert_eq!(
            SpcCommand::parse(&cdb),
            Ok(Some(SpcCommand::Inquiry {
                evpd: true,
                page: 0x80,
                allocation_length: 256
            }))
        );
        let cdb = Cdb::parse(&[0x12, 0x00, 0x80, 0, 36, 0]).unwrap();
        assert_eq!(
            SpcCommand::parse(&cdb),
            Err(Sense::invalid_field_in_cdb(2, Some(7)))
        );
        let cdb = Cdb::parse(&[0x12, 0x02, 0, 0, 36, 0]).unwrap();
        assert_eq!(
            SpcCommand::parse(&cdb),
            Err(Sense::invalid_field_in_cdb(1, Some(1)))
        );
    }

    #[test]
    fn non_core_commands_pass_through() {
        let cdb = Cdb::parse(&[0x08, 0, 0, 0, 1, 0]).unwrap();
        assert_eq!(SpcCommand::parse(&cdb), Ok(None));
        let mut sa = [0u8; 12];
        sa[0] = 0xA3;
        sa[1] = 0x05;
        assert_eq!(SpcCommand::parse(&Cdb::parse(&sa).unwrap()), Ok(None));
    }
}
