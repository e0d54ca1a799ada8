//! Commands every device type has (SPC-4 §6), the answers an initiator reads from them, and
//! the MODE SELECT(6) parameter lists that set a tape drive's block length.

use super::{ResponseError, be, need};
use crate::mode::BlockDescriptor;

/// TEST UNIT READY (SPC-4 §6.47).
pub const TEST_UNIT_READY: [u8; 6] = [0x00, 0, 0, 0, 0, 0];

/// MODE SENSE page code for every page (SPC-4 §7.5.1).
pub const ALL_PAGES: u8 = 0x3F;

/// REQUEST SENSE (SPC-4 §6.39) for fixed-format sense data (DESC = 0).
pub fn request_sense(allocation_length: u8) -> [u8; 6] {
    [0x03, 0, 0, 0, allocation_length, 0]
}

/// INQUIRY (SPC-4 §6.6) for the standard data (EVPD = 0, PAGE CODE 0).
pub fn inquiry(allocation_length: u16) -> [u8; 6] {
    let [a, b] = allocation_length.to_be_bytes();
    [0x12, 0, 0, a, b, 0]
}

/// INQUIRY (SPC-4 §6.6) for vital product data page `page` (EVPD = 1).
pub fn inquiry_vpd(page: u8, allocation_length: u16) -> [u8; 6] {
    let [a, b] = allocation_length.to_be_bytes();
    [0x12, 0x01, page, a, b, 0]
}

/// SECURITY PROTOCOL IN (SPC-4 §6.30): `protocol` and its protocol-specific field (the page,
/// for tape data encryption), in bytes (INC_512 = 0).
pub fn security_protocol_in(protocol: u8, specific: u16, allocation_length: u32) -> [u8; 12] {
    let [s0, s1] = specific.to_be_bytes();
    let [a, b, c, d] = allocation_length.to_be_bytes();
    [0xA2, protocol, s0, s1, 0, 0, a, b, c, d, 0, 0]
}

/// SECURITY PROTOCOL OUT (SPC-4 §6.31) of `transfer_length` bytes (INC_512 = 0).
pub fn security_protocol_out(protocol: u8, specific: u16, transfer_length: u32) -> [u8; 12] {
    let [s0, s1] = specific.to_be_bytes();
    let [a, b, c, d] = transfer_length.to_be_bytes();
    [0xB5, protocol, s0, s1, 0, 0, a, b, c, d, 0, 0]
}

/// REPORT LUNS (SPC-4 §6.33), SELECT REPORT 00h (every logical unit but the well-known ones).
pub fn report_luns(allocation_length: u32) -> [u8; 12] {
    let a = allocation_length.to_be_bytes();
    [0xA0, 0, 0, 0, 0, 0, a[0], a[1], a[2], a[3], 0, 0]
}

/// MODE SENSE(6) (SPC-4 §6.11) of the current values of `page` (subpage 0), block
/// descriptors included (DBD = 0).
pub fn mode_sense6(page: u8, allocation_length: u8) -> [u8; 6] {
    [0x1A, 0, page & 0x3F, 0, allocation_length, 0]
}

/// MODE SENSE(10) (SPC-4 §6.12) of the current values of `page` (subpage 0), short block
/// descriptors included (DBD = 0, LLBAA = 0).
pub fn mode_sense10(page: u8, allocation_length: u16) -> [u8; 10] {
    let [a, b] = allocation_length.to_be_bytes();
    [0x5A, 0, page & 0x3F, 0, 0, 0, 0, a, b, 0]
}

/// MODE SELECT(6) (SPC-4 §6.9) with PF = 1 (pages in the SPC format), SP = 0, announcing a
/// parameter list of `parameter_list_length` bytes.
pub fn mode_select6(parameter_list_length: u8) -> [u8; 6] {
    [0x15, 0x10, 0, 0, parameter_list_length, 0]
}

/// MODE SELECT(10) (SPC-4 §6.10) with PF = 1, SP = 0.
pub fn mode_select10(parameter_list_length: u16) -> [u8; 10] {
    let [a, b] = parameter_list_length.to_be_bytes();
    [0x55, 0x10, 0, 0, 0, 0, 0, a, b, 0]
}

/// LOG SENSE (SPC-4 §6.8) of `page`, cumulative values (PC = 01b), from the first parameter.
pub fn log_sense(page: u8, allocation_length: u16) -> [u8; 10] {
    let [a, b] = allocation_length.to_be_bytes();
    [0x4D, 0, 0x40 | (page & 0x3F), 0, 0, 0, 0, a, b, 0]
}

/// PREVENT ALLOW MEDIUM REMOVAL (SSC-4, SMC-3; SPC-3 §6.13): `prevent` sets PREVENT = 01b.
pub fn prevent_allow_medium_removal(prevent: bool) -> [u8; 6] {
    [0x1E, 0, 0, 0, u8::from(prevent), 0]
}

/// Standard INQUIRY data (SPC-4 §6.6.2), the fields an initiator shows.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StandardInquiry {
    /// PERIPHERAL DEVICE TYPE: 01h sequential access (tape), 08h medium changer, 00h disk.
    pub device_type: u8,
    /// RMB: the medium is removable.
    pub removable: bool,
    /// T10 VENDOR IDENTIFICATION, trailing spaces removed.
    pub vendor: String,
    /// PRODUCT IDENTIFICATION, trailing spaces removed.
    pub product: String,
    /// PRODUCT REVISION LEVEL, trailing spaces removed.
    pub revision: String,
}

/// Parses standard INQUIRY data; the fixed 36 bytes must be there.
pub fn parse_inquiry(data: &[u8]) -> Result<StandardInquiry, ResponseError> {
    need("INQUIRY", data, 36)?;
    let text = |r: std::ops::Range<usize>| String::from_utf8_lossy(&data[r]).trim().to_string();
    Ok(StandardInquiry {
        device_type: data[0] & 0x1F,
        removable: data[1] & 0x80 != 0,
        vendor: text(8..16),
        product: text(16..32),
        revision: text(32..36),
    })
}

/// The LUNs of a REPORT LUNS answer (SPC-4 §6.33): the list length, then 8-byte LUNs decoded
/// with [`crate::decode_lun`]. A list cut short by the allocation length yields the LUNs
/// that arrived.
pub fn parse_report_luns(data: &[u8]) -> Result<Vec<u64>, ResponseError> {
    need("REPORT LUNS", data, 8)?;
    let list = be(data, 0, 4) as usize;
    let end = 8usize.saturating_add(list).min(data.len());
    Ok(data[8..end]
        .chunks_exact(8)
        .map(|entry| {
            let mut raw = [0u8; 8];
            raw.copy_from_slice(entry);
            crate::decode_lun(raw)
        })
        .collect())
}

/// A MODE SENSE(6) answer (SPC-4 §7.5.5 mode parameter header, §7.5.6 block descriptor): the
/// header and the first block descriptor, if one came whole.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ModeSense6 {
    pub medium_type: u8,
    /// DEVICE-SPECIFIC PARAMETER; for tape (SSC-4 §8.3.1) WP in bit 7, BUFFERED MODE in bits
    /// 6:4, SPEED in bits 3:0.
    pub device_specific: u8,
    /// The first (general, SSC-4 §8.3.3) block descriptor: density code, blocks, block length.
    pub block_descriptor: Option<BlockDescriptor>,
}

/// WP of a tape's device-specific parameter (SSC-4 §8.3.1): the medium is write protected.
pub const WRITE_PROTECT: u8 = 0x80;

/// Parses the header and first block descriptor of a MODE SENSE(6) answer.
pub fn parse_mode_sense6(data: &[u8]) -> Result<ModeSense6, ResponseError> {
    need("MODE SENSE(6)", data, 4)?;
    let block_descriptor = (data[3] >= 8 && data.len() >= 12).then(|| BlockDescriptor {
        density: data[4],
        blocks: be(data, 5, 3),
        block_length: be(data, 9, 3) as u32,
    });
    Ok(ModeSense6 {
        medium_type: data[1],
        device_specific: data[2],
        block_descriptor,
    })
}

impl ModeSense6 {
    /// The block length of the first block descriptor (0: variable-length records).
    pub fn block_length(&self) -> Option<u32> {
        self.block_descriptor.map(|d| d.block_length)
    }

    /// The MODE SELECT(6) parameter list that keeps this density and device-specific
    /// parameter and sets `block_length` (0: variable-length records, SSC-4 §8.3.3).
    pub fn select_block_length(&self, block_length: u32) -> [u8; 12] {
        let density = self.block_descriptor.map_or(0, |d| d.density);
        block_length_list(self.device_specific, density, block_length)
    }
}

/// A MODE SELECT(6) parameter list of a header and one block descriptor (SPC-4 §7.5.5,
/// §7.5.6): `device_specific` without WP (not settable, SSC-4 §8.3.1), `density`, zero
/// blocks and `block_length` (0: variable-length records). Send with
/// [`mode_select6`]`(12)`.
pub fn block_length_list(device_specific: u8, density: u8, block_length: u32) -> [u8; 12] {
    let [l0, l1, l2] = super::be24(block_length);
    // MODE DATA LENGTH is reserved in MODE SELECT (SPC-4 §7.5.5); 8: one short descriptor.
    [
        0,
        0,
        device_specific & !WRITE_PROTECT,
        8,
        density,
        0,
        0,
        0,
        0,
        l0,
        l1,
        l2,
    ]
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use proptest::prelude::*;

    use super::*;
    use crate::cdb::{Cdb, SpcCommand};
    use crate::{ItNexus, LunTable, NullDisk, ScsiDevice, Status, mode};

    fn spc(cdb: &[u8]) -> SpcCommand {
        let framed = Cdb::parse(cdb).expect("frames");
        assert_eq!(framed.len(), cdb.len(), "length implied by the opcode");
        SpcCommand::parse(&framed)
            .expect("valid fields")
            .expect("a core command")
    }

    fn execute(table: &LunTable, lun: u64, cdb: &[u8], data_out: &[u8]) -> crate::Response {
        let nexus = ItNexus::new("iqn.test:kit,i,0x000000000001", 1);
        table.execute(lun, crate::initiator::request(&nexus, cdb, data_out))
    }

    proptest! {
        #[test]
        fn builders_decode_to_what_they_say(page in 0u8..0x40, alloc in any::<u16>(), alloc32 in any::<u32>(), len in any::<u8>()) {
            prop_assert_eq!(spc(&TEST_UNIT_READY), SpcCommand::TestUnitReady);
            prop_assert_eq!(spc(&request_sense(len)), SpcCommand::RequestSense { desc: false, allocation_length: len });
            prop_assert_eq!(spc(&inquiry(alloc)), SpcCommand::Inquiry { evpd: false, page: 0, allocation_length: alloc });
            prop_assert_eq!(spc(&inquiry_vpd(page, alloc)), SpcCommand::Inquiry { evpd: true, page, allocation_length: alloc });
            prop_assert_eq!(spc(&report_luns(alloc32)), SpcCommand::ReportLuns { select_report: 0, allocation_length: alloc32 });
            prop_assert_eq!(spc(&mode_sense6(page, len)), SpcCommand::ModeSense {
                ten: false, dbd: false, llbaa: false, pc: 0, page, subpage: 0, allocation_length: u16::from(len),
            });
            prop_assert_eq!(spc(&mode_sense10(page, alloc)), SpcCommand::ModeSense {
                ten: true, dbd: false, llbaa: false, pc: 0, page, subpage: 0, allocation_length: alloc,
            });
            prop_assert_eq!(spc(&mode_select6(len)), SpcCommand::ModeSelect { ten: false, pf: true, sp: false, parameter_list_length: u16::from(len) });
            prop_assert_eq!(spc(&mode_select10(alloc)), SpcCommand::ModeSelect { ten: true, pf: true, sp: false, parameter_list_length: alloc });
            prop_assert_eq!(spc(&log_sense(page, alloc)), SpcCommand::LogSense {
                ppc: false, sp: false, pc: 1, page, subpage: 0, parameter_pointer: 0, allocation_length: alloc,
            });
            let prevent = prevent_allow_medium_removal(len & 1 == 1);
            prop_assert_eq!(Cdb::parse(&prevent).unwrap().byte(4), len & 1);
        }

        #[test]
        fn report_luns_lists_the_table(luns in proptest::collection::btree_set(0u64..16_384, 1..20)) {
            let mut table = LunTable::new();
            for &lun in &luns {
                table.insert(lun, Arc::new(ScsiDevice::new(NullDisk::new(512, 1 << 20))));
            }
            let first = *luns.iter().next().unwrap();
            let r = execute(&table, first, &report_luns(4096), &[]);
            prop_assert_eq!(r.status, Status::Good);
            let listed: std::collections::BTreeSet<u64> = parse_report_luns(&r.data_in).unwrap().into_iter().collect();
            prop_assert_eq!(listed, luns);
        }

        #[test]
        fn block_length_lists_are_what_the_target_reads(device_specific in any::<u8>(), density in any::<u8>(), block_length in 0u32..1 << 24) {
            let list = block_length_list(device_specific, density, block_length);
            let params = mode::parse_mode_select(&list, false, false, &[]).unwrap();
            prop_assert_eq!(params.device_specific, device_specific & 0x7F);
            prop_assert_eq!(params.block_descriptors, vec![BlockDescriptor { density, blocks: 0, block_length }]);
            // And what MODE SENSE(6) reports in the same layout reads back.
            let mut sense = list;
            sense[0] = 11;
            let parsed = parse_mode_sense6(&sense).unwrap();
            prop_assert_eq!(parsed.block_length(), Some(block_length));
            prop_assert_eq!(parsed.select_block_length(block_length), list);
        }

        #[test]
        fn parsers_never_panic(data in proptest::collection::vec(any::<u8>(), 0..64)) {
            let _ = parse_inquiry(&data);
            let _ = parse_report_luns(&data);
            let _ = parse_mode_sense6(&data);
        }
    }

    #[test]
    fn inquiry_and_mode_sense_of_a_real_device() {
        let mut table = LunTable::new();
        table.insert(0, Arc::new(ScsiDevice::new(NullDisk::new(512, 1 << 20))));
        let _ = execute(&table, 0, &TEST_UNIT_READY, &[]); // the power-on unit attention
        let r = execute(&table, 0, &inquiry(96), &[]);
        assert_eq!(r.status, Status::Good);
        let inquiry = parse_inquiry(&r.data_in).unwrap();
        assert_eq!((inquiry.device_type, inquiry.vendor.as_str()), (0, "REEL"));
        assert!(parse_inquiry(&r.data_in[..20]).is_err());

        let r = execute(&table, 0, &mode_sense6(ALL_PAGES, 255), &[]);
        assert_eq!(r.status, Status::Good);
        let mode = parse_mode_sense6(&r.data_in).unwrap();
        assert_eq!(mode.block_length(), Some(512));
        assert_eq!(
            parse_mode_sense6(&[3, 0, 0, 0]).unwrap().block_descriptor,
            None
        );
    }
}
