//! A drive behind a LUN table, driven like an initiator would: CDB bytes in, status, sense
//! and data out.

#![allow(dead_code)]
// The drive hands a refused cartridge back by value.
#![allow(clippy::result_large_err)]

use std::sync::{Arc, Mutex};

use reel_media::{Barcode, Cartridge, CartridgeInfo, MediaType, MemoryPartition, UnixTime};
use reel_scsi::{Bytes, ItNexus, LunTable, Response, ScsiDevice, Sense, Status, parse_sense};
use reel_ssc::{DriveModel, InsertError, RemoveError, TapeDrive};

pub type Drive = TapeDrive<MemoryPartition>;

pub struct Rig {
    pub table: LunTable,
    pub device: Arc<ScsiDevice<Drive>>,
    pub nexus: ItNexus,
    pub other: ItNexus,
    /// Barcodes passed to the saver, in order.
    pub saved: Arc<Mutex<Vec<String>>>,
}

pub fn cartridge(barcode: &str, media: MediaType, capacity: u64) -> Cartridge<MemoryPartition> {
    let info = CartridgeInfo::new(Barcode::new(barcode).unwrap(), media, UnixTime(0))
        .with_capacity(capacity)
        .unwrap();
    Cartridge::new(info, vec![MemoryPartition::new()]).unwrap()
}

impl Rig {
    /// An empty drive of `model`; both nexuses have consumed their power-on unit attention.
    pub fn empty(model: &str) -> Self {
        let saved = Arc::new(Mutex::new(Vec::new()));
        let log = saved.clone();
        let drive = TapeDrive::new(DriveModel::by_name(model).unwrap(), "1068000123")
            .with_saver(Box::new(move |c| {
                log.lock().unwrap().push(c.barcode().to_string());
                Ok(())
            }))
            .with_partition_factory(Box::new(|_, _| Ok(MemoryPartition::new())));
        let device = Arc::new(ScsiDevice::new(drive).with_clock(Arc::new(|| 1_700_000_000_000)));
        let mut table = LunTable::new();
        table.insert(0, device.clone());
        let rig = Rig {
            table,
            device,
            nexus: ItNexus::new("iqn.test:host-a,i,0x000000000001", 1),
            other: ItNexus::new("iqn.test:host-b,i,0x000000000002", 1),
            saved,
        };
        for n in [rig.nexus.clone(), rig.other.clone()] {
            rig.run_as(&n, &request_sense(18), &[]);
        }
        rig
    }

    /// A drive of `model` with a cartridge of `media` and `capacity` bytes inserted, the
    /// insert unit attention consumed by both nexuses.
    pub fn loaded(model: &str, media: MediaType, capacity: u64) -> Self {
        let rig = Self::empty(model);
        rig.insert(cartridge("REEL01L9", media, capacity)).unwrap();
        for n in [rig.nexus.clone(), rig.other.clone()] {
            rig.run_as(&n, &request_sense(18), &[]);
        }
        rig
    }

    pub fn insert(
        &self,
        c: Cartridge<MemoryPartition>,
    ) -> Result<(), (Cartridge<MemoryPartition>, InsertError)> {
        self.device
            .with_context(&self.nexus, |drive, ctx| drive.insert(c, ctx))
    }

    pub fn remove(&self) -> Result<Cartridge<MemoryPartition>, RemoveError> {
        self.device.with_context(&self.nexus, TapeDrive::remove)
    }

    pub fn run_as(&self, nexus: &ItNexus, cdb: &[u8], data_out: &[u8]) -> Response {
        let r = self
            .table
            .execute(0, reel_scsi::initiator::request(nexus, cdb, data_out));
        if r.status == Status::CheckCondition {
            parse_sense(r.sense.as_ref().expect("sense")).expect("sense parses");
        }
        r
    }

    pub fn run(&self, cdb: &[u8], data_out: &[u8]) -> Response {
        self.run_as(&self.nexus, cdb, data_out)
    }

    /// Runs and expects GOOD; returns the data.
    pub fn good(&self, cdb: &[u8], data_out: &[u8]) -> Bytes {
        let r = self.run(cdb, data_out);
        assert_eq!(r.status, Status::Good, "{cdb:02x?}: {:?}", sense_of(&r));
        r.data_in.to_bytes()
    }

    /// Runs and expects CHECK CONDITION; returns the sense and the data.
    pub fn check(&self, cdb: &[u8], data_out: &[u8]) -> (Sense, Bytes) {
        let r = self.run(cdb, data_out);
        assert_eq!(r.status, Status::CheckCondition, "{cdb:02x?} gave GOOD");
        (sense_of(&r).unwrap(), r.data_in.to_bytes())
    }

    pub fn with_drive<R>(&self, f: impl FnOnce(&mut Drive) -> R) -> R {
        self.device.with_personality(f)
    }
}

pub fn sense_of(r: &Response) -> Option<Sense> {
    r.sense.as_ref().map(|s| parse_sense(s).unwrap())
}

/// The INFORMATION field as a signed residue.
pub fn residue(s: &Sense) -> i64 {
    s.information.map_or(0, |v| v as u32 as i32 as i64)
}

// CDB builders and answer parsers: the initiator kit.
pub use reel_scsi::initiator::spc::*;
pub use reel_scsi::initiator::ssc::*;

/// (partition, object, BOP, EOP) from the short READ POSITION form.
pub fn position(rig: &Rig) -> (u8, u32, bool, bool) {
    let d = rig.good(&read_position(PositionForm::Short), &[]);
    assert_eq!(d.len(), 20);
    let p = parse_read_position(PositionForm::Short, &d).unwrap();
    (p.partition as u8, p.object as u32, p.bop, p.eop)
}

/// (partition, object, file) from the long READ POSITION form.
pub fn long_position(rig: &Rig) -> (u32, u64, u64) {
    let d = rig.good(&read_position(PositionForm::Long), &[]);
    assert_eq!(d.len(), 32);
    let p = parse_read_position(PositionForm::Long, &d).unwrap();
    (
        p.partition,
        p.object,
        p.file.expect("the long form has the file"),
    )
}

pub fn record(seed: u8, len: usize) -> Vec<u8> {
    (0..len).map(|i| seed.wrapping_add((i * 7) as u8)).collect()
}

/// Partitions the loaded cartridge as mkltfs does: MODE SENSE(10) of page 11h with the block
/// descriptor, one additional partition (IDP, units of 10^9 bytes: 1 GB, the rest), MODE
/// SELECT(10), FORMAT MEDIUM (partition).
pub fn ltfs_two_partitions(rig: &Rig) {
    let m = rig.good(&[0x5A, 0, 0x11, 0, 0, 0, 0, 0x01, 0, 0], &[]);
    let mut list = m.to_vec();
    list[0] = 0;
    list[1] = 0;
    let p = 16;
    list[p + 3] = 1;
    list[p + 4] = 0x20 | 0x18 | (list[p + 4] & 0x07);
    list[p + 6] = 9;
    list[p + 8..p + 10].copy_from_slice(&1u16.to_be_bytes());
    list[p + 10..p + 12].copy_from_slice(&0xFFFFu16.to_be_bytes());
    rig.good(&mode_select10(list.len() as u16), &list);
    rig.good(&[0x04, 0, 0x01, 0, 0, 0], &[]);
}
