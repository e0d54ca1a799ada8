//! A tape-like test personality exercising the hooks the SSC and SMC personalities rely on:
//! unit attentions raised through the context, deferred errors, readiness, mode pages with a
//! block descriptor, log pages, vendor VPD pages and reservation classes.

use std::sync::Arc;

use reel_scsi::initiator::ssc::{self, Transfer};
use reel_scsi::initiator::{request, spc};
use reel_scsi::{
    Access, Asc, BlockDescriptor, Bytes, Cdb, Command, DeviceContext, Identity, ItNexus,
    LogPageControl, LogParameter, LogicalUnit, ModePage, ModePageControl, ModeSelectParams,
    Personality, Response, ScsiDevice, ScsiResult, Sense, SenseKey, Status, TaskManagement,
    parse_sense,
};

struct Tape {
    identity: Identity,
    loaded: bool,
    block_length: u32,
    compression: bool,
    resets: u32,
}

impl Tape {
    fn new() -> Self {
        let mut identity = Identity::new(
            0x01,
            "IBM",
            "ULT3580-TD9",
            "Q3F1",
            "1234567890",
            0x5000_0000_0000_0042,
        );
        identity.removable = true;
        Self {
            identity,
            loaded: false,
            block_length: 0,
            compression: true,
            resets: 0,
        }
    }
}

impl Personality for Tape {
    fn identity(&self) -> &Identity {
        &self.identity
    }

    fn ready(&self) -> ScsiResult<()> {
        if self.loaded {
            Ok(())
        } else {
            Err(Sense::new(SenseKey::NOT_READY, Asc::MEDIUM_NOT_PRESENT))
        }
    }

    fn vpd_pages(&self) -> Vec<u8> {
        vec![0xC0]
    }

    fn vpd_page(&self, page: u8) -> Option<Vec<u8>> {
        (page == 0xC0).then(|| b"firmware".to_vec())
    }

    fn mode_pages(&self) -> Vec<ModePage> {
        // Data compression page 0Fh (SSC-4 §8.3.2): DCE changeable.
        let mut values = vec![0u8; 14];
        values[0] = 0x40 | (u8::from(self.compression) << 7);
        let mut changeable = vec![0u8; 14];
        changeable[0] = 0x80;
        vec![ModePage::fixed(0x0F, 0, values).with_changeable(changeable)]
    }

    fn block_descriptor(&self, pc: ModePageControl) -> Option<BlockDescriptor> {
        Some(match pc {
            ModePageControl::Changeable => BlockDescriptor {
                density: 0xFF,
                blocks: 0,
                block_length: 0xFF_FFFF,
            },
            _ => BlockDescriptor {
                density: 0x60,
                blocks: 0,
                block_length: self.block_length,
            },
        })
    }

    fn device_specific_parameter(&self) -> u8 {
        0x10 // buffered mode 1
    }

    fn mode_select(
        &mut self,
        _ctx: &mut DeviceContext<'_>,
        params: &ModeSelectParams,
    ) -> ScsiResult<()> {
        if let Some(d) = params.block_descriptors.first() {
            self.block_length = d.block_length;
        }
        for (page, _, values) in &params.pages {
            if *page == 0x0F {
                self.compression = values[0] & 0x80 != 0;
            }
        }
        Ok(())
    }

    fn log_pages(&self) -> Vec<(u8, u8)> {
        vec![(0x2E, 0), (0x11, 0)]
    }

    fn log_page(
        &mut self,
        page: u8,
        _subpage: u8,
        _pc: LogPageControl,
    ) -> Option<Vec<LogParameter>> {
        match page {
            0x2E => Some(
                (1..=4)
                    .map(|code| LogParameter::counter(code, 0, 1))
                    .collect(),
            ),
            0x11 => Some(vec![LogParameter::counter(0, 0x1234, 4)]),
            _ => None,
        }
    }

    fn access(&self, cdb: &Cdb<'_>) -> Access {
        match cdb.opcode().0 {
            0x08 => Access::Read,
            _ => Access::Write,
        }
    }

    fn execute(&mut self, ctx: &mut DeviceContext<'_>, command: &Command<'_>) -> Option<Response> {
        match command.cdb.opcode().0 {
            // LOAD UNLOAD: loading tells every nexus the medium may have changed.
            0x1B => {
                self.loaded = command.cdb.bit(4, 0);
                if self.loaded {
                    ctx.raise_unit_attention_others(
                        Asc::NOT_READY_TO_READY_CHANGE_MEDIUM_MAY_HAVE_CHANGED,
                    );
                }
                Some(Response::good_empty())
            }
            // READ(6) into a filemark after 3 bytes of a 10-byte request.
            0x08 => {
                if let Err(sense) = self.ready() {
                    return Some(ctx.check_condition(&sense));
                }
                let sense = Sense::new(SenseKey::NO_SENSE, Asc::FILEMARK_DETECTED)
                    .with_filemark()
                    .with_residue(7);
                Some(
                    ctx.check_condition(&sense)
                        .with_data(Bytes::from_static(b"abc")),
                )
            }
            // WRITE FILEMARKS with IMMED: the flush fails later, reported as a deferred error.
            0x10 => {
                ctx.defer(Sense::new(SenseKey::MEDIUM_ERROR, Asc::WRITE_ERROR));
                Some(Response::good_empty())
            }
            _ => None,
        }
    }

    fn task_management(&mut self, _ctx: &mut DeviceContext<'_>, function: TaskManagement) {
        if function == TaskManagement::LogicalUnitReset {
            self.resets += 1;
        }
    }
}

fn run(lu: &dyn LogicalUnit, nexus: &ItNexus, cdb: &[u8], data_out: &[u8]) -> Response {
    lu.execute(request(nexus, cdb, data_out))
}

fn sense(r: &Response) -> Sense {
    assert_eq!(r.status, Status::CheckCondition, "{r:?}");
    parse_sense(r.sense.as_ref().unwrap()).unwrap()
}

fn setup() -> (Arc<ScsiDevice<Tape>>, ItNexus, ItNexus) {
    let lu = Arc::new(ScsiDevice::new(Tape::new()));
    let (a, b) = (ItNexus::new("a", 1), ItNexus::new("b", 1));
    for n in [&a, &b] {
        run(&*lu, n, &spc::request_sense(18), &[]); // REQUEST SENSE consumes the power-on UA
    }
    (lu, a, b)
}

#[test]
fn readiness_and_unit_attention_after_load() {
    let (lu, a, b) = setup();
    let s = sense(&run(&*lu, &a, &spc::TEST_UNIT_READY, &[]));
    assert_eq!(
        (s.key, s.asc),
        (SenseKey::NOT_READY, Asc::MEDIUM_NOT_PRESENT)
    );
    // REQUEST SENSE reports the not-ready reason.
    let r = run(&*lu, &a, &spc::request_sense(18), &[]);
    assert_eq!(
        parse_sense(&r.data_in).unwrap().asc,
        Asc::MEDIUM_NOT_PRESENT
    );
    assert_eq!(run(&*lu, &a, &ssc::LOAD, &[]).status, Status::Good);
    assert_eq!(
        run(&*lu, &a, &spc::TEST_UNIT_READY, &[]).status,
        Status::Good
    );
    let s = sense(&run(&*lu, &b, &spc::TEST_UNIT_READY, &[]));
    assert_eq!(
        (s.key, s.asc),
        (
            SenseKey::UNIT_ATTENTION,
            Asc::NOT_READY_TO_READY_CHANGE_MEDIUM_MAY_HAVE_CHANGED
        )
    );
    assert_eq!(
        run(&*lu, &b, &spc::TEST_UNIT_READY, &[]).status,
        Status::Good
    );
}

#[test]
fn read_into_filemark_carries_data_and_residue() {
    let (lu, a, _) = setup();
    run(&*lu, &a, &ssc::LOAD, &[]);
    let r = run(&*lu, &a, &ssc::read6(Transfer::Variable(10), false), &[]);
    assert_eq!(&r.data_in[..], b"abc");
    let s = sense(&r);
    assert!(s.filemark);
    assert_eq!(s.information, Some(7));
    assert_eq!(r.sense.as_ref().unwrap()[2], 0x80, "FILEMARK bit, NO SENSE");
}

#[test]
fn deferred_error_is_reported_on_next_command() {
    let (lu, a, b) = setup();
    assert_eq!(
        run(&*lu, &a, &ssc::write_filemarks(1, true), &[]).status,
        Status::Good
    );
    assert_eq!(run(&*lu, &b, &spc::inquiry(36), &[]).status, Status::Good);
    let r = run(&*lu, &a, &spc::TEST_UNIT_READY, &[]);
    assert_eq!(r.sense.as_ref().unwrap()[0], 0x71, "deferred, fixed format");
    assert_eq!(sense(&r).asc, Asc::WRITE_ERROR);
}

#[test]
fn mode_pages_with_block_descriptor() {
    let (lu, a, b) = setup();
    let r = run(&*lu, &a, &spc::mode_sense6(0x0F, 255), &[]);
    let d = &r.data_in;
    assert_eq!(&d[..4], &[d.len() as u8 - 1, 0, 0x10, 8]);
    assert_eq!(&d[4..12], &[0x60, 0, 0, 0, 0, 0, 0, 0]);
    assert_eq!(&d[12..14], &[0x0F, 14]);
    assert_eq!(d[14], 0xC0);
    // st's `mt setblk 65536` and compression off in one MODE SELECT(6).
    let mut list = vec![
        0, 0, 0x10, 8, 0x60, 0, 0, 0, 0, 0x01, 0x00, 0x00, 0x0F, 14, 0x40,
    ];
    list.extend_from_slice(&[0; 13]);
    let r = run(&*lu, &a, &spc::mode_select6(list.len() as u8), &list);
    assert_eq!(r.status, Status::Good, "{r:?}");
    lu.with_personality(|t| {
        assert_eq!(t.block_length, 0x10000);
        assert!(!t.compression);
    });
    assert_eq!(
        sense(&run(&*lu, &b, &spc::TEST_UNIT_READY, &[])).asc,
        Asc::MODE_PARAMETERS_CHANGED
    );
    // The DCC bit (byte 2 bit 6 of the page) is not changeable.
    list[14] = 0x00;
    let s = sense(&run(&*lu, &a, &spc::mode_select6(list.len() as u8), &list));
    assert_eq!(s.asc, Asc::INVALID_FIELD_IN_PARAMETER_LIST);
}

#[test]
fn log_and_vendor_vpd_pages() {
    let (lu, a, _) = setup();
    let r = run(&*lu, &a, &[0x4D, 0, 0x00, 0, 0, 0, 0, 0, 255, 0], &[]);
    assert_eq!(&r.data_in[..], &[0, 0, 0, 3, 0x00, 0x11, 0x2E]);
    let r = run(&*lu, &a, &spc::log_sense(0x2E, 255), &[]);
    assert_eq!(&r.data_in[..4], &[0x2E, 0, 0, 20]);
    let r = run(
        &*lu,
        &a,
        &[0x4D, 0x00, 0x40 | 0x2E, 0, 0, 0, 3, 0, 255, 0],
        &[],
    );
    assert_eq!(&r.data_in[..4], &[0x2E, 0, 0, 10], "parameter pointer 3");
    let r = run(&*lu, &a, &spc::inquiry_vpd(0xC0, 255), &[]);
    assert_eq!(&r.data_in[..], b"\x01\xC0\x00\x08firmware");
    let r = run(&*lu, &a, &spc::inquiry(255), &[]);
    assert_eq!(r.data_in[1], 0x80, "RMB");
    // LOG SELECT PCR resets and tells the others.
    assert_eq!(
        run(&*lu, &a, &[0x4C, 0x02, 0x40, 0, 0, 0, 0, 0, 0, 0], &[]).status,
        Status::Good
    );
}

#[test]
fn personality_access_classes_under_reservation() {
    let (lu, a, b) = setup();
    run(&*lu, &a, &ssc::LOAD, &[]);
    run(&*lu, &b, &spc::TEST_UNIT_READY, &[]); // consume the load UA
    // A registers and takes Write Exclusive: B may read, not write.
    let mut p = vec![0u8; 24];
    p[8..16].copy_from_slice(&7u64.to_be_bytes());
    assert_eq!(
        run(&*lu, &a, &[0x5F, 0, 0, 0, 0, 0, 0, 0, 24, 0], &p).status,
        Status::Good
    );
    let mut p = vec![0u8; 24];
    p[..8].copy_from_slice(&7u64.to_be_bytes());
    assert_eq!(
        run(&*lu, &a, &[0x5F, 1, 0x01, 0, 0, 0, 0, 0, 24, 0], &p).status,
        Status::Good
    );
    assert_eq!(
        run(&*lu, &b, &ssc::read6(Transfer::Variable(10), false), &[]).status,
        Status::CheckCondition
    );
    assert_eq!(
        run(&*lu, &b, &ssc::write_filemarks(1, false), &[]).status,
        Status::ReservationConflict
    );
    // LU reset: persistent reservation stays, the personality hears of it.
    lu.task_management(TaskManagement::LogicalUnitReset, &a);
    lu.with_personality(|t| assert_eq!(t.resets, 1));
    run(&*lu, &b, &spc::TEST_UNIT_READY, &[]);
    assert_eq!(
        run(&*lu, &b, &ssc::write_filemarks(1, false), &[]).status,
        Status::ReservationConflict
    );
}
