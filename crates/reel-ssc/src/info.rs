//! What the drive says about itself: vendor and SSC VPD pages, READ BLOCK LIMITS, REPORT
//! DENSITY SUPPORT, READ BUFFER, SEND/RECEIVE DIAGNOSTIC and the REPORT SUPPORTED OPERATION
//! CODES descriptors.

use reel_media::{MAX_RECORD_LEN, MediaType, PartitionStore};
use reel_scsi::{Bytes, Cdb, OpcodeDescriptor, Response, Sense};

use crate::drive::{Reply, TapeDrive};
use crate::model::{DENSITIES, DENSITY_M8, Density, Family, density_of, medium_type_code};

/// VPD pages added to the core's 00h, 80h, 83h and 86h: B0h sequential-access device
/// capabilities, B1h manufacturer-assigned serial number (SSC-4), C0h firmware designation
/// and C1h drive serial numbers (the vendor pages IBM and HPE LTO drives provide).
pub(crate) const VPD_PAGES: [u8; 4] = [0xB0, 0xB1, 0xC0, 0xC1];

const ASSIGNING_ORGANIZATION: &str = "LTO-CVE";
/// Media width in tenths of millimetres (half-inch tape).
const MEDIA_WIDTH: u16 = 127;

fn ascii(text: &str, width: usize) -> Vec<u8> {
    let mut v: Vec<u8> = text
        .bytes()
        .map(|b| {
            if b.is_ascii_graphic() || b == b' ' {
                b
            } else {
                b'?'
            }
        })
        .take(width)
        .collect();
    v.resize(width, b' ');
    v
}

fn truncated(mut data: Vec<u8>, allocation: usize) -> Reply {
    data.truncate(allocation);
    Ok(Response::good(Bytes::from(data)))
}

impl<S: PartitionStore + Send> TapeDrive<S> {
    pub(crate) fn vpd(&self, page: u8) -> Option<Vec<u8>> {
        let serial = self.identity.serial.as_str();
        Some(match page {
            // Sequential-access device capabilities (SSC-4): WORM supported.
            0xB0 => vec![0x01, 0],
            // Manufacturer-assigned serial number (SSC-4).
            0xB1 => serial.as_bytes().to_vec(),
            // Firmware designation: revision and a build date.
            0xC0 => {
                let mut v = ascii(self.model.revision(), 4);
                v.extend_from_slice(&ascii("", 4));
                v.extend_from_slice(b"20260101");
                v
            }
            // Drive serial numbers: manufacturing and reported serial number, 12 ASCII each.
            0xC1 => {
                let mut v = ascii(serial, 12);
                v.extend_from_slice(&ascii(serial, 12));
                v
            }
            _ => return None,
        })
    }

    /// READ BLOCK LIMITS (SSC-4): granularity 0, maximum 8 MiB, minimum 1; with MLOC the
    /// maximum logical object identifier (the short READ POSITION form's 32 bits).
    pub(crate) fn read_block_limits(&self, cdb: &Cdb<'_>) -> Reply {
        if cdb.bit(1, 0) {
            let mut data = vec![0u8; 20];
            data[12..20].copy_from_slice(&u64::from(u32::MAX).to_be_bytes());
            return Ok(Response::good(data));
        }
        let max = MAX_RECORD_LEN.to_be_bytes();
        Ok(Response::good(vec![0, max[1], max[2], max[3], 0, 1]))
    }

    /// REPORT DENSITY SUPPORT (SSC-4): density descriptors (MEDIUM TYPE = 0) or medium type
    /// descriptors (MEDIUM TYPE = 1), for everything the drive reads (MEDIA = 0) or for the
    /// loaded cartridge (MEDIA = 1).
    pub(crate) fn report_density_support(&mut self, cdb: &Cdb<'_>) -> Reply {
        let media_only = cdb.bit(1, 0);
        let medium_types = cdb.bit(1, 1);
        let allocation = usize::from(cdb.be16(7));
        let model = self.model;
        let loaded = if media_only {
            Some(self.present_cartridge()?.media_type())
        } else {
            None
        };
        let native = DENSITIES
            .iter()
            .find(|d| {
                d.media
                    .is_some_and(|m| m.generation() == model.generation())
            })
            .map(|d| d.code);
        let mut body = Vec::new();
        if medium_types {
            let media: Vec<MediaType> = match loaded {
                Some(m) => vec![m],
                None => MediaType::ALL
                    .into_iter()
                    .filter(|&m| model.can_read(m))
                    .collect(),
            };
            for m in media {
                let mut codes = vec![m.density_code()];
                if m.generation() == 7 && model.generation() == 8 && !m.is_worm() {
                    codes.push(DENSITY_M8);
                }
                medium_type_descriptor(m, &codes, &mut body);
            }
        } else {
            let list: Vec<(Density, bool)> = match loaded {
                Some(m) => density_of(m)
                    .map(|d| vec![(*d, model.can_write(m))])
                    .unwrap_or_default(),
                None => model.densities(),
            };
            for (d, writable) in list {
                let default = Some(d.code) == native || loaded.is_some();
                density_descriptor(&d, writable, default, &mut body);
            }
        }
        let mut data = u16::try_from(body.len() + 2)
            .unwrap_or(u16::MAX)
            .to_be_bytes()
            .to_vec();
        data.extend_from_slice(&[0, 0]);
        data.extend_from_slice(&body);
        truncated(data, allocation)
    }

    /// READ BUFFER (SPC-4 §6.18): buffer 0 is empty (descriptor: capacity 0), buffer 1 holds
    /// the drive dump (IBM LTO: LTFS reads it after forcing one with SEND DIAGNOSTIC, and on
    /// errors), a short text of the drive's state; the echo buffer is empty (WRITE BUFFER is
    /// not implemented). Other modes and buffers: INVALID FIELD IN CDB.
    pub(crate) fn read_buffer(&mut self, cdb: &Cdb<'_>) -> Reply {
        let mode = cdb.byte(1) & 0x1F;
        let id = cdb.byte(2);
        let allocation = usize::try_from(cdb.be(6, 3)).unwrap_or(usize::MAX);
        let offset = usize::try_from(cdb.be(3, 3)).unwrap_or(usize::MAX);
        let data = match (mode, id) {
            (0x02 | 0x03, 2..) => return Err(Sense::invalid_field_in_cdb(2, Some(7))),
            (0x02 | 0x0A, 0) | (0x0A, _) => Vec::new(),
            (0x02, 1) => {
                let dump = self.drive_dump();
                dump.get(offset.min(dump.len())..)
                    .unwrap_or_default()
                    .to_vec()
            }
            // Descriptor: OFFSET BOUNDARY 0, BUFFER CAPACITY (3 bytes).
            (0x03, 1) => {
                let capacity = self.drive_dump().len() as u32;
                let mut d = capacity.to_be_bytes();
                d[0] = 0;
                d.to_vec()
            }
            (0x03 | 0x0B, _) => vec![0; 4],
            _ => return Err(Sense::invalid_field_in_cdb(1, Some(4))),
        };
        truncated(data, allocation)
    }

    /// The drive dump READ BUFFER returns from buffer 1: the last one SEND DIAGNOSTIC forced,
    /// or the state now.
    fn drive_dump(&self) -> Vec<u8> {
        self.forced_dump.clone().unwrap_or_else(|| self.dump_now())
    }

    fn dump_now(&self) -> Vec<u8> {
        let mut out = format!(
            "reel drive dump\nmodel {} ({} {} {})\nserial {}\nstate {:?}\n",
            self.model.name(),
            self.model.vendor(),
            self.model.product(),
            self.model.revision(),
            self.identity.serial,
            self.state(),
        );
        if let Some(c) = &self.medium {
            out.push_str(&format!(
                "cartridge {} {:?}\n",
                c.barcode(),
                c.position().ok()
            ));
        }
        out.into_bytes()
    }

    /// SEND DIAGNOSTIC (SPC-4 §6.42): the default self-test and the short and extended
    /// self-tests pass at once; a parameter list may only ask for the supported diagnostic
    /// pages page (00h).
    pub(crate) fn send_diagnostic(&mut self, cdb: &Cdb<'_>, data_out: &Bytes) -> Reply {
        let code = cdb.byte(1) >> 5;
        let self_test = cdb.bit(1, 2);
        let page_format = cdb.bit(1, 4);
        let length = usize::from(cdb.be16(3));
        if matches!(code, 3 | 7) || (self_test && code != 0) {
            return Err(Sense::invalid_field_in_cdb(1, Some(7)));
        }
        self.diagnostic_page_list = false;
        if self_test || code != 0 || length == 0 {
            return Ok(Response::good_empty());
        }
        let list = data_out
            .get(..length)
            .ok_or_else(Sense::parameter_list_length_error)?;
        if page_format && list.first() == Some(&0x00) {
            self.diagnostic_page_list = true;
            return Ok(Response::good_empty());
        }
        // IBM LTO diagnostic page 80h with DIAG ID 0160h: force a drive dump (LTFS sends it,
        // then reads the dump with READ BUFFER, buffer 1).
        if page_format
            && self.model.family() == Family::Ibm
            && list.len() >= 6
            && list[0] == 0x80
            && u16::from_be_bytes([list[4], list[5]]) == 0x0160
        {
            self.forced_dump = Some(self.dump_now());
            return Ok(Response::good_empty());
        }
        Err(Sense::invalid_field_in_parameter_list(0, Some(7)))
    }

    /// RECEIVE DIAGNOSTIC RESULTS (SPC-4 §6.27): page 00h (supported pages: only 00h).
    pub(crate) fn receive_diagnostic(&mut self, cdb: &Cdb<'_>) -> Reply {
        let allocation = usize::from(cdb.be16(3));
        let page_list = if cdb.bit(1, 0) {
            if cdb.byte(2) != 0 {
                return Err(Sense::invalid_field_in_cdb(2, Some(7)));
            }
            true
        } else {
            self.diagnostic_page_list
        };
        let data = if page_list {
            vec![0x00, 0, 0, 1, 0x00]
        } else {
            vec![0x00, 0, 0, 0]
        };
        truncated(data, allocation)
    }
}

/// A density support data block descriptor (SSC-4 REPORT DENSITY SUPPORT), 52 bytes.
fn density_descriptor(d: &Density, writable: bool, default: bool, out: &mut Vec<u8>) {
    out.push(d.code); // PRIMARY DENSITY CODE
    out.push(d.code); // SECONDARY DENSITY CODE
    // WRTOK, DUP = 0, DEFLT; DLV = 0 (bytes 3-4 reserved).
    out.push(u8::from(writable) << 7 | u8::from(default) << 5);
    out.extend_from_slice(&[0, 0]);
    out.extend_from_slice(&d.bits_per_mm.to_be_bytes()[1..]);
    out.extend_from_slice(&MEDIA_WIDTH.to_be_bytes());
    out.extend_from_slice(&d.tracks.to_be_bytes());
    out.extend_from_slice(&d.capacity_mb.to_be_bytes());
    out.extend_from_slice(&ascii(ASSIGNING_ORGANIZATION, 8));
    out.extend_from_slice(&ascii(d.name, 8));
    out.extend_from_slice(&ascii(d.description, 20));
}

/// A medium type descriptor (SSC-4 REPORT DENSITY SUPPORT, MEDIUM TYPE = 1), 56 bytes.
fn medium_type_descriptor(media: MediaType, codes: &[u8], out: &mut Vec<u8>) {
    let start = out.len();
    out.push(medium_type_code(media));
    out.push(0);
    out.extend_from_slice(&52u16.to_be_bytes()); // DESCRIPTOR LENGTH: the bytes after it
    let mut primary = codes.to_vec();
    primary.truncate(9);
    out.push(primary.len() as u8);
    primary.resize(9, 0);
    out.extend_from_slice(&primary);
    out.extend_from_slice(&MEDIA_WIDTH.to_be_bytes());
    let length = density_of(media).map_or(0, |d| d.length_m);
    out.extend_from_slice(&length.to_be_bytes());
    out.extend_from_slice(&[0, 0]);
    out.extend_from_slice(&ascii(ASSIGNING_ORGANIZATION, 8));
    let worm = if media.is_worm() { "W" } else { "" };
    out.extend_from_slice(&ascii(&format!("LTO-{}{worm}", media.generation()), 8));
    let description = format!("Ultrium {} {}", media.generation(), media.barcode_suffix());
    out.extend_from_slice(&ascii(&description, 20));
    debug_assert_eq!(out.len() - start, 56);
}

/// The drive's commands for REPORT SUPPORTED OPERATION CODES: CDB usage masks and timeouts
/// (recommended timeouts in seconds, generous for full-length LTO-9 operations).
pub(crate) fn opcode_descriptors() -> Vec<OpcodeDescriptor> {
    let d =
        |usage: &[u8], recommended: u32| OpcodeDescriptor::new(usage).with_timeouts(0, recommended);
    let mut all = vec![
        d(&[0x01, 0x01, 0, 0, 0, 0], 600),           // REWIND
        d(&[0x04, 0x03, 0x0F, 0xFF, 0xFF, 0], 3600), // FORMAT MEDIUM
        d(&[0x05, 0x01, 0, 0, 0, 0], 60),            // READ BLOCK LIMITS
        d(&[0x08, 0x03, 0xFF, 0xFF, 0xFF, 0], 1200), // READ(6)
        d(&[0x0A, 0x01, 0xFF, 0xFF, 0xFF, 0], 1200), // WRITE(6)
        d(&[0x0B, 0x01, 0, 0xFF, 0xFF, 0], 3600),    // SET CAPACITY
        d(&[0x10, 0x03, 0xFF, 0xFF, 0xFF, 0], 1200), // WRITE FILEMARKS(6)
        d(&[0x11, 0x0F, 0xFF, 0xFF, 0xFF, 0], 2400), // SPACE(6)
        d(&[0x19, 0x03, 0, 0, 0, 0], 86400),         // ERASE(6)
        d(&[0x1B, 0x01, 0, 0, 0x0F, 0], 900),        // LOAD UNLOAD
        d(&[0x1C, 0x01, 0xFF, 0xFF, 0xFF, 0], 60),   // RECEIVE DIAGNOSTIC RESULTS
        d(&[0x1D, 0xF7, 0, 0xFF, 0xFF, 0], 600),     // SEND DIAGNOSTIC
        d(&[0x1E, 0, 0, 0, 0x03, 0], 60),            // PREVENT ALLOW MEDIUM REMOVAL
        d(&[0x2B, 0x07, 0, 0xFF, 0xFF, 0xFF, 0xFF, 0, 0xFF, 0], 2400), // LOCATE(10)
        d(&[0x34, 0x1F, 0, 0, 0, 0, 0, 0xFF, 0xFF, 0], 60), // READ POSITION
        d(
            &[0x3C, 0x1F, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0],
            60,
        ), // READ BUFFER
        d(&[0x44, 0x03, 0, 0, 0, 0, 0, 0xFF, 0xFF, 0], 60), // REPORT DENSITY SUPPORT
        // SECURITY PROTOCOL IN and OUT (tape data encryption, encryption.rs)
        d(
            &[
                0xA2, 0xFF, 0xFF, 0xFF, 0x80, 0, 0xFF, 0xFF, 0xFF, 0xFF, 0, 0,
            ],
            60,
        ),
        d(
            &[
                0xB5, 0xFF, 0xFF, 0xFF, 0x80, 0, 0xFF, 0xFF, 0xFF, 0xFF, 0, 0,
            ],
            60,
        ),
        // ALLOW OVERWRITE
        d(
            &[
                0x82, 0, 0x0F, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0, 0, 0, 0,
            ],
            60,
        ),
        // WRITE ATTRIBUTE
        d(
            &[
                0x8D, 0x01, 0, 0, 0, 0xFF, 0, 0xFF, 0, 0, 0xFF, 0xFF, 0xFF, 0xFF, 0, 0,
            ],
            60,
        ),
        // SPACE(16)
        d(
            &[
                0x91, 0x0F, 0, 0, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0, 0,
            ],
            2400,
        ),
        // LOCATE(16)
        d(
            &[
                0x92, 0x3B, 0x01, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0, 0, 0, 0,
            ],
            2400,
        ),
    ];
    // READ ATTRIBUTE service actions.
    for action in [0x00u8, 0x01, 0x02, 0x03, 0x05] {
        all.push(
            OpcodeDescriptor::with_service_action(&[
                0x8C, action, 0, 0, 0, 0xFF, 0, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0x01, 0,
            ])
            .with_timeouts(0, 60),
        );
    }
    all
}
