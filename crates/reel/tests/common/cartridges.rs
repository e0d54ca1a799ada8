//! Whole cartridges written and read back through a library's first drive, for the tests that
//! check what survives (a lost node, a failover, a wrong key): each cartridge `c` starts in
//! storage slot `c + 1`, gets `records` records of `record(c, r)` closed by a filemark without
//! IMMED (a synchronising point), and goes back to its slot.

use std::net::SocketAddr;

use reel_scsi::initiator::smc::move_medium;
use reel_scsi::initiator::ssc::{REWIND, Transfer, UNLOAD, read6, write_filemarks, write6};
use reel_testkit::tape::Tape;

/// The first drive's element address and the first storage slot's (reel's default layout).
pub const DRIVE: u16 = 0x0101;
pub const FIRST_SLOT: u16 = 0x0401;

/// Pseudo-random bytes from `seed` (xorshift): what compression stores verbatim.
pub fn noise(seed: u64, len: usize) -> Vec<u8> {
    let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x >> 24) as u8
        })
        .collect()
}

/// What goes on each cartridge.
#[derive(Clone, Copy)]
pub struct Workload {
    pub record_len: usize,
    pub records: u64,
    /// Record `r` of cartridge `c`, `record_len` bytes.
    pub record: fn(u64, u64) -> Vec<u8>,
}

/// The changer (LUN 0) and the first drive (LUN 1) of `target`, in sessions of their own.
pub fn sessions(portal: SocketAddr, target: &str) -> (Tape, Tape) {
    let changer = Tape::connect(portal, target, 0, 1);
    changer.ready();
    let drive = Tape::connect(portal, target, 1, 2);
    (changer, drive)
}

impl Workload {
    fn read_cdb(&self) -> [u8; 6] {
        read6(Transfer::Variable(self.record_len as u32), false)
    }

    /// Loads cartridge `c`, writes its records and a filemark, unloads it and puts it back.
    pub fn write(&self, changer: &Tape, drive: &Tape, c: u64) {
        let slot = FIRST_SLOT + c as u16;
        changer.good(&move_medium(0, slot, DRIVE), Vec::new());
        drive.ready();
        for r in 0..self.records {
            let record = (self.record)(c, r);
            drive.good(&write6(Transfer::Variable(record.len() as u32)), record);
        }
        drive.good(&write_filemarks(1, false), Vec::new());
        drive.good(&UNLOAD, Vec::new());
        changer.good(&move_medium(0, DRIVE, slot), Vec::new());
    }

    /// Loads cartridge `c` and checks every record, then the filemark after them.
    pub fn read(&self, changer: &Tape, drive: &Tape, c: u64) {
        let slot = FIRST_SLOT + c as u16;
        changer.good(&move_medium(0, slot, DRIVE), Vec::new());
        drive.ready();
        drive.good(&REWIND, Vec::new());
        let len = self.record_len as u32;
        for r in 0..self.records {
            let (status, data, sense) = drive.run(&self.read_cdb(), Vec::new(), len);
            assert_eq!(status, 0, "cartridge {c} record {r}: sense {sense:02x?}");
            assert!(
                data == (self.record)(c, r),
                "cartridge {c} record {r} reads back wrong"
            );
        }
        let (status, _, _) = drive.run(&self.read_cdb(), Vec::new(), len);
        assert_eq!(status, 2, "cartridge {c}: the filemark after its records");
        drive.good(&UNLOAD, Vec::new());
        changer.good(&move_medium(0, DRIVE, slot), Vec::new());
    }
}
