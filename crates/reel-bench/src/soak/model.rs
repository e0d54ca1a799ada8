//! The soak's reference model of one cartridge, the records it writes, and a small PRNG.
//!
//! A cartridge's content is a sequence of logical objects (records and filemarks). The model
//! keeps every content the cartridge may show after a crash: since its last synchronising
//! point (WRITE FILEMARKS IMMED=0, REWIND, unload through MOVE MEDIUM) the durable content
//! must be intact, and anything written after it may or may not have been kept — but the
//! store syncs for every cartridge at once, so any later state the drive passed through may
//! be what a restart shows. Those states form "lines": appends extend the last line, a write
//! in the middle (which truncates, SSC-4 §4.2.9) starts a new one. A cartridge read after a
//! restart must equal a prefix of some line at least as long as that line's `min`.
//!
//! Every record starts with a header naming its cartridge and a sequence number unique in the
//! run; the rest is generated from both, so a record that belongs to another cartridge, or
//! to another place on this one, is named as such.

use std::fmt;

/// Record header: magic, barcode (8 bytes, space padded), sequence number, length.
pub const HEADER: usize = 4 + 8 + 8 + 4;
const MAGIC: &[u8; 4] = b"RSK1";

/// One logical object the model expects.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Obj {
    Record { seq: u64, len: u32 },
    Filemark,
}

/// One logical object read back.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Read {
    Record(bytes::Bytes),
    Filemark,
}

/// A possible content: `base[..n]` for `min <= n <= base.len()`.
#[derive(Clone, Debug, Default)]
pub struct Line {
    pub base: Vec<Obj>,
    pub min: usize,
}

/// What a cartridge may hold.
#[derive(Clone, Debug)]
pub struct CartModel {
    pub barcode: String,
    /// The last line is what the drive holds now (every write issued, acknowledged or not).
    pub lines: Vec<Line>,
    /// Set when a read-back did not match: the cartridge is left alone from then on.
    pub quarantined: bool,
}

impl CartModel {
    pub fn new(barcode: &str) -> CartModel {
        CartModel {
            barcode: barcode.to_string(),
            lines: vec![Line::default()],
            quarantined: false,
        }
    }

    /// The content as the drive has it now.
    pub fn current(&self) -> &[Obj] {
        &self.lines.last().expect("a model has a line").base
    }

    /// Bytes of records acknowledged at the last synchronising point (the smallest `min`
    /// prefix: what must survive).
    pub fn synced_bytes(&self) -> u64 {
        self.lines
            .iter()
            .map(|l| record_bytes(&l.base[..l.min]))
            .min()
            .unwrap_or(0)
    }

    pub fn synced_objects(&self) -> usize {
        self.lines.iter().map(|l| l.min).min().unwrap_or(0)
    }

    /// A write of `obj` issued at object position `pos` (before it is acknowledged: an
    /// unanswered write may still be kept).
    pub fn write_at(&mut self, pos: usize, obj: Obj) {
        let current = self.current().len();
        assert!(pos <= current, "write at {pos} past the end ({current})");
        if pos < current {
            let base = self.current()[..pos].to_vec();
            self.lines.push(Line { base, min: pos });
        }
        self.lines.last_mut().expect("a line").base.push(obj);
    }

    /// A synchronising point was acknowledged: what the drive holds is durable.
    pub fn synced(&mut self) {
        let base = self.current().to_vec();
        let min = base.len();
        self.lines = vec![Line { base, min }];
    }

    /// After a verified read-back of `n` objects (which matched line `line`): that is the
    /// content, and it is what the store recovered, so durable.
    pub fn settle(&mut self, line: usize, n: usize) {
        let base = self.lines[line].base[..n].to_vec();
        self.lines = vec![Line { base, min: n }];
    }

    /// The largest object count any line allows.
    pub fn max_len(&self) -> usize {
        self.lines.iter().map(|l| l.base.len()).max().unwrap_or(0)
    }
}

pub fn record_bytes(objs: &[Obj]) -> u64 {
    objs.iter()
        .map(|o| match o {
            Obj::Record { len, .. } => u64::from(*len),
            Obj::Filemark => 0,
        })
        .sum()
}

fn barcode_bytes(barcode: &str) -> [u8; 8] {
    let mut out = [b' '; 8];
    for (o, b) in out.iter_mut().zip(barcode.bytes()) {
        *o = b;
    }
    out
}

/// The record `seq` of `barcode`, `len` bytes (at least [`HEADER`]): the header, then a
/// generated body, half random words and half a repeated pattern (about 2:1 with zstd).
/// Three records in four take their body from a pool of 4096 per length, so most data
/// dedups and a long run does not fill the disk; the header still tells every record apart.
pub fn record(barcode: &str, seq: u64, len: u32) -> Vec<u8> {
    let len = len as usize;
    assert!(len >= HEADER);
    let mut out = vec![0u8; len];
    out[..4].copy_from_slice(MAGIC);
    out[4..12].copy_from_slice(&barcode_bytes(barcode));
    out[12..20].copy_from_slice(&seq.to_be_bytes());
    out[20..24].copy_from_slice(&(len as u32).to_be_bytes());
    let body = if seq.is_multiple_of(4) {
        seq | 1 << 63
    } else {
        seq % 4096
    };
    let mut rng = Rng::new(body ^ u64::from(len as u32) << 40);
    let pattern = rng.next().to_le_bytes();
    for (i, word) in out[HEADER..].chunks_mut(8).enumerate() {
        let bytes = if (i / 64) % 2 == 0 {
            rng.next().to_le_bytes()
        } else {
            pattern
        };
        word.copy_from_slice(&bytes[..word.len()]);
    }
    out
}

/// What a record's header says.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Header {
    pub barcode: String,
    pub seq: u64,
    pub len: u32,
}

pub fn parse_header(data: &[u8]) -> Option<Header> {
    if data.len() < HEADER || &data[..4] != MAGIC {
        return None;
    }
    Some(Header {
        barcode: String::from_utf8_lossy(&data[4..12]).trim().to_string(),
        seq: u64::from_be_bytes(data[12..20].try_into().ok()?),
        len: u32::from_be_bytes(data[20..24].try_into().ok()?),
    })
}

/// Why an object read back is not the one expected.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Mismatch {
    /// A record carrying another cartridge's header: cartridges' data mixed up.
    OtherCartridge { barcode: String, seq: u64 },
    /// This cartridge's record, but another one (stale or misplaced).
    OtherRecord { seq: u64 },
    /// Not a soak record at all, or a header that lies about its length.
    Garbage { len: usize },
    /// The right header, a different body: first differing byte.
    Corrupted { at: usize },
    /// A filemark where a record was expected, or the reverse.
    Kind,
}

impl fmt::Display for Mismatch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Mismatch::OtherCartridge { barcode, seq } => {
                write!(f, "holds cartridge {barcode}'s record {seq}")
            }
            Mismatch::OtherRecord { seq } => write!(f, "holds this cartridge's record {seq}"),
            Mismatch::Garbage { len } => write!(f, "holds {len} bytes that are no soak record"),
            Mismatch::Corrupted { at } => write!(f, "record corrupted from byte {at}"),
            Mismatch::Kind => write!(f, "a filemark and a record swapped"),
        }
    }
}

/// Compares what was read with what `barcode`'s model expects at that place.
pub fn check(barcode: &str, expected: &Obj, got: &Read) -> Result<(), Mismatch> {
    match (expected, got) {
        (Obj::Filemark, Read::Filemark) => Ok(()),
        (Obj::Record { seq, len }, Read::Record(data)) => {
            let Some(h) = parse_header(data) else {
                return Err(Mismatch::Garbage { len: data.len() });
            };
            if h.barcode != barcode {
                return Err(Mismatch::OtherCartridge {
                    barcode: h.barcode,
                    seq: h.seq,
                });
            }
            if h.seq != *seq {
                return Err(Mismatch::OtherRecord { seq: h.seq });
            }
            if h.len as usize != data.len() || h.len != *len {
                return Err(Mismatch::Garbage { len: data.len() });
            }
            let want = record(barcode, *seq, *len);
            match want.iter().zip(data.iter()).position(|(a, b)| a != b) {
                Some(at) => Err(Mismatch::Corrupted { at }),
                None => Ok(()),
            }
        }
        _ => Err(Mismatch::Kind),
    }
}

/// Streaming read-back against every line of a model: feed objects in order, then `finish`.
pub struct Matcher<'a> {
    model: &'a CartModel,
    alive: Vec<bool>,
    n: usize,
    /// The first object no line accepted, with each line's reason.
    pub failure: Option<(usize, Vec<String>)>,
    pub bytes: u64,
    /// Record bytes read that lie within every line's durable prefix.
    pub synced_bytes: u64,
}

impl<'a> Matcher<'a> {
    pub fn new(model: &'a CartModel) -> Matcher<'a> {
        Matcher {
            model,
            alive: vec![true; model.lines.len()],
            n: 0,
            failure: None,
            bytes: 0,
            synced_bytes: 0,
        }
    }

    /// Objects worth reading: no line is longer.
    pub fn wanted(&self) -> usize {
        self.model.max_len()
    }

    /// The next object read; false once no line matches.
    pub fn push(&mut self, got: &Read) -> bool {
        if self.failure.is_some() {
            return false;
        }
        let mut reasons = Vec::new();
        let mut memo: Option<(Obj, Result<(), Mismatch>)> = None;
        for (i, line) in self.model.lines.iter().enumerate() {
            if !self.alive[i] {
                continue;
            }
            let Some(expected) = line.base.get(self.n) else {
                self.alive[i] = false;
                reasons.push(format!(
                    "line {i}: ends at {} objects, an object follows",
                    line.base.len()
                ));
                continue;
            };
            // Lines share long prefixes: compare each distinct expectation once.
            let result = match &memo {
                Some((o, r)) if o == expected => r.clone(),
                _ => {
                    let r = check(&self.model.barcode, expected, got);
                    memo = Some((*expected, r.clone()));
                    r
                }
            };
            if let Err(m) = result {
                self.alive[i] = false;
                reasons.push(format!("line {i} (expects {expected:?}): {m}"));
            }
        }
        if !self.alive.iter().any(|a| *a) {
            self.failure = Some((self.n, reasons));
            return false;
        }
        if let Read::Record(d) = got {
            self.bytes += d.len() as u64;
            if self.n < self.model.synced_objects() {
                self.synced_bytes += d.len() as u64;
            }
        }
        self.n += 1;
        true
    }

    /// End of data after the objects pushed: the line that explains the content, or why
    /// none does.
    pub fn finish(&mut self) -> Result<(usize, usize), String> {
        if let Some((at, reasons)) = &self.failure {
            return Err(format!(
                "object {at} matches no possible content: {}",
                reasons.join("; ")
            ));
        }
        let n = self.n;
        for (i, line) in self.model.lines.iter().enumerate() {
            if self.alive[i] && n >= line.min && n <= line.base.len() {
                return Ok((i, n));
            }
        }
        let lines: Vec<String> = self
            .model
            .lines
            .iter()
            .map(|l| format!("{}..={} objects", l.min, l.base.len()))
            .collect();
        Err(format!(
            "end of data after {n} objects: acknowledged data lost (possible contents: {})",
            lines.join(", ")
        ))
    }
}

/// SplitMix64: small, fast, good enough to pick workloads and fill records.
#[derive(Clone, Debug)]
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed)
    }

    #[allow(clippy::should_implement_trait)]
    pub fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in `0..n` (`n > 0`).
    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }

    pub fn pick<'a, T>(&mut self, items: &'a [T]) -> Option<&'a T> {
        (!items.is_empty()).then(|| &items[self.below(items.len() as u64) as usize])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rec(seq: u64) -> Obj {
        Obj::Record { seq, len: 100 }
    }

    fn read(barcode: &str, o: &Obj) -> Read {
        match o {
            Obj::Record { seq, len } => Read::Record(record(barcode, *seq, *len).into()),
            Obj::Filemark => Read::Filemark,
        }
    }

    fn verify(m: &CartModel, content: &[Read]) -> Result<(usize, usize), String> {
        let mut matcher = Matcher::new(m);
        for r in content {
            if !matcher.push(r) {
                break;
            }
        }
        matcher.finish()
    }

    #[test]
    fn records_name_their_cartridge() {
        let r = record("TA0001L9", 7, 300);
        assert_eq!(r.len(), 300);
        assert_eq!(
            parse_header(&r),
            Some(Header {
                barcode: "TA0001L9".into(),
                seq: 7,
                len: 300
            })
        );
        assert_ne!(record("TA0001L9", 8, 300)[HEADER..], r[HEADER..]);
        assert_ne!(
            record("TA0001L9", 7, 300)[..HEADER],
            record("TB0001L9", 7, 300)[..HEADER]
        );
        // Pooled bodies repeat (dedup), unique ones do not.
        assert_eq!(
            record("TA0001L9", 7, 300)[HEADER..],
            record("TB0001L9", 4103, 300)[HEADER..]
        );
        assert_ne!(
            record("TA0001L9", 8, 300)[HEADER..],
            record("TA0001L9", 4104, 300)[HEADER..]
        );
        let e = Obj::Record { seq: 7, len: 300 };
        assert_eq!(
            check("TA0001L9", &e, &Read::Record(r.clone().into())),
            Ok(())
        );
        assert_eq!(
            check("TB0001L9", &e, &Read::Record(r.clone().into())),
            Err(Mismatch::OtherCartridge {
                barcode: "TA0001L9".into(),
                seq: 7
            })
        );
        let mut bad = r.clone();
        bad[200] ^= 1;
        assert_eq!(
            check("TA0001L9", &e, &Read::Record(bad.into())),
            Err(Mismatch::Corrupted { at: 200 })
        );
        assert_eq!(
            check("TA0001L9", &Obj::Filemark, &Read::Record(r.into())),
            Err(Mismatch::Kind)
        );
        assert_eq!(
            check("TA0001L9", &e, &Read::Record(vec![0u8; 300].into())),
            Err(Mismatch::Garbage { len: 300 })
        );
    }

    #[test]
    fn unsynced_appends_may_be_lost_synced_ones_not() {
        let b = "TA0001L9";
        let mut m = CartModel::new(b);
        m.write_at(0, rec(1));
        m.write_at(1, Obj::Filemark);
        m.synced();
        m.write_at(2, rec(2));
        m.write_at(3, rec(3));
        let all: Vec<Read> = m.current().iter().map(|o| read(b, o)).collect();
        // Synced prefix plus any prefix of what followed.
        assert_eq!(verify(&m, &all[..2]), Ok((0, 2)));
        assert_eq!(verify(&m, &all[..3]), Ok((0, 3)));
        assert_eq!(verify(&m, &all), Ok((0, 4)));
        // Less than the synced prefix: acknowledged data lost.
        let e = verify(&m, &all[..1]).unwrap_err();
        assert!(e.contains("acknowledged data lost"), "{e}");
        // More than was ever written.
        let mut more = all.clone();
        more.push(read(b, &rec(9)));
        assert!(verify(&m, &more).unwrap_err().contains("ends at 4 objects"));
        // Another cartridge's record in the middle.
        let mut mixed = all.clone();
        mixed[2] = read("TB0002L9", &rec(2));
        let e = verify(&m, &mixed).unwrap_err();
        assert!(e.contains("object 2") && e.contains("TB0002L9"), "{e}");
    }

    #[test]
    fn a_truncating_write_keeps_the_old_content_possible_until_the_next_sync() {
        let b = "TA0002L9";
        let mut m = CartModel::new(b);
        for s in 1..=3 {
            m.write_at(m.current().len(), rec(s));
        }
        m.synced();
        let old: Vec<Read> = m.current().iter().map(|o| read(b, o)).collect();
        // Rewind and write from the beginning: truncates.
        m.write_at(0, rec(10));
        m.write_at(1, rec(11));
        assert_eq!(m.lines.len(), 2);
        let new: Vec<Read> = m.current().iter().map(|o| read(b, o)).collect();
        assert_eq!(verify(&m, &old), Ok((0, 3)));
        assert_eq!(verify(&m, &new), Ok((1, 2)));
        assert_eq!(verify(&m, &new[..1]), Ok((1, 1)));
        assert_eq!(verify(&m, &[]), Ok((1, 0)));
        // The old content cut short is not a state the cartridge passed through.
        assert!(verify(&m, &old[..2]).is_err());
        m.synced();
        assert!(verify(&m, &old).is_err());
        assert_eq!(m.synced_objects(), 2);
        m.settle(0, 2);
        assert_eq!(m.lines.len(), 1);
    }

    #[test]
    fn rng_is_deterministic_and_bounded() {
        let mut a = Rng::new(5);
        let mut b = Rng::new(5);
        for _ in 0..100 {
            let x = a.below(7);
            assert!(x < 7);
            assert_eq!(x, b.below(7));
        }
        assert_eq!(a.pick::<u8>(&[]), None);
    }
}
