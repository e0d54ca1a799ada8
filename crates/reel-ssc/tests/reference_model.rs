//! Random sequences of SCSI tape commands against a `TapeDrive<MemoryPartition>`, every
//! response (status, sense key, ASC, FILEMARK/EOM/ILI, residue, data) checked against an
//! independent model of the tape: a `Vec` of records and filemarks and a position.

mod common;

use common::*;
use proptest::prelude::*;
use reel_media::MediaType;
use reel_scsi::{Asc, SenseKey, Status};

#[derive(Clone, Debug)]
enum Op {
    SetBlock(u32),
    WriteVar { len: usize, seed: u8 },
    WriteFixed { count: u32, seed: u8 },
    Filemarks { count: u32, immed: bool },
    ReadVar { len: u32, sili: bool },
    ReadFixed { count: u32 },
    SpaceRecords(i32),
    SpaceFilemarks(i32),
    SpaceEod,
    Space16Records(i64),
    Locate(u32),
    LocateFile(u64),
    ReadPosition,
    Rewind,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        1 => prop::sample::select(vec![0u32, 512, 1024]).prop_map(Op::SetBlock),
        6 => (prop_oneof![1usize..3000, Just(512), Just(1024)], any::<u8>())
            .prop_map(|(len, seed)| Op::WriteVar { len, seed }),
        2 => (0u32..4, any::<u8>()).prop_map(|(count, seed)| Op::WriteFixed { count, seed }),
        3 => (0u32..3, any::<bool>()).prop_map(|(count, immed)| Op::Filemarks { count, immed }),
        5 => (prop_oneof![0u32..3000, Just(512), Just(1024)], any::<bool>())
            .prop_map(|(len, sili)| Op::ReadVar { len, sili }),
        2 => (0u32..4).prop_map(|count| Op::ReadFixed { count }),
        3 => (-4i32..5).prop_map(Op::SpaceRecords),
        3 => (-3i32..4).prop_map(Op::SpaceFilemarks),
        1 => Just(Op::SpaceEod),
        1 => (-3i64..4).prop_map(Op::Space16Records),
        2 => (0u32..30).prop_map(Op::Locate),
        1 => (0u64..5).prop_map(Op::LocateFile),
        2 => Just(Op::ReadPosition),
        1 => Just(Op::Rewind),
    ]
}

#[derive(Clone, Debug, PartialEq)]
enum Obj {
    Record(Vec<u8>),
    Filemark,
}

/// What the drive must answer.
#[derive(Debug, PartialEq)]
struct Expect {
    /// None: GOOD.
    sense: Option<(SenseKey, Asc, bool, bool, bool, Option<i64>)>,
    data: Vec<u8>,
}

fn good(data: Vec<u8>) -> Expect {
    Expect { sense: None, data }
}

fn sense(key: SenseKey, asc: Asc, fm: bool, eom: bool, ili: bool, info: Option<i64>) -> Expect {
    Expect {
        sense: Some((key, asc, fm, eom, ili, info)),
        data: Vec::new(),
    }
}

fn with_data(mut e: Expect, data: Vec<u8>) -> Expect {
    e.data = data;
    e
}

fn filemark(r: i64) -> Expect {
    sense(
        SenseKey::NO_SENSE,
        Asc::FILEMARK_DETECTED,
        true,
        false,
        false,
        Some(r),
    )
}
fn eod(r: Option<i64>) -> Expect {
    sense(
        SenseKey::BLANK_CHECK,
        Asc::END_OF_DATA_DETECTED,
        false,
        false,
        false,
        r,
    )
}
fn bop(r: i64) -> Expect {
    sense(
        SenseKey::NO_SENSE,
        Asc::BEGINNING_OF_PARTITION_MEDIUM_DETECTED,
        false,
        true,
        false,
        Some(r),
    )
}
fn ili(r: i64) -> Expect {
    sense(
        SenseKey::NO_SENSE,
        Asc::NO_ADDITIONAL_SENSE,
        false,
        false,
        true,
        Some(r),
    )
}
fn invalid_cdb() -> Expect {
    sense(
        SenseKey::ILLEGAL_REQUEST,
        Asc::INVALID_FIELD_IN_CDB,
        false,
        false,
        false,
        None,
    )
}

#[derive(Default)]
struct Model {
    tape: Vec<Obj>,
    pos: usize,
    block: u32,
}

impl Model {
    fn files_before(&self, pos: usize) -> usize {
        self.tape[..pos]
            .iter()
            .filter(|o| **o == Obj::Filemark)
            .count()
    }

    fn space_records(&mut self, n: i64) -> Expect {
        let mut left = n.unsigned_abs() as i64;
        if n >= 0 {
            while left > 0 {
                match self.tape.get(self.pos) {
                    None => return eod(Some(left)),
                    Some(Obj::Filemark) => {
                        self.pos += 1;
                        return filemark(left);
                    }
                    Some(_) => {
                        self.pos += 1;
                        left -= 1;
                    }
                }
            }
        } else {
            while left > 0 {
                if self.pos == 0 {
                    return bop(-left);
                }
                self.pos -= 1;
                if self.tape[self.pos] == Obj::Filemark {
                    return filemark(-left);
                }
                left -= 1;
            }
        }
        good(Vec::new())
    }

    fn space_filemarks(&mut self, n: i64) -> Expect {
        let mut left = n.unsigned_abs() as i64;
        if n >= 0 {
            while left > 0 {
                match self.tape.get(self.pos) {
                    None => return eod(Some(left)),
                    Some(o) => {
                        if *o == Obj::Filemark {
                            left -= 1;
                        }
                        self.pos += 1;
                    }
                }
            }
        } else {
            while left > 0 {
                if self.pos == 0 {
                    return bop(-left);
                }
                self.pos -= 1;
                if self.tape[self.pos] == Obj::Filemark {
                    left -= 1;
                }
            }
        }
        good(Vec::new())
    }

    fn read_one(&mut self, len: u32, sili: bool) -> Expect {
        if len == 0 {
            return good(Vec::new());
        }
        match self.tape.get(self.pos).cloned() {
            None => eod(Some(i64::from(len))),
            Some(Obj::Filemark) => {
                self.pos += 1;
                filemark(i64::from(len))
            }
            Some(Obj::Record(d)) => {
                self.pos += 1;
                let actual = d.len() as i64;
                let data = d[..d.len().min(len as usize)].to_vec();
                // SSC-4 READ(6), SILI = 1 and FIXED = 0: underlength is never reported,
                // overlength only when the mode block length is non-zero.
                let suppressed = sili && (actual < i64::from(len) || self.block == 0);
                if actual == i64::from(len) || suppressed {
                    good(data)
                } else {
                    with_data(ili(i64::from(len) - actual), data)
                }
            }
        }
    }

    fn read_fixed(&mut self, count: u32) -> Expect {
        if self.block == 0 {
            return invalid_cdb();
        }
        let mut data = Vec::new();
        for done in 0..count {
            let r = i64::from(count - done);
            match self.tape.get(self.pos).cloned() {
                None => return with_data(eod(Some(r)), data),
                Some(Obj::Filemark) => {
                    self.pos += 1;
                    return with_data(filemark(r), data);
                }
                Some(Obj::Record(d)) => {
                    self.pos += 1;
                    if d.len() != self.block as usize {
                        return with_data(ili(r), data);
                    }
                    data.extend_from_slice(&d);
                }
            }
        }
        good(data)
    }

    fn apply(&mut self, op: &Op) -> (Vec<u8>, Vec<u8>, Expect) {
        match *op {
            Op::SetBlock(b) => {
                self.block = b;
                let l = b.to_be_bytes();
                let list = vec![0, 0, 0x10, 8, 0, 0, 0, 0, 0, l[1], l[2], l[3]];
                (vec![0x15, 0x10, 0, 0, 12, 0], list, good(Vec::new()))
            }
            Op::WriteVar { len, seed } => {
                let d = record(seed, len);
                self.tape.truncate(self.pos);
                self.tape.push(Obj::Record(d.clone()));
                self.pos += 1;
                (
                    write6(Transfer::Variable(len as u32)).to_vec(),
                    d,
                    good(Vec::new()),
                )
            }
            Op::WriteFixed { count, seed } => {
                let b = self.block as usize;
                let d = record(seed, b * count as usize);
                let cdb = write6(Transfer::Fixed(count)).to_vec();
                if b == 0 {
                    return (cdb, d, invalid_cdb());
                }
                if count > 0 {
                    self.tape.truncate(self.pos);
                    for chunk in d.chunks(b) {
                        self.tape.push(Obj::Record(chunk.to_vec()));
                        self.pos += 1;
                    }
                }
                (cdb, d, good(Vec::new()))
            }
            Op::Filemarks { count, immed } => {
                if count > 0 {
                    self.tape.truncate(self.pos);
                    for _ in 0..count {
                        self.tape.push(Obj::Filemark);
                        self.pos += 1;
                    }
                }
                (
                    write_filemarks(count, immed).to_vec(),
                    Vec::new(),
                    good(Vec::new()),
                )
            }
            Op::ReadVar { len, sili } => (
                read6(Transfer::Variable(len), sili).to_vec(),
                Vec::new(),
                self.read_one(len, sili),
            ),
            Op::ReadFixed { count } => {
                let e = if count == 0 && self.block != 0 {
                    good(Vec::new())
                } else {
                    self.read_fixed(count)
                };
                (read6(Transfer::Fixed(count), false).to_vec(), Vec::new(), e)
            }
            Op::SpaceRecords(n) => (
                space6(SpaceCode::Blocks, n).to_vec(),
                Vec::new(),
                self.space_records(i64::from(n)),
            ),
            Op::Space16Records(n) => (
                space16(SpaceCode::Blocks, n).to_vec(),
                Vec::new(),
                self.space_records(n),
            ),
            Op::SpaceFilemarks(n) => (
                space6(SpaceCode::Filemarks, n).to_vec(),
                Vec::new(),
                self.space_filemarks(i64::from(n)),
            ),
            Op::SpaceEod => {
                self.pos = self.tape.len();
                (
                    space6(SpaceCode::EndOfData, 0).to_vec(),
                    Vec::new(),
                    good(Vec::new()),
                )
            }
            Op::Locate(o) => {
                let e = if o as usize > self.tape.len() {
                    self.pos = self.tape.len();
                    eod(None)
                } else {
                    self.pos = o as usize;
                    good(Vec::new())
                };
                (locate10(o, None).to_vec(), Vec::new(), e)
            }
            Op::LocateFile(k) => {
                let mark = self
                    .tape
                    .iter()
                    .enumerate()
                    .filter(|(_, o)| **o == Obj::Filemark)
                    .nth(k as usize)
                    .map(|(i, _)| i);
                let e = match mark {
                    Some(i) => {
                        self.pos = i;
                        good(Vec::new())
                    }
                    None => {
                        self.pos = self.tape.len();
                        eod(None)
                    }
                };
                (
                    locate16(LocateDestination::File(k), None).to_vec(),
                    Vec::new(),
                    e,
                )
            }
            Op::ReadPosition => {
                let mut d = vec![0u8; 32];
                d[0] = if self.pos == 0 { 0x80 } else { 0 };
                d[8..16].copy_from_slice(&(self.pos as u64).to_be_bytes());
                d[16..24].copy_from_slice(&(self.files_before(self.pos) as u64).to_be_bytes());
                (
                    read_position(PositionForm::Long).to_vec(),
                    Vec::new(),
                    good(d),
                )
            }
            Op::Rewind => {
                self.pos = 0;
                (REWIND.to_vec(), Vec::new(), good(Vec::new()))
            }
        }
    }
}

fn run_case(ops: &[Op]) {
    let rig = Rig::loaded("ibm-td9", MediaType::Lto9, 1 << 40);
    let mut model = Model::default();
    for (step, op) in ops.iter().enumerate() {
        let (cdb, data_out, expect) = model.apply(op);
        let r = rig.run(&cdb, &data_out);
        let got = Expect {
            sense: match r.status {
                Status::Good => None,
                Status::CheckCondition => {
                    let s = sense_of(&r).unwrap();
                    let info = s.information.map(|_| residue(&s));
                    Some((s.key, s.asc, s.filemark, s.eom, s.ili, info))
                }
                other => panic!("step {step} {op:?}: status {other:?}"),
            },
            data: r.data_in.to_vec(),
        };
        assert_eq!(got, expect, "step {step}: {op:?}");
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn drive_matches_reference_model(ops in prop::collection::vec(op(), 1..80)) {
        run_case(&ops);
    }
}

#[test]
fn fixed_sequence() {
    run_case(&[
        Op::WriteVar { len: 10, seed: 1 },
        Op::Filemarks {
            count: 2,
            immed: false,
        },
        Op::WriteVar { len: 20, seed: 2 },
        Op::Rewind,
        Op::SpaceFilemarks(2),
        Op::ReadPosition,
        Op::SpaceRecords(-2),
        Op::ReadVar {
            len: 5,
            sili: false,
        },
        Op::LocateFile(1),
        Op::ReadPosition,
        Op::SetBlock(512),
        Op::WriteFixed { count: 2, seed: 3 },
        Op::Locate(2),
        Op::ReadFixed { count: 3 },
    ]);
}
