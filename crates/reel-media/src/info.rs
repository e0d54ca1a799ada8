//! [`CartridgeInfo`]: the persistent non-data state of a cartridge, and its
//! compact versioned binary encoding.
//!
//! # Encoding (version 1, all integers little-endian)
//!
//! ```text
//! magic "RLCI" | version u8 = 1
//! barcode: len u8, bytes
//! media type code u8 | capacity u64 | early-warning percent u8
//! flags u8 (bit 0 write protected; other bits must be 0)
//! partitions: count u8, count × capacity u64
//! load count u64 | 8 × u64 counters (see Counters field order)
//! last written: tag u8 (0 none, 1 some), u64 seconds (present only if tag 1)
//! MAM: manufacturer (len u8, bytes) | serial (len u8, bytes)
//!      manufacture date u64 | attribute count u16,
//!      count × (id u16, format u8, len u16, value)
//! CRC-32 (IEEE) u32 of everything above
//! ```
//!
//! Decoding validates every field (checksum, lengths, barcode, layout, MAM
//! attribute rules) and never panics.

use crate::error::LayoutError;
use crate::mam::{AttributeFormat, DEFAULT_MANUFACTURER, Mam};
use crate::media_type::{Barcode, MediaType};
use crate::time::UnixTime;

/// Default early-warning threshold, percent of partition capacity.
pub const DEFAULT_EARLY_WARNING_PERCENT: u8 = 98;

const MAGIC: &[u8; 4] = b"RLCI";
const VERSION: u8 = 1;

/// Usage counters kept across loads.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Counters {
    /// Host bytes written over the medium's life.
    pub bytes_written_total: u64,
    /// Host bytes read (transferred to the host) over the medium's life.
    pub bytes_read_total: u64,
    /// Host bytes written in the current (or last) load.
    pub bytes_written_load: u64,
    /// Host bytes read in the current (or last) load.
    pub bytes_read_load: u64,
    /// Records written over the medium's life.
    pub records_written: u64,
    /// Records read over the medium's life.
    pub records_read: u64,
    /// Filemarks written over the medium's life.
    pub filemarks_written: u64,
    /// Filemarks read over the medium's life.
    pub filemarks_read: u64,
}

impl Counters {
    fn to_array(self) -> [u64; 8] {
        [
            self.bytes_written_total,
            self.bytes_read_total,
            self.bytes_written_load,
            self.bytes_read_load,
            self.records_written,
            self.records_read,
            self.filemarks_written,
            self.filemarks_read,
        ]
    }
    fn from_array(a: [u64; 8]) -> Self {
        Counters {
            bytes_written_total: a[0],
            bytes_read_total: a[1],
            bytes_written_load: a[2],
            bytes_read_load: a[3],
            records_written: a[4],
            records_read: a[5],
            filemarks_written: a[6],
            filemarks_read: a[7],
        }
    }
}

/// Persistent non-data state of a cartridge.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CartridgeInfo {
    pub(crate) barcode: Barcode,
    pub(crate) media_type: MediaType,
    pub(crate) capacity: u64,
    pub(crate) early_warning_percent: u8,
    pub(crate) partition_capacities: Vec<u64>,
    pub(crate) write_protected: bool,
    pub(crate) load_count: u64,
    pub(crate) counters: Counters,
    pub(crate) last_written: Option<UnixTime>,
    pub(crate) mam: Mam,
}

impl CartridgeInfo {
    /// A new, blank, single-partition cartridge of native capacity,
    /// manufactured at `created`. The MAM serial number is the barcode.
    pub fn new(barcode: Barcode, media_type: MediaType, created: UnixTime) -> Self {
        let mam = Mam::new(
            DEFAULT_MANUFACTURER,
            barcode.as_str(),
            created,
            media_type.mam_capacity(),
        );
        CartridgeInfo {
            barcode,
            media_type,
            capacity: media_type.native_capacity(),
            early_warning_percent: DEFAULT_EARLY_WARNING_PERCENT,
            partition_capacities: vec![media_type.native_capacity()],
            write_protected: false,
            load_count: 0,
            counters: Counters::default(),
            last_written: None,
            mam,
        }
    }

    /// Override the capacity (e.g. a few MiB in tests); resets the layout to
    /// one partition of that size.
    pub fn with_capacity(mut self, bytes: u64) -> Result<Self, LayoutError> {
        if bytes == 0 {
            return Err(LayoutError::ZeroCapacity);
        }
        self.capacity = bytes;
        self.partition_capacities = vec![bytes];
        Ok(self)
    }

    /// Set the early-warning threshold in percent of each partition's
    /// capacity (1..=100).
    pub fn with_early_warning_percent(mut self, percent: u8) -> Result<Self, LayoutError> {
        if !(1..=100).contains(&percent) {
            return Err(LayoutError::EarlyWarningPercent(percent));
        }
        self.early_warning_percent = percent;
        Ok(self)
    }

    /// Set the write-protect tab.
    pub fn with_write_protected(mut self, wp: bool) -> Self {
        self.write_protected = wp;
        self
    }

    /// Barcode.
    pub fn barcode(&self) -> &Barcode {
        &self.barcode
    }
    /// Media type.
    pub fn media_type(&self) -> MediaType {
        self.media_type
    }
    /// Total capacity in bytes.
    pub fn capacity(&self) -> u64 {
        self.capacity
    }
    /// Early-warning threshold in percent.
    pub fn early_warning_percent(&self) -> u8 {
        self.early_warning_percent
    }
    /// Capacity of each partition.
    pub fn partition_capacities(&self) -> &[u64] {
        &self.partition_capacities
    }
    /// Write-protect tab.
    pub fn write_protected(&self) -> bool {
        self.write_protected
    }
    /// WORM media.
    pub fn is_worm(&self) -> bool {
        self.media_type.is_worm()
    }
    /// Times loaded.
    pub fn load_count(&self) -> u64 {
        self.load_count
    }
    /// Usage counters.
    pub fn counters(&self) -> Counters {
        self.counters
    }
    /// Time of the last write, erase or format.
    pub fn last_written(&self) -> Option<UnixTime> {
        self.last_written
    }
    /// Cartridge memory.
    pub fn mam(&self) -> &Mam {
        &self.mam
    }
    /// Cartridge memory, for writing host attributes.
    pub fn mam_mut(&mut self) -> &mut Mam {
        &mut self.mam
    }

    /// Check a partition layout against this cartridge's capacity and type.
    pub fn validate_layout(&self, sizes: &[u64]) -> Result<(), LayoutError> {
        let max = self.media_type.max_partitions();
        if sizes.is_empty() || sizes.len() > usize::from(max) {
            return Err(LayoutError::PartitionCount {
                count: sizes.len(),
                max,
            });
        }
        if let Some(index) = sizes.iter().position(|&s| s == 0) {
            return Err(LayoutError::ZeroPartitionSize { index });
        }
        let total: u128 = sizes.iter().map(|&s| u128::from(s)).sum();
        if total > u128::from(self.capacity) {
            return Err(LayoutError::ExceedsCapacity {
                total,
                capacity: self.capacity,
            });
        }
        Ok(())
    }

    /// Check all invariants.
    pub fn validate(&self) -> Result<(), LayoutError> {
        if self.capacity == 0 {
            return Err(LayoutError::ZeroCapacity);
        }
        if !(1..=100).contains(&self.early_warning_percent) {
            return Err(LayoutError::EarlyWarningPercent(self.early_warning_percent));
        }
        self.validate_layout(&self.partition_capacities)
    }

    /// Encode to the versioned binary format (see module docs).
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut w = Vec::with_capacity(128);
        w.extend_from_slice(MAGIC);
        w.push(VERSION);
        put_str(&mut w, self.barcode.as_str());
        w.push(self.media_type.code());
        w.extend_from_slice(&self.capacity.to_le_bytes());
        w.push(self.early_warning_percent);
        w.push(u8::from(self.write_protected));
        // validate() bounds the count by 4.
        w.push(self.partition_capacities.len() as u8);
        for c in &self.partition_capacities {
            w.extend_from_slice(&c.to_le_bytes());
        }
        w.extend_from_slice(&self.load_count.to_le_bytes());
        for c in self.counters.to_array() {
            w.extend_from_slice(&c.to_le_bytes());
        }
        match self.last_written {
            None => w.push(0),
            Some(t) => {
                w.push(1);
                w.extend_from_slice(&t.0.to_le_bytes());
            }
        }
        put_str(&mut w, &self.mam.manufacturer);
        put_str(&mut w, &self.mam.serial);
        w.extend_from_slice(&self.mam.manufacture_date.0.to_le_bytes());
        // MAM capacity (≤ 16 KiB) bounds the attribute count and lengths.
        w.extend_from_slice(&(self.mam.host.len() as u16).to_le_bytes());
        for (&id, v) in &self.mam.host {
            w.extend_from_slice(&id.to_le_bytes());
            w.push(v.format.code());
            w.extend_from_slice(&(v.value.len() as u16).to_le_bytes());
            w.extend_from_slice(&v.value);
        }
        let crc = crc32(&w);
        w.extend_from_slice(&crc.to_le_bytes());
        w
    }

    /// Decode and validate. Never panics, whatever the input.
    pub fn from_bytes(data: &[u8]) -> Result<Self, DecodeError> {
        if data.len() < MAGIC.len() + 1 + 4 {
            return Err(DecodeError::TooShort(data.len()));
        }
        let (body, crc) = data.split_at(data.len() - 4);
        if &body[..4] != MAGIC {
            return Err(DecodeError::BadMagic);
        }
        if body[4] != VERSION {
            return Err(DecodeError::UnsupportedVersion(body[4]));
        }
        let stored = u32::from_le_bytes([crc[0], crc[1], crc[2], crc[3]]);
        if crc32(body) != stored {
            return Err(DecodeError::Checksum);
        }
        let mut r = Reader { data: &body[5..] };
        let barcode =
            Barcode::from_bytes(r.bytes_u8len()?).map_err(|_| DecodeError::InvalidBarcode)?;
        let media_type = MediaType::from_code(r.u8()?).ok_or(DecodeError::UnknownMediaType)?;
        let capacity = r.u64()?;
        let early_warning_percent = r.u8()?;
        let flags = r.u8()?;
        if flags > 1 {
            return Err(DecodeError::InvalidField("flags"));
        }
        let nparts = r.u8()?;
        let mut partition_capacities = Vec::with_capacity(usize::from(nparts.min(4)));
        for _ in 0..nparts {
            partition_capacities.push(r.u64()?);
        }
        let load_count = r.u64()?;
        let mut counters = [0u64; 8];
        for c in &mut counters {
            *c = r.u64()?;
        }
        let last_written = match r.u8()? {
            0 => None,
            1 => Some(UnixTime(r.u64()?)),
            _ => return Err(DecodeError::InvalidField("last written tag")),
        };
        let manufacturer = ascii_field(r.bytes_u8len()?, 8, "manufacturer")?;
        let serial = ascii_field(r.bytes_u8len()?, 32, "serial")?;
        let manufacture_date = UnixTime(r.u64()?);
        let mut mam = Mam::new(
            &manufacturer,
            &serial,
            manufacture_date,
            media_type.mam_capacity(),
        );
        if mam.manufacturer != manufacturer || mam.serial != serial {
            return Err(DecodeError::InvalidField("MAM identity"));
        }
        let nattrs = r.u16()?;
        let mut last_id = None;
        for _ in 0..nattrs {
            let id = r.u16()?;
            let format =
                AttributeFormat::from_code(r.u8()?).ok_or(DecodeError::InvalidAttribute(id))?;
            let len = r.u16()?;
            let value = r.take(usize::from(len))?;
            if value.is_empty() || last_id.is_some_and(|l| l >= id) {
                return Err(DecodeError::InvalidAttribute(id));
            }
            last_id = Some(id);
            mam.write(id, format, value)
                .map_err(|_| DecodeError::InvalidAttribute(id))?;
        }
        if !r.data.is_empty() {
            return Err(DecodeError::TrailingBytes(r.data.len()));
        }
        let info = CartridgeInfo {
            barcode,
            media_type,
            capacity,
            early_warning_percent,
            partition_capacities,
            write_protected: flags & 1 == 1,
            load_count,
            counters: Counters::from_array(counters),
            last_written,
            mam,
        };
        info.validate().map_err(DecodeError::Layout)?;
        Ok(info)
    }
}

/// Why [`CartridgeInfo::from_bytes`] rejected its input.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum DecodeError {
    /// Shorter than the fixed header and checksum.
    #[error("input too short ({0} bytes)")]
    TooShort(usize),
    /// Wrong magic number.
    #[error("bad magic")]
    BadMagic,
    /// Unknown format version.
    #[error("unsupported version {0}")]
    UnsupportedVersion(u8),
    /// CRC mismatch.
    #[error("checksum mismatch")]
    Checksum,
    /// A field runs past the end.
    #[error("truncated input")]
    Truncated,
    /// Bytes after the last field.
    #[error("{0} trailing bytes")]
    TrailingBytes(usize),
    /// Barcode invalid.
    #[error("invalid barcode")]
    InvalidBarcode,
    /// Media type code unknown.
    #[error("unknown media type")]
    UnknownMediaType,
    /// A field holds an impossible value.
    #[error("invalid field: {0}")]
    InvalidField(&'static str),
    /// A stored host attribute violates the MAM rules or ordering.
    #[error("invalid MAM attribute {0:#06x}")]
    InvalidAttribute(u16),
    /// Capacity/partition layout invalid.
    #[error("invalid layout: {0}")]
    Layout(LayoutError),
}

fn put_str(w: &mut Vec<u8>, s: &str) {
    // Barcode ≤ 32, manufacturer ≤ 8, serial ≤ 32 bytes: fits in u8.
    let b = &s.as_bytes()[..s.len().min(255)];
    w.push(b.len() as u8);
    w.extend_from_slice(b);
}

fn ascii_field(b: &[u8], max: usize, what: &'static str) -> Result<String, DecodeError> {
    if b.len() > max || b.iter().any(|c| !(0x20..=0x7E).contains(c)) {
        return Err(DecodeError::InvalidField(what));
    }
    Ok(b.iter().map(|&c| c as char).collect())
}

struct Reader<'a> {
    data: &'a [u8],
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], DecodeError> {
        if self.data.len() < n {
            return Err(DecodeError::Truncated);
        }
        let (a, b) = self.data.split_at(n);
        self.data = b;
        Ok(a)
    }
    fn array<const N: usize>(&mut self) -> Result<[u8; N], DecodeError> {
        let mut a = [0u8; N];
        a.copy_from_slice(self.take(N)?);
        Ok(a)
    }
    fn u8(&mut self) -> Result<u8, DecodeError> {
        Ok(self.array::<1>()?[0])
    }
    fn u16(&mut self) -> Result<u16, DecodeError> {
        Ok(u16::from_le_bytes(self.array()?))
    }
    fn u64(&mut self) -> Result<u64, DecodeError> {
        Ok(u64::from_le_bytes(self.array()?))
    }
    fn bytes_u8len(&mut self) -> Result<&'a [u8], DecodeError> {
        let n = self.u8()?;
        self.take(usize::from(n))
    }
}

const CRC_TABLE: [u32; 256] = {
    let mut t = [0u32; 256];
    let mut i = 0;
    while i < 256 {
        let mut c = i as u32;
        let mut k = 0;
        while k < 8 {
            c = if c & 1 != 0 {
                0xEDB8_8320 ^ (c >> 1)
            } else {
                c >> 1
            };
            k += 1;
        }
        t[i] = c;
        i += 1;
    }
    t
};

/// CRC-32 (IEEE 802.3, reflected, polynomial 0xEDB88320).
pub(crate) fn crc32(data: &[u8]) -> u32 {
    let mut c = !0u32;
    for &b in data {
        c = CRC_TABLE[((c ^ u32::from(b)) & 0xFF) as usize] ^ (c >> 8);
    }
    !c
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn sample() -> CartridgeInfo {
        let mut i = CartridgeInfo::new(
            Barcode::new("REL001L9").unwrap(),
            MediaType::Lto9,
            UnixTime(1_700_000_000),
        )
        .with_capacity(64 << 20)
        .unwrap();
        i.partition_capacities = vec![16 << 20, 48 << 20];
        i.mam.write_ascii(0x0800, "REEL").unwrap();
        i.mam
            .write(0x0803, AttributeFormat::Text, &[b'x'; 160])
            .unwrap();
        i.mam
            .write(0x1400, AttributeFormat::Binary, &[1, 2, 3])
            .unwrap();
        i.last_written = Some(UnixTime(1_700_000_100));
        i.load_count = 7;
        i.counters.bytes_written_total = 12345;
        i
    }

    #[test]
    fn crc32_check_value() {
        assert_eq!(crc32(b"123456789"), 0xCBF4_3926);
    }

    #[test]
    fn round_trip_sample() {
        let i = sample();
        let b = i.to_bytes();
        assert_eq!(CartridgeInfo::from_bytes(&b), Ok(i));
    }

    #[test]
    fn rejects_corruption_with_specific_errors() {
        let b = sample().to_bytes();
        assert_eq!(
            CartridgeInfo::from_bytes(&b[..3]),
            Err(DecodeError::TooShort(3))
        );
        let mut bad = b.clone();
        bad[0] = b'X';
        assert_eq!(CartridgeInfo::from_bytes(&bad), Err(DecodeError::BadMagic));
        let mut bad = b.clone();
        bad[4] = 2;
        assert_eq!(
            CartridgeInfo::from_bytes(&bad),
            Err(DecodeError::UnsupportedVersion(2))
        );
        let mut bad = b.clone();
        bad[10] ^= 0x40;
        assert_eq!(CartridgeInfo::from_bytes(&bad), Err(DecodeError::Checksum));
        assert_eq!(
            CartridgeInfo::from_bytes(&b[..b.len() - 1]),
            Err(DecodeError::Checksum)
        );
    }

    /// Re-seal a modified body with a valid CRC, to reach the field checks.
    fn reseal(mut body: Vec<u8>) -> Vec<u8> {
        let c = crc32(&body);
        body.extend_from_slice(&c.to_le_bytes());
        body
    }

    #[test]
    fn validates_fields_behind_a_valid_checksum() {
        let b = sample().to_bytes();
        let body = b[..b.len() - 4].to_vec();
        // Trailing byte.
        let mut t = body.clone();
        t.push(0);
        assert_eq!(
            CartridgeInfo::from_bytes(&reseal(t)),
            Err(DecodeError::TrailingBytes(1))
        );
        // Truncated.
        assert_eq!(
            CartridgeInfo::from_bytes(&reseal(body[..body.len() - 1].to_vec())),
            Err(DecodeError::Truncated)
        );
        // Barcode with a space: offset 6 is the first barcode byte.
        let mut t = body.clone();
        t[6] = b' ';
        assert_eq!(
            CartridgeInfo::from_bytes(&reseal(t)),
            Err(DecodeError::InvalidBarcode)
        );
        // Media type code after the 8-byte barcode.
        let mut t = body.clone();
        t[14] = 0xEE;
        assert_eq!(
            CartridgeInfo::from_bytes(&reseal(t)),
            Err(DecodeError::UnknownMediaType)
        );
        // Early-warning percent 0.
        let mut t = body.clone();
        t[23] = 0;
        assert_eq!(
            CartridgeInfo::from_bytes(&reseal(t)),
            Err(DecodeError::Layout(LayoutError::EarlyWarningPercent(0)))
        );
        // Unknown flag bit.
        let mut t = body;
        t[24] = 2;
        assert_eq!(
            CartridgeInfo::from_bytes(&reseal(t)),
            Err(DecodeError::InvalidField("flags"))
        );
    }

    #[test]
    fn builder_validation() {
        let i = CartridgeInfo::new(Barcode::new("A").unwrap(), MediaType::Lto5, UnixTime(0));
        assert_eq!(i.clone().with_capacity(0), Err(LayoutError::ZeroCapacity));
        assert_eq!(
            i.clone().with_early_warning_percent(101),
            Err(LayoutError::EarlyWarningPercent(101))
        );
        assert_eq!(
            i.validate_layout(&[1, 1, 1]),
            Err(LayoutError::PartitionCount { count: 3, max: 2 })
        );
        assert_eq!(
            i.validate_layout(&[1, 0]),
            Err(LayoutError::ZeroPartitionSize { index: 1 })
        );
        assert_eq!(
            i.validate_layout(&[u64::MAX, u64::MAX]),
            Err(LayoutError::ExceedsCapacity {
                total: 2 * u128::from(u64::MAX),
                capacity: 1_500_000_000_000
            })
        );
        assert!(i.validate_layout(&[1, 1_499_999_999_999]).is_ok());
    }

    fn arb_info() -> impl Strategy<Value = CartridgeInfo> {
        (
            "[!-~]{1,32}",
            prop::sample::select(MediaType::ALL.to_vec()),
            1u64..=u64::MAX,
            1u8..=100,
            any::<bool>(),
            any::<[u64; 9]>(),
            any::<Option<u64>>(),
            any::<u64>(),
            prop::collection::btree_map(
                0x1400u16..=0x17FF,
                prop::collection::vec(any::<u8>(), 1..40),
                0..5,
            ),
            "[ -~]{0,160}",
            1usize..=4,
        )
            .prop_map(|(bc, mt, cap, ew, wp, n, lw, made, vendor, label, parts)| {
                let mut i = CartridgeInfo::new(Barcode::new(&bc).unwrap(), mt, UnixTime(made))
                    .with_capacity(cap)
                    .unwrap()
                    .with_early_warning_percent(ew)
                    .unwrap()
                    .with_write_protected(wp);
                let parts = parts.min(usize::from(mt.max_partitions()));
                if cap >= parts as u64 {
                    i.partition_capacities = vec![cap / parts as u64; parts];
                }
                i.load_count = n[0];
                i.counters = Counters::from_array([n[1], n[2], n[3], n[4], n[5], n[6], n[7], n[8]]);
                i.last_written = lw.map(UnixTime);
                for (id, v) in vendor {
                    i.mam.write(id, AttributeFormat::Binary, &v).unwrap();
                }
                if !label.is_empty() {
                    i.mam
                        .write(0x0803, AttributeFormat::Text, &{
                            let mut l = label.into_bytes();
                            l.resize(160, 0);
                            l
                        })
                        .unwrap();
                }
                i
            })
    }

    proptest! {
        #[test]
        fn round_trip(info in arb_info()) {
            let b = info.to_bytes();
            prop_assert_eq!(CartridgeInfo::from_bytes(&b), Ok(info));
        }

        #[test]
        fn random_bytes_never_panic(data in prop::collection::vec(any::<u8>(), 0..300)) {
            let _ = CartridgeInfo::from_bytes(&data);
        }

        #[test]
        fn resealed_random_bodies_never_panic(tail in prop::collection::vec(any::<u8>(), 0..300)) {
            // Valid magic/version/CRC so the field parser itself is exercised.
            let mut body = b"RLCI\x01".to_vec();
            body.extend_from_slice(&tail);
            let _ = CartridgeInfo::from_bytes(&reseal(body));
        }

        #[test]
        fn bit_flips_are_detected(info in arb_info(), pos in any::<prop::sample::Index>(), bit in 0u8..8) {
            let mut b = info.to_bytes();
            let i = pos.index(b.len());
            b[i] ^= 1 << bit;
            // CRC-32 detects every single-bit error.
            prop_assert!(CartridgeInfo::from_bytes(&b).is_err());
        }

        #[test]
        fn bit_flips_behind_valid_crc_never_panic(info in arb_info(), flips in prop::collection::vec((any::<prop::sample::Index>(), 0u8..8), 1..4)) {
            let b = info.to_bytes();
            let mut body = b[..b.len() - 4].to_vec();
            for (pos, bit) in flips {
                let i = pos.index(body.len());
                body[i] ^= 1 << bit;
            }
            if let Ok(decoded) = CartridgeInfo::from_bytes(&reseal(body)) {
                // Anything accepted must itself be valid and re-encode stably.
                prop_assert!(decoded.validate().is_ok());
                prop_assert_eq!(CartridgeInfo::from_bytes(&decoded.to_bytes()), Ok(decoded));
            }
        }
    }
}
