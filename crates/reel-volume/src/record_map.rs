//! A partition's logical objects as runs, and their sidecar page encoding.
//!
//! Backup streams write long runs of equal-sized records separated by filemarks, so runs keep
//! the map small: one 13-byte entry per run. Pages of [`RUNS_PER_PAGE`] runs are stored under
//! sidecar keys 0, 1, 2, …; only pages that changed are rewritten.
//!
//! Page = version u8 | run count u32 | runs; run = kind u8 (0 records, 1 filemarks,
//! 2 encrypted records: the drive's sealed form, SSC-4 §4.2.27) | record length u32 (0 for
//! filemarks) | count u64. A binary older than kind 2 refuses such a page with a clear error.

use reel_chunkstore::FormatError;

pub const RUNS_PER_PAGE: usize = 4096;
const PAGE_VERSION: u8 = 1;
const RUN_LEN: usize = 1 + 4 + 8;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RunKind {
    Records(u32),
    /// Records the drive encrypted, each this many bytes in its sealed form.
    EncryptedRecords(u32),
    Filemarks,
}

impl RunKind {
    /// The length of each record of the run (`None` for filemarks).
    pub fn record_len(self) -> Option<u32> {
        match self {
            RunKind::Records(len) | RunKind::EncryptedRecords(len) => Some(len),
            RunKind::Filemarks => None,
        }
    }
}

/// `count` objects of one kind starting at object `first`, whose data starts at stream `offset`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Run {
    pub first: u64,
    pub offset: u64,
    pub count: u64,
    pub kind: RunKind,
}

impl Run {
    pub fn end(&self) -> u64 {
        self.first + self.count
    }
    pub fn bytes(&self) -> u64 {
        self.kind
            .record_len()
            .map_or(0, |len| u64::from(len) * self.count)
    }
}

pub fn encode_page(runs: &[Run]) -> Vec<u8> {
    let mut out = Vec::with_capacity(5 + runs.len() * RUN_LEN);
    out.push(PAGE_VERSION);
    out.extend_from_slice(&(runs.len() as u32).to_le_bytes());
    for r in runs {
        let (kind, len) = match r.kind {
            RunKind::Records(len) => (0u8, len),
            RunKind::Filemarks => (1u8, 0),
            RunKind::EncryptedRecords(len) => (2u8, len),
        };
        out.push(kind);
        out.extend_from_slice(&len.to_le_bytes());
        out.extend_from_slice(&r.count.to_le_bytes());
    }
    out
}

fn bad(reason: impl Into<String>) -> FormatError {
    FormatError {
        what: "record map page",
        reason: reason.into(),
    }
}

/// Decodes a page, continuing the runs in `into` (positions derive from what precedes).
pub fn decode_page(bytes: &[u8], into: &mut Vec<Run>) -> Result<(), FormatError> {
    let (&version, rest) = bytes.split_first().ok_or_else(|| bad("empty"))?;
    if version != PAGE_VERSION {
        return Err(bad(format!("unsupported version {version}")));
    }
    let count_bytes: [u8; 4] = rest
        .get(..4)
        .and_then(|b| b.try_into().ok())
        .ok_or_else(|| bad("truncated"))?;
    let count = u32::from_le_bytes(count_bytes) as usize;
    let body = &rest[4..];
    if count.checked_mul(RUN_LEN) != Some(body.len()) {
        return Err(bad("run count does not match its length"));
    }
    for entry in body.chunks_exact(RUN_LEN) {
        let len = u32::from_le_bytes([entry[1], entry[2], entry[3], entry[4]]);
        let n = u64::from_le_bytes(entry[5..13].try_into().map_err(|_| bad("truncated run"))?);
        let kind = match (entry[0], len) {
            (0, 1..) => RunKind::Records(len),
            (1, 0) => RunKind::Filemarks,
            (2, 1..) => RunKind::EncryptedRecords(len),
            _ => {
                return Err(bad(format!(
                    "invalid run kind {} with length {len}",
                    entry[0]
                )));
            }
        };
        if n == 0 {
            return Err(bad("empty run"));
        }
        // Runs before this one were checked the same way, so their end and bytes cannot overflow.
        let (first, offset) = into
            .last()
            .map_or((0, 0), |r| (r.end(), r.offset + r.bytes()));
        let fits = first.checked_add(n).is_some()
            && u64::from(len)
                .checked_mul(n)
                .and_then(|b| offset.checked_add(b))
                .is_some();
        if !fits {
            return Err(bad("run overflows the partition"));
        }
        into.push(Run {
            first,
            offset,
            count: n,
            kind,
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// Found by the `record_map` fuzz target: a run whose record length × count overflows u64
    /// made the next run's offset computation panic (and wrap in release builds).
    #[test]
    fn fuzz_overflowing_run_is_rejected() {
        let input: &[u8] = &[
            0x1, 0x2, 0x0, 0x0, 0x0, 0x0, 0x0, 0x8, 0xf9, 0xff, 0x0, 0x20, 0x0, 0x21, 0x12, 0x16,
            0x0, 0x0, 0x0, 0x7e, 0x12, 0x4, 0x40, 0x0, 0x7e, 0x12, 0x0, 0x0, 0x0, 0x10, 0x11,
        ];
        assert!(decode_page(input, &mut Vec::new()).is_err());
        crate::fuzzing::decode_record_map_page(input);
    }

    proptest! {
        #[test]
        fn pages_round_trip(spec in proptest::collection::vec((0u8..3, 1u32..1 << 23, 1u64..1000), 0..50)) {
            let mut runs: Vec<Run> = Vec::new();
            for (kind, len, count) in spec {
                let (first, offset) = runs.last().map_or((0, 0), |r| (r.end(), r.offset + r.bytes()));
                let kind = match kind {
                    0 => RunKind::Records(len),
                    1 => RunKind::Filemarks,
                    _ => RunKind::EncryptedRecords(len),
                };
                runs.push(Run { first, offset, count, kind });
            }
            let mut back = Vec::new();
            decode_page(&encode_page(&runs), &mut back).unwrap();
            prop_assert_eq!(back, runs);
        }

        #[test]
        fn garbage_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..200)) {
            let _ = decode_page(&bytes, &mut Vec::new());
        }
    }
}
