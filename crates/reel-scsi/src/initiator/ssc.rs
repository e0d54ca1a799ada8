//! Tape commands (SSC-4) and the answers a tape initiator reads: READ/WRITE(6) in both block
//! modes, WRITE FILEMARKS, SPACE, LOCATE, READ POSITION in its three forms, READ BLOCK LIMITS,
//! LOAD UNLOAD and REWIND. reel-ssc decodes these on the target side; its tests run every
//! builder and parser here against a real drive.

use super::{ResponseError, be, be24, need};

/// REWIND (SSC-4) without IMMED: a synchronising point, then BOP of partition 0.
pub const REWIND: [u8; 6] = [0x01, 0, 0, 0, 0, 0];

/// READ BLOCK LIMITS (SSC-4); parse the answer with [`parse_block_limits`].
pub const READ_BLOCK_LIMITS: [u8; 6] = [0x05, 0, 0, 0, 0, 0];

/// LOAD UNLOAD (SSC-4) with LOAD = 1, IMMED = 0: thread the cartridge (or rewind it).
pub const LOAD: [u8; 6] = [0x1B, 0, 0, 0, 0x01, 0];

/// LOAD UNLOAD (SSC-4) with LOAD = 0, IMMED = 0: rewind and unthread, ready for the changer.
pub const UNLOAD: [u8; 6] = [0x1B, 0, 0, 0, 0, 0];

/// The TRANSFER LENGTH of READ(6)/WRITE(6) and the block mode it is counted in (FIXED bit).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Transfer {
    /// FIXED = 0: one record of this many bytes (at most this many, reading).
    Variable(u32),
    /// FIXED = 1: this many blocks of the block length set with MODE SELECT.
    Fixed(u32),
}

impl Transfer {
    /// FIXED bit (byte 1 bit 0) and the 24-bit TRANSFER LENGTH.
    fn fields(self) -> (u8, [u8; 3]) {
        match self {
            Transfer::Variable(bytes) => (0, be24(bytes)),
            Transfer::Fixed(blocks) => (1, be24(blocks)),
        }
    }
}

/// WRITE(6) (SSC-4).
pub fn write6(transfer: Transfer) -> [u8; 6] {
    let (fixed, [a, b, c]) = transfer.fields();
    [0x0A, fixed, a, b, c, 0]
}

/// READ(6) (SSC-4); `sili` suppresses the incorrect-length indication for shorter records.
pub fn read6(transfer: Transfer, sili: bool) -> [u8; 6] {
    let (fixed, [a, b, c]) = transfer.fields();
    [0x08, fixed | u8::from(sili) << 1, a, b, c, 0]
}

/// WRITE FILEMARKS(6) (SSC-4): `count` filemarks; IMMED = 0 is a synchronising point.
pub fn write_filemarks(count: u32, immed: bool) -> [u8; 6] {
    let [a, b, c] = be24(count);
    [0x10, u8::from(immed), a, b, c, 0]
}

/// What SPACE counts (SSC-4 SPACE(6), CODE field).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SpaceCode {
    /// 000b: logical blocks (records).
    Blocks = 0,
    /// 001b: filemarks.
    Filemarks = 1,
    /// 010b: sequential filemarks (LTO drives refuse it).
    SequentialFilemarks = 2,
    /// 011b: end of data (the count is ignored).
    EndOfData = 3,
}

/// SPACE(6) (SSC-4): `count` in 24-bit two's complement, negative towards BOP.
pub fn space6(code: SpaceCode, count: i32) -> [u8; 6] {
    debug_assert!(
        (-(1 << 23)..1 << 23).contains(&count),
        "{count} does not fit 24 bits"
    );
    let [_, a, b, c] = count.to_be_bytes();
    [0x11, code as u8, a, b, c, 0]
}

/// SPACE(16) (SSC-4): 64-bit count, no parameter data.
pub fn space16(code: SpaceCode, count: i64) -> [u8; 16] {
    let mut cdb = [0u8; 16];
    cdb[0] = 0x91;
    cdb[1] = code as u8;
    cdb[4..12].copy_from_slice(&count.to_be_bytes());
    cdb
}

/// LOCATE(10) (SSC-4) to logical object `object`; with a partition, CP = 1 changes to it.
pub fn locate10(object: u32, partition: Option<u8>) -> [u8; 10] {
    let o = object.to_be_bytes();
    let cp = if partition.is_some() { 0x02 } else { 0 };
    [
        0x2B,
        cp,
        0,
        o[0],
        o[1],
        o[2],
        o[3],
        0,
        partition.unwrap_or(0),
        0,
    ]
}

/// Where LOCATE(16) goes (SSC-4 LOCATE(16), DEST_TYPE field).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LocateDestination {
    /// 000b: logical object identifier.
    Object(u64),
    /// 001b: logical file identifier (the BOP side of that filemark on LTO drives).
    File(u64),
    /// 011b: end of data.
    EndOfData,
}

/// LOCATE(16) (SSC-4); with a partition, CP = 1 changes to it.
pub fn locate16(destination: LocateDestination, partition: Option<u8>) -> [u8; 16] {
    let (dest_type, id) = match destination {
        LocateDestination::Object(id) => (0u8, id),
        LocateDestination::File(id) => (1, id),
        LocateDestination::EndOfData => (3, 0),
    };
    let mut cdb = [0u8; 16];
    cdb[0] = 0x92;
    cdb[1] = dest_type << 3 | if partition.is_some() { 0x02 } else { 0 };
    cdb[3] = partition.unwrap_or(0);
    cdb[4..12].copy_from_slice(&id.to_be_bytes());
    cdb
}

/// The form of a READ POSITION answer (SSC-4 READ POSITION, SERVICE ACTION field).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PositionForm {
    /// 00h: 20 bytes, 32-bit object identifiers, object buffer contents.
    Short,
    /// 06h: 32 bytes, 64-bit object and file identifiers, no buffer fields.
    Long,
    /// 08h: 32 bytes, 64-bit object identifiers and buffer contents.
    Extended,
}

impl PositionForm {
    /// SERVICE ACTION and the length of the answer.
    fn layout(self) -> (u8, usize) {
        match self {
            PositionForm::Short => (0x00, 20),
            PositionForm::Long => (0x06, 32),
            PositionForm::Extended => (0x08, 32),
        }
    }
}

/// READ POSITION (SSC-4) in `form`; the extended form's allocation length is its 32 bytes.
pub fn read_position(form: PositionForm) -> [u8; 10] {
    let (action, len) = form.layout();
    let alloc = if form == PositionForm::Extended {
        len as u8
    } else {
        0
    };
    [0x34, action, 0, 0, 0, 0, 0, 0, alloc, 0]
}

/// A READ POSITION answer. Fields a form does not carry are `None`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Position {
    /// BOP: at the beginning of the partition.
    pub bop: bool,
    /// EOP: beyond the early-warning point (reel reports BPEW alike).
    pub eop: bool,
    pub partition: u32,
    /// The logical object identifier of the current position (the next object).
    pub object: u64,
    /// The logical file identifier (number of filemarks before the position): long form.
    pub file: Option<u64>,
    /// LAST LOGICAL OBJECT LOCATION, the next object to reach the medium: short and extended.
    pub last_object: Option<u64>,
    /// Logical objects written but not yet synchronised to the medium: short and extended.
    pub buffered_objects: Option<u32>,
    /// Bytes written but not yet synchronised to the medium: short and extended.
    pub buffered_bytes: Option<u64>,
}

/// Parses a READ POSITION answer of `form` (asked for with [`read_position`]).
pub fn parse_read_position(form: PositionForm, data: &[u8]) -> Result<Position, ResponseError> {
    let (_, len) = form.layout();
    need("READ POSITION", data, len)?;
    let (bop, eop) = (data[0] & 0x80 != 0, data[0] & 0x40 != 0);
    Ok(match form {
        PositionForm::Short => Position {
            bop,
            eop,
            partition: u32::from(data[1]),
            object: be(data, 4, 4),
            file: None,
            last_object: Some(be(data, 8, 4)),
            buffered_objects: Some(be(data, 13, 3) as u32),
            buffered_bytes: Some(be(data, 16, 4)),
        },
        PositionForm::Long => Position {
            bop,
            eop,
            partition: be(data, 4, 4) as u32,
            object: be(data, 8, 8),
            file: Some(be(data, 16, 8)),
            last_object: None,
            buffered_objects: None,
            buffered_bytes: None,
        },
        PositionForm::Extended => {
            // ADDITIONAL LENGTH (28) tells the extended form from a mislabelled long one.
            if be(data, 2, 2) != 28 {
                return Err(ResponseError::PositionForm {
                    form,
                    got: data.len(),
                });
            }
            Position {
                bop,
                eop,
                partition: u32::from(data[1]),
                object: be(data, 8, 8),
                file: None,
                last_object: Some(be(data, 16, 8)),
                buffered_objects: Some(be(data, 5, 3) as u32),
                buffered_bytes: Some(be(data, 24, 8)),
            }
        }
    })
}

/// A READ BLOCK LIMITS answer (SSC-4): the record lengths the drive accepts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BlockLimits {
    /// MAXIMUM BLOCK LENGTH LIMIT.
    pub max: u32,
    /// MINIMUM BLOCK LENGTH LIMIT.
    pub min: u16,
    /// GRANULARITY: supported lengths are multiples of 2^granularity.
    pub granularity: u8,
}

/// Parses a READ BLOCK LIMITS answer (6 bytes).
pub fn parse_block_limits(data: &[u8]) -> Result<BlockLimits, ResponseError> {
    need("READ BLOCK LIMITS", data, 6)?;
    Ok(BlockLimits {
        max: be(data, 1, 3) as u32,
        min: be(data, 4, 2) as u16,
        granularity: data[0] & 0x1F,
    })
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;
    use crate::cdb::{Cdb, Opcode};

    fn framed(cdb: &[u8]) -> Cdb<'_> {
        let c = Cdb::parse(cdb).expect("frames");
        assert_eq!(c.len(), cdb.len(), "length implied by the opcode");
        c
    }

    /// SPACE(6)'s 24-bit count as reel-ssc sign-extends it.
    fn count24(cdb: &Cdb<'_>) -> i64 {
        let raw = cdb.be(2, 3) as u32;
        i64::from(((raw << 8) as i32) >> 8)
    }

    proptest! {
        #[test]
        fn builders_carry_their_fields(len in 0u32..1 << 24, sili: bool, immed: bool, count in -(1i32 << 23)..1 << 23, count64: i64, object: u64, partition: Option<u8>) {
            let c = write6(Transfer::Variable(len));
            let cdb = framed(&c);
            prop_assert_eq!((cdb.opcode(), cdb.byte(1), cdb.be(2, 3)), (Opcode::WRITE_6, 0, u64::from(len)));
            let c = read6(Transfer::Fixed(len), sili);
            let cdb = framed(&c);
            prop_assert_eq!((cdb.opcode(), cdb.bit(1, 0), cdb.bit(1, 1), cdb.be(2, 3)), (Opcode::READ_6, true, sili, u64::from(len)));
            let c = write_filemarks(len, immed);
            let cdb = framed(&c);
            prop_assert_eq!((cdb.opcode(), cdb.bit(1, 0), cdb.be(2, 3)), (Opcode::WRITE_FILEMARKS_6, immed, u64::from(len)));
            let c = space6(SpaceCode::Filemarks, count);
            let cdb = framed(&c);
            prop_assert_eq!((cdb.byte(1) & 0x0F, count24(&cdb)), (1, i64::from(count)));
            let c = space16(SpaceCode::Blocks, count64);
            let cdb = framed(&c);
            prop_assert_eq!((cdb.opcode(), cdb.byte(1), cdb.be64(4) as i64, cdb.be16(12)), (Opcode::SYNCHRONIZE_CACHE_16, 0, count64, 0));
            let c = locate10(object as u32, partition);
            let cdb = framed(&c);
            prop_assert_eq!((cdb.bit(1, 1), cdb.byte(8), cdb.be32(3)), (partition.is_some(), partition.unwrap_or(0), object as u32));
            for (destination, dest_type) in [(LocateDestination::Object(object), 0), (LocateDestination::File(object), 1)] {
                let c = locate16(destination, partition);
                let cdb = framed(&c);
                prop_assert_eq!((cdb.byte(1) >> 3 & 7, cdb.bit(1, 1), cdb.byte(3), cdb.be64(4)), (dest_type, partition.is_some(), partition.unwrap_or(0), object));
            }
        }

        #[test]
        fn parsers_never_panic(data in proptest::collection::vec(any::<u8>(), 0..40)) {
            for form in [PositionForm::Short, PositionForm::Long, PositionForm::Extended] {
                let _ = parse_read_position(form, &data);
            }
            let _ = parse_block_limits(&data);
        }
    }

    #[test]
    fn fixed_commands_frame() {
        for cdb in [REWIND, READ_BLOCK_LIMITS, LOAD, UNLOAD] {
            framed(&cdb);
        }
        for form in [
            PositionForm::Short,
            PositionForm::Long,
            PositionForm::Extended,
        ] {
            assert_eq!(framed(&read_position(form)).opcode(), Opcode::READ_POSITION);
        }
        assert_eq!(locate16(LocateDestination::EndOfData, None)[1], 3 << 3);
        assert_eq!(
            parse_block_limits(&[0, 0x80, 0, 0, 0, 1]).unwrap(),
            BlockLimits {
                max: 8 << 20,
                min: 1,
                granularity: 0
            }
        );
        assert_eq!(
            parse_read_position(PositionForm::Extended, &[0; 32]),
            Err(ResponseError::PositionForm {
                form: PositionForm::Extended,
                got: 32
            })
        );
    }
}
