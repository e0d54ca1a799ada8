//! READ and WRITE of a block device (SBC-3 §5), as the null disk answers them: the iSCSI
//! data-path benchmark and the transport tests move data with these.

/// READ(10) (SBC-3 §5.11) of `blocks` logical blocks from `lba`.
pub fn read10(lba: u32, blocks: u16) -> [u8; 10] {
    let mut cdb = [0u8; 10];
    cdb[0] = 0x28;
    cdb[2..6].copy_from_slice(&lba.to_be_bytes());
    cdb[7..9].copy_from_slice(&blocks.to_be_bytes());
    cdb
}

/// WRITE(10) (SBC-3 §5.36) of `blocks` logical blocks at `lba`.
pub fn write10(lba: u32, blocks: u16) -> [u8; 10] {
    let mut cdb = read10(lba, blocks);
    cdb[0] = 0x2A;
    cdb
}

/// WRITE(12) (SBC-3 §5.37) of `blocks` logical blocks at `lba`.
pub fn write12(lba: u32, blocks: u32) -> [u8; 12] {
    let mut cdb = [0u8; 12];
    cdb[0] = 0xAA;
    cdb[2..6].copy_from_slice(&lba.to_be_bytes());
    cdb[6..10].copy_from_slice(&blocks.to_be_bytes());
    cdb
}

/// WRITE(16) (SBC-3 §5.38) of `blocks` logical blocks at `lba`.
pub fn write16(lba: u64, blocks: u32) -> [u8; 16] {
    let mut cdb = [0u8; 16];
    cdb[0] = 0x8A;
    cdb[2..10].copy_from_slice(&lba.to_be_bytes());
    cdb[10..14].copy_from_slice(&blocks.to_be_bytes());
    cdb
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use proptest::prelude::*;

    use super::*;
    use crate::{Bytes, ItNexus, LunTable, NullDisk, Request, ScsiDevice, Status, TaskAttribute};

    proptest! {
        /// The null disk (the target-side decoder) moves exactly the blocks the CDBs name, and
        /// refuses the first block past its end.
        #[test]
        fn the_null_disk_moves_the_blocks_named(blocks in 1u16..64, lba in 0u32..4096) {
            const DISK_BLOCKS: u64 = 4096 + 64;
            let mut table = LunTable::new();
            table.insert(0, Arc::new(ScsiDevice::new(NullDisk::new(512, DISK_BLOCKS))));
            let nexus = ItNexus::new("iqn.test:kit,i,0x000000000001", 1);
            let run = |cdb: &[u8], data_out: Vec<u8>| table.execute(0, Request {
                nexus: &nexus,
                cdb,
                data_out: Bytes::from(data_out),
                data_in_len: u32::MAX,
                attribute: TaskAttribute::Simple,
            });
            let _ = run(&crate::initiator::spc::TEST_UNIT_READY, Vec::new());
            let bytes = usize::from(blocks) * 512;
            let r = run(&read10(lba, blocks), Vec::new());
            prop_assert_eq!(r.status, Status::Good);
            prop_assert_eq!(r.data_in.len(), bytes);
            prop_assert_eq!(run(&write10(lba, blocks), vec![0; bytes]).status, Status::Good);
            prop_assert_eq!(run(&write12(lba, u32::from(blocks)), vec![0; bytes]).status, Status::Good);
            prop_assert_eq!(run(&write16(u64::from(lba), u32::from(blocks)), vec![0; bytes]).status, Status::Good);
            let past = u32::try_from(DISK_BLOCKS).unwrap() - u32::from(blocks) + 1;
            prop_assert_eq!(run(&read10(past, blocks), Vec::new()).status, Status::CheckCondition);
        }
    }
}
