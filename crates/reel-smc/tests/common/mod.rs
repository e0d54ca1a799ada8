//! Shared fixtures: a changer in a LUN table with fake drive bays, a strict parser of its
//! element status; commands come from the initiator kit (reel_scsi::initiator).

#![allow(dead_code)]

use std::sync::{Arc, Mutex};

use reel_scsi::initiator::{request, smc, spc};
use reel_scsi::{ItNexus, LunTable, Response, ScsiDevice, Sense, Status, parse_sense};
use reel_smc::testing::FakeBay;
use reel_smc::{Changer, ChangerModel, DriveBay, Inventory, Layout};

pub struct Rig {
    pub table: LunTable,
    pub device: Arc<ScsiDevice<Changer>>,
    pub bays: Vec<Arc<FakeBay>>,
    pub saved: Arc<Mutex<Vec<Inventory>>>,
    pub fail_save: Arc<Mutex<bool>>,
    pub a: ItNexus,
    pub b: ItNexus,
}

pub fn rig(model: &str, layout: Option<Layout>, barcodes: &[&str]) -> Rig {
    let model = ChangerModel::by_name(model).expect("model");
    let layout = layout.unwrap_or(model.default_layout);
    let bays: Vec<Arc<FakeBay>> = (0..layout.drives)
        .map(|i| Arc::new(FakeBay::new(&format!("10130{i:05}"))))
        .collect();
    let barcodes: Vec<String> = barcodes.iter().map(ToString::to_string).collect();
    let inventory = Changer::initial_inventory(&layout, &barcodes);
    let saved = Arc::new(Mutex::new(Vec::new()));
    let fail_save = Arc::new(Mutex::new(false));
    let (s, f) = (saved.clone(), fail_save.clone());
    let changer = Changer::new(
        model,
        layout,
        "CHG0000001",
        bays.iter()
            .map(|b| b.clone() as Arc<dyn DriveBay>)
            .collect(),
        inventory,
    )
    .expect("changer")
    .with_saver(Box::new(move |inv| {
        if *f.lock().unwrap() {
            return Err("disk full".into());
        }
        s.lock().unwrap().push(inv.clone());
        Ok(())
    }));
    let device = Arc::new(ScsiDevice::new(changer));
    let mut table = LunTable::new();
    table.insert(0, device.clone());
    let rig = Rig {
        table,
        device,
        bays,
        saved,
        fail_save,
        a: ItNexus::new("iqn.a,i,0x000000000001", 1),
        b: ItNexus::new("iqn.b,i,0x000000000002", 1),
    };
    // Consume the power-on unit attentions.
    for n in [&rig.a, &rig.b] {
        rig.run(n, &spc::request_sense(18), &[]);
    }
    rig
}

impl Rig {
    pub fn run(&self, nexus: &ItNexus, cdb: &[u8], data_out: &[u8]) -> Response {
        self.table.execute(0, request(nexus, cdb, data_out))
    }

    pub fn good(&self, cdb: &[u8]) -> Vec<u8> {
        let r = self.run(&self.a, cdb, &[]);
        assert_eq!(
            r.status,
            Status::Good,
            "{cdb:02x?}: {r:?} {:?}",
            sense_of(&r)
        );
        r.data_in.to_vec()
    }

    pub fn check(&self, cdb: &[u8]) -> Sense {
        let r = self.run(&self.a, cdb, &[]);
        sense_of(&r).unwrap_or_else(|| panic!("{cdb:02x?} succeeded"))
    }

    pub fn with<R>(&self, f: impl FnOnce(&mut Changer) -> R) -> R {
        self.device.with_personality(f)
    }

    pub fn barcode_at(&self, address: u16) -> Option<String> {
        self.with(|c| {
            let e = c.element_at(address).expect("address");
            c.inventory().get(e).map(|c| c.barcode.clone())
        })
    }
}

pub fn sense_of(r: &Response) -> Option<Sense> {
    (r.status == Status::CheckCondition).then(|| parse_sense(r.sense.as_ref().unwrap()).unwrap())
}

/// READ ELEMENT STATUS through the initiator kit, the element type as its SMC-3 code (the
/// tests sweep raw codes, invalid ones included): type, VOLTAG, start, count, DVCID,
/// allocation length.
pub fn read_element_status(
    type_code: u8,
    voltag: bool,
    start: u16,
    count: u16,
    dvcid: bool,
    allocation: u32,
) -> [u8; 12] {
    smc::read_element_status_range(
        smc::ElementType(type_code),
        voltag,
        start,
        count,
        dvcid,
        allocation,
    )
}

/// One parsed element descriptor.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Descriptor {
    pub type_code: u8,
    pub address: u16,
    pub flags: u8,
    pub asc: u8,
    pub ascq: u8,
    pub byte9: u8,
    pub source: u16,
    pub primary: Option<Vec<u8>>,
    pub alternate: Option<Vec<u8>>,
    /// (code set, identifier type, identifier)
    pub dvcid: Option<(u8, u8, Vec<u8>)>,
}

impl Descriptor {
    pub fn full(&self) -> bool {
        self.flags & 1 != 0
    }

    pub fn svalid(&self) -> bool {
        self.byte9 & 0x80 != 0
    }

    pub fn tag(&self) -> Option<String> {
        self.primary
            .as_ref()
            .map(|t| String::from_utf8_lossy(&t[..32]).trim_end().to_string())
    }
}

/// Parses element status data strictly: header counts, page byte counts and descriptor
/// lengths must agree. `dvcid` tells whether identifier fields follow the tags.
pub fn parse_status(data: &[u8], dvcid: bool) -> (u16, u16, usize, Vec<Descriptor>) {
    let first = u16::from_be_bytes([data[0], data[1]]);
    let count = u16::from_be_bytes([data[2], data[3]]);
    let total = usize::from(data[5]) << 16 | usize::from(data[6]) << 8 | usize::from(data[7]);
    assert_eq!(total, data.len() - 8, "byte count of report available");
    let mut at = 8;
    let mut out = Vec::new();
    while at < data.len() {
        let page = &data[at..at + 8];
        let type_code = page[0];
        let pvoltag = page[1] & 0x80 != 0;
        let avoltag = page[1] & 0x40 != 0;
        let len = usize::from(u16::from_be_bytes([page[2], page[3]]));
        let bytes = usize::from(page[5]) << 16 | usize::from(page[6]) << 8 | usize::from(page[7]);
        assert_eq!(bytes % len, 0);
        at += 8;
        for d in data[at..at + bytes].chunks(len) {
            let mut i = 12;
            let primary = pvoltag.then(|| {
                i += 36;
                d[12..48].to_vec()
            });
            let alternate = avoltag.then(|| {
                i += 36;
                d[i - 36..i].to_vec()
            });
            let dvcid = dvcid.then(|| {
                let n = usize::from(d[i + 3]);
                (d[i] & 0x0F, d[i + 1] & 0x0F, d[i + 4..i + 4 + n].to_vec())
            });
            out.push(Descriptor {
                type_code,
                address: u16::from_be_bytes([d[0], d[1]]),
                flags: d[2],
                asc: d[4],
                ascq: d[5],
                byte9: d[9],
                source: u16::from_be_bytes([d[10], d[11]]),
                primary,
                alternate,
                dvcid,
            });
        }
        at += bytes;
    }
    assert_eq!(
        usize::from(count),
        out.len(),
        "number of elements available"
    );
    (first, count, total, out)
}

/// MODE SENSE(6) page 1Dh with DBD as mtx and PBS send it: (first, count) of MT, ST, IE, DT.
pub fn assignment(rig: &Rig) -> [(u16, u16); 4] {
    let d = rig.good(&[0x1A, 0x08, 0x1D, 0, 255, 0]);
    assert_eq!(d[0], 23, "PBS insists on a 24-byte answer");
    assert_eq!(d[3], 0, "no block descriptor");
    assert_eq!(&d[4..6], &[0x1D, 0x12]);
    let v = |i: usize| u16::from_be_bytes([d[6 + i], d[7 + i]]);
    [(v(0), v(2)), (v(4), v(6)), (v(8), v(10)), (v(12), v(14))]
}
