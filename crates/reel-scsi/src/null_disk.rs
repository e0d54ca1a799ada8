//! `NullDisk`: an SBC-3 direct-access personality that discards writes and reads zeros, for
//! transport throughput benchmarks and conformance suites (libiscsi). The data path never
//! allocates for transfers up to 8 MiB: reads return slices of one static zero buffer.

use bytes::Bytes;

use crate::Response;
use crate::cdb::{Cdb, Opcode, SA_READ_CAPACITY_16};
use crate::device::{Command, DeviceContext, Identity, Personality, ScsiResult};
use crate::mode::{BlockDescriptor, ModePage, ModePageControl, ModeSelectParams};
use crate::opcodes::OpcodeDescriptor;
use crate::reservation::Access;
use crate::sense::{Asc, Sense, SenseKey};

/// Reads up to this size are served from [`ZEROS`] without allocating.
const STATIC_ZEROS: usize = 8 << 20;
static ZEROS: [u8; STATIC_ZEROS] = [0; STATIC_ZEROS];

/// Largest transfer accepted, in bytes (reported in the Block Limits VPD page).
const MAX_TRANSFER_BYTES: u64 = 64 << 20;

/// Largest block size accepted.
const MAX_BLOCK_SIZE: u32 = 1 << 20;

/// `len` zero bytes.
fn zeros(len: usize) -> Bytes {
    match ZEROS.get(..len) {
        Some(slice) => Bytes::from_static(slice),
        None => Bytes::from(vec![0; len]),
    }
}

/// A disk of `blocks` blocks of `block_size` bytes that stores nothing.
#[derive(Clone, Debug)]
pub struct NullDisk {
    identity: Identity,
    block_size: u32,
    blocks: u64,
    write_cache: bool,
}

impl NullDisk {
    /// A disk with the default identity ("REEL", "NULLDISK"). A zero block size becomes 512;
    /// block sizes are capped at 1 MiB (keeps every transfer within the 64 MiB maximum).
    pub fn new(block_size: u32, blocks: u64) -> Self {
        let mut identity = Identity::new(
            0x00,
            "REEL",
            "NULLDISK",
            "0001",
            "NULLDISK0",
            0x3000_5245_454C_0001,
        );
        identity.version_descriptors = vec![0x04C0]; // SBC-3
        Self {
            identity,
            block_size: if block_size == 0 {
                512
            } else {
                block_size.min(MAX_BLOCK_SIZE)
            },
            blocks,
            write_cache: true,
        }
    }

    /// Replaces the identity (the peripheral device type stays 00h).
    pub fn with_identity(mut self, mut identity: Identity) -> Self {
        identity.peripheral_type = 0;
        self.identity = identity;
        self
    }

    /// Block size in bytes.
    pub fn block_size(&self) -> u32 {
        self.block_size
    }

    /// Capacity in blocks.
    pub fn blocks(&self) -> u64 {
        self.blocks
    }

    fn max_transfer_blocks(&self) -> u64 {
        (MAX_TRANSFER_BYTES / u64::from(self.block_size)).max(1)
    }

    /// SBC-3 §4.5: LBA + length must stay within the capacity; a zero-length transfer may
    /// start at the capacity. The INFORMATION field holds the requested LBA.
    fn check_range(&self, lba: u64, blocks: u64) -> ScsiResult<()> {
        // SBC-3 §4.5: an LBA past the last one is out of range even for a zero-length transfer.
        if lba >= self.blocks || self.blocks - lba < blocks {
            return Err(
                Sense::illegal_request(Asc::LOGICAL_BLOCK_ADDRESS_OUT_OF_RANGE)
                    .with_information(lba),
            );
        }
        Ok(())
    }

    /// Common checks of READ/WRITE/VERIFY: protection field (must be 0), transfer size, range.
    fn check_transfer(
        &self,
        cdb: &Cdb<'_>,
        lba: u64,
        blocks: u64,
        length_at: u16,
    ) -> ScsiResult<()> {
        if cdb.byte(0) != Opcode::READ_6.0
            && cdb.byte(0) != Opcode::WRITE_6.0
            && cdb.byte(1) & 0xE0 != 0
        {
            return Err(Sense::invalid_field_in_cdb(1, Some(7))); // RDPROTECT/WRPROTECT/VRPROTECT
        }
        if blocks > self.max_transfer_blocks() {
            return Err(Sense::invalid_field_in_cdb(length_at, None));
        }
        self.check_range(lba, blocks)
    }

    fn transfer_bytes(&self, blocks: u64) -> usize {
        // Bounded by max_transfer_blocks: at most MAX_TRANSFER_BYTES.
        usize::try_from(blocks * u64::from(self.block_size)).unwrap_or(usize::MAX)
    }

    fn read_capacity_10(&self, cdb: &Cdb<'_>) -> ScsiResult<Bytes> {
        // SBC-3 §5.15: LOGICAL BLOCK ADDRESS must be zero when PMI is zero.
        if !cdb.bit(8, 0) && cdb.be32(2) != 0 {
            return Err(Sense::invalid_field_in_cdb(2, Some(7)));
        }
        let last = self.blocks.saturating_sub(1);
        let last = u32::try_from(last).unwrap_or(u32::MAX);
        let mut data = last.to_be_bytes().to_vec();
        data.extend_from_slice(&self.block_size.to_be_bytes());
        Ok(Bytes::from(data))
    }

    fn read_capacity_16(&self, cdb: &Cdb<'_>) -> ScsiResult<Bytes> {
        // SBC-3 §5.16, table 64: 32 bytes; no protection, one logical block per physical block.
        let mut data = vec![0u8; 32];
        data[..8].copy_from_slice(&self.blocks.saturating_sub(1).to_be_bytes());
        data[8..12].copy_from_slice(&self.block_size.to_be_bytes());
        let allocation_length = usize::try_from(cdb.be32(10)).unwrap_or(usize::MAX);
        data.truncate(allocation_length);
        Ok(Bytes::from(data))
    }

    fn read(&self, cdb: &Cdb<'_>, lba: u64, blocks: u64, length_at: u16) -> ScsiResult<Bytes> {
        self.check_transfer(cdb, lba, blocks, length_at)?;
        Ok(zeros(self.transfer_bytes(blocks)))
    }

    fn write(
        &self,
        command: &Command<'_>,
        lba: u64,
        blocks: u64,
        length_at: u16,
    ) -> ScsiResult<Bytes> {
        self.check_transfer(&command.cdb, lba, blocks, length_at)?;
        // The data-out buffer must be exactly what the CDB announces (the transport reports
        // overflow and underflow; a mismatched write is not executed).
        if command.data_out.len() != self.transfer_bytes(blocks) {
            return Err(Sense::invalid_field_in_cdb(length_at, None));
        }
        Ok(Bytes::new())
    }

    fn verify(
        &self,
        command: &Command<'_>,
        lba: u64,
        blocks: u64,
        length_at: u16,
    ) -> ScsiResult<Bytes> {
        let cdb = &command.cdb;
        self.check_transfer(cdb, lba, blocks, length_at)?;
        // SBC-3 §5.33: BYTCHK 00b medium verification only; 01b compare each block; 11b
        // compare one block with each block; 10b reserved.
        let expected = match (cdb.byte(1) >> 1) & 0x03 {
            0 => return Ok(Bytes::new()),
            1 => self.transfer_bytes(blocks),
            3 => self.transfer_bytes(blocks.min(1)),
            _ => return Err(Sense::invalid_field_in_cdb(1, Some(2))),
        };
        if command.data_out.len() != expected {
            return Err(Sense::invalid_field_in_cdb(length_at, None));
        }
        // The medium reads as zeros: any non-zero byte is a miscompare at its offset.
        match command.data_out.iter().position(|&b| b != 0) {
            None => Ok(Bytes::new()),
            Some(offset) => Err(Sense::new(
                SenseKey::MISCOMPARE,
                Asc::MISCOMPARE_DURING_VERIFY_OPERATION,
            )
            .with_information(offset as u64)),
        }
    }

    fn synchronize_cache(&self, lba: u64, blocks: u64) -> ScsiResult<Bytes> {
        // SBC-3 §5.22: NUMBER OF LOGICAL BLOCKS zero means through the last LBA.
        let blocks = if blocks == 0 {
            self.blocks.saturating_sub(lba)
        } else {
            blocks
        };
        self.check_range(lba, blocks)?;
        Ok(Bytes::new())
    }

    fn caching_page(&self) -> ModePage {
        // SBC-3 §6.4.5: caching mode page 08h, 18 bytes of parameters; WCE changeable.
        let mut current = vec![0u8; 18];
        current[0] = u8::from(self.write_cache) << 2;
        let mut default = vec![0u8; 18];
        default[0] = 0x04;
        let mut changeable = vec![0u8; 18];
        changeable[0] = 0x04;
        ModePage {
            page: 0x08,
            subpage: 0,
            current,
            changeable,
            default,
            min_select_len: None,
        }
    }
}

impl Personality for NullDisk {
    /// Nothing is stored: no command ever waits for I/O.
    fn may_block(&self) -> bool {
        false
    }

    /// The MAXIMUM TRANSFER LENGTH of the Block Limits VPD page, in bytes.
    fn max_transfer_length(&self) -> u32 {
        u32::try_from(MAX_TRANSFER_BYTES).unwrap_or(u32::MAX)
    }

    /// SBC-3 §6.5.3: INVALID FIELD IN CDB, pointing at the TRANSFER LENGTH field of the
    /// commands that carry data to the disk.
    fn transfer_too_long(&self, cdb: &Cdb<'_>) -> Sense {
        let length_at = match cdb.opcode() {
            Opcode::WRITE_6 => 4,
            Opcode::WRITE_10 | Opcode::VERIFY_10 => 7,
            Opcode::WRITE_12 => 6,
            Opcode::WRITE_16 | Opcode::VERIFY_16 => 10,
            _ => return Sense::illegal_request(Asc::INVALID_FIELD_IN_CDB),
        };
        Sense::invalid_field_in_cdb(length_at, None)
    }

    fn identity(&self) -> &Identity {
        &self.identity
    }

    fn vpd_pages(&self) -> Vec<u8> {
        vec![0xB0, 0xB1]
    }

    fn vpd_page(&self, page: u8) -> Option<Vec<u8>> {
        let mut body = vec![0u8; 0x3C];
        match page {
            // Block Limits (SBC-3 §6.6.4).
            0xB0 => {
                body[2..4].copy_from_slice(&1u16.to_be_bytes()); // OPTIMAL TRANSFER LENGTH GRANULARITY
                let max = u32::try_from(self.max_transfer_blocks()).unwrap_or(u32::MAX);
                body[4..8].copy_from_slice(&max.to_be_bytes()); // MAXIMUM TRANSFER LENGTH
                body[8..12].copy_from_slice(&max.to_be_bytes()); // OPTIMAL TRANSFER LENGTH
            }
            // Block Device Characteristics (SBC-3 §6.6.2): non-rotating medium.
            0xB1 => body[0..2].copy_from_slice(&1u16.to_be_bytes()),
            _ => return None,
        }
        Some(body)
    }

    fn mode_pages(&self) -> Vec<ModePage> {
        vec![self.caching_page()]
    }

    fn block_descriptor(&self, pc: ModePageControl) -> Option<BlockDescriptor> {
        Some(match pc {
            ModePageControl::Changeable => BlockDescriptor {
                density: 0,
                blocks: 0,
                block_length: 0,
            },
            _ => BlockDescriptor {
                density: 0,
                blocks: self.blocks,
                block_length: self.block_size,
            },
        })
    }

    fn device_specific_parameter(&self) -> u8 {
        0x10 // DPOFUA (SBC-3 §6.4.1)
    }

    fn mode_select(
        &mut self,
        _ctx: &mut DeviceContext<'_>,
        params: &ModeSelectParams,
    ) -> ScsiResult<()> {
        // The block size cannot change; a zero block length means "unchanged".
        if params
            .block_descriptors
            .iter()
            .any(|d| d.block_length != 0 && d.block_length != self.block_size)
        {
            return Err(Sense::invalid_field_in_parameter_list(3, None));
        }
        for (page, _, values) in &params.pages {
            if *page == 0x08 {
                self.write_cache = values.first().is_some_and(|b| b & 0x04 != 0);
            }
        }
        Ok(())
    }

    fn supported_opcodes(&self) -> Vec<OpcodeDescriptor> {
        let io = |usage: &[u8]| OpcodeDescriptor::new(usage).with_timeouts(0, 30);
        vec![
            io(&[0x08, 0x1F, 0xFF, 0xFF, 0xFF, 0]), // READ(6)
            io(&[0x0A, 0x1F, 0xFF, 0xFF, 0xFF, 0]), // WRITE(6)
            io(&[0x1B, 0x01, 0, 0x0F, 0xF7, 0]),    // START STOP UNIT
            io(&[0x25, 0, 0xFF, 0xFF, 0xFF, 0xFF, 0, 0, 0x01, 0]), // READ CAPACITY(10)
            io(&[0x28, 0x18, 0xFF, 0xFF, 0xFF, 0xFF, 0, 0xFF, 0xFF, 0]), // READ(10)
            io(&[0x2A, 0x18, 0xFF, 0xFF, 0xFF, 0xFF, 0, 0xFF, 0xFF, 0]), // WRITE(10)
            io(&[0x2F, 0x16, 0xFF, 0xFF, 0xFF, 0xFF, 0, 0xFF, 0xFF, 0]), // VERIFY(10)
            io(&[0x35, 0x02, 0xFF, 0xFF, 0xFF, 0xFF, 0, 0xFF, 0xFF, 0]), // SYNCHRONIZE CACHE(10)
            io(&[
                0x88, 0x18, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF,
                0, 0,
            ]), // READ(16)
            io(&[
                0x8A, 0x18, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF,
                0, 0,
            ]), // WRITE(16)
            io(&[
                0x8F, 0x16, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF,
                0, 0,
            ]), // VERIFY(16)
            io(&[
                0x91, 0x02, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF,
                0, 0,
            ]), // SYNCHRONIZE CACHE(16)
            OpcodeDescriptor::with_service_action(&[
                0x9E, 0x10, 0, 0, 0, 0, 0, 0, 0, 0, 0xFF, 0xFF, 0xFF, 0xFF, 0, 0,
            ]), // READ CAPACITY(16)
            io(&[
                0xA8, 0x18, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0, 0,
            ]), // READ(12)
            io(&[
                0xAA, 0x18, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0, 0,
            ]), // WRITE(12)
        ]
    }

    fn access(&self, cdb: &Cdb<'_>) -> Access {
        // SBC-3 §4.17, table "SBC-3 commands that are allowed in the presence of various
        // reservations".
        match cdb.opcode() {
            Opcode::READ_CAPACITY_10 | Opcode::SERVICE_ACTION_IN_16 => Access::PersistentAllowed,
            Opcode::READ_6 | Opcode::READ_10 | Opcode::READ_12 | Opcode::READ_16 => Access::Read,
            Opcode::VERIFY_10 | Opcode::VERIFY_16 => Access::Read,
            _ => Access::Write,
        }
    }

    fn execute(&mut self, ctx: &mut DeviceContext<'_>, command: &Command<'_>) -> Option<Response> {
        let cdb = &command.cdb;
        let result = match cdb.opcode() {
            Opcode::READ_6 => {
                // SBC-3 §5.7: TRANSFER LENGTH 0 means 256 blocks.
                let blocks = match cdb.byte(4) {
                    0 => 256,
                    n => u64::from(n),
                };
                self.read(cdb, cdb.be(1, 3) & 0x1F_FFFF, blocks, 4)
            }
            Opcode::READ_10 => self.read(cdb, u64::from(cdb.be32(2)), u64::from(cdb.be16(7)), 7),
            Opcode::READ_12 => self.read(cdb, u64::from(cdb.be32(2)), u64::from(cdb.be32(6)), 6),
            Opcode::READ_16 => self.read(cdb, cdb.be64(2), u64::from(cdb.be32(10)), 10),
            Opcode::WRITE_6 => {
                let blocks = match cdb.byte(4) {
                    0 => 256,
                    n => u64::from(n),
                };
                self.write(command, cdb.be(1, 3) & 0x1F_FFFF, blocks, 4)
            }
            Opcode::WRITE_10 => {
                self.write(command, u64::from(cdb.be32(2)), u64::from(cdb.be16(7)), 7)
            }
            Opcode::WRITE_12 => {
                self.write(command, u64::from(cdb.be32(2)), u64::from(cdb.be32(6)), 6)
            }
            Opcode::WRITE_16 => self.write(command, cdb.be64(2), u64::from(cdb.be32(10)), 10),
            Opcode::VERIFY_10 => {
                self.verify(command, u64::from(cdb.be32(2)), u64::from(cdb.be16(7)), 7)
            }
            Opcode::VERIFY_16 => self.verify(command, cdb.be64(2), u64::from(cdb.be32(10)), 10),
            Opcode::SYNCHRONIZE_CACHE_10 => {
                self.synchronize_cache(u64::from(cdb.be32(2)), u64::from(cdb.be16(7)))
            }
            Opcode::SYNCHRONIZE_CACHE_16 => {
                self.synchronize_cache(cdb.be64(2), u64::from(cdb.be32(10)))
            }
            Opcode::READ_CAPACITY_10 => self.read_capacity_10(cdb),
            Opcode::SERVICE_ACTION_IN_16 if cdb.service_action() == SA_READ_CAPACITY_16 => {
                self.read_capacity_16(cdb)
            }
            Opcode::START_STOP_UNIT => Ok(Bytes::new()),
            _ => return None,
        };
        Some(ctx.respond(result))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn zero_buffer_is_static_up_to_8_mib() {
        let z = zeros(STATIC_ZEROS);
        assert_eq!(z.as_ptr(), ZEROS.as_ptr());
        assert_eq!(zeros(STATIC_ZEROS + 1).len(), STATIC_ZEROS + 1);
    }

    #[test]
    fn range_checks() {
        let disk = NullDisk::new(512, 100);
        assert!(disk.check_range(0, 100).is_ok());
        // SBC-3 §4.5: past the last LBA is out of range even with nothing to transfer
        // (libiscsi's Verify10.ZeroBlocks checks this).
        assert!(disk.check_range(99, 0).is_ok());
        assert!(disk.check_range(100, 0).is_err());
        assert!(disk.check_range(100, 1).is_err());
        assert!(disk.check_range(u64::MAX, 1).is_err());
        assert_eq!(disk.check_range(99, 2).unwrap_err().information, Some(99));
    }
}
