//! Mode pages (SSC-4 §8.3 and SPC-4 §7.5), the block descriptor and MODE SELECT, and the
//! log pages (SSC-4 §8.2, SPC-4 §7.3, and the IBM/HPE LTO vendor pages 31h and 32h).

use reel_media::{Cartridge, MAX_RECORD_LEN, PartitionStore};
use reel_scsi::{
    Asc, BlockDescriptor, LogPageControl, LogParameter, ModePage, ModePageControl,
    ModeSelectParams, Sense,
};

use crate::drive::TapeDrive;
use crate::format::PartitionSettings;

/// The log pages the drive provides (page 00h is the core's).
pub(crate) const LOG_PAGES: [(u8, u8); 8] = [
    (0x0C, 0),
    (0x11, 0),
    (0x12, 0),
    (0x17, 0),
    (0x1B, 0),
    (0x2E, 0),
    (0x31, 0),
    (0x32, 0),
];

/// Megabytes as SSC-4 log pages count them (10^6 bytes).
const MB: u64 = 1_000_000;

/// Data compression page (0Fh) length, and its algorithm: 1, as LTO drives report.
const COMPRESSION_ALGORITHM: u32 = 1;

fn invalid_list() -> Sense {
    Sense::illegal_request(Asc::INVALID_FIELD_IN_PARAMETER_LIST)
}

impl<S: PartitionStore + Send> TapeDrive<S> {
    /// The mode block descriptor (SSC-4 §8.3.3 general block descriptor): the density code
    /// of the loaded cartridge (0 when empty) and the block length (0: variable).
    pub(crate) fn descriptor(&self, pc: ModePageControl) -> BlockDescriptor {
        match pc {
            ModePageControl::Changeable => BlockDescriptor {
                density: 0xFF,
                blocks: 0,
                block_length: 0xFF_FFFF,
            },
            ModePageControl::Default => BlockDescriptor {
                density: 0,
                blocks: 0,
                block_length: 0,
            },
            _ => BlockDescriptor {
                density: self
                    .medium
                    .as_ref()
                    .map_or(0, |c| c.media_type().density_code()),
                blocks: 0,
                block_length: self.block_length,
            },
        }
    }

    /// Every mode page with current, changeable and default values.
    pub(crate) fn pages(&self) -> Vec<ModePage> {
        // Page 00h (vendor specific, no page format; SPC-4 §7.5.7), empty: the Linux st
        // driver's MODE SENSE(6) for page 00h wants only the header and block descriptor.
        let mut pages = vec![ModePage::fixed(0x00, 0, Vec::new())];

        // Control data protection (SSC-4, subpage F0h of the control page): logical block
        // protection is not supported, nothing is changeable.
        pages.push(ModePage::fixed(0x0A, 0xF0, vec![0; 28]));

        // Data compression (SSC-4 §8.3.2): DCE changeable, DCC = 1, DDE = 1.
        let compression = |dce: bool| {
            let mut v = vec![0u8; 14];
            v[0] = u8::from(dce) << 7 | 0x40;
            v[1] = 0x80;
            v[2..6].copy_from_slice(&COMPRESSION_ALGORITHM.to_be_bytes());
            v[6..10].copy_from_slice(&COMPRESSION_ALGORITHM.to_be_bytes());
            v
        };
        let mut changeable = vec![0u8; 14];
        changeable[0] = 0x80;
        pages.push(ModePage {
            page: 0x0F,
            subpage: 0,
            current: compression(self.compression),
            changeable,
            default: compression(true),
            min_select_len: None,
        });

        // Device configuration (SSC-4 §8.3.3): ACTIVE PARTITION, LOIS = 1, EEG = 1, SEW = 1,
        // SELECT DATA COMPRESSION ALGORITHM changeable.
        let active = self
            .medium
            .as_ref()
            .and_then(|c| c.position().ok())
            .map_or(0, |p| p.partition);
        let configuration = |partition: u8, compress: bool| {
            let mut v = vec![0u8; 14];
            v[1] = partition;
            v[6] = 0x40;
            v[8] = 0x18;
            v[12] = u8::from(compress);
            v
        };
        let mut changeable = vec![0u8; 14];
        changeable[12] = 0xFF;
        pages.push(ModePage {
            page: 0x10,
            subpage: 0,
            current: configuration(active, self.compression),
            changeable,
            default: configuration(0, true),
            min_select_len: None,
        });

        // Device configuration extension (SSC-4, subpage 01h): PROGRAMMABLE EARLY WARNING
        // SIZE (bytes 6–7, MB; LTFS sets it to half its index partition) changeable; short
        // erase writes EOD.
        let extension = |pews: u16| {
            let mut v = vec![0u8; 28];
            v[2..4].copy_from_slice(&pews.to_be_bytes());
            v
        };
        let mut changeable = vec![0u8; 28];
        changeable[2..4].copy_from_slice(&[0xFF, 0xFF]);
        pages.push(ModePage {
            page: 0x10,
            subpage: 0x01,
            current: extension(self.pews_mb),
            changeable,
            default: extension(0),
            min_select_len: None,
        });

        // Medium partition (SSC-4 §8.3.4).
        let descriptors = self.partition_descriptors();
        let max = self.max_additional_partitions();
        let current = self.partition_settings().encode(max);
        let mut changeable = vec![0u8; current.len()];
        changeable[1] = 0xFF;
        changeable[2] = 0xF8;
        changeable[4] = 0x0F;
        for b in changeable.iter_mut().skip(6) {
            *b = 0xFF;
        }
        let default = PartitionSettings::of_layout(
            &[self.medium.as_ref().map_or(0, |c| c.info().capacity())],
            descriptors,
        )
        .encode(max);
        pages.push(ModePage {
            page: 0x11,
            subpage: 0,
            current,
            changeable,
            default,
            // The six fixed parameter bytes; partition size descriptors as far as needed.
            min_select_len: Some(6),
        });

        // Informational exceptions control (SPC-4 §7.5; TapeAlert): DEXCPT, TEST, MRIE.
        let exceptions = |dexcpt: bool, test: bool, mrie: u8| {
            let mut v = vec![0u8; 10];
            v[0] = u8::from(dexcpt) << 3 | u8::from(test) << 2;
            v[1] = mrie & 0x0F;
            v
        };
        let mut changeable = vec![0u8; 10];
        changeable[0] = 0x0C;
        changeable[1] = 0x0F;
        pages.push(ModePage {
            page: 0x1C,
            subpage: 0,
            current: exceptions(self.dexcpt, self.ie_test, self.mrie),
            changeable,
            default: exceptions(false, false, 3),
            min_select_len: None,
        });

        // IBM LTO vendor page 25h (read/write control), the fields LTFS reads: encryption state
        // (byte 20 bits 1–0: 01b on), the medium supports encryption (byte 24 bit 0: every
        // LTO-4 and later cartridge), the encryption method (byte 27: 50h, application
        // managed: SECURITY PROTOCOL OUT). Other fields 0; nothing changeable.
        if self.model.family() == crate::model::Family::Ibm {
            let mut control = vec![0u8; 30];
            control[18] = u8::from(self.encryption.enabled());
            control[22] = u8::from(self.medium.is_some());
            control[25] = 0x50;
            pages.push(ModePage::fixed(0x25, 0, control));
        }

        // Medium configuration (SSC-4 §8.3): WORMM for WORM cartridges; no overwrite of
        // labels or filemarks is allowed on WORM (restrictions 00h).
        let mut medium = vec![0u8; 30];
        medium[0] = u8::from(self.medium.as_ref().is_some_and(Cartridge::is_worm));
        pages.push(ModePage::fixed(0x1D, 0, medium));
        pages
    }

    /// MODE SELECT: block descriptor (density of the cartridge, 0 or 7Fh; block length 0 for
    /// variable or 1..=8 MiB), BUFFERED MODE 0 or 1, and the pages' changeable fields. Every
    /// value is checked before any is applied.
    pub(crate) fn select(&mut self, params: &ModeSelectParams) -> Result<(), Sense> {
        if params.block_descriptors.len() > 1 {
            return Err(invalid_list());
        }
        let mut block_length = self.block_length;
        if let Some(d) = params.block_descriptors.first() {
            let density_ok = match &self.medium {
                _ if matches!(d.density, 0x00 | 0x7F) => true,
                Some(c) => d.density == c.media_type().density_code(),
                None => self
                    .model
                    .densities()
                    .iter()
                    .any(|(x, _)| x.code == d.density),
            };
            if !density_ok || d.block_length > MAX_RECORD_LEN {
                return Err(invalid_list());
            }
            block_length = d.block_length;
        }
        let buffered = (params.device_specific >> 4) & 0x07;
        if buffered > 1 {
            return Err(invalid_list());
        }
        let mut compression = self.compression;
        let mut pews_mb = self.pews_mb;
        let mut exceptions = (self.dexcpt, self.ie_test, self.mrie);
        let mut partitions = None;
        for (page, subpage, values) in &params.pages {
            let at = |i: usize| values.get(i).copied().unwrap_or(0);
            match (page, subpage) {
                (0x0F, 0) => compression = at(0) & 0x80 != 0,
                (0x10, 0) => compression = at(12) != 0,
                (0x10, 1) => pews_mb = u16::from_be_bytes([at(2), at(3)]),
                (0x11, 0) => partitions = Some(values.clone()),
                (0x1C, 0) => {
                    exceptions = (at(0) & 0x08 != 0, at(0) & 0x04 != 0, at(1) & 0x0F);
                    // SPC-4: MRIE values above 6h are reserved.
                    if exceptions.2 > 6 {
                        return Err(invalid_list());
                    }
                }
                _ => {}
            }
        }
        if let Some(values) = partitions {
            self.select_partitions(&values)?;
        }
        self.block_length = block_length;
        self.buffered_mode = buffered;
        self.compression = compression;
        if pews_mb != self.pews_mb {
            self.pews_mb = pews_mb;
            self.pew_reported = false;
        }
        (self.dexcpt, self.ie_test, self.mrie) = exceptions;
        Ok(())
    }

    /// The parameters of a log page. Threshold and default values are reported as zeros.
    pub(crate) fn log_parameters(
        &mut self,
        page: u8,
        _subpage: u8,
        pc: LogPageControl,
    ) -> Option<Vec<LogParameter>> {
        let current = pc == LogPageControl::CumulativeCurrent
            || pc == LogPageControl::ThresholdCurrent && matches!(page, 0x11 | 0x12 | 0x2E | 0x31);
        let mut params = match page {
            0x0C => self.sequential_access_page(),
            0x11 => self.device_status_page(),
            0x12 => vec![LogParameter::counter(
                0,
                flags_msb_first(self.tape_alerts),
                8,
            )],
            0x17 => self.volume_statistics_page(),
            0x1B | 0x32 => self.compression_page(),
            0x2E => {
                let flags = self.tape_alerts;
                if current {
                    // SSC-4 TapeAlert: reading the flags clears them.
                    self.tape_alerts = 0;
                }
                (1..=64u16)
                    .map(|flag| LogParameter::counter(flag, (flags >> (flag - 1)) & 1, 1))
                    .collect()
            }
            0x31 => self.capacity_page(),
            _ => return None,
        };
        if !current {
            for p in &mut params {
                p.value.iter_mut().for_each(|b| *b = 0);
            }
        }
        Some(params)
    }

    /// Sequential-access device log page (SSC-4 §8.2): byte counts and native capacities.
    fn sequential_access_page(&self) -> Vec<LogParameter> {
        let (used, ew) = self
            .medium
            .as_ref()
            .and_then(|c| {
                let p = c.position().ok()?.partition;
                Some((c.used_bytes(p).ok()?, c.early_warning_threshold(p).ok()?))
            })
            .unwrap_or((0, 0));
        vec![
            LogParameter::counter(0x0000, self.log.bytes_from_host, 8),
            LogParameter::counter(0x0001, self.log.bytes_from_host, 8),
            LogParameter::counter(0x0002, self.log.bytes_to_host, 8),
            LogParameter::counter(0x0003, self.log.bytes_to_host, 8),
            LogParameter::counter(0x0004, used / MB, 4),
            LogParameter::counter(0x0005, ew / MB, 4),
            LogParameter::counter(0x0100, 0, 1),
        ]
    }

    /// DT device status log page (SSC-4 §8.2): the very high frequency data parameter.
    fn device_status_page(&self) -> Vec<LogParameter> {
        let present = self.medium.is_some();
        let threaded = present && self.threaded;
        let prevented = self.removal_prevented();
        // Byte 0: PAMR, HIU, MACC, CMPR, WRTP, CRQST, CRQRD, DINIT.
        let b0 = u8::from(prevented) << 7
            | u8::from(present && !threaded) << 6
            | u8::from(present) << 5
            | u8::from(self.compression) << 4
            | u8::from(self.write_protected()) << 3
            | 0x01;
        // Byte 1: INXTN, reserved, RAA, MPRSNT, reserved, MSTD, MTHRD, MOUNTED.
        let b1 = u8::from(!prevented) << 5
            | u8::from(present) << 4
            | u8::from(present) << 2
            | u8::from(threaded) << 1
            | u8::from(threaded);
        // Byte 2: DT DEVICE ACTIVITY; commands run to completion, so there is none now.
        vec![LogParameter {
            code: 0x0000,
            control: 0x03,
            value: vec![b0, b1, 0, 0],
        }]
    }

    /// Volume statistics log page (SSC-4 §8.2), the parameters LTO drives report.
    fn volume_statistics_page(&self) -> Vec<LogParameter> {
        let Some(c) = &self.medium else {
            return vec![LogParameter::counter(0x0000, 0, 1)];
        };
        let counters = c.counters();
        let capacity: u64 = c.info().partition_capacities().iter().sum();
        let used: u64 = c.partitions().iter().map(PartitionStore::data_bytes).sum();
        let mut serial = c.barcode().as_str().as_bytes().to_vec();
        serial.resize(32, b' ');
        vec![
            LogParameter::counter(0x0000, 1, 1), // page valid
            LogParameter::counter(0x0001, c.load_count(), 4),
            LogParameter::counter(0x0002, counters.records_written, 8),
            LogParameter::counter(0x0003, 0, 4),
            LogParameter::counter(0x0004, 0, 4),
            LogParameter::counter(0x0005, 0, 4),
            LogParameter::counter(0x0006, 0, 4),
            LogParameter::counter(0x0007, counters.records_read, 8),
            LogParameter::counter(0x0008, 0, 4),
            LogParameter::counter(0x0009, 0, 4),
            LogParameter::counter(0x000C, 0, 4),
            LogParameter::counter(0x000D, 0, 4),
            LogParameter::counter(0x000E, counters.bytes_written_load / MB, 8),
            LogParameter::counter(0x000F, counters.bytes_read_load / MB, 8),
            LogParameter::counter(0x0010, counters.bytes_written_total / MB, 8),
            LogParameter::counter(0x0011, counters.bytes_read_total / MB, 8),
            LogParameter::counter(0x0012, 100, 2),
            LogParameter::counter(0x0013, 100, 2),
            LogParameter::counter(0x0016, capacity / MB, 8),
            LogParameter::counter(0x0017, used / MB, 8),
            LogParameter {
                code: 0x0040,
                control: 0x01, // ASCII format
                value: serial,
            },
            LogParameter::counter(0x0080, u64::from(self.write_protected()), 1),
            LogParameter::counter(0x0081, u64::from(c.is_worm()), 1),
            // Passes of the beginning and the middle of the medium over the head: a virtual
            // cartridge makes none (LTFS reads both for its cartridge health).
            LogParameter::counter(0x0101, 0, 4),
            LogParameter::counter(0x0102, 0, 4),
            // Per-partition capacities in MB (IBM LTO SCSI reference, page 17h: LTFS reads
            // 0202h and 0204h on LTO-6 and later instead of page 31h).
            partition_records(0x0202, c, Cartridge::partition_capacity),
            partition_records(0x0203, c, Cartridge::used_bytes),
            partition_records(0x0204, c, Cartridge::remaining_capacity),
        ]
    }

    /// Data compression log page (SSC-4 §8.2, page 1Bh; the same layout as the LTO vendor
    /// page 32h). Ratios are 100 (×100): tape data is not compressed by the drive.
    fn compression_page(&self) -> Vec<LogParameter> {
        let (to_host, from_host) = (self.log.bytes_to_host, self.log.bytes_from_host);
        vec![
            LogParameter::counter(0x0000, 100, 2),
            LogParameter::counter(0x0001, 100, 2),
            LogParameter::counter(0x0002, to_host / MB, 4),
            LogParameter::counter(0x0003, to_host % MB, 4),
            LogParameter::counter(0x0004, to_host / MB, 4),
            LogParameter::counter(0x0005, to_host % MB, 4),
            LogParameter::counter(0x0006, from_host / MB, 4),
            LogParameter::counter(0x0007, from_host % MB, 4),
            LogParameter::counter(0x0008, from_host / MB, 4),
            LogParameter::counter(0x0009, from_host % MB, 4),
        ]
    }

    /// Tape capacity log page (31h, IBM and HPE LTO): remaining and maximum capacity of
    /// partitions 0 and 1 in megabytes (LTFS reads it).
    fn capacity_page(&self) -> Vec<LogParameter> {
        let of = |p: u8, remaining: bool| {
            self.medium
                .as_ref()
                .and_then(|c| {
                    if remaining {
                        c.remaining_capacity(p).ok()
                    } else {
                        c.partition_capacity(p).ok()
                    }
                })
                .unwrap_or(0)
                / MB
        };
        vec![
            LogParameter::counter(0x0001, of(0, true), 4),
            LogParameter::counter(0x0002, of(1, true), 4),
            LogParameter::counter(0x0003, of(0, false), 4),
            LogParameter::counter(0x0004, of(1, false), 4),
        ]
    }
}

/// A volume statistics parameter listing one value per partition: records of length byte (7),
/// reserved, PARTITION NUMBER (2 bytes) and the value in MB (4 bytes, saturating), in a binary
/// list parameter (format and linking 11b).
fn partition_records<S: PartitionStore>(
    code: u16,
    cartridge: &Cartridge<S>,
    bytes_of: impl Fn(&Cartridge<S>, u8) -> Result<u64, reel_media::MediaError<S::Error>>,
) -> LogParameter {
    let mut value = Vec::new();
    for p in 0..cartridge.partition_count() as u8 {
        let mb = bytes_of(cartridge, p).unwrap_or(0) / MB;
        value.extend_from_slice(&[7, 0]);
        value.extend_from_slice(&u16::from(p).to_be_bytes());
        value.extend_from_slice(&u32::try_from(mb).unwrap_or(u32::MAX).to_be_bytes());
    }
    LogParameter {
        code,
        control: 0x03,
        value,
    }
}

/// TapeAlert flags (flag n at bit n-1) as the TapeAlert response page sends them: flag 1 in
/// the most significant bit.
fn flags_msb_first(flags: u64) -> u64 {
    flags.reverse_bits()
}
