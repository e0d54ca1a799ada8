//! The catalog: one [`DriveSpec`] per drive generation and form factor, one [`RobotSpec`] per
//! library class. Every number is sourced (or marked as an estimate) in
//! `docs/design/drive-model.md`, section "Parameters"; keep the two in step.

use std::time::Duration;

/// Decimal megabyte, as vendors state rates and capacities.
const MB: f64 = 1e6;
/// Decimal gigabyte.
const GB: u64 = 1_000_000_000;
/// Binary mebibyte, as vendors state buffer sizes.
const MIB: u64 = 1 << 20;

/// How the drive's compressor treats data that does not compress.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum CompressionBehaviour {
    /// LTO's SLDC/LTO-DC: a record that would expand is stored raw (the "pass-through" scheme),
    /// so a record costs `min(len, compressed_len)` plus the per-record overhead.
    RawEscape,
    /// DLT/SDLT/DDS-style LZ compressors: a record is stored compressed even when that is larger;
    /// incompressible data (compressed length ≥ length) grows by `expansion` (e.g. 1.05).
    Expanding {
        /// Growth of incompressible data on tape (1.05 = 5 % more native bytes).
        expansion: f64,
    },
}

/// The tape format family a drive belongs to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    /// Linear Tape-Open (Ultrium), generation 1..=9.
    Lto,
    /// Quantum DLT (DLT8000).
    Dlt,
    /// Quantum Super DLT (SDLT 220/320).
    Sdlt,
    /// DDS (4 mm DAT), helical scan.
    Dds,
}

/// One physical drive model. Rates are native (uncompressed, on-tape) bytes per second unless
/// named "host"; sizes are bytes; times are seconds.
#[derive(Debug)]
pub struct DriveSpec {
    /// Catalog key, e.g. `lto5-fh`, `lto5-hh`, `sdlt320`.
    pub id: &'static str,
    /// Human name, e.g. "LTO-5 full height".
    pub name: &'static str,
    /// Format family.
    pub format: Format,
    /// LTO generation (1..=9); 0 for other formats.
    pub generation: u8,
    /// Full height (true) or half height (false). Non-LTO drives count as full height.
    pub full_height: bool,
    /// The vendor's native (uncompressed) sustained data rate.
    pub native_rate: f64,
    /// Speed-matching steps, ascending, native bytes/s. One entry = no speed matching.
    pub speed_steps: &'static [f64],
    /// Data buffer size (holds native, i.e. compressed, bytes).
    pub buffer_bytes: u64,
    /// Time one back-hitch costs: stop, reverse, reposition, ready to write again.
    pub reposition_s: f64,
    /// After a stop the drive waits until this share of the buffer is available (filled when
    /// writing, free when reading) before it streams again.
    pub restart_fraction: f64,
    /// Drive-side time per command (WRITE, READ, WRITE FILEMARKS), on top of the transfer.
    pub record_overhead_s: f64,
    /// On-tape bytes each record costs beyond its data.
    pub record_overhead_bytes: u64,
    /// On-tape bytes one filemark costs.
    pub filemark_bytes: u64,
    /// How incompressible data is stored.
    pub compression: CompressionBehaviour,
    /// Ceiling on the host-side (uncompressed) rate: the interface, and the compressor's
    /// maximum streaming ratio.
    pub max_host_rate: f64,
    /// Load to ready (cartridge inserted to ready at BOT).
    pub load_s: f64,
    /// Unload at BOT to ejected (the rewind before it is modelled separately).
    pub unload_s: f64,
    /// Average rewind time (from a uniformly distributed position); end to end is twice this.
    pub rewind_avg_s: f64,
    /// Average locate/space time from the load point to a uniformly distributed position.
    pub locate_avg_s: f64,
    /// Native cartridge capacity.
    pub native_capacity: u64,
}

impl DriveSpec {
    /// The fastest speed-matching step.
    pub fn top_speed(&self) -> f64 {
        *self
            .speed_steps
            .last()
            .expect("a drive has at least one speed")
    }

    /// The slowest speed-matching step: a host below it makes the drive back-hitch.
    pub fn lowest_speed(&self) -> f64 {
        self.speed_steps[0]
    }

    /// The lowest step that is at least `rate`, else the top step.
    pub fn step_for(&self, rate: f64) -> f64 {
        self.speed_steps
            .iter()
            .copied()
            .find(|&s| s >= rate)
            .unwrap_or_else(|| self.top_speed())
    }

    /// Rewind from the far end of the tape to BOT.
    pub fn rewind_full_s(&self) -> f64 {
        2.0 * self.rewind_avg_s
    }

    /// A locate over zero distance still stops and repositions the tape.
    pub fn locate_base_s(&self) -> f64 {
        self.reposition_s
    }

    /// Locate from one end of the tape to the other (uniform targets average half of it).
    pub fn locate_full_s(&self) -> f64 {
        (2.0 * self.locate_avg_s - self.locate_base_s()).max(self.locate_base_s())
    }

    /// Native bytes passed per second while locating/spacing at high speed.
    pub fn locate_rate(&self) -> f64 {
        self.native_capacity as f64 / (self.locate_full_s() - self.locate_base_s()).max(1e-9)
    }

    /// Native bytes on tape for a record of `len` host bytes that compresses to
    /// `compressed_len` (`compression` false: the record is written as is).
    pub fn native_len(&self, len: u64, compressed_len: u64, compression: bool) -> u64 {
        let data = if !compression {
            len
        } else {
            match self.compression {
                CompressionBehaviour::RawEscape => len.min(compressed_len),
                CompressionBehaviour::Expanding { expansion } => {
                    if compressed_len >= len {
                        compressed_len.max((len as f64 * expansion).ceil() as u64)
                    } else {
                        compressed_len
                    }
                }
            }
        };
        data + self.record_overhead_bytes
    }
}

/// `N` evenly spaced steps from `lo` to `hi` (used where no published step list was found;
/// see the parameter table).
const fn linear<const N: usize>(lo: f64, hi: f64) -> [f64; N] {
    let mut out = [0.0; N];
    let mut i = 0;
    while i < N {
        out[i] = lo + (hi - lo) * (i as f64) / ((N - 1) as f64);
        i += 1;
    }
    out
}

const fn mbs<const N: usize>(v: [f64; N]) -> [f64; N] {
    let mut out = v;
    let mut i = 0;
    while i < N {
        out[i] = v[i] * MB;
        i += 1;
    }
    out
}

// Published IBM step lists (MB/s), ascending.
const LTO3_FH_STEPS: [f64; 5] = mbs([40.0, 50.0, 60.0, 70.0, 80.0]);
const LTO7_STEPS: [f64; 12] = mbs([
    101.46, 120.11, 138.52, 157.67, 175.46, 194.26, 213.06, 231.86, 250.66, 268.56, 287.52, 306.0,
]);
const LTO8_FH_STEPS: [f64; 12] = mbs([
    112.0, 135.0, 157.5, 180.0, 203.0, 226.0, 249.5, 273.0, 306.4, 318.0, 341.0, 365.0,
]);
const LTO8_HH_STEPS: [f64; 9] = mbs([
    112.0, 135.0, 157.5, 180.0, 203.0, 226.0, 249.5, 273.0, 306.4,
]);
const LTO9_FH_STEPS: [f64; 12] = mbs([
    177.0, 203.0, 223.0, 244.0, 263.0, 284.0, 305.0, 325.0, 347.0, 366.0, 385.0, 408.0,
]);
const LTO9_HH_STEPS: [f64; 6] = mbs([177.0, 203.0, 223.0, 244.0, 263.0, 284.0]);
// Estimates: evenly spaced from a third of native to native.
const LTO1_STEPS: [f64; 5] = linear(15.0 * MB / 3.0, 15.0 * MB);
const LTO2_FH_STEPS: [f64; 5] = linear(35.0 * MB / 3.0, 35.0 * MB);
const LTO2_HH_STEPS: [f64; 5] = linear(24.0 * MB / 3.0, 24.0 * MB);
const LTO3_HH_STEPS: [f64; 5] = linear(60.0 * MB / 3.0, 60.0 * MB);
const LTO4_STEPS: [f64; 8] = linear(120.0 * MB / 3.0, 120.0 * MB);
const LTO5_STEPS: [f64; 8] = linear(140.0 * MB / 3.0, 140.0 * MB);
const LTO6_STEPS: [f64; 8] = linear(160.0 * MB / 3.0, 160.0 * MB);
const SDLT320_STEPS: [f64; 1] = [16.0 * MB];
const SDLT220_STEPS: [f64; 1] = [11.0 * MB];
const DLT8000_STEPS: [f64; 1] = [6.0 * MB];
const DDS4_STEPS: [f64; 1] = [2.4 * MB];

/// The host-side ceiling: the interface's burst rate or three times native (the compressor's
/// maximum streaming ratio), whichever is lower.
const fn host_cap(interface_mb: f64, native_mb: f64) -> f64 {
    let c = 3.0 * native_mb;
    (if interface_mb < c { interface_mb } else { c }) * MB
}

const LTO_REPOSITION_S: f64 = 2.5;
const DLT_REPOSITION_S: f64 = 3.0;
const RESTART_FRACTION: f64 = 0.5;

#[allow(clippy::too_many_arguments)]
const fn lto_spec(
    id: &'static str,
    name: &'static str,
    generation: u8,
    full_height: bool,
    native_mb: f64,
    speed_steps: &'static [f64],
    buffer_mib: u64,
    interface_mb: f64,
    load_s: f64,
    unload_s: f64,
    rewind_avg_s: f64,
    locate_avg_s: f64,
    capacity_gb: u64,
) -> DriveSpec {
    DriveSpec {
        id,
        name,
        format: Format::Lto,
        generation,
        full_height,
        native_rate: native_mb * MB,
        speed_steps,
        buffer_bytes: buffer_mib * MIB,
        reposition_s: LTO_REPOSITION_S,
        restart_fraction: RESTART_FRACTION,
        record_overhead_s: if generation <= 2 { 100e-6 } else { 50e-6 },
        record_overhead_bytes: 8,
        filemark_bytes: 8,
        compression: CompressionBehaviour::RawEscape,
        max_host_rate: host_cap(interface_mb, native_mb),
        load_s,
        unload_s,
        rewind_avg_s,
        locate_avg_s,
        native_capacity: capacity_gb * GB,
    }
}

static DRIVES: [DriveSpec; 21] = [
    lto_spec(
        "lto1-fh",
        "LTO-1 full height",
        1,
        true,
        15.0,
        &LTO1_STEPS,
        32,
        80.0,
        19.0,
        17.0,
        49.0,
        49.0,
        100,
    ),
    lto_spec(
        "lto2-fh",
        "LTO-2 full height",
        2,
        true,
        35.0,
        &LTO2_FH_STEPS,
        64,
        160.0,
        19.0,
        17.0,
        49.0,
        49.0,
        200,
    ),
    lto_spec(
        "lto2-hh",
        "LTO-2 half height",
        2,
        false,
        24.0,
        &LTO2_HH_STEPS,
        32,
        160.0,
        19.0,
        17.0,
        49.0,
        49.0,
        200,
    ),
    lto_spec(
        "lto3-fh",
        "LTO-3 full height",
        3,
        true,
        80.0,
        &LTO3_FH_STEPS,
        64,
        320.0,
        19.0,
        17.0,
        49.0,
        49.0,
        400,
    ),
    lto_spec(
        "lto3-hh",
        "LTO-3 half height",
        3,
        false,
        60.0,
        &LTO3_HH_STEPS,
        64,
        320.0,
        19.0,
        17.0,
        49.0,
        49.0,
        400,
    ),
    lto_spec(
        "lto4-fh",
        "LTO-4 full height",
        4,
        true,
        120.0,
        &LTO4_STEPS,
        128,
        300.0,
        19.0,
        17.0,
        49.0,
        49.0,
        800,
    ),
    lto_spec(
        "lto4-hh",
        "LTO-4 half height",
        4,
        false,
        120.0,
        &LTO4_STEPS,
        128,
        300.0,
        19.0,
        17.0,
        49.0,
        49.0,
        800,
    ),
    lto_spec(
        "lto5-fh",
        "LTO-5 full height",
        5,
        true,
        140.0,
        &LTO5_STEPS,
        256,
        600.0,
        12.0,
        17.0,
        55.0,
        45.0,
        1500,
    ),
    lto_spec(
        "lto5-hh",
        "LTO-5 half height",
        5,
        false,
        140.0,
        &LTO5_STEPS,
        256,
        600.0,
        12.0,
        17.0,
        55.0,
        45.0,
        1500,
    ),
    lto_spec(
        "lto6-fh",
        "LTO-6 full height",
        6,
        true,
        160.0,
        &LTO6_STEPS,
        1024,
        600.0,
        12.0,
        17.0,
        55.0,
        45.0,
        2500,
    ),
    lto_spec(
        "lto6-hh",
        "LTO-6 half height",
        6,
        false,
        160.0,
        &LTO6_STEPS,
        512,
        600.0,
        12.0,
        17.0,
        55.0,
        45.0,
        2500,
    ),
    lto_spec(
        "lto7-fh",
        "LTO-7 full height",
        7,
        true,
        300.0,
        &LTO7_STEPS,
        1024,
        800.0,
        15.0,
        20.0,
        55.0,
        45.0,
        6000,
    ),
    lto_spec(
        "lto7-hh",
        "LTO-7 half height",
        7,
        false,
        300.0,
        &LTO7_STEPS,
        1024,
        1200.0,
        15.0,
        20.0,
        55.0,
        45.0,
        6000,
    ),
    lto_spec(
        "lto8-fh",
        "LTO-8 full height",
        8,
        true,
        360.0,
        &LTO8_FH_STEPS,
        1024,
        800.0,
        15.0,
        24.0,
        55.0,
        45.0,
        12000,
    ),
    lto_spec(
        "lto8-hh",
        "LTO-8 half height",
        8,
        false,
        300.0,
        &LTO8_HH_STEPS,
        1024,
        1200.0,
        15.0,
        24.0,
        55.0,
        45.0,
        12000,
    ),
    lto_spec(
        "lto9-fh",
        "LTO-9 full height",
        9,
        true,
        400.0,
        &LTO9_FH_STEPS,
        1024,
        1200.0,
        17.0,
        30.0,
        55.0,
        45.0,
        18000,
    ),
    lto_spec(
        "lto9-hh",
        "LTO-9 half height",
        9,
        false,
        300.0,
        &LTO9_HH_STEPS,
        1024,
        1200.0,
        17.0,
        30.0,
        55.0,
        45.0,
        18000,
    ),
    DriveSpec {
        id: "sdlt320",
        name: "SDLT 320",
        format: Format::Sdlt,
        generation: 0,
        full_height: true,
        native_rate: 16.0 * MB,
        speed_steps: &SDLT320_STEPS,
        buffer_bytes: 64 * MIB,
        reposition_s: DLT_REPOSITION_S,
        restart_fraction: RESTART_FRACTION,
        record_overhead_s: 100e-6,
        record_overhead_bytes: 16,
        filemark_bytes: 16,
        compression: CompressionBehaviour::Expanding { expansion: 1.05 },
        max_host_rate: host_cap(80.0, 16.0),
        load_s: 37.0,
        unload_s: 17.0,
        rewind_avg_s: 60.0,
        locate_avg_s: 60.0,
        native_capacity: 160 * GB,
    },
    DriveSpec {
        id: "sdlt220",
        name: "SDLT 220",
        format: Format::Sdlt,
        generation: 0,
        full_height: true,
        native_rate: 11.0 * MB,
        speed_steps: &SDLT220_STEPS,
        buffer_bytes: 32 * MIB,
        reposition_s: DLT_REPOSITION_S,
        restart_fraction: RESTART_FRACTION,
        record_overhead_s: 100e-6,
        record_overhead_bytes: 16,
        filemark_bytes: 16,
        compression: CompressionBehaviour::Expanding { expansion: 1.05 },
        max_host_rate: host_cap(80.0, 11.0),
        load_s: 37.0,
        unload_s: 17.0,
        rewind_avg_s: 60.0,
        locate_avg_s: 60.0,
        native_capacity: 110 * GB,
    },
    DriveSpec {
        id: "dlt8000",
        name: "DLT8000",
        format: Format::Dlt,
        generation: 0,
        full_height: true,
        native_rate: 6.0 * MB,
        speed_steps: &DLT8000_STEPS,
        buffer_bytes: 8 * MIB,
        reposition_s: DLT_REPOSITION_S,
        restart_fraction: RESTART_FRACTION,
        record_overhead_s: 100e-6,
        record_overhead_bytes: 16,
        filemark_bytes: 16,
        compression: CompressionBehaviour::Expanding { expansion: 1.05 },
        max_host_rate: host_cap(40.0, 6.0),
        load_s: 37.0,
        unload_s: 17.0,
        rewind_avg_s: 60.0,
        locate_avg_s: 60.0,
        native_capacity: 40 * GB,
    },
    DriveSpec {
        id: "dds4",
        name: "DDS-4 (DAT 40)",
        format: Format::Dds,
        generation: 0,
        full_height: false,
        native_rate: 2.4 * MB,
        speed_steps: &DDS4_STEPS,
        buffer_bytes: 10 * MIB,
        reposition_s: 1.0,
        restart_fraction: RESTART_FRACTION,
        record_overhead_s: 100e-6,
        record_overhead_bytes: 16,
        filemark_bytes: 16,
        compression: CompressionBehaviour::Expanding { expansion: 1.05 },
        max_host_rate: host_cap(40.0, 2.4),
        load_s: 15.0,
        unload_s: 15.0,
        rewind_avg_s: 60.0,
        locate_avg_s: 60.0,
        native_capacity: 20 * GB,
    },
];

/// The whole drive catalog.
pub fn drives() -> &'static [DriveSpec] {
    &DRIVES
}

/// The drive with this catalog id.
pub fn drive(id: &str) -> Option<&'static DriveSpec> {
    DRIVES.iter().find(|d| d.id.eq_ignore_ascii_case(id))
}

/// The spec for an LTO generation and form factor (`full_height` false = half height); None
/// when not in the catalog (there is no LTO-1 half-height drive).
pub fn lto(generation: u8, full_height: bool) -> Option<&'static DriveSpec> {
    DRIVES.iter().find(|d| {
        d.format == Format::Lto && d.generation == generation && d.full_height == full_height
    })
}

/// A library's robot (the medium transport element).
#[derive(Debug)]
pub struct RobotSpec {
    /// Catalog key, e.g. `autoloader`, `midrange`, `enterprise`.
    pub id: &'static str,
    /// Human name.
    pub name: &'static str,
    /// One MOVE MEDIUM between a slot and a drive (the drive's load/unload not included).
    pub move_time: Duration,
    /// Typical number of storage slots in this class.
    pub slots: u32,
}

static ROBOTS: [RobotSpec; 3] = [
    RobotSpec {
        id: "autoloader",
        name: "1U/2U autoloader, one drive (8-16 slots)",
        move_time: Duration::from_secs(6),
        slots: 8,
    },
    RobotSpec {
        id: "midrange",
        name: "Midrange library (a few drives, 50-500 slots)",
        move_time: Duration::from_secs(8),
        slots: 300,
    },
    RobotSpec {
        id: "enterprise",
        name: "Enterprise library (SL8500 class, thousands of slots)",
        move_time: Duration::from_millis(12_500),
        slots: 3000,
    },
];

/// The robot catalog.
pub fn robots() -> &'static [RobotSpec] {
    &ROBOTS
}

/// The robot with this catalog id.
pub fn robot(id: &str) -> Option<&'static RobotSpec> {
    ROBOTS.iter().find(|r| r.id.eq_ignore_ascii_case(id))
}
